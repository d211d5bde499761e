//! The program's own log (`~/.local/state/new/new.log`): requests, retries, tool calls and hooks
//! are there in names, timings and counts; the key, the user's words, a tool's arguments and
//! output are not, even at `NEW_LOG=trace`. `NEW_LOG=off` makes no file, and a log that cannot
//! be written stops nothing.

use crate::support::*;
use serde_json::json;
use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

const KEY: &str = "sk-test-SECRET-1234";
const MESSAGE: &str = "my words PLUM-MESSAGE-TEXT stay mine";

fn log_file(env: &Env) -> PathBuf {
    env.dir.path().join("home/.local/state/new/new.log")
}

#[test]
fn the_log_has_requests_tools_and_hooks_and_nothing_secret_at_trace() {
    let env = Env::new();
    // The scripted MCP server, where python3 runs it.
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures_mcp/fake_mcp.py");
    let notes = env.dir.path().join("notes.txt");
    let servers = match python {
        true => json!([{"name": "fake", "command": "python3", "args": [fake],
                        "env": {"FAKE_MCP_NOTES": notes}, "timeout": 5}]),
        false => json!([]),
    };
    env.write_config(
        &json!({"retry_initial_ms": 5, "mcp": {"servers": servers}, "hook": {"entries": [
            {"name": "watch-tools", "event": "pre_tool_use",
             "action": {"command": "cat > /dev/null; echo HOOK-OUTPUT-TEXT"}},
            {"name": "no-rm", "event": "pre_tool_use",
             "condition": {"field": "tool_input.command", "op": "contains", "value": "rm "},
             "action": {"command": "echo 'HOOK-REASON-TEXT' >&2; exit 2"}},
        ]}})
        .to_string(),
    );
    let server = Server::start(vec![
        // A server that echoes the key and the message back in its error: the retry is logged
        // by its status alone.
        Reply::Status(
            503,
            json!({"error": {"message": format!("overloaded; you sent {KEY} and {MESSAGE}")}})
                .to_string(),
        ),
        tool_calls(&[
            ("c1", "bash", r#"{"command":"echo TOOL-ARGUMENT-TEXT"}"#),
            ("c2", "bash", r#"{"command":"rm -rf TOOL-ARGUMENT-TEXT"}"#),
        ]),
        text(&["ANSWER-TEXT done"]),
    ]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["--permission-mode", "permissive"])
        .env("OPENAI_API_KEY", KEY)
        .env("NEW_LOG", "trace");
    let run = run_with_stdin(cmd, &format!("{MESSAGE}\n"));
    assert_eq!(run.code, Some(0), "{run:?}");
    // The key went to the server, so a leak would have had something to leak.
    let auth = server.headers()[0]["authorization"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(auth, format!("Bearer {KEY}"));
    assert!(results(&server, 2)[0].contains("TOOL-ARGUMENT-TEXT"));

    let log = fs::read_to_string(log_file(&env)).expect("the log file");
    for secret in [
        KEY,
        "SECRET",
        "PLUM-MESSAGE-TEXT",
        "TOOL-ARGUMENT-TEXT",
        "HOOK-OUTPUT-TEXT",
        "HOOK-REASON-TEXT",
        "ANSWER-TEXT",
        "Bearer",
        "authorization",
    ] {
        assert!(!log.contains(secret), "{secret} is in the log:\n{log}");
    }
    // Only `new`'s own events: an HTTP library's trace output may print headers.
    for line in log.lines() {
        assert!(
            [" new_core", " new_cli", " new_sys"]
                .iter()
                .any(|own| line.contains(own)),
            "another crate's line: {line}"
        );
    }
    let has = |words: &[&str]| log.lines().any(|l| words.iter().all(|w| l.contains(w)));
    assert!(has(&["new started", "version=\"0.1.0\""]), "{log}");
    assert!(
        has(&["configured", "provider=\"openai\"", "model="]),
        "{log}"
    );
    assert!(has(&["session start"]) && has(&["session end"]), "{log}");
    // Each request's body is written from the last one: the first afresh; the retry copies its
    // messages (the tools described after them are written each time), and so does the next
    // round, which writes the answer and the results after them.
    let field = |line: &str, name: &str| -> usize {
        let start = line.find(&format!("{name}=")).expect(name) + name.len() + 1;
        line[start..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let bodies: Vec<(usize, usize)> = log
        .lines()
        .filter(|l| l.contains("request body"))
        .map(|l| (field(l, "bytes"), field(l, "copied")))
        .collect();
    assert!(bodies.len() >= 3, "{log}");
    assert_eq!(bodies[0].1, 0, "{log}");
    assert_eq!(bodies[1].0, bodies[0].0, "{log}");
    assert!(
        bodies[1].1 > MESSAGE.len() && bodies[1].1 < bodies[1].0,
        "{log}"
    );
    assert_eq!(bodies[2].1, bodies[1].1, "{log}");
    assert!(bodies[2].0 > bodies[1].0, "{log}");
    assert!(
        has(&["llm retry", "reason=\"http 503\"", "wait_ms="]),
        "{log}"
    );
    assert!(
        has(&["llm request", "status=\"ok\"", "retries=1", "tool_calls=2"]),
        "{log}"
    );
    assert!(
        has(&[
            "llm request",
            "status=\"ok\"",
            "input_tokens=11",
            "output_tokens=1"
        ]),
        "{log}"
    );
    assert!(
        has(&["tool call", "tool=\"bash\"", "outcome=\"ok\"", "ms="]),
        "{log}"
    );
    assert!(
        has(&[
            "hook ran",
            "hook=\"watch-tools\"",
            "event=\"pre_tool_use\"",
            "kind=\"command\"",
            "code=0"
        ]),
        "{log}"
    );
    assert!(
        has(&["tool call", "tool=\"bash\"", "outcome=\"denied\""]),
        "{log}"
    );
    assert!(has(&["hook ran", "hook=\"no-rm\"", "code=2"]), "{log}");
    if python {
        assert!(
            has(&[
                "mcp server starting",
                "server=\"fake\"",
                "transport=\"stdio\""
            ]),
            "{log}"
        );
        assert!(
            has(&["mcp server connected", "server=\"fake\"", "tools="]),
            "{log}"
        );
        assert!(has(&["mcp server stopped", "server=\"fake\""]), "{log}");
    }
}

#[test]
fn new_log_off_makes_no_file_and_an_unwritable_log_stops_nothing() {
    let env = Env::new();
    let server = Server::start(vec![text(&["one"]), text(&["two"]), text(&["three"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .env("NEW_LOG", "off");
    let run = run_with_stdin(cmd, "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!log_file(&env).exists());
    assert!(!env.dir.path().join("home/.local/state/new").exists());

    // The log's folder cannot be made (a file stands where it goes): the session runs, and says
    // so once only when a log was asked for.
    fs::create_dir_all(env.dir.path().join("home/.local/state")).unwrap();
    fs::write(env.dir.path().join("home/.local/state/new"), "in the way").unwrap();
    let run = env.run(&server.base_url, &[], "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("two"), "{run:?}");
    assert!(!run.stderr.contains("log"), "{run:?}");
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .env("NEW_LOG", "debug");
    let run = run_with_stdin(cmd, "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("three"), "{run:?}");
    assert_eq!(
        run.stderr.matches("cannot write the log").count(),
        1,
        "{run:?}"
    );
}
