//! Issue 44, the first hour: node numbers that stay put, answers that do what they say, honest
//! prompts. Each test replays what a newcomer met.

use crate::support::*;
use serde_json::Value;
use std::io::Write;
use std::thread;
use std::time::Duration;

/// The ids of the conversation's messages, in the order they were written.
fn ids(env: &Env) -> Vec<(String, String)> {
    env.only_conversation()
        .1
        .iter()
        .filter(|l| l["role"].is_string())
        .map(|l: &Value| {
            (
                l["msg_id"].as_str().unwrap().to_string(),
                l["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_number_shown_before_the_tree_grew_says_where_its_node_went() {
    let server = Server::start(vec![
        text(&["A1"]),
        text(&["A2"]),
        text(&["side answer"]),
        text(&["A3"]),
    ]);
    let env = Env::new();
    // [1] one, [2] A1, [3] two, [4] A2, then a branch from [2]: [5] side, [6] side answer.
    // A message added under [4] renumbers that branch: [5] three, [6] A3, [7] side, [8] side
    // answer.
    let run = env.run(
        &server.base_url,
        &[],
        "one\ntwo\n/2\nside\n/tree\n/4\nthree\n/6\n/tree\n/6\n",
    );
    let messages = ids(&env);
    let id_of = |text: &str| messages.iter().find(|(_, t)| t == text).unwrap().0.clone();
    let (a1, a3, side) = (id_of("A1"), id_of("A3"), id_of("side answer"));
    // A move names the node by number and id.
    assert!(run.stdout.contains(&format!("→ [2 · {a1}]")), "{run:?}");
    // `/6` after the tree changed: said, nothing moved.
    assert!(
        run.stderr.contains(&format!(
            "[6] is no longer the node you were shown: the tree has grown since, and /tree numbers depth-first. The node shown as [6], assistant: side answer, is now [8 · {side}]; [6] is now assistant: A3 ({a3})."
        )),
        "{run:?}"
    );
    assert!(
        run.stderr.contains(&format!(
            "/8 or /{side} goes to the one you saw, /6 again to this one"
        )),
        "{run:?}"
    );
    // After /tree showed the new numbers, /6 is A3, as drawn.
    assert!(run.stdout.contains(&format!("→ [6 · {a3}]")), "{run:?}");
    assert_eq!(run.stdout.matches("→ [").count(), 3, "{run:?}");
    // `/ID` goes to the node wherever its number went; a unique prefix is enough.
    let again = env.run(
        &server.base_url,
        &["--continue"],
        &format!("/{side}\n/{}\n", &a1[..5]),
    );
    assert!(
        again
            .stdout
            .contains(&format!("→ [8 · {side}] assistant: side answer")),
        "{again:?}"
    );
    assert!(
        again
            .stdout
            .contains(&format!("→ [2 · {a1}] assistant: A1")),
        "{again:?}"
    );
}

#[test]
fn merge_and_btw_name_their_nodes_by_id_too_and_merge_takes_an_id() {
    let server = Server::start(vec![text(&["A1"]), text(&["aside"]), text(&["A2"])]);
    server.answer_summaries("the side question found aside");
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "one\n/btw why\ntwo\n");
    let messages = ids(&env);
    let asked = &messages.iter().find(|(_, text)| text == "why").unwrap().0;
    assert!(
        run.stdout
            .contains(&format!("/merge {asked} brings its answer in")),
        "{run:?}"
    );
    let merged = env.run(
        &server.base_url,
        &["--continue"],
        &format!("/merge {asked}\n"),
    );
    let tip = &ids(&env)
        .iter()
        .find(|(_, text)| text == "aside")
        .unwrap()
        .0
        .clone();
    assert!(
        merged.stdout.contains("merged branch [")
            && merged.stdout.contains(&format!(" · {tip}] as [")),
        "{merged:?}"
    );
}

#[test]
fn a_mistyped_command_names_the_one_meant() {
    let env = Env::new();
    let run = env.run("http://127.0.0.1:9/v1", &[], "/tre\n/frobnicate\n");
    assert!(
        run.stderr
            .contains("unknown command /tre; did you mean /tree? (/help lists the commands)"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("unknown command /frobnicate; /help lists"),
        "{run:?}"
    );
}

/// Issue 44 (10): `/retry --n 2` and `/compare` agree: the answers are numbered as `/compare`
/// numbers them (after the first answer), under the same node, and each one's seconds are the
/// same in its status line and in `/compare` (each answer keeps its own time, `seconds` on its
/// line, not the time since the message it answers was sent).
#[test]
fn retry_n_and_compare_agree_on_numbers_and_seconds() {
    let slow = |text: &str, pause: u64| {
        Reply::SseStall(
            vec![chunk_text(text)],
            Duration::from_millis(pause),
            vec![
                chunk_finish("stop"),
                chunk_usage(10, 2),
                "[DONE]".to_string(),
            ],
        )
    };
    let server = Server::start(vec![
        text(&["first"]),
        slow("second", 1300),
        slow("third", 300),
    ]);
    let env = Env::new();
    // Time passes before the retry: it must not count.
    let mut child = env.spawn(&server.base_url);
    {
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(b"hi\n").unwrap();
        thread::sleep(Duration::from_millis(2500));
        stdin.write_all(b"/retry --n 2\n/compare\n/exit\n").unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    // Each answer's status line: the line after its text.
    let seconds_after = |header: &str| -> String {
        let from = stdout
            .find(header)
            .unwrap_or_else(|| panic!("{header}: {stdout}"));
        let line = stdout[from..]
            .lines()
            .find(|l| l.starts_with('[') && l.ends_with(" s]"))
            .unwrap_or_else(|| panic!("a status line after {header}: {stdout}"));
        line.trim_end_matches(']')
            .rsplit(" · ")
            .next()
            .unwrap()
            .to_string()
    };
    let (two, three) = (
        seconds_after("answer 2 of 3\n"),
        seconds_after("answer 3 of 3\n"),
    );
    let text_after = |header: &str| -> String {
        let from = stdout.find(header).unwrap() + header.len();
        stdout[from..].lines().next().unwrap().to_string()
    };
    // Which answer got the slow reply is the server's choice: its own time, not the other's,
    // nor the time since `hi`.
    let secs = |s: &str| s.trim_end_matches(" s").parse::<f64>().unwrap();
    let mut took = [
        (text_after("answer 2 of 3\n"), secs(&two)),
        (text_after("answer 3 of 3\n"), secs(&three)),
    ];
    took.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(took[0].0, "second", "{stdout}");
    assert!(took[0].1 >= 1.2 && took[0].1 < 2.5, "{took:?}: {stdout}");
    assert!(took[1].1 < 1.2, "{took:?}: {stdout}");
    // The line naming their nodes and /compare's headers say the same numbers.
    let nodes = stdout
        .lines()
        .find(|l| l.starts_with("answer 2 of 3 ["))
        .unwrap_or_else(|| panic!("the nodes line: {stdout}"));
    let node = |i: usize| -> String {
        let label = format!("answer {i} of 3 [");
        let at = nodes.find(&label).unwrap() + label.len();
        nodes[at..].split(']').next().unwrap().to_string()
    };
    let compared = stdout.split("/compare").last().unwrap_or(&stdout);
    let header = |i: usize| -> String {
        stdout
            .lines()
            .find(|l| l.contains(&format!(" {i} of 3 · [")))
            .unwrap_or_else(|| panic!("compare's {i} of 3: {compared}"))
            .to_string()
    };
    // The first answer's status line says what /compare says of it too.
    let one = seconds_after("first\n");
    for (i, seconds) in [(1, &one), (2, &two), (3, &three)] {
        let h = header(i);
        if i == 1 {
            assert!(h.ends_with(&format!(" · {seconds}")), "{h} / {seconds}");
            continue;
        }
        let text = text_after(&format!("answer {i} of 3\n"));
        assert!(h.contains(&format!("[{}]", node(i))), "{h} / {nodes}");
        assert!(h.ends_with(&format!(" · {seconds}")), "{h} / {seconds}");
        let after = &stdout[stdout.find(&h).unwrap()..];
        assert_eq!(after.lines().nth(1), Some(text.as_str()), "{stdout}");
    }
    // Each answer keeps its time on its line; older lines without it still load (above).
    let (_, lines) = env.only_conversation();
    let kept: Vec<f64> = lines
        .iter()
        .filter(|l| l["role"] == "assistant")
        .map(|l| l["seconds"].as_f64().expect("seconds kept"))
        .collect();
    assert_eq!(kept.len(), 3, "{lines:?}");
}

/// Issue 44 (12): a new user's prompt is the default role and its environment: the example
/// skills ship off, so a small model does not take itself for a data analyst; `new`'s own
/// skills are still offered by name (`use_skill`), and an example turned on is injected.
#[test]
fn a_new_user_s_prompt_is_the_role_without_the_example_skills() {
    let server = Server::start(vec![text(&["hello"])]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "hi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    let system = system_of(&requests[0]);
    assert!(
        system.starts_with("You are a helpful assistant"),
        "{system}"
    );
    for example in [
        "data-analyst",
        "code-reviewer",
        "translator",
        "CSV",
        "review code",
    ] {
        assert!(!system.contains(example), "{example} in: {system}");
    }
    assert!(tool_names(&requests[0]).contains(&"use_skill".to_string()));
    // Turned on, an example is the user's choice: injected whole.
    let server = Server::start(vec![text(&["hello"])]);
    let run = env.run(&server.base_url, &[], "/skills enable code-reviewer\nhi\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let system = system_of(&server.requests()[0]).to_string();
    assert!(system.contains("## Skill: code-reviewer"), "{system}");
}
