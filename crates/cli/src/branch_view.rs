//! What only a tree can do: named branches (`/branch`), side questions (`/btw`), `/undo` that
//! keeps what it undoes, and `/merge`, which brings a branch's conclusion back into another.

use std::sync::atomic::Ordering;

use super::repl::App;
use super::tree_view::{describe, preview};
use new_core::conversation::Message;
use new_core::vocab::Role;

/// What a merge node's content starts with: what it is, for the model reading it.
const MERGE_HEADING: &str = "[What another branch of this conversation found, brought back with /merge. That branch left this one here; its messages are not sent, only this account of them.]";

/// What the summary of a merged branch should say.
const MERGE_FOCUS: &str = "this is a branch that explored an alternative and is now brought back into the branch it left: say what it tried, what worked, what failed and why, and which files it changed (with paths), so that work can go on from its conclusion";

use new_core::conversation::valid_branch_name as valid_name;

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

impl App {
    /// `/branch NAME` names the branch at the cursor (its tip); `/branch` lists the names;
    /// `/branch -d NAME` removes one (the branch stays).
    pub(super) fn branch(&mut self, args: &str) {
        let mut words = args.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (None, _, _) => self.list_branch_names(),
            (Some("-d" | "--delete"), Some(name), None) => {
                if !self.session.conversation().branches.contains_key(name) {
                    return self.out.error(&self.tr(
                        "no_branch_named",
                        &[("name", &new_core::tools::escape_controls(name))],
                    ));
                }
                match self.session.unname_branch(name) {
                    Ok(()) => self.out.say(&self.tr("branch_unnamed", &[("name", &name)])),
                    Err(e) => self.out.error(&super::text::error(self.out.lang, &e)),
                }
            }
            (Some(name), None, _) if valid_name(name) => {
                if !self.session.is_persisted() {
                    return self.out.error(&self.tr("branch_nothing_yet", &[]));
                }
                let c = self.session.conversation();
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
                let n = c.number_of(&tip).unwrap_or(0);
                match self.session.name_branch(name, &tip) {
                    Ok(()) => {
                        let args: &[(&str, &dyn std::fmt::Display)] = &[("name", &name), ("n", &n)];
                        self.out.say(&if moved {
                            self.tr("branch_moved", args)
                        } else {
                            self.tr("branch_named", args)
                        });
                    }
                    Err(e) => self.out.error(&super::text::error(self.out.lang, &e)),
                }
            }
            _ => self.out.error(&self.tr(
                "branch_usage",
                &[("args", &new_core::tools::escape_controls(args))],
            )),
        }
    }

    fn list_branch_names(&self) {
        let c = self.session.conversation();
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
            let n = c.number_of(&tip.id).unwrap_or(0);
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

    /// The tip of the branch `name`, when the current conversation has one by that name.
    pub(super) fn named_tip(&self, name: &str) -> Option<String> {
        self.session
            .conversation()
            .branch_tip(name)
            .map(|m| m.id.to_string())
    }

    /// `/btw QUESTION`: asked in a side branch off the cursor (with the branch as context and
    /// only the tools that read), answered, and the cursor left where it was.
    pub(super) fn btw(&mut self, args: &str) {
        let question = args.trim();
        if question.is_empty() {
            return self.out.error(&self.tr("btw_usage", &[]));
        }
        // The user's `pre_message` hooks see a side question too, and may block it.
        let hooked = self.fire_hooks(new_core::hooks::Input {
            prompt: Some(question.to_string()),
            ..new_core::hooks::Input::new("pre_message")
        });
        let Some(hooked) = hooked else { return };
        if let Some(reason) = hooked.block {
            return self.out.error(&self.tr(
                "blocked_by_hook",
                &[("reason", &new_core::tools::escape_controls(&reason))],
            ));
        }
        let question = if hooked.context.is_empty() {
            question.to_string()
        } else {
            format!("{question}\n\n{}", hooked.context.join("\n\n"))
        };
        let back = self.session.conversation().cursor().to_string();
        let mut message = Message::new(Role::User, question);
        message.side = true;
        let asked = match self.session.add(message) {
            Ok(id) => id,
            Err(e) => return self.out.error(&super::text::error(self.out.lang, &e)),
        };
        // Only what reads: a side question changes nothing in the folder.
        let reads: Vec<String> = self
            .tools
            .names()
            .into_iter()
            .filter(|n| {
                self.tools
                    .get(n)
                    .is_some_and(|t| t.kind() == new_core::tools::ToolKind::Read)
            })
            .collect();
        let narrowed = match &self.skill_tools {
            Some(skill) => reads.into_iter().filter(|t| skill.contains(t)).collect(),
            None => reads,
        };
        let saved = self.skill_tools.replace(narrowed);
        self.answer();
        self.skill_tools = saved;
        self.session
            .move_cursor(&back)
            .expect("the cursor was in the tree");
        let c = self.session.conversation();
        let (side, here) = (
            c.number_of(&asked).unwrap_or(0),
            c.number_of(&back).unwrap_or(0),
        );
        self.out.say(
            &self
                .out
                .dim(&self.tr("btw_done", &[("side", &side), ("here", &here)])),
        );
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
        let c = self.session.conversation();
        let Some(user) = c.nearest_typed(c.cursor()) else {
            return self.out.error(&self.tr("nothing_to_undo", &[]));
        };
        let (user, parent) = (
            user.id.clone(),
            user.parent_id.clone().expect("a user message has a parent"),
        );
        let n = c.number_of(&user).unwrap_or(0);
        if let Err(e) = self.session.mark_undone(&user) {
            return self.out.error(&super::text::error(self.out.lang, &e));
        }
        self.out.say(&self.tr("undone", &[("n", &n)]));
        self.move_and_say(&parent);
        // The folder as it was there (when a snapshot knows it): listed and asked, as `/restore`
        // does.
        if self.checkpoints.is_some() && self.session.conversation().state_of(&parent).is_some() {
            self.restore("");
        }
    }

    /// `/merge N` or `/merge NAME`: the model's account of that branch, from where it left the
    /// current one to its tip, appended here as a merge node that the next request carries. The
    /// folder is not changed.
    pub(super) fn merge(&mut self, args: &str) {
        let mut words: Vec<&str> = args.split_whitespace().collect();
        let files = words.contains(&"--files");
        words.retain(|w| *w != "--files");
        let [target] = words[..] else {
            return self.out.error(&self.tr("merge_usage", &[]));
        };
        if files && self.checkpoints.is_none() {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        }
        self.learn_server_window();
        let c = self.session.conversation();
        let node = match self.named_tip(target) {
            Some(tip) => tip,
            None => match target
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .unwrap_or(target)
                .parse::<usize>()
                .ok()
                .and_then(|n| c.id_by_number(n))
            {
                Some(id) => c.tip(id).expect("in the tree").id.to_string(),
                None => {
                    return self.out.error(&self.tr(
                        "merge_usage_no_such",
                        &[("args", &new_core::tools::escape_controls(target))],
                    ));
                }
            },
        };
        let here: std::collections::HashSet<&str> = c
            .chain(c.cursor())
            .into_iter()
            .map(|m| m.id.as_str())
            .collect();
        let branch = c.chain(&node);
        let Some(fork_at) = branch.iter().rposition(|m| here.contains(m.id.as_str())) else {
            return self.out.error(&self.tr("merge_usage", &[]));
        };
        let tip_n = c.number_of(&node).unwrap_or(0);
        if fork_at + 1 == branch.len() {
            return self
                .out
                .error(&self.tr("merge_same_branch", &[("n", &tip_n)]));
        }
        let fork = branch[fork_at].id.to_string();
        let fork_n = c.number_of(&fork).unwrap_or(0);
        let messages: Vec<&Message> = branch[fork_at + 1..]
            .iter()
            .copied()
            .filter(|m| !m.is_summary())
            .collect();
        let plan = new_core::context::compact::Plan {
            previous: None,
            summarized: messages,
            kept: Vec::new(),
        };
        self.out.say(&self.out.dim(&self.tr(
            "merge_asking",
            &[("n", &tip_n), ("count", &plan.summarized.len())],
        )));
        self.busy.store(true, Ordering::SeqCst);
        self.interrupts.borrow_and_update();
        let summary = {
            let interrupts = &mut self.interrupts;
            let mut stop = Box::pin(async move {
                let _ = interrupts.changed().await;
            });
            self.runtime.block_on(new_core::context::compact::summarize(
                &self.provider,
                &self.config.model,
                &self.context,
                &plan,
                Some(MERGE_FOCUS),
                &mut stop,
            ))
        };
        self.busy.store(false, Ordering::SeqCst);
        let summary = match summary {
            Ok(text) if !text.trim().is_empty() => text,
            Ok(_) => return self.out.error(&self.tr("merge_empty", &[])),
            Err(e) => {
                return self.out.error(&self.tr(
                    "merge_failed",
                    &[("why", &new_core::tools::escape_controls(&e.to_string()))],
                ));
            }
        };
        let c = self.session.conversation();
        let names = c.names_of(&node).join(", ");
        let from = if names.is_empty() {
            format!("[{tip_n}]")
        } else {
            format!("[{tip_n}] ({names})")
        };
        let mut message = Message::new(
            Role::User,
            format!(
                "{MERGE_HEADING}\nBranch {from}, which left at [{fork_n}]:\n\n{}",
                summary.trim()
            ),
        );
        message.extra.rare.merged_from =
            Some(Box::new(new_core::conversation::message::MergedFrom {
                tip: node.clone(),
                fork: fork.clone(),
            }));
        let before = self.session.conversation().cursor().to_string();
        match self.session.add(message) {
            Ok(id) => {
                let n = self.session.conversation().number_of(&id).unwrap_or(0);
                self.out.say(&self.tr(
                    "merged",
                    &[
                        ("from", &from),
                        ("n", &n),
                        ("preview", &preview(&summary, 120)),
                    ],
                ));
                if files {
                    self.merge_files(&fork, &node, &before, &id);
                }
            }
            Err(e) => self.out.error(&super::text::error(self.out.lang, &e)),
        }
    }

    /// `/merge N --files`: the branch's file changes since `fork` brought into the folder, after
    /// consent: taken where the folder is as it was at the fork, merged three ways where both
    /// changed a text file in different places; conflicts are shown and left as they are. The
    /// folder before is kept as `before`'s state, the folder after as the merge node's.
    fn merge_files(&mut self, fork: &str, tip: &str, before: &str, node: &str) {
        use new_core::checkpoint::MergeStep;
        let checkpoints = self.checkpoints.as_ref().expect("checked by the caller");
        let c = self.session.conversation();
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
        let plan = new_core::checkpoint::merge_plan(&checkpoints.store, &base, &now, &theirs);
        if plan.is_empty() {
            return self.out.say(&self.tr("merge_files_none", &[]));
        }
        let mut list = String::new();
        for step in &plan {
            let (what, path) = match step {
                // A take that removes the file says so.
                MergeStep::Take(p) if !theirs.files.contains_key(p) => {
                    (self.tr("merge_remove", &[]), p)
                }
                MergeStep::Take(p) => (self.tr("merge_take", &[]), p),
                MergeStep::Merged { path, .. } => (self.tr("merge_merged", &[]), path),
                MergeStep::Conflict { path, .. } => (self.tr("merge_conflict", &[]), path),
            };
            list.push_str(&format!(
                "  {what} {}\n",
                new_core::tools::escape_controls(path)
            ));
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
        let yes = writes > 0
            && self
                .ask(&self.tr("merge_files_ask", &[("n", &writes)]), "", false)
                .is_some_and(|a| matches!(a.trim().to_lowercase().as_str(), "y" | "yes"));
        let mut kept: Vec<String> = Vec::new();
        let mut done = 0usize;
        if yes {
            // The folder as it was stays reachable: it is the state of the node merged into.
            if let Err(e) = self.session.add_checkpoint(before, &now_id) {
                self.out.warn(&e.to_string());
            }
            let checkpoints = self.checkpoints.as_ref().expect("checked by the caller");
            let sandbox = self.tools.sandbox().clone();
            let takes: Vec<String> = plan
                .iter()
                .filter_map(|s| match s {
                    MergeStep::Take(p) => Some(p.clone()),
                    _ => None,
                })
                .collect();
            let applied = new_core::checkpoint::apply(
                &checkpoints.store,
                &sandbox,
                &now,
                &theirs,
                &takes,
                true,
            );
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
                match new_core::checkpoint::unchanged(&sandbox, path, now.files.get(path)) {
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
                let put = new_core::tools::sandbox::Put::File {
                    bytes: text.as_bytes(),
                    mode: *mode,
                };
                match sandbox.put(path, put) {
                    Ok(()) => done += 1,
                    Err(e) => kept.push(format!("{path} ({e})")),
                }
            }
            if let Ok(Some(id)) = checkpoints.take()
                && let Err(e) = self.session.add_checkpoint(node, &id)
            {
                self.out.warn(&e.to_string());
            }
            self.out
                .say(&self.tr("merge_files_done", &[("done", &done), ("id", &now_id)]));
        }
        for k in kept {
            self.out.warn(&self.tr(
                "not_restored",
                &[("what", &new_core::tools::escape_controls(&k))],
            ));
        }
        // Conflicts are the user's: shown, never written.
        for step in &plan {
            if let MergeStep::Conflict { path, why } = step {
                let shown: String = why.lines().take(40).collect::<Vec<_>>().join("\n");
                self.out.warn(&format!(
                    "{}\n{}",
                    self.tr(
                        "merge_conflict_left",
                        &[("path", &new_core::tools::escape_controls(path))]
                    ),
                    new_core::tools::escape_controls_keep_lines(&shown)
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
