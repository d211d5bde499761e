use super::compact::{Plan, plan, summary_message};
use super::*;
use crate::conversation::message::SummaryInfo;
use crate::vocab::{FunctionCall, ToolCall};
#[cfg(not(windows))]
use std::fs;

#[test]
fn estimates_count_ascii_by_four_and_other_characters_one_each() {
    assert_eq!(estimate_text(""), 0);
    assert_eq!(estimate_text("abcd"), 1);
    assert_eq!(estimate_text("abcde"), 2);
    assert_eq!(estimate_text("你好"), 2);
    assert_eq!(estimate_text("héllo"), 1 + 1);
    let m = ChatMessage::text(Role::User, "x".repeat(400));
    assert_eq!(estimate_message(&m), 104);
}

#[test]
fn families_give_windows_and_unknown_models_none() {
    assert_eq!(family_window("claude-sonnet-4-5").unwrap().0, 200_000);
    assert_eq!(family_window("gpt-4o-mini").unwrap().0, 128_000);
    assert_eq!(family_window("gpt-4.1-mini").unwrap().0, 1_047_576);
    assert_eq!(family_window("openai/gpt-5").unwrap().0, 400_000);
    assert_eq!(family_window("o3-mini").unwrap().0, 200_000);
    assert_eq!(family_window("deepseek-chat").unwrap().0, 128_000);
    // `o1` only at the start of a name: `smollm2` holds no family.
    assert!(family_window("smollm2-135m").is_none());
    assert!(family_window("local").is_none());
    assert!(family_window("foo1").is_none());
}

#[test]
fn the_window_prefers_an_error_then_the_config_then_the_server_then_the_family() {
    let ctx = Context::new(Settings::default(), "smollm2");
    assert_eq!(ctx.window(), (FALLBACK_WINDOW, WindowSource::Fallback));
    assert!(ctx.wants_server_window());
    // A server's figure no model's window is, is not believed either.
    for odd in [1, MIN_WINDOW - 1, MAX_WINDOW + 1, u64::MAX] {
        ctx.set_server_window(odd);
        assert_eq!(
            ctx.window(),
            (FALLBACK_WINDOW, WindowSource::Fallback),
            "{odd}"
        );
    }
    ctx.set_server_window(4096);
    assert_eq!(ctx.window(), (4096, WindowSource::Server));
    ctx.learn_window(3000);
    assert_eq!(ctx.window(), (3000, WindowSource::Error));
    // A figure no model's window is (an echoed number, a wrapped one) is not believed.
    for odd in [0, 1, 16, MIN_WINDOW - 1, MAX_WINDOW + 1, u64::MAX] {
        ctx.learn_window(odd);
        assert_eq!(ctx.window(), (3000, WindowSource::Error), "{odd}");
    }
    ctx.learn_window(MIN_WINDOW);
    assert_eq!(ctx.window(), (MIN_WINDOW, WindowSource::Error));
    ctx.learn_window(3000);

    let configured = Settings {
        window: Some(50_000),
        ..Settings::default()
    };
    let ctx = Context::new(configured, "gpt-4o");
    assert!(!ctx.wants_server_window());
    assert_eq!(ctx.window(), (50_000, WindowSource::Config));
    let ctx = Context::new(Settings::default(), "gpt-4o");
    assert_eq!(ctx.window(), (128_000, WindowSource::Family("gpt-4o")));
    // Margins shrink with small windows.
    assert_eq!(ctx.margin(), 20_000);
    ctx.learn_window(4096);
    assert_eq!((ctx.margin(), ctx.keep_budget()), (1024, 1024));
}

#[test]
fn calibration_scales_estimates_within_bounds() {
    let ctx = Context::new(Settings::default(), "x");
    assert_eq!(ctx.scale(1000), 1000);
    ctx.calibrate(1000, 1500);
    assert_eq!(ctx.scale(1000), 1500);
    // Tiny requests teach nothing; absurd ratios are bounded.
    ctx.calibrate(10, 1000);
    assert_eq!(ctx.scale(1000), 1500);
    ctx.calibrate(1000, 1_000_000);
    assert_eq!(ctx.scale(1000), 4000);
}

#[test]
fn the_breaker_opens_after_the_threshold_and_a_success_closes_it() {
    let ctx = Context::new(
        Settings {
            window: Some(10_000),
            ..Settings::default()
        },
        "x",
    );
    assert!(ctx.should_compact(9_000));
    assert!(!ctx.should_compact(5_000));
    assert!(!ctx.compaction_failed());
    assert!(!ctx.compaction_failed());
    assert!(ctx.compaction_failed(), "the third failure opens it");
    assert!(!ctx.compaction_failed(), "only once");
    assert!(ctx.breaker_open());
    assert!(!ctx.should_compact(9_000));
    ctx.compaction_succeeded();
    assert!(ctx.should_compact(9_000));
    let off = Context::new(
        Settings {
            enabled: false,
            window: Some(10_000),
            ..Settings::default()
        },
        "x",
    );
    assert!(!off.should_compact(9_999));
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        kind: "function".into(),
        function: FunctionCall {
            name: "read_file".into(),
            arguments: "{}".into(),
        },
    }
}

/// A branch of `turns` turns, each: user, assistant calling a tool, its result, answer.
fn branch(turns: usize, result: &str) -> Conversation {
    let mut c = Conversation::new("c", "system");
    for t in 0..turns {
        c.add(Message::new(Role::User, format!("question {t}")))
            .unwrap();
        let mut asking = Message::new(Role::Assistant, "");
        asking.extra.tool_calls = Some(vec![call(&format!("call{t}"))]);
        c.add(asking).unwrap();
        c.add(Message::tool_result(format!("call{t}"), result))
            .unwrap();
        c.add(Message::new(Role::Assistant, format!("answer {t}")))
            .unwrap();
    }
    c
}

fn summary(replaces: &str, text: &str) -> Message {
    let mut m = Message::new(Role::User, text);
    m.extra.rare.summary = Some(Box::new(SummaryInfo {
        replaces: replaces.into(),
        messages: 1,
        tokens_before: 0,
        tokens_after: 0,
        focus: None,
    }));
    m
}

fn contents(messages: &[ChatMessage]) -> Vec<String> {
    messages.iter().map(|m| m.content.to_string()).collect()
}

/// DESIGN.md §10: below a summary S, a request sends the system prompt, S, the messages after
/// `S.replaces` up to S's parent, then what follows S; above S and beside it, nothing changes.
#[test]
fn requests_below_a_summary_send_it_and_the_kept_part_only() {
    let mut c = branch(3, "r");
    let chain: Vec<String> = c
        .chain(c.cursor())
        .iter()
        .map(|m| m.id.to_string())
        .collect();
    let full: Vec<_> = c
        .api_messages(c.cursor())
        .into_iter()
        .map(ChatMessage::into_owned)
        .collect();
    assert_eq!(full.len(), 13);
    // Summarise the first two turns (8 messages); keep the third.
    let tip = c.cursor().to_string();
    let s = c.add(summary(&chain[8], "SUMMARY")).unwrap();
    let below = c.add(Message::new(Role::User, "next")).unwrap();
    let sent = contents(&c.api_messages(&below));
    assert_eq!(
        sent,
        vec![
            "system",
            "SUMMARY",
            "question 2",
            "",
            "r",
            "answer 2",
            "next"
        ]
    );
    // The summary itself is a valid place to ask from.
    assert_eq!(c.api_messages(&s).len(), 6);
    // Above it, the whole history.
    assert_eq!(c.api_messages(&tip), full);
    // A fork above it (at the second question) sees the originals.
    let fork = c
        .add_under(&chain[4], Message::new(Role::User, "fork"))
        .unwrap();
    let sent = contents(&c.api_messages(&fork));
    assert!(sent.contains(&"question 0".to_string()));
    assert!(!sent.contains(&"SUMMARY".to_string()));
}

#[test]
fn a_newer_summary_supersedes_an_older_one_and_a_misplaced_one_is_ignored() {
    let mut c = branch(2, "r");
    let chain: Vec<String> = c
        .chain(c.cursor())
        .iter()
        .map(|m| m.id.to_string())
        .collect();
    // S1 replaces turn 0 and keeps turn 1.
    c.add(summary(&chain[4], "S1")).unwrap();
    c.add(Message::new(Role::User, "q2")).unwrap();
    c.add(Message::new(Role::Assistant, "a2")).unwrap();
    // S2 replaces up to the second question (inside S1's kept part).
    let s2 = c.add(summary(&chain[5], "S2")).unwrap();
    let after = c.add(Message::new(Role::User, "q3")).unwrap();
    let sent = contents(&c.api_messages(&after));
    assert_eq!(
        sent,
        vec!["system", "S2", "", "r", "answer 1", "q2", "a2", "q3"],
        "S1 is skipped: S2 stands for it"
    );
    assert!(c.misplaced_summaries().is_empty());
    // A summary that names a message not above it: loaded, reported, ignored.
    let bad = c.add_under(&s2, summary("nowhere", "BAD")).unwrap();
    let last = c.add(Message::new(Role::User, "q4")).unwrap();
    let sent = contents(&c.api_messages(&last));
    assert_eq!(sent[1], "S2", "the nearest valid summary is used");
    assert!(!sent.contains(&"BAD".to_string()));
    assert_eq!(
        c.misplaced_summaries()
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        vec![bad.as_str()]
    );
}

fn ctx(window: u64) -> Context {
    Context::new(
        Settings {
            window: Some(window),
            ..Settings::default()
        },
        "x",
    )
}

fn plan_roles(p: &Plan<'_>) -> (Vec<Role>, Vec<Role>) {
    (
        p.summarized.iter().map(|m| m.role).collect(),
        p.kept.iter().map(|m| m.role).collect(),
    )
}

#[test]
fn the_cut_starts_the_kept_part_at_a_user_message_and_keeps_at_least_the_minimum() {
    let c = branch(6, &"x".repeat(400));
    let context = ctx(100_000);
    // Room for about two turns.
    let p = plan(&c, c.cursor(), &context, 260, 100_000).unwrap();
    let (summarized, kept) = plan_roles(&p);
    assert_eq!(kept.first(), Some(&Role::User));
    assert!(kept.len() >= 5, "{kept:?}");
    assert_eq!(
        kept.len() % 4,
        0,
        "whole turns: no call parted from its result"
    );
    assert_eq!(summarized.len() + kept.len(), 24);
    assert_eq!(summarized.last(), Some(&Role::Assistant));
    // No room at all: everything is summarised.
    let p = plan(&c, c.cursor(), &context, 260, 10).unwrap();
    assert!(p.kept.is_empty());
    assert_eq!(p.summarized.len(), 24);
    // One message only: it is summarised, nothing is kept.
    let mut one = Conversation::new("c", "s");
    one.add(Message::new(Role::User, "only")).unwrap();
    let p = plan(&one, one.cursor(), &context, 1000, 1000).unwrap();
    assert_eq!((p.summarized.len(), p.kept.len()), (1, 0));
    // Nothing: an error.
    let empty = Conversation::new("c", "s");
    assert!(plan(&empty, empty.cursor(), &context, 1000, 1000).is_err());
}

#[test]
fn a_long_single_turn_keeps_nothing_rather_than_splitting_it() {
    // One question, then twenty rounds of tools.
    let mut c = Conversation::new("c", "s");
    c.add(Message::new(Role::User, "do it all")).unwrap();
    for t in 0..20 {
        let mut asking = Message::new(Role::Assistant, "");
        asking.extra.tool_calls = Some(vec![call(&format!("k{t}"))]);
        c.add(asking).unwrap();
        c.add(Message::tool_result(format!("k{t}"), "y".repeat(400)))
            .unwrap();
    }
    let p = plan(&c, c.cursor(), &ctx(100_000), 500, 100_000).unwrap();
    assert!(p.kept.is_empty(), "the only user message starts the branch");
    assert_eq!(p.summarized.len(), 41);
    let m = summary_message(&p, &ctx(100_000), "text", Some(" tests "), 9000, 100).unwrap();
    let info = m.extra.rare.summary.clone().unwrap();
    assert_eq!(info.replaces, c.cursor());
    assert_eq!(info.messages, 41);
    assert_eq!(info.focus.as_deref(), Some("tests"));
    assert!(m.content.starts_with(compact::SUMMARY_HEADING));
    assert!(info.tokens_after < info.tokens_before);
}

#[cfg(unix)]
#[test]
fn big_results_are_sent_as_previews_and_saved_whole_under_a_safe_name() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("c.results");
    let big: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    let mut c = branch(1, &big);
    let settings = Settings {
        tool_result_threshold: 1000,
        preview_tokens: 100,
        ..Settings::default()
    };
    let context = Context::new(settings, "x");
    let sent = context.request_messages(&c, c.cursor(), &results);
    let result = &sent[3];
    assert_eq!(result.role, Role::Tool);
    assert!(result.content.starts_with("line 0\nline 1\n"));
    assert!(result.content.len() < 1000, "{}", result.content.len());
    let result_id = c.chain(c.cursor())[3].id.clone();
    let saved = results.join(format!("{result_id}.txt"));
    assert!(
        result
            .content
            .contains(&format!("The whole result is in {}", saved.display())),
        "{}",
        result.content
    );
    assert!(result.content.contains("3000 lines"));
    assert_eq!(fs::read_to_string(&saved).unwrap(), big);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The stored message is untouched.
    assert_eq!(c.chain(c.cursor())[3].content, big);
    // Small results go whole; with compaction off, big ones too.
    c.add(Message::new(Role::User, "small")).unwrap();
    let off = Context::new(
        Settings {
            enabled: false,
            ..Settings::default()
        },
        "x",
    );
    assert_eq!(
        off.request_messages(&c, c.cursor(), &results)[3].content,
        big
    );
    // A hostile id cannot choose where the file goes.
    for id in ["../../etc/passwd", "a/b", "", &"z".repeat(100)] {
        let path = result_path(&results, id);
        assert_eq!(path.parent(), Some(results.as_path()), "{id}");
        assert!(!path.to_string_lossy().contains(".."), "{id}");
    }
}

#[test]
fn the_breakdown_counts_each_kind() {
    let c = branch(2, "result");
    let mut c2 = c.clone();
    let chain: Vec<String> = c
        .chain(c.cursor())
        .iter()
        .map(|m| m.id.to_string())
        .collect();
    c2.add(summary(&chain[4], "S")).unwrap();
    let sent = c2.api_messages(c2.cursor());
    let b = Breakdown::of(
        &[("role default".into(), "abcd".repeat(10))],
        &[],
        &sent[1..],
        true,
    );
    assert_eq!(b.system, vec![("role default".to_string(), 10)]);
    assert!(b.summary.is_some());
    assert_eq!((b.user.0, b.assistant.0, b.results.0), (1, 2, 1));
    assert_eq!(
        b.total(),
        10 + 4 + b.summary.unwrap() + b.user.1 + b.assistant.1 + b.results.1
    );
}

#[test]
fn when_the_nearest_cut_is_too_big_a_later_user_message_that_fits_starts_the_kept_part() {
    // Six turns of ~100 tokens each (user, call, result, answer).
    let c = branch(6, &"x".repeat(400));
    let context = ctx(100_000);
    let per_turn = plan(&c, c.cursor(), &context, 0, 100_000)
        .unwrap()
        .kept
        .len();
    assert_eq!(
        per_turn, 8,
        "nothing by tokens, but at least 5 messages: rounded up to two whole turns"
    );
    // Room for one turn only: the last question starts the kept part, not nothing.
    let p = plan(&c, c.cursor(), &context, 10_000, 140).unwrap();
    assert_eq!(plan_roles(&p).1.first(), Some(&Role::User));
    assert_eq!(p.kept.len(), 4, "{:?}", plan_roles(&p));
}

#[test]
fn the_window_is_nearly_full_only_when_known_counted_and_past_the_margin() {
    let settings = Settings {
        window: Some(2_048),
        safety_margin: 8_192,
        ..Settings::default()
    };
    let ctx = Context::new(settings.clone(), "x");
    // No server has counted a request yet: an estimate past the window is only a guess.
    assert!(!ctx.nearly_full(2_000));
    ctx.calibrate(1_000, 1_000);
    // The margin is an eighth of a small window at most: 256 of 2,048.
    assert!(!ctx.nearly_full(1_791));
    assert!(ctx.nearly_full(1_792));
    assert!(ctx.nearly_full(5_000));
    // The calibration counts: estimates at half what the server counts.
    ctx.calibrate(1_000, 2_000);
    assert!(ctx.nearly_full(900));
    assert!(!ctx.nearly_full(800));
    // Off, or a guessed window: never.
    let off = Context::new(
        Settings {
            safety_margin: 0,
            ..settings.clone()
        },
        "x",
    );
    off.calibrate(1_000, 1_000);
    assert!(!off.nearly_full(5_000));
    let guessed = Context::new(
        Settings {
            window: None,
            ..settings
        },
        "an-unknown-model",
    );
    guessed.calibrate(1_000, 1_000);
    assert!(!guessed.nearly_full(1_000_000));
    // A subagent of the same model starts calibrated; of another model, not.
    assert!(ctx.for_model("x").nearly_full(900));
    assert!(!ctx.for_model("y").nearly_full(900));
}
