//! Answers that run side by side in one working folder (`/retry --n K`). Rounds of tools that only
//! read run together; the first round of an answer that may change files waits until no other
//! answer is reading or writing, and from then on that answer has the folder to itself until it
//! ends, when what it changed is put back as it was when it took the folder. So every answer
//! starts from the same folder state, no answer reads what another wrote, and what someone else
//! changed meanwhile is left alone.

use tokio::sync::watch;
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::checkpoint;
use crate::checkpoint::{Checkpoints, Manifest};
use crate::fs::confine::Workdir;
use std::mem;
use std::sync::Mutex;

#[derive(Default)]
pub struct SharedFolder {
    lock: RwLock<()>,
    /// What could not be put back after an answer, to be said once they are all done.
    problems: Mutex<Vec<String>>,
    /// Whether each answer (by the order they began) has stored its first message: the
    /// others' first messages wait for those before them, so that the tree lists the answers
    /// (and `/compare` numbers them) in the order the front end named them.
    first_stored: Mutex<Vec<bool>>,
    /// Bumped as each one is.
    stored: watch::Sender<u64>,
}

/// What an answer holds of the folder.
pub enum Hold<'f> {
    /// Nothing yet, or between rounds of reading tools.
    Nothing,
    /// This answer may change files: no other answer runs tools until it ends. With the
    /// folder as it was when this answer took it (None when checkpoints are off).
    Owner(RwLockWriteGuard<'f, ()>, Option<Manifest>),
}

impl SharedFolder {
    /// An answer begins: its place among them (0 for the first to begin).
    pub fn take_place(&self) -> usize {
        let mut stored = self.first_stored.lock().unwrap_or_else(|e| e.into_inner());
        stored.push(false);
        stored.len() - 1
    }

    /// Before the answer at `place` stores its first message: waits until those before it
    /// have stored theirs (or ended), then counts its own as stored (the caller stores it
    /// before it awaits anything else).
    pub async fn first_message(&self, place: usize) {
        let mut changes = self.stored.subscribe();
        loop {
            let ready = {
                let stored = self.first_stored.lock().unwrap_or_else(|e| e.into_inner());
                stored.iter().take(place).all(|s| *s)
            };
            if ready {
                break;
            }
            // The sender lives as long as self: changed() only ends by a change.
            let _ = changes.changed().await;
        }
        self.first_stored_at(place);
    }

    /// The answer at `place` has stored its first message, or ended without one.
    pub fn first_stored_at(&self, place: usize) {
        {
            let mut stored = self.first_stored.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = stored.get_mut(place) {
                if *s {
                    return;
                }
                *s = true;
            }
        }
        self.stored.send_modify(|n| *n += 1);
    }

    /// Before a round of tools: a round that may change files makes this answer the folder's
    /// owner (waiting for the others' rounds to end); one that only reads waits while another
    /// answer owns it and holds a share for the round (the guard returned).
    pub async fn round<'f>(
        &'f self,
        hold: &mut Hold<'f>,
        changes_files: bool,
        checkpoints: Option<&Checkpoints>,
    ) -> Option<RwLockReadGuard<'f, ()>> {
        match hold {
            Hold::Owner(..) => None,
            Hold::Nothing if changes_files => {
                let guard = self.lock.write().await;
                let base = checkpoints
                    .and_then(|c| c.peek().ok().flatten())
                    .map(|(_, manifest)| manifest);
                *hold = Hold::Owner(guard, base);
                None
            }
            Hold::Nothing => Some(self.lock.read().await),
        }
    }

    /// At the end of an answer: if it owned the folder, puts back what it changed (as its last
    /// snapshot says) to what was there when it took the folder; a path changed since by
    /// someone else is left alone, and said. Then the others go on.
    pub fn release(&self, hold: Hold<'_>, checkpoints: Option<&Checkpoints>, workdir: &Workdir) {
        let Hold::Owner(guard, base) = hold else {
            return;
        };
        if let (Some(checkpoints), Some(base)) = (checkpoints, base)
            && let Some((_, last)) = checkpoints.last()
        {
            self.put_back(checkpoints, &base, &last, workdir);
        }
        drop(guard);
    }

    fn put_back(
        &self,
        checkpoints: &Checkpoints,
        base: &Manifest,
        last: &Manifest,
        workdir: &Workdir,
    ) {
        let mut problems = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        let paths: Vec<String> = checkpoint::changes(last, base)
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        if paths.is_empty() {
            return;
        }
        // Each path is put back only while it still holds what the answer left there.
        let applied = checkpoint::apply(&checkpoints.store, workdir, last, base, &paths, true);
        for (path, why) in applied.kept {
            problems.push(format!("{path}: {why}"));
        }
        for path in applied.changed {
            problems.push(format!(
                "{path}: changed by someone else since the answer wrote it; left as it is"
            ));
        }
        // What `new` saw last is the folder put back.
        if let Err(e) = checkpoints.take() {
            problems.push(e.to_string());
        }
    }

    /// What could not be put back, once.
    pub fn take_problems(&self) -> Vec<String> {
        mem::take(&mut *self.problems.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
