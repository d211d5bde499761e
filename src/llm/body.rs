//! A request's body as the text sent, written again only where it differs from the one before.
//!
//! The next request of a conversation repeats the branch the last one sent: the next round of a
//! turn adds the answer and its tool results, the next turn the user's message. What it repeats
//! is copied as the text it was written as (one copy, in the same buffer once the last request
//! has let it go), and only the rest is serialised. Each message is known again by a key that
//! costs no pass over its text: a node's message as stored by the node's id (a node is never
//! rewritten), anything else by itself or a digest of itself.
//!
//! A body is `head` (up to the `[` that opens the message list), the list's items, then the
//! fields of `tail`. An item is written from a span of the request's messages and a variant (what
//! else its text depends on: reasoning sent back, a cache mark); it is copied when its span and
//! variant are those of the item at its place last time and every message up to its end is the
//! same.

use std::borrow::Cow;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use serde::Serialize;

use crate::session::Id;
use crate::vocab::{ChatMessage, Role};

/// The request messages an item is written from (`from..to`), and what else its text depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub from: usize,
    pub to: usize,
    pub variant: u8,
}

/// At most this much of the messages that are not a node's as stored is kept whole for the
/// comparison (the system prompt, instructions, a result not run); past it they are never the
/// same (written again each time).
const KEPT_WHOLE: usize = 256 * 1024;

/// What tells that a message of the next request is this one.
enum Key {
    /// A node's message: its id, role and length, and when its text is not the node's own (a
    /// preview of a long result, an interrupted answer's marker), a digest of that text.
    Node {
        id: Id,
        role: Role,
        len: usize,
        digest: Option<u64>,
    },
    /// Any other message, kept whole.
    Whole(Box<ChatMessage<'static>>),
    /// One too large to keep: never the same.
    Unknown,
}

impl Key {
    fn of(m: &ChatMessage<'_>, hasher: &impl BuildHasher, budget: &mut usize) -> Key {
        if let Some(id) = m.source {
            return Key::Node {
                id: id.clone(),
                role: m.role,
                len: m.content.len(),
                digest: digest(m, hasher),
            };
        }
        let size = m.content.len()
            + m.reasoning().map_or(0, str::len)
            + m.tool_calls()
                .iter()
                .map(|c| c.function.arguments.len() + 64)
                .sum::<usize>();
        if size > *budget {
            return Key::Unknown;
        }
        *budget -= size;
        Key::Whole(Box::new(m.clone().into_owned()))
    }

    fn size(&self) -> usize {
        match self {
            Key::Whole(m) => {
                m.content.len()
                    + m.reasoning().map_or(0, str::len)
                    + m.tool_calls()
                        .iter()
                        .map(|c| c.function.arguments.len() + 64)
                        .sum::<usize>()
            }
            _ => 0,
        }
    }

    fn matches(&self, m: &ChatMessage<'_>, hasher: &impl BuildHasher) -> bool {
        match self {
            Key::Node {
                id,
                role,
                len,
                digest: d,
            } => {
                m.source == Some(id)
                    && m.role == *role
                    && m.content.len() == *len
                    && digest(m, hasher) == *d
            }
            Key::Whole(whole) => m.source.is_none() && **whole == *m,
            Key::Unknown => false,
        }
    }
}

/// A digest of a node's message whose text is not the node's own; none for one that is.
fn digest(m: &ChatMessage<'_>, hasher: &impl BuildHasher) -> Option<u64> {
    match &m.content {
        Cow::Borrowed(_) => None,
        Cow::Owned(text) => {
            let mut h = hasher.build_hasher();
            h.write(text.as_bytes());
            Some(h.finish())
        }
    }
}

/// What the last body was written from, and where its items end.
struct Last {
    text: Bytes,
    head: usize,
    keys: Vec<Key>,
    /// Each item's span and the offset in `text` just after it.
    items: Vec<(Span, usize)>,
}

/// The last body a client sent, to write the next from. A copy of a client starts without one.
pub struct Reuse {
    /// Whether to keep what the next body needs (not for a body written once).
    keep: bool,
    last: Mutex<Option<Last>>,
    /// Keyed once per process, so that no text can be made to collide with another.
    hasher: std::collections::hash_map::RandomState,
    /// How much of the last body written was copied from the one before.
    copied: AtomicUsize,
}

impl Default for Reuse {
    fn default() -> Self {
        Reuse {
            keep: true,
            last: Mutex::default(),
            hasher: Default::default(),
            copied: AtomicUsize::new(0),
        }
    }
}

impl Clone for Reuse {
    fn clone(&self) -> Self {
        Reuse::default()
    }
}

impl Reuse {
    /// The body for `messages`: `head`, then the items of `spans` as a JSON list (each made by
    /// `make` when it is not copied), then the fields of `tail` (an object). The same text as
    /// writing it all afresh.
    pub(crate) fn write<T: Serialize>(
        &self,
        messages: &[ChatMessage<'_>],
        head: &[u8],
        spans: impl IntoIterator<Item = Span>,
        mut make: impl FnMut(Span) -> T,
        tail: &impl Serialize,
    ) -> Bytes {
        // Taken out while writing: a request written beside this one starts afresh.
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut spans = spans.into_iter();
        let mut written: Vec<(Span, usize)> = Vec::new();
        let mut pending = None;
        let mut copied = 0;
        let (mut buf, mut keys) = match last {
            Some(last) if last.text.get(..last.head) == Some(head) => {
                let same = messages
                    .iter()
                    .zip(&last.keys)
                    .take_while(|(m, k)| k.matches(m, &self.hasher))
                    .count();
                let mut cut = last.head;
                for span in spans.by_ref() {
                    match last.items.get(written.len()) {
                        Some(&(s, end)) if s == span && span.to <= same => {
                            written.push((span, end));
                            cut = end;
                        }
                        _ => {
                            pending = Some(span);
                            break;
                        }
                    }
                }
                let mut keys = last.keys;
                keys.truncate(same);
                copied = cut;
                let rest = room(&messages[same..]);
                // The last text is this one's start: kept in place once the last request has
                // let it go, copied while it has not.
                let buf = if last.text.is_unique() {
                    let mut buf = Vec::from(last.text);
                    buf.truncate(cut);
                    buf.reserve(rest);
                    buf
                } else {
                    let mut buf = Vec::with_capacity(cut + rest);
                    buf.extend_from_slice(&last.text[..cut]);
                    buf
                };
                (buf, keys)
            }
            _ => {
                let mut buf = Vec::with_capacity(head.len() + room(messages));
                buf.extend_from_slice(head);
                (buf, Vec::with_capacity(messages.len()))
            }
        };
        for span in pending.into_iter().chain(spans) {
            if !written.is_empty() {
                buf.push(b',');
            }
            serde_json::to_writer(&mut buf, &make(span)).expect("a request body is JSON");
            written.push((span, buf.len()));
        }
        buf.push(b']');
        let at = buf.len();
        serde_json::to_writer(&mut buf, tail).expect("a request body is JSON");
        // The tail's fields follow the list's: its `{` becomes a comma, or goes when it has none.
        if buf[at..] == *b"{}" {
            buf.truncate(at);
            buf.push(b'}');
        } else {
            buf[at] = b',';
        }
        let text = Bytes::from(buf);
        self.copied.store(copied, Ordering::Relaxed);
        if !self.keep {
            return text;
        }
        let mut budget = KEPT_WHOLE.saturating_sub(keys.iter().map(Key::size).sum());
        for m in &messages[keys.len()..] {
            keys.push(Key::of(m, &self.hasher, &mut budget));
        }
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Last {
            text: text.clone(),
            head: head.len(),
            keys,
            items: written,
        });
        text
    }
}

impl Reuse {
    /// For a body written once: nothing is kept for a next one.
    pub fn once() -> Reuse {
        Reuse {
            keep: false,
            ..Reuse::default()
        }
    }

    /// How many bytes of the last body written were copied from the one before.
    pub fn copied(&self) -> usize {
        self.copied.load(Ordering::Relaxed)
    }
}

/// Room for the text of `messages` (their texts and some framing each), so that a long branch's
/// text is not copied over and over as it grows.
fn room(messages: &[ChatMessage<'_>]) -> usize {
    messages.iter().map(|m| m.content.len() + 64).sum::<usize>() + 4096
}

/// `{"model":<model>,"messages":[`: the head of both providers' bodies.
pub(crate) fn head(model: &str) -> Vec<u8> {
    let mut head = Vec::with_capacity(model.len() + 32);
    head.extend_from_slice(br#"{"model":"#);
    serde_json::to_writer(&mut head, model).expect("a string is JSON");
    head.extend_from_slice(br#","messages":["#);
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Context, Settings};
    use crate::llm::{ChatRequest, ProviderSettings, anthropic, openai};
    use crate::session::{Conversation, Message};
    use crate::vocab::ToolCall;

    type Writer = fn(&ChatRequest<'_>, &ProviderSettings, &Reuse) -> Bytes;

    /// Writes `request` through `reuse` and afresh: the same text. Returns how much was copied.
    fn same_text(
        write: Writer,
        s: &ProviderSettings,
        reuse: &Reuse,
        request: &ChatRequest,
    ) -> usize {
        let fresh = write(request, s, &Reuse::once());
        let reused = write(request, s, reuse);
        assert_eq!(
            std::str::from_utf8(&reused).unwrap(),
            std::str::from_utf8(&fresh).unwrap()
        );
        serde_json::from_slice::<serde_json::Value>(&reused).expect("JSON");
        reuse.copied()
    }

    fn asking(calls: &[&str], reasoning: bool) -> Message {
        let mut m = Message::new(Role::Assistant, "");
        m.extra.tool_calls = Some(
            calls
                .iter()
                .map(|id| ToolCall::new(*id, "read_file", r#"{"path":"a b"}"#))
                .collect(),
        );
        if reasoning {
            m.extra.rare.reasoning = Some("let me look".into());
            m.extra.rare.reasoning_signature = Some("sig".into());
        }
        m
    }

    /// A turn of several rounds, the next turn, a wrap-up, a changed system prompt and model, a
    /// branch from the middle, previews that change, an interrupted answer: each request's text
    /// is what writing it afresh gives, and what repeats the last one is copied from it.
    fn rounds_and_branches(write: Writer, s: &ProviderSettings) {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results");
        let shaped = |preview_tokens| {
            Context::new(
                Settings {
                    tool_result_threshold: 1000,
                    preview_tokens,
                    ..Settings::default()
                },
                "m",
            )
        };
        let context = shaped(100);
        let big: String = (0..3000).map(|i| format!("line \"{i}\"\n")).collect();
        let reuse = Reuse::default();
        let mut c = Conversation::new("c", "system\tprompt");
        c.add(Message::new(Role::User, "question ✓")).unwrap();
        let question = c.cursor().to_string();
        let copied = |c: &Conversation, context: &Context, model: &str, wrap: Option<&str>| {
            let mut messages = context.request_messages(c, c.cursor(), &results);
            if let Some(text) = wrap {
                messages.push(ChatMessage::text(Role::User, text.to_string()));
            }
            let request = ChatRequest {
                model: model.into(),
                messages,
                ..Default::default()
            };
            same_text(write, s, &reuse, &request)
        };
        assert_eq!(copied(&c, &context, "m", None), 0, "nothing before");
        c.add(asking(&["k1", "k2"], true)).unwrap();
        c.add(Message::tool_result("k2", "small")).unwrap();
        c.add(Message::tool_result("k1", big.clone())).unwrap();
        let round2 = copied(&c, &context, "m", None);
        assert!(round2 > 20, "the question is copied: {round2}");
        c.add(asking(&["k3"], false)).unwrap();
        c.add(Message::tool_result("k3", big.clone())).unwrap();
        let round3 = copied(&c, &context, "m", None);
        // (Anthropic's last turn is written again: its cache mark moves on.)
        assert!(round3 > round2 + 200, "the first round is copied: {round3}");
        // The same again (a retry): all of it.
        let again = copied(&c, &context, "m", None);
        assert!(again > round3, "{again}");
        // A last answer asked for: what it moves is written again.
        copied(&c, &context, "m", Some("Say where you stand."));
        c.add(Message::new(Role::Assistant, "done")).unwrap();
        c.add(Message::new(Role::User, "next")).unwrap();
        assert!(copied(&c, &context, "m", None) > round3);
        // Previews made another way are not the ones sent before.
        copied(&c, &shaped(50), "m", None);
        copied(&c, &context, "m", None);
        // Another model: a new head, nothing copied.
        assert_eq!(copied(&c, &context, "other", None), 0);
        copied(&c, &context, "m", None);
        // Another system prompt.
        c.set_system_prompt("another prompt");
        copied(&c, &context, "m", None);
        // A branch from the first question: its start is copied, the rest written.
        c.move_cursor(&question).unwrap();
        let mut cut = Message::new(Role::Assistant, "partial answer  ");
        cut.interrupted = true;
        c.add(cut).unwrap();
        copied(&c, &context, "m", None);
        c.add(Message::new(Role::User, "go on")).unwrap();
        assert!(copied(&c, &context, "m", None) > 20);
        // While the last text is still held (being sent), the next is written beside it.
        let held = write(
            &ChatRequest {
                model: "m".into(),
                messages: context.request_messages(&c, c.cursor(), &results),
                ..Default::default()
            },
            s,
            &reuse,
        );
        c.add(asking(&["k4"], true)).unwrap();
        assert!(copied(&c, &context, "m", None) > 20);
        assert!(held.len() > 20);
    }

    #[test]
    fn openai_bodies_repeat_the_last_text_as_written_afresh() {
        rounds_and_branches(openai::request_bytes, &openai::tests::local(true, 1000));
    }

    #[test]
    fn anthropic_bodies_repeat_the_last_text_as_written_afresh() {
        let mut s = anthropic::tests::settings();
        rounds_and_branches(anthropic::request_bytes, &s);
        s.prompt_cache = false;
        rounds_and_branches(anthropic::request_bytes, &s);
    }
}
