//! Claude Code's hooks as written in its settings files (`~/.claude/settings.json`, a project's
//! `.claude/settings.json` and `.claude/settings.local.json`):
//! `{"hooks": {"PreToolUse": [{"matcher": "Bash|Write", "hooks": [{"type": "command",
//! "command": "…", "timeout": 60}]}]}}`. Such a hook gets the event in Claude Code's words: its
//! event names (`PreToolUse`), its tool names (`Bash`, `Write`, …) and its argument names
//! (`file_path`, absolute), so that scripts written for Claude Code test what they expect.

use std::mem;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Action, Entry, HookError};
use crate::layers::Origin;
use crate::tools::builtin::NAMES;
use crate::tools::permissions;
use crate::tools::permissions::Rule;
use crate::vocab;

/// One of Claude Code's permission rules that cannot be one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("`{rule}` has no closing `)`")]
    Unclosed { rule: String },
    #[error("`{tool}` is no tool of `new`'s; the rule does nothing here")]
    UnknownTool { tool: String },
    #[error("`{rule}` names a path outside the project, which the file tools refuse anyway")]
    OutsideProject { rule: String },
}

/// Claude Code's events and ours.
pub const EVENTS: &[(&str, &str)] = &[
    ("PreToolUse", "pre_tool_use"),
    ("PostToolUse", "post_tool_use"),
    ("UserPromptSubmit", "pre_message"),
    ("Stop", "post_message"),
    ("SessionStart", "session_start"),
    ("SessionEnd", "session_end"),
    ("PreCompact", "pre_compact"),
    ("SubagentStop", "subagent_stop"),
    ("Notification", "notification"),
];

/// Claude Code's events that have no counterpart here yet: said, never silently dropped.
/// (Claude Code 2.x's newer events included: a settings file written for it today has them.)
const UNSUPPORTED: &[&str] = &[
    "PermissionRequest",
    "PostToolUseFailure",
    "SubagentStart",
    "Setup",
];

/// Our tools by Claude Code's names.
const TOOLS: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("read_file", "Read"),
    ("write_file", "Write"),
    ("edit_file", "Edit"),
    ("list_files", "LS"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("agent", "Task"),
    ("use_skill", "Skill"),
];

/// Claude Code's name for one of our events.
pub fn event_name(ours: &str) -> &str {
    EVENTS
        .iter()
        .find(|(_, o)| *o == ours)
        .map_or(ours, |(c, _)| c)
}

/// Claude Code's name for one of our tools (an MCP tool keeps its `mcp__server__tool`).
pub fn tool_name(ours: &str) -> &str {
    TOOLS
        .iter()
        .find(|(o, _)| *o == ours)
        .map_or(ours, |(_, c)| c)
}

/// A tool's arguments as Claude Code names them: `file_path` (absolute) for our `filepath`,
/// `path` for `dirpath`, `timeout` in milliseconds, `-i` for `ignore_case`; the rest as they are.
pub fn tool_input(input: &Value, workdir: &Path) -> Value {
    let Value::Object(o) = input else {
        return input.clone();
    };
    let absolute = |v: &Value| match v.as_str() {
        Some(p) if !Path::new(p).is_absolute() => json!(workdir.join(p)),
        _ => v.clone(),
    };
    let mut out = Map::new();
    for (k, v) in o {
        let (key, value) = match k.as_str() {
            "filepath" => ("file_path", absolute(v)),
            "dirpath" => ("path", absolute(v)),
            "path" => ("path", absolute(v)),
            "timeout_seconds" => (
                "timeout",
                v.as_f64().map_or(v.clone(), |s| json!((s * 1000.0) as u64)),
            ),
            "ignore_case" => ("-i", v.clone()),
            other => (other, v.clone()),
        };
        out.insert(key.to_string(), value);
    }
    Value::Object(out)
}

/// A tool's result as Claude Code gives it to a `PostToolUse` hook: an object, not a sentence.
/// `Write`: `type` (`create` or `update`), `filePath`, `content`, `structuredPatch`; `Edit`:
/// `filePath`, `oldString`, `newString`, `replaceAll`, `structuredPatch`; `Bash`: `stdout`,
/// `stderr`, `interrupted`. `input` is the call's arguments in Claude Code's words
/// ([`tool_input`]), `diff` the unified diff of a write or an edit. Other tools' results stay
/// their text.
pub fn tool_response(tool: &str, input: &Value, content: &str, diff: Option<&str>) -> Value {
    let arg = |k: &str| input.get(k).cloned().unwrap_or(Value::Null);
    match tool {
        "write_file" | "edit_file" if !content.starts_with("Error:") => {
            let diff = diff.unwrap_or_default();
            let mut o = Map::new();
            o.insert("filePath".into(), arg("file_path"));
            if tool == "write_file" {
                let created = diff.lines().next().is_some_and(|l| l == "--- /dev/null");
                o.insert(
                    "type".into(),
                    json!(if created { "create" } else { "update" }),
                );
                o.insert("content".into(), arg("content"));
            } else {
                o.insert("oldString".into(), arg("old_string"));
                o.insert("newString".into(), arg("new_string"));
                o.insert(
                    "replaceAll".into(),
                    json!(input.get("replace_all").and_then(Value::as_bool) == Some(true)),
                );
                o.insert("userModified".into(), json!(false));
            }
            o.insert("structuredPatch".into(), structured_patch(diff));
            Value::Object(o)
        }
        "bash" => {
            // The report is `Exit code: N` (or how it ended), then `stdout:` and `stderr:`
            // sections, each only when it has text.
            let (head, rest) = content.split_once('\n').unwrap_or((content, ""));
            let interrupted = head.starts_with("Timed out") || head.starts_with("Killed");
            let (mut stdout, mut stderr) = ("", "");
            if let Some(out) = rest.strip_prefix("stdout:\n") {
                match out.split_once("\nstderr:\n") {
                    Some((o, e)) => (stdout, stderr) = (o, e),
                    None => stdout = out,
                }
            } else if let Some(err) = rest.strip_prefix("stderr:\n") {
                stderr = err;
            }
            json!({
                "stdout": stdout.trim_end_matches('\n'),
                "stderr": stderr.trim_end_matches('\n'),
                "interrupted": interrupted,
                "isImage": false,
            })
        }
        _ => json!(content),
    }
}

/// The hunks of a unified diff as Claude Code's `structuredPatch`: `oldStart`, `oldLines`,
/// `newStart`, `newLines` and the hunk's `lines` (with their ` `, `-`, `+`).
fn structured_patch(diff: &str) -> Value {
    let mut hunks: Vec<Value> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let mut head: Option<[u64; 4]> = None;
    let close = |head: Option<[u64; 4]>, lines: &mut Vec<String>, hunks: &mut Vec<Value>| {
        if let Some([os, ol, ns, nl]) = head {
            hunks.push(
                json!({"oldStart": os, "oldLines": ol, "newStart": ns, "newLines": nl,
                "lines": mem::take(lines)}),
            );
        }
    };
    for line in diff.lines() {
        if let Some(spec) = line.strip_prefix("@@ ") {
            close(head, &mut lines, &mut hunks);
            let range = |r: Option<&str>| -> (u64, u64) {
                let r = r.unwrap_or_default();
                let (start, len) = r.split_once(',').unwrap_or((r, "1"));
                (start.parse().unwrap_or(0), len.parse().unwrap_or(1))
            };
            let mut words = spec.split_whitespace();
            let (os, ol) = range(words.next().and_then(|w| w.strip_prefix('-')));
            let (ns, nl) = range(words.next().and_then(|w| w.strip_prefix('+')));
            head = Some([os, ol, ns, nl]);
        } else if head.is_some() && !line.starts_with('\\') {
            lines.push(line.to_string());
        }
    }
    close(head, &mut lines, &mut hunks);
    Value::Array(hunks)
}

/// What a matcher is: Claude Code's tool-name pattern (`Bash`, `Edit|Write`, `mcp__.*`; empty or
/// `*` for every tool), anchored at both ends.
pub fn matcher(pattern: &str) -> Result<Option<grep_regex::RegexMatcher>, HookError> {
    let pattern = pattern.trim();
    if pattern.is_empty() || pattern == "*" {
        return Ok(None);
    }
    grep_regex::RegexMatcher::new(&format!("^(?:{pattern})$"))
        .map(Some)
        .map_err(|e| HookError::BadMatcher {
            pattern: pattern.to_string(),
            reason: e.to_string(),
        })
}

/// The entries of one settings file's `hooks` object; what cannot be used is said in `warnings`,
/// naming the file, the event and the entry.
pub fn entries(
    hooks: &Value,
    path: &Path,
    origin: Origin,
    warnings: &mut Vec<String>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    let Some(events) = hooks.as_object() else {
        warnings.push(format!(
            "`hooks` in {} must be an object; ignored",
            path.display()
        ));
        return out;
    };
    let short = short_name(path);
    for (event, groups) in events {
        let Some(ours) = EVENTS.iter().find(|(c, _)| c == event).map(|(_, o)| *o) else {
            let why = if UNSUPPORTED.contains(&event.as_str()) {
                "is not supported yet"
            } else {
                "is not an event of Claude Code's"
            };
            warnings.push(format!(
                "hooks.{event} in {}: the event {why}; these hooks do not run",
                path.display()
            ));
            continue;
        };
        let Some(groups) = groups.as_array() else {
            warnings.push(format!(
                "hooks.{event} in {} must be a list; ignored",
                path.display()
            ));
            continue;
        };
        for (i, group) in groups.iter().enumerate() {
            let at = format!("hooks.{event}[{i}] in {}", path.display());
            let pattern = group.get("matcher").and_then(Value::as_str).unwrap_or("");
            if let Err(why) = matcher(pattern) {
                warnings.push(format!("{at}: {why}; left out"));
                continue;
            }
            let Some(list) = group.get("hooks").and_then(Value::as_array) else {
                warnings.push(format!("{at}: `hooks` must be a list; left out"));
                continue;
            };
            for (j, hook) in list.iter().enumerate() {
                let kind = hook
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let Some(command) = hook.get("command").and_then(Value::as_str) else {
                    warnings.push(format!(
                        "{at}.hooks[{j}]: only `command` hooks are run here (this one is {kind:?}); left out"
                    ));
                    continue;
                };
                if kind != "command" {
                    warnings.push(format!(
                        "{at}.hooks[{j}]: only `command` hooks are run here (this one is {kind:?}); left out"
                    ));
                    continue;
                }
                // Claude Code's timeout is in seconds (60 when not given).
                let timeout = hook
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .filter(|s| *s > 0.0)
                    .map_or(Duration::from_secs(60), Duration::from_secs_f64);
                out.push(Entry {
                    name: format!("{short}:{event}[{i}][{j}]"),
                    event: ours.to_string(),
                    condition: None,
                    action: Action::Command {
                        command: command.to_string(),
                        working_dir: None,
                        env: Default::default(),
                        timeout,
                    },
                    run_async: false,
                    once: false,
                    origin,
                    sandbox: None,
                    network: false,
                    matcher: Some(pattern.to_string()),
                });
            }
        }
    }
    out
}

/// `settings.json`, `settings.local.json`, or `~/.claude/settings.json` shortly, for names.
fn short_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let home = dirs::home_dir().map(|h| h.join(".claude"));
    match path.parent() {
        Some(parent) if Some(parent.to_path_buf()) == home => format!("~/.claude/{file}"),
        _ => format!(".claude/{file}"),
    }
}

/// The settings files Claude Code reads hooks from, farthest first: the user's, then the
/// project's shared one, then its local one.
pub fn files(workdir: &Path) -> Vec<(Origin, PathBuf)> {
    let mut out = Vec::new();
    if let Some(home) = dirs::home_dir() {
        out.push((Origin::User, home.join(".claude").join("settings.json")));
    }
    for name in ["settings.json", "settings.local.json"] {
        out.push((Origin::Project, workdir.join(".claude").join(name)));
    }
    out
}

/// One of Claude Code's permission rules (`Bash(npm run test:*)`, `Read(./src/**)`, `Edit`,
/// `mcp__github__*`) as ours: the tool through the alias table, the command pattern (`x:*` is
/// `x` and anything after it) or the path glob relative to WORKDIR. Err: why it cannot be one
/// (an unknown tool, a path outside the project, which the file tools refuse anyway).
pub fn permission_rule(text: &str, action: permissions::Action) -> Result<Rule, RuleError> {
    let text = text.trim();
    let (tool, spec) = match text.split_once('(') {
        Some((tool, rest)) => {
            let spec = rest.strip_suffix(')').ok_or_else(|| RuleError::Unclosed {
                rule: text.to_string(),
            })?;
            (tool.trim(), Some(spec.trim()))
        }
        None => (text, None),
    };
    let ours = vocab::canonical(tool);
    let ours = (ours != tool || tool.starts_with("mcp__") || NAMES.contains(&tool))
        .then(|| ours.to_string())
        .ok_or_else(|| RuleError::UnknownTool {
            tool: tool.to_string(),
        })?;
    let pattern = match spec.filter(|s| !s.is_empty() && *s != "*") {
        None => None,
        Some(spec) if ours == "bash" => Some(match spec.strip_suffix(":*") {
            Some(prefix) => format!("{} *", prefix.trim()),
            None => spec.to_string(),
        }),
        Some(spec) if spec.starts_with("//") || spec.starts_with("~/") => {
            return Err(RuleError::OutsideProject {
                rule: text.to_string(),
            });
        }
        Some(spec) => Some(
            spec.trim_start_matches("./")
                .trim_start_matches('/')
                .to_string(),
        ),
    };
    Ok(Rule {
        tool: ours,
        pattern,
        action,
        reason: Some(format!("Claude Code rule {text}")),
    })
}

/// The rules of a settings file's `permissions` (`{"allow": […], "ask": […], "deny": […]}`),
/// denials first, then questions, then allowances (Claude Code's precedence); what cannot be a
/// rule is said in `warnings`, naming the file and the rule.
pub fn permission_rules(permissions: &Value, path: &Path, warnings: &mut Vec<String>) -> Vec<Rule> {
    use crate::tools::permissions::Action;
    let mut out = Vec::new();
    for (key, action) in [
        ("deny", Action::Deny),
        ("ask", Action::Ask),
        ("allow", Action::Allow),
    ] {
        let Some(list) = permissions.get(key) else {
            continue;
        };
        let Some(list) = list.as_array() else {
            warnings.push(format!(
                "permissions.{key} in {} must be a list; ignored",
                path.display()
            ));
            continue;
        };
        for rule in list {
            let Some(text) = rule.as_str() else {
                warnings.push(format!(
                    "permissions.{key} in {}: {rule} is not a rule; ignored",
                    path.display()
                ));
                continue;
            };
            match permission_rule(text, action) {
                Ok(rule) => out.push(rule),
                Err(why) => {
                    warnings.push(format!("permissions.{key} in {}: {why}", path.display()))
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::Origin;

    #[test]
    fn names_and_arguments_are_claude_code_s() {
        assert_eq!(tool_name("bash"), "Bash");
        assert_eq!(tool_name("edit_file"), "Edit");
        assert_eq!(tool_name("mcp__x__y"), "mcp__x__y");
        assert_eq!(event_name("pre_message"), "UserPromptSubmit");
        let input = tool_input(
            &json!({"filepath": "src/a.rs", "content": "x", "timeout_seconds": 2}),
            Path::new("/w"),
        );
        assert_eq!(
            input,
            json!({"file_path": "/w/src/a.rs", "content": "x", "timeout": 2000})
        );
        assert_eq!(
            tool_input(&json!({"filepath": "/abs/b"}), Path::new("/w")),
            json!({"file_path": "/abs/b"})
        );
    }

    #[test]
    fn claude_code_s_permission_rules_become_ours() {
        use crate::tools::permissions::Action;
        let rule = |t: &str| permission_rule(t, Action::Allow).map(|r| (r.tool, r.pattern));
        assert_eq!(
            rule("Bash(npm run test:*)"),
            Ok(("bash".into(), Some("npm run test *".into())))
        );
        assert_eq!(
            rule("Bash(git diff)"),
            Ok(("bash".into(), Some("git diff".into())))
        );
        assert_eq!(
            rule("Read(./src/**)"),
            Ok(("read_file".into(), Some("src/**".into())))
        );
        assert_eq!(rule("Edit"), Ok(("edit_file".into(), None)));
        assert_eq!(rule("mcp__gh__*"), Ok(("mcp__gh__*".into(), None)));
        assert_eq!(
            rule("WebFetch(domain:x.org)"),
            Err(RuleError::UnknownTool {
                tool: "WebFetch".into()
            })
        );
        assert_eq!(
            rule("Read(~/.ssh/**)"),
            Err(RuleError::OutsideProject {
                rule: "Read(~/.ssh/**)".into()
            })
        );
        assert_eq!(
            rule("Bash(ls"),
            Err(RuleError::Unclosed {
                rule: "Bash(ls".into()
            })
        );
        let mut warnings = Vec::new();
        let rules = permission_rules(
            &json!({"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)", "WebFetch"], "ask": ["Write"]}),
            Path::new("/p/.claude/settings.json"),
            &mut warnings,
        );
        let actions: Vec<Action> = rules.iter().map(|r| r.action).collect();
        assert_eq!(actions, [Action::Deny, Action::Ask, Action::Allow]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("WebFetch") && warnings[0].contains("settings.json"));
    }

    #[test]
    fn matchers_are_anchored_patterns_and_empty_matches_all() {
        use grep_matcher::Matcher;
        let m = matcher("Edit|Write").unwrap().unwrap();
        assert!(m.is_match(b"Write").unwrap());
        assert!(!m.is_match(b"WriteFile").unwrap());
        assert!(!m.is_match(b"Bash").unwrap());
        assert!(matcher("").unwrap().is_none());
        assert!(matcher("*").unwrap().is_none());
        assert!(matches!(
            matcher(" ( "),
            Err(HookError::BadMatcher { pattern, .. }) if pattern == "("
        ));
    }

    #[test]
    fn a_settings_file_s_hooks_become_entries_and_what_cannot_run_is_said() {
        let mut warnings = Vec::new();
        let hooks = json!({
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 5}]}],
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}],
            "PostToolUse": [{"matcher": "(", "hooks": []}]
        });
        let got = entries(
            &hooks,
            Path::new("/p/.claude/settings.json"),
            Origin::Project,
            &mut warnings,
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].event, "pre_tool_use");
        assert_eq!(got[0].matcher.as_deref(), Some("Bash"));
        assert_eq!(
            got[0].action,
            Action::Command {
                command: "guard.sh".into(),
                working_dir: None,
                env: Default::default(),
                timeout: Duration::from_secs(5)
            }
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("PermissionRequest") && w.contains("not supported yet"))
        );
        assert!(warnings.iter().any(|w| w.contains("only `command` hooks")));
        assert!(warnings.iter().any(|w| w.contains("is not a pattern")));
    }

    /// Claude Code 2.x's newer events, in a settings file written for it: each said as not
    /// supported yet (never as "not an event of Claude Code's"), the rest of the file used.
    #[test]
    fn claude_code_s_newer_events_are_said_as_not_supported_yet() {
        let mut warnings = Vec::new();
        let hook = json!([{"hooks": [{"type": "command", "command": "log.sh"}]}]);
        let hooks = json!({"PostToolUseFailure": hook, "SubagentStart": hook, "Setup": hook,
            "PermissionRequest": hook, "Stop": hook, "Nonsense": hook});
        let got = entries(
            &hooks,
            Path::new("/p/.claude/settings.json"),
            Origin::User,
            &mut warnings,
        );
        assert_eq!(got.len(), 1);
        for event in [
            "PostToolUseFailure",
            "SubagentStart",
            "Setup",
            "PermissionRequest",
        ] {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains(event) && w.contains("not supported yet")),
                "{event}: {warnings:?}"
            );
        }
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("Nonsense") && w.contains("not an event of Claude Code's"))
        );
    }

    /// `tool_response` in the shapes Claude Code sends: formatter hooks read
    /// `.tool_response.filePath`, Bash hooks `.tool_response.stdout`.
    #[test]
    fn tool_responses_are_claude_code_s_objects() {
        let w = Path::new("/w");
        let write = tool_input(&json!({"filepath": "a.go", "content": "x\ny\n"}), w);
        let diff = "--- /dev/null\n+++ b/a.go\n@@ -0,0 +1,2 @@\n+x\n+y\n";
        let got = tool_response("write_file", &write, "Wrote 2 lines", Some(diff));
        assert_eq!(got["filePath"], w.join("a.go").display().to_string());
        assert_eq!(got["type"], "create");
        assert_eq!(got["content"], "x\ny\n");
        assert_eq!(
            got["structuredPatch"],
            json!([{"oldStart": 0, "oldLines": 0, "newStart": 1, "newLines": 2,
                "lines": ["+x", "+y"]}])
        );
        let edit = tool_input(
            &json!({"filepath": "/w/b.rs", "old_string": "a", "new_string": "b"}),
            w,
        );
        let diff = "--- a/b.rs\n+++ b/b.rs\n@@ -3 +3 @@\n-a\n+b\n";
        let got = tool_response("edit_file", &edit, "Edited", Some(diff));
        assert_eq!(
            (&got["filePath"], &got["oldString"], &got["newString"]),
            (&json!("/w/b.rs"), &json!("a"), &json!("b"))
        );
        assert_eq!(got["replaceAll"], false);
        assert_eq!(got["structuredPatch"][0]["oldStart"], 3);
        assert_eq!(got["structuredPatch"][0]["oldLines"], 1);
        let got = tool_response(
            "bash",
            &json!({"command": "ls"}),
            "Exit code: 1\nstdout:\na\nb\nstderr:\noops\n",
            None,
        );
        assert_eq!(
            got,
            json!({"stdout": "a\nb", "stderr": "oops", "interrupted": false, "isImage": false})
        );
        let got = tool_response(
            "bash",
            &json!({}),
            "Timed out after 2 s; …\nstderr:\nx\n",
            None,
        );
        assert_eq!(
            (&got["stdout"], &got["stderr"], &got["interrupted"]),
            (&json!(""), &json!("x"), &json!(true))
        );
        // A failed write is no file written: its text, as other tools' results.
        assert_eq!(
            tool_response("write_file", &write, "Error: no", None),
            json!("Error: no")
        );
        assert_eq!(
            tool_response("grep", &json!({}), "3 matches", None),
            json!("3 matches")
        );
    }
}
