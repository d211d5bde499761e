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

pub fn tree_lines(conversation: &Conversation) -> Vec<TreeLine> {
    let cursor = conversation.cursor();
    let mut lines = Vec::with_capacity(conversation.len());
    // (message, lead for its own line, prefix for its descendants)
    let mut stack: Vec<(&Message, String, String)> =
        vec![(conversation.root(), String::new(), String::new())];
    while let Some((m, lead, body)) = stack.pop() {
        lines.push(TreeLine {
            number: lines.len(),
            lead,
            text: describe(m),
            is_current: m.id == cursor,
        });
        let children = conversation.children(&m.id);
        if children.len() == 1 {
            stack.push((children[0], body.clone(), body));
        } else {
            let last = children.len().saturating_sub(1);
            for (i, child) in children.iter().enumerate().rev() {
                let (branch, under) = if i == last {
                    ("└─ ", "   ")
                } else {
                    ("├─ ", "│  ")
                };
                stack.push((child, format!("{body}{branch}"), format!("{body}{under}")));
            }
        }
    }
    lines
}

/// The whole drawing as plain text, one line per node.
pub fn render_plain(conversation: &Conversation, lang: Lang) -> String {
    let mut out = String::new();
    for line in tree_lines(conversation) {
        out.push_str(&format_line(&line, lang));
        out.push('\n');
    }
    out
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

    #[test]
    fn chinese_mark() {
        let c = Conversation::new("c", "sys");
        assert_eq!(render_plain(&c, Lang::Zh), "[0] system: sys ← 当前\n");
    }
}
