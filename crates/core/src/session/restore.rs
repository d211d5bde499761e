//! The working folder against the tree's states: what differs from the current node's state, and
//! `/restore`, which makes the folder match it after the user's yes (asked through
//! [`Frontend::confirm`]). The folder is snapshotted first and kept as the state of the node the
//! cursor came from, so a restore can be undone; files changed outside `new` since its last
//! snapshot need their own yes.

use std::sync::Arc;

use super::Session;
use super::event::{Confirm, Event, Frontend, Notice};
use crate::checkpoint;
use crate::checkpoint::{CheckpointError, Manifest, changes};
use std::mem;

/// Why the folder's states cannot be compared or restored.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("checkpoints are off (checkpoints.enabled: false)")]
    Off,
    #[error("no node [{0}] in this tree")]
    NoSuchNode(usize),
    #[error("node [{0}] has no state of the working folder (no checkpoint at or above it)")]
    NoState(usize),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// A path the folder would change, and how (`A`, `M`, `D`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub what: char,
    /// Changed since `new` last looked: someone else's work.
    pub outside: bool,
}

/// Why a path was not restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Changed outside `new`, and the user kept it.
    Outside,
    /// Changed since the question, and the user kept it.
    ChangedMeanwhile,
    /// Not done, in the checkpoint store's words.
    Failed(String),
}

/// What `/restore` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The folder already holds node `n`'s state.
    Matches { n: usize },
    /// The user said no.
    Cancelled,
    Done {
        n: usize,
        /// Files written or removed.
        done: usize,
        /// The snapshot of the folder as it was (kept for the node the cursor came from).
        before: String,
        kept: Vec<(String, Kept)>,
    },
}

impl Session {
    /// The state of the working folder at node `n` (its nearest checkpoint): its id and
    /// manifest.
    pub fn state_at(&self, n: usize) -> Result<(String, Manifest), StateError> {
        let checkpoints = self.checkpoints.as_ref().ok_or(StateError::Off)?;
        let c = self.chat.conversation();
        let id = c.id_by_number(n).ok_or(StateError::NoSuchNode(n))?;
        let snapshot = c.state_of(id).ok_or(StateError::NoState(n))?;
        let manifest = checkpoints.store.load(snapshot)?;
        Ok((snapshot.to_string(), manifest))
    }

    /// The folder as it is now (a fresh snapshot, not yet noted on any node).
    pub fn state_now(&self) -> Result<(String, Manifest), StateError> {
        let checkpoints = self.checkpoints.as_ref().ok_or(StateError::Off)?;
        checkpoints.peek()?.ok_or(StateError::Off)
    }

    /// Where the folder differs from the current node's state: its number and the paths, none
    /// when it matches, checkpoints are off or the node has no state.
    pub fn folder_differs(&self) -> Option<(usize, Vec<(String, char)>)> {
        let checkpoints = self.checkpoints.as_ref()?;
        let c = self.chat.conversation();
        let target_id = c.state_of(c.cursor())?;
        let n = c.number_of(c.cursor()).unwrap_or(0);
        let target = checkpoints.store.load(target_id).ok()?;
        let (_, now) = checkpoints.peek().ok()??;
        let differ = changes(&now, &target);
        (!differ.is_empty()).then_some((n, differ))
    }

    /// `/restore`: makes the working folder match the current node's state. With `ask`, the
    /// changes are put to the user first ([`Confirm::Restore`]; the offer after a move has asked
    /// already); contents the store cannot give, files changed outside `new` and files changed
    /// since the question are asked about either way.
    pub fn restore(&mut self, ask: bool, front: &mut dyn Frontend) -> Result<Restored, StateError> {
        let c = self.chat.conversation();
        let n = c.number_of(c.cursor()).unwrap_or(0);
        let (_, target) = self.state_at(n)?;
        let checkpoints = self.checkpoints.as_ref().ok_or(StateError::Off)?;
        // What the folder should hold if nobody else touched it: the latest snapshot `new` wrote
        // down (after a round of tools, or a restore), in this session or an earlier one.
        let before = c
            .latest_checkpoint
            .as_deref()
            .and_then(|id| checkpoints.store.load(id).ok())
            .or_else(|| checkpoints.last().map(|(_, m)| m));
        let (now_id, now) = self.state_now()?;
        let to_change = changes(&now, &target);
        if to_change.is_empty() {
            return Ok(Restored::Matches { n });
        }
        // What this session last saw of the folder (after answers side by side put it back, say)
        // is `new`'s own too: a path that still holds it was not changed outside.
        let seen = checkpoints.last().map(|(_, m)| m);
        let outside: Vec<String> = before
            .map(|last| {
                changes(&last, &now)
                    .into_iter()
                    .map(|(p, _)| p)
                    .filter(|p| {
                        seen.as_ref()
                            .is_none_or(|s| s.files.get(p.as_str()) != now.files.get(p.as_str()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let listed: Vec<Change> = to_change
            .iter()
            .map(|(path, what)| Change {
                outside: outside.contains(path),
                path: path.clone(),
                what: *what,
            })
            .collect();
        if ask && !front.confirm(&Confirm::Restore { n, changes: listed }) {
            return Ok(Restored::Cancelled);
        }
        // Contents that cannot be had (damaged or missing in the store) are said first; the rest
        // is restored only after a yes.
        let store = &checkpoints.store;
        let broken: Vec<String> = to_change
            .iter()
            .filter_map(|(path, _)| {
                let hash = target.files.get(path.as_str())?.hash.as_deref()?;
                store.object(hash).err().map(|e| format!("{path}: {e}"))
            })
            .collect();
        if !broken.is_empty() && !front.confirm(&Confirm::RestoreTheRest { broken }) {
            return Ok(Restored::Cancelled);
        }
        let flagged = to_change
            .iter()
            .filter(|(p, _)| outside.contains(p))
            .count();
        let overwrite_outside =
            flagged == 0 || front.confirm(&Confirm::OverwriteOutside { files: flagged });
        // The folder as it is now stays reachable: from the store, and as the state of the node
        // the cursor came from.
        if let Some(from) = self.came_from.clone()
            && let Err(e) = self.chat.add_checkpoint(&from, &now_id)
        {
            front.event(Event::Notice(Notice::StateNotNoted(Arc::new(e))));
        }
        let checkpoints = self.checkpoints.as_ref().ok_or(StateError::Off)?;
        let folder = self.tools.workdir().clone();
        let mut kept: Vec<(String, Kept)> = Vec::new();
        let paths: Vec<String> = to_change
            .iter()
            .map(|(p, _)| p.clone())
            .filter(|p| {
                let keep = outside.contains(p) && !overwrite_outside;
                if keep {
                    kept.push((p.clone(), Kept::Outside));
                }
                !keep
            })
            .collect();
        let mut applied =
            checkpoint::apply(&checkpoints.store, &folder, &now, &target, &paths, true);
        // Changed since the question (each looked at just before it would have been written):
        // asked about again, by name.
        if !applied.changed.is_empty() {
            let changed = mem::take(&mut applied.changed);
            if front.confirm(&Confirm::OverwriteChanged {
                paths: changed.clone(),
            }) {
                let again =
                    checkpoint::apply(&checkpoints.store, &folder, &now, &target, &changed, false);
                applied.done += again.done;
                applied.kept.extend(again.kept);
                kept.extend(
                    applied
                        .kept
                        .drain(..)
                        .map(|(p, why)| (p, Kept::Failed(why))),
                );
            } else {
                kept.extend(
                    applied
                        .kept
                        .drain(..)
                        .map(|(p, why)| (p, Kept::Failed(why))),
                );
                kept.extend(changed.into_iter().map(|p| (p, Kept::ChangedMeanwhile)));
            }
        }
        kept.extend(
            applied
                .kept
                .into_iter()
                .map(|(p, why)| (p, Kept::Failed(why))),
        );
        // The folder now, written down on the node it was restored to (when it holds that node's
        // state whole): what `new` left. After a partial restore the kept files are asked about
        // again next time, which errs on the side of asking.
        if kept.is_empty()
            && let Ok(Some(id)) = checkpoints.take()
        {
            let cursor = self.chat.conversation().cursor().to_string();
            if let Err(e) = self.chat.add_checkpoint(&cursor, &id) {
                front.event(Event::Notice(Notice::StateNotNoted(Arc::new(e))));
            }
        }
        Ok(Restored::Done {
            n,
            done: applied.done,
            before: now_id,
            kept,
        })
    }
}
