//! `grep`: a regular expression over the working folder, with ripgrep's own crates: .gitignore-aware,
//! binary files skipped, results as `path:line:text` (context lines as `path-line-text`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde_json::{Value, json};

use super::plural;
use super::walk::{Found, NameFilter, files};
use crate::fs::confine::{FolderHandle, Workdir};
use crate::tools::{
    Cancel, Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, blocking,
};
use std::io;

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
        "Search file contents by regex (Rust syntax), skipping binary and .gitignored files. \
         `path`: folder or file; `glob`: file filter (`*.rs`); \
         `context`: lines around each match (at most 10)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"},
                "ignore_case": {"type": "boolean"},
                "context": {"type": "integer"}
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
        let (args, workdir) = (args.clone(), ctx.workdir.clone());
        blocking(move |cancel| Grep.search(&args, &workdir, cancel))
    }
}

/// The lines found in one file.
struct FileLines {
    path: PathBuf,
    lines: Vec<String>,
    matches: usize,
}

/// Collects the lines of one file. The matching lines of the whole search are counted in `taken`,
/// shared by every thread: a line is kept only if it gets one of the first [`MAX_MATCHES`] places,
/// so a capped search holds exactly that many.
struct Collector<'a> {
    shown: &'a str,
    lines: Vec<String>,
    matches: usize,
    taken: &'a AtomicUsize,
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
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let place = self
            .taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_MATCHES).then_some(n + 1)
            });
        if place.is_err() {
            return Ok(false);
        }
        self.matches += 1;
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

/// What one thread needs to search files: its own searcher and folder handle.
struct FileSearch<'a> {
    workdir: &'a Workdir,
    matcher: RegexMatcher,
    searcher: Searcher,
    folder: FolderHandle,
    taken: &'a AtomicUsize,
}

impl FileSearch<'_> {
    /// The lines of `path` if it has a match. An unreadable file is skipped, as ripgrep does.
    fn search(&mut self, path: &Path) -> Option<FileLines> {
        if self.taken.load(Ordering::Relaxed) >= MAX_MATCHES {
            return None;
        }
        let shown = self.workdir.display(path);
        let mut sink = Collector {
            shown: &shown,
            lines: Vec::new(),
            matches: 0,
            taken: self.taken,
        };
        // Opened through the workdir: a file swapped for a link since the walk is not followed.
        let searched = self
            .workdir
            .open_read_in(path, &shown, &mut self.folder)
            .and_then(|f| self.searcher.search_file(&self.matcher, &f.file, &mut sink));
        if searched.is_err() {
            // The places its lines took go back, for other files' lines.
            self.taken.fetch_sub(sink.matches, Ordering::Relaxed);
            return None;
        }
        (sink.matches > 0).then(|| FileLines {
            path: path.to_path_buf(),
            lines: sink.lines,
            matches: sink.matches,
        })
    }
}

impl Grep {
    pub fn search(
        &self,
        args: &Value,
        workdir: &Workdir,
        cancel: &Cancel,
    ) -> Result<ToolOutput, ToolError> {
        let pattern = args::string(args, "pattern")?;
        let (workdir, root) =
            workdir.resolve_read(args::opt_string(args, "path")?.unwrap_or("."))?;
        let workdir = &workdir;
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
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        let shown_root = workdir.display(&root);
        use crate::fs::confine::FileKind;
        let kind = workdir
            .kind(&root)
            .map_err(|e| ToolError::io("searching", &shown_root, e))?;
        let taken = &AtomicUsize::new(0);
        let new_search = || FileSearch {
            workdir,
            matcher: matcher.clone(),
            searcher: searcher.clone(),
            folder: FolderHandle::default(),
            taken,
        };
        let mut found: Vec<FileLines> = match kind {
            Some(FileKind::File) => new_search().search(&root).into_iter().collect(),
            Some(FileKind::Dir) => {
                let all = Mutex::new(Vec::new());
                files(&root, cancel, || {
                    let mut search = new_search();
                    let mut found = Found::new(&all);
                    let filter = filter.as_ref();
                    let root = root.as_path();
                    move |entry| {
                        if filter.is_none_or(|f| f.matches_entry(root, entry))
                            && let Some(lines) = search.search(entry.path())
                        {
                            found.items.push(lines);
                        }
                        taken.load(Ordering::Relaxed) < MAX_MATCHES
                    }
                });
                all.into_inner().unwrap_or_else(|e| e.into_inner())
            }
            None => return Err(ToolError::Failed(format!("`{shown_root}` does not exist"))),
            Some(_) => {
                return Err(ToolError::Failed(format!(
                    "`{shown_root}` is not a regular file or folder; grep searches only those"
                )));
            }
        };
        cancel.check()?;
        found.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let matches: usize = found.iter().map(|f| f.matches).sum();
        let files_matched = found.len();
        let separator = if context > 0 { "\n--\n" } else { "\n" };
        let mut out = found
            .iter()
            .map(|f| f.lines.join("\n"))
            .collect::<Vec<_>>()
            .join(separator);
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
    use std::collections::BTreeSet;
    use std::fs;

    fn setup() -> (tempfile::TempDir, Workdir) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("src/a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n"),
            ("src/b.py", "def Alpha():\n    pass\n"),
            ("build/out.rs", "fn alpha_generated() {}\n"),
            ("data.bin", "fn alpha\0binary"),
        ] {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
        let s = Workdir::new(dir.path()).unwrap();
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
        fs::write(dir.path().join("many.txt"), text).unwrap();
        let out = Grep
            .search(
                &json!({"pattern": "hit"}),
                &Workdir::new(dir.path()).unwrap(),
                &Cancel::default(),
            )
            .unwrap();
        assert_eq!(out.content.lines().count(), MAX_MATCHES + 1);
        assert!(out.content.contains("[stopped at 200 matching lines"));
    }

    /// Files in nested folders, named so that ordering paths as strings would differ from
    /// ordering them by folder (`a-b.txt` sorts before `a/…` as a string, after it as a path).
    fn spread(dir: &Path, files: usize, hits_per_file: usize) {
        for i in 0..files {
            let rel = match i % 4 {
                0 => format!("a/f{i}.txt"),
                1 => format!("a-b/f{i}.txt"),
                2 => format!("a/deep/er/f{i}.txt"),
                _ => format!("f{i}.txt"),
            };
            let p = dir.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            let text: String = (0..hits_per_file * 2)
                .map(|l| {
                    if l % 2 == 0 {
                        format!("hit {i} {l}\n")
                    } else {
                        "miss\n".into()
                    }
                })
                .collect();
            fs::write(p, text).unwrap();
        }
    }

    /// Each `path:line:text` line of an answer, checked against the file it names.
    fn real_matches(dir: &Path, content: &str) -> Vec<(PathBuf, u64)> {
        content
            .lines()
            .filter(|l| !l.starts_with('['))
            .map(|l| {
                let mut parts = l.splitn(3, ':');
                let (path, number, text) = (
                    parts.next().unwrap(),
                    parts.next().unwrap().parse::<u64>().unwrap(),
                    parts.next().unwrap(),
                );
                let file = fs::read_to_string(dir.join(path)).unwrap();
                assert_eq!(file.lines().nth(number as usize - 1), Some(text), "{l}");
                assert!(text.starts_with("hit"), "{l}");
                (PathBuf::from(path), number)
            })
            .collect()
    }

    #[test]
    fn results_are_sorted_by_path_and_the_same_every_run() {
        let dir = tempfile::tempdir().unwrap();
        spread(dir.path(), 60, 3);
        let s = Workdir::new(dir.path()).unwrap();
        let first = Grep
            .search(&json!({"pattern": "hit"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(first.summary, "hit: 180 matches in 60 files");
        let found = real_matches(dir.path(), &first.content);
        assert_eq!(found.len(), 180);
        let mut sorted = found.clone();
        sorted.sort();
        assert_eq!(found, sorted);
        assert!(first.content.starts_with("a/deep/er/f10.txt:1:hit 10 0\n"));
        for _ in 0..5 {
            let again = Grep
                .search(&json!({"pattern": "hit"}), &s, &Cancel::default())
                .unwrap();
            assert_eq!(again.content, first.content);
            assert_eq!(again.summary, first.summary);
        }
        // With context, files are set apart by `--` in the same order.
        let out = Grep
            .search(
                &json!({"pattern": "hit 1[0-3] 0", "context": 1}),
                &s,
                &Cancel::default(),
            )
            .unwrap();
        assert_eq!(
            out.content,
            "a/deep/er/f10.txt:1:hit 10 0\na/deep/er/f10.txt-2-miss\n--\n\
             a/f12.txt:1:hit 12 0\na/f12.txt-2-miss\n--\n\
             a-b/f13.txt:1:hit 13 0\na-b/f13.txt-2-miss\n--\n\
             f11.txt:1:hit 11 0\nf11.txt-2-miss\n"
        );
    }

    #[test]
    fn a_capped_search_holds_exactly_the_cap_of_real_matches_sorted() {
        let dir = tempfile::tempdir().unwrap();
        spread(dir.path(), 80, 10);
        let s = Workdir::new(dir.path()).unwrap();
        for _ in 0..5 {
            let out = Grep
                .search(&json!({"pattern": "hit"}), &s, &Cancel::default())
                .unwrap();
            let lines: Vec<&str> = out.content.lines().collect();
            assert_eq!(lines.len(), MAX_MATCHES + 1);
            assert_eq!(
                lines[MAX_MATCHES],
                "[stopped at 200 matching lines; narrow the pattern, the path or the glob]"
            );
            let found = real_matches(dir.path(), &out.content);
            assert_eq!(found.len(), MAX_MATCHES);
            let mut sorted = found.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(found, sorted);
            let files: BTreeSet<_> = found.iter().map(|f| &f.0).collect();
            assert_eq!(
                out.summary,
                format!("hit: 200 matches in {} files", files.len())
            );
        }
    }

    #[test]
    fn a_cancelled_search_stops() {
        let dir = tempfile::tempdir().unwrap();
        spread(dir.path(), 20, 1);
        let cancel = Cancel::default();
        cancel.set();
        let err = Grep
            .search(
                &json!({"pattern": "hit"}),
                &Workdir::new(dir.path()).unwrap(),
                &cancel,
            )
            .unwrap_err();
        assert!(err.to_string().contains("stopped by the user"), "{err}");
    }
}
