//! What a session tells its front end ([`Event`], one enum), and what it asks of it
//! ([`Frontend`]'s requests: approvals and the other questions a turn has for its user).

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::agent::tasks::TaskView;
use crate::agent::{AgentError, Compacted, CompactionEvent, Observer, TurnEnd, Waiting};
use crate::conversation::SessionError;
use crate::conversation::StoreError;
use crate::hooks::HookFailure;
use crate::llm::ChatResponse;
use crate::tools::{Rule, ToolKind, ToolOutcome};
use crate::vocab::{ToolCall, Usage};
use std::collections::VecDeque;

/// Everything a session says while it works, in the order it happens. Owned, so that a front end
/// may keep them: a recording front end is a `Vec<Event>`.
#[derive(Debug, Clone)]
pub enum Event {
    /// A piece of the answer's text, as it streams.
    Text(String),
    /// A piece of the model's reasoning, as it streams.
    Reasoning(String),
    /// A tool call began streaming (its arguments are still arriving).
    ToolCallStarted(String),
    /// A tool call about to be judged and run, its arguments whole.
    ToolCall(ToolCall),
    /// What a tool call gave (also a refusal's text, or its diff for a write).
    ToolResult {
        call: ToolCall,
        outcome: ToolOutcome,
    },
    /// An answer ended: `complete` when it arrived whole, otherwise cut by an error or the user.
    AnswerEnd {
        response: ChatResponse,
        complete: bool,
    },
    /// Tokens spent on the turn's behalf elsewhere (a subagent's answers, a background task's).
    Usage(Usage),
    /// A request failed and will be tried again after `delay` (attempt `attempt` of `of`).
    Retry {
        attempt: u32,
        of: u32,
        delay: Duration,
        reason: String,
    },
    /// A compaction began, ended or failed.
    Compaction(Compaction),
    /// A snapshot of the working folder failed (said once a session).
    CheckpointFailed(String),
    /// A hook failed, timed out or crashed: the work goes on.
    HookFailed(HookFailure),
    /// A hook's line for the user (Claude Code's `systemMessage`).
    HookNotice(String),
    /// One line of a subagent's work, under the parent's `agent` call.
    SubagentLine(String),
    /// The turn waits with nothing to show yet: what for (until the next event).
    Waiting(Wait),
    /// Something the session decided or could not do, for the user.
    Notice(Notice),
    /// A turn ended, and how.
    TurnEnded(Ended),
}

/// A compaction's course, owned ([`CompactionEvent`] as an [`Event`] carries it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compaction {
    Started {
        automatic: bool,
    },
    Done(Compacted),
    Failed {
        reason: String,
        breaker_opened: bool,
    },
    Cancelled,
}

impl Compaction {
    /// The borrowed form the agent loop speaks.
    pub fn as_event(&self) -> CompactionEvent<'_> {
        match self {
            Compaction::Started { automatic } => CompactionEvent::Started {
                automatic: *automatic,
            },
            Compaction::Done(done) => CompactionEvent::Done(done),
            Compaction::Failed {
                reason,
                breaker_opened,
            } => CompactionEvent::Failed {
                reason: reason.clone(),
                breaker_opened: *breaker_opened,
            },
            Compaction::Cancelled => CompactionEvent::Cancelled,
        }
    }
}

/// What a turn waits for, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    Servers,
    Model,
    Tools(Vec<String>),
}

/// How a turn ended; [`TurnEnd`] with its error shared, so that an event can carry it too.
#[derive(Debug, Clone)]
pub enum Ended {
    /// The model answered without asking for tools.
    Complete,
    /// The model was still asking for tools after this many rounds.
    RoundLimit(usize),
    /// The user interrupted; what arrived was stored.
    Interrupted,
    /// A hook said `"continue": false`, with this reason for the user; what arrived was stored.
    Stopped(String),
    /// The context window was nearly full and could not be made room in.
    ContextFull,
    /// The request failed; the user's message is stored, to be sent again.
    Failed(Arc<AgentError>),
}

impl From<TurnEnd> for Ended {
    fn from(end: TurnEnd) -> Self {
        match end {
            TurnEnd::Complete => Ended::Complete,
            TurnEnd::RoundLimit(n) => Ended::RoundLimit(n),
            TurnEnd::Interrupted => Ended::Interrupted,
            TurnEnd::Stopped(reason) => Ended::Stopped(reason),
            TurnEnd::ContextFull => Ended::ContextFull,
            TurnEnd::Failed(e) => Ended::Failed(Arc::new(e)),
        }
    }
}

impl Ended {
    pub fn is_complete(&self) -> bool {
        matches!(self, Ended::Complete)
    }
}

/// What the session says besides a turn's stream. The front end words it in its language.
#[derive(Debug, Clone)]
pub enum Notice {
    /// A `pre_message` hook blocked the message, which was not sent.
    Blocked { reason: String },
    /// A `post_message` hook stopped the session's going on (`"continue": false`).
    StoppedByHook { reason: String },
    /// A `post_message` hook asked the model to go on: the message that says so was added.
    HookGoesOn { text: String },
    /// `post_message` hooks asked to go on this many times: no more.
    StopHookGaveUp { rounds: usize },
    /// The user stopped the hooks of this event while they ran.
    HookInterrupted { event: String },
    /// A message could not be stored: nothing was sent.
    NotStored(Arc<SessionError>),
    /// A tool call was refused by a rule, a hard limit, or because nobody could be asked.
    Refused { tool: String, why: RefusedWhy },
    /// An answer of "always" saved its rule in this file.
    RuleSaved { file: PathBuf },
    /// An answer of "always" could not save its rule.
    RuleNotSaved { file: PathBuf, error: String },
    /// An answer of "session" could not add its rule.
    RuleNotAdded { error: String },
    /// A background task ended since the user last heard (its answer is delivered with the next
    /// message).
    TaskEnded(Box<TaskView>),
    /// `subagent.auto_continue`: the answers of this many background tasks came in, and the model
    /// goes on with them.
    AutoContinuing { tasks: usize },
    /// A state of the working folder could not be noted on its node (the folder itself is as
    /// said).
    StateNotNoted(Arc<StoreError>),
}

/// Why a call was refused before it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusedWhy {
    /// A rule or a hard limit, in its own words.
    Rule(String),
    /// It needs approval and nobody can be asked.
    NobodyToAsk,
    /// It writes in `.new/`, `.git/` or the instructions, and nobody can be asked.
    ProtectedNobodyToAsk,
    /// It leaves the OS sandbox, and nobody can be asked.
    LeavingNobodyToAsk,
}

/// A tool call that needs the user's yes.
#[derive(Debug, Clone)]
pub struct Approval {
    pub tool: String,
    /// The id of the call asked about (the model's), for a front end that shows calls apart
    /// (an editor ties its permission request to the call it announced).
    pub call_id: String,
    /// The subagent asking (its role), when one is.
    pub label: Option<String>,
    pub kind: ToolKind,
    /// What would run or change: a diff for a write, the command for `bash`, or the arguments.
    pub preview: String,
    /// It writes where the next session's settings live: only yes or no.
    pub protected: bool,
    /// A command that asks to run outside the OS sandbox: only yes or no.
    pub leaving: bool,
    /// Neither rule would allow this very call again (an allow rule never matches a command
    /// with a redirection, a substitution or a wrapper): only yes or no, and the front end says
    /// why.
    pub no_rule: bool,
    /// The rules an answer of "session" and of "always" add.
    pub session_rule: Rule,
    pub always_rule: Rule,
    /// Where "always" saves its rule.
    pub rules_file: PathBuf,
}

impl Approval {
    /// Only yes or no may be answered.
    pub fn yes_or_no(&self) -> bool {
        self.protected || self.leaving || self.no_rule
    }
}

/// The user's answer to an [`Approval`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Once,
    /// Allowed for the rest of the session (its `session_rule`).
    Session,
    /// Allowed for good (its `always_rule`, saved).
    Always,
    /// Not run; the reason (possibly empty) goes to the model.
    Deny(String),
    /// The user interrupted the question: the turn stops.
    Interrupted,
}

/// A sandboxed command wants to reach a host that `sandbox.network` does not list.
#[derive(Debug, Clone)]
pub struct HostQuestion {
    pub host: String,
    pub port: u16,
    /// Where "always" saves the host (the user's config).
    pub file: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostAnswer {
    No,
    Session,
    Always,
}

/// A yes-or-no question about the working folder, for the user ([`Frontend::confirm`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// Make the folder hold node `n`'s state: these changes.
    Restore {
        n: usize,
        changes: Vec<super::restore::Change>,
    },
    /// These contents cannot be had from the store (path: why): restore the rest?
    RestoreTheRest { broken: Vec<String> },
    /// This many of the files to restore were changed outside `new`: overwrite them too?
    OverwriteOutside { files: usize },
    /// These files changed since the question: overwrite them?
    OverwriteChanged { paths: Vec<String> },
}

/// What a front end does for a session: render its events, answer its requests. The requests'
/// defaults answer as nobody could be asked.
pub trait Frontend {
    fn event(&mut self, event: Event);

    /// Someone can be asked now (a terminal, an editor): without, what needs a yes is refused.
    fn can_ask(&self) -> bool {
        false
    }

    /// A tool call needs the user's yes. Asked only when [`Frontend::can_ask`].
    fn approve(&mut self, _question: &Approval) -> Answer {
        Answer::Deny(String::new())
    }

    /// A sandboxed command wants to reach a host; asked only when [`Frontend::can_ask`].
    fn allow_host(&mut self, _question: &HostQuestion) -> HostAnswer {
        HostAnswer::No
    }

    /// The user interrupted an automatic compaction: go on with the turn uncompacted?
    fn continue_uncompacted(&mut self) -> bool {
        false
    }

    /// A yes or no about the working folder (a restore). Asked whenever a command needs it: a
    /// front end with nobody to ask says no.
    fn confirm(&mut self, _question: &Confirm) -> bool {
        false
    }

    /// The session decided after its questions (the REPL gives the keyboard back to what is typed
    /// ahead).
    fn decided(&mut self) {}
}

/// A front end that keeps every event and answers as nobody could be asked, or as told.
#[derive(Debug, Default)]
pub struct Recorder {
    pub events: Vec<Event>,
    /// Answers to approvals, taken in order; none left: nobody can be asked.
    pub answers: VecDeque<Answer>,
    /// Answers to [`Frontend::confirm`], taken in order (none left: no); each question asked is
    /// kept in `confirmed`.
    pub confirms: VecDeque<bool>,
    pub confirmed: Vec<Confirm>,
}

impl Recorder {
    /// The answer's text as it streamed.
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn notices(&self) -> Vec<&Notice> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Notice(n) => Some(n),
                _ => None,
            })
            .collect()
    }
}

impl Frontend for Recorder {
    fn event(&mut self, event: Event) {
        self.events.push(event);
    }
    fn can_ask(&self) -> bool {
        !self.answers.is_empty()
    }
    fn approve(&mut self, _question: &Approval) -> Answer {
        self.answers
            .pop_front()
            .unwrap_or(Answer::Deny(String::new()))
    }
    fn confirm(&mut self, question: &Confirm) -> bool {
        self.confirmed.push(question.clone());
        self.confirms.pop_front().unwrap_or(false)
    }
}

/// The agent loop's [`Observer`], turned into events for a front end (shared with the gate, which
/// asks it questions).
pub struct Relay<'a, 'f> {
    front: &'a RefCell<&'f mut dyn Frontend>,
}

impl<'a, 'f> Relay<'a, 'f> {
    pub fn new(front: &'a RefCell<&'f mut dyn Frontend>) -> Self {
        Relay { front }
    }

    fn send(&self, event: Event) {
        self.front.borrow_mut().event(event);
    }
}

impl Observer for Relay<'_, '_> {
    fn hook_failed(&mut self, failure: &HookFailure) {
        self.send(Event::HookFailed(failure.clone()));
    }
    fn hook_notice(&mut self, line: &str) {
        self.send(Event::HookNotice(line.to_string()));
    }
    fn usage(&mut self, usage: &Usage) {
        self.send(Event::Usage(usage.clone()));
    }
    fn subagent_line(&mut self, line: &str) {
        self.send(Event::SubagentLine(line.to_string()));
    }
    fn text(&mut self, text: &str) {
        self.send(Event::Text(text.to_string()));
    }
    fn reasoning(&mut self, text: &str) {
        self.send(Event::Reasoning(text.to_string()));
    }
    fn tool_call_started(&mut self, name: &str) {
        self.send(Event::ToolCallStarted(name.to_string()));
    }
    fn retry(&mut self, attempt: u32, of: u32, delay: Duration, reason: &str) {
        self.send(Event::Retry {
            attempt,
            of,
            delay,
            reason: reason.to_string(),
        });
    }
    fn answer_end(&mut self, response: &ChatResponse, complete: bool) {
        self.send(Event::AnswerEnd {
            response: response.clone(),
            complete,
        });
    }
    fn tool_call(&mut self, call: &ToolCall) {
        self.send(Event::ToolCall(call.clone()));
    }
    fn tool_result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        self.send(Event::ToolResult {
            call: call.clone(),
            outcome: outcome.clone(),
        });
    }
    fn compaction(&mut self, event: &CompactionEvent<'_>) {
        self.send(Event::Compaction(match event {
            CompactionEvent::Started { automatic } => Compaction::Started {
                automatic: *automatic,
            },
            CompactionEvent::Done(done) => Compaction::Done((*done).clone()),
            CompactionEvent::Failed {
                reason,
                breaker_opened,
            } => Compaction::Failed {
                reason: reason.clone(),
                breaker_opened: *breaker_opened,
            },
            CompactionEvent::Cancelled => Compaction::Cancelled,
        }));
    }
    fn checkpoint_failed(&mut self, reason: &str) {
        self.send(Event::CheckpointFailed(reason.to_string()));
    }
    fn waiting(&mut self, what: Waiting<'_>) {
        self.send(Event::Waiting(match what {
            Waiting::Servers => Wait::Servers,
            Waiting::Model => Wait::Model,
            Waiting::Tools(names) => Wait::Tools(names.iter().map(|n| n.to_string()).collect()),
        }));
    }
}

/// Hands each event to an [`Observer`] (how the REPL's printer, written as one, renders them).
pub fn to_observer(event: &Event, to: &mut dyn Observer) {
    match event {
        Event::Text(t) => to.text(t),
        Event::Reasoning(t) => to.reasoning(t),
        Event::ToolCallStarted(name) => to.tool_call_started(name),
        Event::ToolCall(call) => to.tool_call(call),
        Event::ToolResult { call, outcome } => to.tool_result(call, outcome),
        Event::AnswerEnd { response, complete } => to.answer_end(response, *complete),
        Event::Usage(u) => to.usage(u),
        Event::Retry {
            attempt,
            of,
            delay,
            reason,
        } => to.retry(*attempt, *of, *delay, reason),
        Event::Compaction(c) => to.compaction(&c.as_event()),
        Event::CheckpointFailed(r) => to.checkpoint_failed(r),
        Event::HookFailed(l) => to.hook_failed(l),
        Event::HookNotice(l) => to.hook_notice(l),
        Event::SubagentLine(l) => to.subagent_line(l),
        Event::Waiting(w) => match w {
            Wait::Servers => to.waiting(Waiting::Servers),
            Wait::Model => to.waiting(Waiting::Model),
            Wait::Tools(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                to.waiting(Waiting::Tools(&names));
            }
        },
        Event::Notice(_) | Event::TurnEnded(_) => {}
    }
}
