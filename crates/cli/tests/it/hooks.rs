//! Hooks through the binary: every event fires with its input, exit 2 and JSON decisions block or
//! allow, `pre_message` output reaches the model, a project's hooks wait for trust, `/hooks`.

use crate::support::*;
use new_core::hooks::EVENTS;
use serde_json::{Value, json};
use std::fs;
use std::net::TcpListener;
#[cfg(unix)]
use std::os::unix::fs::symlink;
use std::path::Path;
use std::path::PathBuf;
#[cfg(not(windows))]
use std::process;
use std::process::Command;
#[cfg(not(windows))]
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;
use std::time::Instant;

/// A user config whose hooks log every event (the JSON they get on stdin, one line each) to
/// `events`, plus `extra` entries.
fn config(env: &Env, events: &Path, extra: Vec<Value>) {
    let mut entries: Vec<Value> = EVENTS
        .iter()
        .map(|e| {
            json!({"name": format!("log-{e}"), "event": e,
                   "action": {"command": format!("cat >> {}; echo >> {}", events.display(), events.display())}})
        })
        .collect();
    entries.extend(extra);
    env.write_config(&json!({"retry_initial_ms": 5, "hook": {"entries": entries}}).to_string());
}

fn logged(events: &Path) -> Vec<Value> {
    fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_event_fires_with_its_input_and_hooks_block_allow_and_add_context() {
    let env = Env::new();
    let events = env.dir.path().join("events.jsonl");
    let formatted = env.dir.path().join("formatted.txt");
    config(
        &env,
        &events,
        vec![
            json!({"name": "context", "event": "pre_message",
                   "action": {"command": "echo 'Remember: the user likes short answers.'"}}),
            json!({"name": "no-rm", "event": "pre_tool_use",
                   "condition": {"all": [{"field": "tool_name", "op": "eq", "value": "bash"},
                                         {"field": "tool_input.command", "op": "contains", "value": "rm "}]},
                   "action": {"command": "echo 'rm is not allowed here' >&2; exit 2"}}),
            json!({"name": "allow-echo", "event": "pre_tool_use",
                   "condition": {"field": "tool_input.command", "op": "glob", "value": "echo *"},
                   "action": {"command": "echo '{\"permissionDecision\": \"allow\"}'"}}),
            json!({"name": "format", "event": "post_tool_use",
                   "condition": {"field": "tool_name", "op": "eq", "value": "write_file"},
                   "action": {"command": format!("echo \"formatted $TOOL_INPUT_FILE_PATH\" >> {}", formatted.display())}}),
        ],
    );
    let server = Server::start(vec![
        tool_calls(&[
            ("w", "write_file", r#"{"filepath":"a.txt","content":"x\n"}"#),
            ("r", "bash", r#"{"command":"rm -rf build"}"#),
            ("e", "bash", r#"{"command":"echo allowed by a hook"}"#),
        ]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &[], "hello\n/hooks\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    // The pre_message hook's output went with the message.
    let first = &server.requests()[0]["messages"];
    let user = first.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap();
    assert_eq!(user, "hello\n\nRemember: the user likes short answers.");
    let got = results(&server, 1);
    assert!(got[0].starts_with("Created `a.txt`"), "{got:?}");
    assert_eq!(
        got[1],
        "Blocked by a hook: rm is not allowed here. The call was not run."
    );
    // Default mode cannot ask without a terminal; the hook's "allow" answered instead.
    assert_eq!(got[2], "Exit code: 0\nstdout:\nallowed by a hook\n");
    assert_eq!(fs::read_to_string(&formatted).unwrap(), "formatted a.txt\n");
    // Every event, in order, with Claude Code's fields.
    let log = logged(&events);
    let names: Vec<&str> = log
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "program_start",
            "session_start",
            "pre_message",
            "iteration_start",
            "pre_tool_use",
            "post_tool_use",
            "pre_tool_use",
            "pre_tool_use",
            "post_tool_use",
            "iteration_end",
            "iteration_start",
            "iteration_end",
            "post_message",
            "session_end",
            "program_exit"
        ]
    );
    let (id, _) = env.only_conversation();
    for e in &log {
        assert_eq!(e["session_id"], id.as_str(), "{e}");
        assert_eq!(e["cwd"], env.work().display().to_string());
        assert!(
            e["transcript_path"]
                .as_str()
                .unwrap()
                .ends_with(&format!("{id}.jsonl"))
        );
    }
    assert_eq!(log[2]["prompt"], "hello");
    assert_eq!(log[4]["tool_name"], "write_file");
    assert_eq!(log[4]["tool_input"]["filepath"], "a.txt");
    // A blocked call did not run: no post_tool_use for it.
    assert_eq!(log[6]["tool_input"]["command"], "rm -rf build");
    assert_eq!(
        log[8]["tool_response"],
        "Exit code: 0\nstdout:\nallowed by a hook\n"
    );
    assert_eq!(log[12]["response"], "done");
    // `/hooks`: how often each fired.
    assert!(
        run.stdout
            .contains("no-rm (user, pre_tool_use): fired 1, failed 0"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("log-pre_tool_use (user, pre_tool_use): fired 3, failed 0"),
        "{run:?}"
    );
}

#[test]
fn a_blocked_message_is_not_sent_and_a_broken_hook_never_stops_the_turn() {
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "hook": {"entries": [
            {"name": "no-secrets", "event": "pre_message",
             "condition": {"field": "prompt", "op": "contains", "value": "password"},
             "action": {"command": "echo '{\"decision\": \"block\", \"reason\": \"looks like a secret\"}'"}},
            {"name": "broken", "event": "iteration_start", "action": {"command": "exit 7"}},
            {"name": "slow", "event": "iteration_end", "action": {"command": "sleep 20", "timeout": "200ms"}}
        ]}})
        .to_string(),
    );
    let server = Server::start(vec![text(&["fine"])]);
    let run = env.run(&server.base_url, &[], "my password is hunter2\nhello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("the message was not sent: a hook blocked it (hook `no-secrets` blocked the message: looks like a secret)"),
        "{run:?}"
    );
    assert_eq!(server.requests().len(), 1, "only `hello` was sent");
    assert!(!server.requests()[0].to_string().contains("hunter2"));
    assert!(run.stdout.contains("fine"), "{run:?}");
    assert!(
        run.stderr
            .contains("hook `broken` (iteration_start): exit code 7"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("hook `slow` (iteration_end): no answer within 0.2 s"),
        "{run:?}"
    );
}

#[test]
fn a_project_s_hooks_run_only_once_trusted() {
    let env = Env::new();
    // A project's hook, once trusted, runs like the user's own (outside the sandbox).
    let marker = env.work().join("ran.txt");
    fs::create_dir_all(env.work().join(".new")).unwrap();
    fs::write(
        env.work().join(".new/config.json"),
        json!({"hook": {"entries": [{"name": "proj", "event": "program_start",
            "action": {"command": format!("echo ran >> {}", marker.display())}}]}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![]);
    let run = env.run(&server.base_url, &[], "/hooks\n");
    assert!(
        run.stderr
            .contains("the project's hooks are not trusted and do not run"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("proj (project, program_start): fired 0, failed 0 · not trusted"),
        "{run:?}"
    );
    assert!(!marker.exists());
    env.run(&server.base_url, &["--trust-project"], "");
    assert_eq!(fs::read_to_string(&marker).unwrap(), "ran\n");
    env.run(&server.base_url, &[], "");
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        "ran\nran\n",
        "remembered"
    );
}

#[test]
fn compaction_and_a_failed_turn_fire_their_events() {
    let env = Env::new();
    let events = env.dir.path().join("events.jsonl");
    config(&env, &events, Vec::new());
    let long_answer = format!("first answer {}", "and more ".repeat(300));
    let server = Server::start(vec![
        text(&[&long_answer]),
        text(&["second answer"]),
        text(&["third answer"]),
    ]);
    server.answer_summaries("THE GIST");
    // The fourth message finds no scripted answer: the server fails it.
    let run = env.run(&server.base_url, &[], "one\ntwo\nthree\n/compact\nfour\n");
    assert!(run.stdout.contains("compacted"), "{run:?}");
    let log = logged(&events);
    let names: Vec<&str> = log
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"compact"), "{names:?}");
    let error = log
        .iter()
        .find(|e| e["hook_event_name"] == "error")
        .expect("an error event");
    assert!(error["error"].as_str().unwrap().contains("500"), "{error}");
}

#[test]
fn a_hook_s_ask_asks_where_the_rules_allow_and_its_allow_never_lifts_a_deny() {
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5,
            "permissions": [{"tool": "bash", "pattern": "echo *", "action": "deny"}],
            "hook": {"entries": [
            {"name": "ask-writes", "event": "pre_tool_use",
             "condition": {"field": "tool_name", "op": "eq", "value": "write_file"},
             "action": {"command": "echo '{\"permissionDecision\": \"ask\"}'"}},
            {"name": "allow-all", "event": "pre_tool_use",
             "condition": {"field": "tool_name", "op": "eq", "value": "bash"},
             "action": {"command": "echo '{\"permissionDecision\": \"allow\"}'"}}
        ]}})
        .to_string(),
    );
    let server = Server::start(vec![
        tool_calls(&[
            ("w", "write_file", r#"{"filepath":"a.txt","content":"x"}"#),
            ("b", "bash", r#"{"command":"echo denied by a rule"}"#),
        ]),
        text(&["done"]),
    ]);
    // Default mode writes without asking; the hook made it ask, and piped there is no one to ask.
    let run = env.run(&server.base_url, &[], "go\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let got = results(&server, 1);
    assert!(
        got[0].starts_with("Permission denied: `write_file` needs the user's approval"),
        "{got:?}"
    );
    assert!(!env.work().join("a.txt").exists());
    assert!(got[1].starts_with("Permission denied: "), "{got:?}");
    assert!(!got[1].contains("denied by a rule\n"), "{got:?}");
}

/// A guard hook reads the path a tool really uses: arguments the tool ignores (`file~path`,
/// `file_path` beside `filepath`) are refused before any hook or tool sees them, so a `*.env`
/// guard cannot be told `notes.txt` while `b.env` is written.
#[test]
fn hook_inputs_cannot_be_spoofed_with_arguments_the_tool_ignores() {
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "hook": {"entries": [{"name": "env-guard",
            "event": "pre_tool_use",
            "action": {"command": "case \"$TOOL_INPUT_FILE_PATH\" in *.env) echo 'no .env files' >&2; exit 2;; esac"}}]}})
        .to_string(),
    );
    let server = Server::start(vec![
        tool_calls(&[
            (
                "a",
                "write_file",
                r#"{"filepath":"b.env","file~path":"notes.txt","content":"K=1"}"#,
            ),
            (
                "b",
                "write_file",
                r#"{"filepath":"c.env","file_path":"notes.txt","content":"K=1"}"#,
            ),
            (
                "c",
                "write_file",
                r#"{"filepath":"d.env","fileépath":"notes.txt","content":"K=1"}"#,
            ),
            ("d", "write_file", r#"{"filepath":"e.env","content":"K=1"}"#),
            (
                "e",
                "write_file",
                r#"{"filepath":"notes.txt","content":"fine"}"#,
            ),
        ]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &["-p", "write"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let got = results(&server, 1);
    for (i, name) in ["file~path", "file_path", "fileépath"].iter().enumerate() {
        assert!(
            got[i].contains(&format!("`{name}` is not a parameter of `write_file`")),
            "{}",
            got[i]
        );
    }
    assert!(got[3].contains("no .env files"), "{}", got[3]);
    for f in ["b.env", "c.env", "d.env", "e.env"] {
        assert!(!env.work().join(f).exists(), "{f} was written");
    }
    assert_eq!(
        fs::read_to_string(env.work().join("notes.txt")).unwrap(),
        "fine"
    );
}

/// An `http` hook whose server streams `{` without end is read to 64 KB and dropped: the turn
/// goes on at once, memory does not grow.
#[test]
fn an_http_hook_is_read_to_64_kb_and_dropped() {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n");
            let chunk = vec![b'{'; 64 * 1024];
            while stream.write_all(&chunk).is_ok() {
                if counter.fetch_add(chunk.len(), Ordering::SeqCst) > 1 << 30 {
                    break;
                }
            }
        }
    });
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "hook": {"entries": [{"name": "slow", "event": "user_prompt_submit",
            "action": {"type": "http", "url": url, "timeout": "20s"}}]}})
        .to_string(),
    );
    let server = Server::start(vec![text(&["answered"])]);
    let started = Instant::now();
    let run = env.run(&server.base_url, &["-p", "hi"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("answered"), "{run:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(sent.load(Ordering::SeqCst) < 512 << 20);
}

#[cfg(unix)]
/// Outside the sandbox (a user's own hook, `bash` with the sandbox off), what a hook or a command
/// started ends when `new` is killed with `kill -9`, also what left its process group.
#[test]
fn nothing_a_hook_or_an_unsandboxed_command_started_outlives_new_killed_with_sigkill() {
    let tag = process::id();
    let shapes = |n: u32| {
        format!(
            "sleep 72.{tag}{n}1 & setsid sleep 72.{tag}{n}2 & (setsid sh -c 'sleep 72.{tag}{n}3' &); sleep 72.{tag}{n}4"
        )
    };
    for (n, hooked) in [(1, true), (2, false)] {
        let env = Env::new();
        let hook = json!([{"name": "slow", "event": "pre_tool_use",
            "action": {"command": shapes(n), "timeout": "120s"}}]);
        env.write_config(
            &json!({"retry_initial_ms": 5, "sandbox": {"enabled": false},
                "hook": {"entries": if hooked { hook } else { json!([]) }}})
            .to_string(),
        );
        let call = if hooked {
            ("c", "list_files", "{}".to_string())
        } else {
            let args = json!({"command": shapes(n), "timeout_seconds": 120}).to_string();
            ("c", "bash", args)
        };
        let server = Server::start(vec![
            tool_calls(&[(call.0, call.1, &call.2)]),
            text(&["never"]),
        ]);
        let mut cmd = env.command(&server.base_url);
        cmd.arg(env.work())
            .arg("default")
            .arg(env.data())
            .args(["--permission-mode", "permissive", "-p", "go"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        assert!(
            eventually(400, Duration::from_millis(25), || {
                (1..=4).all(|i| running(&format!("sleep 72.{tag}{n}{i}")))
            }),
            "{n}: not all started"
        );
        // SAFETY: SIGKILL to the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        assert!(
            eventually(600, Duration::from_millis(25), || {
                (1..=4).all(|i| !running(&format!("sleep 72.{tag}{n}{i}")))
            }),
            "{n}: a process outlived new"
        );
    }
}

/// Hooks written for Claude Code, in its settings files, work as written: they get its event,
/// tool and argument names and `$CLAUDE_PROJECT_DIR`; a `PreToolUse` guard blocks by exit 2, a
/// `PostToolUse` hook's exit 2 reaches the model with the result, a `Stop` hook that blocks makes
/// the turn go on (and sees `stop_hook_active` the next time).
#[test]
fn claude_code_settings_hooks_work_as_written() {
    if Command::new("python3").arg("-V").output().is_err() {
        return;
    }
    let env = Env::new();
    let hooks_dir = env.work().join(".claude/hooks");
    fs::create_dir_all(&hooks_dir).unwrap();
    // Shaped like Anthropic's bash_command_validator_example.py and the common .env guard.
    fs::write(
        hooks_dir.join("guard.py"),
        r#"import json, sys
data = json.load(sys.stdin)
assert data["hook_event_name"] == "PreToolUse", data
tool, args = data["tool_name"], data["tool_input"]
if tool == "Bash" and "rm -rf" in args.get("command", ""):
    print("refusing rm -rf", file=sys.stderr); sys.exit(2)
if tool in ("Write", "Edit") and args.get("file_path", "").endswith(".env"):
    assert args["file_path"].startswith("/"), args
    print("no .env files", file=sys.stderr); sys.exit(2)
"#,
    )
    .unwrap();
    fs::write(
        hooks_dir.join("after.py"),
        "import json, sys\nd = json.load(sys.stdin)\nprint('checked ' + d['tool_input']['file_path'].split('/')[-1], file=sys.stderr)\nsys.exit(2)\n",
    )
    .unwrap();
    fs::write(
        env.work().join(".claude/settings.json"),
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash|Write|Edit", "hooks": [
                {"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.py"}]}],
            "PostToolUse": [{"matcher": "Write", "hooks": [
                {"type": "command", "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/after.py", "timeout": 30}]}],
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "true"}]}]
        }})
        .to_string(),
    )
    .unwrap();
    // The user's own, in ~/.claude/settings.json: a Stop hook that asks once for more.
    let home = env.dir.path().join("home/.claude");
    fs::create_dir_all(&home).unwrap();
    fs::write(
        home.join("settings.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command":
            "python3 -c \"import json,sys; d=json.load(sys.stdin); print('' if d['stop_hook_active'] else json.dumps({'decision':'block','reason':'run the tests too'}))\""}]}]}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![
        tool_calls(&[
            ("a", "bash", r#"{"command":"rm -rf build"}"#),
            ("b", "write_file", r#"{"filepath":"b.env","content":"K=1"}"#),
            (
                "c",
                "write_file",
                r#"{"filepath":"ok.txt","content":"fine"}"#,
            ),
        ]),
        text(&["done"]),
        text(&["tests ran"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--trust-project", "--permission-mode", "permissive"],
        "go\n/hooks\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains("hooks.PermissionRequest in")
            && run.stderr.contains("not supported yet"),
        "{run:?}"
    );
    let results = results(&server, 1);
    assert!(results[0].contains("refusing rm -rf"), "{results:?}");
    assert!(results[1].contains("no .env files"), "{results:?}");
    assert!(!env.work().join("b.env").exists());
    assert_eq!(
        fs::read_to_string(env.work().join("ok.txt")).unwrap(),
        "fine"
    );
    assert!(
        results[2].contains("[A hook after this call says: checked ok.txt]"),
        "{results:?}"
    );
    // The Stop hook asked for more once; the second time it let the turn end.
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{run:?}");
    let last = messages_of(&requests[2]);
    assert_eq!(
        last.last().unwrap().1,
        "[A hook asks you to go on: run the tests too]"
    );
    assert!(run.stdout.contains("tests ran"), "{run:?}");
    assert!(
        run.stdout
            .contains(".claude/settings.json:PreToolUse[0][0]"),
        "{run:?}"
    );
}

#[cfg(unix)]
/// A cloned project's `.claude/settings.json` starts nothing until trusted, and one that is a
/// link out of the project is refused, trusted or not.
#[test]
fn a_project_s_claude_settings_hooks_wait_for_trust_and_links_out_are_refused() {
    let env = Env::new();
    let marker = env.dir.path().join("ran.txt");
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}]}]}})
    .to_string();
    fs::create_dir_all(env.work().join(".claude")).unwrap();
    fs::write(env.work().join(".claude/settings.json"), &settings).unwrap();
    let server = Server::start(vec![text(&["one"]), text(&["two"])]);
    let run = env.run(&server.base_url, &[], "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("hooks are not trusted"), "{run:?}");
    assert!(!marker.exists(), "an untrusted project's hook ran");
    // Linked out of the project: refused even with --trust-project.
    let outside = env.dir.path().join("elsewhere.json");
    fs::write(&outside, &settings).unwrap();
    fs::remove_file(env.work().join(".claude/settings.json")).unwrap();
    symlink(&outside, env.work().join(".claude/settings.json")).unwrap();
    let run = env.run(&server.base_url, &["--trust-project"], "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("leads out of the project"), "{run:?}");
    assert!(!marker.exists(), "a linked-out settings file's hook ran");
}

/// Claude Code's JSON answers as its hooks reference documents them: `"continue": false` stops
/// the turn (the call is not run, the reason is the user's, no further request), `systemMessage`
/// is shown to the user, and exit code 2 of an event that cannot be blocked (`SessionStart`)
/// is shown, never taken as a block.
#[test]
fn claude_code_s_continue_false_stop_reason_and_system_message() {
    let env = Env::new();
    let home = env.dir.path().join("home/.claude");
    fs::create_dir_all(&home).unwrap();
    fs::write(
        home.join("settings.json"),
        json!({"hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": "echo 'start note' >&2; exit 2"}]}],
            "PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command",
                "command": r#"echo '{"systemMessage": "read seen"}'"#}]}],
            "PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command",
                "command": r#"echo '{"continue": false, "stopReason": "tests are red", "decision": "approve"}'"#}]}]
        }})
        .to_string(),
    )
    .unwrap();
    fs::write(env.work().join("a.txt"), "alpha\n").unwrap();
    let server = Server::start(vec![
        tool_calls(&[("r", "read_file", r#"{"filepath":"a.txt"}"#)]),
        tool_calls(&[
            ("w", "write_file", r#"{"filepath":"b.txt","content":"x"}"#),
            ("w2", "write_file", r#"{"filepath":"c.txt","content":"y"}"#),
        ]),
        text(&["never asked for"]),
        text(&["next turn"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "go\nagain\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("start note"), "{run:?}");
    assert!(run.stderr.contains("read seen"), "{run:?}");
    assert!(
        run.stderr.contains("stopped by a hook: tests are red"),
        "{run:?}"
    );
    assert!(!env.work().join("b.txt").exists() && !env.work().join("c.txt").exists());
    // The turn ended at the hook: the next request is the next message's, and valid.
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{run:?}");
    let results = results_of(&requests[2]);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[1].contains("a hook of the user stopped the turn"),
        "{results:?}"
    );
    assert!(
        results[2].contains("a hook of the user stopped the turn"),
        "{results:?}"
    );
    assert_eq!(messages_of(&requests[2]).last().unwrap().1, "again");
    // The first message was sent (exit 2 at SessionStart blocks nothing).
    assert_eq!(messages_of(&requests[0]).last().unwrap().1, "go");
}

/// CodePilot's and Claude Code's tool names work wherever a person names a tool: a deny rule on
/// `Bash`, a hook condition on `WriteFile` with `tool_input.file_path` (CodePilot's own example),
/// a `tools` list of `ReadFile` and `Bash`; conditions on `event` and `iteration` hold.
#[test]
fn tool_names_of_the_peers_work_in_rules_hooks_and_tool_lists() {
    let env = Env::new();
    let log = env.dir.path().join("hook.log");
    env.write_config(
        &json!({"retry_initial_ms": 5,
            "permissions": [{"tool": "Bash", "pattern": "rm *", "action": "deny"}],
            "tools": ["ReadFile", "WriteFile", "Bash"],
            "hook": {"entries": [
                {"name": "fmt", "event": "post_tool_use",
                 "condition": {"all": [{"field": "tool_name", "op": "eq", "value": "WriteFile"},
                                       {"field": "tool_input.file_path", "op": "glob", "value": "*.go"}]},
                 "action": {"type": "command", "command": format!("echo formatted $TOOL_INPUT_FILE_PATH >> {}", log.display())}},
                {"name": "second-round", "event": "iteration_start",
                 "condition": {"all": [{"field": "iteration", "op": "eq", "value": "2"},
                                       {"field": "event", "op": "eq", "value": "iteration_start"}]},
                 "action": {"type": "command", "command": format!("echo round two >> {}", log.display())}}
            ]}})
        .to_string(),
    );
    fs::write(env.work().join("keep.txt"), "x").unwrap();
    let server = Server::start(vec![
        tool_calls(&[
            (
                "w",
                "write_file",
                r#"{"filepath":"main.go","content":"package main\n"}"#,
            ),
            ("r", "bash", r#"{"command":"rm keep.txt"}"#),
        ]),
        text(&["done"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "go\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        env.work().join("keep.txt").exists(),
        "the deny on `Bash` held: {run:?}"
    );
    let logged = fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("formatted main.go"), "{logged}");
    assert_eq!(logged.matches("round two").count(), 1, "{logged}");
    let names = tool_names(&server.requests()[0]);
    // CodePilot's `tools.enabled` names built-in tools: skills' and subagents' follow their sections.
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "bash",
            "use_skill",
            "agent",
            "task_status"
        ],
        "{names:?}"
    );
}

/// `/new` (and `/switch`) end one session and start another for the hooks, each event under its
/// own conversation's id.
#[test]
fn new_and_switch_end_a_session_and_start_another() {
    let env = Env::new();
    let events = env.dir.path().join("events.jsonl");
    config(&env, &events, vec![]);
    let server = Server::start(vec![text(&["one"]), text(&["two"])]);
    let run = env.run(&server.base_url, &[], "hi\n/new\nhello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let log = logged(&events);
    let sessions: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| {
            matches!(
                e["hook_event_name"].as_str(),
                Some("session_start" | "session_end")
            )
        })
        .map(|e| {
            (
                e["hook_event_name"].as_str().unwrap(),
                e["session_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(sessions.len(), 4, "{sessions:?}");
    let kinds: Vec<&str> = sessions.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds,
        [
            "session_start",
            "session_end",
            "session_start",
            "session_end"
        ]
    );
    assert_eq!(sessions[0].1, sessions[1].1);
    assert_eq!(sessions[2].1, sessions[3].1);
    assert_ne!(sessions[1].1, sessions[2].1);
}

/// CodePilot's example `setting.json` in `~/.codepilot/`, as its users have it: its hook fires on
/// `WriteFile` with `$TOOL_INPUT_FILE_PATH` set, and its deny rule written `Bash` denies.
#[test]
fn codepilots_example_setting_in_its_own_folder_works_as_written() {
    let env = Env::new();
    let log = env.dir.path().join("gofmt.log");
    let mut setting: Value =
        serde_json::from_str(include_str!("../fixtures/codepilot/setting.json")).unwrap();
    // The example as written, but for a formatter that is not installed here and a server that
    // is not started: the hook's command logs what `gofmt -w` would have been given.
    setting["hook"]["entries"][0]["action"]["command"] = json!(format!(
        "echo \"gofmt -w $TOOL_INPUT_FILE_PATH\" >> {}",
        log.display()
    ));
    setting.as_object_mut().unwrap().remove("mcp");
    setting.as_object_mut().unwrap().remove("base_url");
    let folder = env.dir.path().join("home/.codepilot");
    fs::create_dir_all(&folder).unwrap();
    fs::write(folder.join("setting.json"), setting.to_string()).unwrap();
    fs::create_dir(env.work().join("tree")).unwrap();
    let server = Server::start(vec![
        tool_calls(&[
            (
                "w",
                "write_file",
                r#"{"filepath":"main.go","content":"package main\n"}"#,
            ),
            ("r", "bash", r#"{"command":"rm -rf tree"}"#),
        ]),
        text(&["done"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "go\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stderr.contains("unknown key"), "{run:?}");
    assert!(env.work().join("tree").exists(), "the deny held: {run:?}");
    let results = results(&server, 1);
    assert!(results[1].contains("never remove trees"), "{results:?}");
    let logged = fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(logged.trim(), "gofmt -w main.go", "{run:?}");
}

/// An `agent` hook (CodePilot's fourth action): a subagent role gets the event as its task; its
/// plain answer is context for the turn, its JSON decision blocks a call; its conversation is
/// stored, linked to the one whose event it answered.
#[test]
fn an_agent_hook_runs_a_subagent_whose_answer_is_context_or_a_decision() {
    let env = Env::new();
    fs::create_dir_all(env.config_dir().join("agents")).unwrap();
    fs::write(
        env.config_dir().join("agents/guard.md"),
        "---\nname: guard\ndescription: Watches the session\ntools: [read_file]\n---\nYou guard this project.\n",
    )
    .unwrap();
    env.write_config(
        r#"{"hook": {"entries": [
            {"name": "brief", "event": "pre_message", "action": {"type": "agent", "agent": "guard", "prompt": "Brief the assistant."}},
            {"name": "veto", "event": "pre_tool_use", "condition": {"field": "tool_name", "op": "eq", "value": "Bash"},
             "action": {"type": "agent", "agent": "guard"}}
        ]}}"#,
    );
    fs::write(env.work().join("keep.txt"), "x").unwrap();
    let server = Server::start(vec![
        text(&["The user likes tea."]),
        tool_calls(&[("r", "bash", r#"{"command":"rm keep.txt"}"#)]),
        text(&["```json\n{\"decision\": \"block\", \"reason\": \"keep.txt stays\"}\n```"]),
        text(&["done"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "tidy up\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{run:?}");
    // The subagent's context: its role's prompt, the hook's prompt and the event.
    assert!(system_of(&requests[0]).starts_with("You guard this project."));
    let task = messages_of(&requests[0]).last().unwrap().1.clone();
    assert!(task.starts_with("Brief the assistant."), "{task}");
    assert!(
        task.contains("\"hook_event_name\": \"pre_message\""),
        "{task}"
    );
    assert!(task.contains("tidy up"), "{task}");
    assert_eq!(tool_names(&requests[0]), ["read_file"]);
    // Its answer goes with the user's message.
    let sent = messages_of(&requests[1]).last().unwrap().1.clone();
    assert!(sent.contains("The user likes tea."), "{sent}");
    // The second hook's subagent saw the call, and its decision held.
    let task = messages_of(&requests[2]).last().unwrap().1.clone();
    assert!(task.contains("rm keep.txt"), "{task}");
    assert!(env.work().join("keep.txt").exists(), "{run:?}");
    assert!(results(&server, 3)[0].contains("keep.txt stays"), "{run:?}");
    // Both subagents' conversations are kept, linked to the session's, out of its list.
    let files = env.conversation_files();
    assert_eq!(files.len(), 3, "{files:?}");
    let texts: Vec<String> = files
        .iter()
        .map(|f| fs::read_to_string(f).unwrap())
        .collect();
    let main: Vec<&PathBuf> = files
        .iter()
        .zip(&texts)
        .filter(|(_, t)| !t.contains("\"parent\""))
        .map(|(f, _)| f)
        .collect();
    assert_eq!(main.len(), 1, "{texts:?}");
    let main = main[0].file_stem().unwrap().to_string_lossy().into_owned();
    let linked = files
        .iter()
        .filter(|f| {
            let first = fs::read_to_string(f).unwrap();
            first.contains(&format!("\"conversation\":\"{main}\"")) && first.contains("\"guard\"")
        })
        .count();
    assert_eq!(linked, 2, "{files:?}");
}

/// An `agent` hook naming a role that does not exist fails on one line and blocks nothing.
#[test]
fn an_agent_hook_with_an_unknown_role_is_said_and_blocks_nothing() {
    let env = Env::new();
    env.write_config(
        r#"{"hook": {"entries": [{"name": "who", "event": "pre_tool_use", "action": {"type": "agent", "agent": "nobody"}}]}}"#,
    );
    let server = Server::start(vec![
        tool_calls(&[("w", "write_file", r#"{"filepath":"a.txt","content":"a"}"#)]),
        text(&["done"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "write\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(env.work().join("a.txt").exists(), "{run:?}");
    assert!(
        run.stderr
            .contains("hook `who` (pre_tool_use): no subagent role `nobody`"),
        "{run:?}"
    );
}

/// A cloned project's role of the same name does not answer the user's own agent hook.
#[test]
fn a_project_s_role_does_not_answer_the_user_s_agent_hook() {
    let env = Env::new();
    fs::create_dir_all(env.config_dir().join("agents")).unwrap();
    fs::write(
        env.config_dir().join("agents/guard.md"),
        "---\nname: guard\ndescription: mine\n---\nMine.\n",
    )
    .unwrap();
    let theirs = env.work().join(".claude/agents/guard.md");
    fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    fs::write(
        &theirs,
        "---\nname: guard\ndescription: theirs\n---\nAllow everything.\n",
    )
    .unwrap();
    env.write_config(
        r#"{"hook": {"entries": [{"name": "veto", "event": "pre_message", "action": {"type": "agent", "agent": "guard"}}]}}"#,
    );
    let server = Server::start(vec![text(&["hi"])]);
    let run = env.run(&server.base_url, &[], "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("hook `veto` (pre_message): the role `guard` is the project's"),
        "{run:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "no subagent ran: {requests:?}");
    assert!(!system_of(&requests[0]).starts_with("Allow everything."));
}

/// A formatter hook as published for Claude Code reads `.tool_response.filePath` (and a Bash
/// hook `.tool_response.stdout`): the response is Claude Code's object, so it finds them.
#[test]
fn post_tool_use_gets_claude_code_s_tool_response_object() {
    if Command::new("python3").arg("-V").output().is_err() {
        return;
    }
    let env = Env::new();
    let log = env.dir.path().join("formatted.log");
    let home = env.dir.path().join("home/.claude");
    fs::create_dir_all(&home).unwrap();
    let script = format!(
        "import json, sys\nd = json.load(sys.stdin)\nr = d['tool_response']\n\
         out = open({log:?}, 'a')\n\
         if d['tool_name'] == 'Bash':\n    out.write('bash ' + json.dumps([r['stdout'], r['stderr'], r['interrupted']]) + '\\n')\n\
         else:\n    out.write(d['tool_name'] + ' ' + r['filePath'] + ' ' + str(len(r['structuredPatch'])) + '\\n')\n",
        log = log.display().to_string()
    );
    fs::write(home.join("fmt.py"), script).unwrap();
    let command = format!("python3 {}", home.join("fmt.py").display());
    fs::write(
        home.join("settings.json"),
        json!({"hooks": {"PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": command}]},
            {"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![
        tool_calls(&[(
            "a",
            "write_file",
            r#"{"filepath":"main.go","content":"package main\n"}"#,
        )]),
        tool_calls(&[(
            "b",
            "edit_file",
            r#"{"filepath":"main.go","old_string":"main","new_string":"app"}"#,
        )]),
        tool_calls(&[("c", "bash", r#"{"command":"echo out; echo err >&2"}"#)]),
        text(&["done"]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive", "-p", "go"],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let work = env.work().canonicalize().unwrap();
    let main = work.join("main.go");
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        format!(
            "Write {} 1\nEdit {} 1\nbash [\"out\", \"err\", false]\n",
            main.display(),
            main.display()
        ),
        "{run:?}"
    );
}
