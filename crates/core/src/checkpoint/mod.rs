//! Checkpoints: the state of the working folder at a node (shared/docs/DESIGN.md §10).
//!
//! A snapshot lists every file under WORKDIR that `.gitignore`, `.ignore` and `.git/` do not
//! exclude: regular files up to `max_file_bytes` by content hash (bigger ones listed as skipped),
//! symbolic links by target, with their modes. Contents are stored once, by SHA-256, in
//! `<DATADIR>/.checkpoints/objects/`, shared by the project's conversations; a snapshot's manifest is
//! `<DATADIR>/.checkpoints/snapshots/<id>.json`. A file whose size, modification time, inode and mode
//! are those of the previous snapshot is not read again.

use std::collections::BTreeMap;
use std::io::Error as IoError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::escape;
use crate::fs::atomic;
use crate::fs::confine::Found;
use crate::fs::confine::Workdir;
use crate::fs::hash;
use crate::layers::INSTRUCTION_FILES;
use crate::vocab;
use memchr::memmem;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fs;
use std::fs::DirEntry;
use std::io::ErrorKind;
use std::path::Component;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

mod walk;
#[cfg(target_os = "linux")]
mod watch;
#[cfg(not(target_os = "linux"))]
mod watch {
    //! Without inotify every snapshot walks.
    #[derive(Debug)]
    pub(super) struct Watch;
    impl Watch {
        pub(super) fn new() -> Option<Watch> {
            None
        }
        pub(super) fn add(&self, _: &std::path::Path) {}
        pub(super) fn reset(&self) {}
        pub(super) fn changed(&self) -> bool {
            true
        }
    }
}

/// The `checkpoints` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSettings {
    pub enabled: bool,
    /// `checkpoints.restore`: `ask` (true, the default) offers to restore after a move; `never`
    /// only lists what differs.
    pub ask: bool,
    pub max_file_bytes: u64,
    pub max_files: usize,
    /// `checkpoints.watch`: the kernel tells of changes to the folder (inotify), so a snapshot of
    /// a folder nothing touched costs nothing; off, every snapshot walks the folder.
    pub watch: bool,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        CheckpointSettings {
            enabled: true,
            ask: true,
            max_file_bytes: 5 * 1024 * 1024,
            max_files: 50_000,
            watch: true,
        }
    }
}

/// One entry of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `file`, `link` or `skipped` (a file over the size limit: listed, not stored).
    pub kind: Cow<'static, str>,
    /// The content's SHA-256 in hex; shared by the snapshots that list the same content
    /// unchanged (a new snapshot of a folder where little changed copies no hash).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "shared::hash"
    )]
    pub hash: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default)]
    pub mode: u32,
    #[serde(default)]
    pub size: u64,
    /// What recognises an unchanged file without reading it.
    #[serde(default)]
    pub mtime_ns: i128,
    #[serde(default)]
    pub ino: u64,
}

/// The state of the working folder: path (relative, `/`-separated) → entry. Paths are shared
/// (as hashes are) with the snapshot a walk began from: an unchanged file costs no allocation.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    pub files: BTreeMap<Arc<str>, Entry>,
    /// How many stored differences lie between this snapshot and a whole manifest.
    depth: usize,
    /// When the walk began (ns since the epoch): a file modified shortly before may be modified
    /// again within the same clock tick, its metadata unchanged, so the next snapshot reads it.
    taken_ns: Option<i128>,
}

impl PartialEq for Manifest {
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files
    }
}

impl Eq for Manifest {}

/// A snapshot as stored: the whole manifest, or (with `base`) what differs from another snapshot.
/// A snapshot with one file changed then costs a few hundred bytes instead of ~150 bytes a file.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base: Option<String>,
    #[serde(with = "shared::files")]
    files: BTreeMap<Arc<str>, Entry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    removed: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    taken_ns: Option<i128>,
}

/// What is shared in memory (`Arc<str>`) is stored as plain strings, as it always was.
mod shared {
    pub(super) mod hash {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::sync::Arc;

        pub(in super::super) fn serialize<S: Serializer>(
            hash: &Option<Arc<str>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match hash {
                Some(h) => s.serialize_some(&**h),
                None => s.serialize_none(),
            }
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Arc<str>>, D::Error> {
            Ok(Option::<String>::deserialize(d)?.map(Arc::from))
        }
    }

    pub(super) mod files {
        use super::super::Entry;
        use serde::{Deserialize, Deserializer, Serializer};
        use std::collections::BTreeMap;
        use std::sync::Arc;

        pub(in super::super) fn serialize<S: Serializer>(
            files: &BTreeMap<Arc<str>, Entry>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_map(files.iter().map(|(path, e)| (&**path, e)))
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<BTreeMap<Arc<str>, Entry>, D::Error> {
            let files = BTreeMap::<String, Entry>::deserialize(d)?;
            Ok(files.into_iter().map(|(p, e)| (Arc::from(p), e)).collect())
        }
    }
}

/// The longest chain of differences a load follows; the next snapshot is stored whole.
const MAX_DEPTH: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("the working folder holds more than {0} files: checkpoints are off for this session")]
    TooManyFiles(usize),
    #[error("{action} {path}: {cause}")]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: IoError,
    },
    #[error("snapshot {0} is not in the checkpoint store")]
    Missing(String),
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(IoError) -> CheckpointError {
    let path = path.to_path_buf();
    move |cause| CheckpointError::Io {
        action,
        path,
        cause,
    }
}

/// The project's checkpoint store.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
}

impl CheckpointStore {
    pub fn new(datadir: &Path) -> Self {
        CheckpointStore {
            dir: datadir.join(".checkpoints"),
        }
    }

    fn object_path(&self, hash: &str) -> PathBuf {
        self.dir.join("objects").join(&hash[..2]).join(hash)
    }

    fn snapshot_path(&self, id: &str) -> PathBuf {
        self.dir.join("snapshots").join(format!("{id}.json"))
    }

    /// Records the working folder's state; `previous` lets unchanged files go unread. Returns the
    /// snapshot's id and manifest; a snapshot equal to `previous` reuses its id.
    pub fn snapshot(
        &self,
        workdir: &Path,
        settings: &CheckpointSettings,
        previous: Option<(&str, &Manifest)>,
    ) -> Result<(String, Manifest), CheckpointError> {
        self.snapshot_watched(workdir, settings, previous, None)
    }

    /// The same, watching each folder read (see [`watch`]).
    fn snapshot_watched(
        &self,
        workdir: &Path,
        settings: &CheckpointSettings,
        previous: Option<(&str, &Manifest)>,
        watch: Option<&watch::Watch>,
    ) -> Result<(String, Manifest), CheckpointError> {
        let mut manifest = walk::scan(self, workdir, settings, previous.map(|p| p.1), watch)?;
        let mut stored = None;
        if let Some((base, old)) = previous {
            let (mut files, mut removed) = (BTreeMap::new(), Vec::new());
            pairs(old, &manifest, |path, _, new| match new {
                Some(e) => drop(files.insert(path.clone(), e.clone())),
                None => removed.push(path.to_string()),
            });
            if files.is_empty() && removed.is_empty() {
                manifest.depth = old.depth;
                return Ok((base.to_string(), manifest));
            }
            // A difference as big as a quarter of the folder, or at the end of a long chain, is
            // stored whole instead.
            if old.depth < MAX_DEPTH && 4 * (files.len() + removed.len()) <= manifest.files.len() {
                manifest.depth = old.depth + 1;
                stored = Some(Stored {
                    base: Some(base.to_string()),
                    files,
                    removed,
                    taken_ns: manifest.taken_ns,
                });
            }
        }
        let id = vocab::new_id();
        let stored = stored.unwrap_or_else(|| {
            manifest.depth = 0;
            Stored {
                base: None,
                files: manifest.files.clone(),
                removed: Vec::new(),
                taken_ns: manifest.taken_ns,
            }
        });
        let text = serde_json::to_vec(&stored).map_err(|e| CheckpointError::Io {
            action: "encoding",
            path: self.snapshot_path(&id),
            cause: IoError::other(e),
        })?;
        write_new(&self.snapshot_path(&id), &text)?;
        Ok((id, manifest))
    }

    /// The stored form of a snapshot, as written.
    fn stored(&self, id: &str) -> Result<Stored, CheckpointError> {
        let path = self.snapshot_path(id);
        let plain = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric());
        if !plain {
            return Err(CheckpointError::Missing(id.to_string()));
        }
        let bytes = fs::read(&path).map_err(|e| match e.kind() {
            ErrorKind::NotFound => CheckpointError::Missing(id.to_string()),
            _ => CheckpointError::Io {
                action: "reading",
                path: path.clone(),
                cause: e,
            },
        })?;
        serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Io {
            action: "reading",
            path,
            cause: IoError::other(e),
        })
    }

    /// A snapshot's ids down to the one stored whole, and the manifest they make.
    fn chain(&self, id: &str) -> Result<(Vec<String>, Manifest), CheckpointError> {
        let mut ids = vec![id.to_string()];
        let mut parts = vec![self.stored(id)?];
        while let Some(base) = parts.last().and_then(|p| p.base.clone()) {
            if ids.len() > MAX_DEPTH * 4 || ids.contains(&base) {
                // Only a damaged store links in a circle or this deep.
                return Err(CheckpointError::Missing(base));
            }
            parts.push(self.stored(&base)?);
            ids.push(base);
        }
        let depth = parts.len() - 1;
        let taken_ns = parts[0].taken_ns;
        let mut files = BTreeMap::new();
        for part in parts.into_iter().rev() {
            for path in part.removed {
                files.remove(path.as_str());
            }
            files.extend(part.files);
        }
        Ok((
            ids,
            Manifest {
                files,
                depth,
                taken_ns,
            },
        ))
    }

    /// A stored snapshot.
    pub fn load(&self, id: &str) -> Result<Manifest, CheckpointError> {
        Ok(self.chain(id)?.1)
    }

    /// A stored file's content.
    pub fn object(&self, hash: &str) -> Result<Vec<u8>, CheckpointError> {
        // Only a SHA-256 in hex names a content: anything else in a damaged or hostile store
        // (`a`, `../../dev/zero`) is refused before a path is made of it.
        if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(CheckpointError::Io {
                action: "checking",
                path: self.dir.join("objects"),
                cause: IoError::other(format!(
                    "`{}` is not a content hash",
                    escape::escape_controls(hash)
                )),
            });
        }
        let path = self.object_path(hash);
        let bytes = fs::read(&path).map_err(io("reading", &path))?;
        if hash::digest(&bytes) != hash {
            return Err(CheckpointError::Io {
                action: "checking",
                path,
                cause: IoError::other("the stored content does not match its hash"),
            });
        }
        Ok(bytes)
    }

    /// Removes what no conversation refers to: snapshots named by no checkpoint line of the
    /// conversation files in `datadir` (and its trash), and contents no remaining snapshot lists.
    /// Returns (snapshots removed, contents removed, bytes freed).
    pub fn gc(&self, datadir: &Path) -> Result<(usize, usize, u64), CheckpointError> {
        use crate::conversation::record::{Loaded, load_line};
        let mut referenced = HashSet::new();
        for dir in [datadir.to_path_buf(), datadir.join("trash")] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_none_or(|x| x != "jsonl") {
                    continue;
                }
                let bytes = fs::read(&path).map_err(io("reading", &path))?;
                for line in bytes.split(|b| *b == b'\n') {
                    // Only checkpoint lines matter; a quick look before parsing.
                    if memmem::find(line, b"\"checkpoint\"").is_none() {
                        continue;
                    }
                    if let Ok(Loaded::Checkpoint(_, snapshot)) = load_line(line) {
                        referenced.insert(snapshot);
                    }
                }
            }
        }
        // A referenced snapshot keeps its contents and the snapshots it is stored as a
        // difference from; one that cannot be read keeps nothing alive but stays itself.
        let mut keep_objects = HashSet::new();
        let mut keep_snapshots = referenced.clone();
        for id in &referenced {
            if let Ok((ids, m)) = self.chain(id) {
                keep_snapshots.extend(ids);
                keep_objects.extend(m.files.into_values().filter_map(|e| e.hash));
            }
        }
        let (mut snapshots, mut objects, mut freed) = (0, 0, 0u64);
        let snapshot_dir = self.dir.join("snapshots");
        if let Ok(entries) = fs::read_dir(&snapshot_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                let id = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !keep_snapshots.contains(&id) {
                    freed += entry.metadata().map(|m| m.len()).unwrap_or(0);
                    fs::remove_file(&path).map_err(io("removing", &path))?;
                    snapshots += 1;
                }
            }
        }
        for f in self.objects() {
            let name = f.file_name().to_string_lossy().into_owned();
            if !keep_objects.contains(name.as_str()) {
                freed += f.metadata().map(|m| m.len()).unwrap_or(0);
                let path = f.path();
                fs::remove_file(&path).map_err(io("removing", &path))?;
                objects += 1;
            }
        }
        Ok((snapshots, objects, freed))
    }

    /// (snapshots, objects, bytes of objects) in the store.
    pub fn stats(&self) -> (usize, usize, u64) {
        let count = |dir: &Path| fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        let snapshots = count(&self.dir.join("snapshots"));
        let (mut objects, mut bytes) = (0, 0);
        for f in self.objects() {
            objects += 1;
            bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
        }
        (snapshots, objects, bytes)
    }

    /// Every stored content file (in its two-letter shard).
    fn objects(&self) -> impl Iterator<Item = DirEntry> {
        fs::read_dir(self.dir.join("objects"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|shard| fs::read_dir(shard.path()).ok())
            .flatten()
            .flatten()
    }

    /// Stores a file's content (once per content); its hash.
    fn store_bytes(&self, bytes: &[u8]) -> Result<String, CheckpointError> {
        let hash = hash::digest(bytes);
        let object = self.object_path(&hash);
        if !object.exists() {
            write_new(&object, bytes)?;
        }
        Ok(hash)
    }
}

/// A session's checkpointing: the store, the folder, the settings, the last snapshot taken (so
/// that unchanged files go unread) and the watch that tells when nothing changed at all.
#[derive(Debug)]
pub struct Checkpoints {
    pub store: CheckpointStore,
    pub workdir: PathBuf,
    pub settings: CheckpointSettings,
    /// The last snapshot recorded (what `new` last saw of the folder).
    last: Mutex<Option<Arc<(String, Manifest)>>>,
    /// The last walk's snapshot, recorded or not: while the watch says nothing changed, it is
    /// the folder's state.
    walked: Mutex<Option<Arc<(String, Manifest)>>>,
    watch: Option<watch::Watch>,
    /// A snapshot of this folder from an earlier session (the conversation's latest), whose
    /// metadata spares the first walk from reading every file.
    hint: Mutex<Option<String>>,
    /// Off for the rest of the session (too many files), or a failure already said.
    off: AtomicBool,
    warned: AtomicBool,
}

impl Checkpoints {
    pub fn new(datadir: &Path, workdir: &Path, settings: CheckpointSettings) -> Self {
        let watch = (settings.enabled && settings.watch)
            .then(watch::Watch::new)
            .flatten();
        Checkpoints {
            store: CheckpointStore::new(datadir),
            workdir: workdir.to_path_buf(),
            settings,
            last: Default::default(),
            walked: Default::default(),
            watch,
            hint: Default::default(),
            off: Default::default(),
            warned: Default::default(),
        }
    }

    /// The last snapshot taken by this session.
    pub fn last(&self) -> Option<(String, Manifest)> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.as_deref().cloned()
    }

    /// Names a stored snapshot of this folder (an opened conversation's latest) whose metadata
    /// the first walk of the session may reuse; read only then.
    pub fn hint(&self, snapshot: &str) {
        *self.hint.lock().unwrap_or_else(|e| e.into_inner()) = Some(snapshot.to_string());
    }

    /// Takes a snapshot of the working folder; Ok(None) when checkpoints are off. A failure is
    /// returned the first time only (to be said once); later ones are silent.
    pub fn take(&self) -> Result<Option<String>, CheckpointError> {
        Ok(self.snapshot(true)?.map(|s| s.0.clone()))
    }

    /// The same, without counting as what `new` last saw (for `/diff`, and before a restore):
    /// files changed outside `new` stay recognisable as such.
    /// Returns the snapshot's manifest too: the caller need not read it back.
    pub fn peek(&self) -> Result<Option<(String, Manifest)>, CheckpointError> {
        Ok(self.snapshot(false)?.map(|s| (*s).clone()))
    }

    fn snapshot(&self, record: bool) -> Result<Option<Arc<(String, Manifest)>>, CheckpointError> {
        use std::sync::atomic::Ordering;
        if !self.settings.enabled || self.off.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let mut walked = self.walked.lock().unwrap_or_else(|e| e.into_inner());
        // Nothing happened since the last walk: its snapshot is the folder's.
        if let (Some(watch), Some(state)) = (&self.watch, walked.as_ref())
            && !watch.changed()
        {
            let state = state.clone();
            if record {
                *last = Some(state.clone());
            }
            return Ok(Some(state));
        }
        if let Some(watch) = &self.watch {
            watch.reset();
        }
        let seeded = match walked.clone().or_else(|| last.clone()) {
            Some(previous) => Some(previous),
            None => {
                let hint = self.hint.lock().unwrap_or_else(|e| e.into_inner()).take();
                hint.and_then(|id| self.store.load(&id).ok().map(|m| Arc::new((id, m))))
            }
        };
        let previous = seeded.as_deref().map(|(id, m)| (id.as_str(), m));
        match self.store.snapshot_watched(
            &self.workdir,
            &self.settings,
            previous,
            self.watch.as_ref(),
        ) {
            Ok(state) => {
                let state = Arc::new(state);
                *walked = Some(state.clone());
                if record {
                    *last = Some(state.clone());
                }
                Ok(Some(state))
            }
            Err(e) => {
                *walked = None;
                if matches!(e, CheckpointError::TooManyFiles(_)) {
                    self.off.store(true, Ordering::SeqCst);
                }
                if self.warned.swap(true, Ordering::SeqCst) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// What [`apply`] did.
#[derive(Debug, Default)]
pub struct Applied {
    pub done: usize,
    /// Paths not done, with why.
    pub kept: Vec<(String, String)>,
    /// Paths left alone because they no longer held what `now` says (changed since the user was
    /// asked): to ask about again.
    pub changed: Vec<String>,
}

/// Whether what is at a path now is what `entry` (None: nothing) recorded.
fn still(found: &Found, entry: Option<&Entry>) -> bool {
    use crate::fs::confine::Found;
    match (found, entry) {
        (Found::Nothing, None) => true,
        (Found::Link { target }, Some(e)) => e.kind == "link" && e.target.as_ref() == Some(target),
        (
            Found::File {
                size,
                mtime_ns,
                ino,
                mode,
            },
            Some(e),
        ) => {
            (e.kind == "file" || e.kind == "skipped")
                && e.size == *size
                && e.mtime_ns == *mtime_ns
                && e.ino == *ino
                && e.mode == *mode
        }
        _ => false,
    }
}

/// Makes the working folder hold `target` where it now holds `now`, for the paths in `paths`
/// (what [`changes`] listed, less what the user kept): files written beside and renamed over,
/// links likewise, removed files and links unlinked; a big file never stored is never removed.
/// With `recheck`, each path is looked at just before it is written: one that no longer holds
/// what `now` says (changed since the user was asked) is left alone and listed in
/// [`Applied::changed`].
pub fn apply(
    store: &CheckpointStore,
    workdir: &Workdir,
    now: &Manifest,
    target: &Manifest,
    paths: &[String],
    recheck: bool,
) -> Applied {
    use crate::fs::confine::Put;
    let mut out = Applied::default();
    for path in paths {
        // `.git/` and `.new/` decide what runs next: a manifest never writes there.
        let first = Path::new(path).components().find_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        });
        if first.as_deref().is_some_and(|f| f == ".git" || f == ".new")
            || Path::new(path)
                .components()
                .any(|c| matches!(c, Component::ParentDir))
        {
            out.kept.push((
                path.clone(),
                "refused: a snapshot never writes here".to_string(),
            ));
            continue;
        }
        if recheck {
            match workdir.found(path) {
                Ok(found) if still(&found, now.files.get(path.as_str())) => {}
                Ok(_) => {
                    out.changed.push(path.clone());
                    continue;
                }
                Err(e) => {
                    out.kept.push((path.clone(), e.to_string()));
                    continue;
                }
            }
        }
        let result = match target.files.get(path.as_str()) {
            None => match now.files.get(path.as_str()).map(|e| &*e.kind) {
                Some("skipped") => Err("not stored".to_string()),
                _ => workdir.put(path, Put::Nothing).map_err(|e| e.to_string()),
            },
            Some(entry) => match &*entry.kind {
                "link" => workdir
                    .put(
                        path,
                        Put::Link {
                            target: entry.target.as_deref().unwrap_or(""),
                        },
                    )
                    .map_err(|e| e.to_string()),
                "file" => match entry.hash.as_deref().map(|h| store.object(h)) {
                    Some(Ok(bytes)) => workdir
                        .put(
                            path,
                            Put::File {
                                bytes: &bytes,
                                mode: entry.mode,
                            },
                        )
                        .map_err(|e| e.to_string()),
                    Some(Err(e)) => Err(e.to_string()),
                    None => Err("not stored".to_string()),
                },
                _ => Err("not stored (over checkpoints.max_file_bytes)".to_string()),
            },
        };
        match result {
            Ok(()) => out.done += 1,
            Err(why) => out.kept.push((path.clone(), why)),
        }
    }
    out
}

/// Writes a file of the store whole (temporary file, then rename), readable by the user only.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    atomic::write_whole(path, bytes).map_err(io("writing", path))
}

/// Whether `path` still holds what `entry` (None: nothing) recorded, looked at now.
pub fn unchanged(workdir: &Workdir, path: &str, entry: Option<&Entry>) -> Result<bool, IoError> {
    workdir.found(path).map(|found| still(&found, entry))
}

/// Whether two entries hold the same thing (kind, content, link target, mode), whenever and
/// however they were written.
fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.kind == b.kind
                && a.hash == b.hash
                && a.target == b.target
                && a.mode == b.mode
                && (a.kind != "skipped" || (a.size == b.size && a.mtime_ns == b.mtime_ns))
        }
        _ => false,
    }
}

/// Whether a path of the folder decides what runs next or instructs later sessions (the
/// settings of `new`, Claude Code, Codex and CodePilot, `.git`, the instructions, `.mcp.json`), or
/// is not a plain path below the folder.
pub fn decides_what_runs(path: &str) -> bool {
    let parts: Vec<std::path::Component> = Path::new(path).components().collect();
    if parts.iter().any(|c| !matches!(c, Component::Normal(_))) {
        return true;
    }
    let first = parts
        .first()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    [".git", ".new", ".claude", ".agents", ".codex", ".codepilot"].contains(&first.as_str())
        || (parts.len() == 1
            && (first == ".mcp.json" || INSTRUCTION_FILES.contains(&first.as_str())))
}

/// What bringing a branch's file changes into the folder does to one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeStep {
    /// The folder has it as at the fork: the branch's version is taken as it is.
    Take(String),
    /// Both changed a text file, in places apart: the three-way merge of the two.
    Merged {
        path: String,
        text: String,
        mode: u32,
    },
    /// Both changed it in the same place, or one removed what the other changed, or it is not
    /// text: left as it is, with why (and, for text, the merge with conflict markers).
    Conflict { path: String, why: String },
}

/// For each path the branch changed from `base` (the state where it left) to `theirs` (its
/// tip), what bringing that change into the folder `ours` does. Paths where the folder already
/// holds the branch's version are passed over.
pub fn merge_plan(
    store: &CheckpointStore,
    base: &Manifest,
    ours: &Manifest,
    theirs: &Manifest,
) -> Vec<MergeStep> {
    let text = |e: Option<&Entry>| -> Result<String, String> {
        match e {
            None => Ok(String::new()),
            Some(e) if e.kind == "file" => {
                let hash = e.hash.as_deref().ok_or("not stored")?;
                let bytes = store.object(hash).map_err(|e| e.to_string())?;
                String::from_utf8(bytes).map_err(|_| "not text".to_string())
            }
            Some(e) if e.kind == "link" => Err("a link".to_string()),
            Some(_) => Err("too big to have been stored".to_string()),
        }
    };
    let mut out = Vec::new();
    for (path, _) in changes(base, theirs) {
        // What decides what runs next (settings, hooks, instructions, git) is never written by a
        // merge: shown, for the user to bring over by hand.
        if decides_what_runs(&path) {
            out.push(MergeStep::Conflict {
                path,
                why: "refused: it decides what runs next (settings, hooks, instructions); bring it over by hand (/diff shows it)".into(),
            });
            continue;
        }
        let (b, o, t) = (
            base.files.get(path.as_str()),
            ours.files.get(path.as_str()),
            theirs.files.get(path.as_str()),
        );
        if same(o, t) {
            continue;
        }
        if same(o, b) {
            out.push(MergeStep::Take(path));
            continue;
        }
        let step = match (o, t) {
            (None, _) => MergeStep::Conflict {
                path,
                why: "removed here, changed on the branch".into(),
            },
            (_, None) => MergeStep::Conflict {
                path,
                why: "changed here, removed on the branch".into(),
            },
            (Some(o_entry), Some(_)) => match (text(b), text(o), text(t)) {
                (Ok(b), Ok(o), Ok(t)) => match diffy::merge(&b, &o, &t) {
                    Ok(text) => MergeStep::Merged {
                        path,
                        text,
                        mode: o_entry.mode,
                    },
                    Err(marked) => MergeStep::Conflict {
                        path,
                        why: format!("both changed the same lines:\n{marked}"),
                    },
                },
                (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => MergeStep::Conflict {
                    path,
                    why: format!("changed on both sides, and {why}"),
                },
            },
        };
        out.push(step);
    }
    out
}

/// What differs from one state to another: (path, `M`/`A`/`D`), in path order.
pub fn changes(from: &Manifest, to: &Manifest) -> Vec<(String, char)> {
    let mut out = Vec::new();
    pairs(from, to, |path, old, new| match (old, new) {
        (None, Some(_)) => out.push((path.to_string(), 'A')),
        (Some(_), None) => out.push((path.to_string(), 'D')),
        (Some(old), Some(e))
            if old.kind != e.kind
                || old.hash != e.hash
                || old.target != e.target
                || old.mode != e.mode
                || (e.kind == "skipped" && (old.size != e.size || old.mtime_ns != e.mtime_ns)) =>
        {
            out.push((path.to_string(), 'M'))
        }
        _ => {}
    });
    out
}

/// Calls `each` with every path of either manifest, in path order, and its entry in each; paths
/// whose entries are equal are passed over. One pass over both (they are sorted), no lookups.
fn pairs<'a>(
    from: &'a Manifest,
    to: &'a Manifest,
    mut each: impl FnMut(&'a Arc<str>, Option<&'a Entry>, Option<&'a Entry>),
) {
    use std::cmp::Ordering;
    let mut old = from.files.iter().peekable();
    let mut new = to.files.iter().peekable();
    loop {
        let order = match (old.peek(), new.peek()) {
            (None, None) => return,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            // A path the newer snapshot shares with the older one is the same path.
            (Some((a, _)), Some((b, _))) if Arc::ptr_eq(a, b) => Ordering::Equal,
            (Some((a, _)), Some((b, _))) => a.cmp(b),
        };
        match order {
            Ordering::Less => {
                let (path, e) = old.next().expect("peeked");
                each(path, Some(e), None);
            }
            Ordering::Greater => {
                let (path, e) = new.next().expect("peeked");
                each(path, None, Some(e));
            }
            Ordering::Equal => {
                let (path, a) = old.next().expect("peeked");
                let (_, b) = new.next().expect("peeked");
                if a != b {
                    each(path, Some(a), Some(b));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
