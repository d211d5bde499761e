//! Hooks: the user's programs run at points of the loop (CodePilot's `hook` section), with Claude
//! Code's command protocol so that existing hook scripts work: the event as JSON on stdin
//! (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, and per event `prompt`,
//! `tool_name`, `tool_input`, `tool_response`), `TOOL_INPUT_<FIELD>` variables, exit code 2 or a
//! JSON `{"decision": "block", "reason": …}` to block, `permissionDecision` to answer a permission
//! question. Any other failure, a timeout or a crash is said on one line and never stops the turn.
//!
//! A project's own entries run only once the user trusts them, as its MCP servers do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub mod claude;
mod error;

use crate::http;
use crate::layers::Origin;
use crate::secret;
use crate::sync::lock;
use crate::vocab;
pub use error::{ConditionProblem, HookError, HookFailure, RunError, SubagentError};
use new_sys::os_sandbox;
use new_sys::os_sandbox::OsSandbox;
use new_sys::platform;
use new_sys::process;
use std::collections::HashMap;
use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Instant;
use tokio::io::AsyncRead;
use tokio::runtime::Handle;
use tokio::time;

/// The points of the loop a hook can follow.
pub const EVENTS: &[&str] = &[
    "program_start",
    "program_exit",
    "session_start",
    "session_end",
    "pre_message",
    "post_message",
    "iteration_start",
    "iteration_end",
    "pre_tool_use",
    "post_tool_use",
    "pre_compact",
    "compact",
    "subagent_stop",
    "notification",
    "error",
];

/// How many times in a row a `post_message` (or `subagent_stop`) hook may ask a turn to go on.
pub const STOP_HOOK_ROUNDS: usize = 3;

/// Events a hook cannot block: exit code 2 shows its stderr to the user, as Claude Code does.
const UNBLOCKABLE: &[&str] = &[
    "program_start",
    "program_exit",
    "session_start",
    "session_end",
    "pre_compact",
    "compact",
    "notification",
    "error",
];

/// The most of a hook's output kept (the rest is read and dropped: a hook that prints megabytes
/// neither floods the terminal nor the model's context).
const MAX_OUTPUT: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Eq,
    Neq,
    Glob,
    Contains,
}

/// When an entry fires: a test of one field, or all / any of several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    Test {
        field: String,
        op: Op,
        value: String,
    },
    All(Vec<Condition>),
    Any(Vec<Condition>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A shell command line.
    Command {
        command: String,
        working_dir: Option<PathBuf>,
        env: BTreeMap<String, String>,
        timeout: Duration,
    },
    /// A POST of the event as JSON.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        timeout: Duration,
    },
    /// Text added to the user's message of this turn.
    Prompt(String),
    /// A subagent role given the event as its task (CodePilot's fourth action); its answer is the
    /// hook's context, or its decision when it answers in the hooks' JSON (`{"decision":
    /// "block", "reason": …}`, `{"ok": false, "reason": …}` as Claude Code's agent hooks do).
    Agent {
        role: String,
        /// What the role is asked to do with the event (before the event's JSON).
        prompt: Option<String>,
        timeout: Duration,
    },
}

impl Action {
    /// `command`, `http`, `prompt` or `agent`, as the config names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Command { .. } => "command",
            Action::Http { .. } => "http",
            Action::Prompt(_) => "prompt",
            Action::Agent { .. } => "agent",
        }
    }
}

/// Runs an `agent` hook's subagent: `role` with `task`, its last answer as text. Given to
/// [`Hooks`] by whoever can run subagents (the REPL); without it an `agent` hook fails, said.
pub trait AgentRunner: Send + Sync + Debug {
    /// `parent`: the conversation whose event it is; `project_roles`: the hook is the project's
    /// own (trusted, or it would not run), so a role the project defines may answer it.
    fn run(
        &self,
        role: &str,
        task: String,
        parent: String,
        project_roles: bool,
    ) -> Pin<Box<dyn Future<Output = Result<String, SubagentError>> + Send>>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub event: String,
    pub condition: Option<Condition>,
    pub action: Action,
    pub run_async: bool,
    pub once: bool,
    pub origin: Origin,
    /// `"sandbox": true` runs it inside the command sandbox. Hooks are the user's own programs or
    /// a trusted project's (an untrusted project's never run): like Claude Code, `new` runs them
    /// outside the sandbox otherwise, so that `uv run …`, `npx …` and `bun …` find their caches
    /// and the network.
    pub sandbox: Option<bool>,
    /// `"network": true`: inside the sandbox, the network is on.
    pub network: bool,
    /// Set on an entry from a Claude Code settings file: its tool-name pattern (empty: every
    /// tool). Such an entry gets the event in Claude Code's words (see `claude.rs`).
    pub matcher: Option<String>,
}

/// The `hook` settings: whether hooks run, the entries, and the project's entries as read (for
/// the trust question).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookSettings {
    pub enabled: bool,
    pub entries: Vec<Entry>,
    pub project_entries: Option<String>,
}

/// Reads each config file's `hook` section (farthest first); a bad entry is named with its file
/// and field, and left out.
pub fn settings(
    sections: &[(Origin, PathBuf, Value)],
    claude_sections: &[(Origin, PathBuf, Value)],
    project_untrusted: bool,
    ignored: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> HookSettings {
    let mut out = HookSettings {
        enabled: true,
        ..Default::default()
    };
    let mut by_name: BTreeMap<String, Entry> = BTreeMap::new();
    let mut order = Vec::new();
    for (origin, path, section) in sections {
        let Some(section) = section.as_object() else {
            warnings.push(format!(
                "`hook` in {} must be an object; ignored",
                path.display()
            ));
            continue;
        };
        for key in section.keys() {
            if !["enabled", "entries"].contains(&key.as_str()) {
                warnings.push(format!(
                    "unknown key `hook.{key}` in {} is ignored",
                    path.display()
                ));
            }
        }
        // An untrusted project may not switch off, or put its own entry in place of, a hook
        // of the user's (a guard the user relies on).
        let narrow_only = project_untrusted && *origin == Origin::Project;
        match section.get("enabled") {
            None => {}
            Some(Value::Bool(false)) if narrow_only => {
                ignored.push("hook.enabled `false`".to_string());
            }
            Some(Value::Bool(b)) => out.enabled = *b,
            Some(_) => warnings.push(format!(
                "`hook.enabled` in {} must be true or false; ignored",
                path.display()
            )),
        }
        let entries = match section.get("entries") {
            None => continue,
            Some(Value::Array(e)) => e,
            Some(_) => {
                warnings.push(format!(
                    "`hook.entries` in {} must be a list; ignored",
                    path.display()
                ));
                continue;
            }
        };
        if *origin == Origin::Project {
            out.project_entries = serde_json::to_string_pretty(entries).ok();
        }
        for (i, e) in entries.iter().enumerate() {
            match entry(e, *origin) {
                Ok(e) if narrow_only && by_name.contains_key(&e.name) => ignored.push(format!(
                    "the hook entry `{}`, named like one of yours (yours stays)",
                    e.name
                )),
                Ok(e) => {
                    if !order.contains(&e.name) {
                        order.push(e.name.clone());
                    }
                    by_name.insert(e.name.clone(), e);
                }
                Err(why) => warnings.push(format!(
                    "hook.entries[{i}] in {}: {why}; this hook is left out",
                    path.display()
                )),
            }
        }
    }
    out.entries = order
        .into_iter()
        .filter_map(|n| by_name.remove(&n))
        .collect();
    // Claude Code's settings files, after ours; a project's behind the same trust (their text is
    // part of what is trusted).
    let mut project_claude = serde_json::Map::new();
    for (origin, path, hooks) in claude_sections {
        if *origin == Origin::Project {
            project_claude.insert(path.display().to_string(), hooks.clone());
        }
        out.entries
            .extend(claude::entries(hooks, path, *origin, warnings));
    }
    if !project_claude.is_empty() {
        let text = serde_json::to_string_pretty(&Value::Object(project_claude)).unwrap_or_default();
        out.project_entries = Some(match out.project_entries.take() {
            Some(ours) => format!("{ours}\n{text}"),
            None => text,
        });
    }
    out
}

/// `"10s"`, `"500ms"`, `"2m"` or a number of seconds.
fn duration(v: &Value) -> Option<Duration> {
    match v {
        Value::Number(n) => n.as_f64().filter(|s| *s > 0.0).map(Duration::from_secs_f64),
        Value::String(s) => {
            let s = s.trim();
            let (number, unit) = s.split_at(s.find(|c: char| c.is_alphabetic()).unwrap_or(s.len()));
            let n: f64 = number.trim().parse().ok().filter(|n: &f64| *n > 0.0)?;
            let seconds = match unit {
                "" | "s" => n,
                "ms" => n / 1000.0,
                "m" => n * 60.0,
                _ => return None,
            };
            Some(Duration::from_secs_f64(seconds))
        }
        _ => None,
    }
}

fn entry(v: &Value, origin: Origin) -> Result<Entry, HookError> {
    let o = v.as_object().ok_or(HookError::NotAnObject)?;
    for k in o.keys() {
        if ![
            "name",
            "event",
            "condition",
            "action",
            "async",
            "once",
            "sandbox",
            "network",
        ]
        .contains(&k.as_str())
        {
            return Err(HookError::UnknownField(k.clone()));
        }
    }
    let string = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let name = string("name").ok_or(HookError::Missing("name"))?;
    let event = string("event").ok_or(HookError::Missing("event"))?;
    if !EVENTS.contains(&event.as_str()) {
        return Err(HookError::UnknownEvent(event));
    }
    let flag = |k: &'static str| match o.get(k) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(HookError::NotABool(k)),
    };
    let condition = match o.get("condition") {
        None | Some(Value::Null) => None,
        Some(c) => Some(condition(c, "condition")?),
    };
    let action = o.get("action").ok_or(HookError::Missing("action"))?;
    let a = action.as_object().ok_or(HookError::ActionNotAnObject)?;
    let text = |k: &str| a.get(k).and_then(Value::as_str).map(str::to_string);
    let map = |k: &'static str| -> Result<BTreeMap<String, String>, HookError> {
        match a.get(k) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(key, v)| {
                    v.as_str()
                        .map(|s| (key.clone(), s.to_string()))
                        .ok_or_else(|| HookError::NotAString {
                            map: k,
                            key: key.clone(),
                        })
                })
                .collect(),
            Some(_) => Err(HookError::NotAMap(k)),
        }
    };
    let timeout = match a.get("timeout") {
        None | Some(Value::Null) => Duration::from_secs(60),
        Some(t) => duration(t).ok_or(HookError::BadTimeout)?,
    };
    let kind = text("type").unwrap_or_else(|| {
        ["command", "url", "prompt", "agent"]
            .into_iter()
            .find(|k| a.contains_key(*k))
            .map(|k| if k == "url" { "http" } else { k })
            .unwrap_or("")
            .to_string()
    });
    let action = match kind.as_str() {
        "command" => Action::Command {
            command: text("command").ok_or(HookError::Missing("action.command"))?,
            working_dir: text("working_dir").map(PathBuf::from),
            env: map("env")?,
            timeout,
        },
        "http" => {
            let url = text("url").ok_or(HookError::Missing("action.url"))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(HookError::BadUrl(url));
            }
            Action::Http {
                url,
                headers: map("headers")?,
                timeout,
            }
        }
        "prompt" => Action::Prompt(
            text("prompt")
                .or_else(|| text("text"))
                .ok_or(HookError::Missing("action.prompt"))?,
        ),
        "agent" => Action::Agent {
            role: text("agent")
                .or_else(|| text("role"))
                .ok_or(HookError::MissingRole)?,
            prompt: text("prompt"),
            timeout: match a.get("timeout") {
                None | Some(Value::Null) => Duration::from_secs(300),
                Some(_) => timeout,
            },
        },
        other => return Err(HookError::UnknownAction(other.to_string())),
    };
    Ok(Entry {
        name,
        event,
        condition,
        action,
        run_async: flag("async")?,
        once: flag("once")?,
        origin,
        sandbox: o
            .contains_key("sandbox")
            .then(|| flag("sandbox"))
            .transpose()?,
        network: flag("network")?,
        matcher: None,
    })
}

fn condition(v: &Value, at: &str) -> Result<Condition, HookError> {
    let bad = |problem| HookError::BadCondition {
        at: at.to_string(),
        problem,
    };
    let o = v
        .as_object()
        .ok_or_else(|| bad(ConditionProblem::NotAnObject))?;
    for (key, make) in [
        ("all", Condition::All as fn(Vec<Condition>) -> Condition),
        ("any", Condition::Any),
    ] {
        if let Some(list) = o.get(key) {
            let list = list
                .as_array()
                .ok_or_else(|| bad(ConditionProblem::NotAList(key)))?;
            let parts = list
                .iter()
                .enumerate()
                .map(|(i, c)| condition(c, &format!("{at}.{key}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(make(parts));
        }
    }
    let field = o
        .get("field")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(ConditionProblem::MissingField))?;
    let known = [
        "tool_name",
        "tool_response",
        "response",
        "prompt",
        "cwd",
        "session_id",
        "event",
        "iteration",
    ];
    if !known.contains(&field) && !field.starts_with("tool_input.") {
        return Err(bad(ConditionProblem::UnknownField(field.to_string())));
    }
    let op = match o.get("op").and_then(Value::as_str).unwrap_or("eq") {
        "eq" => Op::Eq,
        "neq" => Op::Neq,
        "glob" => Op::Glob,
        "contains" => Op::Contains,
        other => return Err(bad(ConditionProblem::UnknownOp(other.to_string()))),
    };
    let value = match o.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
        _ => return Err(bad(ConditionProblem::MissingValue)),
    };
    if op == Op::Glob {
        globset::Glob::new(&value).map_err(|e| bad(ConditionProblem::BadGlob(e.to_string())))?;
    }
    // A tool named as Claude Code or CodePilot name it (`WriteFile`, `Bash`) is ours.
    let value = if field == "tool_name" && op != Op::Glob {
        vocab::canonical(&value).to_string()
    } else {
        value
    };
    Ok(Condition::Test {
        field: field.to_string(),
        op,
        value,
    })
}

/// What happened, for the hooks to see.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub event: String,
    pub prompt: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    pub tool_response: Option<String>,
    /// The unified diff of a write or an edit (`post_tool_use`), for Claude Code's
    /// `structuredPatch`.
    pub tool_diff: Option<String>,
    /// The model's final answer (`post_message`).
    pub response: Option<String>,
    /// What `new` needs the user for (`notification`).
    pub message: Option<String>,
    /// The round of the loop, from 1 (`iteration_start`, `iteration_end`).
    pub iteration: Option<u64>,
    pub error: Option<String>,
    /// `post_message` fired again after a hook asked the turn to go on (Claude Code's
    /// `stop_hook_active`).
    pub stop_hook_active: bool,
}

impl Input {
    pub fn new(event: &str) -> Input {
        Input {
            event: event.to_string(),
            ..Default::default()
        }
    }
}

/// A hook's answer to a permission question (`pre_tool_use`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Allow,
    Deny,
    Ask,
}

/// What the hooks of one event said, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Blocked, with the reason (to the model for a tool call, to the user for a message).
    pub block: Option<String>,
    /// Text to add to the user's message (stdout of `pre_message` and `session_start` hooks,
    /// and `prompt` actions).
    pub context: Vec<String>,
    pub permission: Option<Permission>,
    /// Hooks that failed, timed out or crashed, one line each.
    pub failures: Vec<HookFailure>,
    /// A hook said `"continue": false`: the turn stops here, with this reason for the user
    /// (Claude Code's `stopReason`).
    pub stop: Option<String>,
    /// Lines for the user (Claude Code's `systemMessage`, and what a hook of an event that
    /// cannot be blocked wrote on stderr with exit code 2).
    pub notices: Vec<String>,
}

/// The session's hooks and how often each fired and failed.
#[derive(Debug)]
pub struct Hooks {
    settings: HookSettings,
    trusted: bool,
    workdir: PathBuf,
    session: Mutex<(String, PathBuf)>,
    /// Shared with the copies made for subagents (one count, one `once` a program).
    counts: Arc<Mutex<BTreeMap<String, (u64, u64)>>>,
    fired_once: Arc<Mutex<HashSet<String>>>,
    hidden_env: Vec<String>,
    /// The sandbox a project's hooks (and the user's that ask) run in.
    os_sandbox: Option<Arc<OsSandbox>>,
    /// The Claude Code matchers of the entries, compiled once (not at every tool call); None:
    /// every tool.
    matchers: Arc<BTreeMap<String, Option<grep_regex::RegexMatcher>>>,
    /// What runs `agent` actions (shared with the copies for subagents).
    agent: Option<Arc<dyn AgentRunner>>,
}

/// One row of `/hooks`.
#[derive(Debug, Clone)]
pub struct HookStatus {
    pub name: String,
    pub event: String,
    pub fired: u64,
    pub failed: u64,
    pub runs: bool,
    pub origin: Origin,
}

impl Hooks {
    pub fn new(
        settings: HookSettings,
        trusted: bool,
        workdir: &Path,
        hidden_env: Vec<String>,
    ) -> Hooks {
        // Entries with a matcher that does not compile were left out when they were read.
        let matchers = settings
            .entries
            .iter()
            .filter_map(|e| e.matcher.as_ref())
            .filter_map(|p| Some((p.clone(), claude::matcher(p).ok()?)))
            .collect();
        Hooks {
            settings,
            trusted,
            workdir: workdir.to_path_buf(),
            session: Mutex::new((String::new(), PathBuf::new())),
            counts: Default::default(),
            fired_once: Default::default(),
            hidden_env,
            os_sandbox: None,
            matchers: Arc::new(matchers),
            agent: None,
        }
    }

    /// Runs `agent` actions with `runner`.
    pub fn with_agent(mut self, runner: Arc<dyn AgentRunner>) -> Hooks {
        self.agent = Some(runner);
        self
    }

    /// Runs the hooks that belong inside it in `sandbox`.
    pub fn with_sandbox(mut self, sandbox: Option<Arc<OsSandbox>>) -> Hooks {
        self.os_sandbox = sandbox;
        self
    }

    /// The same hooks for a subagent's thread: its own conversation, shared counts and `once`.
    pub fn fork(&self) -> Hooks {
        Hooks {
            settings: self.settings.clone(),
            trusted: self.trusted,
            workdir: self.workdir.clone(),
            session: Mutex::new(lock(&self.session).clone()),
            counts: self.counts.clone(),
            fired_once: self.fired_once.clone(),
            hidden_env: self.hidden_env.clone(),
            os_sandbox: self.os_sandbox.clone(),
            matchers: self.matchers.clone(),
            // A subagent's calls meet the same agent hooks (whose own subagents run no hooks).
            agent: self.agent.clone(),
        }
    }

    /// The conversation hooks are told about.
    pub fn set_session(&self, id: &str, transcript: &Path) {
        *lock(&self.session) = (id.to_string(), transcript.to_path_buf());
    }

    fn runs(&self, e: &Entry) -> bool {
        self.settings.enabled && (e.origin == Origin::User || self.trusted)
    }

    pub fn statuses(&self) -> Vec<HookStatus> {
        let counts = lock(&self.counts);
        self.settings
            .entries
            .iter()
            .map(|e| {
                let (fired, failed) = counts.get(&e.name).copied().unwrap_or_default();
                HookStatus {
                    name: e.name.clone(),
                    event: e.event.clone(),
                    fired,
                    failed,
                    runs: self.runs(e),
                    origin: e.origin,
                }
            })
            .collect()
    }

    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// Whether any entry follows `event` (so that callers can skip building the input).
    pub fn wants(&self, event: &str) -> bool {
        self.settings
            .entries
            .iter()
            .any(|e| e.event == event && self.runs(e))
    }

    /// The event as the hooks receive it: Claude Code's fields; for an entry from Claude Code's
    /// settings (`claude`), in its words too (event, tool and argument names).
    fn payload(&self, input: &Input, claude: bool) -> Value {
        let (session_id, transcript) = lock(&self.session).clone();
        let event = if claude {
            claude::event_name(&input.event)
        } else {
            &input.event
        };
        let mut v = json!({
            "session_id": session_id,
            "transcript_path": transcript,
            "cwd": self.workdir,
            "hook_event_name": event,
        });
        let o = v.as_object_mut().expect("an object");
        if claude {
            match input.event.as_str() {
                "post_message" | "subagent_stop" => {
                    o.insert("stop_hook_active".into(), json!(input.stop_hook_active));
                }
                "session_start" => {
                    o.insert("source".into(), json!("startup"));
                }
                "session_end" => {
                    o.insert("reason".into(), json!("exit"));
                }
                "pre_compact" => {
                    o.insert("trigger".into(), json!("manual"));
                }
                // The one kind of notification `new` sends.
                "notification" => {
                    o.insert("notification_type".into(), json!("permission_prompt"));
                }
                _ => {}
            }
        }
        if let Some(p) = &input.prompt {
            o.insert("prompt".into(), json!(p));
        }
        if let Some(t) = &input.tool_name {
            let name = if claude { claude::tool_name(t) } else { t };
            o.insert("tool_name".into(), json!(name));
        }
        if let Some(t) = &input.tool_input {
            let args = if claude {
                claude::tool_input(t, &self.workdir)
            } else {
                t.clone()
            };
            o.insert("tool_input".into(), args);
        }
        if let Some(t) = &input.tool_response {
            let response = match (claude, &input.tool_name) {
                (true, Some(tool)) => claude::tool_response(
                    tool,
                    o.get("tool_input").unwrap_or(&Value::Null),
                    t,
                    input.tool_diff.as_deref(),
                ),
                _ => json!(t),
            };
            o.insert("tool_response".into(), response);
        }
        if let Some(r) = &input.response {
            o.insert("response".into(), json!(r));
        }
        if let Some(e) = &input.error {
            o.insert("error".into(), json!(e));
        }
        if let Some(m) = &input.message {
            o.insert("message".into(), json!(m));
        }
        v
    }

    /// Whether entry `e` runs for `subject` (a tool's name in Claude Code's words, a
    /// notification's type; None: the event has none to test): its Claude Code matcher, if it
    /// has one, matches it, and a `once` entry has not run yet. Counted as fired when it does.
    fn claims(&self, e: &Entry, subject: Option<&str>) -> bool {
        use grep_matcher::Matcher;
        if let (Some(pattern), Some(subject)) = (&e.matcher, subject) {
            let hit = match self.matchers.get(pattern) {
                Some(None) => true,
                Some(Some(m)) => m.is_match(subject.as_bytes()).unwrap_or(false),
                None => false,
            };
            if !hit {
                return false;
            }
        }
        if e.once && !lock(&self.fired_once).insert(e.name.clone()) {
            return false;
        }
        lock(&self.counts).entry(e.name.clone()).or_default().0 += 1;
        true
    }

    /// Fires the `notification` hooks (Claude Code's `Notification`) without waiting for them:
    /// `new` needs the user (a permission question waits). They cannot block anything.
    pub fn notify(&self, message: &str) {
        let Ok(runtime) = Handle::try_current() else {
            return;
        };
        let input = Input {
            message: Some(message.to_string()),
            ..Input::new("notification")
        };
        for e in &self.settings.entries {
            if e.event != input.event
                || !self.runs(e)
                || e.condition
                    .as_ref()
                    .is_some_and(|c| !self.matches(c, &input))
            {
                continue;
            }
            // A Claude Code matcher on a notification tests its type.
            if !self.claims(e, Some("permission_prompt")) {
                continue;
            }
            let payload = self.payload(&input, e.matcher.is_some());
            runtime.spawn(self.detached(e, payload));
        }
    }

    /// One entry's run that nobody waits for (`async` entries, notifications).
    fn detached(&self, e: &Entry, payload: Value) -> impl Future<Output = ()> + Send + 'static {
        let (entry, hidden) = (e.clone(), self.hidden_env.clone());
        let (workdir, sandbox) = (self.workdir.clone(), self.os_sandbox.clone());
        let agent = self.agent.clone();
        async move {
            let places = Places {
                workdir: &workdir,
                hidden: &hidden,
                sandbox: sandbox.as_deref(),
                agent: agent.as_deref(),
            };
            let started = Instant::now();
            let ran = run(&entry, &payload, places).await;
            log_run(&entry, started, ran.as_ref().map(|a| a.code));
        }
    }

    /// A field of the event, as conditions see it.
    fn field(&self, input: &Input, field: &str) -> Option<String> {
        match field {
            "tool_name" => input.tool_name.clone(),
            "tool_response" => input.tool_response.clone(),
            "response" => input.response.clone(),
            "prompt" => input.prompt.clone(),
            "cwd" => Some(self.workdir.display().to_string()),
            "session_id" => Some(lock(&self.session).0.clone()),
            "event" => Some(input.event.clone()),
            "iteration" => input.iteration.map(|n| n.to_string()),
            _ => {
                let path = field.strip_prefix("tool_input.")?;
                let mut v = input.tool_input.as_ref()?;
                for (i, part) in path.split('.').enumerate() {
                    // The argument as CodePilot and Claude Code name it (`file_path`).
                    let ours = match (i, part) {
                        (0, "file_path") => "filepath",
                        (_, part) => part,
                    };
                    v = v.get(part).or_else(|| v.get(ours))?;
                }
                Some(match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            }
        }
    }

    fn matches(&self, c: &Condition, input: &Input) -> bool {
        match c {
            Condition::All(parts) => parts.iter().all(|p| self.matches(p, input)),
            Condition::Any(parts) => parts.iter().any(|p| self.matches(p, input)),
            Condition::Test { field, op, value } => {
                let got = self.field(input, field);
                match op {
                    Op::Eq => got.as_deref() == Some(value.as_str()),
                    Op::Neq => got.as_deref() != Some(value.as_str()),
                    Op::Contains => got.is_some_and(|g| g.contains(value.as_str())),
                    Op::Glob => got.is_some_and(|g| {
                        globset::Glob::new(value)
                            .map(|glob| glob.compile_matcher().is_match(&g))
                            .unwrap_or(false)
                    }),
                }
            }
        }
    }

    /// Runs the entries that follow `input.event` and whose condition holds, in order; their
    /// answers together.
    pub async fn fire(&self, input: &Input) -> Outcome {
        let mut out = Outcome::default();
        for e in &self.settings.entries {
            if e.event != input.event || !self.runs(e) {
                continue;
            }
            if let Some(c) = &e.condition
                && !self.matches(c, input)
            {
                continue;
            }
            // A Claude Code matcher tests the tool's name in Claude Code's words.
            if !self.claims(e, input.tool_name.as_deref().map(claude::tool_name)) {
                continue;
            }
            if let Action::Prompt(text) = &e.action {
                out.context.push(text.clone());
                continue;
            }
            let payload = self.payload(input, e.matcher.is_some());
            if e.run_async {
                tokio::spawn(self.detached(e, payload));
                continue;
            }
            let places = Places {
                workdir: &self.workdir,
                hidden: &self.hidden_env,
                sandbox: self.os_sandbox.as_deref(),
                agent: self.agent.as_deref(),
            };
            let started = Instant::now();
            match run(e, &payload, places)
                .await
                .inspect(|a| log_run(e, started, Ok(a.code)))
                .inspect_err(|why| log_run(e, started, Err(why)))
            {
                Ok(answer) => {
                    let had = out.block.is_some();
                    answer.apply(&input.event, &mut out);
                    let sandboxed = matches!(e.action, Action::Command { .. })
                        && e.reach().is_some()
                        && self.os_sandbox.as_ref().is_some_and(|s| s.is_on());
                    if !had && let Some(reason) = out.block.take() {
                        out.block = Some(blocked_reason(e, &input.event, reason, sandboxed));
                    }
                }
                Err(error) => {
                    lock(&self.counts).entry(e.name.clone()).or_default().1 += 1;
                    out.failures.push(HookFailure {
                        name: e.name.clone(),
                        event: e.event.clone(),
                        error,
                    });
                }
            }
        }
        out
    }
}

impl Entry {
    /// Where its command runs: inside the command sandbox only when its entry says
    /// `"sandbox": true` (with the network when it says `"network": true`).
    fn reach(&self) -> Option<os_sandbox::Reach> {
        os_sandbox::entry_reach(false, self.sandbox, self.network)
    }
}

/// Why a hook blocked, as the user or the model reads it: a message blocked names the hook (a
/// message refused by nobody in particular, at every try, is the surprise), and a hook that ran
/// inside the sandbox says so, since a refusal of the sandbox's (a cache it could not write, a
/// host it could not reach) looks like any other exit 2.
fn blocked_reason(e: &Entry, event: &str, reason: String, sandboxed: bool) -> String {
    let mut out = if event == "pre_message" {
        format!("hook `{}` blocked the message: {reason}", e.name)
    } else {
        reason
    };
    if sandboxed {
        out.push_str(&format!(
            " (hook `{}` ran inside the sandbox, which may be why: without \"sandbox\": true in its entry it runs outside, as your own programs do)",
            e.name
        ));
    }
    out
}

/// One line in the log for a hook that ran: its name, event, kind of action, how long it took
/// and its exit code (never its input, its output or why it failed, which may quote them).
fn log_run(e: &Entry, started: Instant, ran: Result<i32, &RunError>) {
    let kind = e.action.kind();
    let (hook, event) = (e.name.as_str(), e.event.as_str());
    let ms = started.elapsed().as_millis() as u64;
    match ran {
        Ok(code) => tracing::info!(hook, event, kind, ms, code, "hook ran"),
        Err(_) => tracing::warn!(hook, event, kind, ms, outcome = "failed", "hook ran"),
    }
}

/// What one hook answered.
#[derive(Debug, Default)]
struct Answer {
    code: i32,
    stdout: String,
    stderr: String,
    /// A subagent's answer: its text is context at every event, its JSON may sit in a fence.
    from_agent: bool,
}

impl Answer {
    fn apply(self, event: &str, out: &mut Outcome) {
        let mut text = self.stdout.trim();
        if self.from_agent {
            // Models fence their JSON.
            text = text
                .strip_prefix("```json")
                .or_else(|| text.strip_prefix("```"))
                .and_then(|t| t.strip_suffix("```"))
                .map_or(text, str::trim);
        }
        let json: Option<Value> = serde_json::from_str(text).ok();
        let json = json.filter(Value::is_object);
        if self.code == 2 {
            let reason = self.stderr.trim();
            // Events that cannot be blocked: what the hook wrote is for the user.
            if UNBLOCKABLE.contains(&event) {
                if !reason.is_empty() {
                    out.notices.push(reason.to_string());
                }
                return;
            }
            out.block.get_or_insert_with(|| {
                if reason.is_empty() {
                    "blocked by a hook".to_string()
                } else {
                    reason.to_string()
                }
            });
            return;
        }
        if let Some(j) = &json {
            let specific = j.get("hookSpecificOutput");
            let get = |k: &str| {
                j.get(k)
                    .or_else(|| specific.and_then(|s| s.get(k)))
                    .and_then(Value::as_str)
            };
            let reason = get("reason")
                .or_else(|| get("permissionDecisionReason"))
                .unwrap_or("blocked by a hook")
                .to_string();
            if get("decision") == Some("block")
                || j.get("ok").and_then(Value::as_bool) == Some(false)
            {
                out.block.get_or_insert(reason.clone());
            }
            // A subagent read the event, which the model and the project's files shape: its
            // answer may block or deny, never allow, ask less, or stop the turn.
            let decision = get("permissionDecision").filter(|d| !self.from_agent || *d == "deny");
            match decision {
                Some("deny") => {
                    out.permission = Some(Permission::Deny);
                    out.block.get_or_insert(reason);
                }
                Some("ask") if out.permission != Some(Permission::Deny) => {
                    out.permission = Some(Permission::Ask)
                }
                Some("allow") if out.permission.is_none() => {
                    out.permission = Some(Permission::Allow)
                }
                _ => {}
            }
            if let Some(extra) = get("additionalContext") {
                out.context.push(extra.to_string());
            }
            if self.from_agent {
                return;
            }
            if let Some(line) = get("systemMessage") {
                out.notices.push(line.to_string());
            }
            // `"continue": false` stops the turn, whatever else was decided.
            if j.get("continue").and_then(Value::as_bool) == Some(false) {
                let reason = get("stopReason")
                    .unwrap_or("a hook stopped the turn")
                    .to_string();
                // A message stopped before it is sent is a message blocked.
                if event == "pre_message" {
                    out.block.get_or_insert(reason.clone());
                }
                out.stop.get_or_insert(reason);
            }
            // `suppressOutput` hides a hook's stdout from Claude Code's transcript view; here a
            // hook's stdout is never shown (only added as context where the protocol says).
            return;
        }
        if self.code == 0
            && (self.from_agent || matches!(event, "pre_message" | "session_start"))
            && !self.stdout.trim().is_empty()
        {
            out.context.push(self.stdout.trim().to_string());
        }
    }
}

/// What a hook runs with.
#[derive(Clone, Copy)]
struct Places<'a> {
    workdir: &'a Path,
    hidden: &'a [String],
    sandbox: Option<&'a OsSandbox>,
    agent: Option<&'a dyn AgentRunner>,
}

/// Runs one command, HTTP or agent hook.
async fn run(e: &Entry, payload: &Value, places: Places<'_>) -> Result<Answer, RunError> {
    let Places {
        workdir,
        hidden,
        sandbox,
        agent,
    } = places;
    match &e.action {
        Action::Prompt(_) => Ok(Answer::default()),
        Action::Agent {
            role,
            prompt,
            timeout,
        } => {
            let runner = agent.ok_or(RunError::NoSubagents)?;
            let event = serde_json::to_string_pretty(payload).expect("JSON");
            let task = format!(
                "{}\n\nThe event, as JSON:\n```json\n{event}\n```\n\nAnswer with what the \
                 session should know (it is added as context), or to stop what is about to happen \
                 answer only with JSON: {{\"decision\": \"block\", \"reason\": \"…\"}}.",
                prompt.as_deref().unwrap_or(
                    "A hook of the session asks you to look at the event below and act on it."
                )
            );
            let parent = payload["session_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let project = e.origin == Origin::Project;
            let answer = time::timeout(*timeout, runner.run(role, task, parent, project))
                .await
                .map_err(|_| RunError::SubagentTimeout { timeout: *timeout })?
                .map_err(RunError::Subagent)?;
            Ok(Answer {
                code: 0,
                stdout: answer,
                stderr: String::new(),
                from_agent: true,
            })
        }
        Action::Http {
            url,
            headers,
            timeout,
        } => {
            let client =
                http::builder()
                    .timeout(*timeout)
                    .build()
                    .map_err(|e| RunError::HttpClient {
                        reason: e.to_string(),
                    })?;
            let mut request = client
                .post(url)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(payload).expect("JSON"));
            for (k, v) in headers {
                request = request.header(k, v);
            }
            let response = request.send().await.map_err(|e| RunError::Request {
                reason: http::describe_error(&e),
            })?;
            let status = response.status();
            // At most MAX_OUTPUT bytes are read; then the connection is dropped (a server that
            // streams without end is not read whole).
            let mut response = response;
            let mut kept = Vec::new();
            while kept.len() < MAX_OUTPUT {
                match response.chunk().await {
                    Ok(Some(chunk)) => {
                        let room = MAX_OUTPUT - kept.len();
                        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            drop(response);
            let body = String::from_utf8_lossy(&kept).into_owned();
            if !status.is_success() {
                return Err(RunError::Status { status });
            }
            Ok(Answer {
                code: 0,
                stdout: body,
                ..Answer::default()
            })
        }
        Action::Command {
            command,
            working_dir,
            env,
            timeout,
        } => {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let cwd = match working_dir {
                Some(d) if d.is_absolute() => d.clone(),
                Some(d) => workdir.join(d),
                None => workdir.to_path_buf(),
            };
            let reach = e.reach();
            let shell = platform::posix_shell();
            let mut cmd = os_sandbox::command(
                sandbox,
                reach,
                shell.program.as_os_str(),
                &shell.args(command),
                &cwd,
            )
            .map_err(RunError::Sandbox)?;
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            platform::own_process_group(&mut cmd);
            for name in secret::secret_env(hidden) {
                cmd.env_remove(name);
            }
            for (k, v) in tool_input_vars(payload.get("tool_input")) {
                cmd.env(k, v);
            }
            cmd.env("NEW_HOOK_EVENT", &e.event);
            // Where the project is, as hook scripts written for Claude Code expect it.
            cmd.env("CLAUDE_PROJECT_DIR", workdir);
            cmd.env("NEW_PROJECT_DIR", workdir);
            cmd.envs(env);
            // Recorded as started on purpose, so that a `bash` call's clean-up of escaped
            // processes leaves it alone.
            let mut child =
                process::spawn_own(&mut cmd).map_err(|e| RunError::Start { cause: e.into() })?;
            let group = child.id();
            // Dropped before the end (the user's Ctrl-C drops this future): the hook's whole
            // process group is killed, not only its shell.
            struct Group(Option<u32>);
            impl Drop for Group {
                fn drop(&mut self) {
                    if let Some(pid) = self.0.take() {
                        // The process group this hook's shell leads; its shell is not reaped yet
                        // or its group still has members, so the id is still ours.
                        platform::end_group(pid, true);
                    }
                }
            }
            let mut guard = Group(group);
            let input = serde_json::to_vec(payload).expect("JSON");
            let mut stdin = child.stdin.take().expect("piped");
            let mut stdout = child.stdout.take().expect("piped");
            let mut stderr = child.stderr.take().expect("piped");
            let capped = |mut pipe: Box<dyn AsyncRead + Unpin + Send>| async move {
                let mut kept = Vec::new();
                let mut buffer = [0u8; 8192];
                loop {
                    match pipe.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let room = MAX_OUTPUT.saturating_sub(kept.len());
                            kept.extend_from_slice(&buffer[..n.min(room)]);
                        }
                    }
                }
                String::from_utf8_lossy(&kept).into_owned()
            };
            let work = async {
                let write = async {
                    let _ = stdin.write_all(&input).await;
                    drop(stdin);
                };
                let (_, out, err, status) = tokio::join!(
                    write,
                    capped(Box::new(&mut stdout)),
                    capped(Box::new(&mut stderr)),
                    child.wait()
                );
                (out, err, status)
            };
            let ended = time::timeout(*timeout, work).await;
            if ended.is_ok() {
                guard.0 = None;
            }
            match ended {
                Ok((stdout, stderr, Ok(status))) => {
                    let code = status.code().unwrap_or(-1);
                    if code == 0 || code == 2 {
                        Ok(Answer {
                            code,
                            stdout,
                            stderr,
                            from_agent: false,
                        })
                    } else {
                        let first = stderr.lines().next().unwrap_or_default().to_string();
                        Err(match status.code() {
                            Some(code) => RunError::Exit {
                                code,
                                stderr: first,
                            },
                            None => RunError::Killed,
                        })
                    }
                }
                Ok((_, _, Err(e))) => Err(RunError::Wait { cause: e.into() }),
                Err(_) => {
                    // The hook's whole process group: what its shell started goes too.
                    drop(guard);
                    Err(RunError::Timeout { timeout: *timeout })
                }
            }
        }
    }
}

/// `TOOL_INPUT_<FIELD>` for each top-level field of a tool's input (upper case); our `filepath`
/// is also `TOOL_INPUT_FILE_PATH`, the name hook scripts written for other agents use.
fn tool_input_vars(input: Option<&Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(Value::Object(o)) = input else {
        return out;
    };
    for (k, v) in o {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Null => continue,
            other => other.to_string(),
        };
        if text.contains('\0') {
            continue;
        }
        let key: String = k
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        if key == "FILEPATH" {
            out.push(("TOOL_INPUT_FILE_PATH".to_string(), text.clone()));
        }
        out.push((format!("TOOL_INPUT_{key}"), text));
    }
    // Two fields that make the same name (`file~path` and `file_path`, or either and the one
    // derived from `filepath`) are both dropped: neither may stand in for the other.
    let mut counts = HashMap::new();
    for (k, _) in &out {
        *counts.entry(k.clone()).or_insert(0) += 1;
    }
    out.retain(|(k, _)| counts[k] == 1);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_s_answer_may_block_or_deny_but_never_allow_or_stop() {
        let answer = |text: &str, from_agent: bool, event: &str| {
            let mut out = Outcome::default();
            Answer {
                code: 0,
                stdout: text.to_string(),
                stderr: String::new(),
                from_agent,
            }
            .apply(event, &mut out);
            out
        };
        let allow = r#"{"permissionDecision": "allow", "continue": false}"#;
        let out = answer(allow, true, "pre_tool_use");
        assert_eq!((out.permission, out.stop, out.block), (None, None, None));
        // A command's answer says the same and is believed.
        let out = answer(allow, false, "pre_tool_use");
        assert_eq!(out.permission, Some(Permission::Allow));
        assert!(out.stop.is_some());
        let out = answer(
            "```json\n{\"permissionDecision\": \"deny\", \"reason\": \"no\"}\n```",
            true,
            "pre_tool_use",
        );
        assert_eq!(out.permission, Some(Permission::Deny));
        assert_eq!(out.block.as_deref(), Some("no"));
        let out = answer(
            r#"{"ok": false, "reason": "not yet"}"#,
            true,
            "pre_tool_use",
        );
        assert_eq!(out.block.as_deref(), Some("not yet"));
        // Plain words are context, at any event.
        let out = answer("The user likes tea.", true, "post_tool_use");
        assert_eq!(out.context, ["The user likes tea."]);
    }
    use crate::layers::Origin;
    use axum::routing;
    use std::fs;
    use std::time::Instant;
    use tokio::net::TcpListener;
    use tokio::time;

    fn hooks(entries: Value, origin: Origin, trusted: bool, dir: &Path) -> (Hooks, Vec<String>) {
        let mut warnings = Vec::new();
        let settings = settings(
            &[(
                origin,
                PathBuf::from("/c/config.json"),
                json!({"entries": entries}),
            )],
            &[],
            false,
            &mut Vec::new(),
            &mut warnings,
        );
        let h = Hooks::new(settings, trusted, dir, Vec::new());
        h.set_session("abc123", &dir.join("abc123.jsonl"));
        (h, warnings)
    }

    fn tool_input(name: &str, input: Value) -> Input {
        Input {
            tool_name: Some(name.into()),
            tool_input: Some(input),
            ..Input::new("pre_tool_use")
        }
    }

    #[test]
    fn entries_load_and_bad_ones_are_named_with_their_field() {
        let dir = tempfile::tempdir().unwrap();
        let (h, warnings) = hooks(
            json!([
                {"name": "fmt", "event": "post_tool_use", "action": {"type": "command", "command": "true", "timeout": "10s"},
                 "condition": {"all": [{"field": "tool_name", "op": "eq", "value": "write_file"},
                                       {"field": "tool_input.filepath", "op": "glob", "value": "*.rs"}]}},
                {"name": "web", "event": "error", "action": {"url": "http://127.0.0.1:9/h"}},
                {"name": "ctx", "event": "pre_message", "action": {"type": "prompt", "prompt": "be brief"}},
                {"name": "a", "event": "before_lunch", "action": {"command": "x"}},
                {"name": "b", "event": "error", "action": {"command": "x", "timeout": "soon"}},
                {"name": "c", "event": "error", "condition": {"field": "tool_name", "op": "like", "value": "x"}, "action": {"command": "x"}},
                {"name": "d", "event": "error"},
                {"event": "error", "action": {"command": "x"}}
            ]),
            Origin::User,
            true,
            dir.path(),
        );
        let names: Vec<String> = h.statuses().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["fmt", "web", "ctx"]);
        let said = warnings.join("\n");
        for part in [
            "hook.entries[3] in /c/config.json: `event` \"before_lunch\" is not one of",
            "hook.entries[4] in /c/config.json: `action.timeout` must be like",
            "hook.entries[5] in /c/config.json: `condition.op` \"like\" must be eq, neq, glob or contains",
            "hook.entries[6] in /c/config.json: `action` is required",
            "hook.entries[7] in /c/config.json: `name` is required",
        ] {
            assert!(said.contains(part), "{part}: {said}");
        }
        assert_eq!(duration(&json!("500ms")), Some(Duration::from_millis(500)));
        assert_eq!(duration(&json!("2m")), Some(Duration::from_secs(120)));
        assert_eq!(duration(&json!(3)), Some(Duration::from_secs(3)));
    }

    /// Each way an entry can be wrong is its own variant, with the place it is wrong at.
    #[test]
    fn a_bad_entry_is_the_variant_of_its_mistake() {
        let origin = Origin::User;
        let read = |v: Value| entry(&v, origin).unwrap_err();
        let command = json!({"command": "x"});
        assert_eq!(
            read(json!({"name": "c", "event": "error", "action": command,
                        "condition": {"field": "tool_name", "op": "like", "value": "x"}})),
            HookError::BadCondition {
                at: "condition".into(),
                problem: ConditionProblem::UnknownOp("like".into())
            }
        );
        assert_eq!(
            read(json!({"name": "c", "event": "error", "action": command,
                        "condition": {"any": [{"field": "prompt", "value": "a"},
                                              {"field": "weather", "value": "x"}]}})),
            HookError::BadCondition {
                at: "condition.any[1]".into(),
                problem: ConditionProblem::UnknownField("weather".into())
            }
        );
        assert_eq!(
            read(json!({"name": "c", "event": "error", "action": command,
                        "condition": {"field": "prompt", "op": "glob", "value": "a["}})),
            HookError::BadCondition {
                at: "condition".into(),
                problem: ConditionProblem::BadGlob(
                    globset::Glob::new("a[").unwrap_err().to_string()
                )
            }
        );
        assert_eq!(
            read(
                json!({"name": "c", "event": "error", "action": command, "condition": {"all": 3}})
            ),
            HookError::BadCondition {
                at: "condition".into(),
                problem: ConditionProblem::NotAList("all")
            }
        );
        assert_eq!(
            read(json!({"name": "a", "event": "before_lunch", "action": command})),
            HookError::UnknownEvent("before_lunch".into())
        );
        assert_eq!(
            read(
                json!({"name": "a", "event": "error", "action": {"command": "x", "timeout": "soon"}})
            ),
            HookError::BadTimeout
        );
        assert_eq!(
            read(
                json!({"name": "a", "event": "error", "action": {"command": "x", "env": {"A": 1}}})
            ),
            HookError::NotAString {
                map: "env",
                key: "A".into()
            }
        );
        assert_eq!(
            read(json!({"name": "a", "event": "error", "action": {"url": "ftp://x"}})),
            HookError::BadUrl("ftp://x".into())
        );
        assert_eq!(
            read(json!({"name": "a", "event": "error", "action": {"type": "agent"}})),
            HookError::MissingRole
        );
        assert_eq!(
            read(json!({"name": "a", "event": "error", "async": "yes", "action": command})),
            HookError::NotABool("async")
        );
        assert_eq!(
            read(json!({"event": "error", "action": command})),
            HookError::Missing("name")
        );
        assert_eq!(
            read(json!({"name": "a", "event": "error", "action": command, "when": 1})),
            HookError::UnknownField("when".into())
        );
    }

    #[tokio::test]
    async fn a_command_gets_the_event_on_stdin_and_tool_input_variables() {
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen.json");
        let (h, _) = hooks(
            json!([{"name": "log", "event": "pre_tool_use", "action": {"command":
                format!("cat > {}; echo \"$TOOL_INPUT_FILE_PATH|$TOOL_INPUT_CONTENT|$NEW_HOOK_EVENT\" >> {}", seen.display(), seen.display())}}]),
            Origin::User,
            true,
            dir.path(),
        );
        let out = h
            .fire(&tool_input(
                "write_file",
                json!({"filepath": "a.rs", "content": "x y"}),
            ))
            .await;
        assert_eq!(out, Outcome::default());
        let text = fs::read_to_string(&seen).unwrap();
        let (json_part, vars) = text.rsplit_once('}').unwrap();
        let event: Value = serde_json::from_str(&format!("{json_part}}}")).unwrap();
        assert_eq!(event["hook_event_name"], "pre_tool_use");
        assert_eq!(event["session_id"], "abc123");
        assert_eq!(event["tool_name"], "write_file");
        assert_eq!(event["tool_input"]["filepath"], "a.rs");
        assert!(
            event["transcript_path"]
                .as_str()
                .unwrap()
                .ends_with("abc123.jsonl")
        );
        assert_eq!(event["cwd"], dir.path().display().to_string());
        assert_eq!(vars.trim(), "a.rs|x y|pre_tool_use");
        assert_eq!(h.statuses()[0].fired, 1);
    }

    #[tokio::test]
    async fn exit_2_and_json_decisions_block_and_answer_permission_questions() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("echo 'no rm here' >&2; exit 2", Some("no rm here"), None),
            (
                r#"echo '{"decision": "block", "reason": "policy"}'"#,
                Some("policy"),
                None,
            ),
            (
                r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not on main"}}'"#,
                Some("not on main"),
                Some(Permission::Deny),
            ),
            (
                r#"echo '{"permissionDecision": "allow"}'"#,
                None,
                Some(Permission::Allow),
            ),
            (
                r#"echo '{"permissionDecision": "ask"}'"#,
                None,
                Some(Permission::Ask),
            ),
        ];
        for (command, block, permission) in cases {
            let (h, _) = hooks(
                json!([{"name": "guard", "event": "pre_tool_use", "action": {"command": command}}]),
                Origin::User,
                true,
                dir.path(),
            );
            let out = h
                .fire(&tool_input("bash", json!({"command": "rm -rf /"})))
                .await;
            assert_eq!(out.block.as_deref(), block, "{command}");
            assert_eq!(out.permission, permission, "{command}");
            assert!(out.failures.is_empty(), "{command}: {out:?}");
        }
    }

    #[tokio::test]
    async fn failures_timeouts_and_floods_are_said_on_one_line_and_never_block() {
        let dir = tempfile::tempdir().unwrap();
        let (h, _) = hooks(
            json!([
                {"name": "broken", "event": "error", "action": {"command": "echo oops >&2; exit 3"}},
                {"name": "hangs", "event": "error", "action": {"command": "sleep 30", "timeout": "300ms"}},
                {"name": "floods", "event": "error", "action": {"command": "head -c 20000000 /dev/zero | tr '\\0' x; echo; head -c 5000000 /dev/zero >&2"}},
                {"name": "missing", "event": "error", "action": {"command": "/nonexistent/hook"}}
            ]),
            Origin::User,
            true,
            dir.path(),
        );
        let started = Instant::now();
        let out = h.fire(&Input::new("error")).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(out.block, None);
        assert_eq!(out.failures.len(), 3, "{out:?}");
        let names: Vec<&str> = out.failures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["broken", "hangs", "missing"]);
        assert_eq!(
            out.failures[0].error,
            RunError::Exit {
                code: 3,
                stderr: "oops".into()
            }
        );
        assert_eq!(
            out.failures[1].error,
            RunError::Timeout {
                timeout: Duration::from_millis(300)
            }
        );
        assert!(
            matches!(out.failures[2].error, RunError::Exit { code: 127, .. }),
            "{out:?}"
        );
        let lines: Vec<String> = out.failures.iter().map(|f| f.to_string()).collect();
        assert!(lines[0].contains("hook `broken` (error): exit code 3: oops"));
        assert!(lines[1].contains("hook `hangs` (error): no answer within 0.3 s"));
        assert!(lines[2].contains("hook `missing` (error): exit code 127"));
        assert!(lines.iter().all(|f| !f.contains('\n') && f.len() < 300));
        assert!(out.context.is_empty());
        let failed: Vec<u64> = h.statuses().iter().map(|s| s.failed).collect();
        assert_eq!(failed, [1, 1, 0, 1]);
    }

    #[tokio::test]
    async fn conditions_once_async_prompts_context_and_trust() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("async.txt");
        let (h, _) = hooks(
            json!([
                {"name": "rs", "event": "pre_tool_use", "action": {"type": "prompt", "prompt": "rust file"},
                 "condition": {"any": [{"field": "tool_input.filepath", "op": "glob", "value": "*.rs"},
                                       {"field": "tool_input.filepath", "op": "contains", "value": "rust"}]}},
                {"name": "not-bash", "event": "pre_tool_use", "action": {"type": "prompt", "prompt": "not bash"},
                 "condition": {"field": "tool_name", "op": "neq", "value": "bash"}},
                {"name": "first", "event": "pre_message", "once": true, "action": {"command": "echo remember this"}},
                {"name": "bg", "event": "pre_message", "async": true, "action": {"command": format!("sleep 0.3; echo done > {}", marker.display())}}
            ]),
            Origin::User,
            true,
            dir.path(),
        );
        let out = h
            .fire(&tool_input("write_file", json!({"filepath": "src/a.rs"})))
            .await;
        assert_eq!(out.context, ["rust file", "not bash"]);
        let out = h.fire(&tool_input("bash", json!({"command": "ls"}))).await;
        assert!(out.context.is_empty());
        let message = Input {
            prompt: Some("hi".into()),
            ..Input::new("pre_message")
        };
        let started = Instant::now();
        assert_eq!(h.fire(&message).await.context, ["remember this"]);
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "async does not wait"
        );
        assert!(h.fire(&message).await.context.is_empty(), "once a session");
        time::sleep(Duration::from_millis(700)).await;
        assert!(marker.exists());
        // A project's entries run only once trusted.
        let entries =
            json!([{"name": "p", "event": "error", "action": {"type": "prompt", "prompt": "x"}}]);
        let (untrusted, _) = hooks(entries.clone(), Origin::Project, false, dir.path());
        assert!(
            untrusted
                .fire(&Input::new("error"))
                .await
                .context
                .is_empty()
        );
        assert!(!untrusted.statuses()[0].runs);
        let (trusted, _) = hooks(entries, Origin::Project, true, dir.path());
        assert_eq!(trusted.fire(&Input::new("error")).await.context, ["x"]);
    }

    #[tokio::test]
    async fn several_hooks_answers_combine_deny_over_ask_over_allow_and_eq_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let say =
            |d: &str| json!({"command": format!("echo '{{\"permissionDecision\": \"{d}\"}}'")});
        let cases = [
            (["deny", "ask"], Some(Permission::Deny)),
            (["ask", "deny"], Some(Permission::Deny)),
            (["allow", "ask"], Some(Permission::Ask)),
            (["ask", "allow"], Some(Permission::Ask)),
            (["allow", "allow"], Some(Permission::Allow)),
            (["deny", "allow"], Some(Permission::Deny)),
        ];
        for (answers, want) in cases {
            let entries: Vec<Value> = answers
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    json!({"name": format!("h{i}"), "event": "pre_tool_use", "action": say(d),
                           "condition": {"field": "tool_name", "op": "eq", "value": "bash"}})
                })
                .collect();
            let (h, _) = hooks(json!(entries), Origin::User, true, dir.path());
            let out = h.fire(&tool_input("bash", json!({"command": "ls"}))).await;
            assert_eq!(out.permission, want, "{answers:?}");
            // `eq` is exact: another tool is not matched.
            let out = h.fire(&tool_input("bashful", json!({}))).await;
            assert_eq!(out.permission, None, "{answers:?}");
        }
    }

    #[tokio::test]
    async fn an_http_hook_posts_the_event_and_its_answer_counts_like_a_command_s() {
        use std::sync::Arc;
        let got: Arc<Mutex<Vec<Value>>> = Default::default();
        let seen = got.clone();
        let app = axum::Router::new().route(
            "/hook",
            routing::post(move |body: String| {
                let seen = seen.clone();
                async move {
                    lock(&seen).push(serde_json::from_str(&body).unwrap());
                    r#"{"decision": "block", "reason": "the web says no"}"#
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let dir = tempfile::tempdir().unwrap();
        let (h, _) = hooks(
            json!([
                {"name": "web", "event": "pre_tool_use", "action": {"type": "http", "url": url}},
                {"name": "down", "event": "pre_tool_use", "action": {"type": "http", "url": "http://127.0.0.1:9/h", "timeout": "2s"}}
            ]),
            Origin::User,
            true,
            dir.path(),
        );
        let out = h.fire(&tool_input("bash", json!({"command": "ls"}))).await;
        assert_eq!(out.block.as_deref(), Some("the web says no"));
        assert_eq!(out.failures.len(), 1, "{out:?}");
        assert!(
            matches!(out.failures[0].error, RunError::Request { .. }),
            "{out:?}"
        );
        assert!(
            out.failures[0]
                .to_string()
                .starts_with("hook `down` (pre_tool_use): "),
            "{out:?}"
        );
        let posted = lock(&got).clone();
        assert_eq!(posted.len(), 1);
        assert_eq!(posted[0]["hook_event_name"], "pre_tool_use");
        assert_eq!(posted[0]["tool_input"]["command"], "ls");
    }
}
