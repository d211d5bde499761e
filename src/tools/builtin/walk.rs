//! Walking the working folder as ripgrep does: `.gitignore`, `.ignore` and git's excludes are
//! honoured (inside a git repository or not), `.git` itself is skipped, symlinks are not followed.
//! And the name filter shared by `glob` and `grep`.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use crate::tools::{Cancel, ToolError};

/// Every file under `root`, in a stable order (sorted by path); the walk ends early once `cancel`
/// is set.
pub fn files<'a>(root: &Path, cancel: &'a Cancel) -> impl Iterator<Item = PathBuf> + 'a {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .take_while(move |_| !cancel.is_set())
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
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

    /// `relative` is the path from the search root.
    pub fn matches(&self, relative: &Path) -> bool {
        if self.by_path {
            self.matcher.is_match(relative)
        } else {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(Path::new(name)))
        }
    }
}
