//! The coding toolset behind permissions, through piped stdin: modes, rules, hard limits, the
//! denial said when there is no terminal to ask, diffs, and `/permissions`.

use crate::support::*;
use std::fs;
#[cfg(not(windows))]
use std::fs::Permissions;

/// With the sandbox on (the default where the kernel has it), a command runs in default mode
/// without a question: the kernel keeps it inside WORKDIR. `/status` and `/sandbox` say so.
#[test]
fn with_the_sandbox_default_mode_runs_commands_without_asking() {
    let server = Server::start(vec![
        tool_calls(&[("b", "bash", r#"{"command":"echo hi > hi.txt; cat hi.txt"}"#)]),
        text(&["done"]),
    ]);
    let env = Env::new();
    let run = env.run(&server.base_url, &[], "go\n/status\n/sandbox\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(results(&server, 1)[0], "Exit code: 0\nstdout:\nhi\n");
    assert!(!run.stderr.contains("sandbox: off"), "{run:?}");
    assert!(
        run.stdout
            .contains("sandbox: on (writes in the working folder and $TMPDIR only; network off)"),
        "{run:?}"
    );
    for line in [
        "  writable: ",
        "  read-only inside: ",
        "  hidden: ",
        "  network: none",
    ] {
        assert!(run.stdout.contains(line), "{line}: {run:?}");
    }
    // Strict mode still asks (and cannot, here).
    let server = Server::start(vec![
        tool_calls(&[("b", "bash", r#"{"command":"echo hi"}"#)]),
        text(&["done"]),
    ]);
    env.run(&server.base_url, &["--permission-mode", "strict"], "go\n");
    assert!(results(&server, 1)[0].starts_with("Permission denied"));
}

#[test]
fn without_the_sandbox_default_mode_writes_with_a_diff_but_cannot_ask_to_run_commands() {
    let server = Server::start(vec![
        tool_calls(&[
            (
                "w",
                "write_file",
                r#"{"filepath":"hello.txt","content":"hello\nworld\n"}"#,
            ),
            ("b", "bash", r#"{"command":"echo hi"}"#),
        ]),
        text(&["done"]),
    ]);
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "sandbox": {"enabled": false}}"#);
    let run = env.run(&server.base_url, &[], "go\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains(
            "sandbox: off (sandbox.enabled is false in the config); bash commands are asked for"
        ),
        "{run:?}"
    );
    assert_eq!(
        fs::read_to_string(env.work().join("hello.txt")).unwrap(),
        "hello\nworld\n"
    );
    assert!(run.stdout.contains("✓ hello.txt: created, 2 lines\n--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"), "{run:?}");
    assert!(
        run.stderr.contains(
            "error: bash: needs approval and there is no terminal to ask, so it was not run"
        ),
        "{run:?}"
    );
    let got = results(&server, 1);
    assert_eq!(got[0], "Created `hello.txt` (2 lines, 12 bytes).");
    assert!(
        got[1].starts_with(
            "Permission denied: `bash` needs the user's approval and the user could not be asked"
        ),
        "{got:?}"
    );
}

#[test]
fn permissive_mode_runs_commands_and_strict_mode_asks_for_writes() {
    let call = || {
        tool_calls(&[
            ("b", "bash", r#"{"command":"echo hi; echo err >&2"}"#),
            ("w", "write_file", r#"{"filepath":"x.txt","content":"x"}"#),
        ])
    };
    let server = Server::start(vec![call(), text(&["ok"]), call(), text(&["ok"])]);
    let env = Env::new();
    env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "go\n",
    );
    let got = results(&server, 1);
    assert_eq!(got[0], "Exit code: 0\nstdout:\nhi\nstderr:\nerr\n");
    assert!(got[1].starts_with("Created"));
    fs::remove_file(env.work().join("x.txt")).unwrap();

    env.run(
        &server.base_url,
        &["--permission-mode", "strict"],
        "again\n",
    );
    let got = results(&server, 3);
    assert!(got[0].starts_with("Permission denied"), "{got:?}");
    assert!(got[1].starts_with("Permission denied"), "{got:?}");
    assert!(!env.work().join("x.txt").exists());
}

#[test]
fn rules_allow_and_deny_with_reasons_project_before_user() {
    let server = Server::start(vec![
        tool_calls(&[
            ("1", "bash", r#"{"command":"echo allowed-by-rule"}"#),
            (
                "2",
                "write_file",
                r#"{"filepath":"secrets/key.txt","content":"x"}"#,
            ),
            ("3", "bash", r#"{"command":"echo a && git push"}"#),
            (
                "4",
                "write_file",
                r#"{"filepath":"./secrets/../notes.txt","content":"n"}"#,
            ),
        ]),
        text(&["ok"]),
    ]);
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "permissions": [
        {"tool": "bash", "pattern": "echo *", "action": "allow"},
        {"tool": "bash", "pattern": "git *", "action": "allow"}]}"#,
    );
    fs::create_dir_all(env.work().join(".new")).unwrap();
    fs::write(env.work().join(".new/config.json"), r#"{"permissions": [
        {"tool": "write_file", "pattern": "secrets/**", "action": "deny", "reason": "keys stay out of reach"},
        {"tool": "bash", "pattern": "git push*", "action": "deny"}]}"#).unwrap();
    let run = env.run(&server.base_url, &[], "go\n/permissions\n");
    let got = results(&server, 1);
    assert_eq!(got[0], "Exit code: 0\nstdout:\nallowed-by-rule\n");
    assert_eq!(
        got[1],
        "Permission denied: denied by the project rule `deny  write_file secrets/**  (keys stay out of reach)`: keys stay out of reach. The call was not run; do not retry it."
    );
    assert!(
        got[2].starts_with("Permission denied: denied by the project rule `deny  bash git push*`"),
        "{got:?}"
    );
    assert!(got[3].starts_with("Created `notes.txt`"), "{got:?}");
    assert!(!env.work().join("secrets").exists());
    assert!(run.stdout.contains("mode default · read allow · write allow · commands in the sandbox allow · execute ask\n")
        && run.stdout.contains("rules, first match wins:\n  project  deny  write_file secrets/**  (keys stay out of reach)\n  project  deny  bash git push*\n  user     allow bash echo *\n  user     allow bash git *\n"), "{run:?}");
}

#[test]
fn hard_limits_are_refused_in_every_mode_and_said_to_both() {
    let server = Server::start(vec![
        tool_calls(&[(
            "x",
            "bash",
            r#"{"command":"sudo rm -rf / --no-preserve-root"}"#,
        )]),
        text(&["ok"]),
    ]);
    let env = Env::new();
    env.write_config(r#"{"permissions": [{"tool": "*", "action": "allow"}]}"#);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "clean up\n",
    );
    assert!(run.stderr.contains("error: bash: `rm --no-preserve-root` can delete the whole filesystem; this is blocked by a hard limit"), "{run:?}");
    assert!(
        results(&server, 1)[0]
            .starts_with("Refused: `rm --no-preserve-root` can delete the whole filesystem")
    );
}

#[test]
fn permissions_command_switches_modes_and_refuses_bad_ones() {
    let env = Env::new();
    let run = env.run(
        "http://127.0.0.1:9/v1",
        &[],
        "/permissions\n/permissions strict\n/permissions yolo\n",
    );
    assert!(
        run.stdout.contains(
            "mode default · read allow · write allow · commands in the sandbox allow · execute ask\n"
        ) && run.stdout.contains("no rules; the mode decides"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(
            "mode strict · read allow · write ask · commands in the sandbox ask · execute ask"
        ),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("unknown permission mode `yolo`; use strict, default or permissive"),
        "{run:?}"
    );
    let mut cmd = env.command("http://127.0.0.1:9/v1");
    cmd.arg(env.work()).args(["--permission-mode", "yolo"]);
    let bad = run_with_stdin(cmd, "");
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("invalid value 'yolo'"), "{bad:?}");
}

#[test]
fn the_enabled_tools_list_limits_what_the_model_sees() {
    let server = Server::start(vec![text(&["ok"])]);
    let env = Env::new();
    env.write_config(r#"{"tools": ["read_file", "grep"]}"#);
    env.run(&server.base_url, &[], "hi\n");
    // The list names built-in tools; `use_skill`, `agent` and `task_status` follow `skill.enabled`
    // and `subagent.enabled` (CodePilot's `tools.enabled` is read so).
    assert_eq!(
        tool_names(&server.requests()[0]),
        ["read_file", "grep", "use_skill", "agent", "task_status"]
    );
    let server = Server::start(vec![text(&["ok"])]);
    env.write_config(
        r#"{"tools": ["read_file", "grep", "agent"], "skill": {"enabled": false}, "subagent": {"enabled": false}}"#,
    );
    env.run(&server.base_url, &[], "hi\n");
    let request = &server.requests()[0];
    assert_eq!(tool_names(request), ["read_file", "grep"]);
    // A tool not offered is not mentioned.
    let system = system_of(request);
    for name in ["use_skill", "agent", "task_status", "bash", "edit_file"] {
        assert!(!system.contains(name), "{name} in {system}");
    }
    env.write_config(r#"{"tools": ["read_file", "teleport"]}"#);
    let run = env.run(&server.base_url, &[], "");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("unknown tool `teleport` in the config's `tools` list"),
        "{run:?}"
    );
}

#[test]
fn search_tools_work_through_the_agent() {
    let server = Server::start(vec![
        tool_calls(&[
            ("g", "glob", r#"{"pattern":"*.rs"}"#),
            ("r", "grep", r#"{"pattern":"TODO","context":0}"#),
        ]),
        text(&["found"]),
    ]);
    let env = Env::new();
    fs::create_dir_all(env.work().join("src")).unwrap();
    fs::write(env.work().join("src/lib.rs"), "// TODO: tests\nfn f() {}\n").unwrap();
    fs::write(env.work().join(".gitignore"), "ignored.rs\n").unwrap();
    fs::write(env.work().join("ignored.rs"), "// TODO: hidden\n").unwrap();
    env.run(&server.base_url, &[], "look\n");
    let got = results(&server, 1);
    assert_eq!(got[0], "src/lib.rs\n");
    assert_eq!(got[1], "src/lib.rs:1:// TODO: tests\n");
}

#[cfg(unix)]
/// A command is matched as written, never resolved like a path: `./run.sh` stays `./run.sh` (found
/// by cargo mutants: resolving it would turn it into `run.sh` and slip past this rule).
#[test]
fn a_command_rule_matches_the_command_as_written() {
    let server = Server::start(vec![
        tool_calls(&[("b", "bash", r#"{"command":"./run.sh"}"#)]),
        text(&["ok"]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("run.sh"), "#!/bin/sh\necho ran\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(env.work().join("run.sh"), Permissions::from_mode(0o755)).unwrap();
    env.write_config(
        r#"{"retry_initial_ms": 5, "permissions": [{"tool": "bash", "pattern": "./run.sh", "action": "deny"}]}"#,
    );
    env.run(
        &server.base_url,
        &["--permission-mode", "permissive"],
        "go\n",
    );
    let got = results(&server, 1);
    assert!(got[0].starts_with("Permission denied: "), "{got:?}");
    assert!(!got[0].contains("ran"), "{got:?}");
}

/// A rule names a tool by `new`'s name or Claude Code's (`Bash`, `Write`, `Read`): a deny rule
/// `Bash rm *` denies `rm -f x`. A name that is no tool is an error naming the file and the
/// entry, never a rule that silently matches nothing.
#[test]
fn rules_name_tools_by_alias_and_an_unknown_tool_is_an_error() {
    let env = Env::new();
    fs::write(env.work().join("x"), "keep\n").unwrap();
    env.write_config(
        r#"{"retry_initial_ms": 5, "permission_mode": "permissive",
            "permissions": [{"tool": "Bash", "pattern": "rm *", "action": "deny", "reason": "no rm"},
                            {"tool": "WriteFile", "pattern": "*.lock", "action": "deny"}]}"#,
    );
    let server = Server::start(vec![
        tool_calls(&[
            ("b", "bash", r#"{"command":"rm -f x"}"#),
            ("w", "write_file", r#"{"filepath":"a.lock","content":"x"}"#),
        ]),
        text(&["done"]),
    ]);
    let run = env.run(&server.base_url, &["-p", "go"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let got = results(&server, 1);
    assert!(
        got[0].contains("denied by the user rule `deny  bash rm *  (no rm)`"),
        "{got:?}"
    );
    assert!(got[1].starts_with("Permission denied"), "{got:?}");
    assert!(env.work().join("x").exists() && !env.work().join("a.lock").exists());
    env.write_config(r#"{"permissions": [{"tool": "Bsh", "pattern": "rm *", "action": "deny"}]}"#);
    let run = env.run(&server.base_url, &["-p", "go"], "");
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("new/config.json:1:27: `permissions[0].tool`"),
        "{run:?}"
    );
    assert!(run.stderr.contains("`Bsh` is not a tool"), "{run:?}");
}

/// What decides what runs or what later sessions are told is asked for every time, like
/// `.new/`: the script a hook runs, an MCP server's program, the skill tiers, and every file the
/// instructions include. With no terminal, those writes are refused; others run.
#[test]
fn files_that_run_or_instruct_later_are_protected_from_the_file_tools() {
    let env = Env::new();
    fs::create_dir_all(env.work().join("scripts")).unwrap();
    fs::create_dir_all(env.work().join("docs")).unwrap();
    fs::write(env.work().join("scripts/after-write.sh"), "echo ok\n").unwrap();
    fs::write(env.work().join("server.py"), "print()\n").unwrap();
    fs::write(env.work().join("docs/rules.md"), "be careful\n").unwrap();
    fs::write(env.work().join("AGENTS.md"), "Read this.\n@docs/rules.md\n").unwrap();
    fs::write(
        env.work().join(".mcp.json"),
        r#"{"mcpServers": {"local": {"command": "python3", "args": ["server.py"]}}}"#,
    )
    .unwrap();
    env.write_config(
        r#"{"retry_initial_ms": 5, "hook": {"entries": [{"name": "after", "event": "post_tool_use",
            "action": {"command": "sh scripts/after-write.sh"}}]}}"#,
    );
    let write = |path: &str| format!(r#"{{"filepath":"{path}","content":"x"}}"#);
    let paths = [
        "scripts/after-write.sh",
        "server.py",
        "docs/rules.md",
        ".claude/skills/x/SKILL.md",
        ".agents/skills/y.md",
        ".mcp.json",
        "notes.txt",
    ];
    let calls: Vec<(String, String)> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("w{i}"), write(p)))
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "write_file", args.as_str()))
        .collect();
    let server = Server::start(vec![tool_calls(&refs), text(&["done"])]);
    let run = env.run(&server.base_url, &["-p", "go"], "");
    assert_eq!(run.code, Some(0), "{run:?}");
    let got = results(&server, 1);
    for (i, path) in paths.iter().enumerate().take(paths.len() - 1) {
        assert!(
            got[i].starts_with("Permission denied"),
            "{path}: {}",
            got[i]
        );
    }
    assert!(
        got[paths.len() - 1].starts_with("Created `notes.txt`"),
        "{got:?}"
    );
    assert_eq!(
        fs::read_to_string(env.work().join("docs/rules.md")).unwrap(),
        "be careful\n"
    );
}

/// Claude Code's permission rules in a project's `.claude/settings.json` apply with their
/// meaning: its denials always (they only narrow), its allowances only once the project is
/// trusted; a rule for a tool `new` does not have is said, naming the file.
#[test]
fn claude_code_permission_rules_apply_and_allowances_wait_for_trust() {
    let env = Env::new();
    fs::create_dir_all(env.work().join(".claude")).unwrap();
    fs::write(
        env.work().join(".claude/settings.json"),
        serde_json::json!({"permissions": {
            "allow": ["Bash(echo:*)", "WebFetch(domain:example.com)"],
            "deny": ["Read(./.env)", "Bash(curl:*)"]}})
        .to_string(),
    )
    .unwrap();
    fs::write(env.work().join(".env"), "SECRET=1\n").unwrap();
    let calls = || {
        tool_calls(&[
            ("a", "read_file", r#"{"filepath":".env"}"#),
            ("b", "bash", r#"{"command":"curl http://example.com"}"#),
            ("c", "bash", r#"{"command":"echo allowed"}"#),
        ])
    };
    for trusted in [false, true] {
        let server = Server::start(vec![calls(), text(&["done"])]);
        let mut args = vec!["--permission-mode", "strict"];
        if trusted {
            args.push("--trust-project");
        }
        let run = env.run(&server.base_url, &args, "go\n");
        assert_eq!(run.code, Some(0), "{run:?}");
        assert!(
            run.stderr.contains("permissions.allow in")
                && run.stderr.contains("`WebFetch` is no tool"),
            "{run:?}"
        );
        let results = results(&server, 1);
        assert!(!results[0].contains("SECRET"), "{results:?}");
        assert!(
            results[0].contains("Claude Code rule Read(./.env)"),
            "{results:?}"
        );
        assert!(
            results[1].contains("Claude Code rule Bash(curl:*)"),
            "{results:?}"
        );
        if trusted {
            assert!(results[2].contains("allowed"), "{results:?}");
        } else {
            assert!(
                run.stderr
                    .contains("allow rules of the project's .claude/settings.json are not trusted"),
                "{run:?}"
            );
            assert!(
                results[2].contains("needs the user's approval and the user could not be asked"),
                "{results:?}"
            );
        }
    }
}
