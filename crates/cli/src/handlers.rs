//! The REPL's commands, one method each. Every command checks its arguments first and changes
//! nothing when they are wrong.

use std::path::PathBuf;

use super::commands::COMMANDS;
use super::numbers::short_id;
use super::output::Printer;
use super::repl::{App, interruptible};
use super::spinner::{Board, Spinner};
use super::terminal::Terminal;
use super::tree_view::{Highlight, describe, preview, push_tree_within};
use super::wrap;
use new_core::config::Lang;
use new_core::conversation::LoadReport;
use new_core::escape;
use new_core::session;
use new_core::session::CommandError;
use new_core::session::Event;
use new_core::session::Recorder;
use new_core::session::{Ended, ExportFormat, ManageError, Switched};
use new_core::tools::Mode;
use new_core::vocab::Role;
use new_core::vocab::Usage;
use new_sys::os_sandbox;
use new_sys::platform;
use new_sys::platform::Stream;
use std::fmt::Display;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

/// How many conversations `/list` shows without `all`.
const LIST_LIMIT: usize = 50;
/// Most hits `/search` prints.
const SEARCH_LIMIT: usize = 50;

impl App {
    pub(super) fn refuse_text(&self, key: &str, args: &[(&str, &dyn Display)]) {
        self.out.error(&self.tr(key, args));
    }

    /// [`App::no_args`] for the command table's dispatch.
    pub(super) fn no_args_for(&self, command: &str, args: &str) -> bool {
        self.no_args(command, args)
    }

    fn no_args(&self, command: &str, args: &str) -> bool {
        if args.is_empty() {
            return true;
        }
        self.refuse_text(
            "takes_no_argument_got",
            &[("command", &command), ("args", &args)],
        );
        false
    }

    /// Moves the cursor and says where it is and what the next message will do; then offers to
    /// make the folder match.
    pub(super) fn move_to(&mut self, id: &str) {
        self.move_and_say(id);
        self.offer_restore();
    }

    /// After `--continue` or `--resume`: which conversation, its last exchange on this branch
    /// (the user's message and the answer, a few lines each) and where the branch stands.
    pub(super) fn show_resumed(&self) {
        let c = self.engine.chat.conversation();
        self.out.say(&self.tr(
            "resumed",
            &[("id", &self.engine.chat.id()), ("n", &(c.len() - 1))],
        ));
        let width = super::markdown::terminal_layout(false).width.clamp(20, 160);
        let chain = c.chain(c.cursor());
        let user = chain
            .iter()
            .rev()
            .find(|m| m.role == Role::User && m.extra.rare.summary.is_none());
        let answer = chain
            .iter()
            .rev()
            .take_while(|m| user.is_none_or(|u| m.id != u.id))
            .find(|m| m.role == Role::Assistant && !m.content.trim().is_empty());
        let fold = |text: &str| -> String {
            const LINES: usize = 4;
            let lines: Vec<&str> = text.trim().lines().collect();
            let mut out: Vec<String> = lines
                .iter()
                .take(LINES)
                .map(|l| {
                    let l = escape::escape_controls(l);
                    match l.char_indices().nth(width - 4) {
                        Some((at, _)) => format!("  {}…", &l[..at]),
                        None => format!("  {l}"),
                    }
                })
                .collect();
            if lines.len() > LINES {
                out.push(format!("  … ({} more lines)", lines.len() - LINES));
            }
            out.join("\n")
        };
        // Three numbers, found in one walk: a big tree is not numbered whole to resume it.
        let numbers = c.numbers_of(&[
            user.map_or("", |m| m.id.as_str()),
            answer.map_or("", |m| m.id.as_str()),
            c.cursor(),
        ]);
        let conversation = self.engine.chat.id();
        let label = |n: usize, id: &str| {
            self.shown.record(conversation, n, id);
            format!("{n} · {}", short_id(id))
        };
        if let Some(user) = user {
            let n = label(numbers[0].unwrap_or(0), &user.id);
            self.out.say(&self.out.dim(&format!(
                "[{n}] {}\n{}",
                self.tr("you_said", &[]),
                fold(&user.content)
            )));
        }
        if let Some(answer) = answer {
            let n = label(numbers[1].unwrap_or(0), &answer.id);
            self.out.say(&format!(
                "[{n}] {}\n{}",
                self.tr("the_answer", &[]),
                fold(&answer.content)
            ));
        }
        let n = label(numbers[2].unwrap_or(0), c.cursor());
        let branches = c.leaf_count();
        let name = c
            .names_of(c.cursor())
            .first()
            .map(|n| format!(" `{}`", escape::escape_controls(n)))
            .unwrap_or_default();
        self.out.say(&self.out.dim(&self.tr(
            "resumed_place",
            &[("n", &n), ("name", &name), ("branches", &branches)],
        )));
    }

    /// Moves the cursor and says where it is and what the next message will do.
    pub(super) fn move_and_say(&mut self, id: &str) {
        self.engine.move_to(id).expect("ids come from the tree");
        self.say_place(id);
    }

    /// Says where the cursor is (at `id`) and what the next message will do.
    pub(super) fn say_place(&self, id: &str) {
        let c = self.engine.chat.conversation();
        let n = self.node_label(id);
        let what = describe(c.current(), self.out.lang);
        let next = if c.is_leaf(id) {
            self.tr("the_next_message_continues_from_here", &[])
        } else {
            self.tr("the_next_message_starts_a_new", &[])
        };
        self.out
            .say(&format!("→ [{n}] {what}\n{}", self.out.dim(&next)));
    }

    pub(super) fn tree(&mut self, args: &str) {
        let full = match args {
            "" => false,
            "--full" => true,
            _ => {
                return self.refuse_text("tree_takes_no_argument_but_full", &[("args", &args)]);
            }
        };
        // The conversation's line first, as the original design draws it.
        let mut text = format!(
            "{}\n",
            self.out
                .dim(&self.tr("tree_title", &[("id", &self.engine.chat.id())]))
        );
        // Most rows are drawn straight into the one buffer.
        push_tree_within(
            &mut text,
            self.engine.chat.conversation(),
            full,
            self.out.lang,
            platform::terminal_size(Stream::Stdout).map(|(width, _)| width),
            &|highlight, drawn| match highlight {
                Highlight::Current => self.out.bold(&self.out.green(drawn)),
                Highlight::Gap => self.out.dim(drawn),
            },
        );
        // The numbers as drawn now are the ones `/N` refers to.
        self.shown
            .record_all(self.engine.chat.id(), self.engine.chat.conversation());
        // A tree keeps its rows: never rewrapped (each is cut to the terminal's width).
        self.out.say_verbatim(text.trim_end_matches('\n'));
    }

    pub(super) fn branches(&mut self, args: &str) {
        if !self.no_args("/branches", args) {
            return;
        }
        let c = self.engine.chat.conversation();
        let current_tip = c.tip(c.cursor()).map(|m| m.id.clone());
        let mut text = String::new();
        for (_, m) in c.preorder() {
            if !c.is_leaf(&m.id) {
                continue;
            }
            let mark = if Some(&m.id) == current_tip.as_ref() {
                "*"
            } else {
                " "
            };
            let depth = c.chain(&m.id).len() - 1;
            let names = c.names_of(&m.id);
            let named = if names.is_empty() {
                String::new()
            } else {
                format!("{} ", names.join(", "))
            };
            let side = if c.is_side(&m.id) {
                self.tr("side_mark", &[])
            } else {
                String::new()
            };
            let number = self.node_label(&m.id);
            let line = format!(
                "{mark} {named}[{number}] {}{side}  {}",
                describe(m, self.out.lang),
                self.out.dim(&self.tr("depth_messages", &[("n", &depth)]))
            );
            text.push_str(&line);
            text.push('\n');
        }
        if c.is_empty() {
            text = self.tr("no_branches_yet", &[]);
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// `/prev` and `/next`: the neighbouring alternative at the nearest fork above the cursor.
    pub(super) fn flip(&mut self, args: &str, step: isize) {
        let name = if step < 0 { "/prev" } else { "/next" };
        if !self.no_args(name, args) {
            return;
        }
        let c = self.engine.chat.conversation();
        let Some((alternatives, at)) = c.alternatives(c.cursor()) else {
            return self.refuse_text("there_is_no_fork_above_this", &[]);
        };
        let count = alternatives.len();
        let to = at as isize + step;
        if to < 0 || to >= count as isize {
            let key = if step < 0 {
                "this_is_the_first_alternative"
            } else {
                "this_is_the_last_alternative"
            };
            return self.refuse_text(key, &[("count", &count)]);
        }
        let target = alternatives[to as usize];
        let tip = c.tip(target).expect("a child exists").id.clone();
        self.out.say(
            &self
                .out
                .dim(&self.tr("alternative_of", &[("at", &(to + 1)), ("count", &count)])),
        );
        self.move_to(&tip);
    }

    /// `/retry [--model NAME] [--n K]`: a new answer to the nearest user message, as a sibling of
    /// the old answer; with another model for it alone; K answers side by side (or, where they
    /// cannot be, one after another), each from the folder as it was at that message (asked, as
    /// after any move).
    pub(super) fn retry(&mut self, args: &str) {
        let mut model: Option<String> = None;
        let mut count = 1usize;
        let mut words = args.split_whitespace();
        while let Some(word) = words.next() {
            match (word, words.next()) {
                ("--model", Some(name)) => model = Some(name.to_string()),
                ("--n", Some(n)) => match n.parse::<usize>() {
                    Ok(n @ 1..=5) => count = n,
                    _ => return self.refuse_text("retry_usage", &[("args", &args)]),
                },
                _ => return self.refuse_text("retry_usage", &[("args", &args)]),
            }
        }
        let user = match self.engine.retry_from() {
            Ok(user) => user,
            Err(e) => return self.command_error(&e),
        };
        // Another model for these answers only; the session's comes back after.
        let saved = model.map(|m| self.engine.swap_model(m));
        // Numbered as `/compare` numbers the answers at that message: after those it has.
        let before = self.engine.answers_to(&user);
        if count == 1 || !self.retry_together(&user, before, count) {
            for i in 0..count {
                if count > 1 {
                    self.out.say(&self.out.dim(&self.tr(
                        "retry_n_of",
                        &[("i", &(before + i + 1)), ("count", &(before + count))],
                    )));
                }
                self.engine.chat.move_cursor(&user).expect("from the tree");
                // Each try starts from the files of the message it answers.
                self.offer_restore();
                if !self.answer().is_complete() {
                    break;
                }
            }
        }
        if let Some(saved) = saved {
            self.engine.restore_model(saved);
        }
    }

    /// `count` answers to the user message `user`, side by side; the cursor ends on the last,
    /// as when they run one after another. False when they cannot (said; nothing ran): they
    /// must run one after another.
    fn retry_together(&mut self, user: &str, before: usize, count: usize) -> bool {
        use new_core::session::OneAfterAnother;
        let why = match self.engine.side_by_side_refusal() {
            Some(OneAfterAnother::NoCheckpoints) => {
                Some(self.tr("one_after_another_no_checkpoints", &[]))
            }
            Some(OneAfterAnother::StopHooks) => Some(self.tr("one_after_another_stop_hooks", &[])),
            _ => None,
        };
        if let Some(why) = why {
            self.out.say(&self.out.dim(&why));
            return false;
        }
        self.engine.chat.move_cursor(user).expect("from the tree");
        // They all start from the files of the message they answer (asked, as after any move)…
        self.offer_restore();
        // …or from the folder as the user keeps it: what `new` sees of it now.
        match self.engine.ready_together() {
            Ok(()) => {}
            Err(OneAfterAnother::SnapshotFailed(reason)) => {
                self.out.warn(&self.tr(
                    "checkpoint_failed",
                    &[("reason", &escape::escape_controls(&reason))],
                ));
                return false;
            }
            Err(_) => return false,
        }
        self.out.say(
            &self
                .out
                .dim(&self.tr("retry_together", &[("count", &count)])),
        );
        let out = self.out;
        let lang = out.lang;
        // Named as `/compare` numbers them: after the `before` answers the message has (the
        // engine stores their first messages in this order).
        let label = |i: usize| {
            super::text::tr(
                lang,
                "retry_n_of",
                &[("i", &(before + i + 1)), ("count", &(before + count))],
            )
        };
        let pricing = self.engine.config.pricing;
        let model = self.engine.config.model.clone();
        // Each answer's tokens and cost, in order.
        let mut spent: Vec<(Option<Usage>, Option<f64>)> = Vec::new();
        // While they run, a line for each not shown yet: its tokens and seconds so far.
        let progress = Arc::new(Mutex::new(vec![Going::default(); count]));
        let spinner = Spinner::for_stdout(out.color);
        let board: Board = {
            let progress = progress.clone();
            let started = Instant::now();
            let labels: Vec<String> = (0..count).map(label).collect();
            Arc::new(move |frame: char| going_lines(&progress, &labels, started, frame, lang))
        };
        let mut watch = |i: usize, event: &Event| {
            {
                let mut going = progress.lock().unwrap_or_else(|e| e.into_inner());
                going[i].saw(event);
            }
            if let Some(spinner) = &spinner {
                spinner.board(&board);
            }
        };
        let mut done = |i: usize, recorded: Recorder, took: Duration| {
            if let Some(spinner) = &spinner {
                spinner.hush();
            }
            let more = {
                let mut going = progress.lock().unwrap_or_else(|e| e.into_inner());
                going[i].shown = true;
                going.iter().any(|g| !g.shown)
            };
            out.say(&out.bold(&label(i)));
            let mut printer = Printer::replay(out);
            for event in &recorded.events {
                session::to_observer(event, &mut printer);
            }
            let cost = pricing.zip(printer.turn.as_ref()).map(|(p, u)| p.cost(u));
            let line = super::output::status_line(
                lang,
                &model,
                printer.turn.as_ref(),
                None,
                took.as_secs_f64(),
                cost,
            );
            out.say(&out.dim(&line));
            spent.push((printer.turn, cost));
            if more && let Some(spinner) = &spinner {
                spinner.board(&board);
            }
        };
        let mut asking = Terminal::asking(self.out, &mut self.reader);
        let together = self.runtime.block_on(self.engine.answer_together_watched(
            count,
            &label,
            &mut asking,
            &mut done,
            &mut watch,
        ));
        drop(spinner);
        // It refuses only as `side_by_side_refusal` does, checked above: the snapshot is taken.
        let Ok(together) = together else {
            return false;
        };
        for problem in &together.problems {
            self.out.warn(&self.tr(
                "not_put_back",
                &[("what", &escape::escape_controls(problem))],
            ));
        }
        match &together.reopened {
            Ok(report) => self.report_load(report),
            Err(e) => {
                self.out.error(&super::text::error(self.out.lang, e));
                return true;
            }
        }
        // Which node each answer is, by number and id: what `/compare` names them by (it counts
        // every answer at the fork, the first one too).
        let nodes: Vec<String> = together
            .ends
            .iter()
            .enumerate()
            .filter(|(_, (_, tip))| self.engine.chat.conversation().get(tip).is_some())
            .map(|(i, (_, tip))| format!("{} [{}]", label(i), self.node_label(tip)))
            .collect();
        if !nodes.is_empty() {
            self.out.say(
                &self
                    .out
                    .dim(&self.tr("retry_nodes", &[("nodes", &nodes.join(", "))])),
            );
        }
        let mut interrupted = false;
        for ((end, tip), (usage, cost)) in together.ends.into_iter().zip(spent) {
            if let Some(usage) = &usage {
                super::output::add_usage(&mut self.engine.totals.0, usage);
            }
            self.engine.totals.1 += cost.unwrap_or(0.0);
            self.engine.totals.2 += 1;
            if self.engine.chat.move_cursor(&tip).is_err() {
                continue;
            }
            match end {
                // One Ctrl-C stops them all: said once.
                Ended::Interrupted => interrupted = true,
                end => {
                    let mut printer = Printer::new(self.out);
                    let mut front = Terminal::turn(self.out, &mut printer, &mut self.reader);
                    self.runtime.block_on(self.engine.finish(end, &mut front));
                }
            }
        }
        if interrupted {
            self.turn_interrupted = true;
            self.out
                .warn(&self.tr("interrupted_what_arrived_is_kept", &[]));
        }
        // The folder is as they all began; the cursor's answer may have left it otherwise.
        self.offer_restore();
        true
    }

    /// `/compare`: the alternatives at the nearest fork above the cursor, one after another, each
    /// with its model, tokens, time, cost and the files it changed.
    pub(super) fn compare(&mut self, args: &str) {
        if !self.no_args("/compare", args) {
            return;
        }
        let alternatives = match self.engine.compare() {
            Ok(alternatives) => alternatives,
            Err(e) => return self.command_error(&e),
        };
        // (header, answer, files changed) of each alternative.
        let count = alternatives.len();
        let mut blocks: Vec<(String, String, Option<String>)> = Vec::new();
        for (i, alt) in alternatives.into_iter().enumerate() {
            let cost = alt.cost.map(|c| format!(" · ${c:.4}")).unwrap_or_default();
            let mark = if alt.current { "*" } else { " " };
            let model = if alt.models.is_empty() {
                "?".to_string()
            } else {
                alt.models.join(", ")
            };
            let header = self.tr(
                "compare_header",
                &[
                    ("mark", &mark),
                    ("i", &(i + 1)),
                    ("count", &count),
                    ("n", &self.node_label(&alt.tip)),
                    ("model", &escape::escape_controls(&model)),
                    ("input", &alt.usage.input_tokens),
                    ("output", &alt.usage.output_tokens),
                    ("seconds", &format!("{:.1}", alt.seconds)),
                    ("cost", &cost),
                ],
            );
            let answer = escape::escape_controls_keep_lines(&alt.answer);
            let changed: Vec<String> = alt
                .files
                .iter()
                .map(|(p, w)| format!("{w} {}", escape::escape_controls(p)))
                .collect();
            let files = (!changed.is_empty())
                .then(|| self.tr("compare_files", &[("files", &changed.join(", "))]));
            blocks.push((header, answer, files));
        }
        // Side by side when they fit (two or three, 50 columns each), else one after another.
        let width = super::markdown::terminal_layout(false).width;
        let text = if blocks.len() <= 3 && width >= blocks.len() * 50 {
            self.side_by_side(&blocks, width)
        } else {
            let mut text = String::new();
            for (header, answer, files) in &blocks {
                text.push_str(&format!("{}\n{answer}\n", self.out.bold(header)));
                if let Some(files) = files {
                    text.push_str(&format!("{}\n", self.out.dim(files)));
                }
                text.push('\n');
            }
            text
        };
        self.out.say(text.trim_end());
    }

    /// The alternatives of `/compare` in columns, each wrapped to its width.
    fn side_by_side(&self, blocks: &[(String, String, Option<String>)], width: usize) -> String {
        let column = (width - 3 * (blocks.len() - 1)) / blocks.len();
        // Each column's lines, with how each is styled: 0 bold, 1 plain, 2 dim.
        let laid: Vec<Vec<(String, u8)>> = blocks
            .iter()
            .map(|(header, answer, files)| {
                let mut lines: Vec<(String, u8)> = wrap::lines(header, column)
                    .into_iter()
                    .map(|l| (l, 0))
                    .collect();
                lines.extend(wrap::lines(answer, column).into_iter().map(|l| (l, 1)));
                if let Some(files) = files {
                    lines.extend(wrap::lines(files, column).into_iter().map(|l| (l, 2)));
                }
                lines
            })
            .collect();
        let rows = laid.iter().map(Vec::len).max().unwrap_or(0);
        let mut text = String::new();
        for row in 0..rows {
            let mut cells = Vec::new();
            for lines in &laid {
                let (line, style) = lines.get(row).cloned().unwrap_or_default();
                let pad = column.saturating_sub(wrap::width(&line));
                let padded = format!("{line}{}", " ".repeat(pad));
                cells.push(match style {
                    0 => self.out.bold(&padded),
                    2 => self.out.dim(&padded),
                    _ => padded,
                });
            }
            text.push_str(cells.join(" │ ").trim_end());
            text.push('\n');
        }
        text
    }

    /// `/edit [N]`: a changed copy of user message N, as its sibling, then answered.
    pub(super) fn edit(&mut self, args: &str) {
        let n = if args.is_empty() {
            None
        } else {
            match args
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(args)
                .parse::<usize>()
            {
                Ok(n) => Some(n),
                Err(_) => {
                    return self.refuse_text("edit_takes_a_node_number_from", &[("args", &args)]);
                }
            }
        };
        let target = match self.engine.edit_target(n) {
            Ok(target) => target,
            Err(CommandError::NoSuchNode(_)) => {
                return self.refuse_text("edit_takes_a_node_number_from", &[("args", &args)]);
            }
            Err(e) => return self.command_error(&e),
        };
        let (old, parent) = (target.text, target.parent);
        let question = self.tr("edit_the_message_enter_sends_it", &[]);
        let Some(text) = self.ask(&question, &old, true) else {
            return self.out.say(&self.tr("edit_cancelled", &[]));
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return self
                .out
                .say(&self.tr("edit_cancelled_the_text_is_empty", &[]));
        }
        if text == old {
            return self
                .out
                .say(&self.tr("the_text_is_unchanged_retry_asks", &[]));
        }
        self.engine
            .chat
            .move_cursor(&parent)
            .expect("from the tree");
        self.offer_restore();
        self.chat(text);
    }

    pub(super) fn list(&mut self, args: &str) {
        let all = match args {
            "" => false,
            "all" => true,
            other => {
                return self.refuse_text("list_takes_no_argument_but_all", &[("other", &other)]);
            }
        };
        let listing = match self.engine.list(all, LIST_LIMIT) {
            Ok(listing) => listing,
            Err(e) => return self.out.error(&super::text::error(self.out.lang, &e)),
        };
        let mut text = String::new();
        if let Some(current) = &listing.unsaved {
            text.push_str(&format!(
                "* {current}  {}\n",
                self.tr("this_new_conversation_not_saved_until", &[])
            ));
        } else if listing.conversations.is_empty() {
            text.push_str(&self.tr("no_conversations_yet", &[]));
        }
        for listed in &listing.conversations {
            let s = &listed.summary;
            let mark = if listed.current { "*" } else { " " };
            let when = s
                .last_activity
                .map(|t| {
                    t.with_timezone(&chrono::Local)
                        .format("%Y-%m-%d %H:%M")
                        .to_string()
                })
                .unwrap_or_else(|| "-".repeat(16));
            let mut title = if s.title.is_empty() {
                "-".to_string()
            } else {
                preview(&s.title, 60)
            };
            if listed.one_shot {
                title.push_str(&self.out.dim(&self.tr("list_one_shot", &[])));
            }
            text.push_str(&format!(
                "{mark} {}  {:>4} {}  {when}  {title}\n",
                s.id,
                s.messages,
                self.tr("msgs", &[]),
            ));
        }
        if listing.more > 0 {
            text.push_str(&self.out.dim(&self.tr("list_more", &[("n", &listing.more)])));
        }
        if listing.hidden > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(
                &self
                    .out
                    .dim(&self.tr("list_subagents_hidden", &[("n", &listing.hidden)])),
            );
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    pub(super) fn switch(&mut self, args: &str) {
        if args.is_empty() {
            return self.refuse_text("usage_switch_id_see_list", &[]);
        }
        let mut front = Terminal::plain(self.out);
        let switched = self.runtime.block_on(self.engine.switch(args, &mut front));
        match switched {
            // A branch of this conversation by its name.
            Ok(Switched::Branch(tip)) => {
                self.say_place(&tip);
                self.offer_restore();
            }
            Ok(Switched::Already(id)) => self
                .out
                .say(&self.tr("is_already_the_current_conversation", &[("id", &id)])),
            Ok(Switched::Conversation(report)) => {
                self.report_load(&report);
                let n = self.engine.chat.conversation().len() - 1;
                let id = self.engine.chat.id().to_string();
                self.out
                    .say(&self.tr("switched_to", &[("id", &id), ("n", &n)]));
                self.start_session_hooks();
                self.offer_restore();
            }
            Err(e) => self.command_error(&e),
        }
    }

    pub(super) fn report_load(&self, report: &LoadReport) {
        if !report.skipped_lines.is_empty() {
            let lines: Vec<String> = report
                .skipped_lines
                .iter()
                .map(|(n, _)| n.to_string())
                .collect();
            self.out.warn(&self.tr(
                "skipped_unreadable_lines",
                &[("n", &lines.len()), ("lines", &lines.join(", "))],
            ));
        }
        if !report.orphans.is_empty() {
            self.out.warn(&self.tr(
                "orphans_under_the_root",
                &[
                    ("n", &report.orphans.len()),
                    ("ids", &report.orphans.join(", ")),
                ],
            ));
        }
        if !report.duplicates.is_empty() {
            self.out.warn(&self.tr(
                "ignored_repeated_ids",
                &[("ids", &report.duplicates.join(", "))],
            ));
        }
        if !report.misplaced_summaries.is_empty() {
            self.out.warn(&escape::escape_controls(&self.tr(
                "misplaced_summaries",
                &[("ids", &report.misplaced_summaries.join(", "))],
            )));
        }
    }

    pub(super) fn new_conversation(&mut self, args: &str) {
        if !self.no_args("/new", args) {
            return;
        }
        // Role and skill files are read again, so edits take effect.
        if let Err(e) = self.engine.reload_role() {
            self.out
                .warn(&self.tr("keeping_the_role", &[("error", &e)]));
        }
        self.reload_skills(true);
        let mut front = Terminal::plain(self.out);
        self.runtime
            .block_on(self.engine.new_conversation(&mut front));
        self.out
            .say(&self.tr("new_conversation", &[("id", &self.engine.chat.id())]));
        self.start_session_hooks();
    }

    /// `/clear` (CodePilot's): the next message starts a fresh branch from the root of this
    /// conversation, and the screen is cleared. Nothing is lost: the branch left stays in `/tree`;
    /// the working folder stays as it is.
    pub(super) fn clear(&mut self, args: &str) {
        if !self.no_args("/clear", args) {
            return;
        }
        if let Err(e) = self.engine.clear() {
            return self.out.error(&e.to_string());
        }
        use std::io::{IsTerminal, Write};
        let mut stdout = io::stdout();
        if stdout.is_terminal() {
            // Home, erase the screen and the scrollback.
            let _ = stdout.write_all(b"\x1b[H\x1b[2J\x1b[3J");
            let _ = stdout.flush();
        }
        self.out
            .say(&self.tr("cleared", &[("id", &self.engine.chat.id())]));
    }

    /// Another conversation starts (what its `session_start` hooks print goes with the next message).
    fn start_session_hooks(&mut self) {
        let mut front = Terminal::plain(self.out);
        self.runtime
            .block_on(self.engine.begin_conversation(&mut front));
    }

    pub(super) fn title(&mut self, args: &str) {
        if args.is_empty() {
            let title = self.engine.title();
            return self.out.say(&if title.is_empty() {
                self.tr("this_conversation_has_no_title_yet", &[])
            } else {
                title
            });
        }
        match self.engine.set_title(args) {
            Ok(()) => self.out.say(&self.tr("titled", &[("args", &args)])),
            Err(e) => self.manage_error(&e),
        }
    }

    /// Says why a command about conversations or settings did nothing.
    pub(super) fn manage_error(&self, e: &ManageError) {
        self.out.error(&match e {
            ManageError::NothingToName => self.tr("nothing_to_name_yet_send_a", &[]),
            ManageError::Current(_) => self.tr("that_is_the_current_conversation_new", &[]),
            ManageError::NothingToExport => self.tr("nothing_to_export_this_conversation_has", &[]),
            ManageError::ModelWithSpaces(model) => {
                self.tr("a_model_name_has_no_spaces", &[("args", model)])
            }
            ManageError::Write { path, error } => self.tr(
                "writing_failed",
                &[("path", &path.display()), ("error", error)],
            ),
            ManageError::Store(e) => super::text::error(self.out.lang, e),
        });
    }

    pub(super) fn delete(&mut self, args: &str) {
        if args.is_empty() {
            return self.refuse_text("usage_delete_id_see_list", &[]);
        }
        let (id, summary) = match self.engine.delete_target(args) {
            Ok(target) => target,
            Err(e) => return self.manage_error(&e),
        };
        let about = summary
            .map(|s| {
                format!(
                    " “{}” ({} {})",
                    preview(&s.title, 40),
                    s.messages,
                    self.tr("messages", &[])
                )
            })
            .unwrap_or_default();
        let question = self.tr(
            "move_conversation_to_the_trash_y",
            &[("id", &id), ("about", &about)],
        );
        let yes = self
            .ask(&question, "", false)
            .is_some_and(|a| matches!(a.trim().to_lowercase().as_str(), "y" | "yes" | "是"));
        if !yes {
            return self.out.say(&self.tr("nothing_deleted", &[]));
        }
        match self.engine.delete(&id) {
            Ok(path) => self
                .out
                .say(&self.tr("moved_to_trash", &[("id", &id), ("path", &path.display())])),
            Err(e) => self.manage_error(&e),
        }
    }

    pub(super) fn search(&mut self, args: &str) {
        if args.is_empty() {
            return self.refuse_text("usage_search_text", &[]);
        }
        let results = match self.engine.search(args, SEARCH_LIMIT) {
            Ok(r) => r,
            Err(e) => return self.out.error(&super::text::error(self.out.lang, &e)),
        };
        let mut text = String::new();
        // The hits are what the model (or another program) wrote: escaped for the terminal.
        let shown = escape::escape_controls;
        for hit in &results.hits {
            let mark = if hit.conversation == self.engine.chat.id() {
                "*"
            } else {
                " "
            };
            text.push_str(&format!(
                "{mark} {} [{}] {}: {}{}{}\n",
                hit.conversation,
                hit.number,
                hit.role.as_str(),
                shown(&hit.before),
                self.out.paint("1;33", &shown(&hit.matched)),
                shown(&hit.after)
            ));
        }
        let found = results.hits.len();
        let summary = if results.truncated {
            self.tr("search_first_shown", &[("n", &found)])
        } else {
            self.tr(
                "search_found",
                &[("n", &found), ("c", &results.conversations_searched)],
            )
        };
        text.push_str(&self.out.dim(&summary));
        self.out.say(&text);
    }

    pub(super) fn export(&mut self, args: &str) {
        // `--html [FILE]`: the whole tree as one page (crate::web).
        if let Some(html) = super::web::export_html_args(args) {
            return match html {
                Ok(file) => match super::web::view::export_html(&self.engine, file) {
                    Ok(path) => self
                        .out
                        .say(&self.tr("wrote", &[("path", &path.display())])),
                    Err(e) => self.manage_error(&e),
                },
                Err(w) => self.refuse_text("export_takes_one_file_name_got", &[("w", &w)]),
            };
        }
        let mut format = ExportFormat::Markdown;
        let mut file = None;
        for word in args.split_whitespace() {
            match word {
                "--json" => format = ExportFormat::Json,
                w if w.starts_with("--") => {
                    return self.refuse_text("export_knows_json_only_got", &[("w", &w)]);
                }
                w if file.is_none() => file = Some(PathBuf::from(w)),
                w => {
                    return self.refuse_text("export_takes_one_file_name_got", &[("w", &w)]);
                }
            }
        }
        match self.engine.export(format, file) {
            Ok(path) => self
                .out
                .say(&self.tr("wrote", &[("path", &path.display())])),
            Err(e) => self.manage_error(&e),
        }
    }

    /// `/dump`: the request the model would get for the branch at the cursor, as JSON (the exact
    /// body) and as Markdown, beside the conversation file.
    pub(super) fn dump(&mut self, args: &str) {
        if !self.no_args("/dump", args) {
            return;
        }
        match self.engine.dump() {
            Ok((md_path, json_path)) => self.out.say(&self.tr(
                "wrote_both",
                &[("a", &md_path.display()), ("b", &json_path.display())],
            )),
            Err(ManageError::Write { error, .. }) => self
                .out
                .error(&self.tr("writing_the_dump_failed", &[("error", &error)])),
            Err(e) => self.manage_error(&e),
        }
    }

    pub(super) fn permissions(&mut self, args: &str) {
        if !args.is_empty() {
            let Some(mode) = Mode::parse(args) else {
                return self.refuse_text(
                    "unknown_permission_mode_use_strict_default",
                    &[("args", &args)],
                );
            };
            self.engine.set_mode(mode);
        }
        let mode = self.engine.policy.mode;
        let table = |kind| format!("{:?}", mode.action(kind)).to_lowercase();
        use new_core::tools::ToolKind::*;
        // Commands run in the OS sandbox when it is on: judged as "contained", not "execute".
        let sandboxed = self
            .engine
            .tools
            .context()
            .os_sandbox
            .as_deref()
            .is_some_and(|s| matches!(s.state(), os_sandbox::State::On));
        let commands = if sandboxed {
            format!(
                " · {} {}",
                self.tr("sandboxed_commands", &[]),
                table(Contained)
            )
        } else {
            String::new()
        };
        let mut text = format!(
            "{} {} · {} {} · {} {}{commands} · {} {}\n",
            self.tr("mode", &[]),
            self.out.bold(mode.as_str()),
            self.tr("read", &[]),
            table(Read),
            self.tr("write", &[]),
            table(Write),
            self.tr("execute", &[]),
            table(Execute),
        );
        let note = if sandboxed {
            self.tr("permissions_sandbox_note", &[])
        } else {
            self.tr("permissions_no_sandbox_note", &[])
        };
        text.push_str(&self.out.dim(&note));
        text.push('\n');
        let rules: Vec<String> = self
            .engine
            .policy
            .rules()
            .map(|(r, origin)| {
                format!(
                    "  {:<8} {}",
                    origin.label(),
                    escape::escape_controls(&r.describe())
                )
            })
            .chain(self.engine.policy.session_rules().map(|r| {
                format!(
                    "  {:<8} {}",
                    "session",
                    escape::escape_controls(&r.describe())
                )
            }))
            .collect();
        if rules.is_empty() {
            text.push_str(&self.tr("no_rules_the_mode_decides", &[]));
        } else {
            text.push_str(&self.tr("rules_first_match_wins", &[]));
            text.push_str(&rules.join("\n"));
            text.push('\n');
        }
        text.push_str(&self.out.dim(&self.tr("hard_limits_rm_rf_mkfs_dd", &[])));
        self.out.say(&text);
    }

    /// `/init`: asks the model to survey the project with its read tools and write `AGENTS.md`. The
    /// write is asked for like any write to `AGENTS.md` (a diff, y or n), and an existing file is
    /// updated rather than replaced blindly.
    pub(super) fn init(&mut self, args: &str) {
        if !self.no_args("/init", args) {
            return;
        }
        let exists = ["AGENTS.md", "CLAUDE.md"]
            .iter()
            .find(|f| self.engine.workdir.join(f).is_file());
        let task = match exists {
            Some(file) => format!(
                "Survey this project with your read tools (list_files, glob, grep, read_file) and \
                 improve its {file}: keep what is still right, correct what is not, and add what is \
                 missing. Then write the whole file with write_file as AGENTS.md."
            ),
            None => {
                "Survey this project with your read tools (list_files, glob, grep, read_file) and \
                 write an AGENTS.md at its root with write_file."
                    .to_string()
            }
        };
        let prompt = format!(
            "{task} AGENTS.md tells coding agents what they need to work here: how to build, test and \
             run the project (exact commands), the layout (what lives where), and the conventions \
             (style, naming, error handling, commit habits) the code shows. Be specific and brief; \
             use `## ` sections; state only what you checked in the files."
        );
        self.chat(&prompt);
    }

    /// `/status`: the last status line, then the provider, model and permission mode, and the
    /// session's totals.
    pub(super) fn status(&mut self, args: &str) {
        if !self.no_args("/status", args) {
            return;
        }
        let (usage, cost, turns) = &self.engine.totals;
        let last = self
            .last_status
            .clone()
            .unwrap_or_else(|| self.tr("status_no_turn_yet", &[]));
        let cost = if self.engine.config.pricing.is_some() {
            format!(" · ${cost:.4}")
        } else {
            String::new()
        };
        let s = self.engine.provider.settings();
        let sandbox = match &self.engine.tools.context().os_sandbox {
            Some(sandbox) => format!(
                "\n{}",
                super::sandbox_view::one_line(self.out.lang, sandbox.state(), sandbox.settings())
            ),
            None => String::new(),
        };
        self.out.say(&format!(
            "{last}\n{}\n{}{sandbox}",
            self.tr(
                "status_setup",
                &[
                    ("name", &s.name),
                    ("model", &self.engine.config.model),
                    ("mode", &self.engine.policy.mode.as_str()),
                ],
            ),
            self.tr(
                "status_totals",
                &[
                    ("turns", turns),
                    ("input", &usage.input_tokens),
                    ("output", &usage.output_tokens),
                    ("cost", &cost),
                ],
            )
        ));
    }

    pub(super) fn sandbox(&mut self, args: &str) {
        if !self.no_args("/sandbox", args) {
            return;
        }
        match &self.engine.tools.context().os_sandbox {
            Some(sandbox) => {
                let facts = super::sandbox_view::Facts::of(sandbox);
                let text = super::sandbox_view::describe(self.out.lang, &facts);
                self.out
                    .say(&escape::escape_controls_keep_lines(text.trim_end()))
            }
            None => self.out.say(&self.tr("sandbox_nothing_runs", &[])),
        }
    }

    pub(super) fn model(&mut self, args: &str) {
        let s = self.engine.provider.settings();
        if args.is_empty() {
            return self.out.say(&self.tr(
                "provider_and_model",
                &[
                    ("name", &s.name),
                    ("kind", &s.kind.as_str()),
                    ("url", &s.base_url),
                    ("model", &self.engine.config.model),
                ],
            ));
        }
        if let Err(e) = self.engine.set_model(args) {
            return self.manage_error(&e);
        }
        self.out
            .say(&self.tr("model_for_the_rest_of_this", &[("args", &args)]));
    }

    pub(super) fn models(&mut self, args: &str) {
        if !self.no_args("/models", args) {
            return;
        }
        let result = interruptible(
            &self.runtime,
            &self.engine.busy,
            &mut self.engine.interrupts,
            self.engine.provider.models(),
        );
        let models = match result {
            Some(Ok(models)) => models,
            Some(Err(e)) => {
                return self
                    .out
                    .error(&self.tr("cannot_list_the_models", &[("e", &e)]));
            }
            None => return self.out.warn(&self.tr("interrupted", &[])),
        };
        if models.is_empty() {
            return self.out.say(&self.tr("the_server_lists_no_models", &[]));
        }
        let mut text = String::new();
        for m in &models {
            let mark = if m.id == self.engine.config.model {
                "*"
            } else {
                " "
            };
            let about = m
                .description
                .as_deref()
                .filter(|d| *d != m.id)
                .map(|d| self.out.dim(&format!("  {d}")))
                .unwrap_or_default();
            text.push_str(&format!("{mark} {}{about}\n", m.id));
        }
        text.push_str(&self.out.dim(&self.tr("model_name_switches", &[])));
        self.out.say(&text);
    }

    /// `/help`: the commands by group, `/N` first among the tree's, with the keys and the skills
    /// that can be called as commands, in aligned columns that wrap at the terminal's width;
    /// `/help COMMAND`: that command whole.
    pub(super) fn help(&mut self, args: &str) {
        use super::commands::{CommandId as C, CommandSpec};
        let lang = self.out.lang;
        let width = super::markdown::terminal_layout(false).width.clamp(40, 120);
        let usage = |c: &CommandSpec| {
            if c.args.is_empty() {
                c.names[0].to_string()
            } else {
                format!("{} {}", c.names[0], c.args)
            }
        };
        if !args.is_empty() {
            let name = format!("/{}", args.trim().trim_start_matches('/'));
            let Some(c) = COMMANDS.iter().find(|c| c.names.contains(&name.as_str())) else {
                return self.refuse_text("help_no_such_command", &[("name", &name)]);
            };
            let mut text = format!("{}\n", self.out.bold(&usage(c)));
            for line in wrap::lines(&c.help(lang), width - 2) {
                text.push_str(&format!("  {line}\n"));
            }
            if c.names.len() > 1 {
                text.push_str(&self.out.dim(&format!(
                    "  {} {}\n",
                    self.tr("aliases", &[]),
                    c.names[1..].join(", ")
                )));
            }
            return self.out.say(text.trim_end());
        }
        const COLUMN: usize = 24;
        let groups: &[(&str, &[C])] = &[
            (
                "help_group_tree",
                &[
                    C::Tree,
                    C::Branches,
                    C::Branch,
                    C::Prev,
                    C::Next,
                    C::Retry,
                    C::Edit,
                    C::Undo,
                    C::Btw,
                    C::Merge,
                    C::Compare,
                ],
            ),
            (
                "help_group_conversations",
                &[
                    C::List,
                    C::Switch,
                    C::New,
                    C::Title,
                    C::Search,
                    C::Export,
                    C::Delete,
                ],
            ),
            (
                "help_group_project",
                &[
                    C::Diff,
                    C::Restore,
                    C::Checkpoints,
                    C::Init,
                    C::Permissions,
                    C::Sandbox,
                ],
            ),
            (
                "help_group_context",
                &[C::Context, C::Compact, C::Status, C::Dump],
            ),
            (
                "help_group_extensions",
                &[
                    C::Skills,
                    C::Memory,
                    C::Remember,
                    C::Mcp,
                    C::Hooks,
                    C::Agents,
                    C::Tasks,
                ],
            ),
            (
                "help_group_settings",
                &[C::Model, C::Models, C::Setup, C::Help, C::Exit],
            ),
        ];
        let mut text = String::new();
        let row = |text: &mut String, left: &str, help: &str| {
            let lines = wrap::lines(help, width.saturating_sub(COLUMN + 1).max(20));
            // A usage too long for its column has its text on the lines below.
            let own_line = wrap::width(left) + 3 > COLUMN;
            if own_line {
                text.push_str(&format!("  {left}\n"));
            }
            for (i, line) in lines.iter().enumerate() {
                if i == 0 && !own_line {
                    let pad = COLUMN - wrap::width(left) - 2;
                    text.push_str(&format!("  {left}{}{line}\n", " ".repeat(pad)));
                } else {
                    text.push_str(&format!("{}{line}\n", " ".repeat(COLUMN)));
                }
            }
        };
        for (title, ids) in groups {
            text.push_str(&self.out.bold(&self.tr(title, &[])));
            text.push('\n');
            if *title == "help_group_tree" {
                row(&mut text, "/N", &self.tr("move_to_node_n_of_tree", &[]));
            }
            for id in *ids {
                if let Some(c) = COMMANDS.iter().find(|c| c.id == *id) {
                    row(&mut text, &usage(c), &c.help(lang));
                }
            }
            text.push('\n');
        }
        // Any command a group leaves out still shows.
        let grouped: Vec<C> = groups
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        for c in COMMANDS.iter().filter(|c| !grouped.contains(&c.id)) {
            row(&mut text, &usage(c), &c.help(lang));
        }
        let skills: Vec<String> = self
            .engine
            .skills
            .all()
            .filter(|s| s.enabled)
            .map(|s| format!("/{}", s.name))
            .collect();
        if !skills.is_empty() {
            text.push_str(&self.out.bold(&self.tr("help_group_skills", &[])));
            text.push('\n');
            for line in wrap::lines(&skills.join("  "), width - 2) {
                text.push_str(&format!("  {line}\n"));
            }
            text.push('\n');
        }
        text.push_str(&self.out.bold(&self.tr("help_group_keys", &[])));
        text.push('\n');
        for (keys, what) in [
            ("Enter", "help_key_enter"),
            ("Alt-Enter, Ctrl-J, \\", "help_key_newline"),
            ("Tab", "help_key_tab"),
            ("Ctrl-C", "help_key_ctrl_c"),
            ("Ctrl-L", "help_key_ctrl_l"),
            ("Ctrl-D", "help_key_ctrl_d"),
            ("//text", "send_text_that_starts_with"),
        ] {
            row(&mut text, keys, &self.tr(what, &[]));
        }
        let aliases: Vec<String> = COMMANDS
            .iter()
            .flat_map(|c| {
                c.names[1..]
                    .iter()
                    .map(move |a| format!("{a} = {}", c.names[0]))
            })
            .collect();
        let mut tail = String::new();
        for line in wrap::lines(
            &format!("{} {}", self.tr("aliases", &[]), aliases.join(", ")),
            width,
        ) {
            tail.push_str(&line);
            tail.push('\n');
        }
        tail.push_str(&self.tr("help_command_details", &[]));
        text.push_str(&self.out.dim(&tail));
        self.out.say(&text);
    }
}

/// How far one of the answers side by side has come, as its events said.
#[derive(Debug, Clone, Default)]
struct Going {
    /// Pieces of text and reasoning streamed (about a token each).
    tokens: u64,
    /// The tool running, if any.
    tool: Option<String>,
    /// Ended (its last answer had no tool calls), when.
    ended: Option<Instant>,
    /// Shown whole already: off the board.
    shown: bool,
}

impl Going {
    fn saw(&mut self, event: &Event) {
        match event {
            Event::Text(_) | Event::Reasoning(_) => self.tokens += 1,
            Event::ToolCall(call) => self.tool = Some(call.function.name.clone()),
            Event::ToolResult { .. } => self.tool = None,
            Event::AnswerEnd { response, .. } if response.tool_calls.is_empty() => {
                self.ended = Some(Instant::now());
            }
            _ => {}
        }
    }
}

/// The board's lines: one for each answer not shown yet.
fn going_lines(
    progress: &Mutex<Vec<Going>>,
    labels: &[String],
    started: Instant,
    frame: char,
    lang: Lang,
) -> Vec<String> {
    let going = progress.lock().unwrap_or_else(|e| e.into_inner());
    going
        .iter()
        .zip(labels)
        .filter(|(g, _)| !g.shown)
        .map(|(g, label)| match g.ended {
            Some(took) => format!(
                "✓ {}",
                super::text::tr(
                    lang,
                    "together_ended",
                    &[
                        ("label", label),
                        ("tokens", &g.tokens),
                        (
                            "seconds",
                            &format!(
                                "{:.1}",
                                took.saturating_duration_since(started).as_secs_f64()
                            ),
                        ),
                    ],
                )
            ),
            None => {
                let tool = g
                    .tool
                    .as_deref()
                    .map(|t| format!(" · {}", escape::escape_controls(t)))
                    .unwrap_or_default();
                format!(
                    "{frame} {}",
                    super::text::tr(
                        lang,
                        "together_going",
                        &[
                            ("label", label),
                            ("tokens", &g.tokens),
                            ("seconds", &started.elapsed().as_secs()),
                            ("tool", &tool),
                        ],
                    )
                )
            }
        })
        .collect()
}
