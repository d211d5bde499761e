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

use crate::vocab::Id;
use crate::vocab::{ChatMessage, Role};
use std::collections::hash_map::RandomState;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;

/// The request messages an item is written from (`from..to`), and what else its text depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub from: u32,
    pub to: u32,
    pub variant: u8,
}

impl Span {
    /// Message `i` alone.
    pub(crate) fn one(i: usize, variant: u8) -> Span {
        Span {
            from: i as u32,
            to: i as u32 + 1,
            variant,
        }
    }
}

/// At most this much of the messages that are not a node's as stored is kept whole for the
/// comparison (the system prompt, instructions, a result not run); past it they are never the
/// same (written again each time).
const KEPT_WHOLE: usize = 256 * 1024;

/// The most room a body kept for the next one keeps beyond its text.
const SLACK: usize = 64 * 1024;

/// What tells that a message of the next request is this one (24 bytes: one for each message
/// of a long branch).
enum Key {
    /// A node's message with the node's own text: its id, role and length.
    Node { id: Id, len: u32, role: Role },
    /// A node's message with a text made from it (a preview of a long result, an interrupted
    /// answer with its marker): the same and a digest of that text.
    Shaped(Box<(Id, u32, Role, u64)>),
    /// Any other message, kept whole.
    Whole(Box<ChatMessage<'static>>),
    /// One too large to keep: never the same.
    Unknown,
}

/// What of a message's texts a [`Key::Whole`] keeps.
fn whole_size(m: &ChatMessage<'_>) -> usize {
    m.content.len()
        + m.reasoning().map_or(0, str::len)
        + m.tool_calls()
            .iter()
            .map(|c| c.function.arguments.len() + 64)
            .sum::<usize>()
}

impl Key {
    fn of(m: &ChatMessage<'_>, hasher: &impl BuildHasher, budget: &mut usize) -> Key {
        if let Some(id) = m.source
            && let Ok(len) = u32::try_from(m.content.len())
        {
            return match &m.content {
                Cow::Borrowed(_) => Key::Node {
                    id: id.clone(),
                    len,
                    role: m.role,
                },
                Cow::Owned(text) => {
                    Key::Shaped(Box::new((id.clone(), len, m.role, digest(text, hasher))))
                }
            };
        }
        let size = whole_size(m);
        if size > *budget {
            return Key::Unknown;
        }
        *budget -= size;
        Key::Whole(Box::new(m.clone().into_owned()))
    }

    fn size(&self) -> usize {
        match self {
            Key::Whole(m) => whole_size(m),
            _ => 0,
        }
    }

    fn matches(&self, m: &ChatMessage<'_>, hasher: &impl BuildHasher) -> bool {
        let node = |id: &Id, len: u32, role: Role| {
            m.source == Some(id) && m.role == role && u32::try_from(m.content.len()) == Ok(len)
        };
        match (self, &m.content) {
            (Key::Node { id, len, role }, Cow::Borrowed(_)) => node(id, *len, *role),
            (Key::Shaped(shaped), Cow::Owned(text)) => {
                let (id, len, role, d) = &**shaped;
                node(id, *len, *role) && digest(text, hasher) == *d
            }
            (Key::Whole(whole), _) => m.source.is_none() && **whole == *m,
            _ => false,
        }
    }
}

/// A digest of a text made from a node.
fn digest(text: &str, hasher: &impl BuildHasher) -> u64 {
    let mut h = hasher.build_hasher();
    h.write(text.as_bytes());
    h.finish()
}

/// An item of the last body: its span, and the offset in the text just after it.
#[derive(Clone, Copy)]
struct Item {
    span: Span,
    end: u32,
}

/// What the last body was written from, and where its items end.
struct Last {
    /// Which body it is (see [`Ticket`]).
    ticket: u64,
    text: Bytes,
    head: usize,
    /// The keys of its first messages: those found the same as the body's before, and once it
    /// was answered with calls (another round follows), all.
    keys: Vec<Key>,
    items: Vec<Item>,
}

/// Names a body written, for [`Reuse::answered`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// The last body a client sent, to write the next from (let go when a turn ends). A copy of a
/// client starts without one.
pub struct Reuse {
    /// Whether to keep what the next body needs (not for a body written once).
    keep: bool,
    last: Mutex<Option<Last>>,
    /// Keyed once per process, so that no text can be made to collide with another.
    hasher: RandomState,
    /// How much of the last body written was copied from the one before.
    copied: AtomicUsize,
    /// Whether it was written in the buffer of the one before (which the request had let go).
    in_place: AtomicBool,
    /// The last ticket given.
    tickets: AtomicU64,
}

impl Default for Reuse {
    fn default() -> Self {
        Reuse {
            keep: true,
            last: Mutex::default(),
            hasher: Default::default(),
            copied: AtomicUsize::new(0),
            in_place: Default::default(),
            tickets: Default::default(),
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
    /// writing it all afresh. Its ticket is for [`Reuse::answered`].
    pub(crate) fn write<T: Serialize>(
        &self,
        messages: &[ChatMessage<'_>],
        head: &[u8],
        spans: impl IntoIterator<Item = Span>,
        mut make: impl FnMut(Span) -> T,
        tail: &impl Serialize,
    ) -> (Bytes, Ticket) {
        let ticket = Ticket(self.tickets.fetch_add(1, Ordering::Relaxed) + 1);
        // Taken out while writing: a request written beside this one starts afresh.
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut spans = spans.into_iter();
        // Kept only for a next body.
        let mut items: Vec<Item> = Vec::new();
        if self.keep {
            items.reserve_exact(spans.size_hint().0);
        }
        let mut pending = None;
        let mut copied = 0;
        let mut in_place = false;
        let (mut buf, keys) = match last {
            Some(last) if last.text.get(..last.head) == Some(head) => {
                let same = messages
                    .iter()
                    .zip(&last.keys)
                    .take_while(|(m, k)| k.matches(m, &self.hasher))
                    .count();
                let mut cut = last.head;
                for span in spans.by_ref() {
                    match last.items.get(items.len()) {
                        Some(&item) if item.span == span && span.to as usize <= same => {
                            items.push(item);
                            cut = item.end as usize;
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
                in_place = last.text.is_unique();
                let buf = if in_place {
                    let mut buf = Vec::from(last.text);
                    buf.truncate(cut);
                    buf.reserve_exact(rest);
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
                (buf, Vec::new())
            }
        };
        let mut first = items.is_empty();
        for span in pending.into_iter().chain(spans) {
            if !first {
                buf.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut buf, &make(span)).expect("a request body is JSON");
            if self.keep {
                items.push(Item {
                    span,
                    end: u32::try_from(buf.len()).unwrap_or(u32::MAX),
                });
            }
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
        // A body past what an offset holds is not kept (no server takes one).
        let keep = self.keep && u32::try_from(buf.len()).is_ok();
        if keep && buf.capacity() - buf.len() > SLACK {
            // Kept for the next body: without the room it did not need.
            buf.shrink_to_fit();
        }
        let text = Bytes::from(buf);
        self.copied.store(copied, Ordering::Relaxed);
        self.in_place.store(in_place, Ordering::Relaxed);
        if !keep {
            return (text, ticket);
        }
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Last {
            ticket: ticket.0,
            text: text.clone(),
            head: head.len(),
            keys,
            items,
        });
        (text, ticket)
    }

    /// The body `ticket` (written from `messages`) was answered; `more`: with calls, so that
    /// the next round repeats its messages, which are known again from now on. Without them
    /// the turn ends, and the body is let go. Only the last body written is kept.
    pub fn answered(&self, ticket: Ticket, messages: &[ChatMessage<'_>], more: bool) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(body) = last.as_mut().filter(|body| body.ticket == ticket.0) else {
            return;
        };
        if !more {
            *last = None;
            return;
        }
        let keys = &mut body.keys;
        let mut budget = KEPT_WHOLE.saturating_sub(keys.iter().map(Key::size).sum());
        keys.reserve_exact(messages.len().saturating_sub(keys.len()));
        for m in messages.get(keys.len()..).unwrap_or_default() {
            keys.push(Key::of(m, &self.hasher, &mut budget));
        }
    }

    /// For a body written once: nothing is kept for a next one.
    pub fn once() -> Reuse {
        Reuse {
            keep: false,
            ..Reuse::default()
        }
    }

    /// Lets go of the last body: the next is written afresh.
    pub fn clear(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// How many bytes of the last body written were copied from the one before.
    pub fn copied(&self) -> usize {
        self.copied.load(Ordering::Relaxed)
    }

    /// Whether the last body was written in the buffer of the one before.
    pub fn in_place(&self) -> bool {
        self.in_place.load(Ordering::Relaxed)
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
    use crate::conversation::{Conversation, Message};
    use crate::llm::{ChatRequest, ProviderSettings, anthropic, openai};
    use crate::vocab::ToolCall;
    use std::str;

    type Writer = fn(&ChatRequest<'_>, &ProviderSettings, &Reuse) -> (Bytes, Ticket);

    /// Writes `request` through `reuse` and afresh: the same text. Returns how much was copied.
    /// Each is answered with calls (another round follows).
    fn same_text(
        write: Writer,
        s: &ProviderSettings,
        reuse: &Reuse,
        request: &ChatRequest,
    ) -> usize {
        let (fresh, _) = write(request, s, &Reuse::once());
        let (reused, ticket) = write(request, s, reuse);
        assert_eq!(
            str::from_utf8(&reused).unwrap(),
            str::from_utf8(&fresh).unwrap()
        );
        serde_json::from_slice::<serde_json::Value>(&reused).expect("JSON");
        reuse.answered(ticket, &request.messages, true);
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
        let request = ChatRequest {
            model: "m".into(),
            messages: context.request_messages(&c, c.cursor(), &results),
            ..Default::default()
        };
        let (held, ticket) = write(&request, s, &reuse);
        reuse.answered(ticket, &request.messages, true);
        drop(request);
        c.add(asking(&["k4"], true)).unwrap();
        assert!(copied(&c, &context, "m", None) > 20);
        assert!(held.len() > 20);
    }

    #[test]
    fn only_the_last_body_answered_with_calls_is_kept() {
        let s = openai::tests::local(true, 1000);
        let mut c = Conversation::new("c", "system");
        c.add(Message::new(Role::User, "q")).unwrap();
        let reuse = Reuse::default();
        let head = head("m").len();
        fn request(c: &Conversation) -> ChatRequest<'_> {
            ChatRequest {
                model: "m".into(),
                messages: c.api_messages(c.cursor()),
                ..Default::default()
            }
        }
        let r = request(&c);
        let (_, first) = openai::request_bytes(&r, &s, &reuse);
        // Not answered yet: its messages are not known again.
        let (_, second) = openai::request_bytes(&r, &s, &reuse);
        assert_eq!(reuse.copied(), head);
        // An answer to a body before the last changes nothing.
        reuse.answered(first, &r.messages, true);
        let (_, third) = openai::request_bytes(&r, &s, &reuse);
        assert_eq!(reuse.copied(), head);
        reuse.answered(second, &r.messages, true);
        reuse.answered(third, &r.messages, true);
        c.add(asking(&["k1"], false)).unwrap();
        c.add(Message::tool_result("k1", "r")).unwrap();
        let r = request(&c);
        let (_, fourth) = openai::request_bytes(&r, &s, &reuse);
        assert!(reuse.copied() > head + 20, "{}", reuse.copied());
        // Answered without calls: the turn is over, the body let go.
        reuse.answered(fourth, &r.messages, false);
        openai::request_bytes(&r, &s, &reuse);
        assert_eq!(reuse.copied(), 0);
        // And when the turn ends.
        let (_, fifth) = openai::request_bytes(&r, &s, &reuse);
        reuse.answered(fifth, &r.messages, true);
        reuse.clear();
        openai::request_bytes(&r, &s, &reuse);
        assert_eq!(reuse.copied(), 0);
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
