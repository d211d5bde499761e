//! The page as a [`Frontend`]: each event becomes one JSON object for the pages listening; an
//! approval or a question is sent to them and waited for (its answer comes from a button, or Stop).

use std::sync::atomic::Ordering;
use std::sync::mpsc;

use serde_json::{Value, json};

use super::Shared;
use new_core::escape::{escape_controls, escape_controls_keep_lines};
use new_core::session::{
    Answer, Approval, Confirm, Ended, Event, Frontend, HostAnswer, HostQuestion, Notice, Session,
    Wait,
};
use new_core::vocab::Usage;

/// Results longer than this reach the page cut (the file keeps them whole).
const RESULT_CHARS: usize = 8_000;

pub struct WebFront<'a> {
    shared: &'a Shared,
    answers: &'a mpsc::Receiver<(u64, String)>,
    /// The tokens of the turn's answers.
    usage: Usage,
}

impl<'a> WebFront<'a> {
    pub fn new(shared: &'a Shared, answers: &'a mpsc::Receiver<(u64, String)>) -> Self {
        WebFront {
            shared,
            answers,
            usage: Usage::default(),
        }
    }

    /// The turn's tokens added to the session's totals (for the status line).
    pub fn count(&self, engine: &mut Session) {
        engine.totals.0.add(&self.usage);
        engine.totals.2 += 1;
    }

    /// Asks the page: the question goes out with its number, the answer (a button's action, or
    /// `stop`) comes back. Answers to older questions are dropped.
    fn ask(&mut self, mut question: Value) -> String {
        let id = self.shared.questions.fetch_add(1, Ordering::SeqCst) + 1;
        // What an earlier question left unread is not this one's answer.
        while self.answers.try_recv().is_ok() {}
        question["id"] = json!(id);
        *self.shared.pending.lock().expect("pending") = Some((id, question.clone()));
        self.shared.emit(question);
        let answer = loop {
            match self.answers.recv() {
                Ok((n, action)) if n == id => break action,
                Ok(_) => continue,
                Err(_) => break "stop".to_string(),
            }
        };
        *self.shared.pending.lock().expect("pending") = None;
        self.shared
            .emit(json!({"type": "answered", "id": id, "action": answer}));
        answer
    }
}

impl WebFront<'_> {
    /// A question of the page's own (after a move, `/merge --files`): `title` and `text` (text
    /// already escaped), answered Yes or No (Stop: no).
    pub fn yes_or_no(&mut self, tool: &str, title: &str, text: &str) -> bool {
        self.ask(json!({
            "type": "approval",
            "kind": "question",
            "tool": tool,
            "title": title,
            "preview": text,
            "options": ["yes", "no"],
        })) == "yes"
    }
}

/// A notice in words for the page.
fn notice_text(notice: &Notice) -> String {
    match notice {
        Notice::Blocked { reason } => format!("a pre_message hook blocked the message: {reason}"),
        Notice::StoppedByHook { reason } => format!("a hook stopped the session: {reason}"),
        Notice::HookGoesOn { text } => format!("a hook asked the model to go on: {text}"),
        Notice::StopHookGaveUp { rounds } => {
            format!("hooks asked to go on {rounds} times: no more")
        }
        Notice::HookInterrupted { event } => format!("the {event} hooks were stopped"),
        Notice::NotStored(e) => format!("the message could not be stored: {e}"),
        Notice::Refused { tool, why } => format!("{tool} refused: {why:?}"),
        Notice::RuleSaved { file } => format!("rule saved in {}", file.display()),
        Notice::RuleNotSaved { file, error } => {
            format!("the rule could not be saved in {}: {error}", file.display())
        }
        Notice::RuleNotAdded { error } => format!("the rule could not be added: {error}"),
        Notice::TaskEnded(task) => format!("a background task ended: {task:?}"),
        Notice::AutoContinuing { tasks } => {
            format!("the answers of {tasks} background tasks came in; going on")
        }
        Notice::StateNotNoted(e) => format!("the folder's state could not be noted: {e}"),
    }
}

fn ended_text(end: &Ended) -> String {
    match end {
        Ended::Complete => "complete".into(),
        Ended::RoundLimit(n) => format!("round limit ({n})"),
        Ended::Interrupted => "interrupted".into(),
        Ended::Stopped(reason) => format!("stopped by a hook: {reason}"),
        Ended::ContextFull => "context full".into(),
        Ended::Failed(e) => format!("failed: {e}"),
    }
}

/// The text cut to `max` characters, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// One event as the page reads it.
pub fn event_json(event: &Event) -> Value {
    match event {
        Event::Text(t) => json!({"type": "text", "text": t}),
        Event::Reasoning(t) => json!({"type": "reasoning", "text": t}),
        Event::ToolCallStarted(name) => json!({"type": "tool_started", "name": name}),
        Event::ToolCall(call) => json!({
            "type": "tool_call",
            "call": call.id,
            "name": escape_controls(&call.function.name),
            // What a call asks, beside its approval: control and bidi characters as escapes.
            "arguments": escape_controls_keep_lines(&call.function.arguments),
        }),
        Event::ToolResult { call, outcome } => json!({
            "type": "tool_result",
            "call": call.id,
            "name": escape_controls(&call.function.name),
            "ok": !outcome.is_error,
            "summary": outcome.summary,
            "content": cut(&outcome.content, RESULT_CHARS),
            "diff": outcome.diff,
        }),
        Event::AnswerEnd { response, complete } => json!({
            "type": "answer_end",
            "complete": complete,
            "usage": response.usage,
        }),
        Event::Usage(u) => json!({"type": "usage", "usage": u}),
        Event::Retry {
            attempt,
            of,
            delay,
            reason,
        } => json!({"type": "notice", "text": format!(
            "retry {attempt} of {of} in {} ms: {reason}", delay.as_millis())}),
        Event::Compaction(c) => json!({"type": "notice", "text": format!("compaction: {c:?}")}),
        Event::CheckpointFailed(r) => {
            json!({"type": "notice", "text": format!("snapshot failed: {r}")})
        }
        Event::HookFailed(f) => json!({"type": "notice", "text": format!("hook failed: {f:?}")}),
        Event::HookNotice(l) => json!({"type": "notice", "text": l}),
        Event::SubagentLine(l) => json!({"type": "subagent", "text": l}),
        Event::Waiting(w) => json!({"type": "waiting", "for": match w {
            Wait::Servers => "servers".to_string(),
            Wait::Model => "model".to_string(),
            Wait::Tools(names) => names.join(", "),
        }}),
        Event::Notice(n) => json!({"type": "notice", "text": notice_text(n)}),
        Event::TurnEnded(end) => json!({"type": "turn_ended", "reason": ended_text(end)}),
    }
}

impl Frontend for WebFront<'_> {
    fn event(&mut self, event: Event) {
        match &event {
            Event::AnswerEnd {
                response: r,
                complete: _,
            } => {
                if let Some(u) = &r.usage {
                    self.usage.add(u);
                }
            }
            Event::Usage(u) => self.usage.add(u),
            _ => {}
        }
        self.shared.emit(event_json(&event));
    }

    fn can_ask(&self) -> bool {
        true
    }

    fn approve(&mut self, question: &Approval) -> Answer {
        let mut options = vec!["approve"];
        if !question.yes_or_no() {
            options.push("approve-session");
        }
        options.push("deny");
        // What it would run or change, as it is: a control character, a carriage return or a
        // bidirectional override (U+202E) shown as a visible escape, never acted on.
        let answer = self.ask(json!({
            "type": "approval",
            "tool": escape_controls(&question.tool),
            "label": question.label.as_deref().map(escape_controls),
            "preview": escape_controls_keep_lines(&question.preview),
            "options": options,
        }));
        match answer.as_str() {
            "approve" => Answer::Once,
            "approve-session" if !question.yes_or_no() => Answer::Session,
            "stop" => Answer::Interrupted,
            _ => Answer::Deny(String::new()),
        }
    }

    fn allow_host(&mut self, question: &HostQuestion) -> HostAnswer {
        let answer = self.ask(json!({
            "type": "approval",
            "kind": "network",
            "tool": "network",
            "title": format!(
                "A command wants to reach {}:{}, which sandbox.network does not allow",
                escape_controls(&question.host), question.port
            ),
            "preview": format!("{}:{}", escape_controls(&question.host), question.port),
            "file": escape_controls(&question.file.display().to_string()),
            "options": ["approve-session", "approve-always", "deny"],
        }));
        match answer.as_str() {
            "approve-session" | "approve" => HostAnswer::Session,
            "approve-always" => HostAnswer::Always,
            _ => HostAnswer::No,
        }
    }

    fn confirm(&mut self, question: &Confirm) -> bool {
        let (title, text) = match question {
            Confirm::Restore { n, changes } => (
                format!("Make the folder hold node {n}'s files?"),
                changes
                    .iter()
                    .map(|c| {
                        let outside = if c.outside {
                            " (changed outside new)"
                        } else {
                            ""
                        };
                        format!("{} {}{outside}", c.what, escape_controls(&c.path))
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Confirm::RestoreTheRest { broken } => (
                "These cannot be had from the store. Restore the rest?".to_string(),
                broken
                    .iter()
                    .map(|b| escape_controls(b))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Confirm::OverwriteOutside { files } => (
                format!("{files} file(s) were changed outside new: overwrite them too?"),
                String::new(),
            ),
            Confirm::OverwriteChanged { paths } => (
                "These changed since the question. Overwrite them?".to_string(),
                paths
                    .iter()
                    .map(|p| escape_controls(p))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        };
        let answer = self.ask(json!({
            "type": "approval",
            "kind": "question",
            "tool": "restore",
            "title": title,
            "preview": text,
            "options": ["yes", "no"],
        }));
        answer == "yes"
    }
}
