//! Exports of a conversation: the current branch as Markdown, the whole tree as JSON.

use serde_json::{Value, json};

use super::record::format_timestamp;
use super::tree::Conversation;
use crate::vocab::Role;

/// The branch from the root to the cursor as Markdown, system prompt included.
pub fn branch_markdown(c: &Conversation, title: &str) -> String {
    let chain = c.chain(c.cursor());
    let mut out = format!(
        "# {}\n\n",
        if title.is_empty() {
            "Conversation"
        } else {
            title
        }
    );
    let n = chain.len().saturating_sub(1);
    out.push_str(&format!(
        "Conversation `{}`, {n} {} on this branch.\n",
        c.id,
        if n == 1 { "message" } else { "messages" }
    ));
    for m in chain {
        let when = format_timestamp(&m.timestamp);
        match m.role {
            Role::System => {
                out.push_str("\n<details><summary>System prompt</summary>\n\n");
                out.push_str(m.content.trim());
                out.push_str("\n\n</details>\n");
            }
            Role::User if m.is_summary() => {
                let info = m.extra.rare.summary.as_ref().expect("a summary");
                let focus = info
                    .focus
                    .as_deref()
                    .map(|f| format!(", focus: {f}"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "\n## Summary (compaction)\n\n_{when} · stands for the {} messages above up to `{}`{focus}; from here on, requests send it instead of them ({} → {} tokens)_\n\n{}\n",
                    info.messages,
                    info.replaces,
                    info.tokens_before,
                    info.tokens_after,
                    m.content.trim()
                ));
            }
            Role::User => {
                out.push_str(&format!("\n## User\n\n_{when}_\n\n{}\n", m.content.trim()));
            }
            Role::Assistant => {
                let model = m
                    .extra
                    .model
                    .as_deref()
                    .map(|m| format!(" · {m}"))
                    .unwrap_or_default();
                out.push_str(&format!("\n## Assistant\n\n_{when}{model}_\n\n"));
                if let Some(r) = m.extra.rare.reasoning.as_deref().filter(|r| !r.is_empty()) {
                    out.push_str("<details><summary>Reasoning</summary>\n\n");
                    out.push_str(r.trim());
                    out.push_str("\n\n</details>\n\n");
                }
                if !m.content.trim().is_empty() {
                    out.push_str(m.content.trim());
                    out.push('\n');
                }
                for call in m.calls() {
                    out.push_str(&format!(
                        "\n**Tool call** `{}` (`{}`)\n\n```json\n{}\n```\n",
                        call.function.name,
                        call.id,
                        pretty_json(&call.function.arguments)
                    ));
                }
                if m.interrupted {
                    out.push_str("\n_(interrupted)_\n");
                }
            }
            Role::Tool => {
                out.push_str(&format!(
                    "\n**Tool result** (`{}`)\n\n{}\n",
                    m.extra.tool_call_id.as_deref().unwrap_or("?"),
                    fenced(&m.content)
                ));
            }
        }
    }
    out
}

/// The whole tree as one JSON document: every message in `/tree` order with its number and
/// children, in the file format's field names.
pub fn tree_json(c: &Conversation, title: &str) -> Value {
    let messages: Vec<Value> = c
        .preorder()
        .into_iter()
        .enumerate()
        .map(|(number, (_, m))| {
            let mut v = serde_json::to_value(m).expect("messages serialize");
            v["number"] = json!(number);
            v["children_ids"] = json!(
                c.children(&m.id)
                    .iter()
                    .map(|k| k.id.as_str())
                    .collect::<Vec<_>>()
            );
            v
        })
        .collect();
    json!({
        "id": c.id,
        "title": title,
        "root_id": c.root_id,
        "cursor": c.cursor(),
        "metadata": c.metadata,
        "messages": messages,
    })
}

fn pretty_json(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}

/// A code fence long enough not to be closed by backticks inside the text.
pub fn fenced(text: &str) -> String {
    let mut fence = "```".to_string();
    while text.contains(&fence) {
        fence.push('`');
    }
    format!("{fence}\n{}\n{fence}", text.trim_end_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Message;
    use crate::vocab::ToolCall;

    #[test]
    fn markdown_holds_the_branch_only() {
        let mut c = Conversation::new("c1", "Be brief.");
        let u = c.add(Message::new(Role::User, "Read a.txt")).unwrap();
        c.add(Message::new(Role::Assistant, "other branch"))
            .unwrap();
        c.move_cursor(&u).unwrap();
        c.add(
            Message::new(Role::Assistant, "").with_calls(vec![ToolCall::new(
                "k1",
                "read_file",
                r#"{"filepath":"a.txt"}"#,
            )]),
        )
        .unwrap();
        c.add(Message::tool_result("k1", "```\ncode\n```")).unwrap();
        c.add(Message::new(Role::Assistant, "It holds code."))
            .unwrap();
        let md = branch_markdown(&c, "Reading");
        assert!(md.starts_with("# Reading\n\nConversation `c1`, 4 messages on this branch.\n"));
        assert!(md.contains("<summary>System prompt</summary>\n\nBe brief."));
        assert!(md.contains(
            "**Tool call** `read_file` (`k1`)\n\n```json\n{\n  \"filepath\": \"a.txt\"\n}\n```"
        ));
        assert!(md.contains("````\n```\ncode\n```\n````"));
        assert!(md.ends_with("It holds code.\n"));
        assert!(!md.contains("other branch"));
    }

    #[test]
    fn json_holds_the_whole_tree() {
        let mut c = Conversation::new("c1", "sys");
        let u = c.add(Message::new(Role::User, "q")).unwrap();
        c.add(Message::new(Role::Assistant, "a1")).unwrap();
        c.move_cursor(&u).unwrap();
        c.add(Message::new(Role::Assistant, "a2")).unwrap();
        let v = tree_json(&c, "T");
        let msgs = v["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 4);
        assert_eq!(msgs[1]["children_ids"].as_array().unwrap().len(), 2);
        assert_eq!(msgs[3]["content"], "a2");
        assert_eq!(msgs[3]["number"], 3);
        assert_eq!(v["cursor"], msgs[3]["msg_id"]);
    }
}
