//! Snapshot tests build their folders with links and Unix modes.
#![cfg(unix)]

use super::*;
use crate::fs::confine::Workdir;
use new_sys::platform;
use std::fs;
use std::fs::OpenOptions;
use std::fs::Permissions;
#[cfg(unix)]
use std::os::unix::fs::symlink;
use std::thread;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;

fn fixture() -> (tempfile::TempDir, PathBuf, CheckpointStore) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(work.join("src/deep")).unwrap();
    fs::create_dir_all(work.join(".git/objects")).unwrap();
    fs::create_dir_all(work.join("target")).unwrap();
    fs::write(work.join("src/a.rs"), "fn a() {}\n").unwrap();
    fs::write(work.join("src/deep/b.txt"), "b\n").unwrap();
    fs::write(work.join(".gitignore"), "target/\n*.log\n").unwrap();
    fs::write(work.join("target/out.bin"), "built").unwrap();
    fs::write(work.join("debug.log"), "noise").unwrap();
    fs::write(work.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(work.join("big.dat"), vec![b'x'; 2000]).unwrap();
    fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(work.join("run.sh"), Permissions::from_mode(0o755)).unwrap();
    symlink("src/a.rs", work.join("link")).unwrap();
    // Written an hour ago: metadata alone then tells an unchanged file (see `racy_files`).
    for f in [
        "src/a.rs",
        "src/deep/b.txt",
        ".gitignore",
        "big.dat",
        "run.sh",
    ] {
        age(&work.join(f), 3600);
    }
    let store = CheckpointStore::new(&dir.path().join("data"));
    (dir, work, store)
}

/// Sets a file's modification time to `seconds` ago.
fn age(path: &Path, seconds: u64) {
    let when = SystemTime::now() - Duration::from_secs(seconds);
    let file = OpenOptions::new().write(true).open(path).unwrap();
    file.set_modified(when).unwrap();
}

#[test]
fn racy_files_a_file_rewritten_within_the_same_clock_tick_is_read_again() {
    use std::os::unix::fs::MetadataExt;
    let (_d, work, store) = fixture();
    let path = work.join("src/a.rs");
    fs::write(&path, "fn a() {}\n").unwrap();
    let before = fs::metadata(&path).unwrap();
    let (id, m) = store.snapshot(&work, &settings(), None).unwrap();
    // Rewritten in place, same size, and (as within one tick of a coarse clock) same time.
    fs::write(&path, "fn b() {}\n").unwrap();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    let after = fs::metadata(&path).unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec(), after.ino()),
        (
            before.len(),
            before.mtime(),
            before.mtime_nsec(),
            before.ino()
        )
    );
    let (_, m2) = store.snapshot(&work, &settings(), Some((&id, &m))).unwrap();
    assert_eq!(changes(&m, &m2), [("src/a.rs".to_string(), 'M')]);
    assert_eq!(m2.files["src/deep/b.txt"], m.files["src/deep/b.txt"]);
}

fn settings() -> CheckpointSettings {
    CheckpointSettings {
        max_file_bytes: 1000,
        ..CheckpointSettings::default()
    }
}

#[test]
fn a_snapshot_holds_what_git_would_track_links_modes_and_big_files_listed() {
    let (_d, work, store) = fixture();
    let (id, m) = store.snapshot(&work, &settings(), None).unwrap();
    let paths: Vec<&str> = m.files.keys().map(|k| &**k).collect();
    assert_eq!(
        paths,
        [
            ".gitignore",
            "big.dat",
            "link",
            "run.sh",
            "src/a.rs",
            "src/deep/b.txt"
        ]
    );
    assert_eq!(m.files["big.dat"].kind, "skipped");
    assert!(m.files["big.dat"].hash.is_none());
    assert_eq!(m.files["link"].kind, "link");
    assert_eq!(m.files["link"].target.as_deref(), Some("src/a.rs"));
    assert_eq!(m.files["run.sh"].mode, 0o755);
    let hash = m.files["src/a.rs"].hash.clone().unwrap();
    assert_eq!(store.object(&hash).unwrap(), b"fn a() {}\n");
    assert_eq!(store.load(&id).unwrap(), m);
    // Files and folders of the store are the user's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(store.snapshot_path(&id))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn unchanged_files_are_not_read_again_and_an_unchanged_folder_keeps_its_snapshot() {
    let (_d, work, store) = fixture();
    let (id, m) = store.snapshot(&work, &settings(), None).unwrap();
    // With the stored contents gone, an unchanged folder still snapshots: nothing is read.
    fs::remove_dir_all(store.dir.join("objects")).unwrap();
    let (again, m2) = store.snapshot(&work, &settings(), Some((&id, &m))).unwrap();
    assert_eq!((again.as_str(), &m2), (id.as_str(), &m));
    assert!(!store.dir.join("objects").exists());
    // One change: only that file is read and stored.
    fs::write(work.join("src/a.rs"), "fn a() { changed() }\n").unwrap();
    fs::remove_file(work.join("src/deep/b.txt")).unwrap();
    fs::write(work.join("new.txt"), "new\n").unwrap();
    let (third, m3) = store.snapshot(&work, &settings(), Some((&id, &m))).unwrap();
    assert_ne!(third, id);
    let (_, objects, _) = store.stats();
    assert_eq!(objects, 2, "a.rs and new.txt");
    assert_eq!(
        changes(&m, &m3),
        [
            ("new.txt".to_string(), 'A'),
            ("src/a.rs".to_string(), 'M'),
            ("src/deep/b.txt".to_string(), 'D')
        ]
    );
}

#[test]
fn a_corrupted_object_or_snapshot_is_refused_and_too_many_files_turn_it_off() {
    let (_d, work, store) = fixture();
    let (id, m) = store.snapshot(&work, &settings(), None).unwrap();
    let hash = m.files["src/a.rs"].hash.clone().unwrap();
    fs::write(store.object_path(&hash), "tampered").unwrap();
    let e = store.object(&hash).unwrap_err().to_string();
    assert!(e.contains("does not match its hash"), "{e}");
    assert!(matches!(
        store.load("../../etc"),
        Err(CheckpointError::Missing(_))
    ));
    assert!(matches!(
        store.load("nope"),
        Err(CheckpointError::Missing(_))
    ));
    assert!(store.load(&id).is_ok());
    let few = CheckpointSettings {
        max_files: 3,
        ..settings()
    };
    let cp = Checkpoints::new(&work.join("../data"), &work, few);
    assert!(matches!(cp.take(), Err(CheckpointError::TooManyFiles(3))));
    // Said once; off for the session.
    assert!(matches!(cp.take(), Ok(None)));
}

#[test]
fn gc_removes_what_no_conversation_refers_to_and_keeps_the_rest() {
    let (d, work, store) = fixture();
    let data = d.path().join("data");
    let (first, m1) = store.snapshot(&work, &settings(), None).unwrap();
    fs::write(work.join("src/a.rs"), "fn a() { v2() }\n").unwrap();
    let (second, m2) = store
        .snapshot(&work, &settings(), Some((&first, &m1)))
        .unwrap();
    fs::write(work.join("src/a.rs"), "fn a() { v3() }\n").unwrap();
    let (third, _) = store
        .snapshot(&work, &settings(), Some((&second, &m2)))
        .unwrap();
    let line = |s: &str| {
        format!(
            r#"{{"type":"checkpoint","msg_id":"m","snapshot":"{s}","timestamp":"2026-12-01T00:00:00Z"}}"#
        )
    };
    fs::write(data.join("c1.jsonl"), format!("{}\n", line(&first))).unwrap();
    fs::create_dir_all(data.join("trash")).unwrap();
    fs::write(data.join("trash/c2.jsonl"), format!("{}\n", line(&second))).unwrap();
    let (snapshots, objects, freed) = store.gc(&data).unwrap();
    assert_eq!(
        (snapshots, objects),
        (1, 1),
        "the third snapshot and its a.rs"
    );
    assert!(freed > 0);
    assert!(store.load(&first).is_ok() && store.load(&second).is_ok());
    assert!(store.load(&third).is_err());
    for m in [&m1, &m2] {
        for e in m.files.values().filter_map(|e| e.hash.as_ref()) {
            assert!(store.object(e).is_ok());
        }
    }
    // An emptied trash lets the second go too.
    fs::remove_file(data.join("trash/c2.jsonl")).unwrap();
    assert_eq!(store.gc(&data).unwrap().0, 1);
    assert_eq!(store.gc(&data).unwrap(), (0, 0, 0));
}

#[test]
fn snapshots_are_stored_as_differences_in_capped_chains_and_gc_keeps_what_a_chain_needs() {
    let (d, work, store) = fixture();
    let data = d.path().join("data");
    let (mut id, mut m) = store.snapshot(&work, &settings(), None).unwrap();
    let first = id.clone();
    let whole = fs::metadata(store.snapshot_path(&id)).unwrap().len();
    let mut ids = vec![id.clone()];
    for i in 0..MAX_DEPTH + 2 {
        fs::write(work.join("src/a.rs"), format!("fn a() {{ {i} }}\n")).unwrap();
        (id, m) = store.snapshot(&work, &settings(), Some((&id, &m))).unwrap();
        ids.push(id.clone());
        // Each loads back whole, equal to what the walk saw.
        assert_eq!(store.load(&id).unwrap(), m);
    }
    let stored: Vec<Stored> = ids.iter().map(|i| store.stored(i).unwrap()).collect();
    // One change: a difference naming its base, smaller than the whole manifest.
    assert_eq!(stored[1].base.as_deref(), Some(first.as_str()));
    assert_eq!(
        stored[1].files.keys().map(|k| &**k).collect::<Vec<_>>(),
        ["src/a.rs"]
    );
    assert!(fs::metadata(store.snapshot_path(&ids[1])).unwrap().len() < whole);
    // After MAX_DEPTH differences the next is whole again, and the chain starts over.
    assert!(stored[MAX_DEPTH].base.is_some());
    assert!(stored[MAX_DEPTH + 1].base.is_none());
    assert_eq!(
        stored[MAX_DEPTH + 2].base.as_deref(),
        Some(ids[MAX_DEPTH + 1].as_str())
    );
    // A removal is stored as one.
    fs::remove_file(work.join("run.sh")).unwrap();
    let (gone, m_gone) = store.snapshot(&work, &settings(), Some((&id, &m))).unwrap();
    assert_eq!(store.stored(&gone).unwrap().removed, ["run.sh"]);
    assert!(!store.load(&gone).unwrap().files.contains_key("run.sh"));
    assert_eq!(store.load(&gone).unwrap(), m_gone);
    // Only the third snapshot is referred to: gc keeps it and its two bases, and only the
    // contents the third lists.
    let line = format!(
        r#"{{"type":"checkpoint","msg_id":"m","snapshot":"{}","timestamp":"2026-12-01T00:00:00Z"}}"#,
        ids[2]
    );
    fs::write(data.join("c.jsonl"), format!("{line}\n")).unwrap();
    store.gc(&data).unwrap();
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(store.stored(id).is_ok(), i <= 2, "snapshot {i}");
    }
    let third = store.load(&ids[2]).unwrap();
    for e in third.files.values().filter_map(|e| e.hash.as_ref()) {
        assert!(store.object(e).is_ok());
    }
    let (_, objects, _) = store.stats();
    assert_eq!(
        objects,
        third.files.values().filter(|e| e.hash.is_some()).count()
    );
    // A chain whose base is gone cannot be loaded: said, not guessed.
    fs::remove_file(store.snapshot_path(&ids[1])).unwrap();
    assert!(matches!(store.load(&ids[2]), Err(CheckpointError::Missing(b)) if b == ids[1]));
}

/// The walk's ignore rules against ripgrep's `ignore` crate walking the same tree with the same
/// options: nested `.gitignore` with negations, `.ignore` over `.gitignore`, `.git/info/exclude`,
/// a nested repository (the rules above reach into it), directory-only patterns, hidden files.
#[test]
fn the_walk_ignores_what_ripgreps_walk_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    let files = [
        ".gitignore",
        ".hidden",
        "a.log",
        "keep.log",
        "build/out.o",
        "src/.gitignore",
        "src/gen.rs",
        "src/lib.rs",
        "src/.ignore",
        "src/secret.txt",
        "src/deep/x.tmp",
        "src/deep/y.rs",
        "docs/build",
        "docs/notes.md",
        "excluded.txt",
        "sub/.git/HEAD",
        "sub/.gitignore",
        "sub/a.log",
        "sub/b.rs",
        "sub/vendor/v.rs",
        "n/.ignore",
        "n/x.log",
    ];
    for f in files {
        fs::create_dir_all(w.join(f).parent().unwrap()).unwrap();
        fs::write(w.join(f), f).unwrap();
    }
    fs::create_dir_all(w.join(".git/info")).unwrap();
    fs::write(w.join(".git/info/exclude"), "excluded.txt\n").unwrap();
    fs::write(w.join(".gitignore"), "*.log\n!keep.log\nbuild/\nvendor\n").unwrap();
    fs::write(w.join("src/.gitignore"), "gen.rs\n*.tmp\n!secret.txt\n").unwrap();
    fs::write(w.join("src/.ignore"), "secret.txt\n").unwrap();
    fs::write(w.join("sub/.gitignore"), "b.rs\n").unwrap();
    fs::write(w.join("n/.ignore"), "!x.log\n").unwrap();
    let store = CheckpointStore::new(&dir.path().join("data"));
    let (_, m) = store.snapshot(&w, &settings(), None).unwrap();
    let ours: Vec<&str> = m.files.keys().map(|k| &**k).collect();
    let mut theirs: Vec<String> = ignore::WalkBuilder::new(&w)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| !t.is_dir()))
        .map(|e| {
            e.path()
                .strip_prefix(&w)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    theirs.sort();
    assert_eq!(ours, theirs);
    // And what that means, spelled out for the cases that matter.
    for kept in [
        "keep.log",
        "docs/build",
        "n/x.log",
        "src/lib.rs",
        "sub/.gitignore",
    ] {
        assert!(ours.contains(&kept), "{kept} kept: {ours:?}");
    }
    let left_out = [
        "a.log",
        "build/out.o",
        "src/gen.rs",
        "src/secret.txt",
        "sub/a.log",
    ];
    for left in left_out
        .into_iter()
        .chain(["sub/vendor/v.rs", "sub/b.rs", "excluded.txt"])
    {
        assert!(!ours.contains(&left), "{left} left out: {ours:?}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_watched_folder_is_not_walked_again_until_something_in_it_changes() {
    let (d, work, _) = fixture();
    let data = d.path().join("data");
    let cp = Checkpoints::new(&data, &work, settings());
    let first = cp.take().unwrap().unwrap();
    assert_eq!(cp.take().unwrap().unwrap(), first, "nothing changed");
    // A change made through a hard link from outside the folder is one inotify does not
    // report: not walked, the snapshot stays (the documented limit), which shows the watch
    // answered instead of a walk. Without the watch, the walk sees it.
    let outside = d.path().join("outside.txt");
    fs::write(&outside, "one\n").unwrap();
    fs::hard_link(&outside, work.join("linked.txt")).unwrap();
    let with_link = cp.take().unwrap().unwrap();
    assert_ne!(
        with_link, first,
        "a new name in a watched folder is an event"
    );
    fs::write(&outside, "two\n").unwrap();
    assert_eq!(
        cp.take().unwrap().unwrap(),
        with_link,
        "unseen by the watch"
    );
    let unwatched = Checkpoints::new(
        &data,
        &work,
        CheckpointSettings {
            watch: false,
            ..settings()
        },
    );
    let (_, walked) = unwatched.peek().unwrap().unwrap();
    let hash = walked.files["linked.txt"].hash.clone().unwrap();
    assert_eq!(cp.store.object(&hash).unwrap(), b"two\n");
    // Every kind of change in any watched folder is seen: content, mode, a removal, a new
    // folder and then a file inside it.
    let mut id = cp.take().unwrap().unwrap();
    let steps: [&dyn Fn(); 5] = [
        &|| fs::write(work.join("src/deep/b.txt"), "b2\n").unwrap(),
        &|| {
            use std::os::unix::fs::PermissionsExt;
            let mode = Permissions::from_mode(0o700);
            fs::set_permissions(work.join("src/a.rs"), mode).unwrap()
        },
        &|| fs::remove_file(work.join("run.sh")).unwrap(),
        &|| fs::create_dir(work.join("src/deep/new")).unwrap(),
        &|| fs::write(work.join("src/deep/new/c.txt"), "c\n").unwrap(),
    ];
    for (i, step) in steps.iter().enumerate() {
        step();
        let next = cp.take().unwrap().unwrap();
        let (_, m) = unwatched.peek().unwrap().unwrap();
        assert_eq!(
            cp.last().unwrap().1,
            m,
            "step {i}: the watched snapshot is the walk's"
        );
        if i != 3 {
            // (An empty folder holds nothing a snapshot lists.)
            assert_ne!(next, id, "step {i}");
        }
        id = next;
    }
    assert!(
        cp.last()
            .unwrap()
            .1
            .files
            .contains_key("src/deep/new/c.txt")
    );
}

/// What the third attack did to the store and the walk: a short or path-like hash, a manifest
/// writing into `.git/` or `.new/`, a FIFO where the walk reads an ignore file.
#[test]
fn hostile_hashes_manifest_paths_and_fifos_are_refused_not_followed() {
    let (_d, work, store) = fixture();
    for hash in ["a", "", "../../dev/zero", &"A".repeat(64), &"g".repeat(64)] {
        let err = store.object(hash).unwrap_err().to_string();
        assert!(err.contains("is not a content hash"), "{hash}: {err}");
    }
    let (_, now) = store.snapshot(&work, &settings(), None).unwrap();
    let mut target = now.clone();
    let entry = now.files["src/a.rs"].clone();
    for path in [
        ".git/hooks/pre-commit",
        ".new/config.json",
        "src/../../outside.txt",
    ] {
        target.files.insert(path.into(), entry.clone());
    }
    let workdir = Workdir::new(&work).unwrap();
    let paths: Vec<String> = [
        ".git/hooks/pre-commit",
        ".new/config.json",
        "src/../../outside.txt",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    let applied = apply(&store, &workdir, &now, &target, &paths, true);
    assert_eq!(applied.done, 0);
    assert_eq!(applied.kept.len(), 3, "{applied:?}");
    assert!(!work.join(".git/hooks/pre-commit").exists());
    assert!(!work.join(".new").exists());
    // A FIFO named like an ignore file, and one among the files: the walk does not wait.
    fs::remove_file(work.join(".gitignore")).unwrap();
    for name in [".gitignore", "src/pipe"] {
        platform::make_fifo(&work.join(name)).unwrap();
    }
    let started = Instant::now();
    let (_, m) = store.snapshot(&work, &settings(), None).unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!m.files.contains_key("src/pipe"));
}

/// A restore looks at each path just before writing it: a file changed, made, removed or turned
/// into a link since `now` was taken (since the user was asked) is left alone and listed; without
/// the recheck (the user said yes to those too) it is written.
#[test]
fn a_restore_leaves_alone_what_changed_since_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(work.join("src")).unwrap();
    for name in ["a", "b", "c", "d"] {
        fs::write(work.join(format!("src/{name}.txt")), "old").unwrap();
    }
    let store = CheckpointStore::new(&dir.path().join("data"));
    let (_, target) = store.snapshot(&work, &settings(), None).unwrap();
    for name in ["a", "b", "c", "d"] {
        fs::write(work.join(format!("src/{name}.txt")), "new!").unwrap();
    }
    fs::write(work.join("src/e.txt"), "made").unwrap();
    let (_, now) = store.snapshot(&work, &settings(), None).unwrap();
    let paths: Vec<String> = changes(&now, &target).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths.len(), 5, "{paths:?}");
    // After the question: a changed (same size: the mtime and inode tell), b removed, c a link,
    // e rewritten; d untouched.
    thread::sleep(Duration::from_millis(20));
    fs::write(work.join("src/a.tmp"), "mine").unwrap();
    fs::rename(work.join("src/a.tmp"), work.join("src/a.txt")).unwrap();
    fs::remove_file(work.join("src/b.txt")).unwrap();
    fs::remove_file(work.join("src/c.txt")).unwrap();
    symlink("d.txt", work.join("src/c.txt")).unwrap();
    fs::write(work.join("src/e.txt"), "mine too").unwrap();
    let workdir = Workdir::new(&work).unwrap();
    let applied = apply(&store, &workdir, &now, &target, &paths, true);
    assert_eq!(applied.done, 1, "{applied:?}");
    assert_eq!(
        applied.changed,
        ["src/a.txt", "src/b.txt", "src/c.txt", "src/e.txt"],
        "{applied:?}"
    );
    assert_eq!(fs::read_to_string(work.join("src/d.txt")).unwrap(), "old");
    assert_eq!(fs::read_to_string(work.join("src/a.txt")).unwrap(), "mine");
    assert_eq!(
        fs::read_to_string(work.join("src/e.txt")).unwrap(),
        "mine too"
    );
    assert!(!work.join("src/b.txt").exists());
    // Asked again and answered yes: written.
    let again = apply(&store, &workdir, &now, &target, &applied.changed, false);
    assert_eq!(again.done, 4, "{again:?}");
    assert_eq!(fs::read_to_string(work.join("src/a.txt")).unwrap(), "old");
    assert!(!work.join("src/e.txt").exists());
    assert!(!work.join("src/c.txt").is_symlink());
}

/// A branch's changes against the folder: taken where the folder is as at the fork, merged
/// where both changed a text file in different places, a conflict (with markers) where they
/// changed the same lines or one removed what the other changed; what already matches is
/// passed over.
#[test]
fn a_merge_plan_takes_merges_and_names_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(&work).unwrap();
    let store = CheckpointStore::new(&dir.path().join("data"));
    let state = |files: &[(&str, &str)]| {
        for e in fs::read_dir(&work).unwrap().flatten() {
            fs::remove_file(e.path()).unwrap();
        }
        for (name, text) in files {
            fs::write(work.join(name), text).unwrap();
        }
        store.snapshot(&work, &settings(), None).unwrap().1
    };
    let base = state(&[
        ("apart.txt", "1\n2\n3\n4\n5\n"),
        ("clash.txt", "x\n"),
        ("same.txt", "s\n"),
        ("gone.txt", "g\n"),
        ("done.txt", "d\n"),
    ]);
    let theirs = state(&[
        ("apart.txt", "1\n2\n3\n4\n5 theirs\n"),
        ("clash.txt", "x theirs\n"),
        ("same.txt", "s\n"),
        ("gone.txt", "g theirs\n"),
        ("done.txt", "d both\n"),
        ("new.txt", "n\n"),
    ]);
    let ours = state(&[
        ("apart.txt", "1 ours\n2\n3\n4\n5\n"),
        ("clash.txt", "x ours\n"),
        ("same.txt", "s\n"),
        ("done.txt", "d both\n"),
    ]);
    let plan = merge_plan(&store, &base, &ours, &theirs);
    assert_eq!(plan.len(), 4, "{plan:?}");
    assert_eq!(
        plan[0],
        MergeStep::Merged {
            path: "apart.txt".into(),
            text: "1 ours\n2\n3\n4\n5 theirs\n".into(),
            mode: ours.files["apart.txt"].mode
        }
    );
    let MergeStep::Conflict { path, why } = &plan[1] else {
        panic!("{plan:?}")
    };
    assert_eq!(path, "clash.txt");
    assert!(
        why.contains("<<<<<<<") && why.contains("x ours") && why.contains("x theirs"),
        "{why}"
    );
    let MergeStep::Conflict { path, why } = &plan[2] else {
        panic!("{plan:?}")
    };
    assert_eq!(
        (path.as_str(), why.as_str()),
        ("gone.txt", "removed here, changed on the branch")
    );
    assert_eq!(plan[3], MergeStep::Take("new.txt".into()));
}

#[test]
fn a_merge_never_writes_what_decides_what_runs() {
    for p in [
        ".new/config.json",
        ".git/hooks/x",
        ".claude/settings.json",
        "AGENTS.md",
        ".mcp.json",
        "a/../b",
    ] {
        assert!(decides_what_runs(p), "{p}");
    }
    for p in [
        "src/AGENTS.md",
        "docs/.mcp.json.md",
        "a.txt",
        "src/.newer/x",
    ] {
        assert!(!decides_what_runs(p), "{p}");
    }
}

/// Snapshots as earlier versions wrote them (JSON text: a whole one and a difference from it,
/// with a removal) still load, serve as the base of a new snapshot, and restore what they list.
#[test]
fn snapshots_written_by_earlier_versions_load_and_restore() {
    let (_d, work, store) = fixture();
    let hash_a = store.store_bytes(b"fn old() {}\n").unwrap();
    let hash_b = store.store_bytes(b"old b\n").unwrap();
    let dir = store.dir.join("snapshots");
    fs::create_dir_all(&dir).unwrap();
    let file = |hash: &str, size: u32, ino: u32| {
        format!(
            r#"{{"kind":"file","hash":"{hash}","mode":33188,"size":{size},"mtime_ns":1,"ino":{ino}}}"#
        )
    };
    fs::write(
        dir.join("oldbase.json"),
        format!(
            r#"{{"files":{{"gone.txt":{},"src/a.rs":{},"src/deep/b.txt":{}}},"taken_ns":5}}"#,
            file(&hash_b, 6, 1),
            file(&hash_a, 12, 2),
            file(&hash_b, 6, 3)
        ),
    )
    .unwrap();
    fs::write(
        dir.join("olddiff.json"),
        r#"{"base":"oldbase","files":{"link":{"kind":"link","target":"src/a.rs","mode":41471}},"removed":["gone.txt"],"taken_ns":6}"#,
    )
    .unwrap();
    let old = store.load("olddiff").unwrap();
    let paths: Vec<&str> = old.files.keys().map(|k| &**k).collect();
    assert_eq!(paths, ["link", "src/a.rs", "src/deep/b.txt"]);
    assert_eq!(old.files["src/a.rs"].hash.as_deref(), Some(hash_a.as_str()));
    assert_eq!(old.files["link"].target.as_deref(), Some("src/a.rs"));
    // A walk from it (its paths shared), stored as a difference from it, loads back the same.
    let (now_id, now) = store
        .snapshot(&work, &settings(), Some(("olddiff", &old)))
        .unwrap();
    assert_eq!(store.stored(&now_id).unwrap().base.as_deref(), None);
    assert_eq!(store.load(&now_id).unwrap(), now);
    assert_eq!(
        now.files["src/a.rs"].hash.as_deref().map(str::len),
        Some(64)
    );
    assert_ne!(now.files["src/a.rs"].hash, old.files["src/a.rs"].hash);
    let to_change: Vec<String> = changes(&now, &old).into_iter().map(|(p, _)| p).collect();
    let workdir = Workdir::new(&work).unwrap();
    let applied = apply(&store, &workdir, &now, &old, &to_change, false);
    let kept: Vec<&str> = applied.kept.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(kept, ["big.dat"], "{:?}", applied.kept);
    assert_eq!(
        fs::read_to_string(work.join("src/a.rs")).unwrap(),
        "fn old() {}\n"
    );
    assert_eq!(
        fs::read_to_string(work.join("src/deep/b.txt")).unwrap(),
        "old b\n"
    );
    assert!(!work.join("run.sh").exists() && !work.join(".gitignore").exists());
}

/// The previous snapshot's entries of one folder: its own files, in order, each subfolder's
/// passed over whatever sorts around it (`b.x` before `b/`, `b0` after).
#[test]
fn a_folders_previous_entries_are_its_own_files_only() {
    let entry = Entry {
        kind: "file".into(),
        hash: None,
        target: None,
        mode: 0,
        size: 0,
        mtime_ns: 0,
        ino: 0,
    };
    let files: BTreeMap<Arc<str>, Entry> =
        ["a", "b.x", "b/c", "b/d/e", "b/d/f", "b/g", "b0", "c/h"]
            .into_iter()
            .map(|p| (Arc::from(p), entry.clone()))
            .collect();
    let names = |prefix: &str| -> Vec<String> {
        walk::in_folder(&files, prefix)
            .into_iter()
            .map(|(p, _)| p.to_string())
            .collect()
    };
    assert_eq!(names(""), ["a", "b.x", "b0"]);
    assert_eq!(names("b/"), ["b/c", "b/g"]);
    assert_eq!(names("b/d/"), ["b/d/e", "b/d/f"]);
    assert_eq!(names("c/"), ["c/h"]);
    assert!(names("x/").is_empty());
}

/// A folder's names in path order however they begin (a subfolder `a` sorts as `a/`, names alike
/// in their first eight bytes, names gone or new since): every unchanged file is met again in
/// the previous snapshot, its path shared and not read again.
#[test]
fn a_walk_meets_every_unchanged_file_again_whatever_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let files = [
        "a",
        "a.txt",
        "a0",
        "b/x",
        "b.rs",
        "b0",
        "abcdefgh",
        "abcdefgh.rs",
        "abcdefgh0",
        "abcdefg/z",
        "abcdefghij/y",
        "longname_1.rs",
        "longname_10.rs",
        "longname_2.rs",
        "longname_",
        "B",
        "é",
        "zz",
    ];
    for f in files {
        let path = work.join(f);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, f).unwrap();
        age(&path, 3600);
    }
    let store = CheckpointStore::new(&dir.path().join("data"));
    let (id, first) = store.snapshot(&work, &settings(), None).unwrap();
    let mut listed: Vec<&str> = files.to_vec();
    listed.sort();
    assert_eq!(first.files.keys().map(|p| &**p).collect::<Vec<_>>(), listed);
    // One file gone, one new: the others are still met.
    fs::remove_file(work.join("a0")).unwrap();
    fs::write(work.join("a1"), "new").unwrap();
    let (_, second) = store
        .snapshot(&work, &settings(), Some((&id, &first)))
        .unwrap();
    for (path, entry) in &second.files {
        match first.files.get_key_value(path) {
            Some((old, old_entry)) => {
                assert!(Arc::ptr_eq(old, path), "{path} not met again");
                assert!(
                    Arc::ptr_eq(
                        old_entry.hash.as_ref().unwrap(),
                        entry.hash.as_ref().unwrap()
                    ),
                    "{path} read again"
                );
            }
            None => assert_eq!(&**path, "a1"),
        }
    }
    assert_eq!(second.files.len(), files.len());
    assert!(!second.files.contains_key("a0"));
}
