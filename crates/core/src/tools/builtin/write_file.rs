//! `write_file`: creates or replaces a whole file atomically (temporary file, then rename).

use serde_json::{Value, json};

use super::change::FileChange;
use crate::fs::confine::Workdir;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, ready};

pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create or replace a whole file (and missing parent folders)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filepath": {"type": "string"},
                "content": {"type": "string"}
            },
            "required": ["filepath", "content"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    fn subject(&self, args: &Value) -> Option<String> {
        args::subject(args, "filepath")
    }

    fn preview(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        self.change(args, &ctx.workdir).ok().map(|c| c.diff())
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        ready(self.write(args, &ctx.workdir))
    }
}

impl WriteFile {
    fn change(&self, args: &Value, workdir: &Workdir) -> Result<FileChange, ToolError> {
        let filepath = args::string(args, "filepath")?;
        let content = args::string(args, "content")?;
        FileChange::load(workdir, filepath, content.to_string())
    }

    pub fn write(&self, args: &Value, workdir: &Workdir) -> Result<ToolOutput, ToolError> {
        self.change(args, workdir)?.apply()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    #[cfg(not(windows))]
    use std::fs::Permissions;
    use std::path::Path;

    fn run(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        WriteFile.write(&args, &Workdir::new(dir).unwrap())
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
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
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
        assert_eq!(fs::read_dir(dir.path().join("a/b")).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn keeps_permissions_and_refuses_folders_and_escapes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("run.sh");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o755)).unwrap();
        run(dir.path(), json!({"filepath": "run.sh", "content": "new"})).unwrap();
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
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
