//! A turn's front end for an editor: the session's events become `session/update`
//! notifications (text, thoughts, tool calls with their kind, locations and diffs), its approvals
//! become `session/request_permission` requests, answered by the editor's user.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, PermissionOption, PermissionOptionKind, ReadTextFileRequest,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCall as AcpToolCall,
    ToolCallContent, ToolCallId, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use tokio::sync::watch;

use super::wire::Wire;
use new_core::escape;
use new_core::fs::confine::{OpenBuffers, Workdir};
use new_core::fs::project_file::ProjectFiles;
use new_core::session::{Answer, Approval, Event, Frontend};
use new_core::tools::ToolOutcome;
use new_core::vocab::ToolCall;

/// The most of a file read for a diff.
const DIFF_LIMIT: usize = 1 << 20;

/// The turn running now, as the reading thread sees it: which session, and how to stop it.
pub struct Running {
    pub session: String,
    pub cancelled: AtomicBool,
    pub interrupts: Arc<watch::Sender<u64>>,
}

impl Running {
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.interrupts.send_modify(|n| *n += 1);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// The longest an editor's answer to a read is waited for before the disk is read instead.
const READ_WAIT: Duration = Duration::from_secs(10);

/// The editor's buffers (it offered `fs.readTextFile`): a read of a file inside WORKDIR asks it
/// for its text, unsaved changes included; an error or no answer reads the disk. Writes never
/// go through the editor (checkpoints and diffs are ours).
pub struct EditorFiles {
    pub wire: Arc<Wire>,
    /// The editor session whose turn runs (the request names it).
    pub session: Arc<Mutex<String>>,
}

impl fmt::Debug for EditorFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EditorFiles")
    }
}

impl OpenBuffers for EditorFiles {
    fn text(&self, path: &Path) -> Option<String> {
        let session = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let reply = self.wire.request(
            "fs/read_text_file",
            ReadTextFileRequest::new(session, path.to_path_buf()),
        );
        match reply.recv_timeout(READ_WAIT) {
            Ok(Ok(result)) => result["content"].as_str().map(str::to_string),
            Ok(Err(e)) => {
                tracing::info!(error = %e, path = %path.display(), "the editor did not read a file: the disk is read");
                None
            }
            Err(_) => None,
        }
    }
}

/// The kind an editor shows for one of our tools.
pub fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "use_skill" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "grep" | "glob" | "list_files" => ToolKind::Search,
        "agent" => ToolKind::Think,
        t if t.contains("fetch") => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

fn arguments(call: &ToolCall) -> Value {
    serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null)
}

/// The arguments as the editor is shown them: every string with its control characters (an
/// escape sequence, a carriage return) escaped, newlines and tabs kept.
fn shown_arguments(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(escape::escape_controls_keep_lines(&text)),
        Value::Array(items) => Value::Array(items.into_iter().map(shown_arguments).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (escape::escape_controls(&k), shown_arguments(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A path the model gave, resolved inside WORKDIR as the file tools resolve it (links followed,
/// `..` applied); None when it leads out, or names what no editor should be sent to.
fn inside(workdir: &Path, path: &str) -> Option<PathBuf> {
    if path.chars().any(char::is_control) {
        return None;
    }
    Workdir::new(workdir).ok()?.resolve(path).ok()
}

/// The file a call names (`filepath` for the file tools, `path` for the searches).
fn path_arg(args: &Value) -> Option<&str> {
    ["filepath", "path", "file_path"]
        .iter()
        .find_map(|k| args[*k].as_str())
        .filter(|p| !p.is_empty())
}

/// A line naming the call: the command for `bash`, the file or pattern for the others.
pub fn title_of(call: &ToolCall) -> String {
    let args = arguments(call);
    let arg = |k: &str| args[k].as_str().unwrap_or("").to_string();
    let path = path_arg(&args).unwrap_or(".").to_string();
    let name = call.function.name.as_str();
    let title = match name {
        // The whole command: a second line must not hide behind the first.
        "bash" => arg("command"),
        "read_file" => format!("Read {path}"),
        "write_file" => format!("Write {path}"),
        "edit_file" => format!("Edit {path}"),
        "list_files" => format!("List {path}"),
        "grep" => format!("grep {}", arg("pattern")),
        "glob" => format!("glob {}", arg("pattern")),
        _ => name.to_string(),
    };
    let title = if title.trim().is_empty() {
        name.to_string()
    } else {
        title
    };
    escape::preview(&escape::escape_controls(&title), 120)
}

/// The files a call touches, absolute and inside WORKDIR (a path that leads out is no place to
/// send the editor).
pub fn locations_of(call: &ToolCall, workdir: &Path) -> Vec<ToolCallLocation> {
    let args = arguments(call);
    path_arg(&args)
        .and_then(|path| inside(workdir, path))
        .map(ToolCallLocation::new)
        .into_iter()
        .collect()
}

/// The update that closes a call: its status and what it gave.
pub fn result_update(call: &ToolCall, outcome: &ToolOutcome, diff: Option<Diff>) -> ToolCallUpdate {
    let status = if outcome.is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let mut content = Vec::new();
    if let Some(diff) = diff.filter(|_| !outcome.is_error) {
        content.push(ToolCallContent::Diff(diff));
    }
    content.push(ToolCallContent::from(ContentBlock::from(
        escape::escape_controls_keep_lines(&outcome.content),
    )));
    ToolCallUpdate::new(
        ToolCallId::new(call.id.as_str()),
        ToolCallUpdateFields::new().status(status).content(content),
    )
}

/// The call as the editor first sees it.
pub fn call_started(call: &ToolCall, workdir: &Path, status: ToolCallStatus) -> AcpToolCall {
    AcpToolCall::new(ToolCallId::new(call.id.as_str()), title_of(call))
        .kind(kind_of(&call.function.name))
        .status(status)
        .locations(locations_of(call, workdir))
        .raw_input(shown_arguments(arguments(call)))
}

/// Sends one `session/update`.
pub fn update(wire: &Wire, session: &str, update: SessionUpdate) {
    wire.notify(
        "session/update",
        SessionNotification::new(session.to_string(), update),
    );
}

/// The front end of one turn (or one command) of one editor session.
pub struct Turn<'a> {
    pub wire: &'a Wire,
    pub session: String,
    pub workdir: PathBuf,
    files: ProjectFiles,
    running: Arc<Running>,
    /// Calls announced and not finished: id, tool.
    open: Vec<(String, String)>,
    /// What a file held before a call that writes it (None: it did not exist).
    before: HashMap<String, (PathBuf, Option<String>)>,
    /// The finish reason of the last answer.
    pub finish: Option<String>,
    /// Everything said as the agent's text (for commands' answers in tests and logs).
    pub said: String,
}

impl<'a> Turn<'a> {
    pub fn new(wire: &'a Wire, session: &str, workdir: &Path, running: Arc<Running>) -> Self {
        Turn {
            wire,
            session: session.to_string(),
            workdir: workdir.to_path_buf(),
            files: ProjectFiles::new(workdir),
            running,
            open: Vec::new(),
            before: HashMap::new(),
            finish: None,
            said: String::new(),
        }
    }

    /// Text from the agent, as a message chunk.
    pub fn say(&mut self, text: &str) {
        self.said.push_str(text);
        update(
            self.wire,
            &self.session,
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text))),
        );
    }

    fn read(&self, path: &Path) -> Option<String> {
        match self.files.read(path, DIFF_LIMIT) {
            Ok(Some(b)) if !b.truncated => Some(b.text()),
            _ => None,
        }
    }

    fn call(&mut self, call: &ToolCall) {
        let name = call.function.name.as_str();
        // A diff only of a file inside WORKDIR: a path that leads out is refused by the tool,
        // and nothing outside is read for it.
        if matches!(name, "write_file" | "edit_file")
            && let Some(path) = path_arg(&arguments(call)).and_then(|p| inside(&self.workdir, p))
        {
            let old = self.read(&path);
            self.before.insert(call.id.clone(), (path, old));
        }
        self.open.push((call.id.clone(), name.to_string()));
        update(
            self.wire,
            &self.session,
            SessionUpdate::ToolCall(call_started(call, &self.workdir, ToolCallStatus::Pending)),
        );
    }

    fn result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        self.open.retain(|(id, _)| *id != call.id);
        let diff = self.before.remove(&call.id).and_then(|(path, old)| {
            let new = self.read(&path)?;
            Some(Diff::new(path, new).old_text(old))
        });
        update(
            self.wire,
            &self.session,
            SessionUpdate::ToolCallUpdate(result_update(call, outcome, diff)),
        );
    }

    /// The editor's user's answer to a permission request, waited for; a cancel or a closed
    /// stdin interrupts the turn.
    fn ask(&mut self, question: &Approval) -> Answer {
        // The call asked about, as the engine names it; without an id (never from the gate
        // today), the latest open call of that tool.
        let id = if question.call_id.is_empty() {
            self.open
                .iter()
                .rev()
                .find(|(_, tool)| *tool == question.tool)
                .map(|(id, _)| id.clone())
                .unwrap_or_else(|| format!("approval-{}", question.tool))
        } else {
            question.call_id.clone()
        };
        let mut options = vec![PermissionOption::new(
            "allow-once",
            "Allow once",
            PermissionOptionKind::AllowOnce,
        )];
        if !question.yes_or_no() {
            options.push(PermissionOption::new(
                "allow-session",
                "Allow for this session",
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(PermissionOption::new(
            "reject",
            "Reject",
            PermissionOptionKind::RejectOnce,
        ));
        let fields = ToolCallUpdateFields::new()
            .title(escape::preview(
                &escape::escape_controls(&question.preview),
                200,
            ))
            .kind(kind_of(&question.tool));
        let request = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new(ToolCallId::new(id), fields),
            options,
        );
        let reply = self.wire.request("session/request_permission", request);
        let reply = loop {
            match reply.recv_timeout(Duration::from_millis(100)) {
                Ok(reply) => break reply,
                Err(RecvTimeoutError::Timeout) if !self.running.is_cancelled() => {}
                Err(_) => return Answer::Interrupted,
            }
        };
        let Ok(result) = reply else {
            return Answer::Deny(String::new());
        };
        match (
            result["outcome"]["outcome"].as_str(),
            result["outcome"]["optionId"].as_str(),
        ) {
            (Some("selected"), Some("allow-once")) => Answer::Once,
            (Some("selected"), Some("allow-session")) => Answer::Session,
            (Some("cancelled"), _) => Answer::Interrupted,
            _ => Answer::Deny(String::new()),
        }
    }
}

impl Frontend for Turn<'_> {
    fn event(&mut self, event: Event) {
        // A cancel that came before the loop listened is raised again.
        if self.running.is_cancelled() {
            self.running.interrupts.send_modify(|n| *n += 1);
        }
        match event {
            Event::Text(t) => self.say(&t),
            Event::Reasoning(t) => update(
                self.wire,
                &self.session,
                SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::from(t))),
            ),
            Event::ToolCall(call) => self.call(&call),
            Event::ToolResult { call, outcome } => self.result(&call, &outcome),
            Event::AnswerEnd { response, .. } => self.finish = response.finish_reason,
            _ => {}
        }
    }

    fn can_ask(&self) -> bool {
        true
    }

    fn approve(&mut self, question: &Approval) -> Answer {
        self.ask(question)
    }
}
