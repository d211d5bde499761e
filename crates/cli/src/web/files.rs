//! The page's file panel: WORKDIR shown read-only, under the file tools' rules. A path is
//! resolved by the engine's confinement ([`Workdir::resolve`]: `..` and links may not lead out),
//! a file is read by the project-file reader ([`ProjectFiles`]: opened without following a link,
//! regular files only, at most [`MAX_SHOWN`] bytes), and the places the sandbox hides (keys,
//! credentials, `new`'s own folders, `sandbox.deny_read`) are neither listed nor read.
//! A binary file is named with its size, never shown as text.
//!
//! Not for: writing anything, or reaching outside WORKDIR (the read tools' extra roots are the
//! model's, not the page's).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use new_core::fs::confine::{ConfineError, Workdir};
use new_core::fs::project_file::ProjectFiles;
use new_sys::os_sandbox::HIDDEN_IN_HOME;

/// The most of a file the page is sent (the rest is said to be cut).
pub const MAX_SHOWN: usize = 256 * 1024;
/// The most entries of one folder listed.
const MAX_ENTRIES: usize = 2_000;
/// A NUL in the first bytes makes a file binary (as `read_file` judges).
const BINARY_SNIFF: usize = 8_192;

/// WORKDIR for the page: where paths are confined, and what stays hidden.
#[derive(Debug, Clone)]
pub struct FilePanel {
    workdir: Option<Workdir>,
    files: ProjectFiles,
    /// Absolute places never listed nor read (resolved where they exist).
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
    places
}

impl FilePanel {
    pub fn new(workdir: &Path, hidden: Vec<PathBuf>) -> FilePanel {
        // Both spellings: as given, and resolved (a home reached through a link).
        let mut all = Vec::with_capacity(hidden.len() * 2);
        for place in hidden {
            if let Ok(real) = place.canonicalize()
                && real != place
            {
                all.push(real);
            }
            all.push(place);
        }
        FilePanel {
            workdir: Workdir::new(workdir).ok(),
            files: ProjectFiles::new(workdir),
            hidden: all,
        }
    }

    fn is_hidden(&self, path: &Path) -> bool {
        self.hidden.iter().any(|h| path.starts_with(h))
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
                format!("`{asked}` is outside the working folder (through `..` or a link)")
            }
            other => other.to_string(),
        })?;
        if self.is_hidden(&resolved) {
            return Err(format!(
                "`{asked}` is a secret place: the page does not show it"
            ));
        }
        let shown = workdir.display(&resolved);
        match fs::symlink_metadata(&resolved) {
            Ok(meta) if meta.is_dir() => self.list(workdir, &resolved, &shown),
            Ok(_) => self.read(&resolved, &shown),
            Err(e) => Err(format!("`{asked}`: {e}")),
        }
    }

    fn list(&self, workdir: &Workdir, dir: &Path, shown: &str) -> Result<Value, String> {
        let read = fs::read_dir(dir).map_err(|e| format!("listing `{shown}`: {e}"))?;
        let mut entries: Vec<(u8, String, Value)> = Vec::new();
        let mut more = 0usize;
        for entry in read.flatten() {
            let path = entry.path();
            if self.is_hidden(&path) {
                continue;
            }
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if shown == "." {
                name.clone()
            } else {
                format!("{shown}/{name}")
            };
            let (rank, kind) = if meta.file_type().is_symlink() {
                // A link is listed as one; where it leads decides whether it opens.
                let inside = workdir
                    .resolve(&rel)
                    .is_ok_and(|target| !self.is_hidden(&target));
                (2, if inside { "link" } else { "link-out" })
            } else if meta.is_dir() {
                (0, "dir")
            } else {
                (1, "file")
            };
            if entries.len() >= MAX_ENTRIES {
                more += 1;
                continue;
            }
            entries.push((
                rank,
                name.clone(),
                json!({"name": name, "path": rel, "kind": kind, "size": meta.len()}),
            ));
        }
        entries.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Ok(json!({
            "kind": "dir",
            "path": shown,
            "entries": entries.into_iter().map(|e| e.2).collect::<Vec<_>>(),
            "more": more,
        }))
    }

    fn read(&self, path: &Path, shown: &str) -> Result<Value, String> {
        let size = fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0);
        let read = self
            .files
            .read(path, MAX_SHOWN)?
            .ok_or_else(|| format!("`{shown}` is not there"))?;
        if read.bytes[..read.bytes.len().min(BINARY_SNIFF)].contains(&0) {
            return Ok(json!({"kind": "binary", "path": shown, "size": size}));
        }
        let truncated = read.truncated;
        Ok(json!({
            "kind": "file",
            "path": shown,
            "size": size,
            "truncated": truncated,
            "text": read.text(),
        }))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
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
