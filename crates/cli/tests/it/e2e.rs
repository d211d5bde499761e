//! End-to-end against a real OpenAI-compatible server (llama.cpp's llama-server with SmolLM2, started
//! by `.ci/run` through ../shared/tools/local-llm.sh). Set NEW_E2E_BASE_URL to its base URL
//! (`http://127.0.0.1:PORT/v1`) to run it; without the variable the test says it was skipped.

use crate::support::*;
use std::env;
use std::fs;
use std::net::TcpStream;
use std::process::Command;
#[cfg(not(windows))]
use std::thread;
#[cfg(not(windows))]
use std::time::Duration;
use std::time::Instant;

fn base_url() -> Option<String> {
    match env::var("NEW_E2E_BASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: set NEW_E2E_BASE_URL to a real OpenAI-compatible server to run this test"
            );
            None
        }
    }
}

#[test]
fn real_server_answers_streams_and_forks() {
    let Some(url) = base_url() else { return };
    let env = Env::new();
    let model = env::var("NEW_E2E_MODEL").unwrap_or_else(|_| "smollm2".into());

    // One shot: a real answer on stdout, stored like any other conversation.
    let mut cmd = env.command(&url);
    cmd.arg(env.work()).arg("default").arg(env.data()).args([
        "--model",
        &model,
        "-p",
        "Say hello in one short sentence.",
    ]);
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.trim().is_empty(), "{run:?}");
    // The status line reports the tokens the server counted.
    assert!(
        run.stderr.contains(&format!("[{model} · ")) && run.stderr.contains(" out · "),
        "usage is reported: {run:?}"
    );
    let (id, lines) = env.only_conversation();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["role"], "assistant");

    // The REPL: reopen it, fork from the first user message, and ask again.
    let run = env.run(
        &url,
        &["--model", &model],
        &format!("/switch {id}\n/1\nName a colour.\n/tree\n"),
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.is_empty(), "{run:?}");
    assert!(run.stdout.contains("├─ [2] assistant:"), "{run:?}");
    assert!(
        run.stdout.contains("└─ [3] user: Name a colour."),
        "{run:?}"
    );
    let lines = read_lines(&env.data().join(format!("{id}.jsonl")));
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[3]["parent_id"], lines[1]["msg_id"]);
}

/// Against the LiteLLM proxy's `/v1/messages` of ../shared/tools/local-anthropic.sh: set
/// NEW_E2E_ANTHROPIC_URL (the host root) and NEW_E2E_ANTHROPIC_KEY to run it.
#[test]
fn real_anthropic_format_server_answers_and_continues() {
    let (Ok(url), Ok(key)) = (
        env::var("NEW_E2E_ANTHROPIC_URL"),
        env::var("NEW_E2E_ANTHROPIC_KEY"),
    ) else {
        eprintln!("skipped: set NEW_E2E_ANTHROPIC_URL and NEW_E2E_ANTHROPIC_KEY to run this test");
        return;
    };
    let env = Env::new();
    let command = |extra: &[&str]| {
        let mut cmd = env.command("");
        cmd.env_remove("OPENAI_BASE_URL")
            .env("ANTHROPIC_BASE_URL", &url)
            .env("ANTHROPIC_API_KEY", &key)
            .arg(env.work())
            .arg("default")
            .arg(env.data())
            .args(["--provider", "anthropic", "--model", "claude-local"])
            .args(extra);
        cmd
    };
    let run = run_with_stdin(command(&["-p", "Say hello in one short sentence."]), "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.trim().is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("[claude-local · ") && run.stderr.contains(" out · "),
        "{run:?}"
    );

    // A second turn on the same conversation maps the stored history into a valid request.
    let run = run_with_stdin(command(&["--continue"]), "Now say goodbye.\n/tree\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.is_empty(), "{run:?}");
    assert!(run.stdout.contains("[3] user: Now say goodbye."), "{run:?}");
    // The answer follows; a long first answer from the small model may have made the second
    // request overflow the proxy's window, and then a summary node stands between them.
    let after = run
        .stdout
        .split("[3] user: Now say goodbye.")
        .nth(1)
        .unwrap_or_default();
    assert!(
        after.contains("[4] assistant:")
            || (after.contains("[4] summary of") && after.contains("[5] assistant:")),
        "{run:?}"
    );
}

/// Against a llama-server with a small window (`NEW_LLM_CTX=4096 local-llm.sh start`; set
/// NEW_E2E_SMALL_CTX_URL to its base URL): a conversation that grows past the window keeps
/// working, and the file shows the summary node.
#[test]
fn real_server_with_a_small_window_compacts_and_goes_on() {
    let Ok(url) = env::var("NEW_E2E_SMALL_CTX_URL") else {
        eprintln!(
            "skipped: set NEW_E2E_SMALL_CTX_URL to a llama-server started with NEW_LLM_CTX=4096"
        );
        return;
    };
    let env = Env::new();
    // Seven notes of about 500 tokens each: the window fills by the fifth.
    let colours = ["red", "green", "blue", "amber", "violet", "grey", "white"];
    let input: String = (1..=7)
        .map(|i| {
            let facts: String = (1..=80)
                .map(|k| format!("Box {k} holds {} marbles. ", colours[(i * k) % 7]))
                .collect();
            format!("Note {i}: {facts}Which colour is in box 3? Answer in five words.\n")
        })
        .collect();
    let run = env.run(
        &url,
        &["--model", "smollm2"],
        &format!("{input}/context\n/tree\n"),
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    // Every question was answered: no request failed.
    assert!(!run.stderr.contains("error"), "{run:?}");
    assert_eq!(run.stdout.matches("[smollm2 · ").count(), 7, "{run:?}");
    assert!(run.stdout.contains("compacted "), "{run:?}");
    // The window came from the server (or its error), not from a guess.
    assert!(
        run.stdout.contains("(reported by the server)")
            || run
                .stdout
                .contains("(named by the server's context-overflow error)"),
        "{run:?}"
    );
    assert!(run.stdout.contains(" summary of ["), "{run:?}");
    let (_, lines) = env.only_conversation();
    let summaries: Vec<_> = lines
        .iter()
        .filter(|l| l.get("summary").is_some())
        .collect();
    assert!(!summaries.is_empty(), "{lines:?}");
    for s in summaries {
        assert_eq!(s["role"], "user");
        assert!(s["summary"]["replaces"].is_string());
        assert!(!s["content"].as_str().unwrap().trim().is_empty());
    }
    // Every note is still in the file.
    for i in 1..=7 {
        let note = format!("Note {i}: ");
        assert!(
            lines
                .iter()
                .any(|l| l["content"].as_str().is_some_and(|c| c.starts_with(&note))),
            "{note}"
        );
    }
}

/// A turn against the real server completes while the memory review runs in the background, and
/// `new` leaves at once, without waiting for the review in flight.
#[test]
fn real_server_turn_completes_with_a_review_in_the_background_and_exit_does_not_wait() {
    let Some(url) = base_url() else { return };
    let env = Env::new();
    let started = Instant::now();
    let run = env.run(
        &url,
        &["--model", "smollm2"],
        "Remember that I like short answers. Say OK.\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.is_empty(), "{run:?}");
    assert!(run.stdout.contains("[smollm2 · "), "{run:?}");
    // The review was asked for: its request is still running, or it ended; either way nothing
    // half-written is left behind.
    let elapsed = started.elapsed();
    eprintln!("turn and exit took {elapsed:?}");
    let memory = env.data().join("memory");
    if memory.exists() {
        for entry in fs::read_dir(&memory).unwrap() {
            let name = entry.unwrap().file_name();
            assert!(!name.to_string_lossy().ends_with(".tmp"), "{name:?}");
        }
    }
}

/// The `explore` role run through `-p` against the real server: it answers (with read tools
/// only: the folder is unchanged), and its conversation is stored under its role.
#[test]
fn real_server_runs_an_explore_subagent_through_p() {
    let Some(url) = base_url() else { return };
    let env = Env::new();
    fs::write(env.work().join("notes.txt"), "the needle is here\n").unwrap();
    let run = env.run(
        &url,
        &[
            "--model",
            "smollm2",
            "--agent",
            "explore",
            "-p",
            "Which file mentions the needle? Answer in one sentence.",
        ],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = env.only_conversation();
    assert_eq!(lines[0]["metadata"]["agent"], "explore");
    assert_eq!(lines.last().unwrap()["role"], "assistant", "{lines:?}");
    // Whatever the model tried, nothing but the read tools ran: the folder is as it was.
    let names: Vec<String> = fs::read_dir(env.work())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names, ["notes.txt"]);
}

/// Sends a request body to the real server without streaming (plain HTTP/1.1 over a socket) and
/// turns its answer into a scripted reply: its text, or the tool calls it made.
fn forward_to(base_url: &str, body: &serde_json::Value) -> Reply {
    use std::io::{Read, Write};
    let rest = base_url.trim_start_matches("http://");
    let (host, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let mut body = body.clone();
    body["stream"] = serde_json::json!(false);
    body.as_object_mut().unwrap().remove("stream_options");
    let payload = body.to_string();
    let mut socket = TcpStream::connect(host).unwrap();
    write!(
        socket,
        "POST /{prefix}/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )
    .unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).unwrap();
    let (_, json) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("a JSON answer");
    let message = &value["choices"][0]["message"];
    let calls: Vec<(String, String, String)> = message["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    (
                        c["id"].as_str().unwrap_or("call").to_string(),
                        c["function"]["name"].as_str().unwrap_or("").to_string(),
                        c["function"]["arguments"]
                            .as_str()
                            .unwrap_or("{}")
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if calls.is_empty() {
        text(&[message["content"].as_str().unwrap_or("")])
    } else {
        let calls: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        tool_calls(&calls)
    }
}

/// A subagent on its own thread against the real server: the parent is scripted, the subagent's
/// requests (as `new` builds them, tools and all) go to llama-server and its answers come back
/// as the parent's tool result, with the stored conversation linked to the parent.
#[test]
fn a_subagent_s_requests_are_answered_by_the_real_server() {
    let Some(url) = base_url() else { return };
    let env = Env::new();
    fs::write(env.work().join("notes.txt"), "the needle is here\n").unwrap();
    let server = Server::start(vec![
        tool_calls(&[(
            "c1",
            "agent",
            r#"{"role":"explore","task":"Say in one sentence what a needle is.","max_turns":2}"#,
        )]),
        text(&["Done."]),
    ]);
    let lane: Vec<Reply> = (0..4)
        .map(|_| {
            let url = url.clone();
            with(move |body| forward_to(&url, body))
        })
        .collect();
    server.answer_subagents(lane);
    let run = env.run(
        &server.base_url,
        &["--model", "smollm2", "--permission-mode", "permissive"],
        "ask the explorer\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let parent = server
        .requests()
        .into_iter()
        .rfind(|r| !system_of(r).starts_with(SUBAGENT_START))
        .unwrap();
    let result = last_result(&parent);
    eprintln!("the subagent answered: {result}");
    assert!(!result.starts_with("Error"), "{result}");
    assert!(
        result.contains("(subagent explore · conversation "),
        "{result}"
    );
    let files = env.conversation_files();
    assert_eq!(files.len(), 2);
    let sub = files
        .iter()
        .map(|p| read_lines(p))
        .find(|lines| lines[0]["metadata"]["agent"] == "explore")
        .expect("the subagent's conversation");
    assert_eq!(sub[0]["metadata"]["parent"]["tool_call_id"], "c1");
    assert_eq!(sub.last().unwrap()["role"], "assistant", "{sub:?}");
}

/// The MCP project's reference servers, started by `../shared/tools/mcp-servers.sh` (set
/// NEW_E2E_MCP to that script, and NEW_E2E_MCP_HTTP to the URL of `everything` over streamable
/// HTTP): tools listed and called over stdio and HTTP, results of several kinds, an error result,
/// and a server command that does not exist. The model is the scripted server.
#[test]
fn real_mcp_servers_list_and_answer_tools_over_stdio_and_http() {
    let (Ok(script), Ok(http)) = (env::var("NEW_E2E_MCP"), env::var("NEW_E2E_MCP_HTTP")) else {
        eprintln!("skipped: set NEW_E2E_MCP and NEW_E2E_MCP_HTTP to run this test");
        return;
    };
    let command = |name: &str| -> Vec<String> {
        let out = Command::new("bash")
            .args([script.as_str(), "command", name])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "inside the allowed folder\n").unwrap();
    let entry = |name: &str, mut words: Vec<String>| {
        let program = words.remove(0);
        serde_json::json!({"name": name, "command": program, "args": words})
    };
    let mut filesystem = command("filesystem");
    filesystem.push(env.work().display().to_string());
    let servers = serde_json::json!([
        entry("everything", command("everything")),
        entry("time", command("time")),
        entry("filesystem", filesystem),
        {"name": "web", "type": "http", "url": http},
        {"name": "missing", "command": "/nonexistent/mcp-server"},
    ]);
    env.write_config(
        &serde_json::json!({
            "retry_initial_ms": 5,
            "permissions": [{"tool": "mcp__*", "action": "allow"}],
            "mcp": {"servers": servers},
        })
        .to_string(),
    );
    let outside = format!("{}/../secret.txt", env.work().display());
    fs::write(env.dir.path().join("secret.txt"), "no").unwrap();
    let read_inside = format!(r#"{{"path":"{}/a.txt"}}"#, env.work().display());
    let read_outside = format!(r#"{{"path":"{outside}"}}"#);
    let server = Server::start(vec![
        tool_calls(&[
            ("a", "mcp__everything__echo", r#"{"message":"hello mcp"}"#),
            ("b", "mcp__everything__get-tiny-image", "{}"),
            ("c", "mcp__time__get_current_time", r#"{"timezone":"UTC"}"#),
            ("d", "mcp__filesystem__read_text_file", &read_inside),
            ("e", "mcp__filesystem__read_text_file", &read_outside),
            ("f", "mcp__web__echo", r#"{"message":"over http"}"#),
            ("g", "mcp__everything__get-sum", r#"{"a":2,"b":3}"#),
        ]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &[], "go\n/mcp\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let tools: Vec<String> = server.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    for name in [
        "mcp__everything__echo",
        "mcp__time__get_current_time",
        "mcp__filesystem__read_text_file",
        "mcp__web__echo",
    ] {
        assert!(tools.iter().any(|t| t == name), "{name}: {tools:?}");
    }
    let got = results(&server, 1);
    assert!(got[0].contains("hello mcp"), "{got:?}");
    assert!(got[1].contains("\n[image image/png, "), "{got:?}");
    assert!(got[2].contains("UTC"), "{got:?}");
    assert_eq!(got[3], "inside the allowed folder\n");
    assert!(got[4].starts_with("Error: "), "{got:?}");
    assert!(got[5].contains("over http"), "{got:?}");
    assert!(got[6].contains('5'), "{got:?}");
    for row in [
        "everything (user): ready",
        "time (user): ready",
        "filesystem (user): ready",
        "web (user): ready",
        "missing (user): failed: `/nonexistent/mcp-server` not found",
    ] {
        assert!(run.stdout.contains(row), "{row}: {run:?}");
    }
}

#[cfg(unix)]
/// The reference `everything` server (NEW_E2E_MCP as above): a long-running call interrupted with
/// Ctrl-C ends the call at once and the turn goes on to the next message; the server killed while
/// `new` runs is started again.
#[test]
fn a_real_mcp_server_s_long_call_is_interrupted_and_a_killed_server_comes_back() {
    use std::io::Write;
    let Ok(script) = env::var("NEW_E2E_MCP") else {
        eprintln!("skipped: set NEW_E2E_MCP to run this test");
        return;
    };
    let out = Command::new("bash")
        .args([script.as_str(), "command", "everything"])
        .output()
        .unwrap();
    let mut words: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let program = words.remove(0);
    let env = Env::new();
    env.write_config(
        &serde_json::json!({
            "retry_initial_ms": 5,
            "permissions": [{"tool": "mcp__*", "action": "allow"}],
            "mcp": {"servers": [{"name": "everything", "command": program, "args": words}]},
        })
        .to_string(),
    );
    let server = Server::start(vec![
        tool_calls(&[(
            "a",
            "mcp__everything__trigger-long-running-operation",
            r#"{"duration":30,"steps":30}"#,
        )]),
        text(&["still here"]),
    ]);
    let mut child = env.spawn(&server.base_url);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    // The server's process: a child of `new` running server-everything.
    let server_pid = || -> Option<i32> {
        fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid: u32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = fs::read_to_string(e.path().join("cmdline")).ok()?;
            (ppid == child.id() && cmdline.contains("server-everything")).then_some(pid)
        })
    };
    thread::sleep(Duration::from_secs(4));
    let first = server_pid().expect("the server runs");
    let started = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // Killed while `new` runs: started again after a second.
    thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(first, libc::SIGKILL) };
    let mut again = None;
    eventually(50, Duration::from_millis(200), || {
        again = server_pid().filter(|p| *p != first);
        again.is_some()
    });
    // Its handshake done (node starts in about a second), the next turn and `/mcp` see it.
    thread::sleep(Duration::from_secs(3));
    stdin.write_all(b"still there?\n/mcp\n").unwrap();
    thread::sleep(Duration::from_secs(2));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(again.is_some(), "not started again: {stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(25));
    assert!(
        stdout.contains("stopped by the user while it ran"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("everything (user): ready"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("still here"), "{stdout}\n{stderr}");
    // Its progress notifications were shown, one line each.
    assert!(stderr.contains("  … everything: "), "{stderr}");
}
