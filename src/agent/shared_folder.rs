//! Answers that run side by side in one working folder (`/retry --n K`). Rounds of tools that only
//! read run together; the first round of an answer that may change files waits until no other
//! answer is reading or writing, and from then on that answer has the folder to itself until it
//! ends, when the folder is put back as it was when they all began. So every answer starts from
//! the same folder state, and no answer reads what another wrote.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::checkpoint::{Checkpoints, Manifest};

pub struct SharedFolder {
    lock: RwLock<()>,
    /// The folder as the answers began; None when checkpoints are off (then nothing can be put
    /// back, and the answers that change files still run one after another).
    start: Option<Manifest>,
    /// What could not be put back after an answer, to be said once they are all done.
    problems: std::sync::Mutex<Vec<String>>,
}

/// What an answer holds of the folder.
pub enum Hold<'f> {
    /// Nothing yet, or between rounds of reading tools.
    Nothing,
    /// This answer may change files: no other answer runs tools until it ends.
    Owner(RwLockWriteGuard<'f, ()>),
}

impl SharedFolder {
    pub fn new(start: Option<Manifest>) -> Self {
        SharedFolder {
            lock: RwLock::new(()),
            start,
            problems: Default::default(),
        }
    }

    /// Before a round of tools: a round that may change files makes this answer the folder's
    /// owner (waiting for the others' rounds to end); one that only reads waits while another
    /// answer owns it and holds a share for the round (the guard returned).
    pub async fn round<'f>(
        &'f self,
        hold: &mut Hold<'f>,
        changes_files: bool,
    ) -> Option<RwLockReadGuard<'f, ()>> {
        match hold {
            Hold::Owner(_) => None,
            Hold::Nothing if changes_files => {
                *hold = Hold::Owner(self.lock.write().await);
                None
            }
            Hold::Nothing => Some(self.lock.read().await),
        }
    }

    /// At the end of an answer: if it owned the folder, puts the folder back as it was at the
    /// start (files changed meanwhile by someone else are left alone, and said), then lets the
    /// others go on.
    pub fn release(
        &self,
        hold: Hold<'_>,
        checkpoints: Option<&Checkpoints>,
        sandbox: &crate::tools::Sandbox,
    ) {
        let Hold::Owner(guard) = hold else {
            return;
        };
        if let (Some(checkpoints), Some(start)) = (checkpoints, &self.start) {
            self.put_back(checkpoints, start, sandbox);
        }
        drop(guard);
    }

    fn put_back(
        &self,
        checkpoints: &Checkpoints,
        start: &Manifest,
        sandbox: &crate::tools::Sandbox,
    ) {
        let mut problems = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        let now = match checkpoints.peek() {
            Ok(Some((_, now))) => now,
            Ok(None) => return,
            Err(e) => return problems.push(e.to_string()),
        };
        let paths: Vec<String> = crate::checkpoint::changes(&now, start)
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        if paths.is_empty() {
            return;
        }
        let applied =
            crate::checkpoint::apply(&checkpoints.store, sandbox, &now, start, &paths, true);
        for (path, why) in applied.kept {
            problems.push(format!("{path}: {why}"));
        }
        for path in applied.changed {
            problems.push(format!(
                "{path}: changed while it was being put back; left as it is"
            ));
        }
        // What `new` saw last is the folder put back.
        if let Err(e) = checkpoints.take() {
            problems.push(e.to_string());
        }
    }

    /// What could not be put back, once.
    pub fn take_problems(&self) -> Vec<String> {
        std::mem::take(&mut *self.problems.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
