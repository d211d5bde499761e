//! Other agents' history as `new` conversations (`new import claude|codex|pi PATH…`): Claude
//! Code's transcripts (`~/.claude/projects/*/*.jsonl`, already a tree by `uuid`/`parentUuid`),
//! Codex's rollouts (`~/.codex/sessions/…/rollout-*.jsonl`, a line) and pi's sessions
//! (`~/.pi/agent/sessions/…/*.jsonl`, a tree by `id`/`parentId`). Each file becomes a new
//! conversation file of its own; the original is only read. Messages keep their text, their
//! tool calls and results, their models, usage and times; Claude Code's sidechains (its
//! subagents' work) become subagent conversations under the call that started them.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::message::{Message, model_name};
use super::record::{BranchRecord, Record, TitleRecord, format_timestamp};
use super::{Conversation, Store};
use crate::vocab;
use crate::vocab::{FunctionCall, Role, ToolCall, Usage};
use crate::vocab::{Id, new_id};
use new_sys::platform;
use std::collections::VecDeque;
use std::fs;
use std::io;
use std::io::BufReader;
use std::io::ErrorKind;
use std::io::Read;
use std::mem;
use std::str;

/// Whose history a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Claude,
    Codex,
    Pi,
}

impl Source {
    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "claude" | "claude-code" => Some(Source::Claude),
            "codex" => Some(Source::Codex),
            "pi" => Some(Source::Pi),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Source::Claude => "Claude Code",
            Source::Codex => "Codex",
            Source::Pi => "pi",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Source::Claude => "claude",
            Source::Codex => "codex",
            Source::Pi => "pi",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} holds no message of {what}'s history; nothing imported")]
    Empty { path: PathBuf, what: &'static str },
    #[error("{path} was imported already, as {id}")]
    Already { path: PathBuf, id: String },
    #[error("writing the conversation for {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// What one file became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub id: String,
    pub messages: usize,
    /// Subagent conversations made of its sidechains.
    pub subagents: Vec<String>,
    /// Lines that could not be read (numbers, from 1).
    pub skipped: Vec<usize>,
    /// Lines longer than [`MAX_LINE_BYTES`], left out unread (numbers, from 1).
    pub too_long: Vec<usize>,
}

/// The longest line of another agent's file that is read: a longer one (a hostile or broken
/// file's, hundreds of megabytes) is passed over, never held, and said.
pub const MAX_LINE_BYTES: usize = 32 << 20;

/// A file's lines: the JSON objects with their numbers (from 1), the numbers of the lines that
/// are not objects, and of those longer than the limit.
#[derive(Debug, Default, PartialEq)]
struct Lines {
    lines: Vec<(usize, Value)>,
    skipped: Vec<usize>,
    too_long: Vec<usize>,
}

/// Reads `reader` a line at a time, holding at most `max` bytes of one line: the rest of a
/// longer line is read past, not kept.
fn read_lines(mut reader: impl BufRead, max: usize) -> io::Result<Lines> {
    let mut out = Lines::default();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let mut over = false;
        let mut any = false;
        loop {
            let available = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                break;
            }
            any = true;
            let end = memchr::memchr(b'\n', available);
            let chunk = &available[..end.unwrap_or(available.len())];
            if !over && line.len() + chunk.len() > max {
                over = true;
                line = Vec::new();
            }
            if !over {
                line.extend_from_slice(chunk);
            }
            let used = end.map_or(available.len(), |e| e + 1);
            reader.consume(used);
            if end.is_some() {
                break;
            }
        }
        if !any {
            return Ok(out);
        }
        number += 1;
        if over {
            out.too_long.push(number);
            continue;
        }
        let Ok(text) = str::from_utf8(&line) else {
            out.skipped.push(number);
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(v) if v.is_object() => out.lines.push((number, v)),
            _ => out.skipped.push(number),
        }
    }
}

/// A conversation being built: messages in an order where parents come first once placed.
struct Draft {
    messages: Vec<Message>,
    title: Option<String>,
    labels: Vec<(String, String)>,
    skipped: Vec<usize>,
    /// The foreign session's id, to know a file imported twice.
    session: Option<String>,
    cwd: Option<String>,
    /// A file of one subagent's work alone (Claude Code's `agent-*.jsonl`): the session it
    /// belongs to, and the agent's id.
    sidechain_of: Option<(String, Option<String>)>,
    /// Claude Code 2.1's subagents by the call that ran them: (agent id, the call's message,
    /// the call's id), from a result's `toolUseResult.agentId`.
    agents: Vec<(String, String, String)>,
}

impl Draft {
    fn new() -> Draft {
        Draft {
            messages: Vec::new(),
            title: None,
            labels: Vec::new(),
            skipped: Vec::new(),
            session: None,
            cwd: None,
            sidechain_of: None,
            agents: Vec::new(),
        }
    }
}

/// Imports one file into `store`.
pub fn import(store: &Store, source: Source, path: &Path) -> Result<Imported, ImportError> {
    let read_err = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    // A regular file only (a FIFO would hang, a device never end), links followed.
    let meta = fs::metadata(path).map_err(read_err)?;
    if !meta.is_file() {
        return Err(read_err(io::Error::other("not a regular file")));
    }
    let file = platform::nonblocking_read_options()
        .open(path)
        .map_err(read_err)?;
    let read = read_lines(BufReader::new(file), MAX_LINE_BYTES).map_err(read_err)?;
    let lines = read.lines;
    let (mut main, sidechains) = match source {
        Source::Claude => claude(&lines),
        Source::Codex => (codex(&lines), Vec::new()),
        Source::Pi => (pi(&lines), Vec::new()),
    };
    main.skipped = read.skipped;
    // One subagent's file (newer Claude Code keeps each in `<session>/subagents/agent-*.jsonl`):
    // its own key, and a subagent conversation under its session's, once that is imported.
    let mut under: Option<Value> = None;
    if let Some((session, agent)) = main.sidechain_of.clone() {
        let key = format!(
            "{session}/agent-{}",
            agent.unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
        );
        if let Some(parent) = already(store, source, &session) {
            // Under the call that ran it, when the session's results named it.
            let call = agent_id(path, &main).and_then(|agent| {
                header(store, &parent)?["metadata"]["imported"]["agents"]
                    .get(agent)
                    .cloned()
            });
            under = Some(json!({
                "conversation": parent,
                "msg_id": call.as_ref().map_or(Value::Null, |c| c["msg_id"].clone()),
                "tool_call_id": call.as_ref().map_or(Value::Null, |c| c["tool_call_id"].clone()),
            }));
        }
        main.session = Some(key);
    }
    if main.messages.is_empty() {
        return Err(ImportError::Empty {
            path: path.to_path_buf(),
            what: source.label(),
        });
    }
    if let Some(session) = &main.session
        && let Some(id) = already(store, source, session)
    {
        return Err(ImportError::Already {
            path: path.to_path_buf(),
            id,
        });
    }
    let id = write(store, source, path, &mut main, under)?;
    let mut subagents = Vec::new();
    for mut side in sidechains {
        // Under the `Task` call whose prompt started it, else under the conversation.
        let first = side
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.trim().to_string());
        let call = main.messages.iter().find_map(|m| {
            m.calls().iter().find_map(|c| {
                let args: Value = serde_json::from_str(&c.function.arguments).ok()?;
                (first.is_some() && args["prompt"].as_str().map(str::trim) == first.as_deref())
                    .then(|| (m.id.clone(), c.id.clone()))
            })
        });
        let parent = json!({
            "conversation": id,
            "msg_id": call.as_ref().map(|c| c.0.clone()),
            "tool_call_id": call.as_ref().map(|c| c.1.clone()),
        });
        side.session = None;
        subagents.push(write(store, source, path, &mut side, Some(parent))?);
    }
    Ok(Imported {
        id,
        messages: main.messages.len(),
        subagents,
        skipped: main.skipped,
        too_long: read.too_long,
    })
}

/// The id of the agent whose file this is: its lines' `agentId`, else the file's name
/// (`agent-<id>.jsonl`).
fn agent_id<'a>(path: &'a Path, draft: &'a Draft) -> Option<&'a str> {
    draft
        .sidechain_of
        .as_ref()
        .and_then(|(_, a)| a.as_deref())
        .or_else(|| path.file_stem()?.to_str()?.strip_prefix("agent-"))
}

/// The header line of conversation `id` in `store`.
fn header(store: &Store, id: &str) -> Option<Value> {
    let file = super::store::open_regular(&store.path(id), false).ok()?;
    let mut first = Vec::new();
    let mut reader = BufReader::new(Read::take(file, 64 * 1024));
    reader.read_until(b'\n', &mut first).ok()?;
    serde_json::from_slice(&first).ok()
}

/// The conversation in `store` imported from `session` already, if any (its header says).
fn already(store: &Store, source: Source, session: &str) -> Option<String> {
    store.ids().ok()?.into_iter().find(|id| {
        let Ok(file) = super::store::open_regular(&store.path(id), false) else {
            return false;
        };
        let mut first = Vec::new();
        let mut reader = BufReader::new(Read::take(file, 64 * 1024));
        if reader.read_until(b'\n', &mut first).is_err() {
            return false;
        }
        serde_json::from_slice::<Value>(&first).is_ok_and(|h| {
            let from = &h["metadata"]["imported"];
            from["from"] == source.key() && from["session"] == session
        })
    })
}

/// Writes a draft as a new conversation file: its header (with where it came from), its
/// messages (a parent never seen becomes the root), its title and its labels as branch names.
fn write(
    store: &Store,
    source: Source,
    path: &Path,
    draft: &mut Draft,
    parent: Option<Value>,
) -> Result<String, ImportError> {
    let write_err = |source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let id = loop {
        let id = new_id();
        if !store.exists(&id) {
            break id;
        }
    };
    let mut conversation = Conversation::new(id.clone(), "");
    let root: Id = conversation.root_id.as_str().into();
    let mut metadata = Map::new();
    metadata.insert(
        "imported".into(),
        json!({
            "from": source.key(),
            "path": path.display().to_string(),
            "session": draft.session,
            "cwd": draft.cwd,
        }),
    );
    if !draft.agents.is_empty() {
        let agents: Map<String, Value> = draft
            .agents
            .iter()
            .map(|(agent, msg, call)| (agent.clone(), json!({"msg_id": msg, "tool_call_id": call})))
            .collect();
        metadata["imported"]["agents"] = Value::Object(agents);
    }
    if let Some(parent) = parent {
        metadata.insert("parent".into(), parent);
        metadata.insert("agent".into(), json!("imported"));
    }
    conversation.metadata = metadata;
    unique_call_ids(&mut draft.messages);
    let known: HashSet<Id> = draft.messages.iter().map(|m| m.id.clone()).collect();
    for m in &mut draft.messages {
        if m.parent_id.as_ref().is_none_or(|p| !known.contains(p)) {
            m.parent_id = Some(root.clone());
        }
    }
    // Parents before children, whatever the order of the file.
    let mut placed: HashSet<Id> = HashSet::from([root.clone()]);
    let mut records = Vec::with_capacity(draft.messages.len() + 2);
    let mut waiting: Vec<&Message> = draft.messages.iter().collect();
    while !waiting.is_empty() {
        let before = waiting.len();
        waiting.retain(|m| {
            if placed.contains(m.parent_id.as_deref().unwrap_or("")) {
                placed.insert(m.id.clone());
                records.push(Record::Message(Box::new((*m).clone())));
                false
            } else {
                true
            }
        });
        // A cycle of parents: what is left hangs under the root.
        if waiting.len() == before {
            let m = waiting.remove(0);
            let mut m = m.clone();
            m.parent_id = Some(root.clone());
            placed.insert(m.id.clone());
            records.push(Record::Message(Box::new(m)));
        }
    }
    let first_user = draft
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone());
    if let Some(title) = draft.title.clone().or(first_user) {
        let line: String = title.split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = line.chars().take(60).collect();
        records.push(Record::Title(TitleRecord {
            title: format!("({}) {short}", source.label()),
            timestamp: Some(format_timestamp(&super::message::now())),
        }));
    }
    for (name, target) in &draft.labels {
        if super::valid_branch_name(name) && placed.contains(target.as_str()) {
            records.push(Record::Branch(BranchRecord {
                msg_id: target.clone(),
                name: name.clone(),
                timestamp: Some(format_timestamp(&super::message::now())),
                deleted: false,
            }));
        }
    }
    store.create(&conversation, &records).map_err(write_err)?;
    Ok(id)
}

/// Gives a tool call with no id, or one an earlier call has, an id of its own, and the result
/// that answers it (the next one naming the old id) the same: providers refuse a request whose
/// calls share an id.
fn unique_call_ids(messages: &mut [Message]) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut renamed: HashMap<String, VecDeque<String>> = HashMap::new();
    let mut n = 0;
    for m in messages.iter_mut() {
        if let Some(calls) = &mut m.extra.tool_calls {
            for c in calls {
                if c.id.is_empty() || seen.contains(&c.id) {
                    let fresh = loop {
                        n += 1;
                        let id = format!("imported_call_{n}");
                        if !seen.contains(&id) {
                            break id;
                        }
                    };
                    renamed
                        .entry(mem::replace(&mut c.id, fresh.clone()))
                        .or_default()
                        .push_back(fresh);
                }
                seen.insert(c.id.clone());
            }
        }
        if m.role == Role::Tool {
            let old = m.extra.tool_call_id.as_deref().unwrap_or_default();
            if let Some(fresh) = renamed.get_mut(old).and_then(|q| q.pop_front()) {
                m.extra.tool_call_id = Some(fresh.into());
            }
        }
    }
}

fn timestamp(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc)),
        Value::Number(n) => n.as_i64().and_then(DateTime::from_timestamp_millis),
        _ => None,
    }
}

fn message(
    role: Role,
    content: String,
    parent: Option<String>,
    at: Option<DateTime<Utc>>,
) -> Message {
    let mut m = Message::new(role, content);
    m.parent_id = parent.map(Id::from);
    if let Some(at) = at {
        m.timestamp = at;
    }
    m
}

fn call(id: &str, name: &str, arguments: &Value) -> ToolCall {
    ToolCall {
        id: id.to_string(),
        kind: "function".into(),
        function: FunctionCall {
            name: name.to_string(),
            arguments: match arguments {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
        },
    }
}

/// The text of a content value: a string, or the `text` of its blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Value::String(s) => Some(s.as_str()),
                _ => b["text"].as_str(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Claude Code's tool names as ours, where we have the tool.
fn our_tool_name(claude: &str) -> String {
    vocab::canonical(claude).to_string()
}

/// Claude Code: a tree of entries by `uuid`/`parentUuid`; one API answer is written as several
/// `assistant` entries (one per content block, the same `message.id`), merged back here; a
/// `user` entry's `tool_result` blocks are the results; `isMeta` entries (notes Claude Code adds)
/// are left out; a `summary` line is the title. Returns the main line and each sidechain tree.
fn claude(lines: &[(usize, Value)]) -> (Draft, Vec<Draft>) {
    let all_side = lines
        .iter()
        .filter(|(_, v)| matches!(v["type"].as_str(), Some("user" | "assistant")))
        .all(|(_, v)| v["isSidechain"] == true);
    let mut main = Draft::new();
    if all_side && let Some((_, v)) = lines.iter().find(|(_, v)| v["sessionId"].is_string()) {
        main.sidechain_of = Some((
            v["sessionId"].as_str().unwrap_or("").to_string(),
            v["agentId"].as_str().map(str::to_string),
        ));
    }
    let mut sides: Vec<Draft> = Vec::new();
    // A sidechain's tree, by the uuid of any of its entries.
    let mut side_of: HashMap<String, usize> = HashMap::new();
    // Entry uuid → our message id (the last one it became).
    let mut ours: HashMap<String, String> = HashMap::new();
    // Our assistant message id → its API answer's id (to merge the next block into it).
    let mut answer_of: HashMap<String, String> = HashMap::new();
    for (_, v) in lines {
        let kind = v["type"].as_str().unwrap_or("");
        if kind == "summary" {
            if let Some(s) = v["summary"].as_str() {
                main.title.get_or_insert_with(|| s.to_string());
            }
            continue;
        }
        if !matches!(kind, "user" | "assistant") || v["isMeta"] == true {
            // Not a message; its children hang on its parent. A compact boundary has no parent
            // but a logical one: the branch goes on from there, not from the root.
            let parent = v["parentUuid"]
                .as_str()
                .or_else(|| v["logicalParentUuid"].as_str());
            if let (Some(uuid), Some(parent)) = (v["uuid"].as_str(), parent)
                && let Some(p) = ours.get(parent).cloned()
            {
                ours.insert(uuid.to_string(), p);
            }
            continue;
        }
        let Some(uuid) = v["uuid"].as_str() else {
            continue;
        };
        let parent_uuid = v["parentUuid"].as_str();
        let draft: &mut Draft = if v["isSidechain"] == true && !all_side {
            let at = parent_uuid.and_then(|p| side_of.get(p).copied());
            let n = at.unwrap_or_else(|| {
                sides.push(Draft::new());
                sides.len() - 1
            });
            side_of.insert(uuid.to_string(), n);
            &mut sides[n]
        } else {
            &mut main
        };
        draft.session = draft
            .session
            .take()
            .or_else(|| v["sessionId"].as_str().map(str::to_string));
        draft.cwd = draft
            .cwd
            .take()
            .or_else(|| v["cwd"].as_str().map(str::to_string));
        // Old files have no parent links at all: their entries are a line, in order.
        let parent = match v.get("parentUuid") {
            None => draft.messages.last().map(|m| m.id.to_string()),
            Some(_) => parent_uuid.and_then(|p| ours.get(p).cloned()),
        };
        let at = timestamp(&v["timestamp"]);
        let body = &v["message"];
        let content = &body["content"];
        if kind == "assistant" {
            let answer = body["id"].as_str().map(str::to_string);
            // The next block of the answer its parent holds: the same message.
            let same = parent
                .as_ref()
                .filter(|p| answer.is_some() && answer_of.get(*p) == answer.as_ref());
            let index = match same.and_then(|p| draft.messages.iter().rposition(|m| &m.id == p)) {
                Some(i) => i,
                None => {
                    let mut m = message(Role::Assistant, String::new(), parent.clone(), at);
                    m.extra.model = body["model"].as_str().map(model_name);
                    draft.messages.push(m);
                    draft.messages.len() - 1
                }
            };
            let m = &mut draft.messages[index];
            let blocks = match content {
                Value::Array(b) => b.clone(),
                Value::String(s) => vec![json!({"type": "text", "text": s})],
                _ => Vec::new(),
            };
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => {
                        let t = b["text"].as_str().unwrap_or("");
                        if !m.content.is_empty() {
                            m.content.push_str("\n\n");
                        }
                        m.content.push_str(t);
                    }
                    Some("thinking") => {
                        let t = b["thinking"].as_str().unwrap_or("");
                        m.extra.rare.reasoning = Some(match m.extra.rare.reasoning.take() {
                            Some(r) => format!("{r}\n\n{t}"),
                            None => t.to_string(),
                        });
                    }
                    Some("tool_use") => {
                        let name = our_tool_name(b["name"].as_str().unwrap_or(""));
                        let id = b["id"].as_str().unwrap_or("");
                        m.extra.tool_calls.get_or_insert_with(Vec::new).push(call(
                            id,
                            &name,
                            &b["input"],
                        ));
                    }
                    _ => {}
                }
            }
            if let Some(u) = body.get("usage").filter(|u| u.is_object()) {
                m.extra.usage = Some(Box::new(Usage {
                    input_tokens: u["input_tokens"].as_u64().unwrap_or(0),
                    output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
                    cache_read_tokens: u["cache_read_input_tokens"].as_u64(),
                    cache_write_tokens: u["cache_creation_input_tokens"].as_u64(),
                    ..Default::default()
                }));
            }
            let id = m.id.to_string();
            if let Some(answer) = answer {
                answer_of.insert(id.clone(), answer);
            }
            ours.insert(uuid.to_string(), id);
            continue;
        }
        // A user entry: its text, or its tool results (one message each, in a chain).
        let mut last = parent;
        let blocks: Vec<Value> = match content {
            Value::Array(b) => b.clone(),
            other => vec![json!({"type": "text", "text": text_of(other)})],
        };
        let text = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
            // Claude Code 2.1: the result of an `Agent` (`Task`) call names the agent whose
            // file (`subagents/agent-<id>.jsonl`) holds its work.
            if let (Some(agent), Some(call)) = (
                v["toolUseResult"]["agentId"].as_str(),
                b["tool_use_id"].as_str(),
            ) && let Some(m) = draft
                .messages
                .iter()
                .rev()
                .find(|m| m.calls().iter().any(|c| c.id == call))
            {
                draft
                    .agents
                    .push((agent.to_string(), m.id.to_string(), call.to_string()));
            }
            let mut result = text_of(&b["content"]);
            if b["is_error"] == true {
                result = format!("Error: {result}");
            }
            let mut m = message(Role::Tool, result, last.clone(), at);
            m.extra.tool_call_id = b["tool_use_id"].as_str().map(Id::new);
            last = Some(m.id.to_string());
            draft.messages.push(m);
        }
        if !text.trim().is_empty() {
            let m = message(Role::User, text, last.clone(), at);
            last = Some(m.id.to_string());
            draft.messages.push(m);
        }
        if let Some(last) = last {
            ours.insert(uuid.to_string(), last);
        }
    }
    (main, sides)
}

/// Codex: a line of items, each line `{type, payload}` (older files: the items themselves after
/// a first line of metadata). Messages of the user and the assistant (the instructions and the
/// environment Codex repeats are left out), function calls attached to the answer that made them,
/// their outputs as results, reasoning summaries as reasoning, a compaction's summary as a
/// message.
fn codex(lines: &[(usize, Value)]) -> Draft {
    let mut draft = Draft::new();
    let mut model: Option<String> = None;
    let mut last: Option<String> = None;
    let mut pending_reasoning: Option<String> = None;
    for (n, v) in lines {
        let (kind, item) = match (v["type"].as_str(), v.get("payload")) {
            (Some(kind), Some(payload)) => (kind, payload),
            (Some(_), None) => ("response_item", v),
            (None, None) if *n == lines[0].0 => ("session_meta", v),
            _ => continue,
        };
        let at = timestamp(&v["timestamp"]).or_else(|| timestamp(&item["timestamp"]));
        match kind {
            "session_meta" => {
                draft.session = item["id"].as_str().map(str::to_string);
                draft.cwd = item["cwd"].as_str().map(str::to_string);
                continue;
            }
            "turn_context" => {
                model = item["model"].as_str().map(str::to_string).or(model);
                continue;
            }
            "compacted" => {
                if let Some(text) = item["message"].as_str().filter(|t| !t.trim().is_empty()) {
                    let m = message(
                        Role::User,
                        format!("[Codex's summary of the conversation so far]\n\n{text}"),
                        last.clone(),
                        at,
                    );
                    last = Some(m.id.to_string());
                    draft.messages.push(m);
                }
                continue;
            }
            "response_item" => {}
            _ => continue,
        }
        let last_is_asking = |draft: &Draft, last: &Option<String>| {
            draft
                .messages
                .last()
                .filter(|m| Some(m.id.as_str()) == last.as_deref())
                .is_some_and(|m| m.role == Role::Assistant)
        };
        match item["type"].as_str().unwrap_or("") {
            "message" => {
                let role = match item["role"].as_str() {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    _ => continue,
                };
                let text = text_of(&item["content"]);
                let boilerplate = [
                    "<environment_context>",
                    "<user_instructions>",
                    "# AGENTS.md instructions",
                ];
                if role == Role::User
                    && boilerplate.iter().any(|b| text.trim_start().starts_with(b))
                {
                    continue;
                }
                let mut m = message(role, text, last.clone(), at);
                if role == Role::Assistant {
                    m.extra.model = model.as_deref().map(model_name);
                    m.extra.rare.reasoning = pending_reasoning.take();
                }
                last = Some(m.id.to_string());
                draft.messages.push(m);
            }
            "reasoning" => {
                let text = item["summary"]
                    .as_array()
                    .map(|s| {
                        s.iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n\n")
                    })
                    .unwrap_or_default();
                if !text.is_empty() {
                    pending_reasoning = Some(text);
                }
            }
            kind @ ("function_call" | "custom_tool_call" | "local_shell_call") => {
                let id = item["call_id"]
                    .as_str()
                    .or_else(|| item["id"].as_str())
                    .unwrap_or("");
                let (name, args) = match kind {
                    "function_call" => (
                        item["name"].as_str().unwrap_or(""),
                        item["arguments"].clone(),
                    ),
                    "custom_tool_call" => (
                        item["name"].as_str().unwrap_or(""),
                        json!({"input": item["input"]}),
                    ),
                    _ => ("local_shell", item["action"].clone()),
                };
                // Calls made together belong to one answer.
                if !last_is_asking(&draft, &last) {
                    let mut m = message(Role::Assistant, String::new(), last.clone(), at);
                    m.extra.model = model.as_deref().map(model_name);
                    m.extra.rare.reasoning = pending_reasoning.take();
                    last = Some(m.id.to_string());
                    draft.messages.push(m);
                }
                let m = draft.messages.last_mut().expect("pushed above");
                m.extra
                    .tool_calls
                    .get_or_insert_with(Vec::new)
                    .push(call(id, name, &args));
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                let output = match &item["output"] {
                    Value::String(s) => s.clone(),
                    Value::Object(o) => o
                        .get("content")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
                    other => text_of(other),
                };
                let mut m = message(Role::Tool, output, last.clone(), at);
                m.extra.tool_call_id = item["call_id"].as_str().map(Id::new);
                last = Some(m.id.to_string());
                draft.messages.push(m);
            }
            _ => {}
        }
    }
    draft
}

/// pi: a tree by `id`/`parentId` (version 1 files: a line), after a `session` header. Its
/// messages as ours (a shell command the user ran, and what extensions and summaries put in
/// context, as user messages); entries that are not messages (model changes, labels,
/// compactions) pass their children on to their parent; labels become branch names, a
/// session's name its title.
fn pi(lines: &[(usize, Value)]) -> Draft {
    let mut draft = Draft::new();
    // Entry id → our message id that stands for it.
    let mut ours: HashMap<String, String> = HashMap::new();
    let mut previous: Option<String> = None;
    for (_, v) in lines {
        let kind = v["type"].as_str().unwrap_or("");
        if kind == "session" {
            draft.session = v["id"].as_str().map(str::to_string);
            draft.cwd = v["cwd"].as_str().map(str::to_string);
            continue;
        }
        let entry_id = v["id"].as_str().map(str::to_string);
        // Version 1: no ids; each entry follows the one before.
        let parent = match v.get("parentId") {
            Some(Value::String(p)) => ours.get(p).cloned(),
            Some(_) => None,
            None => previous.clone(),
        };
        let at = timestamp(&v["timestamp"]);
        let made: Option<Message> = match kind {
            "message" => {
                let msg = &v["message"];
                let content = &msg["content"];
                match msg["role"].as_str().unwrap_or("") {
                    "user" => Some(message(Role::User, text_of(content), parent.clone(), at)),
                    "assistant" => {
                        let mut m = message(Role::Assistant, String::new(), parent.clone(), at);
                        let mut texts = Vec::new();
                        for b in content.as_array().into_iter().flatten() {
                            match b["type"].as_str() {
                                Some("text") => {
                                    texts.push(b["text"].as_str().unwrap_or("").to_string())
                                }
                                Some("thinking") => {
                                    m.extra.rare.reasoning =
                                        Some(b["thinking"].as_str().unwrap_or("").to_string());
                                }
                                Some("toolCall") => {
                                    m.extra.tool_calls.get_or_insert_with(Vec::new).push(call(
                                        b["id"].as_str().unwrap_or(""),
                                        b["name"].as_str().unwrap_or(""),
                                        &b["arguments"],
                                    ))
                                }
                                _ => {}
                            }
                        }
                        if let Value::String(s) = content {
                            texts.push(s.clone());
                        }
                        m.content = texts.join("\n\n");
                        m.extra.model = msg["model"].as_str().map(model_name);
                        if let Some(u) = msg.get("usage").filter(|u| u.is_object()) {
                            m.extra.usage = Some(Box::new(Usage {
                                input_tokens: u["input"].as_u64().unwrap_or(0),
                                output_tokens: u["output"].as_u64().unwrap_or(0),
                                cache_read_tokens: u["cacheRead"].as_u64(),
                                cache_write_tokens: u["cacheWrite"].as_u64(),
                                ..Default::default()
                            }));
                        }
                        m.interrupted = msg["stopReason"] == "aborted";
                        Some(m)
                    }
                    "toolResult" => {
                        let mut text = text_of(content);
                        if msg["isError"] == true {
                            text = format!("Error: {text}");
                        }
                        let mut m = message(Role::Tool, text, parent.clone(), at);
                        m.extra.tool_call_id = msg["toolCallId"].as_str().map(Id::new);
                        Some(m)
                    }
                    "bashExecution" if msg["excludeFromContext"] != true => Some(message(
                        Role::User,
                        format!(
                            "[I ran `{}`]\n{}",
                            msg["command"].as_str().unwrap_or(""),
                            msg["output"].as_str().unwrap_or("")
                        ),
                        parent.clone(),
                        at,
                    )),
                    "custom" | "hookMessage" => {
                        Some(message(Role::User, text_of(content), parent.clone(), at))
                    }
                    "branchSummary" | "compactionSummary" => Some(message(
                        Role::User,
                        format!("[Summary]\n\n{}", msg["summary"].as_str().unwrap_or("")),
                        parent.clone(),
                        at,
                    )),
                    _ => None,
                }
            }
            "custom_message" => Some(message(
                Role::User,
                text_of(&v["content"]),
                parent.clone(),
                at,
            )),
            "branch_summary" => Some(message(
                Role::User,
                format!(
                    "[Summary of another branch]\n\n{}",
                    v["summary"].as_str().unwrap_or("")
                ),
                parent.clone(),
                at,
            )),
            "label" => {
                if let (Some(target), Some(label)) = (v["targetId"].as_str(), v["label"].as_str())
                    && let Some(t) = ours.get(target)
                {
                    draft.labels.push((label.to_string(), t.clone()));
                }
                None
            }
            "session_info" => {
                if let Some(name) = v["name"].as_str() {
                    draft.title = Some(name.to_string());
                }
                None
            }
            _ => None,
        };
        let stands_for = match made {
            Some(m) => {
                let id = m.id.to_string();
                draft.messages.push(m);
                Some(id)
            }
            None => parent,
        };
        if let (Some(entry), Some(ours_id)) = (entry_id, &stands_for) {
            ours.insert(entry, ours_id.clone());
        }
        previous = stands_for;
    }
    draft
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    /// Issue 41 (10): a line longer than the limit is read past, never held, and numbered;
    /// the lines around it read as before, whatever their ends.
    #[test]
    fn a_line_over_the_limit_is_passed_over_and_numbered() {
        let mut bytes = Vec::new();
        for line in [
            r#"{"a":1}"#.to_string(),
            "x".repeat(100),
            String::new(),
            "[1]".to_string(),
            "{\"b\":2}\r".to_string(),
            "\u{1}".to_string(),
            "y".repeat(40),
        ] {
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(br#"{"c":3}"#);
        // A line that is not UTF-8 is one that cannot be read.
        let at = bytes.iter().position(|b| *b == 1).unwrap();
        bytes[at] = 0xff;
        // Read through a small buffer, so the long line comes in many pieces.
        let reader = BufReader::with_capacity(7, bytes.as_slice());
        let read = read_lines(reader, 40).unwrap();
        assert_eq!(
            read.lines,
            vec![
                (1, json!({"a": 1})),
                (5, json!({"b": 2})),
                (8, json!({"c": 3}))
            ]
        );
        assert_eq!(read.skipped, [4, 6, 7]);
        assert_eq!(read.too_long, [2]);
        // One byte over the limit is too long; an empty input has no lines.
        let read = read_lines(format!("{}\n", "z".repeat(41)).as_bytes(), 40).unwrap();
        assert_eq!((read.skipped, read.too_long), (vec![], vec![1]));
        assert_eq!(read_lines(&b""[..], 40).unwrap(), Lines::default());
    }
}
