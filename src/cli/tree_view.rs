//! Drawing a conversation tree as text.
//!
//! Nodes are numbered in depth-first pre-order (the system prompt is `[0]`), so every number is
//! unique and `/N` is unambiguous. A node with one child continues on the same column, so a linear
//! conversation stays flat however long it grows; where a node has several children, each branch
//! is drawn with `├─` / `└─` and its descendants are indented under `│`.

use crate::config::Lang;
use crate::llm::Role;
use crate::session::{Conversation, Message};

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

/// Every node, depth-first, with its connectors.
pub fn tree_lines(conversation: &Conversation) -> Vec<TreeLine> {
    walk(conversation)
        .into_iter()
        .map(|(line, _, _)| line)
        .collect()
}

/// Each line with whether its node sits inside a linear run (one parent with one child, itself
/// with one child): only such nodes may be folded away.
fn walk(conversation: &Conversation) -> Vec<(TreeLine, bool, &str)> {
    let cursor = conversation.cursor();
    let mut lines = Vec::with_capacity(conversation.len());
    // (message, lead for its own line, prefix for its descendants, whether it is an only child)
    let mut stack: Vec<(&Message, String, String, bool)> =
        vec![(conversation.root(), String::new(), String::new(), false)];
    while let Some((m, lead, body, only_child)) = stack.pop() {
        let children = conversation.children(&m.id);
        let interior = only_child && children.len() == 1;
        lines.push((
            TreeLine {
                number: lines.len(),
                lead,
                text: describe(m),
                is_current: m.id == cursor,
            },
            interior,
            m.id.as_str(),
        ));
        if children.len() == 1 {
            stack.push((children[0], body.clone(), body, true));
        } else {
            let last = children.len().saturating_sub(1);
            for (i, child) in children.iter().enumerate().rev() {
                let (branch, under) = if i == last {
                    ("└─ ", "   ")
                } else {
                    ("├─ ", "│  ")
                };
                stack.push((
                    child,
                    format!("{body}{branch}"),
                    format!("{body}{under}"),
                    false,
                ));
            }
        }
    }
    lines
}

/// The default view: small trees whole; in large ones, long linear runs folded into one line each.
/// Forks, leaves, the first message after each fork, the cursor and the messages just above it are
/// always drawn, so every branch and the current position stay visible.
pub fn tree_rows(conversation: &Conversation, full: bool) -> Vec<Row> {
    let lines = walk(conversation);
    if full || lines.len() <= COLLAPSE_OVER {
        return lines
            .into_iter()
            .map(|(line, _, _)| Row::Node(line))
            .collect();
    }
    let near_cursor: std::collections::HashSet<&str> = conversation
        .chain(conversation.cursor())
        .iter()
        .rev()
        .take(KEEP_ABOVE_CURSOR + 1)
        .map(|m| m.id.as_str())
        .collect();
    let mut keep: Vec<bool> = lines
        .iter()
        .map(|(_, interior, id)| !interior || near_cursor.contains(id))
        .collect();
    // The first node of each run (the message right after a fork or a kept node) stays.
    for i in 1..lines.len() {
        if lines[i].1 && !lines[i - 1].1 {
            keep[i] = true;
        }
    }
    let mut rows = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if keep[i] {
            rows.push(Row::Node(lines[i].0.clone()));
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && !keep[i] {
            i += 1;
        }
        if i - start >= MIN_GAP {
            rows.push(Row::Gap {
                lead: lines[start].0.lead.clone(),
                first: start,
                last: i - 1,
            });
        } else {
            rows.extend(lines[start..i].iter().map(|(l, _, _)| Row::Node(l.clone())));
        }
    }
    rows
}

/// The whole drawing as plain text, one line per row.
pub fn render_plain(conversation: &Conversation, lang: Lang) -> String {
    render_rows(&tree_rows(conversation, false), lang)
}

pub fn render_rows(rows: &[Row], lang: Lang) -> String {
    let mut out = String::new();
    for row in rows {
        out.push_str(&format_row(row, lang));
        out.push('\n');
    }
    out
}

pub fn format_row(row: &Row, lang: Lang) -> String {
    match row {
        Row::Node(line) => format_line(line, lang),
        Row::Gap { lead, first, last } => {
            let n = last - first + 1;
            match lang {
                Lang::En => {
                    format!("{lead}┆ [{first}–{last}] {n} messages (/tree --full shows them)")
                }
                Lang::Zh => format!("{lead}┆ [{first}–{last}] {n} 条消息（/tree --full 全部显示）"),
            }
        }
    }
}

pub fn format_line(line: &TreeLine, lang: Lang) -> String {
    let mark = if line.is_current {
        match lang {
            Lang::En => " ← current",
            Lang::Zh => " ← 当前",
        }
    } else {
        ""
    };
    format!("{}[{}] {}{}", line.lead, line.number, line.text, mark)
}

/// `role: one-line preview`, with tool calls as `[tool call: name(args…)]`.
pub fn describe(m: &Message) -> String {
    let mut text = preview(&m.content, PREVIEW_CHARS);
    for call in m.calls() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!(
            "[tool call: {}({})]",
            call.function.name,
            preview(&call.function.arguments, 40)
        ));
    }
    if m.interrupted {
        text.push_str(" (interrupted)");
    }
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    format!("{role}: {text}")
}

/// The text on one line, whitespace collapsed, cut to `max` characters with an ellipsis.
pub fn preview(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for word in text.split_whitespace() {
        if count > 0 {
            out.push(' ');
            count += 1;
        }
        for c in word.chars() {
            if count >= max {
                out.push('…');
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn sample() -> Conversation {
        let mut c = Conversation::new("c", "You are a helpful assistant.\nBe brief.");
        let u1 = c.add(Message::new(Role::User, "Hello there")).unwrap();
        c.add(Message::new(Role::Assistant, "Hi! How can I help?"))
            .unwrap();
        c.add(Message::new(Role::User, "Read main.rs")).unwrap();
        c.add(Message {
            tool_calls: Some(vec![ToolCall::new(
                "c1",
                "read_file",
                r#"{"filepath":"main.rs"}"#,
            )]),
            ..Message::new(Role::Assistant, "")
        })
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
        for line in tree_lines(&c) {
            let id = c.id_by_number(line.number).unwrap();
            assert_eq!(describe(c.get(id).unwrap()), line.text);
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
            render_rows(&tree_rows(&c, true), Lang::En).lines().count(),
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
        let rows = tree_rows(&c, false);
        assert!(rows.len() < 80, "{} rows", rows.len());
        let text = render_rows(&rows, Lang::En);
        assert!(text.contains("← current"));
    }

    #[test]
    fn chinese_mark() {
        let c = Conversation::new("c", "sys");
        assert_eq!(render_plain(&c, Lang::Zh), "[0] system: sys ← 当前\n");
    }
}
