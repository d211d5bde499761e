//! `edit_file`: exact text replacement in one file, refused when the text is missing or ambiguous.

use serde_json::{Value, json};

use super::change::FileChange;
use super::plural;
use crate::fs::confine::Workdir;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, ready};

pub struct EditFile;

impl Tool for EditFile {
    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace `old_string` (exact, whitespace included: read the file first) by `new_string`; \
         it must occur once unless `replace_all` (add surrounding lines to make it unique)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filepath": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"}
            },
            "required": ["filepath", "old_string", "new_string"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    fn subject(&self, args: &Value) -> Option<String> {
        args::subject(args, "filepath")
    }

    fn preview(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        self.change(args, &ctx.workdir).ok().map(|(c, _)| c.diff())
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        ready(self.edit(args, &ctx.workdir))
    }
}

impl EditFile {
    /// The change the call would make, and how many occurrences it replaces.
    fn change(&self, args: &Value, workdir: &Workdir) -> Result<(FileChange, usize), ToolError> {
        let filepath = args::string(args, "filepath")?;
        let old_string = args::string(args, "old_string")?;
        let new_string = args::string(args, "new_string")?;
        let replace_all = args::opt_bool(args, "replace_all")?.unwrap_or(false);
        if old_string.is_empty() {
            return Err(ToolError::Arguments(
                "`old_string` is empty; to write a whole file use write_file".into(),
            ));
        }
        if old_string == new_string {
            return Err(ToolError::Arguments(
                "`old_string` and `new_string` are the same: nothing to change".into(),
            ));
        }
        let mut change = FileChange::load(workdir, filepath, String::new())?;
        let shown = change.shown.clone();
        let Some(text) = change.old.clone() else {
            return Err(ToolError::Failed(format!(
                "`{shown}` does not exist; use write_file to create it"
            )));
        };
        // A file with Windows line ends still matches text sent with `\n`.
        let (old, new) = if !text.contains(old_string) && text.contains("\r\n") {
            (
                old_string.replace('\n', "\r\n"),
                new_string.replace('\n', "\r\n"),
            )
        } else {
            (old_string.to_string(), new_string.to_string())
        };
        let count = text.matches(old.as_str()).count();
        match count {
            0 => {
                return Err(ToolError::Failed(format!(
                    "`old_string` was not found in `{shown}`. Read the file again and copy the text \
                     exactly, whitespace and line breaks included"
                )));
            }
            n if n > 1 && !replace_all => {
                return Err(ToolError::Failed(format!(
                    "`old_string` occurs {n} times in `{shown}`; include more surrounding lines to \
                     make it unique, or set replace_all to true"
                )));
            }
            _ => {}
        }
        change.new = if replace_all {
            text.replace(&old, &new)
        } else {
            text.replacen(&old, &new, 1)
        };
        Ok((change, count))
    }

    pub fn edit(&self, args: &Value, workdir: &Workdir) -> Result<ToolOutput, ToolError> {
        let (change, count) = self.change(args, workdir)?;
        let shown = change.shown.clone();
        let mut out = change.apply()?;
        out.content = format!(
            "Edited `{shown}`: replaced {}. {}",
            plural(count, "occurrence"),
            out.content.split_once(": ").map_or("", |(_, rest)| rest)
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn run(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        EditFile.edit(&args, &Workdir::new(dir).unwrap())
    }

    #[test]
    fn replaces_once_or_all_and_refuses_ambiguity() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        fs::write(&f, "one\ntwo\ntwo\n").unwrap();
        let err = run(
            dir.path(),
            json!({"filepath":"a.txt","old_string":"two","new_string":"2"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("occurs 2 times"), "{err}");
        let err = run(
            dir.path(),
            json!({"filepath":"a.txt","old_string":"three","new_string":"3"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("was not found"), "{err}");
        let out = run(
            dir.path(),
            json!({"filepath":"a.txt","old_string":"one\n","new_string":"1\n"}),
        )
        .unwrap();
        assert_eq!(
            out.content,
            "Edited `a.txt`: replaced 1 occurrence. 3 lines → 3 lines, +1 −1."
        );
        assert!(out.diff.unwrap().contains("-one\n+1\n"));
        let out = run(
            dir.path(),
            json!({"filepath":"a.txt","old_string":"two","new_string":"2","replace_all":true}),
        )
        .unwrap();
        assert!(
            out.content
                .starts_with("Edited `a.txt`: replaced 2 occurrences."),
            "{}",
            out.content
        );
        assert_eq!(fs::read_to_string(&f).unwrap(), "1\n2\n2\n");
    }

    #[test]
    fn bad_arguments_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "x").unwrap();
        let err = run(
            dir.path(),
            json!({"filepath":"nope.txt","old_string":"a","new_string":"b"}),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("does not exist; use write_file"),
            "{err}"
        );
        let err = run(
            dir.path(),
            json!({"filepath":"a.txt","old_string":"","new_string":"b"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("`old_string` is empty"), "{err}");
        let err = run(
            dir.path(),
            json!({"filepath":"a.txt","old_string":"x","new_string":"x"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("the same"), "{err}");
        let err = run(
            dir.path(),
            json!({"filepath":"../a.txt","old_string":"x","new_string":"y"}),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("outside the working folder"),
            "{err}"
        );
    }

    #[test]
    fn windows_line_ends_still_match() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("w.txt"), "a\r\nb\r\n").unwrap();
        run(
            dir.path(),
            json!({"filepath":"w.txt","old_string":"a\nb","new_string":"A\nB"}),
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("w.txt")).unwrap(),
            "A\r\nB\r\n"
        );
    }
}
