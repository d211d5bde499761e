//! The session's configuration in words, for the model: the `config-management` skill's current
//! values and the system prompt's one line each on hooks and MCP servers. Nothing secret is
//! said: keys, header and environment values, a URL's query and a command's arguments stay out.

use std::fmt::Write as _;

use super::Config;
use crate::escape;
use crate::layers::Origin;
use crate::mcp::Transport;
use std::collections::BTreeMap;

/// A URL as `scheme://host:port`, with `/…` for a path: user information, a path (where some
/// services put a token), a query and a fragment are left out; what does not parse is hidden.
fn plain_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) if u.host_str().is_some() => {
            let mut out = format!("{}://{}", u.scheme(), u.host_str().unwrap_or_default());
            if let Some(port) = u.port() {
                out.push_str(&format!(":{port}"));
            }
            if u.path() != "/" && !u.path().is_empty() {
                out.push_str("/…");
            }
            out
        }
        _ => "(a URL that does not parse; not shown)".to_string(),
    }
}

/// A name from a config file (a project's may be hostile) as the text shows it.
fn safe(name: &str) -> String {
    escape::code_span_safe(name, 200)
}

impl Config {
    /// The files read and the values in force, as `config-management` shows them.
    pub fn describe(&self) -> String {
        let mut t = String::new();
        t.push_str("## Files read (nearest first)\n\n");
        if self.files.is_empty() {
            t.push_str("- none: every value is a default, a flag or an environment variable\n");
        }
        for f in &self.files {
            let trust = if self.project_files.contains(f) {
                if self.project_trusted {
                    " (the project's, trusted)"
                } else {
                    " (the project's, not trusted: what it would widen is ignored)"
                }
            } else {
                ""
            };
            let _ = writeln!(t, "- {}{trust}", f.display());
        }
        let p = &self.provider;
        let key = if p.api_key.is_some() {
            format!(
                "set (from `{}` or a config file; never shown)",
                p.api_key_var
            )
        } else if p.key_required {
            format!("missing: set `{}`", p.api_key_var)
        } else {
            "not needed".to_string()
        };
        let _ = write!(
            t,
            "\n## Values in force\n\n\
             - provider: `{}` ({:?} protocol), base URL {} (`{}` overrides it), key {key}\n\
             - model: `{}`; max_tokens {}; connect_timeout_secs {}, idle_timeout_secs {}; max_retries {}\n\
             - lang: {:?}; render: {}\n\
             - max_rounds: {}; bash timeout: {} s\n\
             - permission mode: {}; tools offered: {}\n",
            p.name,
            p.kind,
            plain_url(&p.base_url),
            p.base_url_var,
            self.model,
            p.max_tokens,
            p.connect_timeout.as_secs(),
            p.idle_timeout.as_secs(),
            p.retry.max_retries,
            self.lang,
            self.render,
            self.max_rounds,
            self.bash_timeout.as_secs(),
            self.permission_mode.as_str(),
            if self.tools.is_empty() {
                "all".to_string()
            } else {
                self.tools.join(", ")
            },
        );
        let rules: Vec<String> = self
            .project_rules
            .iter()
            .map(|r| format!("project: {}", safe(&r.describe())))
            .chain(
                self.user_rules
                    .iter()
                    .map(|r| format!("user: {}", safe(&r.describe()))),
            )
            .collect();
        if rules.is_empty() {
            t.push_str("- permission rules: none\n");
        } else {
            let _ = writeln!(t, "- permission rules: {}", rules.join("; "));
        }
        let c = &self.context;
        let _ = writeln!(
            t,
            "- context: window {}; compaction {} (auto_trigger_margin {}, keep_recent_tokens {}, manual_target_margin {}); context_safety_margin {}",
            c.window
                .map_or("from the server or the model family".to_string(), |w| w
                    .to_string()),
            if c.enabled { "on" } else { "off" },
            c.auto_trigger_margin,
            c.keep_recent_tokens,
            c.manual_target_margin
                .map_or("the automatic margin".to_string(), |m| m.to_string()),
            c.safety_margin,
        );
        let _ = writeln!(
            t,
            "- skills: on demand {}, max_skill_size_bytes {}; memory {}; checkpoints {}; sandbox {}",
            self.skill.on_demand,
            self.skill.max_bytes,
            if self.memory.enabled { "on" } else { "off" },
            if self.checkpoints.enabled {
                "on"
            } else {
                "off"
            },
            if self.sandbox.enabled { "on" } else { "off" },
        );
        let s = &self.subagent;
        let _ = writeln!(
            t,
            "- subagents: {}; global_denied_tools {:?}; background_allowed_tools {:?}; auto_continue {}",
            if s.enabled { "on" } else { "off" },
            s.global_denied_tools,
            s.background_allowed_tools,
            s.auto_continue,
        );
        t.push_str("\n## MCP servers\n\n");
        if self.mcp.servers.is_empty() {
            t.push_str("- none configured\n");
        }
        for server in &self.mcp.servers {
            let how = match &server.transport {
                Transport::Stdio {
                    command, args, env, ..
                } => {
                    let program = safe(command.rsplit('/').next().unwrap_or(command));
                    let mut how = format!("stdio, runs `{program}` with {} arguments", args.len());
                    if !env.is_empty() {
                        let names: Vec<String> = env.keys().map(|k| safe(k)).collect();
                        let _ = write!(how, ", environment {}", names.join(", "));
                    }
                    how
                }
                Transport::Http { url, headers, .. } => {
                    let mut how = format!("HTTP, {}", plain_url(url));
                    if !headers.is_empty() {
                        let names: Vec<String> = headers.keys().map(|k| safe(k)).collect();
                        let _ = write!(how, ", headers {}", names.join(", "));
                    }
                    how
                }
            };
            let state = if server.disabled { ", disabled" } else { "" };
            let trust = if server.origin == Origin::Project && !self.mcp_trusted {
                ", not trusted yet (not started)"
            } else {
                ""
            };
            let _ = writeln!(
                t,
                "- `{}` ({}'s): {how}{state}{trust}",
                server.name,
                server.origin.label()
            );
        }
        t.push_str("\n## Hooks\n\n");
        if !self.hooks.enabled {
            t.push_str("- hooks are off (`hook.enabled` is false)\n");
        } else if self.hooks.entries.is_empty() {
            t.push_str("- none configured\n");
        }
        if self.hooks.enabled {
            for e in &self.hooks.entries {
                let trust = if e.origin == Origin::Project && !self.hooks_trusted {
                    ", not trusted yet (does not run)"
                } else {
                    ""
                };
                let _ = writeln!(
                    t,
                    "- `{}` on `{}` ({}'s): {} action{trust}",
                    safe(&e.name),
                    e.event,
                    e.origin.label(),
                    e.action.kind()
                );
            }
        }
        t
    }

    /// One line on the hooks and one on the MCP servers in force, for the system prompt (None when
    /// there are neither).
    pub fn prompt_lines(&self) -> Option<String> {
        let mut lines = Vec::new();
        let servers: Vec<String> = self
            .mcp
            .servers
            .iter()
            .filter(|s| !s.disabled && (s.origin == Origin::User || self.mcp_trusted))
            .map(|s| s.name.clone())
            .collect();
        if !servers.is_empty() {
            lines.push(format!(
                "MCP servers configured: {} (their tools are named mcp__<server>__<tool>; `/mcp` shows them).",
                servers.join(", ")
            ));
        }
        if self.hooks.enabled {
            let mut events: BTreeMap<&str, usize> = Default::default();
            for e in &self.hooks.entries {
                if e.origin == Origin::User || self.hooks_trusted {
                    *events.entry(e.event.as_str()).or_default() += 1;
                }
            }
            if !events.is_empty() {
                let list: Vec<String> = events
                    .iter()
                    .map(|(event, n)| format!("{event} ({n})"))
                    .collect();
                lines.push(format!(
                    "Hooks configured (they run on these events and may add context or block a call): {}.",
                    list.join(", ")
                ));
            }
        }
        (!lines.is_empty()).then(|| format!("\n\n## Configuration\n\n{}", lines.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::plain_url;

    #[test]
    fn urls_lose_their_query_fragment_and_user_information() {
        assert_eq!(
            plain_url("https://u:secret@host.example/mcp?token=abc#x"),
            "https://host.example/…"
        );
        // Odd forms never show the password, whatever the parser makes of them.
        for odd in [
            "https://me:SECRET?PW@h.example/",
            "https://me:SECRET/PW@h.example/x",
        ] {
            let shown = plain_url(odd);
            assert!(!shown.contains("SECRET"), "{shown}");
        }
        assert_eq!(plain_url("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(
            plain_url("https://hooks.example/s/SECRET-IN-PATH/mcp"),
            "https://hooks.example/…"
        );
        assert!(plain_url("sk-not-a-url").contains("not shown"));
    }
}
