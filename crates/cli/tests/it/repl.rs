//! The binary through piped stdin: each line processed as if typed.

use serde_json::Value;

use crate::support::*;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;
use std::time::Instant;
use tokio::sync::Semaphore;

fn role_contents(s: &Server, n: usize) -> Vec<(String, String)> {
    s.messages(n)
}

#[test]
fn plain_answer_streams_is_stored_and_shows_usage() {
    let server = Server::start(vec![text(&["Hel", "lo ", "there"])]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    // The status line: model, tokens, the context the request used, the time.
    assert!(
        run.stdout
            .starts_with("Hello there\n[gpt-4o-mini · 11 in · 3 out · context 0% of 128k · "),
        "{run:?}"
    );
    assert!(run.stdout.ends_with(" s]\n"), "{run:?}");
    assert_eq!(run.stdout.lines().count(), 2, "{run:?}");

    let req = &server.requests()[0];
    assert_eq!(req["stream"], true);
    assert_eq!(req["stream_options"]["include_usage"], true);
    let tools: Vec<&str> = req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "glob",
            "grep",
            "bash",
            // The built-in skills that describe `new` and the project are offered on demand.
            "use_skill",
            "agent",
            "task_status"
        ]
    );
    let msgs = role_contents(&server, 0);
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0].0, "system");
    assert!(msgs[0].1.starts_with("You are a helpful assistant"));
    assert_eq!(msgs[1], ("user".into(), "hi".into()));
    // No key is sent to a custom local server that needs none.
    assert!(server.headers()[0].get("authorization").is_none());

    let (_, lines) = env.only_conversation();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[1]["role"], "user");
    assert_eq!(lines[1]["parent_id"], lines[0]["root_id"]);
    assert_eq!(lines[2]["content"], "Hello there");
    assert_eq!(lines[2]["parent_id"], lines[1]["msg_id"]);
    assert_eq!(lines[2]["usage"]["output_tokens"], 3);
    // The original fields are always written.
    for key in [
        "msg_id",
        "role",
        "content",
        "parent_id",
        "timestamp",
        "tool_call_id",
        "tool_calls",
    ] {
        assert!(lines[2].get(key).is_some(), "{key}");
    }
}

#[test]
fn one_tool_call_runs_and_its_result_goes_back() {
    let server = Server::start(vec![
        tool_calls(&[("call_1", "read_file", r#"{"filepath":"notes.txt"}"#)]),
        text(&["The file says hello."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("notes.txt"), "hello from the file\n").unwrap();
    let run = env.run(&server.base_url, &[], "what is in notes.txt?\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("→ read_file({\"filepath\":\"notes.txt\"})"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("✓ notes.txt: lines 1-1 of 1"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("The file says hello.\n[gpt-4o-mini · 11 in · 1 out · context 0% of 128k · "),
        "{run:?}"
    );

    let second = &server.requests()[1]["messages"];
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        second[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"filepath":"notes.txt"}"#
    );
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
    assert_eq!(second[3]["content"], "     1\thello from the file\n");

    let (_, lines) = env.only_conversation();
    let roles: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
}

#[test]
fn several_tool_calls_in_one_answer_run_in_order() {
    let server = Server::start(vec![
        tool_calls(&[
            (
                "a",
                "write_file",
                r#"{"filepath":"out/x.txt","content":"X"}"#,
            ),
            ("b", "list_files", r#"{"dirpath":"out"}"#),
            ("c", "read_file", r#"{"filepath":"../escape.txt"}"#),
            ("d", "no_such_tool", "{}"),
        ]),
        text(&["Done."]),
    ]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "make a file\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        fs::read_to_string(env.work().join("out/x.txt")).unwrap(),
        "X"
    );
    let msgs = &server.requests()[1]["messages"];
    let results: Vec<(&str, &str)> = msgs.as_array().unwrap()[3..7]
        .iter()
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(results[0], ("a", "Created `out/x.txt` (1 line, 1 byte)."));
    assert_eq!(
        results[1],
        ("b", "out: 0 folders, 1 file\nx.txt (1 byte)\n")
    );
    assert_eq!(results[2].0, "c");
    assert!(
        results[2]
            .1
            .starts_with("Error: `../escape.txt` is outside the working folder")
    );
    assert!(
        results[3]
            .1
            .starts_with("Error: unknown tool `no_such_tool`")
    );
    assert!(run.stdout.contains("✗ unknown tool"), "{run:?}");
}

#[test]
fn fork_then_new_message_sends_only_that_branch() {
    let server = Server::start(vec![
        text(&["Answer one"]),
        text(&["Answer two"]),
        text(&["Answer on the fork"]),
    ]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "first\nsecond\n/tree\n/2\nalternative\n/tree\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        role_contents(&server, 2)[1..],
        [
            ("user".to_string(), "first".to_string()),
            ("assistant".to_string(), "Answer one".to_string()),
            ("user".to_string(), "alternative".to_string()),
        ]
    );
    let tree_after = run.stdout.rsplit("[0] system").next().unwrap();
    assert_eq!(
        tree_after.lines().skip(1).collect::<Vec<_>>(),
        [
            "[1] user: first",
            "[2] assistant: Answer one",
            "├─ [3] user: second",
            "│  [4] assistant: Answer two",
            "└─ [5] user: alternative",
            "   [6] assistant: Answer on the fork ← current",
        ],
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout)
            .contains("→ [2] assistant: Answer one\nthe next message starts a new branch here")
    );
}

#[test]
fn forks_at_every_kind_of_node_make_valid_requests() {
    let server = Server::start(vec![
        tool_calls(&[("t1", "list_files", "{}"), ("t2", "list_files", "{}")]),
        text(&["Listed."]),
        text(&["from root"]),
        text(&["from user"]),
        text(&["from call"]),
        text(&["from first result"]),
    ]);
    let env = Env::new();
    // Tree: [1] user, [2] call, [3] result t1, [4] result t2, [5] answer.
    let run = env.run(
        &server.base_url,
        &[],
        "go\n/0\nfrom root\n/1\nfrom user\n/2\nfrom call\n/3\nfrom first result\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 6);
    let shape = |n: usize| -> Vec<String> {
        reqs[n]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let role = m["role"].as_str().unwrap();
                match role {
                    "tool" => format!(
                        "tool:{}:{}",
                        m["tool_call_id"].as_str().unwrap(),
                        m["content"]
                            .as_str()
                            .unwrap()
                            .starts_with("This tool call was not run")
                    ),
                    "assistant" if m.get("tool_calls").is_some() => "assistant+calls".to_string(),
                    _ => format!("{role}:{}", m["content"].as_str().unwrap()),
                }
            })
            .collect()
    };
    assert_eq!(shape(2)[1..], ["user:from root"]);
    assert_eq!(shape(3)[1..], ["user:go", "user:from user"]);
    assert_eq!(
        shape(4)[1..],
        [
            "user:go",
            "assistant+calls",
            "tool:t1:true",
            "tool:t2:true",
            "user:from call"
        ]
    );
    assert_eq!(
        shape(5)[1..],
        [
            "user:go",
            "assistant+calls",
            "tool:t1:false",
            "tool:t2:true",
            "user:from first result"
        ]
    );
    // Every tool call in every request has a result right after it.
    for req in &reqs {
        let msgs = req["messages"].as_array().unwrap();
        for (i, m) in msgs.iter().enumerate() {
            if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                for (k, call) in calls.iter().enumerate() {
                    assert_eq!(msgs[i + 1 + k]["tool_call_id"], call["id"]);
                }
            }
        }
    }
    // The synthetic results were never stored.
    let (_, lines) = env.only_conversation();
    let tools = lines.iter().filter(|l| l["role"] == "tool").count();
    assert_eq!(tools, 2);
}

#[test]
fn restart_and_reload_show_the_same_tree_and_continue_it() {
    let server = Server::start(vec![text(&["A1"]), text(&["A2"]), text(&["A3"])]);
    let env = Env::new();
    let first = env.run(&server.base_url, &[], "one\n/1\ntwo\n/tree\n");
    assert_eq!(first.code, Some(0), "{first:?}");
    let tree1: String = first.stdout.split("[0] system").nth(1).unwrap().to_string();
    let (id, _) = env.only_conversation();

    let second = env.run(
        &server.base_url,
        &[],
        &format!("/switch {}\n/tree\nthree\n", &id[..4]),
    );
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(
        second
            .stdout
            .contains(&format!("switched to {id} (4 messages)")),
        "{second:?}"
    );
    let tree2: String = second
        .stdout
        .split("[0] system")
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(
        tree2.lines().take(5).collect::<Vec<_>>(),
        tree1.lines().take(5).collect::<Vec<_>>()
    );
    // The cursor of a loaded conversation is its last message: "two"'s answer.
    assert_eq!(
        role_contents(&server, 2)[1..],
        [
            ("user".to_string(), "one".to_string()),
            ("user".to_string(), "two".to_string()),
            ("assistant".to_string(), "A2".to_string()),
            ("user".to_string(), "three".to_string()),
        ]
    );
}

#[test]
fn a_torn_file_loads_what_it_can_and_stays_appendable() {
    let server = Server::start(vec![text(&["fine"])]);
    let env = Env::new();
    let path = env.data().join("deadbeef.jsonl");
    fs::write(
        &path,
        concat!(
            r#"{"type":"header","root_id":"r1234567","metadata":{}}"#, "\n",
            r#"{"type":"message","msg_id":"u1234567","role":"user","content":"old question","parent_id":"r1234567","timestamp":"2026-07-24T12:35:55Z","tool_call_id":null,"tool_calls":null}"#, "\n",
            r#"{"type":"message","msg_id":"a1234567","role":"assistant","content":"old answer","parent_id":"u1234567","timestamp":"2026-07-24T12:35:59Z","tool_call_id":null,"tool_calls":null}"#, "\n",
            r#"{"type":"message","msg_id":"x1234567","role":"assis"#,
        ),
    )
    .unwrap();
    let run = env.run(
        &server.base_url,
        &[],
        "/switch deadbeef\n/tree\nnew question\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("skipped 1 unreadable line of the file (line 4)"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("[2] assistant: old answer ← current"),
        "{run:?}"
    );
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[3],
        r#"{"type":"message","msg_id":"x1234567","role":"assis"#
    );
    let new_user: Value = serde_json::from_str(lines[4]).unwrap();
    assert_eq!(
        (new_user["content"].as_str(), new_user["parent_id"].as_str()),
        (Some("new question"), Some("a1234567"))
    );
    let answer: Value = serde_json::from_str(lines[5]).unwrap();
    assert_eq!(answer["content"], "fine");
}

#[test]
fn list_and_switch_by_prefix_mark_the_current_one() {
    let server = Server::start(vec![text(&["a"]), text(&["b"])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "alpha question\n/new\nbeta question\n/list\n/switch\n/switch zzzz\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let files = env.conversation_files();
    assert_eq!(files.len(), 2);
    let list: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains(" msgs "))
        .collect();
    assert_eq!(list.len(), 2, "{run:?}");
    assert!(
        list[0].starts_with("* ") && list[0].ends_with("beta question"),
        "{list:?}"
    );
    assert!(
        list[1].starts_with("  ") && list[1].ends_with("alpha question"),
        "{list:?}"
    );
    assert!(list[0].contains("   2 msgs"));
    assert!(run.stderr.contains("usage: /switch <id>"), "{run:?}");
    assert!(
        run.stderr
            .contains("no conversation `zzzz` in this project"),
        "{run:?}"
    );
}

#[test]
fn bad_commands_change_nothing() {
    let server = Server::start(vec![text(&["ok"])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "hi\n/frob\n/7\n/x1\n/tree extra\n/list everything\n/tree\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let errors: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        errors,
        [
            "error: unknown command /frob; /help lists the commands (start with // to send a line beginning with /)",
            "error: no node [7]; this tree has nodes [0] to [2] (see /tree)",
            "error: unknown command /x1; /help lists the commands (start with // to send a line beginning with /)",
            "error: /tree takes no argument but --full (got `extra`)",
            "error: /list takes no argument but `all` (got `everything`)",
        ]
    );
    assert!(
        run.stdout.ends_with("[2] assistant: ok ← current\n"),
        "{run:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn unreachable_server_says_what_to_set_and_keeps_the_message() {
    let env = Env::new();
    // A port nothing listens on.
    let port = unused_port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let run = env.run(&url, &[], "are you there?\n/tree\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("cannot reach {url}/chat/completions")),
        "{run:?}"
    );
    assert!(run.stderr.contains("Check OPENAI_BASE_URL"), "{run:?}");
    assert!(run.stderr.contains("Your message is saved"), "{run:?}");
    assert!(
        run.stdout.contains("[1] user: are you there? ← current"),
        "{run:?}"
    );
    let (_, lines) = env.only_conversation();
    assert_eq!(lines[1]["content"], "are you there?");
}

#[test]
fn missing_key_for_the_official_api_names_the_variable() {
    let env = Env::new();
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL")
        .arg(env.work())
        .arg("default")
        .arg(env.data());
    let run = run_with_stdin(cmd, "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("no API key for provider `openai`: set OPENAI_API_KEY"),
        "{run:?}"
    );
}

#[test]
fn http_errors_carry_the_servers_message_and_a_hint() {
    let server = Server::start(vec![
        Reply::Status(
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-***"}}"#.into(),
        ),
        Reply::Status(
            404,
            r#"{"error":{"message":"The model `nope` does not exist"}}"#.into(),
        ),
    ]);
    let env = Env::new();
    let mut cmd = env.command(&server.base_url);
    cmd.env("OPENAI_API_KEY", "sk-secret-value-123")
        .arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["--model", "nope"]);
    let run = run_with_stdin(cmd, "one\ntwo\n");
    assert!(
        run.stderr
            .contains("answered 401: Incorrect API key provided: sk-***; check OPENAI_API_KEY"),
        "{run:?}"
    );
    assert!(run.stderr.contains("answered 404: The model `nope` does not exist; check the model name `nope` (--model) and OPENAI_BASE_URL"), "{run:?}");
    assert_eq!(
        server.headers()[0]["authorization"],
        "Bearer sk-secret-value-123"
    );
    assert_eq!(server.requests()[0]["model"], "nope");
    // The key never reaches the conversation file or the output.
    let (_, lines) = env.only_conversation();
    assert!(!serde_json::to_string(&lines).unwrap().contains("sk-secret"));
    assert!(!run.stderr.contains("sk-secret") && !run.stdout.contains("sk-secret"));
}

#[test]
fn a_stream_cut_keeps_what_arrived() {
    let server = Server::start(vec![
        Reply::Cut(vec![chunk_text("Half an ans")]),
        text(&["whole"]),
    ]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "tell me\n/tree\nagain\n");
    assert!(run.stderr.contains("the answer stream was cut"), "{run:?}");
    assert!(
        run.stdout
            .contains("[2] assistant: Half an ans (interrupted) ← current"),
        "{run:?}"
    );
    let (_, lines) = env.only_conversation();
    assert_eq!(lines[2]["interrupted"], true);
    assert_eq!(lines[2]["content"], "Half an ans");
    // The next request is valid and carries the partial answer, marked as cut short.
    assert_eq!(
        role_contents(&server, 1)[2],
        (
            "assistant".into(),
            "Half an ans\n\n[This answer was interrupted before it was complete.]".into()
        )
    );
}

#[test]
fn round_limit_stops_a_model_that_never_stops_calling_tools() {
    let call = || tool_calls(&[("c", "list_files", "{}")]);
    let server = Server::start(vec![
        call(),
        call(),
        text(&["Listed twice; ", "nothing is left."]),
    ]);
    let env = Env::new();
    fs::create_dir_all(env.config_dir()).unwrap();
    fs::write(env.config_dir().join("config.json"), r#"{"max_rounds": 2}"#).unwrap();
    let run = env.run(&server.base_url, &[], "loop forever\n");
    // Two rounds, then one request where the model may not call tools and says where it stands.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2]["tool_choice"], "none");
    assert!(requests[2]["tools"].is_array());
    assert!(requests[1].get("tool_choice").is_none());
    let last = requests[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("Do not call any more tools")
    );
    assert!(
        run.stdout.contains("Listed twice; nothing is left."),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("stopped after 2 rounds of tool calls"),
        "{run:?}"
    );
    let (_, lines) = env.only_conversation();
    let stored = lines.last().unwrap();
    assert_eq!(stored["content"], "Listed twice; nothing is left.");
    assert!(!lines.iter().any(|l| {
        l["content"]
            .as_str()
            .is_some_and(|c| c.contains("Do not call"))
    }));
}

#[test]
fn one_shot_prints_only_the_answer_on_stdout() {
    let server = Server::start(vec![
        tool_calls(&[("c", "list_files", "{}")]),
        text(&["Final ", "answer."]),
    ]);
    let env = Env::new();
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["-p", "list things"]);
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Final answer.\n");
    assert!(run.stderr.contains("→ list_files({})"), "{run:?}");
    let (_, lines) = env.only_conversation();
    // header, question, tool call, tool result, answer
    assert_eq!(lines.len(), 5);

    let failing = Server::start(vec![Reply::Status(500, "{}".into())]);
    let mut cmd = env.command(&failing.base_url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["-p", "x"]);
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("answered 500"), "{run:?}");
}

#[test]
fn unknown_role_is_refused_with_the_list() {
    let env = Env::new();
    fs::create_dir_all(env.work().join(".new/roles")).unwrap();
    fs::write(env.work().join(".new/roles/reviewer.md"), "Review.").unwrap();
    let mut cmd = env.command("http://127.0.0.1:9/v1");
    cmd.arg(env.work()).arg("nosuchrole");
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(2), "{run:?}");
    let work = env.work().canonicalize().unwrap();
    assert_eq!(
        run.stderr.trim(),
        format!(
            "error: unknown role `nosuchrole`; looked for nosuchrole.md in {}, {}, {} and the built-in roles; available roles: code-assistant, default, reviewer",
            env.work().join(".new/roles").display(),
            work.join("roles").display(),
            env.config_dir().join("roles").display()
        )
    );
}

/// The seed's `new WORKDIR ROLE` run from a folder with `roles/` and `skills/` beside it: the
/// role and the flat skills there are read (through the reader of project files).
#[test]
fn roles_and_skills_in_the_folder_new_runs_in_are_read() {
    let env = Env::new();
    let seed = env.dir.path().join("seed");
    fs::create_dir_all(seed.join("roles")).unwrap();
    fs::create_dir_all(seed.join("skills")).unwrap();
    fs::write(seed.join("roles/reviewer.md"), "You review code, tersely.").unwrap();
    fs::write(
        seed.join("skills/style.md"),
        "---\nname: style\ndescription: house style\n---\nAlways use tabs.\n",
    )
    .unwrap();
    let server = Server::start(vec![text(&["ok"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.current_dir(&seed)
        .arg(env.work())
        .arg("reviewer")
        .arg(env.data())
        .args(["-p", "hi"]);
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let system = &messages_of(&server.requests()[0])[0].1;
    assert!(system.starts_with("You review code, tersely."), "{system}");
    assert!(system.contains("Always use tabs."), "{system}");
}

#[test]
fn help_version_and_launch_forms() {
    let env = Env::new();
    let run = run_with_stdin(
        {
            let mut c = env.command("");
            c.arg("--help");
            c
        },
        "",
    );
    assert_eq!(run.code, Some(0));
    for needle in [
        "[WORKDIR]",
        "[ROLE]",
        "[DATADIR]",
        "--provider",
        "--model",
        "--lang",
        "--prompt",
    ] {
        assert!(run.stdout.contains(needle), "{needle}: {run:?}");
    }
    let run = run_with_stdin(
        {
            let mut c = env.command("");
            c.arg("--version");
            c
        },
        "",
    );
    assert_eq!(
        run.stdout.trim(),
        format!("new {}", env!("CARGO_PKG_VERSION"))
    );

    // `new` alone: the current folder, the default role, a per-project data folder.
    let server = Server::start(vec![text(&["hi"])]);
    let run = run_with_stdin(env.command(&server.base_url), "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let projects = env.dir.path().join("xdg-data/new/projects");
    let dirs: Vec<_> = fs::read_dir(&projects)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(dirs.len(), 1);
    assert!(dirs[0].starts_with("work-"), "{dirs:?}");
    // `new WORKDIR ROLE`
    let server = Server::start(vec![text(&["hi"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work()).arg("code-assistant");
    let run = run_with_stdin(cmd, "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        server.messages(0)[0]
            .1
            .starts_with("You are an expert software engineer")
    );
    // A missing working folder is refused.
    let mut cmd = env.command("");
    cmd.arg(env.dir.path().join("missing"));
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("working folder") && run.stderr.contains("missing"),
        "{run:?}"
    );
}

#[test]
fn skills_are_listed_and_broken_ones_reported() {
    let env = Env::new();
    fs::create_dir_all(env.work().join(".new/skills")).unwrap();
    fs::write(
        env.work().join(".new/skills/bad.md"),
        "---\nname: [oops\n---\n",
    )
    .unwrap();
    fs::write(
        env.work().join(".new/skills/translator.md"),
        "---\nname: translator\nenabled: true\n---\nTranslate to French.",
    )
    .unwrap();
    let server = Server::start(vec![text(&["ok"])]);
    let run = env.run(&server.base_url, &[], "/skills\nhi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("bad.md skipped: its front matter is not valid YAML"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("off        code-reviewer (built-in)"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("injected   translator (project, "),
        "{run:?}"
    );
    assert!(server.messages(0)[0].1.contains("Translate to French."));
}

#[test]
fn chinese_interface() {
    let server = Server::start(vec![
        tool_calls(&[("c", "list_files", "{}")]),
        text(&["好"]),
    ]);
    let env = Env::new();
    let run = env.run(&server.base_url, &["--lang", "zh"], "你好\n/tree\n/9\n");
    // The original design's labels.
    assert!(run.stdout.contains("[0] 系统提示词："), "{run:?}");
    assert!(run.stdout.contains("[1] 你：你好"), "{run:?}");
    assert!(
        run.stdout.contains("[2] AI：[工具调用: list_files({})]"),
        "{run:?}"
    );
    assert!(run.stdout.contains("[3] 工具结果："), "{run:?}");
    assert!(run.stdout.contains("[4] AI：好 ← 当前"), "{run:?}");
    assert!(run.stderr.contains("错误：没有节点 [9]"), "{run:?}");
    let (_, lines) = env.only_conversation();
    assert_eq!(lines[1]["content"], "你好");
}

#[test]
fn multi_line_input_with_trailing_backslash() {
    let server = Server::start(vec![text(&["ok"])]);
    let env = Env::new();
    env.run(&server.base_url, &[], "line one\\\nline two\n");
    assert_eq!(server.messages(0)[1].1, "line one\nline two");
}

#[test]
fn two_processes_on_one_datadir_never_corrupt_each_other() {
    let env = Env::new();
    let replies = || {
        (0..10)
            .map(|i| text(&["answer ", &i.to_string()]))
            .collect::<Vec<_>>()
    };
    let (s1, s2) = (Server::start(replies()), Server::start(replies()));
    let input: String = (0..10).map(|i| format!("question {i}\n")).collect();
    let mut c1 = env.command(&s1.base_url);
    c1.arg(env.work()).arg("default").arg(env.data());
    let mut c2 = env.command(&s2.base_url);
    c2.arg(env.work()).arg("default").arg(env.data());
    let (i1, i2) = (input.clone(), input.clone());
    let t1 = thread::spawn(move || run_with_stdin(c1, &i1));
    let t2 = thread::spawn(move || run_with_stdin(c2, &i2));
    assert_eq!(t1.join().unwrap().code, Some(0));
    assert_eq!(t2.join().unwrap().code, Some(0));
    let files = env.conversation_files();
    assert_eq!(files.len(), 2);
    for f in files {
        assert_eq!(read_lines(&f).len(), 21);
    }
}

#[test]
fn the_example_conversation_loads_as_a_tree() {
    let env = Env::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/example.jsonl");
    fs::copy(&example, env.data().join("example.jsonl")).unwrap();
    let run = env.run(
        "http://127.0.0.1:9/v1",
        &[],
        "/switch example\n/tree\n/list\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    let tree: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("[0] system"))
        .skip(1)
        .take(8)
        .collect();
    assert_eq!(
        tree,
        [
            "[1] user: What does main.rs print?",
            r#"[2] assistant: [tool call: read_file({"filepath":"main.rs"})]"#,
            r#"[3] tool: 1 fn main() { println!("hi"); }"#,
            "[4] assistant: It prints `hi` followed by a newline.",
            "├─ [5] user: Translate that answer into Chinese.",
            "│  [6] assistant: 它会打印 `hi` 并换行。",
            "└─ [7] user: Make it print hello instead.",
            r#"   [8] assistant: Sure: change the string literal to "hello". (interrupted) ← current"#,
        ],
        "{run:?}"
    );
    assert!(run.stdout.contains("* example     8 msgs"), "{run:?}");
    assert!(
        run.stdout.trim_end().ends_with("What main.rs prints"),
        "{run:?}"
    );
}

#[test]
fn help_lists_every_command_of_the_table() {
    let env = Env::new();
    let run = env.run("http://127.0.0.1:9/v1", &[], "/help\n");
    for name in [
        "/tree [--full]",
        "/list [all]",
        "/switch <id>",
        "/new",
        "/skills",
        "/help",
        "/exit",
        "/N",
        "//text",
    ] {
        assert!(
            run.stdout.contains(&format!("  {name} ")),
            "{name}: {run:?}"
        );
    }
    // By group, `/N` first among the tree's, the keys listed, nothing past 80 columns.
    let at = |s: &str| run.stdout.find(s).unwrap_or_else(|| panic!("{s}: {run:?}"));
    let order = [
        "The tree\n  /N ",
        "  /tree [--full]",
        "Conversations\n",
        "The project's files\n",
        "Context\n",
        "Extensions\n",
        "Settings\n",
        "Keys\n",
    ];
    for pair in order.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{pair:?}: {run:?}");
    }
    for key in ["Ctrl-C", "Ctrl-L", "Alt-Enter", "Tab"] {
        assert!(run.stdout.contains(&format!("  {key}")), "{key}: {run:?}");
    }
    for line in run.stdout.lines() {
        assert!(line.chars().count() <= 80, "wider than 80: {line:?}");
    }
    let run = env.run("http://127.0.0.1:9/v1", &[], "/help retry\n/help nope\n");
    assert!(
        run.stdout
            .contains("/retry [--model NAME] [--n K]\n  a new answer"),
        "{run:?}"
    );
    assert!(run.stderr.contains("no command /nope"), "{run:?}");
}

#[test]
fn each_streamed_chunk_reaches_the_output_before_the_next_is_sent() {
    use std::io::Read;
    use std::sync::Arc;
    let gate = Arc::new(Semaphore::new(0));
    let pieces = ["first piece ", "second piece ", "third piece"];
    let mut chunks: Vec<String> = pieces.iter().map(|p| chunk_text(p)).collect();
    chunks.push(chunk_finish("stop"));
    chunks.push("[DONE]".into());
    let server = Server::start(vec![Reply::Gated(chunks, gate.clone())]);
    let env = Env::new();
    let mut cmd = env.command(&server.base_url);
    cmd.arg(env.work()).arg("default").arg(env.data());
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }
    // Read stdout on a thread; each chunk must show up while the server still holds the next one.
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    thread::spawn(move || {
        let mut buf = [0u8; 256];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            let _ = tx.send(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    let mut seen = String::new();
    for (i, piece) in pieces.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !seen.contains(piece.trim_end()) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(text) => seen.push_str(&text),
                Err(_) => panic!(
                    "chunk {i} did not reach the output before the next was sent; saw {seen:?}"
                ),
            }
        }
        assert!(
            !seen.contains(pieces.get(i + 1).map_or("\u{0}", |p| p.trim_end())),
            "{seen:?}"
        );
        gate.add_permits(if i + 1 == pieces.len() { 10 } else { 1 });
    }
    assert!(child.wait().unwrap().success());
}

/// Errors say their cause once, and a config file's unknown keys are named with the file.
#[test]
fn errors_say_their_cause_once_and_unknown_config_keys_are_named() {
    let env = Env::new();
    let not_a_folder = env.dir.path().join("file");
    fs::write(&not_a_folder, "").unwrap();
    let mut cmd = env.command("http://127.0.0.1:9/v1");
    cmd.arg(env.work())
        .arg("default")
        .arg(not_a_folder.join("data"));
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("error: creating data folder"),
        "{run:?}"
    );
    assert_eq!(run.stderr.matches("Not a directory").count(), 1, "{run:?}");

    env.write_config("{\"model\": ");
    let run = env.run("http://127.0.0.1:9/v1", &[], "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("is not valid: EOF while parsing"),
        "{run:?}"
    );
    assert_eq!(
        run.stderr.matches("EOF while parsing").count(),
        1,
        "{run:?}"
    );

    env.write_config(
        r#"{"retry_initial_ms": 5, "compactions": {}, "compaction": {"threshold": 1}}"#,
    );
    let run = env.run("http://127.0.0.1:9/v1", &[], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    for key in ["compactions", "compaction.threshold"] {
        assert!(
            run.stderr.contains(&format!(
                "warning: unknown key `{key}` in {} is ignored",
                env.config_dir().join("config.json").display()
            )),
            "{run:?}"
        );
    }

    // A value out of range names its key and its bounds; nothing starts.
    for (config, message) in [
        (
            r#"{"compaction": {"tool_result_threshold": 1}}"#,
            "`compaction.tool_result_threshold` is 1; it must be between 100 and 10000000",
        ),
        (
            r#"{"compaction": {"preview_tokens": 9000}}"#,
            "`compaction.preview_tokens` is 9000; it must be between 10 and 5120",
        ),
        (
            r#"{"compaction": {"breaker_threshold": 0}}"#,
            "`compaction.breaker_threshold` is 0; it must be between 1 and 100",
        ),
        (
            r#"{"context_window_size": 12}"#,
            "`context_window_size` is 12; it must be between 1024 and 100000000",
        ),
        (
            r#"{"providers": {"openai": {"context_window_size": 5}}}"#,
            "`providers.openai.context_window_size` is 5",
        ),
    ] {
        env.write_config(config);
        let run = env.run("http://127.0.0.1:9/v1", &[], "hello\n");
        assert_eq!(run.code, Some(2), "{run:?}");
        assert!(run.stderr.contains(message), "{config}: {run:?}");
        assert!(env.conversation_files().is_empty(), "{run:?}");
    }
}

/// In Chinese, the errors a user meets are Chinese too; what came from elsewhere stays as it came.
#[test]
fn errors_are_translated_in_chinese() {
    let server = Server::start(vec![Reply::Status(
        401,
        r#"{"error":{"message":"invalid key"}}"#.into(),
    )]);
    let env = Env::new();
    let run = env.run(&server.base_url, &["--lang", "zh"], "你好\n/switch nope\n");
    assert!(
        run.stderr
            .contains("返回 401：invalid key；请检查 OPENAI_API_KEY（API 密钥）"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("错误：本项目中没有对话 `nope`"),
        "{run:?}"
    );
    let run = env.run(
        &server.base_url,
        &["--lang", "zh", "--provider", "nope"],
        "",
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("错误：未知服务 `nope`；已知服务："),
        "{run:?}"
    );
}

/// After each turn, one dim line: model, tokens, context, time, and the cost where prices are set;
/// `/status` shows it again with the provider, the permission mode and the session's totals.
#[test]
fn the_status_line_and_status_command() {
    let server = Server::start(vec![text(&["one"]), text(&["two"])]);
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "providers": {"openai": {"pricing": {"input": 2.5, "output": 10}}}}"#,
    );
    let run = env.run(&server.base_url, &[], "/status\nfirst\nsecond\n/status\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    // 11 in at $2.5 and 1 out at $10 per million tokens: $0.0000375, shown as $0.0000.
    assert!(
        run.stdout
            .contains("one\n[gpt-4o-mini · 11 in · 1 out · context 0% of 128k · "),
        "{run:?}"
    );
    assert!(run.stdout.contains(" s · $0.0000]"), "{run:?}");
    assert!(
        run.stdout.contains("no turn yet in this session"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("provider openai · model gpt-4o-mini · permission mode default"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("this session: 2 turns · 22 in · 2 out · $0.0001"),
        "{run:?}"
    );
}

/// AGENTS.md (the user's, then the project's, merged by section) goes into the system prompt;
/// `/init` asks the model to write one, and that write is asked for like every write to AGENTS.md.
#[test]
fn agents_md_shapes_the_prompt_and_init_asks_for_one() {
    let server = Server::start(vec![
        text(&["ok"]),
        tool_calls(&[(
            "w",
            "write_file",
            r###"{"filepath":"AGENTS.md","content":"## Build\ncargo build\n"}"###,
        )]),
        text(&["I could not write it."]),
    ]);
    let env = Env::new();
    fs::write(
        env.config_dir().join("AGENTS.md"),
        "## Tests\nUser: run everything.\n\n## Tone\nBe brief.\n",
    )
    .unwrap();
    fs::write(
        env.work().join("CLAUDE.md"),
        "## Tests\nProject: cargo test.\n@docs/more.md\n@/etc/passwd\n",
    )
    .unwrap();
    fs::create_dir_all(env.work().join("docs")).unwrap();
    fs::write(env.work().join("docs/more.md"), "Included fact.\n").unwrap();
    let run = env.run(&server.base_url, &[], "hi\n/init\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let system = server.messages(0)[0].1.clone();
    assert!(
        system.contains("# Instructions from the project and the user (AGENTS.md)"),
        "{system}"
    );
    assert!(system.contains("## Tone\nBe brief."), "{system}");
    assert!(
        system.contains("## Tests\nProject: cargo test.\nIncluded fact."),
        "{system}"
    );
    assert!(!system.contains("User: run everything."), "{system}");
    assert!(
        run.stderr
            .contains("import `/etc/passwd` refused: only relative paths"),
        "{run:?}"
    );
    // /init: the survey request, and the write that needs approval (none here: no terminal).
    let init = &server.messages(1);
    assert!(
        init.last().unwrap().1.contains("improve its CLAUDE.md"),
        "{init:?}"
    );
    assert!(
        run.stderr
            .contains("the project's AGENTS.md always need approval"),
        "{run:?}"
    );
    assert!(!env.work().join("AGENTS.md").exists());
}

/// `new "what does wc.py do"` (the peers' habit) says how to send a prompt or start with one;
/// `-q TEXT` starts the REPL with TEXT as its first message.
#[test]
fn a_sentence_for_a_folder_is_explained_and_q_starts_with_a_first_message() {
    let env = Env::new();
    let server = Server::start(vec![
        text(&["It counts words."]),
        text(&["You're welcome."]),
    ]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg("what does wc.py do");
    let run = run_with_stdin(cmd, "");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains(r#"new -p "what does wc.py do""#)
            && run.stderr.contains(r#"new -q "what does wc.py do""#),
        "{run:?}"
    );
    assert!(server.requests().is_empty());
    let run = env.run(&server.base_url, &["-q", "what does wc.py do"], "thanks\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("› what does wc.py do"), "{run:?}");
    assert!(run.stdout.contains("It counts words."), "{run:?}");
    let requests = server.requests();
    assert_eq!(
        messages_of(&requests[0]).last().unwrap().1,
        "what does wc.py do"
    );
    assert_eq!(messages_of(&requests[1]).last().unwrap().1, "thanks");
}

/// `--continue` shows where the conversation stands (its last exchange, folded, and its place)
/// and prefers the latest conversation of the REPL over a newer `-p` one, which `/list` marks.
#[test]
fn continue_shows_the_last_exchange_and_passes_over_one_shots() {
    let env = Env::new();
    let long: String = (1..=9).map(|i| format!("line {i}\n")).collect();
    let server = Server::start(vec![
        text(&[&long]),
        text(&["quick answer"]),
        text(&["more"]),
    ]);
    env.run(&server.base_url, &[], "hello there\n");
    thread::sleep(Duration::from_millis(1100));
    let run = env.run(&server.base_url, &["-p", "a quick one"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let run = env.run(&server.base_url, &["--continue"], "/list\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("you:\n  hello there"), "{run:?}");
    assert!(
        run.stdout
            .contains("answer:\n  line 1\n  line 2\n  line 3\n  line 4\n  … (5 more lines)"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("(1 branch in all); the next message continues from here"),
        "{run:?}"
    );
    let list_line = run
        .stdout
        .lines()
        .find(|l| l.contains("a quick one"))
        .expect("the one-shot is listed");
    assert!(list_line.contains("(-p)"), "{list_line}");
    assert!(
        !run.stdout.contains("quick answer"),
        "not the one-shot's: {run:?}"
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with('*') && l.contains("hello there")),
        "the REPL's conversation is the current one: {run:?}"
    );
}

/// `new --help` fits a screen of 80 × 24 (the README has the rest); `new import --help` too.
#[test]
fn help_fits_a_screen() {
    for args in [&["--help"][..], &["import", "--help"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_new"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.lines().count() <= 24, "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
    }
}

/// `/exit` says goodbye, as CodePilot does (`再见！` in Chinese); the end of input leaves quietly.
#[test]
fn exit_says_goodbye() {
    let env = Env::new();
    let run = env.run("http://127.0.0.1:9/v1", &[], "/exit\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.trim_end().ends_with("bye"), "{run:?}");
    let run = env.run("http://127.0.0.1:9/v1", &["--lang", "zh"], "/exit\n");
    assert!(run.stdout.trim_end().ends_with("再见！"), "{run:?}");
    let run = env.run("http://127.0.0.1:9/v1", &[], "");
    assert!(!run.stdout.contains("bye"), "{run:?}");
}

/// `/tree` starts with the conversation's line, as the original design draws it.
#[test]
fn tree_starts_with_the_conversation_s_line() {
    let env = Env::new();
    let server = Server::start(vec![text(&["ok"]), text(&["ok"])]);
    let run = env.run(&server.base_url, &[], "hi\n/tree\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let (id, _) = env.only_conversation();
    assert!(
        run.stdout
            .contains(&format!("conversation [{id}]:\n[0] system")),
        "{run:?}"
    );
    let run = env.run(&server.base_url, &["--continue", "--lang", "zh"], "/tree\n");
    assert!(
        run.stdout.contains(&format!("会话 [{id}]:\n[0] ")),
        "{run:?}"
    );
}
