//! `write_file`: creates or replaces a whole file atomically (temporary file, then rename).

use std::collections::HashMap;
use std::io::Write;

use serde_json::{Value, json};

use super::plural;
use crate::tools::{Sandbox, Tool, ToolError, ToolOutput, args};

pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn description(&self) -> &'static str {
        "Write a whole file in the working folder, creating it and its parent folders if needed, or \
         replacing its entire content. Reports what changed."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filepath": {"type": "string", "description": "Path of the file, relative to the working folder"},
                "content": {"type": "string", "description": "The complete new content of the file"}
            },
            "required": ["filepath", "content"]
        })
    }

    fn run(&self, args: &Value, sandbox: &Sandbox) -> Result<ToolOutput, ToolError> {
        let filepath = args::string(args, "filepath")?;
        let content = args::string(args, "content")?;
        let path = sandbox.resolve(filepath)?;
        let shown = sandbox.display(&path);
        if path == sandbox.root() || path.is_dir() {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a folder, not a file"
            )));
        }
        let old = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ToolError::io("reading", &shown, e)),
        };
        if old.as_deref() == Some(content.as_bytes()) {
            return Ok(ToolOutput {
                content: format!("`{shown}` already has exactly this content; nothing changed."),
                summary: format!("{shown}: unchanged"),
            });
        }
        let parent = path
            .parent()
            .expect("a path inside the sandbox has a parent");
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolError::io("creating folders for", &shown, e))?;
        write_atomically(&path, content.as_bytes())
            .map_err(|e| ToolError::io("writing", &shown, e))?;

        let lines = content.lines().count();
        let (content, summary) = match old {
            None => (
                format!(
                    "Created `{shown}` ({}, {}).",
                    plural(lines, "line"),
                    plural(content.len(), "byte")
                ),
                format!("{shown}: created, {}", plural(lines, "line")),
            ),
            Some(old) => {
                let old = String::from_utf8_lossy(&old);
                let (added, removed) = line_changes(&old, content);
                (
                    format!(
                        "Replaced `{shown}`: {} → {}, +{added} −{removed}.",
                        plural(old.lines().count(), "line"),
                        plural(lines, "line"),
                    ),
                    format!("{shown}: +{added} −{removed}"),
                )
            }
        };
        Ok(ToolOutput { content, summary })
    }
}

/// Writes through a temporary file in the same folder and renames it over the target, so a reader
/// never sees half a file. An existing file keeps its permissions.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("has a parent");
    let name = path.file_name().expect("has a name").to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", crate::session::new_id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Lines added and removed, counted as the multiset difference of the two versions' lines.
fn line_changes(old: &str, new: &str) -> (usize, usize) {
    let mut counts: HashMap<&str, isize> = HashMap::new();
    for line in old.lines() {
        *counts.entry(line).or_default() += 1;
    }
    for line in new.lines() {
        *counts.entry(line).or_default() -= 1;
    }
    let removed = counts.values().filter(|&&c| c > 0).sum::<isize>() as usize;
    let added = counts
        .values()
        .filter(|&&c| c < 0)
        .map(|c| -c)
        .sum::<isize>() as usize;
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &std::path::Path, args: Value) -> Result<ToolOutput, ToolError> {
        WriteFile.run(&args, &Sandbox::new(dir).unwrap())
    }

    #[test]
    fn creates_with_parents_then_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            dir.path(),
            json!({"filepath": "a/b/c.txt", "content": "one\ntwo\n"}),
        )
        .unwrap();
        assert_eq!(out.content, "Created `a/b/c.txt` (2 lines, 8 bytes).");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "one\ntwo\n"
        );
        let out = run(
            dir.path(),
            json!({"filepath": "a/b/c.txt", "content": "one\nthree\nfour\n"}),
        )
        .unwrap();
        assert_eq!(
            out.content,
            "Replaced `a/b/c.txt`: 2 lines → 3 lines, +2 −1."
        );
        let out = run(
            dir.path(),
            json!({"filepath": "a/b/c.txt", "content": "one\nthree\nfour\n"}),
        )
        .unwrap();
        assert!(out.content.contains("nothing changed"));
        // No temporary files are left behind.
        assert_eq!(
            std::fs::read_dir(dir.path().join("a/b")).unwrap().count(),
            1
        );
    }

    #[test]
    fn keeps_permissions_and_refuses_folders_and_escapes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("run.sh");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        run(dir.path(), json!({"filepath": "run.sh", "content": "new"})).unwrap();
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert!(run(dir.path(), json!({"filepath": ".", "content": "x"})).is_err());
        let err = run(
            dir.path(),
            json!({"filepath": "../evil.txt", "content": "x"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("outside the working folder"));
        assert!(!dir.path().parent().unwrap().join("evil.txt").exists());
        let err = run(dir.path(), json!({"filepath": "x"})).unwrap_err();
        assert!(err.to_string().contains("`content` is required"));
    }
}
