//! `new import claude|codex|pi PATH…` through the binary, on files in the documented shapes
//! (`tests/fixtures/import/`, see its README): each becomes a conversation with its tree, its
//! tool calls and results, that `/list` shows with its origin and a turn continues.

use crate::support::*;
use serde_json::Value;
use std::fs;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::fs::File;
use std::path::PathBuf;
use std::process::Command;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::process::Stdio;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::thread;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
}

fn import(env: &Env, args: &[&str]) -> Run {
    let mut cmd = env.command("http://127.0.0.1:9/v1");
    cmd.arg("import")
        .args(args)
        .arg("--workdir")
        .arg(env.work())
        .arg("--datadir")
        .arg(env.data());
    run_with_stdin(cmd, "")
}

/// The one conversation that is not a subagent's: its lines.
fn main_lines(env: &Env) -> (String, Vec<Value>) {
    env.conversation_files()
        .into_iter()
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                read_lines(&p),
            )
        })
        .find(|(_, lines)| lines[0]["metadata"].get("parent").is_none())
        .expect("a main conversation")
}

fn messages(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["type"] == "message").collect()
}

#[test]
fn a_claude_code_transcript_imports_with_its_tree_its_tools_and_its_subagent() {
    let env = Env::new();
    let run = import(&env, &["claude", fixture("claude.jsonl").to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("messages from Claude Code"), "{run:?}");
    assert!(
        run.stdout.contains("with 1 subagent conversation"),
        "{run:?}"
    );
    assert!(run.stderr.contains("line 14 could not be read"), "{run:?}");
    let (id, lines) = main_lines(&env);
    assert_eq!(lines[0]["metadata"]["imported"]["from"], "claude");
    let msgs = messages(&lines);
    // user, the merged answer, two results, the answer, two user messages (a fork).
    assert_eq!(msgs.len(), 7, "{msgs:#?}");
    let answer = msgs[1];
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["content"], "Let me read it.");
    assert_eq!(answer["reasoning"], "Look at the test first.");
    assert_eq!(answer["model"], "claude-sonnet-4-5");
    let calls = answer["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["function"]["name"], "read_file");
    assert_eq!(calls[1]["function"]["name"], "agent");
    assert_eq!(msgs[2]["tool_call_id"], "toolu_1");
    assert_eq!(msgs[3]["tool_call_id"], "toolu_2");
    assert_eq!(msgs[3]["parent_id"], msgs[2]["msg_id"]);
    // The isMeta note is left out: the answer follows the results.
    assert_eq!(msgs[4]["parent_id"], msgs[3]["msg_id"]);
    assert_eq!(msgs[5]["parent_id"], msgs[4]["msg_id"]);
    assert_eq!(msgs[6]["parent_id"], msgs[4]["msg_id"]);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "title"
                && l["title"] == "(Claude Code) Fix the failing parser test")
    );
    // The sidechain: a subagent conversation under the Task call.
    let side: Vec<Value> = env
        .conversation_files()
        .into_iter()
        .map(|p| read_lines(&p))
        .find(|l| l[0]["metadata"].get("parent").is_some())
        .expect("the subagent's conversation");
    assert_eq!(side[0]["metadata"]["parent"]["conversation"], id);
    assert_eq!(side[0]["metadata"]["parent"]["tool_call_id"], "toolu_2");
    assert_eq!(messages(&side).len(), 2);
    // Imported once: a second time says so and writes nothing.
    let again = import(&env, &["claude", fixture("claude.jsonl").to_str().unwrap()]);
    assert!(
        again.stdout.contains("was imported already, as"),
        "{again:?}"
    );
    assert_eq!(env.conversation_files().len(), 2);
    // `/list` shows it with its origin; a turn continues it with the whole history, valid.
    let server = Server::start(vec![text(&["Done."])]);
    let run = env.run(
        &server.base_url,
        &["--resume", &id],
        "/list\n/tree\nand now?\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("(Claude Code) Fix the failing parser test"),
        "{run:?}"
    );
    let sent = messages_of(&server.requests()[0]);
    let roles: Vec<&str> = sent.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "user"
        ],
        "{sent:?}"
    );
    assert_eq!(sent[6].1, "Actually, fix the test instead.");
    assert_eq!(sent[7].1, "and now?");
}

#[test]
fn a_codex_rollout_and_a_pi_session_import() {
    let env = Env::new();
    let run = import(&env, &["codex", fixture("codex.jsonl").to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = main_lines(&env);
    let msgs = messages(&lines);
    let shown: Vec<(&str, &str)> = msgs
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(shown[0], ("user", "How many lines does wc.py have?"));
    assert_eq!(shown[1].0, "assistant");
    assert_eq!(msgs[1]["tool_calls"][0]["function"]["name"], "shell");
    assert_eq!(msgs[1]["reasoning"], "**Counting lines**");
    assert_eq!(msgs[1]["model"], "gpt-5-codex");
    assert_eq!(shown[2].0, "tool");
    assert!(shown[2].1.contains("42 wc.py"), "{shown:?}");
    assert_eq!(shown[3], ("assistant", "wc.py has 42 lines."));
    assert_eq!(shown[4], ("user", "Thanks."));
    assert_eq!(msgs.len(), 5);

    let env = Env::new();
    let run = import(&env, &["pi", fixture("pi.jsonl").to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = main_lines(&env);
    let msgs = messages(&lines);
    assert_eq!(msgs.len(), 7, "{msgs:#?}");
    // The model change passes its child on: the answer hangs on the user message.
    assert_eq!(msgs[1]["parent_id"], msgs[0]["msg_id"]);
    assert_eq!(
        msgs[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"command":"ls"}"#
    );
    assert_eq!(msgs[2]["tool_call_id"], "call_ls");
    // Two branches under the second answer: the first question, and the summary's.
    let second = &msgs[3]["msg_id"];
    let children: Vec<&&Value> = msgs.iter().filter(|m| &m["parent_id"] == second).collect();
    assert_eq!(children.len(), 2, "{msgs:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "branch" && l["name"] == "b-route")
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "title" && l["title"] == "(pi) Look at the files")
    );
    // Not a history of the kind named: said, nothing written.
    let run = import(&env, &["claude", fixture("codex.jsonl").to_str().unwrap()]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("holds no message of Claude Code's history"),
        "{run:?}"
    );
    assert_eq!(env.conversation_files().len(), 1);
}

/// Newer Claude Code keeps each subagent's work in `<session>/subagents/agent-*.jsonl`: a folder
/// of them imports the session first and each agent's file as a subagent conversation under it
/// (never "imported already" for the session). Calls without ids get ids of their own; a FIFO
/// is refused, not waited on.
#[test]
fn a_claude_project_folder_with_subagent_files_and_odd_inputs() {
    let env = Env::new();
    let dir = env.dir.path().join("claude-project");
    let session = "5e55ion0-0000-4000-8000-000000000002";
    fs::create_dir_all(dir.join(session).join("subagents")).unwrap();
    let line = |v: Value| v.to_string() + "\n";
    fs::write(
        dir.join(format!("{session}.jsonl")),
        line(serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": session,
            "isSidechain": false, "message": {"role": "user", "content": "Explore it."}}))
            + &line(serde_json::json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": session,
            "isSidechain": false, "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}})),
    )
    .unwrap();
    fs::write(
        dir.join(session).join("subagents/agent-abc.jsonl"),
        line(serde_json::json!({"type": "user", "uuid": "s1", "parentUuid": null, "sessionId": session,
            "agentId": "abc", "isSidechain": true, "message": {"role": "user", "content": "Look around."}}))
            + &line(serde_json::json!({"type": "assistant", "uuid": "s2", "parentUuid": "s1", "sessionId": session,
            "agentId": "abc", "isSidechain": true, "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "Looked."}]}})),
    )
    .unwrap();
    let run = import(&env, &["claude", dir.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout.matches("imported /").count(), 2, "{run:?}");
    assert!(!run.stdout.contains("imported already"), "{run:?}");
    let (id, _) = main_lines(&env);
    let side: Vec<Value> = env
        .conversation_files()
        .into_iter()
        .map(|p| read_lines(&p))
        .find(|l| l[0]["metadata"].get("parent").is_some())
        .expect("the agent's file as a subagent conversation");
    assert_eq!(side[0]["metadata"]["parent"]["conversation"], id);
    assert_eq!(messages(&side)[1]["content"], "Looked.");

    // Codex calls written without ids: each gets its own, and its result follows it.
    let env = Env::new();
    let codex = env.dir.path().join("old.jsonl");
    let item = |p: Value| line(serde_json::json!({"type": "response_item", "payload": p}));
    fs::write(
        &codex,
        item(serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Two calls."}]}))
            + &item(serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{}"}))
            + &item(serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{}"}))
            + &item(serde_json::json!({"type": "function_call_output", "output": "first"}))
            + &item(serde_json::json!({"type": "function_call_output", "output": "second"})),
    )
    .unwrap();
    let run = import(&env, &["codex", codex.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = main_lines(&env);
    let msgs = messages(&lines);
    let calls = msgs[1]["tool_calls"].as_array().unwrap();
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    assert!(!calls[0]["id"].as_str().unwrap().is_empty());
    assert_eq!(msgs[2]["tool_call_id"], calls[0]["id"]);
    assert_eq!(msgs[3]["tool_call_id"], calls[1]["id"]);

    let fifo = env.dir.path().join("pipe.jsonl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let run = import(&env, &["pi", fifo.to_str().unwrap()]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stderr.contains("not a regular file"), "{run:?}");
}

/// A hostile transcript: control characters in its title and messages never reach the terminal
/// raw (`/list`, `/tree` escape them), and a path with them is shown escaped.
#[test]
fn a_hostile_transcript_s_escapes_never_reach_the_terminal() {
    let env = Env::new();
    let file = env.dir.path().join("evil\x1b[2J.jsonl");
    let line = |v: Value| v.to_string() + "\n";
    fs::write(
        &file,
        line(serde_json::json!({"type": "summary", "summary": "title \u{1b}]0;owned\u{7} \u{1b}[31mred"}))
            + &line(serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null,
                "sessionId": "s-evil", "message": {"role": "user", "content": "hi \u{1b}[2J there"}})),
    )
    .unwrap();
    let run = import(&env, &["claude", file.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.contains('\x1b'), "{run:?}");
    let (id, _) = main_lines(&env);
    let server = Server::start(vec![]);
    let run = env.run(&server.base_url, &["--resume", &id], "/list\n/tree\n");
    assert!(
        !run.stdout.contains('\x1b') && !run.stdout.contains('\x07'),
        "{run:?}"
    );
    assert!(run.stdout.contains("(Claude Code) title"), "{run:?}");
}

/// Issue 41 (10), as written: a rollout with a 400 MB line in the middle imports the rest,
/// says which line it left out and why, and never holds the line (its peak memory stays far
/// below the line's size; it reached 2 GB).
#[cfg(target_os = "linux")]
#[test]
fn a_400_mb_line_is_left_out_said_and_never_held() {
    use std::io::{Seek, SeekFrom, Write};
    let env = Env::new();
    let fixture = fs::read_to_string(fixture("codex.jsonl")).unwrap();
    let lines: Vec<&str> = fixture.lines().collect();
    let path = env.dir.path().join("huge.jsonl");
    let mut file = File::create(&path).unwrap();
    file.write_all(lines[0].as_bytes()).unwrap();
    file.write_all(b"\n").unwrap();
    // 400 MB of a line without its end, as a hole (no disk used): NUL bytes when read.
    file.seek(SeekFrom::Current(400 << 20)).unwrap();
    file.write_all(b"\n").unwrap();
    for line in &lines[1..] {
        file.write_all(line.as_bytes()).unwrap();
        file.write_all(b"\n").unwrap();
    }
    drop(file);
    let mut cmd = env.command("http://127.0.0.1:9/v1");
    cmd.arg("import")
        .arg("codex")
        .arg(&path)
        .arg("--workdir")
        .arg(env.work())
        .arg("--datadir")
        .arg(env.data())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = fs::read_to_string(&status)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("line 2 longer than 32 MB; left out unread"),
        "{stderr}"
    );
    assert!(peak_kb < 200 * 1024, "peak {peak_kb} kB");
    let (_, lines) = main_lines(&env);
    assert_eq!(messages(&lines).len(), 5);
}

/// Claude Code 2.1's shapes: the session's `Agent` call whose result says
/// `toolUseResult.agentId` holds the subagent file `subagents/agent-<id>.jsonl` under it; a
/// compact boundary (`parentUuid: null`, `logicalParentUuid`) continues its branch instead of
/// starting one at the root; and an old file without parent links is a line, in order.
#[test]
fn claude_code_2_1_subagents_compact_boundaries_and_old_files() {
    let env = Env::new();
    let dir = env.dir.path().join("claude-project");
    let session = "5e55ion0-0000-4000-8000-000000000021";
    fs::create_dir_all(dir.join(session).join("subagents")).unwrap();
    let line = |v: Value| v.to_string() + "\n";
    let entry = |kind: &str, uuid: &str, parent: Value, message: Value| {
        line(
            serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": parent,
            "sessionId": session, "isSidechain": false, "message": message}),
        )
    };
    fs::write(
        dir.join(format!("{session}.jsonl")),
        entry("user", "u1", Value::Null, serde_json::json!({"role": "user", "content": "Explore it."}))
            + &entry("assistant", "a1", "u1".into(), serde_json::json!({"id": "m1", "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_01", "name": "Agent",
                    "input": {"description": "look", "prompt": "Look around.", "subagent_type": "Explore"}}]}))
            + &line(serde_json::json!({"type": "user", "uuid": "r1", "parentUuid": "a1", "sessionId": session,
                "isSidechain": false, "toolUseResult": {"status": "completed", "agentId": "a7f3c2e", "totalTokens": 12},
                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                    "content": [{"type": "text", "text": "It is a Rust workspace."}]}]}}))
            + &entry("assistant", "a2", "r1".into(), serde_json::json!({"id": "m2", "role": "assistant",
                "content": [{"type": "text", "text": "A Rust workspace."}]}))
            + &line(serde_json::json!({"type": "system", "subtype": "compact_boundary", "uuid": "cb",
                "parentUuid": null, "logicalParentUuid": "a2", "sessionId": session,
                "content": "Conversation compacted", "compactMetadata": {"trigger": "auto", "preTokens": 150000}}))
            + &entry("user", "u2", "cb".into(), serde_json::json!({"role": "user", "content": "Go on."})),
    )
    .unwrap();
    fs::write(
        dir.join(session).join("subagents/agent-a7f3c2e.jsonl"),
        line(serde_json::json!({"type": "user", "uuid": "s1", "parentUuid": null, "sessionId": session,
            "agentId": "a7f3c2e", "isSidechain": true, "message": {"role": "user", "content": "Look around."}}))
            + &line(serde_json::json!({"type": "assistant", "uuid": "s2", "parentUuid": "s1", "sessionId": session,
            "agentId": "a7f3c2e", "isSidechain": true, "message": {"id": "m9", "role": "assistant",
                "content": [{"type": "text", "text": "Looked."}]}})),
    )
    .unwrap();
    let run = import(&env, &["claude", dir.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let (id, lines) = main_lines(&env);
    let msgs = messages(&lines);
    let call = msgs
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .expect("the Agent call");
    let side: Vec<Value> = env
        .conversation_files()
        .into_iter()
        .map(|p| read_lines(&p))
        .find(|l| l[0]["metadata"].get("parent").is_some())
        .expect("the agent's file as a subagent conversation");
    let parent = &side[0]["metadata"]["parent"];
    assert_eq!(parent["conversation"], id);
    assert_eq!(parent["msg_id"], call["msg_id"], "{parent}");
    assert_eq!(parent["tool_call_id"], "toolu_01", "{parent}");
    // After the compact boundary: a child of the answer before it, not of the root.
    let answer = msgs
        .iter()
        .find(|m| m["content"] == "A Rust workspace.")
        .unwrap();
    let go_on = msgs.iter().find(|m| m["content"] == "Go on.").unwrap();
    assert_eq!(go_on["parent_id"], answer["msg_id"]);

    // An old file: no `parentUuid` anywhere; its entries are chained in order.
    let env = Env::new();
    let old = env.dir.path().join("old-claude.jsonl");
    fs::write(
        &old,
        line(serde_json::json!({"type": "user", "uuid": "o1", "sessionId": "old", "message": {"role": "user", "content": "First."}}))
            + &line(serde_json::json!({"type": "assistant", "uuid": "o2", "sessionId": "old", "message": {"role": "assistant", "content": "Reply."}}))
            + &line(serde_json::json!({"type": "user", "uuid": "o3", "sessionId": "old", "message": {"role": "user", "content": "Second."}})),
    )
    .unwrap();
    let run = import(&env, &["claude", old.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = main_lines(&env);
    let msgs = messages(&lines);
    assert_eq!(msgs.len(), 3, "{lines:?}");
    assert_eq!(msgs[1]["parent_id"], msgs[0]["msg_id"]);
    assert_eq!(msgs[2]["parent_id"], msgs[1]["msg_id"]);
}
