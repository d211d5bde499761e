//! What the page shows, as data: the tree (every node, with its column), the branch at the cursor
//! (Markdown rendered to HTML, raw HTML escaped, links only to the web or mail), the status; and
//! the whole tree as one self-contained HTML file (`/export --html`).

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, html};
use serde_json::{Value, json};

use new_core::conversation::{Conversation, Message};
use new_core::escape::{escape_controls, escape_controls_keep_lines};
use new_core::fs::hash;
use new_core::mcp::{Manager, State, describe};
use new_core::session::{ManageError, Session};
use new_core::vocab::Role;

/// The page's script, style and skeleton, ours, embedded.
pub const PAGE_HTML: &str = include_str!("assets/page.html");
pub const PAGE_JS: &str = include_str!("assets/page.js");
pub const PAGE_CSS: &str = include_str!("assets/page.css");

/// A node's line in the tree: its first words.
const LABEL_CHARS: usize = 80;

/// A link's address as written, when it goes to the web or to mail; others (`javascript:`,
/// `data:`, `file:`, and a fragment of this page: `#t=…` would put a secret of the model's choice
/// in the address the page reads its own from) lead nowhere.
fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
}

/// Markdown as HTML: raw HTML in it is shown as text, links lead only to the web or mail, and
/// images are their alternative text (the page loads nothing from elsewhere).
pub fn markdown_html(text: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    let mut in_image = 0usize;
    let events = Parser::new_ext(text, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::Image { .. }) => {
            in_image += 1;
            None
        }
        Event::End(pulldown_cmark::TagEnd::Image) => {
            in_image = in_image.saturating_sub(1);
            None
        }
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) if !safe_url(&dest_url) => Some(Event::Start(Tag::Link {
            link_type,
            dest_url: CowStr::Borrowed("#"),
            title,
            id,
        })),
        other => Some(other),
    });
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    html::push_html(&mut out, events);
    out
}

/// The first words of a message, on one line.
fn label(m: &Message) -> String {
    let text = if m.content.trim().is_empty() {
        match m.extra.tool_calls.as_deref() {
            Some(calls) if !calls.is_empty() => calls
                .iter()
                .map(|c| c.function.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        }
    } else {
        m.content.clone()
    };
    let line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(LABEL_CHARS)
        .collect();
    line
}

fn role_name(role: &Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Every node in the order of `/tree` (its numbers), each with its parent and its column: a
/// column more below a node with more than one child, so a long chain stays in one.
fn tree_nodes(c: &Conversation, with_content: bool) -> Vec<Value> {
    let cursor = c.cursor();
    let order = c.preorder();
    let mut column: HashMap<&str, u32> = HashMap::with_capacity(order.len());
    let mut fan: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut out = Vec::with_capacity(order.len());
    for (n, (_, m)) in order.iter().enumerate() {
        let parent = m.parent_id.as_deref();
        // Below a fork, each child is drawn `├` (the last `└`), a column further in.
        let mut fork = None;
        let col = match parent {
            None => 0,
            Some(p) => {
                let (kids, seen) = fan.entry(p).or_insert_with(|| (c.children(p).len(), 0));
                *seen += 1;
                if *kids > 1 {
                    fork = Some(if *seen == *kids { "last" } else { "mid" });
                }
                column.get(p).copied().unwrap_or(0) + u32::from(*kids > 1)
            }
        };
        column.insert(m.id.as_str(), col);
        let mut node = json!({
            "id": m.id.as_str(),
            "parent": parent,
            "n": n,
            "col": col,
            "role": role_name(&m.role),
            // The root is the system prompt (with AGENTS.md, memory, the environment): not
            // the page's to show, nor a shared file's.
            "label": if parent.is_some() { label(m) } else { String::new() },
        });
        if m.id.as_str() == cursor {
            node["current"] = json!(true);
        }
        if let Some(fork) = fork {
            node["fork"] = json!(fork);
        }
        if m.side {
            node["side"] = json!(true);
        }
        if c.undone.contains(m.id.as_str()) {
            node["undone"] = json!(true);
        }
        if with_content && parent.is_some() {
            node["message"] = message_json(m);
        }
        out.push(node);
    }
    out
}

/// A message as the page shows it in a branch.
fn message_json(m: &Message) -> Value {
    let mut v = json!({
        "id": m.id.as_str(),
        "role": role_name(&m.role),
    });
    match m.role {
        Role::User | Role::Assistant => v["html"] = json!(markdown_html(&m.content)),
        Role::System | Role::Tool => v["text"] = json!(m.content),
    }
    if let Some(r) = m.extra.rare.reasoning.as_deref().filter(|r| !r.is_empty()) {
        v["reasoning"] = json!(r);
    }
    if let Some(calls) = m.extra.tool_calls.as_deref() {
        v["calls"] = calls
            .iter()
            .map(|c| {
                json!({
                    "call": c.id,
                    "name": escape_controls(&c.function.name),
                    "arguments": escape_controls_keep_lines(&c.function.arguments),
                })
            })
            .collect();
    }
    if let Some(id) = m.extra.tool_call_id.as_deref() {
        v["call"] = json!(id);
    }
    if let Some(model) = m.extra.model.as_deref() {
        v["model"] = json!(model);
    }
    if m.interrupted {
        v["interrupted"] = json!(true);
    }
    v
}

/// The branch from the root to the cursor, each message with its siblings (for `< 2/3 >`).
fn branch(c: &Conversation) -> Vec<Value> {
    c.chain(c.cursor())
        .into_iter()
        .filter(|m| m.parent_id.is_some())
        .map(|m| {
            let mut v = message_json(m);
            if let Some(parent) = m.parent_id.as_deref() {
                let siblings: Vec<&str> =
                    c.children(parent).iter().map(|s| s.id.as_str()).collect();
                if siblings.len() > 1 {
                    v["siblings"] = json!(siblings);
                }
            }
            v
        })
        .collect()
}

/// Everything the page draws, at once.
pub fn state(engine: &Session) -> Value {
    let c = engine.chat.conversation();
    let conversations: Vec<Value> = engine
        .list(false, 50)
        .map(|l| {
            l.conversations
                .iter()
                .map(|x| {
                    json!({
                        "id": x.summary.id,
                        "title": x.summary.title,
                        "messages": x.summary.messages,
                        "current": x.current,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let totals = &engine.totals.0;
    let mcp: Vec<Value> = mcp_health(engine)
        .into_iter()
        .map(|(name, state, detail)| json!({"name": name, "state": state, "detail": detail}))
        .collect();
    let (used, window) = engine.context_use();
    let context = (window > 0).then(|| (used.saturating_mul(100) / window).min(999));
    json!({
        "conversation": {"id": c.id, "title": engine.title()},
        "cursor": c.cursor(),
        "nodes": tree_nodes(c, false),
        "branch": branch(c),
        "conversations": conversations,
        "status": {
            "model": engine.config.model,
            "mode": engine.policy.mode.as_str(),
            "input_tokens": totals.input_tokens,
            "output_tokens": totals.output_tokens,
            "turns": engine.totals.2,
            "context_tokens": used,
            "context_window": window,
            "context_percent": context,
            "sandbox": engine.tools.context().os_sandbox.as_ref().map(|s| s.is_on()),
            "hooks": engine.hooks.is_some(),
            "mcp": mcp,
        },
    })
}

/// Each MCP server's health: its name, one word (`ready`, `failed`, `starting`, `waiting`, `off`)
/// and the state in words.
pub fn mcp_health(engine: &Session) -> Vec<(String, &'static str, String)> {
    let Some(manager) = engine.tools.source::<Manager>() else {
        return Vec::new();
    };
    manager
        .statuses()
        .into_iter()
        .map(|s| {
            let word = match &s.state {
                State::Ready => "ready",
                State::Failed(_) => "failed",
                State::Starting => "starting",
                State::Waiting => "waiting",
                State::Disabled | State::Held(_) | State::Untrusted => "off",
            };
            (s.name, word, describe(&s.state))
        })
        .collect()
}

/// JSON made safe inside a `<script>` element: no `<`, `>` or `&` as such.
fn script_json(value: &Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The whole tree as one HTML page that needs nothing else: the page's style and script inline
/// (allowed by their hashes, nothing else runs), the tree and every message as data.
pub fn export_page(c: &Conversation, title: &str) -> String {
    let data = json!({
        "static": true,
        "conversation": {"id": c.id, "title": title},
        "cursor": c.cursor(),
        "nodes": tree_nodes(c, true),
    });
    let script_hash = BASE64.encode(hex_bytes(&hash::digest(PAGE_JS.as_bytes())));
    let style_hash = BASE64.encode(hex_bytes(&hash::digest(PAGE_CSS.as_bytes())));
    let body = PAGE_HTML
        .split_once("<!--body-->")
        .and_then(|(_, rest)| rest.split_once("<!--/body-->"))
        .map(|(body, _)| body)
        .unwrap_or("");
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
script-src 'sha256-{script_hash}'; style-src 'sha256-{style_hash}'; img-src data:; base-uri 'none'; form-action 'none'\">\n\
<title>{}</title>\n<style>{PAGE_CSS}</style></head>\n<body class=\"static\">{body}\n\
<script type=\"application/json\" id=\"new-data\">{}</script>\n<script>{PAGE_JS}</script>\n</body></html>\n",
        escape_html(if title.is_empty() { &c.id } else { title }),
        script_json(&data),
    )
}

/// `/export --html [FILE]`: the page written to FILE (default `ID.html`). Where it went.
pub fn export_html(engine: &Session, file: Option<PathBuf>) -> Result<PathBuf, ManageError> {
    let c = engine.chat.conversation();
    if c.is_empty() {
        return Err(ManageError::NothingToExport);
    }
    let path = file.unwrap_or_else(|| PathBuf::from(format!("{}.html", c.id)));
    fs::write(&path, export_page(c, &engine.title())).map_err(|error| ManageError::Write {
        path: path.clone(),
        error,
    })?;
    Ok(path)
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// Text safe between HTML tags and in attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_script_links_in_markdown_run_nothing() {
        let html = markdown_html(
            "hi <script>alert(1)</script> <img src=x onerror=alert(2)>\n\n\
[a](javascript:alert(3)) [b](https://example.com) ![c](https://evil.example/x.png)",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        let fragment = markdown_html("[reload](#t=0123abcd)");
        assert!(!fragment.contains("#t="), "{fragment}");
        assert!(html.contains("href=\"https://example.com\""), "{html}");
    }

    #[test]
    fn json_in_a_script_element_cannot_close_it() {
        let s = script_json(&json!({"t": "</script><script>alert(1)</script>&"}));
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&'),
            "{s}"
        );
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["t"], "</script><script>alert(1)</script>&");
    }
}
