//! Terminal output: colour only on a terminal and never with `NO_COLOR`; in one-shot mode stdout
//! carries only the final answer and everything else goes to stderr.

use std::io::Write;

use new_core::agent::Observer;
use new_core::config::Lang;
use new_core::llm::ChatResponse;
use new_core::tools::ToolOutcome;
use new_core::vocab::{ToolCall, Usage};
use new_sys::platform::Stream;

use super::tree_view::preview;
use new_core::agent::CompactionEvent;
use new_core::agent::Waiting;
use new_core::escape;
use new_core::hooks::HookFailure;
use new_sys::os_sandbox;
use new_sys::platform;
use std::borrow::Cow;
use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub color: bool,
    pub lang: Lang,
    /// One-shot (`-p`): stdout holds only the final answer.
    pub one_shot: bool,
    /// Answers are rendered as Markdown ([`super::markdown`]).
    pub render: bool,
}

/// What a command said, when another front end shows it ([`capture`]): each piece with its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    Text(String),
    Warning(String),
    Error(String),
}

thread_local! {
    /// Where [`Output::say`], [`Output::warn`] and [`Output::error`] go on this thread while a
    /// [`capture`] runs (the page of `new web` runs the REPL's own commands through it).
    static CAPTURED: RefCell<Option<Vec<Said>>> = const { RefCell::new(None) };
}

/// Runs `f` with what it says on this thread kept instead of written, and returns it.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<Said>) {
    let outer = CAPTURED.with(|c| c.borrow_mut().replace(Vec::new()));
    let value = f();
    let said = CAPTURED.with(|c| {
        let mut c = c.borrow_mut();
        let said = c.take().unwrap_or_default();
        *c = outer;
        said
    });
    (value, said)
}

/// Kept by a [`capture`] running on this thread: true, and nothing is written.
fn captured(said: impl FnOnce() -> Said) -> bool {
    CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(kept) => {
            kept.push(said());
            true
        }
        None => false,
    })
}

/// Whether the user was told how to widen the sandbox (once a session).
static SANDBOX_HINT_SAID: AtomicBool = AtomicBool::new(false);

const DIM: &str = "2";
const BOLD: &str = "1";
const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const CYAN: &str = "36";

impl Output {
    pub fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint(DIM, text)
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint(BOLD, text)
    }

    pub fn green(&self, text: &str) -> String {
        self.paint(GREEN, text)
    }

    /// Command output: stdout in the REPL, stderr in one-shot mode; on a terminal, lines wider
    /// than it are wrapped at spaces, under their own indent.
    pub fn say(&self, text: &str) {
        self.say_as(text, true);
    }

    /// The same, never rewrapped: a diff, a command or a file's lines keep their columns.
    pub fn say_verbatim(&self, text: &str) {
        self.say_as(text, false);
    }

    fn say_as(&self, text: &str, wrap: bool) {
        if captured(|| Said::Text(text.to_string())) {
            return;
        }
        super::spinner::hush_any();
        let shown = |fd| {
            if wrap { fit(text, fd, 0) } else { text.into() }
        };
        if self.one_shot {
            eprintln!("{}", shown(Stream::Stderr));
        } else {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{}", shown(Stream::Stdout));
            let _ = out.flush();
        }
    }

    pub fn warn(&self, text: &str) {
        if captured(|| Said::Warning(text.to_string())) {
            return;
        }
        let line = super::text::tr(self.lang, "warning_prefix", &[("text", &text)]);
        let prefix = super::text::tr(self.lang, "warning_prefix", &[("text", &"")]);
        self.prefixed(&line, &prefix, YELLOW);
    }

    pub fn error(&self, text: &str) {
        if captured(|| Said::Error(text.to_string())) {
            return;
        }
        let line = super::text::tr(self.lang, "error_prefix", &[("text", &text)]);
        let prefix = super::text::tr(self.lang, "error_prefix", &[("text", &"")]);
        self.prefixed(&line, &prefix, RED);
    }

    /// `warning: …` and `error: …` on stderr, continued lines under the text.
    fn prefixed(&self, line: &str, prefix: &str, colour: &str) {
        super::spinner::hush_any();
        let indent = super::wrap::width(prefix);
        eprintln!("{}", self.paint(colour, &fit(line, Stream::Stderr, indent)));
    }

    pub fn usage_line(&self, usage: &Usage) -> String {
        let mut parts = token_parts(usage);
        if let Some(n) = usage.reasoning_tokens {
            parts.push(format!("{n} reasoning"));
        }
        super::text::tr(self.lang, "usage_line", &[("parts", &parts.join(" · "))])
    }
}

/// `11 in`, `3 out`, and the cached and cache-write counts where reported.
fn token_parts(usage: &Usage) -> Vec<String> {
    let mut parts = vec![
        format!("{} in", usage.input_tokens),
        format!("{} out", usage.output_tokens),
    ];
    if let Some(n) = usage.cache_read_tokens {
        parts.push(format!("{n} cached"));
    }
    if let Some(n) = usage.cache_write_tokens {
        parts.push(format!("{n} cache write"));
    }
    parts
}

/// Adds one answer's token counts to a total.
pub fn add_usage(total: &mut Usage, u: &Usage) {
    total.add(u);
}

/// The status line after a turn: model, the turn's tokens, the context the last request used,
/// the time taken, and the cost where prices are configured.
/// A token count in a few characters: `950`, `9.5k`, `96k`, `1.2M`.
pub fn short_tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..10_000 => format!("{:.1}k", n as f64 / 1_000.0),
        10_000..1_000_000 => format!("{}k", (n + 500) / 1_000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

pub fn status_line(
    lang: Lang,
    model: &str,
    turn: Option<&Usage>,
    context: Option<(u64, u64)>,
    secs: f64,
    cost: Option<f64>,
) -> String {
    let mut parts = turn.map(token_parts).unwrap_or_default();
    if let Some((used, window)) = context {
        parts.push(super::text::tr(
            lang,
            "status_context",
            &[
                ("pct", &(used * 100 / window.max(1))),
                ("window", &short_tokens(window)),
            ],
        ));
    }
    parts.push(super::text::tr(
        lang,
        "status_secs",
        &[("secs", &format!("{secs:.1}"))],
    ));
    if let Some(cost) = cost {
        parts.push(format!("${cost:.4}"));
    }
    super::text::tr(
        lang,
        "status_line",
        &[("model", &model), ("parts", &parts.join(" · "))],
    )
}

/// Diff lines shown from the start and from the end of a long diff; the middle is summarised.
const DIFF_HEAD_LINES: usize = 300;
const DIFF_TAIL_LINES: usize = 100;
/// Longest diff line shown whole, in characters.
const DIFF_LINE_CHARS: usize = 400;

/// A unified diff with added lines green, removed lines red and hunk headers cyan. A long diff
/// shows its head and tail with a note of what was cut, and a long line its start: a 3 MB file
/// does not print 3 MB.
pub fn colour_diff(out: &Output, diff: &str) -> String {
    let mut text = String::new();
    let lines: Vec<&str> = diff.lines().collect();
    let cut = lines.len() > DIFF_HEAD_LINES + DIFF_TAIL_LINES;
    let shown: Vec<(usize, &str)> = if cut {
        lines
            .iter()
            .copied()
            .enumerate()
            .filter(|(i, _)| *i < DIFF_HEAD_LINES || *i >= lines.len() - DIFF_TAIL_LINES)
            .collect()
    } else {
        lines.iter().copied().enumerate().collect()
    };
    for (i, line) in shown {
        if cut && i == lines.len() - DIFF_TAIL_LINES {
            let skipped = lines.len() - DIFF_HEAD_LINES - DIFF_TAIL_LINES;
            let note = super::text::tr(out.lang, "diff_lines_cut", &[("n", &skipped)]);
            text.push_str(&out.dim(&note));
            text.push('\n');
        }
        let chars = line.chars().count();
        let line = if chars > DIFF_LINE_CHARS {
            let head: String = line.chars().take(DIFF_LINE_CHARS).collect();
            let rest = chars - DIFF_LINE_CHARS;
            super::text::tr(out.lang, "diff_line_cut", &[("head", &head), ("n", &rest)])
        } else {
            line.to_string()
        };
        let line = &escape::escape_controls(&line);
        let painted = if line.starts_with("+++") || line.starts_with("---") {
            out.bold(line)
        } else if line.starts_with('+') {
            out.paint(GREEN, line)
        } else if line.starts_with('-') {
            out.paint(RED, line)
        } else if line.starts_with("@@") {
            out.paint(CYAN, line)
        } else {
            line.to_string()
        };
        text.push_str(&painted);
        text.push('\n');
    }
    text
}

/// The width of the terminal on `fd`; None when it is not one.
fn terminal_width(stream: Stream) -> Option<usize> {
    platform::terminal_size(stream).map(|(width, _)| width)
}

/// `text` for the terminal on `fd`: each line wider than it wrapped at spaces, the continuation
/// under the line's own indent (or `hang` columns, for a `warning: ` line). Unchanged when `fd`
/// is not a terminal, and for a line with no space to break at.
fn fit(text: &str, stream: Stream, hang: usize) -> Cow<'_, str> {
    let Some(width) = terminal_width(stream) else {
        return text.into();
    };
    super::wrap::fit(text, width, hang)
}

/// Pieces closer together than this (after one drawn) leave the row of the line still arriving
/// as it was: a fast server's answer is not slowed by drawing it after every piece.
pub const TAIL_EVERY: Duration = Duration::from_millis(20);

/// Whether the row of the line still arriving is drawn for the piece coming now: when the last
/// one came a while ago, or the row was last drawn a while ago.
pub fn tail_due(drawn: &mut Option<Instant>, last_piece: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    let idle = last_piece.is_none_or(|t| now.duration_since(t) >= TAIL_EVERY);
    let spaced = drawn.is_none_or(|t| now.duration_since(t) >= TAIL_EVERY);
    *last_piece = Some(now);
    idle || spaced
}

/// Shows a turn as it happens.
pub struct Printer {
    out: Output,
    at_line_start: bool,
    in_reasoning: bool,
    /// A "⋯ tool" line shows that a tool call is streaming; it is erased when the call is whole.
    preparing: bool,
    /// The turn so far, for the status line: tokens summed over its answers (None while no answer
    /// reported any), the last request's prompt size, and when it began.
    pub turn: Option<Usage>,
    pub last_prompt: Option<u64>,
    pub started: Instant,
    /// The Markdown renderers of the answer and of the reasoning being streamed.
    answer: Option<super::markdown::Renderer>,
    thinking: Option<super::markdown::Renderer>,
    /// The line that says what the turn waits for, on a terminal.
    spinner: Option<super::spinner::Spinner>,
    /// Who answers, for that line (`waiting for local`).
    server: String,
    /// What of the line being streamed is not printed yet shows on its row (see
    /// [`super::markdown::Renderer::tail`]): taken back before anything else is written.
    tail: String,
    /// When that row was last drawn, and when the last piece came: pieces that come close
    /// together (a fast server) draw it only now and then.
    tail_drawn: Option<Instant>,
    last_piece: Option<Instant>,
}

impl Printer {
    /// Names who answers, for the line that says the turn waits for it.
    pub fn waiting_for(mut self, server: &str) -> Self {
        self.server = escape::escape_controls(server);
        self
    }

    /// A line of its own is about to be written outside the stream (a notice, a question): the
    /// waiting line goes and the stream's line ends.
    pub fn interject(&mut self) {
        self.hush();
        self.end_line();
    }

    /// The waiting line goes, before anything else is written.
    fn hush(&self) {
        if let Some(s) = &self.spinner {
            s.hush();
        }
    }

    pub fn new(out: Output) -> Self {
        Printer {
            spinner: (!out.one_shot)
                .then(|| super::spinner::Spinner::for_stdout(out.color))
                .flatten(),
            ..Printer::new_quiet(out)
        }
    }

    fn new_quiet(out: Output) -> Self {
        Printer {
            spinner: None,
            server: super::text::tr(out.lang, "spinner_the_model", &[]),
            out,
            at_line_start: true,
            in_reasoning: false,
            preparing: false,
            turn: None,
            last_prompt: None,
            started: Instant::now(),
            answer: None,
            thinking: None,
            tail: String::new(),
            tail_drawn: None,
            last_piece: None,
        }
    }

    /// What a renderer printed, then its line still arriving on the row after it, in place of
    /// the last one shown.
    /// `tail` None: the row is not drawn this time (it is taken back when lines are printed).
    fn show_rendered(&mut self, shown: &str, tail: Option<&str>) {
        let Some(tail) = tail else {
            if !shown.is_empty() {
                let erase = if self.tail.is_empty() {
                    ""
                } else {
                    "\r\x1b[2K"
                };
                self.tail.clear();
                self.write_stream(&format!("{erase}{shown}"));
            }
            return;
        };
        self.tail_drawn = Some(Instant::now());
        if shown.is_empty() && tail == self.tail {
            return;
        }
        let mut text = String::with_capacity(shown.len() + tail.len() + 8);
        if !self.tail.is_empty() {
            text.push_str("\r\x1b[2K");
        }
        text.push_str(shown);
        text.push_str(tail);
        self.tail.clear();
        self.tail.push_str(tail);
        self.write_stream(&text);
    }

    /// The row showing the line still arriving is taken back.
    fn take_tail(&mut self) {
        if !self.tail.is_empty() {
            self.tail.clear();
            self.write_stream("\r\x1b[2K");
            self.at_line_start = true;
        }
    }

    /// A printer for events that already happened (an answer run side by side, shown whole):
    /// nothing is waited for, no waiting line.
    pub fn replay(out: Output) -> Self {
        Printer::new_quiet(out)
    }

    /// Prints what the answer's renderer still holds (its last line, an open block).
    fn end_markdown(&mut self) {
        if let Some(mut r) = self.answer.take() {
            self.take_tail();
            let rest = r.finish();
            self.write_stream(&rest);
        }
    }

    /// Erases the "⋯ tool" line, if one shows.
    fn end_preparing(&mut self) {
        if self.preparing {
            self.preparing = false;
            self.write_stream("\r\x1b[2K");
            self.at_line_start = true;
        }
    }

    /// Streamed text: stdout in the REPL; stderr in one-shot, where only the final answer is stdout's.
    fn write_stream(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.out.one_shot {
            let mut err = io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
        } else {
            let mut out = io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        self.at_line_start = text.ends_with('\n');
    }

    fn end_line(&mut self) {
        self.end_preparing();
        self.end_markdown();
        if !self.at_line_start {
            self.write_stream("\n");
        }
    }

    fn end_reasoning(&mut self) {
        if let Some(mut r) = self.thinking.take() {
            self.take_tail();
            let rest = r.finish();
            self.write_stream(&rest);
        }
        if self.in_reasoning {
            self.in_reasoning = false;
            if self.out.color {
                self.write_stream("\x1b[0m");
                self.at_line_start = false;
            }
            self.end_line();
        }
    }
}

impl Observer for Printer {
    fn text(&mut self, text: &str) {
        self.hush();
        self.end_preparing();
        self.end_reasoning();
        if self.out.one_shot {
            return;
        }
        let text = escape::escape_controls_keep_lines(text);
        if self.out.render {
            let r = self.answer.get_or_insert_with(|| {
                super::markdown::Renderer::new(super::markdown::terminal_layout(false))
            });
            let due = tail_due(&mut self.tail_drawn, &mut self.last_piece);
            let shown = r.push(&text);
            let tail = due.then(|| r.tail());
            self.show_rendered(&shown, tail.as_deref());
        } else {
            self.write_stream(&text);
        }
    }

    fn reasoning(&mut self, text: &str) {
        self.hush();
        if !self.in_reasoning {
            self.end_line();
            self.in_reasoning = true;
            let label = self
                .out
                .dim(&super::text::tr(self.out.lang, "reasoning_label", &[]));
            self.write_stream(&format!("{label}\n"));
            if self.out.color && !self.out.render {
                self.write_stream("\x1b[2m");
            }
        }
        let text = escape::escape_controls_keep_lines(text);
        if self.out.render && !self.out.one_shot {
            let r = self.thinking.get_or_insert_with(|| {
                super::markdown::Renderer::new(super::markdown::terminal_layout(true))
            });
            let due = tail_due(&mut self.tail_drawn, &mut self.last_piece);
            let shown = r.push(&text);
            let tail = due.then(|| r.tail());
            self.show_rendered(&shown, tail.as_deref());
        } else {
            self.write_stream(&text);
        }
    }

    /// On a terminal, a dim "⋯ name" line while the call's arguments stream (a long file can take
    /// a while); piped output stays as it is.
    fn tool_call_started(&mut self, name: &str) {
        self.hush();
        if !self.out.color || self.out.one_shot {
            return;
        }
        self.end_reasoning();
        self.end_line();
        let line = self
            .out
            .dim(&format!("⋯ {}", escape::escape_controls(name)));
        self.write_stream(&line);
        self.preparing = true;
    }

    fn compaction(&mut self, event: &CompactionEvent<'_>) {
        self.hush();
        use new_core::agent::CompactionEvent;
        // After its line: the summary takes a while.
        if matches!(event, CompactionEvent::Started { .. }) {
            let line = if matches!(event, CompactionEvent::Started { automatic: true }) {
                super::text::tr(self.out.lang, "compacting_automatic", &[])
            } else {
                super::text::tr(self.out.lang, "compacting", &[])
            };
            self.end_line();
            self.out.say(&self.out.dim(&line));
            if let Some(s) = &self.spinner {
                s.wait(super::text::tr(self.out.lang, "spinner_compacting", &[]));
            }
            return;
        }
        self.end_line();
        let lang = self.out.lang;
        match event {
            CompactionEvent::Started { automatic } => {
                let line = if *automatic {
                    super::text::tr(lang, "compacting_automatic", &[])
                } else {
                    super::text::tr(lang, "compacting", &[])
                };
                self.out.say(&self.out.dim(&line));
            }
            CompactionEvent::Done(done) => self.out.say(&super::text::tr(
                lang,
                "compacted",
                &[
                    ("n", &done.messages),
                    ("before", &short_tokens(done.tokens_before)),
                    ("after", &short_tokens(done.tokens_after)),
                ],
            )),
            CompactionEvent::Failed {
                reason,
                breaker_opened,
            } => {
                self.out.warn(&super::text::tr(
                    lang,
                    "compaction_failed",
                    &[("reason", &escape::escape_controls(reason))],
                ));
                if *breaker_opened {
                    self.out
                        .warn(&super::text::tr(lang, "compaction_breaker_open", &[]));
                }
            }
            CompactionEvent::Cancelled => {
                self.out
                    .warn(&super::text::tr(lang, "compaction_cancelled", &[]))
            }
        }
    }

    fn hook_failed(&mut self, failure: &HookFailure) {
        self.hush();
        self.end_line();
        self.out
            .warn(&super::text::hook_failure(self.out.lang, failure));
    }

    fn hook_notice(&mut self, line: &str) {
        self.hush();
        self.end_line();
        self.out.warn(&escape::escape_controls(line));
    }

    fn usage(&mut self, usage: &Usage) {
        add_usage(self.turn.get_or_insert_with(Usage::default), usage);
    }

    fn subagent_line(&mut self, line: &str) {
        self.hush();
        self.end_line();
        let line = escape::escape_controls(&preview(line, 160));
        self.out.say(&self.out.dim(&format!("    ↳ {line}")));
    }

    fn checkpoint_failed(&mut self, reason: &str) {
        self.hush();
        self.end_line();
        self.out.warn(&super::text::tr(
            self.out.lang,
            "checkpoint_failed",
            &[("reason", &escape::escape_controls(reason))],
        ));
    }

    fn retry(&mut self, attempt: u32, of: u32, delay: Duration, reason: &str) {
        self.hush();
        self.end_line();
        let secs = format!("{:.1}", delay.as_secs_f64());
        let line = super::text::tr(
            self.out.lang,
            "retrying",
            &[
                ("reason", &reason),
                ("secs", &secs),
                ("attempt", &attempt),
                ("of", &of),
            ],
        );
        self.out.say(&self.out.paint(YELLOW, &line));
        // The request goes again: waited for again.
        self.waiting(Waiting::Model);
    }

    fn answer_end(&mut self, response: &ChatResponse, complete: bool) {
        self.hush();
        self.end_reasoning();
        self.end_line();
        if matches!(
            response.finish_reason.as_deref(),
            Some("length" | "max_tokens")
        ) {
            let note = super::text::tr(self.out.lang, "token_limit_note", &[]);
            self.out.say(&self.out.dim(&note));
        }
        // After a failure or an interrupt only that is said: nothing came, and it is no news.
        if complete && response.content.is_empty() && response.tool_calls.is_empty() {
            let note = super::text::tr(self.out.lang, "empty_answer_note", &[]);
            self.out.say(&self.out.dim(&note));
        }
        if let Some(usage) = &response.usage {
            // A round that goes on to tools shows its tokens; the last answer's are in the
            // status line that ends the turn.
            if !response.tool_calls.is_empty() {
                let line = self.out.dim(&self.out.usage_line(usage));
                self.out.say(&line);
            }
            add_usage(self.turn.get_or_insert_with(Usage::default), usage);
            self.last_prompt = Some(usage.input_tokens);
        }
    }

    fn tool_call(&mut self, call: &ToolCall) {
        self.hush();
        self.end_line();
        let line = format!(
            "→ {}({})",
            escape::escape_controls(&call.function.name),
            escape::escape_controls(&preview(&call.function.arguments, 100))
        );
        self.out.say(&self.out.paint(CYAN, &line));
    }

    fn tool_result(&mut self, _call: &ToolCall, outcome: &ToolOutcome) {
        self.hush();
        let line = if outcome.is_error {
            self.out.paint(
                RED,
                &format!(
                    "  ✗ {}",
                    escape::escape_controls(&preview(&outcome.summary, 160))
                ),
            )
        } else {
            self.out.dim(&format!(
                "  ✓ {}",
                escape::escape_controls(&preview(&outcome.summary, 160))
            ))
        };
        self.out.say(&line);
        // The first command of the session the sandbox seems to have refused: the user hears
        // how to widen it (the model reads its own note in the result).
        if outcome.content.contains(os_sandbox::REFUSAL_NOTE)
            && !SANDBOX_HINT_SAID.swap(true, Ordering::SeqCst)
        {
            self.out.say(&self.out.dim(&super::text::tr(
                self.out.lang,
                "sandbox_refusal_hint",
                &[],
            )));
        }
        if let Some(diff) = outcome.diff.as_deref().filter(|d| !d.is_empty()) {
            self.out
                .say_verbatim(colour_diff(&self.out, diff).trim_end());
        }
    }

    fn waiting(&mut self, what: Waiting<'_>) {
        use new_core::agent::Waiting;
        let Some(spinner) = &self.spinner else {
            return;
        };
        let lang = self.out.lang;
        let label = match what {
            Waiting::Servers => super::text::tr(lang, "spinner_servers", &[]),
            Waiting::Model => super::text::tr(lang, "spinner_model", &[("server", &self.server)]),
            Waiting::Tools(names) => {
                // `read_file ×8`, not eight times the name.
                let mut counted: Vec<(&str, usize)> = Vec::new();
                for name in names {
                    match counted.iter_mut().find(|(n, _)| n == name) {
                        Some((_, k)) => *k += 1,
                        None => counted.push((name, 1)),
                    }
                }
                let parts: Vec<String> = counted
                    .iter()
                    .map(|(n, k)| {
                        if *k > 1 {
                            format!("{n} ×{k}")
                        } else {
                            n.to_string()
                        }
                    })
                    .collect();
                escape::escape_controls(&parts.join(", "))
            }
        };
        spinner.wait(label);
    }
}

#[cfg(test)]
mod diff_tests {
    use super::*;
    use new_core::tools::diff;

    fn plain() -> Output {
        Output {
            color: false,
            lang: Lang::En,
            one_shot: false,
            render: false,
        }
    }

    #[test]
    fn a_huge_diff_shows_its_head_and_tail_and_long_lines_are_cut() {
        // One 3 MB line.
        let one_line = diff::unified("big.txt", None, &"x".repeat(3_000_000));
        let shown = colour_diff(&plain(), &one_line);
        assert!(shown.len() < 2_000, "{} bytes shown", shown.len());
        assert!(shown.contains("[…2999601 characters more]"), "{shown}");
        // Ten thousand lines.
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let many = diff::unified("many.txt", None, &text);
        let shown = colour_diff(&plain(), &many);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), DIFF_HEAD_LINES + DIFF_TAIL_LINES + 1);
        assert!(shown.contains("+line 0\n"));
        assert!(shown.contains("+line 9999\n"));
        assert!(!shown.contains("+line 5000\n"));
        let skipped = many.lines().count() - DIFF_HEAD_LINES - DIFF_TAIL_LINES;
        assert!(
            shown.contains(&format!("… {skipped} lines of the diff not shown …")),
            "{shown}"
        );
        // A short diff is shown whole.
        let small = diff::unified("s.txt", Some("a\n"), "b\n");
        assert_eq!(
            colour_diff(&plain(), &small).lines().count(),
            small.lines().count()
        );
    }
}
