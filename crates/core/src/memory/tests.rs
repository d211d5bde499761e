use super::review::{Change, apply, parse};
use super::*;
use crate::layers::Layers;
use crate::secret::secret_values;
use std::fs;
#[cfg(unix)]
use std::os::unix::fs::symlink;

fn store(dir: &Path) -> MemoryStore {
    MemoryStore::new(Some(dir.join("user")), dir.join("project"))
}

#[cfg(unix)]
#[test]
fn memories_are_written_indexed_listed_and_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    assert!(s.prompt_part(200, 25_600).is_none());
    s.write(
        Level::User,
        "Tabs: no",
        "user_preference",
        "Spaces, never tabs",
        "Indent with four spaces.",
        &[],
    )
    .unwrap();
    s.write(
        Level::Project,
        "build",
        "project_fact",
        "How to build: make",
        "Run `make` then `make test`.",
        &[],
    )
    .unwrap();
    // An update replaces, never duplicates.
    s.write(
        Level::Project,
        "build",
        "project_fact",
        "How to build: just",
        "Run `just`.",
        &[],
    )
    .unwrap();
    let (memories, problems) = s.list();
    assert!(problems.is_empty(), "{problems:?}");
    let names: Vec<(&str, Level)> = memories
        .iter()
        .map(|m| (m.name.as_str(), m.level))
        .collect();
    assert_eq!(
        names,
        [("Tabs: no", Level::User), ("build", Level::Project)]
    );
    let index = fs::read_to_string(dir.path().join("project/MEMORY.md")).unwrap();
    assert_eq!(
        index,
        "# Memory\n\n## Project facts\n\n- [project_fact](build.md) — How to build: just\n"
    );
    let part = s.prompt_part(200, 25_600).unwrap();
    assert!(part.contains("### About the user"));
    assert!(part.contains("- [user_preference](tabs-no.md) — Spaces, never tabs"));
    // Private files.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        fs::metadata(dir.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!((mode("project/build.md"), mode("project")), (0o600, 0o700));
    // Forgotten: out of the list and the index, kept in the trash.
    assert_eq!(s.forget("build").unwrap().unwrap().name, "build");
    assert!(s.forget("build").unwrap().is_none());
    assert!(
        !fs::read_to_string(dir.path().join("project/MEMORY.md"))
            .unwrap()
            .contains("build")
    );
    assert_eq!(
        fs::read_dir(dir.path().join("project/.trash"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn the_index_in_the_prompt_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    for i in 0..50 {
        s.write(
            Level::Project,
            &format!("fact {i}"),
            "project_fact",
            &"d".repeat(50),
            "x",
            &[],
        )
        .unwrap();
    }
    let part = s.prompt_part(10, 25_600).unwrap();
    assert_eq!(
        part.matches("- [project_fact](fact-").count(),
        6,
        "four lines of headings, then 6 entries"
    );
    assert!(part.contains("the rest of the index is left out"));
    let part = s.prompt_part(200, 600).unwrap();
    assert!(part.len() < 1000, "{}", part.len());
}

#[test]
fn names_cannot_choose_the_path_and_broken_files_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let path = s
        .write(
            Level::Project,
            "../../etc/passwd",
            "reference",
            "x",
            "y",
            &[],
        )
        .unwrap();
    assert_eq!(path, dir.path().join("project/etc-passwd.md"));
    assert!(
        s.write(Level::Project, "!!!", "reference", "x", "y", &[])
            .is_err()
    );
    fs::write(dir.path().join("project/broken.md"), "---\nname: [x\n---\n").unwrap();
    fs::write(dir.path().join("project/plain.md"), "no front matter").unwrap();
    let (memories, problems) = s.list();
    assert_eq!(memories.len(), 1);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("broken.md")));
}

/// Keys, tokens, passwords and private keys in several formats never reach the disk.
#[test]
fn secrets_are_filtered_before_anything_is_written() {
    // (the text planted, the part of it that must not survive)
    let planted = [
        (
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "abcdefghijklmnopqrstuvwxyz012345",
        ),
        (
            "sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        ),
        (
            "ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
        ),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "11ABCDEFG0123456789",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
        (
            "AIzaSyA-1234567890abcdefghijklmnopqrstu",
            "1234567890abcdefghijklmnopqrstu",
        ),
        (
            "xoxb-123456789012-1234567890123-abcdefghij",
            "1234567890123-abcdefghij",
        ),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "dozjgNryP4J3jVmNHl0w5N",
        ),
        ("Bearer abcdef0123456789abcdef", "abcdef0123456789abcdef"),
        ("password = hunter2hunter2", "hunter2"),
        ("the api_key is 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
        ("https://admin:s3cr3tpw@db.example.com/prod", "s3cr3tpw"),
        (
            "my-own-secret-value-from-env",
            "my-own-secret-value-from-env",
        ),
    ];
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----";
    let lines: Vec<&str> = planted.iter().map(|(text, _)| *text).collect();
    let text = format!("{}\n{key}\nkeep this sentence", lines.join("\n"));
    let env = secret_values(
        [
            (
                "MY_SERVICE_TOKEN".to_string(),
                "my-own-secret-value-from-env".to_string(),
            ),
            ("HOME".to_string(), "/home/someone-long".to_string()),
        ]
        .into_iter(),
    );
    assert_eq!(env, ["my-own-secret-value-from-env"]);
    let clean = redact_secrets(&text, &env);
    let cores = planted.iter().map(|(_, core)| *core);
    for core in cores.chain(["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"]) {
        assert!(!clean.contains(core), "{core} leaked:\n{clean}");
    }
    assert!(clean.contains("keep this sentence"));
    // Through the store as well.
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let path = s
        .write(
            Level::User,
            "creds",
            "reference",
            "the key sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            &text,
            &env,
        )
        .unwrap();
    let stored = fs::read_to_string(path).unwrap();
    assert!(!stored.contains("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "{stored}");
    assert!(!stored.contains("hunter2"), "{stored}");
    assert!(stored.contains("[redacted]"));
}

#[test]
fn review_answers_are_read_leniently_and_applied() {
    let answer = "Sure! ```json\n{\"changes\": [{\"action\": \"write\", \"level\": \"project\", \"name\": \"test command\", \"kind\": \"project_fact\", \"description\": \"Tests run with cargo nextest\", \"content\": \"Use `cargo nextest run`.\"}, {\"action\": \"delete\", \"level\": \"user\", \"name\": \"gone\"}]}\n```";
    let changes = parse(answer).unwrap();
    assert_eq!(changes.len(), 2);
    assert!(parse("nothing to say").is_err());
    assert_eq!(parse("{\"changes\": []}").unwrap(), Vec::<Change>::new());
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    s.write(Level::User, "gone", "reference", "x", "y", &[])
        .unwrap();
    let done = apply(&s, &changes, &[]);
    assert_eq!(
        done,
        ["saved `test command` (project)", "forgot `gone` (user)"]
    );
    assert!(dir.path().join("project/test-command.md").exists());
}

/// A review's `update` of a name the index does not have is skipped (no `made-up-slug.md`);
/// one of a name it has replaces that note; `project_knowledge` is kept as that kind, in its
/// own block of the index.
#[test]
fn an_update_of_an_unknown_name_is_skipped_and_project_knowledge_is_its_own_kind() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    s.write(
        Level::Project,
        "build",
        "project_fact",
        "How to build",
        "just",
        &[],
    )
    .unwrap();
    let answer = r#"{"changes": [
        {"action": "update", "level": "project", "name": "made-up slug", "kind": "project_fact",
         "description": "x", "content": "y"},
        {"action": "update", "level": "project", "name": "build", "kind": "project_fact",
         "description": "How to build now", "content": "cargo build"},
        {"action": "write", "level": "project", "name": "layout", "kind": "project_knowledge",
         "description": "Where things are", "content": "crates/core is the engine"}]}"#;
    let done = apply(&s, &parse(answer).unwrap(), &[]);
    assert_eq!(
        done,
        ["saved `build` (project)", "saved `layout` (project)"]
    );
    let project = dir.path().join("project");
    assert!(!project.join("made-up-slug.md").exists());
    assert!(
        fs::read_to_string(project.join("build.md"))
            .unwrap()
            .contains("cargo build")
    );
    assert!(
        fs::read_to_string(project.join("layout.md"))
            .unwrap()
            .contains("kind: project_knowledge")
    );
    let index = fs::read_to_string(project.join(INDEX)).unwrap();
    assert!(
        index.contains(
            "## Project knowledge\n\n- [project_knowledge](layout.md) — Where things are"
        ),
        "{index}"
    );
    let (listed, _) = s.list();
    assert!(listed.iter().any(|m| m.kind == "project_knowledge"));
}

/// The secrets the third attack saw kept: each is redacted, also at the start of a name (the
/// note stays valid YAML), and no file name is made of one.
#[test]
fn the_secrets_the_attack_found_are_redacted_everywhere() {
    for (text, secret) in [
        ("DB_PASSWORD=hunter2hunter2", "hunter2hunter2"),
        ("MYSQL_ROOT_PASSWORD: rootpass99", "rootpass99"),
        (
            "aws_secret_access_key = wJalrXUtnFEMIK7MDENG",
            "wJalrXUtnFEMIK7MDENG",
        ),
        (
            "stripe sk_live_51HxYzABCDEFGHIJ0123",
            "sk_live_51HxYzABCDEFGHIJ0123",
        ),
        ("passphrase: correct-horse-battery", "correct-horse-battery"),
        (
            "Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "dXNlcjpwYXNzd29yZA==",
        ),
        (
            "npm_abcdefghijklmnopqrstuvwxyz0123456789",
            "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            "hf_abcdefghijklmnopqrstuvwxyz0123456789",
            "hf_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
            "lQOYBF",
        ),
        (
            "hook https://hooks.slack.com/services/T000/B000/XXXXXXXX",
            "T000/B000/XXXXXXXX",
        ),
    ] {
        let clean = redact_secrets(text, &[]);
        assert!(!clean.contains(secret), "{text} -> {clean}");
    }
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new(None, dir.path().join("project"));
    let key = "sk-0123456789abcdef0123456789abcdef";
    let path = store
        .write(
            Level::Project,
            &format!("{key} is the deepseek key"),
            "project_fact",
            &format!("{key} is the deepseek key"),
            &format!("{key} is the deepseek key"),
            &[],
        )
        .unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(!name.contains("sk-0123"), "{name}");
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains(key), "{text}");
    let (memories, problems) = store.list();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        memories.iter().any(|m| m.name.starts_with("[redacted]")),
        "{memories:?}"
    );
}

/// Each kind has its block, in the order of the kinds, whatever the order of the writes; a line
/// is `- [type](slug.md) — summary`.
#[test]
fn the_index_has_a_block_by_kind_in_codepilots_format() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    for (name, kind, about) in [
        ("docs", "reference", "The API docs are in docs/api"),
        ("tests need docker", "project_fact", "Start Docker first"),
        ("short answers", "user_preference", "Answers of a few lines"),
        (
            "no mocks",
            "user_feedback",
            "Integration tests hit a real database",
        ),
        ("a kind nobody knows", "gossip", "Counted as a reference"),
    ] {
        s.write(Level::Project, name, kind, about, "text", &[])
            .unwrap();
    }
    let index = fs::read_to_string(dir.path().join("project/MEMORY.md")).unwrap();
    assert_eq!(
        index,
        "# Memory\n\
         \n\
         ## User preferences\n\
         \n\
         - [user_preference](short-answers.md) — Answers of a few lines\n\
         \n\
         ## User feedback\n\
         \n\
         - [user_feedback](no-mocks.md) — Integration tests hit a real database\n\
         \n\
         ## Project facts\n\
         \n\
         - [project_fact](tests-need-docker.md) — Start Docker first\n\
         \n\
         ## References\n\
         \n\
         - [reference](docs.md) — The API docs are in docs/api\n\
         - [reference](a-kind-nobody-knows.md) — Counted as a reference\n"
    );
    // A note whose kind changes moves to its new block; one forgotten leaves, and so does its
    // block when it was the last.
    s.write(
        Level::Project,
        "docs",
        "project_fact",
        "Docs: docs/api",
        "t",
        &[],
    )
    .unwrap();
    s.forget("no mocks").unwrap().unwrap();
    let index = fs::read_to_string(dir.path().join("project/MEMORY.md")).unwrap();
    assert_eq!(
        index,
        "# Memory\n\
         \n\
         ## User preferences\n\
         \n\
         - [user_preference](short-answers.md) — Answers of a few lines\n\
         \n\
         ## Project facts\n\
         \n\
         - [project_fact](tests-need-docker.md) — Start Docker first\n\
         - [project_fact](docs.md) — Docs: docs/api\n\
         \n\
         ## References\n\
         \n\
         - [reference](a-kind-nobody-knows.md) — Counted as a reference\n"
    );
    // Brackets in a name do not break the link: the link is the kind's and the file's.
    s.write(Level::Project, "a [b](c.md) d", "reference", "x", "t", &[])
        .unwrap();
    let index = fs::read_to_string(dir.path().join("project/MEMORY.md")).unwrap();
    assert!(
        index.contains("- [reference](a-b-c-md-d.md) — x\n"),
        "{index}"
    );
    s.write(Level::Project, "a [b](c.md) d", "reference", "y", "t", &[])
        .unwrap();
    let index = fs::read_to_string(dir.path().join("project/MEMORY.md")).unwrap();
    assert_eq!(index.matches("a-b-c-md-d.md").count(), 1, "{index}");
    assert!(
        index.contains("- [reference](a-b-c-md-d.md) — y\n"),
        "{index}"
    );
}

/// An index the earlier format wrote (`- [name](slug.md) (kind): summary`, no blocks) goes into
/// the prompt as it is, and the next write moves its lines into their blocks, none lost.
#[test]
fn an_index_in_the_earlier_format_is_still_read_and_carried_over() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let project = dir.path().join("project");
    fs::create_dir_all(&project).unwrap();
    fs::write(
        project.join("build.md"),
        "---\nname: build\nkind: project_fact\ndescription: \"How to build: make\"\n---\n\nRun make.\n",
    )
    .unwrap();
    fs::write(
        project.join("tabs.md"),
        "---\nname: tabs\nkind: user_preference\ndescription: Spaces\n---\n\nNo tabs.\n",
    )
    .unwrap();
    let old = "# Memory\n\n- [build](build.md) (project_fact): How to build: make\n- [tabs](tabs.md) (user_preference): Spaces\n";
    fs::write(project.join(INDEX), old).unwrap();
    let part = s.prompt_part(200, 25_600).unwrap();
    assert!(part.contains(old), "{part}");
    let (memories, problems) = s.list();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(memories.len(), 2);

    s.write(
        Level::Project,
        "ci",
        "reference",
        "CI is in .github",
        "t",
        &[],
    )
    .unwrap();
    let index = fs::read_to_string(project.join(INDEX)).unwrap();
    assert_eq!(
        index,
        "# Memory\n\
         \n\
         ## User preferences\n\
         \n\
         - [user_preference](tabs.md) — Spaces\n\
         \n\
         ## Project facts\n\
         \n\
         - [project_fact](build.md) — How to build: make\n\
         \n\
         ## References\n\
         \n\
         - [reference](ci.md) — CI is in .github\n"
    );
    // A note written before `created` existed gets one on its next write.
    s.write(
        Level::Project,
        "build",
        "project_fact",
        "make all",
        "t",
        &[],
    )
    .unwrap();
    let (memories, _) = s.list();
    let build = memories.iter().find(|m| m.name == "build").unwrap();
    assert!(build.created.is_some(), "{build:?}");
}

/// An update keeps the note's `created` date and sets `updated`.
#[test]
fn an_update_keeps_the_creation_date() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let path = s
        .write(
            Level::User,
            "editor",
            "user_preference",
            "vim",
            "Uses vim.",
            &[],
        )
        .unwrap();
    let first = fs::read_to_string(&path).unwrap();
    assert!(first.contains("\ncreated: \"20"), "{first}");
    assert!(first.contains("\nupdated: \"20"), "{first}");
    // As if written long ago (by hand, as a YAML date).
    fs::write(
        &path,
        first.replace(
            first.lines().find(|l| l.starts_with("created:")).unwrap(),
            "created: 2021-03-04",
        ),
    )
    .unwrap();
    s.write(
        Level::User,
        "editor",
        "user_preference",
        "helix now",
        "Uses helix.",
        &[],
    )
    .unwrap();
    let second = fs::read_to_string(&path).unwrap();
    assert!(second.contains("\ncreated: 2021-03-04\n"), "{second}");
    assert!(second.contains("Uses helix."), "{second}");
    assert!(!second.contains("updated: 2021"), "{second}");
    let (memories, _) = s.list();
    assert_eq!(memories[0].created.as_deref(), Some("2021-03-04"));
    // A new note's date is now's.
    let now = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let other = s
        .write(
            Level::User,
            "shell",
            "user_preference",
            "fish",
            "Fish.",
            &[],
        )
        .unwrap();
    let text = fs::read_to_string(other).unwrap();
    assert!(text.contains(&format!("created: \"{now}T")), "{text}");
}

/// The lines a person wrote in an index stay as they were, where they were; a note that is not in
/// the index (left out on purpose) stays out when another is written.
#[test]
fn lines_written_by_hand_in_the_index_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    s.write(Level::Project, "build", "project_fact", "make", "t", &[])
        .unwrap();
    s.write(Level::Project, "old", "reference", "to forget", "t", &[])
        .unwrap();
    s.write(Level::Project, "hidden", "reference", "left out", "t", &[])
        .unwrap();
    let project = dir.path().join("project");
    let by_hand = "# Memory\n\
                   \n\
                   Notes kept by me, not by the tool.\n\
                   \n\
                   ## Project facts\n\
                   \n\
                   - [build](build.md) — make\n\
                   - Ask Dana before touching the schema.\n\
                   \n\
                   ## References\n\
                   \n\
                   - [old](old.md) — to forget\n\
                   - [Team wiki](https://wiki.example.com) — everything else\n\
                   \n\
                   ## Mine\n\
                   \n\
                   - [scratch](scratch.md) — a note of mine\n";
    fs::write(project.join(INDEX), by_hand).unwrap();
    s.write(Level::Project, "build", "project_fact", "just", "t", &[])
        .unwrap();
    s.write(Level::Project, "lint", "project_fact", "clippy", "t", &[])
        .unwrap();
    s.forget("old").unwrap().unwrap();
    let index = fs::read_to_string(project.join(INDEX)).unwrap();
    assert_eq!(
        index,
        "# Memory\n\
         \n\
         Notes kept by me, not by the tool.\n\
         \n\
         ## Project facts\n\
         \n\
         - [project_fact](build.md) — just\n\
         - Ask Dana before touching the schema.\n\
         - [project_fact](lint.md) — clippy\n\
         \n\
         ## References\n\
         \n\
         - [Team wiki](https://wiki.example.com) — everything else\n\
         \n\
         ## Mine\n\
         \n\
         - [scratch](scratch.md) — a note of mine\n"
    );
    assert!(!index.contains("hidden"), "{index}");
}

/// Small talk (no tool, a short exchange) neither counts toward `review_every` nor starts a
/// review; a turn that used a tool, says what to remember, or is long does.
#[test]
fn small_talk_is_not_reviewed() {
    use super::review::{Offered, offer, worth_reviewing};
    let mut batch = Vec::new();
    let none: &[String] = &[];
    for (user, answer) in [
        ("hi", "Hello! How can I help you today?"),
        ("thanks", "You're welcome."),
        (
            "what time zone is UTC+8 again?",
            "China Standard Time, among others.",
        ),
        ("你好", "你好！有什么可以帮你的吗？"),
        ("ok", &"A long answer to a short word. ".repeat(20)),
    ] {
        assert_eq!(
            offer(&mut batch, 2, user, none, answer),
            Offered::SmallTalk,
            "{user}"
        );
    }
    assert!(batch.is_empty());
    // Worth it: a tool call, a preference said, a long exchange.
    let tools = ["read_file".to_string()];
    assert!(worth_reviewing("hi", "ok", &tools));
    assert!(worth_reviewing("remember: tabs", "Noted.", none));
    assert!(worth_reviewing("我们用 pnpm", "好的。", none));
    let long = "why does the build of the parser crate fail on the second run but not the first";
    assert!(!worth_reviewing(long, "Caching.", none));
    assert!(worth_reviewing(
        long,
        &"Because the build script ".repeat(8),
        none
    ));
    assert_eq!(offer(&mut batch, 2, "hi", &tools, "done"), Offered::Waiting);
    assert_eq!(
        offer(&mut batch, 2, "thanks", none, "ok"),
        Offered::SmallTalk
    );
    match offer(&mut batch, 2, "remember: tabs", none, "Noted.") {
        Offered::Full(turns) => {
            assert_eq!(turns.len(), 2);
            assert!(turns.iter().all(|t| !t.contains("thanks")), "{turns:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(batch.is_empty());
}

fn codepilot_store(root: &Path) -> (MemoryStore, PathBuf, PathBuf) {
    let work = root.join("work");
    let home = root.join("home");
    fs::create_dir_all(work.join(".codepilot/memory")).unwrap();
    fs::create_dir_all(home.join(".codepilot/memory")).unwrap();
    let layers = Layers {
        project: work.join(".new"),
        user: None,
        codepilot_user: Some(home.join(".codepilot")),
        here: None,
    };
    let s = store(root).with_codepilot(&layers);
    (
        s,
        work.join(".codepilot/memory"),
        home.join(".codepilot/memory"),
    )
}

/// `~/.codepilot/memory/` and `<WORKDIR>/.codepilot/memory/` are read beside ours: their notes
/// are listed, their indexes are in the prompt; nothing is written or moved there.
#[test]
fn both_codepilot_folders_are_read_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let (s, repo, home) = codepilot_store(dir.path());
    fs::write(
        repo.join("deploy.md"),
        "---\nname: deploy\ntype: project_fact\ndescription: Deploys with fly\n---\n\nfly deploy\n",
    )
    .unwrap();
    fs::write(
        repo.join(INDEX),
        "# Memory\n\n## Project facts\n\n- [deploy](deploy.md) — Deploys with fly\n",
    )
    .unwrap();
    fs::write(
        home.join("terse.md"),
        "---\nname: terse\nkind: user_preference\ndescription: Terse answers\n---\n\nBe terse.\n",
    )
    .unwrap();
    fs::write(
        home.join(INDEX),
        "# Memory\n\n## User preferences\n\n- [terse](terse.md) — Terse answers\n",
    )
    .unwrap();
    s.write(Level::Project, "ours", "project_fact", "mine", "t", &[])
        .unwrap();
    let (memories, problems) = s.list();
    assert!(problems.is_empty(), "{problems:?}");
    let seen: Vec<(&str, &str, Level, Tier)> = memories
        .iter()
        .map(|m| (m.name.as_str(), m.kind.as_str(), m.level, m.tier))
        .collect();
    assert_eq!(
        seen,
        [
            ("terse", "user_preference", Level::User, Tier::CodePilot),
            ("ours", "project_fact", Level::Project, Tier::Ours),
            ("deploy", "project_fact", Level::Project, Tier::CodePilot),
        ]
    );
    let part = s.prompt_part(200, 25_600).unwrap();
    assert!(
        part.contains("- [terse](terse.md) — Terse answers"),
        "{part}"
    );
    assert!(
        part.contains("- [deploy](deploy.md) — Deploys with fly"),
        "{part}"
    );
    assert!(
        part.contains("kept in the repository's .codepilot/memory"),
        "{part}"
    );
    assert!(part.contains("- [project_fact](ours.md) — mine"), "{part}");
    // The read tools may read all four folders.
    let dirs: Vec<&Path> = s.dirs().into_iter().map(|(_, d)| d).collect();
    assert!(dirs.contains(&repo.as_path()) && dirs.contains(&home.as_path()));
    // Not ours to forget, nor to write into.
    match s.forget("deploy") {
        Err(MemoryError::NotOurs(m)) => assert_eq!(m.path, repo.join("deploy.md")),
        other => panic!("{other:?}"),
    }
    assert!(repo.join("deploy.md").exists());
    s.write(
        Level::Project,
        "deploy",
        "project_fact",
        "fly, then smoke tests",
        "t",
        &[],
    )
    .unwrap();
    assert!(dir.path().join("project/deploy.md").exists());
    assert_eq!(
        fs::read_to_string(repo.join(INDEX)).unwrap(),
        "# Memory\n\n## Project facts\n\n- [deploy](deploy.md) — Deploys with fly\n"
    );
    assert_eq!(fs::read_dir(&repo).unwrap().count(), 2);
    // DATADIR put in the repository's folder: read once, as ours.
    let layers = Layers {
        project: dir.path().join("work/.new"),
        user: None,
        codepilot_user: None,
        here: None,
    };
    let same = MemoryStore::new(None, repo.clone()).with_codepilot(&layers);
    let (memories, _) = same.list();
    assert_eq!(memories.len(), 1, "{memories:?}");
    assert_eq!(memories[0].tier, Tier::Ours);
    assert_eq!(
        same.prompt_part(200, 25_600)
            .unwrap()
            .matches("deploy.md")
            .count(),
        1
    );
}

#[cfg(unix)]
/// A note or an index linked out of its memory folder is refused (said, not read), and a
/// repository whose `.codepilot/memory` is itself a link out of it gives no memory at all.
#[test]
fn a_memory_file_linked_out_of_its_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (s, repo, home) = codepilot_store(dir.path());
    let outside = dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(
        outside.join("secret.md"),
        "---\nname: SECRET-NOTE\n---\n\nOUTSIDE-SECRET\n",
    )
    .unwrap();
    fs::write(outside.join("index.md"), "- [x](x.md) — OUTSIDE-INDEX\n").unwrap();
    symlink(outside.join("secret.md"), repo.join("stolen.md")).unwrap();
    symlink(outside.join("index.md"), repo.join(INDEX)).unwrap();
    // Even in the user's own CodePilot folder, and in ours.
    symlink(outside.join("secret.md"), home.join("away.md")).unwrap();
    fs::create_dir_all(dir.path().join("project")).unwrap();
    symlink(
        outside.join("index.md"),
        dir.path().join("project/MEMORY.md"),
    )
    .unwrap();
    // A link that stays inside its folder is followed.
    fs::write(
        home.join("real.md"),
        "---\nname: real\ndescription: inside\n---\n\nfine\n",
    )
    .unwrap();
    symlink("real.md", home.join("alias.md")).unwrap();

    let (memories, problems) = s.list();
    assert!(
        memories.iter().all(|m| m.name != "SECRET-NOTE"),
        "{memories:?}"
    );
    assert_eq!(
        memories.iter().filter(|m| m.name == "real").count(),
        2,
        "{memories:?}"
    );
    for refused in ["stolen.md", "away.md", "work/.codepilot/memory/MEMORY.md"] {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(refused) && p.contains("leads out of its memory folder")),
            "{refused}: {problems:?}"
        );
    }
    let part = s.prompt_part(200, 25_600).unwrap_or_default();
    assert!(!part.contains("OUTSIDE"), "{part}");
    // Our own index linked out: a write refuses to build on it and changes nothing.
    assert!(matches!(
        s.write(Level::Project, "x", "reference", "x", "x", &[]),
        Err(MemoryError::Refused { .. })
    ));
    assert_eq!(
        fs::read_to_string(outside.join("index.md")).unwrap(),
        "- [x](x.md) — OUTSIDE-INDEX\n"
    );

    // The repository's whole folder a link out of WORKDIR: not read, not a read root.
    let other = tempfile::tempdir().unwrap();
    let (s, repo, _) = codepilot_store(other.path());
    fs::remove_dir(&repo).unwrap();
    symlink(&outside, &repo).unwrap();
    fs::write(outside.join(INDEX), "- [y](y.md) — OUTSIDE-FOLDER\n").unwrap();
    let (memories, _) = s.list();
    assert!(
        memories.iter().all(|m| m.name != "SECRET-NOTE"),
        "{memories:?}"
    );
    assert!(s.prompt_part(200, 25_600).is_none());
    assert!(s.dirs().iter().all(|(_, d)| *d != repo.as_path()));
}
