//! The page's file panel: WORKDIR shown read-only, under the file tools' rules. A path is
//! resolved by the engine's confinement ([`Workdir::resolve`]: `..` and links may not lead out),
//! then opened from a handle on WORKDIR one folder at a time, each step and the last one without
//! following a link (as the file tools open): a folder swapped for a link between the check and
//! the open makes the open fail, it cannot lead elsewhere. Only a regular file is read, at most
//! [`MAX_SHOWN`] bytes; a folder is read at most [`MAX_READ`] names far (one of millions is cut,
//! and says so). The places the sandbox hides (keys, credentials, `new`'s own folders,
//! `sandbox.deny_read`) and the kernel's folders (`/proc`, `/sys`, `/dev`) are neither listed nor
//! read; they are resolved at each request, so one made after the start is hidden too. A binary
//! file is named with its size, never shown as text.
//!
//! Not for: writing anything, or reaching outside WORKDIR (the read tools' extra roots are the
//! model's, not the page's).

use std::cmp::Ordering;
use std::ffi::OsStr;
use std::io;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use new_core::escape::escape_controls;
use new_core::fs::confine::{ConfineError, FileKind, Workdir};
use new_sys::os_sandbox::HIDDEN_IN_HOME;
use new_sys::platform::Dir;

/// The most of a file the page is sent (the rest is said to be cut).
pub const MAX_SHOWN: usize = 256 * 1024;
/// The most entries of one folder listed (folders first, then by name).
pub const MAX_ENTRIES: usize = 2_000;
/// The most names of one folder read: a folder of a million is read no further (the listing
/// says it was cut), so it neither hangs the page nor fills memory.
pub const MAX_READ: usize = 20_000;
/// A NUL in the first bytes makes a file binary (as `read_file` judges).
const BINARY_SNIFF: usize = 8_192;
/// The kernel's folders: the state of the machine and of `new` itself (`/proc/self/environ`),
/// never a file of the user's, even with WORKDIR `/`.
const KERNEL_FOLDERS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// WORKDIR for the page: where paths are confined, and what stays hidden.
#[derive(Debug, Clone)]
pub struct FilePanel {
    workdir: Option<Workdir>,
    /// Absolute places never listed nor read, as named (resolved at each request).
    hidden: Vec<PathBuf>,
}

/// The secret places of a session: those the sandbox hides under the home folder, `new`'s own
/// config and data folders (trust records, sign-in tokens), and `sandbox.deny_read`. DATADIR is
/// not one: its conversations are the user's own, shown in the page anyway.
pub fn secret_places(deny_read: &[PathBuf]) -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = dirs::home_dir()
        .iter()
        .flat_map(|h| HIDDEN_IN_HOME.iter().map(move |p| h.join(p)))
        .collect();
    places.extend(dirs::config_dir().map(|d| d.join("new")));
    places.extend(dirs::data_dir().map(|d| d.join("new")));
    places.extend(deny_read.iter().cloned());
    places.extend(KERNEL_FOLDERS.iter().map(PathBuf::from));
    places
}

/// `place` as it resolves now: its longest part that exists resolved (links followed), the rest
/// as named. A place not there yet resolves as it will once made.
fn resolved_now(place: &Path) -> Option<PathBuf> {
    let mut missing: Vec<&OsStr> = Vec::new();
    let mut at = place;
    loop {
        if let Ok(real) = at.canonicalize() {
            let mut out = real;
            out.extend(missing.iter().rev());
            return Some(out);
        }
        match at.components().next_back() {
            Some(Component::Normal(name)) => missing.push(name),
            _ => return None,
        }
        at = at.parent()?;
    }
}

/// One entry kept for the listing: its rank (folders first), name and kind.
type Entry = (u8, String, FileKind);

fn rank(kind: FileKind) -> u8 {
    match kind {
        FileKind::Dir => 0,
        FileKind::Symlink => 2,
        _ => 1,
    }
}

fn by_rank_and_name(a: &Entry, b: &Entry) -> Ordering {
    (a.0, &a.1).cmp(&(b.0, &b.1))
}

impl FilePanel {
    pub fn new(workdir: &Path, hidden: Vec<PathBuf>) -> FilePanel {
        FilePanel {
            workdir: Workdir::new(workdir).ok(),
            hidden,
        }
    }

    /// The hidden places, both spellings: as named, and as they resolve now (a home reached
    /// through a link; a place made since the start).
    fn hidden_now(&self) -> Vec<PathBuf> {
        let mut all = Vec::with_capacity(self.hidden.len() * 2);
        for place in &self.hidden {
            if let Some(real) = resolved_now(place)
                && real != *place
            {
                all.push(real);
            }
            all.push(place.clone());
        }
        all
    }

    /// What the page shows for `path` (relative to WORKDIR, `""` or `.` for WORKDIR): a folder's
    /// entries, or a file's text; Err: why it is refused, in words for the page.
    pub fn open(&self, path: &str) -> Result<Value, String> {
        let Some(workdir) = &self.workdir else {
            return Err("the working folder cannot be read".into());
        };
        let asked = if path.trim().is_empty() { "." } else { path };
        let resolved = workdir.resolve(asked).map_err(|e| match e {
            ConfineError::Outside(_) => {
                format!(
                    "`{}` is outside the working folder (through `..` or a link)",
                    escape_controls(asked)
                )
            }
            other => escape_controls(&other.to_string()),
        })?;
        let hidden = self.hidden_now();
        let is_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
        if is_hidden(&resolved) {
            return Err(format!(
                "`{}` is a secret place: the page does not show it",
                escape_controls(asked)
            ));
        }
        let shown = workdir.display(&resolved);
        let failed = |e: io::Error| format!("`{}`: {e}", escape_controls(&shown));
        // From WORKDIR's handle down, never through a link: what was checked is what is opened.
        let mut dir = Dir::open(workdir.root()).map_err(failed)?;
        let Ok(rel) = resolved.strip_prefix(workdir.root()) else {
            return Err(format!(
                "`{}` is outside the working folder",
                escape_controls(asked)
            ));
        };
        let mut names: Vec<&OsStr> = rel.iter().collect();
        let Some(last) = names.pop() else {
            return self.list(workdir, dir, &resolved, &shown, &is_hidden);
        };
        for name in names {
            dir = dir.dir(name).map_err(failed)?;
        }
        let stat = dir.stat(last).map_err(failed)?;
        match stat.kind {
            FileKind::Dir => {
                let inner = dir.dir(last).map_err(|e| {
                    format!(
                        "`{}` is no longer a folder (replaced since it was checked?): {e}",
                        escape_controls(&shown)
                    )
                })?;
                self.list(workdir, inner, &resolved, &shown, &is_hidden)
            }
            // The engine's confined reader: from WORKDIR's handle again, link-free, a regular
            // file only.
            _ => self.read(workdir, &resolved, &shown),
        }
    }

    fn list(
        &self,
        workdir: &Workdir,
        dir: Dir,
        at: &Path,
        shown: &str,
        is_hidden: &dyn Fn(&Path) -> bool,
    ) -> Result<Value, String> {
        let mut kept: Vec<Entry> = Vec::new();
        // Every visible entry is counted, kept or let go: `more` is what is not shown.
        let mut visible = 0usize;
        let mut read = 0usize;
        let mut cut = false;
        dir.for_each_entry(|name, kind| {
            if read == MAX_READ {
                cut = true;
                return ControlFlow::Break(());
            }
            read += 1;
            if is_hidden(&at.join(name)) {
                return ControlFlow::Continue(());
            }
            let kind = match kind {
                FileKind::Unknown => dir.stat(name).map_or(FileKind::Unknown, |s| s.kind),
                k => k,
            };
            visible += 1;
            kept.push((rank(kind), name.to_string_lossy().into_owned(), kind));
            // Only the first MAX_ENTRIES in order are shown: the rest is let go as it comes.
            if kept.len() >= 2 * MAX_ENTRIES {
                kept.sort_by(by_rank_and_name);
                kept.truncate(MAX_ENTRIES);
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| format!("listing `{}`: {e}", escape_controls(shown)))?;
        kept.sort_by(by_rank_and_name);
        let more = visible.saturating_sub(MAX_ENTRIES);
        kept.truncate(MAX_ENTRIES);
        let entries: Vec<Value> = kept
            .into_iter()
            .map(|(_, name, kind)| {
                let rel = if shown == "." {
                    name.clone()
                } else {
                    format!("{shown}/{name}")
                };
                let kind = match kind {
                    // A link is listed as one; where it leads decides whether it opens.
                    FileKind::Symlink => {
                        let inside = workdir
                            .resolve(&rel)
                            .is_ok_and(|target| !is_hidden(&target));
                        if inside { "link" } else { "link-out" }
                    }
                    FileKind::Dir => "dir",
                    _ => "file",
                };
                let size = dir.stat(OsStr::new(&name)).map_or(0, |s| s.size);
                json!({
                    "name": name,
                    "shown": escape_controls(&name),
                    "path": rel,
                    "kind": kind,
                    "size": size,
                })
            })
            .collect();
        Ok(json!({
            "kind": "dir",
            "path": shown,
            "entries": entries,
            "more": more,
            "cut": cut,
            "read": read,
        }))
    }

    /// The file at `path` (resolved inside WORKDIR) opened by the engine's confined reader
    /// ([`Workdir::open_read`]: each folder and the file without following a link, without
    /// blocking, a regular file only); at most [`MAX_SHOWN`] bytes of it.
    fn read(&self, workdir: &Workdir, path: &Path, shown: &str) -> Result<Value, String> {
        let shown_safe = escape_controls(shown);
        let opened = workdir
            .open_read(path, &shown_safe)
            .map_err(|e| format!("`{shown_safe}` is refused: {e}"))?;
        let (file, size) = (opened.file, opened.len);
        let mut bytes = Vec::with_capacity(
            usize::try_from(size)
                .unwrap_or(MAX_SHOWN)
                .min(MAX_SHOWN + 1),
        );
        file.take(MAX_SHOWN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("reading `{shown_safe}`: {e}"))?;
        let truncated = bytes.len() > MAX_SHOWN;
        bytes.truncate(MAX_SHOWN);
        if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
            return Ok(json!({"kind": "binary", "path": shown, "size": size}));
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        Ok(json!({
            "kind": "file",
            "path": shown,
            "size": size,
            "truncated": truncated,
            "text": text,
        }))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_out_dotdot_secrets_and_binaries_are_refused_or_named() {
        let top = tempfile::tempdir().unwrap();
        let work = top.path().join("work");
        fs::create_dir_all(work.join("src")).unwrap();
        fs::create_dir_all(work.join("keys")).unwrap();
        fs::write(work.join("src/a.rs"), "fn main() {}\n").unwrap();
        fs::write(work.join("keys/id"), "PRIVATE\n").unwrap();
        fs::write(work.join("blob.bin"), b"\x7fELF\0\0\x01").unwrap();
        fs::write(top.path().join("outside.txt"), "SECRET\n").unwrap();
        symlink(top.path().join("outside.txt"), work.join("out.txt")).unwrap();
        symlink(work.join("src/a.rs"), work.join("in.rs")).unwrap();
        let panel = FilePanel::new(&work, vec![work.join("keys")]);
        let root = panel.open("").unwrap();
        let names: Vec<(&str, &str)> = root["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("src", "dir"),
                ("blob.bin", "file"),
                ("in.rs", "link"),
                ("out.txt", "link-out")
            ]
        );
        assert_eq!(panel.open("src/a.rs").unwrap()["text"], "fn main() {}\n");
        assert_eq!(panel.open("in.rs").unwrap()["text"], "fn main() {}\n");
        let out = panel.open("out.txt").unwrap_err();
        assert!(out.contains("outside the working folder"), "{out}");
        let up = panel.open("../outside.txt").unwrap_err();
        assert!(up.contains("outside the working folder"), "{up}");
        let up = panel.open("src/../../outside.txt").unwrap_err();
        assert!(up.contains("outside the working folder"), "{up}");
        assert!(panel.open("keys/id").unwrap_err().contains("secret place"));
        assert!(panel.open("keys").unwrap_err().contains("secret place"));
        let blob = panel.open("blob.bin").unwrap();
        assert_eq!(blob["kind"], "binary");
        assert!(blob.get("text").is_none());
    }
}
