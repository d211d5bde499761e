//! The subagent of an `agent` hook (CodePilot's fourth hook action): a defined role, started fresh
//! with the event as its task, working unattended (what would ask the user is refused), with no
//! hooks of its own. Its conversation is stored like any subagent's, linked to the conversation
//! whose event it answered.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::json;

use super::defs::allowed_tools;
use super::subagent::Subagents;
use super::{Agent, Gate, Observer, TurnEnd};
use crate::context::Context;
use crate::conversation::{ChatSession, Message, Store};
use crate::hooks::AgentRunner;
use crate::hooks::SubagentError;
use crate::llm::{ChatResponse, Model, ToolCall};
use crate::tools::{ToolOutcome, ToolRegistry};
use crate::vocab::Role;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::path::Path;
use std::path::PathBuf;
use std::thread::Builder;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::sync::watch;
use tokio::sync::watch::Sender;

/// Makes the gate of one run: unattended, deciding by the session's permissions.
pub type GateFactory = Arc<dyn Fn() -> Box<dyn Gate + Send> + Send + Sync>;

/// Runs `agent` hooks' subagents for a session.
pub struct HookAgents {
    pub provider: Arc<dyn Model + Send + Sync>,
    pub tools: ToolRegistry,
    pub subagents: Subagents,
    pub model: String,
    pub max_rounds: usize,
    pub context: Context,
    pub store: Store,
    pub gate: GateFactory,
    /// The project's folder: a role defined there (which a cloned repository can supply) answers
    /// only the project's own hooks.
    pub workdir: PathBuf,
}

impl Debug for HookAgents {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookAgents")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Sees nothing: a hook's subagent works out of sight; its conversation keeps what it did.
struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reasoning(&mut self, _: &str) {}
    fn tool_call_started(&mut self, _: &str) {}
    fn retry(&mut self, _: u32, _: u32, _: Duration, _: &str) {}
    fn answer_end(&mut self, _: &ChatResponse, _: bool) {}
    fn tool_call(&mut self, _: &ToolCall) {}
    fn tool_result(&mut self, _: &ToolCall, _: &ToolOutcome) {}
}

impl AgentRunner for HookAgents {
    fn run(
        &self,
        role: &str,
        task: String,
        parent: String,
        project_roles: bool,
    ) -> Pin<Box<dyn Future<Output = Result<String, SubagentError>> + Send>> {
        let fail = |why: SubagentError| -> Pin<Box<dyn Future<Output = _> + Send>> {
            Box::pin(async move { Err(why) })
        };
        let Some(def) = self.subagents.defs.iter().find(|d| d.name == role).cloned() else {
            return fail(SubagentError::UnknownRole {
                role: role.to_string(),
                known: self.subagents.defs.iter().map(|d| d.name.clone()).collect(),
            });
        };
        // A cloned repository's role of the same name must not answer the user's own hook.
        if !project_roles && Path::new(&def.source).starts_with(&self.workdir) {
            return fail(SubagentError::ProjectRole {
                role: role.to_string(),
                file: def.source.clone(),
            });
        }
        let mut sub = ChatSession::new(self.store.clone(), &self.subagents.fresh_prompt(&def));
        sub.set_metadata(json!({
            "parent": {"conversation": parent, "hook": true},
            "agent": def.name,
        }));
        if let Err(e) = sub.add(Message::new(Role::User, task)) {
            return fail(SubagentError::Store {
                reason: e.to_string(),
            });
        }
        let offered = self.tools.names();
        let allowed = allowed_tools(&def, &offered, &self.subagents.settings);
        let model = def.model.clone().unwrap_or_else(|| self.model.clone());
        let max_rounds = def
            .max_turns
            .unwrap_or(self.max_rounds)
            .clamp(1, self.max_rounds.max(1));
        let (provider, tools) = (self.provider.clone(), self.tools.detached());
        let context = self.context.for_model(&model);
        let mut gate = (self.gate)();
        let (done, answer) = oneshot::channel();
        // Dropped (the hook timed out, the user interrupted): the subagent stops.
        struct StopOnDrop(Sender<u64>);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.send_modify(|n| *n += 1);
            }
        }
        let (stopper, mut stop) = watch::channel(0u64);
        let stopper = StopOnDrop(stopper);
        let Ok(runtime) = Handle::try_current() else {
            return fail(SubagentError::NoRuntime);
        };
        let spawned = Builder::new()
            .name(format!("hook agent {}", def.name))
            .spawn(move || {
                let end = runtime.block_on(async {
                    let agent = Agent {
                        provider: &*provider,
                        tools: &tools,
                        model,
                        max_rounds,
                        context: Some(&context),
                        allowed_tools: Some(&allowed),
                        checkpoints: None,
                        hooks: None,
                        subagents: None,
                        role: Some(&def.name),
                        folder: None,
                    };
                    agent.run(&mut sub, &mut Quiet, &mut *gate, &mut stop).await
                });
                let text = super::subagent::last_answer(&sub);
                let result = match end {
                    TurnEnd::Failed(e) => Err(SubagentError::Failed {
                        reason: e.to_string(),
                    }),
                    TurnEnd::Stopped(reason) => Err(SubagentError::Stopped { reason }),
                    TurnEnd::Interrupted => Err(SubagentError::Interrupted),
                    _ if text.is_empty() => Err(SubagentError::NoAnswer),
                    _ => Ok(text),
                };
                let _ = done.send(result);
            });
        if let Err(e) = spawned {
            return fail(SubagentError::Thread { cause: e.into() });
        }
        Box::pin(async move {
            let _stopper = stopper;
            answer.await.unwrap_or(Err(SubagentError::Ended))
        })
    }
}
