//! The review after a turn: a separate request asks the model whether the turn taught something
//! worth remembering, and its answer (JSON) becomes writes and deletions of memory files.

use serde::Deserialize;

use super::{Level, MemoryStore};
use crate::fs::atomic;
use crate::fs::project_file;
use crate::llm::{ChatRequest, LlmError, Model};
use crate::utf8;
use crate::vocab::{ChatMessage, Role};
use std::fs;
use std::fs::File;
use std::io;
use std::mem;
use std::path::Path;

/// The system prompt of a review request.
pub const REVIEWER: &str = "You maintain the memory of a coding assistant: short Markdown notes kept \
between sessions. Read the turn below and decide whether it taught something worth keeping for \
later sessions: a preference of the user (user_preference), a correction or feedback the user gave \
(user_feedback), a fact about this project (project_fact), or a pointer to where something is \
(reference). Most turns teach nothing: then change nothing. Update a memory rather than adding a \
near-duplicate; delete one that the turn shows is wrong. Never store secrets: no API keys, tokens, \
passwords, private keys or credentials, not even in part. Reply with JSON only, no prose: \
{\"changes\": [{\"action\": \"write\", \"level\": \"user\" or \"project\", \"name\": \"short-name\", \
\"kind\": \"user_preference\" | \"user_feedback\" | \"project_fact\" | \"reference\", \"description\": \
\"one line\", \"content\": \"the note\"}, {\"action\": \"delete\", \"level\": \"user\" or \"project\", \
\"name\": \"short-name\"}]}, with an empty list when nothing is worth keeping. User-level memories are \
about the user and hold in every project; project-level ones are about this project.";

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the review request failed: {0}")]
    Llm(#[from] LlmError),
    #[error("the review's answer is not the JSON asked for: {0}")]
    Unreadable(String),
}

/// One change a review asks for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Change {
    pub action: String,
    #[serde(default)]
    pub level: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub content: String,
}

#[derive(Deserialize)]
struct Changes {
    #[serde(default)]
    changes: Vec<Change>,
}

/// A turn shorter than this, its message and answer together (in characters), is small talk
/// unless it called a tool or says what to remember (CodePilot's throttle).
pub const SMALL_TALK_CHARS: usize = 200;

/// Whether a turn may hold something worth keeping. A turn that called a tool is; one whose
/// message says what to remember, prefer, always or never do is. Any other is small talk, not
/// reviewed, when it is short: its message and answer together under [`SMALL_TALK_CHARS`]
/// characters, or its message under six words (eight Chinese characters). `hi`, `thanks`, `ok`
/// are not reviewed, whatever the answer.
pub fn worth_reviewing(user: &str, answer: &str, tools: &[String]) -> bool {
    if !tools.is_empty() {
        return true;
    }
    let lower = user.to_lowercase();
    let words = lower.split_whitespace().count();
    const SAYS: &[&str] = &[
        "remember",
        "always",
        "never",
        "prefer",
        "don't",
        "do not",
        "we use",
        "i use",
        "i like",
        "i want",
        "our ",
        "my ",
        "记住",
        "总是",
        "不要",
        "喜欢",
        "我们用",
    ];
    if SAYS.iter().any(|s| lower.contains(s)) {
        return true;
    }
    // Chinese has no spaces: its characters count as words.
    let cjk = lower
        .chars()
        .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
        .count();
    let short_message = words < 6 && cjk < 8;
    let short_exchange =
        user.trim().chars().count() + answer.trim().chars().count() < SMALL_TALK_CHARS;
    !(short_message || short_exchange)
}

/// What became of a completed turn offered to the batch of turns waiting for review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    /// Small talk: not kept, not counted toward `memory.review_every`.
    SmallTalk,
    /// Kept; the batch is not full yet.
    Waiting,
    /// The batch is full: these turns go in one review request.
    Full(Vec<String>),
}

/// Offers a completed turn to `batch` (the turns waiting, `every` to a review).
pub fn offer(
    batch: &mut Vec<String>,
    every: usize,
    user: &str,
    tools: &[String],
    answer: &str,
) -> Offered {
    if !worth_reviewing(user, answer, tools) {
        return Offered::SmallTalk;
    }
    batch.push(digest(user, tools, answer));
    if batch.len() < every {
        return Offered::Waiting;
    }
    Offered::Full(mem::take(batch))
}

/// Where turns not reviewed yet wait between sessions (the session ended before a batch was full).
const PENDING: &str = ".pending-review.json";
/// The most turns kept waiting, and the most bytes of them.
const PENDING_MAX: usize = 20;
const PENDING_MAX_BYTES: usize = 256 * 1024;

/// Keeps `turns` for the next session's first review (with those already waiting, the newest
/// kept when there are too many).
pub fn save_pending(store: &super::MemoryStore, turns: &[String]) -> io::Result<()> {
    atomic::create_private_dir(&store.project)?;
    // Two sessions ending together: one after the other, neither losing the other's turns.
    let _lock = pending_lock(store)?;
    let mut all = read_pending(&store.project.join(PENDING));
    all.extend(turns.iter().cloned());
    let skip = all.len().saturating_sub(PENDING_MAX);
    let mut all: Vec<String> = all.into_iter().skip(skip).collect();
    let mut text = serde_json::to_vec(&all).map_err(io::Error::other)?;
    while text.len() > PENDING_MAX_BYTES && !all.is_empty() {
        all.remove(0);
        text = serde_json::to_vec(&all).map_err(io::Error::other)?;
    }
    atomic::write_whole(&store.project.join(PENDING), &text)
}

/// The turns waiting from an earlier session, no longer waiting: one session takes them (two
/// starting together do not both review them).
pub fn load_pending(store: &super::MemoryStore, take: bool) -> Vec<String> {
    let path = store.project.join(PENDING);
    if !take {
        return read_pending(&path);
    }
    if !path.exists() {
        return Vec::new();
    }
    let Ok(_lock) = pending_lock(store) else {
        return Vec::new();
    };
    let read = read_pending(&path);
    let _ = fs::remove_file(&path);
    read
}

fn read_pending(path: &Path) -> Vec<String> {
    project_file::read_own(path, PENDING_MAX_BYTES)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Vec<String>>(&b.bytes).ok())
        .unwrap_or_default()
}

/// The pending file's lock (a file of its own beside it), held while the guard lives.
fn pending_lock(store: &super::MemoryStore) -> io::Result<File> {
    let file = atomic::private_options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(store.project.join(".pending-review.lock"))?;
    file.lock()?;
    Ok(file)
}

/// What a turn was, for the review: the user's message, the tools called, the final answer.
pub fn digest(user: &str, tools: &[String], answer: &str) -> String {
    let clip = |s: &str, max: usize| -> String {
        if s.len() <= max {
            return s.to_string();
        }
        format!("{} […]", &s[..utf8::floor_char_boundary(s, max)])
    };
    let mut text = format!("## The user wrote\n{}\n", clip(user, 8000));
    if !tools.is_empty() {
        text.push_str(&format!("\n## Tools used\n{}\n", tools.join(", ")));
    }
    text.push_str(&format!(
        "\n## The assistant answered\n{}\n",
        clip(answer, 8000)
    ));
    text
}

/// Asks the model about one turn; the changes it asks for.
pub async fn ask(
    model: &dyn Model,
    model_name: &str,
    store: &MemoryStore,
    turn: &str,
) -> Result<Vec<Change>, ReviewError> {
    let indexes = store
        .prompt_part(200, 25_600)
        .unwrap_or_else(|| "\n\n(No memories yet.)".to_string());
    let request = ChatRequest {
        model: model_name.to_string(),
        messages: vec![
            ChatMessage::text(Role::System, REVIEWER),
            ChatMessage::text(
                Role::User,
                format!(
                    "# What is remembered now{indexes}\n\n# The turn\n\n{turn}\n\nReply with the JSON only."
                ),
            ),
        ],
        tools: Vec::new(),
        no_tool_calls: false,
        max_tokens: None,
    };
    let response = model.chat(&request, &mut |_| {}).await?;
    parse(&response.content)
}

/// The changes in a review's answer: the first JSON object in it (models wrap JSON in fences or
/// prose despite being told not to).
pub fn parse(answer: &str) -> Result<Vec<Change>, ReviewError> {
    let start = answer
        .find('{')
        .ok_or_else(|| ReviewError::Unreadable(preview(answer)))?;
    let mut stream = serde_json::Deserializer::from_str(&answer[start..]).into_iter::<Changes>();
    match stream.next() {
        Some(Ok(changes)) => Ok(changes.changes),
        _ => Err(ReviewError::Unreadable(preview(answer))),
    }
}

fn preview(s: &str) -> String {
    s.chars().take(120).collect()
}

/// Applies a review's changes; a line for each one made.
pub fn apply(store: &MemoryStore, changes: &[Change], secrets: &[String]) -> Vec<String> {
    let mut done = Vec::new();
    for change in changes {
        let level = Level::parse(&change.level).unwrap_or(Level::Project);
        let action = change.action.trim();
        // An update names a note the index has; one that names none is skipped (a made-up
        // name would become a new note nobody asked for).
        if action == "update" && !store.indexed(level, change.name.trim()) {
            continue;
        }
        match action {
            "write" | "update" | "add"
                if !change.name.trim().is_empty()
                    && store
                        .write(
                            level,
                            &change.name,
                            &change.kind,
                            &change.description,
                            &change.content,
                            secrets,
                        )
                        .is_ok() =>
            {
                done.push(format!(
                    "saved `{}` ({})",
                    super::redact_secrets(change.name.trim(), secrets),
                    level.as_str()
                ));
            }
            "delete" | "forget" => {
                if let Ok(Some(m)) = store.forget(change.name.trim()) {
                    done.push(format!("forgot `{}` ({})", m.name, m.level.as_str()));
                }
            }
            _ => {}
        }
    }
    done
}
