//! Context management: how many tokens a request takes, how big the model's window is, big tool
//! results sent as previews (layer 1), and summary nodes that stand for the start of a branch
//! (layer 2, [`compact`]). Nothing here rewrites a stored line: a preview exists only in requests,
//! and a summary is a new node.

pub mod compact;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::conversation::{Conversation, Message};
use crate::fs::atomic;
use crate::fs::hash;
use crate::llm::overflow::{MAX_WINDOW, MIN_WINDOW};
use crate::utf8;
use crate::vocab::{ChatMessage, Role, ToolSpec};
use std::fs;
use std::io;
use std::sync::MutexGuard;

/// Tokens of a text, estimated without a tokenizer: a token per four bytes of ASCII, and one per
/// other character (CJK text takes about one a character). Calibrated against what the provider
/// reports by [`Context::calibrate`].
pub fn estimate_text(text: &str) -> u64 {
    let (mut ascii, mut other) = (0u64, 0u64);
    for &b in text.as_bytes() {
        if b < 0x80 {
            ascii += 1;
        } else if b & 0xC0 != 0x80 {
            other += 1;
        }
    }
    ascii.div_ceil(4) + other
}

/// Tokens one request message takes: its text, its calls and reasoning, and its framing.
pub fn estimate_message(m: &ChatMessage) -> u64 {
    let mut n = 4 + estimate_text(&m.content);
    for call in m.tool_calls() {
        n += 8 + estimate_text(&call.function.name) + estimate_text(&call.function.arguments);
    }
    if let Some(r) = m.reasoning() {
        n += estimate_text(r);
    }
    n
}

/// Tokens the tool definitions take.
pub fn estimate_tools(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|t| {
            8 + estimate_text(&t.name)
                + estimate_text(&t.description)
                + estimate_text(&t.parameters.to_string())
        })
        .sum()
}

/// The compaction settings (`compaction` in the config, and `context_window_size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `compaction.enabled`: false turns both layers off.
    pub enabled: bool,
    /// `context_window_size`, when the config gives it.
    pub window: Option<u64>,
    /// The window assumed for a model whose window is not known ([`FALLBACK_WINDOW`] when
    /// None; CodePilot's 200,000 where its file is in force).
    pub fallback_window: Option<u64>,
    pub tool_result_threshold: u64,
    pub preview_tokens: u64,
    pub auto_trigger_margin: u64,
    pub keep_recent_tokens: u64,
    pub keep_recent_min_messages: usize,
    pub breaker_threshold: u32,
    /// `context_safety_margin`: tokens kept free when compaction cannot make room; past it the
    /// model is told to wrap up instead of sending what the server would refuse.
    pub safety_margin: u64,
    /// `compaction.manual_target_margin`: the room `/compact` leaves, at least the automatic
    /// margin; None: the automatic margin.
    pub manual_target_margin: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: true,
            window: None,
            fallback_window: None,
            tool_result_threshold: 5120,
            preview_tokens: 500,
            auto_trigger_margin: 20_000,
            keep_recent_tokens: 10_000,
            keep_recent_min_messages: 5,
            breaker_threshold: 3,
            safety_margin: 8_192,
            manual_target_margin: None,
        }
    }
}

/// Where the window size in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// `context_window_size` in the config.
    Config,
    /// The server said (llama-server's `/props`).
    Server,
    /// A context-overflow error named it; believed for the rest of the session.
    Error,
    /// The default for the model's family.
    Family(&'static str),
    /// Nothing better known.
    Fallback,
}

/// The window assumed when nothing better is known.
pub const FALLBACK_WINDOW: u64 = 128_000;

/// Context windows of known model families: the first pattern found in the model's name wins.
const FAMILIES: &[(&str, u64)] = &[
    ("claude", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 128_000),
    ("qwen", 131_072),
    ("kimi", 131_072),
    ("llama-3", 128_000),
    ("llama3", 128_000),
    ("mistral", 32_768),
    ("mixtral", 32_768),
];

/// The default window of a model's family, by name.
pub fn family_window(model: &str) -> Option<(u64, &'static str)> {
    let name = model.to_ascii_lowercase();
    // The part after a provider prefix (`openai/gpt-4o`, `anthropic.claude-…`).
    let base = name.rsplit('/').next().unwrap_or(&name);
    FAMILIES.iter().find_map(|(pattern, window)| {
        let hit = if pattern.len() == 2 {
            // `o1`, `o3`, `o4`: only as the start of the name, not inside another word.
            base.starts_with(pattern)
        } else {
            base.contains(pattern)
        };
        hit.then_some((*window, *pattern))
    })
}

/// What the session has learnt about the window and the estimates.
#[derive(Debug, Default)]
struct State {
    /// From an overflow error.
    learned: Option<u64>,
    /// From the server, once asked.
    server: Option<u64>,
    /// Reported prompt tokens over estimated ones, from the last answer that reported usage.
    factor: Option<f64>,
    /// Failed compactions in a row.
    failures: u32,
    breaker_open: bool,
}

/// One session's context accounting: the window, the calibration and the breaker.
#[derive(Debug)]
pub struct Context {
    pub settings: Settings,
    model: String,
    state: Mutex<State>,
}

impl Context {
    pub fn new(settings: Settings, model: &str) -> Self {
        Context {
            settings,
            model: model.to_string(),
            state: Mutex::new(State::default()),
        }
    }

    /// A fresh accounting for `model` on the same server (a subagent's): the same settings and
    /// the window the server told; for the same model, also the calibration of its estimates (the
    /// same tokenizer counts the same way), so that its first request is judged as the parent's.
    pub fn for_model(&self, model: &str) -> Context {
        let fresh = Context::new(self.settings.clone(), model);
        let state = self.state();
        let mut new = fresh.state();
        new.server = state.server;
        if model == self.model {
            new.factor = state.factor;
        }
        drop((new, state));
        fresh
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The window in force and where it came from: an overflow error's figure, else the config,
    /// else the server, else the model family's default.
    pub fn window(&self) -> (u64, WindowSource) {
        let state = self.state();
        if let Some(n) = state.learned {
            return (n, WindowSource::Error);
        }
        if let Some(n) = self.settings.window {
            return (n, WindowSource::Config);
        }
        if let Some(n) = state.server {
            return (n, WindowSource::Server);
        }
        match family_window(&self.model) {
            Some((n, family)) => (n, WindowSource::Family(family)),
            None => (
                self.settings.fallback_window.unwrap_or(FALLBACK_WINDOW),
                WindowSource::Fallback,
            ),
        }
    }

    /// Whether asking the server for its window could tell more than the config and the family.
    pub fn wants_server_window(&self) -> bool {
        self.settings.window.is_none() && family_window(&self.model).is_none()
    }

    /// Believes the window a server told (`/props`), from [`MIN_WINDOW`] to [`MAX_WINDOW`]
    /// tokens, as an error's figure: a server may be anyone's, and a window of 1 or of 2^64 would
    /// leave the session no room or endless room.
    pub fn set_server_window(&self, window: u64) {
        if (MIN_WINDOW..=MAX_WINDOW).contains(&window) {
            self.state().server = Some(window);
        }
    }

    /// Believes the window an overflow error named, for the rest of the session: from
    /// [`MIN_WINDOW`] to [`MAX_WINDOW`] tokens (another figure is not a model's window, and
    /// believing it would leave the session no room or endless room).
    pub fn learn_window(&self, window: u64) {
        if (MIN_WINDOW..=MAX_WINDOW).contains(&window) {
            self.state().learned = Some(window);
        }
    }

    /// Takes the provider's count of a request's prompt tokens against the estimate for it.
    pub fn calibrate(&self, estimated: u64, reported: u64) {
        if estimated >= 64 && reported > 0 {
            let factor = (reported as f64 / estimated as f64).clamp(0.25, 4.0);
            self.state().factor = Some(factor);
        }
    }

    /// The calibration factor (1 until an answer reported its prompt tokens).
    pub fn factor(&self) -> f64 {
        self.state().factor.unwrap_or(1.0)
    }

    /// An estimate, corrected by the calibration.
    pub fn scale(&self, estimate: u64) -> u64 {
        (estimate as f64 * self.factor()).ceil() as u64
    }

    /// How much room must stay free before a request: `auto_trigger_margin`, scaled down for
    /// small windows (a quarter of the window at most).
    pub fn margin(&self) -> u64 {
        self.settings.auto_trigger_margin.min(self.window().0 / 4)
    }

    /// The room `/compact` leaves: `manual_target_margin` (a half of the window at most), never
    /// less than the automatic margin.
    pub fn manual_margin(&self) -> u64 {
        let window = self.window().0;
        self.settings
            .manual_target_margin
            .map_or(0, |m| m.min(window / 2))
            .max(self.margin())
    }

    /// Whether a request estimated at `estimate` leaves less than `context_safety_margin` of a
    /// known window (an eighth of it at most) while compaction cannot help: it is off, its breaker
    /// is open, or it left the branch this full. A guessed window never says so, nor does an
    /// estimate no server has counted yet: the guess for tool definitions alone can be several
    /// times what a server's template sends, and a first question must not be told to wrap up.
    pub fn nearly_full(&self, estimate: u64) -> bool {
        let (window, source) = self.window();
        if source == WindowSource::Fallback
            || self.settings.safety_margin == 0
            || self.state().factor.is_none()
        {
            return false;
        }
        let room = window.saturating_sub(self.scale(estimate));
        room <= self.settings.safety_margin.min(window / 8)
    }

    /// The recent part kept verbatim by a compaction, in tokens: `keep_recent_tokens`, a quarter
    /// of the window at most.
    pub fn keep_budget(&self) -> u64 {
        self.settings.keep_recent_tokens.min(self.window().0 / 4)
    }

    /// The longest summary asked for, in tokens.
    pub fn summary_budget(&self) -> u64 {
        (self.window().0 / 8).clamp(200, 4_000)
    }

    /// Tokens left before automatic compaction, for a request estimated at `estimate`.
    pub fn left_before_compaction(&self, estimate: u64) -> u64 {
        self.window()
            .0
            .saturating_sub(self.scale(estimate))
            .saturating_sub(self.margin())
    }

    /// Whether a request estimated at `estimate` should be preceded by a compaction.
    pub fn should_compact(&self, estimate: u64) -> bool {
        self.settings.enabled && !self.breaker_open() && self.left_before_compaction(estimate) == 0
    }

    pub fn breaker_open(&self) -> bool {
        self.state().breaker_open
    }

    /// Counts a failed compaction; true when this one opened the breaker.
    pub fn compaction_failed(&self) -> bool {
        let mut state = self.state();
        state.failures += 1;
        let opens = !state.breaker_open && state.failures >= self.settings.breaker_threshold;
        if opens {
            state.breaker_open = true;
        }
        opens
    }

    /// A compaction succeeded: the count starts again and the breaker closes.
    pub fn compaction_succeeded(&self) {
        let mut state = self.state();
        state.failures = 0;
        state.breaker_open = false;
    }

    /// The request messages for node `id`: [`Conversation::api_messages`] with each tool result
    /// over the threshold sent as a preview, its whole text saved in `results` for the model to
    /// read.
    pub fn request_messages<'a>(
        &self,
        conversation: &'a Conversation,
        id: &str,
        results: &Path,
    ) -> Vec<ChatMessage<'a>> {
        if !self.settings.enabled {
            return conversation.api_messages(id);
        }
        conversation.api_messages_with(id, &mut |m| {
            if m.content.len() as u64 > self.settings.tool_result_threshold
                && loaded_skill(conversation, m)
            {
                // A skill is instructions to follow: sent whole, never as a preview.
                return Cow::Borrowed(&m.content);
            }
            self.shape_result(m, results)
        })
    }

    /// A tool result as sent: whole, or its start and a note on where the rest is.
    fn shape_result<'a>(&self, m: &'a Message, results: &Path) -> Cow<'a, str> {
        let threshold = self.settings.tool_result_threshold;
        // A token takes at least a byte: a short text cannot be over.
        if (m.content.len() as u64) <= threshold {
            return Cow::Borrowed(&m.content);
        }
        let tokens = estimate_text(&m.content);
        if tokens <= threshold {
            return Cow::Borrowed(&m.content);
        }
        let path = result_path(results, &m.id);
        let saved = save_result(&path, &m.content).is_ok();
        Cow::Owned(preview(
            &m.content,
            self.settings.preview_tokens,
            tokens,
            saved.then_some(path.as_path()),
        ))
    }
}

/// Whether tool result `m` answers a `use_skill` call (the call is on the nearest assistant
/// message above it).
fn loaded_skill(conversation: &Conversation, m: &Message) -> bool {
    let Some(call) = m.extra.tool_call_id.as_deref() else {
        return false;
    };
    conversation
        .ancestors(&m.id)
        .find(|a| a.role == Role::Assistant)
        .is_some_and(|a| {
            a.calls()
                .iter()
                .any(|c| c.id == call && c.function.name == "use_skill")
        })
}

/// The folder holding the whole tool results of conversation `id` (a read-only extra root).
pub fn results_dir(store_dir: &Path, id: &str) -> PathBuf {
    store_dir.join(format!("{id}.results"))
}

/// The file for one message's whole result. An id that is not a plain name (a damaged or
/// hostile file may hold any string) is replaced by its hash: it must not choose the path.
pub fn result_path(results: &Path, msg_id: &str) -> PathBuf {
    let plain = !msg_id.is_empty()
        && msg_id.len() <= 64
        && msg_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let name = if plain {
        msg_id.to_string()
    } else {
        hash::digest(msg_id.as_bytes())[..16].to_string()
    };
    results.join(format!("{name}.txt"))
}

/// Writes a whole result once (private, atomically); an existing file of the right size stays.
fn save_result(path: &Path, text: &str) -> io::Result<()> {
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == text.len() as u64) {
        return Ok(());
    }
    atomic::write_whole(path, text.as_bytes())
}

/// The start of a big result (about `tokens` tokens, cut at a line end where one is near) and a
/// note saying how big it is and where the rest can be read.
pub fn preview(text: &str, tokens: u64, total: u64, saved: Option<&Path>) -> String {
    let mut end = utf8::floor_char_boundary(text, (tokens * 4) as usize);
    if let Some(nl) = text[..end].rfind('\n')
        && nl >= end / 2
    {
        end = nl + 1;
    }
    let head = &text[..end];
    let lines_shown = head.lines().count();
    let lines = text.lines().count();
    let mut out = head.trim_end_matches('\n').to_string();
    out.push_str(&format!(
        "\n\n[This tool result is about {total} tokens ({} bytes, {lines} lines); only its first {lines_shown} lines are shown. ",
        text.len()
    ));
    match saved {
        Some(path) => out.push_str(&format!(
            "The whole result is in {}: read more of it with read_file (offset and limit are line numbers) or search it with grep.]",
            path.display()
        )),
        None => out.push_str(
            "The rest could not be saved for reading; run the tool again on a narrower range if you need it.]",
        ),
    }
    out
}

/// What a request holds, by source and by kind, for `/context`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Breakdown {
    /// The system prompt's parts: (source, tokens).
    pub system: Vec<(String, u64)>,
    /// Tool definitions: (how many, tokens).
    pub tools: (usize, u64),
    /// The summary in force: tokens, when there is one.
    pub summary: Option<u64>,
    /// (messages, tokens) of each kind.
    pub user: (usize, u64),
    pub assistant: (usize, u64),
    pub results: (usize, u64),
    /// Tool results sent as previews.
    pub previews: usize,
}

impl Breakdown {
    /// Measures a request: the system prompt's parts, the tools, and the messages after the root
    /// (`has_summary`: the first of them is the summary in force).
    pub fn of(
        system: &[(String, String)],
        tools: &[ToolSpec],
        messages: &[ChatMessage],
        has_summary: bool,
    ) -> Breakdown {
        let mut b = Breakdown {
            system: system
                .iter()
                .map(|(source, text)| (source.clone(), estimate_text(text)))
                .collect(),
            tools: (tools.len(), estimate_tools(tools)),
            ..Breakdown::default()
        };
        for (i, m) in messages.iter().enumerate() {
            let n = estimate_message(m);
            match m.role {
                Role::User if i == 0 && has_summary => b.summary = Some(n),
                Role::User => add(&mut b.user, n),
                Role::Assistant => add(&mut b.assistant, n),
                Role::Tool => {
                    add(&mut b.results, n);
                    if m.content.contains("\n\n[This tool result is about ") {
                        b.previews += 1;
                    }
                }
                Role::System => {}
            }
        }
        b
    }

    /// Every token counted.
    pub fn total(&self) -> u64 {
        self.system.iter().map(|(_, n)| n).sum::<u64>()
            + 4
            + self.tools.1
            + self.summary.unwrap_or(0)
            + self.user.1
            + self.assistant.1
            + self.results.1
    }
}

fn add(slot: &mut (usize, u64), n: u64) {
    slot.0 += 1;
    slot.1 += n;
}

/// The estimate of a whole request: system prompt, tools and messages.
pub fn estimate_request(messages: &[ChatMessage], tools: &[ToolSpec]) -> u64 {
    messages.iter().map(estimate_message).sum::<u64>() + estimate_tools(tools)
}

#[cfg(test)]
mod tests;
