//! `glob`: files whose names match a pattern, newest first, .gitignore-aware.

use std::sync::Mutex;

use serde_json::{Value, json};

use super::plural;
use super::walk::{Found, NameFilter, files};
use crate::fs::confine::mtime_ns;
use crate::fs::confine::{FolderHandle, Workdir};
use crate::tools::{
    Cancel, Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, blocking,
};

/// Most paths returned.
pub const MAX_RESULTS: usize = 200;

pub struct Glob;

impl Tool for Glob {
    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "Find files by name pattern (`*.rs` in any folder; with a slash, a path: `src/**/*.ts`), \
         newest first, skipping .gitignored ones. `path`: folder to search."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"}
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
        blocking(move |cancel| Glob.find(&args, &workdir, cancel))
    }
}

impl Glob {
    pub fn find(
        &self,
        args: &Value,
        workdir: &Workdir,
        cancel: &Cancel,
    ) -> Result<ToolOutput, ToolError> {
        let pattern = args::string(args, "pattern")?;
        let root = workdir.resolve(args::opt_string(args, "path")?.unwrap_or("."))?;
        let shown_root = workdir.display(&root);
        if !root.is_dir() {
            return Err(ToolError::Failed(format!("`{shown_root}` is not a folder")));
        }
        let filter = NameFilter::new(pattern)?;
        let all = Mutex::new(Vec::new());
        files(&root, cancel, || {
            let mut found = Found::new(&all);
            let mut folder = FolderHandle::default();
            let (filter, root) = (&filter, root.as_path());
            move |entry| {
                if filter.matches_entry(root, entry) {
                    let path = entry.path();
                    // Through the folder handles, as grep opens files: a link is not followed.
                    let modified = workdir
                        .stat_in(path, &mut folder)
                        .map_or(0, |stat| mtime_ns(&stat));
                    found.items.push((modified, workdir.display(path)));
                }
                true
            }
        });
        cancel.check()?;
        let mut found: Vec<(i128, String)> = all.into_inner().unwrap_or_else(|e| e.into_inner());
        // Newest first, then by name; only the first MAX_RESULTS are sorted.
        let order =
            |a: &(i128, String), b: &(i128, String)| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1));
        if found.len() > MAX_RESULTS {
            found.select_nth_unstable_by(MAX_RESULTS, order);
        }
        let shown = found.len().min(MAX_RESULTS);
        found[..shown].sort_unstable_by(order);
        let total = found.len();
        let mut out: String = found
            .iter()
            .take(MAX_RESULTS)
            .map(|(_, p)| format!("{p}\n"))
            .collect();
        if total == 0 {
            out = format!("No files match `{pattern}` in `{shown_root}`.\n");
        } else if total > MAX_RESULTS {
            out.push_str(&format!(
                "[{} more not shown; narrow the pattern or the path]\n",
                total - MAX_RESULTS
            ));
        }
        Ok(ToolOutput {
            content: out,
            summary: format!("{pattern}: {}", plural(total, "file")),
            diff: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::fs::File;
    use std::path::Path;
    use std::time::Duration;
    use std::time::SystemTime;

    fn tree(dir: &Path) {
        for (path, text) in [
            ("src/main.rs", "fn main() {}"),
            ("src/util/mod.rs", ""),
            ("README.md", "# hi"),
            ("target/debug/build.rs", ""),
            ("notes.rs.bak", ""),
            (".git/config", ""),
        ] {
            let p = dir.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    }

    fn names(out: &ToolOutput) -> Vec<&str> {
        let mut v: Vec<&str> = out.content.lines().collect();
        v.sort();
        v
    }

    #[test]
    fn matches_names_anywhere_or_paths_and_skips_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let s = Workdir::new(dir.path()).unwrap();
        let out = Glob
            .find(&json!({"pattern": "*.rs"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(names(&out), ["src/main.rs", "src/util/mod.rs"]);
        assert_eq!(out.summary, "*.rs: 2 files");
        let out = Glob
            .find(&json!({"pattern": "src/*.rs"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(names(&out), ["src/main.rs"]);
        let out = Glob
            .find(&json!({"pattern": "src/**/*.rs"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(names(&out), ["src/main.rs", "src/util/mod.rs"]);
        let out = Glob
            .find(
                &json!({"pattern": "*.rs", "path": "src/util"}),
                &s,
                &Cancel::default(),
            )
            .unwrap();
        assert_eq!(names(&out), ["src/util/mod.rs"]);
        let out = Glob
            .find(&json!({"pattern": "*.zig"}), &s, &Cancel::default())
            .unwrap();
        assert_eq!(out.content, "No files match `*.zig` in `.`.\n");
        assert!(
            Glob.find(
                &json!({"pattern": "a[", "path": "."}),
                &s,
                &Cancel::default()
            )
            .is_err()
        );
        assert!(
            Glob.find(
                &json!({"pattern": "*", "path": ".."}),
                &s,
                &Cancel::default()
            )
            .is_err()
        );
    }

    #[test]
    fn newest_first_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(MAX_RESULTS + 5) {
            fs::write(dir.path().join(format!("f{i:03}.txt")), "").unwrap();
        }
        let newest = dir.path().join("f000.txt");
        let later = SystemTime::now() + Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&newest)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let out = Glob
            .find(
                &json!({"pattern": "*.txt"}),
                &Workdir::new(dir.path()).unwrap(),
                &Cancel::default(),
            )
            .unwrap();
        assert!(out.content.starts_with("f000.txt\n"));
        assert!(
            out.content
                .ends_with("[5 more not shown; narrow the pattern or the path]\n")
        );
    }

    #[test]
    fn newest_first_then_by_name_the_same_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let base = SystemTime::now() - Duration::from_secs(10_000);
        let mut expected = Vec::new();
        for i in 0..(MAX_RESULTS + 100) {
            let rel = format!("d{}/sub{}/f{i}.txt", i % 7, i % 3);
            let p = dir.path().join(&rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "").unwrap();
            // Ten files share each time: the name breaks the tie.
            let modified = base + Duration::from_secs((i / 10) as u64);
            File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(modified)
                .unwrap();
            expected.push((modified, rel));
        }
        expected.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut want: String = expected
            .iter()
            .take(MAX_RESULTS)
            .map(|(_, p)| format!("{p}\n"))
            .collect();
        want.push_str("[100 more not shown; narrow the pattern or the path]\n");
        let s = Workdir::new(dir.path()).unwrap();
        for _ in 0..5 {
            let out = Glob
                .find(&json!({"pattern": "*.txt"}), &s, &Cancel::default())
                .unwrap();
            assert_eq!(out.content, want);
            assert_eq!(out.summary, "*.txt: 300 files");
        }
    }
}
