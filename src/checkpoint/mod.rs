//! Checkpoints: the state of the working folder at a node (shared/docs/DESIGN.md §10).
//!
//! A snapshot lists every file under WORKDIR that `.gitignore`, `.ignore` and `.git/` do not
//! exclude: regular files up to `max_file_bytes` by content hash (bigger ones listed as skipped),
//! symbolic links by target, with their modes. Contents are stored once, by SHA-256, in
//! `<DATADIR>/.checkpoints/objects/`, shared by the project's conversations; a snapshot's manifest is
//! `<DATADIR>/.checkpoints/snapshots/<id>.json`. A file whose size, modification time, inode and mode
//! are those of the previous snapshot is not read again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The `checkpoints` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSettings {
    pub enabled: bool,
    /// `checkpoints.restore`: `ask` (true, the default) offers to restore after a move; `never`
    /// only lists what differs.
    pub ask: bool,
    pub max_file_bytes: u64,
    pub max_files: usize,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        CheckpointSettings {
            enabled: true,
            ask: true,
            max_file_bytes: 5 * 1024 * 1024,
            max_files: 50_000,
        }
    }
}

/// One entry of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `file`, `link` or `skipped` (a file over the size limit: listed, not stored).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
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

/// The state of the working folder: path (relative, `/`-separated) → entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub files: BTreeMap<String, Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("the working folder holds more than {0} files: checkpoints are off for this session")]
    TooManyFiles(usize),
    #[error("{action} {path}: {cause}")]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("snapshot {0} is not in the checkpoint store")]
    Missing(String),
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError {
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
        let manifest = self.scan(workdir, settings, previous.map(|p| p.1))?;
        if let Some((id, old)) = previous
            && *old == manifest
        {
            return Ok((id.to_string(), manifest));
        }
        let id = crate::session::new_id();
        let text = serde_json::to_vec(&manifest).map_err(|e| CheckpointError::Io {
            action: "encoding",
            path: self.snapshot_path(&id),
            cause: std::io::Error::other(e),
        })?;
        write_new(&self.snapshot_path(&id), &text)?;
        Ok((id, manifest))
    }

    /// A stored snapshot.
    pub fn load(&self, id: &str) -> Result<Manifest, CheckpointError> {
        let path = self.snapshot_path(id);
        let plain = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric());
        if !plain {
            return Err(CheckpointError::Missing(id.to_string()));
        }
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CheckpointError::Missing(id.to_string()),
            _ => CheckpointError::Io {
                action: "reading",
                path: path.clone(),
                cause: e,
            },
        })?;
        serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Io {
            action: "reading",
            path,
            cause: std::io::Error::other(e),
        })
    }

    /// A stored file's content.
    pub fn object(&self, hash: &str) -> Result<Vec<u8>, CheckpointError> {
        let path = self.object_path(hash);
        let bytes = std::fs::read(&path).map_err(io("reading", &path))?;
        if crate::trust::digest(&bytes) != hash {
            return Err(CheckpointError::Io {
                action: "checking",
                path,
                cause: std::io::Error::other("the stored content does not match its hash"),
            });
        }
        Ok(bytes)
    }

    /// Removes what no conversation refers to: snapshots named by no checkpoint line of the
    /// conversation files in `datadir` (and its trash), and contents no remaining snapshot lists.
    /// Returns (snapshots removed, contents removed, bytes freed).
    pub fn gc(&self, datadir: &Path) -> Result<(usize, usize, u64), CheckpointError> {
        use crate::session::record::{Loaded, load_line};
        let mut referenced = std::collections::HashSet::new();
        for dir in [datadir.to_path_buf(), datadir.join("trash")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_none_or(|x| x != "jsonl") {
                    continue;
                }
                let bytes = std::fs::read(&path).map_err(io("reading", &path))?;
                for line in bytes.split(|b| *b == b'\n') {
                    // Only checkpoint lines matter; a quick look before parsing.
                    if memchr::memmem::find(line, b"\"checkpoint\"").is_none() {
                        continue;
                    }
                    if let Ok(Loaded::Checkpoint(_, snapshot)) = load_line(line) {
                        referenced.insert(snapshot);
                    }
                }
            }
        }
        let mut keep_objects = std::collections::HashSet::new();
        let (mut snapshots, mut objects, mut freed) = (0, 0, 0u64);
        let snapshot_dir = self.dir.join("snapshots");
        if let Ok(entries) = std::fs::read_dir(&snapshot_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                let id = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if referenced.contains(&id) {
                    // A snapshot that cannot be read keeps nothing alive but stays itself.
                    if let Ok(m) = self.load(&id) {
                        keep_objects.extend(m.files.into_values().filter_map(|e| e.hash));
                    }
                } else {
                    freed += entry.metadata().map(|m| m.len()).unwrap_or(0);
                    std::fs::remove_file(&path).map_err(io("removing", &path))?;
                    snapshots += 1;
                }
            }
        }
        for f in self.objects() {
            let name = f.file_name().to_string_lossy().into_owned();
            if !keep_objects.contains(&name) {
                freed += f.metadata().map(|m| m.len()).unwrap_or(0);
                let path = f.path();
                std::fs::remove_file(&path).map_err(io("removing", &path))?;
                objects += 1;
            }
        }
        Ok((snapshots, objects, freed))
    }

    /// (snapshots, objects, bytes of objects) in the store.
    pub fn stats(&self) -> (usize, usize, u64) {
        let count = |dir: &Path| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        let snapshots = count(&self.dir.join("snapshots"));
        let (mut objects, mut bytes) = (0, 0);
        for f in self.objects() {
            objects += 1;
            bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
        }
        (snapshots, objects, bytes)
    }

    /// Every stored content file (in its two-letter shard).
    fn objects(&self) -> impl Iterator<Item = std::fs::DirEntry> {
        std::fs::read_dir(self.dir.join("objects"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|shard| std::fs::read_dir(shard.path()).ok())
            .flatten()
            .flatten()
    }

    fn scan(
        &self,
        workdir: &Path,
        settings: &CheckpointSettings,
        previous: Option<&Manifest>,
    ) -> Result<Manifest, CheckpointError> {
        use std::sync::Mutex;
        use std::sync::atomic::{AtomicUsize, Ordering};
        // The folder is walked on every core: each file is one `lstat`, and read only when it
        // changed.
        let found: Mutex<Vec<(String, Entry)>> = Mutex::new(Vec::new());
        let failure: Mutex<Option<CheckpointError>> = Mutex::new(None);
        let count = AtomicUsize::new(0);
        let walk = ignore::WalkBuilder::new(workdir)
            .hidden(false)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .ignore(true)
            .parents(false)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)))
            .build_parallel();
        walk.run(|| {
            Box::new(|entry| {
                use ignore::WalkState;
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                match self.entry(workdir, entry.path(), settings, previous) {
                    Ok(Some(found_one)) => {
                        if count.fetch_add(1, Ordering::SeqCst) >= settings.max_files {
                            *failure.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(CheckpointError::TooManyFiles(settings.max_files));
                            return WalkState::Quit;
                        }
                        found
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(found_one);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        return WalkState::Quit;
                    }
                }
                WalkState::Continue
            })
        });
        if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        Ok(Manifest {
            files: found
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .into_iter()
                .collect(),
        })
    }

    /// One path of the walk as a snapshot entry (None for folders and what a snapshot does not
    /// hold); its content is stored when it changed.
    fn entry(
        &self,
        workdir: &Path,
        path: &Path,
        settings: &CheckpointSettings,
        previous: Option<&Manifest>,
    ) -> Result<Option<(String, Entry)>, CheckpointError> {
        use std::os::unix::fs::MetadataExt;
        let Ok(rel) = path.strip_prefix(workdir) else {
            return Ok(None);
        };
        let Some(name) = rel.to_str().filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let meta = std::fs::symlink_metadata(path).map_err(io("reading", path))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            return Ok(None);
        }
        let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
        let mut e = Entry {
            kind: String::new(),
            hash: None,
            target: None,
            mode: meta.mode() & 0o7777,
            size: meta.len(),
            mtime_ns,
            ino: meta.ino(),
        };
        if kind.is_symlink() {
            e.kind = "link".into();
            e.target = std::fs::read_link(path)
                .ok()
                .map(|t| t.to_string_lossy().into_owned());
        } else if kind.is_file() {
            if meta.len() > settings.max_file_bytes {
                e.kind = "skipped".into();
            } else {
                e.kind = "file".into();
                let unchanged = previous.and_then(|p| p.files.get(name)).filter(|old| {
                    old.kind == "file"
                        && old.size == e.size
                        && old.mtime_ns == e.mtime_ns
                        && old.ino == e.ino
                        && old.mode == e.mode
                });
                e.hash = match unchanged {
                    Some(old) => old.hash.clone(),
                    None => Some(self.store_file(path)?),
                };
            }
        } else {
            // FIFOs, sockets, devices: not files a snapshot can hold.
            return Ok(None);
        }
        Ok(Some((name.to_string(), e)))
    }

    /// Stores a file's content (once per content); its hash.
    fn store_file(&self, path: &Path) -> Result<String, CheckpointError> {
        let bytes = std::fs::read(path).map_err(io("reading", path))?;
        let hash = crate::trust::digest(&bytes);
        let object = self.object_path(&hash);
        if !object.exists() {
            write_new(&object, &bytes)?;
        }
        Ok(hash)
    }
}

/// A session's checkpointing: the store, the folder, the settings, and the last snapshot taken
/// (so that unchanged files go unread).
#[derive(Debug)]
pub struct Checkpoints {
    pub store: CheckpointStore,
    pub workdir: PathBuf,
    pub settings: CheckpointSettings,
    last: std::sync::Mutex<Option<(String, Manifest)>>,
    /// Off for the rest of the session (too many files), or a failure already said.
    off: std::sync::atomic::AtomicBool,
    warned: std::sync::atomic::AtomicBool,
}

impl Checkpoints {
    pub fn new(datadir: &Path, workdir: &Path, settings: CheckpointSettings) -> Self {
        Checkpoints {
            store: CheckpointStore::new(datadir),
            workdir: workdir.to_path_buf(),
            settings,
            last: Default::default(),
            off: Default::default(),
            warned: Default::default(),
        }
    }

    /// The last snapshot taken by this session.
    pub fn last(&self) -> Option<(String, Manifest)> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes a snapshot of the working folder; Ok(None) when checkpoints are off. A failure is
    /// returned the first time only (to be said once); later ones are silent.
    pub fn take(&self) -> Result<Option<String>, CheckpointError> {
        Ok(self.snapshot(true)?.map(|(id, _)| id))
    }

    /// The same, without counting as what `new` last saw (for `/diff`, and before a restore):
    /// files changed outside `new` stay recognisable as such.
    /// Returns the snapshot's manifest too: the caller need not read it back.
    pub fn peek(&self) -> Result<Option<(String, Manifest)>, CheckpointError> {
        self.snapshot(false)
    }

    fn snapshot(&self, record: bool) -> Result<Option<(String, Manifest)>, CheckpointError> {
        use std::sync::atomic::Ordering;
        if !self.settings.enabled || self.off.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let previous = last.as_ref().map(|(id, m)| (id.as_str(), m));
        match self.store.snapshot(&self.workdir, &self.settings, previous) {
            Ok((id, manifest)) => {
                if record {
                    *last = Some((id.clone(), manifest.clone()));
                }
                Ok(Some((id, manifest)))
            }
            Err(e) => {
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

/// Makes the working folder hold `target` where it now holds `now`, for the paths in `paths`
/// (what [`changes`] listed, less what the user kept): files written beside and renamed over,
/// links likewise, removed files and links unlinked; a big file never stored is never removed.
/// Returns (paths done, paths not done with why).
pub fn apply(
    store: &CheckpointStore,
    sandbox: &crate::tools::Sandbox,
    now: &Manifest,
    target: &Manifest,
    paths: &[String],
) -> (usize, Vec<(String, String)>) {
    use crate::tools::sandbox::Put;
    let (mut done, mut kept) = (0usize, Vec::new());
    for path in paths {
        let result = match target.files.get(path) {
            None => match now.files.get(path).map(|e| e.kind.as_str()) {
                Some("skipped") => Err("not stored".to_string()),
                _ => sandbox.put(path, Put::Nothing).map_err(|e| e.to_string()),
            },
            Some(entry) => match entry.kind.as_str() {
                "link" => sandbox
                    .put(
                        path,
                        Put::Link {
                            target: entry.target.as_deref().unwrap_or(""),
                        },
                    )
                    .map_err(|e| e.to_string()),
                "file" => match entry.hash.as_deref().map(|h| store.object(h)) {
                    Some(Ok(bytes)) => sandbox
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
            Ok(()) => done += 1,
            Err(why) => kept.push((path.clone(), why)),
        }
    }
    (done, kept)
}

/// Writes a file of the store whole (temporary file, then rename), readable by the user only.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    crate::session::error::write_whole(path, bytes).map_err(io("writing", path))
}

/// What differs from one state to another: (path, `M`/`A`/`D`), in path order.
pub fn changes(from: &Manifest, to: &Manifest) -> Vec<(String, char)> {
    let mut out = Vec::new();
    for (path, e) in &to.files {
        match from.files.get(path) {
            None => out.push((path.clone(), 'A')),
            Some(old)
                if old.kind != e.kind
                    || old.hash != e.hash
                    || old.target != e.target
                    || old.mode != e.mode
                    || (e.kind == "skipped"
                        && (old.size != e.size || old.mtime_ns != e.mtime_ns)) =>
            {
                out.push((path.clone(), 'M'))
            }
            Some(_) => {}
        }
    }
    for path in from.files.keys() {
        if !to.files.contains_key(path) {
            out.push((path.clone(), 'D'));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests;
