//! Path confinement: resolving and opening paths inside one folder (WORKDIR, for the file tools),
//! where every path lands or is refused. Not the OS sandbox (`new_sys::os_sandbox`), which contains
//! the programs `new` starts; this is how `new`'s own file access keeps to the folder.
//!
//! **Resolving.** A path is joined to WORKDIR (absolute paths are taken as they are), then walked one
//! component at a time. An existing component is canonicalised, which resolves symlinks. Components
//! that do not exist are kept aside as plain names; a `..` first drops one of those, and only then
//! steps up from the resolved location. After every `..` the location must still lie inside WORKDIR,
//! and so must the result: no sequence of components (`nothere/../link/x`, `link/../..`) can end
//! outside it. A dangling symlink is refused, since writing through it could create a file anywhere.
//!
//! **Opening.** Checking a path and then opening it by name leaves a window in which a folder can be
//! swapped for a symlink. So files are opened by walking from a handle on WORKDIR, one folder handle
//! at a time, each opened with `O_NOFOLLOW`; creating folders, the temporary file and the rename all
//! happen inside the handle that was checked. A symlink that appears after the check makes the open
//! fail instead of leading outside. Only regular files are read or written: FIFOs (which would block
//! the session), sockets and devices are refused.

use std::ffi::OsStr;
use std::fmt::Debug;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use crate::vocab;
use new_sys::platform;
use new_sys::platform::{Dir, winpath};
pub use new_sys::platform::{FileKind, Stat};
use std::ffi::OsString;
use std::fs;
use std::fs::File;
use std::io;
use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::RwLock;

/// Why a path was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfineError {
    #[error("`{0}` is outside the working folder; only paths inside it can be used")]
    Outside(String),
    #[error("`{0}` is a symbolic link whose target does not exist")]
    DanglingLink(String),
    #[error("cannot resolve `{path}`: {reason}")]
    Unresolvable { path: String, reason: String },
    #[error("`{path}` cannot be used on Windows: {reason}")]
    Windows {
        path: String,
        reason: winpath::Refusal,
    },
}

/// The folder handles kept between the opens of one search ([`Workdir::open_read_in`]): WORKDIR's
/// and each folder's below it down to the last file's, each opened link-free from the one above.
/// One per thread.
#[derive(Default)]
pub struct FolderHandle {
    root: Option<(PathBuf, Dir)>,
    chain: Vec<(OsString, Dir)>,
}

/// The folder `name` inside `dir`, never through a link; with `create`, made if missing.
fn open_step(dir: &Dir, name: &OsStr, create: bool) -> io::Result<Dir> {
    match dir.dir(name) {
        Err(e) if create && e.kind() == ErrorKind::NotFound => {
            dir.make_dir(name)?;
            dir.dir(name)
        }
        other => other,
    }
    .map_err(|e| match e.kind() {
        ErrorKind::NotADirectory => io::Error::other(format!(
            "`{}` is not a folder (it may have been replaced by a link since it was checked)",
            name.to_string_lossy()
        )),
        _ => e,
    })
}

/// A regular file opened for reading inside the workdir.
pub struct OpenedFile {
    pub file: File,
    pub len: u64,
}

/// Where the text of a file an editor has open comes from (its unsaved changes included): an
/// editor front end answers for the files inside WORKDIR; None means "read the disk".
pub trait OpenBuffers: Send + Sync + Debug {
    /// The editor's text of `path` (absolute, resolved inside WORKDIR, a regular file there).
    fn text(&self, path: &Path) -> Option<String>;
}

/// A folder that paths are confined to: WORKDIR for the file tools (or a project's top, or a
/// read-only extra root), with the rules above for resolving and opening paths inside it.
#[derive(Debug, Clone)]
pub struct Workdir {
    root: PathBuf,
    /// Folders outside WORKDIR that the read tools may read (never write), shared by every copy
    /// of this workdir: the whole tool results of the current conversation.
    read_roots: Arc<RwLock<Vec<PathBuf>>>,
    /// Paths are shown absolute (the workdir of a read-only extra root).
    absolute: bool,
    /// The editor's buffers, when a front end reads through one (never for an extra root).
    buffers: Arc<RwLock<Option<Arc<dyn OpenBuffers>>>>,
}

impl Workdir {
    pub fn new(workdir: &Path) -> io::Result<Self> {
        Ok(Workdir {
            root: workdir.canonicalize()?,
            read_roots: Default::default(),
            absolute: false,
            buffers: Default::default(),
        })
    }

    /// A copy whose read-only extra roots are its own from now on (a subagent's: its results
    /// folder is not its parent's).
    pub fn detached(&self) -> Workdir {
        let roots = self
            .read_roots
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Workdir {
            root: self.root.clone(),
            read_roots: Arc::new(RwLock::new(roots)),
            absolute: self.absolute,
            buffers: self.buffers.clone(),
        }
    }

    /// Reads go through `buffers` from now on (every copy of this workdir), for the files inside
    /// WORKDIR.
    pub fn set_buffers(&self, buffers: Arc<dyn OpenBuffers>) {
        *self.buffers.write().unwrap_or_else(|e| e.into_inner()) = Some(buffers);
    }

    /// Whether reads may wait for an editor.
    pub fn has_buffers(&self) -> bool {
        self.buffers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The editor's text of a resolved path inside WORKDIR, when an editor holds it. The caller
    /// opened the path through [`Workdir::open_read`] first (a regular file, reached without a
    /// link), so what is asked of the editor is a file of the folder.
    pub fn buffer_text(&self, path: &Path) -> Option<String> {
        if self.absolute || !platform::path_within(path, &self.root) {
            return None;
        }
        let buffers = self
            .buffers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        buffers.text(path)
    }

    /// Sets the read-only extra roots (they need not exist yet).
    pub fn set_read_roots(&self, roots: Vec<PathBuf>) {
        *self.read_roots.write().unwrap_or_else(|e| e.into_inner()) = roots;
    }

    /// Makes the whole tool results of the current conversation readable: this root replaces the
    /// results folder of any other conversation (the first root), the others stay.
    pub fn set_results_root(&self, root: PathBuf) {
        let mut roots = self.read_roots.write().unwrap_or_else(|e| e.into_inner());
        match roots.first_mut() {
            Some(first) => *first = root,
            None => roots.push(root),
        }
    }

    /// Adds a read-only extra root (a loaded skill's folder) for the rest of the session.
    pub fn add_read_root(&self, root: PathBuf) {
        let mut roots = self.read_roots.write().unwrap_or_else(|e| e.into_inner());
        if roots.is_empty() {
            // The first place is the results folder's.
            roots.push(PathBuf::new());
        }
        if !roots.contains(&root) {
            roots.push(root);
        }
    }

    /// Resolves a path for reading: inside WORKDIR as [`Workdir::resolve`] does, or, given as an
    /// absolute path, inside one of the read-only extra roots by the same rules (links resolved,
    /// refused if they lead out of that root). Returns the workdir that governs the path, for
    /// opening it.
    pub fn resolve_read(&self, path: &str) -> Result<(Workdir, PathBuf), ConfineError> {
        match self.resolve(path) {
            Err(refused @ ConfineError::Outside(_)) if Path::new(path.trim()).is_absolute() => {
                let roots = self
                    .read_roots
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                for root in roots {
                    let Ok(root) = root.canonicalize() else {
                        continue;
                    };
                    let extra = Workdir {
                        root,
                        read_roots: Default::default(),
                        absolute: true,
                        buffers: Default::default(),
                    };
                    if let Ok(resolved) = extra.resolve(path) {
                        return Ok((extra, resolved));
                    }
                }
                Err(refused)
            }
            other => other.map(|p| (self.clone(), p)),
        }
    }

    /// The canonical WORKDIR.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path given by the model to an absolute path inside WORKDIR.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ConfineError> {
        if let Some(reason) = platform::path_refusal(path) {
            return Err(ConfineError::Windows {
                path: path.to_string(),
                reason,
            });
        }
        let requested = Path::new(path.trim());
        // An absolute path starts from its own root (and drive, or share, on Windows).
        let mut current = if requested.is_absolute() {
            PathBuf::new()
        } else {
            self.root.clone()
        };
        // Names below `current` that do not exist (so cannot be symlinks).
        let mut missing: Vec<&OsStr> = Vec::new();
        let outside = || ConfineError::Outside(path.to_string());
        for component in requested.components() {
            match component {
                Component::Prefix(_) | Component::RootDir if requested.is_absolute() => {
                    current.push(component)
                }
                Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
                Component::ParentDir => {
                    if missing.pop().is_none() {
                        current.pop();
                    }
                    if !platform::path_within(&current, &self.root) {
                        return Err(outside());
                    }
                }
                Component::Normal(name) if !missing.is_empty() => missing.push(name),
                Component::Normal(name) => {
                    let next = current.join(name);
                    match fs::symlink_metadata(&next) {
                        Ok(meta) => {
                            current = next.canonicalize().map_err(|e| {
                                if meta.file_type().is_symlink() {
                                    ConfineError::DanglingLink(path.to_string())
                                } else {
                                    ConfineError::Unresolvable {
                                        path: path.to_string(),
                                        reason: e.to_string(),
                                    }
                                }
                            })?;
                        }
                        Err(e) if e.kind() == ErrorKind::NotFound => missing.push(name),
                        Err(e) => {
                            return Err(ConfineError::Unresolvable {
                                path: path.to_string(),
                                reason: e.to_string(),
                            });
                        }
                    }
                }
            }
        }
        current.extend(missing);
        if platform::path_within(&current, &self.root) {
            Ok(current)
        } else {
            Err(outside())
        }
    }

    /// A path inside WORKDIR as the model should see it: relative, `.` for WORKDIR itself, with
    /// `/` between names on every system (as the model writes them, and snapshots list them).
    pub fn display(&self, path: &Path) -> String {
        if self.absolute {
            return path.display().to_string();
        }
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => platform::slash_path(rel),
            Err(_) => path.display().to_string(),
        }
    }

    /// The folders from WORKDIR down to `path`'s parent, and its last component. `path` comes from
    /// [`Workdir::resolve`].
    fn split<'p>(&self, path: &'p Path) -> io::Result<(Vec<&'p OsStr>, &'p OsStr)> {
        let rel = path
            .strip_prefix(&self.root)
            .map_err(|_| io::Error::other("the path is outside the working folder"))?;
        let mut parts: Vec<&OsStr> = rel.iter().collect();
        let name = parts
            .pop()
            .ok_or_else(|| io::Error::other("the working folder itself is not a file"))?;
        Ok((parts, name))
    }

    /// A handle on the folder `dirs` below WORKDIR, each step opened without following symlinks;
    /// with `create`, missing folders are made inside the handle above them.
    fn open_dirs(&self, dirs: &[&OsStr], create: bool) -> io::Result<Dir> {
        let mut dir = self.open_root()?;
        for name in dirs {
            dir = open_step(&dir, name, create)?;
        }
        Ok(dir)
    }

    fn open_root(&self) -> io::Result<Dir> {
        Dir::open(&self.root)
    }

    /// [`Workdir::open_dirs`] (never creating) through the handles kept in `folder`: only the
    /// folders below the part shared with the last path are opened.
    fn open_dirs_in<'f>(
        &self,
        dirs: &[&OsStr],
        folder: &'f mut FolderHandle,
    ) -> io::Result<&'f Dir> {
        if folder
            .root
            .as_ref()
            .is_none_or(|(root, _)| *root != self.root)
        {
            *folder = FolderHandle {
                root: Some((self.root.clone(), self.open_root()?)),
                chain: Vec::new(),
            };
        }
        let shared = folder
            .chain
            .iter()
            .zip(dirs)
            .take_while(|((kept, _), name)| kept == *name)
            .count();
        folder.chain.truncate(shared);
        for name in &dirs[shared..] {
            let above = match folder.chain.last() {
                Some((_, fd)) => fd,
                None => &folder.root.as_ref().expect("opened above").1,
            };
            let fd = open_step(above, name, false)?;
            folder.chain.push((name.to_os_string(), fd));
        }
        Ok(match folder.chain.last() {
            Some((_, fd)) => fd,
            None => &folder.root.as_ref().expect("opened above").1,
        })
    }

    /// Opens a resolved path for reading, if it is a regular file. The last component is opened
    /// without following a symlink and without blocking (a FIFO would otherwise wait for a
    /// writer), and what was opened is checked before anything is read.
    pub fn open_read(&self, path: &Path, shown: &str) -> io::Result<OpenedFile> {
        self.open_read_in(path, shown, &mut FolderHandle::default())
    }

    /// [`Workdir::open_read`] for a search that opens many files: the handle on the last folder
    /// opened is kept in `folder` and used again for the next file of the same folder, instead
    /// of walking down from WORKDIR for every file. The handle was opened link-free, so it names
    /// the folder that was checked even if that folder's path is swapped for a link afterwards;
    /// the file itself is still opened without following a link.
    pub fn open_read_in(
        &self,
        path: &Path,
        shown: &str,
        folder: &mut FolderHandle,
    ) -> io::Result<OpenedFile> {
        let (dirs, name) = self.split(path)?;
        let dir = self.open_dirs_in(&dirs, folder)?;
        let (file, stat) = dir.open_file(name).map_err(|e| {
            // A link, or a socket (which cannot be opened at all): say what it is rather than
            // "too many levels of links" or "no such device".
            match dir.stat(name) {
                Ok(stat) if stat.kind != FileKind::File => not_regular(shown, stat.kind),
                _ => e,
            }
        })?;
        if stat.kind != FileKind::File {
            return Err(not_regular(shown, stat.kind));
        }
        Ok(OpenedFile {
            file,
            len: stat.size,
        })
    }

    /// The status of a resolved path inside the folder handles of `folder` (as
    /// [`Workdir::open_read_in`] opens), without following a final symlink.
    pub fn stat_in(&self, path: &Path, folder: &mut FolderHandle) -> io::Result<Stat> {
        let (dirs, name) = self.split(path)?;
        let dir = self.open_dirs_in(&dirs, folder)?;
        dir.stat(name)
    }

    /// What kind of thing a resolved path names, without following a final symlink; None when
    /// nothing is there.
    pub fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        if path == self.root {
            return Ok(Some(FileKind::Dir));
        }
        let (dirs, name) = self.split(path)?;
        let dir = match self.open_dirs(&dirs, false) {
            Ok(dir) => dir,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match dir.stat(name) {
            Ok(stat) => Ok(Some(stat.kind)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces (or creates) the file at a resolved path atomically: parent folders are created,
    /// a temporary file is written and renamed over the target, all inside the folder handle that
    /// was checked. An existing file keeps its permissions; a target that is not a regular file
    /// is refused.
    pub fn write(&self, path: &Path, shown: &str, bytes: &[u8]) -> io::Result<()> {
        let (dirs, name) = self.split(path)?;
        let dir = self.open_dirs(&dirs, true)?;
        let mode = match dir.stat(name) {
            Ok(stat) => {
                if stat.kind != FileKind::File {
                    return Err(not_regular(shown, stat.kind));
                }
                Some(stat.mode)
            }
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let tmp = format!(".{}.{}.tmp", name.to_string_lossy(), vocab::new_id());
        let tmp = OsStr::new(&tmp);
        let mut file = dir.create_new(tmp, 0o666)?;
        let result = (|| {
            if let Some(mode) = mode {
                platform::set_mode(&file, mode)?;
            }
            file.write_all(bytes)?;
            file.sync_all()?;
            drop(file);
            dir.rename(tmp, name)
        })();
        if result.is_err() {
            let _ = dir.remove_file(tmp);
        }
        result
    }
}

/// What a restore puts at a path.
#[derive(Debug, Clone, Copy)]
pub enum Put<'a> {
    File { bytes: &'a [u8], mode: u32 },
    Link { target: &'a str },
    Nothing,
}

/// What is at a path below WORKDIR now, as a restore compares it with what it expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Nothing,
    File {
        size: u64,
        mtime_ns: i128,
        ino: u64,
        mode: u32,
    },
    Link {
        target: String,
    },
    /// A folder, FIFO, device or socket.
    Other,
}

/// The names of a path below WORKDIR (relative, `/`-separated, as a snapshot lists it), at least
/// one; a path with anything but plain names is refused.
fn plain_parts(rel: &str) -> io::Result<Vec<&OsStr>> {
    let parts: Vec<&OsStr> = Path::new(rel)
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::other(format!("`{rel}` is not a plain path"))),
        })
        .collect::<io::Result<_>>()?;
    if parts.is_empty() {
        return Err(io::Error::other("an empty path"));
    }
    Ok(parts)
}

/// A file's modification time in nanoseconds since the epoch, as snapshots record it.
pub fn mtime_ns(stat: &Stat) -> i128 {
    stat.mtime_ns
}

impl Workdir {
    /// What is at `rel` (as [`Workdir::put`] names it) now, without following a link anywhere.
    pub fn found(&self, rel: &str) -> io::Result<Found> {
        let parts = plain_parts(rel)?;
        let (name, dirs) = parts.split_last().expect("never empty");
        let dir = match self.open_dirs(dirs, false) {
            Ok(dir) => dir,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Nothing),
            Err(e) => return Err(e),
        };
        let stat = match dir.stat(name) {
            Ok(stat) => stat,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Nothing),
            Err(e) => return Err(e),
        };
        Ok(match stat.kind {
            FileKind::File => Found::File {
                size: stat.size,
                mtime_ns: stat.mtime_ns,
                ino: stat.ino,
                mode: stat.mode,
            },
            FileKind::Symlink => Found::Link {
                target: dir.read_link(name).unwrap_or_default(),
            },
            _ => Found::Other,
        })
    }

    /// Makes a path below WORKDIR (relative, `/`-separated, as a snapshot lists it) hold `what`:
    /// a file with its mode or a link, written beside and renamed over whatever is there (never
    /// torn), or nothing (a file or link removed). Every folder on the way is opened without
    /// following a link; a path with anything but plain names is refused.
    pub fn put(&self, rel: &str, what: Put<'_>) -> io::Result<()> {
        let parts = plain_parts(rel)?;
        let (name, dirs) = parts.split_last().expect("never empty");
        let create = !matches!(what, Put::Nothing);
        let dir = match self.open_dirs(dirs, create) {
            Ok(dir) => dir,
            Err(e) if e.kind() == ErrorKind::NotFound && !create => return Ok(()),
            Err(e) => return Err(e),
        };
        let tmp = format!(".{}.{}.tmp", name.to_string_lossy(), vocab::new_id());
        let tmp = OsStr::new(&tmp);
        let placed = match what {
            Put::Nothing => {
                return match dir.remove_file(name) {
                    Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                };
            }
            Put::Link { target } => dir.symlink(target, tmp),
            Put::File { bytes, mode } => (|| {
                let mut file = dir.create_new(tmp, 0o600)?;
                platform::set_mode(&file, mode)?;
                // No fsync: the rename is what keeps a file whole if `new` is killed; like `git
                // checkout`, a restore does not wait for the disk.
                file.write_all(bytes)
            })(),
        };
        let result = placed.and_then(|()| dir.rename(tmp, name));
        if result.is_err() {
            let _ = dir.remove_file(tmp);
        }
        result
    }
}

fn not_regular(shown: &str, kind: FileKind) -> io::Error {
    io::Error::other(format!(
        "`{shown}` is {}; only regular files can be used",
        kind.describe()
    ))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    #[cfg(not(target_os = "macos"))]
    use rustix::fs::CWD;
    #[cfg(not(target_os = "macos"))]
    use rustix::fs::makedev;
    #[cfg(not(target_os = "macos"))]
    use rustix::fs::mknodat;
    #[cfg(target_os = "linux")]
    use rustix::fs::{FileType, Mode};
    use std::fs;
    use std::io;
    use std::io::ErrorKind;
    use std::io::Read;
    use std::os::unix::fs::symlink;
    #[cfg(all(unix, not(target_os = "macos")))]
    use std::os::unix::net::UnixListener;

    fn setup() -> (tempfile::TempDir, Workdir) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir_all(work.join("src")).unwrap();
        fs::write(work.join("src/a.txt"), "a").unwrap();
        fs::write(dir.path().join("secret.txt"), "s").unwrap();
        let workdir = Workdir::new(&work).unwrap();
        (dir, workdir)
    }

    /// Folder handles kept between the opens of a search open the right files, never through a
    /// link swapped in since.
    #[test]
    fn kept_folder_handles_open_the_right_files_and_never_follow_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        for rel in ["a/b/x", "a/c/y", "a/b/z", "w", "a/b/deep/v"] {
            let p = work.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, rel).unwrap();
        }
        fs::write(dir.path().join("secret"), "outside").unwrap();
        let s = Workdir::new(&work).unwrap();
        let root = s.root().to_path_buf();
        let mut folder = FolderHandle::default();
        let mut read = |rel: &str| -> io::Result<String> {
            let mut f = s.open_read_in(&root.join(rel), rel, &mut folder)?;
            let mut text = String::new();
            Read::read_to_string(&mut f.file, &mut text)?;
            Ok(text)
        };
        for rel in ["a/b/x", "a/c/y", "a/b/z", "w", "a/b/deep/v", "a/b/x"] {
            assert_eq!(read(rel).unwrap(), rel);
        }
        // A file swapped for a link after its folder's handle was kept is refused.
        fs::remove_file(work.join("a/b/z")).unwrap();
        symlink(dir.path().join("secret"), work.join("a/b/z")).unwrap();
        assert!(read("a/b/z").unwrap_err().to_string().contains("link"));
        // A folder below the kept ones swapped for a link is refused too.
        fs::remove_dir_all(work.join("a/c")).unwrap();
        symlink(dir.path(), work.join("a/c")).unwrap();
        assert!(read("a/c/secret").is_err());
        assert_eq!(read("w").unwrap(), "w");
        assert!(read("a/c/secret").is_err());
    }

    /// Read-only extra roots: absolute paths inside them resolve (by the same rules: links judged
    /// by their target, `..` never leaving the root), relative paths never do, and the results
    /// root is replaced while other roots stay.
    #[test]
    fn extra_roots_are_readable_by_the_same_rules_and_nothing_else() {
        let (d, s) = setup();
        let results = d.path().join("data/c1.results");
        let skill = d.path().join("skills/pdf");
        fs::create_dir_all(&results).unwrap();
        fs::create_dir_all(skill.join("reference")).unwrap();
        fs::write(results.join("m1.txt"), "whole").unwrap();
        fs::write(skill.join("reference/notes.md"), "notes").unwrap();
        symlink(d.path().join("secret.txt"), skill.join("leak")).unwrap();
        symlink(skill.join("reference"), skill.join("inner")).unwrap();
        let result = results.join("m1.txt").display().to_string();
        let note = skill.join("reference/notes.md").display().to_string();
        // Nothing before the roots are set.
        assert!(matches!(
            s.resolve_read(&result),
            Err(ConfineError::Outside(_))
        ));
        s.set_results_root(results.clone());
        s.add_read_root(skill.clone());
        let (inside, path) = s.resolve_read(&result).unwrap();
        assert_eq!(path, results.canonicalize().unwrap().join("m1.txt"));
        assert_eq!(inside.display(&path), path.display().to_string());
        assert_eq!(
            inside.open_read(&path, "m1").map(|f| f.len).unwrap(),
            5,
            "opened through the root's own handle walk"
        );
        assert!(s.resolve_read(&note).is_ok());
        assert!(
            s.resolve_read(&skill.join("inner/notes.md").display().to_string())
                .is_ok()
        );
        // Out of a root: by a link, by `..`, or a sibling folder.
        for path in [
            skill.join("leak").display().to_string(),
            format!("{}/../../secret.txt", skill.display()),
            format!("{}/../c2.results/x.txt", results.display()),
            d.path().join("secret.txt").display().to_string(),
        ] {
            assert!(s.resolve_read(&path).is_err(), "{path}");
        }
        // Relative paths are WORKDIR's only: one that leaves WORKDIR by a link is not looked
        // for in the extra roots, even where a root has that name.
        symlink(d.path(), s.root().join("out")).unwrap();
        fs::create_dir_all(results.join("out")).unwrap();
        fs::write(results.join("out/f.txt"), "f").unwrap();
        assert!(matches!(
            s.resolve_read("out/f.txt"),
            Err(ConfineError::Outside(_))
        ));
        assert_eq!(
            s.resolve_read("src/a.txt").unwrap().1,
            s.root().join("src/a.txt")
        );
        assert!(
            s.resolve_read("m1.txt")
                .unwrap()
                .0
                .display(&s.root().join("m1.txt"))
                == "m1.txt"
        );
        // Writing goes through `resolve`, which knows no extra root.
        assert!(matches!(s.resolve(&note), Err(ConfineError::Outside(_))));
        // Another conversation's results replace this one's; the skill stays.
        let other = d.path().join("data/c2.results");
        fs::create_dir_all(&other).unwrap();
        s.set_results_root(other);
        assert!(s.resolve_read(&result).is_err());
        assert!(s.resolve_read(&note).is_ok());
        // The clones share the roots (the registry's copy is the one the tools use).
        assert!(s.clone().resolve_read(&note).is_ok());
    }

    #[test]
    fn inside_paths_resolve() {
        let (_d, s) = setup();
        let root = s.root().to_path_buf();
        assert_eq!(s.resolve("src/a.txt").unwrap(), root.join("src/a.txt"));
        assert_eq!(
            s.resolve("./src/../src/a.txt").unwrap(),
            root.join("src/a.txt")
        );
        assert_eq!(s.resolve("").unwrap(), root);
        assert_eq!(s.resolve(".").unwrap(), root);
        assert_eq!(
            s.resolve("new/dir/file.txt").unwrap(),
            root.join("new/dir/file.txt")
        );
        let abs = root.join("src/a.txt");
        assert_eq!(s.resolve(abs.to_str().unwrap()).unwrap(), abs);
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, s) = setup();
        for p in [
            "../secret.txt",
            "src/../../secret.txt",
            "/etc/passwd",
            "/",
            "nothere/../../x",
            "a/b/../../../x",
        ] {
            assert_eq!(
                s.resolve(p),
                Err(ConfineError::Outside(p.to_string())),
                "{p}"
            );
        }
    }

    #[test]
    fn symlinks_are_followed_and_judged_by_their_target() {
        let (d, s) = setup();
        let root = s.root().to_path_buf();
        symlink(d.path().join("secret.txt"), root.join("out")).unwrap();
        symlink(d.path(), root.join("outdir")).unwrap();
        symlink(root.join("src"), root.join("in")).unwrap();
        symlink(d.path().join("missing"), root.join("dangling")).unwrap();
        assert!(matches!(s.resolve("out"), Err(ConfineError::Outside(_))));
        assert!(matches!(
            s.resolve("outdir/new.txt"),
            Err(ConfineError::Outside(_))
        ));
        assert_eq!(s.resolve("in/a.txt").unwrap(), root.join("src/a.txt"));
        assert!(matches!(
            s.resolve("dangling"),
            Err(ConfineError::DanglingLink(_))
        ));
        // `..` after a symlink steps up from where the link points, as the kernel would.
        assert!(matches!(
            s.resolve("outdir/../x"),
            Err(ConfineError::Outside(_))
        ));
    }

    /// Every spelling that once reached past a missing component, and more: none may resolve to a
    /// path outside WORKDIR, whatever the model writes.
    #[test]
    fn no_sequence_of_components_leaves_the_root() {
        let (d, s) = setup();
        let root = s.root().to_path_buf();
        let outside = d.path().canonicalize().unwrap();
        fs::create_dir_all(outside.join("out")).unwrap();
        fs::write(outside.join("out/s.txt"), "secret").unwrap();
        symlink(outside.join("out"), root.join("out")).unwrap();
        symlink(&outside, root.join("up")).unwrap();
        symlink("../secret.txt", root.join("rel")).unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        let work = root.file_name().unwrap().to_str().unwrap().to_string();
        let spellings = [
            "nothere/../out/s.txt".to_string(),
            "nothere/../out/new.txt".into(),
            "nothere/../out".into(),
            "a/b/../../out/s.txt".into(),
            "a/../b/../out/s.txt".into(),
            "nothere/./../out/s.txt".into(),
            "./nothere//..//out/s.txt".into(),
            "nothere/../nothere2/../out/x/y".into(),
            "src/nothere/../../out/s.txt".into(),
            "src/deep/nothere/../../../out/s.txt".into(),
            "nothere/../up/secret.txt".into(),
            "nothere/../up/new.txt".into(),
            "nothere/../rel".into(),
            "out/../out/s.txt".into(),
            "up/work/src/a.txt".into(),
            format!("up/{work}/src/a.txt"),
            format!("nothere/../up/{work}/../secret.txt"),
            format!("{}/nothere/../out/s.txt", root.display()),
            format!("{}/out/s.txt", root.display()),
            "src/../..".into(),
            "..".into(),
            "nothere/../..".into(),
            "nothere/../../secret.txt".into(),
            "x/../../work/src/a.txt".into(),
            format!("../{work}/../secret.txt"),
        ];
        let mut refused = 0;
        for p in &spellings {
            let Ok(resolved) = s.resolve(p) else {
                refused += 1;
                continue;
            };
            // What the kernel would reach: the nearest existing ancestor, resolved, must be inside.
            let mut existing = resolved.as_path();
            while !existing.exists() {
                existing = existing.parent().unwrap();
            }
            let real = existing.canonicalize().unwrap();
            assert!(
                real.starts_with(&root)
                    && !resolved.components().any(|c| c == Component::ParentDir),
                "`{p}` resolved to {} which reaches {}",
                resolved.display(),
                real.display()
            );
        }
        // Only the two that really end inside WORKDIR (out through `up`, back in by name) resolve.
        assert_eq!(refused, spellings.len() - 2, "{spellings:?}");
        // And nothing was created outside by trying.
        assert!(!outside.join("out/new.txt").exists());
    }

    #[test]
    fn files_are_opened_and_written_without_following_swapped_links() {
        let (d, s) = setup();
        let root = s.root().to_path_buf();
        let outside = d.path().canonicalize().unwrap().join("elsewhere");
        fs::create_dir_all(&outside).unwrap();
        // Resolved while `sub` was a folder, then `sub` is swapped for a link to outside.
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("sub/f.txt"), "inside").unwrap();
        let target = s.resolve("sub/f.txt").unwrap();
        let created = s.resolve("sub/new/g.txt").unwrap();
        fs::rename(root.join("sub"), root.join("sub.old")).unwrap();
        fs::write(outside.join("f.txt"), "outside").unwrap();
        symlink(&outside, root.join("sub")).unwrap();
        assert!(s.open_read(&target, "sub/f.txt").is_err());
        assert!(s.write(&target, "sub/f.txt", b"x").is_err());
        assert!(s.write(&created, "sub/new/g.txt", b"x").is_err());
        assert_eq!(
            fs::read_to_string(outside.join("f.txt")).unwrap(),
            "outside"
        );
        assert!(!outside.join("new").exists());
        // A final component swapped for a link is refused too.
        fs::remove_file(root.join("sub")).unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        symlink(outside.join("f.txt"), root.join("sub/f.txt")).unwrap();
        assert!(s.open_read(&target, "sub/f.txt").is_err());
        assert!(s.write(&target, "sub/f.txt", b"x").is_err());
        assert_eq!(
            fs::read_to_string(outside.join("f.txt")).unwrap(),
            "outside"
        );
        // The ordinary case: folders are created, the file written and read back.
        let fresh = s.resolve("made/a/b.txt").unwrap();
        s.write(&fresh, "made/a/b.txt", b"hello").unwrap();
        let mut opened = s.open_read(&fresh, "made/a/b.txt").unwrap();
        let mut text = String::new();
        Read::read_to_string(&mut opened.file, &mut text).unwrap();
        assert_eq!((text.as_str(), opened.len), ("hello", 5));
    }

    #[test]
    fn resolving_keeps_missing_names_in_order_and_reports_what_it_cannot_resolve() {
        let (_d, s) = setup();
        let root = s.root().to_path_buf();
        // A name that exists at the root, after a missing one, is not the root's.
        assert_eq!(
            s.resolve("nothere/src/a.txt").unwrap(),
            root.join("nothere/src/a.txt")
        );
        // Below a file: not "missing", but an error that says so.
        assert!(matches!(
            s.resolve("src/a.txt/x"),
            Err(ConfineError::Unresolvable { .. })
        ));
    }

    #[test]
    fn reading_creates_nothing_and_kinds_report_errors() {
        let (_d, s) = setup();
        let root = s.root().to_path_buf();
        let p = s.resolve("missing/deeper/x.txt").unwrap();
        let err = s.open_read(&p, "missing/deeper/x.txt").err().unwrap();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(!root.join("missing").exists(), "reading created a folder");
        assert_eq!(s.kind(&p).unwrap(), None);
        assert_eq!(s.kind(&root).unwrap(), Some(FileKind::Dir));
        // Below a file: an error, not "nothing there".
        assert!(s.kind(&root.join("src/a.txt/x")).is_err());
        // A file where a folder should be is not taken for one.
        let err = s
            .open_dirs(&[OsStr::new("src"), OsStr::new("a.txt")], true)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("`a.txt` is not a folder"), "{err}");
        // Writing over a folder or a link says what is in the way.
        let dir = s.resolve("src").unwrap();
        let err = s.write(&dir, "src", b"x").unwrap_err().to_string();
        assert!(err.contains("is a folder"), "{err}");
        let err = s.open_read(&dir, "src").err().unwrap().to_string();
        assert!(err.contains("is a folder"), "{err}");
        symlink(root.join("src/a.txt"), root.join("link")).unwrap();
        let link = root.join("link"); // as if resolved before the link appeared
        let err = s.write(&link, "link", b"x").unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        let err = s.open_read(&link, "link").err().unwrap().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert_eq!(fs::read_to_string(root.join("src/a.txt")).unwrap(), "a");
    }

    // Device nodes and FIFOs are made with `mknodat`, which rustix offers on Linux.
    #[cfg(target_os = "linux")]
    #[test]
    fn fifos_sockets_and_devices_are_refused() {
        let (_d, s) = setup();
        let root = s.root().to_path_buf();
        let fifo = root.join("pipe");
        mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        let _sock = UnixListener::bind(root.join("sock")).unwrap();
        symlink("/dev/null", root.join("null")).unwrap();
        let p = s.resolve("pipe").unwrap();
        let err = s.open_read(&p, "pipe").err().unwrap().to_string();
        assert!(err.contains("named pipe"), "{err}");
        let err = s.write(&p, "pipe", b"x").unwrap_err().to_string();
        assert!(err.contains("named pipe"), "{err}");
        let p = s.resolve("sock").unwrap();
        assert!(
            s.open_read(&p, "sock")
                .err()
                .unwrap()
                .to_string()
                .contains("socket")
        );
        // A link to a device leads outside WORKDIR anyway.
        assert!(s.resolve("null").is_err());
        // Device nodes inside WORKDIR, where this user may make them (root may).
        for (name, kind, what) in [
            ("chr", FileType::CharacterDevice, "a character device"),
            ("blk", FileType::BlockDevice, "a block device"),
        ] {
            let made = mknodat(
                CWD,
                root.join(name),
                kind,
                Mode::from_raw_mode(0o600),
                makedev(1, 3),
            );
            if made.is_err() {
                continue;
            }
            let p = s.resolve(name).unwrap();
            let err = s.write(&p, name, b"x").unwrap_err().to_string();
            assert!(err.contains(what), "{err}");
        }
    }

    /// What a restore writes goes by the same rules as the tools: a path that is not plain names
    /// is refused, a folder on the way that became a link is not followed (whether writing or
    /// removing), and nothing outside WORKDIR changes.
    #[test]
    fn put_refuses_paths_that_leave_workdir() {
        let (d, s) = setup();
        let root = s.root().to_path_buf();
        let file = Put::File {
            bytes: b"pwned",
            mode: 0o644,
        };
        for bad in ["../secret.txt", "/etc/x", "src/../../secret.txt", "./a", ""] {
            let err = s.put(bad, file).unwrap_err().to_string();
            assert!(
                err.contains("not a plain path") || err.contains("empty path"),
                "{bad}: {err}"
            );
        }
        // A folder replaced by a link to outside WORKDIR.
        symlink(d.path(), root.join("out")).unwrap();
        let err = s.put("out/secret.txt", file).unwrap_err().to_string();
        assert!(err.contains("`out` is not a folder"), "{err}");
        s.put("out/secret.txt", Put::Nothing).unwrap_err();
        let err = s
            .put(
                "out/new",
                Put::Link {
                    target: "/etc/passwd",
                },
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("`out` is not a folder"), "{err}");
        assert_eq!(
            fs::read_to_string(d.path().join("secret.txt")).unwrap(),
            "s"
        );
        assert!(!d.path().join("new").exists());
        // A link as the last part is replaced, not written through.
        symlink(d.path().join("secret.txt"), root.join("leak")).unwrap();
        s.put("leak", file).unwrap();
        assert_eq!(fs::read_to_string(root.join("leak")).unwrap(), "pwned");
        assert!(
            !fs::symlink_metadata(root.join("leak"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(d.path().join("secret.txt")).unwrap(),
            "s"
        );
        // The mode is the one asked for, its file-type bits dropped.
        use std::os::unix::fs::PermissionsExt;
        s.put(
            "src/run.sh",
            Put::File {
                bytes: b"#!/bin/sh",
                mode: 0o100750,
            },
        )
        .unwrap();
        let meta = fs::metadata(root.join("src/run.sh")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o750);
        // Removing a missing file under a missing folder is not an error, and makes no folder.
        s.put("gone/deeper/x", Put::Nothing).unwrap();
        assert!(!root.join("gone").exists());
        // No temporary files are left beside anything.
        let names: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}

/// What holds on every system, Windows included (the tests above make links, FIFOs and devices,
/// which need Unix).
#[cfg(test)]
mod portable_tests {
    use super::*;
    use std::fs;
    use std::io::Read;

    #[test]
    fn files_are_written_read_and_confined_on_every_system() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("Work");
        fs::create_dir_all(work.join("src")).unwrap();
        fs::write(dir.path().join("secret.txt"), "s").unwrap();
        let s = Workdir::new(&work).unwrap();
        let p = s.resolve("src/new/a.txt").unwrap();
        assert_eq!(p, s.root().join("src").join("new").join("a.txt"));
        s.write(&p, "src/new/a.txt", b"hello").unwrap();
        s.write(&p, "src/new/a.txt", b"hello again").unwrap();
        let mut opened = s.open_read(&p, "src/new/a.txt").unwrap();
        let mut text = String::new();
        Read::read_to_string(&mut opened.file, &mut text).unwrap();
        assert_eq!((text.as_str(), opened.len), ("hello again", 11));
        assert_eq!(s.kind(&p).unwrap(), Some(FileKind::File));
        assert_eq!(s.kind(&s.root().join("src")).unwrap(), Some(FileKind::Dir));
        let err = s.open_read(&s.root().join("src"), "src").err().unwrap();
        assert!(err.to_string().contains("a folder"), "{err}");
        for outside in [
            "../secret.txt",
            "src/../../secret.txt",
            "src/new/../../../x",
        ] {
            assert!(
                matches!(s.resolve(outside), Err(ConfineError::Outside(_))),
                "{outside}"
            );
        }
        let absolute = dir.path().join("secret.txt").display().to_string();
        assert!(matches!(
            s.resolve(&absolute),
            Err(ConfineError::Outside(_))
        ));
        let inside = s.root().join("src").display().to_string();
        assert_eq!(s.resolve(&inside).unwrap(), s.root().join("src"));
        s.put(
            "src/b.txt",
            Put::File {
                bytes: b"b",
                mode: 0o644,
            },
        )
        .unwrap();
        assert!(matches!(
            s.found("src/b.txt").unwrap(),
            Found::File { size: 1, .. }
        ));
        s.put("src/b.txt", Put::Nothing).unwrap();
        assert_eq!(s.found("src/b.txt").unwrap(), Found::Nothing);
    }

    /// Windows' own refusals reach the model as such; elsewhere these are ordinary names.
    #[test]
    fn windows_names_are_refused_on_windows_only() {
        let dir = tempfile::tempdir().unwrap();
        let s = Workdir::new(dir.path()).unwrap();
        for name in ["NUL", "notes.txt:hidden", "con.txt", "D:notes.txt"] {
            let resolved = s.resolve(name);
            if cfg!(windows) {
                assert!(
                    matches!(resolved, Err(ConfineError::Windows { .. })),
                    "{name}: {resolved:?}"
                );
            } else {
                assert!(resolved.is_ok(), "{name}: {resolved:?}");
            }
        }
    }

    /// A path given with the letters of WORKDIR in another case is inside it on Windows, whose
    /// file systems ignore case.
    #[cfg(windows)]
    #[test]
    fn workdir_compares_without_case_on_windows() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("Work")).unwrap();
        let s = Workdir::new(&dir.path().join("Work")).unwrap();
        let upper = dir.path().join("WORK").join("x.txt").display().to_string();
        let resolved = s.resolve(&upper).unwrap();
        assert!(new_sys::platform::path_within(&resolved, s.root()));
    }
}
