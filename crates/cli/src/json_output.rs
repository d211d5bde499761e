//! Machine-readable one-shot output (`-p --output-format json|stream-json`): what a script needs of
//! a turn, as one JSON object at the end, or as one object a line while things happen. Human text
//! still goes to stderr through the ordinary [`Printer`].

use std::io::Write;

use serde_json::{Value, json};

use super::output::Printer;
use new_core::agent::Observer;
use new_core::llm::ChatResponse;
use new_core::tools::ToolOutcome;
use new_core::vocab::ToolCall;

/// What `-p` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// The final answer's text (the default).
    #[default]
    Text,
    /// One JSON object when the turn ends.
    Json,
    /// One JSON object a line as things happen, then the result.
    StreamJson,
}

impl OutputFormat {
    pub fn parse(s: &str) -> Option<OutputFormat> {
        match s {
            "text" => Some(OutputFormat::Text),
            "json" => Some(OutputFormat::Json),
            "stream-json" => Some(OutputFormat::StreamJson),
            _ => None,
        }
    }
}

/// Watches a turn for the JSON formats: passes everything to the human printer (stderr in one-shot
/// mode) and keeps what the result reports; with `stream`, also writes each event as a line.
pub struct JsonObserver {
    printer: Printer,
    stream: bool,
    rounds: usize,
    tool_calls: Vec<Value>,
}

impl JsonObserver {
    pub fn new(printer: Printer, stream: bool) -> Self {
        JsonObserver {
            printer,
            stream,
            rounds: 0,
            tool_calls: Vec::new(),
        }
    }

    /// Writes one event line when streaming; a closed pipe is the reader's choice, not an error.
    pub fn emit(&self, event: Value) {
        if self.stream {
            write_line(&event);
        }
    }

    /// The final object: what the turn produced and what it cost.
    pub fn result(&self, fields: ResultFields<'_>) -> Value {
        // The printer sums the turn's tokens as it shows them.
        let turn = self.printer.turn.clone().unwrap_or_default();
        let mut usage = json!({
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
        });
        if let Some(n) = turn.cache_read_tokens {
            usage["cache_read_tokens"] = json!(n);
        }
        if let Some(n) = turn.cache_write_tokens {
            usage["cache_write_tokens"] = json!(n);
        }
        let mut out = json!({
            "type": "result",
            "result": fields.text,
            "conversation_id": fields.conversation_id,
            "node_id": fields.node_id,
            "model": fields.model,
            "usage": usage,
            "num_rounds": self.rounds,
            "duration_ms": self.printer.started.elapsed().as_millis() as u64,
            "is_error": fields.error.is_some(),
            "tool_calls": self.tool_calls,
        });
        if let Some(e) = fields.error {
            out["error"] = json!(e);
        }
        out
    }
}

/// What only the caller knows when the turn ends.
pub struct ResultFields<'a> {
    pub text: &'a str,
    pub conversation_id: &'a str,
    pub node_id: &'a str,
    pub model: &'a str,
    pub error: Option<String>,
}

/// One JSON object and a newline on stdout, flushed at once.
pub fn write_line(value: &Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}").and_then(|()| stdout.flush());
}

impl Observer for JsonObserver {
    fn hook_failed(&mut self, failure: &new_core::hooks::HookFailure) {
        self.printer.hook_failed(failure);
    }

    fn hook_notice(&mut self, line: &str) {
        self.printer.hook_notice(line);
    }

    fn text(&mut self, text: &str) {
        self.printer.text(text);
        self.emit(json!({"type": "text", "text": text}));
    }

    fn reasoning(&mut self, text: &str) {
        self.printer.reasoning(text);
        self.emit(json!({"type": "reasoning", "text": text}));
    }

    fn tool_call_started(&mut self, name: &str) {
        self.printer.tool_call_started(name);
    }

    fn compaction(&mut self, event: &new_core::agent::CompactionEvent<'_>) {
        use new_core::agent::CompactionEvent;
        self.printer.compaction(event);
        let value = match event {
            CompactionEvent::Started { automatic } => {
                json!({"type": "compaction", "event": "started", "automatic": automatic})
            }
            CompactionEvent::Done(done) => json!({
                "type": "compaction",
                "event": "done",
                "summary_id": done.summary_id,
                "messages": done.messages,
                "tokens_before": done.tokens_before,
                "tokens_after": done.tokens_after,
            }),
            CompactionEvent::Failed {
                reason,
                breaker_opened,
            } => json!({
                "type": "compaction",
                "event": "failed",
                "reason": reason,
                "breaker_opened": breaker_opened,
            }),
            CompactionEvent::Cancelled => json!({"type": "compaction", "event": "cancelled"}),
        };
        self.emit(value);
    }

    fn retry(&mut self, attempt: u32, of: u32, delay: std::time::Duration, reason: &str) {
        self.printer.retry(attempt, of, delay, reason);
        self.emit(json!({
            "type": "retry",
            "attempt": attempt,
            "of": of,
            "delay_ms": delay.as_millis() as u64,
            "reason": reason,
        }));
    }

    fn answer_end(&mut self, response: &ChatResponse, complete: bool) {
        self.printer.answer_end(response, complete);
        if complete {
            self.rounds += 1;
        }
    }

    fn tool_call(&mut self, call: &ToolCall) {
        self.printer.tool_call(call);
        self.emit(json!({
            "type": "tool_call",
            "id": call.id,
            "name": call.function.name,
            "arguments": call.function.arguments,
        }));
    }

    fn tool_result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        self.printer.tool_result(call, outcome);
        self.tool_calls.push(json!({
            "name": call.function.name,
            "arguments": call.function.arguments,
            "ok": !outcome.is_error,
        }));
        self.emit(json!({
            "type": "tool_result",
            "id": call.id,
            "name": call.function.name,
            "ok": !outcome.is_error,
            "summary": outcome.summary,
        }));
    }
}
