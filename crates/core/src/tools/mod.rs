//! Tools the model can call. The [`ToolRegistry`] declares them with JSON Schema and routes calls;
//! it does no truncation of its own: each tool owns its output (what is useful, how to page it, what
//! to do next). A failed or refused call becomes an error text for the model, never a crash.
//!
//! Whether a call may run at all is decided before it runs, by [`permissions`] (modes and rules)
//! and [`blacklist`] (hard limits no rule lifts); the file tools also never leave WORKDIR
//! ([`crate::fs::confine`]), whatever the permissions say.

pub mod blacklist;
pub mod builtin;
pub mod diff;
pub mod permissions;
pub mod shell;
pub mod source;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

pub use permissions::{Action, Mode, Policy, Rule, ToolKind, Verdict};
pub use source::ToolSource;

use crate::escape::escape_controls;
use crate::fs::confine::{ConfineError, Workdir};
use crate::vocab::ToolSpec;
use new_sys::os_sandbox::OsSandbox;
use std::any::Any;
use std::future;
use std::io;
#[cfg(test)]
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::task;

/// Why a tool call failed; the text goes back to the model.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A path that leads out of WORKDIR, or cannot be resolved.
    #[error("{0}")]
    Path(#[from] ConfineError),
    #[error("invalid arguments: {0}")]
    Arguments(String),
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    pub fn io(action: &str, path: &str, e: io::Error) -> Self {
        ToolError::Failed(format!("{action} `{path}` failed: {e}"))
    }
}

/// A tool's answer: the text for the model, a one-line summary for the person watching, and for
/// tools that change files, the unified diff of the change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub content: String,
    pub summary: String,
    pub diff: Option<String>,
}

/// What a call produced, success or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub content: String,
    pub summary: String,
    pub diff: Option<String>,
    pub is_error: bool,
}

impl ToolOutcome {
    pub fn error(message: impl Into<String>) -> Self {
        let message = message.into();
        ToolOutcome {
            summary: message.clone(),
            content: format!("Error: {message}"),
            diff: None,
            is_error: true,
        }
    }
}

/// What every call may use.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// WORKDIR, which the file tools never leave.
    pub workdir: Workdir,
    /// `bash`'s timeout when the call gives none.
    pub bash_timeout: Duration,
    /// Variables removed from the environment of the commands the model runs (provider keys),
    /// besides every `*_API_KEY`.
    pub hidden_env: Vec<String>,
    /// The operating-system sandbox `bash` runs in, when the session has one.
    pub os_sandbox: Option<Arc<OsSandbox>>,
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// Whether the call's future was dropped (the user interrupted): blocking work checks it as it
/// walks and stops.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// An error once cancelled, for `?` in a walk.
    pub fn check(&self) -> Result<(), ToolError> {
        if self.is_set() {
            Err(ToolError::Failed("stopped by the user".into()))
        } else {
            Ok(())
        }
    }
}

/// Sets the flag when dropped: when the call's future is dropped, the work learns it.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// Runs blocking work (a walk over many files) off the async thread, so that an interrupt is seen
/// at once; dropping the future cancels the work, which checks [`Cancel`] as it goes.
pub fn blocking<'a, F>(work: F) -> ToolFuture<'a>
where
    F: FnOnce(&Cancel) -> Result<ToolOutput, ToolError> + Send + 'static,
{
    let cancel = Cancel::default();
    let guard = CancelOnDrop(cancel.clone());
    Box::pin(async move {
        let result = task::spawn_blocking(move || work(&cancel)).await;
        drop(guard);
        result.unwrap_or_else(|e| Err(ToolError::Failed(format!("the tool failed: {e}"))))
    })
}

/// A finished result as a [`ToolFuture`], for tools that do their work synchronously.
pub fn ready<'a>(result: Result<ToolOutput, ToolError>) -> ToolFuture<'a> {
    Box::pin(future::ready(result))
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;
    /// Read, write or execute: what the permission modes are about.
    fn kind(&self) -> ToolKind;
    /// What permission rules match: the path for file tools, the command for `bash`.
    fn subject(&self, args: &Value) -> Option<String>;
    /// What the user is shown when asked to approve the call: the diff a write would make, the
    /// command a shell call would run. None when the arguments say enough.
    /// Runs without a question where the rules would ask (an MCP entry's `alwaysAllow`); a
    /// deny still wins.
    fn preapproved(&self) -> bool {
        false
    }

    fn preview(&self, _args: &Value, _ctx: &ToolContext) -> Option<String> {
        None
    }
    /// Runs the call. Dropping the future cancels it (and, for `bash`, kills its processes).
    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

/// The tools a feature offers beside the built-in ones: `use_skill` while some skill is on demand
/// (`skill.enabled`), `agent` and `task_status` while subagents are on (`subagent.enabled`). The
/// `tools` list does not decide them.
pub const FEATURE_TOOLS: [&str; 3] = ["use_skill", "agent", "task_status"];

#[derive(Debug, thiserror::Error)]
#[error("unknown tool `{name}` in the config's `tools` list; available tools: {}", .available.join(", "))]
pub struct UnknownTool {
    pub name: String,
    pub available: Vec<&'static str>,
}

pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    ctx: ToolContext,
    /// The tools of the features that own them (skills on demand, MCP servers), offered as they
    /// are now, after the built-in ones and in the order added; `enabled` (the config's `tools`
    /// list) names which (empty: all).
    sources: Vec<Arc<dyn ToolSource>>,
    enabled: Vec<String>,
}

impl ToolRegistry {
    /// The built-in tools; `enabled` names the ones to offer (empty: all of them).
    pub fn builtin(ctx: ToolContext, enabled: &[String]) -> Result<Self, UnknownTool> {
        let all = builtin::all();
        let available: Vec<&'static str> = builtin::NAMES.to_vec();
        // The tools of skills and subagents may be named too; their own sections decide.
        if let Some(name) = enabled.iter().find(|n| {
            !n.starts_with("mcp__")
                && !available.contains(&n.as_str())
                && !FEATURE_TOOLS.contains(&n.as_str())
        }) {
            return Err(UnknownTool {
                name: name.clone(),
                available,
            });
        }
        let builtin_named = enabled.iter().any(|n| !n.starts_with("mcp__"));
        let tools = all
            .into_iter()
            .filter(|t| !builtin_named || enabled.iter().any(|n| n == t.name()))
            .map(Arc::from)
            .collect();
        Ok(ToolRegistry {
            tools,
            ctx,
            sources: Vec::new(),
            enabled: enabled.to_vec(),
        })
    }

    /// A registry of the given tools (tests of the agent loop bring their own).
    pub fn with_tools(ctx: ToolContext, tools: Vec<Box<dyn Tool>>) -> Self {
        ToolRegistry {
            tools: tools.into_iter().map(Arc::from).collect(),
            ctx,
            sources: Vec::new(),
            enabled: Vec::new(),
        }
    }

    /// The same tools for a subagent, on a workdir whose extra read roots are its own.
    pub fn detached(&self) -> ToolRegistry {
        ToolRegistry {
            tools: self.tools.clone(),
            ctx: ToolContext {
                workdir: self.ctx.workdir.detached(),
                ..self.ctx.clone()
            },
            sources: self.sources.clone(),
            enabled: self.enabled.clone(),
        }
    }

    /// Whether the config's `tools` list lets a tool be offered. The list names built-in tools
    /// (CodePilot's `tools.enabled`: ReadFile, Bash, ...) and MCP tools: the tools of skills and
    /// subagents ([`FEATURE_TOOLS`]) follow `skill.enabled` and `subagent.enabled` instead, as in
    /// CodePilot, whether the list names them or not.
    pub fn allows(&self, name: &str) -> bool {
        let builtin_named = self.enabled.iter().any(|n| !n.starts_with("mcp__"));
        !builtin_named || FEATURE_TOOLS.contains(&name) || self.enabled.iter().any(|n| n == name)
    }

    /// Offers the tools of `source` too, after those offered already.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// The source of type `T` added, if one was (the MCP servers' manager, the shelf of skills).
    pub fn source<T: ToolSource>(&self) -> Option<Arc<T>> {
        self.sources.iter().find_map(|source| {
            let any: Arc<dyn Any + Send + Sync> = source.clone();
            any.downcast::<T>().ok()
        })
    }

    /// The sources' tools now, those the `tools` list lets be offered; with `shown`, only those
    /// of sources that show theirs now.
    fn sourced(&self, shown: bool) -> Vec<Arc<dyn Tool>> {
        self.sources
            .iter()
            .filter(|source| !shown || source.offered())
            .flat_map(|source| source.tools())
            .filter(|t| self.enables(t.name()))
            .collect()
    }

    /// Whether the `tools` list lets a source's tool be offered: an MCP server's (`mcp__…`) when
    /// the list names it (exactly, or by a `*` at the end) or names no MCP tool; another as
    /// [`ToolRegistry::allows`] says.
    fn enables(&self, name: &str) -> bool {
        if !name.starts_with("mcp__") {
            return self.allows(name);
        }
        let named: Vec<&String> = self
            .enabled
            .iter()
            .filter(|n| n.starts_with("mcp__"))
            .collect();
        named.is_empty()
            || named.iter().any(|n| match n.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == n.as_str(),
            })
    }

    pub fn context(&self) -> &ToolContext {
        &self.ctx
    }

    pub fn workdir(&self) -> &Workdir {
        &self.ctx.workdir
    }

    /// The tools shown to the model: the built-in ones, then those of the sources that show
    /// theirs now (`use_skill` only while some skill is offered on demand).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .cloned()
            .chain(self.sourced(true))
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.tools
            .iter()
            .cloned()
            .chain(self.sourced(false))
            .map(|t| t.name().to_string())
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let builtin = self.tools.iter().find(|t| t.name() == name).cloned();
        builtin.or_else(|| self.sourced(false).into_iter().find(|t| t.name() == name))
    }

    /// The arguments of a call as a JSON object, or the error result that explains why not.
    pub fn parse_arguments(&self, name: &str, arguments: &str) -> Result<Value, ToolOutcome> {
        if self.get(name).is_none() {
            return Err(ToolOutcome::error(format!(
                "unknown tool `{name}`; available tools: {}",
                self.names().join(", ")
            )));
        }
        if arguments.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        match serde_json::from_str(arguments) {
            Ok(Value::Object(o)) => {
                // A built-in tool's arguments are its declared parameters, no others: an extra
                // `file_path` beside `filepath` would otherwise tell a user's hook one file while
                // the tool writes another.
                let builtin = !name.starts_with("mcp__");
                let declared = self.declared(name);
                if builtin
                    && let Some(declared) = &declared
                    && let Some(unknown) = o.keys().find(|k| !declared.contains(k))
                {
                    return Err(ToolOutcome::error(format!(
                        "invalid arguments: `{}` is not a parameter of `{name}`; its parameters are {}. The call was not run.",
                        escape_controls(unknown),
                        declared.join(", ")
                    )));
                }
                Ok(Value::Object(o))
            }
            Ok(_) => Err(ToolOutcome::error(
                "invalid arguments: expected a JSON object",
            )),
            Err(e) => Err(ToolOutcome::error(format!(
                "invalid arguments: not valid JSON ({e}); send the arguments as one JSON object"
            ))),
        }
    }

    /// The parameter names a tool declares (None: its schema names none).
    fn declared(&self, name: &str) -> Option<Vec<String>> {
        let props = self.get(name)?.parameters();
        let props = props.get("properties")?.as_object()?;
        Some(props.keys().cloned().collect())
    }

    /// The arguments of a call as a hook is told them: only the parameters the tool declares
    /// (what the tool itself reads), so that an argument it ignores cannot stand in for one it
    /// uses.
    pub fn declared_arguments(&self, name: &str, args: &Value) -> Value {
        match (self.declared(name), args) {
            (Some(declared), Value::Object(o)) => Value::Object(
                o.iter()
                    .filter(|(k, _)| declared.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            _ => args.clone(),
        }
    }

    /// Runs one call with already parsed arguments.
    /// The log gets the tool's name, how long it took and whether it failed (never the
    /// arguments or the output).
    pub async fn run(&self, name: &str, args: &Value) -> ToolOutcome {
        let started = Instant::now();
        let outcome = match self.get(name) {
            None => ToolOutcome::error(format!("unknown tool `{name}`")),
            Some(tool) => match tool.run(args, &self.ctx).await {
                Ok(out) => ToolOutcome {
                    content: out.content,
                    summary: out.summary,
                    diff: out.diff,
                    is_error: false,
                },
                Err(e) => ToolOutcome::error(e.to_string()),
            },
        };
        tracing::info!(
            tool = name,
            ms = started.elapsed().as_millis() as u64,
            outcome = if outcome.is_error { "error" } else { "ok" },
            "tool call"
        );
        outcome
    }

    /// Parses and runs one call. Unknown tools and unreadable arguments are answered, not raised.
    pub async fn call(&self, name: &str, arguments: &str) -> ToolOutcome {
        match self.parse_arguments(name, arguments) {
            Ok(args) => self.run(name, &args).await,
            Err(outcome) => outcome,
        }
    }
}

/// Argument helpers shared by the tools.
pub(crate) mod args {
    use super::ToolError;
    use serde_json::Value;

    pub fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
        match args.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(ToolError::Arguments(format!("`{key}` must be a string"))),
            None => Err(ToolError::Arguments(format!("`{key}` is required"))),
        }
    }

    pub fn opt_string<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::Arguments(format!("`{key}` must be a string"))),
        }
    }

    /// A non-negative integer; numbers sent as strings ("10") are accepted, as small models send them.
    pub fn opt_usize(args: &Value, key: &str) -> Result<Option<usize>, ToolError> {
        let bad = || ToolError::Arguments(format!("`{key}` must be a non-negative integer"));
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                        .map(|f| f as u64)
                })
                .map(|n| Some(n as usize))
                .ok_or_else(bad),
            Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    /// A boolean; "true"/"false" strings are accepted.
    pub fn opt_bool(args: &Value, key: &str) -> Result<Option<bool>, ToolError> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(_) => Err(ToolError::Arguments(format!(
                "`{key}` must be true or false"
            ))),
        }
    }

    /// The string argument `key` when present, for [`super::Tool::subject`].
    pub fn subject(args: &Value, key: &str) -> Option<String> {
        args.get(key).and_then(Value::as_str).map(str::to_string)
    }
}

#[cfg(test)]
pub(crate) fn test_context(dir: &Path) -> ToolContext {
    ToolContext {
        workdir: Workdir::new(dir).unwrap(),
        bash_timeout: Duration::from_secs(30),
        hidden_env: Vec::new(),
        os_sandbox: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(unix)]
    use serde_json::json;
    #[cfg(not(windows))]
    use std::fs;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;

    fn registry() -> (tempfile::TempDir, ToolRegistry) {
        let dir = tempfile::tempdir().unwrap();
        let r = ToolRegistry::builtin(test_context(dir.path()), &[]).unwrap();
        (dir, r)
    }

    #[tokio::test]
    async fn unknown_tools_and_bad_arguments_are_answered() {
        let (_d, r) = registry();
        let out = r.call("rm_rf", "{}").await;
        assert!(out.is_error);
        assert!(out.content.contains("unknown tool `rm_rf`"));
        assert!(
            out.content
                .contains("read_file, write_file, edit_file, list_files, glob, grep, bash")
        );
        let out = r.call("read_file", "{not json").await;
        assert!(out.is_error && out.content.contains("not valid JSON"));
        let out = r.call("read_file", "[1]").await;
        assert!(out.is_error && out.content.contains("JSON object"));
        let out = r.call("read_file", "{}").await;
        assert!(out.is_error && out.content.contains("`filepath` is required"));
    }

    #[cfg(unix)]
    /// The escape found by attacking the tools: a missing component, `..`, then a link to outside.
    /// Every file tool, several spellings each; nothing outside is read, listed or written.
    #[tokio::test]
    async fn no_file_tool_follows_a_link_out_after_a_missing_component() {
        let outer = tempfile::tempdir().unwrap();
        let work = outer.path().join("work");
        let secret_dir = outer.path().join("out");
        fs::create_dir_all(&work).unwrap();
        fs::create_dir_all(&secret_dir).unwrap();
        fs::write(secret_dir.join("s.txt"), "TOPSECRET\n").unwrap();
        symlink(&secret_dir, work.join("out")).unwrap();
        let r = ToolRegistry::builtin(test_context(&work), &[]).unwrap();
        let shapes = [
            "nothere/../out",
            "a/b/../../out",
            "nothere/./../out",
            "x//..//out",
            "nothere/../nothere/../out",
        ];
        for shape in shapes {
            let calls = [
                ("read_file", json!({"filepath": format!("{shape}/s.txt")})),
                (
                    "write_file",
                    json!({"filepath": format!("{shape}/new.txt"), "content": "x"}),
                ),
                (
                    "write_file",
                    json!({"filepath": format!("{shape}/s.txt"), "content": "x"}),
                ),
                (
                    "edit_file",
                    json!({"filepath": format!("{shape}/s.txt"), "old_string": "TOPSECRET", "new_string": "x"}),
                ),
                ("list_files", json!({"dirpath": shape})),
                ("list_files", json!({"dirpath": shape, "recursive": true})),
                ("grep", json!({"pattern": "TOPSECRET", "path": shape})),
                (
                    "grep",
                    json!({"pattern": "TOPSECRET", "path": format!("{shape}/s.txt")}),
                ),
                ("glob", json!({"pattern": "*.txt", "path": shape})),
            ];
            for (tool, args) in calls {
                let out = r.run(tool, &args).await;
                assert!(out.is_error, "{tool} {args}: {}", out.content);
                assert!(
                    out.content.contains("outside the working folder"),
                    "{tool} {args}: {}",
                    out.content
                );
                assert!(!out.content.contains("TOPSECRET") && !out.content.contains("s.txt:"));
            }
        }
        assert_eq!(
            fs::read_to_string(secret_dir.join("s.txt")).unwrap(),
            "TOPSECRET\n"
        );
        assert_eq!(fs::read_dir(&secret_dir).unwrap().count(), 1);
    }

    #[test]
    fn specs_are_valid_schemas() {
        let (_d, r) = registry();
        for spec in r.specs() {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(spec.parameters["properties"].is_object());
            assert!(!spec.description.is_empty());
        }
    }

    #[test]
    fn the_enabled_list_filters_and_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let r = ToolRegistry::builtin(
            test_context(dir.path()),
            &["grep".into(), "read_file".into()],
        )
        .unwrap();
        assert_eq!(r.names(), ["read_file", "grep"]);
        // The list names built-in tools: those of skills and subagents follow their own sections.
        assert!(r.allows("use_skill") && r.allows("agent") && r.allows("task_status"));
        assert!(!r.allows("bash"));
        let named = ToolRegistry::builtin(
            test_context(dir.path()),
            &["bash".into(), "agent".into(), "use_skill".into()],
        )
        .unwrap();
        assert_eq!(named.names(), ["bash"]);
        let err = ToolRegistry::builtin(test_context(dir.path()), &["rm".into()])
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("unknown tool `rm` in the config's `tools` list")
        );
    }
}
