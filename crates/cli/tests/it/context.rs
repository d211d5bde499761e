//! Context management as a user meets it: a conversation that outgrows the server's window keeps
//! going (either protocol), `/compact`, `/context`, `/dump`, `/export` and `/retry` around a
//! summary node, and big tool results sent as previews the model can read the rest of.

use serde_json::{Value, json};

use crate::support::*;
use std::fs;

/// Eight questions of about 500 tokens each; the server's window holds about four.
fn long_questions() -> String {
    (0..8)
        .map(|i| format!("question {i}: {}\n", "word ".repeat(400)))
        .collect()
}

/// The summary lines of a conversation file.
fn summary_lines(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l.get("summary").is_some())
        .collect()
}

/// Checks that the conversation outgrew the window and went on: every question answered, every
/// request the server accepted within its window, summaries in the file with what they replace.
fn check_outgrown(server: &Server, run: &Run, lines: &[Value], window: u64) {
    assert_eq!(run.code, Some(0), "{run:?}");
    for i in 0..8 {
        assert!(
            run.stdout.contains(&format!("answer {i}")),
            "answer {i} missing: {run:?}"
        );
    }
    assert!(run.stdout.contains("compacted "), "{run:?}");
    assert!(!run.stderr.contains("error"), "{run:?}");
    let summaries = summary_lines(lines);
    assert!(!summaries.is_empty());
    let ids: Vec<&str> = lines.iter().filter_map(|l| l["msg_id"].as_str()).collect();
    for s in &summaries {
        assert_eq!(s["role"], "user");
        let info = &s["summary"];
        // What it replaces is an earlier message of the file, kept there.
        assert!(ids.contains(&info["replaces"].as_str().unwrap()), "{s}");
        assert!(info["messages"].as_u64().unwrap() >= 2, "{s}");
        assert!(
            info["tokens_after"].as_u64() < info["tokens_before"].as_u64(),
            "{s}"
        );
        assert!(s["content"].as_str().unwrap().contains("THE GIST"));
    }
    // Every question is still in the file.
    for i in 0..8 {
        let q = format!("question {i}:");
        assert!(
            lines
                .iter()
                .any(|l| l["content"].as_str().is_some_and(|c| c.starts_with(&q))),
            "{q}"
        );
    }
    // The requests answered fit the window; the last one went out compacted.
    let requests = server.requests();
    let last = requests
        .iter()
        .rev()
        .find(|r| !is_summary_request(r))
        .unwrap();
    let text = last.to_string();
    assert!(text.contains("THE GIST"), "{text}");
    assert!(!text.contains("question 0:"), "{text}");
    assert!(count_tokens(&text) <= window);
}

#[test]
fn a_conversation_that_outgrows_the_window_keeps_working_openai() {
    let replies: Vec<Reply> = (0..8).map(|i| text(&[&format!("answer {i}")])).collect();
    let server = Server::start(replies);
    server.set_window(3000);
    server.answer_summaries("THE GIST of it all");
    let env = Env::new();
    // Two tools only, so that the window's room goes to the conversation.
    env.write_config(r#"{"retry_initial_ms": 5, "tools": ["read_file", "grep"]}"#);
    let run = env.run(&server.base_url, &[], &long_questions());
    let (_, lines) = env.only_conversation();
    check_outgrown(&server, &run, &lines, 3000);
    // The first refusal named the window; `new` believed it from then on.
    let refused = server
        .requests()
        .iter()
        .filter(|r| count_tokens(&r.to_string()) > 3000)
        .count();
    assert!(refused <= 1, "one refusal teaches the window: {refused}");
}

#[test]
fn a_conversation_that_outgrows_the_window_keeps_working_anthropic() {
    let replies: Vec<Reply> = (0..8)
        .map(|i| anthropic_text(&[&format!("answer {i}")]))
        .collect();
    let server = Server::start(replies);
    server.set_window(3000);
    server.answer_summaries("THE GIST of it all");
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "tools": ["read_file", "grep"]}"#);
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_BASE_URL", server.root_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key")
        .arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["--provider", "anthropic", "--model", "claude-test"]);
    let run = run_with_stdin(cmd, &long_questions());
    let (_, lines) = env.only_conversation();
    check_outgrown(&server, &run, &lines, 3000);
}

/// `/compact` with a focus, then what each command shows on both sides of the summary node.
#[test]
fn compact_context_dump_export_retry_and_tree_around_a_summary() {
    // A long first answer: the summary must be smaller than what it replaces.
    let long_answer = format!("first answer {}", "and more ".repeat(300));
    let server = Server::start(vec![
        text(&[&long_answer]),
        text(&["second answer"]),
        text(&["third answer"]),
        text(&["after the summary"]),
        text(&["retried"]),
        text(&["from above"]),
    ]);
    server.answer_summaries("THE GIST");
    let env = Env::new();
    let script = "\
one\n\
two\n\
three\n\
/compact keep the file names\n\
/context\n\
four\n\
/retry\n\
/dump\n\
/edit 7\n\
/export\n\
/tree\n\
/1\n\
fork from the top\n";
    let run = env.run(&server.base_url, &[], script);
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    // The summary request carried the focus and the whole branch.
    let summary_request = requests.iter().find(|r| is_summary_request(r)).unwrap();
    let asked = summary_request["messages"][1]["content"].as_str().unwrap();
    assert!(
        asked.contains("Pay most attention to: keep the file names"),
        "{asked}"
    );
    assert!(
        asked.contains("## User\none")
            && asked.contains("## Assistant\nfirst answer")
            && !asked.contains("second answer"),
        "{asked}"
    );
    // At least five messages are kept, starting at a user message: the first turn goes.
    assert!(run.stdout.contains("compacted 2 messages: "), "{run:?}");
    // `/context`: the window and its source, the summary as a kind of its own.
    assert!(
        run.stdout
            .contains("context window: 128,000 tokens (default for gpt-4o models)"),
        "{run:?}"
    );
    assert!(run.stdout.contains("  summary "), "{run:?}");
    assert!(run.stdout.contains("automatic compaction: on"), "{run:?}");
    // Below the summary: the system prompt, the summary, the kept part, then what follows.
    let after = requests
        .iter()
        .position(|r| r.to_string().contains("\"four\""))
        .unwrap();
    let roles_contents = messages_of;
    let sent = roles_contents(&requests[after]);
    let contents: Vec<&str> = sent.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(sent[0].0, "system");
    assert!(sent[1].1.ends_with("THE GIST"), "{sent:?}");
    assert_eq!(
        contents[2..],
        ["two", "second answer", "three", "third answer", "four"]
    );
    // `/retry` sends the same compacted request again.
    assert_eq!(roles_contents(&requests[after + 1]), sent);
    // `/dump` writes what is sent: the summary, not the originals.
    let dumps: Vec<_> = fs::read_dir(env.data())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".dump.md"))
        .collect();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let dump = fs::read_to_string(&dumps[0]).unwrap();
    assert!(
        dump.contains("THE GIST")
            && dump.contains("second answer")
            && !dump.contains("first answer"),
        "{dump}"
    );
    // `/export` shows the whole branch, the summary marked with what it stands for.
    let exported: Vec<_> = fs::read_dir(env.work())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".md"))
        .collect();
    let export = fs::read_to_string(&exported[0]).unwrap();
    assert!(export.contains("first answer"), "{export}");
    assert!(
        export.contains("## Summary (compaction)")
            && export.contains("stands for the 2 messages above"),
        "{export}"
    );
    // A summary is never edited.
    assert!(
        run.stderr
            .contains("[7] is a summary node: it is never edited"),
        "{run:?}"
    );
    // `/tree`: the summary node says what it replaces.
    assert!(run.stdout.contains("summary of [1–2] · "), "{}", run.stdout);
    // A fork above the summary sees the originals again.
    let top = roles_contents(requests.last().unwrap());
    let contents: Vec<&str> = top[1..].iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(contents, ["one", "fork from the top"]);
    // Nothing was rewritten: every line of the file is one the session appended.
    let (_, lines) = env.only_conversation();
    assert_eq!(summary_lines(&lines).len(), 1);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["content"] == "one" || l["content"] == long_answer.as_str())
            .count(),
        2
    );
}

/// A result over the threshold goes as a preview; the model reads the rest from the saved file
/// and cannot write there.
#[test]
fn a_big_tool_result_is_previewed_and_the_rest_read_from_its_file() {
    let saved_path = |request: &Value| -> String {
        let results = last_result(request);
        let marker = "The whole result is in ";
        let at = results.find(marker).expect("a preview note") + marker.len();
        results[at..].split(':').next().unwrap().to_string()
    };
    let server = Server::start(vec![
        tool_calls(&[("c1", "read_file", r#"{"filepath":"big.txt"}"#)]),
        with(move |request| {
            let path = saved_path(request);
            let args = json!({"filepath": path, "offset": 1500, "limit": 3}).to_string();
            tool_calls(&[("c2", "read_file", &args)])
        }),
        with(move |request| {
            // The earlier request's preview is still a preview; find the path in it.
            let messages = request["messages"].as_array().unwrap();
            let preview = messages.iter().find(|m| m["tool_call_id"] == "c1").unwrap()["content"]
                .as_str()
                .unwrap();
            let marker = "The whole result is in ";
            let at = preview.find(marker).unwrap() + marker.len();
            let path = preview[at..].split(':').next().unwrap();
            let args = json!({"filepath": path, "content": "overwritten"}).to_string();
            tool_calls(&[("c3", "write_file", &args)])
        }),
        text(&["done"]),
    ]);
    let env = Env::new();
    let big: String = (1..=1800)
        .map(|i| format!("line {i} of the big file\n"))
        .collect();
    fs::write(env.work().join("big.txt"), &big).unwrap();
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "read the big file\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{run:?}");
    // Sent: the start and a note; stored: the whole result.
    let preview = last_result(&requests[1]);
    assert!(
        preview.starts_with("     1\tline 1 of the big file"),
        "{preview}"
    );
    assert!(preview.contains("only its first"), "{preview}");
    assert!(preview.len() < 4000, "{}", preview.len());
    let (_, lines) = env.only_conversation();
    let stored = lines.iter().find(|l| l["tool_call_id"] == "c1").unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(stored.contains("line 1800 of the big file"));
    // The model read lines of the rest from the saved file, outside WORKDIR.
    let read = last_result(&requests[2]);
    assert!(read.contains("1500\tline 1500 of the big file"), "{read}");
    // And could not write there.
    let refused = last_result(&requests[3]);
    assert!(refused.contains("outside the working folder"), "{refused}");
    let path = saved_path(&requests[1]);
    assert!(fs::read_to_string(&path).unwrap().contains("line 1800"));
    assert!(path.starts_with(&env.data().to_string_lossy().to_string()));
}

/// A summary line that names a message not above it is reported and ignored; the conversation
/// still loads and goes on.
#[test]
fn a_misplaced_summary_is_reported_and_ignored() {
    let server = Server::start(vec![text(&["fine"])]);
    let env = Env::new();
    let file = env.data().join("c0ffee00.jsonl");
    let lines = [
        json!({"type":"header","conversation_id":"c0ffee00","root_id":"r","created_at":"2026-11-01T10:00:00Z"}),
        json!({"type":"message","msg_id":"u1","role":"user","content":"original question","parent_id":"r","timestamp":"2026-11-01T10:00:01Z","tool_call_id":null,"tool_calls":null}),
        json!({"type":"message","msg_id":"a1","role":"assistant","content":"original answer","parent_id":"u1","timestamp":"2026-11-01T10:00:02Z","tool_call_id":null,"tool_calls":null}),
        json!({"type":"message","msg_id":"s1","role":"user","content":"BOGUS SUMMARY","parent_id":"a1","timestamp":"2026-11-01T10:00:03Z","tool_call_id":null,"tool_calls":null,
            "summary":{"replaces":"elsewhere","messages":9,"tokens_before":100,"tokens_after":10}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&file, text).unwrap();
    let run = env.run(&server.base_url, &["--continue"], "go on\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains("kept but not used in requests: s1"),
        "{run:?}"
    );
    let sent = server.requests()[0].to_string();
    assert!(
        sent.contains("original question") && !sent.contains("BOGUS"),
        "{sent}"
    );
}

/// `context_safety_margin`: with compaction off, a request that would leave less than the margin
/// of the window becomes a last answer: the model is told to wrap up, may not call tools (a call
/// it makes anyway is dropped, not run), the user is told why, and the answer is stored.
#[test]
fn a_full_window_that_cannot_be_compacted_wraps_up() {
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "context_window_size": 4096, "context_safety_margin": 1000,
            "compaction": {"enabled": false}}"#,
    );
    fs::write(env.work().join("keep.txt"), "x").unwrap();
    let server = Server::start(vec![
        text(&["hello"]),
        tool_calls(&[("r", "bash", r#"{"command":"rm keep.txt"}"#)]),
    ]);
    // Usage as the server counts (the estimate is calibrated by it); the server itself would
    // take more than the config's window.
    server.set_window(1_000_000);
    let long = format!("read this: {}\n", "word ".repeat(8000));
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        &format!("hi\n{long}"),
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{run:?}");
    let last = |r: &Value| {
        messages_of(r)
            .last()
            .map(|(_, content)| content.clone())
            .unwrap_or_default()
    };
    assert_eq!(last(&requests[0]), "hi");
    assert!(
        last(&requests[1]).contains("nearly filled your context window"),
        "{:?}",
        last(&requests[1])
    );
    assert!(env.work().join("keep.txt").exists(), "the call was not run");
    assert!(
        run.stderr.contains("the context window is nearly full"),
        "{run:?}"
    );
    // The instruction is not stored; the question and the answer are.
    let (_, lines) = env.only_conversation();
    assert!(!lines.iter().any(|l| {
        l["content"]
            .as_str()
            .is_some_and(|c| c.contains("nearly filled"))
    }));
    assert_eq!(lines.iter().filter(|l| l["role"] == "assistant").count(), 2);
}

/// Behind LiteLLM with a 2,048-token window (issue 43, 18): a conversation made with a bigger
/// window goes on there. The window is the one LiteLLM's error states (its text names the
/// request's tokens first, llama-server's body quoted as a Python dict), the request's count it
/// states calibrates the estimates, the compaction's own summary requests fit the window (one
/// refused would be sent again smaller: `a_summary_request_refused_as_too_long_is_sent_again_smaller`
/// in the engine's tests), compaction stays on, and every later message is answered.
#[test]
fn behind_litellm_the_stated_window_is_read_and_summary_requests_fit_it() {
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "tools": ["read_file"]}"#);
    let big = Server::start((0..8).map(|i| text(&[&format!("answer {i}")])).collect());
    let questions: String = (0..8)
        .map(|i| format!("question {i}: {}\n", "word ".repeat(250)))
        .collect();
    let run = env.run(&big.base_url, &[], &questions);
    assert_eq!(run.code, Some(0), "{run:?}");

    let small = Server::start(vec![text(&["answer after"]), text(&["and again"])]);
    small.behind_litellm(2048);
    // A summary as long as one may be: the running summary fills its room in the next request.
    small.answer_summaries(&format!("THE GIST {}", "detail ".repeat(170)));
    let run = env.run(
        &small.base_url,
        &["--continue"],
        "and now?\n/context\nonce more\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("answer after"), "{run:?}");
    assert!(run.stdout.contains("and again"), "{run:?}");
    assert!(run.stdout.contains("compacted "), "{run:?}");
    assert!(!run.stderr.contains("error"), "{run:?}");
    assert!(
        run.stdout.contains(
            "context window: 2,048 tokens (named by the server's context-overflow error)"
        ),
        "{run:?}"
    );
    let requests = small.requests();
    let size = |r: &Value| count_tokens_litellm(&r.to_string());
    // The refusal stated the request's count too: the estimates were calibrated by it, so the
    // summary requests were measured as the server measures, and each fitted.
    let summaries: Vec<u64> = requests
        .iter()
        .filter(|r| is_summary_request(r))
        .map(size)
        .collect();
    assert!(!summaries.is_empty());
    assert!(summaries.iter().all(|n| *n <= 2048), "{summaries:?}");
    // After the first refusal (which taught the window), every message fits.
    let messages: Vec<u64> = requests
        .iter()
        .filter(|r| !is_summary_request(r))
        .map(size)
        .collect();
    assert!(messages[0] > 2048, "{messages:?}");
    assert!(messages[1..].iter().all(|n| *n <= 2048), "{messages:?}");
    assert_eq!(messages.len(), 3, "{messages:?}");
}
