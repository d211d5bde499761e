//! `grep`: a regular expression over the working folder, with ripgrep's own crates: .gitignore-aware,
//! binary files skipped, results as `path:line:text` (context lines as `path-line-text`).

use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde_json::{Value, json};

use super::plural;
use super::walk::{NameFilter, files};
use crate::tools::{
    Cancel, Sandbox, Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, blocking,
};

/// Most matching lines returned.
pub const MAX_MATCHES: usize = 200;
/// Longest line shown, in characters.
const MAX_LINE_CHARS: usize = 300;
/// Most context lines around a match.
const MAX_CONTEXT: usize = 10;

pub struct Grep;

impl Tool for Grep {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents with a regular expression (Rust regex syntax). Returns `path:line:text` \
         for each matching line. Files ignored by .gitignore and binary files are skipped. Narrow the \
         search with `path` (a folder or a file) and `glob` (e.g. `*.rs`)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for"},
                "path": {"type": "string", "description": "Folder or file to search, relative to the working folder (default: all of it)"},
                "glob": {"type": "string", "description": "Only files whose name matches, e.g. `*.py` or `src/**/*.ts`"},
                "ignore_case": {"type": "boolean", "description": "Case-insensitive search (default false)"},
                "context": {"type": "integer", "description": "Lines of context before and after each match (default 0, at most 10)"}
            },
            "required": ["pattern"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn subject(&self, args: &Value) -> Option<String> {
        Some(args::subject(args, "path").unwrap_or_else(|| ".".into()))
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        let (args, sandbox) = (args.clone(), ctx.sandbox.clone());
        blocking(move |cancel| Grep.search(&args, &sandbox, cancel))
    }
}

/// Collects the lines of one file.
struct Collector<'a> {
    shown: &'a str,
    lines: &'a mut Vec<String>,
    matches: &'a mut usize,
    file_matched: bool,
}

impl Collector<'_> {
    fn line(&self, sep: char, number: Option<u64>, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let mut shown: String = text.chars().take(MAX_LINE_CHARS).collect();
        if shown.len() < text.len() {
            shown.push_str(" […]");
        }
        format!("{}{sep}{}{sep}{shown}", self.shown, number.unwrap_or(0))
    }
}

impl Sink for Collector<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if *self.matches >= MAX_MATCHES {
            return Ok(false);
        }
        *self.matches += 1;
        self.file_matched = true;
        let line = self.line(':', m.line_number(), m.bytes());
        self.lines.push(line);
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let line = self.line('-', c.line_number(), c.bytes());
        self.lines.push(line);
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.lines.push("--".into());
        Ok(true)
    }
}

impl Grep {
    pub fn search(
        &self,
        args: &Value,
        sandbox: &Sandbox,
        cancel: &Cancel,
    ) -> Result<ToolOutput, ToolError> {
        let pattern = args::string(args, "pattern")?;
        let (sandbox, root) =
            sandbox.resolve_read(args::opt_string(args, "path")?.unwrap_or("."))?;
        let sandbox = &sandbox;
        let filter = args::opt_string(args, "glob")?
            .map(NameFilter::new)
            .transpose()?;
        let ignore_case = args::opt_bool(args, "ignore_case")?.unwrap_or(false);
        let context = args::opt_usize(args, "context")?
            .unwrap_or(0)
            .min(MAX_CONTEXT);
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(ignore_case)
            .line_terminator(Some(b'\n'))
            .build(pattern)
            .map_err(|e| ToolError::Arguments(format!("bad regular expression: {e}")))?;
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        let shown_root = sandbox.display(&root);
        use rustix::fs::FileType;
        let kind = sandbox
            .kind(&root)
            .map_err(|e| ToolError::io("searching", &shown_root, e))?;
        let candidates: Box<dyn Iterator<Item = std::path::PathBuf>> = match kind {
            Some(FileType::RegularFile) => Box::new(std::iter::once(root.clone())),
            Some(FileType::Directory) => Box::new(files(&root, cancel)),
            None => return Err(ToolError::Failed(format!("`{shown_root}` does not exist"))),
            Some(_) => {
                return Err(ToolError::Failed(format!(
                    "`{shown_root}` is not a regular file or folder; grep searches only those"
                )));
            }
        };

        let mut lines = Vec::new();
        let mut matches = 0usize;
        let mut files_matched = 0usize;
        for path in candidates {
            if matches >= MAX_MATCHES {
                break;
            }
            cancel.check()?;
            let relative = path.strip_prefix(&root).unwrap_or(Path::new(""));
            if let Some(f) = &filter
                && root.is_dir()
                && !f.matches(relative)
            {
                continue;
            }
            let shown = sandbox.display(&path);
            let before = lines.len();
            let mut sink = Collector {
                shown: &shown,
                lines: &mut lines,
                matches: &mut matches,
                file_matched: false,
            };
            // An unreadable file is skipped, as ripgrep does.
            // Opened through the sandbox: a file swapped for a link since the walk is not followed.
            let searched = sandbox
                .open_read(&path, &shown)
                .and_then(|f| searcher.search_file(&matcher, &f.file, &mut sink));
            if searched.is_err() {
                lines.truncate(before);
                continue;
            }
            if sink.file_matched {
                files_matched += 1;
                if context > 0 {
                    lines.push("--".into());
                }
            } else {
                lines.truncate(before);
            }
        }
        cancel.check()?;
        if lines.last().is_some_and(|l| l == "--") {
            lines.pop();
        }
        let mut out = lines.join("\n");
        if matches == 0 {
            out = format!("No matches for `{pattern}` in `{shown_root}`.");
        } else if matches >= MAX_MATCHES {
            out.push_str(&format!(
                "\n[stopped at {MAX_MATCHES} matching lines; narrow the pattern, the path or the glob]"
            ));
        }
        out.push('\n');
        Ok(ToolOutput {
            content: out,
            summary: format!(
                "{pattern}: {} {} in {}",
                matches,
                if matches == 1 { "match" } else { "matches" },
                plural(files_matched, "file")
            ),
            diff: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Sandbox) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("src/a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n"),
            ("src/b.py", "def Alpha():\n    pass\n"),
            ("build/out.rs", "fn alpha_generated() {}\n"),
            ("data.bin", "fn alpha\0binary"),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        std::fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
        let s = Sandbox::new(dir.path()).unwrap();
        (dir, s)
    }

    #[test]
    fn finds_lines_with_numbers_skipping_ignored_and_binary_files() {
        let (_d, s) = setup();
        let out = Grep
            .search(&json!({"pattern": "fn \\w+"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(
            out.content,
            "src/a.rs:1:fn alpha() {}\nsrc/a.rs:3:fn beta() {}\n"
        );
        assert_eq!(out.summary, "fn \\w+: 2 matches in 1 file");
        let out = Grep
            .search(
                &json!({"pattern": "alpha", "ignore_case": true, "glob": "*.py"}),
                &s,
                &Cancel::default(),
            )
            .unwrap();
        assert_eq!(out.content, "src/b.py:1:def Alpha():\n");
        let out = Grep
            .search(
                &json!({"pattern": "let", "context": 1, "path": "src/a.rs"}),
                &s,
                &Cancel::default(),
            )
            .unwrap();
        assert_eq!(
            out.content,
            "src/a.rs-1-fn alpha() {}\nsrc/a.rs:2:let x = 1;\nsrc/a.rs-3-fn beta() {}\n"
        );
        let out = Grep
            .search(&json!({"pattern": "nothing"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(out.content, "No matches for `nothing` in `.`.\n");
    }

    #[test]
    fn bad_patterns_and_paths_are_refused() {
        let (_d, s) = setup();
        let err = Grep
            .search(&json!({"pattern": "(unclosed"}), &s, &Cancel::default())
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid arguments: bad regular expression"),
            "{err}"
        );
        assert!(
            Grep.search(
                &json!({"pattern": "x", "path": "../"}),
                &s,
                &Cancel::default()
            )
            .is_err()
        );
        assert!(
            Grep.search(
                &json!({"pattern": "x", "path": "missing"}),
                &s,
                &Cancel::default()
            )
            .unwrap_err()
            .to_string()
            .contains("does not exist")
        );
    }

    #[test]
    fn many_matches_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..500).map(|i| format!("hit {i}\n")).collect();
        std::fs::write(dir.path().join("many.txt"), text).unwrap();
        let out = Grep
            .search(
                &json!({"pattern": "hit"}),
                &Sandbox::new(dir.path()).unwrap(),
                &Cancel::default(),
            )
            .unwrap();
        assert_eq!(out.content.lines().count(), MAX_MATCHES + 1);
        assert!(out.content.contains("[stopped at 200 matching lines"));
    }
}
