//! `new acp` driven over stdio by a client written from the protocol (JSON-RPC 2.0, one message
//! a line), against the scripted model.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;
use std::fs;
#[cfg(unix)]
use std::os::unix::fs::symlink;
use std::path::{Component, Path};

const WAIT: Duration = Duration::from_secs(30);

/// A client: writes requests, reads every line `new acp` writes (each must be JSON).
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next: u64,
    /// Notifications seen, in order.
    seen: Vec<Value>,
}

impl Client {
    fn start(env: &Env, server: &Server, extra: &[&str]) -> Client {
        let mut cmd = env.command(&server.base_url);
        cmd.arg("acp").arg("--datadir").arg(env.data()).args(extra);
        Client::spawn(cmd, json!({}))
    }

    /// `new acp` started by `cmd` (its arguments given), for a client that offers `capabilities`.
    fn spawn(mut cmd: Command, capabilities: Value) -> Client {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carries only JSON: {line:?}: {e}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut client = Client {
            child,
            stdin,
            lines,
            next: 1,
            seen: Vec::new(),
        };
        let init = client.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        client
    }

    fn write(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(&line.to_string());
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.write(&line.to_string());
    }

    fn next_line(&mut self) -> Value {
        match self.lines.recv_timeout(WAIT) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => {
                panic!("no message in {WAIT:?}; seen {:?}", self.seen)
            }
            Err(RecvTimeoutError::Disconnected) => panic!("new acp ended; seen {:?}", self.seen),
        }
    }

    /// Reads one more message into `seen`.
    fn next_line_seen(&mut self) {
        let message = self.next_line();
        self.seen.push(message);
    }

    /// Waits for the answer to request `id`; the agent's requests are answered by `answer`
    /// (`{"rpcError": MESSAGE}` answers with that error).
    fn wait(&mut self, id: u64, answer: &mut dyn FnMut(&Value) -> Value) -> Value {
        loop {
            let message = self.next_line();
            if message.get("method").is_some() && message.get("id").is_some() {
                let result = answer(&message);
                let reply = match result["rpcError"].as_str() {
                    Some(error) => json!({"jsonrpc": "2.0", "id": message["id"],
                        "error": {"code": -32603, "message": error}}),
                    None => json!({"jsonrpc": "2.0", "id": message["id"], "result": result}),
                };
                self.seen.push(message);
                self.write(&reply.to_string());
            } else if message.get("method").is_some() {
                self.seen.push(message);
            } else if message["id"] == id {
                return message;
            } else {
                self.seen.push(message);
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.wait(id, &mut |request| panic!("unexpected request {request}"))
    }

    fn new_session(&mut self, cwd: &Path) -> String {
        let answer = self.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    }

    fn prompt(&mut self, session: &str, text: &str) -> Value {
        self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// The updates seen since `from`, of this kind.
    fn updates(&self, from: usize, kind: &str) -> Vec<Value> {
        self.seen[from..]
            .iter()
            .filter(|m| {
                m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
            })
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    /// The text of the agent's message chunks since `from`.
    fn said(&self, from: usize) -> String {
        self.updates(from, "agent_message_chunk")
            .iter()
            .map(|u| u["content"]["text"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Closes stdin and waits for the process to end.
    fn close(mut self) -> bool {
        self.stdin.take();
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        false
    }
}

#[test]
fn initialize_says_version_one_load_and_embedded_context() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    let init = client.call("initialize", json!({"protocolVersion": 1}));
    let caps = &init["result"]["agentCapabilities"];
    assert_eq!(caps["loadSession"], true, "{init}");
    assert_eq!(
        caps["promptCapabilities"]["embeddedContext"], true,
        "{init}"
    );
    assert!(caps["sessionCapabilities"]["list"].is_object(), "{init}");
    assert!(client.close(), "stdin closed ends new acp");
}

#[test]
fn session_new_checks_cwd_and_offers_modes_models_and_commands() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--permission-mode", "strict"]);
    let relative = client.call("session/new", json!({"cwd": "work", "mcpServers": []}));
    assert!(
        relative["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not an absolute path"),
        "{relative}"
    );
    let missing = client.call(
        "session/new",
        json!({"cwd": env.work().join("nope"), "mcpServers": []}),
    );
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a folder"),
        "{missing}"
    );
    let from = client.seen.len();
    let answer = client.call("session/new", json!({"cwd": env.work(), "mcpServers": []}));
    let result = &answer["result"];
    let options = result["configOptions"].as_array().unwrap();
    let mode = options.iter().find(|o| o["id"] == "mode").unwrap();
    assert_eq!(mode["category"], "mode");
    assert_eq!(
        mode["currentValue"], "strict",
        "the mode from the command line"
    );
    let values: Vec<&str> = mode["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["strict", "default", "permissive"]);
    let model = options.iter().find(|o| o["id"] == "model").unwrap();
    assert_eq!(model["category"], "model");
    assert!(
        options.iter().all(|o| o["id"] != "reasoning"),
        "an OpenAI-compatible server has no reasoning level here: {options:?}"
    );
    assert_eq!(result["modes"]["currentModeId"], "strict");
    // The commands follow the answer.
    let session = result["sessionId"].as_str().unwrap().to_string();
    client.call("session/list", json!({}));
    let commands = client.updates(from, "available_commands_update");
    let names: Vec<&str> = commands[0]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "tree", "retry", "branch", "branches", "merge", "btw", "undo", "compact", "context",
        "model", "skills",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    // Options change: the mode, the model.
    let set = client.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "permissive"}),
    );
    let mode = set["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .unwrap()
        .clone();
    assert_eq!(mode["currentValue"], "permissive", "{set}");
    let from = client.seen.len();
    let set = client.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "default"}),
    );
    assert!(set["result"].is_object(), "{set}");
    client.call("session/list", json!({}));
    assert_eq!(
        client.updates(from, "current_mode_update")[0]["currentModeId"],
        "default"
    );
    let bad = client.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(client.close());
}

#[test]
fn a_prompt_streams_and_the_session_is_the_conversation_that_resume_continues() {
    let server = Server::start(vec![text(&["Hel", "lo ", "there."]), text(&["Again."])]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    let from = client.seen.len();
    let answer = client.prompt(&session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let chunks = client.updates(from, "agent_message_chunk");
    assert_eq!(chunks.len(), 3, "streamed in pieces: {chunks:?}");
    assert_eq!(client.said(from), "Hello there.");
    assert!(client.close());
    // The session id is the conversation's: the terminal continues it.
    let (id, _) = env.only_conversation();
    assert_eq!(id, session);
    let run = env.run(&server.base_url, &["-r", &session, "-p", "and now?"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = env.only_conversation();
    let users: Vec<&Value> = lines.iter().filter(|l| l["role"] == "user").collect();
    assert_eq!(users.len(), 2, "one conversation, two messages: {lines:?}");
}

#[test]
fn a_write_asks_shows_its_diff_and_a_reject_writes_nothing() {
    let write = |content: &str| json!({"filepath": "a.txt", "content": content}).to_string();
    let server = Server::start(vec![
        tool_calls(&[("c1", "write_file", &write("new text\n"))]),
        text(&["Written."]),
        tool_calls(&[("c2", "write_file", &write("rejected\n"))]),
        text(&["Not written."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "old text\n").unwrap();
    let mut client = Client::start(&env, &server, &["--permission-mode", "strict"]);
    let session = client.new_session(&env.work());
    let from = client.seen.len();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write it"}]}),
    );
    let mut asked = Vec::new();
    let answer = client.wait(id, &mut |request| {
        asked.push(request.clone());
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}})
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "session/request_permission");
    let kinds: Vec<&str> = asked[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "c1");
    let call = &client.updates(from, "tool_call")[0];
    assert_eq!(call["toolCallId"], "c1");
    assert_eq!(call["kind"], "edit");
    assert_eq!(
        call["locations"][0]["path"],
        env.work().join("a.txt").to_string_lossy().as_ref()
    );
    let done = &client.updates(from, "tool_call_update")[0];
    assert_eq!(done["status"], "completed", "{done}");
    let diff = done["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "diff")
        .unwrap_or_else(|| panic!("a diff: {done}"));
    assert_eq!(diff["oldText"], "old text\n");
    assert_eq!(diff["newText"], "new text\n");
    assert_eq!(
        fs::read_to_string(env.work().join("a.txt")).unwrap(),
        "new text\n"
    );
    // Rejected: nothing written, the call failed, the model hears the refusal.
    let from = client.seen.len();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
    );
    let answer = client.wait(
        id,
        &mut |_| json!({"outcome": {"outcome": "selected", "optionId": "reject"}}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        fs::read_to_string(env.work().join("a.txt")).unwrap(),
        "new text\n"
    );
    let done = &client.updates(from, "tool_call_update")[0];
    assert_eq!(done["status"], "failed", "{done}");
    let refusal = last_result(&server.requests()[3]);
    assert!(
        refusal.to_lowercase().contains("denied") || refusal.to_lowercase().contains("refused"),
        "{refusal}"
    );
    assert!(client.close());
}

#[test]
fn cancel_stops_a_stream_and_the_prompt_answers_cancelled() {
    let mut chunks = match text(&["First words. ", "never"]) {
        Reply::Sse(c) => c,
        _ => unreachable!(),
    };
    let rest = chunks.split_off(2);
    let server = Server::start(vec![Reply::SseStall(chunks, Duration::from_secs(20), rest)]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}),
    );
    // The first words arrive; then a second prompt is refused; then the cancel.
    loop {
        let m = client.next_line();
        let first = m["params"]["update"]["sessionUpdate"] == "agent_message_chunk";
        client.seen.push(m);
        if first {
            break;
        }
    }
    let second = client.prompt(&session, "me too");
    assert_eq!(second["error"]["code"], -32600, "{second}");
    let started = Instant::now();
    client.notify("session/cancel", json!({"sessionId": session}));
    let answer = client.wait(id, &mut |r| panic!("{r}"));
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped at once"
    );
    assert!(client.close());
    let (_, lines) = env.only_conversation();
    assert!(
        lines.iter().any(|l| l["role"] == "assistant"
            && l["content"].as_str().unwrap_or("").contains("First words")),
        "what arrived is kept: {lines:?}"
    );
}

#[test]
fn load_replays_the_branch_in_a_new_process_and_list_finds_it() {
    let server = Server::start(vec![
        tool_calls(&[("c1", "list_files", "{}")]),
        text(&["One file."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("x.txt"), "x").unwrap();
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    client.prompt(&session, "what is here?");
    assert!(client.close());
    let mut client = Client::start(&env, &server, &[]);
    let listed = client.call("session/list", json!({"cwd": env.work()}));
    let sessions = listed["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], session.as_str());
    assert_eq!(sessions[0]["title"], "what is here?");
    assert!(sessions[0]["updatedAt"].is_string(), "{listed}");
    let from = client.seen.len();
    let loaded = client.call(
        "session/load",
        json!({"sessionId": session, "cwd": env.work(), "mcpServers": []}),
    );
    assert!(loaded["result"].is_object(), "{loaded}");
    let kinds: Vec<String> = client.seen[from..]
        .iter()
        .map(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "replayed before the answer: {:?}",
        &client.seen[from..]
    );
    assert_eq!(client.updates(from, "tool_call")[0]["kind"], "search");
    let unknown = client.call(
        "session/load",
        json!({"sessionId": "nosuchid", "cwd": env.work(), "mcpServers": []}),
    );
    assert!(unknown["error"].is_object(), "{unknown}");
    assert!(client.close());
}

#[test]
fn bad_input_is_answered_with_errors_and_the_process_lives_on() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    client.write("{not json");
    let parse = client.next_line();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    let unknown = client.call("session/dance", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let stray = client.prompt("no-such-session", "hi");
    assert!(
        stray["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no session"),
        "{stray}"
    );
    let missing = client.call("session/prompt", json!({}));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    // Still answering.
    let init = client.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(init["result"]["protocolVersion"], 1);
    assert!(client.close(), "stdin closed ends it");
}

#[test]
fn slash_commands_draw_the_tree_move_and_retry() {
    let server = Server::start(vec![
        text(&["First."]),
        text(&["Second."]),
        text(&["Retried."]),
    ]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    client.prompt(&session, "one");
    client.prompt(&session, "two");
    let from = client.seen.len();
    client.prompt(&session, "/tree");
    let tree = client.said(from);
    assert!(
        tree.contains("one") && tree.contains("two") && tree.contains("[4]"),
        "{tree}"
    );
    // Back to the first answer, and on from there: a second branch.
    let from = client.seen.len();
    client.prompt(&session, "/2");
    assert!(
        client.said(from).starts_with("→ [2]"),
        "{}",
        client.said(from)
    );
    let from = client.seen.len();
    let retried = client.prompt(&session, "/retry");
    assert_eq!(retried["result"]["stopReason"], "end_turn");
    assert_eq!(client.said(from), "Retried.");
    let request = &server.requests()[2];
    assert_eq!(
        last_user_text(request),
        "one",
        "retried the message above [2]"
    );
    let from = client.seen.len();
    client.prompt(&session, "/tree");
    let tree = client.said(from);
    assert!(
        tree.contains("Retried") && tree.contains("Second"),
        "both branches: {tree}"
    );
    assert!(client.close());
}

#[test]
fn a_fork_is_a_branch_of_the_same_tree_that_the_original_never_sees() {
    let server = Server::start(vec![
        text(&["Base."]),
        text(&["In the fork."]),
        text(&["In the original."]),
    ]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    client.prompt(&session, "base");
    let forked = client.call(
        "session/fork",
        json!({"sessionId": session, "cwd": env.work(), "mcpServers": []}),
    );
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_string();
    assert_eq!(fork, format!("{session}@fork-1"));
    client.prompt(&fork, "forked message");
    client.prompt(&session, "original message");
    let original = messages_of(&server.requests()[2]);
    assert!(
        !original
            .iter()
            .any(|(_, text)| text.contains("forked message")),
        "the original's request never carries the fork's: {original:?}"
    );
    let from = client.seen.len();
    client.prompt(&session, "/tree");
    let tree = client.said(from);
    assert!(
        tree.contains("forked message") && tree.contains("original message"),
        "{tree}"
    );
    assert!(tree.contains("fork-1"), "the branch is named: {tree}");
    assert!(client.close());
    // Loaded again, the fork is at its own tip.
    let mut client = Client::start(&env, &server, &[]);
    let from = client.seen.len();
    client.call(
        "session/load",
        json!({"sessionId": fork, "cwd": env.work(), "mcpServers": []}),
    );
    let users: Vec<String> = client
        .updates(from, "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(users, ["base", "forked message"]);
    assert!(client.close());
}

#[test]
fn allow_for_the_session_is_remembered_and_an_attached_file_is_its_content() {
    let write = |name: &str| json!({"filepath": name, "content": "x\n"}).to_string();
    let server = Server::start(vec![
        tool_calls(&[("c1", "write_file", &write("a.txt"))]),
        tool_calls(&[("c2", "write_file", &write("b.txt"))]),
        text(&["Both written."]),
    ]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--permission-mode", "strict"]);
    let session = client.new_session(&env.work());
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "write both, as this file says"},
            {"type": "resource", "resource": {"uri": "file:///notes/plan.md", "mimeType": "text/markdown", "text": "the plan: a then b"}},
        ]}),
    );
    let mut asked = 0;
    let answer = client.wait(id, &mut |_| {
        asked += 1;
        json!({"outcome": {"outcome": "selected", "optionId": "allow-session"}})
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked, 1, "the second write was allowed by the first answer");
    assert!(env.work().join("a.txt").exists() && env.work().join("b.txt").exists());
    let sent = last_user_text(&server.requests()[0]);
    assert!(
        sent.contains("write both")
            && sent.contains("the plan: a then b")
            && sent.contains("plan.md"),
        "{sent}"
    );
    assert!(client.close());
}

#[test]
fn each_permission_request_names_its_own_call_among_parallel_calls_of_one_tool() {
    let write = |name: &str| json!({"filepath": name, "content": "x\n"}).to_string();
    let server = Server::start(vec![
        tool_calls(&[
            ("c1", "write_file", &write("a.txt")),
            ("c2", "write_file", &write("b.txt")),
        ]),
        text(&["One of two."]),
    ]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--permission-mode", "strict"]);
    let session = client.new_session(&env.work());
    let from = client.seen.len();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write both"}]}),
    );
    // The first question is allowed, the second rejected, whichever call each names.
    let mut asked = Vec::new();
    let answer = client.wait(id, &mut |request| {
        asked.push(request["params"]["toolCall"]["toolCallId"].clone());
        let option = if asked.len() == 1 {
            "allow-once"
        } else {
            "reject"
        };
        json!({"outcome": {"outcome": "selected", "optionId": option}})
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Both calls were announced before the first question: the id cannot be guessed.
    let announced = client.updates(from, "tool_call");
    assert_eq!(announced.len(), 2, "{announced:?}");
    assert_eq!(asked, [json!("c1"), json!("c2")]);
    assert!(env.work().join("a.txt").exists(), "c1 allowed");
    assert!(!env.work().join("b.txt").exists(), "c2 rejected");
    let updates = client.updates(from, "tool_call_update");
    let status = |id: &str| {
        updates
            .iter()
            .find(|u| u["toolCallId"] == id)
            .map(|u| u["status"].clone())
    };
    assert_eq!(status("c1"), Some(json!("completed")), "{updates:?}");
    assert_eq!(status("c2"), Some(json!("failed")), "{updates:?}");
    assert!(client.close());
}

/// Every string in `value`, keys included.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

#[test]
fn reads_go_through_the_editor_for_files_inside_workdir_and_fall_back_to_the_disk() {
    let read = |path: &str| json!({ "filepath": path }).to_string();
    let server = Server::start(vec![
        tool_calls(&[
            ("r1", "read_file", &read("a.txt")),
            ("r2", "read_file", &read("b.txt")),
            ("r3", "read_file", &read("../outside.txt")),
            ("r4", "read_file", &read("link.txt")),
        ]),
        text(&["Read."]),
        tool_calls(&[("r5", "read_file", &read("a.txt"))]),
        text(&["Read from the disk."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "a on disk\n").unwrap();
    fs::write(env.work().join("b.txt"), "b on disk\n").unwrap();
    let outside = env.work().parent().unwrap().join("outside.txt");
    fs::write(&outside, "outside on disk\n").unwrap();
    #[cfg(unix)]
    symlink(&outside, env.work().join("link.txt")).unwrap();
    let mut cmd = env.command(&server.base_url);
    cmd.arg("acp").arg("--datadir").arg(env.data());
    let mut client = Client::spawn(cmd, json!({"fs": {"readTextFile": true}}));
    let session = client.new_session(&env.work());
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "read them"}]}),
    );
    let mut asked = Vec::new();
    let answer = client.wait(id, &mut |request| {
        assert_eq!(request["method"], "fs/read_text_file", "{request}");
        assert_eq!(request["params"]["sessionId"], session.as_str());
        let path = request["params"]["path"].as_str().unwrap().to_string();
        asked.push(path.clone());
        if path.ends_with("a.txt") {
            json!({"content": "a in the editor, unsaved\n"})
        } else {
            json!({"rpcError": "not open here"})
        }
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Only files of WORKDIR were asked for, by their resolved path; never the outside one.
    let work = env.work().canonicalize().unwrap();
    let mut expected = vec![
        work.join("a.txt").to_string_lossy().to_string(),
        work.join("b.txt").to_string_lossy().to_string(),
    ];
    asked.sort();
    expected.sort();
    assert_eq!(asked, expected);
    let results = results(&server, 1);
    assert!(
        results[0].contains("a in the editor, unsaved"),
        "{results:?}"
    );
    assert!(
        results[1].contains("b on disk"),
        "the disk after an error: {results:?}"
    );
    assert!(results[2].contains("outside"), "refused: {results:?}");
    assert!(!results[2].contains("outside on disk"), "{results:?}");
    #[cfg(unix)]
    assert!(!results[3].contains("outside on disk"), "{results:?}");
    assert!(client.close());
    // A client that does not offer reads is never asked (`call` fails on any request).
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    client.prompt(&session, "read a");
    assert!(results_of(&server.requests()[3])[0].contains("a on disk"));
    assert!(client.close());
}

#[test]
fn the_reasoning_level_is_an_option_for_anthropic_and_the_next_request_uses_it() {
    let server = Server::start(vec![
        anthropic_text(&["Plain."]),
        anthropic_text(&["Thought."]),
    ]);
    let env = Env::new();
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_BASE_URL", server.root_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key")
        .arg("acp")
        .arg("--datadir")
        .arg(env.data())
        .args(["--provider", "anthropic", "--model", "claude-test"]);
    let mut client = Client::spawn(cmd, json!({}));
    let answer = client.call("session/new", json!({"cwd": env.work(), "mcpServers": []}));
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    let reasoning = answer["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "reasoning")
        .unwrap_or_else(|| panic!("a reasoning option: {answer}"))
        .clone();
    assert_eq!(reasoning["category"], "thought_level");
    assert_eq!(reasoning["currentValue"], "off");
    let values: Vec<&str> = reasoning["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["off", "low", "medium", "high"]);
    client.prompt(&session, "one");
    assert!(server.requests()[0].get("thinking").is_none());
    let set = client.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "reasoning", "value": "high"}),
    );
    let now = set["result"]["configOptions"]
        .as_array()
        .unwrap_or_else(|| panic!("{set}"))
        .iter()
        .find(|o| o["id"] == "reasoning")
        .unwrap()["currentValue"]
        .clone();
    assert_eq!(now, "high");
    let bad = client.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "reasoning", "value": "extreme"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    client.prompt(&session, "two");
    let request = &server.requests()[1];
    assert_eq!(
        request["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert!(request["max_tokens"].as_u64().unwrap() > 16384, "{request}");
    assert!(client.close());
}

#[test]
fn two_sessions_prompt_at_once_and_one_session_still_takes_one_prompt_at_a_time() {
    let mut chunks = match text(&["A begins. ", "never"]) {
        Reply::Sse(c) => c,
        _ => unreachable!(),
    };
    let rest = chunks.split_off(2);
    let server = Server::start(vec![
        Reply::SseStall(chunks, Duration::from_secs(20), rest),
        text(&["B answered."]),
    ]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &[]);
    let a = client.new_session(&env.work());
    let b = client.new_session(&env.work());
    let a_id = client.send(
        "session/prompt",
        json!({"sessionId": a, "prompt": [{"type": "text", "text": "talk long"}]}),
    );
    loop {
        let m = client.next_line();
        let first = m["params"]["update"]["sessionUpdate"] == "agent_message_chunk";
        client.seen.push(m);
        if first {
            break;
        }
    }
    // A streams (and stalls); B asks and is answered meanwhile.
    let started = Instant::now();
    let from = client.seen.len();
    let answer = client.prompt(&b, "quick one");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "B did not wait for A"
    );
    assert!(
        !client.seen.iter().any(|m| m["id"] == a_id),
        "A is still running"
    );
    let said_in_b: String = client.seen[from..]
        .iter()
        .filter(|m| m["params"]["sessionId"] == b.as_str())
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or("")
        })
        .collect();
    assert_eq!(said_in_b, "B answered.");
    // A second prompt to A while it runs is an error; A's cancel answers A.
    let second = client.prompt(&a, "me too");
    assert_eq!(second["error"]["code"], -32600, "{second}");
    client.notify("session/cancel", json!({"sessionId": a}));
    let answer = client.wait(a_id, &mut |r| panic!("{r}"));
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(client.close());
}

#[test]
fn a_write_out_of_workdir_is_refused_and_never_shown_as_an_outside_diff() {
    let write = |path: &str| json!({"filepath": path, "content": "owned\n"}).to_string();
    let edit = |path: &str| {
        json!({"filepath": path, "old_string": "outside", "new_string": "owned"}).to_string()
    };
    let server = Server::start(vec![
        tool_calls(&[
            ("w1", "write_file", &write("../outside.txt")),
            ("w2", "edit_file", &edit("sub/../../outside.txt")),
            ("w3", "write_file", &write("link.txt")),
            ("w4", "edit_file", &edit("link.txt")),
        ]),
        text(&["Tried."]),
    ]);
    let env = Env::new();
    let outside = env.work().parent().unwrap().join("outside.txt");
    fs::write(&outside, "outside text\n").unwrap();
    #[cfg(unix)]
    symlink(&outside, env.work().join("link.txt")).unwrap();
    let mut client = Client::start(&env, &server, &["--permission-mode", "permissive"]);
    let session = client.new_session(&env.work());
    let from = client.seen.len();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write out"}]}),
    );
    // Whatever is asked is allowed: the tools' own confinement must hold.
    let answer = client.wait(
        id,
        &mut |_| json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(fs::read_to_string(&outside).unwrap(), "outside text\n");
    for call in client.updates(from, "tool_call") {
        for location in call["locations"].as_array().into_iter().flatten() {
            let path = Path::new(location["path"].as_str().unwrap());
            assert!(
                path.starts_with(env.work().canonicalize().unwrap())
                    && !path.components().any(|c| c == Component::ParentDir)
                    && !path.is_symlink(),
                "a location inside WORKDIR only: {call}"
            );
        }
    }
    let updates = client.updates(from, "tool_call_update");
    assert_eq!(updates.len(), 4, "{updates:?}");
    for update in &updates {
        assert_eq!(update["status"], "failed", "refused: {update}");
        let contents = update["content"].as_array().unwrap();
        assert!(
            contents.iter().all(|c| c["type"] != "diff"),
            "no diff of a refused write: {update}"
        );
    }
    let mut all = Vec::new();
    client.seen[from..]
        .iter()
        .for_each(|m| strings(m, &mut all));
    assert!(
        !all.iter().any(|s| s.contains("outside text")),
        "the outside file's text never reached the editor"
    );
    for result in results(&server, 1) {
        assert!(result.contains("outside"), "{result}");
    }
    assert!(client.close());
}

#[test]
fn control_characters_in_titles_and_arguments_reach_the_editor_escaped() {
    let command = "echo safe\u{1b}[2K\rprintf hidden\nls -la";
    let server = Server::start(vec![
        tool_calls(&[
            ("b1", "bash", &json!({ "command": command }).to_string()),
            ("x1", "evil\u{1b}]0;title\u{7}tool", "{}"),
            (
                "f1",
                "read_file",
                &json!({"filepath": "a\u{1b}[31m.txt"}).to_string(),
            ),
        ]),
        text(&["Done."]),
    ]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--permission-mode", "strict"]);
    let session = client.new_session(&env.work());
    let from = client.seen.len();
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let answer = client.wait(
        id,
        &mut |_| json!({"outcome": {"outcome": "selected", "optionId": "reject"}}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let mut all = Vec::new();
    client.seen[from..]
        .iter()
        .for_each(|m| strings(m, &mut all));
    for s in &all {
        assert!(
            !s.contains(['\u{1b}', '\r', '\u{7}']),
            "a control character reached the editor: {s:?}"
        );
    }
    let calls = client.updates(from, "tool_call");
    let bash = calls.iter().find(|c| c["toolCallId"] == "b1").unwrap();
    let title = bash["title"].as_str().unwrap();
    assert!(
        title.contains("printf hidden") && title.contains("ls -la"),
        "every line of the command is in its title: {title}"
    );
    let asked = client
        .seen
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap();
    assert!(
        asked["params"]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("ls -la"),
        "{asked}"
    );
    assert!(client.close());
}

/// A cloned project opened in an editor starts nothing it brings: its Claude Code hooks and its
/// `.mcp.json` server wait for a trust nobody can give over ACP (the same project trusted in a
/// terminal runs both, so the files are ones that would run), and the prompt is still answered.
#[cfg(unix)]
#[test]
fn an_untrusted_project_s_hooks_and_mcp_servers_start_nothing_through_acp() {
    let env = Env::new();
    let hook_ran = env.dir.path().join("hook-ran");
    // Inside WORKDIR: a server runs in the command sandbox, which writes there only.
    let server_ran = env.work().join("server-ran");
    fs::create_dir_all(env.work().join(".claude")).unwrap();
    fs::write(
        env.work().join(".claude/settings.json"),
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": format!("touch {}", hook_ran.display())}]}]}})
        .to_string(),
    )
    .unwrap();
    fs::write(
        env.work().join(".mcp.json"),
        json!({"mcpServers": {"planted": {"command": "touch",
            "args": [server_ran.display().to_string()]}}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![text(&["Answered."]), text(&["Trusted."])]);
    let mut client = Client::start(&env, &server, &[]);
    let session = client.new_session(&env.work());
    let from = client.seen.len();
    let answer = client.prompt(&session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(client.said(from), "Answered.");
    assert!(client.close());
    assert!(!hook_ran.exists(), "an untrusted project's hook ran");
    assert!(
        !server_ran.exists(),
        "an untrusted project's MCP server started"
    );
    // The same files, trusted at a terminal: both run.
    let run = env.run(&server.base_url, &["--trust-project", "-p", "again"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(hook_ran.exists(), "the trusted hook did not run: {run:?}");
    assert!(
        server_ran.exists(),
        "the trusted server did not start: {run:?}"
    );
}

/// What the first request needs from the server is asked when the session opens, while the
/// editor's user writes: a model of no known family gets its window from llama-server's `/props`
/// before any prompt, and the prompt does not ask again; `/context` shows that window.
#[test]
fn the_window_of_an_unknown_model_is_asked_when_the_session_opens_not_at_the_prompt() {
    let server = Server::start(vec![text(&["Hello."]), text(&["Again."])]);
    server.serve_props(12_288);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--model", "m-test"]);
    let session = client.new_session(&env.work());
    let deadline = Instant::now() + WAIT;
    while server.props_asked() == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.props_asked(), 1, "asked once the session opened");
    assert!(server.requests().is_empty(), "no prompt yet");
    let answer = client.prompt(&session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let from = client.seen.len();
    let context = client.prompt(&session, "/context");
    assert_eq!(context["result"]["stopReason"], "end_turn", "{context}");
    let shown = client.said(from);
    assert!(
        shown.contains("12k") || shown.contains("12,288") || shown.contains("12288"),
        "{shown}"
    );
    assert_eq!(server.props_asked(), 1, "the prompt did not ask again");
    assert_eq!(server.requests().len(), 1);
    assert!(client.close());
}

/// The model list is not needed by the first request: with no prompt it comes soon after the
/// session opens; a prompt sent at once goes first, and the list is asked when its turn ends.
#[test]
fn the_model_list_waits_for_a_prompt_sent_at_once() {
    let server = Server::start(vec![text(&["Hello."])]);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--model", "m-test"]);
    client.new_session(&env.work());
    let deadline = Instant::now() + WAIT;
    while server.models_asked_after().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.models_asked_after(), [0], "asked with no prompt");
    assert!(client.close());

    let server = Server::start(vec![text(&["Hello."])]);
    server.serve_props_after(8_192, Duration::from_millis(300));
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--model", "m-test"]);
    let session = client.new_session(&env.work());
    let answer = client.prompt(&session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    while client.updates(0, "config_option_update").is_empty() {
        client.next_line_seen();
    }
    assert_eq!(
        server.models_asked_after(),
        [1],
        "asked once, after the prompt's request"
    );
    let update = &client.updates(0, "config_option_update")[0];
    assert!(update.to_string().contains("model-a"), "{update}");
    assert_eq!(server.props_asked(), 1);
    assert!(client.close());
}

/// A server that tells a window no model has (1 token) is not believed: the session keeps its
/// fallback window and the prompt is answered, not refused as too long for it.
#[test]
fn a_server_s_absurd_window_is_not_believed() {
    let server = Server::start(vec![text(&["Hello."])]);
    server.serve_props(1);
    let env = Env::new();
    let mut client = Client::start(&env, &server, &["--model", "m-test"]);
    let session = client.new_session(&env.work());
    let answer = client.prompt(&session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let from = client.seen.len();
    client.prompt(&session, "/context");
    let shown = client.said(from);
    assert!(shown.contains("of 128000 tokens"), "{shown}");
    assert_eq!(server.props_asked(), 1);
    assert_eq!(server.requests().len(), 1);
    assert!(client.close());
}
