//! Summaries of every conversation for `/list`, without opening the conversation files.
//!
//! `DATADIR/.index/` holds a snapshot (one line per conversation: size, message count, last
//! activity, titles) and a journal. Every write `new` makes to a conversation file is followed by a
//! journal line saying what changed (created, messages appended, titled, trashed), so listing reads
//! the snapshot and the journal and nothing else: no directory read, no `stat` per file. The
//! directory's own modification time guards the shortcut: creating or removing a file changes it, and
//! `new` records the value it left; when the two differ, something else touched DATADIR and the index
//! is reconciled with the folder (every file looked at, new or grown ones scanned from where the last
//! scan stopped). The journal is folded into the snapshot now and then. All of it is a cache: missing
//! or damaged, it is rebuilt; files written by other programs are picked up at the next reconcile.
//!
//! Journal appends and compaction take an exclusive lock on the journal file, so concurrent `new`
//! processes neither lose nor tear lines.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};

use super::error::StoreError;
use super::record::Record;
#[cfg(all(test, not(windows)))]
use crate::conversation::store::TRASH_DIR;
use crate::fs::atomic::{create_private_dir, private_options, write_whole};
use crate::vocab::Id;
use crate::vocab::Role;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::io::BufReader;
#[cfg(test)]
use std::thread;

pub const INDEX_DIR: &str = ".index";
/// Conversation files are `<id>.jsonl`.
pub const EXTENSION: &str = "jsonl";
const SNAPSHOT: &str = "snapshot";
const JOURNAL: &str = "journal";
const MAGIC: &str = "new-index\t3";
/// Longest title kept, in characters (`/list` shows 60).
const TITLE_CHARS: usize = 100;
/// Journal lines after which listing folds the journal into the snapshot.
const COMPACT_AFTER: usize = 512;

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

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Entry {
    size: u64,
    mtime_ns: u128,
    /// Bytes up to the end of the last complete line scanned.
    scanned: u64,
    messages: usize,
    /// Newest message timestamp, seconds since the epoch.
    last_activity: Option<i64>,
    first_user: Option<String>,
    title: Option<String>,
}

/// What one write to a conversation file changed, as the journal records it.
#[derive(Debug, Default)]
pub(crate) struct Change {
    messages: usize,
    last_activity: Option<i64>,
    first_user: Option<String>,
    title: Option<String>,
}

impl Change {
    pub(crate) fn of(records: &[Record]) -> Change {
        let mut c = Change::default();
        for r in records {
            match r {
                Record::Message(m) => {
                    c.messages += 1;
                    let t = m.timestamp.timestamp();
                    if t != 0 {
                        c.last_activity = c.last_activity.max(Some(t));
                    }
                    if c.first_user.is_none() && m.role == Role::User {
                        c.first_user = Some(clean(&m.content));
                    }
                }
                Record::Title(t) => c.title = Some(clean(&t.title)),
                _ => {}
            }
        }
        c
    }
}

/// A title as one line of at most [`TITLE_CHARS`] characters.
fn clean(text: &str) -> String {
    text.chars()
        .take(TITLE_CHARS)
        .map(|c| {
            if c == '\t' || c == '\n' || c == '\r' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

fn ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn field(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

/// The path of conversation `id` in DATADIR `dir`.
pub fn conversation_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.{EXTENSION}"))
}

/// The index of one DATADIR. It knows the conversation files only by name and by their lines; the
/// store announces each write to it ([`Index::journal_intent`]).
#[derive(Debug, Clone)]
pub struct Index {
    dir: PathBuf,
}

impl Index {
    pub fn new(dir: &Path) -> Index {
        Index {
            dir: dir.to_path_buf(),
        }
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str) -> PathBuf {
        conversation_path(&self.dir, id)
    }

    fn index_dir(&self) -> PathBuf {
        self.dir().join(INDEX_DIR)
    }

    /// The journal, opened for appending and locked. Creating `.index/` changes DATADIR's mtime,
    /// which the caller then sees as a change to reconcile: it happens once.
    fn journal(&self) -> io::Result<File> {
        let dir = self.index_dir();
        create_private_dir(&dir)?;
        let file = private_options()
            .read(true)
            .append(true)
            .create(true)
            .open(dir.join(JOURNAL))?;
        file.lock()?;
        Ok(file)
    }

    fn dir_mtime(&self) -> u128 {
        fs::metadata(self.dir())
            .and_then(|m| m.modified())
            .map_or(0, ns)
    }

    /// Records a write about to be made to conversation `id`, whose file grows from `from` to `to`
    /// bytes. `op`: `c` created, `m` appended, `t` appended after a torn line (whose count only a
    /// scan can tell). The caller holds the file's lock and keeps the returned journal (locked)
    /// until its write is done. When the journal cannot be written (a full disk), the snapshot is
    /// removed, which costs a rebuild at the next listing instead of a wrong one.
    pub(crate) fn journal_intent(
        &self,
        id: &str,
        from: u64,
        to: u64,
        change: &Change,
        op: char,
    ) -> Option<File> {
        let op = match op {
            'c' => 'C',
            't' => 'T',
            _ => 'A',
        };
        let dir_mtime = if op == 'C' {
            self.dir_mtime().to_string()
        } else {
            String::new()
        };
        let line = format!(
            "{op}\t{id}\t{from}\t{to}\t{}\t{}\t{}\t{}\t{dir_mtime}\n",
            change.messages,
            change
                .last_activity
                .map(|t| t.to_string())
                .unwrap_or_default(),
            change.first_user.as_deref().unwrap_or(""),
            change.title.as_deref().unwrap_or(""),
        );
        let written = self.journal().and_then(|mut journal| {
            journal_append(&mut journal, line.as_bytes())?;
            Ok(journal)
        });
        match written {
            Ok(journal) => Some(journal),
            Err(_) => {
                self.invalidate();
                None
            }
        }
    }

    /// Makes the next listing rebuild the index from the files.
    fn invalidate(&self) {
        let _ = fs::remove_file(self.index_dir().join(SNAPSHOT));
    }

    /// Records that conversation `id` left DATADIR (moved to the trash).
    pub(crate) fn journal_removal(&self, id: &str) {
        let line = format!("D\t{id}\t{}\n", self.dir_mtime());
        let written = self
            .journal()
            .and_then(|mut journal| journal_append(&mut journal, line.as_bytes()));
        if written.is_err() {
            self.invalidate();
        }
    }

    /// Checks the entries the journal touched against their files (one `stat` each): a write the
    /// journal announced but that did not happen, or only partly, or one after a torn line, is
    /// scanned again. Returns whether anything had to be.
    fn verify(
        &self,
        entries: &mut HashMap<String, Entry>,
        touched: &HashSet<String>,
        rescan: &HashSet<String>,
    ) -> Result<bool, StoreError> {
        let mut changed = false;
        for id in touched {
            let path = self.path(id);
            let Some(entry) = entries.get_mut(id) else {
                continue;
            };
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_file() => meta,
                _ => {
                    entries.remove(id);
                    changed = true;
                    continue;
                }
            };
            if meta.len() != entry.size || rescan.contains(id) {
                scan(&path, entry).map_err(|e| StoreError::io("reading", &path, e))?;
                entry.size = meta.len();
                changed = true;
            }
            entry.mtime_ns = meta.modified().map_or(0, ns);
        }
        Ok(changed)
    }

    /// Summaries of every conversation, newest activity first.
    pub fn list(&self) -> Result<Vec<Summary>, StoreError> {
        let Ok(mut journal) = self.journal() else {
            // The index cannot be used (`.index` is not a folder, say): list by scanning.
            let mut entries = HashMap::new();
            self.reconcile(&mut entries)?;
            return Ok(sorted_summaries(entries));
        };
        let (mut entries, mut known_dir_mtime) = read_snapshot(&self.index_dir().join(SNAPSHOT));
        let snapshot_ok = known_dir_mtime.is_some();
        let mut text = String::new();
        let _ = journal.seek(SeekFrom::Start(0));
        let _ = journal.read_to_string(&mut text);
        let mut lines = 0;
        let mut consistent = snapshot_ok;
        let mut touched = HashSet::new();
        let mut rescan = HashSet::new();
        for line in text.lines() {
            lines += 1;
            consistent &= apply(
                &mut entries,
                line,
                &mut known_dir_mtime,
                &mut touched,
                &mut rescan,
            );
        }

        let dir_mtime = self.dir_mtime();
        let reconcile = !consistent || known_dir_mtime != Some(dir_mtime);
        let mut verified = false;
        if reconcile {
            self.reconcile(&mut entries)?;
        } else {
            verified = self.verify(&mut entries, &touched, &rescan)?;
        }
        if reconcile || verified || lines > COMPACT_AFTER {
            // Still under the journal lock: no line can slip in between the fold and the truncation.
            if write_snapshot(&self.index_dir().join(SNAPSHOT), &entries, dir_mtime).is_ok() {
                let _ = journal.set_len(0);
            }
        }
        drop(journal);
        Ok(sorted_summaries(entries))
    }

    /// The `limit` most recent conversations and how many there are in all. In the common case it
    /// reads the snapshot's first lines and the journal only; anything unusual (a damaged or stale
    /// index, a folder changed by someone else, a long journal) takes the full path of [`list`].
    ///
    /// [`list`]: Index::list
    pub fn list_recent(&self, limit: usize) -> Result<(Vec<Summary>, usize), StoreError> {
        if let Some(fast) = self.try_list_recent(limit) {
            return Ok(fast);
        }
        let all = self.list()?;
        let total = all.len();
        Ok((all.into_iter().take(limit).collect(), total))
    }

    fn try_list_recent(&self, limit: usize) -> Option<(Vec<Summary>, usize)> {
        use std::io::BufRead;
        let mut journal = self.journal().ok()?;
        let snapshot = File::open(self.index_dir().join(SNAPSHOT)).ok()?;
        let mut journal_text = String::new();
        journal.read_to_string(&mut journal_text).ok()?;
        if journal_text.lines().count() > COMPACT_AFTER {
            return None;
        }
        let mut lines = BufReader::new(snapshot).lines();
        let header = lines.next()?.ok()?;
        let mut head = header.strip_prefix(MAGIC)?.strip_prefix('\t')?.split('\t');
        let mut dir_mtime: Option<u128> = Some(head.next()?.parse().ok()?);
        let count: usize = head.next()?.parse().ok()?;

        // What the journal touched since the snapshot; those it did not create are in the snapshot,
        // which is read (in `/list` order) until they are all found.
        let mut touched_ids = HashSet::new();
        let mut created = HashSet::new();
        for line in journal_text.lines() {
            let mut f = line.split('\t');
            let (op, id) = (f.next()?, f.next()?);
            touched_ids.insert(id.to_string());
            if op == "C" {
                created.insert(id.to_string());
            }
        }
        let mut needed: HashSet<&String> = touched_ids.difference(&created).collect();
        let mut touched: HashMap<String, Entry> = HashMap::new();
        let mut read: Vec<String> = Vec::new();
        while !needed.is_empty() {
            let Some(line) = lines.next() else { break };
            let line = line.ok()?;
            let (id, entry) = parse_line(&line)?;
            if let Some(found) = needed.iter().find(|n| n.as_str() == id).copied() {
                needed.remove(found);
                touched.insert(id.to_string(), entry);
            }
            read.push(line);
        }
        let in_snapshot = touched.len();
        let (mut seen, mut rescan) = Default::default();
        for line in journal_text.lines() {
            if !apply(&mut touched, line, &mut dir_mtime, &mut seen, &mut rescan) {
                return None;
            }
        }
        // Every write the journal announced must be in its file as announced; otherwise the full
        // path scans what disagrees.
        if !rescan.is_empty() {
            return None;
        }
        for (id, entry) in touched.iter_mut() {
            let meta = fs::metadata(self.path(id)).ok()?;
            if meta.len() != entry.size {
                return None;
            }
            entry.mtime_ns = meta.modified().map_or(0, ns);
        }
        drop(journal);
        if dir_mtime != Some(self.dir_mtime()) {
            return None;
        }
        let total = (count + touched.len()).checked_sub(in_snapshot)?;

        // Merge the touched entries into the snapshot's order, reading no further than needed.
        let mut fresh: Vec<(String, Entry)> = touched.into_iter().collect();
        fresh.sort_by(|a, b| order((&a.0, &a.1), (&b.0, &b.1)));
        let mut fresh = fresh.into_iter().peekable();
        let mut rest = read.into_iter().map(Ok).chain(lines);
        let mut out = Vec::with_capacity(limit.min(total));
        let mut next_line: Option<(String, Entry)> = None;
        while out.len() < limit {
            if next_line.is_none() {
                next_line = loop {
                    let Some(line) = rest.next() else { break None };
                    let line = line.ok()?;
                    let (id, entry) = parse_line(&line)?;
                    if !touched_ids.contains(id) {
                        break Some((id.to_string(), entry));
                    }
                };
            }
            let take_fresh = match (fresh.peek(), &next_line) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((fid, fe)), Some((sid, se))) => order((fid, fe), (sid, se)).is_le(),
            };
            let (id, e) = if take_fresh {
                fresh.next().expect("peeked")
            } else {
                next_line.take().expect("checked")
            };
            out.push(summary(&id, e));
        }
        Some((out, total))
    }

    /// Brings the entries in line with the folder: new files scanned, grown files scanned from
    /// where the last scan stopped, vanished files dropped.
    fn reconcile(&self, entries: &mut HashMap<String, Entry>) -> Result<(), StoreError> {
        let listing =
            fs::read_dir(self.dir()).map_err(|e| StoreError::io("reading", self.dir(), e))?;
        let mut present = HashSet::new();
        for dir_entry in listing.filter_map(|e| e.ok()) {
            let Some(id) = conversation_id(&dir_entry.file_name()) else {
                continue;
            };
            let Ok(meta) = dir_entry.metadata() else {
                continue; // deleted between the directory read and now
            };
            if !meta.is_file() {
                continue;
            }
            let mtime_ns = meta.modified().map_or(0, ns);
            let entry = entries.entry(id.clone()).or_default();
            if entry.size != meta.len() || entry.mtime_ns != mtime_ns {
                let path = self.path(&id);
                scan(&path, entry).map_err(|e| StoreError::io("reading", &path, e))?;
                entry.size = meta.len();
                entry.mtime_ns = mtime_ns;
            }
            present.insert(id);
        }
        entries.retain(|id, _| present.contains(id));
        Ok(())
    }
}

/// Appends one line to the journal. A line torn by a full disk is cut off again, so that the next
/// line does not run into it.
fn journal_append(journal: &mut File, line: &[u8]) -> io::Result<()> {
    let before = journal.metadata()?.len();
    let written = journal.write_all(line);
    if written.is_err() {
        let _ = journal.set_len(before);
    }
    written
}

fn sorted_summaries(entries: HashMap<String, Entry>) -> Vec<Summary> {
    let mut sorted: Vec<(String, Entry)> = entries.into_iter().collect();
    sorted.sort_by(|a, b| order((&a.0, &a.1), (&b.0, &b.1)));
    sorted.into_iter().map(|(id, e)| summary(&id, e)).collect()
}

/// Applies one journal line; false when it does not fit what is known (then the folder is
/// reconciled). `dir_mtime` follows what `new` left the directory at; `touched` collects the
/// conversations written, `rescan` those whose count only a scan can tell.
fn apply(
    entries: &mut HashMap<String, Entry>,
    line: &str,
    dir_mtime: &mut Option<u128>,
    touched: &mut HashSet<String>,
    rescan: &mut HashSet<String>,
) -> bool {
    let f: Vec<&str> = line.split('\t').collect();
    match (f.first().copied(), f.len()) {
        (Some(op @ ("C" | "A" | "T")), 9) => {
            let (Ok(from), Ok(to), Ok(n)) =
                (f[2].parse::<u64>(), f[3].parse(), f[4].parse::<usize>())
            else {
                return false;
            };
            if op == "C" {
                entries.insert(f[1].to_string(), Entry::default());
                *dir_mtime = f[8].parse().ok();
            }
            let Some(e) = entries.get_mut(f[1]) else {
                return false; // an append to a file the index never saw created
            };
            touched.insert(f[1].to_string());
            if e.size != from || op == "T" {
                // Someone else wrote in between, or a torn line was completed: scan it.
                rescan.insert(f[1].to_string());
            }
            e.size = to;
            e.scanned = to;
            e.messages += n;
            if let Ok(t) = f[5].parse::<i64>() {
                e.last_activity = e.last_activity.max(Some(t));
            }
            if e.first_user.is_none() {
                e.first_user = field(f[6]);
            }
            if let Some(title) = field(f[7]) {
                e.title = Some(title);
            }
            true
        }
        (Some("D"), 3) => {
            entries.remove(f[1]);
            touched.remove(f[1]);
            *dir_mtime = f[2].parse().ok();
            true
        }
        _ => false,
    }
}

fn read_snapshot(path: &Path) -> (HashMap<String, Entry>, Option<u128>) {
    let mut entries = HashMap::new();
    let Ok(text) = fs::read_to_string(path) else {
        return (entries, None);
    };
    let mut lines = text.lines();
    let dir_mtime = lines
        .next()
        .and_then(|h| h.strip_prefix(MAGIC))
        .and_then(|rest| rest.strip_prefix('\t'))
        .and_then(|rest| rest.split('\t').next())
        .and_then(|m| m.parse().ok());
    if dir_mtime.is_none() {
        return (entries, None);
    }
    entries.reserve(text.len() / 64);
    for line in lines {
        let Some((id, entry)) = parse_line(line) else {
            return (HashMap::new(), None); // damaged: rebuild
        };
        entries.insert(id.to_string(), entry);
    }
    (entries, dir_mtime)
}

/// One snapshot line.
fn parse_line(line: &str) -> Option<(&str, Entry)> {
    let f: Vec<&str> = line.splitn(8, '\t').collect();
    if f.len() != 8 {
        return None;
    }
    Some((
        f[0],
        Entry {
            size: f[1].parse().ok()?,
            mtime_ns: f[2].parse().ok()?,
            scanned: f[3].parse().ok()?,
            messages: f[4].parse().ok()?,
            last_activity: f[5].parse().ok(),
            first_user: field(f[6]),
            title: field(f[7]),
        },
    ))
}

fn summary(id: &str, e: Entry) -> Summary {
    Summary {
        id: id.to_string(),
        messages: e.messages,
        title: e.title.or(e.first_user).unwrap_or_default(),
        last_activity: e.last_activity.and_then(|t| DateTime::from_timestamp(t, 0)),
        modified: UNIX_EPOCH + Duration::from_nanos(e.mtime_ns.min(u64::MAX as u128) as u64),
    }
}

/// Newest activity first, then the newest file, then by id: the order of `/list`.
fn order(a: (&str, &Entry), b: (&str, &Entry)) -> Ordering {
    b.1.last_activity
        .cmp(&a.1.last_activity)
        .then(b.1.mtime_ns.cmp(&a.1.mtime_ns))
        .then(a.0.cmp(b.0))
}

/// Writes the snapshot in `/list` order, so that the most recent conversations are its first lines.
fn write_snapshot(
    path: &Path,
    entries: &HashMap<String, Entry>,
    dir_mtime: u128,
) -> io::Result<()> {
    let mut sorted: Vec<(&String, &Entry)> = entries.iter().collect();
    sorted.sort_by(|a, b| order((a.0, a.1), (b.0, b.1)));
    let mut text = format!("{MAGIC}\t{dir_mtime}\t{}\n", sorted.len());
    for (id, e) in sorted {
        text.push_str(&format!(
            "{id}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            e.size,
            e.mtime_ns,
            e.scanned,
            e.messages,
            e.last_activity.map(|t| t.to_string()).unwrap_or_default(),
            e.first_user.as_deref().unwrap_or(""),
            e.title.as_deref().unwrap_or(""),
        ));
    }
    write_whole(path, text.as_bytes())
}

/// Scans the file to its last complete line, making the entry anew. A line counts as a message
/// exactly when loading would keep it as one: a message whose id came before (the root's
/// included) is dropped by loading, so it is not counted. (Hence always the whole file: what came
/// before decides.)
fn scan(path: &Path, entry: &mut Entry) -> io::Result<()> {
    use super::record::{Loaded, load_line};
    *entry = Entry::default();
    let mut file = super::store::open_regular(path, false)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let mut seen = HashSet::new();
    let mut root: Option<Id> = None;
    let complete = memchr::memrchr(b'\n', &bytes).map_or(0, |last| last + 1);
    for line in bytes[..complete].split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match load_line(line) {
            Ok(Loaded::Header(h)) if root.is_none() => root = Some(h.root_id.into()),
            Ok(Loaded::Message(m)) if seen.insert(m.id.clone()) => {
                entry.messages += 1;
                if entry.first_user.is_none() && m.role == Role::User {
                    entry.first_user = Some(clean(&m.content));
                }
                let t = m.timestamp.timestamp();
                if t != 0 {
                    entry.last_activity = entry.last_activity.max(Some(t));
                }
            }
            Ok(Loaded::Title(title)) => entry.title = Some(clean(&title)),
            _ => {}
        }
    }
    // A message with the root's id (before or after the header) is one loading drops too.
    if root.is_some_and(|r| seen.contains(&r)) {
        entry.messages -= 1;
    }
    entry.scanned = complete as u64;
    Ok(())
}

/// The conversation id of a file name `<id>.jsonl`, if it is one.
pub(crate) fn conversation_id(name: &OsStr) -> Option<String> {
    let id = name.to_str()?.strip_suffix(".jsonl")?;
    (!id.is_empty() && !id.starts_with('.')).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::record::TitleRecord;
    use crate::conversation::sample;
    use crate::conversation::{Conversation, Message, Store};
    use crate::vocab::Role;
    use std::fs::OpenOptions;
    use std::io::Write;

    fn write_conversation(store: &Store, id: &str, texts: &[&str]) -> Conversation {
        sample::stored(store, id, texts)
    }

    fn find<'a>(list: &'a [Summary], id: &str) -> &'a Summary {
        list.iter().find(|s| s.id == id).unwrap()
    }

    #[test]
    fn lists_counts_titles_and_follows_appends_through_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = write_conversation(&store, "aaaa0001", &["first question", "answer"]);
        write_conversation(&store, "aaaa0002", &["other"]);
        let list = store.list().unwrap();
        assert_eq!(list.len(), 2);
        let a = find(&list, "aaaa0001");
        assert_eq!((a.messages, a.title.as_str()), (2, "first question"));
        assert!(dir.path().join(INDEX_DIR).join(SNAPSHOT).exists());

        let m = c.add(Message::new(Role::User, "more")).unwrap();
        store
            .append(&c.id, &[Record::message(c.get(&m).unwrap())])
            .unwrap();
        store
            .append(
                &c.id,
                &[Record::Title(TitleRecord {
                    title: "Renamed\tnicely".into(),
                    timestamp: None,
                })],
            )
            .unwrap();
        let list = store.list().unwrap();
        let a = find(&list, "aaaa0001");
        assert_eq!((a.messages, a.title.as_str()), (3, "Renamed nicely"));
        // The newest activity comes first.
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn listing_reads_only_the_index_when_nothing_else_touched_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = write_conversation(&store, "abab0001", &["q", "a"]);
        store.list().unwrap();
        let m = c.add(Message::new(Role::User, "via new")).unwrap();
        store
            .append(&c.id, &[Record::message(c.get(&m).unwrap())])
            .unwrap();
        assert_eq!(find(&store.list().unwrap(), "abab0001").messages, 3);
        // A line appended behind new's back to a file the journal wrote is caught by its size (one
        // stat per written file); nothing else is read.
        let sneak = |id: &str, msg: &str| {
            let mut f = OpenOptions::new()
                .append(true)
                .open(store.path(id))
                .unwrap();
            writeln!(f, r#"{{"type":"message","msg_id":"{msg}","role":"user","content":"sneaky","parent_id":"x","timestamp":"2026-01-01T00:00:00Z"}}"#).unwrap();
        };
        let m = c.add(Message::new(Role::User, "again")).unwrap();
        store
            .append(&c.id, &[Record::message(c.get(&m).unwrap())])
            .unwrap();
        sneak("abab0001", "zz");
        assert_eq!(find(&store.list().unwrap(), "abab0001").messages, 5);
        // One the journal did not touch since the last listing is not seen: the files were not read.
        sneak("abab0001", "zy");
        assert_eq!(find(&store.list().unwrap(), "abab0001").messages, 5);
        // Creating a file changes the folder's mtime: then everything is reconciled.
        write_conversation(&store, "abab0002", &["other"]);
        fs::write(dir.path().join("stray.txt"), "").unwrap();
        assert_eq!(find(&store.list().unwrap(), "abab0001").messages, 6);
    }

    #[test]
    fn the_recent_ones_come_from_the_snapshot_and_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut convs = Vec::new();
        for i in 0..30 {
            convs.push(write_conversation(
                &store,
                &format!("r{i:07}"),
                &[&format!("q{i}")],
            ));
        }
        let all = store.list().unwrap();
        // Activity after the snapshot: an append to an old one, a new one, a trashed one.
        let old = &mut convs[3];
        let mut later = Message::new(Role::User, "much later");
        later.timestamp = chrono::Utc::now() + chrono::Duration::days(1);
        let m = old.add(later).unwrap();
        store
            .append(&old.id, &[Record::message(old.get(&m).unwrap())])
            .unwrap();
        write_conversation(&store, "znew0001", &["brand new"]);
        store.trash(&all[0].id).unwrap();
        let (recent, total) = store.list_recent(5).unwrap();
        assert_eq!(total, 30);
        assert_eq!(recent[0].id, "r0000003");
        assert_eq!(recent[0].messages, 2);
        // The same as the full listing, which reconciles with the folder.
        let full = store.list().unwrap();
        assert_eq!(full.len(), 30);
        assert_eq!(recent, full[..5].to_vec());
        let (everything, n) = store.list_recent(100).unwrap();
        assert_eq!((everything.len(), n), (30, 30));
        assert_eq!(everything, full);
    }

    #[test]
    fn outside_changes_are_reconciled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_conversation(&store, "bbbb0001", &["x"]);
        write_conversation(&store, "bbbb0002", &["y"]);
        assert_eq!(store.list().unwrap().len(), 2);
        // Another program removes one file, copies one in, and appends to a third behind our back.
        fs::remove_file(store.path("bbbb0002")).unwrap();
        let text = fs::read_to_string(store.path("bbbb0001")).unwrap();
        fs::write(store.path("cccc0003"), &text).unwrap();
        let list = store.list().unwrap();
        let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains(&"bbbb0001") && ids.contains(&"cccc0003"));
        assert_eq!(find(&list, "cccc0003").title, "x");
    }

    #[test]
    fn a_damaged_index_is_rebuilt_and_torn_tails_wait() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_conversation(&store, "dddd0001", &["one", "two"]);
        store.list().unwrap();
        fs::write(dir.path().join(INDEX_DIR).join(SNAPSHOT), "garbage").unwrap();
        fs::write(dir.path().join(INDEX_DIR).join(JOURNAL), "m\tnope\n").unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(store.path("dddd0001"))
            .unwrap();
        f.write_all(b"{\"type\":\"message\",\"torn").unwrap();
        drop(f);
        let list = store.list().unwrap();
        assert_eq!(find(&list, "dddd0001").messages, 2);
        // The rebuilt index serves the next listing without reconciling.
        assert_eq!(store.list().unwrap(), list);
    }

    #[test]
    fn the_journal_is_folded_into_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = write_conversation(&store, "eeee0001", &["q"]);
        store.list().unwrap();
        for i in 0..(COMPACT_AFTER + 10) {
            let m = c.add(Message::new(Role::User, format!("m{i}"))).unwrap();
            store
                .append(&c.id, &[Record::message(c.get(&m).unwrap())])
                .unwrap();
        }
        let journal = dir.path().join(INDEX_DIR).join(JOURNAL);
        assert!(fs::metadata(&journal).unwrap().len() > 0);
        let list = store.list().unwrap();
        assert_eq!(find(&list, "eeee0001").messages, COMPACT_AFTER + 11);
        assert_eq!(fs::metadata(&journal).unwrap().len(), 0);
        assert_eq!(store.list().unwrap(), list);
    }

    #[test]
    fn trashed_conversations_leave_the_list() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_conversation(&store, "ffff0001", &["a"]);
        write_conversation(&store, "ffff0002", &["b"]);
        store.list().unwrap();
        store.trash("ffff0001").unwrap();
        let list = store.list().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].id, "ffff0002");
    }

    /// What loading the file counts: the number `/list` must agree with.
    fn loaded(store: &Store, id: &str) -> usize {
        store.load(id, "sys").unwrap().0.len() - 1
    }

    fn add(store: &Store, c: &mut Conversation, text: &str) {
        let m = c.add(Message::new(Role::User, text)).unwrap();
        store
            .append(&c.id, &[Record::message(c.get(&m).unwrap())])
            .unwrap();
    }

    #[test]
    fn a_journal_that_cannot_be_written_costs_a_rebuild_not_a_wrong_count() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = write_conversation(&store, "fa110001", &["q", "a"]);
        store.list().unwrap();
        // The journal write fails (here: the journal is a folder; on a full disk, a write error).
        let journal = dir.path().join(INDEX_DIR).join(JOURNAL);
        fs::remove_file(&journal).unwrap();
        fs::create_dir(&journal).unwrap();
        add(&store, &mut c, "while the journal is broken");
        add(&store, &mut c, "and again");
        // Listing cannot use the index now: it scans, and agrees with loading.
        assert_eq!(find(&store.list().unwrap(), "fa110001").messages, 4);
        fs::remove_dir(&journal).unwrap();
        for _ in 0..2 {
            let (recent, total) = store.list_recent(10).unwrap();
            assert_eq!((recent[0].messages, total), (4, 1));
            assert_eq!(find(&store.list().unwrap(), "fa110001").messages, 4);
        }
        assert_eq!(loaded(&store, "fa110001"), 4);
    }

    #[test]
    fn a_write_announced_but_never_made_is_found_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = write_conversation(&store, "fa110002", &["q", "a"]);
        store.list().unwrap();
        // Killed between the journal line and the append: the journal promises two more messages.
        let len = fs::metadata(store.path(&c.id)).unwrap().len();
        let change = Change {
            messages: 2,
            last_activity: Some(4_000_000_000),
            first_user: None,
            title: Some("never written".into()),
        };
        drop(
            store
                .index()
                .journal_intent(&c.id, len, len + 300, &change, 'm'),
        );
        // Half of a write (killed mid-append) likewise.
        let (recent, _) = store.list_recent(5).unwrap();
        assert_eq!((recent[0].messages, recent[0].title.as_str()), (2, "q"));
        assert_eq!(find(&store.list().unwrap(), "fa110002").messages, 2);
        let mut f = OpenOptions::new()
            .append(true)
            .open(store.path(&c.id))
            .unwrap();
        drop(
            store
                .index()
                .journal_intent(&c.id, len, len + 500, &change, 'm'),
        );
        f.write_all(br#"{"type":"message","msg_id":"half","#)
            .unwrap();
        assert_eq!(find(&store.list().unwrap(), "fa110002").messages, 2);
        assert_eq!(loaded(&store, "fa110002"), 2);
    }

    #[test]
    fn a_file_without_a_final_newline_is_counted_as_loading_counts_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = write_conversation(&store, "fa110003", &["q"]);
        store.list().unwrap();
        // Another program appends a whole message but no newline.
        let mut f = OpenOptions::new()
            .append(true)
            .open(store.path(&c.id))
            .unwrap();
        let parent = c.cursor().to_string();
        write!(
            f,
            r#"{{"type":"message","msg_id":"ext00001","role":"assistant","content":"from elsewhere","parent_id":"{parent}","timestamp":"2026-01-01T00:00:00Z"}}"#
        )
        .unwrap();
        drop(f);
        add(&store, &mut c, "after the unterminated line");
        assert_eq!(loaded(&store, "fa110003"), 3);
        assert_eq!(store.list_recent(5).unwrap().0[0].messages, 3);
        assert_eq!(find(&store.list().unwrap(), "fa110003").messages, 3);
    }

    #[test]
    fn an_index_that_is_not_a_folder_lists_by_scanning() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join(INDEX_DIR), "not a folder").unwrap();
        let mut c = write_conversation(&store, "fa110004", &["q", "a"]);
        add(&store, &mut c, "more");
        let list = store.list().unwrap();
        assert_eq!((list.len(), list[0].messages), (1, 3));
        let (recent, total) = store.list_recent(1).unwrap();
        assert_eq!((recent[0].messages, total), (3, 1));
        assert_eq!(store.latest().unwrap().as_deref(), Some("fa110004"));
    }

    #[test]
    fn an_invalid_utf8_byte_keeps_its_message_in_list_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = write_conversation(&store, "fa110005", &["q"]);
        let parent = c.cursor().to_string();
        let mut f = OpenOptions::new()
            .append(true)
            .open(store.path(&c.id))
            .unwrap();
        f.write_all(br#"{"type":"message","msg_id":"bad00001","role":"assistant","content":"caf"#)
            .unwrap();
        f.write_all(&[0xe9]).unwrap(); // Latin-1 é: not UTF-8
        write!(
            f,
            r#" ok","parent_id":"{parent}","timestamp":"2026-01-01T00:00:00Z"}}"#
        )
        .unwrap();
        f.write_all(b"\n").unwrap();
        drop(f);
        let (conv, report) = store.load("fa110005", "sys").unwrap();
        assert!(report.skipped_lines.is_empty(), "{report:?}");
        assert_eq!(conv.get("bad00001").unwrap().content, "caf\u{fffd} ok");
        // Creating a file reconciles; the count is loading's.
        write_conversation(&store, "fa110006", &["other"]);
        assert_eq!(find(&store.list().unwrap(), "fa110005").messages, 2);
    }

    #[test]
    fn listings_racing_appends_from_other_processes_end_in_agreement() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ids: Vec<String> = (0..3).map(|i| format!("race000{i}")).collect();
        let convs: Vec<Conversation> = ids
            .iter()
            .map(|id| write_conversation(&store, id, &["start"]))
            .collect();
        thread::scope(|scope| {
            for mut c in convs {
                // Each writer has a Store of its own, as another process would.
                let writer = Store::open(dir.path()).unwrap();
                scope.spawn(move || {
                    for i in 0..40 {
                        add(&writer, &mut c, &format!("message {i}"));
                    }
                });
            }
            let lister = Store::open(dir.path()).unwrap();
            scope.spawn(move || {
                for i in 0..60 {
                    if i % 2 == 0 {
                        lister.list().unwrap();
                    } else {
                        lister.list_recent(2).unwrap();
                    }
                    if i % 20 == 0 {
                        // Something else creates a file: the next listing reconciles mid-race.
                        fs::write(lister.dir().join(format!("x{i}.txt")), "").unwrap();
                    }
                }
            });
        });
        let list = store.list().unwrap();
        for id in &ids {
            assert_eq!(find(&list, id).messages, 41, "{id}");
            assert_eq!(loaded(&store, id), 41);
        }
        let (recent, total) = store.list_recent(3).unwrap();
        assert_eq!(total, 3);
        assert!(recent.iter().all(|s| s.messages == 41));
    }

    #[cfg(unix)]
    #[test]
    fn conversations_and_the_index_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data/deeper");
        let store = Store::open(&data).unwrap();
        write_conversation(&store, "aaaa0009", &["secret plans"]);
        store.list().unwrap();
        store.trash("aaaa0009").unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join(INDEX_DIR)), 0o700);
        assert_eq!(mode(&data.join(INDEX_DIR).join(JOURNAL)), 0o600);
        assert_eq!(mode(&data.join(INDEX_DIR).join(SNAPSHOT)), 0o600);
        assert_eq!(mode(&data.join(TRASH_DIR)), 0o700);
        assert_eq!(mode(&data.join("trash/aaaa0009.jsonl")), 0o600);
    }

    /// A line repeating an earlier message's id (or the root's) is dropped by loading: `/list`
    /// does not count it, whether the index saw the file whole or as an append.
    #[test]
    fn a_repeated_id_is_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = write_conversation(&store, "d0b10001", &["q", "a"]);
        store.list().unwrap();
        let text = fs::read_to_string(store.path(&c.id)).unwrap();
        let first = text
            .lines()
            .find(|l| l.contains(r#""type":"message""#))
            .unwrap()
            .to_string();
        let mut line: serde_json::Value = serde_json::from_str(&first).unwrap();
        line["msg_id"] = c.root_id.clone().into();
        let as_root = line.to_string();
        assert_ne!(as_root, first);
        let mut f = OpenOptions::new()
            .append(true)
            .open(store.path(&c.id))
            .unwrap();
        writeln!(f, "{first}\n{as_root}").unwrap();
        drop(f);
        assert_eq!(loaded(&store, "d0b10001"), 2);
        assert_eq!(find(&store.list().unwrap(), "d0b10001").messages, 2);
        // Seen whole, by an index made anew.
        fs::remove_dir_all(dir.path().join(".index")).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(find(&store.list().unwrap(), "d0b10001").messages, 2);
        assert_eq!(store.list_recent(5).unwrap().0[0].messages, 2);
    }
}
