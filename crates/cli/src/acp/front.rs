//! A turn's front end for an editor: the session's events become `session/update`
//! notifications (text, thoughts, tool calls with their kind, locations and diffs), its approvals
//! become `session/request_permission` requests, answered by the editor's user.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, PermissionOption, PermissionOptionKind,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCall as AcpToolCall,
    ToolCallContent, ToolCallId, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use tokio::sync::watch;

use super::wire::Wire;
use new_core::escape;
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
        "bash" => arg("command").lines().next().unwrap_or("").to_string(),
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

/// The files a call touches, absolute.
pub fn locations_of(call: &ToolCall, workdir: &Path) -> Vec<ToolCallLocation> {
    let args = arguments(call);
    let Some(path) = path_arg(&args) else {
        return Vec::new();
    };
    vec![ToolCallLocation::new(workdir.join(path))]
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
        outcome.content.clone(),
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
        .raw_input(arguments(call))
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
        if matches!(name, "write_file" | "edit_file")
            && let Some(path) = path_arg(&arguments(call))
        {
            let path = self.workdir.join(path);
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
