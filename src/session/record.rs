//! The lines of a conversation file, one serde enum tagged by `type`. Adding a line type is adding a
//! variant; a reader skips types it does not know (`Unknown`) and fields it does not know.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::message::Message;
use crate::llm::{Role, ToolCall, Usage};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record {
    Header(HeaderRecord),
    Message(Box<MessageRecord>),
    Title(TitleRecord),
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeaderRecord {
    pub root_id: String,
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TitleRecord {
    pub title: String,
    #[serde(default)]
    pub timestamp: Option<String>,
}

/// A message line. The first seven fields are the original format, written in its order and always
/// present; the rest are extensions, written only when set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    pub msg_id: String,
    pub role: Role,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl From<&Message> for MessageRecord {
    fn from(m: &Message) -> Self {
        MessageRecord {
            msg_id: m.id.clone(),
            role: m.role,
            content: m.content.clone(),
            parent_id: m.parent_id.clone(),
            timestamp: format_timestamp(&m.timestamp),
            tool_call_id: m.tool_call_id.clone(),
            tool_calls: m.tool_calls.clone(),
            interrupted: m.interrupted,
            reasoning: m.reasoning.clone(),
            reasoning_signature: m.reasoning_signature.clone(),
            model: m.model.clone(),
            usage: m.usage.clone(),
        }
    }
}

impl MessageRecord {
    pub fn into_message(self) -> Message {
        Message {
            timestamp: parse_timestamp(&self.timestamp).unwrap_or_default(),
            id: self.msg_id,
            role: self.role,
            parent_id: self.parent_id,
            content: self.content,
            children_ids: Vec::new(),
            tool_call_id: self.tool_call_id,
            tool_calls: self.tool_calls,
            interrupted: self.interrupted,
            reasoning: self.reasoning,
            reasoning_signature: self.reasoning_signature,
            model: self.model,
            usage: self.usage,
        }
    }
}

/// `2026-07-24T12:35:55Z`, as the original format writes it.
pub fn format_timestamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Reads RFC 3339 and, leniently, the naive ISO forms other writers produce (taken as UTC).
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .map(|n| n.and_utc())
}

/// Any line, read as one flat struct. Reading with the tagged [`Record`] enum makes serde buffer
/// every line before it can look at `type`; this reads each field once. [`Line::into_record`] then
/// gives the same result the enum would.
#[derive(Deserialize)]
pub struct Line<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    root_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    msg_id: Option<String>,
    #[serde(default)]
    role: Option<Role>,
    #[serde(default, deserialize_with = "null_as_empty")]
    content: String,
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(default)]
    timestamp: String,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    interrupted: bool,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    reasoning_signature: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    title: Option<String>,
}

impl Line<'_> {
    /// The message this line holds, or what is missing from it.
    fn message_record(self) -> Result<MessageRecord, String> {
        Ok(MessageRecord {
            msg_id: self.msg_id.ok_or("a message without `msg_id`")?,
            role: self.role.ok_or("a message without `role`")?,
            content: self.content,
            parent_id: self.parent_id,
            timestamp: self.timestamp,
            tool_call_id: self.tool_call_id,
            tool_calls: self.tool_calls,
            interrupted: self.interrupted,
            reasoning: self.reasoning,
            reasoning_signature: self.reasoning_signature,
            model: self.model,
            usage: self.usage,
        })
    }

    /// The record this line holds, or what is missing from it.
    pub fn into_record(self) -> Result<Record, String> {
        match self.kind.as_deref() {
            Some("header") => Ok(Record::Header(HeaderRecord {
                root_id: self.root_id.ok_or("a header without `root_id`")?,
                metadata: self.metadata.unwrap_or_default(),
            })),
            Some("message") => Ok(Record::Message(Box::new(self.message_record()?))),
            Some("title") => Ok(Record::Title(TitleRecord {
                title: self.title.ok_or("a title without `title`")?,
                timestamp: Some(self.timestamp).filter(|t| !t.is_empty()),
            })),
            Some(_) => Ok(Record::Unknown),
            None => Err("a line without `type`".to_string()),
        }
    }
}

/// A line read for loading: messages come out ready for the tree, with no record in between.
pub enum Loaded {
    Header(HeaderRecord),
    Message(Box<Message>),
    Title(String),
    Unknown,
}

/// Reads one line of a conversation file for loading.
pub fn load_line(bytes: &[u8]) -> Result<Loaded, String> {
    let line: Line = match serde_json::from_slice(bytes) {
        Ok(line) => line,
        // A byte that is not UTF-8 (another program's write, a bad disk) costs that character, not
        // the message: decode lossily and read the line in place.
        Err(e) if std::str::from_utf8(bytes).is_err() => {
            let text = String::from_utf8_lossy(bytes);
            let line: Line = serde_json::from_str(&text).map_err(|_| e.to_string())?;
            return finish_line(line);
        }
        Err(e) => return Err(e.to_string()),
    };
    finish_line(line)
}

fn finish_line(line: Line) -> Result<Loaded, String> {
    if line.kind.as_deref() != Some("message") {
        return Ok(match line.into_record()? {
            Record::Header(h) => Loaded::Header(h),
            Record::Title(t) => Loaded::Title(t.title),
            _ => Loaded::Unknown,
        });
    }
    Ok(Loaded::Message(Box::new(
        line.message_record()?.into_message(),
    )))
}

/// Reads one line of a conversation file.
pub fn parse_line(bytes: &[u8]) -> Result<Record, String> {
    serde_json::from_slice::<Line>(bytes)
        .map_err(|e| e.to_string())?
        .into_record()
}

impl Record {
    pub fn message(m: &Message) -> Record {
        Record::Message(Box::new(m.into()))
    }

    /// One line of JSON, without the newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("records always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn original_lines_round_trip_byte_for_byte() {
        let lines = [
            r#"{"type":"header","root_id":"009f13ac","metadata":{}}"#,
            r#"{"type":"message","msg_id":"82981a45","role":"user","content":"你好","parent_id":"009f13ac","timestamp":"2026-07-24T12:35:55Z","tool_call_id":null,"tool_calls":null}"#,
            r#"{"type":"message","msg_id":"b06c61f6","role":"assistant","content":"","parent_id":"82981a45","timestamp":"2026-07-24T12:35:59Z","tool_call_id":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"filepath\":\"a\"}"}}]}"#,
        ];
        for line in lines {
            let record: Record = serde_json::from_str(line).unwrap();
            assert_eq!(record.to_line(), line);
        }
    }

    #[test]
    fn unknown_fields_and_types_are_tolerated() {
        let r: Record = serde_json::from_str(r#"{"type":"bookmark","at":"x"}"#).unwrap();
        assert_eq!(r, Record::Unknown);
        let r: Record = serde_json::from_str(
            r#"{"type":"message","msg_id":"a","role":"user","content":null,"parent_id":"r","timestamp":"2026-07-24T12:35:55.123456","future":1,"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"k":1}}}]}"#,
        )
        .unwrap();
        let Record::Message(m) = r else { panic!() };
        assert_eq!(m.content, "");
        assert_eq!(m.tool_calls.unwrap()[0].function.arguments, r#"{"k":1}"#);
        assert!(parse_timestamp(&m.timestamp).is_some());
    }

    #[test]
    fn the_flat_reader_agrees_with_the_tagged_enum() {
        let lines = [
            r#"{"type":"header","root_id":"009f13ac","metadata":{"k":1}}"#,
            r#"{"type":"message","msg_id":"a","role":"assistant","content":null,"parent_id":"p","timestamp":"2026-07-24T12:35:55Z","tool_call_id":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}],"interrupted":true,"reasoning":"r","usage":{"input_tokens":1,"output_tokens":2},"extra":[1]}"#,
            r#"{"type":"title","title":"T","timestamp":"2026-07-24T12:36:00Z"}"#,
            r#"{"type":"bookmark","at":"x"}"#,
        ];
        for line in lines {
            let tagged: Record = serde_json::from_str(line).unwrap();
            assert_eq!(parse_line(line.as_bytes()).unwrap(), tagged, "{line}");
        }
        assert!(parse_line(br#"{"type":"message","role":"user"}"#).is_err());
        assert!(parse_line(br#"{"type":"message","msg_id":"a","role":"wizard"}"#).is_err());
        assert!(parse_line(b"not json").is_err());
    }

    #[test]
    fn extensions_are_written_only_when_set() {
        let mut m = Message::new(Role::Assistant, "x");
        m.parent_id = Some("p".into());
        let line = Record::message(&m).to_line();
        assert!(!line.contains("interrupted") && !line.contains("reasoning"));
        m.interrupted = true;
        m.reasoning = Some("r".into());
        let line = Record::message(&m).to_line();
        assert!(line.ends_with(r#""tool_calls":null,"interrupted":true,"reasoning":"r"}"#));
    }
}
