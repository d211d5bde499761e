//! The terminal as the session's front end: renders its events (the stream through a [`Printer`]
//! or the JSON observer, the notices in the interface's language) and answers its requests with
//! the line editor: allow once, for this session, always, or deny with an optional reason for the
//! model. With no terminal to ask, the session hears that nobody can be asked.

use super::output::{Output, Printer};
use super::reader::{Key, ReadOutcome, Reader};
use new_core::agent::Observer;
use new_core::escape;
use new_core::escape::escape_controls;
use new_core::session::{
    Answer, Approval, Confirm, Ended, Event, Frontend, HostAnswer, HostQuestion, Notice,
    RefusedWhy, to_observer,
};
use new_core::tools::{Rule, ToolKind};
use std::fmt::Display;
use std::io;
use std::mem;

/// What shows a turn's stream: the printer, or what wraps it.
pub(crate) trait Stream: Observer {
    /// A line of its own follows (a notice, a question).
    fn interject(&mut self);
}

impl Stream for Printer {
    fn interject(&mut self) {
        Printer::interject(self);
    }
}

pub(crate) struct Terminal<'a> {
    out: Output,
    stream: Option<&'a mut dyn Stream>,
    reader: Option<&'a mut Reader>,
    /// The last turn ended interrupted.
    pub interrupted: bool,
}

impl<'a> Terminal<'a> {
    /// Notices only, nothing to ask with: for work outside a turn (hooks firing).
    pub fn plain(out: Output) -> Self {
        Terminal {
            out,
            stream: None,
            reader: None,
            interrupted: false,
        }
    }

    /// Questions only (answers running side by side keep their streams to show later).
    pub fn asking(out: Output, reader: &'a mut Reader) -> Self {
        Terminal {
            out,
            stream: None,
            reader: Some(reader),
            interrupted: false,
        }
    }

    /// A turn's front end: its stream, and the line editor to ask with.
    pub fn turn(out: Output, stream: &'a mut dyn Stream, reader: &'a mut Reader) -> Self {
        Terminal {
            out,
            stream: Some(stream),
            reader: Some(reader),
            interrupted: false,
        }
    }

    fn tr(&self, key: &str, args: &[(&str, &dyn Display)]) -> String {
        super::text::tr(self.out.lang, key, args)
    }

    /// The answer to a question of one key (a line when the input is piped); what was typed
    /// ahead is kept for the prompt, said once, and the key asked for again.
    fn key(&mut self, prompt: &str, keys: &str) -> Key {
        let out = self.out;
        let mut said = false;
        loop {
            let Some(reader) = self.reader.as_deref_mut() else {
                return Key::Eof;
            };
            match reader.key(prompt, keys, &out) {
                Ok(Key::Kept) => {
                    if !mem::replace(&mut said, true) {
                        out.say(&out.dim(&self.tr("typed_ahead_kept", &[])));
                    }
                }
                Ok(key) => return key,
                Err(e) => {
                    out.error(&self.tr("reading_input_failed", &[("error", &e)]));
                    return Key::Eof;
                }
            }
        }
    }

    /// The hint that one key answers, where one does (a terminal).
    fn one_key_hint(&self) -> String {
        if self.can_ask() {
            self.tr("one_key_answers", &[])
        } else {
            String::new()
        }
    }

    fn read(&mut self, prompt: &str) -> io::Result<ReadOutcome> {
        let out = self.out;
        match self.reader.as_deref_mut() {
            Some(reader) => reader.read(prompt, "", false, &out),
            None => Ok(ReadOutcome::Eof),
        }
    }

    /// A question answered by the next input line (shown as a line of its own when the input is
    /// piped, as the REPL's questions are); yes is `y`, `yes` or `是`.
    fn ask_yes(&mut self, question: &str) -> bool {
        let out = self.out;
        if let Some(stream) = self.stream.as_deref_mut() {
            stream.interject();
        }
        if self.reader.as_deref().is_some_and(Reader::is_piped) {
            out.say(question.trim_end());
        }
        match self.read(question) {
            Ok(ReadOutcome::Line(a)) => {
                let answer = a.trim().to_lowercase();
                // Typed ahead into a question that came up meanwhile: kept for the prompt.
                if !matches!(answer.as_str(), "" | "y" | "yes" | "是" | "n" | "no" | "否")
                    && let Some(reader) = self.reader.as_deref_mut()
                    && reader.keep_for_the_prompt(a.clone())
                {
                    out.say(&out.dim(&self.tr(
                        "not_an_answer_kept",
                        &[("line", &escape_controls(a.trim()))],
                    )));
                }
                matches!(answer.as_str(), "y" | "yes" | "是")
            }
            Ok(_) => false,
            Err(e) => {
                out.error(&self.tr("reading_input_failed", &[("error", &e)]));
                false
            }
        }
    }

    fn notice(&mut self, notice: &Notice) {
        let out = self.out;
        match notice {
            Notice::Blocked { reason } => {
                out.error(&self.tr("blocked_by_hook", &[("reason", &escape_controls(reason))]))
            }
            Notice::StoppedByHook { reason } => {
                out.warn(&self.tr("stopped_by_hook", &[("reason", &escape_controls(reason))]))
            }
            Notice::HookGoesOn { text } => out.say(&out.dim(&escape_controls(text))),
            Notice::StopHookGaveUp { rounds } => {
                out.warn(&self.tr("stop_hook_gave_up", &[("n", rounds)]))
            }
            Notice::HookInterrupted { event } => {
                out.warn(&self.tr("hook_interrupted", &[("event", &escape_controls(event))]))
            }
            Notice::NotStored(e) => out.error(&super::text::error(out.lang, &**e)),
            Notice::Refused { tool, why } => {
                let why = match why {
                    RefusedWhy::Rule(why) => why.clone(),
                    RefusedWhy::NobodyToAsk => self.tr("needs_approval_and_there_is_no", &[]),
                    RefusedWhy::ProtectedNobodyToAsk => {
                        self.tr("writes_to_new_and_git_always", &[])
                    }
                    RefusedWhy::LeavingNobodyToAsk => {
                        self.tr("leaving_the_sandbox_needs_a_terminal", &[])
                    }
                };
                out.error(&escape_controls(&format!("{tool}: {why}")));
            }
            Notice::RuleSaved { file } => {
                out.say(&out.dim(&self.tr("saved_in", &[("file", &file.display())])))
            }
            Notice::RuleNotSaved { file, error } => out.error(&self.tr(
                "could_not_save_the_rule",
                &[("file", &file.display()), ("error", error)],
            )),
            Notice::RuleNotAdded { error } => out.error(error),
            Notice::TaskEnded(task) => out.say(&super::mcp_view::task_ended(&out, task)),
            Notice::AutoContinuing { tasks } => {
                out.say(&self.tr("auto_continuing", &[("n", &tasks.to_string())]))
            }
            Notice::StateNotNoted(e) => out.warn(&super::text::error(out.lang, &**e)),
        }
    }

    fn ended(&mut self, end: &Ended) {
        let out = self.out;
        match end {
            Ended::Complete => {}
            Ended::RoundLimit(n) => out.warn(&self.tr("round_limit", &[("n", n)])),
            Ended::ContextFull => out.warn(&self.tr("context_full", &[])),
            Ended::Interrupted => {
                self.interrupted = true;
                out.warn(&self.tr("interrupted_what_arrived_is_kept", &[]))
            }
            Ended::Stopped(reason) => {
                out.warn(&self.tr("stopped_by_hook", &[("reason", &escape_controls(reason))]))
            }
            Ended::Failed(e) => out.error(&format!(
                "{}\n{}",
                super::text::error(out.lang, &**e),
                self.tr("your_message_is_saved_send_it", &[])
            )),
        }
    }
}

/// How a rule reads in the question: the tool, and its pattern when it has one.
fn describe(rule: &Rule) -> String {
    escape_controls(&match &rule.pattern {
        Some(p) => format!("{} {p}", rule.tool),
        None => rule.tool.clone(),
    })
}

impl Frontend for Terminal<'_> {
    fn event(&mut self, event: Event) {
        match &event {
            Event::Notice(notice) => {
                if let Some(stream) = self.stream.as_deref_mut() {
                    stream.interject();
                }
                self.notice(notice);
            }
            Event::TurnEnded(end) => {
                if let Some(stream) = self.stream.as_deref_mut() {
                    stream.interject();
                }
                self.ended(end);
            }
            Event::HookFailed(failure) if self.stream.is_none() => self
                .out
                .warn(&super::text::hook_failure(self.out.lang, failure)),
            Event::HookNotice(line) if self.stream.is_none() => {
                self.out.warn(&escape_controls(line))
            }
            _ => {
                if let Some(stream) = self.stream.as_deref_mut() {
                    to_observer(&event, stream);
                }
            }
        }
    }

    fn can_ask(&self) -> bool {
        matches!(self.reader.as_deref(), Some(Reader::Editor { .. }))
    }

    fn approve(&mut self, q: &Approval) -> Answer {
        let out = self.out;
        if let Some(stream) = self.stream.as_deref_mut() {
            stream.interject();
        }
        // Everything shown is escaped: a `\r` or an escape sequence must not draw one command over
        // another.
        let shown = match q.kind {
            ToolKind::Write => super::output::colour_diff(&out, &q.preview),
            _ => escape::escape_controls_keep_lines(&q.preview),
        };
        let options = if q.leaving {
            self.tr("this_leaves_the_sandbox", &[])
        } else if q.protected {
            self.tr("this_writes_inside_new_or_git", &[])
        } else if q.no_rule {
            self.tr("no_rule_can_allow_this", &[])
        } else {
            self.tr(
                "approval_options",
                &[
                    ("session", &describe(&q.session_rule)),
                    ("always", &describe(&q.always_rule)),
                    ("file", &q.rules_file.display()),
                ],
            )
        };
        let asks = self.tr("needs_your_approval", &[("name", &q.tool)]);
        out.say(&out.bold(&match &q.label {
            Some(role) => format!("[{}] {asks}", escape_controls(role)),
            None => asks,
        }));
        // What would run or change, as it is: a diff or a command keeps its columns.
        out.say_verbatim(shown.trim_end());
        out.say(&out.dim(&format!("{options}{}", self.one_key_hint())));
        let yes_or_no = q.yes_or_no();
        let prompt = if yes_or_no { "[y/N] " } else { "[y/s/a/N] " };
        loop {
            let answer = match self.key(prompt, "ysan") {
                Key::Line(a) => a.trim().to_lowercase(),
                Key::Interrupted => return Answer::Interrupted,
                Key::Eof | Key::Kept => "n".into(),
            };
            match answer.as_str() {
                "y" | "yes" => return Answer::Once,
                "s" | "session" | "a" | "always" if yes_or_no => {
                    out.say(&self.tr("answer_y_or_n", &[]))
                }
                "s" | "session" => return Answer::Session,
                "a" | "always" => return Answer::Always,
                "" | "n" | "no" | "esc" => {
                    let question = self.tr("reason_for_the_model_optional", &[]);
                    return match self.read(&question) {
                        Ok(ReadOutcome::Line(r)) => Answer::Deny(r.trim().to_string()),
                        Ok(ReadOutcome::Interrupted) => Answer::Interrupted,
                        _ => Answer::Deny(String::new()),
                    };
                }
                _ => out.say(&self.tr("answer_y_s_a_or_n", &[])),
            }
        }
    }

    fn allow_host(&mut self, q: &HostQuestion) -> HostAnswer {
        let out = self.out;
        if let Some(stream) = self.stream.as_deref_mut() {
            stream.interject();
        }
        let question = self.tr(
            "network_question",
            &[
                ("host", &escape_controls(&q.host)),
                ("port", &q.port),
                ("file", &q.file.display()),
            ],
        );
        out.say(&out.dim(&format!("{question}{}", self.one_key_hint())));
        loop {
            let answer = match self.key("[s/a/N] ", "ysan") {
                Key::Line(a) => a.trim().to_lowercase(),
                _ => return HostAnswer::No,
            };
            match answer.as_str() {
                "s" | "session" | "y" | "yes" => return HostAnswer::Session,
                "a" | "always" => return HostAnswer::Always,
                "" | "n" | "no" | "esc" => return HostAnswer::No,
                _ => out.say(&self.tr("answer_s_a_or_n", &[])),
            }
        }
    }

    fn continue_uncompacted(&mut self) -> bool {
        let question = self.tr("go_on_without_compacting", &[]);
        matches!(
            self.read(&question),
            Ok(ReadOutcome::Line(a)) if matches!(a.trim().to_lowercase().as_str(), "y" | "yes")
        )
    }

    fn confirm(&mut self, question: &Confirm) -> bool {
        let out = self.out;
        let question = match question {
            Confirm::Restore { n, changes } => {
                let flag = self.tr("changed_outside", &[]);
                let mut list = String::new();
                for c in changes {
                    let mark = if c.outside { flag.as_str() } else { "" };
                    list.push_str(&format!("{} {}{mark}\n", c.what, escape_controls(&c.path)));
                }
                out.say(&format!(
                    "{}\n{}",
                    self.tr("restore_would", &[("n", n)]),
                    list.trim_end()
                ));
                self.tr("restore_ask", &[])
            }
            Confirm::RestoreTheRest { broken } => {
                for b in broken {
                    out.error(&self.tr("cannot_restore", &[("what", &escape_controls(b))]));
                }
                self.tr("restore_the_rest", &[])
            }
            Confirm::OverwriteOutside { files } => self.tr("restore_ask_outside", &[("n", files)]),
            Confirm::OverwriteChanged { paths } => {
                let list: String = paths
                    .iter()
                    .map(|p| format!("  {}\n", escape_controls(p)))
                    .collect();
                out.warn(&format!(
                    "{}\n{}",
                    self.tr("restore_changed_meanwhile", &[("n", &paths.len())]),
                    list.trim_end()
                ));
                self.tr("restore_overwrite_them", &[])
            }
        };
        self.ask_yes(&question)
    }

    fn decided(&mut self) {
        if let Some(reader) = self.reader.as_deref_mut() {
            reader.resume_typeahead();
        }
    }
}
