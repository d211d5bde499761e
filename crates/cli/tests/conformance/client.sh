#!/usr/bin/env bash
# The client the MCP conformance suite drives: `client.sh URL` (the suite appends the scenario
# server's URL and sets MCP_CONFORMANCE_SCENARIO, and MCP_CONFORMANCE_CONTEXT for scenarios
# that hand over credentials). It runs `new -p` in a private home, with one MCP server `conf` at
# URL and the scripted model of model.py, which calls each of the server's tools once.
#
# NEW_BIN names the binary (default: target/debug/new of this repository).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
url="$1"
bin="${NEW_BIN:-$here/../../../../target/debug/new}"
home="$(mktemp -d)"
model_pid=""
cleanup() { [ -n "$model_pid" ] && kill "$model_pid" 2>/dev/null; rm -rf "$home"; }
trap cleanup EXIT
mkdir -p "$home/work" "$home/data" "$home/home" "$home/xdg-data" "$home/xdg-config/new"

# The server entry: the URL, and what the scenario's context hands over (a pre-registered
# client, or the credentials of the client-credentials grant).
python3 - "$url" "$home/xdg-config/new/config.json" <<'PY'
import json, os, sys
url, path = sys.argv[1], sys.argv[2]
entry = {"name": "conf", "url": url, "timeout": 20}
ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
oauth = {}
if ctx.get("client_id"):
    oauth["clientId"] = ctx["client_id"]
if ctx.get("client_secret"):
    oauth["clientSecret"] = ctx["client_secret"]
if ctx.get("private_key_pem"):
    key = os.path.join(os.path.dirname(path), "client-key.pem")
    with open(key, "w") as f:
        f.write(ctx["private_key_pem"])
    os.chmod(key, 0o600)
    oauth["privateKeyFile"] = key
if ctx.get("name", "").startswith("auth/client-credentials"):
    oauth["grant"] = "client_credentials"
# Enterprise-managed authorization: the IdP's details, and the user's ID token in a file (as a
# sign-in tool would keep it).
if ctx.get("idp_id_token"):
    token = os.path.join(os.path.dirname(path), "id-token")
    with open(token, "w") as f:
        f.write(ctx["idp_id_token"])
    os.chmod(token, 0o600)
    oauth["grant"] = "enterprise_managed"
    oauth["idp"] = {"issuer": ctx["idp_issuer"], "tokenEndpoint": ctx["idp_token_endpoint"],
                    "clientId": ctx["idp_client_id"], "idTokenFile": token}
# A client ID metadata document, used where the authorization server supports them. `new` names
# none unless the user's own entry does (`clientMetadataUrl`), and basic-cimd needs one (its
# check compares the client ID with the suite's own fixed address): so the entry, in the user's
# config, names that address, as a user whose organisation hosts a document would name theirs.
if ctx.get("name", os.environ.get("MCP_CONFORMANCE_SCENARIO", "")).startswith("auth/") \
        and "idp" not in oauth:
    oauth.setdefault("clientMetadataUrl", "https://conformance-test.local/client-metadata.json")
if oauth:
    entry["oauth"] = oauth
config = {
    "retry_initial_ms": 5,
    "permissions": [{"tool": "mcp__conf__*", "action": "allow"}],
    "mcp": {"handshake_timeout_seconds": 20, "servers": [entry]},
}
json.dump(config, open(path, "w"))
PY

# The browser of the authorization step: it follows the authorization server's redirect to
# new's loopback port, as a person's browser would after they agreed.
cat >"$home/browser" <<'SH'
#!/bin/sh
exec python3 -c '
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=20).read()
except Exception as e:
    print("browser:", e, file=sys.stderr)
' "$1"
SH
chmod +x "$home/browser"

exec 3< <(python3 "$here/model.py")
read -r port <&3
model_pid=$!

cd "$home/work"
run=(env -i PATH="$PATH" HOME="$home/home" XDG_DATA_HOME="$home/xdg-data"
  XDG_CONFIG_HOME="$home/xdg-config" LANG=C NO_COLOR=1 TERM=dumb BROWSER="$home/browser"
  OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_KEY=scripted
  "$bin" "$home/work" default "$home/data" -p "Call each tool of the MCP server once."
  --output-format json)
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  elicitation-*)
    # A server's form is asked on a terminal: new runs on a pseudo-terminal (util-linux
    # `script`) and the person at it presses Enter at each field, keeping the defaults, then
    # Enter to send.
    printf '\n\n\n\n\n\n\n\n\n\n' | script -qefc "$(printf '%q ' "${run[@]}")" /dev/null ;;
  *) "${run[@]}" </dev/null ;;
esac
