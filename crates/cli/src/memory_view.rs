//! Memory in the REPL: the review after each turn (in the background), `/memory`, `/memory forget`
//! and `/remember`.

use std::fs;
use std::path::Path;

use super::repl::App;
use new_core::escape;
use new_core::fs::atomic;
use new_core::memory;
use new_core::memory::Level;
use new_core::memory::MemoryError;

impl App {
    /// Starts the review of the turn that just completed ([`Session::review_turn`]), and says
    /// that reviews run once ever: a mark in the user's data folder remembers it was said.
    pub(super) fn review_turn(&mut self) {
        let Some(run) = self.engine.review_turn() else {
            return;
        };
        let mark = dirs::data_dir().map(|d| d.join("new").join("memory-notice-said"));
        if mark.as_deref().is_some_and(Path::exists) {
            return;
        }
        self.out.say(
            &self
                .out
                .dim(&self.tr("memory_reviews_run", &[("n", &run.every)])),
        );
        if let Some(mark) = mark {
            // Not remembered (a read-only home): said again next session, which is harmless.
            let written = mark
                .parent()
                .map_or(Ok(()), atomic::create_private_dir)
                .and_then(|()| fs::write(&mark, b""));
            if let Err(e) = written {
                tracing::debug!(error = %e, path = %mark.display(), "memory notice mark");
            }
        }
    }

    /// Says what reviews changed since the last prompt, one dim line each.
    pub(super) fn say_memory_notes(&mut self) {
        for note in self.engine.take_memory_notes() {
            let line = self.tr(
                "memory_changed",
                &[("what", &escape::escape_controls(&note))],
            );
            self.out.say(&self.out.dim(&line));
        }
    }

    /// `/memory` and `/memory forget NAME`.
    pub(super) fn memory_command(&mut self, args: &str) {
        let Some(store) = self.engine.memory.clone() else {
            return self.out.error(&self.tr("memory_off", &[]));
        };
        let args = args.trim();
        if let Some(name) = args.strip_prefix("forget") {
            let name = name.trim();
            if name.is_empty() {
                return self.out.error(&self.tr("memory_usage", &[("args", &args)]));
            }
            return match store.forget(name) {
                Ok(Some(m)) => self.out.say(&self.tr(
                    "memory_forgotten",
                    &[("name", &m.name), ("level", &m.level.as_str())],
                )),
                Ok(None) => self.out.error(&self.tr(
                    "no_memory_named",
                    &[("name", &escape::escape_controls(name))],
                )),
                Err(MemoryError::NotOurs(m)) => self.out.error(&self.tr(
                    "memory_not_ours",
                    &[
                        ("name", &escape::escape_controls(&m.name)),
                        (
                            "path",
                            &escape::escape_controls(&m.path.display().to_string()),
                        ),
                    ],
                )),
                Err(e) => self.out.error(&escape::escape_controls(&e.to_string())),
            };
        }
        if !args.is_empty() {
            return self.out.error(&self.tr("memory_usage", &[("args", &args)]));
        }
        let (memories, problems) = store.list();
        let mut text = String::new();
        for m in &memories {
            text.push_str(&escape::escape_controls(&format!(
                "{:<16} {:<8} {}",
                m.kind,
                m.place(),
                m.name
            )));
            if !m.description.is_empty() {
                text.push_str(&format!(
                    " {}",
                    self.out.dim(&escape::escape_controls(&m.description))
                ));
            }
            text.push('\n');
        }
        if memories.is_empty() {
            text = self.tr("no_memories", &[]);
        }
        for problem in problems {
            text.push_str(&format!(
                "{}\n",
                self.out
                    .dim(&escape::escape_controls(&format!("! {problem}")))
            ));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// `/remember [--project] TEXT`: stores a memory directly, at user level (a preference) or,
    /// with `--project`, at project level (a fact).
    pub(super) fn remember(&mut self, args: &str) {
        let Some(store) = self.engine.memory.clone() else {
            return self.out.error(&self.tr("memory_off", &[]));
        };
        let (level, text) = match args.trim().strip_prefix("--project") {
            Some(rest) => (Level::Project, rest.trim()),
            None => (Level::User, args.trim()),
        };
        if text.is_empty() {
            return self.out.error(&self.tr("remember_usage", &[]));
        }
        // Redacted before a name, a file name or a line on screen is made of it.
        let secrets = self.engine.secrets();
        let text = memory::redact_secrets(text, &secrets);
        let text = text.as_str();
        let name: String = text
            .split_whitespace()
            .take(6)
            .collect::<Vec<_>>()
            .join(" ");
        let kind = match level {
            Level::User => "user_preference",
            Level::Project => "project_fact",
        };
        let description: String = text.chars().take(120).collect();
        match store.write(level, &name, kind, &description, text, &secrets) {
            Ok(_) => self.out.say(&self.tr(
                "remembered",
                &[
                    ("name", &escape::escape_controls(&name)),
                    ("level", &level.as_str()),
                ],
            )),
            Err(e) => self.out.error(&e.to_string()),
        }
    }
}
