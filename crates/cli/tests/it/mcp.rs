//! MCP servers through the binary: a scripted stdio server (`fixtures_mcp/fake_mcp.py`) whose
//! tools the scripted model calls, trust for a project's servers, bad entries, a server that
//! dies. The reference servers themselves are driven in `e2e`.

use crate::support::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;
use std::time::Instant;

/// Whether `python3` runs the scripted server here; without it (a machine with only the Rust
/// toolchain) these tests say they were skipped. `.ci/run` always has it.
fn python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: python3 runs the scripted MCP server");
    }
    ok
}

/// What the fake server noted so far (its pid, requests, calls, cancellations).
fn noted(notes: &Path) -> String {
    fs::read_to_string(notes).unwrap_or_default()
}

#[cfg(unix)]
/// The pid the fake server noted first.
fn first_pid(notes: &Path) -> i32 {
    noted(notes).lines().next().unwrap()[4..].parse().unwrap()
}

fn fake() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures_mcp/fake_mcp.py")
}

/// A user config with the fake server (its notes in `notes`), and a rule that lets its tools run.
fn config(env: &Env, notes: &Path, extra_servers: &str) -> String {
    let json = format!(
        r#"{{"retry_initial_ms": 5,
            "permissions": [{{"tool": "mcp__fake__*", "action": "allow"}}],
            "mcp": {{"servers": [
                {{"name": "fake", "command": "python3", "args": [{:?}],
                  "env": {{"FAKE_MCP_NOTES": {:?}}}, "timeout": 5}}{extra_servers}]}}}}"#,
        fake().display().to_string(),
        notes.display().to_string()
    );
    env.write_config(&json);
    json
}

/// The same, the server offering resources and prompts too.
fn offers_config(env: &Env, notes: &Path) {
    let json = config(env, notes, "");
    env.write_config(&json.replace(
        r#""FAKE_MCP_NOTES""#,
        r#""FAKE_MCP_OFFERS": "1", "FAKE_MCP_NOTES""#,
    ));
}

#[test]
fn a_server_s_tools_are_offered_called_and_errors_and_oversized_answers_said() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    offers_config(&env, &notes);
    let server = Server::start(vec![
        tool_calls(&[
            ("a", "mcp__fake__echo", r#"{"text":"hi there"}"#),
            ("b", "mcp__fake__fail", "{}"),
            ("c", "mcp__fake__huge", "{}"),
        ]),
        text(&["done"]),
        text(&["again"]),
    ]);
    let run = env.run(&server.base_url, &[], "/mcp\ngo\nonce more\n/mcp\n/dump\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let request = &server.requests()[0];
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    // Both pages of the list, after the built-in tools.
    for name in [
        "read_file",
        "mcp__fake__echo",
        "mcp__fake__fail",
        "mcp__fake__slow",
        "mcp__fake__huge",
    ] {
        assert!(tools.contains(&name), "{name}: {tools:?}");
    }
    let echo = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__fake__echo")
        .unwrap();
    assert_eq!(echo["function"]["description"], "Repeats the text");
    assert_eq!(echo["function"]["parameters"]["required"][0], "text");
    // The server's instructions, under its name, in the system prompt.
    let system = request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("## MCP server `fake`\n\nUse echo to repeat things."),
        "{system}"
    );
    // `/dump` writes what the model gets: the instructions and the MCP tools too.
    let (id, _) = {
        let files = env.conversation_files();
        (
            files[0].file_stem().unwrap().to_string_lossy().into_owned(),
            (),
        )
    };
    let dump: Value = serde_json::from_str(
        &fs::read_to_string(env.data().join(format!("{id}.dump.json"))).unwrap(),
    )
    .unwrap();
    assert!(
        dump["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("## MCP server `fake`"),
        "{dump}"
    );
    assert!(dump["tools"].to_string().contains("mcp__fake__echo"));
    let got = results(&server, 1);
    assert_eq!(got[0], "echo: hi there");
    assert_eq!(got[1], "Error: it went wrong");
    assert!(got[2].contains("over 16 MB; refused"), "{}", got[2]);
    let said = fs::read_to_string(&notes).unwrap();
    assert!(said.contains(r#"call echo {"text": "hi there"}"#), "{said}");
    // The echo made the server add a tool and say so: the next turn offers it.
    let requests = server.requests();
    let later: Vec<&str> = requests[2]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(later.contains(&"mcp__fake__extra"), "{later:?}");
    assert!(!tools.contains(&"mcp__fake__extra"));
    // `/mcp`: ready with its five tools and the log's path; stderr and non-protocol lines in it.
    assert!(
        run.stdout.contains("fake (user): ready (fake 1.0), ping "),
        "{run:?}"
    );
    assert!(run.stdout.contains(" ms · 5 tools · log "), "{run:?}");
    // What it offers besides tools, listed beside them (a server's URI escaped).
    assert!(
        run.stdout
            .contains("  2 resources: mem://notes, mem://\\e[31mred\n"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("  1 prompt: /mcp__fake__greet\n"),
        "{run:?}"
    );
    let said = fs::read_to_string(&notes).unwrap();
    assert!(said.contains("got ping"), "{said}");
    let log = fs::read_to_string(env.data().join("mcp/fake.log")).unwrap();
    assert!(log.contains("fake server: stderr goes to the log"), "{log}");
    assert!(
        log.contains("not a protocol message on stdout: starting up"),
        "{log}"
    );
    assert!(!run.stdout.contains("starting up") && !run.stderr.contains("starting up"));
}

#[test]
fn a_project_s_servers_run_only_once_trusted_and_bad_entries_are_named() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    config(
        &env,
        &notes,
        r#", {"name": "missing", "command": "/nonexistent/mcp-server"},
            {"name": "odd", "command": "x", "colour": "red"}"#,
    );
    fs::write(
        env.work().join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"proj": {{"command": "python3", "args": [{:?}]}}}}}}"#,
            fake().display().to_string()
        ),
    )
    .unwrap();
    let server = Server::start(vec![]);
    let run = env.run(&server.base_url, &[], "/mcp\n");
    assert!(
        run.stderr
            .contains("the project's MCP servers are not trusted and do not run"),
        "{run:?}"
    );
    assert!(run.stderr.contains("mcp.servers[2] in "), "{run:?}");
    assert!(
        run.stderr
            .contains("unknown field `colour`; this server is left out"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(
            "proj (project): not trusted: a project's server runs once you trust it · 0 tools"
        ),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("missing (user): failed: cannot start `/nonexistent/mcp-server`")
            || run.stdout.contains("missing (user): starting"),
        "{run:?}"
    );
    // Trusted once, remembered after.
    let run = env.run(&server.base_url, &["--trust-project"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let server = Server::start(vec![text(&["ok"])]);
    let run = env.run(&server.base_url, &[], "hello\n/mcp\n");
    assert!(
        run.stdout
            .contains("proj (project): ready (fake 1.0), ping "),
        "{run:?}"
    );
    let tools: Vec<Value> = server.requests()[0]["tools"].as_array().unwrap().clone();
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "mcp__proj__echo")
    );
    // A changed entry is a new question.
    fs::write(
        env.work().join(".mcp.json"),
        r#"{"mcpServers": {"proj": {"command": "sh", "args": ["-c", "echo pwned > /tmp/x"]}}}"#,
    )
    .unwrap();
    let run = env.run(&server.base_url, &[], "/mcp\n");
    assert!(
        run.stdout.contains("proj (project): not trusted"),
        "{run:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_server_that_dies_is_started_again_and_an_interrupted_call_is_cancelled() {
    if !python() {
        return;
    }
    use std::io::Write;
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    config(&env, &notes, "");
    let server = Server::start(vec![
        tool_calls(&[("s", "mcp__fake__slow", "{}")]),
        text(&["after"]),
    ]);
    let mut child = env.spawn(&server.base_url);
    let mut stdin = child.stdin.take().unwrap();
    let wait_for = |what: &str| {
        let seen = eventually(100, Duration::from_millis(100), || {
            noted(&notes).contains(what)
        });
        assert!(seen, "never noted {what:?}: {}", noted(&notes));
    };
    wait_for("got notifications/initialized");
    let pid = first_pid(&notes);
    // Killed: started again after a second, and its tools are back.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    thread::sleep(Duration::from_millis(2500));
    let starts = fs::read_to_string(&notes).unwrap().matches("pid ").count();
    assert_eq!(starts, 2, "{}", fs::read_to_string(&notes).unwrap());
    stdin.write_all(b"/mcp\n").unwrap();
    // A slow call interrupted with Ctrl-C: the server is told.
    stdin.write_all(b"go\n").unwrap();
    wait_for("call slow");
    // Its progress is shown before the interruption (said as it arrives; the time is the
    // client's to read it).
    wait_for("progress sent");
    // Room for `new` to read and print it on a loaded machine (the call sleeps 20 s).
    thread::sleep(Duration::from_millis(2000));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    wait_for("cancelled");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("fake (user): ready"), "{stdout}");
    // Its progress notification, on one line.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("  … fake: 1/3 working\n"), "{stderr}");
    // No server outlives `new`.
    let last_pid: i32 = fs::read_to_string(&notes)
        .unwrap()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("pid "))
        .unwrap()
        .parse()
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_ne!(
        unsafe { libc::kill(last_pid, 0) },
        0,
        "the server still runs"
    );
}

#[cfg(unix)]
#[test]
fn servers_end_with_new_even_when_it_is_killed() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    config(&env, &notes, "");
    let server = Server::start(vec![]);
    let mut child = env.spawn(&server.base_url);
    eventually(100, Duration::from_millis(100), || {
        noted(&notes).contains("got notifications/initialized")
    });
    let pid = first_pid(&notes);
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "the server runs");
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = eventually(50, Duration::from_millis(100), || unsafe {
        libc::kill(pid, 0) != 0
    });
    assert!(gone, "the server outlived a killed `new`");
}

#[test]
fn the_tools_list_chooses_mcp_tools_and_mcp_restart_starts_a_server_again() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    let json = config(&env, &notes, "");
    // The same config, with a `tools` list naming one built-in and one MCP tool by a pattern.
    let mut value: Value = serde_json::from_str(&json).unwrap();
    value["tools"] = serde_json::json!(["read_file", "mcp__fake__e*"]);
    env.write_config(&value.to_string());
    let server = Server::start(vec![text(&["ok"])]);
    let mut child = env.spawn(&server.base_url);
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    stdin
        .write_all(b"hello\n/mcp restart fake\n/mcp restart nope\n")
        .unwrap();
    // Started twice: for the turn, and by `/mcp restart`.
    let restarted = eventually(50, Duration::from_millis(100), || {
        noted(&notes)
            .matches("got notifications/initialized")
            .count()
            == 2
    });
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(restarted, "{}", fs::read_to_string(&notes).unwrap());
    let tools: Vec<String> = server.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    // The list chooses built-in and MCP tools; skills' and subagents' follow their own sections.
    let chosen: Vec<&String> = tools
        .iter()
        .filter(|t| !["use_skill", "agent", "task_status"].contains(&t.as_str()))
        .collect();
    assert_eq!(chosen, ["read_file", "mcp__fake__echo"], "{tools:?}");
    assert!(stdout.contains("restarting fake"), "{stdout}");
    assert!(
        stderr.contains("no MCP server `nope` that may run (see /mcp)"),
        "{stderr}"
    );
}

#[test]
fn a_disabled_server_is_listed_and_never_started() {
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "mcp": {"servers": [{"name": "off", "command": "/nonexistent/never", "disabled": true}]}}"#,
    );
    let server = Server::start(vec![text(&["ok"])]);
    let run = env.run(&server.base_url, &[], "hi\n/mcp\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("off (user): disabled · 0 tools"),
        "{run:?}"
    );
    assert!(!env.data().join("mcp/off.log").exists());
}

/// Provider keys stay out of a server's environment unless its entry passes one on, and out of a
/// hook's.
#[test]
fn no_provider_key_reaches_a_server_or_a_hook_unless_passed_on() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    let seen = env.dir.path().join("hook-env.txt");
    env.write_config(
        &serde_json::json!({"retry_initial_ms": 5,
            "mcp": {"servers": [{"name": "fake", "command": "python3", "args": [fake().display().to_string()],
                "env": {"FAKE_MCP_NOTES": notes.display().to_string(), "PASSED_API_KEY": "given"}}]},
            "hook": {"entries": [{"name": "env", "event": "program_start",
                "action": {"command": format!("env > {}", seen.display())}}]}})
        .to_string(),
    );
    let server = Server::start(vec![text(&["ok"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.env("OPENAI_API_KEY", "sk-secret-1")
        .env("OTHER_API_KEY", "sk-secret-2")
        .arg(env.work())
        .arg("default")
        .arg(env.data());
    let run = run_with_stdin(cmd, "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let said = fs::read_to_string(&notes).unwrap();
    assert!(said.contains("keys PASSED_API_KEY\n"), "{said}");
    let hook_env = fs::read_to_string(&seen).unwrap();
    assert!(!hook_env.contains("sk-secret"), "{hook_env}");
    assert!(
        hook_env.contains("NEW_HOOK_EVENT=program_start"),
        "{hook_env}"
    );
}

/// A server that never answers the handshake fails after `mcp.handshake_timeout_seconds`; the
/// turn waited that long at most and went on without it.
#[test]
fn a_server_that_hangs_fails_after_the_handshake_timeout_and_the_turn_goes_on() {
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "mcp": {"handshake_timeout_seconds": 1,
            "servers": [{"name": "mute", "command": "sleep", "args": ["30"]}]}}"#,
    );
    let server = Server::start(vec![text(&["answered anyway"])]);
    let started = Instant::now();
    let run = env.run(&server.base_url, &[], "hi\n/mcp\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(run.stdout.contains("answered anyway"), "{run:?}");
    assert!(
        run.stdout
            .contains("mute (user): failed: no answer within 1 s"),
        "{run:?}"
    );
    assert!(
        !tool_names(&server.requests()[0])
            .iter()
            .any(|t| t.starts_with("mcp__"))
    );
}

/// A tiny HTTP MCP server on loopback whose GET stream is one `data:` line that never ends.
/// Returns its URL; `streamed` counts the bytes it managed to send on that stream.
fn endless_get_server(streamed: Arc<AtomicUsize>) -> String {
    fake_http_server(streamed, Fake::EndlessGet)
}

#[derive(Clone, Copy, PartialEq)]
enum Fake {
    /// GET: one `data:` line without end.
    EndlessGet,
    /// `tools/list` always says the same `nextCursor`, with names that come out alike, and the
    /// instructions are 100 KB. No GET stream.
    HostileList,
    /// `tools/call` is answered on an event stream that stays open after the answer, after 50
    /// progress notifications; meanwhile the GET stream sends 10,000 `list_changed` and 100
    /// progress notifications for a call never made. `tools/list` is counted.
    KeptOpen,
    /// Every POST needs `x-token: from-helper` (else 401); `tools/list` offers `keep` and `drop`;
    /// a call answers `kept`.
    NeedsToken,
}

fn fake_http_server(streamed: Arc<AtomicUsize>, fake: Fake) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    // KeptOpen: a call has come; the GET stream's storm is over.
    let calling = Arc::new(AtomicBool::new(false));
    let stormed = Arc::new(AtomicBool::new(false));
    let wait_for = |flag: &AtomicBool| {
        for _ in 0..3000 {
            if flag.load(Ordering::SeqCst) {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
    };
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let streamed = streamed.clone();
            let (calling, stormed) = (calling.clone(), stormed.clone());
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let method = line.split_whitespace().next().unwrap_or("").to_string();
                    let mut length = 0;
                    let mut token = None;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        if h.trim().is_empty() {
                            break;
                        }
                        let lower = h.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if let Some(v) = lower.strip_prefix("x-token:") {
                            token = Some(v.trim().to_string());
                        }
                    }
                    let mut body = vec![0u8; length];
                    let _ = reader.read_exact(&mut body);
                    if fake == Fake::NeedsToken && method == "GET" {
                        let _ = stream.write_all(
                            b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n",
                        );
                        continue;
                    }
                    if fake == Fake::NeedsToken && token.as_deref() != Some("from-helper") {
                        let _ = stream
                            .write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n");
                        continue;
                    }
                    if method == "GET" && fake == Fake::HostileList {
                        let _ = stream.write_all(
                            b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n",
                        );
                        continue;
                    }
                    let event = |m: Value| format!("data: {m}\n\n");
                    if method == "GET" && fake == Fake::KeptOpen {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
                        );
                        wait_for(&calling);
                        let mut storm = String::new();
                        for _ in 0..10_000 {
                            storm += &event(json!({"jsonrpc": "2.0",
                                "method": "notifications/tools/list_changed"}));
                        }
                        for n in 0..100 {
                            storm += &event(
                                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": "new-999999", "progress": n, "message": "stray"}}),
                            );
                        }
                        let _ = stream.write_all(storm.as_bytes());
                        stormed.store(true, Ordering::SeqCst);
                        thread::sleep(Duration::from_secs(60));
                        return;
                    }
                    if method == "GET" {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ",
                        );
                        let chunk = vec![b'a'; 64 * 1024];
                        while stream.write_all(&chunk).is_ok() {
                            streamed.fetch_add(chunk.len(), Ordering::SeqCst);
                            if streamed.load(Ordering::SeqCst) > 200 << 20 {
                                return;
                            }
                        }
                        return;
                    }
                    let message: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let Some(id) = message.get("id").cloned() else {
                        let _ =
                            stream.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
                        continue;
                    };
                    let hostile = fake == Fake::HostileList;
                    if fake == Fake::KeptOpen && message["method"] == "tools/call" {
                        calling.store(true, Ordering::SeqCst);
                        let token = message["params"]["_meta"]["progressToken"].clone();
                        let mut head = String::from(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
                        );
                        for n in 0..50 {
                            head += &event(
                                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": token, "progress": n, "total": 50, "message": "working"}}),
                            );
                        }
                        let _ = stream.write_all(head.as_bytes());
                        wait_for(&stormed);
                        let _ = stream.write_all(
                            event(json!({"jsonrpc": "2.0", "id": id,
                            "result": {"content": [{"type": "text", "text": "kept open"}]}}))
                            .as_bytes(),
                        );
                        // The stream stays open after the answer.
                        thread::sleep(Duration::from_secs(60));
                        return;
                    }
                    let result = match message["method"].as_str() {
                        Some("initialize") => json!({"protocolVersion": "2025-06-18",
                            "capabilities": {"tools": {}}, "serverInfo": {"name": "endless", "version": "1"},
                            "instructions": if hostile { "i".repeat(100_000) } else { String::new() }}),
                        Some("tools/list") if hostile => {
                            streamed.fetch_add(1, Ordering::SeqCst);
                            let tool =
                                |n: &str| json!({"name": n, "inputSchema": {"type": "object"}});
                            json!({"tools": [tool("dup"), tool("dup"), tool("a.b"), tool("a_b")],
                                "nextCursor": "again"})
                        }
                        Some("tools/list") if fake == Fake::KeptOpen => {
                            streamed.fetch_add(1, Ordering::SeqCst);
                            json!({"tools": [{"name": "wait", "inputSchema": {"type": "object"}}]})
                        }
                        Some("tools/list") if fake == Fake::NeedsToken => json!({"tools": [
                            {"name": "keep", "inputSchema": {"type": "object"}},
                            {"name": "drop", "inputSchema": {"type": "object"}}]}),
                        Some("tools/call") if fake == Fake::NeedsToken => {
                            json!({"content": [{"type": "text", "text": "kept"}]})
                        }
                        Some("tools/list") => json!({"tools": []}),
                        _ => json!({}),
                    };
                    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                    let _ = stream.write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        )
                        .as_bytes(),
                    );
                }
            });
        }
    });
    url
}

/// An HTTP server's GET stream of one endless `data:` line is cut at 16 MB and closed, said in
/// the server's log; memory does not grow with it.
#[test]
fn an_endless_event_on_the_get_stream_is_cut_at_16_mb() {
    let env = Env::new();
    let streamed = Arc::new(AtomicUsize::new(0));
    let url = endless_get_server(streamed.clone());
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [{"name": "endless", "url": url}]}})
            .to_string(),
    );
    let server = Server::start(vec![text(&["hi"])]);
    let mut child = env.spawn(&server.base_url);
    let log = env.data().join("mcp/endless.log");
    assert!(
        eventually(400, Duration::from_millis(25), || {
            fs::read_to_string(&log).is_ok_and(|t| t.contains("over 16 MB"))
        }),
        "the stream was not cut; {} bytes sent",
        streamed.load(Ordering::SeqCst)
    );
    let status = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kb < 200 * 1024, "peak memory {rss_kb} kB");
    let _ = child.kill();
    let _ = child.wait();
    assert!(streamed.load(Ordering::SeqCst) < 100 << 20);
}

/// A server whose list repeats its `nextCursor` is not paged for ever; names that come out alike
/// get a suffix; 100 KB of instructions are cut to 16 KB in the system prompt.
#[test]
fn a_hostile_tool_list_is_paged_once_named_apart_and_its_instructions_capped() {
    let env = Env::new();
    let pages = Arc::new(AtomicUsize::new(0));
    let url = fake_http_server(pages.clone(), Fake::HostileList);
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [{"name": "h", "url": url}]}})
            .to_string(),
    );
    let server = Server::start(vec![text(&["hi"])]);
    let run = env.run(&server.base_url, &["-p", "hello"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(pages.load(Ordering::SeqCst) <= 2, "paged again and again");
    let request = &server.requests()[0];
    let mut names: Vec<String> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .filter(|n| n.starts_with("mcp__h__"))
        .map(str::to_string)
        .collect();
    names.sort();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert!(names.contains(&"mcp__h__dup_2".to_string()), "{names:?}");
    let system = system_of(request);
    assert!(system.matches('i').count() < 20_000, "{}", system.len());
}

/// A call completes when its answer arrives, also on a stream the server keeps open after it; a
/// storm of 10,000 `list_changed` notifications is a handful of listings; progress lines are
/// said only for the call in flight, and at most one a second.
#[test]
fn an_answer_on_a_kept_open_stream_completes_the_call_and_storms_are_coalesced() {
    let env = Env::new();
    let lists = Arc::new(AtomicUsize::new(0));
    let url = fake_http_server(lists.clone(), Fake::KeptOpen);
    env.write_config(
        &json!({"retry_initial_ms": 5,
            "permissions": [{"tool": "mcp__k__*", "action": "allow"}],
            "mcp": {"servers": [{"name": "k", "url": url, "timeout": 30}]}})
        .to_string(),
    );
    let server = Server::start(vec![
        tool_calls(&[("a", "mcp__k__wait", "{}")]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &["-p", "go"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        results(&server, 1),
        vec!["kept open".to_string()],
        "{run:?}"
    );
    let lists = lists.load(Ordering::SeqCst);
    assert!(lists <= 10, "{lists} listings");
    assert!(!run.stderr.contains("stray"), "{}", run.stderr);
    let said = run.stderr.matches("working").count();
    assert!(
        (1..=2).contains(&said),
        "{said} progress lines: {}",
        run.stderr
    );
}

/// Your own servers are trusted as written: one that passes a provider key on (in its `env`)
/// runs without a question, where a project's would need its own yes.
#[test]
fn a_user_s_server_that_passes_a_key_on_runs_without_a_question() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [{"name": "mine", "command": "python3",
            "args": [fake().display().to_string()],
            "env": {"FAKE_MCP_NOTES": notes.display().to_string(), "LINT_CACHE": "${OPENAI_API_KEY}"}}]}})
        .to_string(),
    );
    let server = Server::start(vec![text(&["hi"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["-p", "hello"])
        .env("OPENAI_API_KEY", "sk-mine-123456789");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not confirmed"), "{stderr}");
    assert!(noted(&notes).contains("got initialize"), "{stderr}");
    assert!(
        tool_names(&server.requests()[0]).contains(&"mcp__mine__echo".to_string()),
        "{stderr}"
    );
}

/// A server whose program is not there is said as such.
#[test]
fn a_missing_server_program_is_said_as_such() {
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [
            {"name": "missing", "command": "/nonexistent/mcp-server"}]}})
        .to_string(),
    );
    let server = Server::start(vec![text(&["hi"])]);
    // A turn waits for the servers still starting.
    let run = env.run(&server.base_url, &[], "hello\n/mcp\n");
    assert!(
        run.stdout
            .contains("missing (user): failed: `/nonexistent/mcp-server` not found"),
        "{run:?}"
    );
}

/// Claude Code's `.mcp.json` keys: `headersHelper` runs and its headers win over the static
/// ones; `disabledTools` are never offered; `alwaysAllow` tools run without a question (piped,
/// where no question could be asked); a key `new` does not use is said. A server that fails is
/// said in `-p` mode, on stderr and in the JSON's `mcp_errors`.
#[test]
fn headers_helper_disabled_tools_always_allow_and_failures_in_one_shot_mode() {
    let env = Env::new();
    let url = fake_http_server(Arc::new(AtomicUsize::new(0)), Fake::NeedsToken);
    let entry = |helper: &str| {
        json!({"name": "helper", "url": url, "headers": {"x-token": "static"},
            "headersHelper": helper, "disabledTools": ["drop"], "alwaysAllow": ["keep"]})
    };
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [
            entry(r#"printf '{"x-token": "from-%s"}' "$CLAUDE_CODE_MCP_SERVER_NAME""#)]}})
        .to_string(),
    );
    fs::write(
        env.work().join(".mcp.json"),
        json!({"mcpServers": {"p": {"command": "true", "autoApprove": ["x"]}}}).to_string(),
    )
    .unwrap();
    let server = Server::start(vec![
        tool_calls(&[("k", "mcp__helper__keep", "{}")]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &["-p", "go"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let names = tool_names(&server.requests()[0]);
    assert!(
        names.contains(&"mcp__helper__keep".to_string()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"mcp__helper__drop".to_string()),
        "{names:?}"
    );
    assert_eq!(results(&server, 1)[0], "kept");
    assert!(
        run.stderr.contains("server `p` in")
            && run.stderr.contains("`autoApprove` is not used by new"),
        "{run:?}"
    );
    // A helper that fails: the server fails, and `-p` says so, in JSON too.
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [entry("echo no token >&2; exit 3")]}})
            .to_string(),
    );
    let server = Server::start(vec![text(&["hi"])]);
    let run = env.run(
        &server.base_url,
        &["-p", "go", "--output-format", "json"],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let result: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    let errors = result["mcp_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{result}");
    assert_eq!(errors[0]["server"], "helper");
    let error = errors[0]["error"].as_str().unwrap();
    assert!(
        error.contains("headersHelper: it failed") && error.contains("no token"),
        "{error}"
    );
    let run = env.run(&server.base_url, &["-p", "go"], "");
    assert!(
        run.stderr
            .contains("MCP server `helper` failed: headersHelper"),
        "{run:?}"
    );
}

#[test]
fn a_resource_is_attached_with_at_and_a_prompt_runs_as_a_command() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    offers_config(&env, &notes);
    let server = Server::start(vec![text(&["seen"]), text(&["hello Ada"])]);
    let run = env.run(
        &server.base_url,
        &[],
        "what is in @fake:mem://notes ?\n\
         @fake:mem://missing this one is not there\n\
         /mcp__fake__greet\n\
         /mcp__fake__greet Ada very kindly\n\
         /mcp__fake__nothing x\n\
         /tree\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    // Two turns: the resource's and the prompt's; the missing resource and argument sent nothing.
    assert_eq!(requests.len(), 2, "{run:?}");
    let first = last_user_text(&requests[0]);
    assert!(
        first.starts_with("what is in @fake:mem://notes ?\n\n<mcp_resource server=\"fake\" uri=\"mem://notes\">\nthe notes say hello\n</mcp_resource>"),
        "{first}"
    );
    assert_eq!(last_user_text(&requests[1]), "Greet Ada, very kindly.");
    assert!(
        run.stderr
            .contains("no resource mem://missing; the message was not sent"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("the prompt needs `who`: /mcp__fake__greet who [how]"),
        "{run:?}"
    );
    assert!(run.stderr.contains("/mcp__fake__nothing"), "{run:?}");
    let said = noted(&notes);
    assert!(said.contains("read mem://notes"), "{said}");
    assert!(
        said.contains(r#"prompt greet {"how": "very kindly", "who": "Ada"}"#),
        "{said}"
    );
    // The stored message holds the resource: the branch stands on its own.
    assert!(
        run.stdout.contains("what is in @fake:mem://notes ?"),
        "{run:?}"
    );
}

#[test]
fn a_one_shot_prompt_attaches_a_resource_and_a_missing_one_sends_nothing() {
    if !python() {
        return;
    }
    let env = Env::new();
    let notes = env.dir.path().join("notes.txt");
    offers_config(&env, &notes);
    let server = Server::start(vec![text(&["summed up"])]);
    let run = env.run(&server.base_url, &["-p", "sum up @fake:mem://notes."], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout.trim(), "summed up", "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{run:?}");
    let messages = requests[0]["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert!(
        user["content"]
            .as_str()
            .unwrap()
            .contains("<mcp_resource server=\"fake\" uri=\"mem://notes\">\nthe notes say hello\n</mcp_resource>"),
        "{user}"
    );
    // A resource the server does not have: said on stderr and in the JSON, nothing sent.
    let run = env.run(
        &server.base_url,
        &[
            "-p",
            "look at @fake:mem://missing",
            "--output-format",
            "json",
        ],
        "",
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(server.requests().len(), 1, "{run:?}");
    assert!(
        run.stderr
            .contains("no resource mem://missing; the message was not sent"),
        "{run:?}"
    );
    let result: serde_json::Value = serde_json::from_str(run.stdout.trim().lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {run:?}"));
    assert!(
        result["error"].as_str().unwrap().contains("@server:uri"),
        "{result}"
    );
}

/// Issue 41 (7): a trusted project's stdio server creates protected names missing at its start
/// (`AGENTS.md`, `.git/hooks/pre-commit` where there was no `.git`, `.claude/settings.json`): no
/// read-only mount covers a name that is not there, so nothing stops it, but the user is told.
/// With no MCP call, as the session ends (`-p`: on stderr, never in the answer); with one, on
/// the call's own line and to the model, and not a second time at the end.
#[test]
fn protected_names_a_project_s_server_plants_are_said() {
    if !python() {
        return;
    }
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5,
            "permissions": [{"tool": "mcp__proj__*", "action": "allow"}]}"#,
    );
    let planted = [
        "AGENTS.md",
        ".git/hooks/pre-commit",
        ".claude/settings.json",
    ];
    fs::write(
        env.work().join(".mcp.json"),
        json!({"mcpServers": {"proj": {
            "command": "python3",
            "args": [fake().display().to_string()],
            "env": {"FAKE_MCP_PLANT": planted.join(",")}
        }}})
        .to_string(),
    )
    .unwrap();
    let unplant = || {
        fs::remove_file(env.work().join("AGENTS.md")).unwrap();
        fs::remove_dir_all(env.work().join(".git")).unwrap();
        fs::remove_dir_all(env.work().join(".claude")).unwrap();
    };

    // -p, the model calls no tool: said when the session ends.
    let server = Server::start(vec![text(&["the answer"])]);
    let run = env.run(&server.base_url, &["--trust-project", "-p", "hello"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stderr.contains("failed"), "{run:?}");
    let said = run
        .stderr
        .lines()
        .find(|l| l.contains("while the MCP servers ran"))
        .unwrap_or_else(|| panic!("not said: {run:?}"));
    for name in planted {
        assert!(env.work().join(name).is_file(), "{name}");
    }
    // Said by the protected name that changed (a folder that was missing, for the files in it).
    let changed = ["AGENTS.md", ".git", ".claude"];
    for name in changed {
        assert!(said.contains(name), "{name}: {said}");
    }
    assert_eq!(run.stdout.trim(), "the answer", "{run:?}");

    // The REPL, an MCP call after the server started: said with the call, and to the model.
    unplant();
    let server = Server::start(vec![
        tool_calls(&[("a", "mcp__proj__echo", r#"{"text":"hi"}"#)]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &[], "go\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let shown = format!("{}{}", run.stdout, run.stderr);
    let line = shown
        .lines()
        .find(|l| l.contains("while the MCP server `proj` ran"))
        .unwrap_or_else(|| panic!("not said with the call: {run:?}"));
    for name in changed {
        assert!(line.contains(name), "{name}: {line}");
    }
    let result = last_result(&server.requests()[1]);
    assert!(result.starts_with("echo: hi"), "{result}");
    let told = result
        .lines()
        .find(|l| l.starts_with("[protected] While the MCP server `proj` ran, "))
        .unwrap_or_else(|| panic!("not told to the model: {result}"));
    for name in changed {
        assert!(told.contains(name), "{name}: {told}");
    }
    assert!(
        !shown.contains("while the MCP servers ran"),
        "said once, not again at the end: {run:?}"
    );

    // Nothing planted: nothing said.
    unplant();
    fs::write(
        env.work().join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": "python3", "args": [fake().display().to_string()]}}})
            .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![
        tool_calls(&[("a", "mcp__proj__echo", r#"{"text":"hi"}"#)]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &["--trust-project", "-p", "go"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stderr.contains("created or replaced"), "{run:?}");
    assert!(!last_result(&server.requests()[1]).contains("[protected]"));
}

/// Under `-p`, a project's `.mcp.json` server whose `env` passes a secret-looking variable does
/// not run even with `--trust-project` (it is confirmed on a terminal only), and `mcp_errors`
/// says so with the reason; a server whose command is not installed is said to be not found.
#[test]
fn held_and_missing_servers_are_in_mcp_errors() {
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": [
            {"name": "gone", "command": "no-such-mcp-server-xyz", "args": ["--stdio"]}]}})
        .to_string(),
    );
    // As GitHub's server is published for Claude Code.
    fs::write(
        env.work().join(".mcp.json"),
        json!({"mcpServers": {"github": {"command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}}}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![text(&["hi"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["--trust-project", "-p", "go", "--output-format", "json"])
        .env("GITHUB_TOKEN", "ghp_notreal");
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let result: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    let errors = result["mcp_errors"].as_array().unwrap();
    let of = |name: &str| {
        errors
            .iter()
            .find(|e| e["server"] == name)
            .and_then(|e| e["error"].as_str())
            .unwrap_or_else(|| panic!("{name} not in {result}"))
            .to_string()
    };
    let held = of("github");
    assert!(
        held.contains("GITHUB_TOKEN") && held.contains("does not run"),
        "{held}"
    );
    let gone = of("gone");
    assert!(
        gone.contains("`no-such-mcp-server-xyz` not found") && !gone.contains("closed"),
        "{gone}"
    );
    assert!(!run.stdout.contains("ghp_notreal") && !run.stderr.contains("ghp_notreal"));
}
