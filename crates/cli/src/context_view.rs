//! `/compact` and `/context`: the REPL's side of context management ([`new_core::context`]).

use super::output::{Printer, short_tokens};
use super::repl::App;
use super::terminal::Terminal;
use new_core::context::{Breakdown, WindowSource};
use new_core::escape;

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl App {
    /// What the next request for the branch at the cursor holds, measured.
    pub(super) fn breakdown(&self) -> Breakdown {
        self.engine.breakdown()
    }

    /// The tokens in use (calibrated) and the window, for the status line.
    pub(super) fn context_use(&self) -> (u64, u64) {
        self.engine.context_use()
    }

    /// `/compact [focus]`: a summary node for the start of the branch at the cursor.
    pub(super) fn compact(&mut self, args: &str) {
        let mut printer = Printer::new(self.out);
        let mut front = Terminal::turn(self.out, &mut printer, &mut self.reader);
        // The outcome is reported by the printer as the compaction goes.
        self.runtime
            .block_on(self.engine.compact(Some(args), &mut front));
    }

    /// `/context`: the window, what the next request holds by source and kind, how much is left
    /// before automatic compaction, and the breaker.
    pub(super) fn show_context(&mut self, args: &str) {
        if !args.is_empty() {
            return self.out.error(&self.tr(
                "takes_no_argument_got",
                &[("command", &"/context"), ("args", &args)],
            ));
        }
        self.learn_server_window();
        let b = self.breakdown();
        let ctx = &self.engine.context;
        let (window, source) = ctx.window();
        let source = match source {
            WindowSource::Config => self.tr("ctx_source_config", &[]),
            WindowSource::Server => self.tr("ctx_source_server", &[]),
            WindowSource::Error => self.tr("ctx_source_error", &[]),
            WindowSource::Family(f) => self.tr("ctx_source_family", &[("family", &f)]),
            WindowSource::Fallback => self.tr("ctx_source_fallback", &[]),
        };
        let total = b.total();
        let used = ctx.scale(total);
        let pct = used * 100 / window.max(1);
        let mut lines = vec![
            self.tr(
                "ctx_window",
                &[("window", &thousands(window)), ("source", &source)],
            ),
            self.tr(
                "ctx_in_use",
                &[
                    ("used", &thousands(used)),
                    ("pct", &pct),
                    ("factor", &format!("{:.2}", ctx.factor())),
                ],
            ),
        ];
        let row = |label: String, tokens: u64, detail: String| {
            format!(
                "  {label:<18} {:>9}  {detail}",
                thousands(ctx.scale(tokens))
            )
        };
        let system: u64 = b.system.iter().map(|(_, n)| n).sum();
        let sources = b
            .system
            .iter()
            .map(|(s, n)| {
                format!(
                    "{} {}",
                    escape::escape_controls(s),
                    short_tokens(ctx.scale(*n))
                )
            })
            .collect::<Vec<_>>()
            .join(" · ");
        lines.push(row(self.tr("ctx_row_system", &[]), system, sources));
        lines.push(row(
            self.tr("ctx_row_tools", &[]),
            b.tools.1,
            self.tr("ctx_count", &[("n", &b.tools.0)]),
        ));
        if let Some(n) = b.summary {
            lines.push(row(self.tr("ctx_row_summary", &[]), n, String::new()));
        }
        lines.push(row(
            self.tr("ctx_row_user", &[]),
            b.user.1,
            self.tr("ctx_count", &[("n", &b.user.0)]),
        ));
        lines.push(row(
            self.tr("ctx_row_assistant", &[]),
            b.assistant.1,
            self.tr("ctx_count", &[("n", &b.assistant.0)]),
        ));
        lines.push(row(
            self.tr("ctx_row_results", &[]),
            b.results.1,
            self.tr(
                "ctx_results_count",
                &[("n", &b.results.0), ("previews", &b.previews)],
            ),
        ));
        lines.push(self.tr(
            "ctx_left",
            &[
                ("left", &thousands(ctx.left_before_compaction(total))),
                ("margin", &thousands(ctx.margin())),
            ],
        ));
        lines.push(if !ctx.settings.enabled {
            self.tr("ctx_auto_disabled", &[])
        } else if ctx.breaker_open() {
            self.tr("ctx_auto_breaker", &[])
        } else {
            self.tr("ctx_auto_on", &[])
        });
        self.out.say(&lines.join("\n"));
    }
}
