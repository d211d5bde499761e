//! One node of a conversation tree.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocab::{Id, Role, ToolCall, Usage, new_id};
use serde::de;
use serde::de::DeserializeOwned;
use serde::de::IgnoredAny;
use serde::de::MapAccess;
use std::cell::RefCell;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::ops::Deref;
use std::ops::DerefMut;

/// A message, and the one serde type of a message line in a conversation file: the first seven
/// fields are the original format, written in its order and always present; the rest are
/// extensions, written only when set. Reading is lenient: `content: null` is empty, a timestamp in
/// a naive ISO form is taken as UTC, tool calls may be flat (`{"id","name","arguments"}`).
///
/// A big conversation holds every message in memory, so a message is kept small (80 bytes beside
/// its text): ids inline ([`Id`]), and the fields most messages lack in a box ([`Extra`]), itself
/// small (the fields of tool calls and their results), with the rarest in a box of its own
/// ([`Rare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: Id,
    pub role: Role,
    pub content: String,
    /// None for the root (the system prompt).
    pub parent_id: Option<Id>,
    pub timestamp: DateTime<Utc>,
    /// The answer was cut short by the user or the network.
    pub interrupted: bool,
    /// A side question (`/btw`): this user message and what is below it are a side branch,
    /// skipped by `/prev`, `/next` and `--continue`.
    pub side: bool,
    /// The rest (`m.extra.tool_calls`, `m.extra.rare.model = ..`): none of it allocates until set.
    pub extra: Extras,
}

/// The fields of a message that most messages lack: those of tool calls and their results, and
/// the rarer ones.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extra {
    /// For assistant messages that asked for tools.
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For tool messages: the call this result answers.
    pub tool_call_id: Option<Id>,
    /// For assistant messages: the model that answered, one text shared by the messages of the
    /// same model (see [`model_name`]).
    pub model: Option<Arc<str>>,
    /// For assistant messages: the tokens the answer took, when the server said.
    pub usage: Option<Box<Usage>>,
    /// For assistant messages: how long their turn had taken when they came, in seconds (a
    /// tenth's precision; `seconds` on disk, optional: older files lack it).
    pub seconds: Option<f32>,
    pub rare: Thin<Rare>,
}

/// What fewer messages still have.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rare {
    pub reasoning: Option<String>,
    pub reasoning_signature: Option<String>,
    /// Set on a summary node (context compaction): what the summary stands for. A value that
    /// cannot be read leaves an ordinary user message.
    pub summary: Option<Box<SummaryInfo>>,
    /// Set on a merge node (`/merge`): the branch whose conclusion it brings back. Its content is
    /// what the request carries.
    pub merged_from: Option<Box<MergedFrom>>,
}

/// A message's [`Extra`].
pub type Extras = Thin<Extra>;

/// A value with nothing set, to read through a [`Thin`] that holds none.
pub trait Unset: Default + PartialEq + 'static {
    const UNSET: &'static Self;
}

impl Unset for Extra {
    const UNSET: &'static Extra = &Extra {
        tool_calls: None,
        tool_call_id: None,
        model: None,
        usage: None,
        seconds: None,
        rare: Thin(None),
    };
}

impl Unset for Rare {
    const UNSET: &'static Rare = &Rare {
        reasoning: None,
        reasoning_signature: None,
        summary: None,
        merged_from: None,
    };
}

/// A value boxed when any of it is set (a pointer's size otherwise): read through it as if it
/// were there (all unset when it is not), and writing through it makes it.
#[derive(Clone, Default)]
pub struct Thin<T>(Option<Box<T>>);

impl<T: Unset> Deref for Thin<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_deref().unwrap_or(T::UNSET)
    }
}

impl<T: Unset> DerefMut for Thin<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Default::default)
    }
}

/// Compared by what is set: a box with nothing in it equals none.
impl<T: Unset> PartialEq for Thin<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Unset + Debug> Debug for Thin<T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        Debug::fmt(&**self, f)
    }
}

impl<T: Unset> From<T> for Thin<T> {
    fn from(value: T) -> Self {
        Thin((value != *T::UNSET).then(|| Box::new(value)))
    }
}

impl<T: Unset> Thin<T> {
    /// Whether anything is set (a box is kept).
    pub fn is_set(&self) -> bool {
        self.0.as_deref().is_some_and(|v| v != T::UNSET)
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let x = &*self.extra;
        let r = &*x.rare;
        let mut out = s.serialize_struct("Message", 15)?;
        out.serialize_field("msg_id", &self.id)?;
        out.serialize_field("role", &self.role)?;
        out.serialize_field("content", &self.content)?;
        out.serialize_field("parent_id", &self.parent_id)?;
        out.serialize_field("timestamp", &timestamp::Written(&self.timestamp))?;
        out.serialize_field("tool_call_id", &x.tool_call_id)?;
        out.serialize_field("tool_calls", &x.tool_calls)?;
        if self.interrupted {
            out.serialize_field("interrupted", &true)?;
        }
        if let Some(v) = &r.reasoning {
            out.serialize_field("reasoning", v)?;
        }
        if let Some(v) = &r.reasoning_signature {
            out.serialize_field("reasoning_signature", v)?;
        }
        if let Some(v) = &x.model {
            out.serialize_field("model", &**v)?;
        }
        if let Some(v) = &x.usage {
            out.serialize_field("usage", v)?;
        }
        if let Some(v) = x.seconds {
            out.serialize_field("seconds", &v)?;
        }
        if let Some(v) = &r.summary {
            out.serialize_field("summary", v)?;
        }
        if let Some(v) = &r.merged_from {
            out.serialize_field("merged_from", v)?;
        }
        if self.side {
            out.serialize_field("side", &true)?;
        }
        out.end()
    }
}

/// Read straight into the message, field by field: short ids stay inline, and the box of
/// [`Extra`] is made only for a line that has one of its fields.
impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MessageVisitor)
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    MsgId,
    Role,
    Content,
    ParentId,
    Timestamp,
    ToolCallId,
    ToolCalls,
    Interrupted,
    Reasoning,
    ReasoningSignature,
    Model,
    Usage,
    Seconds,
    Summary,
    MergedFrom,
    Side,
    #[serde(other)]
    Other,
}

/// A value read leniently: one that does not fit `T` is none.
struct Lenient<T>(Option<T>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Option::<serde_json::Value>::deserialize(d)?;
        Ok(Lenient(value.and_then(|v| serde_json::from_value(v).ok())))
    }
}

struct MessageVisitor;

impl<'de> de::Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> fmt::Result {
        f.write_str("struct Message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        use serde::de::Error;
        // Each field once, as the derived readers demand.
        fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
            map: &mut A,
            slot: &mut Option<T>,
            name: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(A::Error::duplicate_field(name));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let mut id: Option<Id> = None;
        let mut role: Option<Role> = None;
        let mut content: Option<Option<String>> = None;
        let mut parent_id: Option<Option<Id>> = None;
        let mut stamp: Option<timestamp::Read> = None;
        let mut tool_call_id: Option<Option<Id>> = None;
        let mut tool_calls: Option<Option<Vec<ToolCall>>> = None;
        let mut interrupted: Option<bool> = None;
        let mut reasoning: Option<Option<String>> = None;
        let mut reasoning_signature: Option<Option<String>> = None;
        let mut model: Option<Option<ModelName>> = None;
        let mut usage: Option<Option<Box<Usage>>> = None;
        let mut seconds: Option<Lenient<f32>> = None;
        let mut summary: Option<Lenient<SummaryInfo>> = None;
        let mut merged_from: Option<Lenient<MergedFrom>> = None;
        let mut side: Option<bool> = None;
        while let Some(key) = map.next_key::<Field>()? {
            match key {
                Field::MsgId => once(&mut map, &mut id, "msg_id")?,
                Field::Role => once(&mut map, &mut role, "role")?,
                Field::Content => once(&mut map, &mut content, "content")?,
                Field::ParentId => once(&mut map, &mut parent_id, "parent_id")?,
                Field::Timestamp => once(&mut map, &mut stamp, "timestamp")?,
                Field::ToolCallId => once(&mut map, &mut tool_call_id, "tool_call_id")?,
                Field::ToolCalls => once(&mut map, &mut tool_calls, "tool_calls")?,
                Field::Interrupted => once(&mut map, &mut interrupted, "interrupted")?,
                Field::Reasoning => once(&mut map, &mut reasoning, "reasoning")?,
                Field::ReasoningSignature => {
                    once(&mut map, &mut reasoning_signature, "reasoning_signature")?
                }
                Field::Model => once(&mut map, &mut model, "model")?,
                Field::Usage => once(&mut map, &mut usage, "usage")?,
                Field::Seconds => once(&mut map, &mut seconds, "seconds")?,
                Field::Summary => once(&mut map, &mut summary, "summary")?,
                Field::MergedFrom => once(&mut map, &mut merged_from, "merged_from")?,
                Field::Side => once(&mut map, &mut side, "side")?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let mut tool_calls = tool_calls.flatten();
        // Read into a growing vector: give back the room it grew into (the tree keeps it).
        if let Some(calls) = &mut tool_calls {
            calls.shrink_to_fit();
        }
        let rare = Rare {
            reasoning: reasoning.flatten(),
            reasoning_signature: reasoning_signature.flatten(),
            summary: summary.and_then(|s| s.0).map(Box::new),
            merged_from: merged_from.and_then(|m| m.0).map(Box::new),
        };
        let extra = Extra {
            tool_calls,
            tool_call_id: tool_call_id.flatten(),
            model: model.flatten().map(|m| m.0),
            usage: usage.flatten(),
            seconds: seconds
                .and_then(|s| s.0)
                .filter(|s| s.is_finite() && *s >= 0.0),
            rare: rare.into(),
        };
        Ok(Message {
            id: id.ok_or_else(|| A::Error::missing_field("msg_id"))?,
            role: role.ok_or_else(|| A::Error::missing_field("role"))?,
            content: content.flatten().unwrap_or_default(),
            parent_id: parent_id.flatten(),
            timestamp: stamp.map_or_else(epoch, |s| s.0),
            interrupted: interrupted.unwrap_or(false),
            side: side.unwrap_or(false),
            extra: extra.into(),
        })
    }
}

/// A duration in seconds as a message keeps it: to a tenth.
pub fn tenths(took: Duration) -> f32 {
    ((took.as_secs_f64() * 10.0).round() / 10.0) as f32
}

/// The text of a model's name shared with the last one made on this thread when they are the
/// same: the assistant messages of a conversation, written or read, keep one copy of it, not one
/// each.
pub fn model_name(name: &str) -> Arc<str> {
    thread_local! {
        static LAST: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some(shared) if **shared == *name => shared.clone(),
        _ => last.insert(Arc::from(name)).clone(),
    })
}

/// A model's name read from a line, through [`model_name`] (no text made when it is the last
/// one's).
struct ModelName(Arc<str>);

impl<'de> Deserialize<'de> for ModelName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = ModelName;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> fmt::Result {
                f.write_str("a model's name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ModelName, E> {
                Ok(ModelName(model_name(v)))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// What a summary node replaces (shared/docs/DESIGN.md §10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryInfo {
    /// The last message (an ancestor of the summary) that the summary stands for.
    pub replaces: String,
    /// How many messages of the branch it stands for.
    #[serde(default)]
    pub messages: u64,
    #[serde(default)]
    pub tokens_before: u64,
    #[serde(default)]
    pub tokens_after: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
}

/// Where a merge node's conclusion comes from (shared/docs/DESIGN.md §11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedFrom {
    /// The tip of the merged branch when it was merged.
    pub tip: String,
    /// Where that branch left the one it was merged into (their last common node).
    pub fork: String,
}

fn epoch() -> DateTime<Utc> {
    DateTime::default()
}

/// `2026-07-24T12:35:55Z` on disk; read leniently (see [`super::record::parse_timestamp`]), and a
/// timestamp that cannot be read is the epoch rather than a lost message.
mod timestamp {
    use chrono::{DateTime, Utc};
    use serde::de;
    use serde::{Deserializer, Serializer};
    use std::fmt;

    /// A timestamp as written.
    pub struct Written<'a>(pub &'a DateTime<Utc>);

    impl serde::Serialize for Written<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&super::super::record::format_timestamp(self.0))
        }
    }

    /// A timestamp as read.
    pub struct Read(pub DateTime<Utc>);

    /// Read in place by a visitor: no copy of the text (a big file has one on every line).
    impl<'de> serde::Deserialize<'de> for Read {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_option(Stamp).map(Read)
        }
    }

    struct Stamp;

    impl<'de> de::Visitor<'de> for Stamp {
        type Value = DateTime<Utc>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> fmt::Result {
            f.write_str("a timestamp or null")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(super::super::record::parse_timestamp(text).unwrap_or_default())
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(DateTime::default())
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(DateTime::default())
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            id: new_id().into(),
            role,
            parent_id: None,
            content: content.into(),
            timestamp: now(),
            interrupted: false,
            side: false,
            extra: Extras::default(),
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        let mut m = Message::new(Role::Tool, content);
        m.extra.tool_call_id = Some(Id::from(call_id.into()));
        m
    }

    /// The same message asking for `calls`.
    pub fn with_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.extra.tool_calls = Some(calls);
        self
    }

    /// Whether this is a summary node (context compaction).
    pub fn is_summary(&self) -> bool {
        self.extra.rare.summary.is_some()
    }

    /// The tool calls of an assistant message, empty for any other.
    pub fn calls(&self) -> &[ToolCall] {
        self.extra.tool_calls.as_deref().unwrap_or(&[])
    }
}

/// The current time at the precision the file format uses (whole seconds).
pub fn now() -> DateTime<Utc> {
    use chrono::Timelike;
    let t = Utc::now();
    t.with_nanosecond(0).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::record::{Record, parse_line};
    use std::borrow::Cow;
    use std::mem;

    #[test]
    fn a_message_is_small_and_its_extras_are_boxed_only_when_set() {
        assert!(mem::size_of::<Message>() <= 80);
        // 72 before an answer kept its seconds (issue 44).
        assert!(mem::size_of::<Extra>() <= 80);
        let mut m = Message::new(Role::User, "x");
        assert!(!m.extra.is_set());
        assert_eq!(m.extra.rare.reasoning, None);
        m.extra.rare.reasoning = Some("r".into());
        assert!(m.extra.is_set() && m.extra.rare.is_set());
        // An answer's model and usage are in the small box, the rare one not made.
        let mut answer = Message::new(Role::Assistant, "a");
        answer.extra.model = Some(model_name("gpt"));
        answer.extra.usage = Some(Box::default());
        assert!(answer.extra.is_set() && !answer.extra.rare.is_set());
        // A tool result sets the small box only.
        let result = Message::tool_result("c1", "ok");
        assert!(result.extra.is_set() && !result.extra.rare.is_set());
        // An emptied box is the same as none.
        m.extra.rare.reasoning = None;
        let mut plain = m.clone();
        plain.extra = Extras::default();
        assert_eq!(m, plain);
        assert!(!Extras::from(Extra::default()).is_set());
    }

    /// Lines of other writers (ids of any length, fields `new` does not know) read as they did
    /// when the message was a derived serde type, and write back the same way.
    #[test]
    fn foreign_lines_read_and_round_trip() {
        let line = r#"{"type":"message","msg_id":"toolu_0123456789abcdef","role":"tool","content":"ok","parent_id":"a-parent-of-another-writer","timestamp":"2026-07-24T12:35:55Z","tool_call_id":"call_abcdefghijklmnopqrstuvwx","tool_calls":null,"future":{"k":[1,2]}}"#;
        let Ok(Record::Message(m)) = parse_line(line.as_bytes()) else {
            panic!("a foreign message line reads")
        };
        assert_eq!(m.id, "toolu_0123456789abcdef");
        assert!(!m.id.is_inline());
        assert_eq!(m.parent_id.as_deref(), Some("a-parent-of-another-writer"));
        assert_eq!(
            m.extra.tool_call_id.as_deref(),
            Some("call_abcdefghijklmnopqrstuvwx")
        );
        assert!(!m.extra.rare.is_set());
        // What `new` writes of it: the known fields, in the original order.
        assert_eq!(
            Record::message(&m).to_line(),
            line.replace(r#","future":{"k":[1,2]}"#, "")
        );
        // Our own ids are kept inline.
        let ours = r#"{"type":"message","msg_id":"82981a45","role":"user","content":"hi","parent_id":"009f13ac","timestamp":"2026-07-24T12:35:55Z","tool_call_id":null,"tool_calls":null}"#;
        let Ok(Record::Message(m)) = parse_line(ours.as_bytes()) else {
            panic!()
        };
        assert!(m.id.is_inline() && m.parent_id.as_ref().is_some_and(Id::is_inline));
        assert_eq!(Record::message(&m).to_line(), ours);
    }

    #[test]
    fn every_extension_round_trips_through_the_box() {
        let line = r#"{"type":"message","msg_id":"b06c61f6","role":"assistant","content":"","parent_id":"82981a45","timestamp":"2026-07-24T12:35:59Z","tool_call_id":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}}],"interrupted":true,"reasoning":"r","reasoning_signature":"s","model":"m","usage":{"input_tokens":1,"output_tokens":2},"summary":{"replaces":"82981a45","messages":3,"tokens_before":4,"tokens_after":5},"merged_from":{"tip":"t","fork":"f"},"side":true}"#;
        let Ok(Record::Message(m)) = parse_line(line.as_bytes()) else {
            panic!()
        };
        assert!(m.interrupted && m.side);
        assert_eq!(m.calls().len(), 1);
        assert_eq!(m.extra.tool_calls.as_ref().map(Vec::capacity), Some(1));
        assert_eq!(m.extra.rare.reasoning.as_deref(), Some("r"));
        assert_eq!(m.extra.rare.summary.as_ref().map(|s| s.messages), Some(3));
        assert_eq!(
            m.extra.rare.merged_from.as_ref().map(|f| f.fork.as_str()),
            Some("f")
        );
        assert_eq!(m.extra.model.as_deref(), Some("m"));
        let usage: Option<String> = m
            .extra
            .usage
            .as_ref()
            .map(|u| serde_json::to_string(u).unwrap());
        assert!(usage.is_some());
        let back = Record::message(&m).to_line();
        let again = parse_line(back.as_bytes()).unwrap();
        assert_eq!(again, Record::Message(m.clone()));
        // The same through the tagged enum (which buffers the line first).
        let tagged: Record = serde_json::from_str(line).unwrap();
        assert_eq!(tagged, Record::Message(m));
    }

    /// An answer's time (issue 44): written to a tenth, read back; optional (older lines lack
    /// it), and a value that is no number or a negative one is none, the line still read.
    #[test]
    fn an_answer_keeps_its_seconds_and_a_bad_value_is_none() {
        let mut m = Message::new(Role::Assistant, "x");
        m.extra.seconds = Some(tenths(Duration::from_millis(13_940)));
        let line = Record::message(&m).to_line();
        assert!(line.contains(r#""seconds":13.9"#), "{line}");
        let Ok(Record::Message(back)) = parse_line(line.as_bytes()) else {
            panic!("{line}")
        };
        assert_eq!(back.extra.seconds, Some(13.9));
        let read = |seconds: &str| -> Option<f32> {
            let line = format!(
                r#"{{"type":"message","msg_id":"a","role":"assistant","content":"x"{seconds}}}"#
            );
            let Ok(Record::Message(m)) = parse_line(line.as_bytes()) else {
                panic!("{line}")
            };
            m.extra.seconds
        };
        assert_eq!(read(""), None);
        assert_eq!(read(r#","seconds":"soon""#), None);
        assert_eq!(read(r#","seconds":-2"#), None);
        assert_eq!(read(r#","seconds":2"#), Some(2.0));
    }

    #[test]
    fn answers_of_one_model_share_its_name() {
        let read = |model: &str| -> Message {
            serde_json::from_str(&format!(
                r#"{{"msg_id":"a","role":"assistant","content":"x","model":"{model}"}}"#
            ))
            .unwrap()
        };
        let (a, b, other) = (read("gpt-5"), read("gpt-5"), read("o\\u0033"));
        let (a, b) = (
            a.extra.model.clone().unwrap(),
            b.extra.model.clone().unwrap(),
        );
        assert!(Arc::ptr_eq(&a, &b));
        // An escaped name is read as its text, and a new name makes its own.
        assert_eq!(other.extra.model.as_deref(), Some("o3"));
        assert!(Arc::ptr_eq(
            &model_name("o3"),
            other.extra.model.as_ref().unwrap()
        ));
    }

    #[test]
    fn a_call_of_the_usual_kind_allocates_no_kind_and_another_kind_is_kept() {
        let m: Message = serde_json::from_str(
            r#"{"msg_id":"a","role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"d","type":"custom","name":"g","arguments":"{}"}]}"#,
        )
        .unwrap();
        let calls = m.calls();
        assert!(matches!(calls[0].kind, Cow::Borrowed("function")));
        assert_eq!(calls[1].kind, "custom");
        let line = serde_json::to_string(&m).unwrap();
        assert!(line.contains(r#""type":"custom""#) && line.contains(r#""type":"function""#));
    }

    #[test]
    fn unreadable_lines_stay_unreadable() {
        for bad in [
            r#"{"type":"message","role":"user"}"#,
            r#"{"type":"message","msg_id":"a"}"#,
            r#"{"type":"message","msg_id":"a","msg_id":"b","role":"user"}"#,
            r#"{"type":"message","msg_id":"a","role":"user","interrupted":null}"#,
            r#"{"type":"message","msg_id":7,"role":"user"}"#,
        ] {
            assert!(serde_json::from_str::<Message>(bad).is_err(), "{bad}");
        }
        // Unreadable extensions leave an ordinary message, as before.
        let m: Message = serde_json::from_str(
            r#"{"msg_id":"a","role":"user","content":null,"summary":{"replaces":1},"merged_from":"x"}"#,
        )
        .unwrap();
        assert!(!m.extra.is_set() && m.content.is_empty());
    }
}
