//! Subagents through the binary: a defined subagent with a narrowed tool list, a fork that carries
//! the parent's branch, bad calls answered without starting anything, no recursion, the stored
//! conversation and its link to the parent, `/agents`.

use crate::support::*;
use serde_json::Value;
use std::collections::VecDeque;
use std::fs;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::sync::Mutex;
#[cfg(not(windows))]
use std::thread;
use std::time::Duration;
#[cfg(not(windows))]
use std::time::Instant;
use tokio::sync::Semaphore;

/// The conversation files other than `parent`, parsed.
fn others(env: &Env, parent: &str) -> Vec<Vec<Value>> {
    env.conversation_files()
        .into_iter()
        .filter(|p| !p.ends_with(format!("{parent}.jsonl")))
        .map(|p| read_lines(&p))
        .collect()
}

#[test]
fn a_defined_subagent_works_in_its_own_context_with_its_role_s_tools() {
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "the needle\n").unwrap();
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
                fs::read_to_string(p)
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
        &format!(
            "/list\n/list all\n/switch {sub_conversation}\n/tree\n/switch {parent_id}\n/tree\n"
        ),
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
    // And back: the parent's tree, with the call's node.
    let (_, back) = rest.rsplit_once(parent_id.as_str()).expect("switched back");
    assert!(
        back.contains("tool: agent explore → 6 messages · "),
        "{run2:?}"
    );
    // `/agents`.
    assert!(
        run.stdout
            .contains("explore (built-in): Finds where things are"),
        "{run:?}"
    );
    assert!(run.stdout.contains("general-purpose (built-in): Carries out a task on its own with every tool allowed · tools: every tool the session allows"), "{run:?}");
}

/// `metadata`: structured input, given to the subagent as JSON after its task and kept in its
/// conversation's header (`metadata.input`); it is declared as a string holding the object, and one
/// that is not an object (or a string holding one) starts nothing and says why.
#[test]
fn an_agent_call_s_metadata_reaches_the_subagent_as_json() {
    let env = Env::new();
    let server = Server::start(vec![
        tool_calls(&[
            (
                "bad",
                "agent",
                r#"{"role":"explore","task":"Look.","metadata":["not","an","object"]}"#,
            ),
            (
                "good",
                "agent",
                r#"{"role":"explore","task":"Check the files named.","metadata":"{\"files\":[\"src/a.rs\",\"src/b.rs\"],\"ticket\":43,\"strict\":true}"}"#,
            ),
        ]),
        text(&["Both files are fine."]),
        text(&["Checked."]),
    ]);
    let run = env.run(&server.base_url, &[], "check them\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    // The subagent's first message: the task, then the input as JSON it can read back.
    let first = messages_of(&requests[1])[1].1.clone();
    let (task, rest) = first.split_once("\n\n").unwrap();
    assert_eq!(task, "Check the files named.");
    let json = rest
        .split_once("```json\n")
        .and_then(|(_, j)| j.rsplit_once("\n```"))
        .map(|(j, _)| j)
        .unwrap_or_else(|| panic!("{first}"));
    let input: Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        input,
        serde_json::json!({"files": ["src/a.rs", "src/b.rs"], "ticket": 43, "strict": true})
    );
    let got = results(&server, 2);
    assert_eq!(got[0], "Error: `metadata` must be a JSON object", "{got:?}");
    assert!(got[1].starts_with("Both files are fine."), "{got:?}");
    // One subagent ran, its header keeping the input.
    let subs = subagent_files(&env, "check them");
    assert_eq!(subs.len(), 1, "{subs:?}");
    assert_eq!(subs[0].1[0]["metadata"]["input"], input);
    assert_eq!(subs[0].1[0]["metadata"]["parent"]["tool_call_id"], "good");
    // The model is told of it.
    let agent = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "agent")
        .unwrap();
    // As a string holding the object: a provider that refuses an object parameter without
    // properties (Gemini) takes every tool offered.
    assert_eq!(
        agent["function"]["parameters"]["properties"]["metadata"]["type"],
        "string"
    );
    for tool in requests[0]["tools"].as_array().unwrap() {
        let properties = tool["function"]["parameters"]["properties"].as_object();
        for (name, p) in properties.into_iter().flatten() {
            assert!(
                p["type"] != "object" || p["properties"].is_object(),
                "{}: `{name}` is an object without properties",
                tool["function"]["name"]
            );
        }
    }
}

#[test]
fn a_fork_starts_from_the_parent_s_branch_and_bad_calls_start_nothing() {
    let env = Env::new();
    fs::create_dir_all(env.work().join(".new/agents")).unwrap();
    fs::write(
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
    let server = Server::start(vec![
        tool_calls(&[("t1", "task_status", r#"{"task_id":"abcd1234"}"#)]),
        text(&["ok"]),
    ]);
    let run = env.run(&server.base_url, &[], "hi\n/agents\n/tasks\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    // Neither tool is offered, nor run when asked for anyway.
    let names = tool_names(&server.requests()[0]);
    assert!(!names.contains(&"agent".to_string()), "{names:?}");
    assert!(!names.contains(&"task_status".to_string()), "{names:?}");
    let got = results(&server, 1);
    assert!(
        got[0].starts_with("Error: unknown tool `task_status`"),
        "{got:?}"
    );
    assert_eq!(
        run.stdout
            .matches("subagents are off (`subagent.enabled` is false)")
            .count(),
        2,
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
    let logged: Vec<Value> = fs::read_to_string(&events)
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
        .find(|p| fs::read_to_string(p).unwrap().contains("\"go\""))
        .unwrap();
    assert_eq!(parent.file_stem().unwrap().to_string_lossy(), sessions[2].1);
}

#[cfg(unix)]
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
            Duration::from_secs(30),
            vec![chunk_finish("stop"), "[DONE]".into()],
        ),
        text(&["after the interrupt"]),
    ]);
    let mut child = env.spawn(&server.base_url);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"delegate\n").unwrap();
    // Wait for the subagent's request, then Ctrl-C.
    eventually(100, Duration::from_millis(50), || {
        server.requests().len() >= 2
    });
    assert_eq!(server.requests().len(), 2);
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    stdin.write_all(b"next\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("after the interrupt"), "{stdout}");
    // The parent's record of the call says the user stopped it; the next turn went on.
    let parent = env
        .conversation_files()
        .into_iter()
        .find(|p| fs::read_to_string(p).unwrap().contains("\"delegate\""))
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

/// The subagent conversations beside `parent`'s (ids and parsed lines).
fn subagent_files(env: &Env, parent_text: &str) -> Vec<(String, Vec<Value>)> {
    env.conversation_files()
        .into_iter()
        .filter(|p| !fs::read_to_string(p).unwrap().contains(parent_text))
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                read_lines(&p),
            )
        })
        .collect()
}

/// The requests of the parent (not of built-in roles' subagents), in order.
fn parent_requests(server: &Server) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| !system_of(r).starts_with(SUBAGENT_START))
        .collect()
}

/// Whether a subagent conversation beside the parent's (which holds `parent_text`) has a message
/// with exactly `content`.
fn a_subagent_said(env: &Env, parent_text: &str, content: &str) -> bool {
    subagent_files(env, parent_text)
        .iter()
        .any(|(_, lines)| lines.iter().any(|l| l["content"] == content))
}

/// Checks that the only subagent's first call was refused unasked in the background, and that
/// `notes.txt` was not written.
fn assert_refused_in_the_background(env: &Env, parent_text: &str) {
    let subs = subagent_files(env, parent_text);
    let refused = subs[0].1.iter().find(|l| l["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("a subagent working in the background cannot ask"),
        "{refused}"
    );
    assert!(!env.work().join("notes.txt").exists());
}

/// The task id in the result of a background `agent` call.
fn task_id_in(body: &Value) -> String {
    let result = last_result(body);
    let after = result.split_once("as task ").expect("a task id").1;
    after[..8].to_string()
}

/// Writes `text` to the child's stdin.
fn type_in(child: &mut Child, text: &str) {
    use std::io::Write;
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(text.as_bytes()).unwrap();
    stdin.flush().unwrap();
}

fn file_has(path: &Path, text: &str) -> bool {
    fs::read_to_string(path).is_ok_and(|s| s.contains(text))
}

#[test]
fn a_background_task_answers_at_the_parent_s_next_turn() {
    let env = Env::new();
    let release = Arc::new(Semaphore::new(0));
    let server = Server::start(vec![
        tool_calls(&[(
            "bg-1",
            "agent",
            r#"{"role":"explore","task":"Count the files.","background":true}"#,
        )]),
        // The parent asks where it stands (it is still working).
        with(|body| {
            let id = task_id_in(body);
            tool_calls(&[("st-1", "task_status", &format!(r#"{{"task_id":"{id}"}}"#))])
        }),
        text(&["Started it."]),
        // The next turn: the task's answer came before the user's message.
        text(&["It found 3 files."]),
    ]);
    server.answer_subagents(vec![gated(text(&["There are ", "3 files."]), &release)]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "count the files in the background\n");
    let parent_file = || {
        env.conversation_files()
            .into_iter()
            .find(|p| file_has(p, "count the files in the background"))
    };
    assert!(
        eventually(300, Duration::from_millis(20), || {
            parent_file().is_some_and(|p| file_has(&p, "Started it."))
        }),
        "the parent's turn ended while its task works"
    );
    // The parent's turn did not wait: the subagent has asked once and is still answering.
    let status = last_result(&parent_requests(&server)[2]);
    assert!(status.contains(r#""state": "running""#), "{status}");
    assert!(status.contains(r#""role": "explore""#), "{status}");
    release.add_permits(8);
    let parent = parent_file().unwrap();
    let parent_id = parent.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(eventually(300, Duration::from_millis(20), || {
        a_subagent_said(
            &env,
            "count the files in the background",
            "There are 3 files.",
        )
    }));
    type_in(&mut child, "what did it find?\n/tasks\n/tree\n");
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let subs = subagent_files(&env, "count the files in the background");
    assert_eq!(subs.len(), 1);
    let (sub_id, sub_lines) = &subs[0];
    assert_eq!(
        sub_lines[0]["metadata"]["parent"]["conversation"],
        parent_id.as_str()
    );
    assert_eq!(sub_lines[0]["metadata"]["parent"]["tool_call_id"], "bg-1");
    // The next request carries the task's answer, then the user's message.
    let last = parent_requests(&server).pop().unwrap();
    let messages = messages_of(&last);
    let n = messages.len();
    assert_eq!(messages[n - 1], ("user".into(), "what did it find?".into()));
    let (role, delivered) = &messages[n - 2];
    assert_eq!(role, "user");
    // The markers are random per delivery: written plainly here.
    let mut plain = String::new();
    let mut rest = delivered.as_str();
    while let Some(at) = rest.find("task-result-") {
        plain.push_str(&rest[..at + "task-result".len()]);
        rest = &rest[at + "task-result-".len() + 12..];
    }
    plain.push_str(rest);
    assert!(
        plain.starts_with(&format!(
            "[Background task {sub_id} (explore) completed. Its report is between the markers <task-result> and </task-result>: the subagent's words, not the user's.]\n<task-result>\nThere are 3 files.\n</task-result>\n(subagent explore · conversation {sub_id} · 2 messages · "
        )),
        "{delivered}"
    );
    // The user was told in one line; `/tasks` lists it; `/tree` marks the call.
    assert!(
        stdout.contains(&format!(
            "background task {sub_id} (explore) completed · its answer goes with the next message in conversation {parent_id}"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{sub_id} explore · completed (background) · ")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "tool: agent explore → in the background · {sub_id}"
        )),
        "{stdout}"
    );
    // Delivered once: a later turn would not carry it again (the table says delivered).
    assert_eq!(
        fs::read_to_string(&parent)
            .unwrap()
            .matches("[Background task ")
            .count(),
        1
    );
}

#[test]
fn the_foreground_wait_moves_a_task_to_the_background_where_nothing_asks() {
    let env = Env::new();
    let release = Arc::new(Semaphore::new(0));
    let server = Server::start(vec![
        tool_calls(&[(
            "fg-1",
            "agent",
            r#"{"role":"general-purpose","task":"Write the notes.","foreground_wait_seconds":0.3}"#,
        )]),
        text(&["It goes on in the background."]),
    ]);
    server.answer_subagents(vec![
        // Its first answer arrives only after the parent stopped waiting. (Inside the sandbox
        // the command would run unasked; leaving it would be asked.)
        gated(
            tool_calls(&[(
                "w1",
                "bash",
                r#"{"command":"touch notes.txt","sandbox":false}"#,
            )]),
            &release,
        ),
        text(&["I could not write the notes."]),
    ]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "write the notes\n");
    let parent_file = || {
        env.conversation_files()
            .into_iter()
            .find(|p| file_has(p, "write the notes\""))
    };
    assert!(eventually(300, Duration::from_millis(20), || {
        parent_file().is_some_and(|p| file_has(&p, "It goes on in the background."))
    }));
    let moved = last_result(&parent_requests(&server)[1]);
    assert!(
        moved.starts_with("The subagent `general-purpose` did not finish within 0.3 s and goes on in the background as task "),
        "{moved}"
    );
    release.add_permits(8);
    assert!(eventually(300, Duration::from_millis(20), || {
        a_subagent_said(&env, "write the notes\"", "I could not write the notes.")
    }));
    type_in(&mut child, "/tasks\n");
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // In the background the write that would be asked was refused, with a reason, unasked.
    assert_refused_in_the_background(&env, "write the notes\"");
    assert!(!stdout.contains("needs your approval"), "{stdout}");
    assert!(
        stdout.contains("general-purpose · completed (background) · "),
        "{stdout}"
    );
    assert!(stdout.contains(" · 1 tool call · "), "{stdout}");
}

#[test]
fn tasks_stop_stops_one_and_the_end_of_the_program_stops_the_rest() {
    let env = Env::new();
    let stall = || {
        Reply::SseStall(
            vec![chunk_text("Working on "), chunk_text("it")],
            Duration::from_secs(120),
            vec!["[DONE]".into()],
        )
    };
    let server = Server::start(vec![
        tool_calls(&[
            (
                "a",
                "agent",
                r#"{"role":"explore","task":"First long job.","background":true}"#,
            ),
            (
                "b",
                "agent",
                r#"{"role":"plan","task":"Second long job.","background":true}"#,
            ),
        ]),
        text(&["Both started."]),
    ]);
    server.answer_subagents(vec![stall(), stall()]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "start two jobs\n");
    assert!(eventually(300, Duration::from_millis(20), || {
        server.requests().len() == 4
    }));
    let subs = subagent_files(&env, "start two jobs");
    assert_eq!(subs.len(), 2);
    let first = subs
        .iter()
        .find(|(_, lines)| lines[0]["metadata"]["agent"] == "explore")
        .unwrap()
        .0
        .clone();
    // By a unique start of its id, then (stopped already) by its id, then one that is not.
    type_in(&mut child, &format!("/tasks stop {}\n", &first[..5]));
    let first_file = env.data().join(format!("{first}.jsonl"));
    assert!(eventually(300, Duration::from_millis(20), || {
        file_has(&first_file, "\"interrupted\":true")
    }));
    type_in(
        &mut child,
        &format!("/tasks stop {first}\n/tasks stop zz\n/tasks\n"),
    );
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("stopping task {first}; it keeps what it said")),
        "{stdout}"
    );
    // Stopped by then, or still writing down what it said.
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains(&format!("task {first} has stopped already"))
            || said.contains(&format!("task {first} is stopping already")),
        "{stdout}{stderr}"
    );
    assert!(
        format!("{stdout}{stderr}").contains("no task `zz`"),
        "{stdout}{stderr}"
    );
    assert!(
        stdout.contains(&format!("{first} explore · stopped (background)")),
        "{stdout}"
    );
    // The other one was still working when input ended: stopped, keeping what it said.
    assert!(
        stdout.contains("stopped 1 subagent task still running"),
        "{stdout}"
    );
    for (id, _) in subagent_files(&env, "start two jobs") {
        let lines = read_lines(&env.data().join(format!("{id}.jsonl")));
        let last = lines.last().unwrap();
        assert_eq!(last["content"], "Working on it", "{lines:?}");
        assert_eq!(last["interrupted"], true);
    }
}

#[test]
fn a_session_works_as_a_role_with_agent() {
    let env = Env::new();
    fs::create_dir_all(env.work().join(".new/agents")).unwrap();
    fs::write(
        env.work().join(".new/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews\ntools: [read_file, grep]\nmodel: tiny-model\n---\nYou review code.\n",
    )
    .unwrap();
    let server = Server::start(vec![text(&["Nothing to see."]), text(&["Reviewed."])]);
    let run = env.run(
        &server.base_url,
        &["--agent", "explore", "-p", "Find the needle."],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout.trim(), "Nothing to see.");
    let requests = server.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are a subagent exploring a codebase"),
        "{system}"
    );
    assert!(system.contains("Working folder:"), "{system}");
    assert_eq!(
        tool_names(&requests[0]),
        ["read_file", "list_files", "glob", "grep"]
    );
    // Stored as the user's own conversation: named by its role, listed.
    let (id, lines) = env.only_conversation();
    assert_eq!(lines[0]["metadata"]["agent"], "explore");
    assert!(lines[0]["metadata"].get("parent").is_none());
    // A project role with its own model; `--model` would win over it.
    let run = env.run(
        &server.base_url,
        &["--agent", "reviewer", "-p", "Review."],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests[1]["model"], "tiny-model");
    assert_eq!(tool_names(&requests[1]), ["read_file", "grep"]);
    let run = env.run(&server.base_url, &[], "/list\n");
    assert!(run.stdout.contains(&id), "{run:?}");
    assert!(!run.stdout.contains("not shown"), "{run:?}");
    // An unknown role: said with the roles there are, nothing sent.
    let run = env.run(&server.base_url, &["--agent", "nobody", "-p", "x"], "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains(
            "--agent nobody: no such role; the roles are reviewer, explore, plan, general-purpose"
        ),
        "{run:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_stricter_mode_holds_for_tasks_already_in_the_background() {
    let env = Env::new();
    let release = Arc::new(Semaphore::new(0));
    let server = Server::start(vec![
        tool_calls(&[(
            "bg-1",
            "agent",
            r#"{"role":"general-purpose","task":"Write the notes.","background":true}"#,
        )]),
        text(&["Started."]),
    ]);
    server.answer_subagents(vec![
        gated(
            tool_calls(&[(
                "w1",
                "write_file",
                r#"{"filepath":"notes.txt","content":"hello"}"#,
            )]),
            &release,
        ),
        text(&["Done."]),
    ]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "write the notes\n");
    assert!(eventually(300, Duration::from_millis(20), || {
        env.conversation_files()
            .iter()
            .any(|p| file_has(p, "Started."))
    }));
    // Writes run unasked in the default mode; the user turns to strict before the task writes.
    // (The title, stored after it, says when the mode changed.)
    type_in(&mut child, "/permissions strict\n/title strict-now\n");
    assert!(eventually(300, Duration::from_millis(20), || {
        env.conversation_files()
            .iter()
            .any(|p| file_has(p, "strict-now"))
    }));
    release.add_permits(8);
    assert!(eventually(300, Duration::from_millis(20), || {
        a_subagent_said(&env, "write the notes\"", "Done.")
    }));
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_refused_in_the_background(&env, "write the notes\"");
}

#[test]
fn task_status_waits_for_the_end_and_its_answer_is_not_delivered_again() {
    let env = Env::new();
    let release = Arc::new(Semaphore::new(0));
    let server = Server::start(vec![
        tool_calls(&[(
            "bg-1",
            "agent",
            r#"{"role":"plan","task":"Plan it.","background":true}"#,
        )]),
        with(|body| {
            let id = task_id_in(body);
            tool_calls(&[(
                "st-1",
                "task_status",
                &format!(r#"{{"task_id":"{id}","wait_seconds":60}}"#),
            )])
        }),
        text(&["The plan is ready."]),
        text(&["Next."]),
    ]);
    server.answer_subagents(vec![gated(text(&["Step ", "one."]), &release)]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "plan it\n");
    // The parent asked for the status (with a wait) before the subagent could answer.
    assert!(eventually(300, Duration::from_millis(20), || {
        parent_requests(&server).len() == 2
    }));
    release.add_permits(8);
    assert!(eventually(300, Duration::from_millis(20), || {
        parent_requests(&server).len() == 3
    }));
    type_in(&mut child, "and then?\n");
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let requests = parent_requests(&server);
    let status = last_result(&requests[2]);
    assert!(status.contains(r#""state": "completed""#), "{status}");
    assert!(status.contains(r#""final_text": "Step one.""#), "{status}");
    // Read with task_status: not delivered again, nor said as news.
    let next = messages_of(&requests[3]);
    assert_eq!(next.last().unwrap().1, "and then?");
    assert!(
        !next.iter().any(|(_, c)| c.contains("[Background task ")),
        "{next:?}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("its answer goes with"));
}

/// Attacks on what a task shows and takes: escape sequences in a task and its tool lines reach
/// the terminal escaped, a project role named with one is refused; `task_status` with ids that are paths or
/// empty finds nothing; a server that fails a background subagent's request leaves a failed task
/// whose error is delivered, and the program goes on.
#[test]
fn hostile_tasks_ids_and_servers_change_nothing() {
    let env = Env::new();
    fs::create_dir_all(env.work().join(".new/agents")).unwrap();
    fs::write(
        env.work().join(".new/agents/evil.md"),
        "---\nname: \"ev\\u001b[2Jil\"\ndescription: \"clears\\rthe screen\"\ntools: [read_file]\n---\nYou are a subagent that misbehaves.\n",
    )
    .unwrap();
    let release = Arc::new(Semaphore::new(0));
    let server = Server::start(vec![
        tool_calls(&[
            (
                "bg-1",
                "agent",
                "{\"role\":\"explore\",\"task\":\"Look\\u001b]0;pwned\\u0007 \\r\\u202eright\",\"background\":true}",
            ),
            (
                "bg-2",
                "agent",
                r#"{"role":"plan","task":"Fail.","background":true}"#,
            ),
        ]),
        tool_calls(&[
            ("s1", "task_status", r#"{"task_id":"../../etc/passwd"}"#),
            ("s2", "task_status", r#"{"task_id":""}"#),
            ("s3", "task_status", r#"{"task_id":7}"#),
        ]),
        text(&["Started."]),
        text(&["Next."]),
    ]);
    // The two run side by side: each request is answered by its role.
    let explore: Arc<Mutex<VecDeque<Reply>>> = Arc::new(Mutex::new(
        vec![
            // It reads a file whose name carries escapes, then answers once released.
            tool_calls(&[("r1", "read_file", "{\"filepath\":\"x\\u001b[31m.txt\"}")]),
            gated(text(&["Seen."]), &release),
        ]
        .into(),
    ));
    let route = || {
        let explore = explore.clone();
        with(move |body| {
            if system_of(body).contains("planning") {
                // The plan task's server refuses its request.
                Reply::Status(
                    400,
                    r#"{"error":{"message":"bad \u001b[2J request"}}"#.into(),
                )
            } else {
                explore.lock().unwrap().pop_front().unwrap()
            }
        })
    };
    server.answer_subagents(vec![route(), route(), route()]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "go\n/agents\n/tasks\n");
    assert!(eventually(300, Duration::from_millis(20), || {
        env.conversation_files()
            .iter()
            .any(|p| file_has(p, "Started."))
            && subagent_files(&env, "\"go\"")
                .iter()
                .any(|(_, l)| l[0]["metadata"]["agent"] == "explore" && l.len() >= 4)
    }));
    release.add_permits(8);
    assert!(eventually(300, Duration::from_millis(20), || {
        a_subagent_said(&env, "\"go\"", "Seen.")
    }));
    type_in(&mut child, "/tasks\nand?\n");
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    // Nothing raw reaches the terminal: no escape, bell, carriage return or bidi override.
    for shown in [&stdout, &stderr] {
        for bad in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
            assert!(!shown.contains(bad), "{bad:?} in {shown}");
        }
    }
    assert!(
        stdout.contains(r"Look\e]0;pwned\x07 \u{202e}right"),
        "{stdout}"
    );
    // A project role whose name carries an escape is refused, said with the escape visible.
    assert!(
        stderr.contains(
            r#"its name "ev\u{1b}[2Jil" must be letters, digits, `-` or `_`; it is skipped"#
        ),
        "{stderr}"
    );
    // Ids that are paths, empty or not text find nothing.
    let all = results_of(&parent_requests(&server)[2]);
    let got = &all[all.len() - 3..];
    assert_eq!(got[0], "Error: no task `../../etc/passwd`", "{got:?}");
    assert_eq!(got[1], "Error: no task ``", "{got:?}");
    assert!(
        got[2].starts_with("Error: `task_id` is required"),
        "{got:?}"
    );
    // The failed task: said, and its error delivered with the next message.
    assert!(stdout.contains("plan · failed (background)"), "{stdout}");
    let next = messages_of(parent_requests(&server).last().unwrap());
    assert!(
        next.iter()
            .any(|(_, c)| c.contains("(plan) failed. Its error is between the markers")),
        "{next:?}"
    );
}

/// Claude Code's `SubagentStop` hook sees a subagent's answer and may ask it to go on, once per
/// `stop_hook_active`; the parent gets the answer after that.
#[test]
fn a_subagent_stop_hook_asks_the_subagent_to_go_on() {
    let env = Env::new();
    let home = env.dir.path().join("home/.claude");
    fs::create_dir_all(&home).unwrap();
    let log = env.dir.path().join("subagent-stop.log");
    fs::write(
        home.join("settings.json"),
        serde_json::json!({"hooks": {"SubagentStop": [{"hooks": [{"type": "command", "command": format!(
            r#"i=$(cat); printf '%s\n' "$i" >> {}; case "$i" in *'"stop_hook_active":true'*) ;; *) echo '{{"decision": "block", "reason": "check the tests too"}}' ;; esac"#,
            log.display()
        )}]}]}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start(vec![
        tool_calls(&[(
            "call-1",
            "agent",
            r#"{"role":"explore","task":"Find the needle."}"#,
        )]),
        text(&["Needle in a.txt."]),
        text(&["Tests are in tests/."]),
        text(&["Found it."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "where is the needle?\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let asked = messages_of(&requests[2]);
    assert_eq!(
        asked.last().unwrap().1,
        "[A hook asks you to go on: check the tests too]"
    );
    // The parent's result is the subagent's last answer.
    assert!(results(&server, 3)[0].contains("Tests are in tests/."));
    let logged = fs::read_to_string(&log).unwrap();
    let events: Vec<Value> = logged
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{logged}");
    assert_eq!(events[0]["hook_event_name"], "SubagentStop");
    assert_eq!(events[0]["stop_hook_active"], false);
    assert_eq!(events[1]["stop_hook_active"], true);
}

/// `subagent.auto_continue` (CodePilot's): a background answer that came in goes to the
/// conversation, and the model goes on with it without a question from the user (at the next
/// read of input: here an empty line, as an Enter at an idle prompt).
#[test]
fn auto_continue_lets_the_parent_go_on_with_a_background_answer() {
    let env = Env::new();
    env.write_config(r#"{"subagent": {"auto_continue": true}}"#);
    let release = Arc::new(Semaphore::new(0));
    let server = Server::start(vec![
        tool_calls(&[(
            "bg-1",
            "agent",
            r#"{"role":"explore","task":"Count the files.","background":true}"#,
        )]),
        text(&["Started it."]),
        text(&["It found 3 files, so we are done."]),
    ]);
    server.answer_subagents(vec![gated(text(&["There are 3 files."]), &release)]);
    let mut child = env.spawn(&server.base_url);
    type_in(&mut child, "count them in the background\n");
    let parent_file = || {
        env.conversation_files()
            .into_iter()
            .find(|p| file_has(p, "count them in the background"))
    };
    assert!(eventually(300, Duration::from_millis(20), || {
        parent_file().is_some_and(|p| file_has(&p, "Started it."))
    }));
    release.add_permits(8);
    assert!(eventually(300, Duration::from_millis(20), || {
        a_subagent_said(&env, "count them in the background", "There are 3 files.")
    }));
    type_in(&mut child, "\n");
    assert!(
        eventually(300, Duration::from_millis(20), || {
            parent_file().is_some_and(|p| file_has(&p, "so we are done"))
        }),
        "the parent went on by itself"
    );
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("going on with the answer of 1 background task(s)"),
        "{stdout}"
    );
    // The request that went on: the task's answer last, no message of the user's after it.
    let last = parent_requests(&server).pop().unwrap();
    let messages = messages_of(&last);
    let (role, delivered) = messages.last().unwrap();
    assert_eq!(role, "user");
    assert!(delivered.contains("There are 3 files."), "{delivered}");
    assert_eq!(parent_requests(&server).len(), 3);
}
