//! `-p`, the one-shot front end: one prompt (from the argument and standard input), one turn, the
//! answer on stdout; as text, or machine-readable (`--output-format json|stream-json`): what a
//! script needs of a turn, as one JSON object at the end, or as one object a line while things
//! happen. Human text still goes to stderr through the ordinary [`Printer`].

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use new_core::session::Ended;
use new_core::vocab::Role;

use serde_json::{Value, json};

use super::output::Printer;
use new_core::agent::CompactionEvent;
use new_core::agent::Observer;
use new_core::context::{WindowSource, estimate_text};
use new_core::escape;
use new_core::hooks::HookFailure;
use new_core::llm::ChatResponse;
use new_core::tools::ToolOutcome;
use new_core::vocab::ToolCall;
use std::io;
use std::time::Duration;

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
    let mut stdout = io::stdout().lock();
    let _ = writeln!(stdout, "{value}").and_then(|()| stdout.flush());
}

impl Observer for JsonObserver {
    fn hook_failed(&mut self, failure: &HookFailure) {
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

    fn compaction(&mut self, event: &CompactionEvent<'_>) {
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

    fn retry(&mut self, attempt: u32, of: u32, delay: Duration, reason: &str) {
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

impl super::terminal::Stream for JsonObserver {
    fn interject(&mut self) {
        self.printer.interject();
    }
}

/// The one-shot prompt: `-p -` reads it from stdin; otherwise piped stdin, if any, follows the
/// text after a blank line (`git diff | new -p "review this"`), as `llm` does.
pub(super) fn one_shot_prompt(text: &str) -> Result<String, String> {
    use std::io::Read;
    let stdin = io::stdin();
    if text != "-" && stdin.is_terminal() {
        return Ok(text.to_string());
    }
    let mut piped = String::new();
    if !stdin.is_terminal() {
        // No standard input at all (a closed descriptor) is an empty one, unless it was asked for.
        let read = stdin.lock().read_to_string(&mut piped);
        if let Err(e) = read
            && text == "-"
        {
            return Err(format!("reading the prompt from standard input: {e}"));
        }
    }
    let prompt = match (text, piped.trim().is_empty()) {
        ("-", true) => {
            return Err("-p - reads the prompt from standard input, which is empty".into());
        }
        ("-", false) => piped,
        (_, true) => text.to_string(),
        (_, false) => format!("{text}\n\n{piped}"),
    };
    Ok(prompt)
}

impl super::repl::App {
    /// The JSON result's `prompt_over_window`, when the prompt alone is bigger than the window in
    /// force as the turn ended (a figure an overflow error named wins): how big each is, and
    /// whether the model was given a summary of the prompt instead of the prompt (`summarized`).
    /// `before` is the node the prompt was added under. None when the prompt fits.
    fn prompt_over_window(&self, prompt: &str, before: &str) -> Option<Value> {
        let context = &self.engine.context;
        let (window, source) = context.window();
        let tokens = context.scale(estimate_text(prompt));
        if tokens <= window {
            return None;
        }
        let conversation = self.engine.chat.conversation();
        let current = conversation.cursor();
        let asked = conversation
            .ancestors(current)
            .find(|m| m.role == Role::User && m.parent_id.as_deref() == Some(before));
        let summarized = asked.is_some_and(|asked| {
            !conversation
                .sent(current)
                .messages
                .iter()
                .any(|m| m.id == asked.id)
        });
        Some(json!({
            "prompt_tokens": tokens,
            "window": window,
            "window_from": match source {
                WindowSource::Config => "config",
                WindowSource::Server => "server",
                WindowSource::Error => "error",
                WindowSource::Family(_) => "family",
                WindowSource::Fallback => "assumed",
            },
            "summarized": summarized,
        }))
    }

    pub(super) fn one_shot(
        &mut self,
        prompt: &str,
        format: super::print_mode::OutputFormat,
    ) -> ExitCode {
        self.ready();
        use super::print_mode::{JsonObserver, OutputFormat, ResultFields, write_line};
        // `@server:uri` is read before anything is sent, as at the prompt; one that cannot be
        // read is said (on stderr, and in the JSON's `error`) and nothing is sent.
        let expanded = self.with_resources(prompt);
        if format != OutputFormat::Text {
            let stream = format == OutputFormat::StreamJson;
            let mut observer = JsonObserver::new(Printer::new(self.out), stream);
            observer.emit(serde_json::json!({
                "type": "start",
                "conversation_id": self.engine.chat.id(),
                "model": self.engine.config.model,
            }));
            let before = self.engine.chat.conversation().cursor().to_string();
            let end = match &expanded {
                Some(prompt) => self.chat_with(prompt, &mut observer),
                None => None,
            };
            let current = self.engine.chat.conversation().current();
            let error = match &end {
                None if expanded.is_none() => {
                    Some("an @server:uri resource could not be read".to_string())
                }
                Some(Ended::Complete) | Some(Ended::RoundLimit(_)) | Some(Ended::ContextFull) => {
                    None
                }
                Some(Ended::Interrupted) => Some("interrupted".to_string()),
                Some(Ended::Stopped(reason)) => Some(format!("stopped by a hook: {reason}")),
                Some(Ended::Failed(e)) => Some(e.to_string()),
                None => Some("the message could not be stored".to_string()),
            };
            let answered = current.role == Role::Assistant;
            let mut result = observer.result(ResultFields {
                text: if answered { &current.content } else { "" },
                conversation_id: self.engine.chat.id(),
                node_id: &current.id,
                model: &self.engine.config.model,
                error,
            });
            if let Some(over) = expanded
                .as_deref()
                .and_then(|p| self.prompt_over_window(p, &before))
            {
                result["prompt_over_window"] = over;
            }
            // Known if a command ran (it waited for the probe); unsaid if none did.
            self.say_sandbox(false);
            let failed = self.mcp_failures();
            // Said on stderr too: whoever reads only the JSON's `result` still hears of it.
            for (server, error) in &failed {
                self.out.warn(&self.tr(
                    "mcp_server_failed",
                    &[
                        ("server", server),
                        ("error", &escape::escape_controls(error)),
                    ],
                ));
            }
            result["mcp_errors"] = serde_json::json!(
                failed
                    .iter()
                    .map(|(server, error)| serde_json::json!({"server": server, "error": error}))
                    .collect::<Vec<_>>()
            );
            write_line(&result);
            return match end {
                Some(Ended::Complete) | Some(Ended::RoundLimit(_)) | Some(Ended::ContextFull) => {
                    ExitCode::SUCCESS
                }
                Some(Ended::Interrupted) => ExitCode::from(130),
                _ => ExitCode::from(1),
            };
        }
        let Some(prompt) = expanded else {
            return ExitCode::from(1);
        };
        let end = self.chat(&prompt);
        self.say_sandbox(false);
        for (server, error) in self.mcp_failures() {
            self.out.warn(&self.tr(
                "mcp_server_failed",
                &[
                    ("server", &server),
                    ("error", &escape::escape_controls(&error)),
                ],
            ));
        }
        match end {
            Some(Ended::Complete) => {
                use std::io::Write;
                let answer = &self.engine.chat.conversation().current().content;
                let shown = if self.out.render {
                    let mut r =
                        super::markdown::Renderer::new(super::markdown::terminal_layout(false));
                    let mut text = r.push(&escape::escape_controls_keep_lines(answer));
                    text.push_str(&r.finish());
                    text.trim_end_matches('\n').to_string()
                } else {
                    answer.clone()
                };
                let mut stdout = io::stdout().lock();
                // A closed pipe (`new -p … | head -c1`) is the reader's choice, not a failure.
                let _ = writeln!(stdout, "{shown}").and_then(|()| stdout.flush());
                ExitCode::SUCCESS
            }
            Some(Ended::Interrupted) => {
                // What arrived goes where the answer would have (`-p … > out.txt`), and stderr
                // says it is partial and where it is kept; the exit code is 130.
                use std::io::Write;
                let current = self.engine.chat.conversation().current();
                if current.role == Role::Assistant && !current.content.is_empty() {
                    let mut stdout = io::stdout().lock();
                    let _ = writeln!(stdout, "{}", current.content).and_then(|()| stdout.flush());
                    self.out.warn(&self.tr(
                        "partial_answer_on_stdout",
                        &[("id", &self.engine.chat.id())],
                    ));
                }
                ExitCode::from(130)
            }
            _ => ExitCode::from(1),
        }
    }
}
