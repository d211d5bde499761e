//! What can go wrong with a hook, as data: an entry that cannot be read ([`HookError`], said as a
//! warning naming its file and place), a run that failed ([`RunError`], one line for the user
//! as a [`HookFailure`]), a subagent that gave no answer ([`SubagentError`]). Tests match the
//! variants; the front end says each in the user's language. The English text is `Display`.

use std::time::Duration;

use new_sys::os_sandbox::{OsCause, SandboxError};

/// A hook entry that cannot be used; it is left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    #[error("an entry must be an object")]
    NotAnObject,
    #[error("unknown field `{0}`")]
    UnknownField(String),
    /// A field that must be there (`name`, `action.command`, …).
    #[error("`{0}` is required")]
    Missing(&'static str),
    #[error("`action.agent` (the subagent role) is required")]
    MissingRole,
    #[error("`event` {0:?} is not one of {events}", events = super::EVENTS.join(", "))]
    UnknownEvent(String),
    #[error("`{0}` must be true or false")]
    NotABool(&'static str),
    #[error("`action` must be an object")]
    ActionNotAnObject,
    #[error("`action.{map}.{key}` must be a string")]
    NotAString { map: &'static str, key: String },
    #[error("`action.{0}` must be an object of strings")]
    NotAMap(&'static str),
    #[error("`action.timeout` must be like \"10s\", \"500ms\" or \"2m\"")]
    BadTimeout,
    #[error("`action.url` {0:?} must start with http:// or https://")]
    BadUrl(String),
    #[error("`action.type` {0:?} must be command, http, prompt or agent")]
    UnknownAction(String),
    /// The condition at `at` (`condition`, `condition.all[1]`) is not one.
    #[error("{}", problem.at(at))]
    BadCondition {
        at: String,
        problem: ConditionProblem,
    },
    /// A Claude Code matcher that is not a regular expression.
    #[error("`matcher` {pattern:?} is not a pattern: {reason}")]
    BadMatcher { pattern: String, reason: String },
}

/// What is wrong with a condition; its text needs the place ([`ConditionProblem::at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConditionProblem {
    NotAnObject,
    /// `all` or `any` that is not a list.
    NotAList(&'static str),
    MissingField,
    UnknownField(String),
    UnknownOp(String),
    MissingValue,
    BadGlob(String),
}

/// The fields a condition can test, as the config names them.
pub const CONDITION_FIELDS: &str = "tool_name, tool_input.<name>, tool_response, response, prompt, cwd, session_id, event or iteration";

impl ConditionProblem {
    /// The problem said of the condition at `at`.
    pub fn at(&self, at: &str) -> String {
        match self {
            ConditionProblem::NotAnObject => format!("`{at}` must be an object"),
            ConditionProblem::NotAList(key) => format!("`{at}.{key}` must be a list"),
            ConditionProblem::MissingField => format!("`{at}.field` is required"),
            ConditionProblem::UnknownField(field) => {
                format!("`{at}.field` {field:?} must be {CONDITION_FIELDS}")
            }
            ConditionProblem::UnknownOp(op) => {
                format!("`{at}.op` {op:?} must be eq, neq, glob or contains")
            }
            ConditionProblem::MissingValue => format!("`{at}.value` is required (a string)"),
            ConditionProblem::BadGlob(reason) => format!("`{at}.value`: {reason}"),
        }
    }
}

/// Why a hook's subagent gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubagentError {
    #[error("no subagent role `{role}`; the roles are {known}", known = .known.join(", "))]
    UnknownRole { role: String, known: Vec<String> },
    #[error(
        "the role `{role}` is the project's ({file}): a hook of yours runs only your own roles and the built-in ones"
    )]
    ProjectRole { role: String, file: String },
    #[error("storing the hook's task: {reason}")]
    Store { reason: String },
    #[error("no runtime to run the subagent on")]
    NoRuntime,
    #[error("starting the subagent's thread: {cause}")]
    Thread { cause: OsCause },
    #[error("the subagent failed: {reason}")]
    Failed { reason: String },
    #[error("the subagent stopped: {reason}")]
    Stopped { reason: String },
    #[error("the subagent was interrupted")]
    Interrupted,
    #[error("the subagent gave no answer")]
    NoAnswer,
    #[error("the subagent ended without an answer")]
    Ended,
}

/// Why one run of a hook failed (it never stops the turn).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("agent hooks cannot run here (no subagents)")]
    NoSubagents,
    #[error("the subagent did not answer within {secs} s", secs = .timeout.as_secs())]
    SubagentTimeout { timeout: Duration },
    #[error(transparent)]
    Subagent(SubagentError),
    #[error("cannot make an HTTP client: {reason}")]
    HttpClient { reason: String },
    /// The request could not be sent or answered (the reason names the URL).
    #[error("{reason}")]
    Request { reason: String },
    #[error("HTTP {status}")]
    Status { status: reqwest::StatusCode },
    #[error("cannot start it in the sandbox: {0}")]
    Sandbox(SandboxError),
    #[error("cannot start: {cause}")]
    Start { cause: OsCause },
    /// Ended with a code other than 0 and 2; the first line it wrote on stderr.
    #[error("exit code {code}: {stderr}")]
    Exit { code: i32, stderr: String },
    #[error("it was killed by a signal")]
    Killed,
    #[error("waiting for it: {cause}")]
    Wait { cause: OsCause },
    #[error("no answer within {secs} s; stopped", secs = .timeout.as_secs_f64())]
    Timeout { timeout: Duration },
}

/// A hook that failed, timed out or crashed: one line for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hook `{name}` ({event}): {error}")]
pub struct HookFailure {
    pub name: String,
    pub event: String,
    pub error: RunError,
}
