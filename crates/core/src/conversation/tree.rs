//! The conversation tree: messages linked both ways, a cursor, and the operations the REPL and the
//! agent need. It does no I/O; [`super::store`] persists it.

use std::borrow::Cow;
use std::collections::HashMap;

use hashbrown::hash_table;

use serde_json::{Map, Value};

use super::message::Message;
use crate::vocab::{ChatMessage, Role};
use crate::vocab::{Id, new_id};
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::hash::Hasher;
use std::iter;
use std::sync::OnceLock;

/// Text of the synthetic result sent for a tool call that has no stored result on the chosen branch.
pub const NOT_RUN_RESULT: &str =
    "This tool call was not run: the user branched the conversation away from it.";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TreeError {
    #[error("no message with id {0} in this conversation")]
    UnknownMessage(String),
    #[error("message {0} is already in this conversation")]
    DuplicateMessage(String),
}

/// FNV-1a: message ids are short random strings made here, so a fast hash is safe, and loading a
/// 100,000-message conversation hashes every id several times.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Where a loaded message went ([`Conversation::attach_loaded`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Attached {
    UnderParent,
    /// Its parent is not in the file: it hangs from the root.
    UnderRoot,
    /// Not added: its id (given back) is taken.
    Repeated(String),
}

/// What a request for one node sends from the tree; see [`Conversation::sent`].
pub struct Sent<'a> {
    /// The summary node in force, sent first.
    pub summary: Option<&'a Message>,
    /// The messages sent after it, oldest first.
    pub messages: Vec<&'a Message>,
}

/// A message id's hash, for the index of positions.
fn id_hash(id: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = IdHasher::default();
    h.write(id);
    h.finish()
}

/// "No such node" in [`Links`].
const NONE: u32 = u32::MAX;

/// How a node links to the others, by positions: its parent, its first and last child, and its
/// next sibling (children in creation order). Sixteen bytes a node, and no allocation.
#[derive(Debug, Clone, Copy)]
struct Links {
    parent: u32,
    first: u32,
    last: u32,
    next: u32,
}

impl Links {
    const LONE: Links = Links {
        parent: NONE,
        first: NONE,
        last: NONE,
        next: NONE,
    };
}

/// `/tree`'s numbers (depth-first pre-order), worked out when first asked for and forgotten
/// when the tree grows.
#[derive(Debug, Clone, Default)]
struct Numbering {
    /// The positions in pre-order, with their depths.
    order: Vec<(u32, u32)>,
    /// Each position's number.
    number: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: String,
    /// Every message in creation order, the root first. A message's place here is its *position*:
    /// walking a big tree by positions touches memory in order instead of hashing every id.
    nodes: Vec<Message>,
    /// How each node links to the others, by positions.
    links: Vec<Links>,
    /// The position of each message, found by its id's hash (the id is not kept twice).
    index: hashbrown::HashTable<u32>,
    numbering: OnceLock<Numbering>,
    /// How many nodes are summaries, and how many are side questions or merges: counted as they
    /// are added (a node's kind never changes), so that `/tree` knows without reading every node
    /// whether any row gets a label.
    marks: Marks,
    pub root_id: String,
    cursor: String,
    pub metadata: Map<String, Value>,
    /// Set by a title record; when absent, the first user message serves as the title.
    pub title: Option<String>,
    /// Snapshots of the working folder attached to nodes (checkpoint records), by node id.
    pub checkpoints: HashMap<String, String>,
    /// The snapshot of the latest checkpoint line: the folder as `new` last left or saw it.
    pub latest_checkpoint: Option<String>,
    /// Branch names (branch records): name → the node it was given at (the branch's tip then).
    /// The branch it stands for ends at [`Conversation::tip`] of that node.
    pub branches: BTreeMap<String, String>,
    /// User messages undone with `/undo` (undone records): kept, folded in `/tree`.
    pub undone: HashSet<String>,
}

/// The root's position.
const ROOT: usize = 0;

/// Counts of the nodes `/tree` labels (see [`Conversation::has_summaries`] and
/// [`Conversation::has_side_or_merges`]).
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    summaries: usize,
    side_or_merges: usize,
}

impl Marks {
    fn count(&mut self, m: &Message) {
        self.summaries += usize::from(m.is_summary());
        self.side_or_merges += usize::from(m.side || m.extra.rare.merged_from.is_some());
    }
}

impl Conversation {
    /// A new conversation whose root is the given system prompt.
    pub fn new(id: impl Into<String>, system_prompt: impl Into<String>) -> Self {
        let root = Message::new(Role::System, system_prompt);
        Self::with_root(id, root)
    }

    /// A conversation around an existing root message (used when loading).
    pub fn with_root(id: impl Into<String>, root: Message) -> Self {
        Self::with_root_and_capacity(id, root, (1, 1))
    }

    /// The same, with room for as many messages as `capacity` says: (at most, likely). The
    /// vectors get the first, so that loading a big file never reallocates them (room never used
    /// is never touched, so it costs no memory); the index of ids the second, since all of a
    /// hash table's room is touched (it grows, and rehashes, if the file holds more).
    pub fn with_root_and_capacity(
        id: impl Into<String>,
        root: Message,
        capacity: (usize, usize),
    ) -> Self {
        let (capacity, likely) = capacity;
        let root_id = root.id.to_string();
        let mut index = hashbrown::HashTable::with_capacity(likely);
        index.insert_unique(id_hash(root_id.as_bytes()), ROOT as u32, |_| 0);
        let mut marks = Marks::default();
        marks.count(&root);
        let mut nodes = Vec::with_capacity(capacity);
        nodes.push(root);
        let mut links = Vec::with_capacity(capacity);
        links.push(Links::LONE);
        Conversation {
            id: id.into(),
            nodes,
            links,
            index,
            numbering: Default::default(),
            marks,
            cursor: root_id.clone(),
            root_id,
            metadata: Map::new(),
            title: None,
            checkpoints: HashMap::new(),
            latest_checkpoint: None,
            branches: Default::default(),
            undone: Default::default(),
        }
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.index
            .find(id_hash(id.as_bytes()), |&p| self.nodes[p as usize].id == id)
            .map(|&p| p as usize)
    }

    /// [`Conversation::position`] of an id as kept (compared without reading it as text).
    fn position_of(&self, id: &Id) -> Option<usize> {
        self.index
            .find(id_hash(id.as_bytes()), |&p| {
                self.nodes[p as usize].id == *id
            })
            .map(|&p| p as usize)
    }

    /// The positions of the children of the node at `position`, in creation order.
    fn kids(&self, position: usize) -> impl Iterator<Item = usize> + '_ {
        let mut next = self.links[position].first;
        iter::from_fn(move || {
            let p = (next != NONE).then_some(next as usize)?;
            next = self.links[p].next;
            Some(p)
        })
    }

    fn parent_position(&self, position: usize) -> Option<usize> {
        let parent = self.links[position].parent;
        (parent != NONE).then_some(parent as usize)
    }

    fn numbering(&self) -> &Numbering {
        self.numbering.get_or_init(|| {
            let order = self.preorder_positions(ROOT);
            let mut number = vec![0; self.nodes.len()];
            for (n, &(p, _)) in order.iter().enumerate() {
                number[p as usize] = n as u32;
            }
            Numbering { order, number }
        })
    }

    pub fn root(&self) -> &Message {
        &self.nodes[ROOT]
    }

    /// Replaces the system prompt (the root's text); the root is never stored.
    pub fn set_system_prompt(&mut self, prompt: impl Into<String>) {
        self.nodes[ROOT].content = prompt.into();
    }

    pub fn cursor(&self) -> &str {
        &self.cursor
    }

    pub fn current(&self) -> &Message {
        self.get(&self.cursor)
            .expect("the cursor is always in the tree")
    }

    pub fn get(&self, id: &str) -> Option<&Message> {
        self.position(id).map(|p| &self.nodes[p])
    }

    /// The message at a position (see [`Conversation::child_positions`]).
    pub fn at(&self, position: usize) -> &Message {
        &self.nodes[position]
    }

    /// The positions of a position's children, in creation order; the root is at position 0.
    pub fn child_positions(&self, position: usize) -> impl Iterator<Item = usize> + '_ {
        self.kids(position)
    }

    /// How many children the node at `position` has: 0, 1 or more (2).
    pub fn fan_out(&self, position: usize) -> usize {
        let links = self.links[position];
        match (links.first, links.last) {
            (NONE, _) => 0,
            (first, last) if first == last => 1,
            _ => 2,
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.position(id).is_some()
    }

    /// Number of messages, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the conversation holds nothing but its root.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Adds a new message under the cursor and moves the cursor to it. Returns its id.
    ///
    /// Ids are only 32 bits (the file format's 8 hex characters), so a long conversation can draw
    /// one twice: a new message whose id is taken gets a fresh one.
    pub fn add(&mut self, mut message: Message) -> Result<String, TreeError> {
        while self.contains(&message.id) {
            message.id = new_id().into();
        }
        let parent = self.cursor.clone();
        self.add_under(&parent, message)
    }

    /// Adds a message under `parent` and moves the cursor to it. Returns its id.
    pub fn add_under(&mut self, parent: &str, mut message: Message) -> Result<String, TreeError> {
        let Some(at) = self.position(parent) else {
            return Err(TreeError::UnknownMessage(parent.to_string()));
        };
        if self.contains(&message.id) {
            return Err(TreeError::DuplicateMessage(message.id.into()));
        }
        let id = message.id.to_string();
        message.parent_id = Some(parent.into());
        self.insert(at, message);
        self.cursor = id.clone();
        Ok(id)
    }

    /// Links a new message under the node at `parent`.
    fn insert(&mut self, parent: usize, message: Message) {
        let hash = id_hash(message.id.as_bytes());
        self.insert_hashed(parent, message, hash);
    }

    fn insert_hashed(&mut self, parent: usize, message: Message, hash: u64) {
        let position = self.nodes.len() as u32;
        let nodes = &self.nodes;
        self.index.insert_unique(hash, position, |&p| {
            id_hash(nodes[p as usize].id.as_bytes())
        });
        self.link(parent, message);
    }

    /// Puts a message, already in the index at the next position, last under `parent`.
    fn link(&mut self, parent: usize, message: Message) {
        let position = self.nodes.len() as u32;
        self.marks.count(&message);
        self.nodes.push(message);
        self.links.push(Links {
            parent: parent as u32,
            ..Links::LONE
        });
        match self.links[parent].last {
            NONE => self.links[parent].first = position,
            last => self.links[last as usize].next = position,
        }
        self.links[parent].last = position;
        self.numbering = Default::default();
    }

    /// Adds a stored message while loading: under its `parent_id`, or under the root when that
    /// parent is missing. The cursor is not moved; the caller sets it once. A message whose id
    /// is taken (a repeated line) is left out.
    pub(crate) fn attach_loaded(&mut self, mut message: Message) -> Attached {
        // Most messages answer the one written just before them: that parent is found without
        // a look-up.
        let newest = self.nodes.len() - 1;
        let parent = match &message.parent_id {
            Some(p) if self.nodes[newest].id == *p => Some(newest),
            Some(p) => self.position_of(p),
            None => None,
        };
        // One probe of the index both tells a repeated id and takes the new one.
        let hash = id_hash(message.id.as_bytes());
        let position = self.nodes.len() as u32;
        let nodes = &self.nodes;
        let entry = self.index.entry(
            hash,
            |&p| nodes[p as usize].id == message.id,
            |&p| id_hash(nodes[p as usize].id.as_bytes()),
        );
        match entry {
            hash_table::Entry::Occupied(_) => return Attached::Repeated(message.id.into()),
            hash_table::Entry::Vacant(room) => {
                room.insert(position);
            }
        }
        if parent.is_none() {
            message.parent_id = Some(self.root_id.as_str().into());
        }
        self.link(parent.unwrap_or(ROOT), message);
        if parent.is_some() {
            Attached::UnderParent
        } else {
            Attached::UnderRoot
        }
    }

    /// The id of the newest message (the last one added or loaded).
    pub(crate) fn newest_id(&self) -> &str {
        &self.nodes[self.nodes.len() - 1].id
    }

    /// Moves the cursor; the next message forks from there.
    pub fn move_cursor(&mut self, id: &str) -> Result<(), TreeError> {
        if !self.contains(id) {
            return Err(TreeError::UnknownMessage(id.to_string()));
        }
        self.cursor = id.to_string();
        Ok(())
    }

    pub fn children(&self, id: &str) -> Vec<&Message> {
        self.position(id)
            .map(|p| self.kids(p).map(|k| &self.nodes[k]).collect())
            .unwrap_or_default()
    }

    pub fn is_leaf(&self, id: &str) -> bool {
        self.position(id)
            .is_some_and(|p| self.links[p].first == NONE)
    }

    /// The messages from the root down to `id`, both included.
    pub fn chain(&self, id: &str) -> Vec<&Message> {
        let mut chain: Vec<&Message> = self.ancestors(id).collect();
        chain.reverse();
        chain
    }

    /// `id` and the messages above it, nearest first, up to the root.
    pub fn ancestors<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a Message> + 'a {
        let mut next = self.position(id);
        // Parent links cannot loop in a tree built by `insert`; the bound is a second guard.
        let mut left = self.nodes.len();
        iter::from_fn(move || {
            let p = next.filter(|_| left > 0)?;
            left -= 1;
            next = self.parent_position(p);
            Some(&self.nodes[p])
        })
    }

    /// Every message under `id` (itself included), depth first in creation order.
    pub fn subtree(&self, id: &str) -> Vec<&Message> {
        self.preorder_from(id).into_iter().map(|(_, m)| m).collect()
    }

    /// The messages without children, in depth-first order.
    pub fn leaves(&self) -> Vec<&Message> {
        self.numbering()
            .order
            .iter()
            .filter(|&&(p, _)| self.links[p as usize].first == NONE)
            .map(|&(p, _)| &self.nodes[p as usize])
            .collect()
    }

    /// Every message in depth-first pre-order with its depth: the order that gives `/tree` numbers.
    pub fn preorder(&self) -> Vec<(usize, &Message)> {
        self.numbering()
            .order
            .iter()
            .map(|&(p, depth)| (depth as usize, &self.nodes[p as usize]))
            .collect()
    }

    fn preorder_from(&self, id: &str) -> Vec<(usize, &Message)> {
        let Some(start) = self.position(id) else {
            return Vec::new();
        };
        self.preorder_positions(start)
            .into_iter()
            .map(|(p, depth)| (depth as usize, &self.nodes[p as usize]))
            .collect()
    }

    /// The positions under `start` (itself first) in pre-order, with their depths below it.
    fn preorder_positions(&self, start: usize) -> Vec<(u32, u32)> {
        self.preorder_walk(start).collect()
    }

    /// [`Conversation::preorder_positions`] one at a time: down to the first child, else on to
    /// the next sibling of the nearest node that has one.
    fn preorder_walk(&self, start: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut at = Some((start, 0u32));
        iter::from_fn(move || {
            let (mut p, mut depth) = at?;
            let here = (p as u32, depth);
            at = match self.kids(p).next() {
                Some(child) => Some((child, depth + 1)),
                None => loop {
                    if p == start {
                        break None;
                    }
                    let next = self.links[p].next;
                    if next != NONE {
                        break Some((next as usize, depth));
                    }
                    p = self.links[p].parent as usize;
                    depth -= 1;
                },
            };
            Some(here)
        })
    }

    /// The `/tree` numbers of a few messages, without keeping the numbering of the whole tree when
    /// it has not been made yet (resuming a big conversation asks for three).
    pub fn numbers_of(&self, ids: &[&str]) -> Vec<Option<usize>> {
        let positions: Vec<Option<usize>> = ids.iter().map(|id| self.position(id)).collect();
        if let Some(numbering) = self.numbering.get() {
            return positions
                .iter()
                .map(|p| p.map(|p| numbering.number[p] as usize))
                .collect();
        }
        let mut numbers = vec![None; ids.len()];
        let mut left = positions.iter().filter(|p| p.is_some()).count();
        for (n, (p, _)) in self.preorder_walk(ROOT).enumerate() {
            if left == 0 {
                break;
            }
            for (i, wanted) in positions.iter().enumerate() {
                if *wanted == Some(p as usize) && numbers[i].is_none() {
                    numbers[i] = Some(n);
                    left -= 1;
                }
            }
        }
        numbers
    }

    /// How many messages have no children.
    pub fn leaf_count(&self) -> usize {
        self.links.iter().filter(|l| l.first == NONE).count()
    }

    /// The id of the node numbered `n` by `/tree`.
    pub fn id_by_number(&self, n: usize) -> Option<&str> {
        let &(p, _) = self.numbering().order.get(n)?;
        Some(self.nodes[p as usize].id.as_str())
    }

    /// The `/tree` number of a message (its depth-first pre-order index).
    pub fn number_of(&self, id: &str) -> Option<usize> {
        let p = self.position(id)?;
        Some(self.numbering().number[p] as usize)
    }

    /// The nearest user message at or above `id`: what `/retry` answers again (a summary node
    /// counts: answering it again sends the same compacted request).
    pub fn nearest_user(&self, id: &str) -> Option<&Message> {
        self.ancestors(id).find(|m| m.role == Role::User)
    }

    /// The nearest message the user typed at or above `id` (summary nodes are skipped): what
    /// `/edit` changes.
    pub fn nearest_typed(&self, id: &str) -> Option<&Message> {
        self.ancestors(id)
            .find(|m| m.role == Role::User && !m.is_summary())
    }

    /// What a request for `id` sends from the tree (the root aside): the nearest summary node on
    /// the path, if any, then the messages after the message it replaces up to `id`, skipping
    /// older summaries in between. A summary whose `replaces` is not above it is ignored.
    pub fn sent(&self, id: &str) -> Sent<'_> {
        let mut ignored: Vec<&str> = Vec::new();
        loop {
            let mut messages: Vec<&Message> = Vec::new();
            let mut summary: Option<(&Message, &str)> = None;
            let mut reached = false;
            for m in self.ancestors(id) {
                if m.parent_id.is_none() {
                    break;
                }
                match (summary, &m.extra.rare.summary) {
                    (Some((_, replaces)), _) if m.id == replaces => {
                        reached = true;
                        break;
                    }
                    // An older summary inside the kept part is superseded by the newer one.
                    (Some(_), Some(_)) => {}
                    (None, Some(info)) if !ignored.contains(&m.id.as_str()) => {
                        summary = Some((m, info.replaces.as_str()));
                    }
                    (None, Some(_)) => {}
                    (_, None) => messages.push(m),
                }
            }
            match summary {
                Some((s, _)) if !reached => ignored.push(s.id.as_str()),
                _ => {
                    messages.reverse();
                    return Sent {
                        summary: summary.map(|(s, _)| s),
                        messages,
                    };
                }
            }
        }
    }

    /// The snapshot of the working folder at `id`: that of the nearest node on its path to the
    /// root that has one.
    pub fn state_of(&self, id: &str) -> Option<&str> {
        if self.checkpoints.is_empty() {
            return None;
        }
        self.ancestors(id)
            .find_map(|m| self.checkpoints.get(m.id.as_str()))
            .map(String::as_str)
    }

    /// Whether any node is a summary.
    pub fn has_summaries(&self) -> bool {
        self.marks.summaries > 0
    }

    /// Whether any node is a side question (`/btw`) or a merge (`/merge`).
    pub fn has_side_or_merges(&self) -> bool {
        self.marks.side_or_merges > 0
    }

    /// Summary nodes whose `replaces` is not a message above them: loaded, never used.
    pub fn misplaced_summaries(&self) -> Vec<&Message> {
        self.nodes
            .iter()
            .filter(|m| {
                m.extra.rare.summary.as_ref().is_some_and(|info| {
                    !self
                        .ancestors(&m.id)
                        .skip(1)
                        .any(|a| a.id == info.replaces && a.parent_id.is_some())
                })
            })
            .collect()
    }

    /// The tip of the branch below `id`: follow the newest child that is not a side question
    /// down to a leaf (or to a node with only side questions below it).
    pub fn tip(&self, id: &str) -> Option<&Message> {
        let mut p = self.position(id)?;
        // The newest child that is not a side question (`/btw` is off the branch) nor undone.
        while let Some(last) = self
            .kids(p)
            .filter(|&k| {
                let m = &self.nodes[k];
                !m.side && !self.undone.contains(m.id.as_str())
            })
            .last()
        {
            p = last;
        }
        Some(&self.nodes[p])
    }

    /// Whether `id` is in a side branch (`/btw`): it or an ancestor is a side question.
    pub fn is_side(&self, id: &str) -> bool {
        self.ancestors(id).any(|m| m.side) || self.get(id).is_some_and(|m| m.side)
    }

    /// Where a side branch holding `id` hangs from (the parent of its side question, the
    /// outermost), or a part of it that `off` says to leave; `id` itself when it is in neither.
    pub fn off_side<'a>(&'a self, id: &'a str, off: &dyn Fn(&str) -> bool) -> &'a str {
        let mut out = id;
        // Up by the parent links (a message's `parent_id` is its parent's id): no id is hashed
        // and looked up on the way, however deep the node.
        let mut at = self.position(id);
        while let Some(p) = at {
            let m = &self.nodes[p];
            if m.side || off(&m.id) {
                out = m.parent_id.as_deref().unwrap_or(&self.root_id);
            }
            at = self.parent_position(p);
        }
        out
    }

    /// The tip of the branch named `name`, if there is one.
    pub fn branch_tip(&self, name: &str) -> Option<&Message> {
        self.branches.get(name).and_then(|id| self.tip(id))
    }

    /// The names of the branches that `id` is on (its tip's: a name given at that tip or at a
    /// node above it whose tip is the same), nearest first.
    pub fn names_of(&self, id: &str) -> Vec<&str> {
        let Some(tip) = self.tip(id).map(|m| m.id.as_str()) else {
            return Vec::new();
        };
        let mut named: Vec<(usize, &str)> = self
            .branches
            .iter()
            .filter(|(_, node)| self.tip(node).is_some_and(|t| t.id == tip))
            .map(|(name, node)| (self.chain(node).len(), name.as_str()))
            .collect();
        named.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        named.into_iter().map(|(_, n)| n).collect()
    }

    /// The alternatives at the nearest fork above `id`: the fork's children, and which of them
    /// leads to `id`. Side questions (`/btw`) are not alternatives: a fork made only by them is
    /// passed over (the child toward `id` counts, even when it is one). None when no ancestor of
    /// `id` has more than one such child.
    pub fn alternatives(&self, id: &str) -> Option<(Vec<&str>, usize)> {
        let chain = self.chain(id);
        for pair in chain.windows(2).rev() {
            let (parent, child) = (pair[0], pair[1]);
            let at = self.position(&parent.id).expect("on the chain");
            if self.fan_out(at) > 1 {
                let siblings: Vec<&str> = self
                    .kids(at)
                    .map(|k| &self.nodes[k])
                    .filter(|m| m.id == child.id || !m.side)
                    .map(|m| m.id.as_str())
                    .collect();
                if siblings.len() < 2 {
                    continue;
                }
                let at = siblings.iter().position(|s| *s == child.id)?;
                return Some((siblings, at));
            }
        }
        None
    }

    /// The first user message on any branch, used as the title when none was set.
    pub fn first_user_message(&self) -> Option<&Message> {
        self.preorder()
            .into_iter()
            .map(|(_, m)| m)
            .find(|m| m.role == Role::User)
    }

    /// The request messages for a branch ending at `id`: exactly the chain from the root, made valid.
    ///
    /// A branch may end, or continue, below an assistant message whose tool calls have no stored
    /// results on that branch (the user forked at the call, or between two results). Every call then
    /// gets a synthetic result saying it was not run, placed right after the call, because providers
    /// reject calls without results. Results are put in call order; a result whose call is not on the
    /// branch (possible only in a damaged file) is sent as user text rather than dropped.
    pub fn api_messages(&self, id: &str) -> Vec<ChatMessage<'_>> {
        self.api_messages_with(id, &mut |m| Cow::Borrowed(m.content.as_str()))
    }

    /// The same, with each tool result's text given by `result_text` (context management sends
    /// big results as previews). Below a summary node only the summary and what follows its
    /// `replaces` are sent ([`Conversation::sent`]). Every text sent as stored is borrowed.
    pub fn api_messages_with<'a>(
        &'a self,
        id: &str,
        result_text: &mut dyn FnMut(&'a Message) -> Cow<'a, str>,
    ) -> Vec<ChatMessage<'a>> {
        let sent = self.sent(id);
        let chain = sent.messages;
        let mut out = Vec::with_capacity(chain.len() + 2);
        out.push(ChatMessage::text(
            Role::System,
            self.root().content.as_str(),
        ));
        if let Some(summary) = sent.summary {
            out.push(
                ChatMessage::text(Role::User, summary.content.as_str()).from_node(&summary.id),
            );
        }
        let with_reasoning = |m: &'a Message, message: ChatMessage<'a>| {
            let rare = &m.extra.rare;
            message.with_reasoning(
                rare.reasoning.as_deref().map(Cow::Borrowed),
                rare.reasoning_signature.as_deref().map(Cow::Borrowed),
            )
        };
        let mut i = 0;
        while i < chain.len() {
            let m = chain[i];
            i += 1;
            match m.role {
                Role::Assistant if !m.calls().is_empty() => {
                    out.push(with_reasoning(
                        m,
                        ChatMessage::text(Role::Assistant, sent_content(m))
                            .with_calls(m.calls())
                            .from_node(&m.id),
                    ));
                    let mut results: HashMap<&str, &Message> = HashMap::new();
                    while i < chain.len() && chain[i].role == Role::Tool {
                        let r = chain[i];
                        let call = r.extra.tool_call_id.as_deref().unwrap_or("");
                        if m.calls().iter().any(|c| c.id == call) && !results.contains_key(call) {
                            results.insert(call, r);
                        } else {
                            out.push(orphan_result(r, &result_text(r)));
                        }
                        i += 1;
                    }
                    for call in m.calls() {
                        out.push(match results.get(call.id.as_str()) {
                            Some(r) => ChatMessage::tool_result(call.id.as_str(), result_text(r))
                                .from_node(&r.id),
                            None => ChatMessage::tool_result(call.id.as_str(), NOT_RUN_RESULT),
                        });
                    }
                }
                Role::Tool => out.push(orphan_result(m, &result_text(m))),
                role => out.push(with_reasoning(
                    m,
                    ChatMessage::text(role, sent_content(m)).from_node(&m.id),
                )),
            }
        }
        out
    }
}

/// Sent after an answer that was cut short, so that the model knows; in requests only (the file
/// keeps the answer as it arrived, with `interrupted: true`).
pub const INTERRUPTED_MARKER: &str = "[This answer was interrupted before it was complete.]";

fn sent_content(m: &Message) -> Cow<'_, str> {
    match (m.role, m.interrupted) {
        (Role::Assistant, true) if m.content.is_empty() => Cow::Borrowed(INTERRUPTED_MARKER),
        (Role::Assistant, true) => Cow::Owned(format!("{}\n\n{INTERRUPTED_MARKER}", m.content)),
        _ => Cow::Borrowed(&m.content),
    }
}

fn orphan_result(m: &Message, text: &str) -> ChatMessage<'static> {
    ChatMessage::text(
        Role::User,
        format!(
            "[result of tool call {}]\n{text}",
            m.extra.tool_call_id.as_deref().unwrap_or("?"),
        ),
    )
}

#[cfg(test)]
mod marker_tests {
    use super::*;
    use crate::vocab::ToolCall;

    #[test]
    fn an_interrupted_answer_is_sent_with_a_marker_and_stored_as_it_arrived() {
        let mut c = Conversation::new("c", "sys");
        c.add(Message::new(Role::User, "q")).unwrap();
        let mut cut = Message::new(Role::Assistant, "half an ans");
        cut.interrupted = true;
        let id = c.add(cut).unwrap();
        c.add(Message::new(Role::User, "go on")).unwrap();
        let sent = c.api_messages(c.cursor());
        assert_eq!(
            sent[2].content,
            format!("half an ans\n\n{INTERRUPTED_MARKER}")
        );
        assert_eq!(c.get(&id).unwrap().content, "half an ans");
        // One cut before its first word still tells the model.
        let mut empty = Message::new(Role::Assistant, "");
        empty.interrupted = true;
        empty.extra.tool_calls = Some(vec![ToolCall::new("t", "f", "{}")]);
        c.add(empty).unwrap();
        let sent = c.api_messages(c.cursor());
        assert_eq!(sent[4].content, INTERRUPTED_MARKER);
        assert_eq!(sent[1].content, "q");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::sample;
    use crate::vocab::ToolCall;

    /// Numbers found without numbering the tree are the numbers of the numbering, before it is
    /// made and after; the leaves are counted without it too.
    #[test]
    fn a_few_numbers_without_the_numbering() {
        let (c, _) = sample::bushy("b", 500);
        let ids: Vec<String> = (0..c.len())
            .step_by(7)
            .map(|p| c.at(p).id.to_string())
            .collect();
        let mut asked: Vec<&str> = ids.iter().map(String::as_str).collect();
        asked.extend(["not-in-the-tree", asked[3]]);
        let fresh = c.numbers_of(&asked);
        assert!(c.numbering.get().is_none(), "nothing kept");
        let expected: Vec<Option<usize>> = asked.iter().map(|id| c.number_of(id)).collect();
        assert_eq!(fresh, expected);
        assert_eq!(c.numbers_of(&asked), expected);
        assert_eq!(fresh[fresh.len() - 2], None);
        assert_eq!(c.leaf_count(), c.leaves().len());
    }

    /// An index made for fewer messages than come grows: every message is still found, and
    /// foreign ids (long, short, not ASCII) beside ours.
    #[test]
    fn an_index_too_small_grows_and_finds_every_id() {
        let mut root = Message::new(Role::System, "sys");
        root.id = "a-root-of-another-writer".into();
        let mut c = Conversation::with_root_and_capacity("c", root, (4, 1));
        let mut ids = vec![c.root_id.clone()];
        for i in 0..1000 {
            let mut m = user(&format!("m{i}"));
            m.id = match i % 4 {
                0 => format!("foreign-message-{i}").into(),
                1 => format!("{i}").into(),
                2 => format!("日{i}").into(),
                _ => m.id,
            };
            m.parent_id = Some(
                ids[ids.len() - 1 - (i % 3).min(ids.len() - 1)]
                    .as_str()
                    .into(),
            );
            ids.push(m.id.to_string());
            assert_eq!(c.attach_loaded(m), Attached::UnderParent);
        }
        for (p, id) in ids.iter().enumerate() {
            assert_eq!(c.position(id), Some(p), "{id}");
        }
    }

    fn user(text: &str) -> Message {
        Message::new(Role::User, text)
    }
    fn assistant(text: &str) -> Message {
        Message::new(Role::Assistant, text)
    }
    fn calling(ids: &[&str]) -> Message {
        assistant("").with_calls(ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect())
    }
    fn roles(msgs: &[ChatMessage]) -> Vec<(Role, String)> {
        msgs.iter()
            .map(|m| (m.role, m.content.to_string()))
            .collect()
    }

    #[test]
    fn add_links_both_ways_and_moves_cursor() {
        let mut c = Conversation::new("c1", "sys");
        let u = c.add(user("hi")).unwrap();
        let a = c.add(assistant("hello")).unwrap();
        assert_eq!(c.cursor(), a);
        assert_eq!(c.get(&a).unwrap().parent_id.as_deref(), Some(u.as_str()));
        assert_eq!(c.children(&u)[0].id, a);
        assert!(c.is_leaf(&a) && !c.is_leaf(&u));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn fork_keeps_branches_apart() {
        let mut c = Conversation::new("c1", "sys");
        let u1 = c.add(user("first")).unwrap();
        c.add(assistant("answer one")).unwrap();
        c.move_cursor(&u1).unwrap();
        let a2 = c.add(assistant("answer two")).unwrap();
        c.add(user("follow-up")).unwrap();
        let msgs = c.api_messages(c.cursor());
        assert_eq!(
            roles(&msgs),
            vec![
                (Role::System, "sys".into()),
                (Role::User, "first".into()),
                (Role::Assistant, "answer two".into()),
                (Role::User, "follow-up".into()),
            ]
        );
        assert_eq!(c.children(&u1).len(), 2);
        assert_eq!(c.leaves().len(), 2);
        assert_eq!(c.subtree(&a2).len(), 2);
    }

    #[test]
    fn numbering_is_unique_depth_first_preorder() {
        let mut c = Conversation::new("c1", "sys");
        let u1 = c.add(user("a")).unwrap();
        let a1 = c.add(assistant("b")).unwrap();
        c.move_cursor(&u1).unwrap();
        let a2 = c.add(assistant("c")).unwrap();
        let root = c.root_id.clone();
        c.move_cursor(&root).unwrap();
        let u2 = c.add(user("d")).unwrap();
        let ids: Vec<_> = (0..5)
            .map(|n| c.id_by_number(n).unwrap().to_string())
            .collect();
        assert_eq!(
            ids,
            vec![root.clone(), u1.clone(), a1.clone(), a2.clone(), u2.clone()]
        );
        assert_eq!(c.id_by_number(5), None);
        // Numbers asked for, then a message added in the middle: the later ones move down.
        assert_eq!(c.number_of(&u2), Some(4));
        c.move_cursor(&a1).unwrap();
        let deep = c.add(user("e")).unwrap();
        assert_eq!(c.number_of(&deep), Some(3));
        assert_eq!(c.number_of(&a2), Some(4));
        assert_eq!(c.number_of(&u2), Some(5));
        assert_eq!(c.id_by_number(5), Some(u2.as_str()));
        // The subtree and the depths agree with the numbers.
        let under: Vec<&str> = c.subtree(&u1).iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            under,
            vec![u1.as_str(), a1.as_str(), deep.as_str(), a2.as_str()]
        );
        let depths: Vec<usize> = c.preorder().iter().map(|(d, _)| *d).collect();
        assert_eq!(depths, vec![0, 1, 2, 3, 2, 1]);
        let leaves: Vec<&str> = c.leaves().iter().map(|m| m.id.as_str()).collect();
        assert_eq!(leaves, vec![deep.as_str(), a2.as_str(), u2.as_str()]);
        assert_eq!(c.subtree(&deep).len(), 1);
    }

    #[test]
    fn fork_at_a_tool_call_gets_synthetic_results() {
        let mut c = Conversation::new("c1", "sys");
        c.add(user("go")).unwrap();
        let call = c.add(calling(&["x", "y"])).unwrap();
        c.add(Message::tool_result("x", "result x")).unwrap();
        c.add(Message::tool_result("y", "result y")).unwrap();
        c.add(assistant("done")).unwrap();

        // At the call itself: both results are synthetic.
        let msgs = c.api_messages(&call);
        assert_eq!(msgs.len(), 5);
        assert_eq!(msgs[3].tool_call_id(), Some("x"));
        assert_eq!(msgs[3].content, NOT_RUN_RESULT);
        assert_eq!(msgs[4].content, NOT_RUN_RESULT);

        // Between the two results: the first is real, the second synthetic.
        let first = c.children(&call)[0].id.clone();
        c.move_cursor(&first).unwrap();
        let u = c.add(user("other way")).unwrap();
        let msgs = c.api_messages(&u);
        assert_eq!(
            roles(&msgs)[3..],
            [
                (Role::Tool, "result x".to_string()),
                (Role::Tool, NOT_RUN_RESULT.to_string()),
                (Role::User, "other way".to_string()),
            ]
        );
        // Nothing stored was rewritten: the synthetic result exists only in the request.
        assert_eq!(c.len(), 7);
    }

    #[test]
    fn results_are_sent_in_call_order() {
        let mut c = Conversation::new("c1", "sys");
        c.add(user("go")).unwrap();
        c.add(calling(&["x", "y"])).unwrap();
        c.add(Message::tool_result("y", "Y")).unwrap();
        c.add(Message::tool_result("x", "X")).unwrap();
        let msgs = c.api_messages(c.cursor());
        let ids: Vec<_> = msgs[3..]
            .iter()
            .map(|m| m.tool_call_id().unwrap().to_string())
            .collect();
        assert_eq!(ids, ["x", "y"]);
    }

    #[test]
    fn two_user_messages_in_a_row_are_sent_as_they_are() {
        let mut c = Conversation::new("c1", "sys");
        c.add(user("one")).unwrap();
        c.add(user("two")).unwrap();
        assert_eq!(c.api_messages(c.cursor()).len(), 3);
    }

    #[test]
    fn fork_from_root_sends_only_the_system_prompt() {
        let mut c = Conversation::new("c1", "sys");
        c.add(user("one")).unwrap();
        let root = c.root_id.clone();
        c.move_cursor(&root).unwrap();
        let u = c.add(user("fresh")).unwrap();
        assert_eq!(
            roles(&c.api_messages(&u)),
            vec![(Role::System, "sys".into()), (Role::User, "fresh".into())]
        );
    }

    #[test]
    fn unknown_ids_are_refused() {
        let mut c = Conversation::new("c1", "sys");
        assert!(c.move_cursor("nope").is_err());
        assert!(c.add_under("nope", user("x")).is_err());
        let m = user("x");
        let dup = m.clone();
        let root = c.root_id.clone();
        c.add(m).unwrap();
        assert!(matches!(
            c.add_under(&root, dup.clone()),
            Err(TreeError::DuplicateMessage(_))
        ));
        // A new message whose id is taken gets a fresh one.
        let fresh = c.add(dup.clone()).unwrap();
        assert_ne!(fresh, dup.id);
    }

    #[test]
    fn navigation_helpers() {
        let mut c = Conversation::new("c1", "sys");
        let u1 = c.add(user("q")).unwrap();
        let a1 = c.add(assistant("a1")).unwrap();
        let u2 = c.add(user("q2")).unwrap();
        c.move_cursor(&u1).unwrap();
        let a2 = c.add(assistant("a2")).unwrap();
        assert_eq!(c.nearest_user(&a1).unwrap().id, u1);
        assert_eq!(c.nearest_user(&u2).unwrap().id, u2);
        assert!(c.nearest_user(&c.root_id.clone()).is_none());
        assert_eq!(c.tip(&u1).unwrap().id, a2);
        assert_eq!(c.tip(&a1).unwrap().id, u2);
        let (alts, at) = c.alternatives(&u2).unwrap();
        assert_eq!((alts, at), (vec![a1.as_str(), a2.as_str()], 0));
        assert_eq!(c.alternatives(&a2).unwrap().1, 1);
        assert!(c.alternatives(&u1).is_none());
        assert_eq!(c.number_of(&a2), Some(4));
    }

    #[test]
    fn deep_linear_tree_does_not_overflow() {
        let mut c = Conversation::new("c1", "sys");
        for i in 0..100_000 {
            c.add(user(&i.to_string())).unwrap();
        }
        assert_eq!(c.preorder().len(), 100_001);
        assert_eq!(c.chain(c.cursor()).len(), 100_001);
    }
}
