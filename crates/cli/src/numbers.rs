//! Node numbers as the user saw them. `/tree` numbers nodes depth-first, so a node added on an
//! earlier branch renumbers every node after it: a number read from the scrollback may name
//! another node now. The REPL remembers which node each number it showed stood for; `/N` typed
//! after that node moved says what N is now and where the node shown went, instead of going
//! somewhere else without a word. Every message naming a node also names its id (`[4 · 3fa9c1d2]`),
//! and `/ID` (or a unique prefix of four characters or more) goes to that node whatever its
//! number.

use std::cell::RefCell;
use std::collections::HashMap;

use super::repl::App;
use super::tree_view::describe;
use new_core::conversation::Conversation;
use new_core::vocab::Id;

/// The numbers shown in one conversation, each with the id of the node it stood for then.
#[derive(Debug, Default)]
pub(super) struct Shown {
    inner: RefCell<ShownInner>,
}

#[derive(Debug, Default)]
struct ShownInner {
    /// The conversation the numbers belong to: another one's numbers are forgotten.
    conversation: String,
    /// The ids in the order the last `/tree` numbered them (ids are kept inline: a big tree's
    /// copy is one allocation).
    tree: Vec<Id>,
    /// Numbers shown one at a time since, which win over the tree's.
    numbers: HashMap<usize, String>,
}

/// What `/N` means now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Meaning {
    /// The node numbered N, which is the node shown as N (or N was never shown).
    Node(String),
    /// N was shown for `seen`, which is numbered `seen_now` now; N is `now`.
    Moved {
        seen: String,
        seen_now: usize,
        now: String,
    },
    /// No node has that number.
    None,
}

/// How many characters of an id a message shows: `new`'s own ids are 8 long; an imported
/// file's longer ids are shown by their start (which `/ID` takes).
const SHOWN_ID: usize = 8;

/// An id as messages show it.
pub(super) fn short_id(id: &str) -> &str {
    match id.char_indices().nth(SHOWN_ID) {
        Some((at, _)) => &id[..at],
        None => id,
    }
}

impl Shown {
    /// Remembers that `n` was shown for the node `id` of `conversation`.
    pub(super) fn record(&self, conversation: &str, n: usize, id: &str) {
        let mut inner = self.inner.borrow_mut();
        if inner.conversation != conversation {
            inner.conversation = conversation.to_string();
            inner.tree.clear();
            inner.numbers.clear();
        }
        inner.numbers.insert(n, id.to_string());
    }

    /// Remembers every number of the tree as it is now (after `/tree`).
    pub(super) fn record_all(&self, conversation_id: &str, c: &Conversation) {
        let mut inner = self.inner.borrow_mut();
        inner.conversation = conversation_id.to_string();
        inner.numbers.clear();
        inner.tree = c
            .preorder()
            .into_iter()
            .map(|(_, m)| m.id.clone())
            .collect();
    }

    /// What `/N` means in `conversation` now.
    pub(super) fn meaning(&self, conversation_id: &str, c: &Conversation, n: usize) -> Meaning {
        let Some(now) = c.id_by_number(n) else {
            return Meaning::None;
        };
        let inner = self.inner.borrow();
        let seen = (inner.conversation == conversation_id)
            .then(|| {
                inner
                    .numbers
                    .get(&n)
                    .map(String::as_str)
                    .or_else(|| inner.tree.get(n).map(Id::as_str))
            })
            .flatten();
        match seen {
            Some(seen) if seen != now => match c.number_of(seen) {
                Some(seen_now) => Meaning::Moved {
                    seen: seen.to_string(),
                    seen_now,
                    now: now.to_string(),
                },
                None => Meaning::Node(now.to_string()),
            },
            _ => Meaning::Node(now.to_string()),
        }
    }
}

/// The node whose id is `word` or starts with it (four characters at least), when exactly one
/// does.
pub(super) fn node_by_id(c: &Conversation, word: &str) -> Option<String> {
    if word.chars().count() < 4
        || !word
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
    {
        return None;
    }
    if c.get(word).is_some() {
        return Some(word.to_string());
    }
    let mut found = c
        .preorder()
        .into_iter()
        .skip(1)
        .map(|(_, m)| m.id.as_str())
        .filter(|id| id.starts_with(word));
    let first = found.next()?;
    found.next().is_none().then(|| first.to_string())
}

impl App {
    /// A node as a message names it: its number and its id (`4 · 3fa9c1d2`, inside the
    /// template's brackets), remembered as shown.
    pub(super) fn node_label(&self, id: &str) -> String {
        let c = self.engine.chat.conversation();
        let n = c.number_of(id).unwrap_or(0);
        self.shown.record(self.engine.chat.id(), n, id);
        format!("{n} · {}", short_id(id))
    }

    /// `/N`: to node N, unless the node shown as N has moved since (then said, and nothing
    /// moves; `/N` again goes to N as it is now).
    pub(super) fn goto(&mut self, n: usize, typed: &str) {
        let c = self.engine.chat.conversation();
        match self.shown.meaning(self.engine.chat.id(), c, n) {
            Meaning::Node(id) => self.move_to(&id),
            Meaning::Moved {
                seen,
                seen_now,
                now,
            } => {
                let what_now = describe(c.get(&now).expect("from the tree"), self.out.lang);
                let what_seen = describe(c.get(&seen).expect("from the tree"), self.out.lang);
                let text = self.tr(
                    "number_moved",
                    &[
                        ("n", &n),
                        ("seen", &what_seen),
                        ("seen_now", &seen_now),
                        ("seen_id", &short_id(&seen)),
                        ("now", &what_now),
                        ("now_id", &short_id(&now)),
                    ],
                );
                self.out.warn(&text);
                let conversation = self.engine.chat.id().to_string();
                self.shown.record(&conversation, n, &now);
                self.shown.record(&conversation, seen_now, &seen);
            }
            Meaning::None => match node_by_id(c, typed) {
                Some(id) => self.move_to(&id),
                None => {
                    let last = c.len() - 1;
                    self.refuse_text("no_node_this_tree_has_nodes", &[("n", &n), ("last", &last)]);
                }
            },
        }
    }

    /// `/ID`: to the node with that id (or the one whose id starts so). False when no node
    /// has it.
    pub(super) fn goto_id(&mut self, word: &str) -> bool {
        match node_by_id(self.engine.chat.conversation(), word) {
            Some(id) => {
                self.move_to(&id);
                true
            }
            None => false,
        }
    }
}

/// What a command's node argument (`N`, `[N]`, an id) names.
pub(super) enum Typed {
    /// That node.
    Node(String),
    /// A number shown for a node that has moved since: said, nothing is done.
    Moved,
    /// Neither a number nor an id of this tree (perhaps a branch's name): the command decides.
    Other,
}

impl App {
    /// A node typed as a command's argument: a number is checked against what it was shown
    /// for, as `/N` is; an id (or its start) names its node.
    pub(super) fn node_typed(&mut self, word: &str) -> Typed {
        let c = self.engine.chat.conversation();
        let bare = word
            .strip_prefix('[')
            .and_then(|w| w.strip_suffix(']'))
            .unwrap_or(word);
        if !bare.is_empty()
            && bare.chars().all(|ch| ch.is_ascii_digit())
            && let Ok(n) = bare.parse::<usize>()
        {
            match self.shown.meaning(self.engine.chat.id(), c, n) {
                Meaning::Node(id) => return Typed::Node(id),
                Meaning::Moved { .. } => {
                    // Said as `/N` says it; the command is not run.
                    self.goto(n, bare);
                    return Typed::Moved;
                }
                Meaning::None => {}
            }
        }
        if c.branch_tip(bare).is_some() {
            return Typed::Other;
        }
        match node_by_id(c, bare) {
            Some(id) => Typed::Node(id),
            None => Typed::Other,
        }
    }
}
