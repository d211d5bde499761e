//! Checkpoints (the first part of the working folder following the tree): snapshots around rounds
//! of tools that may change files, stored as checkpoint lines; `/diff` and `/checkpoints`.

use serde_json::json;

use crate::support::*;

#[test]
fn rounds_that_change_files_are_checkpointed_and_diff_shows_the_changes() {
    let env = Env::new();
    std::fs::write(env.work().join("keep.txt"), "kept\n").unwrap();
    std::fs::write(env.work().join("old.txt"), "old\n").unwrap();
    let server = Server::start(vec![
        // Reading only: no checkpoint.
        tool_calls(&[("r", "read_file", r#"{"filepath":"keep.txt"}"#)]),
        text(&["Read."]),
        tool_calls(&[
            (
                "w",
                "write_file",
                &json!({"filepath": "new.txt", "content": "new\n"}).to_string(),
            ),
            (
                "b",
                "bash",
                r#"{"command":"rm old.txt && printf 'kept, changed\\n' > keep.txt"}"#,
            ),
        ]),
        text(&["Changed."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "read it\n/diff\nchange things\n/diff 1\n/diff 8\n/diff 1 8\n/checkpoints\n/diff x\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let (_, lines) = env.only_conversation();
    let checkpoints: Vec<_> = lines.iter().filter(|l| l["type"] == "checkpoint").collect();
    let messages: Vec<_> = lines.iter().filter(|l| l["type"] == "message").collect();
    let id_of = |n: usize| messages[n]["msg_id"].as_str().unwrap().to_string();
    let header_root = lines[0]["root_id"].as_str().unwrap();
    // Before the round: on the answer that asked (and the root, the first time); after: on the
    // round's last result.
    let nodes: Vec<&str> = checkpoints
        .iter()
        .map(|c| c["msg_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes,
        [id_of(5).as_str(), header_root, id_of(7).as_str()],
        "{lines:?}"
    );
    assert_eq!(checkpoints[0]["snapshot"], checkpoints[1]["snapshot"]);
    assert_ne!(checkpoints[0]["snapshot"], checkpoints[2]["snapshot"]);
    // Before any checkpoint, /diff says so.
    assert!(run.stderr.contains("has no checkpoint yet"), "{run:?}");
    // Node 1 (the first question) has the root's state: the folder differs from it.
    assert!(
        run.stdout.contains("M keep.txt\nA new.txt\nD old.txt"),
        "{run:?}"
    );
    assert!(run.stdout.contains("-kept\n+kept, changed"), "{run:?}");
    // Node 8 (the round's last result) is the folder as it is; node 1 against node 8 is the
    // round's change.
    assert_eq!(run.stdout.matches("D old.txt").count(), 2, "{run:?}");
    assert!(run.stdout.contains("no differences"), "{run:?}");
    assert!(run.stdout.contains("2 snapshots, "), "{run:?}");
    assert!(
        run.stderr.contains("/diff takes up to two node numbers"),
        "{run:?}"
    );

    // The checkpoints load with the conversation.
    let run = env.run(&server.base_url, &["--continue"], "/diff 1\n");
    assert!(
        run.stdout.contains("M keep.txt\nA new.txt\nD old.txt"),
        "{run:?}"
    );
}
