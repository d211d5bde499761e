//! Memory across sessions: learnt by a review in the background, filtered for secrets, injected
//! next session; `/memory`, `/memory forget`, `/remember`; a failed or slow review changes nothing,
//! and leaving does not wait for one.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;
use std::fs;
use std::path::PathBuf;
use std::thread;

/// Runs `new` with lines fed one group at a time: each group is written once `ready` says so.
fn run_paced(env: &Env, url: &str, groups: &[(&str, &dyn Fn() -> bool)]) -> Run {
    let mut cmd = env.command(url);
    cmd.arg(env.work())
        .arg("default")
        .arg(env.data())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for (lines, ready) in groups {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !ready() {
            if Instant::now() > deadline {
                child.kill().unwrap();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "timed out before writing {lines:?}: {}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        stdin.write_all(lines.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn project_memory(env: &Env) -> PathBuf {
    env.data().join("memory")
}

#[test]
fn a_review_learns_in_the_background_without_secrets_and_the_next_session_knows() {
    let server = Server::start(vec![text(&["Noted."]), text(&["Hello again."])]);
    let review = json!({"changes": [{
        "action": "write", "level": "project", "name": "package manager",
        "kind": "project_fact", "description": "This project uses pnpm",
        "content": "Use pnpm, never npm. The registry token is npm_abcdefghijklmnopqrstuvwxyz0123456789 and password: hunter2hunter2; the key sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZ."
    }]});
    server.answer_reviews(&review.to_string(), Duration::ZERO);
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "memory": {"review_every": 1}}"#);
    let file = project_memory(&env).join("package-manager.md");
    let indexed = || {
        fs::read_to_string(project_memory(&env).join("MEMORY.md"))
            .is_ok_and(|i| i.contains("package-manager.md"))
    };
    let run = run_paced(
        &env,
        &server.base_url,
        &[("we use pnpm here\n", &|| true), ("/memory\n", &indexed)],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("memory: saved `package manager` (project)"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("project_fact     project  package manager"),
        "{run:?}"
    );
    // The review saw the turn.
    let reviews = server.reviews();
    assert_eq!(reviews.len(), 1);
    let asked = reviews[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        asked.contains("we use pnpm here") && asked.contains("Noted."),
        "{asked}"
    );
    // Nothing secret reached the disk.
    let stored = fs::read_to_string(&file).unwrap();
    assert!(stored.contains("Use pnpm, never npm."), "{stored}");
    assert!(stored.contains("[redacted]"), "{stored}");
    for secret in ["hunter2", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"] {
        assert!(!stored.contains(secret), "{secret} in {stored}");
    }
    // Next session: the index is in the system prompt, and the folder can be read.
    let run = env.run(&server.base_url, &[], "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let system = server.requests().last().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("## Memory"), "{system}");
    assert!(
        system.contains(
            "## Project facts\n\n- [project_fact](package-manager.md) — This project uses pnpm\n"
        ),
        "{system}"
    );
}

#[test]
fn a_failed_or_slow_review_changes_nothing_and_leaving_does_not_wait_for_one() {
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "memory": {"review_timeout_seconds": 1, "review_every": 1}}"#,
    );
    // Not JSON.
    let server = Server::start(vec![text(&["One."]), text(&["Two."])]);
    server.answer_reviews("I think nothing is worth keeping.", Duration::ZERO);
    let asked = || !server.reviews().is_empty();
    let run = run_paced(
        &env,
        &server.base_url,
        &[
            ("we always deploy on fridays\n", &|| true),
            ("and what about mondays then\n", &asked),
        ],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!project_memory(&env).exists());
    // Slower than the timeout.
    let server = Server::start(vec![text(&["One."])]);
    let review = json!({"changes": [{"action": "write", "level": "project", "name": "late", "content": "x"}]});
    server.answer_reviews(&review.to_string(), Duration::from_secs(3));
    let started = Instant::now();
    let run = run_paced(
        &env,
        &server.base_url,
        &[("remember that we use pnpm\n", &|| true)],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    // Input ended while the review was in flight: `new` left without waiting for it.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    thread::sleep(Duration::from_secs(4));
    assert!(!project_memory(&env).join("late.md").exists());
}

#[test]
fn remember_forget_and_memory_off() {
    let env = Env::new();
    let server = Server::start(vec![text(&["ok"])]);
    let run = env.run(
        &server.base_url,
        &[],
        "/remember I prefer short answers\n/remember --project The tests need Docker\n/memory\n/memory forget The tests need Docker\n/memory forget nothing\n/memory\n/remember\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("remembered `I prefer short answers` (user)"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("user_preference  user     I prefer short answers"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("project_fact     project  The tests need Docker"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("forgot `The tests need Docker` (project)"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("no memory is named `nothing`"),
        "{run:?}"
    );
    assert!(run.stderr.contains("/remember takes the text"), "{run:?}");
    let user_file = env
        .dir
        .path()
        .join("xdg-data/new/memory/i-prefer-short-answers.md");
    assert!(user_file.exists());

    // Off: nothing injected, no review asked, the commands say so.
    env.write_config(r#"{"retry_initial_ms": 5, "memory": {"enabled": false}}"#);
    let run = env.run(&server.base_url, &[], "hi\n/memory\n");
    assert!(run.stderr.contains("memory is off"), "{run:?}");
    let requests = server.requests();
    assert!(server.reviews().is_empty());
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("## Memory"), "{system}");
}

/// Reviews are cheap and visible: small talk is never reviewed, turns worth it go by
/// `memory.review_every` in one request (said once a session, on stdout), with `memory.model`;
/// what a session ended before reviewing waits for the next one.
#[test]
fn reviews_skip_small_talk_go_in_batches_and_wait_across_sessions() {
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "memory": {"review_every": 2, "model": "cheap-model"}}"#,
    );
    let server = Server::start(vec![
        text(&["Hi!"]),
        text(&["Noted, pnpm."]),
        text(&["Deploys on Fridays."]),
        text(&["Tabs, then."]),
        text(&["Sure."]),
    ]);
    server.answer_reviews(r#"{"changes": []}"#, Duration::ZERO);
    let asked = || !server.reviews().is_empty();
    let run = run_paced(
        &env,
        &server.base_url,
        &[
            ("hi\n", &|| true),
            ("we use pnpm in this project\n", &|| true),
            ("we always deploy on fridays here\n", &|| true),
            ("/memory\n", &asked),
        ],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        run.stdout.matches("are reviewed in the background").count(),
        1,
        "{run:?}"
    );
    let reviews = server.reviews();
    assert_eq!(
        reviews.len(),
        1,
        "two turns in one request, small talk left out"
    );
    assert_eq!(reviews[0]["model"], "cheap-model");
    let asked = reviews[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        asked.contains("we use pnpm") && asked.contains("deploy on fridays"),
        "{asked}"
    );
    assert!(!asked.contains("## The user wrote\nhi\n"), "{asked}");
    // One turn worth it, then the session ends: it waits for the next session's review.
    let run = env.run(&server.base_url, &[], "I prefer tabs over spaces always\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    // Said once, ever (issue 44): not again in a later session.
    assert!(
        !run.stdout.contains("are reviewed in the background"),
        "{run:?}"
    );
    assert_eq!(server.reviews().len(), 1);
    assert!(project_memory(&env).join(".pending-review.json").exists());
    let asked = || server.reviews().len() == 2;
    let run = run_paced(
        &env,
        &server.base_url,
        &[
            ("remember to run the tests first\n", &|| true),
            ("/memory\n", &asked),
        ],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        !run.stdout.contains("are reviewed in the background"),
        "said in the first session only: {run:?}"
    );
    let last = server.reviews()[1]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last.contains("tabs over spaces") && last.contains("run the tests first"),
        "{last}"
    );
    assert!(!project_memory(&env).join(".pending-review.json").exists());
}

/// A review in flight when the next turn starts gives way (the server's slot is the turn's):
/// its turns are reviewed with the next batch.
#[test]
fn a_review_gives_way_to_the_next_turn_and_its_turns_come_back() {
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "memory": {"review_every": 1}}"#);
    // The second turn takes a moment, as real ones do: the review in flight sees it start.
    let server = Server::start(vec![
        text(&["Noted."]),
        Reply::SseStall(
            vec![chunk_text("Fridays")],
            Duration::from_millis(300),
            vec![chunk_text(", then."), chunk_finish("stop"), "[DONE]".into()],
        ),
    ]);
    server.answer_reviews(r#"{"changes": []}"#, Duration::from_secs(2));
    let first = || server.reviews().len() == 1;
    let second = || server.reviews().len() == 2;
    let run = run_paced(
        &env,
        &server.base_url,
        &[
            ("we use pnpm in this project\n", &|| true),
            ("we always deploy on fridays here\n", &first),
            ("/memory\n", &second),
        ],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let reviews = server.reviews();
    let again = reviews[1]["messages"][1]["content"].as_str().unwrap();
    assert!(
        again.contains("we use pnpm") && again.contains("deploy on fridays"),
        "{again}"
    );
}

/// CodePilot's memory folders, `~/.codepilot/memory/` and the project's `.codepilot/memory/`, are
/// read beside ours: listed by `/memory`, their indexes in the system prompt; `/memory forget`
/// leaves their files alone and says so, in English and Chinese.
#[test]
fn codepilot_s_memory_folders_are_read_and_left_alone() {
    let env = Env::new();
    let repo = env.work().join(".codepilot/memory");
    let home = env.dir.path().join("home/.codepilot/memory");
    for (dir, name, kind, about) in [
        (&repo, "deploy", "project_fact", "Deploys with fly"),
        (&home, "terse", "user_preference", "Terse answers"),
    ] {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join(format!("{name}.md")),
            format!("---\nname: {name}\ntype: {kind}\ndescription: {about}\n---\n\nx\n"),
        )
        .unwrap();
        fs::write(
            dir.join("MEMORY.md"),
            format!("# Memory\n\n- [{name}]({name}.md) — {about}\n"),
        )
        .unwrap();
    }
    let server = Server::start(vec![text(&["ok"])]);
    let run = env.run(
        &server.base_url,
        &[],
        "hello\n/memory\n/memory forget deploy\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("project_fact     project (.codepilot) deploy"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("user_preference  user (.codepilot) terse"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("`deploy` is CodePilot's") && run.stderr.contains("never changes it"),
        "{run:?}"
    );
    assert!(repo.join("deploy.md").exists());
    let system = server.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    for line in [
        "- [deploy](deploy.md) — Deploys with fly",
        "- [terse](terse.md) — Terse answers",
        "kept in the repository's .codepilot/memory",
    ] {
        assert!(system.contains(line), "{line}: {system}");
    }
    env.write_config(r#"{"retry_initial_ms": 5, "lang": "zh"}"#);
    let run = env.run(&server.base_url, &[], "/memory forget deploy\n");
    assert!(run.stderr.contains("`deploy` 属于 CodePilot"), "{run:?}");
    assert!(repo.join("deploy.md").exists());
}
