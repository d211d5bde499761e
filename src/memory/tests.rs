use super::review::{Change, apply, parse};
use super::*;

fn store(dir: &Path) -> MemoryStore {
    MemoryStore::new(Some(dir.join("user")), dir.join("project"))
}

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
    let index = std::fs::read_to_string(dir.path().join("project/MEMORY.md")).unwrap();
    assert_eq!(
        index,
        "# Memory\n\n- [build](build.md) (project_fact): How to build: just\n"
    );
    let part = s.prompt_part(200, 25_600).unwrap();
    assert!(part.contains("### About the user"));
    assert!(part.contains("- [Tabs: no](tabs-no.md) (user_preference): Spaces, never tabs"));
    // Private files.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        std::fs::metadata(dir.path().join(p))
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
        !std::fs::read_to_string(dir.path().join("project/MEMORY.md"))
            .unwrap()
            .contains("build")
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("project/.trash"))
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
        part.matches("- [fact").count(),
        8,
        "two lines of heading, then 8 entries"
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
    std::fs::write(dir.path().join("project/broken.md"), "---\nname: [x\n---\n").unwrap();
    std::fs::write(dir.path().join("project/plain.md"), "no front matter").unwrap();
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
    let stored = std::fs::read_to_string(path).unwrap();
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
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(key), "{text}");
    let (memories, problems) = store.list();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        memories.iter().any(|m| m.name.starts_with("[redacted]")),
        "{memories:?}"
    );
}
