//! Drawing a conversation tree as text.
//!
//! Nodes are numbered in depth-first pre-order (the system prompt is `[0]`), so every number is
//! unique and `/N` is unambiguous. A node with one child continues on the same column, so a linear
//! conversation stays flat however long it grows; where a node has several children, each branch
//! is drawn with `├─` / `└─` and its descendants are indented under `│`.

use new_core::config::Lang;
use new_core::conversation::{Conversation, Message};
use new_core::vocab::Role;

/// Longest preview, in characters.
const PREVIEW_CHARS: usize = 60;

/// One drawn line, before colouring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeLine {
    pub number: usize,
    /// Connectors before the number.
    pub lead: String,
    /// `role: preview`.
    pub text: String,
    pub is_current: bool,
}

/// A line of the default (collapsed) view: a node, or a run of hidden nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Node(TreeLine),
    /// Nodes `first..=last` of a linear run, not drawn.
    Gap {
        lead: String,
        first: usize,
        last: usize,
    },
}

/// Trees up to this size are always drawn whole.
pub const COLLAPSE_OVER: usize = 60;
/// Ancestors of the cursor always drawn, so that the context of the next message shows.
const KEEP_ABOVE_CURSOR: usize = 4;
/// The shortest run worth replacing by a gap line.
const MIN_GAP: usize = 4;

/// Branches nested deeper than this are drawn at this depth, so that a line's indentation, and the
/// cost of drawing it, stay bounded however deep the forks go.
const MAX_DEPTH: usize = 24;

/// The branch pieces a node's connectors end with: none (a run goes on), a branch, the last one.
const BRANCHES: [&str; 3] = ["", "├─ ", "└─ "];

/// A node as the walk meets it; its text is only made for the lines that are drawn. Sixteen
/// bytes and nothing to free: a big tree's nodes are gone through several times.
struct Node<'a> {
    message: &'a Message,
    /// The connectors before the number: the parent's body (a prefix of [`Walk::prefixes`]) and
    /// this node's branch piece (one of [`BRANCHES`]).
    body: u32,
    branch: u8,
    /// Inside a linear run: one parent with one child, itself with one child.
    interior: bool,
}

/// The nodes in depth-first pre-order, and the prefixes their connectors start with.
struct Walk<'a> {
    nodes: Vec<Node<'a>>,
    prefixes: Vec<String>,
}

impl Walk<'_> {
    fn lead(&self, node: &Node<'_>) -> String {
        let (body, branch) = self.connectors(node);
        let mut lead = String::with_capacity(body.len() + branch.len());
        lead.push_str(body);
        lead.push_str(branch);
        lead
    }

    fn connectors(&self, node: &Node<'_>) -> (&str, &'static str) {
        (
            &self.prefixes[node.body as usize],
            BRANCHES[usize::from(node.branch)],
        )
    }

    fn line(
        &self,
        node: &Node<'_>,
        number: usize,
        cursor: &str,
        lang: Lang,
        labels: &Labels,
    ) -> TreeLine {
        let mut text = String::with_capacity(PREVIEW_CHARS + 32);
        push_description(&mut text, node.message, PREVIEW_CHARS, lang, labels);
        TreeLine {
            number,
            lead: self.lead(node),
            text,
            is_current: node.message.id == cursor,
        }
    }
}

/// The nodes in depth-first pre-order. Prefix strings are shared between the nodes of a run and
/// only built at forks, so the walk is linear in the number of nodes.
fn walk(conversation: &Conversation) -> Walk<'_> {
    let mut nodes = Vec::with_capacity(conversation.len());
    // The empty prefix first.
    let mut prefixes = vec![String::new()];
    /// A node waiting to be visited, by its position in the conversation.
    struct Visit {
        position: usize,
        body: u32,
        branch: u8,
        /// The prefix for its descendants.
        under: u32,
        depth: usize,
        only_child: bool,
    }
    let mut stack = vec![Visit {
        position: 0,
        body: 0,
        branch: 0,
        under: 0,
        depth: 0,
        only_child: false,
    }];
    // The children of a fork, reused from one fork to the next.
    let mut children: Vec<usize> = Vec::new();
    while let Some(Visit {
        position,
        body,
        branch,
        under,
        depth,
        only_child,
    }) = stack.pop()
    {
        let fan_out = conversation.fan_out(position);
        nodes.push(Node {
            message: conversation.at(position),
            body,
            branch,
            interior: only_child && fan_out == 1,
        });
        if fan_out == 1 {
            let only = conversation.child_positions(position).next();
            stack.push(Visit {
                position: only.expect("one child"),
                body: under,
                branch: 0,
                under,
                depth,
                only_child: true,
            });
        } else {
            children.clear();
            children.extend(conversation.child_positions(position));
            let last = children.len().saturating_sub(1);
            // The prefix under a branch is one of two, shared by the branches of this fork.
            let mut deeper = |extend: &str| -> u32 {
                if depth < MAX_DEPTH {
                    let above = &prefixes[under as usize];
                    let mut prefix = String::with_capacity(above.len() + extend.len());
                    prefix.push_str(above);
                    prefix.push_str(extend);
                    prefixes.push(prefix);
                    (prefixes.len() - 1) as u32
                } else {
                    under
                }
            };
            let under_last = deeper("   ");
            let under_others = (last > 0).then(|| deeper("│  "));
            for (i, &child) in children.iter().enumerate().rev() {
                let (piece, deeper) = match under_others {
                    Some(others) if i != last => (1, others),
                    _ => (2, under_last),
                };
                stack.push(Visit {
                    position: child,
                    body: under,
                    branch: piece,
                    under: deeper,
                    depth: depth + 1,
                    only_child: false,
                });
            }
        }
    }
    Walk { nodes, prefixes }
}

/// The default view: small trees whole; in large ones, long linear runs folded into one line each.
/// Forks, leaves, the first message after each fork, the cursor and the messages just above it are
/// always drawn, so every branch and the current position stay visible.
pub fn tree_rows(conversation: &Conversation, full: bool, lang: Lang) -> Vec<Row> {
    let mut rows = draw_rows(conversation, full, lang);
    label_summaries(conversation, &mut rows, lang);
    label_branches(conversation, &mut rows, lang);
    rows
}

/// Branch names at the tips they stand for (`⟨auth-fix⟩`), side questions, merge nodes (what they
/// brought back) and undone messages (how much is folded below them).
fn label_branches(conversation: &Conversation, rows: &mut [Row], lang: Lang) {
    // Told without numbering the tree: most trees have nothing to label.
    if conversation.branches.is_empty()
        && conversation.undone.is_empty()
        && !conversation.has_side_or_merges()
    {
        return;
    }
    let order = conversation.preorder();
    let numbers: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(n, (_, m))| (m.id.as_str(), n))
        .collect();
    let number = |id: &str| numbers.get(id).map_or("?".to_string(), |n| n.to_string());
    // The names at each named tip, found once (not a walk to the leaf per row).
    let mut named: HashMap<&str, Vec<&str>> = Default::default();
    for (name, node) in &conversation.branches {
        if let Some(tip) = conversation.tip(node) {
            named
                .entry(tip.id.as_str())
                .or_default()
                .push(name.as_str());
        }
    }
    for row in rows.iter_mut() {
        let Row::Node(line) = row else { continue };
        let Some((_, m)) = order.get(line.number) else {
            continue;
        };
        if let Some(from) = &m.extra.rare.merged_from {
            line.text = super::text::tr(
                lang,
                "tree_merged",
                &[("tip", &number(&from.tip)), ("fork", &number(&from.fork))],
            );
        }
        if m.side {
            line.text.push_str(&super::text::tr(lang, "side_mark", &[]));
        }
        if conversation.undone.contains(m.id.as_str()) {
            let n = conversation.subtree(&m.id).len() - 1;
            line.text
                .push_str(&super::text::tr(lang, "tree_undone", &[("n", &n)]));
        }
        if let Some(names) = named.get(m.id.as_str()) {
            line.text.push_str(&format!("  ⟨{}⟩", names.join(", ")));
        }
    }
}

/// The nodes below an undone message, unless the cursor is among them or on it: folded (not
/// drawn) in the default view.
fn folded(conversation: &Conversation, nodes: &[Node<'_>], full: bool) -> Vec<bool> {
    let mut hidden = vec![false; nodes.len()];
    if full || conversation.undone.is_empty() {
        return hidden;
    }
    let cursor = conversation.cursor();
    for (i, node) in nodes.iter().enumerate() {
        let id = node.message.id.as_str();
        if !conversation.undone.contains(id)
            || id == cursor
            || conversation.ancestors(cursor).any(|a| a.id == id)
        {
            continue;
        }
        // A subtree is contiguous in pre-order, right after its root.
        let size = conversation.subtree(id).len();
        for h in hidden.iter_mut().skip(i + 1).take(size.saturating_sub(1)) {
            *h = true;
        }
    }
    hidden
}

/// A summary node's line says what it stands for: `summary of [1–40] · 96k → 14k`.
fn label_summaries(conversation: &Conversation, rows: &mut [Row], lang: Lang) {
    if !conversation.has_summaries() {
        return;
    }
    let order = conversation.preorder();
    let numbers: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(n, (_, m))| (m.id.as_str(), n))
        .collect();
    for row in rows.iter_mut() {
        let Row::Node(line) = row else { continue };
        let Some((_, m)) = order.get(line.number) else {
            continue;
        };
        let Some(info) = &m.extra.rare.summary else {
            continue;
        };
        let last = numbers.get(info.replaces.as_str()).copied();
        // The first message of the branch: the root's child on the summary's path.
        let first = conversation
            .ancestors(&m.id)
            .filter(|a| a.parent_id.is_some())
            .last()
            .and_then(|a| numbers.get(a.id.as_str()).copied());
        let range = match (first, last) {
            (Some(first), Some(last)) if first <= last => format!("[{first}–{last}]"),
            (_, Some(last)) => format!("[{last}]"),
            _ => "?".to_string(),
        };
        line.text = super::text::tr(
            lang,
            "tree_summary",
            &[
                ("range", &range),
                ("before", &super::output::short_tokens(info.tokens_before)),
                ("after", &super::output::short_tokens(info.tokens_after)),
            ],
        );
    }
}

fn draw_rows(conversation: &Conversation, full: bool, lang: Lang) -> Vec<Row> {
    let cursor = conversation.cursor();
    let walked = walk(conversation);
    let labels = Labels::new(lang);
    let mut rows = Vec::new();
    each_row(conversation, &walked.nodes, full, |row| {
        rows.push(match row {
            Drawn::Node(node, n) => Row::Node(walked.line(node, n, cursor, lang, &labels)),
            Drawn::Gap(node, first, last) => Row::Gap {
                lead: walked.lead(node),
                first,
                last,
            },
        })
    });
    rows
}

/// A row as the drawing meets it, before any text is made for it: a node and its number, or a
/// gap (its first node, its first and last numbers).
enum Drawn<'n, 'a> {
    Node(&'n Node<'a>, usize),
    Gap(&'n Node<'a>, usize, usize),
}

/// The rows of the view, in order: which nodes are drawn and which runs fold into a gap.
fn each_row<'a>(
    conversation: &'a Conversation,
    nodes: &[Node<'a>],
    full: bool,
    mut emit: impl FnMut(Drawn<'_, 'a>),
) {
    let cursor = conversation.cursor();
    let hidden = folded(conversation, nodes, full);
    if full || nodes.len() <= COLLAPSE_OVER {
        for (n, node) in nodes.iter().enumerate() {
            if !hidden[n] {
                emit(Drawn::Node(node, n));
            }
        }
        return;
    }
    // Told apart by where they are kept, not by their ids: a node's id is unique in the tree, and
    // most of a big tree's nodes are in runs, so comparing texts would read every message.
    let near_cursor: Vec<&Message> = conversation
        .ancestors(cursor)
        .take(KEEP_ABOVE_CURSOR + 1)
        .collect();
    let undone = &conversation.undone;
    // In one pass over the nodes: a node outside runs stays, and so does the first node of each
    // run (the message right after a fork or a kept node).
    let mut after_interior = true;
    let keep: Vec<bool> = nodes
        .iter()
        .map(|n| {
            let first_of_run = !after_interior;
            after_interior = n.interior;
            !n.interior
                || first_of_run
                || near_cursor.iter().any(|&m| ptr::eq(m, n.message))
                || (!undone.is_empty() && undone.contains(n.message.id.as_str()))
        })
        .collect();
    let mut i = 0;
    while i < nodes.len() {
        if hidden[i] {
            i += 1;
            continue;
        }
        if keep[i] {
            emit(Drawn::Node(&nodes[i], i));
            i += 1;
            continue;
        }
        let start = i;
        while i < nodes.len() && !keep[i] && !hidden[i] {
            i += 1;
        }
        if i - start >= MIN_GAP {
            emit(Drawn::Gap(&nodes[start], start, i - 1));
        } else {
            for (n, node) in nodes.iter().enumerate().take(i).skip(start) {
                emit(Drawn::Node(node, n));
            }
        }
    }
}

/// What a drawing's caller may colour: the current node's line and the gap lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Highlight {
    Current,
    Gap,
}

/// The drawing of [`tree_rows`] appended to `out`, one line per row, each ending in a newline,
/// with `paint` applied to the current node's line and to gap lines: the text of
/// [`render_rows`], made straight into `out` (no row, no line of its own for most nodes; a big
/// tree draws nearly every node).
pub fn push_tree(
    out: &mut String,
    conversation: &Conversation,
    full: bool,
    lang: Lang,
    paint: &dyn Fn(Highlight, &str) -> String,
) {
    push_tree_within(out, conversation, full, lang, None, paint);
}

/// [`push_tree`] for a terminal `width` columns wide, when it has a width: each row then fits in
/// them (a preview as long as there is room, cut after a word and ended by `…`, the current
/// node's mark kept), so the terminal never wraps one; without, previews are 60 characters.
pub fn push_tree_within(
    out: &mut String,
    conversation: &Conversation,
    full: bool,
    lang: Lang,
    width: Option<usize>,
    paint: &dyn Fn(Highlight, &str) -> String,
) {
    // A column is left free: a row filling the last one wraps on some terminals.
    let room = width.map(|w| w.saturating_sub(1).max(20));
    let mark = super::text::tr(lang, "current_mark", &[]);
    let fitted = |mut line: String, current: bool| {
        if let Some(room) = room {
            let mark_width = if current { wrap::width(&mark) } else { 0 };
            cut_to(&mut line, 0, room.saturating_sub(mark_width));
        }
        if current {
            line.push_str(&mark);
        }
        line
    };
    // Labels rewrite a row's text after it is made: such a tree is drawn by rows.
    if needs_labels(conversation) {
        for row in tree_rows(conversation, full, lang) {
            match row {
                Row::Node(mut line) => {
                    let current = mem::take(&mut line.is_current);
                    let text = fitted(format_line(&line, lang), current);
                    if current {
                        out.push_str(&paint(Highlight::Current, &text));
                    } else {
                        out.push_str(&text);
                    }
                }
                gap @ Row::Gap { .. } => out.push_str(&paint(
                    Highlight::Gap,
                    &fitted(format_row(&gap, lang), false),
                )),
            }
            out.push('\n');
        }
        return;
    }
    let cursor = conversation.cursor();
    let walked = walk(conversation);
    // Previews as long as a row has room for (it is cut to fit), 60 characters without a width.
    let chars = room.map_or(PREVIEW_CHARS, |r| r.max(PREVIEW_CHARS));
    let labels = Labels::new(lang);
    out.reserve(walked.nodes.len() * 96);
    each_row(conversation, &walked.nodes, full, |row| {
        match row {
            Drawn::Node(node, n) if node.message.id == cursor => {
                let mut line = String::new();
                push_node(&mut line, &walked, node, n, chars, lang, &labels);
                out.push_str(&paint(Highlight::Current, &fitted(line, true)));
            }
            Drawn::Node(node, n) => {
                let start = out.len();
                push_node(out, &walked, node, n, chars, lang, &labels);
                if let Some(room) = room {
                    cut_to(out, start, room);
                }
            }
            Drawn::Gap(node, first, last) => {
                let gap = Row::Gap {
                    lead: walked.lead(node),
                    first,
                    last,
                };
                out.push_str(&paint(
                    Highlight::Gap,
                    &fitted(format_row(&gap, lang), false),
                ));
            }
        }
        out.push('\n');
    });
}

/// Cuts what `out` holds from `start` on to `room` columns when it is wider: after the last
/// word that ends in the last quarter of the room (else where the room ends), then `…`.
fn cut_to(out: &mut String, start: usize, room: usize) {
    if wrap::width(&out[start..]) <= room {
        return;
    }
    let room = room.max(2);
    let (mut columns, mut end) = (0, start);
    for (i, c) in out[start..].char_indices() {
        let w = c.width().unwrap_or(0);
        if columns + w > room - 1 {
            break;
        }
        columns += w;
        end = start + i + c.len_utf8();
    }
    let kept = &out[start..end];
    if let Some(space) = kept.rfind(' ')
        && wrap::width(&kept[..space]) >= room - room / 4
    {
        end = start + space;
    }
    out.truncate(end);
    let trimmed = out.trim_end().len().max(start);
    out.truncate(trimmed);
    out.push('…');
}

/// Whether any row of the tree gets a label ([`label_summaries`], [`label_branches`]).
fn needs_labels(conversation: &Conversation) -> bool {
    conversation.has_summaries()
        || !conversation.branches.is_empty()
        || !conversation.undone.is_empty()
        || conversation.has_side_or_merges()
}

/// [`push_line`] of a node's [`Node::line`], without making the line.
fn push_node(
    out: &mut String,
    walked: &Walk<'_>,
    node: &Node<'_>,
    number: usize,
    chars: usize,
    lang: Lang,
    labels: &Labels,
) {
    use std::fmt::Write;
    let (body, branch) = walked.connectors(node);
    out.push_str(body);
    out.push_str(branch);
    let _ = write!(out, "[{number}] ");
    push_description(out, node.message, chars, lang, labels);
}

/// The whole drawing as plain text, one line per row.
pub fn render_plain(conversation: &Conversation, lang: Lang) -> String {
    render_rows(&tree_rows(conversation, false, lang), lang)
}

pub fn render_rows(rows: &[Row], lang: Lang) -> String {
    let mut out = String::with_capacity(rows.len() * 96);
    for row in rows {
        push_row(&mut out, row, lang);
        out.push('\n');
    }
    out
}

pub fn format_row(row: &Row, lang: Lang) -> String {
    let mut out = String::new();
    push_row(&mut out, row, lang);
    out
}

/// [`format_row`] appended to `out`: a drawing of many rows is made in one buffer.
pub fn push_row(out: &mut String, row: &Row, lang: Lang) {
    match row {
        Row::Node(line) => push_line(out, line, lang),
        Row::Gap { lead, first, last } => {
            let n = last - first + 1;
            out.push_str(&super::text::tr(
                lang,
                "tree_gap",
                &[("lead", lead), ("first", first), ("last", last), ("n", &n)],
            ));
        }
    }
}

pub fn format_line(line: &TreeLine, lang: Lang) -> String {
    let mut out = String::new();
    push_line(&mut out, line, lang);
    out
}

fn push_line(out: &mut String, line: &TreeLine, lang: Lang) {
    use std::fmt::Write;
    out.push_str(&line.lead);
    let _ = write!(out, "[{}] ", line.number);
    out.push_str(&line.text);
    if line.is_current {
        out.push_str(&super::text::tr(lang, "current_mark", &[]));
    }
}

/// `role: one-line preview`, with tool calls as `[tool call: name(args…)]`; in Chinese the
/// original design's labels (系统提示词 / 你 / AI / 工具结果, `[工具调用: name]`).
pub fn describe(m: &Message, lang: Lang) -> String {
    let mut out = String::with_capacity(PREVIEW_CHARS + 32);
    push_description(&mut out, m, PREVIEW_CHARS, lang, &Labels::new(lang));
    out
}

/// What comes before and after a message's preview on its line, by role (`user: {text}`):
/// looked up once for a drawing, not once for each of its lines.
struct Labels([(&'static str, &'static str); 4]);

impl Labels {
    fn new(lang: Lang) -> Self {
        let split = |key| {
            let template = super::text::template(lang, key).unwrap_or("{text}");
            template.split_once("{text}").unwrap_or((template, ""))
        };
        Labels([
            split("tree_system"),
            split("tree_user"),
            split("tree_assistant"),
            split("tree_tool"),
        ])
    }

    fn of(&self, role: Role) -> (&'static str, &'static str) {
        self.0[match role {
            Role::System => 0,
            Role::User => 1,
            Role::Assistant => 2,
            Role::Tool => 3,
        }]
    }
}

/// [`describe`] appended to `out`. The model's text is shown on a terminal, so each piece comes
/// out with its control characters escaped as it is appended (no second pass over the line).
fn push_description(out: &mut String, m: &Message, chars: usize, lang: Lang, labels: &Labels) {
    use new_core::escape::push_escaped_controls;
    let (before, after) = labels.of(m.role);
    push_escaped_controls(out, before);
    let start = out.len();
    match subagent_footer(m) {
        // A subagent's answer: its role, its length and its conversation (`/switch ID`).
        Some((role, id, size)) => {
            push_escaped_controls(out, &format!("agent {role} → {size} · {id}"))
        }
        None => push_preview(out, &m.content, chars),
    }
    for call in m.calls() {
        if out.len() > start {
            out.push(' ');
        }
        push_escaped_controls(
            out,
            &super::text::tr(
                lang,
                "tree_tool_call",
                &[
                    ("name", &call.function.name),
                    ("args", &preview(&call.function.arguments, 40)),
                ],
            ),
        );
    }
    if m.interrupted {
        push_escaped_controls(out, &super::text::tr(lang, "tree_interrupted", &[]));
    }
    push_escaped_controls(out, after);
}

/// (role, conversation id, size) of a tool result that ends with a subagent's footer
/// (`(subagent explore · conversation a1b2c3d4 · 12 messages · …)`; the size of a task that went
/// on in the background is `in the background`).
fn subagent_footer(m: &Message) -> Option<(&str, &str, &str)> {
    if m.role != Role::Tool {
        return None;
    }
    // The last line, found from the end (a tool's output may be long).
    let last = m.content.trim_end().rsplit('\n').next()?;
    let last = last.strip_suffix('\r').unwrap_or(last);
    let inner = last.strip_prefix("(subagent ")?.strip_suffix(')')?;
    let mut parts = inner.split(" · ");
    let role = parts.next()?;
    let id = parts.next()?.strip_prefix("conversation ")?;
    let size = parts
        .next()
        .filter(|s| s.ends_with(" messages") || *s == "in the background")?;
    Some((role, id, size))
}

use super::wrap;
pub use new_core::escape::preview;
use new_core::escape::push_preview;
use std::collections::HashMap;
use std::mem;
use std::ptr;
use unicode_width::UnicodeWidthChar;

#[cfg(test)]
mod tests {
    use super::*;
    use new_core::conversation::sample::bushy;
    use new_core::vocab::ToolCall;

    fn sample() -> Conversation {
        let mut c = Conversation::new("c", "You are a helpful assistant.\nBe brief.");
        let u1 = c.add(Message::new(Role::User, "Hello there")).unwrap();
        c.add(Message::new(Role::Assistant, "Hi! How can I help?"))
            .unwrap();
        c.add(Message::new(Role::User, "Read main.rs")).unwrap();
        c.add(
            Message::new(Role::Assistant, "").with_calls(vec![ToolCall::new(
                "c1",
                "read_file",
                r#"{"filepath":"main.rs"}"#,
            )]),
        )
        .unwrap();
        c.add(Message::tool_result("c1", "     1\tfn main() {}"))
            .unwrap();
        c.add(Message::new(
            Role::Assistant,
            "It is an empty main function.",
        ))
        .unwrap();
        c.move_cursor(&u1).unwrap();
        c.add(Message { interrupted: true, ..Message::new(Role::Assistant, "Good day! A much longer answer that will certainly not fit on one line of the tree") }).unwrap();
        let root = c.root_id.clone();
        c.move_cursor(&root).unwrap();
        c.add(Message::new(Role::User, "Another start")).unwrap();
        c
    }

    #[test]
    fn draws_branches_and_marks_the_cursor() {
        insta::assert_snapshot!(render_plain(&sample(), Lang::En), @r#"
        [0] system: You are a helpful assistant. Be brief.
        ├─ [1] user: Hello there
        │  ├─ [2] assistant: Hi! How can I help?
        │  │  [3] user: Read main.rs
        │  │  [4] assistant: [tool call: read_file({"filepath":"main.rs"})]
        │  │  [5] tool: 1 fn main() {}
        │  │  [6] assistant: It is an empty main function.
        │  └─ [7] assistant: Good day! A much longer answer that will certainly not fit o… (interrupted)
        └─ [8] user: Another start ← current
        "#);
    }

    #[test]
    fn numbers_match_the_conversation_numbering() {
        let c = sample();
        for row in tree_rows(&c, true, Lang::En) {
            let Row::Node(line) = row else {
                panic!("the full view has no gaps")
            };
            let id = c.id_by_number(line.number).unwrap();
            assert_eq!(describe(c.get(id).unwrap(), Lang::En), line.text);
        }
    }

    /// A long conversation with a fork near the start and a retry near the end.
    fn long_tree() -> Conversation {
        let mut c = Conversation::new("c", "sys");
        let first = c.add(Message::new(Role::User, "q0")).unwrap();
        for i in 1..40 {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            c.add(Message::new(role, format!("main {i}"))).unwrap();
        }
        c.move_cursor(&first).unwrap();
        for i in 0..30 {
            let role = if i % 2 == 0 {
                Role::Assistant
            } else {
                Role::User
            };
            c.add(Message::new(role, format!("side {i}"))).unwrap();
        }
        let side_tip = c.cursor().to_string();
        c.add(Message::new(Role::User, "after side")).unwrap();
        c.move_cursor(&side_tip).unwrap();
        for i in 0..10 {
            c.add(Message::new(Role::User, format!("retry {i}")))
                .unwrap();
        }
        c
    }

    #[test]
    fn long_linear_runs_collapse_but_forks_and_the_cursor_stay() {
        let c = long_tree();
        assert_eq!(c.len(), 82);
        insta::assert_snapshot!(render_plain(&c, Lang::En), @r"
        [0] system: sys
        [1] user: q0
        ├─ [2] assistant: main 1
        │  [3] user: main 2
        │  ┆ [4–39] 36 messages (/tree --full shows them)
        │  [40] assistant: main 39
        └─ [41] assistant: side 0
           [42] user: side 1
           ┆ [43–69] 27 messages (/tree --full shows them)
           [70] user: side 29
           ├─ [71] user: after side
           └─ [72] user: retry 0
              [73] user: retry 1
              [74] user: retry 2
              [75] user: retry 3
              [76] user: retry 4
              [77] user: retry 5
              [78] user: retry 6
              [79] user: retry 7
              [80] user: retry 8
              [81] user: retry 9 ← current
        ");
        // The full view draws every node.
        assert_eq!(
            render_rows(&tree_rows(&c, true, Lang::En), Lang::En)
                .lines()
                .count(),
            82
        );
    }

    #[test]
    fn collapsed_runs_keep_the_context_above_the_cursor() {
        let mut c = long_tree();
        let id = c.id_by_number(20).unwrap().to_string();
        c.move_cursor(&id).unwrap();
        let text = render_plain(&c, Lang::En);
        for n in 16..=20 {
            assert!(text.contains(&format!("[{n}] ")), "{n}:\n{text}");
        }
        assert!(
            text.contains("[3] user: main 2\n│  ┆ [4–15] 12 messages"),
            "{text}"
        );
        assert!(text.contains("┆ [21–39] 19 messages"), "{text}");
        assert!(text.contains("[20] assistant: main 19 ← current"), "{text}");
    }

    #[test]
    fn a_thousand_nodes_draw_in_a_screenful() {
        let mut c = Conversation::new("c", "sys");
        let mut forks = Vec::new();
        for i in 0..1000 {
            if i % 100 == 0 {
                forks.push(c.cursor().to_string());
            }
            c.add(Message::new(Role::User, format!("m{i}"))).unwrap();
        }
        for f in &forks[1..] {
            c.move_cursor(f).unwrap();
            c.add(Message::new(Role::User, "alt")).unwrap();
        }
        let rows = tree_rows(&c, false, Lang::En);
        assert!(rows.len() < 80, "{} rows", rows.len());
        let text = render_rows(&rows, Lang::En);
        assert!(text.contains("← current"));
    }

    #[test]
    fn previews_escape_controls_as_they_are_drawn() {
        let long = format!("{}\u{1b}[31mred", "x".repeat(55));
        assert_eq!(preview(&long, 60), format!("{}\\e[31m…", "x".repeat(55)));
        assert_eq!(preview("a\u{202e}b  c\n d", 60), "a\\u{202e}b c d");
        let m = Message::new(Role::Assistant, "héllo wörld").with_calls(vec![ToolCall::new(
            "c1",
            "evil\rname",
            "{}",
        )]);
        assert_eq!(
            describe(&m, Lang::En),
            "assistant: héllo wörld [tool call: evil\\rname({})]"
        );
    }

    /// The drawing made straight into a buffer is the drawing of the rows, byte for byte, with the
    /// same lines painted: small and big trees, folded runs, forks everywhere, labels.
    #[test]
    fn drawing_into_the_buffer_is_drawing_the_rows() {
        let paint = |h: Highlight, s: &str| format!("<{h:?}>{s}</>");
        let by_rows = |c: &Conversation, full: bool, lang: Lang| {
            let mut out = String::new();
            for row in tree_rows(c, full, lang) {
                let drawn = format_row(&row, lang);
                match &row {
                    Row::Node(line) if line.is_current => {
                        out.push_str(&paint(Highlight::Current, &drawn))
                    }
                    Row::Gap { .. } => out.push_str(&paint(Highlight::Gap, &drawn)),
                    Row::Node(_) => out.push_str(&drawn),
                }
                out.push('\n');
            }
            out
        };
        let mut moved = long_tree();
        let id = moved.id_by_number(20).unwrap().to_string();
        moved.move_cursor(&id).unwrap();
        let mut named = long_tree();
        let tip = named.cursor().to_string();
        named.branches.insert("retry".into(), tip);
        let (bushy, _) = bushy("b", 3000);
        let mut deep = Conversation::new("d", "sys");
        for i in 0..200 {
            let fork = deep.cursor().to_string();
            deep.add(Message::new(Role::User, format!("a{i}"))).unwrap();
            let on = deep.cursor().to_string();
            deep.move_cursor(&fork).unwrap();
            deep.add(Message::new(Role::User, format!("b{i}"))).unwrap();
            deep.move_cursor(&on).unwrap();
        }
        for c in [sample(), long_tree(), moved, named, bushy, deep] {
            for full in [false, true] {
                for lang in [Lang::En, Lang::Zh] {
                    let mut direct = String::new();
                    push_tree(&mut direct, &c, full, lang, &paint);
                    assert_eq!(direct, by_rows(&c, full, lang), "full: {full}");
                }
            }
        }
    }

    #[test]
    fn chinese_mark() {
        let c = Conversation::new("c", "sys");
        assert_eq!(render_plain(&c, Lang::Zh), "[0] 系统提示词：sys ← 当前\n");
    }
}
