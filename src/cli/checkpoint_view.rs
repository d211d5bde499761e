//! `/diff` and `/checkpoints`: the working folder's state at the nodes of the tree.

use super::output::colour_diff;
use super::repl::App;
use crate::checkpoint::{Entry, Manifest, changes};

/// A file of a state as text, for a diff: None when it is not there, a note for what is not text.
fn content(app: &App, entry: Option<&Entry>) -> Option<String> {
    let entry = entry?;
    let checkpoints = app.checkpoints.as_ref()?;
    Some(match entry.kind.as_str() {
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
        let c = self.session.conversation();
        let Some(id) = c.id_by_number(n) else {
            return Err(self.tr("no_node_n", &[("n", &n)]));
        };
        let Some(snapshot) = c.state_of(id) else {
            return Err(self.tr("no_checkpoint_at", &[("n", &n)]));
        };
        let checkpoints = self.checkpoints.as_ref().expect("checked by the caller");
        checkpoints
            .store
            .load(snapshot)
            .map(|m| (snapshot.to_string(), m))
            .map_err(|e| e.to_string())
    }

    /// `/diff [N [M]]`: the working folder against node N's state (default: the current node), or
    /// node N's state against node M's.
    pub(super) fn diff(&mut self, args: &str) {
        let Some(checkpoints) = self.checkpoints.as_ref() else {
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
        let c = self.session.conversation();
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
            None => match checkpoints.take() {
                Ok(Some(id)) => match checkpoints.store.load(&id) {
                    Ok(m) => m,
                    Err(e) => return self.out.error(&e.to_string()),
                },
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
            text.push_str(&format!("{what} {}\n", crate::tools::escape_controls(path)));
        }
        for (path, _) in &listed {
            let old = content(self, from.files.get(path));
            let new = content(self, to.files.get(path));
            let diff = match (&old, &new) {
                (old, Some(new)) => crate::tools::diff::unified(path, old.as_deref(), new),
                (Some(old), None) => similar::TextDiff::from_lines(old.as_str(), "")
                    .unified_diff()
                    .header(&format!("a/{path}"), "/dev/null")
                    .to_string(),
                (None, None) => String::new(),
            };
            text.push_str(&colour_diff(
                &self.out,
                &crate::tools::escape_controls_keep_lines(&diff),
            ));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// `/checkpoints`: the store's size.
    pub(super) fn checkpoints_command(&mut self, args: &str) {
        if !args.is_empty() {
            return self.out.error(&self.tr(
                "takes_no_argument_got",
                &[("command", &"/checkpoints"), ("args", &args)],
            ));
        }
        let Some(checkpoints) = self.checkpoints.as_ref() else {
            return self.out.error(&self.tr("checkpoints_off", &[]));
        };
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
