//! Issue 44, the first hour: node numbers that stay put, answers that do what they say, honest
//! prompts. Each test replays what a newcomer met.

use crate::support::*;
use serde_json::Value;

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
