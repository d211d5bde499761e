//! Walking the working folder as ripgrep does: `.gitignore`, `.ignore` and git's excludes are
//! honoured (inside a git repository or not), `.git` itself is skipped, symlinks are not followed,
//! and the folders are read on every core. And the name filter shared by `glob` and `grep`.
//!
//! The walk visits files in no particular order: the tools sort what they found, which is only
//! the matches.

use std::path::Path;
use std::sync::Mutex;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkState};

use crate::tools::{Cancel, ToolError};
use std::thread;

/// Walks every file under `root` on as many threads as ripgrep uses. `worker` is called once per
/// thread and makes that thread's visitor; a visitor returning false ends the whole walk, and so
/// does `cancel`.
pub fn files<'s, V>(root: &Path, cancel: &'s Cancel, mut worker: impl FnMut() -> V)
where
    V: FnMut(&DirEntry) -> bool + Send + 's,
{
    let threads = thread::available_parallelism().map_or(1, |n| n.get().min(12));
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .threads(threads)
        .build_parallel()
        .run(|| {
            let mut visit = worker();
            Box::new(move |entry| {
                if cancel.is_set() {
                    return WalkState::Quit;
                }
                match entry {
                    Ok(e) if e.file_type().is_some_and(|t| t.is_file()) => {
                        if visit(&e) {
                            WalkState::Continue
                        } else {
                            WalkState::Quit
                        }
                    }
                    _ => WalkState::Continue,
                }
            })
        });
}

/// What one walking thread found, added to the shared list when the thread ends (one lock per
/// thread, not per find).
pub struct Found<'a, T> {
    pub items: Vec<T>,
    all: &'a Mutex<Vec<T>>,
}

impl<'a, T> Found<'a, T> {
    pub fn new(all: &'a Mutex<Vec<T>>) -> Self {
        Found {
            items: Vec::new(),
            all,
        }
    }
}

impl<T> Drop for Found<'_, T> {
    fn drop(&mut self) {
        let mut all = self.all.lock().unwrap_or_else(|e| e.into_inner());
        all.append(&mut self.items);
    }
}

/// A file-name pattern. Without a `/` it matches the file name anywhere (`*.rs`); with one, the
/// path relative to the search root (`src/**/*.rs`). `*` stays within a folder, `**` crosses them.
pub struct NameFilter {
    matcher: GlobMatcher,
    by_path: bool,
}

impl NameFilter {
    pub fn new(pattern: &str) -> Result<Self, ToolError> {
        let pattern = pattern.trim().trim_start_matches("./");
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::Arguments(format!("bad glob pattern `{pattern}`: {e}")))?
            .compile_matcher();
        Ok(NameFilter {
            matcher,
            by_path: pattern.contains('/'),
        })
    }

    /// Whether a file the walk of `root` found matches: by its name alone when the pattern has
    /// no `/`, without working out its path from the root.
    pub fn matches_entry(&self, root: &Path, entry: &DirEntry) -> bool {
        if self.by_path {
            entry
                .path()
                .strip_prefix(root)
                .is_ok_and(|rel| self.matcher.is_match(rel))
        } else {
            self.matcher.is_match(Path::new(entry.file_name()))
        }
    }
}
