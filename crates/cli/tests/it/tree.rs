//! The tree as a power tool: retry, edit, alternatives, branches, resume, titles, deletion, export,
//! dump and search, driven through piped stdin.

use serde_json::Value;

use crate::support::*;
use std::fs;
#[cfg(unix)]
use std::os::unix::fs::symlink;
#[cfg(not(windows))]
use std::process::Command;
use std::thread;
use std::time::Duration;
#[cfg(not(windows))]
use std::time::Instant;

fn contents(server: &Server, n: usize) -> Vec<String> {
    server
        .messages(n)
        .into_iter()
        .skip(1)
        .map(|(role, text)| format!("{role}: {text}"))
        .collect()
}

#[test]
fn retry_answers_the_same_message_again_as_a_sibling() {
    let server = Server::start(vec![text(&["first answer"]), text(&["second answer"])]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "/retry\nquestion\n/retry\n/tree\n");
    assert!(
        run.stderr
            .contains("nothing to retry: there is no user message on this branch"),
        "{run:?}"
    );
    assert_eq!(contents(&server, 1), ["user: question"]);
    assert_eq!(
        last_tree(&run),
        [
            "[1] user: question",
            "├─ [2] assistant: first answer",
            "└─ [3] assistant: second answer ← current"
        ]
    );
}

#[test]
fn edit_makes_a_sibling_and_answers_it() {
    let server = Server::start(vec![
        text(&["A1"]),
        text(&["A2"]),
        text(&["A2 edited"]),
        text(&["A0"]),
    ]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "first\nsecond\n/edit\nsecond, better\n/edit 1\nfirst\n/edit 2\n/edit 42\n/edit x\n/edit 1\nzeroth\n/tree\n",
    );
    assert_eq!(
        contents(&server, 2),
        ["user: first", "assistant: A1", "user: second, better"]
    );
    assert_eq!(contents(&server, 3), ["user: zeroth"]);
    assert_eq!(
        server.requests().len(),
        4,
        "the unchanged edit sent nothing"
    );
    assert!(
        run.stdout
            .contains("the text is unchanged; /retry asks for a new answer to it"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("[2] is an assistant message; only user messages can be edited"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("/edit takes a node number from /tree (got `42`)"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("/edit takes a node number from /tree (got `x`)"),
        "{run:?}"
    );
    assert_eq!(
        last_tree(&run),
        [
            "├─ [1] user: first",
            "│  [2] assistant: A1",
            "│  ├─ [3] user: second",
            "│  │  [4] assistant: A2",
            "│  └─ [5] user: second, better",
            "│     [6] assistant: A2 edited",
            "└─ [7] user: zeroth",
            "   [8] assistant: A0 ← current",
        ]
    );
}

#[test]
fn prev_next_and_branches_move_between_alternatives() {
    let server = Server::start(vec![text(&["one"]), text(&["two"]), text(&["three"])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "/prev\nq\n/next\n/retry\n/retry\n/next\n/prev\n/prev\n/prev\n/branches\n/next\n/tree\n",
    );
    let errors: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        errors,
        [
            "error: there is no fork above this point: nothing to flip between",
            "error: there is no fork above this point: nothing to flip between",
            "error: this is the last of 3 alternatives",
            "error: this is the first of 3 alternatives",
        ],
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains(
            "alternative 2 of 3\n→ [3] assistant: two\nthe next message continues from here"
        ),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("alternative 1 of 3\n→ [2] assistant: one"),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("* [2] assistant: one  (2 messages)\n  [3] assistant: two  (2 messages)\n  [4] assistant: three  (2 messages)"),
        "{run:?}"
    );
    assert_eq!(last_tree(&run)[2], "├─ [3] assistant: two ← current");
}

#[test]
fn continue_and_resume_reopen_conversations() {
    let server = Server::start(vec![
        text(&["old"]),
        text(&["newer"]),
        text(&["again"]),
        text(&["more"]),
    ]);
    let env = Env::new();
    env.run(&server.base_url, &[], "older conversation\n");
    thread::sleep(Duration::from_millis(1100)); // timestamps have whole seconds
    env.run(&server.base_url, &[], "newer conversation\n");
    let files = env.conversation_files();
    let id_of = |needle: &str| {
        files
            .iter()
            .find(|f| fs::read_to_string(f).unwrap().contains(needle))
            .unwrap()
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let (older, newer) = (id_of("older conversation"), id_of("newer conversation"));

    let run = env.run(&server.base_url, &["--continue"], "and then?\n");
    assert!(
        run.stdout
            .starts_with(&format!("resumed {newer} (2 messages)")),
        "{run:?}"
    );
    assert_eq!(
        contents(&server, 2),
        [
            "user: newer conversation",
            "assistant: newer",
            "user: and then?"
        ]
    );

    let run = env.run(
        &server.base_url,
        &["--resume", &older[..5]],
        "/tree\nfollow-up\n",
    );
    assert!(
        run.stdout
            .starts_with(&format!("resumed {older} (2 messages)")),
        "{run:?}"
    );
    assert_eq!(
        contents(&server, 3)[..2],
        [
            "user: older conversation".to_string(),
            "assistant: old".to_string()
        ]
    );

    let run = env.run(&server.base_url, &["--resume", "zzzzzz"], "");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("no conversation `zzzzzz` in this project"),
        "{run:?}"
    );

    // The aliases.
    let run = env.run(
        &server.base_url,
        &[],
        &format!("/resume nope\n/sessions\n/resume {older}\n"),
    );
    assert!(
        run.stderr
            .contains("no conversation `nope` in this project"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(&format!("  {older}     4 msgs")),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(&format!("switched to {older}")),
        "{run:?}"
    );

    // --continue in an empty project starts a new conversation and says so.
    let empty = Env::new();
    let run = empty.run(&server.base_url, &["--continue"], "");
    assert_eq!(run.code, Some(0));
    assert!(
        run.stderr.contains("no conversation to continue"),
        "{run:?}"
    );
}

#[test]
fn titles_and_deletion_are_appended_records_and_moves() {
    let server = Server::start(vec![text(&["a"]), text(&["b"])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "/title too early\nplanning the trip\n/title\n/title Trip to Lisbon\n/title\n/new\nother topic\n/list\n",
    );
    assert!(run.stderr.contains("nothing to name yet"), "{run:?}");
    assert!(
        run.stdout
            .contains("planning the trip\ntitled “Trip to Lisbon”\nTrip to Lisbon\n"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("2 msgs") && run.stdout.contains("Trip to Lisbon"),
        "{run:?}"
    );
    let files = env.conversation_files();
    let trip = files
        .iter()
        .find(|f| fs::read_to_string(f).unwrap().contains("Lisbon"))
        .unwrap()
        .clone();
    let trip_id = trip.file_stem().unwrap().to_string_lossy().into_owned();
    let lines = read_lines(&trip);
    assert_eq!(lines.last().unwrap()["type"], "title");
    assert_eq!(lines.len(), 4);

    // Deleting asks first; "n" keeps the file, "y" moves it to the trash; the current one is refused.
    let run = env.run(
        &server.base_url,
        &[],
        &format!("/delete {trip_id}\nn\n/delete\n/delete nope\n/delete {trip_id}\ny\n/list\n"),
    );
    assert!(run.stdout.contains(&format!("Move conversation {trip_id} “Trip to Lisbon” (2 messages) to the trash? [y/N]\nnothing deleted")), "{run:?}");
    assert!(run.stderr.contains("usage: /delete <id>"), "{run:?}");
    assert!(run.stderr.contains("no conversation `nope`"), "{run:?}");
    assert!(!trip.exists());
    let trashed = env.data().join("trash").join(format!("{trip_id}.jsonl"));
    assert_eq!(read_lines(&trashed), lines, "moved whole, never rewritten");
    assert!(!run.stdout.contains("Lisbon\n"), "{run:?}");

    let other = env.conversation_files()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let run = env.run(
        &server.base_url,
        &["--resume", &other],
        &format!("/delete {other}\n"),
    );
    assert!(
        run.stderr.contains("that is the current conversation"),
        "{run:?}"
    );
    assert!(env.data().join(format!("{other}.jsonl")).exists());
}

#[cfg(unix)]
#[test]
fn export_and_dump_write_what_was_said_and_what_the_model_sees() {
    let server = Server::start(vec![
        tool_calls(&[("c1", "list_files", "{}")]),
        text(&["Here is the list."]),
        text(&["other branch"]),
        text(&["next"]),
    ]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "/export\nwhat is here?\n/1\nsomething else\n/4\n/export\n/export --json tree.json\n/export --yaml\n/export a b\n/dump\n/dump extra\ncontinue\n",
    );
    let (id, _) = env
        .conversation_files()
        .first()
        .map(|f| (f.file_stem().unwrap().to_string_lossy().into_owned(), ()))
        .unwrap();
    assert!(run.stderr.contains("nothing to export"), "{run:?}");
    assert!(
        run.stderr
            .contains("/export knows --json only (got `--yaml`)"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("/export takes one file name (got another: `b`)"),
        "{run:?}"
    );
    assert!(run.stderr.contains("/dump takes no argument"), "{run:?}");

    // Markdown: the branch at the cursor only.
    let md = fs::read_to_string(env.work().join(format!("{id}.md"))).unwrap();
    assert!(
        md.contains("## User\n\n") && md.contains("what is here?"),
        "{md}"
    );
    assert!(md.contains("**Tool call** `list_files` (`c1`)"), "{md}");
    assert!(md.contains("Here is the list."), "{md}");
    assert!(
        !md.contains("something else") && !md.contains("other branch"),
        "{md}"
    );

    // JSON: the whole tree.
    let tree: Value =
        serde_json::from_str(&fs::read_to_string(env.work().join("tree.json")).unwrap()).unwrap();
    assert_eq!(tree["id"], id.as_str());
    assert_eq!(tree["messages"].as_array().unwrap().len(), 7);

    // Dump: exactly the body of the next request, minus the message typed after it.
    let dump: Value = serde_json::from_str(
        &fs::read_to_string(env.data().join(format!("{id}.dump.json"))).unwrap(),
    )
    .unwrap();
    let next = &server.requests()[3];
    let sent = next["messages"].as_array().unwrap();
    assert_eq!(
        dump["messages"].as_array().unwrap()[..],
        sent[..sent.len() - 1]
    );
    assert_eq!(dump["tools"], next["tools"]);
    assert_eq!(dump["model"], next["model"]);
    let dump_md = fs::read_to_string(env.data().join(format!("{id}.dump.md"))).unwrap();
    // Readable by the user only, like the conversations.
    for ext in ["dump.md", "dump.json"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(env.data().join(format!("{id}.{ext}")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{ext}");
    }
    assert!(dump_md.starts_with("# What the model sees"), "{dump_md}");
    assert!(
        dump_md.contains("## system") && dump_md.contains("You are a helpful assistant"),
        "{dump_md}"
    );
    // The dump files are not taken for conversations.
    assert_eq!(env.conversation_files().len(), 1);
}

#[test]
fn search_finds_messages_across_conversations() {
    let server = Server::start(vec![
        text(&["Paris is the capital of France."]),
        text(&["Berlin."]),
        text(&["ok"]),
    ]);
    let env = Env::new();
    env.run(
        &server.base_url,
        &[],
        "Tell me about France\n/new\nAnd Germany?\n",
    );
    let run = env.run(
        &server.base_url,
        &[],
        "/search FRANCE\n/search nothing-like-this\n/search\n",
    );
    let hits: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("] user:") || l.contains("] assistant:"))
        .collect();
    assert_eq!(hits.len(), 2, "{run:?}");
    assert!(
        hits.iter()
            .any(|h| h.ends_with("[1] user: Tell me about France")),
        "{hits:?}"
    );
    assert!(
        hits.iter()
            .any(|h| h.ends_with("[2] assistant: Paris is the capital of France.")),
        "{hits:?}"
    );
    assert!(
        run.stdout.contains("2 matches in 2 conversations"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("0 matches in 2 conversations"),
        "{run:?}"
    );
    assert!(run.stderr.contains("usage: /search <text>"), "{run:?}");
}

#[test]
fn a_reload_shows_the_same_tree_titles_and_branches() {
    let server = Server::start(vec![text(&["A"]), text(&["B"]), text(&["C"])]);
    let env = Env::new();
    let first = env.run(
        &server.base_url,
        &[],
        "q1\n/retry\n/edit 1\nq1 again\n/title Kept\n/tree\n/branches\n/list\n",
    );
    let second = env.run(
        &server.base_url,
        &["--continue"],
        "/tree\n/branches\n/list\n",
    );
    assert_eq!(last_tree(&first), last_tree(&second));
    let branches = |run: &Run| -> Vec<String> {
        run.stdout
            .lines()
            .filter(|l| l.contains("messages)") && l[1..].starts_with(" ["))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(branches(&first), branches(&second));
    assert_eq!(branches(&second).len(), 3);
    let listed = |run: &Run| {
        run.stdout
            .lines()
            .find(|l| l.contains(" msgs "))
            .unwrap()
            .to_string()
    };
    assert_eq!(listed(&first), listed(&second));
    assert!(listed(&second).ends_with("Kept"));
}

/// Another agent's history in DATADIR (Claude Code's, here) is never opened as a conversation,
/// so nothing is appended to it.
#[test]
fn another_agent_s_history_is_left_alone() {
    let server = Server::start(vec![text(&["fine"])]);
    let env = Env::new();
    fs::create_dir_all(env.data()).unwrap();
    let foreign = env.data().join("c1a0de01.jsonl");
    let text = concat!(
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"role":"assistant","content":"hello"}}"#,
        "\n"
    );
    fs::write(&foreign, text).unwrap();
    let run = env.run(&server.base_url, &[], "/switch c1a0de01\nstill here\n");
    assert!(
        run.stderr.contains(
            "is not a conversation of new's (it looks like Claude Code's history); it is left alone"
        ),
        "{run:?}"
    );
    assert_eq!(fs::read_to_string(&foreign).unwrap(), text);
    let run = env.run(&server.base_url, &["--resume", "c1a0de01"], "");
    assert_ne!(run.code, Some(0), "{run:?}");
    assert_eq!(fs::read_to_string(&foreign).unwrap(), text);
}

/// `/clear` (CodePilot's): the next message starts a fresh branch from the root; the branch left
/// stays in `/tree`; said in English and Chinese, and listed in `/help`.
#[test]
fn clear_starts_a_fresh_branch_from_the_root_and_keeps_the_old_one() {
    for (lang, said, help) in [
        (
            "en",
            "a fresh branch from the start of conversation",
            "clear the screen",
        ),
        ("zh", "下一条消息将开启新分支", "清屏"),
    ] {
        let env = Env::new();
        let server = Server::start(vec![text(&["one"]), text(&["two"])]);
        let run = env.run(
            &server.base_url,
            &["--lang", lang],
            "first\n/clear\nsecond\n/tree\n/help\n/clear now\n",
        );
        assert_eq!(run.code, Some(0), "{run:?}");
        assert!(run.stdout.contains(said), "{run:?}");
        assert!(run.stdout.contains(help), "{run:?}");
        // The second question was sent without the first exchange.
        let sent = messages_of(&server.requests()[1]);
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[1].1, "second");
        let (_, lines) = env.only_conversation();
        let root = lines[0]["root_id"].as_str().unwrap().to_string();
        let users: Vec<&Value> = lines.iter().filter(|l| l["role"] == "user").collect();
        assert_eq!(users.len(), 2);
        assert!(
            users.iter().all(|u| u["parent_id"] == root.as_str()),
            "{lines:?}"
        );
        assert!(run.stdout.contains("first") && run.stdout.contains("second"));
        // Arguments are refused, and nothing moves; piped, nothing erases a screen.
        assert!(run.stderr.contains("/clear"), "{run:?}");
        assert!(!run.stdout.contains("\x1b[2J"), "{run:?}");
    }
}

/// Issue 41 (11), as written: a conversation file in DATADIR that is a link to a conversation
/// outside is not appended through (nor read), and `-r` of a FIFO named like a conversation
/// says so at once instead of hanging.
#[cfg(unix)]
#[test]
fn a_conversation_linked_out_of_datadir_or_a_fifo_is_refused_at_once() {
    let server = Server::start(vec![text(&["first"]), text(&["second"])]);
    let other = Env::new();
    let run = other.run(&server.base_url, &[], "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let (id, _) = other.only_conversation();
    let target = other.data().join(format!("{id}.jsonl"));
    let before = fs::read(&target).unwrap();
    let env = Env::new();
    symlink(&target, env.data().join(format!("{id}.jsonl"))).unwrap();
    let run = env.run(
        &server.base_url,
        &["--resume", &id],
        "appended through the link\n",
    );
    assert!(
        run.stderr
            .contains("is not a regular file (a link, a named pipe or a device)"),
        "{run:?}"
    );
    assert_eq!(fs::read(&target).unwrap(), before);
    let fifo = env.data().join("f1f0f1f0.jsonl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let run = env.run(&server.base_url, &["-r", "f1f0f1f0"], "");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        run.stderr
            .contains("is not a regular file (a link, a named pipe or a device)"),
        "{run:?}"
    );
}
