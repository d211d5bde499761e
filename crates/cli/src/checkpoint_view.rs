//! `/diff` and `/checkpoints`: the working folder's state at the nodes of the tree.

use super::output::colour_diff;
use super::repl::App;
use new_core::checkpoint::{Entry, Manifest, changes};

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
    /// The state at node `n` (its nearest checkpoint), or why there is none.
    fn state_at(&self, n: usize) -> Result<(String, Manifest), String> {
        let c = self.engine.chat.conversation();
        let Some(id) = c.id_by_number(n) else {
            return Err(self.tr("no_node_n", &[("n", &n)]));
        };
        let Some(snapshot) = c.state_of(id) else {
            return Err(self.tr("no_checkpoint_at", &[("n", &n)]));
        };
        let checkpoints = self
            .engine
            .checkpoints
            .as_ref()
            .expect("checked by the caller");
        checkpoints
            .store
            .load(snapshot)
            .map(|m| (snapshot.to_string(), m))
            .map_err(|e| e.to_string())
    }

    /// `/diff [N [M]]`: the working folder against node N's state (default: the current node), or
    /// node N's state against node M's.
    pub(super) fn diff(&mut self, args: &str) {
        let Some(checkpoints) = self.engine.checkpoints.as_ref() else {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        };
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
        let from = match self.state_at(numbers.first().copied().unwrap_or(current)) {
            Ok(state) => state.1,
            Err(e) => return self.out.error(&e),
        };
        let to = match numbers.get(1) {
            Some(&m) => match self.state_at(m) {
                Ok(state) => state.1,
                Err(e) => return self.out.error(&e),
            },
            None => match checkpoints.peek() {
                Ok(Some((_, now))) => now,
                Ok(None) => return self.out.error(&self.tr("checkpoints_off", &[])),
                Err(e) => return self.out.error(&e.to_string()),
            },
        };
        let listed = changes(&from, &to);
        if listed.is_empty() {
            return self.out.say(&self.tr("no_differences", &[]));
        }
        let mut text = String::new();
        for (path, what) in &listed {
            text.push_str(&format!(
                "{what} {}\n",
                new_core::escape::escape_controls(path)
            ));
        }
        for (path, _) in &listed {
            let old = content(self, from.files.get(path));
            let new = content(self, to.files.get(path));
            let diff = match (&old, &new) {
                (old, Some(new)) => new_core::tools::diff::unified(path, old.as_deref(), new),
                (Some(old), None) => similar::TextDiff::from_lines(old.as_str(), "")
                    .unified_diff()
                    .header(&format!("a/{path}"), "/dev/null")
                    .to_string(),
                (None, None) => String::new(),
            };
            text.push_str(&colour_diff(
                &self.out,
                &new_core::escape::escape_controls_keep_lines(&diff),
            ));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// After the cursor moved (`/N`, `/prev`, `/next`, `/switch`, `--continue`, and before
    /// `/retry` and `/edit` answer): when the folder differs from the node's state, says what
    /// differs and, on a terminal, offers to restore (yes, no, or show the diff first); piped, or
    /// with `checkpoints.restore: never`, it only lists and gives a hint.
    pub(super) fn offer_restore(&mut self) {
        let Some(checkpoints) = self.engine.checkpoints.as_ref() else {
            return;
        };
        let c = self.engine.chat.conversation();
        let Some(target_id) = c.state_of(c.cursor()).map(str::to_string) else {
            return;
        };
        let n = c.number_of(c.cursor()).unwrap_or(0);
        let (Ok(target), Ok(Some((_, now)))) =
            (checkpoints.store.load(&target_id), checkpoints.peek())
        else {
            return;
        };
        let differ = changes(&now, &target);
        if differ.is_empty() {
            return;
        }
        let mut list = String::new();
        for (path, what) in differ.iter().take(20) {
            list.push_str(&format!(
                "{what} {}\n",
                new_core::escape::escape_controls(path)
            ));
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
            let answer = self.ask(&self.tr("restore_offer", &[]), "", false);
            match answer
                .as_deref()
                .map(|a| a.trim().to_lowercase())
                .as_deref()
            {
                Some("y" | "yes") => return self.restore_with(false),
                Some("d" | "diff") => self.diff(&n.to_string()),
                _ => return,
            }
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
        let Some(checkpoints) = self.engine.checkpoints.as_ref() else {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        };
        let c = self.engine.chat.conversation();
        let n = c.number_of(c.cursor()).unwrap_or(0);
        let (_, target) = match self.state_at(n) {
            Ok(state) => state,
            Err(e) => return self.out.error(&e),
        };
        // What the folder should hold if nobody else touched it: the latest snapshot `new` wrote
        // down (after a round of tools, or a restore), in this session or an earlier one.
        let before = c
            .latest_checkpoint
            .as_deref()
            .and_then(|id| checkpoints.store.load(id).ok().map(|m| (id.to_string(), m)))
            .or_else(|| checkpoints.last());
        let (now_id, now) = match checkpoints.peek() {
            Ok(Some(state)) => state,
            Ok(None) => return self.out.error(&self.tr("checkpoints_off", &[])),
            Err(e) => return self.out.error(&e.to_string()),
        };
        let to_change = changes(&now, &target);
        if to_change.is_empty() {
            return self.out.say(&self.tr("folder_matches", &[("n", &n)]));
        }
        // Changed since `new` last looked: someone else's work.
        let outside: Vec<String> = before
            .map(|(_, last)| changes(&last, &now).into_iter().map(|(p, _)| p).collect())
            .unwrap_or_default();
        let flag = self.tr("changed_outside", &[]);
        let mut list = String::new();
        for (path, what) in &to_change {
            let mark = if outside.contains(path) { &flag } else { "" };
            list.push_str(&format!(
                "{what} {}{mark}\n",
                new_core::escape::escape_controls(path)
            ));
        }
        let yes = |answer: Option<String>| {
            answer.is_some_and(|a| matches!(a.trim().to_lowercase().as_str(), "y" | "yes"))
        };
        if ask {
            self.out.say(&format!(
                "{}\n{}",
                self.tr("restore_would", &[("n", &n)]),
                list.trim_end()
            ));
            if !yes(self.ask(&self.tr("restore_ask", &[]), "", false)) {
                return self.out.say(&self.tr("restore_cancelled", &[]));
            }
        }
        // Contents that cannot be had (damaged or missing in the store) are said first; the rest is
        // restored only after a yes.
        let store = &self
            .engine
            .checkpoints
            .as_ref()
            .expect("checked above")
            .store;
        let broken: Vec<String> = to_change
            .iter()
            .filter_map(|(path, _)| {
                let hash = target.files.get(path)?.hash.as_deref()?;
                store.object(hash).err().map(|e| format!("{path}: {e}"))
            })
            .collect();
        if !broken.is_empty() {
            for b in &broken {
                self.out.error(&self.tr(
                    "cannot_restore",
                    &[("what", &new_core::escape::escape_controls(b))],
                ));
            }
            if !yes(self.ask(&self.tr("restore_the_rest", &[]), "", false)) {
                return self.out.say(&self.tr("restore_cancelled", &[]));
            }
        }
        let flagged = to_change
            .iter()
            .filter(|(p, _)| outside.contains(p))
            .count();
        let overwrite_outside = flagged == 0
            || yes(self.ask(
                &self.tr("restore_ask_outside", &[("n", &flagged)]),
                "",
                false,
            ));
        // The folder as it is now stays reachable: from the store, and as the state of the node
        // the cursor came from.
        if let Some(from) = self.engine.came_from.clone()
            && let Err(e) = self.engine.chat.add_checkpoint(&from, &now_id)
        {
            self.out.warn(&e.to_string());
        }
        let checkpoints = self.engine.checkpoints.as_ref().expect("checked above");
        let sandbox = self.engine.tools.workdir().clone();
        let mut kept: Vec<String> = Vec::new();
        let paths: Vec<String> = to_change
            .iter()
            .map(|(p, _)| p.clone())
            .filter(|p| {
                let keep = outside.contains(p) && !overwrite_outside;
                if keep {
                    kept.push(format!("{p} ({})", self.tr("changed_outside_short", &[])));
                }
                !keep
            })
            .collect();
        let mut applied =
            new_core::checkpoint::apply(&checkpoints.store, &sandbox, &now, &target, &paths, true);
        // Changed since the question (each looked at just before it would have been written):
        // asked about again, by name.
        if !applied.changed.is_empty() {
            let list: String = applied
                .changed
                .iter()
                .map(|p| format!("  {}\n", new_core::escape::escape_controls(p)))
                .collect();
            self.out.warn(&format!(
                "{}\n{}",
                self.tr(
                    "restore_changed_meanwhile",
                    &[("n", &applied.changed.len())]
                ),
                list.trim_end()
            ));
            let changed = std::mem::take(&mut applied.changed);
            if yes(self.ask(&self.tr("restore_overwrite_them", &[]), "", false)) {
                let again = new_core::checkpoint::apply(
                    &self
                        .engine
                        .checkpoints
                        .as_ref()
                        .expect("checked above")
                        .store,
                    &sandbox,
                    &now,
                    &target,
                    &changed,
                    false,
                );
                applied.done += again.done;
                applied.kept.extend(again.kept);
            } else {
                let why = self.tr("changed_meanwhile_short", &[]);
                applied
                    .kept
                    .extend(changed.into_iter().map(|p| (p, why.clone())));
            }
        }
        let done = applied.done;
        kept.extend(
            applied
                .kept
                .into_iter()
                .map(|(p, why)| format!("{p} ({why})")),
        );
        let checkpoints = self.engine.checkpoints.as_ref().expect("checked above");
        // The folder now, written down on the node it was restored to (when it holds that node's
        // state whole): what `new` left. After a partial restore the kept files are asked about
        // again next time, which errs on the side of asking.
        if kept.is_empty()
            && let Ok(Some(id)) = checkpoints.take()
        {
            let cursor = self.engine.chat.conversation().cursor().to_string();
            if let Err(e) = self.engine.chat.add_checkpoint(&cursor, &id) {
                self.out.warn(&e.to_string());
            }
        }
        self.out
            .say(&self.tr("restored", &[("done", &done), ("n", &n), ("id", &now_id)]));
        for k in kept {
            self.out.warn(&self.tr(
                "not_restored",
                &[("what", &new_core::escape::escape_controls(&k))],
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
