//! One-shot mode for scripts: `--output-format json|stream-json`, the prompt from stdin, and
//! `--continue` with `-p`.

use serde_json::Value;

use crate::support::*;
use std::fs;
#[cfg(not(windows))]
use std::process::Stdio;
#[cfg(not(windows))]
use std::thread;
#[cfg(not(windows))]
use std::time::Duration;

fn one_shot(env: &Env, server: &Server, args: &[&str], stdin: &str) -> Run {
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(args);
    run_with_stdin(cmd, stdin)
}

#[test]
fn json_reports_the_turn_in_one_object() {
    let server = Server::start(vec![
        tool_calls(&[("c1", "list_files", "{}")]),
        text(&["Two ", "files."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "a").unwrap();
    let run = one_shot(
        &env,
        &server,
        &["-p", "what is here?", "--output-format", "json"],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one object on stdout: {run:?}");
    let mut v: Value = serde_json::from_str(lines[0]).unwrap();
    assert!(v["duration_ms"].as_u64().is_some());
    v["duration_ms"] = Value::Null;
    let (id, file) = env.only_conversation();
    let last = file.last().unwrap()["msg_id"].clone();
    assert_eq!(
        v,
        serde_json::json!({
            "type": "result",
            "result": "Two files.",
            "conversation_id": id,
            "node_id": last,
            "model": "gpt-4o-mini",
            "usage": {"input_tokens": 11, "output_tokens": 2},
            "num_rounds": 2,
            "duration_ms": null,
            "is_error": false,
            "tool_calls": [{"name": "list_files", "arguments": "{}", "ok": true}],
            "mcp_errors": [],
        })
    );
    // Human text stays on stderr.
    assert!(run.stderr.contains("→ list_files({})"), "{run:?}");
}

#[test]
fn stream_json_writes_events_as_they_happen_then_the_result() {
    let server = Server::start(vec![
        tool_calls(&[("c1", "read_file", r#"{"filepath":"missing.txt"}"#)]),
        text(&["It ", "is missing."]),
    ]);
    let env = Env::new();
    let run = one_shot(
        &env,
        &server,
        &["-p", "read it", "--output-format", "stream-json"],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "start",
            "tool_call",
            "tool_result",
            "text",
            "text",
            "result"
        ],
        "{run:?}"
    );
    let (id, _) = env.only_conversation();
    assert_eq!(events[0]["conversation_id"], id.as_str());
    assert_eq!(events[1]["name"], "read_file");
    assert_eq!(events[1]["arguments"], r#"{"filepath":"missing.txt"}"#);
    assert_eq!(events[2]["ok"], false);
    assert_eq!(
        (events[3]["text"].as_str(), events[4]["text"].as_str()),
        (Some("It "), Some("is missing."))
    );
    assert_eq!(events[5]["result"], "It is missing.");
    assert_eq!(events[5]["tool_calls"][0]["ok"], false);
}

#[test]
fn errors_in_json_modes_are_json_too() {
    let server = Server::start(vec![Reply::Status(
        401,
        r#"{"error":{"message":"invalid key"}}"#.into(),
    )]);
    let env = Env::new();
    let run = one_shot(&env, &server, &["-p", "hi", "--output-format", "json"], "");
    assert_eq!(run.code, Some(1), "{run:?}");
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["is_error"], true);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("answered 401: invalid key"),
        "{v}"
    );
    assert_eq!(v["result"], "");
    assert_eq!(v["num_rounds"], 0);
    // Bad usage is clap's: exit 2, nothing on stdout.
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work()).args(["--output-format", "json"]);
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty());
}

#[test]
fn the_prompt_can_come_from_stdin_and_a_conversation_can_go_on() {
    let server = Server::start(vec![
        text(&["Looks fine."]),
        text(&["From stdin."]),
        text(&["Still here."]),
    ]);
    let env = Env::new();
    // Piped stdin follows the text after a blank line.
    let run = one_shot(&env, &server, &["-p", "review this"], "-old\n+new\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(server.messages(0)[1].1, "review this\n\n-old\n+new\n");
    // `-p -`: the prompt is stdin.
    let run = one_shot(&env, &server, &["-p", "-"], "the whole prompt\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(server.messages(1)[1].1, "the whole prompt\n");
    let run = one_shot(&env, &server, &["-p", "-"], "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("standard input, which is empty"),
        "{run:?}"
    );
    // `--continue` with `-p` goes on from the latest conversation's last message.
    let run = one_shot(&env, &server, &["-p", "and now?", "--continue"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let sent = server.messages(2);
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert_eq!(sent[1].1, "the whole prompt\n");
    assert_eq!(sent[3].1, "and now?");
    assert_eq!(env.conversation_files().len(), 2);
}

/// `stream-json` reports compactions: here the server refuses the long prompt, `new` compacts
/// and retries.
#[test]
fn stream_json_reports_a_compaction() {
    let server = Server::start(vec![text(&["Short answer."])]);
    server.set_window(2500);
    server.answer_summaries("THE GIST");
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "tools": ["read_file"]}"#);
    let prompt = format!("Read this: {}", "word ".repeat(3000));
    let run = one_shot(
        &env,
        &server,
        &["-p", &prompt, "--output-format", "stream-json"],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let compaction: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(compaction.len(), 2, "{events:?}");
    assert_eq!(compaction[0]["event"], "started");
    assert_eq!(compaction[0]["automatic"], true);
    assert_eq!(compaction[1]["event"], "done");
    assert_eq!(compaction[1]["messages"], 1);
    assert!(compaction[1]["tokens_after"].as_u64() < compaction[1]["tokens_before"].as_u64());
    assert_eq!(events.last().unwrap()["result"], "Short answer.");
}

/// A prompt bigger than the window says so in the JSON result (`prompt_over_window`), not only
/// on stderr: with compaction on, the model was given a summary of the prompt; with it off, the
/// server refused it. A prompt that fits has no such field (the first test's whole object).
#[test]
fn json_says_when_the_prompt_is_bigger_than_the_window() {
    let prompt = format!("Read this: {}", "word ".repeat(3000));
    let tokens = count_tokens(&prompt);
    for compaction in [true, false] {
        let server = Server::start(vec![text(&["Short answer."])]);
        server.set_window(2500);
        server.answer_summaries("THE GIST");
        let env = Env::new();
        env.write_config(&format!(
            r#"{{"retry_initial_ms": 5, "tools": ["read_file"], "compaction": {{"enabled": {compaction}}}}}"#
        ));
        let run = one_shot(
            &env,
            &server,
            &["-p", &prompt, "--output-format", "json"],
            "",
        );
        let v: Value =
            serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {run:?}"));
        let over = &v["prompt_over_window"];
        assert_eq!(over["window"], 2500, "{v}");
        assert_eq!(over["window_from"], "error", "{v}");
        let counted = over["prompt_tokens"].as_u64().unwrap();
        // An estimate (calibrated by what the server counted): near the server's own count.
        assert!(
            counted.abs_diff(tokens) <= tokens / 5,
            "{counted} vs {tokens}: {v}"
        );
        assert_eq!(over["summarized"], compaction, "{v}");
        if compaction {
            assert_eq!(run.code, Some(0), "{run:?}");
            assert_eq!(v["is_error"], false);
            assert_eq!(v["result"], "Short answer.");
        } else {
            assert_eq!(run.code, Some(1), "{run:?}");
            assert_eq!(v["is_error"], true);
            assert!(
                v["error"].as_str().unwrap().contains("context window"),
                "{v}"
            );
        }
    }
}

#[cfg(unix)]
/// Ctrl-C during `-p … > out.txt`: what arrived goes to stdout (the file is not left empty),
/// stderr says it is partial and where it is kept, and the exit code is 130.
#[test]
fn an_interrupted_one_shot_prints_what_arrived() {
    let server = Server::start(vec![Reply::SseStall(
        vec![chunk_text("Partial ans")],
        Duration::from_secs(60),
        vec![chunk_text("never")],
    )]);
    let env = Env::new();
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["-p", "tell me"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    assert!(
        eventually(100, Duration::from_millis(50), || !server
            .requests()
            .is_empty()),
        "the request went out"
    );
    thread::sleep(Duration::from_millis(300));
    // SAFETY: a plain signal to the child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    assert_eq!(stdout, "Partial ans\n");
    let (id, _) = env.only_conversation();
    assert!(
        stderr.contains(&format!(
            "the answer on stdout is partial (interrupted); it is kept in conversation {id}"
        )),
        "{stderr}"
    );
}
