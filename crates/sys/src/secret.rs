//! The one secret policy: which variables of the environment hold a credential. Every program
//! started on the model's, a project's or the user's behalf (`bash`, hooks, MCP servers, an
//! entry's `headersHelper`) is started without them, an MCP entry that references one needs the
//! user's own yes, and memory cuts their values out of what it writes. One answer for all four,
//! so that a name hidden from one is hidden from every other. It lives here, under the engine,
//! so that the sandbox's spawner ([`crate::os_sandbox::OsSandbox::command`]) removes the same
//! variables as the engine's callers (`new_core::secret` is this module); those add the names
//! only the config knows (the provider keys, `hidden` below).
//!
//! A variable is a secret when its name is a provider key the config names (`hidden`), when
//! its name looks like a credential ([`is_secret_name`]: `*_KEY`, `*_TOKEN`, `*_PASS`, `*_PW`,
//! `*_PAT`, `*_DSN`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`, `*WEBHOOK*`, …, and the sockets and
//! displays that lead out: `SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`, …), or when its value
//! is a URL that carries a password ([`has_user_info`]: `postgres://u:pw@db`, `redis://:pw@h`).
//! Everything else (`PATH`, `HOME`, `LANG`, `TERM`, tool settings) is passed on: a command needs
//! it, and a list of what to keep would break the user's tools one by one. A variable an entry
//! sets on purpose in its own `env` is set after the removal.

use std::env;
use std::ffi::OsString;

/// Names that are no credential by their spelling but lead to a service outside: an agent's
/// socket, a terminal multiplexer, the session bus, a display, a ticket cache, a Docker daemon.
const WAYS_OUT: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "KRB5CCNAME",
    "DOCKER_HOST",
];

/// Endings of a credential's name (`STRIPE_KEY`, `DB_PASS`, `GH_PAT`, `SENTRY_DSN`, …).
const ENDINGS: &[&str] = &[
    "_KEY", "_KEY_ID", "_TOKEN", "_PASS", "_PW", "_PWD", "_PAT", "_DSN", "_AUTH", "_APIKEY",
];

/// Parts that make any name a credential's, wherever they stand.
const PARTS: &[&str] = &[
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "WEBHOOK",
    "APIKEY",
    "API_KEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
];

/// Whether a variable's name says it holds a credential or a way out (any case).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    WAYS_OUT.contains(&upper.as_str())
        || ["TOKEN", "KEY", "PAT", "DSN"].contains(&upper.as_str())
        || ENDINGS.iter().any(|e| upper.ends_with(e))
        || PARTS.iter().any(|p| upper.contains(p))
}

/// Whether a value is a URL with a password in it (`scheme://user:pw@host`, `scheme://:pw@host`),
/// or a user name long enough to be a token (`https://ghp_…@github.com`).
pub fn has_user_info(value: &str) -> bool {
    let Some((scheme, rest)) = value.split_once("://") else {
        return false;
    };
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((user_info, _host)) = authority.rsplit_once('@') else {
        return false;
    };
    match user_info.split_once(':') {
        Some((_, password)) => !password.is_empty(),
        None => user_info.len() >= 16,
    }
}

/// Whether the variable `name=value` is a secret: a provider key of the config (`hidden`), a
/// name that looks like a credential, or a value that carries one.
pub fn is_secret(name: &str, value: &str, hidden: &[String]) -> bool {
    hidden.iter().any(|h| h == name) || is_secret_name(name) || has_user_info(value)
}

/// The variables of this process that no program started on anyone's behalf may see (see the
/// module's words): removed from its environment before it starts.
pub fn secret_env(hidden: &[String]) -> Vec<OsString> {
    secret_names(env::vars_os(), hidden)
}

/// Of the variables `vars`, the names of those [`secret_env`] removes.
pub fn secret_names(
    vars: impl Iterator<Item = (OsString, OsString)>,
    hidden: &[String],
) -> Vec<OsString> {
    vars.filter(|(name, value)| {
        is_secret(&name.to_string_lossy(), &value.to_string_lossy(), hidden)
    })
    .map(|(name, _)| name)
    .collect()
}

/// Whether a variable an MCP entry references (`${NAME}`) needs the user's own yes: a provider
/// key, a name that looks like a credential, or one whose value here carries a password.
pub fn is_secret_reference(name: &str, hidden: &[String]) -> bool {
    let value = env::var(name).unwrap_or_default();
    is_secret(name, &value, hidden)
}

/// The shortest value cut out of memory: a shorter one would cut ordinary words.
const MIN_REDACTED: usize = 8;

/// The secret values of `vars` (8 characters or more), for memory's redaction:
/// those of the variables [`is_secret`] names, and the password inside a URL that carries one.
pub fn secret_values(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, value) in vars {
        if !is_secret(&name, &value, &[]) {
            continue;
        }
        if let Some(password) = url_password(&value)
            && password.len() >= MIN_REDACTED
        {
            out.push(password.to_string());
        }
        if value.len() >= MIN_REDACTED {
            out.push(value);
        }
    }
    out
}

/// The password of a URL with user info, if it has one.
fn url_password(value: &str) -> Option<&str> {
    let (_, rest) = value.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (user_info, _) = authority.rsplit_once('@')?;
    user_info.split_once(':').map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set in the copy of this test binary that [`this_process_s_own_environment_is_judged`]
    /// starts with an environment of its choosing.
    const CHILD: &str = "NEW_SECRET_POLICY_TEST_CHILD";

    /// `secret_env` and `is_secret_reference` read this process's own variables (names and
    /// values): judged in a copy of the test binary started with known ones, so that nothing
    /// here changes the environment other tests read.
    #[test]
    fn this_process_s_own_environment_is_judged() {
        if env::var_os(CHILD).is_some() {
            let hidden = ["MY_LLM_VAR".to_string()];
            let mut removed: Vec<String> = secret_env(&hidden)
                .into_iter()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| n.starts_with("NEWTEST_") || n == "MY_LLM_VAR")
                .collect();
            removed.sort();
            assert_eq!(
                removed,
                ["MY_LLM_VAR", "NEWTEST_DB_URL", "NEWTEST_GH_TOKEN"],
                "by the config's name, by the name's look, by a password in the value"
            );
            assert!(is_secret_reference("NEWTEST_DB_URL", &[]));
            assert!(!is_secret_reference("NEWTEST_DOCS_URL", &[]));
            return;
        }
        let output = Command::new(env::current_exe().unwrap())
            .args([
                "--exact",
                "secret::tests::this_process_s_own_environment_is_judged",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("MY_LLM_VAR", "sk-x")
            .env("NEWTEST_GH_TOKEN", "ghp_x")
            .env("NEWTEST_DB_URL", "postgres://u:pw@db")
            .env("NEWTEST_DOCS_URL", "https://example.com/a@b")
            .env("NEWTEST_PLAIN", "plain")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && said.contains("1 passed"),
            "the child's judgement failed: {said}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (OsString, OsString)> {
        list.iter()
            .map(|(n, v)| (OsString::from(n), OsString::from(v)))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// Issue 41 (4): the 16 credential-shaped variables of the attack are all secrets (11 of
    /// them passed before), and what commands need is not.
    #[test]
    fn the_attacks_credentials_are_all_secrets_and_what_commands_need_is_not() {
        let attack = [
            ("DATABASE_URL", "postgres://u:pw@db"),
            ("REDIS_URL", "redis://:pw@h"),
            ("STRIPE_KEY", "sk_live_x"),
            ("MYAPP_PRIVATE_KEY", "k"),
            ("DB_PASS", "p"),
            ("MY_SERVICE_PW", "p"),
            ("GH_PAT", "ghp_x"),
            ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1"),
            ("OPENAI_APIKEY", "sk"),
            ("GOOGLE_CREDENTIAL", "c"),
            (
                "SLACK_WEBHOOK_URL",
                "https://hooks.slack.com/services/T/B/X",
            ),
            ("GITHUB_TOKEN", "t"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("MYSQL_PASSWORD", "p"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
        ];
        let removed = secret_names(vars(&attack), &[]);
        let names: Vec<&str> = attack.iter().map(|(n, _)| *n).collect();
        assert_eq!(removed, names);
        let needed = [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/u"),
            ("LANG", "C.UTF-8"),
            ("TERM", "xterm-256color"),
            ("USER", "u"),
            ("SHELL", "/bin/bash"),
            ("PWD", "/w"),
            ("EDITOR", "vi"),
            ("CARGO_HOME", "/home/u/.cargo"),
            ("SSH_ASKPASS", "/usr/bin/ask"),
            ("KEYMAP", "us"),
            ("TOKENIZERS_PARALLELISM", "false"),
            ("MANPATH", "/usr/share/man"),
            ("PATH_KEYWORDS", "x"),
            ("HTTP_PROXY", "http://proxy:3128"),
            ("GIT_REMOTE", "ssh://git@github.com/o/r"),
            ("DOCS_URL", "https://example.com/a@b"),
            ("NOTE", "a://b"),
        ];
        assert_eq!(secret_names(vars(&needed), &[]), Vec::<OsString>::new());
    }

    #[test]
    fn names_are_judged_in_any_case_by_their_ending_their_parts_or_whole() {
        for secret in [
            "stripe_key",
            "Key",
            "TOKEN",
            "PAT",
            "DSN",
            "X_KEY_ID",
            "X_PWD",
            "NPM_CONFIG__AUTH",
            "MYAPIKEY_X",
            "X_API_KEY_FILE",
            "X_ACCESS_KEY_Y",
            "PRIVATE_KEY_PATH",
            "CLIENT_SECRET_B",
            "PASSWORDS",
            "PASSWD_X",
            "GPG_PASSPHRASE_X",
            "CREDENTIALS_DIR",
            "WEBHOOKS",
            "ssh_auth_sock",
            "SSH_AGENT_PID",
            "GPG_AGENT_INFO",
            "TMUX",
            "TMUX_PANE",
            "STY",
            "DBUS_SESSION_BUS_ADDRESS",
            "DISPLAY",
            "WAYLAND_DISPLAY",
            "XAUTHORITY",
            "KRB5CCNAME",
            "DOCKER_HOST",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in [
            "KEYS",
            "MONKEY",
            "PATH",
            "DSNX",
            "PATTERN",
            "TOKENS",
            "X_TOKENS",
            "PASS",
            "PW",
            "TMUX_X",
            "DISPLAY_X",
            "",
        ] {
            assert!(!is_secret_name(plain), "{plain}");
        }
    }

    #[test]
    fn a_url_carries_a_secret_when_it_has_a_password_or_a_token_for_a_user() {
        for secret in [
            "postgres://u:pw@db",
            "redis://:pw@h",
            "mongodb+srv://u:p@c.example/db?x=1",
            "https://ghp_0123456789abcdef@github.com/o/r",
            "amqp://u:p@h/vhost#f",
            "s3://k:s@bucket",
        ] {
            assert!(has_user_info(secret), "{secret}");
        }
        for plain in [
            "postgres://db/name",
            "ssh://git@github.com/o/r",
            "https://u:@h",
            "https://example.com/a@b:c",
            "https://example.com?a=b@c:d",
            "https://example.com#u:p@x",
            "not a url u:p@h",
            "://u:p@h",
            "ht tp://u:p@h",
            "a_b://u:p@h",
            "0123456789abcde@h",
            "https://0123456789abcde@h",
        ] {
            assert!(!has_user_info(plain), "{plain}");
        }
        // Sixteen characters of user name are a token's.
        assert!(has_user_info("https://0123456789abcdef@h"));
        // The last `@` ends the user info: a password may hold one.
        assert!(has_user_info("https://u:p@ss@h"));
        assert_eq!(url_password("https://u:p@ss@h/x"), Some("p@ss"));
    }

    /// A secret is a variable of the user's provider keys or one named like a credential; others
    /// are not.
    #[test]
    fn a_secret_reference_is_a_provider_key_or_a_credential_name() {
        let hidden = vec!["MY_LLM_VAR".to_string()];
        assert!(is_secret_reference("MY_LLM_VAR", &hidden));
        assert!(is_secret_reference("GITHUB_TOKEN", &hidden));
        assert!(is_secret_reference("GITHUB_TOKEN", &[]));
        assert!(!is_secret_reference("PATH", &hidden));
        assert!(!is_secret_reference("MY_LLM", &hidden));
        assert!(!is_secret_reference("HOME", &[]));
        assert!(is_secret("X", "redis://:pw@h", &[]));
        assert!(is_secret("MY_LLM_VAR", "plain", &hidden));
        assert!(!is_secret("X", "plain", &hidden));
    }

    #[test]
    fn provider_keys_are_not_passed_on() {
        // (The whole run, with keys set in `new`'s environment, is tests/it/trust.rs and
        // tests/it/sandbox.rs: no key reaches a command's `env`.)
        let removed = secret_names(
            vars(&[
                ("SOMEONE_API_KEY", "k"),
                ("LAB", "t"),
                ("HOME", "/h"),
                ("API_KEY_HINT", "h"),
            ]),
            &["LAB".to_string()],
        );
        assert_eq!(removed, ["SOMEONE_API_KEY", "LAB", "API_KEY_HINT"]);
    }

    /// Memory cuts out the values of the same variables, 8 characters or more, and the
    /// password inside a URL.
    #[test]
    fn memory_cuts_the_values_of_the_same_variables() {
        let values = secret_values(
            [
                ("DB_PASS", "hunter2-long"),
                ("SHORT_TOKEN", "1234567"),
                ("EIGHT_TOKEN", "12345678"),
                ("HOME", "/home/someone-long"),
                ("DATABASE_URL", "postgres://u:longpassword@db"),
                ("REDIS_URL", "redis://:short@h"),
                ("CACHE_URL", "redis://:12345678@h"),
            ]
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_string())),
        );
        assert_eq!(
            values,
            [
                "hunter2-long",
                "12345678",
                "longpassword",
                "postgres://u:longpassword@db",
                "redis://:short@h",
                "12345678",
                "redis://:12345678@h",
            ]
        );
        assert_eq!(url_password("redis://h"), None);
        assert_eq!(url_password("plain"), None);
    }
}
