//! The lines of a conversation file, one serde enum tagged by `type`. Adding a line type is adding a
//! variant; a reader skips types it does not know (`Unknown`) and fields it does not know.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::message::Message;
use std::borrow::Cow;
use std::ops::Range;
use std::str;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record {
    Header(HeaderRecord),
    Message(Box<Message>),
    Title(TitleRecord),
    Checkpoint(CheckpointRecord),
    Branch(BranchRecord),
    Undone(UndoneRecord),
    #[serde(other)]
    Unknown,
}

/// `/undo` (an extension record): the user message `msg_id` and what is below it were undone.
/// They stay in the tree; `/tree` folds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoneRecord {
    pub msg_id: String,
    #[serde(default)]
    pub timestamp: Option<String>,
}

/// A branch's name (shared/docs/DESIGN.md §11): it stands for the branch through `msg_id`, the
/// tip when it was named, and follows the branch as it grows (its tip: the newest leaf below
/// `msg_id`). A later record with the same name moves it; one with `"deleted": true` removes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchRecord {
    pub msg_id: String,
    pub name: String,
    #[serde(default)]
    pub timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// A snapshot of the working folder attached to a node (shared/docs/DESIGN.md §10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    pub msg_id: String,
    pub snapshot: String,
    #[serde(default)]
    pub timestamp: Option<String>,
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

/// `2026-07-24T12:35:55Z`, as the original format writes it.
pub fn format_timestamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Reads RFC 3339 and, leniently, the naive ISO forms other writers produce (taken as UTC).
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    if let Some(t) = parse_written_timestamp(s) {
        return Some(t);
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .map(|n| n.and_utc())
}

/// The form [`format_timestamp`] writes (`2026-07-24T12:35:55Z`), read without the general
/// parser: a big file has one on every line. Anything else (a leap second, an offset, a fraction)
/// is left to the general parser.
fn parse_written_timestamp(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let digits = |range: Range<usize>| {
        b[range].iter().try_fold(0u32, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let shape = b.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z';
    if !shape {
        return None;
    }
    let date =
        chrono::NaiveDate::from_ymd_opt(digits(0..4)? as i32, digits(5..7)?, digits(8..10)?)?;
    let time = date.and_hms_opt(digits(11..13)?, digits(14..16)?, digits(17..19)?)?;
    Some(time.and_utc())
}

/// What a line that is not a standard message line is read as: its type and the fields of the
/// other line types. A message line goes straight into [`Message`].
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    root_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    msg_id: Option<String>,
    #[serde(default)]
    snapshot: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    deleted: bool,
}

/// How every message line `new` writes begins; such a line is read into a [`Message`] in one pass.
const MESSAGE_START: &[u8] = br#"{"type":"message","#;

/// A line read for loading: messages come out ready for the tree, with no record in between (nor
/// a box: the message moves straight into the tree, and nearly every line is one).
#[allow(clippy::large_enum_variant)]
pub enum Loaded {
    Header(HeaderRecord),
    Message(Message),
    Title(String),
    /// (node, snapshot)
    Checkpoint(String, String),
    /// (name, node, deleted)
    Branch(String, String, bool),
    Undone(String),
    Unknown,
}

/// Reads one line of a conversation file for loading.
pub fn load_line(bytes: &[u8]) -> Result<Loaded, String> {
    // The line is checked as UTF-8 once, in one pass, and its strings are then taken as they are
    // (parsing the bytes would check each string on its own, at ten times the cost).
    match str::from_utf8(bytes) {
        Ok(text) => read_line(text),
        // A byte that is not UTF-8 (another program's write, a bad disk) costs that character, not
        // the message: decode lossily and read the line in place.
        Err(_) => read_line(&String::from_utf8_lossy(bytes)),
    }
}

fn read_line(text: &str) -> Result<Loaded, String> {
    let message = |text: &str| {
        serde_json::from_str::<Message>(text)
            .map(Loaded::Message)
            .map_err(|e| e.to_string())
    };
    if text.as_bytes().starts_with(MESSAGE_START) {
        return message(text);
    }
    let line: Line = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match line.kind.as_deref() {
        Some("message") => message(text),
        Some("header") => Ok(Loaded::Header(HeaderRecord {
            root_id: line.root_id.ok_or("a header without `root_id`")?,
            metadata: line.metadata.unwrap_or_default(),
        })),
        Some("title") => Ok(Loaded::Title(line.title.ok_or("a title without `title`")?)),
        Some("checkpoint") => Ok(Loaded::Checkpoint(
            line.msg_id.ok_or("a checkpoint without `msg_id`")?,
            line.snapshot.ok_or("a checkpoint without `snapshot`")?,
        )),
        Some("undone") => Ok(Loaded::Undone(
            line.msg_id.ok_or("an undone line without `msg_id`")?,
        )),
        Some("branch") => Ok(Loaded::Branch(
            line.name.ok_or("a branch without `name`")?,
            line.msg_id.ok_or("a branch without `msg_id`")?,
            line.deleted,
        )),
        Some(_) => Ok(Loaded::Unknown),
        None => Err("a line without `type`".to_string()),
    }
}

/// Reads one line of a conversation file as a record.
pub fn parse_line(bytes: &[u8]) -> Result<Record, String> {
    if let Ok(Loaded::Message(m)) = load_line(bytes) {
        return Ok(Record::Message(Box::new(m)));
    }
    let line: Line = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    match line.kind.as_deref() {
        Some("title") => Ok(Record::Title(TitleRecord {
            title: line.title.ok_or("a title without `title`")?,
            timestamp: line.timestamp,
        })),
        Some("checkpoint") => Ok(Record::Checkpoint(CheckpointRecord {
            msg_id: line.msg_id.ok_or("a checkpoint without `msg_id`")?,
            snapshot: line.snapshot.ok_or("a checkpoint without `snapshot`")?,
            timestamp: line.timestamp,
        })),
        Some("undone") => Ok(Record::Undone(UndoneRecord {
            msg_id: line.msg_id.ok_or("an undone line without `msg_id`")?,
            timestamp: line.timestamp,
        })),
        Some("branch") => Ok(Record::Branch(BranchRecord {
            msg_id: line.msg_id.ok_or("a branch without `msg_id`")?,
            name: line.name.ok_or("a branch without `name`")?,
            timestamp: line.timestamp,
            deleted: line.deleted,
        })),
        _ => match load_line(bytes)? {
            Loaded::Header(h) => Ok(Record::Header(h)),
            Loaded::Unknown => Ok(Record::Unknown),
            _ => Err("unreadable line".to_string()),
        },
    }
}

impl Record {
    pub fn message(m: &Message) -> Record {
        Record::Message(Box::new(m.clone()))
    }

    /// One line of JSON, without the newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("records always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Role;

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
        assert_eq!(m.calls()[0].function.arguments, r#"{"k":1}"#);
        assert_eq!(format_timestamp(&m.timestamp), "2026-07-24T12:35:55Z");
    }

    #[test]
    fn the_flat_reader_agrees_with_the_tagged_enum() {
        let lines = [
            r#"{"type":"header","root_id":"009f13ac","metadata":{"k":1}}"#,
            r#"{"type":"message","msg_id":"a","role":"assistant","content":null,"parent_id":"p","timestamp":"2026-07-24T12:35:55Z","tool_call_id":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}],"interrupted":true,"reasoning":"r","usage":{"input_tokens":1,"output_tokens":2},"extra":[1]}"#,
            r#"{"type":"title","title":"T","timestamp":"2026-07-24T12:36:00Z"}"#,
            r#"{"type":"bookmark","at":"x"}"#,
            r#"{"type":"checkpoint","msg_id":"a","snapshot":"5f0c1a2b","timestamp":"2026-07-24T12:36:00Z"}"#,
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
    fn the_written_timestamp_form_reads_as_the_general_parser_reads_it() {
        for s in [
            "2026-07-24T12:35:55Z",
            "2024-02-29T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "2016-12-31T23:59:60Z",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-07-24T24:00:00Z",
            "2026-07-24T12:35:5xZ",
            "2026-07-24T12:35:55+02:00",
            "2026-07-24t12:35:55z",
        ] {
            let general = DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| t.with_timezone(&Utc));
            assert_eq!(parse_timestamp(s), general, "{s}");
        }
    }

    #[test]
    fn timestamps_read_escaped_null_or_unreadable_and_refuse_other_types() {
        let line = |stamp: &str| {
            format!(
                r#"{{"type":"message","msg_id":"a","role":"user","content":"x","parent_id":"r","timestamp":{stamp}}}"#
            )
        };
        let stamp = |stamp: &str| match parse_line(line(stamp).as_bytes()) {
            Ok(Record::Message(m)) => Some(format_timestamp(&m.timestamp)),
            _ => None,
        };
        let read = |s: &str| stamp(s).unwrap();
        assert_eq!(
            read(r#""2026-07-24T12:35:55\u005a""#),
            "2026-07-24T12:35:55Z"
        );
        assert_eq!(read("null"), "1970-01-01T00:00:00Z");
        assert_eq!(read(r#""yesterday""#), "1970-01-01T00:00:00Z");
        assert_eq!(stamp("12"), None);
        let no_stamp = r#"{"type":"message","msg_id":"a","role":"user","content":"x"}"#;
        assert!(parse_line(no_stamp.as_bytes()).is_ok());
    }

    #[test]
    fn extensions_are_written_only_when_set() {
        let mut m = Message::new(Role::Assistant, "x");
        m.parent_id = Some("p".into());
        let line = Record::message(&m).to_line();
        assert!(!line.contains("interrupted") && !line.contains("reasoning"));
        m.interrupted = true;
        m.extra.rare.reasoning = Some("r".into());
        let line = Record::message(&m).to_line();
        assert!(line.ends_with(r#""tool_calls":null,"interrupted":true,"reasoning":"r"}"#));
    }

    /// The file-format page lists every line type written here (a new variant without its row
    /// fails), and its rule for a strict reader of the original format (decide by `type`; keep
    /// `header` and `message`, skip every other line whole) reads every message of a file with
    /// each line type, where parsing every line as a message would fail at the first checkpoint.
    #[test]
    fn the_file_format_page_lists_every_line_type_and_a_strict_reader_skips_them() {
        let page = include_str!("../../../../docs/src/file-format.md");
        let message = r#"{"type":"message","msg_id":"82981a45","role":"user","content":"hi","parent_id":"009f13ac","timestamp":"2026-07-24T12:35:55Z","tool_call_id":null,"tool_calls":null}"#;
        let Record::Message(m) = serde_json::from_str::<Record>(message).unwrap() else {
            panic!()
        };
        let stamp = Some("2026-07-24T12:36:00Z".to_string());
        let records = [
            Record::Header(HeaderRecord {
                root_id: "009f13ac".into(),
                metadata: Map::new(),
            }),
            Record::Message(m),
            Record::Checkpoint(CheckpointRecord {
                msg_id: "82981a45".into(),
                snapshot: "5f0c1a2b".into(),
                timestamp: stamp.clone(),
            }),
            Record::Title(TitleRecord {
                title: "T".into(),
                timestamp: stamp.clone(),
            }),
            Record::Branch(BranchRecord {
                msg_id: "82981a45".into(),
                name: "b".into(),
                timestamp: stamp.clone(),
                deleted: false,
            }),
            Record::Undone(UndoneRecord {
                msg_id: "82981a45".into(),
                timestamp: stamp,
            }),
        ];
        let lines: Vec<String> = records.iter().map(Record::to_line).collect();
        for line in &lines {
            let v: Value = serde_json::from_str(line).unwrap();
            let kind = v["type"].as_str().unwrap();
            assert!(
                page.contains(&format!("| `{kind}` |")),
                "docs/src/file-format.md has no row for `{kind}`"
            );
        }
        // Every variant but `Unknown` is in `records` (a new one fails to compile here).
        for r in &records {
            match r {
                Record::Header(_)
                | Record::Message(_)
                | Record::Checkpoint(_)
                | Record::Title(_)
                | Record::Branch(_)
                | Record::Undone(_)
                | Record::Unknown => {}
            }
        }
        assert!(page.contains("A strict reader of the original format"));
        // The original format's message, strictly: every field required.
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Strict {
            msg_id: String,
            role: String,
            content: Option<String>,
            parent_id: String,
            timestamp: String,
        }
        let strict = |skip: bool| -> Result<Vec<String>, String> {
            let mut ids = Vec::new();
            for line in &lines {
                let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
                match v["type"].as_str() {
                    Some("header") => {}
                    Some("message") => ids.push(
                        serde_json::from_value::<Strict>(v)
                            .map_err(|e| e.to_string())?
                            .msg_id,
                    ),
                    _ if skip => {}
                    _ => ids.push(
                        serde_json::from_value::<Strict>(v)
                            .map_err(|e| e.to_string())?
                            .msg_id,
                    ),
                }
            }
            Ok(ids)
        };
        assert_eq!(strict(true).unwrap(), ["82981a45"]);
        assert!(strict(false).is_err(), "a checkpoint line is no message");
    }
}
