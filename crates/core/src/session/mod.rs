//! One run of `new`, with no terminal in it: its conversations, the agent, tools and policy,
//! hooks, memory, checkpoints, MCP, subagents and the configuration. A front end (the REPL, `-p`,
//! an editor over ACP, a browser) parses what its user does, calls a [`Session`] method, and
//! renders the [`Event`]s it is told; the questions a turn has for its user (an approval, a host
//! to reach, going on uncompacted) are [`Frontend`] requests the front end answers.
//!
//! pi's `AgentSession` is the model: shared by every mode, each mode adds its own I/O on top.

mod commands;
mod event;
pub mod gate;
mod manage;
mod memory;
mod open;
mod restore;
mod together;
mod turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::agent::Interrupts;
use crate::agent::defs::Definition;
use crate::agent::subagent::Subagents;
use crate::checkpoint::Checkpoints;
use crate::config::{Config, Overrides};
use crate::context::Context;
use crate::conversation::{ChatSession, Store};
use crate::hooks::Hooks;
use crate::layers::Layers;
use crate::llm::Provider;
use crate::memory::MemoryStore;
use crate::prompt::RoleFile;
use crate::skill::SkillRegistry;
use crate::tools::{Policy, ToolRegistry};
use crate::vocab::Usage;

pub use commands::{Alternative, Btw, CommandError, EditTarget, Merged, Switched, Undone};
pub use event::{
    Answer, Approval, Compaction, Confirm, Ended, Event, Frontend, HostAnswer, HostQuestion,
    Notice, Recorder, RefusedWhy, Relay, Wait, to_observer,
};
pub use manage::{ExportFormat, Listed, Listing, ManageError};
pub use memory::ReviewsRun;
pub use open::{
    OpenError, Opened, Options, PromptRead, Resume, memory_part, os_sandbox_for, read_prompt,
};
pub use restore::{Change, Kept, Restored, StateError};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
pub use together::{OneAfterAnother, Together};
pub use turn::{Closed, interruptible};

/// The engine's state for one run of `new`. Its fields are public to the front ends of this
/// workspace, which still wire a session together and show parts of it (`/status`, `/context`).
pub struct Session {
    pub workdir: PathBuf,
    pub layers: Layers,
    pub role: RoleFile,
    pub skills: SkillRegistry,
    pub system_prompt: String,
    /// The system prompt by source, for `/context`.
    pub prompt_parts: Vec<(String, String)>,
    /// The same parts as written, their template variables unfilled (filled again after
    /// `/model`).
    pub prompt_written: Vec<(String, String)>,
    /// `subagent.auto_continue` went on once since the user's last input.
    pub auto_continued: bool,
    pub store: Store,
    /// The conversation at hand and its file.
    pub chat: ChatSession,
    pub provider: Provider,
    pub tools: ToolRegistry,
    pub policy: Policy,
    pub config: Config,
    /// What the command line said, kept for reloading the configuration.
    pub overrides: Overrides,
    /// Raised by the front end to stop what runs (Ctrl-C, an editor's cancel).
    pub interrupts: Interrupts,
    /// Tokens, cost and turns of this session.
    pub totals: (Usage, f64, usize),
    /// Context accounting for the model in use, and whether its server was asked for its window.
    pub context: Context,
    pub asked_server_window: bool,
    /// While a skill's turn runs (`/<skill>`): the tools it allows.
    pub skill_tools: Option<Vec<String>>,
    /// Snapshots of the working folder (None when `checkpoints.enabled` is false), and the node the
    /// cursor last moved from (a restore keeps the folder as it was there).
    pub checkpoints: Option<Arc<Checkpoints>>,
    pub came_from: Option<String>,
    /// The memory folders (None when `memory.enabled` is false), the lines reviews running in the
    /// background leave for the next prompt.
    pub memory: Option<MemoryStore>,
    pub memory_notes: Arc<Mutex<Vec<String>>>,
    /// Turns worth reviewing not sent for review yet (`memory.review_every` go in one request),
    /// and whether the session was told that reviews run.
    pub memory_batch: Vec<String>,
    pub memory_said: bool,
    /// The turns of a review that gave way to a turn, to be reviewed again; how many turns
    /// have started (a review in flight gives way when it grows).
    pub memory_returned: Arc<Mutex<Vec<String>>>,
    pub turns_started: Arc<AtomicU64>,
    /// Work that an interrupt stops runs (the front end raises interrupts only then).
    pub busy: Arc<AtomicBool>,
    /// The session is over (background reviews then stop).
    pub leaving: Arc<AtomicBool>,
    /// The user's hooks (None when there are none, or `hook.enabled` is false), and what
    /// `session_start` hooks said, added to the next message.
    pub hooks: Option<Hooks>,
    pub hook_context: Vec<String>,
    /// Subagent roles (None when `subagent.enabled` is false).
    pub subagents: Option<Subagents>,
    /// The role the session works as (`--agent NAME`): its prompt and tools replace the usual.
    pub agent: Option<Definition>,
}
