//! Subagents: delegated work in a context of its own (`agent` tool). A `defined` subagent starts
//! fresh (its role's prompt, the environment, the task); a `fork` starts from a copy of the
//! parent's branch. It runs its own agent loop with the tools its role allows, narrowed by
//! `subagent.global_denied_tools` and never wider than the parent's (the same permissions,
//! sandbox and blacklist decide each call; approvals name the role). Its conversation is stored
//! as one of its own, whose header links it to the parent and the call (DESIGN §10).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::defs::{Definition, SubagentSettings, allowed_tools};
use super::tasks::{Ending, TaskState, TaskView, Tasks};
use super::{Agent, Gate, GateDecision, Interrupts, Observer, TurnEnd};
use crate::conversation::SessionError;
use crate::conversation::{ChatSession, Message};
use crate::hooks::HookFailure;
use crate::hooks::Input;
use crate::hooks::Permission;
use crate::hooks::STOP_HOOK_ROUNDS;
use crate::llm::{ChatResponse, ToolCall};
use crate::tools::{ToolOutcome, ToolRegistry};
use crate::vocab::{Role, ToolSpec};
use std::sync::mpsc::SyncSender;
use std::sync::mpsc::sync_channel;
use std::thread::Builder;
use tokio::runtime::Handle;
use tokio::time;

/// The longest a `task_status` call may wait for a task to end.
pub const MAX_STATUS_WAIT: Duration = Duration::from_secs(600);

/// What a session knows of subagents.
#[derive(Debug, Clone, Default)]
pub struct Subagents {
    pub defs: Vec<Definition>,
    pub settings: SubagentSettings,
    /// The environment part of the system prompt, for a defined subagent's fresh context.
    pub environment: String,
    /// The tasks started this program run (shared by the copies).
    pub tasks: Tasks,
}

impl Subagents {
    /// `subagents` when the `agent` tool is offered: subagents are on and the config's `tools`
    /// list lets it be.
    pub fn offered<'s>(
        subagents: Option<&'s Subagents>,
        tools: &ToolRegistry,
    ) -> Option<&'s Subagents> {
        subagents.filter(|s| s.settings.enabled && tools.allows("agent"))
    }

    /// The tools the model is offered: the registry's, then `agent` when it is offered (a
    /// request and `/dump` list the same).
    pub fn specs(subagents: Option<&Subagents>, tools: &ToolRegistry) -> Vec<ToolSpec> {
        let mut specs = tools.specs();
        if let Some(s) = Self::offered(subagents, tools) {
            specs.push(s.spec());
            specs.push(Self::status_spec());
        }
        specs
    }

    /// The system prompt of a role's fresh context, in its parts (a defined subagent's, and
    /// a session's run with `--agent`): the role's prompt, then the environment.
    pub fn fresh_context(&self, def: &Definition) -> Vec<(String, String)> {
        vec![
            (format!("agent {}", def.name), def.prompt.clone()),
            (
                "environment".to_string(),
                format!("\n\n{}", self.environment),
            ),
        ]
    }

    /// That context as one system prompt.
    pub fn fresh_prompt(&self, def: &Definition) -> String {
        self.fresh_context(def)
            .into_iter()
            .map(|(_, text)| text)
            .collect()
    }

    /// The `agent` tool as the model sees it.
    pub fn spec(&self) -> ToolSpec {
        let roles: String = self
            .defs
            .iter()
            .map(|d| format!("\n- {}: {}", d.name, d.description))
            .collect();
        ToolSpec {
            name: "agent".into(),
            description: format!(
                "Delegates a task (all it needs to know) to a subagent with its own context, which \
                 answers with its findings. \
                 `type`: `defined` (default) starts fresh as `role`, `fork` from a copy of this \
                 conversation. After `foreground_wait_seconds` (at once if `background`) it goes \
                 on in the background: you get a task id, its answer comes in a later message. \
                 `metadata`: a JSON object, as a string, for its input. Roles:{roles}"
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["defined", "fork"]},
                    "role": {"type": "string"},
                    "task": {"type": "string"},
                    // A string holding the object: some providers (Gemini) refuse an object
                    // parameter that declares no properties.
                    "metadata": {"type": "string"},
                    "background": {"type": "boolean"},
                    "foreground_wait_seconds": {"type": "integer"},
                    "model": {"type": "string"},
                    "max_turns": {"type": "integer"}
                },
                "required": ["task"]
            }),
        }
    }

    /// The `task_status` tool as the model sees it.
    pub fn status_spec() -> ToolSpec {
        ToolSpec {
            name: "task_status".into(),
            description: "An `agent` task's state; once ended, its answer, error and token use. \
                          `wait_seconds`: wait for its end first."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task_id": {"type": "string"},
                    "wait_seconds": {"type": "integer"}
                },
                "required": ["task_id"]
            }),
        }
    }
}

/// What a subagent said last: the answer at its cursor, trimmed (empty when it ended elsewhere).
pub(super) fn last_answer(sub: &ChatSession) -> String {
    let c = sub.conversation();
    c.get(c.cursor())
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.content.trim().to_string())
        .unwrap_or_default()
}

/// What a subagent's thread tells the parent waiting for it.
enum Up {
    /// One line of its work (a tool call and how it went).
    Line(String),
    /// It spent tokens (counted in the table; the parent takes them from there).
    Usage,
    HookFailed(HookFailure),
    HookNotice(String),
    Retry {
        attempt: u32,
        of: u32,
        delay: Duration,
        reason: String,
    },
    /// A call of it needs the parent's gate (which may ask the user).
    Ask {
        call: ToolCall,
        args: Value,
        hook: Option<Permission>,
        reply: SyncSender<GateDecision>,
    },
}

/// A subagent's observer: its tool calls become one line each (shown under the parent's call
/// while the parent waits, kept for `/tasks` always); its streamed text is not shown (its answer
/// is the call's result); its tokens are counted.
struct Relay {
    up: mpsc::UnboundedSender<Up>,
    role: String,
    id: String,
    tasks: Tasks,
}

impl Observer for Relay {
    fn hook_failed(&mut self, failure: &HookFailure) {
        let _ = self.up.send(Up::HookFailed(failure.clone()));
    }
    fn hook_notice(&mut self, line: &str) {
        let _ = self.up.send(Up::HookNotice(line.to_string()));
    }
    fn text(&mut self, _text: &str) {}
    fn reasoning(&mut self, _text: &str) {}
    fn tool_call_started(&mut self, _name: &str) {}
    fn retry(&mut self, attempt: u32, of: u32, delay: Duration, reason: &str) {
        let _ = self.up.send(Up::Retry {
            attempt,
            of,
            delay,
            reason: reason.to_string(),
        });
    }
    fn answer_end(&mut self, response: &ChatResponse, _complete: bool) {
        if let Some(usage) = &response.usage {
            self.tasks.add_usage(&self.id, usage);
            let _ = self.up.send(Up::Usage);
        }
    }
    fn tool_call(&mut self, _call: &ToolCall) {}
    fn tool_result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        let mark = if outcome.is_error { "✗" } else { "✓" };
        let line = format!(
            "{} {mark} {}: {}",
            self.role, call.function.name, outcome.summary
        );
        self.tasks.note_call(&self.id, &line);
        let _ = self.up.send(Up::Line(line));
    }
}

/// A subagent's gate: while its parent waits, the parent's (approvals name the role); in the
/// background, the parent's rules without anyone to ask (what would be asked is refused).
struct RelayGate {
    up: mpsc::UnboundedSender<Up>,
    attached: Arc<AtomicBool>,
    fallback: Arc<Mutex<Option<Box<dyn Gate + Send>>>>,
}

impl Gate for RelayGate {
    fn check(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &Value,
        hook: Option<Permission>,
    ) -> GateDecision {
        if self.attached.load(Ordering::SeqCst) {
            let (reply, answer) = sync_channel(1);
            let asked = self.up.send(Up::Ask {
                call: call.clone(),
                args: args.clone(),
                hook,
                reply,
            });
            // No answer: the parent stopped waiting (the task went to the background meanwhile).
            if asked.is_ok()
                && let Ok(decision) = answer.recv()
            {
                return decision;
            }
        }
        let mut fallback = self.fallback.lock().unwrap_or_else(|e| e.into_inner());
        match fallback.as_mut() {
            Some(gate) => gate.check(call, tools, args, hook),
            None => GateDecision::Refuse(format!(
                "`{}` was not run: a subagent in the background has no one to approve its calls.",
                call.function.name
            )),
        }
    }
}

/// The most bytes of JSON an `agent` call's `metadata` may take.
const METADATA_MAX: usize = 64 * 1024;

/// The subagent's first message: the task, then the call's `metadata` (if any) as JSON.
fn first_message(task: &str, metadata: Option<&Value>) -> String {
    match metadata {
        None => task.to_string(),
        Some(m) => {
            let json = serde_json::to_string_pretty(m).unwrap_or_else(|_| m.to_string());
            format!(
                "{task}\n\nStructured input (the `metadata` of the call that started you):\n```json\n{json}\n```"
            )
        }
    }
}

/// An `agent` call, read.
struct Start<'d> {
    def: &'d Definition,
    task: String,
    /// The call's `metadata`: structured input, given to the subagent as JSON after the task
    /// and kept in its conversation's header.
    metadata: Option<Value>,
    fork: bool,
    model: Option<String>,
    max_turns: Option<usize>,
    background: bool,
    wait: Option<Duration>,
}

impl<'d> Start<'d> {
    fn read(arguments: &str, subagents: &'d Subagents) -> Result<Start<'d>, String> {
        let args: Value = match serde_json::from_str(arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err("invalid arguments: send one JSON object with `task`".into()),
        };
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::trim);
        let Some(task) = text("task").filter(|t| !t.is_empty()) else {
            return Err("`task` is required: say what the subagent should do".into());
        };
        let fork = match text("type").unwrap_or("defined") {
            "defined" => false,
            "fork" => true,
            other => return Err(format!("`type` {other:?} must be defined or fork")),
        };
        let metadata = match args.get("metadata") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            // Some models send an object as a JSON string.
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(v @ Value::Object(_)) => Some(v),
                _ => return Err("`metadata` must be a JSON object".into()),
            },
            Some(_) => return Err("`metadata` must be a JSON object".into()),
        };
        if let Some(m) = &metadata {
            let size = m.to_string().len();
            if size > METADATA_MAX {
                return Err(format!(
                    "`metadata` is {size} bytes of JSON; at most {METADATA_MAX} are taken (put the rest in a file and name it)"
                ));
            }
        }
        let role = text("role")
            .filter(|r| !r.is_empty())
            .unwrap_or("general-purpose");
        let Some(def) = subagents.defs.iter().find(|d| d.name == role) else {
            let known: Vec<&str> = subagents.defs.iter().map(|d| d.name.as_str()).collect();
            return Err(format!(
                "unknown role `{role}`; the roles are {}",
                known.join(", ")
            ));
        };
        Ok(Start {
            def,
            task: task.to_string(),
            metadata,
            fork,
            model: text("model").filter(|m| !m.is_empty()).map(str::to_string),
            max_turns: args
                .get("max_turns")
                .and_then(Value::as_u64)
                .map(|n| n as usize),
            background: args
                .get("background")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            wait: args
                .get("foreground_wait_seconds")
                .and_then(Value::as_f64)
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| Duration::from_secs_f64(s.min(24.0 * 3600.0))),
        })
    }
}

/// The result of a task that ended while its parent waited.
fn ended(view: &TaskView) -> (ToolOutcome, bool) {
    let footer = view.footer();
    match (view.state, &view.error) {
        (TaskState::Stopped, _) => (
            ToolOutcome::error(format!(
                "the user stopped the subagent; what it said so far: {}\n\n{footer}",
                view.answer
            )),
            true,
        ),
        (_, Some(e)) => (
            ToolOutcome::error(format!("the subagent failed: {e}\n\n{footer}")),
            false,
        ),
        _ => (
            ToolOutcome {
                summary: format!("{} → {} messages · {}", view.role, view.messages, view.id),
                content: format!("{}\n\n{footer}", view.answer),
                diff: None,
                is_error: false,
            },
            false,
        ),
    }
}

/// The result of a task that goes on in the background.
fn backgrounded(view: &TaskView, waited: Option<Duration>) -> ToolOutcome {
    let how = match waited {
        Some(w) if w.subsec_millis() == 0 => {
            format!("did not finish within {} s and goes on", w.as_secs())
        }
        Some(w) => format!("did not finish within {:.1} s and goes on", w.as_secs_f64()),
        None => "works".to_string(),
    };
    let summary = format!("{} → in the background · {}", view.role, view.id);
    ToolOutcome {
        content: format!(
            "The subagent `{}` {how} in the background as task {}. Its answer will arrive in a \
             later message; `task_status` with this task_id tells where it stands meanwhile.\n\n{}",
            view.role,
            view.id,
            view.footer()
        ),
        summary,
        diff: None,
        is_error: false,
    }
}

impl Agent<'_> {
    /// Runs an `agent` call: its subagent starts on a thread of its own; in the foreground the
    /// parent waits for it (relaying its lines and approval questions) until it ends or the wait
    /// is over, in the background it returns at once. Returns the call's result, and whether the
    /// user interrupted (the parent's turn then stops too).
    pub(super) async fn run_subagent(
        &self,
        subagents: &Subagents,
        parent: &ChatSession,
        call: &ToolCall,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
    ) -> (ToolOutcome, bool) {
        let start = match Start::read(&call.function.arguments, subagents) {
            Ok(start) => start,
            Err(e) => return (ToolOutcome::error(e), false),
        };
        let def = start.def;
        let model = start
            .model
            .clone()
            .or_else(|| def.model.clone())
            .unwrap_or_else(|| self.model.clone());
        let max_turns = start
            .max_turns
            .or(def.max_turns)
            .unwrap_or(self.max_rounds)
            .clamp(1, self.max_rounds.max(1));
        // Never wider than the parent: what the parent is offered, narrowed.
        let offered: Vec<String> = match self.allowed_tools {
            Some(allowed) => allowed.to_vec(),
            None => self.tools.names(),
        };
        let allowed = allowed_tools(def, &offered, &subagents.settings);
        let mut sub = match self.subagent_session(subagents, parent, call, &start) {
            Ok(sub) => sub,
            Err(e) => {
                return (
                    ToolOutcome::error(format!("starting the subagent: {e}")),
                    false,
                );
            }
        };
        let id = sub.id().to_string();
        let tasks = subagents.tasks.clone();
        let handles = tasks.add(&id, &def.name, parent.id(), &start.task);
        let (up, mut from_task) = mpsc::unbounded_channel();
        let mut relay = Relay {
            up: up.clone(),
            role: def.name.clone(),
            id: id.clone(),
            tasks: tasks.clone(),
        };
        let mut relay_gate = RelayGate {
            up,
            attached: handles.attached,
            fallback: handles.fallback,
        };
        let mut stop = handles.stop;
        let provider = self.provider.share();
        let tools = self.tools.detached();
        let context = self.context.map(|c| c.for_model(&model));
        let hooks = self.hooks.map(|h| h.fork());
        let role = def.name.clone();
        let thread_tasks = tasks.clone();
        let runtime = Handle::current();
        let spawned = Builder::new()
            .name(format!("subagent {role}"))
            .spawn(move || {
                // Dropped before the relay (a local, the relay a capture): the table knows how
                // the task ended before its parent hears that it did.
                let ending = Ending::new(thread_tasks, &relay.id);
                let end = runtime.block_on(async {
                    let agent = Agent {
                        provider: &*provider,
                        tools: &tools,
                        model,
                        max_rounds: max_turns,
                        context: context.as_ref(),
                        allowed_tools: Some(&allowed),
                        checkpoints: None,
                        hooks: hooks.as_ref(),
                        subagents: None,
                        role: Some(&role),
                        folder: None,
                    };
                    let mut end = agent
                        .run(&mut sub, &mut relay, &mut relay_gate, &mut stop)
                        .await;
                    // The user's `subagent_stop` hooks (Claude Code's `SubagentStop`) may ask
                    // a subagent that answered to go on, a few times at most.
                    for round in 0..STOP_HOOK_ROUNDS {
                        let Some(hooks) = hooks.as_ref().filter(|h| h.wants("subagent_stop"))
                        else {
                            break;
                        };
                        if !matches!(end, TurnEnd::Complete) {
                            break;
                        }
                        let c = sub.conversation();
                        let input = Input {
                            response: c.get(c.cursor()).map(|m| m.content.clone()),
                            stop_hook_active: round > 0,
                            ..Input::new("subagent_stop")
                        };
                        let mut watch = stop.clone();
                        let outcome = tokio::select! {
                            outcome = hooks.fire(&input) => outcome,
                            _ = watch.changed() => break,
                        };
                        for failure in &outcome.failures {
                            relay.hook_failed(failure);
                        }
                        for line in &outcome.notices {
                            relay.hook_notice(line);
                        }
                        if let Some(reason) = outcome.stop {
                            end = TurnEnd::Stopped(reason);
                            break;
                        }
                        let Some(reason) = outcome.block else {
                            break;
                        };
                        let text = format!("[A hook asks you to go on: {reason}]");
                        if let Err(e) = sub.add(Message::new(Role::User, text)) {
                            end = TurnEnd::Failed(e.into());
                            break;
                        }
                        end = agent
                            .run(&mut sub, &mut relay, &mut relay_gate, &mut stop)
                            .await;
                    }
                    end
                });
                let answer = last_answer(&sub);
                let c = sub.conversation();
                let (state, error) = match end {
                    TurnEnd::Complete | TurnEnd::RoundLimit(_) | TurnEnd::ContextFull => {
                        (TaskState::Completed, None)
                    }
                    TurnEnd::Interrupted => (TaskState::Stopped, None),
                    TurnEnd::Stopped(reason) => (
                        TaskState::Stopped,
                        Some(format!("a hook stopped the subagent: {reason}")),
                    ),
                    TurnEnd::Failed(e) => (TaskState::Failed, Some(e.to_string())),
                };
                ending.say(state, answer, error, c.len().saturating_sub(1));
            });
        match spawned {
            Ok(thread) => tasks.set_thread(&id, thread),
            Err(e) => {
                let error = format!("starting the subagent's thread: {e}");
                tasks.finish(
                    &id,
                    TaskState::Failed,
                    String::new(),
                    Some(error.clone()),
                    0,
                );
                return (ToolOutcome::error(error), false);
            }
        }
        if start.background {
            tasks.detach(&id, gate.unattended());
            let view = tasks.find(&id).expect("just added");
            return (backgrounded(&view, None), false);
        }
        let wait = start.wait.unwrap_or(subagents.settings.default_wait);
        let deadline = time::sleep(wait);
        tokio::pin!(deadline);
        let mut stopping = false;
        loop {
            tokio::select! {
                biased;
                up = from_task.recv() => match up {
                    // Stopping: what it would still ask is not asked.
                    Some(Up::Ask { reply, .. }) if stopping => {
                        let _ = reply.send(GateDecision::Interrupt);
                    }
                    Some(Up::Ask { call, args, hook, reply }) => {
                        gate.set_label(Some(def.name.clone()));
                        let decision = gate.check(&call, self.tools, &args, hook);
                        gate.set_label(None);
                        let _ = reply.send(decision);
                    }
                    Some(Up::Line(line)) => observer.subagent_line(&line),
                    Some(Up::Usage) => observer.usage(&tasks.take_pending(&id)),
                    Some(Up::HookFailed(failure)) => observer.hook_failed(&failure),
                    Some(Up::HookNotice(line)) => observer.hook_notice(&line),
                    Some(Up::Retry { attempt, of, delay, reason }) => {
                        observer.retry(attempt, of, delay, &reason)
                    }
                    None => break,
                },
                _ = interrupts.changed(), if !stopping => {
                    stopping = true;
                    let _ = tasks.stop(&id);
                }
                _ = &mut deadline, if !stopping => {
                    tasks.detach(&id, gate.unattended());
                    let view = tasks.find(&id).expect("just added");
                    // The task may have ended just now: then its answer is the result after all.
                    if view.state == TaskState::Running {
                        return (backgrounded(&view, Some(wait)), false);
                    }
                    break;
                }
            }
        }
        let view = tasks.find(&id).expect("just added");
        tasks.mark_delivered(&id);
        observer.usage(&tasks.take_pending(&id));
        ended(&view)
    }

    /// The subagent's conversation, ready to run: its system prompt, the parent's branch for a
    /// fork, then the task; its header links it to the parent and the call (DESIGN §10).
    fn subagent_session(
        &self,
        subagents: &Subagents,
        parent: &ChatSession,
        call: &ToolCall,
        start: &Start<'_>,
    ) -> Result<ChatSession, SessionError> {
        let parent_conversation = parent.conversation();
        let system = if start.fork {
            parent_conversation
                .get(&parent_conversation.root_id)
                .map(|m| m.content.clone())
                .unwrap_or_default()
        } else {
            subagents.fresh_prompt(start.def)
        };
        // The answer that asked for this call (earlier calls of it may have their results
        // stored already).
        let asking = parent_conversation
            .ancestors(parent_conversation.cursor())
            .find(|m| {
                m.extra
                    .tool_calls
                    .as_ref()
                    .is_some_and(|calls| calls.iter().any(|c| c.id == call.id))
            })
            .map(|m| m.id.to_string())
            .unwrap_or_else(|| parent_conversation.cursor().to_string());
        let mut sub = ChatSession::new(parent.store().clone(), &system);
        let mut header = json!({
            "parent": {
                "conversation": parent.id(),
                "msg_id": asking,
                "tool_call_id": call.id,
            },
            "agent": start.def.name,
        });
        if let Some(m) = &start.metadata {
            header["input"] = m.clone();
        }
        sub.set_metadata(header);
        if start.fork {
            // The parent's branch up to (not with) the answer that asked: a valid history.
            let mut branch: Vec<Message> = parent_conversation
                .ancestors(&asking)
                .filter(|m| m.parent_id.is_some())
                .skip(1)
                .cloned()
                .collect();
            branch.reverse();
            for m in branch {
                sub.add(m)?;
            }
        }
        sub.add(Message::new(
            Role::User,
            first_message(&start.task, start.metadata.as_ref()),
        ))?;
        Ok(sub)
    }

    /// Runs a `task_status` call: the task's state as JSON, after waiting up to `wait_seconds`
    /// for it to end. A task that ended has thereby given its answer to the parent. Ctrl-C ends
    /// the wait (true: the parent's turn stops too; the task goes on).
    pub(super) async fn task_status(
        &self,
        subagents: &Subagents,
        call: &ToolCall,
        observer: &mut dyn Observer,
        interrupts: &mut Interrupts,
    ) -> (ToolOutcome, bool) {
        let args: Value = serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
        let Some(id) = args.get("task_id").and_then(Value::as_str) else {
            return (
                ToolOutcome::error("`task_id` is required: the id `agent` returned"),
                false,
            );
        };
        let tasks = &subagents.tasks;
        let view = match tasks.find(id) {
            Ok(view) => view,
            Err(e) => return (ToolOutcome::error(e), false),
        };
        let wait = args
            .get("wait_seconds")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s).min(MAX_STATUS_WAIT));
        let mut stopped = false;
        let view = match wait {
            Some(wait) if view.state == TaskState::Running => tokio::select! {
                v = tasks.wait(&view.id, wait) => v.unwrap_or(view),
                _ = interrupts.changed() => {
                    stopped = true;
                    tasks.find(&view.id).unwrap_or(view)
                }
            },
            _ => view,
        };
        if view.state != TaskState::Running {
            tasks.mark_delivered(&view.id);
        }
        observer.usage(&tasks.take_pending(&view.id));
        let outcome = ToolOutcome {
            summary: format!("{} {}", view.id, view.state.as_str()),
            content: serde_json::to_string_pretty(&view.status()).unwrap_or_default(),
            diff: None,
            is_error: false,
        };
        (outcome, stopped)
    }
}
