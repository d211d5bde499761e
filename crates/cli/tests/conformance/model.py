#!/usr/bin/env python3
"""A scripted OpenAI-compatible model for the MCP conformance suite (standard library only).

It listens on 127.0.0.1 (a free port, printed on stdout as one line), answers /v1/chat/completions
with a server-sent-event stream, and plays one script: the first turn calls every tool offered
whose name starts with `mcp__` once (arguments made from the tool's schema: the `default` or
`examples` of each required property, else a small value of its type), and every later turn
answers "done". Each request is appended to the file named by $MODEL_LOG, when set.
"""
import http.server
import json
import os
import sys


def value_for(schema):
    if not isinstance(schema, dict):
        return "x"
    if "default" in schema:
        return schema["default"]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    return {
        "number": 2,
        "integer": 2,
        "boolean": True,
        "array": [],
        "object": {},
    }.get(kind, "x")


def arguments_for(parameters):
    parameters = parameters if isinstance(parameters, dict) else {}
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or []
    return {name: value_for(properties.get(name)) for name in required}


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def reply(body):
    messages = body.get("messages") or []
    answered = any(m.get("role") == "tool" for m in messages)
    tools = [t.get("function", {}) for t in body.get("tools") or []]
    calls = [t for t in tools if str(t.get("name", "")).startswith("mcp__")]
    if answered or not calls:
        return [chunk({"role": "assistant", "content": "done"}), chunk({}, "stop")]
    out = [chunk({"role": "assistant", "content": None})]
    for i, tool in enumerate(calls):
        out.append(chunk({"tool_calls": [{
            "index": i, "id": "call_%d" % i, "type": "function",
            "function": {"name": tool["name"],
                         "arguments": json.dumps(arguments_for(tool.get("parameters")))}}]}))
    out.append(chunk({}, "tool_calls"))
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        log = os.environ.get("MODEL_LOG")
        if log:
            with open(log, "a") as f:
                f.write(json.dumps(body) + "\n")
        data = "".join("data: %s\n\n" % json.dumps(c) for c in reply(body)) + "data: [DONE]\n\n"
        data = data.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
