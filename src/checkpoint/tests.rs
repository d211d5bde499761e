use super::*;

fn fixture() -> (tempfile::TempDir, PathBuf, CheckpointStore) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("src/deep")).unwrap();
    std::fs::create_dir_all(work.join(".git/objects")).unwrap();
    std::fs::create_dir_all(work.join("target")).unwrap();
    std::fs::write(work.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(work.join("src/deep/b.txt"), "b\n").unwrap();
    std::fs::write(work.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(work.join("target/out.bin"), "built").unwrap();
    std::fs::write(work.join("debug.log"), "noise").unwrap();
    std::fs::write(work.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(work.join("big.dat"), vec![b'x'; 2000]).unwrap();
    std::fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/a.rs", work.join("link")).unwrap();
    let store = CheckpointStore::new(&dir.path().join("data"));
    (dir, work, store)
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
    let paths: Vec<&str> = m.files.keys().map(String::as_str).collect();
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
    let mode = std::fs::metadata(store.snapshot_path(&id))
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
    std::fs::remove_dir_all(store.dir.join("objects")).unwrap();
    let (again, m2) = store.snapshot(&work, &settings(), Some((&id, &m))).unwrap();
    assert_eq!((again.as_str(), &m2), (id.as_str(), &m));
    assert!(!store.dir.join("objects").exists());
    // One change: only that file is read and stored.
    std::fs::write(work.join("src/a.rs"), "fn a() { changed() }\n").unwrap();
    std::fs::remove_file(work.join("src/deep/b.txt")).unwrap();
    std::fs::write(work.join("new.txt"), "new\n").unwrap();
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
    std::fs::write(store.object_path(&hash), "tampered").unwrap();
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
    std::fs::write(work.join("src/a.rs"), "fn a() { v2() }\n").unwrap();
    let (second, m2) = store
        .snapshot(&work, &settings(), Some((&first, &m1)))
        .unwrap();
    std::fs::write(work.join("src/a.rs"), "fn a() { v3() }\n").unwrap();
    let (third, _) = store
        .snapshot(&work, &settings(), Some((&second, &m2)))
        .unwrap();
    let line = |s: &str| {
        format!(
            r#"{{"type":"checkpoint","msg_id":"m","snapshot":"{s}","timestamp":"2026-12-01T00:00:00Z"}}"#
        )
    };
    std::fs::write(data.join("c1.jsonl"), format!("{}\n", line(&first))).unwrap();
    std::fs::create_dir_all(data.join("trash")).unwrap();
    std::fs::write(data.join("trash/c2.jsonl"), format!("{}\n", line(&second))).unwrap();
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
    std::fs::remove_file(data.join("trash/c2.jsonl")).unwrap();
    assert_eq!(store.gc(&data).unwrap().0, 1);
    assert_eq!(store.gc(&data).unwrap(), (0, 0, 0));
}
