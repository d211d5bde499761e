//! The agent loop: one user input → request (streamed) → if the model asked for tools, run them all
//! and store their results in call order → request again → … until the model answers without tools,
//! an error occurs, the round limit is reached, or the user interrupts.
//!
//! Every message is stored as soon as it is complete, so what the user saw is on disk before the next
//! prompt. An interrupted or cut answer keeps what arrived, marked `interrupted`; tool calls that
//! never ran get an "interrupted" result, so the next request is valid.

pub mod defs;
pub mod hook_agent;
pub mod shared_folder;
pub mod subagent;
pub mod tasks;

use tokio::sync::watch;

use std::borrow::Cow;

use crate::checkpoint::Checkpoints;
use crate::context;
use crate::context::Context;
use crate::context::WindowSource;
use crate::context::compact::{self, CompactError};
use crate::conversation::SessionError;
use crate::conversation::message;
use crate::conversation::message::{Extra, Rare};
use crate::conversation::{ChatSession, Message};
use crate::hooks::HookFailure;
use crate::hooks::Hooks;
use crate::hooks::Input;
use crate::hooks::Outcome;
use crate::hooks::Permission;
use crate::llm::{ChatRequest, ChatResponse, LlmError, Model, ResponseStatus, StreamEvent};
use crate::mcp::Manager;
use crate::tools::ToolKind;
use crate::tools::{ToolOutcome, ToolRegistry};
use crate::vocab::Role;
use crate::vocab::ToolCall;
use crate::vocab::Usage;
use std::future;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use std::time::Instant;

/// The result stored for a tool call that the user's interrupt kept from running.
pub const INTERRUPTED_RESULT: &str = "This tool call was not run: the user interrupted.";
/// The result stored for a tool call that a hook's `"continue": false` kept from running.
pub const STOPPED_RESULT: &str = "This tool call was not run: a hook of the user stopped the turn.";
/// The result stored for a tool call stopped by the user while it ran.
pub const INTERRUPTED_WHILE_RUNNING: &str =
    "This tool call was stopped by the user while it ran; its output is lost.";

/// Decides whether a tool call may run: permissions, hard limits, and asking the user.
pub trait Gate {
    /// `hook`: a `pre_tool_use` hook's answer to the permission question, if one gave it:
    /// `Allow` spares the user the question a rule would ask, `Ask` asks where a rule would
    /// allow. A deny of a rule, the blacklist or the sandbox still wins.
    fn check(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &serde_json::Value,
        hook: Option<Permission>,
    ) -> GateDecision;

    /// Names who asks (a subagent's role) in the approval questions to come; None: the agent.
    fn set_label(&mut self, _label: Option<String>) {}

    /// A gate that decides as this one would without asking anyone (what would be asked is
    /// refused), for a subagent working in the background. None: such work may run nothing.
    fn unattended(&self) -> Option<Box<dyn Gate + Send>> {
        None
    }

    /// A sandboxed command wants to reach `host`, which `sandbox.network` does not list: true
    /// allows it for the rest of the session. Refused unless someone can be asked.
    fn network(&mut self, _host: &str, _port: u16) -> bool {
        false
    }

    /// The user interrupted an automatic compaction: true to go on with the turn uncompacted,
    /// false to stop it.
    fn continue_uncompacted(&mut self) -> bool {
        false
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    Run,
    /// Not run; the text goes back to the model as the call's result.
    Refuse(String),
    /// The user pressed Ctrl-C while being asked.
    Interrupt,
}

/// What the person watching is told while a turn runs. The REPL prints; tests record.
pub trait Observer {
    /// A hook failed, timed out or crashed: one line, the turn goes on.
    fn hook_failed(&mut self, _failure: &HookFailure) {}
    /// A hook's line for the user (Claude Code's `systemMessage`).
    fn hook_notice(&mut self, _line: &str) {}
    /// Tokens spent on the turn's behalf elsewhere (a subagent's answers).
    fn usage(&mut self, _usage: &Usage) {}
    /// One line of a subagent's work, under the parent's `agent` call.
    fn subagent_line(&mut self, _line: &str) {}

    fn text(&mut self, text: &str);
    fn reasoning(&mut self, text: &str);
    /// A tool call began streaming (its arguments are still arriving).
    fn tool_call_started(&mut self, name: &str);
    /// A request failed and will be tried again after `delay` (attempt `attempt` of `of`).
    fn retry(&mut self, attempt: u32, of: u32, delay: Duration, reason: &str);
    /// An answer ended: `complete` when it arrived whole, otherwise cut by an error or the user
    /// (then `response` holds what arrived, possibly nothing).
    fn answer_end(&mut self, response: &ChatResponse, complete: bool);
    fn tool_call(&mut self, call: &ToolCall);
    fn tool_result(&mut self, call: &ToolCall, outcome: &ToolOutcome);
    /// A compaction began, ended or failed.
    fn compaction(&mut self, _event: &CompactionEvent<'_>) {}
    /// A snapshot of the working folder failed (said once a session).
    fn checkpoint_failed(&mut self, _reason: &str) {}
    /// The turn waits with nothing to show yet: what for (until the next event).
    fn waiting(&mut self, _what: Waiting<'_>) {}
}

/// What a turn waits for.
#[derive(Debug, Clone, Copy)]
pub enum Waiting<'a> {
    /// MCP servers still starting, before the first request.
    Servers,
    /// The model's answer, before its first token.
    Model,
    /// Tools running, by name.
    Tools(&'a [&'a str]),
}

/// What happened to a compaction.
#[derive(Debug)]
pub enum CompactionEvent<'a> {
    /// `automatic`: started by `new` (the window is nearly full, or the server refused the
    /// request as too long), not by `/compact`.
    Started {
        automatic: bool,
    },
    Done(&'a Compacted),
    Failed {
        reason: String,
        /// This failure opened the breaker: automatic compaction is off for the session.
        breaker_opened: bool,
    },
    Cancelled,
}

/// A summary node was added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    pub summary_id: String,
    pub messages: u64,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// How a turn ended.
#[derive(Debug)]
pub enum TurnEnd {
    /// The model answered without asking for tools.
    Complete,
    /// The model was still asking for tools after this many rounds.
    RoundLimit(usize),
    /// The user interrupted; what arrived was stored.
    Interrupted,
    /// A hook said `"continue": false`, with this reason for the user; what arrived was stored.
    Stopped(String),
    /// The context window was nearly full and compaction was off or could not make room: the
    /// model was told to wrap up, and its answer was stored.
    ContextFull,
    Failed(AgentError),
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// How a round of tools ended.
enum Flow {
    Go,
    Interrupted,
    Stopped(String),
}

/// A source of interrupts (Ctrl-C): each new value of the channel is one interrupt.
pub type Interrupts = watch::Receiver<u64>;

/// The most tool calls run from one answer; the rest get [`TOO_MANY_CALLS`].
pub const MAX_CALLS_PER_ANSWER: usize = 64;
/// The result of a call past [`MAX_CALLS_PER_ANSWER`].
pub const TOO_MANY_CALLS: &str = "This tool call was not run: at most 64 calls are run from one answer. Ask for fewer at a time.";

/// The text asking for the wrap-up answer at the round limit; sent, never stored.
pub const WRAP_UP_PROMPT: &str = "You have used every tool round this request allows. Do not call any \
     more tools. Reply to the user now: say briefly what you did, where things stand, and what is left \
     to do.";

/// The last request's extra instruction when the context window is nearly full and cannot be
/// compacted (CodePilot's `context_safety_margin`).
pub const CONTEXT_FULL_PROMPT: &str = "The conversation has nearly filled your context window and \
     cannot be compacted. Do not call any more tools. Reply to the user now: say briefly what you \
     did, where things stand, and what is left to do, so that the work can go on in a fresh \
     branch.";

pub struct Agent<'a> {
    pub provider: &'a dyn Model,
    pub tools: &'a ToolRegistry,
    pub model: String,
    pub max_rounds: usize,
    /// Context management (previews, summaries, the breaker); None sends every branch whole.
    pub context: Option<&'a Context>,
    /// The only tools offered and run (a skill's `allowed-tools` while its turn runs).
    pub allowed_tools: Option<&'a [String]>,
    /// Snapshots of the working folder around rounds of tools that may change it.
    pub checkpoints: Option<&'a Checkpoints>,
    /// The user's hooks (iterations, tool calls, compaction).
    pub hooks: Option<&'a Hooks>,
    /// Subagent roles (the `agent` tool); None in a subagent (no recursion).
    pub subagents: Option<&'a subagent::Subagents>,
    /// In a subagent: its role.
    pub role: Option<&'a str>,
    /// Answers running side by side (`/retry --n K`): the folder they share.
    pub folder: Option<&'a shared_folder::SharedFolder>,
}

/// One turn's course: when it began, and (beside other answers) its place among them until its
/// first message is stored.
struct Course {
    started: Instant,
    place: Option<usize>,
}

/// Where one exchange stands before its request is sent: the window is looked at once for a
/// compaction, then once for a last answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Compaction,
    Window,
    Sending,
}

impl Agent<'_> {
    /// Runs the loop for the message at the session's cursor (normally the user's new message).
    pub async fn run(
        &self,
        session: &mut ChatSession,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
    ) -> TurnEnd {
        let mut hold = shared_folder::Hold::Nothing;
        let mut course = Course {
            started: Instant::now(),
            place: self.folder.map(|f| f.take_place()),
        };
        let end = self
            .turn(session, observer, gate, interrupts, &mut hold, &mut course)
            .await;
        if let Some(folder) = self.folder {
            if let Some(place) = course.place {
                folder.first_stored_at(place);
            }
            folder.release(hold, self.checkpoints, self.tools.workdir());
        }
        self.provider.turn_ended();
        end
    }

    async fn turn<'f>(
        &'f self,
        session: &mut ChatSession,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
        hold: &mut shared_folder::Hold<'f>,
        course: &mut Course,
    ) -> TurnEnd {
        interrupts.borrow_and_update();
        // The whole results of this conversation's tool calls are readable, never writable.
        self.tools
            .workdir()
            .set_results_root(self.results_dir(session));
        // MCP servers still starting are waited for (at most their handshake timeout), so that
        // their tools are offered; Ctrl-C stops the wait, not the turn.
        if let Some(mcp) = self.tools.source::<Manager>() {
            observer.waiting(Waiting::Servers);
            tokio::select! {
                _ = mcp.settle() => {}
                _ = interrupts.changed() => {}
            }
        }
        if let Some(hooks) = self.hooks {
            hooks.set_session(session.id(), &session.store().path(session.id()));
        }
        for round in 0..self.max_rounds {
            let numbered = |event: &str| Input {
                iteration: Some(round as u64 + 1),
                ..Input::new(event)
            };
            match self
                .hook(observer, interrupts, numbered("iteration_start"))
                .await
            {
                None => return TurnEnd::Interrupted,
                Some(Outcome {
                    stop: Some(reason), ..
                }) => return TurnEnd::Stopped(reason),
                Some(_) => {}
            }
            let (result, partial, full) = self
                .exchange(session, observer, gate, interrupts, None)
                .await;
            // The wait for the answers begun before it is not this answer's time.
            course.started += self.first_message(&mut course.place).await;
            if full {
                return self.store_wrap_up(
                    session,
                    observer,
                    result,
                    partial,
                    TurnEnd::ContextFull,
                    course.started,
                );
            }
            let response = match result {
                Some(Ok(response)) => response,
                Some(Err(e)) => {
                    observer.answer_end(&partial, false);
                    if let Err(store) = self.store_partial(session, partial, course.started) {
                        return TurnEnd::Failed(store);
                    }
                    return TurnEnd::Failed(e.into());
                }
                None => {
                    observer.answer_end(&partial, false);
                    return match self.store_partial(session, partial, course.started) {
                        Ok(()) => TurnEnd::Interrupted,
                        Err(e) => TurnEnd::Failed(e),
                    };
                }
            };
            observer.answer_end(&response, true);
            let status = response.status();
            let calls = response.tool_calls.clone();
            if let Err(e) = session.add(self.assistant_message(response, false, course.started)) {
                return TurnEnd::Failed(e.into());
            }
            if status == ResponseStatus::Complete {
                // The answer is whole: a hook stopped by Ctrl-C here does not undo it.
                let _ = self
                    .hook(observer, interrupts, numbered("iteration_end"))
                    .await;
                return TurnEnd::Complete;
            }
            // The folder's state before a round that may change it (on the answer that asked),
            // and after it (on the round's last result). The first one also stands for the root.
            let changes_files = calls.iter().any(|c| !self.is_read(&c.function.name));
            // Beside other answers: this round's share of the folder (held to the round's end).
            let _share = match self.folder {
                Some(folder) => {
                    let mut watch = interrupts.clone();
                    tokio::select! {
                        share = folder.round(hold, changes_files, self.checkpoints) => share,
                        // Ctrl-C while waiting for the folder: none of the calls runs.
                        _ = watch.changed() => {
                            for call in &calls {
                                let result = Message::tool_result(call.id.clone(), INTERRUPTED_RESULT);
                                if let Err(e) = session.add(result) {
                                    return TurnEnd::Failed(e.into());
                                }
                            }
                            return TurnEnd::Interrupted;
                        }
                    }
                }
                None => None,
            };
            if changes_files {
                let mut nodes = vec![session.conversation().cursor().to_string()];
                if session.conversation().checkpoints.is_empty() {
                    nodes.push(session.conversation().root_id.clone());
                }
                self.checkpoint(session, observer, &nodes);
            }
            let ran = self
                .run_tools(session, &calls, observer, gate, interrupts)
                .await;
            if changes_files {
                let last = session.conversation().cursor().to_string();
                self.checkpoint(session, observer, &[last]);
            }
            let ended = self
                .hook(observer, interrupts, numbered("iteration_end"))
                .await;
            match (ran, ended) {
                (Err(e), _) => return TurnEnd::Failed(e.into()),
                (Ok(Flow::Interrupted), _) | (Ok(Flow::Go), None) => {
                    return TurnEnd::Interrupted;
                }
                (Ok(Flow::Stopped(reason)), _) => return TurnEnd::Stopped(reason),
                (Ok(Flow::Go), Some(outcome)) => {
                    if let Some(reason) = outcome.stop {
                        return TurnEnd::Stopped(reason);
                    }
                }
            }
        }
        self.wrap_up(session, observer, gate, interrupts, course)
            .await
    }

    /// At the round limit: one more request in which the model may not call tools, asking it to
    /// say where it stands. Its answer is stored (tool calls it made anyway are dropped); the
    /// request's extra instruction is not.
    async fn wrap_up(
        &self,
        session: &mut ChatSession,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
        course: &mut Course,
    ) -> TurnEnd {
        let (result, partial, _) = self
            .exchange(session, observer, gate, interrupts, Some(WRAP_UP_PROMPT))
            .await;
        let started = course.started + self.first_message(&mut course.place).await;
        self.store_wrap_up(
            session,
            observer,
            result,
            partial,
            TurnEnd::RoundLimit(self.max_rounds),
            started,
        )
    }

    /// Stores the answer of a request that may not call tools (tool calls it made anyway are
    /// dropped) and ends the turn with `end`, or as it failed.
    fn store_wrap_up(
        &self,
        session: &mut ChatSession,
        observer: &mut dyn Observer,
        result: Option<Result<ChatResponse, LlmError>>,
        partial: ChatResponse,
        end: TurnEnd,
        started: Instant,
    ) -> TurnEnd {
        let (response, end) = match result {
            Some(Ok(mut response)) => {
                response.tool_calls.clear();
                (response, end)
            }
            Some(Err(e)) => (partial, TurnEnd::Failed(e.into())),
            None => (partial, TurnEnd::Interrupted),
        };
        let complete = matches!(end, TurnEnd::RoundLimit(_) | TurnEnd::ContextFull);
        observer.answer_end(&response, complete);
        let stored = if complete {
            session
                .add(self.assistant_message(response, false, started))
                .map(|_| ())
                .map_err(AgentError::from)
        } else {
            self.store_partial(session, response, started)
        };
        match stored {
            Ok(()) => end,
            Err(e) => TurnEnd::Failed(e),
        }
    }

    /// Where the whole results of the session's tool calls are saved.
    fn results_dir(&self, session: &ChatSession) -> PathBuf {
        context::results_dir(session.store().dir(), session.id())
    }

    /// The request for the branch at the cursor and its estimated tokens. `wrap_up`: the
    /// instruction of a last answer (at the round limit, or with the window full), with tools
    /// described but not callable.
    fn build<'s>(
        &self,
        session: &'s ChatSession,
        wrap_up: Option<&'s str>,
    ) -> (ChatRequest<'s>, u64) {
        let c = session.conversation();
        let mut messages = match self.context {
            Some(ctx) => ctx.request_messages(c, c.cursor(), &self.results_dir(session)),
            None => c.api_messages(c.cursor()),
        };
        if let Some(prompt) = wrap_up {
            messages.push(crate::vocab::ChatMessage::text(Role::User, prompt));
        }
        add_mcp_instructions(&mut messages, self.tools);
        let mut tools = subagent::Subagents::specs(self.subagents, self.tools);
        if let Some(allowed) = self.allowed_tools {
            tools.retain(|t| allowed.contains(&t.name));
        }
        let estimate = context::estimate_request(&messages, &tools);
        // What the window leaves for the answer (servers refuse a request whose prompt and cap
        // together exceed it), a little kept aside for the estimate's error.
        // Only a window known (configured, told, learned, the family's): a guessed one would cap
        // answers for nothing.
        let max_tokens = self.context.and_then(|ctx| {
            let (window, source) = ctx.window();
            if source == WindowSource::Fallback {
                return None;
            }
            let left = window.saturating_sub(ctx.scale(estimate) + window / 20);
            Some(left.clamp(256, u64::from(u32::MAX)) as u32)
        });
        let request = ChatRequest {
            model: self.model.clone(),
            messages,
            tools,
            no_tool_calls: wrap_up.is_some(),
            max_tokens,
        };
        (request, estimate)
    }

    /// One request for the branch at the cursor, with context management around it: a
    /// compaction first when the window is nearly full, and when the server refuses the request
    /// as too long, one compaction and one retry (never more). When the window is still nearly
    /// full after that (compaction off or failed), the request becomes a last answer
    /// ([`CONTEXT_FULL_PROMPT`]). Returns as [`Agent::stream`] does, and whether it became that.
    async fn exchange(
        &self,
        session: &mut ChatSession,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
        mut wrap_up: Option<&'static str>,
    ) -> (Option<Result<ChatResponse, LlmError>>, ChatResponse, bool) {
        // Built once; again only after a compaction changed what is sent, or as a last answer.
        // A request borrows the branch: it is let go before a compaction adds to it.
        let mut stage = Stage::Compaction;
        let mut full = false;
        let mut retried = false;
        loop {
            let (request, estimate) = self.build(session, wrap_up);
            if stage == Stage::Compaction {
                stage = Stage::Window;
                if let Some(ctx) = self.context
                    && ctx.should_compact(estimate)
                {
                    drop(request);
                    match self
                        .compact(session, observer, interrupts, None, true)
                        .await
                    {
                        Err(CompactError::Cancelled) if !gate.continue_uncompacted() => {
                            return (None, ChatResponse::default(), false);
                        }
                        _ => continue,
                    }
                }
            }
            if stage == Stage::Window {
                stage = Stage::Sending;
                if wrap_up.is_none() && self.context.is_some_and(|ctx| ctx.nearly_full(estimate)) {
                    full = true;
                    wrap_up = Some(CONTEXT_FULL_PROMPT);
                    continue;
                }
            }
            let (result, partial) = self.stream(&request, observer, interrupts).await;
            drop(request);
            let Some(ctx) = self.context else {
                return (result, partial, full);
            };
            // A window the server named is believed whether or not compaction may act on it
            // (`/context` and `-p`'s result then say the server's figure), and the request's
            // tokens it counted calibrate the estimates, as an answer's usage does: the room a
            // compaction makes is then measured as the server measures.
            if let Some(Err(LlmError::ContextOverflow { window, tokens, .. })) = &result {
                if let Some(named) = window {
                    ctx.learn_window(*named);
                }
                if let Some(counted) = tokens {
                    ctx.calibrate(estimate, *counted);
                }
            }
            match &result {
                Some(Ok(response)) => {
                    if let Some(usage) = &response.usage {
                        ctx.calibrate(estimate, usage.input_tokens);
                    }
                }
                Some(Err(LlmError::ContextOverflow { window, .. }))
                    if !retried && ctx.settings.enabled && !ctx.breaker_open() =>
                {
                    retried = true;
                    // Believe the server's figure; without one, the window is smaller than
                    // what was just sent.
                    let (current, _) = ctx.window();
                    let learned =
                        window.unwrap_or_else(|| current.min(ctx.scale(estimate) * 9 / 10));
                    ctx.learn_window(learned);
                    match self
                        .compact(session, observer, interrupts, None, true)
                        .await
                    {
                        Ok(_) => continue,
                        Err(CompactError::Cancelled) => return (None, partial, full),
                        Err(_) => {}
                    }
                }
                _ => {}
            }
            return (result, partial, full);
        }
    }

    /// Compacts the branch at the cursor: asks the model for a summary of its start and adds the
    /// summary node under the cursor. `focus` says what the summary should keep above all;
    /// `automatic` when `new` started it. Ctrl-C cancels it and nothing is written.
    pub async fn compact(
        &self,
        session: &mut ChatSession,
        observer: &mut dyn Observer,
        interrupts: &mut Interrupts,
        focus: Option<&str>,
        automatic: bool,
    ) -> Result<Compacted, CompactError> {
        let Some(ctx) = self.context else {
            return Err(CompactError::Nothing);
        };
        let (request, before) = self.build(session, None);
        let fixed = context::estimate_message(&request.messages[0])
            + context::estimate_tools(&request.tools);
        drop(request);
        interrupts.borrow_and_update();
        let result = {
            let c = session.conversation();
            let window = ctx.window().0;
            let margin = if automatic {
                ctx.margin()
            } else {
                ctx.manual_margin()
            };
            let cap = ((window
                .saturating_sub(margin)
                .saturating_sub(ctx.scale(fixed))
                .saturating_sub(ctx.summary_budget())) as f64
                / ctx.factor()) as u64;
            let keep = (ctx.keep_budget() as f64 / ctx.factor()) as u64;
            match compact::plan(c, c.cursor(), ctx, keep, cap) {
                // Nothing a summary could shrink (the branch is short, and its size is the system
                // prompt's and the tools'): no request, no failure, nothing said.
                Err(CompactError::Nothing) if automatic => return Err(CompactError::Nothing),
                Ok(plan)
                    if automatic
                        && compact::replaced_tokens(&plan, ctx)
                            <= (ctx.summary_budget() as f64 / ctx.factor()) as u64 =>
                {
                    return Err(CompactError::Nothing);
                }
                Err(e) => Err(e),
                Ok(plan) => {
                    let _ = self
                        .hook(observer, interrupts, Input::new("pre_compact"))
                        .await;
                    observer.compaction(&CompactionEvent::Started { automatic });
                    let mut stop = Box::pin(async {
                        let _ = interrupts.changed().await;
                    });
                    compact::summarize(self.provider, &self.model, ctx, &plan, focus, &mut stop)
                        .await
                        .and_then(|text| {
                            let mut message =
                                compact::summary_message(&plan, ctx, &text, focus, before, fixed)
                                    .ok_or(CompactError::Nothing)?;
                            // Stored in the provider's tokens, as far as the calibration knows.
                            let info = message.extra.rare.summary.as_mut().expect("a summary node");
                            info.tokens_before = ctx.scale(info.tokens_before);
                            info.tokens_after = ctx.scale(info.tokens_after);
                            if info.tokens_after >= info.tokens_before {
                                return Err(CompactError::NoSmaller {
                                    before: info.tokens_before,
                                    after: info.tokens_after,
                                });
                            }
                            Ok(message)
                        })
                }
            }
        };
        let message = match result {
            Ok(message) => message,
            Err(e) => {
                let event = match &e {
                    CompactError::Cancelled => CompactionEvent::Cancelled,
                    e => CompactionEvent::Failed {
                        reason: e.to_string(),
                        breaker_opened: automatic && ctx.compaction_failed(),
                    },
                };
                observer.compaction(&event);
                return Err(e);
            }
        };
        let info = message.extra.rare.summary.clone().expect("a summary node");
        let summary_id = match session.add(message) {
            Ok(id) => id,
            Err(e) => {
                let reason = e.to_string();
                observer.compaction(&CompactionEvent::Failed {
                    reason: reason.clone(),
                    breaker_opened: automatic && ctx.compaction_failed(),
                });
                return Err(CompactError::Store(reason));
            }
        };
        ctx.compaction_succeeded();
        let done = Compacted {
            summary_id,
            messages: info.messages,
            tokens_before: info.tokens_before,
            tokens_after: info.tokens_after,
        };
        observer.compaction(&CompactionEvent::Done(&done));
        let _ = self.hook(observer, interrupts, Input::new("compact")).await;
        Ok(done)
    }

    /// Sends one request, showing the answer as it streams. Returns the outcome (None when the
    /// user interrupted) and what had arrived of the answer, for keeping when it did not finish.
    async fn stream(
        &self,
        request: &ChatRequest<'_>,
        observer: &mut dyn Observer,
        interrupts: &mut Interrupts,
    ) -> (Option<Result<ChatResponse, LlmError>>, ChatResponse) {
        let mut partial = ChatResponse::default();
        observer.waiting(Waiting::Model);
        let result = {
            let mut on_event = |event: StreamEvent<'_>| match event {
                StreamEvent::Text(t) => {
                    partial.content.push_str(t);
                    observer.text(t);
                }
                StreamEvent::Reasoning(r) => {
                    partial.reasoning.push_str(r);
                    observer.reasoning(r);
                }
                StreamEvent::ToolCallStarted { name } => observer.tool_call_started(name),
                StreamEvent::Retry {
                    attempt,
                    of,
                    delay,
                    reason,
                } => observer.retry(attempt, of, delay, reason),
            };
            tokio::select! {
                result = self.provider.chat(request, &mut on_event) => Some(result),
                _ = interrupts.changed() => None,
            }
        };
        (result, partial)
    }

    /// Beside other answers (`place` is this one's, until its first message is stored): what
    /// follows stores a message, after those that began before it stored their first.
    /// Returns how long it waited.
    async fn first_message(&self, place: &mut Option<usize>) -> Duration {
        let began = Instant::now();
        if let (Some(folder), Some(place)) = (self.folder, place.take()) {
            folder.first_message(place).await;
        }
        began.elapsed()
    }

    /// The message of an answer, with how long its turn had taken when it came (`started`).
    fn assistant_message(
        &self,
        response: ChatResponse,
        interrupted: bool,
        started: Instant,
    ) -> Message {
        Message {
            interrupted,
            extra: Extra {
                tool_calls: (!response.tool_calls.is_empty()).then_some(response.tool_calls),
                model: Some(message::model_name(&self.model)),
                usage: response.usage.map(Box::new),
                seconds: Some(message::tenths(started.elapsed())),
                rare: Rare {
                    reasoning: (!response.reasoning.is_empty()).then_some(response.reasoning),
                    reasoning_signature: response.reasoning_signature,
                    ..Rare::default()
                }
                .into(),
                ..Extra::default()
            }
            .into(),
            ..Message::new(Role::Assistant, response.content)
        }
    }

    /// Stores what arrived of an answer that did not finish, if anything did.
    fn store_partial(
        &self,
        session: &mut ChatSession,
        partial: ChatResponse,
        started: Instant,
    ) -> Result<(), AgentError> {
        if partial.content.is_empty() && partial.reasoning.is_empty() {
            return Ok(());
        }
        session.add(self.assistant_message(partial, true, started))?;
        Ok(())
    }

    /// Runs every call, each after the gate allowed it, storing each result in call order. Calls
    /// that only read (the read kind of the permission table) and come one after another run
    /// together; calls that write or execute run one at a time. When the user interrupted, the
    /// calls that were running and those not run yet get an interrupted result; when a hook
    /// stopped the turn (`"continue": false`), those not run yet say so.
    async fn run_tools(
        &self,
        session: &mut ChatSession,
        calls: &[ToolCall],
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
    ) -> Result<Flow, SessionError> {
        let mut interrupted = false;
        let mut stopped: Option<String> = None;
        let mut i = 0;
        while i < calls.len() {
            if stopped.is_some() && !interrupted {
                session.add(Message::tool_result(calls[i].id.clone(), STOPPED_RESULT))?;
                i += 1;
                continue;
            }
            if i >= MAX_CALLS_PER_ANSWER {
                // A model that asks for thousands of calls at once gets the first ones run.
                session.add(Message::tool_result(calls[i].id.clone(), TOO_MANY_CALLS))?;
                i += 1;
                continue;
            }
            if interrupted || interrupts.has_changed().unwrap_or(false) {
                interrupted = true;
                session.add(Message::tool_result(
                    calls[i].id.clone(),
                    INTERRUPTED_RESULT,
                ))?;
                i += 1;
                continue;
            }
            // The run of read-only calls starting here (at least this call).
            let reads = calls[i..MAX_CALLS_PER_ANSWER.min(calls.len())]
                .iter()
                .take_while(|c| self.is_read(&c.function.name))
                .count()
                .max(1);
            let batch = &calls[i..i + reads];
            i += reads;
            // Ask the gate for each, in order; then run what may run, together.
            let mut decided: Vec<(&ToolCall, Result<serde_json::Value, ToolOutcome>)> =
                Vec::with_capacity(batch.len());
            for call in batch {
                observer.tool_call(call);
                let name = call.function.name.as_str();
                let narrowed = self
                    .allowed_tools
                    .is_some_and(|allowed| !allowed.iter().any(|a| a == name));
                // The subagent tools are the loop's own: an `agent` call starts its subagent
                // here (and waits for it in the foreground), `task_status` reads the tasks.
                if matches!(name, "agent" | "task_status")
                    && !narrowed
                    && let Some(subagents) =
                        subagent::Subagents::offered(self.subagents, self.tools)
                {
                    // The user's pre_tool_use hooks see these calls too, and may block them.
                    let args = serde_json::from_str(&call.function.arguments)
                        .unwrap_or(serde_json::Value::Null);
                    match self
                        .pre_tool_use(call, &args, observer, gate, interrupts)
                        .await
                    {
                        Err(reason) => {
                            stopped = Some(reason);
                            decided.push((call, Err(ToolOutcome::error(STOPPED_RESULT))));
                            break;
                        }
                        Ok(GateDecision::Refuse(text)) => {
                            decided.push((call, Err(ToolOutcome::error(text))));
                            continue;
                        }
                        Ok(GateDecision::Interrupt) => {
                            interrupted = true;
                            decided.push((call, Err(ToolOutcome::error(INTERRUPTED_RESULT))));
                            break;
                        }
                        Ok(GateDecision::Run) => {}
                    }
                    let (outcome, stopped) = if name == "task_status" {
                        self.task_status(subagents, call, observer, interrupts)
                            .await
                    } else {
                        self.run_subagent(subagents, session, call, observer, gate, interrupts)
                            .await
                    };
                    decided.push((call, Err(outcome)));
                    if stopped {
                        interrupted = true;
                        break;
                    }
                    continue;
                }
                let decision = match self.tools.parse_arguments(name, &call.function.arguments) {
                    _ if narrowed => Err(ToolOutcome::error(match self.role {
                        Some(role) => format!(
                            "`{name}` was not run: the subagent `{role}` may use only {}.",
                            self.allowed_tools.unwrap_or_default().join(", ")
                        ),
                        None => format!(
                            "`{name}` was not run: the skill running now allows only {}.",
                            self.allowed_tools.unwrap_or_default().join(", ")
                        ),
                    })),
                    Err(outcome) => Err(outcome),
                    Ok(args) => match self
                        .pre_tool_use(call, &args, observer, gate, interrupts)
                        .await
                    {
                        Ok(GateDecision::Run) => Ok(args),
                        Ok(GateDecision::Refuse(text)) => Err(ToolOutcome {
                            summary: text.clone(),
                            content: text,
                            diff: None,
                            is_error: true,
                        }),
                        Ok(GateDecision::Interrupt) => {
                            interrupted = true;
                            Err(ToolOutcome::error(INTERRUPTED_RESULT))
                        }
                        Err(reason) => {
                            stopped = Some(reason);
                            Err(ToolOutcome::error(STOPPED_RESULT))
                        }
                    },
                };
                decided.push((call, decision));
                if interrupted || stopped.is_some() {
                    break;
                }
            }
            // What each call gives when the ones allowed to run did not run to the end.
            let cut_short = |text: &str| -> Vec<ToolOutcome> {
                decided
                    .iter()
                    .map(|(_, d)| match d {
                        Err(outcome) => outcome.clone(),
                        Ok(_) => ToolOutcome::error(text),
                    })
                    .collect()
            };
            let outcomes: Vec<ToolOutcome> = if interrupted {
                cut_short(INTERRUPTED_RESULT)
            } else if stopped.is_some() {
                cut_short(STOPPED_RESULT)
            } else {
                let running = decided.iter().map(|(call, d)| {
                    let name = call.function.name.as_str();
                    Box::pin(async move {
                        match d {
                            Ok(args) => self.tools.run(name, args).await,
                            Err(outcome) => outcome.clone(),
                        }
                    }) as Pin<Box<dyn Future<Output = ToolOutcome> + '_>>
                });
                let names: Vec<&str> = decided
                    .iter()
                    .filter(|(_, d)| d.is_ok())
                    .map(|(c, _)| c.function.name.as_str())
                    .collect();
                if !names.is_empty() {
                    observer.waiting(Waiting::Tools(&names));
                }
                let all = join_all(running.collect());
                tokio::pin!(all);
                // While the calls run, the sandbox's proxy may ask about a domain.
                let sandbox = self.tools.context().os_sandbox.clone();
                loop {
                    let question = async {
                        match &sandbox {
                            Some(s) => s.next_question().await,
                            None => future::pending().await,
                        }
                    };
                    tokio::select! {
                        outcomes = &mut all => break outcomes,
                        _ = interrupts.changed() => {
                            interrupted = true;
                            break cut_short(INTERRUPTED_WHILE_RUNNING);
                        }
                        q = question => {
                            let yes = gate.network(&q.host, q.port);
                            let _ = q.reply.send(yes);
                        }
                    }
                }
            };
            // Cut short while running: each result is what the interrupt left.
            let cut = interrupted;
            for ((call, args), outcome) in decided.iter().zip(outcomes) {
                observer.tool_result(call, &outcome);
                let mut feedback: Option<String> = None;
                if !interrupted
                    && stopped.is_none()
                    && let Ok(args) = args
                {
                    let input = Input {
                        tool_name: Some(call.function.name.clone()),
                        tool_input: Some(self.tools.declared_arguments(&call.function.name, args)),
                        tool_response: Some(outcome.content.clone()),
                        tool_diff: outcome.diff.clone(),
                        ..Input::new("post_tool_use")
                    };
                    match self.hook(observer, interrupts, input).await {
                        // The results are stored whole; the hooks still to come are not run.
                        None => interrupted = true,
                        // A hook that blocks after the call (exit 2, `"decision": "block"`)
                        // tells the model why, with the result (the call has run).
                        Some(outcome) => {
                            if let Some(reason) = outcome.block {
                                feedback = Some(reason);
                            }
                            stopped = stopped.or(outcome.stop);
                        }
                    }
                }
                let mut content = if cut {
                    outcome.summary.clone()
                } else {
                    outcome.content
                };
                if let Some(reason) = feedback.take() {
                    content.push_str(&format!("\n\n[A hook after this call says: {reason}]"));
                }
                session.add(Message::tool_result(call.id.clone(), content))?;
            }
            // A batch cut short by an interrupt at the gate: the rest of it was not run.
            let rest = if interrupted {
                INTERRUPTED_RESULT
            } else {
                STOPPED_RESULT
            };
            for call in &batch[decided.len()..] {
                session.add(Message::tool_result(call.id.clone(), rest))?;
            }
        }
        Ok(match stopped {
            _ if interrupted => Flow::Interrupted,
            Some(reason) => Flow::Stopped(reason),
            None => Flow::Go,
        })
    }

    /// Takes a snapshot of the working folder and attaches it to `nodes`; a failure is said once
    /// and the turn goes on.
    fn checkpoint(&self, session: &mut ChatSession, observer: &mut dyn Observer, nodes: &[String]) {
        let Some(checkpoints) = self.checkpoints else {
            return;
        };
        match checkpoints.take() {
            Ok(Some(snapshot)) => {
                for node in nodes {
                    if let Err(e) = session.add_checkpoint(node, &snapshot) {
                        observer.checkpoint_failed(&e.to_string());
                        return;
                    }
                }
            }
            Ok(None) => {}
            Err(e) => observer.checkpoint_failed(&e.to_string()),
        }
    }

    /// The `pre_tool_use` hooks, then the gate with their answer: a hook that blocks refuses
    /// the call with its reason (for the model). Err: a hook stopped the turn, with its reason.
    async fn pre_tool_use(
        &self,
        call: &ToolCall,
        args: &serde_json::Value,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
    ) -> Result<GateDecision, String> {
        let input = Input {
            tool_name: Some(call.function.name.clone()),
            tool_input: Some(self.tools.declared_arguments(&call.function.name, args)),
            ..Input::new("pre_tool_use")
        };
        let Some(outcome) = self.hook(observer, interrupts, input).await else {
            return Ok(GateDecision::Interrupt);
        };
        if let Some(reason) = outcome.stop {
            return Err(reason);
        }
        if let Some(reason) = outcome.block {
            tracing::info!(tool = ?call.function.name, outcome = "denied", "tool call");
            return Ok(GateDecision::Refuse(format!(
                "Blocked by a hook: {reason}. The call was not run."
            )));
        }
        let decision = gate.check(call, self.tools, args, outcome.permission);
        if matches!(decision, GateDecision::Refuse(_)) {
            tracing::info!(tool = ?call.function.name, outcome = "denied", "tool call");
        }
        Ok(decision)
    }

    /// Fires the hooks of `input.event` (when any follows it); failures are said on one line.
    /// None when the user interrupted (the hooks running then are stopped, each with its whole
    /// process group).
    async fn hook(
        &self,
        observer: &mut dyn Observer,
        interrupts: &Interrupts,
        input: Input,
    ) -> Option<Outcome> {
        let Some(hooks) = self.hooks.filter(|h| h.wants(&input.event)) else {
            return Some(Default::default());
        };
        if interrupts.has_changed().unwrap_or(false) {
            return None;
        }
        // A copy watches, so the interrupt stays unseen for the caller (a compaction's caller
        // stops the turn on it too).
        let mut watch = interrupts.clone();
        let outcome = tokio::select! {
            outcome = hooks.fire(&input) => outcome,
            _ = watch.changed() => return None,
        };
        for failure in &outcome.failures {
            observer.hook_failed(failure);
        }
        for line in &outcome.notices {
            observer.hook_notice(line);
        }
        Some(outcome)
    }

    /// Whether a call only reads (and so may run beside others).
    fn is_read(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|t| t.kind() == ToolKind::Read)
    }
}

/// Adds what the ready MCP servers ask the model to know, under their names, to the system
/// message of a request (`/dump` shows the same).
pub fn add_mcp_instructions(messages: &mut [crate::vocab::ChatMessage], tools: &ToolRegistry) {
    if let Some(text) = tools.source::<Manager>().and_then(|m| m.instructions())
        && let Some(system) = messages.iter_mut().find(|m| m.role == Role::System)
    {
        system.content = Cow::Owned(format!("{}\n\n{text}", system.content));
    }
}

/// Polls every future until all are done; their outputs in the order given.
async fn join_all<'a, T>(mut futures: Vec<Pin<Box<dyn Future<Output = T> + 'a>>>) -> Vec<T> {
    let mut outputs: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

#[cfg(test)]
mod tests;
