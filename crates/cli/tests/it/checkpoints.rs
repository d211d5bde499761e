//! Checkpoints (the first part of the working folder following the tree): snapshots around rounds
//! of tools that may change files, stored as checkpoint lines; `/diff` and `/checkpoints`.

use serde_json::json;

use crate::support::*;
#[cfg(not(windows))]
use std::collections::BTreeMap;
use std::fs;
use std::fs::OpenOptions;
#[cfg(not(windows))]
use std::fs::Permissions;
#[cfg(unix)]
use std::os::unix::fs::symlink;
#[cfg(not(windows))]
use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::Duration;

#[test]
fn rounds_that_change_files_are_checkpointed_and_diff_shows_the_changes() {
    let env = Env::new();
    fs::write(env.work().join("keep.txt"), "kept\n").unwrap();
    fs::write(env.work().join("old.txt"), "old\n").unwrap();
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

#[cfg(unix)]
/// Every file, link and mode under a folder: (path → (kind, content or target, mode)).
fn tree(dir: &Path) -> BTreeMap<String, (String, Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    ("link".into(), target.display().to_string().into_bytes(), 0),
                );
            } else if meta.is_dir() {
                stack.push(path);
            } else {
                let mode = meta.permissions().mode() & 0o7777;
                out.insert(rel, ("file".into(), fs::read(&path).unwrap(), mode));
            }
        }
    }
    out
}

#[cfg(unix)]
/// `/N` back and `/restore` give the earlier folder byte for byte (a deleted file, a new subfolder,
/// a mode change, a link changed); restoring the later node gives the later folder; an edit made
/// outside `new` is flagged and kept unless the user says otherwise.
#[test]
fn restore_brings_back_the_folder_of_a_node_and_keeps_other_peoples_edits() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let work = env.work();
    fs::write(work.join("keep.txt"), "kept\n").unwrap();
    fs::write(work.join("old.txt"), "old\n").unwrap();
    fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(work.join("run.sh"), Permissions::from_mode(0o755)).unwrap();
    symlink("keep.txt", work.join("link")).unwrap();
    let before = tree(&work);
    let server = Server::start(vec![
        tool_calls(&[
            ("w", "write_file", &json!({"filepath": "new.txt", "content": "new\n"}).to_string()),
            (
                "b",
                "bash",
                &json!({"command": "rm old.txt && echo changed >> keep.txt && chmod 644 run.sh && mkdir -p sub/deeper && echo y > sub/deeper/y.txt && ln -sfn new.txt link"}).to_string(),
            ),
        ]),
        text(&["Changed."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "change things\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let after = tree(&work);
    assert_ne!(after, before);

    // Back to the question: the folder as it was then.
    let run = env.run(&server.base_url, &["--continue"], "/1\n/restore\ny\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("restoring [1] would change:"),
        "{run:?}"
    );
    assert!(run.stdout.contains("D new.txt"), "{run:?}");
    assert!(run.stdout.contains("A old.txt"), "{run:?}");
    assert!(run.stdout.contains("restored "), "{run:?}");
    let restored = tree(&work);
    let without_empty_dirs = |t: &BTreeMap<String, (String, Vec<u8>, u32)>| t.clone();
    assert_eq!(
        without_empty_dirs(&restored),
        before,
        "the earlier folder, byte for byte"
    );

    // Forward again: the later folder.
    let run = env.run(&server.base_url, &["--continue"], "/4\n/restore\ny\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        tree(&work),
        after,
        "the later folder, byte for byte: {run:?}"
    );

    // Someone edits a file; restoring the question's state flags it, and "no" keeps it.
    fs::write(work.join("keep.txt"), "my own edit\n").unwrap();
    let run = env.run(&server.base_url, &["--continue"], "/1\n/restore\ny\nn\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("M keep.txt  (changed outside new)"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("not restored: keep.txt (changed outside new)"),
        "{run:?}"
    );
    assert_eq!(
        fs::read_to_string(work.join("keep.txt")).unwrap(),
        "my own edit\n"
    );
    assert!(work.join("old.txt").exists(), "the rest was restored");
    // Declining the restore changes nothing.
    let snapshot = tree(&work);
    let run = env.run(&server.base_url, &["--continue"], "/4\n/restore\nn\n");
    assert!(run.stdout.contains("nothing restored"), "{run:?}");
    assert_eq!(tree(&work), snapshot);
}

/// Moving to a node whose files are not the folder's says so: piped, a list and a hint (nothing
/// changes); `--continue` on a folder changed since says so too; `checkpoints.restore` is checked.
#[test]
fn moving_to_a_node_with_other_files_says_what_differs() {
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "a\n").unwrap();
    let server = Server::start(vec![
        tool_calls(&[(
            "b",
            "bash",
            r#"{"command":"echo more >> a.txt && touch b.txt"}"#,
        )]),
        text(&["Done."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "change\n/1\n/5\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        without_ids(&run.stdout).contains(
            "the working folder differs from [1]'s state; restoring it would change:\nM a.txt\nD b.txt\n/restore makes the folder match it"
        ),
        "{run:?}"
    );
    // The tip's state is the folder's: nothing said.
    assert_eq!(run.stdout.matches("differs from").count(), 1, "{run:?}");
    assert_eq!(
        fs::read_to_string(env.work().join("a.txt")).unwrap(),
        "a\nmore\n"
    );
    // Changed since: said on --continue.
    fs::write(env.work().join("a.txt"), "edited elsewhere\n").unwrap();
    let run = env.run(&server.base_url, &["--continue"], "");
    assert!(
        without_ids(&run.stdout)
            .contains("differs from [4]'s state; restoring it would change:\nM a.txt"),
        "{run:?}"
    );
    env.write_config(r#"{"retry_initial_ms": 5, "checkpoints": {"restore": "sometimes"}}"#);
    let run = env.run(&server.base_url, &[], "");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("`checkpoints.restore` is `sometimes`; use ask or never"),
        "{run:?}"
    );
}

/// A damaged content in the store: that file is refused with a clear message, the rest restored
/// only after a yes. `/checkpoints gc` keeps what the conversation refers to.
#[test]
fn a_damaged_object_is_refused_and_the_rest_asked_for() {
    use std::io::Write;
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "one\n").unwrap();
    fs::write(env.work().join("b.txt"), "two\n").unwrap();
    let server = Server::start(vec![
        tool_calls(&[(
            "b",
            "bash",
            r#"{"command":"echo x > a.txt && echo y > b.txt"}"#,
        )]),
        text(&["Done."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "change\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    // Damage the stored "one\n" (its name is its SHA-256).
    let hash = "2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806";
    let object = env
        .data()
        .join(".checkpoints/objects")
        .join(&hash[..2])
        .join(hash);
    assert!(object.exists(), "{object:?}");
    OpenOptions::new()
        .append(true)
        .open(&object)
        .unwrap()
        .write_all(b"!")
        .unwrap();
    let run = env.run(&server.base_url, &["--continue"], "/1\n/restore\ny\nn\n");
    assert!(
        run.stderr.contains("cannot be restored: a.txt: checking"),
        "{run:?}"
    );
    assert!(run.stdout.contains("nothing restored"), "{run:?}");
    assert_eq!(fs::read_to_string(env.work().join("b.txt")).unwrap(), "y\n");
    let run = env.run(
        &server.base_url,
        &["--continue"],
        "/1\n/restore\ny\ny\n/checkpoints gc\n/checkpoints\n",
    );
    assert_eq!(
        fs::read_to_string(env.work().join("b.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(fs::read_to_string(env.work().join("a.txt")).unwrap(), "x\n");
    assert!(run.stderr.contains("not restored: a.txt"), "{run:?}");
    assert!(run.stdout.contains("no conversation refers to"), "{run:?}");
}

/// `kill -9` in the middle of a restore: every file is the old one or the new one, never torn.
#[test]
fn a_restore_killed_half_way_leaves_every_file_old_or_new() {
    let env = Env::new();
    let old: String = "old content line\n".repeat(4096);
    let new: String = "new content, longer line\n".repeat(4096);
    for i in 0..200 {
        fs::write(env.work().join(format!("f{i:03}.txt")), &old).unwrap();
    }
    let command = format!(
        "for f in f*.txt; do printf '{}' > \"$f\"; done",
        "new content, longer line\\n".repeat(64)
    );
    let server = Server::start(vec![
        tool_calls(&[("b", "bash", &json!({ "command": command }).to_string())]),
        text(&["Done."]),
    ]);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "rewrite\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let after_turn = fs::read_to_string(env.work().join("f000.txt")).unwrap();
    assert_ne!(after_turn, old);
    let _ = new;
    // Restore the old files, killed at a few moments of the work.
    for delay_ms in [5u64, 15, 30, 60] {
        let mut cmd = env.command(&server.base_url);
        cmd.arg(env.work())
            .arg("default")
            .arg(env.data())
            .arg("--continue")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"/1\n/restore\ny\n").unwrap();
            thread::sleep(Duration::from_millis(delay_ms));
            // SIGKILL: no handler, no clean-up.
            child.kill().unwrap();
            drop(stdin);
        }
        let _ = child.wait();
        for i in 0..200 {
            let text = fs::read_to_string(env.work().join(format!("f{i:03}.txt"))).unwrap();
            assert!(
                text == old || text == after_turn,
                "f{i:03}.txt is torn after a kill at {delay_ms} ms ({} bytes)",
                text.len()
            );
        }
    }
}
