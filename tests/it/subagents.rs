//! Subagents through the binary: a defined subagent with a narrowed tool list, a fork that carries
//! the parent's branch, bad calls answered without starting anything, no recursion, the stored
//! conversation and its link to the parent, `/agents`.

use crate::support::*;
use serde_json::Value;

/// The conversation files other than `parent`, parsed.
fn others(env: &Env, parent: &str) -> Vec<Vec<Value>> {
    env.conversation_files()
        .into_iter()
        .filter(|p| !p.ends_with(format!("{parent}.jsonl")))
        .map(|p| read_lines(&p))
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_defined_subagent_works_in_its_own_context_with_its_role_s_tools() {
    let env = Env::new();
    std::fs::write(env.work().join("a.txt"), "the needle\n").unwrap();
    let server = Server::start(vec![
        // The parent delegates.
        tool_calls(&[(
            "call-1",
            "agent",
            r#"{"role":"explore","task":"Find the needle."}"#,
        )]),
        // The subagent reads, tries a tool its role does not have, and a subagent of its own.
        tool_calls(&[
            ("s1", "read_file", r#"{"filepath":"a.txt"}"#),
            ("s2", "bash", r#"{"command":"ls"}"#),
            ("s3", "agent", r#"{"task":"recurse"}"#),
        ]),
        text(&["The needle is in a.txt:1."]),
        // The parent answers with what it got.
        text(&["Found it."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "where is the needle?\n/agents\n/tree\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    // The parent is offered `agent`; the subagent only its role's read tools.
    assert!(tool_names(&requests[0]).contains(&"agent".to_string()));
    assert_eq!(
        tool_names(&requests[1]),
        ["read_file", "list_files", "glob", "grep"]
    );
    // A fresh context: its role's prompt and the environment, then the task; nothing of the parent.
    let sub = requests[1]["messages"].as_array().unwrap();
    assert_eq!(sub.len(), 2);
    assert!(
        sub[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are a subagent exploring a codebase")
    );
    assert!(
        sub[0]["content"]
            .as_str()
            .unwrap()
            .contains("Working folder:"),
        "{}",
        sub[0]["content"]
    );
    assert_eq!(sub[1]["content"], "Find the needle.");
    let got = results(&server, 2);
    assert!(got[0].contains("the needle"), "{got:?}");
    assert_eq!(
        got[1],
        "Error: `bash` was not run: the subagent `explore` may use only read_file, list_files, glob, grep."
    );
    assert!(got[2].starts_with("Error: `agent` was not run"), "{got:?}");
    // The parent's result: the subagent's answer and where its conversation is.
    let (parent_id, _) = {
        let files = env.conversation_files();
        let parent = files
            .iter()
            .find(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .contains("where is the needle?")
            })
            .unwrap();
        (
            parent.file_stem().unwrap().to_string_lossy().into_owned(),
            (),
        )
    };
    let parent_result = &results(&server, 3)[0];
    assert!(
        parent_result.starts_with("The needle is in a.txt:1.\n\n(subagent explore · conversation "),
        "{parent_result}"
    );
    assert!(
        parent_result.contains(" · 6 messages · "),
        "{parent_result}"
    );
    // Stored as a conversation of its own, linked to the parent and the call.
    let subs = others(&env, &parent_id);
    assert_eq!(subs.len(), 1);
    let header = &subs[0][0];
    assert_eq!(header["metadata"]["agent"], "explore");
    assert_eq!(
        header["metadata"]["parent"]["conversation"],
        parent_id.as_str()
    );
    assert_eq!(header["metadata"]["parent"]["tool_call_id"], "call-1");
    let sub_id = header["metadata"]["parent"]["msg_id"].as_str().unwrap();
    assert!(!sub_id.is_empty());
    assert!(parent_result.contains(&format!("conversation {}", {
        let files = env.conversation_files();
        let f = files
            .iter()
            .find(|p| !p.ends_with(format!("{parent_id}.jsonl")))
            .unwrap();
        f.file_stem().unwrap().to_string_lossy().into_owned()
    })));
    // Its calls, one line each under the parent's call; its text is not streamed.
    assert!(
        run.stdout.contains("    ↳ explore ✓ read_file: "),
        "{run:?}"
    );
    assert!(run.stdout.contains("    ↳ explore ✗ bash: "), "{run:?}");
    assert!(
        !run.stdout.contains("The needle is in a.txt:1.\n\n"),
        "{run:?}"
    );
    // `/tree` marks the call's result with the subagent and its conversation.
    assert!(
        run.stdout.contains("tool: agent explore → 6 messages · "),
        "{run:?}"
    );
    // `/list` leaves the subagent's conversation out, `/list all` shows it, `/switch` opens it.
    let sub_file = env
        .conversation_files()
        .into_iter()
        .find(|p| !p.ends_with(format!("{parent_id}.jsonl")))
        .unwrap();
    let sub_conversation = sub_file.file_stem().unwrap().to_string_lossy().into_owned();
    let server2 = Server::start(vec![]);
    let run2 = env.run(
        &server2.base_url,
        &[],
        &format!("/list\n/list all\n/switch {sub_conversation}\n/tree\n"),
    );
    let (listed, rest) = run2
        .stdout
        .split_once("(1 subagent conversation not shown; /list all shows them)")
        .expect("the hidden line");
    assert!(
        listed.contains(&parent_id) && !listed.contains(&sub_conversation),
        "{run2:?}"
    );
    assert!(rest.contains(&sub_conversation), "{run2:?}");
    assert!(rest.contains("[1] user: Find the needle."), "{run2:?}");
    assert!(
        rest.contains("assistant: The needle is in a.txt:1."),
        "{run2:?}"
    );
    // `/agents`.
    assert!(
        run.stdout
            .contains("explore (built-in): Finds where things are"),
        "{run:?}"
    );
    assert!(run.stdout.contains("general-purpose (built-in): Carries out a task on its own with every tool the session allows · tools: every tool the session allows"), "{run:?}");
}

#[test]
fn a_fork_starts_from_the_parent_s_branch_and_bad_calls_start_nothing() {
    let env = Env::new();
    std::fs::create_dir_all(env.work().join(".new/agents")).unwrap();
    std::fs::write(
        env.work().join(".new/agents/broken.md"),
        "---\nname: broken\ntools: [read_file, warp_drive]\n---\nBody\n",
    )
    .unwrap();
    let server = Server::start(vec![
        text(&["Noted: the colour is teal."]),
        tool_calls(&[
            ("b1", "agent", r#"{"role":"nobody","task":"x"}"#),
            ("b2", "agent", r#"{"role":"explore","task":"  "}"#),
            (
                "f1",
                "agent",
                r#"{"type":"fork","role":"general-purpose","task":"What colour did I say?"}"#,
            ),
        ]),
        text(&["You said teal."]),
        text(&["It was teal."]),
    ]);
    let run = env.run(
        &server.base_url,
        &[],
        "remember: the colour is teal\nask a fork\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains(
            "broken.md: it names the tool `warp_drive`, which does not exist; it is skipped"
        ),
        "{run:?}"
    );
    let requests = server.requests();
    // The fork's request: the parent's branch (first exchange, then its message), then the task.
    let fork = requests[2]["messages"].as_array().unwrap();
    let contents: Vec<&str> = fork
        .iter()
        .skip(1)
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        contents,
        [
            "remember: the colour is teal",
            "Noted: the colour is teal.",
            "ask a fork",
            "What colour did I say?"
        ]
    );
    assert!(!tool_names(&requests[2]).contains(&"agent".to_string()));
    let got = results(&server, 3);
    assert!(
        got[0].starts_with(
            "Error: unknown role `nobody`; the roles are explore, plan, general-purpose"
        ),
        "{got:?}"
    );
    assert_eq!(
        got[1],
        "Error: `task` is required: say what the subagent should do"
    );
    assert!(
        got[2].starts_with("You said teal.\n\n(subagent general-purpose · "),
        "{got:?}"
    );
    // Two conversations: the parent and the one fork (the bad calls started nothing).
    assert_eq!(env.conversation_files().len(), 2);
}

#[test]
fn subagents_off_removes_the_tool() {
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "subagent": {"enabled": false}}"#);
    let server = Server::start(vec![text(&["ok"])]);
    let run = env.run(&server.base_url, &[], "hi\n/agents\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!tool_names(&server.requests()[0]).contains(&"agent".to_string()));
    assert!(
        run.stdout
            .contains("subagents are off (`subagent.enabled` is false)"),
        "{run:?}"
    );
}

#[test]
fn hooks_fire_inside_a_subagent_under_its_conversation_and_then_the_parent_s_again() {
    let env = Env::new();
    let events = env.dir.path().join("events.jsonl");
    env.write_config(
        &serde_json::json!({"retry_initial_ms": 5, "hook": {"entries": [
            {"name": "log", "event": "pre_tool_use",
             "action": {"command": format!("cat >> {}; echo >> {}", events.display(), events.display())}},
            {"name": "no-grep", "event": "pre_tool_use",
             "condition": {"field": "tool_name", "op": "eq", "value": "grep"},
             "action": {"command": "echo 'grep is off' >&2; exit 2"}}
        ]}})
        .to_string(),
    );
    let server = Server::start(vec![
        tool_calls(&[("a1", "agent", r#"{"role":"explore","task":"search"}"#)]),
        tool_calls(&[("g1", "grep", r#"{"pattern":"x"}"#)]),
        text(&["nothing"]),
        tool_calls(&[("l1", "list_files", "{}")]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &[], "go\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    // The user's pre_tool_use hook blocked the subagent's call too.
    assert_eq!(
        results(&server, 2)[0],
        "Blocked by a hook: grep is off. The call was not run."
    );
    let logged: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sessions: Vec<(&str, &str)> = logged
        .iter()
        .map(|e| {
            (
                e["tool_name"].as_str().unwrap(),
                e["session_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    assert_eq!(sessions[0].0, "agent");
    assert_eq!(sessions[1].0, "grep");
    assert_eq!(sessions[2].0, "list_files");
    assert_eq!(sessions[0].1, sessions[2].1);
    assert_ne!(
        sessions[1].1, sessions[2].1,
        "the subagent's call is under its own conversation"
    );
    let parent = env
        .conversation_files()
        .into_iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains("\"go\""))
        .unwrap();
    assert_eq!(parent.file_stem().unwrap().to_string_lossy(), sessions[2].1);
}

#[test]
fn ctrl_c_stops_a_foreground_subagent_and_the_turn() {
    use std::io::Write;
    let env = Env::new();
    let server = Server::start(vec![
        tool_calls(&[(
            "a1",
            "agent",
            r#"{"role":"explore","task":"take your time"}"#,
        )]),
        // The subagent's answer stalls after its first words.
        Reply::SseStall(
            vec![chunk_text("Looking")],
            std::time::Duration::from_secs(30),
            vec![chunk_finish("stop"), "[DONE]".into()],
        ),
        text(&["after the interrupt"]),
    ]);
    let mut child = env.spawn(&server.base_url);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"delegate\n").unwrap();
    // Wait for the subagent's request, then Ctrl-C.
    eventually(100, std::time::Duration::from_millis(50), || {
        server.requests().len() >= 2
    });
    assert_eq!(server.requests().len(), 2);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let started = std::time::Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    stdin.write_all(b"next\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("after the interrupt"), "{stdout}");
    // The parent's record of the call says the user stopped it; the next turn went on.
    let parent = env
        .conversation_files()
        .into_iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains("\"delegate\""))
        .unwrap();
    let lines = read_lines(&parent);
    let result = lines
        .iter()
        .find(|l| l["role"] == "tool" && l["tool_call_id"] == "a1")
        .expect("the agent call's result");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.starts_with("the user stopped the subagent; what it said so far: Looking"),
        "{content}"
    );
    assert!(
        content.contains("(subagent explore · conversation "),
        "{content}"
    );
}
