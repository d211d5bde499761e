//! Memory in the REPL: the review after each turn (in the background), `/memory`, `/memory forget`
//! and `/remember`.

use std::sync::atomic::Ordering;

use super::repl::App;
use new_core::memory::{Level, review};

impl App {
    /// The values that must never reach a memory file: the provider's key and the environment's
    /// key-like variables.
    fn secrets(&self) -> Vec<String> {
        let mut values = new_core::secret::secret_values(std::env::vars());
        values.extend(self.config.provider.api_key.clone());
        values
    }

    /// Starts the review of the turn that just completed, on a thread of its own: the prompt comes
    /// back at once, and what the review changes is said before a later prompt.
    pub(super) fn review_turn(&mut self) {
        let Some(store) = self.memory.clone() else {
            return;
        };
        let c = self.session.conversation();
        let Some(user) = c.nearest_typed(c.cursor()) else {
            return;
        };
        let answer = c.current().content.clone();
        let tools: Vec<String> = c
            .chain(c.cursor())
            .iter()
            .skip_while(|m| m.id != user.id)
            .flat_map(|m| m.calls().iter().map(|call| call.function.name.clone()))
            .collect();
        let user = user.content.clone();
        // A review a turn cut short gave its turns back: they go first.
        self.take_returned_reviews();
        let every = self.config.memory.review_every;
        // Small talk holds nothing to keep: not reviewed at all, not counted.
        let batch = match review::offer(&mut self.memory_batch, every, &user, &tools, &answer) {
            review::Offered::SmallTalk => return,
            review::Offered::Waiting => None,
            review::Offered::Full(batch) => Some(batch),
        };
        if !self.memory_said {
            self.memory_said = true;
            self.out.say(
                &self
                    .out
                    .dim(&self.tr("memory_reviews_run", &[("n", &every)])),
            );
        }
        let Some(batch) = batch else {
            return;
        };
        let turn = batch.join("\n\n---\n\n");
        let returned = self.memory_returned.clone();
        let turns = self.turns_started.clone();
        let at = turns.load(Ordering::SeqCst);
        let settings = self.config.provider.clone();
        let model = self
            .config
            .memory
            .review_model
            .clone()
            .unwrap_or_else(|| self.config.model.clone());
        let timeout = self.config.memory.review_timeout;
        let secrets = self.secrets();
        let notes = self.memory_notes.clone();
        let leaving = self.leaving.clone();
        let busy = self.busy.clone();
        std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let Ok(provider) = new_core::llm::Provider::new(settings) else {
                return;
            };
            // Never beside a turn: a local server's slot is the turn's.
            while busy.load(Ordering::SeqCst) {
                if leaving.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            let asked = runtime.block_on(async {
                let ask =
                    tokio::time::timeout(timeout, review::ask(&provider, &model, &store, &turn));
                // A turn that starts meanwhile has the server: the review gives way.
                let turn_started = async {
                    while turns.load(Ordering::SeqCst) == at {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                };
                tokio::select! {
                    asked = ask => Some(asked),
                    () = turn_started => None,
                }
            });
            let Some(asked) = asked else {
                // Reviewed with the next batch instead (or kept for the next session).
                returned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(batch);
                return;
            };
            // A review that failed, timed out or outlived the session changes nothing.
            let Ok(Ok(changes)) = asked else { return };
            if leaving.load(Ordering::SeqCst) {
                return;
            }
            let done = review::apply(&store, &changes, &secrets);
            if !done.is_empty() {
                notes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(done.join(", "));
            }
        });
    }

    /// The turns a review gave back (a turn started while it ran) go first in the batch.
    pub(super) fn take_returned_reviews(&mut self) {
        let returned: Vec<String> = std::mem::take(
            &mut *self
                .memory_returned
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        self.memory_batch.splice(0..0, returned);
    }

    /// Says what reviews changed since the last prompt, one dim line each.
    pub(super) fn say_memory_notes(&mut self) {
        let notes: Vec<String> =
            std::mem::take(&mut *self.memory_notes.lock().unwrap_or_else(|e| e.into_inner()));
        for note in notes {
            let line = self.tr(
                "memory_changed",
                &[("what", &new_core::escape::escape_controls(&note))],
            );
            self.out.say(&self.out.dim(&line));
        }
    }

    /// `/memory` and `/memory forget NAME`.
    pub(super) fn memory_command(&mut self, args: &str) {
        let Some(store) = self.memory.clone() else {
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
                    &[("name", &new_core::escape::escape_controls(name))],
                )),
                Err(new_core::memory::MemoryError::NotOurs(m)) => self.out.error(&self.tr(
                    "memory_not_ours",
                    &[
                        ("name", &new_core::escape::escape_controls(&m.name)),
                        (
                            "path",
                            &new_core::escape::escape_controls(&m.path.display().to_string()),
                        ),
                    ],
                )),
                Err(e) => self
                    .out
                    .error(&new_core::escape::escape_controls(&e.to_string())),
            };
        }
        if !args.is_empty() {
            return self.out.error(&self.tr("memory_usage", &[("args", &args)]));
        }
        let (memories, problems) = store.list();
        let mut text = String::new();
        for m in &memories {
            text.push_str(&new_core::escape::escape_controls(&format!(
                "{:<16} {:<8} {}",
                m.kind,
                m.place(),
                m.name
            )));
            if !m.description.is_empty() {
                text.push_str(&format!(
                    " {}",
                    self.out
                        .dim(&new_core::escape::escape_controls(&m.description))
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
                    .dim(&new_core::escape::escape_controls(&format!("! {problem}")))
            ));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// `/remember [--project] TEXT`: stores a memory directly, at user level (a preference) or,
    /// with `--project`, at project level (a fact).
    pub(super) fn remember(&mut self, args: &str) {
        let Some(store) = self.memory.clone() else {
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
        let secrets = self.secrets();
        let text = new_core::memory::redact_secrets(text, &secrets);
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
                    ("name", &new_core::escape::escape_controls(&name)),
                    ("level", &level.as_str()),
                ],
            )),
            Err(e) => self.out.error(&e.to_string()),
        }
    }
}
