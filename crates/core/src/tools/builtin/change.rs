//! A change to one file, computed before it is made: `write_file` and `edit_file` build one, the
//! approval prompt shows its diff, and [`FileChange::apply`] writes it atomically.

use std::io::{Read, Write};
use std::path::PathBuf;

use super::plural;
use crate::tools::{Sandbox, ToolError, ToolOutput, diff};

pub struct FileChange {
    sandbox: Sandbox,
    pub path: PathBuf,
    /// The path as the model and the user see it (relative to WORKDIR).
    pub shown: String,
    /// None when the file does not exist yet.
    pub old: Option<String>,
    pub new: String,
}

impl FileChange {
    /// The file at `filepath` (inside the sandbox) as it is now, to be replaced by `new`.
    pub fn load(sandbox: &Sandbox, filepath: &str, new: String) -> Result<Self, ToolError> {
        let path = sandbox.resolve(filepath)?;
        let shown = sandbox.display(&path);
        if path == sandbox.root()
            || sandbox.kind(&path).ok().flatten() == Some(crate::tools::sandbox::FileKind::Dir)
        {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a folder, not a file"
            )));
        }
        let old = match sandbox.open_read(&path, &shown) {
            Ok(mut opened) => {
                let mut bytes = Vec::new();
                opened
                    .file
                    .read_to_end(&mut bytes)
                    .map_err(|e| ToolError::io("reading", &shown, e))?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ToolError::io("reading", &shown, e)),
        };
        Ok(FileChange {
            sandbox: sandbox.clone(),
            path,
            shown,
            old,
            new,
        })
    }

    pub fn diff(&self) -> String {
        diff::unified(&self.shown, self.old.as_deref(), &self.new)
    }

    /// Writes the new content (creating parent folders) and reports what changed.
    pub fn apply(self) -> Result<ToolOutput, ToolError> {
        let shown = &self.shown;
        if self.old.as_deref() == Some(self.new.as_str()) {
            return Ok(ToolOutput {
                content: format!("`{shown}` already has exactly this content; nothing changed."),
                summary: format!("{shown}: unchanged"),
                diff: None,
            });
        }
        self.sandbox
            .write(&self.path, shown, self.new.as_bytes())
            .map_err(|e| ToolError::io("writing", shown, e))?;
        let diff = self.diff();
        let (added, removed) = diff::counts(&diff);
        let lines = self.new.lines().count();
        let (content, summary) = match &self.old {
            None => (
                format!(
                    "Created `{shown}` ({}, {}).",
                    plural(lines, "line"),
                    plural(self.new.len(), "byte")
                ),
                format!("{shown}: created, {}", plural(lines, "line")),
            ),
            Some(old) => (
                format!(
                    "Replaced `{shown}`: {} → {}, +{added} −{removed}.",
                    plural(old.lines().count(), "line"),
                    plural(lines, "line"),
                ),
                format!("{shown}: +{added} −{removed}"),
            ),
        };
        Ok(ToolOutput {
            content,
            summary,
            diff: Some(diff),
        })
    }
}

/// Writes through a temporary file in the same folder and renames it over the target, so a reader
/// never sees half a file. An existing file keeps its permissions.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("has a parent");
    let name = path.file_name().expect("has a name").to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", crate::vocab::new_id()));
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
