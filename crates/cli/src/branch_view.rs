//! What only a tree can do: named branches (`/branch`), side questions (`/btw`), `/undo` that
//! keeps what it undoes, and `/merge`, which brings a branch's conclusion back into another.

use super::numbers::{Typed, short_id};
use super::output::Printer;
use super::repl::App;
use super::terminal::Terminal;
use super::tree_view::{describe, preview};
use new_core::session::CommandError;

use new_core::checkpoint;
use new_core::conversation::valid_branch_name as valid_name;
use new_core::escape;
use std::fmt::Display;

/// How long ago, shortly: `40s`, `5m`, `3h`, `2d`.
fn age(d: chrono::TimeDelta) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// How `/merge --files` asks its question when a front end other than the terminal does: the
/// question and the list of what it would do (escaped) in, yes or no out.
pub(super) type FilesAsk<'a> = Option<&'a mut dyn FnMut(&str, &str) -> bool>;

impl App {
    /// `/branch NAME` names the branch at the cursor (its tip); `/branch` lists the names;
    /// `/branch -d NAME` removes one (the branch stays).
    pub(super) fn branch(&mut self, args: &str) {
        let mut words = args.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (None, _, _) => self.list_branch_names(),
            (Some("-d" | "--delete"), Some(name), None) => {
                if !self.engine.chat.conversation().branches.contains_key(name) {
                    return self.out.error(&self.tr(
                        "no_branch_named",
                        &[("name", &escape::escape_controls(name))],
                    ));
                }
                match self.engine.chat.unname_branch(name) {
                    Ok(()) => self.out.say(&self.tr("branch_unnamed", &[("name", &name)])),
                    Err(e) => self.out.error(&super::text::error(self.out.lang, &e)),
                }
            }
            (Some(name), None, _) if valid_name(name) => {
                if !self.engine.chat.is_persisted() {
                    return self.out.error(&self.tr("branch_nothing_yet", &[]));
                }
                let c = self.engine.chat.conversation();
                let tip = c
                    .tip(c.cursor())
                    .expect("the cursor is in the tree")
                    .id
                    .clone();
                let moved = c
                    .branches
                    .get(name)
                    .filter(|node| c.tip(node).is_none_or(|t| t.id != tip))
                    .is_some();
                let n = self.node_label(&tip);
                match self.engine.chat.name_branch(name, &tip) {
                    Ok(()) => {
                        let args: &[(&str, &dyn Display)] = &[("name", &name), ("n", &n)];
                        self.out.say(&if moved {
                            self.tr("branch_moved", args)
                        } else {
                            self.tr("branch_named", args)
                        });
                    }
                    Err(e) => self.out.error(&super::text::error(self.out.lang, &e)),
                }
            }
            _ => self
                .out
                .error(&self.tr("branch_usage", &[("args", &escape::escape_controls(args))])),
        }
    }

    fn list_branch_names(&self) {
        let c = self.engine.chat.conversation();
        if c.branches.is_empty() {
            return self.out.say(&self.tr("no_branch_names_yet", &[]));
        }
        let here = c.tip(c.cursor()).map(|m| m.id.clone());
        let now = chrono::Utc::now();
        let mut text = String::new();
        for (name, node) in &c.branches {
            let Some(tip) = c.tip(node) else { continue };
            let mark = if Some(&tip.id) == here.as_ref() {
                "*"
            } else {
                " "
            };
            let n = self.node_label(&tip.id);
            let size = c.chain(&tip.id).len() - 1;
            let age = age(now - tip.timestamp);
            text.push_str(&format!(
                "{mark} {name}  [{n}] {}  {}\n",
                describe(tip, self.out.lang),
                self.out
                    .dim(&self.tr("branch_size_age", &[("n", &size), ("age", &age)]))
            ));
        }
        self.out.say(text.trim_end());
    }

    /// `/btw QUESTION`: asked in a side branch off the cursor (with the branch as context and
    /// only the tools that read), answered, and the cursor left where it was.
    pub(super) fn btw(&mut self, args: &str) {
        let question = args.trim();
        if question.is_empty() {
            return self.out.error(&self.tr("btw_usage", &[]));
        }
        let mut printer = Printer::new(self.out).waiting_for(&self.engine.provider.settings().name);
        let mut front = Terminal::turn(self.out, &mut printer, &mut self.reader);
        let done = self.runtime.block_on(self.engine.btw(question, &mut front));
        self.turn_interrupted |= front.interrupted;
        let Ok(done) = done else { return };
        self.report_turn(&printer);
        let side_id = short_id(&done.asked).to_string();
        let (side, here) = (self.node_label(&done.asked), self.node_label(&done.back));
        self.out.say(&self.out.dim(&self.tr(
            "btw_done",
            &[("side", &side), ("here", &here), ("side_id", &side_id)],
        )));
    }

    /// `/undo`: the cursor goes to where the last user message was sent from, with the folder
    /// as it was there (asked, as after any move); what was undone stays, folded in `/tree`.
    pub(super) fn undo(&mut self, args: &str) {
        if !args.is_empty() {
            return self.out.error(&self.tr(
                "takes_no_argument_got",
                &[("command", &"/undo"), ("args", &args)],
            ));
        }
        let undone = match self.engine.undo() {
            Ok(undone) => undone,
            Err(e) => return self.command_error(&e),
        };
        let n = self.node_label(&undone.message);
        self.out.say(&self.tr("undone", &[("n", &n)]));
        self.say_place(&undone.parent);
        // The folder as it was there (when a snapshot knows it): listed and asked, as `/restore`
        // does.
        if self.engine.checkpoints.is_some()
            && self
                .engine
                .chat
                .conversation()
                .state_of(&undone.parent)
                .is_some()
        {
            self.restore("");
        }
    }

    /// `/merge N` or `/merge NAME`: the model's account of that branch, from where it left the
    /// current one to its tip, appended here as a merge node that the next request carries. The
    /// folder is not changed (unless `--files`).
    pub(super) fn merge(&mut self, args: &str) {
        self.merge_asking(args, None);
    }

    /// [`App::merge`], with `--files`'s question asked by `ask` (the question, the list of what
    /// it would do: true for yes) when another front end asks it (the page); None: the terminal.
    pub(super) fn merge_asking(&mut self, args: &str, ask: FilesAsk<'_>) {
        let mut words: Vec<&str> = args.split_whitespace().collect();
        let files = words.contains(&"--files");
        words.retain(|w| *w != "--files");
        let [target] = words[..] else {
            return self.out.error(&self.tr("merge_usage", &[]));
        };
        if files && self.engine.checkpoints.is_none() {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        }
        let resolved = match self.node_typed(target) {
            Typed::Moved => return,
            Typed::Node(id) => Ok(self
                .engine
                .chat
                .conversation()
                .tip(&id)
                .expect("in the tree")
                .id
                .to_string()),
            Typed::Other => self.engine.merge_tip(target),
        };
        let tip = match resolved {
            Ok(tip) => tip,
            Err(_) => {
                return self.out.error(&self.tr(
                    "merge_usage_no_such",
                    &[("args", &escape::escape_controls(target))],
                ));
            }
        };
        let out = self.out;
        let mut asking = |tip_n: usize, count: usize| {
            out.say(&out.dim(&super::text::tr(
                out.lang,
                "merge_asking",
                &[("n", &tip_n), ("count", &count)],
            )));
        };
        let merged = self.runtime.block_on(self.engine.merge(&tip, &mut asking));
        let merged = match merged {
            Ok(merged) => merged,
            Err(e) => return self.command_error(&e),
        };
        let n = self.node_label(&merged.node);
        let names = self.engine.chat.conversation().names_of(&merged.tip);
        let from = if names.is_empty() {
            format!("[{}]", self.node_label(&merged.tip))
        } else {
            format!(
                "[{}] ({})",
                self.node_label(&merged.tip),
                escape::escape_controls(&names.join(", "))
            )
        };
        self.out.say(&self.tr(
            "merged",
            &[
                ("from", &from),
                ("n", &n),
                ("preview", &preview(&merged.summary, 120)),
            ],
        ));
        if files {
            self.merge_files(&merged.fork, &merged.tip, &merged.before, &merged.node, ask);
        }
    }

    /// Says why a tree command did nothing, in the interface's language.
    pub(super) fn command_error(&self, e: &CommandError) {
        let text = match e {
            CommandError::Told => return,
            CommandError::NothingToUndo => self.tr("nothing_to_undo", &[]),
            CommandError::NothingToRetry => self.tr("nothing_to_retry_there_is_no", &[]),
            CommandError::NothingToEdit => self.tr("nothing_to_edit_there_is_no", &[]),
            CommandError::NoFork => self.tr("there_is_no_fork_above_this", &[]),
            CommandError::SummaryNotEdited(n) => self.tr("a_summary_is_not_edited", &[("n", n)]),
            CommandError::NotUsers { n, role } => self.tr(
                "only_user_messages_can_be_edited",
                &[("n", n), ("role", role)],
            ),
            CommandError::SameBranch(n) => self.tr("merge_same_branch", &[("n", n)]),
            CommandError::Unrelated => self.tr("merge_usage", &[]),
            CommandError::MergeEmpty => self.tr("merge_empty", &[]),
            CommandError::MergeFailed(why) => {
                self.tr("merge_failed", &[("why", &escape::escape_controls(why))])
            }
            CommandError::NoSuchNode(_) | CommandError::NoSuchBranch(_) => {
                escape::escape_controls(&e.to_string())
            }
            CommandError::Store(e) => super::text::error(self.out.lang, e),
            CommandError::Session(e) => super::text::error(self.out.lang, e),
        };
        self.out.error(&text);
    }

    /// `/merge N --files`: the branch's file changes since `fork` brought into the folder, after
    /// consent: taken where the folder is as it was at the fork, merged three ways where both
    /// changed a text file in different places; conflicts are shown and left as they are. The
    /// folder before is kept as `before`'s state, the folder after as the merge node's.
    fn merge_files(&mut self, fork: &str, tip: &str, before: &str, node: &str, ask: FilesAsk<'_>) {
        use new_core::checkpoint::MergeStep;
        let checkpoints = self
            .engine
            .checkpoints
            .as_ref()
            .expect("checked by the caller");
        let c = self.engine.chat.conversation();
        let (Some(base_id), Some(theirs_id)) = (c.state_of(fork), c.state_of(tip)) else {
            return self.out.say(&self.tr("merge_files_none", &[]));
        };
        let (base, theirs) = match (
            checkpoints.store.load(base_id),
            checkpoints.store.load(theirs_id),
        ) {
            (Ok(b), Ok(t)) => (b, t),
            (Err(e), _) | (_, Err(e)) => return self.out.error(&e.to_string()),
        };
        let (now_id, now) = match checkpoints.peek() {
            Ok(Some(state)) => state,
            Ok(None) => return self.out.error(&self.tr("checkpoints_off", &[])),
            Err(e) => return self.out.error(&e.to_string()),
        };
        let plan = checkpoint::merge_plan(&checkpoints.store, &base, &now, &theirs);
        if plan.is_empty() {
            return self.out.say(&self.tr("merge_files_none", &[]));
        }
        let mut list = String::new();
        for step in &plan {
            let (what, path) = match step {
                // A take that removes the file says so.
                MergeStep::Take(p) if !theirs.files.contains_key(p.as_str()) => {
                    (self.tr("merge_remove", &[]), p)
                }
                MergeStep::Take(p) => (self.tr("merge_take", &[]), p),
                MergeStep::Merged { path, .. } => (self.tr("merge_merged", &[]), path),
                MergeStep::Conflict { path, .. } => (self.tr("merge_conflict", &[]), path),
            };
            list.push_str(&format!("  {what} {}\n", escape::escape_controls(path)));
        }
        self.out.say(&format!(
            "{}\n{}",
            self.tr("merge_files_would", &[]),
            list.trim_end()
        ));
        let writes = plan
            .iter()
            .filter(|s| !matches!(s, MergeStep::Conflict { .. }))
            .count();
        let question = self.tr("merge_files_ask", &[("n", &writes)]);
        let yes = writes > 0
            && match ask {
                Some(ask) => ask(
                    question.trim_end().trim_end_matches("[y/N]").trim_end(),
                    &list,
                ),
                None => self
                    .ask(&question, "", false)
                    .is_some_and(|a| matches!(a.trim().to_lowercase().as_str(), "y" | "yes")),
            };
        let mut kept: Vec<String> = Vec::new();
        let mut done = 0usize;
        if yes {
            // The folder as it was stays reachable: it is the state of the node merged into.
            if let Err(e) = self.engine.chat.add_checkpoint(before, &now_id) {
                self.out.warn(&e.to_string());
            }
            let checkpoints = self
                .engine
                .checkpoints
                .as_ref()
                .expect("checked by the caller");
            let sandbox = self.engine.tools.workdir().clone();
            let takes: Vec<String> = plan
                .iter()
                .filter_map(|s| match s {
                    MergeStep::Take(p) => Some(p.clone()),
                    _ => None,
                })
                .collect();
            let applied =
                checkpoint::apply(&checkpoints.store, &sandbox, &now, &theirs, &takes, true);
            done += applied.done;
            kept.extend(
                applied
                    .kept
                    .into_iter()
                    .map(|(p, why)| format!("{p} ({why})")),
            );
            let meanwhile = self.tr("changed_meanwhile_short", &[]);
            kept.extend(
                applied
                    .changed
                    .into_iter()
                    .map(|p| format!("{p} ({meanwhile})")),
            );
            for step in &plan {
                let MergeStep::Merged { path, text, mode } = step else {
                    continue;
                };
                // Looked at again just before it is written: a change meanwhile is not lost.
                match checkpoint::unchanged(&sandbox, path, now.files.get(path.as_str())) {
                    Ok(true) => {}
                    Ok(false) => {
                        kept.push(format!("{path} ({meanwhile})"));
                        continue;
                    }
                    Err(e) => {
                        kept.push(format!("{path} ({e})"));
                        continue;
                    }
                }
                let put = new_core::fs::confine::Put::File {
                    bytes: text.as_bytes(),
                    mode: *mode,
                };
                match sandbox.put(path, put) {
                    Ok(()) => done += 1,
                    Err(e) => kept.push(format!("{path} ({e})")),
                }
            }
            if let Ok(Some(id)) = checkpoints.take()
                && let Err(e) = self.engine.chat.add_checkpoint(node, &id)
            {
                self.out.warn(&e.to_string());
            }
            self.out
                .say(&self.tr("merge_files_done", &[("done", &done), ("id", &now_id)]));
        }
        for k in kept {
            self.out
                .warn(&self.tr("not_restored", &[("what", &escape::escape_controls(&k))]));
        }
        // Conflicts are the user's: shown, never written.
        for step in &plan {
            if let MergeStep::Conflict { path, why } = step {
                let shown: String = why.lines().take(40).collect::<Vec<_>>().join("\n");
                self.out.warn(&format!(
                    "{}\n{}",
                    self.tr(
                        "merge_conflict_left",
                        &[("path", &escape::escape_controls(path))]
                    ),
                    escape::escape_controls_keep_lines(&shown)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_words_not_numbers_or_options() {
        for good in ["auth-fix", "v2.1", "feat/login", "試し", "a_b"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "12", "-d", "a b", "x;y", &"n".repeat(41), "a\u{1b}"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
