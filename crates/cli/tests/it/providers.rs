//! Providers for daily use: Anthropic, retries and failures, reasoning, /model and /models, and
//! the first run, against scripted servers.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::*;
use std::fs;
use std::time::Duration;

fn anthropic(env: &Env, server: &Server) -> Command {
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_BASE_URL", server.root_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key")
        .arg(env.work())
        .arg("default")
        .arg(env.data())
        .args(["--provider", "anthropic", "--model", "claude-test"]);
    cmd
}

#[test]
fn anthropic_streams_text_runs_tools_and_reports_cache_usage() {
    let server = Server::start(vec![
        anthropic_tools(&[
            ("toolu_01", "read_file", r#"{"filepath":"a.txt"}"#),
            ("toolu_02", "list_files", "{}"),
        ]),
        anthropic_text(&["The file ", "says hi."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "hi\n").unwrap();
    let run = run_with_stdin(anthropic(&env, &server), "read a.txt\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("→ read_file({\"filepath\":\"a.txt\"})"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("The file says hi.\n[claude-test · 157 in · 11 out · 100 cached · 7 cache write · context 0% of 200k · "),
        "{run:?}"
    );

    let h = &server.headers()[0];
    assert_eq!(h["x-api-key"], "sk-ant-test-key");
    assert_eq!(h["anthropic-version"], "2023-06-01");
    let first = &server.requests()[0];
    assert_eq!(first["model"], "claude-test");
    assert_eq!(first["stream"], true);
    assert!(first["max_tokens"].as_u64().unwrap() > 0);
    assert!(
        first["system"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("You are a helpful assistant")
    );
    assert_eq!(first["system"][0]["cache_control"]["type"], "ephemeral");
    // The seven built-in tools, `use_skill` (for the built-in skills), `agent` and `task_status`.
    assert_eq!(first["tools"].as_array().unwrap().len(), 10);
    assert_eq!(
        first["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"read a.txt","cache_control":{"type":"ephemeral"}}]}])
    );

    let second = &server.requests()[1]["messages"];
    assert_eq!(second[1]["role"], "assistant");
    assert_eq!(
        second[1]["content"][0],
        json!({"type":"tool_use","id":"toolu_01","name":"read_file","input":{"filepath":"a.txt"}})
    );
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(second[2]["content"][0]["tool_use_id"], "toolu_01");
    assert_eq!(second[2]["content"][0]["content"], "     1\thi\n");
    assert_eq!(second[2]["content"][1]["tool_use_id"], "toolu_02");

    // Stored in the OpenAI shape of the file format.
    let (_, lines) = env.only_conversation();
    assert_eq!(
        lines[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"filepath":"a.txt"}"#
    );
    assert_eq!(lines[3]["tool_call_id"], "toolu_01");
    assert_eq!(lines[5]["usage"]["cache_read_tokens"], 100);
}

#[test]
fn anthropic_forks_at_tool_calls_make_valid_requests() {
    let server = Server::start(vec![
        anthropic_tools(&[
            ("toolu_a", "list_files", "{}"),
            ("toolu_b", "list_files", "{}"),
        ]),
        anthropic_text(&["listed"]),
        anthropic_text(&["from the call"]),
        anthropic_text(&["after a user message"]),
    ]);
    let env = Env::new();
    // [1] user, [2] call, [3] result a, [4] result b, [5] answer.
    let run = run_with_stdin(
        anthropic(&env, &server),
        "go\n/2\nfork at the call\n/1\nsecond user message\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let reqs = server.requests();
    let fork = &reqs[2]["messages"];
    assert_eq!(fork.as_array().unwrap().len(), 3);
    assert_eq!(fork[2]["content"][0]["tool_use_id"], "toolu_a");
    assert!(
        fork[2]["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("not run")
    );
    assert_eq!(fork[2]["content"][1]["tool_use_id"], "toolu_b");
    assert_eq!(fork[2]["content"][2]["text"], "fork at the call");
    // Two user messages in a row are merged into one turn.
    let merged = &reqs[3]["messages"];
    assert_eq!(merged.as_array().unwrap().len(), 1);
    assert_eq!(merged[0]["content"][0]["text"], "go\n\nsecond user message");
}

#[test]
fn anthropic_thinking_is_shown_stored_and_sent_back_with_its_signature() {
    let thinking = Reply::Sse(vec![
        json!({"type":"message_start","message":{"usage":{"input_tokens":5}}}).to_string(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}).to_string(),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants files."}}).to_string(),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}).to_string(),
        json!({"type":"content_block_stop","index":0}).to_string(),
        json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_t","name":"list_files","input":{}}}).to_string(),
        json!({"type":"content_block_stop","index":1}).to_string(),
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}}).to_string(),
        json!({"type":"message_stop"}).to_string(),
    ]);
    let server = Server::start(vec![thinking, anthropic_text(&["Done."])]);
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "thinking_budget": 1024}"#);
    let run = run_with_stdin(anthropic(&env, &server), "list\n");
    assert!(
        run.stdout.starts_with(
            "[reasoning]\nThe user wants files.\n[tokens: 5 in · 12 out]\n→ list_files({})"
        ),
        "{run:?}"
    );
    assert_eq!(
        server.requests()[0]["thinking"],
        json!({"type":"enabled","budget_tokens":1024})
    );
    let sent = &server.requests()[1]["messages"][1]["content"][0];
    assert_eq!(
        sent,
        &json!({"type":"thinking","thinking":"The user wants files.","signature":"EqQBCgIYAhIM"})
    );
    let (_, lines) = env.only_conversation();
    assert_eq!(lines[2]["reasoning"], "The user wants files.");
    assert_eq!(lines[2]["reasoning_signature"], "EqQBCgIYAhIM");
}

#[test]
fn anthropic_error_event_after_200_is_retried_and_a_cut_stream_kept() {
    let overloaded = Reply::Sse(vec![
        json!({"type":"message_start","message":{"usage":{"input_tokens":5}}}).to_string(),
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})
            .to_string(),
    ]);
    let cut = Reply::Cut(vec![
        json!({"type":"message_start","message":{"usage":{"input_tokens":5}}}).to_string(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}).to_string(),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Half of"}}).to_string(),
    ]);
    let server = Server::start(vec![overloaded, anthropic_text(&["Fine now."]), cut]);
    let env = Env::new();
    let run = run_with_stdin(anthropic(&env, &server), "one\ntwo\n/tree\n");
    assert!(
        run.stdout
            .contains("↻ Overloaded (overloaded_error); retrying in"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("(attempt 2 of 3)\nFine now."),
        "{run:?}"
    );
    assert!(run.stderr.contains("the answer stream was cut"), "{run:?}");
    assert!(
        run.stdout
            .contains("[4] assistant: Half of (interrupted) ← current"),
        "{run:?}"
    );
    assert_eq!(
        server.requests().len(),
        3,
        "a stream cut after data is not retried"
    );
}

fn openai_attempts(replies: Vec<Reply>, input: &str) -> (Run, usize) {
    let server = Server::start(replies);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], input);
    let n = server.requests().len();
    (run, n)
}

#[test]
fn retryable_failures_are_retried_with_notice_and_others_are_not() {
    // 429 with Retry-After, then success: two attempts.
    let (run, n) = openai_attempts(
        vec![
            Reply::StatusWith(
                429,
                r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#.into(),
                vec![("retry-after", "0".into())],
            ),
            text(&["ok"]),
        ],
        "hi\n",
    );
    assert_eq!(n, 2);
    assert!(
        run.stdout
            .contains("↻ 429 Rate limit reached; retrying in 0.0 s (attempt 2 of 3)\nok\n"),
        "{run:?}"
    );

    // 5xx and 529 three times: three attempts, then the final error says what to do.
    let (run, n) = openai_attempts(
        vec![
            Reply::Status(500, "{}".into()),
            Reply::Status(529, r#"{"error":{"message":"Overloaded"}}"#.into()),
            Reply::Status(503, "{}".into()),
        ],
        "hi\n",
    );
    assert_eq!(n, 3);
    assert_eq!(run.stdout.matches("↻ ").count(), 2, "{run:?}");
    assert!(
        run.stderr.contains("answered 503: (empty body) {}") || run.stderr.contains("answered 503"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("the server failed: try again later"),
        "{run:?}"
    );

    // No retry where it cannot help.
    for (code, body, hint) in [
        (400, r#"{"error":{"message":"bad request"}}"#, "bad request"),
        (
            401,
            r#"{"error":{"message":"invalid key"}}"#,
            "check OPENAI_API_KEY",
        ),
        (
            403,
            r#"{"error":{"message":"forbidden"}}"#,
            "check OPENAI_API_KEY",
        ),
        (
            404,
            r#"{"error":{"message":"no such model"}}"#,
            "check the model name",
        ),
        (
            429,
            r#"{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}"#,
            "quota or budget is spent",
        ),
    ] {
        let (run, n) = openai_attempts(
            vec![Reply::Status(code, body.into()), text(&["never"])],
            "hi\n",
        );
        assert_eq!(n, 1, "{code}");
        assert!(!run.stdout.contains('↻'), "{code}: {run:?}");
        assert!(run.stderr.contains(hint), "{code}: {run:?}");
        // Only the error shows, no note of an empty answer.
        assert!(!run.stdout.contains("empty answer"), "{code}: {run:?}");
    }
}

#[test]
fn an_unreachable_server_is_tried_three_times() {
    let env = Env::new();
    let port = unused_port();
    let run = env.run(&format!("http://127.0.0.1:{port}/v1"), &[], "hello?\n");
    assert_eq!(
        run.stdout.matches("↻ connection failed").count(),
        2,
        "{run:?}"
    );
    assert!(run.stdout.contains("(attempt 3 of 3)"), "{run:?}");
    assert!(run.stderr.contains("cannot reach"), "{run:?}");
}

#[test]
fn reasoning_streams_are_shown_apart_stored_and_sent_back_after_tool_calls() {
    let reasoning = |text: &str| {
        json!({"choices":[{"index":0,"delta":{"reasoning_content":text}}]}).to_string()
    };
    let call = Reply::Sse(vec![
        reasoning("I should list "),
        reasoning("the files."),
        json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"list_files","arguments":"{}"}}]}}]}).to_string(),
        chunk_finish("tool_calls"),
        "[DONE]".into(),
    ]);
    let answer = Reply::Sse(vec![
        json!({"choices":[{"index":0,"delta":{"reasoning":"Now answer."}}]}).to_string(),
        chunk_text("Nothing here."),
        chunk_finish("stop"),
        "[DONE]".into(),
    ]);
    let server = Server::start(vec![call, answer]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "what files?\n");
    // No usage reported: the status line says only the model and the time.
    assert!(
        run.stdout.starts_with(
            "[reasoning]\nI should list the files.\n→ list_files({})\n  ✓ .: 0 entries\n[reasoning]\nNow answer.\nNothing here.\n[gpt-4o-mini · "
        ),
        "{run:?}"
    );
    let status = run
        .stdout
        .lines()
        .find(|l| l.starts_with("[gpt-4o-mini · "))
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(
        status.ends_with(" s]") && !status.contains(" in · "),
        "{run:?}"
    );
    let second = &server.requests()[1]["messages"];
    assert_eq!(second[2]["reasoning_content"], "I should list the files.");
    let (_, lines) = env.only_conversation();
    assert_eq!(lines[2]["reasoning"], "I should list the files.");
    assert_eq!(lines[4]["reasoning"], "Now answer.");
    assert_eq!(lines[4]["content"], "Nothing here.");
}

#[test]
fn model_and_models() {
    let server = Server::start(vec![text(&["ok"])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "/model\n/models\n/model model-a\n/model two words\nhi\n/model\n",
    );
    assert!(
        run.stdout.contains(&format!(
            "provider openai (openai, {}) · model gpt-4o-mini",
            server.base_url
        )),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("  model-a  Model A\n  model-b\n/model NAME switches"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("model model-a for the rest of this session"),
        "{run:?}"
    );
    assert!(run.stderr.contains("a model name has no spaces"), "{run:?}");
    assert_eq!(server.requests()[0]["model"], "model-a");
    assert!(
        run.stdout.trim_end().ends_with("· model model-a"),
        "{run:?}"
    );

    // Anthropic lists models with its own headers.
    let env = Env::new();
    let run = run_with_stdin(anthropic(&env, &server), "/models\n");
    assert!(run.stdout.contains("model-a"), "{run:?}");
    assert_eq!(
        server.headers().last().unwrap()["x-api-key"],
        "sk-ant-test-key"
    );

    // A server without the endpoint says so.
    let env = Env::new();
    let port = unused_port();
    let run = env.run(&format!("http://127.0.0.1:{port}/v1"), &[], "/models\n");
    assert!(
        run.stderr.contains("cannot list the models: cannot reach"),
        "{run:?}"
    );
}

#[test]
fn first_run_without_configuration_explains_what_to_set() {
    let env = Env::new();
    fs::remove_file(env.config_dir().join("config.json")).unwrap();
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL").arg(env.work());
    let run = run_with_stdin(cmd, "/help\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    for needle in [
        "export OPENAI_API_KEY=",
        "export ANTHROPIC_API_KEY=",
        "export OPENAI_BASE_URL=http://127.0.0.1:8080/v1",
        "config.json, for example:",
        "\"provider\": \"anthropic\"",
    ] {
        assert!(run.stderr.contains(needle), "{needle}: {run:?}");
    }
    assert!(run.stdout.contains("/help"), "commands still work: {run:?}");
    // Once a key is set, no more of it.
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL")
        .env("OPENAI_API_KEY", "sk-x")
        .arg(env.work());
    let run = run_with_stdin(cmd, "");
    assert!(!run.stderr.contains("export"), "{run:?}");
}

#[test]
fn config_kinds_and_values_reach_the_request() {
    let server = Server::start(vec![anthropic_text(&["hi"])]);
    let env = Env::new();
    env.write_config(&format!(
        r#"{{"provider":"proxy","max_tokens":333,"prompt_cache":false,
            "providers":{{"proxy":{{"kind":"anthropic","base_url":"{}","model":"claude-local"}}}}}}"#,
        server.root_url()
    ));
    let mut cmd = env.command("");
    cmd.env_remove("OPENAI_BASE_URL")
        .env("PROXY_API_KEY", "pk")
        .arg(env.work())
        .arg("default")
        .arg(env.data());
    let run = run_with_stdin(cmd, "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let req: &Value = &server.requests()[0];
    assert_eq!(req["max_tokens"], 333);
    assert_eq!(req["model"], "claude-local");
    assert!(!req.to_string().contains("cache_control"));
    assert_eq!(server.headers()[0]["x-api-key"], "pk");
}

#[test]
fn an_idle_stream_times_out_and_keeps_what_arrived() {
    let server = Server::start(vec![Reply::SseStall(
        vec![chunk_text("Slow start")],
        Duration::from_secs(30),
        vec![],
    )]);
    let env = Env::new();
    env.write_config(r#"{"idle_timeout_secs": 1}"#);
    let run = env.run(&server.base_url, &[], "hello\n/tree\n");
    assert!(
        run.stderr
            .contains("the answer stream was cut: no data for 1 s (idle timeout)"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("[2] assistant: Slow start (interrupted) ← current"),
        "{run:?}"
    );
}

/// `/dump` writes exactly the body the provider in use sends, for both providers: the request
/// for the branch at node [1] is the first one the server received.
#[test]
fn dump_writes_the_body_the_server_receives_for_each_provider() {
    let dumped = |env: &Env| -> Value {
        let files: Vec<_> = fs::read_dir(env.data())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".dump.json"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        serde_json::from_str(&fs::read_to_string(&files[0]).unwrap()).unwrap()
    };
    // OpenAI-compatible.
    let server = Server::start(vec![text(&["hello back"])]);
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "x").unwrap();
    let run = env.run(&server.base_url, &[], "hello\n/1\n/dump\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(dumped(&env), server.requests()[0]);
    // Anthropic: its own shape (system apart, max_tokens, cache_control), not OpenAI's.
    let server = Server::start(vec![anthropic_text(&["hello back"])]);
    let env = Env::new();
    let run = run_with_stdin(anthropic(&env, &server), "hello\n/1\n/dump\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let body = dumped(&env);
    assert_eq!(body, server.requests()[0]);
    assert!(
        body["system"].is_array() && body["max_tokens"].is_number(),
        "{body}"
    );
}

/// Every answer is capped (a small local model runs away without it): `max_tokens` (8192 by
/// default), or less when the context window leaves less after the request; OpenAI's own API
/// gets the field under its newer name. An answer cut by the cap says so.
#[test]
fn answers_are_capped_by_max_tokens_or_what_the_window_leaves() {
    let env = Env::new();
    let cut = {
        let Reply::Sse(mut chunks) = text(&["cut sh"]) else {
            unreachable!()
        };
        let at = chunks.len() - 3;
        chunks[at] = chunk_finish("length");
        Reply::Sse(chunks)
    };
    let server = Server::start(vec![text(&["one"]), cut, text(&["three"])]);
    let run = env.run(&server.base_url, &["-p", "hi"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    env.write_config(r#"{"retry_initial_ms": 5, "max_tokens": 100}"#);
    let run = env.run(&server.base_url, &[], "hi\n");
    assert!(run.stdout.contains("stopped at the token limit"), "{run:?}");
    env.write_config(r#"{"retry_initial_ms": 5, "context_window_size": 3000}"#);
    env.run(&server.base_url, &["-p", "hi"], "");
    let requests = server.requests();
    assert_eq!(requests[0]["max_tokens"], 8192);
    assert_eq!(requests[1]["max_tokens"], 100);
    let room = requests[2]["max_tokens"].as_u64().unwrap();
    assert!((256..3000).contains(&room), "{room}");
    assert!(
        requests
            .iter()
            .all(|r| r.get("max_completion_tokens").is_none())
    );
}
