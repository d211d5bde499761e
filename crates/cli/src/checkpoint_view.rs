//! `/diff` and `/checkpoints`: the working folder's state at the nodes of the tree.

use super::numbers::short_id;
use super::output::colour_diff;
use super::repl::App;
use super::terminal::Terminal;
use new_core::checkpoint::{Entry, Manifest, changes};
use new_core::escape;
use new_core::session::{Kept, Restored, StateError};
use new_core::tools::diff;

/// A file of a state as text, for a diff: None when it is not there, a note for what is not text.
fn content(app: &App, entry: Option<&Entry>) -> Option<String> {
    let entry = entry?;
    let checkpoints = app.engine.checkpoints.as_ref()?;
    Some(match &*entry.kind {
        "link" => format!("→ {}\n", entry.target.as_deref().unwrap_or("?")),
        "skipped" => format!(
            "[a file of {} bytes, over checkpoints.max_file_bytes]\n",
            entry.size
        ),
        _ => match entry.hash.as_deref().map(|h| checkpoints.store.object(h)) {
            Some(Ok(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => format!("[binary, {} bytes]\n", e.as_bytes().len()),
            },
            Some(Err(e)) => format!("[{e}]\n"),
            None => String::new(),
        },
    })
}

impl App {
    /// Says why the folder's states could not be compared or restored.
    fn state_error(&self, e: &StateError) {
        self.out.error(&match e {
            StateError::Off => self.tr("checkpoints_off", &[]),
            StateError::NoSuchNode(n) => self.tr("no_node_n", &[("n", n)]),
            StateError::NoState(n) => self.tr("no_checkpoint_at", &[("n", n)]),
            StateError::Checkpoint(e) => e.to_string(),
        })
    }

    /// `/diff [N [M]]`: the working folder against node N's state (default: the current node), or
    /// node N's state against node M's.
    pub(super) fn diff(&mut self, args: &str) {
        if self.engine.checkpoints.is_none() {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        }
        let numbers: Vec<Option<usize>> = args
            .split_whitespace()
            .map(|a| a.trim_start_matches('[').trim_end_matches(']').parse().ok())
            .collect();
        if numbers.len() > 2 || numbers.iter().any(Option::is_none) {
            return self.out.error(&self.tr("diff_usage", &[("args", &args)]));
        }
        let numbers: Vec<usize> = numbers.into_iter().flatten().collect();
        let c = self.engine.chat.conversation();
        let current = c.number_of(c.cursor()).unwrap_or(0);
        let from = match self
            .engine
            .state_at(numbers.first().copied().unwrap_or(current))
        {
            Ok(state) => state.1,
            Err(e) => return self.state_error(&e),
        };
        let to = match numbers.get(1) {
            Some(&m) => self.engine.state_at(m),
            None => self.engine.state_now(),
        };
        let to = match to {
            Ok(state) => state.1,
            Err(e) => return self.state_error(&e),
        };
        self.show_diff(&from, &to);
    }

    /// The differences from one state of the folder to another: the paths with their letters
    /// (`A`, `M`, `D`: what `to` has against `from`), then each file's diff.
    fn show_diff(&self, from: &Manifest, to: &Manifest) {
        let listed = changes(from, to);
        if listed.is_empty() {
            return self.out.say(&self.tr("no_differences", &[]));
        }
        let mut text = String::new();
        for (path, what) in &listed {
            text.push_str(&format!("{what} {}\n", escape::escape_controls(path)));
        }
        for (path, _) in &listed {
            let old = content(self, from.files.get(path.as_str()));
            let new = content(self, to.files.get(path.as_str()));
            let diff = match (&old, &new) {
                (old, Some(new)) => diff::unified(path, old.as_deref(), new),
                (Some(old), None) => similar::TextDiff::from_lines(old.as_str(), "")
                    .unified_diff()
                    .header(&format!("a/{path}"), "/dev/null")
                    .to_string(),
                (None, None) => String::new(),
            };
            text.push_str(&colour_diff(
                &self.out,
                &escape::escape_controls_keep_lines(&diff),
            ));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// After the cursor moved (`/N`, `/prev`, `/next`, `/switch`, `--continue`, and before
    /// `/retry` and `/edit` answer): when the folder differs from the node's state, says what
    /// differs and, on a terminal, offers to restore (yes, no, or show the diff first); piped, or
    /// with `checkpoints.restore: never`, it only lists and gives a hint.
    pub(super) fn offer_restore(&mut self) {
        let Some((_, differ)) = self.engine.folder_differs() else {
            return;
        };
        let n = self.node_label(self.engine.chat.conversation().cursor());
        let mut list = String::new();
        for (path, what) in differ.iter().take(20) {
            list.push_str(&format!("{what} {}\n", escape::escape_controls(path)));
        }
        if differ.len() > 20 {
            list.push_str(&self.tr("and_more", &[("n", &(differ.len() - 20))]));
            list.push('\n');
        }
        self.out.say(&format!(
            "{}\n{}",
            self.tr("folder_differs", &[("n", &n)]),
            list.trim_end()
        ));
        let terminal = matches!(self.reader, super::reader::Reader::Editor { .. });
        if !(self.engine.config.checkpoints.ask && terminal) {
            return self.out.say(&self.out.dim(&self.tr("restore_hint", &[])));
        }
        loop {
            let answer = self.ask_unasked(
                &self.tr("restore_offer", &[]),
                &["y", "yes", "n", "no", "d", "diff", "是", "否"],
            );
            match answer.as_deref() {
                Some("y" | "yes" | "是") => return self.restore_with(false),
                // What the restore would do, with the list's letters.
                Some("d" | "diff") => self.diff_of_restore(),
                _ => return,
            }
        }
    }

    /// The diff a restore to the current node's state would apply: from the folder now to
    /// that state, so its letters are the offer's.
    fn diff_of_restore(&self) {
        let c = self.engine.chat.conversation();
        let n = c.number_of(c.cursor()).unwrap_or(0);
        match (self.engine.state_now(), self.engine.state_at(n)) {
            (Ok((_, now)), Ok((_, node))) => self.show_diff(&now, &node),
            (Err(e), _) | (_, Err(e)) => self.state_error(&e),
        }
    }

    /// `/restore`: makes the working folder match the current node's state, after consent. The
    /// folder is snapshotted first (and kept for the node the cursor came from), so a restore can
    /// be undone; files changed outside `new` since its last snapshot need their own yes.
    pub(super) fn restore(&mut self, args: &str) {
        if !args.is_empty() {
            return self.out.error(&self.tr(
                "takes_no_argument_got",
                &[("command", &"/restore"), ("args", &args)],
            ));
        }
        self.restore_with(true);
    }

    /// The restore; `ask`: list and ask first (the offer after a move has asked already). Files
    /// changed outside `new` are asked about either way.
    fn restore_with(&mut self, ask: bool) {
        let came_from = self.engine.came_from.clone();
        let mut front = Terminal::asking(self.out, &mut self.reader);
        let restored = self.engine.restore(ask, &mut front);
        let (done, kept) = match restored {
            Ok(Restored::Done { done, kept, .. }) => (done, kept),
            Ok(Restored::Matches { .. }) => {
                let n = self.node_label(self.engine.chat.conversation().cursor());
                return self.out.say(&self.tr("folder_matches", &[("n", &n)]));
            }
            Ok(Restored::Cancelled) => return self.out.say(&self.tr("restore_cancelled", &[])),
            Err(e) => return self.state_error(&e),
        };
        let n = self.node_label(self.engine.chat.conversation().cursor());
        // The folder as it was is the state of the node the cursor came from: named so.
        let kept_as = match came_from
            .as_deref()
            .filter(|from| self.engine.chat.conversation().get(from).is_some())
        {
            Some(from) => self.tr(
                "restored_kept_with",
                &[("from", &self.node_label(from)), ("id", &short_id(from))],
            ),
            None => self.tr("restored_kept_in_store", &[]),
        };
        self.out.say(&self.tr(
            "restored",
            &[("done", &done), ("n", &n), ("kept", &kept_as)],
        ));
        for (path, why) in kept {
            let why = match why {
                Kept::Outside => self.tr("changed_outside_short", &[]),
                Kept::ChangedMeanwhile => self.tr("changed_meanwhile_short", &[]),
                Kept::Failed(why) => why,
            };
            self.out.warn(&self.tr(
                "not_restored",
                &[("what", &escape::escape_controls(&format!("{path} ({why})")))],
            ));
        }
    }

    /// `/checkpoints`: the store's size; `/checkpoints gc`: what no conversation refers to removed.
    pub(super) fn checkpoints_command(&mut self, args: &str) {
        if !matches!(args, "" | "gc") {
            return self
                .out
                .error(&self.tr("checkpoints_usage", &[("args", &args)]));
        }
        let Some(checkpoints) = self.engine.checkpoints.as_ref() else {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        };
        if args == "gc" {
            return match checkpoints.store.gc(self.engine.store.dir()) {
                Ok((snapshots, objects, bytes)) => self.out.say(&self.tr(
                    "checkpoints_collected",
                    &[
                        ("snapshots", &snapshots),
                        ("objects", &objects),
                        ("mb", &format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))),
                    ],
                )),
                Err(e) => self.out.error(&e.to_string()),
            };
        }
        let (snapshots, objects, bytes) = checkpoints.store.stats();
        self.out.say(&self.tr(
            "checkpoint_stats",
            &[
                ("snapshots", &snapshots),
                ("objects", &objects),
                ("mb", &format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))),
            ],
        ));
    }
}
