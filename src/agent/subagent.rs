//! Subagents: delegated work in a context of its own (`agent` tool). A `defined` subagent starts
//! fresh (its role's prompt, the environment, the task); a `fork` starts from a copy of the
//! parent's branch. It runs its own agent loop with the tools its role allows, narrowed by
//! `subagent.global_denied_tools` and never wider than the parent's (the same permissions,
//! sandbox and blacklist decide each call; approvals name the role). Its conversation is stored
//! as one of its own, whose header links it to the parent and the call (DESIGN §10).

use serde_json::{Value, json};

use super::defs::{Definition, SubagentSettings, allowed_tools};
use super::{Agent, Gate, GateDecision, Interrupts, Observer, TurnEnd};
use crate::llm::{ChatResponse, ToolCall};
use crate::session::{ChatSession, Message};
use crate::tools::{ToolOutcome, ToolRegistry};
use crate::vocab::{Role, ToolSpec, Usage};

/// What a session knows of subagents.
#[derive(Debug, Clone, Default)]
pub struct Subagents {
    pub defs: Vec<Definition>,
    pub settings: SubagentSettings,
    /// The environment part of the system prompt, for a defined subagent's fresh context.
    pub environment: String,
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
        }
        specs
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
                "Delegates a task to a subagent that works in a context of its own and answers \
                 with its findings (its tool output does not fill this conversation). `defined` \
                 (the default) starts fresh with a role; `fork` starts from a copy of this \
                 conversation. Roles:{roles}"
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["defined", "fork"]},
                    "role": {"type": "string", "description": "the role (default general-purpose)"},
                    "task": {"type": "string", "description": "what to do, with everything the subagent needs to know"},
                    "model": {"type": "string"},
                    "max_turns": {"type": "integer"}
                },
                "required": ["task"]
            }),
        }
    }
}

/// A subagent's observer: its tool calls become one indented line each under the parent's call;
/// its streamed text is not shown (its answer is the call's result); its tokens count.
struct Nested<'a> {
    inner: &'a mut dyn Observer,
    role: String,
}

impl Observer for Nested<'_> {
    fn hook_failed(&mut self, line: &str) {
        self.inner.hook_failed(line);
    }
    fn text(&mut self, _text: &str) {}
    fn reasoning(&mut self, _text: &str) {}
    fn tool_call_started(&mut self, _name: &str) {}
    fn retry(&mut self, attempt: u32, of: u32, delay: std::time::Duration, reason: &str) {
        self.inner.retry(attempt, of, delay, reason);
    }
    fn answer_end(&mut self, response: &ChatResponse, _complete: bool) {
        if let Some(usage) = &response.usage {
            self.inner.usage(usage);
        }
    }
    fn tool_call(&mut self, _call: &ToolCall) {}
    fn tool_result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        let mark = if outcome.is_error { "✗" } else { "✓" };
        self.inner.subagent_line(&format!(
            "{} {mark} {}: {}",
            self.role, call.function.name, outcome.summary
        ));
    }
    fn checkpoint_failed(&mut self, reason: &str) {
        self.inner.checkpoint_failed(reason);
    }
}

/// A subagent's gate: the parent's, with approvals naming the role.
struct Labelled<'a> {
    inner: &'a mut dyn Gate,
    role: String,
}

impl Gate for Labelled<'_> {
    fn check(&mut self, call: &ToolCall, tools: &ToolRegistry, args: &Value) -> GateDecision {
        self.check_with_hook(call, tools, args, None)
    }

    fn check_with_hook(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &Value,
        hook: Option<crate::hooks::Permission>,
    ) -> GateDecision {
        self.inner.set_label(Some(self.role.clone()));
        let decision = self.inner.check_with_hook(call, tools, args, hook);
        self.inner.set_label(None);
        decision
    }
}

impl Agent<'_> {
    /// Runs an `agent` call in the foreground. Returns its result for the parent, and whether
    /// the user interrupted it (the parent's turn then stops too).
    pub(super) async fn run_subagent(
        &self,
        subagents: &Subagents,
        parent: &ChatSession,
        call: &ToolCall,
        observer: &mut dyn Observer,
        gate: &mut dyn Gate,
        interrupts: &mut Interrupts,
    ) -> (ToolOutcome, bool) {
        let args: Value = match serde_json::from_str(&call.function.arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return (
                    ToolOutcome::error("invalid arguments: send one JSON object with `task`"),
                    false,
                );
            }
        };
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::trim);
        let Some(task) = text("task").filter(|t| !t.is_empty()) else {
            return (
                ToolOutcome::error("`task` is required: say what the subagent should do"),
                false,
            );
        };
        let fork = match text("type").unwrap_or("defined") {
            "defined" => false,
            "fork" => true,
            other => {
                return (
                    ToolOutcome::error(format!("`type` {other:?} must be defined or fork")),
                    false,
                );
            }
        };
        let role = text("role")
            .filter(|r| !r.is_empty())
            .unwrap_or("general-purpose");
        let Some(def) = subagents.defs.iter().find(|d| d.name == role) else {
            let known: Vec<&str> = subagents.defs.iter().map(|d| d.name.as_str()).collect();
            return (
                ToolOutcome::error(format!(
                    "unknown role `{role}`; the roles are {}",
                    known.join(", ")
                )),
                false,
            );
        };
        let model = text("model")
            .map(str::to_string)
            .or_else(|| def.model.clone())
            .unwrap_or_else(|| self.model.clone());
        let max_turns = args
            .get("max_turns")
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .or(def.max_turns)
            .unwrap_or(self.max_rounds)
            .clamp(1, self.max_rounds.max(1));
        // Never wider than the parent: what the parent is offered, narrowed.
        let offered: Vec<String> = match self.allowed_tools {
            Some(allowed) => allowed.to_vec(),
            None => self.tools.names(),
        };
        let allowed = allowed_tools(def, &offered, &subagents.settings);
        let parent_conversation = parent.conversation();
        let system = if fork {
            parent_conversation
                .get(&parent_conversation.root_id)
                .map(|m| m.content.clone())
                .unwrap_or_default()
        } else {
            format!("{}\n\n{}", def.prompt, subagents.environment)
        };
        // The answer that asked for this call (earlier calls of it may have their results
        // stored already).
        let asking = parent_conversation
            .ancestors(parent_conversation.cursor())
            .find(|m| {
                m.tool_calls
                    .as_ref()
                    .is_some_and(|calls| calls.iter().any(|c| c.id == call.id))
            })
            .map(|m| m.id.clone())
            .unwrap_or_else(|| parent_conversation.cursor().to_string());
        let mut sub = ChatSession::new(parent.store().clone(), &system);
        sub.set_metadata(json!({
            "parent": {
                "conversation": parent.id(),
                "msg_id": asking,
                "tool_call_id": call.id,
            },
            "agent": def.name,
        }));
        if fork {
            // The parent's branch up to (not with) the answer that asked: a valid history.
            let mut branch: Vec<Message> = parent_conversation
                .ancestors(&asking)
                .filter(|m| m.parent_id.is_some())
                .skip(1)
                .cloned()
                .collect();
            branch.reverse();
            for m in branch {
                if let Err(e) = sub.add(m) {
                    return (
                        ToolOutcome::error(format!("starting the subagent: {e}")),
                        false,
                    );
                }
            }
        }
        if let Err(e) = sub.add(Message::new(Role::User, task)) {
            return (
                ToolOutcome::error(format!("starting the subagent: {e}")),
                false,
            );
        }
        let agent = Agent {
            provider: self.provider,
            tools: self.tools,
            model,
            max_rounds: max_turns,
            context: self.context,
            allowed_tools: Some(&allowed),
            checkpoints: None,
            hooks: self.hooks,
            subagents: None,
            role: Some(&def.name),
        };
        let mut nested = Nested {
            inner: observer,
            role: def.name.clone(),
        };
        let mut labelled = Labelled {
            inner: gate,
            role: def.name.clone(),
        };
        let end = Box::pin(agent.run(&mut sub, &mut nested, &mut labelled, interrupts)).await;
        // The hooks followed the subagent's conversation; the parent's turn goes on.
        if let Some(hooks) = self.hooks {
            hooks.set_session(parent.id(), &parent.store().path(parent.id()));
        }
        let c = sub.conversation();
        let answer = c
            .get(c.cursor())
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.content.trim().to_string())
            .unwrap_or_default();
        let usage = c
            .ancestors(c.cursor())
            .filter_map(|m| m.usage.as_ref())
            .fold(Usage::default(), |mut total, u| {
                total.add(u);
                total
            });
        let footer = format!(
            "(subagent {} · conversation {} · {} messages · {} in, {} out)",
            def.name,
            sub.id(),
            c.len().saturating_sub(1),
            usage.input_tokens,
            usage.output_tokens
        );
        match end {
            TurnEnd::Complete | TurnEnd::RoundLimit(_) => (
                ToolOutcome {
                    summary: format!("{} → {} messages · {}", def.name, c.len() - 1, sub.id()),
                    content: format!("{answer}\n\n{footer}"),
                    diff: None,
                    is_error: false,
                },
                false,
            ),
            TurnEnd::Interrupted => (
                ToolOutcome::error(format!(
                    "the user stopped the subagent; what it said so far: {answer}\n\n{footer}"
                )),
                true,
            ),
            TurnEnd::Failed(e) => (
                ToolOutcome::error(format!("the subagent failed: {e}\n\n{footer}")),
                false,
            ),
        }
    }
}
