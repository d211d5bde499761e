//! One node of a conversation tree.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocab::{Role, ToolCall, Usage};

/// A message id: 8 hex characters taken from a UUID v4.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// A message, and the one serde type of a message line in a conversation file: the first seven
/// fields are the original format, written in its order and always present; the rest are
/// extensions, written only when set. Reading is lenient: `content: null` is empty, a timestamp in
/// a naive ISO form is taken as UTC, tool calls may be flat (`{"id","name","arguments"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    #[serde(rename = "msg_id")]
    pub id: String,
    pub role: Role,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// None for the root (the system prompt).
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default = "epoch", with = "timestamp")]
    pub timestamp: DateTime<Utc>,
    /// For tool messages: the call this result answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// For assistant messages that asked for tools.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The answer was cut short by the user or the network.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// Set on a summary node (context compaction): what the summary stands for. A value that
    /// cannot be read leaves an ordinary user message.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_summary"
    )]
    pub summary: Option<Box<SummaryInfo>>,
    /// Set on a merge node (`/merge`): the branch whose conclusion it brings back. Its content is
    /// what the request carries.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_merge"
    )]
    pub merged_from: Option<Box<MergedFrom>>,
    /// A side question (`/btw`): this user message and what is below it are a side branch,
    /// skipped by `/prev`, `/next` and `--continue`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub side: bool,
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

fn lenient_merge<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<MergedFrom>>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

fn lenient_summary<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<SummaryInfo>>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn epoch() -> DateTime<Utc> {
    DateTime::default()
}

/// `2026-07-24T12:35:55Z` on disk; read leniently (see [`super::record::parse_timestamp`]), and a
/// timestamp that cannot be read is the epoch rather than a lost message.
mod timestamp {
    use chrono::{DateTime, Utc};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::super::record::format_timestamp(t))
    }

    /// Read in place by a visitor: no copy of the text (a big file has one on every line).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        d.deserialize_option(Stamp)
    }

    struct Stamp;

    impl<'de> serde::de::Visitor<'de> for Stamp {
        type Value = DateTime<Utc>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a timestamp or null")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(super::super::record::parse_timestamp(text).unwrap_or_default())
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(DateTime::default())
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
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
            id: new_id(),
            role,
            parent_id: None,
            content: content.into(),
            timestamp: now(),
            tool_call_id: None,
            tool_calls: None,
            interrupted: false,
            reasoning: None,
            reasoning_signature: None,
            model: None,
            usage: None,
            summary: None,
            merged_from: None,
            side: false,
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Message::new(Role::Tool, content)
        }
    }

    /// Whether this is a summary node (context compaction).
    pub fn is_summary(&self) -> bool {
        self.summary.is_some()
    }

    /// The tool calls of an assistant message, empty for any other.
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }
}

/// The current time at the precision the file format uses (whole seconds).
pub fn now() -> DateTime<Utc> {
    use chrono::Timelike;
    let t = Utc::now();
    t.with_nanosecond(0).unwrap_or(t)
}
