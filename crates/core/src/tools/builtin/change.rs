//! A change to one file, computed before it is made: `write_file` and `edit_file` build one, the
//! approval prompt shows its diff, and [`FileChange::apply`] writes it atomically.

use std::io::Read;
use std::path::PathBuf;

use super::plural;
use crate::fs::confine::FileKind;
use crate::fs::confine::Workdir;
use crate::tools::{ToolError, ToolOutput, diff};
use std::io::ErrorKind;

pub struct FileChange {
    workdir: Workdir,
    pub path: PathBuf,
    /// The path as the model and the user see it (relative to WORKDIR).
    pub shown: String,
    /// None when the file does not exist yet.
    pub old: Option<String>,
    pub new: String,
}

impl FileChange {
    /// The file at `filepath` (inside the workdir) as it is now, to be replaced by `new`.
    pub fn load(workdir: &Workdir, filepath: &str, new: String) -> Result<Self, ToolError> {
        let path = workdir.resolve(filepath)?;
        let shown = workdir.display(&path);
        if path == workdir.root() || workdir.kind(&path).ok().flatten() == Some(FileKind::Dir) {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a folder, not a file"
            )));
        }
        let old = match workdir.open_read(&path, &shown) {
            Ok(mut opened) => {
                let mut bytes = Vec::new();
                opened
                    .file
                    .read_to_end(&mut bytes)
                    .map_err(|e| ToolError::io("reading", &shown, e))?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(ToolError::io("reading", &shown, e)),
        };
        Ok(FileChange {
            workdir: workdir.clone(),
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
        self.workdir
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
