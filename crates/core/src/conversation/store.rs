//! The conversation repository: one append-only JSONL file per conversation in DATADIR.
//!
//! Writes are appends of whole lines under an exclusive advisory lock, so two `new` processes on the
//! same DATADIR never interleave inside a line; a file that ends in a torn line gets a newline before
//! the next record. Nothing already written is ever rewritten. Reading skips and reports lines it
//! cannot parse and keeps messages whose parent is missing reachable under the root.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::index::{Change, Index};
use super::message::Message;
use super::record::{HeaderRecord, Loaded, Record};
use super::tree::{Attached, Conversation};
use crate::fs::atomic::{create_private_dir, private_options};
use crate::vocab::Role;
use crate::vocab::new_id;

/// What loading a file had to work around, for the user to see.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// 1-based line numbers of lines that could not be read, with the reason.
    pub skipped_lines: Vec<(usize, String)>,
    /// Messages whose parent is not in the file; they were attached to the root.
    pub orphans: Vec<String>,
    /// Messages whose id appeared earlier in the file; the later line was ignored.
    pub duplicates: Vec<String>,
    /// Summary nodes whose `replaces` is not a message above them: kept, never sent.
    pub misplaced_summaries: Vec<String>,
}

impl LoadReport {
    pub fn is_clean(&self) -> bool {
        self.skipped_lines.is_empty()
            && self.orphans.is_empty()
            && self.duplicates.is_empty()
            && self.misplaced_summaries.is_empty()
    }
}

/// What a conversation's header says of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kind {
    /// A subagent's (its header links it to a parent).
    pub subagent: bool,
    /// A one-shot's (`-p`).
    pub one_shot: bool,
}

#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    index: Index,
}

pub use super::error::StoreError;
pub use super::index::EXTENSION;
use crate::conversation;
use memchr::memmem;
use new_sys::platform;
use std::collections::HashSet;
use std::io::BufReader;
#[cfg(test)]
#[cfg(unix)]
use std::os::unix::fs::symlink;
#[cfg(test)]
use std::thread;
#[cfg(all(test, not(windows)))]
use std::time::Duration;
#[cfg(all(test, not(windows)))]
use std::time::Instant;
/// Where deleted conversations go, inside DATADIR.
pub const TRASH_DIR: &str = "trash";

impl Store {
    /// Opens DATADIR, creating it if needed.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        create_private_dir(&dir).map_err(|e| StoreError::io("creating data folder", &dir, e))?;
        Ok(Store {
            index: Index::new(&dir),
            dir,
        })
    }

    /// The `/list` index of DATADIR.
    #[cfg(test)]
    pub(crate) fn index(&self) -> &Index {
        &self.index
    }

    /// Summaries of every conversation, newest activity first.
    pub fn list(&self) -> Result<Vec<super::Summary>, StoreError> {
        self.index.list()
    }

    /// The `limit` most recent conversations and how many there are in all.
    pub fn list_recent(&self, limit: usize) -> Result<(Vec<super::Summary>, usize), StoreError> {
        self.index.list_recent(limit)
    }

    /// Whether a conversation is a subagent's (its header links it to a `parent`, DESIGN §10; a session
    /// run with `--agent` names only its `agent`). Reads the first line only.
    pub fn is_subagent(&self, id: &str) -> bool {
        self.kind(id).subagent
    }

    /// What a conversation's header says it is, from one read of it.
    pub fn kind(&self, id: &str) -> Kind {
        let header = self.header(id);
        let metadata = header.as_ref().map(|h| &h["metadata"]);
        Kind {
            subagent: metadata.is_some_and(|m| m.get("parent").is_some()),
            one_shot: metadata.is_some_and(|m| m["one_shot"] == true),
        }
    }

    /// A conversation's header line, parsed (the first 64 KB of the file at most).
    fn header(&self, id: &str) -> Option<serde_json::Value> {
        use std::io::BufRead;
        let file = open_regular(&self.path(id), false).ok()?;
        let mut first = Vec::new();
        let mut reader = BufReader::new(file).take(64 * 1024);
        reader.read_until(b'\n', &mut first).ok()?;
        serde_json::from_slice(&first).ok()
    }

    /// The conversation with the newest activity that was neither a one-shot (`-p`) nor a
    /// subagent's, for an interactive `--continue`; the newest of all when there is none.
    pub fn latest_interactive(&self) -> Result<Option<String>, StoreError> {
        let (recent, _) = self.list_recent(50)?;
        let chosen = recent
            .iter()
            .find(|s| {
                let kind = self.kind(&s.id);
                !kind.one_shot && !kind.subagent
            })
            .or(recent.first())
            .map(|s| s.id.clone());
        Ok(chosen)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, id: &str) -> PathBuf {
        super::index::conversation_path(&self.dir, id)
    }

    pub fn exists(&self, id: &str) -> bool {
        fs::symlink_metadata(self.path(id)).is_ok_and(|m| m.is_file())
    }

    /// Ids of every conversation file, unsorted. Cheap: one directory read, no file opened.
    pub fn ids(&self) -> Result<Vec<String>, StoreError> {
        let entries =
            fs::read_dir(&self.dir).map_err(|e| StoreError::io("reading", &self.dir, e))?;
        Ok(entries
            .filter_map(|e| e.ok())
            .filter_map(|e| super::index::conversation_id(&e.file_name()))
            .collect())
    }

    /// Resolves an id or an unambiguous prefix of one.
    pub fn resolve(&self, prefix: &str) -> Result<String, StoreError> {
        let prefix = prefix.trim();
        if !prefix.is_empty() && self.exists(prefix) {
            return Ok(prefix.to_string());
        }
        let mut matches: Vec<String> = self
            .ids()?
            .into_iter()
            .filter(|id| !prefix.is_empty() && id.starts_with(prefix))
            .collect();
        matches.sort();
        match matches.len() {
            0 => Err(StoreError::NotFound(prefix.to_string())),
            1 => Ok(matches.remove(0)),
            _ => Err(StoreError::Ambiguous {
                prefix: prefix.to_string(),
                matches,
            }),
        }
    }

    /// Loads a conversation; its root carries `system_prompt` (the system prompt is never stored).
    pub fn load(
        &self,
        id: &str,
        system_prompt: &str,
    ) -> Result<(Conversation, LoadReport), StoreError> {
        let path = self.path(id);
        let file = open_regular(&path, false).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => StoreError::NotFound(id.to_string()),
            _ if is_refused(&e) => StoreError::NotRegular(path.clone()),
            _ => StoreError::io("reading", &path, e),
        })?;
        // Read a line at a time: the file is never held whole beside the tree made of it.
        let size = file.metadata().map_or(0, |m| m.len());
        let reader = io::BufReader::with_capacity(256 * 1024, file);
        let (conversation, report, shape) =
            parse_lines(id, reader, system_prompt, estimated_lines(size))
                .map_err(|e| StoreError::io("reading", &path, e))?;
        // Another program's file in DATADIR (Claude Code's, Codex's or pi's history, say) reads
        // as nothing: it is never opened, so nothing is appended to it.
        if conversation.len() == 1 && !shape.header && !shape.blank {
            let mut head = Vec::new();
            let read = open_regular(&path, false)
                .and_then(|f| io::Read::read_to_end(&mut io::Read::take(f, 64 * 1024), &mut head));
            read.map_err(|e| StoreError::io("reading", &path, e))?;
            if memmem::find(&head, br#""type":"header""#).is_none() {
                return Err(StoreError::Foreign {
                    path,
                    what: foreign_kind(&head),
                });
            }
        }
        Ok((conversation, report))
    }

    /// The conversation with the newest activity, for `--continue`.
    pub fn latest(&self) -> Result<Option<String>, StoreError> {
        Ok(self.list_recent(1)?.0.into_iter().next().map(|s| s.id))
    }

    /// Moves a conversation file into `DATADIR/trash/`, never deleting it. Returns where it went.
    pub fn trash(&self, id: &str) -> Result<PathBuf, StoreError> {
        let from = self.path(id);
        if !from.is_file() {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let dir = self.dir.join(TRASH_DIR);
        create_private_dir(&dir).map_err(|e| StoreError::io("creating", &dir, e))?;
        let mut to = dir.join(format!("{id}.{EXTENSION}"));
        if to.exists() {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f");
            to = dir.join(format!("{id}.{stamp}.{EXTENSION}"));
        }
        fs::rename(&from, &to).map_err(|e| StoreError::io("moving to the trash", &from, e))?;
        self.index.journal_removal(id);
        Ok(to)
    }

    /// Writes a new conversation file holding the header and the first records. Fails with
    /// `AlreadyExists` when the id is taken (by another process, say), so the caller can pick another.
    pub fn create(&self, conversation: &Conversation, records: &[Record]) -> io::Result<()> {
        let header = Record::Header(HeaderRecord {
            root_id: conversation.root_id.clone(),
            metadata: conversation.metadata.clone(),
        });
        let mut text = header.to_line();
        text.push('\n');
        for r in records {
            text.push_str(&r.to_line());
            text.push('\n');
        }
        let path = self.path(&conversation.id);
        let mut file = private_options().write(true).create_new(true).open(&path)?;
        file.lock()?;
        // The journal says what is about to be written before it is: a write that is then lost
        // leaves a size the index can check against the file.
        let journal = self.index.journal_intent(
            &conversation.id,
            0,
            text.len() as u64,
            &Change::of(records),
            'c',
        );
        file.write_all(text.as_bytes())?;
        drop(journal);
        Ok(())
    }

    /// Appends records to an existing conversation file, each on a line of its own.
    pub fn append(&self, id: &str, records: &[Record]) -> Result<(), StoreError> {
        let path = self.path(id);
        let io_err = |e| StoreError::io("appending to", &path, e);
        let mut file = open_regular(&path, true).map_err(|e| {
            if is_refused(&e) {
                StoreError::NotRegular(path.clone())
            } else {
                io_err(e)
            }
        })?;
        // The lock keeps a concurrent writer from slipping between the torn-line check and the write.
        file.lock().map_err(io_err)?;
        let mut text = String::new();
        let len = file.metadata().map_err(io_err)?.len();
        let mut torn = false;
        if len > 0 {
            let mut last = [0u8];
            file.seek(SeekFrom::Start(len - 1)).map_err(io_err)?;
            file.read_exact(&mut last).map_err(io_err)?;
            if last[0] != b'\n' {
                text.push('\n'); // the file ends in a torn line: start ours on a fresh one
                torn = true;
            }
        }
        for r in records {
            text.push_str(&r.to_line());
            text.push('\n');
        }
        // Under the file's lock, so the sizes in the journal are this write's; the journal stays
        // locked until the write is done, so no listing sees the line without the bytes.
        let op = if torn { 't' } else { 'm' };
        let journal =
            self.index
                .journal_intent(id, len, len + text.len() as u64, &Change::of(records), op);
        file.write_all(text.as_bytes()).map_err(io_err)?;
        drop(journal);
        Ok(())
    }
}

/// Opens a conversation file to read (and with `append`, to append to) as itself: a link in
/// DATADIR is not followed (appending through one would write to a file outside), a FIFO or a
/// device is not waited on; only a regular file is opened. A refusal is an error
/// [`is_refused`] recognises.
pub(crate) fn open_regular(path: &Path, append: bool) -> io::Result<fs::File> {
    let mut options = platform::no_link_options();
    options.read(true).append(append);
    let file = match options.open(path) {
        Ok(file) => file,
        // A link at the end (`ELOOP`, or on the BSDs `EMLINK`): said as what it is.
        Err(e) if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                NotRegularFile(e),
            ));
        }
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotRegularFile(io::Error::other("not a regular file")),
        ));
    }
    Ok(file)
}

/// What [`open_regular`] refused (the cause inside).
#[derive(Debug, thiserror::Error)]
#[error("not a regular file: {0}")]
struct NotRegularFile(io::Error);

/// Whether `e` is [`open_regular`]'s refusal of a link, a FIFO or a device.
pub(crate) fn is_refused(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<NotRegularFile>())
}

/// Rebuilds a conversation from the bytes of its file.
pub fn parse_conversation(
    id: &str,
    bytes: &[u8],
    system_prompt: &str,
) -> (Conversation, LoadReport) {
    let lines = memchr::memchr_iter(b'\n', bytes).count() + 1;
    let (conversation, report, _) = parse_lines(id, bytes, system_prompt, (lines, lines))
        .expect("reading from memory cannot fail");
    (conversation, report)
}

/// What a file's lines were, beyond the conversation read from them.
struct Shape {
    /// A header line was read.
    header: bool,
    /// Nothing but white space.
    blank: bool,
}

/// Room for at most as many messages as a file of `size` bytes holds (the shortest lines `new`
/// writes take some 150 bytes), and for as many as it likely holds (lines of a conversation with
/// its tool calls and answers take more like 250): see [`Conversation::with_root_and_capacity`].
fn estimated_lines(size: u64) -> (usize, usize) {
    let lines = |per_line: u64| (size / per_line).min(4_000_000) as usize + 1;
    (lines(150), lines(250))
}

/// Reads a conversation's lines from `reader`, one at a time (see [`parse_conversation`]).
fn parse_lines(
    id: &str,
    mut reader: impl io::BufRead,
    system_prompt: &str,
    lines: (usize, usize),
) -> io::Result<(Conversation, LoadReport, Shape)> {
    let mut shape = Shape {
        header: false,
        blank: true,
    };
    let mut report = LoadReport::default();
    let mut header: Option<HeaderRecord> = None;
    let mut title = None;
    // Built as soon as the header (normally the first line) gives the root; messages met before it
    // wait, since the root of a file without a header is inferred from all of them.
    let mut conversation: Option<Conversation> = None;
    let mut waiting: Vec<Message> = Vec::new();
    // Whether a message was attached: the newest one is then where the cursor goes.
    let mut attached = false;
    // Whether any message read is a side question or a summary: only then is the tree walked
    // again for them (a walk up from the newest message, a pass over every node).
    let (mut sides, mut summaries) = (false, false);
    let mut checkpoints: Vec<(String, String)> = Vec::new();
    let mut branches: Vec<(String, String, bool)> = Vec::new();
    let mut undone: Vec<(String, usize)> = Vec::new();
    // The line of the last message, to tell an undo that came after it.
    let mut last_line = 0;
    // Room for the file's messages and a session's worth of new ones, so that growing the tree
    // does not copy it again soon after loading.
    let capacity = (lines.0 + 1024, lines.1 + 1024);
    let start = |root_id: String| {
        let mut root = Message::new(Role::System, system_prompt);
        root.id = root_id.into();
        Conversation::with_root_and_capacity(id, root, capacity)
    };
    let mut buffer = Vec::new();
    for n in 0.. {
        buffer.clear();
        if reader.read_until(b'\n', &mut buffer)? == 0 {
            break;
        }
        let line = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        shape.blank = false;
        match super::record::load_line(line) {
            Ok(Loaded::Header(h)) => {
                shape.header = true;
                if header.is_none() {
                    if conversation.is_none() && waiting.is_empty() {
                        conversation = Some(start(h.root_id.clone()));
                    }
                    header = Some(h);
                }
            }
            Ok(Loaded::Message(m)) => {
                last_line = n;
                sides |= m.side;
                summaries |= m.is_summary();
                match conversation.as_mut() {
                    Some(c) => attach(c, m, &mut report, &mut attached),
                    None => waiting.push(m),
                }
            }
            Ok(Loaded::Title(t)) => title = Some(t),
            Ok(Loaded::Checkpoint(node, snapshot)) => checkpoints.push((node, snapshot)),
            Ok(Loaded::Branch(name, node, deleted)) => branches.push((name, node, deleted)),
            Ok(Loaded::Undone(node)) => undone.push((node, n)),
            Ok(Loaded::Unknown) => {}
            Err(e) => report.skipped_lines.push((n + 1, e)),
        }
    }

    let mut conversation = conversation.unwrap_or_else(|| {
        // Without a header first (its line torn or lost), the root is the parent no message provides.
        let root_id = header
            .as_ref()
            .map(|h| h.root_id.clone())
            .or_else(|| {
                let known: HashSet<&str> = waiting.iter().map(|m| m.id.as_str()).collect();
                waiting
                    .iter()
                    .filter_map(|m| m.parent_id.as_deref())
                    .find(|p| !known.contains(p))
                    .map(str::to_string)
            })
            .unwrap_or_else(new_id);
        start(root_id)
    });
    for record in waiting {
        attach(&mut conversation, record, &mut report, &mut attached);
    }
    undone.retain(|(id, _)| conversation.contains(id));
    // Undone after the last message was written: the session ended there, above it.
    let undone_last: HashSet<String> = undone
        .iter()
        .filter(|(_, n)| *n > last_line)
        .map(|(id, _)| id.clone())
        .collect();
    conversation
        .undone
        .extend(undone.into_iter().map(|(id, _)| id));
    // The cursor of a loaded conversation is its last message; in a side branch (`/btw`) or an
    // undone part (`/undo` the last thing done), where that hangs from.
    if attached {
        let last = conversation.newest_id();
        let at = if sides || !undone_last.is_empty() {
            conversation.off_side(last, &|id| undone_last.contains(id))
        } else {
            last
        }
        .to_string();
        conversation.move_cursor(&at).expect("attached");
    }
    // Branch names, the latest record of each winning; one naming a node not in the tree is
    // passed over.
    for (name, node, deleted) in branches {
        if deleted {
            conversation.branches.remove(&name);
        } else if conversation.contains(&node) && conversation::valid_branch_name(&name) {
            conversation.branches.insert(name, node);
        }
    }
    if let Some(h) = header {
        conversation.metadata = h.metadata;
    }
    conversation.title = title;
    // The latest checkpoint of a node wins.
    conversation.latest_checkpoint = checkpoints.last().map(|(_, s)| s.clone());
    conversation.checkpoints.extend(checkpoints);
    if summaries {
        report.misplaced_summaries = conversation
            .misplaced_summaries()
            .iter()
            .map(|m| m.id.to_string())
            .collect();
    }
    Ok((conversation, report, shape))
}

/// What another program's JSONL file looks like it is, from its first lines.
fn foreign_kind(bytes: &[u8]) -> &'static str {
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let has = |needle: &[u8]| memmem::find(head, needle).is_some();
    if has(b"\"parentUuid\"") {
        "Claude Code's history"
    } else if has(b"\"session_meta\"") || has(b"\"response_item\"") {
        "Codex's history"
    } else if has(b"\"parentId\"") {
        "pi's history"
    } else {
        "another program's file"
    }
}

/// Adds one stored message to the tree being loaded: under its parent, or under the root when the
/// parent is missing; a repeated id is reported and left out.
fn attach(
    conversation: &mut Conversation,
    message: Message,
    report: &mut LoadReport,
    attached: &mut bool,
) {
    match conversation.attach_loaded(message) {
        Attached::UnderParent => *attached = true,
        Attached::UnderRoot => {
            report.orphans.push(conversation.newest_id().to_string());
            *attached = true;
        }
        Attached::Repeated(id) => report.duplicates.push(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    /// Issue 41 (11), as written: a conversation file in DATADIR that is a link to a
    /// conversation outside is neither appended through nor read through; a FIFO named like a
    /// conversation is refused at once (it used to hang `-r`); /list leaves both out.
    #[cfg(unix)]
    #[test]
    fn a_link_or_a_fifo_in_datadir_is_refused_not_followed_or_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let elsewhere = Store::open(outside.path()).unwrap();
        let c = sample(&elsewhere);
        let target = elsewhere.path(&c.id);
        let before = fs::read(&target).unwrap();
        symlink(&target, store.path(&c.id)).unwrap();
        let m = Message::new(Role::User, "appended through the link");
        let err = store.append(&c.id, &[Record::message(&m)]).unwrap_err();
        assert!(
            matches!(&err, StoreError::NotRegular(p) if *p == store.path(&c.id)),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("is not a regular file (a link, a named pipe or a device)")
        );
        assert_eq!(
            fs::read(&target).unwrap(),
            before,
            "nothing written outside"
        );
        assert!(matches!(
            store.load(&c.id, "sys"),
            Err(StoreError::NotRegular(_))
        ));
        assert!(!store.exists(&c.id));
        assert_eq!(store.kind(&c.id), Kind::default());

        let fifo = store.path("f1f0f1f0");
        platform::make_fifo(&fifo).unwrap();
        let started = Instant::now();
        assert!(matches!(
            store.load("f1f0f1f0", "sys"),
            Err(StoreError::NotRegular(_))
        ));
        assert!(matches!(
            store.append("f1f0f1f0", &[Record::message(&m)]),
            Err(StoreError::NotRegular(_))
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(store.list().unwrap().is_empty());
        assert!(matches!(store.resolve("f1f0"), Ok(id) if id == "f1f0f1f0"));
        // A regular file is appended to as before.
        fs::remove_file(store.path(&c.id)).unwrap();
        let mine = sample(&store);
        let u = Message::new(Role::User, "more");
        store.append(&mine.id, &[Record::message(&u)]).unwrap();
        assert_eq!(store.load(&mine.id, "sys").unwrap().0.len(), 4);
    }

    /// A file is read a line at a time: Windows line ends, a last line without its newline, a
    /// torn line in the middle (reported by its number) and blank lines all read as before; a
    /// file of another program's lines is refused, an empty one is a conversation.
    #[test]
    fn loading_reads_lines_as_they_come() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let text = "{\"type\":\"header\",\"root_id\":\"r0\",\"metadata\":{}}\r\n\
{\"type\":\"message\",\"msg_id\":\"u1\",\"role\":\"user\",\"content\":\"hi\",\"parent_id\":\"r0\",\"timestamp\":\"2026-07-24T12:35:55Z\"}\r\n\
\r\n\
{\"type\":\"message\",\"msg_id\":\"a1\",\"ro\n\
{\"type\":\"message\",\"msg_id\":\"a2\",\"role\":\"assistant\",\"content\":\"yes\",\"parent_id\":\"u1\",\"timestamp\":\"2026-07-24T12:35:56Z\"}";
        fs::write(store.path("lines"), text).unwrap();
        let (c, report) = store.load("lines", "sys").unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c.cursor(), "a2");
        assert_eq!(c.get("a2").unwrap().content, "yes");
        assert_eq!(report.skipped_lines.len(), 1);
        assert_eq!(report.skipped_lines[0].0, 4);
        fs::write(store.path("blank"), "\n\n").unwrap();
        assert_eq!(store.load("blank", "sys").unwrap().0.len(), 1);
        fs::write(
            store.path("theirs"),
            "{\"parentUuid\":null,\"type\":\"user\"}\n",
        )
        .unwrap();
        assert!(matches!(
            store.load("theirs", "sys"),
            Err(StoreError::Foreign {
                what: "Claude Code's history",
                ..
            })
        ));
        // A header alone (a conversation not yet answered) is ours.
        fs::write(
            store.path("header"),
            "{\"type\":\"header\",\"root_id\":\"r0\",\"metadata\":{}}\n",
        )
        .unwrap();
        assert_eq!(store.load("header", "sys").unwrap().0.root_id, "r0");
    }

    #[test]
    fn flat_tool_calls_load_with_their_results_attached() {
        let text = r#"{"type":"header","root_id":"r0000000","metadata":{}}
{"type":"message","msg_id":"u1","role":"user","content":"read it","parent_id":"r0000000","timestamp":"2026-07-24T12:35:55Z"}
{"type":"message","msg_id":"a1","role":"assistant","content":"","parent_id":"u1","timestamp":"2026-07-24T12:35:56Z","tool_calls":[{"id":"c1","name":"read_file","arguments":{"filepath":"a.txt"}},{"id":"c2","name":"list_files","arguments":"{}"}]}
{"type":"message","msg_id":"t1","role":"tool","content":"hi","parent_id":"a1","timestamp":"2026-07-24T12:35:57Z","tool_call_id":"c1"}
{"type":"message","msg_id":"t2","role":"tool","content":"a.txt","parent_id":"t1","timestamp":"2026-07-24T12:35:58Z","tool_call_id":"c2"}
"#;
        let (c, report) = parse_conversation("x", text.as_bytes(), "sys");
        assert!(report.is_clean(), "{report:?}");
        let a1 = c.get("a1").unwrap();
        assert_eq!(a1.calls().len(), 2);
        assert_eq!(a1.calls()[0].function.arguments, r#"{"filepath":"a.txt"}"#);
        assert_eq!(c.get("t1").unwrap().parent_id.as_deref(), Some("a1"));
        let sent = c.api_messages("t2");
        assert_eq!(sent[2].tool_calls()[1].function.name, "list_files");
        assert_eq!(sent[3].tool_call_id(), Some("c1"));
        // Written back in the standard nested shape.
        let line = Record::message(a1).to_line();
        assert!(
            line.contains(
                r#""function":{"name":"read_file","arguments":"{\"filepath\":\"a.txt\"}"}"#
            ),
            "{line}"
        );
    }

    fn msg_record(conv: &Conversation, id: &str) -> Record {
        Record::message(conv.get(id).unwrap())
    }

    fn sample(store: &Store) -> Conversation {
        let mut c = Conversation::new("abcd1234", "sys");
        let u = c.add(Message::new(Role::User, "hello")).unwrap();
        store.create(&c, &[msg_record(&c, &u)]).unwrap();
        let a = c.add(Message::new(Role::Assistant, "hi there")).unwrap();
        store.append(&c.id, &[msg_record(&c, &a)]).unwrap();
        c
    }

    #[test]
    fn save_and_load_give_the_same_tree() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = sample(&store);
        let (loaded, report) = store.load(&c.id, "new sys").unwrap();
        assert!(report.is_clean());
        assert_eq!(loaded.root_id, c.root_id);
        assert_eq!(loaded.root().content, "new sys");
        assert_eq!(loaded.len(), 3);
        assert_eq!(loaded.cursor(), c.cursor());
        for (_, m) in c.preorder().into_iter().skip(1) {
            assert_eq!(loaded.get(&m.id), Some(m));
        }
    }

    #[test]
    fn create_refuses_a_taken_id() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = sample(&store);
        let err = store.create(&c, &[]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn torn_last_line_is_skipped_and_the_next_append_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut c = sample(&store);
        let path = store.path(&c.id);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"type":"message","msg_id":"torn","ro"#)
            .unwrap();
        drop(f);

        let (loaded, report) = store.load(&c.id, "sys").unwrap();
        assert_eq!(loaded.len(), 3);
        assert_eq!(report.skipped_lines.len(), 1);
        assert_eq!(report.skipped_lines[0].0, 4);

        let u = c.add(Message::new(Role::User, "again")).unwrap();
        store.append(&c.id, &[msg_record(&c, &u)]).unwrap();
        let (loaded, report) = store.load(&c.id, "sys").unwrap();
        assert_eq!(loaded.len(), 4);
        assert_eq!(loaded.cursor(), u);
        assert_eq!(report.skipped_lines.len(), 1);
    }

    #[test]
    fn garbage_missing_parents_and_unknown_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let text = concat!(
            "{\"type\":\"header\",\"root_id\":\"r0000000\",\"metadata\":{}}\n",
            "not json at all\n",
            "{\"type\":\"future_thing\",\"x\":1}\n",
            "{\"type\":\"message\",\"msg_id\":\"u1\",\"role\":\"user\",\"content\":\"a\",\"parent_id\":\"r0000000\",\"timestamp\":\"2026-07-24T12:35:55Z\",\"tool_call_id\":null,\"tool_calls\":null,\"new_field\":[1]}\n",
            "{\"type\":\"message\",\"msg_id\":\"a9\",\"role\":\"assistant\",\"content\":\"lost parent\",\"parent_id\":\"gone\",\"timestamp\":\"2026-07-24T12:35:56Z\",\"tool_call_id\":null,\"tool_calls\":null}\n",
            "{\"type\":\"message\",\"msg_id\":\"u1\",\"role\":\"user\",\"content\":\"dup\",\"parent_id\":\"r0000000\",\"timestamp\":\"2026-07-24T12:35:57Z\"}\n",
            "{\"type\":\"title\",\"title\":\"Named\",\"timestamp\":\"2026-07-24T12:36:00Z\"}\n",
        );
        fs::write(store.path("c1"), text).unwrap();
        let (c, report) = store.load("c1", "sys").unwrap();
        assert_eq!(report.skipped_lines.len(), 1);
        assert_eq!(report.skipped_lines[0].0, 2);
        assert_eq!(report.orphans, vec!["a9".to_string()]);
        assert_eq!(report.duplicates, vec!["u1".to_string()]);
        assert_eq!(c.get("a9").unwrap().parent_id.as_deref(), Some("r0000000"));
        assert_eq!(c.get("u1").unwrap().content, "a");
        assert_eq!(c.title.as_deref(), Some("Named"));
        assert_eq!(c.cursor(), "a9");
    }

    #[test]
    fn missing_header_infers_the_root() {
        let (c, _) = parse_conversation(
            "c",
            br#"{"type":"message","msg_id":"u1","role":"user","content":"a","parent_id":"rootrootx","timestamp":"2026-07-24T12:35:55Z"}"#,
            "sys",
        );
        assert_eq!(c.root_id, "rootrootx");
        assert!(c.get("u1").is_some());
    }

    #[test]
    fn concurrent_appends_never_tear_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = sample(&store);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let store = store.clone();
                let id = c.id.clone();
                let parent = c.cursor().to_string();
                thread::spawn(move || {
                    for i in 0..200 {
                        let mut m =
                            Message::new(Role::User, format!("{t}-{i} {}", "x".repeat(5000)));
                        m.parent_id = Some(parent.as_str().into());
                        store.append(&id, &[Record::message(&m)]).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (loaded, report) = store.load(&c.id, "sys").unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(loaded.len(), 3 + 800);
    }

    #[test]
    fn trash_moves_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = sample(&store);
        assert_eq!(store.latest().unwrap().as_deref(), Some(c.id.as_str()));
        let first = store.trash(&c.id).unwrap();
        assert!(first.ends_with("trash/abcd1234.jsonl") && first.exists());
        assert!(!store.exists(&c.id));
        assert_eq!(store.latest().unwrap(), None);
        sample(&store);
        let second = store.trash(&c.id).unwrap();
        assert_ne!(first, second);
        assert!(first.exists() && second.exists());
        assert!(matches!(store.trash("nope"), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn resolve_accepts_unambiguous_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for id in ["abc11111", "abc22222", "def33333"] {
            fs::write(store.path(id), "").unwrap();
        }
        assert_eq!(store.resolve("def").unwrap(), "def33333");
        assert_eq!(store.resolve("abc11111").unwrap(), "abc11111");
        assert!(matches!(
            store.resolve("abc"),
            Err(StoreError::Ambiguous { .. })
        ));
        assert!(matches!(store.resolve("zzz"), Err(StoreError::NotFound(_))));
        assert!(matches!(store.resolve(""), Err(StoreError::NotFound(_))));
    }
}
