//! Summaries of every conversation for `/list`, without parsing every file each time.
//!
//! A cache file (`.index.json` in DATADIR) remembers, per conversation file, how many bytes were
//! already scanned and what they held. Because files only grow, a changed file is scanned from where
//! the last scan stopped; an unchanged one (same size and modification time) is not opened at all.
//! The cache is only an accelerator: it is rebuilt when missing or unreadable, written atomically
//! (temporary file, then rename), and losing a race with another process only costs a rescan.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::record::parse_timestamp;
use super::store::{Store, StoreError};

pub const INDEX_FILE: &str = ".index.json";
const INDEX_VERSION: u32 = 1;
/// Longest title kept in the cache, in characters.
const TITLE_CHARS: usize = 200;

/// One line of `/list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub id: String,
    /// Message lines in the file (the root, never stored, is not counted).
    pub messages: usize,
    /// The title record's text if any, else the first user message.
    pub title: String,
    pub last_activity: Option<DateTime<Utc>>,
    /// The file's modification time, which breaks ties between equal activity times.
    pub modified: SystemTime,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Entry {
    size: u64,
    mtime_ns: u128,
    /// Bytes up to the end of the last complete line scanned.
    scanned: u64,
    messages: usize,
    first_user: Option<String>,
    title: Option<String>,
    /// Newest message timestamp, in seconds since the epoch.
    last_activity: Option<i64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct IndexFile {
    version: u32,
    entries: HashMap<String, Entry>,
}

/// The light view of a line that listing needs; content is borrowed when it has no escapes.
#[derive(Deserialize)]
struct LineView<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    role: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    timestamp: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    title: Option<std::borrow::Cow<'a, str>>,
}

impl Store {
    /// Summaries of every conversation, newest activity first.
    pub fn list(&self) -> Result<Vec<Summary>, StoreError> {
        let index_path = self.dir().join(INDEX_FILE);
        let mut index: IndexFile = fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|i: &IndexFile| i.version == INDEX_VERSION)
            .unwrap_or_default();
        let mut dirty = index.version != INDEX_VERSION;
        index.version = INDEX_VERSION;

        let entries =
            fs::read_dir(self.dir()).map_err(|e| StoreError::io("reading", self.dir(), e))?;
        let mut summaries = Vec::new();
        let mut present = std::collections::HashSet::new();
        for dir_entry in entries.filter_map(|e| e.ok()) {
            let Some(id) = conversation_id(&dir_entry.file_name()) else {
                continue;
            };
            // The directory entry's metadata is one fstatat per file: no path walk.
            let Ok(meta) = dir_entry.metadata() else {
                continue; // deleted between the directory read and now
            };
            if !meta.is_file() {
                continue;
            }
            let modified = meta.modified().unwrap_or(UNIX_EPOCH);
            let mtime_ns = modified
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let entry = index.entries.entry(id.clone()).or_default();
            if entry.size != meta.len() || entry.mtime_ns != mtime_ns {
                let path = self.path(&id);
                if meta.len() < entry.scanned {
                    *entry = Entry::default(); // not an append: start over
                }
                scan(&path, entry).map_err(|e| StoreError::io("reading", &path, e))?;
                entry.size = meta.len();
                entry.mtime_ns = mtime_ns;
                dirty = true;
            }
            summaries.push(Summary {
                id: id.clone(),
                messages: entry.messages,
                title: entry
                    .title
                    .clone()
                    .or_else(|| entry.first_user.clone())
                    .unwrap_or_default(),
                last_activity: entry
                    .last_activity
                    .and_then(|secs| DateTime::from_timestamp(secs, 0)),
                modified,
            });
            present.insert(id);
        }
        let before = index.entries.len();
        index.entries.retain(|id, _| present.contains(id));
        dirty |= index.entries.len() != before;
        if dirty {
            // A failed cache write costs a rescan next time, nothing more.
            let _ = write_atomically(&index_path, &index);
        }

        summaries.sort_by(|a, b| {
            b.last_activity
                .cmp(&a.last_activity)
                .then(b.modified.cmp(&a.modified))
                .then(a.id.cmp(&b.id))
        });
        Ok(summaries)
    }
}

/// Scans the file from `entry.scanned` to its last complete line, updating the entry.
fn scan(path: &std::path::Path, entry: &mut Entry) -> std::io::Result<()> {
    let mut file = fs::File::open(path)?;
    file.seek(SeekFrom::Start(entry.scanned))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(last) => last + 1,
        None => 0,
    };
    for line in bytes[..complete].split(|&b| b == b'\n') {
        let Ok(view) = serde_json::from_slice::<LineView>(line) else {
            continue;
        };
        match view.kind.as_deref() {
            Some("message") => {
                entry.messages += 1;
                if entry.first_user.is_none() && view.role.as_deref() == Some("user") {
                    let text = view.content.as_deref().unwrap_or("");
                    entry.first_user = Some(text.chars().take(TITLE_CHARS).collect());
                }
                if let Some(t) = view.timestamp.as_deref().and_then(parse_timestamp)
                    && entry.last_activity.is_none_or(|last| t.timestamp() > last)
                {
                    entry.last_activity = Some(t.timestamp());
                }
            }
            Some("title") => {
                if let Some(title) = view.title {
                    entry.title = Some(title.chars().take(TITLE_CHARS).collect());
                }
            }
            _ => {}
        }
    }
    entry.scanned += complete as u64;
    Ok(())
}

/// The conversation id of a file name `<id>.jsonl`, if it is one.
pub(crate) fn conversation_id(name: &std::ffi::OsStr) -> Option<String> {
    let id = name.to_str()?.strip_suffix(".jsonl")?;
    (!id.is_empty() && !id.starts_with('.')).then(|| id.to_string())
}

fn write_atomically(path: &std::path::Path, index: &IndexFile) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", super::message::new_id()));
    let result = serde_json::to_vec(index)
        .map_err(std::io::Error::other)
        .and_then(|bytes| fs::write(&tmp, bytes))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;
    use crate::session::{Conversation, Message, Record};
    use std::io::Write;

    fn write_conversation(store: &Store, id: &str, texts: &[&str]) -> Conversation {
        let mut c = Conversation::new(id, "sys");
        let mut records = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let m = c.add(Message::new(role, *t)).unwrap();
            records.push(Record::message(c.get(&m).unwrap()));
        }
        store.create(&c, &records).unwrap();
        c
    }

    #[test]
    fn lists_counts_titles_and_follows_appends() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = write_conversation(&store, "aaaa0001", &["first question", "answer"]);
        write_conversation(&store, "aaaa0002", &["other"]);
        let list = store.list().unwrap();
        assert_eq!(list.len(), 2);
        let a = list.iter().find(|s| s.id == "aaaa0001").unwrap();
        assert_eq!((a.messages, a.title.as_str()), (2, "first question"));
        assert!(dir.path().join(INDEX_FILE).exists());

        // Appends are picked up incrementally, torn tails are not counted until completed.
        let m = c.add(Message::new(Role::User, "more")).unwrap();
        store
            .append(&c.id, &[Record::message(c.get(&m).unwrap())])
            .unwrap();
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(store.path(&c.id))
            .unwrap();
        f.write_all(b"{\"type\":\"message\",\"torn").unwrap();
        drop(f);
        let list = store.list().unwrap();
        let a = list.iter().find(|s| s.id == "aaaa0001").unwrap();
        assert_eq!(a.messages, 3);

        store
            .append(
                &c.id,
                &[Record::Title(crate::session::record::TitleRecord {
                    title: "Renamed".into(),
                    timestamp: None,
                })],
            )
            .unwrap();
        let list = store.list().unwrap();
        let a = list.iter().find(|s| s.id == "aaaa0001").unwrap();
        assert_eq!((a.messages, a.title.as_str()), (3, "Renamed"));
    }

    #[test]
    fn a_corrupt_cache_is_rebuilt_and_deleted_files_drop_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_conversation(&store, "bbbb0001", &["x"]);
        write_conversation(&store, "bbbb0002", &["y"]);
        fs::write(dir.path().join(INDEX_FILE), "{garbage").unwrap();
        assert_eq!(store.list().unwrap().len(), 2);
        fs::remove_file(store.path("bbbb0002")).unwrap();
        let list = store.list().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].title, "x");
    }
}
