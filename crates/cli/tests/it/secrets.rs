//! Issue 41 (4, 12) through the binary: the credentials of `new`'s environment reach no command
//! the model runs, with the sandbox or without; hard limits see what a shell and xargs are fed.

use crate::support::*;
use serde_json::json;
use std::fs;
use std::path::PathBuf;

/// The 16 credential-shaped variables of the fourth attack (11 of them passed before).
const CREDENTIALS: [(&str, &str); 16] = [
    ("DATABASE_URL", "postgres://u:pw-41-a@db"),
    ("REDIS_URL", "redis://:pw-41-b@h"),
    ("STRIPE_KEY", "leak-41-c"),
    ("MYAPP_PRIVATE_KEY", "leak-41-d"),
    ("DB_PASS", "leak-41-e"),
    ("MY_SERVICE_PW", "leak-41-f"),
    ("GH_PAT", "leak-41-g"),
    ("SENTRY_DSN", "https://leak-41-h@o1.ingest.sentry.io/1"),
    ("OPENAI_APIKEY", "leak-41-i"),
    ("GOOGLE_CREDENTIAL", "leak-41-j"),
    (
        "SLACK_WEBHOOK_URL",
        "https://hooks.slack.com/services/leak-41-k",
    ),
    ("GITHUB_TOKEN", "leak-41-l"),
    ("AWS_SECRET_ACCESS_KEY", "leak-41-m"),
    ("MYSQL_PASSWORD", "leak-41-n"),
    ("SOME_SECRET", "leak-41-o"),
    ("OPENAI_API_KEY", "sk-leak-41-p"),
];

/// The attack as written: `env` run by the model, in the sandbox and without it, with the 16
/// variables set in `new`'s environment: none of their values comes back, and what commands
/// need (PATH, HOME, LANG, TERM) does.
#[test]
fn credentials_in_the_environment_reach_no_command_with_or_without_the_sandbox() {
    for sandbox in [true, false] {
        let env = Env::new();
        env.write_config(
            &json!({"retry_initial_ms": 5, "sandbox": {"enabled": sandbox},
                "permissions": [{"tool": "bash", "action": "allow"}]})
            .to_string(),
        );
        let server = Server::start(vec![
            tool_calls(&[("c1", "bash", &json!({"command": "env"}).to_string())]),
            text(&["done"]),
        ]);
        let mut cmd = env.command(&server.base_url);
        cmd.arg(env.work())
            .arg("default")
            .arg(env.data())
            .args(["-p", "print the environment"])
            .env("TERM", "xterm-41");
        for (name, value) in CREDENTIALS {
            cmd.env(name, value);
        }
        let run = run_with_stdin(cmd, "");
        assert_eq!(run.code, Some(0), "{run:?}");
        let result = results(&server, 1).join("\n");
        assert!(result.contains("PATH="), "sandbox {sandbox}: {result}");
        assert!(result.contains("HOME="), "sandbox {sandbox}: {result}");
        assert!(result.contains("LANG=C"), "sandbox {sandbox}: {result}");
        assert!(
            result.contains("TERM=xterm-41"),
            "sandbox {sandbox}: {result}"
        );
        for (name, _) in CREDENTIALS {
            assert!(
                !result.contains(&format!("{name}=")),
                "sandbox {sandbox}: {name} passed: {result}"
            );
        }
        assert!(!result.contains("leak-41"), "sandbox {sandbox}: {result}");
        assert!(!result.contains("pw-41"), "sandbox {sandbox}: {result}");
    }
}

/// The same 16 variables reach no hook (run outside the command sandbox, or inside it when its
/// entry asks) and no stdio MCP server: one policy for every program `new` starts, not one for
/// `bash` alone. Each program writes its whole environment into WORKDIR as it starts.
#[test]
fn credentials_in_the_environment_reach_no_hook_and_no_mcp_server() {
    let env = Env::new();
    let work = env.work().canonicalize().unwrap();
    let seen = |name: &str| work.join(format!("{name}-env.txt"));
    let fake = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures_mcp/fake_mcp.py");
    let dump = |name: &str| format!("env > {}", seen(name).display());
    env.write_config(
        &json!({"retry_initial_ms": 5,
            "hook": {"entries": [
                {"name": "plain", "event": "program_start", "action": {"command": dump("hook")}},
                {"name": "boxed", "event": "program_start", "sandbox": true,
                 "action": {"command": dump("boxed-hook")}}]},
            "mcp": {"servers": [{"name": "dumper", "command": "sh",
                "args": ["-c", format!("{}; exec python3 {}", dump("server"), fake.display())]}]}})
        .to_string(),
    );
    let server = Server::start(vec![text(&["done"])]);
    let mut cmd = env.command(&server.base_url);
    cmd.arg(&work).arg("default").arg(env.data());
    for (name, value) in CREDENTIALS {
        cmd.env(name, value);
    }
    let run = run_with_stdin(cmd, "hello\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    let mut leaks = Vec::new();
    for program in ["hook", "boxed-hook", "server"] {
        let got = fs::read_to_string(seen(program))
            .unwrap_or_else(|e| panic!("{program} did not run ({e}): {run:?}"));
        assert!(got.contains("PATH="), "{program}: {got}");
        for (name, value) in CREDENTIALS {
            if got.contains(&format!("{name}=")) || got.contains(value) {
                leaks.push(format!("{program}: {name}"));
            }
        }
    }
    assert_eq!(leaks, Vec::<String>::new(), "{run:?}");
}

/// The attack as written: the three spellings pass no mode, not even `--permission-mode
/// permissive` with every command allowed; nothing runs.
#[test]
fn here_strings_and_what_xargs_is_fed_are_held_by_the_hard_limits() {
    let env = Env::new();
    env.write_config(
        r#"{"retry_initial_ms": 5, "sandbox": {"enabled": false}, "permissions": [{"tool": "*", "action": "allow"}]}"#,
    );
    let attacks = [
        "bash <<< 'rm -rf /'",
        "xargs rm -rf <<< /",
        "echo / | xargs rm -rf",
    ];
    let mut replies: Vec<Reply> = attacks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            tool_calls(&[(
                &format!("c{i}"),
                "bash",
                &json!({ "command": c }).to_string(),
            )])
        })
        .collect();
    replies.push(text(&["done"]));
    let server = Server::start(replies);
    let run = env.run(
        &server.base_url,
        &["--permission-mode", "permissive", "-p", "clean up"],
        "",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    for (i, attack) in attacks.iter().enumerate() {
        let result = last_result(&server.requests()[i + 1]);
        assert!(
            result.contains("blocked by a hard limit"),
            "{attack}: {result}"
        );
    }
}
