//! `read_file`: text with line numbers, in segments for large files.

use std::io::{BufRead, BufReader, Read};

use serde_json::{Value, json};

use super::plural;
use crate::fs::confine::FileKind;
use crate::fs::confine::Workdir;
use crate::tools::{
    Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, blocking, ready,
};
use std::io;
use std::io::Cursor;

/// Lines returned when the model gives no limit.
pub const DEFAULT_LIMIT: usize = 2000;
/// Longest line shown whole, in characters.
pub const MAX_LINE_CHARS: usize = 2000;
/// Most text returned by one call, in bytes; a segment ends early rather than exceed it.
pub const MAX_OUTPUT_BYTES: usize = 100 * 1024;
/// How much of the start of a file is checked for NUL bytes.
const BINARY_SNIFF: usize = 8192;

pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file, its lines numbered. A long file comes in parts; the footer says how to \
         read on. `offset`: first line (from 1); `limit`: lines (default 2000)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filepath": {"type": "string"},
                "offset": {"type": "integer"},
                "limit": {"type": "integer"}
            },
            "required": ["filepath"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn subject(&self, args: &Value) -> Option<String> {
        args::subject(args, "filepath")
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        if ctx.workdir.has_buffers() {
            // An editor is asked: its answer is waited for off the async thread.
            let (args, workdir) = (args.clone(), ctx.workdir.clone());
            return blocking(move |_| ReadFile.read(&args, &workdir));
        }
        ready(self.read(args, &ctx.workdir))
    }
}

impl ReadFile {
    pub fn read(&self, args: &Value, workdir: &Workdir) -> Result<ToolOutput, ToolError> {
        let filepath = args::string(args, "filepath")?;
        let offset = args::opt_usize(args, "offset")?.unwrap_or(1).max(1);
        let limit = args::opt_usize(args, "limit")?
            .unwrap_or(DEFAULT_LIMIT)
            .max(1);
        let (workdir, path) = workdir.resolve_read(filepath)?;
        let workdir = &workdir;
        let shown = workdir.display(&path);
        if workdir.kind(&path).ok().flatten() == Some(FileKind::Dir) {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a folder; use list_files to see what it holds"
            )));
        }
        let opened = workdir
            .open_read(&path, &shown)
            .map_err(|e| ToolError::io("reading", &shown, e))?;
        // A file the editor has open is read as the editor holds it (unsaved changes too).
        let (mut file, len): (Box<dyn Read>, u64) = match workdir.buffer_text(&path) {
            Some(text) => {
                let len = text.len() as u64;
                (Box::new(Cursor::new(text.into_bytes())), len)
            }
            None => (Box::new(opened.file), opened.len),
        };
        let mut head = vec![0u8; BINARY_SNIFF];
        let n =
            read_up_to(&mut file, &mut head).map_err(|e| ToolError::io("reading", &shown, e))?;
        head.truncate(n);
        if head.contains(&0) {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a binary file ({} bytes); read_file only reads text",
                len
            )));
        }
        if len == 0 {
            return Ok(ToolOutput {
                content: format!("`{shown}` is empty (0 bytes)."),
                summary: format!("{shown}: empty"),
                diff: None,
            });
        }

        let reader = BufReader::new(Cursor::new(head).chain(file));
        let mut out = String::new();
        let mut total = 0usize;
        let mut last_shown = 0usize;
        let mut cut_by_size = false;
        let mut long_lines = 0usize;
        for line in reader.split(b'\n') {
            let line = line.map_err(|e| ToolError::io("reading", &shown, e))?;
            total += 1;
            if total < offset || total >= offset + limit || cut_by_size {
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.strip_suffix('\r').unwrap_or(&text);
            let mut entry = format!("{total:>6}\t");
            if text.chars().count() > MAX_LINE_CHARS {
                long_lines += 1;
                entry.extend(text.chars().take(MAX_LINE_CHARS));
                entry.push_str(" […line cut]");
            } else {
                entry.push_str(text);
            }
            entry.push('\n');
            if out.len() + entry.len() > MAX_OUTPUT_BYTES && last_shown >= offset {
                cut_by_size = true;
                continue;
            }
            out.push_str(&entry);
            last_shown = total;
        }
        if offset > total {
            return Err(ToolError::Failed(format!(
                "`{shown}` has {}; offset {offset} is past its end",
                plural(total, "line")
            )));
        }
        let mut notes = Vec::new();
        if last_shown < total {
            notes.push(format!(
                "Showing lines {offset}-{last_shown} of {total}. To read more, call read_file with offset={}.",
                last_shown + 1
            ));
        }
        if long_lines > 0 {
            notes.push(format!(
                "{} longer than {MAX_LINE_CHARS} characters cut.",
                plural(long_lines, "line")
            ));
        }
        if !notes.is_empty() {
            out.push_str(&format!("\n[{}]", notes.join(" ")));
        }
        Ok(ToolOutput {
            content: out,
            summary: format!("{shown}: lines {offset}-{last_shown} of {total}"),
            diff: None,
        })
    }
}

fn read_up_to(file: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::confine::OpenBuffers;
    use std::fs;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    fn run(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        ReadFile.read(&args, &Workdir::new(dir).unwrap())
    }

    /// An editor that holds every file as "buffer of NAME" and remembers what it was asked.
    #[derive(Debug, Default)]
    struct Editor(Mutex<Vec<PathBuf>>);

    impl OpenBuffers for Editor {
        fn text(&self, path: &Path) -> Option<String> {
            self.0.lock().unwrap().push(path.to_path_buf());
            let name = path.file_name()?.to_string_lossy().to_string();
            (name != "closed.txt").then(|| format!("buffer of {name}\n"))
        }
    }

    #[test]
    fn an_editor_is_asked_only_for_regular_files_inside_workdir() {
        let top = tempfile::tempdir().unwrap();
        let work = top.path().join("work");
        fs::create_dir(&work).unwrap();
        fs::write(work.join("open.txt"), "on disk\n").unwrap();
        fs::write(work.join("closed.txt"), "closed on disk\n").unwrap();
        fs::write(top.path().join("outside.txt"), "outside\n").unwrap();
        let workdir = Workdir::new(&work).unwrap();
        let editor = Arc::new(Editor::default());
        workdir.set_buffers(editor.clone());
        let read = |path: &str| ReadFile.read(&json!({ "filepath": path }), &workdir);
        assert!(
            read("open.txt")
                .unwrap()
                .content
                .contains("buffer of open.txt")
        );
        // No text from the editor: the disk.
        assert!(
            read("closed.txt")
                .unwrap()
                .content
                .contains("closed on disk")
        );
        assert!(read("../outside.txt").is_err());
        assert!(read("missing.txt").is_err());
        #[cfg(unix)]
        {
            symlink(top.path().join("outside.txt"), work.join("link.txt")).unwrap();
            assert!(read("link.txt").is_err());
        }
        let root = work.canonicalize().unwrap();
        assert_eq!(
            *editor.0.lock().unwrap(),
            [root.join("open.txt"), root.join("closed.txt")],
            "never a path outside WORKDIR, a link out or a missing file"
        );
    }

    #[test]
    fn numbers_lines_and_pages() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        fs::write(dir.path().join("f.txt"), text).unwrap();
        let out = run(dir.path(), json!({"filepath": "f.txt"})).unwrap();
        assert!(out.content.starts_with("     1\tline 1\n     2\tline 2\n"));
        assert!(!out.content.contains("Showing"));
        let out = run(
            dir.path(),
            json!({"filepath": "f.txt", "offset": 4, "limit": "3"}),
        )
        .unwrap();
        assert_eq!(
            out.content,
            "     4\tline 4\n     5\tline 5\n     6\tline 6\n\n[Showing lines 4-6 of 10. To read more, call read_file with offset=7.]"
        );
        let err = run(dir.path(), json!({"filepath": "f.txt", "offset": 50})).unwrap_err();
        assert!(
            err.to_string()
                .contains("10 lines; offset 50 is past its end")
        );
    }

    #[test]
    fn large_files_come_in_segments_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let line = "x".repeat(1000);
        let text: String = (0..500).map(|_| format!("{line}\n")).collect();
        fs::write(dir.path().join("big.txt"), text).unwrap();
        let out = run(dir.path(), json!({"filepath": "big.txt"})).unwrap();
        assert!(out.content.len() <= MAX_OUTPUT_BYTES + 200);
        assert!(
            out.content
                .contains("of 500. To read more, call read_file with offset=")
        );
    }

    #[test]
    fn binary_folders_and_missing_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("b.bin"), [0u8, 1, 2, 3]).unwrap();
        fs::write(dir.path().join("e.txt"), "").unwrap();
        let err = run(dir.path(), json!({"filepath": "b.bin"})).unwrap_err();
        assert!(err.to_string().contains("binary file (4 bytes)"));
        let err = run(dir.path(), json!({"filepath": "."})).unwrap_err();
        assert!(err.to_string().contains("is a folder"));
        let err = run(dir.path(), json!({"filepath": "nope.txt"})).unwrap_err();
        assert!(err.to_string().contains("reading `nope.txt` failed"));
        let out = run(dir.path(), json!({"filepath": "e.txt"})).unwrap();
        assert!(out.content.contains("empty"));
        let err = run(dir.path(), json!({"filepath": "../x"})).unwrap_err();
        assert!(err.to_string().contains("outside the working folder"));
    }

    #[test]
    fn long_lines_are_cut_and_crlf_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("l.txt"),
            format!("{}\r\nshort\r\n", "y".repeat(3000)),
        )
        .unwrap();
        let out = run(dir.path(), json!({"filepath": "l.txt"})).unwrap();
        assert!(out.content.contains("[…line cut]"));
        assert!(out.content.contains("     2\tshort\n"));
        assert!(
            out.content
                .contains("1 line longer than 2000 characters cut.")
        );
    }
}
