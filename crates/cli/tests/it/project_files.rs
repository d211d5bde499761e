//! Files a cloned project supplies are read through one reader: a link out of the project, a
//! FIFO, a device or a huge file never reaches the system prompt, a dump or memory, and never
//! hangs the first message. Each attack as it was found, through the binary.

use crate::support::*;
#[cfg(not(windows))]
use new_sys::platform;
use std::fs;
use std::fs::File;
#[cfg(unix)]
use std::os::unix::fs::symlink;
use std::time::Duration;
use std::time::Instant;

#[cfg(unix)]
#[test]
fn links_out_fifos_devices_and_huge_files_in_a_project_are_refused_and_said() {
    let env = Env::new();
    let work = env.work();
    let outside = env.dir.path().join("outside");
    fs::create_dir_all(outside.join("skill")).unwrap();
    fs::write(outside.join("secret.md"), "OUTSIDE-SECRET\n").unwrap();
    fs::write(
        outside.join("skill/SKILL.md"),
        "---\nname: away\ndescription: OUTSIDE-SKILL\n---\nOUTSIDE-BODY\n",
    )
    .unwrap();
    symlink("/proc/self/environ", work.join("AGENTS.md")).unwrap();
    for d in [
        ".claude/skills/zero",
        ".claude/skills/fifo",
        ".new/agents",
        ".new/roles",
    ] {
        fs::create_dir_all(work.join(d)).unwrap();
    }
    symlink("/dev/zero", work.join(".claude/skills/zero/SKILL.md")).unwrap();
    platform::make_fifo(&work.join(".claude/skills/fifo/SKILL.md")).unwrap();
    symlink(outside.join("skill"), work.join(".claude/skills/away")).unwrap();
    symlink(
        outside.join("secret.md"),
        work.join(".claude/skills/flat.md"),
    )
    .unwrap();
    symlink(outside.join("secret.md"), work.join(".new/agents/spy.md")).unwrap();
    symlink(outside.join("secret.md"), work.join(".new/roles/evil.md")).unwrap();
    symlink(outside.join("secret.md"), work.join(".mcp.json")).unwrap();
    let server = Server::start(vec![text(&["hello"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(&work)
        .arg("default")
        .arg(env.data())
        .args(["-p", "hi"])
        .env("OPENAI_API_KEY", "sk-very-secret-123");
    let started = Instant::now();
    let run = run_with_stdin(cmd, "");
    assert!(started.elapsed() < Duration::from_secs(20), "it hung");
    assert_eq!(run.code, Some(0), "{run:?}");
    let request = serde_json::to_string(&server.requests()[0]).unwrap();
    for secret in [
        "sk-very-secret-123",
        "OPENAI_API_KEY",
        "OUTSIDE-SECRET",
        "OUTSIDE-SKILL",
    ] {
        assert!(!request.contains(secret), "{secret} reached the request");
    }
    for said in [
        "AGENTS.md is refused: it leads out of the project",
        "skill folder",
        "is a link out of",
        "flat.md",
        "spy.md",
        ".mcp.json is refused: it leads out of the project",
    ] {
        assert!(run.stderr.contains(said), "{said}: {run:?}");
    }
    // The FIFO and the device: refused, not waited on or read without end.
    assert!(run.stderr.contains("named pipe"), "{run:?}");
    // A role linked out of the project is an error that names it.
    let mut cmd = env.command(&server.base_url);
    cmd.arg(&work).arg("evil").arg(env.data());
    let run = run_with_stdin(cmd, "");
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("leads out of the project"), "{run:?}");
}

#[test]
fn a_huge_sparse_instructions_file_is_cut_not_read_whole() {
    let env = Env::new();
    let f = File::create(env.work().join("AGENTS.md")).unwrap();
    f.set_len(20 << 30).unwrap();
    fs::write(env.work().join("CLAUDE.md"), "unused\n").unwrap();
    let server = Server::start(vec![text(&["hello"])]);
    let started = Instant::now();
    let run = env.run(&server.base_url, &["-p", "hi"], "");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it read it all"
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let system = system_of(&server.requests()[0]).to_string();
    assert!(system.len() < 200 * 1024, "{}", system.len());
}
