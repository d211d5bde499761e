//! What only a tree can do: named branches, side questions, `/undo` that keeps what it undoes,
//! and `/merge`, driven through piped stdin.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;
use std::fs;
use std::fs::OpenOptions;

/// The conversation's lines of `type`.
fn lines_of(env: &Env, kind: &str) -> Vec<Value> {
    let (_, lines) = env.only_conversation();
    lines.into_iter().filter(|l| l["type"] == kind).collect()
}

/// `/branch NAME` names the branch at the cursor; the name follows its branch as it grows,
/// survives a reload, is known to `/switch`, `/branches` and `/tree`, and moves when given again;
/// bad names and unknown ones are refused and change nothing.
#[test]
fn named_branches_follow_their_tips_and_survive_a_reload() {
    let server = Server::start(vec![text(&["one"]), text(&["two"]), text(&["three"])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "/branch early\nfirst\n/branch main\n/0\nsecond way\n/branch alt\n/branch 12\n/branch -d nope\n/switch main\nmore\n/branch\n/tree\n",
    );
    assert!(
        run.stderr
            .contains("nothing to name yet: send a first message, then /branch NAME"),
        "a name before any message: {run:?}"
    );
    assert!(run.stderr.contains("usage: /branch"), "{run:?}");
    assert!(run.stderr.contains("no branch is named nope"), "{run:?}");
    assert!(
        without_ids(&run.stdout).contains("this branch is main (its tip is [2]"),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("→ [2] assistant: one"),
        "/switch main: {run:?}"
    );
    // main grew from `one` to `three`: the name followed it.
    assert!(
        without_ids(&run.stdout).contains("  alt  [6] assistant: two  (2 messages · "),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("* main  [4] assistant: three  (4 messages · "),
        "{run:?}"
    );
    assert_eq!(
        last_tree(&run),
        [
            "├─ [1] user: first",
            "│  [2] assistant: one",
            "│  [3] user: more",
            "│  [4] assistant: three  ⟨main⟩ ← current",
            "└─ [5] user: second way",
            "   [6] assistant: two  ⟨alt⟩",
        ]
    );
    let records = lines_of(&env, "branch");
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["name"], "main");
    // Reloaded: the names are there; given again, a name moves; removed, it is gone.
    let run = env.run(
        &server.base_url,
        &["--continue"],
        "/branch\n/switch alt\n/branch main\n/branch -d alt\n/branch\n",
    );
    assert!(
        without_ids(&run.stdout).contains("  alt  [6] assistant: two  (2 messages · "),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout)
            .contains("the name main now stands for this branch (its tip is [6])"),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("the name alt is removed; the branch stays"),
        "{run:?}"
    );
    let stdout = without_ids(&run.stdout);
    let last = stdout.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("* main  [6] assistant: two  (2 messages · "),
        "{run:?}"
    );
    let records = lines_of(&env, "branch");
    assert_eq!(records.len(), 4, "{records:?}");
    assert_eq!(records[3]["deleted"], true);
}

/// `/btw` asks in a side branch with the branch as context and only the tools that read; the
/// cursor stays, so the next message neither carries the side question nor hangs below it, and
/// `--continue` does not land in it; `/prev` and `/next` pass it over.
#[test]
fn a_side_question_leaves_the_main_line_as_it_was() {
    let server = Server::start(vec![
        text(&["main answer"]),
        text(&["side answer"]),
        text(&["next answer"]),
        text(&["after reload"]),
    ]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "hello\n/btw what is x?\nnext\n/prev\n",
    );
    assert!(run.stdout.contains("side answer"), "{run:?}");
    assert!(
        without_ids(&run.stdout).contains("(a side question, [3]: the cursor is back at [2]"),
        "{run:?}"
    );
    let requests = server.requests();
    // The side question saw the branch, and only reading tools.
    assert_eq!(
        messages_of(&requests[1])[1..],
        [
            ("user".to_string(), "hello".to_string()),
            ("assistant".to_string(), "main answer".to_string()),
            ("user".to_string(), "what is x?".to_string()),
        ]
    );
    let tools = tool_names(&requests[1]);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    for t in ["write_file", "edit_file", "bash"] {
        assert!(!tools.contains(&t.to_string()), "{t} offered: {tools:?}");
    }
    // The main line goes on from its answer, without the side question.
    assert_eq!(
        messages_of(&requests[2])[1..],
        [
            ("user".to_string(), "hello".to_string()),
            ("assistant".to_string(), "main answer".to_string()),
            ("user".to_string(), "next".to_string()),
        ]
    );
    assert!(
        run.stderr.contains("there is no fork above this point"),
        "/prev passes the side question over: {run:?}"
    );
    let messages = lines_of(&env, "message");
    assert_eq!(messages[2]["content"], "what is x?");
    assert_eq!(messages[2]["side"], true);
    assert!(messages[4].get("side").is_none(), "{messages:?}");
    // Asked last, a side question is not where --continue lands.
    let run = env.run(&server.base_url, &["--continue"], "/btw and y?\n/exit\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let run = env.run(&server.base_url, &["--continue"], "/tree\n");
    assert!(
        run.stdout.contains("[6] assistant: next answer ← current"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("user: and y? (side question)"),
        "{run:?}"
    );
}

/// `/undo` goes back to before the last message with the folder as it was there (asked), and
/// keeps what it undid, folded in `/tree` (drawn whole by `/tree --full`).
#[test]
fn undo_goes_back_with_the_folder_and_folds_what_it_undid() {
    let server = Server::start(vec![
        text(&["hi"]),
        tool_calls(&[(
            "w",
            "write_file",
            &json!({"filepath": "a.txt", "content": "made\n"}).to_string(),
        )]),
        text(&["written"]),
        text(&["again"]),
    ]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "hello\nwrite a\n/undo\ny\n/tree\n/tree --full\nafresh\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!env.work().join("a.txt").exists(), "{run:?}");
    assert!(
        without_ids(&run.stdout).contains("undone: [3] and what followed it stay in the tree"),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("[3] user: write a (undone · 3 messages folded)"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("[5] tool:"),
        "--full draws what is folded: {run:?}"
    );
    let undone = lines_of(&env, "undone");
    assert_eq!(undone.len(), 1, "{undone:?}");
    // The next message goes on from [2].
    assert_eq!(
        messages_of(&server.requests()[3])[1..],
        [
            ("user".to_string(), "hello".to_string()),
            ("assistant".to_string(), "hi".to_string()),
            ("user".to_string(), "afresh".to_string()),
        ]
    );
}

/// `/merge NAME` asks the model for what that branch found from where it left this one, and
/// appends it here as a merge node, which the next request carries; the folder is not changed.
#[test]
fn merge_brings_a_branch_s_conclusion_back_as_a_node() {
    let server = Server::start(vec![
        text(&["start"]),
        text(&["x failed: the cache is stale"]),
        text(&["y it is"]),
        text(&["going on"]),
    ]);
    server.answer_summaries("Tried x; it failed because the cache is stale. Changed no files.");
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "begin\ntry x\n/branch x-way\n/2\ntry y\n/merge nope\n/merge 6\n/merge x-way\ngo on\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("no node or branch nope"), "{run:?}");
    assert!(
        run.stderr.contains("[6] is on this branch already"),
        "{run:?}"
    );
    assert!(
        without_ids(&run.stdout).contains("merged branch [4] (x-way) as [7]"),
        "{run:?}"
    );
    let requests = server.requests();
    let summary = requests
        .iter()
        .find(|r| is_summary_request(r))
        .expect("a summary request");
    let asked = serde_json::to_string(summary).unwrap();
    assert!(
        asked.contains("try x") && asked.contains("x failed"),
        "{asked}"
    );
    assert!(
        !asked.contains("begin"),
        "the shared part is not summarised: {asked}"
    );
    let last = requests
        .iter()
        .rev()
        .find(|r| !is_summary_request(r))
        .unwrap();
    let sent = messages_of(last);
    let merged = &sent[sent.len() - 2];
    assert_eq!(merged.0, "user");
    assert!(
        merged
            .1
            .contains("Tried x; it failed because the cache is stale.")
            && merged.1.contains("Branch [4] (x-way), which left at [2]"),
        "{sent:?}"
    );
    assert_eq!(sent.last().unwrap().1, "go on");
    let messages = lines_of(&env, "message");
    let node = messages
        .iter()
        .find(|m| m.get("merged_from").is_some())
        .unwrap();
    assert_eq!(node["merged_from"]["tip"], messages[3]["msg_id"]);
    assert_eq!(node["merged_from"]["fork"], messages[1]["msg_id"]);
    let run = env.run(&server.base_url, &["--continue"], "/tree\n");
    assert!(
        run.stdout
            .contains("[7] merged from [4], which left at [2]"),
        "{run:?}"
    );
}

/// `/retry --model NAME` answers again with another model for that answer alone; `--n K` gives K
/// answers; `/compare` shows the answers at the fork with each one's model, tokens and files.
#[test]
fn retry_with_another_model_and_compare_the_answers() {
    let server = Server::start(vec![
        tool_calls(&[(
            "w",
            "write_file",
            &json!({"filepath": "a.txt", "content": "one\n"}).to_string(),
        )]),
        text(&["wrote one"]),
        text(&["plain two"]),
        text(&["plain three"]),
        text(&["plain four"]),
        text(&["back to the first model"]),
    ]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive", "--model", "first-model"],
        "make it\n/retry --bogus\n/retry --n 9\n/retry --model other-model\n/retry --n 2\n/compare\nthanks\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stderr.matches("usage: /retry").count(), 2, "{run:?}");
    let models: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        models,
        [
            "first-model",
            "first-model",
            "other-model",
            "first-model",
            "first-model",
            "first-model"
        ],
        "{run:?}"
    );
    // Numbered as `/compare` numbers them: the third and fourth answers to `make it`.
    assert!(run.stdout.contains("answer 4 of 4"), "{run:?}");
    // Four answers to `make it`: the first wrote a file.
    let stdout = without_ids(&run.stdout);
    let compared = stdout.split("1 of 4 · ").nth(1).expect("a comparison");
    assert!(compared.contains("wrote one"), "{compared}");
    assert!(compared.contains("files: A a.txt"), "{compared}");
    assert!(
        compared.contains("2 of 4 · [5] · other-model"),
        "{compared}"
    );
    assert!(compared.contains("plain two"), "{compared}");
    // The two side by side: the cursor is on the one shown last (either may have ended first).
    assert!(compared.contains("plain three"), "{compared}");
    assert!(compared.contains("plain four"), "{compared}");
    assert_eq!(
        compared.matches("* 3 of 4").count() + compared.matches("* 4 of 4").count(),
        1,
        "{compared}"
    );
}

/// `/merge NAME --files` brings the branch's file changes into the folder, after a yes: a file
/// untouched here is taken, one changed here in other lines is merged three ways, and one both
/// changed in the same line is shown with markers and never written.
#[test]
fn merge_files_takes_merges_and_leaves_conflicts_alone() {
    let write = |path: &str, content: &str| {
        (
            path.to_string(),
            json!({"filepath": path, "content": content}).to_string(),
        )
    };
    let x = [
        write("a.txt", "1\n2\n3\n4\n5 theirs\n"),
        write("c.txt", "x theirs\n"),
        write("new.txt", "n\n"),
    ];
    let here = [
        write("a.txt", "1 ours\n2\n3\n4\n5\n"),
        write("c.txt", "x ours\n"),
    ];
    let calls = |w: &[(String, String)]| {
        let owned: Vec<(String, &str, &str)> = w
            .iter()
            .enumerate()
            .map(|(i, (_, args))| (format!("w{i}"), "write_file", args.as_str()))
            .collect();
        let refs: Vec<(&str, &str, &str)> = owned
            .iter()
            .map(|(id, n, a)| (id.as_str(), *n, *a))
            .collect();
        tool_calls(&refs)
    };
    let server = Server::start(vec![
        text(&["ok"]),
        calls(&x),
        text(&["done x"]),
        calls(&here),
        text(&["done here"]),
    ]);
    server.answer_summaries("Changed a.txt's last line, c.txt, and added new.txt.");
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "1\n2\n3\n4\n5\n").unwrap();
    fs::write(env.work().join("c.txt"), "x\n").unwrap();
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "begin\nchange on x\n/branch x\n/2\n/restore\ny\nchange here\n/merge x --files\ny\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let read = |n: &str| fs::read_to_string(env.work().join(n)).unwrap();
    assert_eq!(read("a.txt"), "1 ours\n2\n3\n4\n5 theirs\n", "{run:?}");
    assert_eq!(read("new.txt"), "n\n", "{run:?}");
    assert_eq!(
        read("c.txt"),
        "x ours\n",
        "a conflict is never written: {run:?}"
    );
    assert!(run.stdout.contains("  merge a.txt"), "{run:?}");
    assert!(run.stdout.contains("  take  new.txt"), "{run:?}");
    assert!(
        run.stdout.contains("  conflict (left as it is) c.txt"),
        "{run:?}"
    );
    assert!(run.stdout.contains("wrote 2 files"), "{run:?}");
    assert!(
        run.stderr.contains("c.txt: left as it is for you to merge")
            && run.stderr.contains("<<<<<<<")
            && run.stderr.contains("x theirs"),
        "{run:?}"
    );
}

/// After `/undo` the branch's tip is where the undo went (a name given then lands there), and a
/// reload resumes there too: the undone part is not sent again.
#[test]
fn an_undo_holds_across_a_reload_and_names() {
    let server = Server::start(vec![text(&["hi"]), text(&["second"]), text(&["third"])]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "hello\nmore\n/undo\n/branch here\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        without_ids(&run.stdout).contains("this branch is here (its tip is [2]"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("error"), "{run:?}");
    let run = env.run(&server.base_url, &["--continue"], "next\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        messages_of(server.requests().last().unwrap())[1..],
        [
            ("user".to_string(), "hello".to_string()),
            ("assistant".to_string(), "hi".to_string()),
            ("user".to_string(), "next".to_string()),
        ]
    );
}

/// A side question passes the user's `pre_message` hooks like any message; a branch name in the
/// file that is not a name (control characters) is passed over, never printed.
#[test]
fn side_questions_meet_the_hooks_and_hostile_names_are_dropped() {
    let server = Server::start(vec![text(&["hi"])]);
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "hook": {"entries": [{"name": "no-secrets",
            "event": "pre_message",
            "condition": {"field": "prompt", "op": "contains", "value": "password"},
            "action": {"command": "echo 'no passwords' >&2; exit 2"}}]}})
        .to_string(),
    );
    let run = env.run(
        &server.base_url,
        &[],
        "hello\n/btw my password is hunter2\n",
    );
    assert!(
        run.stderr
            .contains("a hook blocked it (hook `no-secrets` blocked the message: no passwords)"),
        "{run:?}"
    );
    assert_eq!(server.requests().len(), 1, "{run:?}");
    let (id, _) = env.only_conversation();
    let file = env.data().join(format!("{id}.jsonl"));
    let (_, lines) = env.only_conversation();
    let tip = lines.iter().rev().find(|l| l["type"] == "message").unwrap()["msg_id"].clone();
    let mut f = OpenOptions::new().append(true).open(&file).unwrap();
    use std::io::Write;
    writeln!(
        f,
        "{}",
        json!({"type": "branch", "msg_id": tip, "name": "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\nfake"})
    )
    .unwrap();
    drop(f);
    let run = env.run(&server.base_url, &["--continue"], "/branch\n/tree\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.contains('\u{1b}'), "{run:?}");
    assert!(run.stdout.contains("no branch has a name yet"), "{run:?}");
}

/// `/retry --n 3` runs the three answers side by side: their first requests are all out before
/// any answer ends; the answer that writes has the folder to itself and puts it back when it
/// ends, so the two that read (and wait for it) see the folder as they all began.
#[test]
fn retry_n_runs_side_by_side_and_each_sees_the_same_folder() {
    let stalled = |reply: Reply, secs: f64| {
        let Reply::Sse(mut chunks) = reply else {
            unreachable!()
        };
        let rest = chunks.split_off(chunks.len() - 2);
        Reply::SseStall(chunks, Duration::from_secs_f64(secs), rest)
    };
    let write = json!({"filepath": "b.txt", "content": "after\n"}).to_string();
    let read = json!({"filepath": "b.txt"}).to_string();
    let env = Env::new();
    let work = env.work();
    let second_round = || {
        let work = work.clone();
        move |request: &Value| {
            let last = request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .cloned();
            if last.is_some_and(|m| m["tool_call_id"] == "w") {
                // Someone else writes a file meanwhile: the writer's put-back leaves it alone.
                fs::write(work.join("mine.txt"), "not the answer's\n").unwrap();
                // The writer keeps the folder a while: the readers' calls come meanwhile.
                stalled(text(&["wrote b"]), 2.0)
            } else {
                text(&["read b"])
            }
        }
    };
    let server = Server::start(vec![
        text(&["hello to you"]),
        tool_calls(&[("w", "write_file", &write)]),
        stalled(tool_calls(&[("r1", "read_file", &read)]), 1.0),
        stalled(tool_calls(&[("r2", "read_file", &read)]), 1.0),
        with(second_round()),
        with(second_round()),
        with(second_round()),
    ]);
    fs::write(env.work().join("b.txt"), "before\n").unwrap();
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "hello\n/retry --n 3\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 7, "{run:?}");
    // The three first requests, before any tool result came back.
    for request in &requests[1..4] {
        let last = messages_of(request).last().cloned().unwrap();
        assert_eq!(last, ("user".to_string(), "hello".to_string()), "{run:?}");
    }
    // Each reader saw the file as it was, though the writer wrote before they read.
    let results: Vec<Value> = lines_of(&env, "message")
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    let read_results: Vec<&Value> = results
        .iter()
        .filter(|m| m["tool_call_id"] != "w")
        .collect();
    assert_eq!(read_results.len(), 2, "{results:?}");
    for r in read_results {
        let content = r["content"].as_str().unwrap();
        assert!(content.contains("before"), "{content}");
        assert!(!content.contains("after"), "{content}");
    }
    // The folder is as they all began, but for what someone else wrote meanwhile; the
    // writer's state is its nodes'.
    assert_eq!(
        fs::read_to_string(env.work().join("b.txt")).unwrap(),
        "before\n"
    );
    assert_eq!(
        fs::read_to_string(env.work().join("mine.txt")).unwrap(),
        "not the answer's\n"
    );
    assert!(!run.stderr.contains("not put back"), "{run:?}");
    // Numbered after the first answer, as `/compare` numbers them.
    for i in 2..=4 {
        assert!(run.stdout.contains(&format!("answer {i} of 4")), "{run:?}");
    }
    let shown = |s: &str| run.stdout.find(s).unwrap_or_else(|| panic!("{s}: {run:?}"));
    assert!(shown("answer 2 of 4") < shown("answer 3 of 4"));
    assert!(shown("answer 3 of 4") < shown("answer 4 of 4"));
    assert!(run.stdout.contains("wrote b"), "{run:?}");
    assert_eq!(run.stdout.matches("read b").count(), 2, "{run:?}");
    // The three answers are siblings under the message they answer.
    let messages = lines_of(&env, "message");
    let user = messages.iter().find(|m| m["content"] == "hello").unwrap();
    let answers = messages
        .iter()
        .filter(|m| m["parent_id"] == user["msg_id"])
        .count();
    assert_eq!(answers, 4, "the first answer and three more: {messages:?}");
}

/// Where answers cannot run side by side (checkpoints off: nothing could be put back; a Stop
/// hook: it checks each answer in the folder that answer left), `/retry --n K` says so and runs
/// them one after another.
#[test]
fn retry_n_runs_one_after_another_without_checkpoints_or_with_a_stop_hook() {
    for config in [
        json!({"retry_initial_ms": 5, "checkpoints": {"enabled": false}}),
        json!({"retry_initial_ms": 5, "hook": {"entries": [
            {"name": "done", "event": "post_message", "action": {"command": "true"}}]}}),
    ] {
        let server = Server::start(vec![
            text(&["one"]),
            Reply::SseStall(
                vec![chunk_text("two")],
                Duration::from_millis(300),
                vec![chunk_finish("stop"), "[DONE]".into()],
            ),
            text(&["three"]),
        ]);
        let env = Env::new();
        env.write_config(&config.to_string());
        let run = env.run(
            &server.base_url,
            &["--permission-mode", "permissive"],
            "hi\n/retry --n 2\n",
        );
        assert_eq!(run.code, Some(0), "{run:?}");
        assert!(
            run.stdout.contains("the answers run one after another"),
            "{run:?}"
        );
        assert!(!run.stdout.contains("side by side"), "{run:?}");
        // One after another: the second answer printed after the first whole.
        let (two, three) = (
            run.stdout.find("two").unwrap(),
            run.stdout.find("three").unwrap(),
        );
        assert!(two < three, "{run:?}");
        assert!(run.stdout.contains("answer 3 of 3"), "{run:?}");
    }
}
