//! The walk behind a snapshot: every folder under WORKDIR read through a handle opened from its
//! parent's handle without following links, every entry examined relative to its folder (one
//! short `fstatat`, not a resolution of the whole path), on every core.
//!
//! Ignore rules are those of ripgrep's `ignore` crate with the options a snapshot uses: `.ignore`
//! and `.gitignore` in every folder (deeper files first, `.ignore` before `.gitignore`),
//! `.git/info/exclude` of any folder holding `.git` (rules reach into nested repositories, as
//! they do for ripgrep without `require_git`); `.git` itself is never listed or entered; hidden
//! files are included; nothing above WORKDIR is read.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use new_sys::platform::{Dir, FileKind, Stat};

use super::{CheckpointError, CheckpointSettings, Entry, Manifest};
use std::io::Read;
use std::mem;
use std::thread;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

/// The ignore rules in force in one folder: its own files' and, through `parent`, those above.
struct Rules {
    parent: Option<Arc<Rules>>,
    /// The folder's path under WORKDIR with a trailing `/` ("" for WORKDIR itself).
    prefix: String,
    ignore: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
    /// Some rule here or above has a pattern (else nothing needs matching).
    active: bool,
}

impl Rules {
    /// Whether `rel` (a path under WORKDIR, inside this folder) is excluded.
    fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let (mut ignore, mut git, mut exclude) = (Match::None, Match::None, Match::None);
        let mut rules = Some(self);
        while let Some(r) = rules {
            let local = &rel[r.prefix.len()..];
            if ignore.is_none() {
                ignore = r.ignore.matched(local, is_dir);
            }
            if git.is_none() {
                git = r.git.matched(local, is_dir);
            }
            if exclude.is_none() {
                exclude = r.exclude.matched(local, is_dir);
            }
            rules = r.parent.as_deref();
        }
        ignore.or(git).or(exclude).is_ignore()
    }
}

/// A folder still to read: its parent's handle, its path under WORKDIR, and where its result goes.
struct Job {
    parent: Option<Arc<Dir>>,
    name: String,
    rules: Option<Arc<Rules>>,
    slot: usize,
}

/// What one folder holds, in path order: a file or link with its path and entry, or a subfolder
/// (by the slot of its own result). Assembled depth first, these give the manifest already sorted.
type Items = Vec<Item>;

enum Item {
    Entry(Arc<str>, Entry),
    Folder(usize),
}

struct Walk<'a> {
    store: &'a super::CheckpointStore,
    workdir: &'a Path,
    settings: &'a CheckpointSettings,
    previous: Option<&'a Manifest>,
    watch: Option<&'a super::watch::Watch>,
    /// Folders to read (last in, first out: the walk goes deep, so few handles stay open) and
    /// how many workers are reading one.
    queue: Mutex<(Vec<Job>, usize)>,
    wake: Condvar,
    /// Each folder's items, by slot (slot 0: WORKDIR).
    results: Mutex<Vec<Items>>,
    count: AtomicUsize,
    stop: AtomicBool,
    failure: Mutex<Option<CheckpointError>>,
}

pub(super) fn scan(
    store: &super::CheckpointStore,
    workdir: &Path,
    settings: &CheckpointSettings,
    previous: Option<&Manifest>,
    watch: Option<&super::watch::Watch>,
) -> Result<Manifest, CheckpointError> {
    let taken_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let walk = Walk {
        store,
        workdir,
        settings,
        previous,
        watch,
        queue: Mutex::new((
            vec![Job {
                parent: None,
                name: String::new(),
                rules: None,
                slot: 0,
            }],
            0,
        )),
        wake: Condvar::new(),
        results: Mutex::new(vec![Vec::new()]),
        count: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
    };
    // More workers than cores: a worker waiting in the kernel (a folder read from disk, a
    // content stored) leaves its core to another.
    let threads = thread::available_parallelism().map_or(2, |n| (n.get() * 2).min(8));
    thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| walk.work());
        }
    });
    if let Some(e) = walk.failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let mut results = walk.results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut files = Vec::with_capacity(walk.count.into_inner());
    // Depth first from WORKDIR: a folder's items in order, each subfolder's in its place.
    let mut stack = vec![mem::take(&mut results[0]).into_iter()];
    while let Some(items) = stack.last_mut() {
        match items.next() {
            None => drop(stack.pop()),
            Some(Item::Entry(path, e)) => files.push((path, e)),
            Some(Item::Folder(slot)) => {
                let inner = mem::take(&mut results[slot]).into_iter();
                stack.push(inner);
            }
        }
    }
    Ok(Manifest {
        // Already sorted: the map is built without comparing paths again.
        files: files.into_iter().collect(),
        depth: 0,
        taken_ns: Some(taken_ns),
    })
}

impl Walk<'_> {
    /// One worker: takes folders until none is left and none is being read.
    fn work(&self) {
        loop {
            let job = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if self.stop.load(Ordering::SeqCst) {
                        break None;
                    }
                    if let Some(job) = queue.0.pop() {
                        queue.1 += 1;
                        break Some(job);
                    }
                    if queue.1 == 0 {
                        break None;
                    }
                    queue = self.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            };
            let Some(job) = job else {
                self.wake.notify_all();
                return;
            };
            let slot = job.slot;
            match self.folder(job) {
                Ok(items) => self.results.lock().unwrap_or_else(|e| e.into_inner())[slot] = items,
                Err(e) => self.fail(e),
            }
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.1 -= 1;
            drop(queue);
            self.wake.notify_all();
        }
    }

    fn fail(&self, e: CheckpointError) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(e);
        self.stop.store(true, Ordering::SeqCst);
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.workdir.join(rel)
    }

    /// Reads one folder: its ignore files first, then each entry.
    fn folder(&self, job: Job) -> Result<Items, CheckpointError> {
        let opened = match &job.parent {
            None => Dir::open_no_link(self.workdir),
            Some(parent) => parent.dir(OsStr::new(job.name.rsplit('/').next().unwrap_or_default())),
        };
        // A folder that cannot be read (no permission, gone, replaced by a link) holds nothing a
        // snapshot can list; it is passed over, as the walk of ripgrep does.
        let Ok(dir) = opened else {
            return Ok(Vec::new());
        };
        // Watched before it is read: a change from now on is queued if the read misses it.
        if let Some(watch) = self.watch {
            watch.add(&self.path(&job.name));
        }
        let prefix = if job.name.is_empty() {
            String::new()
        } else {
            format!("{}/", job.name)
        };
        // The names one after the other in one buffer (no allocation a name).
        let Ok(names) = dir.names() else {
            return Ok(Vec::new());
        };
        let has = |n: &str| names.iter().any(|(name, _)| name == n);
        let (has_ignore, has_gitignore, has_git) = (has(".ignore"), has(".gitignore"), has(".git"));
        let rules = if has_ignore || has_gitignore || has_git {
            // An ignore file is read only if it is a regular file (a FIFO would block the walk
            // for ever), through no link, and to 1 MB at most.
            let read = |path: &str| {
                let (file, stat) = dir.open_file(OsStr::new(path)).ok()?;
                if stat.kind != FileKind::File {
                    return None;
                }
                let mut text = String::new();
                Read::read_to_string(&mut Read::take(file, 1 << 20), &mut text).ok()?;
                Some(text)
            };
            let matcher = |present: bool, path: &str| {
                let mut builder = GitignoreBuilder::new(self.path(&prefix));
                if present && let Some(text) = read(path) {
                    for line in text.lines() {
                        // A line that is not a valid pattern is passed over, as git does.
                        let _ = builder.add_line(None, line);
                    }
                }
                builder.build().unwrap_or_else(|_| Gitignore::empty())
            };
            let (ignore, git, exclude) = (
                matcher(has_ignore, ".ignore"),
                matcher(has_gitignore, ".gitignore"),
                matcher(has_git, ".git/info/exclude"),
            );
            let active = !(ignore.is_empty() && git.is_empty() && exclude.is_empty())
                || job.rules.as_ref().is_some_and(|r| r.active);
            Some(Arc::new(Rules {
                parent: job.rules.clone(),
                prefix: prefix.clone(),
                ignore,
                git,
                exclude,
                active,
            }))
        } else {
            job.rules.clone()
        };
        let dir = Arc::new(dir);
        // The names kept, with their kinds, then put in path order (a subfolder `a` sorts as
        // `a/`): the items come out sorted, and the previous snapshot's files are met in order.
        let mut kept = Vec::with_capacity(names.len());
        for (name, mut kind) in names.iter() {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            // A name that is not UTF-8 cannot be recorded (the manifest's paths are strings).
            let Some(text) = name.to_str() else { continue };
            let mut stat = None;
            if kind == FileKind::Unknown {
                let Ok(s) = dir.stat(name) else {
                    continue;
                };
                kind = s.kind;
                stat = Some(s);
            }
            if text == ".git" {
                continue;
            }
            kept.push((text, name, kind, stat));
        }
        // Sorted by the first eight bytes as one number; whole names compared only on a tie.
        let mut order: Vec<(u64, u32)> = kept
            .iter()
            .enumerate()
            .map(|(i, k)| (sort_key(k.0, k.2 == FileKind::Dir), i as u32))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                let (x, y) = (&kept[a.1 as usize], &kept[b.1 as usize]);
                path_order(x.0, x.2 == FileKind::Dir, y.0, y.2 == FileKind::Dir)
            })
        });
        let mut items = Vec::with_capacity(kept.len());
        let mut counted = 0;
        // The previous snapshot's files in this folder, in name order: each found by walking
        // along them (no lookup in the whole manifest, no path made for it), their paths and
        // hashes shared rather than copied.
        let before = self
            .previous
            .map(|p| in_folder(&p.files, &prefix))
            .unwrap_or_default();
        let mut next_before = 0;
        // A path under WORKDIR, made in one buffer (no allocation a name).
        let mut rel = String::with_capacity(prefix.len() + 64);
        for &(_, at) in &order {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            let (text, name, kind, stat) = kept[at as usize];
            rel.clear();
            rel.push_str(&prefix);
            rel.push_str(text);
            let is_dir = kind == FileKind::Dir;
            if rules
                .as_ref()
                .is_some_and(|r| r.active && r.ignored(&rel, is_dir))
            {
                continue;
            }
            if is_dir {
                let slot = {
                    let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
                    results.push(Vec::new());
                    results.len() - 1
                };
                items.push(Item::Folder(slot));
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                queue.0.push(Job {
                    parent: Some(dir.clone()),
                    name: rel.clone(),
                    rules: rules.clone(),
                    slot,
                });
                drop(queue);
                self.wake.notify_one();
                continue;
            }
            if !matches!(kind, FileKind::File | FileKind::Symlink) {
                // FIFOs, sockets, devices: not files a snapshot can hold.
                continue;
            }
            let stat = match stat {
                Some(s) => s,
                None => dir
                    .stat(name)
                    // The error's path made only on an error (not for every file).
                    .map_err(|e| super::io("reading", &self.path(&rel))(e))?,
            };
            // Files sort among themselves as their names do: the previous entries before this
            // name are of files gone since.
            let mut old = None;
            while let Some(&(path, entry)) = before.get(next_before) {
                let was = &path[prefix.len()..];
                if was == text {
                    old = Some((path, entry));
                    next_before += 1;
                    break;
                }
                if was > text {
                    break;
                }
                next_before += 1;
            }
            if let Some(entry) = self.entry(&dir, name, &rel, &stat, old.map(|o| o.1))? {
                // The previous snapshot's path when it had one: shared, not made again.
                let path = old.map_or_else(|| Arc::from(rel.as_str()), |o| o.0.clone());
                items.push(Item::Entry(path, entry));
                counted += 1;
                if counted == 256 {
                    self.count(mem::take(&mut counted))?;
                }
            }
        }
        self.count(counted)?;
        Ok(items)
    }

    /// Counts `n` more entries (a few at a time: one shared counter for every file would cost
    /// more than the file) against `checkpoints.max_files`.
    fn count(&self, n: usize) -> Result<(), CheckpointError> {
        let before = self.count.fetch_add(n, Ordering::Relaxed);
        if before + n > self.settings.max_files {
            return Err(CheckpointError::TooManyFiles(self.settings.max_files));
        }
        Ok(())
    }

    /// One file or link as a snapshot entry; a file's content is stored when it changed.
    fn entry(
        &self,
        dir: &Dir,
        name: &OsStr,
        rel: &str,
        stat: &Stat,
        old: Option<&Entry>,
    ) -> Result<Option<Entry>, CheckpointError> {
        let kind = stat.kind;
        let mut e = Entry {
            kind: "".into(),
            hash: None,
            target: None,
            mode: stat.mode,
            size: stat.size,
            mtime_ns: stat.mtime_ns,
            ino: stat.ino,
        };
        match kind {
            FileKind::Symlink => {
                e.kind = "link".into();
                e.target = dir.read_link(name).ok();
            }
            FileKind::File if e.size > self.settings.max_file_bytes => {
                e.kind = "skipped".into();
            }
            FileKind::File => {
                e.kind = "file".into();
                // Metadata proves nothing of a file modified within the tick the previous walk
                // began in (as git's "racily clean" entries): two seconds cover the coarsest
                // clocks of common file systems.
                let settled = |old: &Entry| {
                    self.previous
                        .and_then(|p| p.taken_ns)
                        .is_none_or(|t| old.mtime_ns < t - 2_000_000_000)
                };
                let unchanged = old.filter(|old| {
                    settled(old)
                        && old.kind == "file"
                        && old.size == e.size
                        && old.mtime_ns == e.mtime_ns
                        && old.ino == e.ino
                        && old.mode == e.mode
                });
                e.hash = match unchanged {
                    Some(old) => old.hash.clone(),
                    None => {
                        let path = self.path(rel);
                        // Without blocking, and checked again once open: a FIFO or device swapped in
                        // at the file's name since it was listed is skipped, never waited on.
                        let (file, stat) =
                            dir.open_file(name).map_err(super::io("reading", &path))?;
                        if stat.kind != FileKind::File {
                            return Ok(None);
                        }
                        let mut bytes = Vec::with_capacity(e.size as usize);
                        Read::read_to_end(
                            &mut Read::take(file, self.settings.max_file_bytes.saturating_add(1)),
                            &mut bytes,
                        )
                        .map_err(super::io("reading", &path))?;
                        Some(self.store.store_bytes(&bytes)?.into())
                    }
                };
            }
            _ => return Ok(None),
        }
        Ok(Some(e))
    }
}

/// The first eight bytes of a folder's entry's name as it sorts among paths (a subfolder's with
/// its `/`), as one number: names apart within them are ordered by it alone.
fn sort_key(name: &str, is_dir: bool) -> u64 {
    let mut key = [0u8; 8];
    let bytes = name.as_bytes();
    let n = bytes.len().min(8);
    key[..n].copy_from_slice(&bytes[..n]);
    if is_dir && n < 8 {
        key[n] = b'/';
    }
    // Names hold no NUL: a shorter name padded with zeros sorts first, as it does as a string.
    u64::from_be_bytes(key)
}

/// How two names of one folder's entries sort as the paths of what they hold: a subfolder `a`
/// as `a/` (after `a.txt`, before `a0`).
fn path_order(a: &str, a_dir: bool, b: &str, b_dir: bool) -> CmpOrdering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len().min(b.len());
    a[..n].cmp(&b[..n]).then_with(|| {
        // One name begins the other: what follows decides (a subfolder's `/`, or nothing).
        let after = |s: &[u8], dir: bool| s.get(n).copied().or(dir.then_some(b'/'));
        after(a, a_dir).cmp(&after(b, b_dir))
    })
}

/// The entries of `files` directly in the folder whose paths begin with `prefix` (`""` or ending
/// in `/`), in path order (as their names sort). Each subfolder's entries are passed over by one
/// seek, not one by one.
pub(super) fn in_folder<'m>(
    files: &'m BTreeMap<Arc<str>, Entry>,
    prefix: &str,
) -> Vec<(&'m Arc<str>, &'m Entry)> {
    let mut out = Vec::new();
    let mut range = files.range::<str, _>((Bound::Included(prefix), Bound::Unbounded));
    let mut past = String::new();
    while let Some((path, entry)) = range.next() {
        let Some(rest) = path.strip_prefix(prefix) else {
            break;
        };
        match memchr::memchr(b'/', rest.as_bytes()) {
            None => out.push((path, entry)),
            Some(slash) => {
                // Every path under `sub/` sorts before `sub0` (`0` follows `/`).
                past.clear();
                past.push_str(&path[..prefix.len() + slash]);
                past.push('0');
                range = files.range::<str, _>((Bound::Included(past.as_str()), Bound::Unbounded));
            }
        }
    }
    out
}
