//! Memory's review of the turns, in the background: turns batched (`memory.review_every` in
//! one request), a review that gives way to a turn, what reviews changed kept for the front end.

use std::sync::atomic::Ordering;

use super::Session;
use crate::llm::Provider;
use crate::memory::review;
use crate::secret;
use std::env;
use std::mem;
use std::thread;
use std::time::Duration;
use tokio::runtime::Builder;
use tokio::time;

/// Reviews run from now on, `every` turns in one request: the front end says so once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewsRun {
    pub every: usize,
}

impl Session {
    /// The values that must never reach a memory file: the provider's key and the environment's
    /// key-like variables.
    pub fn secrets(&self) -> Vec<String> {
        let mut values = secret::secret_values(env::vars());
        values.extend(self.config.provider.api_key.clone());
        values
    }

    /// Starts the review of the turn that just completed, on a thread of its own: the front end
    /// goes on at once, and what the review changes waits in [`Session::take_memory_notes`].
    /// `memory.review_every` turns go in one request. Some the first time reviews run.
    pub fn review_turn(&mut self) -> Option<ReviewsRun> {
        let store = self.memory.clone()?;
        let c = self.chat.conversation();
        let user = c.nearest_typed(c.cursor())?;
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
            review::Offered::SmallTalk => return None,
            review::Offered::Waiting => None,
            review::Offered::Full(batch) => Some(batch),
        };
        let first = !mem::replace(&mut self.memory_said, true);
        let Some(batch) = batch else {
            return first.then_some(ReviewsRun { every });
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
        thread::spawn(move || {
            let Ok(runtime) = Builder::new_current_thread().enable_all().build() else {
                return;
            };
            let Ok(provider) = Provider::new(settings) else {
                return;
            };
            // Never beside a turn: a local server's slot is the turn's.
            while busy.load(Ordering::SeqCst) {
                if leaving.load(Ordering::SeqCst) {
                    return;
                }
                thread::sleep(Duration::from_millis(100));
            }
            let asked = runtime.block_on(async {
                let ask = time::timeout(timeout, review::ask(&provider, &model, &store, &turn));
                // A turn that starts meanwhile has the server: the review gives way.
                let turn_started = async {
                    while turns.load(Ordering::SeqCst) == at {
                        time::sleep(Duration::from_millis(20)).await;
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
        first.then_some(ReviewsRun { every })
    }

    /// The turns a review gave back (a turn started while it ran) go first in the batch.
    pub fn take_returned_reviews(&mut self) {
        let returned: Vec<String> = mem::take(
            &mut *self
                .memory_returned
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        self.memory_batch.splice(0..0, returned);
    }

    /// What reviews changed since the front end last asked, one line each.
    pub fn take_memory_notes(&self) -> Vec<String> {
        mem::take(&mut *self.memory_notes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
