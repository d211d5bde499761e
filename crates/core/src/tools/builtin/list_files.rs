//! `list_files`: one folder, or a whole tree with a structure summary first. Very large trees are
//! summarised per folder instead of dumped. Symbolic links are listed, never followed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::plural;
use crate::fs::confine::Workdir;
use crate::tools::{
    Cancel, Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args, blocking,
};
use std::fs;

/// Most entries listed one by one; past this a listing is summarised.
pub const MAX_ENTRIES: usize = 500;
/// Folders whose content a recursive listing counts but does not show.
const HEAVY_DIRS: &[&str] = &[".git", "node_modules", "target", "__pycache__", ".venv"];

pub struct ListFiles;

impl Tool for ListFiles {
    fn name(&self) -> &str {
        "list_files"
    }

    fn description(&self) -> &str {
        "List a folder (default: the working folder). `recursive`: the whole tree, after a summary \
         (per folder when very large)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "dirpath": {"type": "string"},
                "recursive": {"type": "boolean"}
            }
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn subject(&self, args: &Value) -> Option<String> {
        Some(args::subject(args, "dirpath").unwrap_or_else(|| ".".into()))
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        let (args, workdir) = (args.clone(), ctx.workdir.clone());
        blocking(move |cancel| ListFiles.list(&args, &workdir, cancel))
    }
}

impl ListFiles {
    pub fn list(
        &self,
        args: &Value,
        workdir: &Workdir,
        cancel: &Cancel,
    ) -> Result<ToolOutput, ToolError> {
        let dirpath = args::opt_string(args, "dirpath")?.unwrap_or(".");
        let recursive = args::opt_bool(args, "recursive")?.unwrap_or(false);
        let dir = workdir.resolve(dirpath)?;
        let shown = workdir.display(&dir);
        let meta = fs::metadata(&dir).map_err(|e| ToolError::io("listing", &shown, e))?;
        if !meta.is_dir() {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a file, not a folder; use read_file to read it"
            )));
        }
        if recursive {
            list_tree(&dir, &shown, cancel)
        } else {
            list_one(&dir, &shown)
        }
    }
}

struct Entry {
    name: String,
    kind: Kind,
    size: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Kind {
    Dir,
    File,
    Link,
}

fn read_entries(dir: &Path, shown: &str) -> Result<Vec<Entry>, ToolError> {
    let mut entries: Vec<Entry> = fs::read_dir(dir)
        .map_err(|e| ToolError::io("listing", shown, e))?
        .filter_map(|e| e.ok())
        .map(|e| {
            let meta = e.path().symlink_metadata().ok();
            let kind = match &meta {
                Some(m) if m.file_type().is_symlink() => Kind::Link,
                Some(m) if m.is_dir() => Kind::Dir,
                _ => Kind::File,
            };
            Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                kind,
                size: meta.map(|m| m.len()).unwrap_or(0),
            }
        })
        .collect();
    entries.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    Ok(entries)
}

fn entry_line(prefix: &str, e: &Entry) -> String {
    match e.kind {
        Kind::Dir => format!("{prefix}{}/", e.name),
        Kind::Link => format!("{prefix}{}@ (symbolic link)", e.name),
        Kind::File => format!("{prefix}{} ({})", e.name, human_size(e.size)),
    }
}

fn list_one(dir: &Path, shown: &str) -> Result<ToolOutput, ToolError> {
    let entries = read_entries(dir, shown)?;
    let dirs = entries.iter().filter(|e| e.kind == Kind::Dir).count();
    let files = entries.len() - dirs;
    let mut out = format!(
        "{shown}: {}, {}\n",
        plural(dirs, "folder"),
        plural(files, "file")
    );
    for e in entries.iter().take(MAX_ENTRIES) {
        out.push_str(&entry_line("", e));
        out.push('\n');
    }
    if entries.len() > MAX_ENTRIES {
        out.push_str(&format!(
            "[… {} more not shown. Use list_files on a sub-folder, or read a file directly.]\n",
            entries.len() - MAX_ENTRIES
        ));
    }
    if entries.is_empty() {
        out.push_str("(empty folder)\n");
    }
    Ok(ToolOutput {
        content: out,
        summary: format!("{shown}: {} entries", entries.len()),
        diff: None,
    })
}

/// Per top-level folder totals, for the summary of a large tree.
#[derive(Default)]
struct Totals {
    dirs: usize,
    files: usize,
    bytes: u64,
}

fn list_tree(root: &Path, shown: &str, cancel: &Cancel) -> Result<ToolOutput, ToolError> {
    let mut lines = Vec::new();
    let mut total = Totals::default();
    let mut per_top: BTreeMap<String, Totals> = BTreeMap::new();
    let mut skipped: Vec<String> = Vec::new();
    // Depth-first with an explicit stack; (folder, its path relative to root).
    let mut stack: Vec<(PathBuf, String)> = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        cancel.check()?;
        let entries = match read_entries(&dir, shown) {
            Ok(e) => e,
            Err(_) if !rel.is_empty() => {
                lines.push(format!("{rel}/ (cannot be read)"));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut subdirs = Vec::new();
        for e in entries {
            let path = if rel.is_empty() {
                e.name.clone()
            } else {
                format!("{rel}/{}", e.name)
            };
            let top = path.split('/').next().unwrap_or("").to_string();
            let is_top = top == path;
            let t = per_top.entry(top).or_default();
            match e.kind {
                Kind::Dir => {
                    total.dirs += 1;
                    if !is_top {
                        t.dirs += 1;
                    }
                    if HEAVY_DIRS.contains(&e.name.as_str()) {
                        lines.push(format!("{path}/ (contents not listed)"));
                        skipped.push(path);
                    } else {
                        lines.push(format!("{path}/"));
                        subdirs.push((dir.join(&e.name), path));
                    }
                }
                _ => {
                    total.files += 1;
                    total.bytes += e.size;
                    t.files += 1;
                    t.bytes += e.size;
                    lines.push(entry_line("", &Entry { name: path, ..e }));
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }

    let mut out = format!(
        "{shown}: {}, {}, {} in all",
        plural(total.dirs, "folder"),
        plural(total.files, "file"),
        human_size(total.bytes)
    );
    if !skipped.is_empty() {
        out.push_str(&format!(" (not counting inside {})", skipped.join(", ")));
    }
    out.push('\n');
    if lines.len() <= MAX_ENTRIES {
        out.push('\n');
        for line in &lines {
            out.push_str(line);
            out.push('\n');
        }
    } else {
        out.push_str(&format!(
            "\nToo many entries to list ({}); per top-level entry:\n",
            lines.len()
        ));
        for (top, t) in &per_top {
            if t.dirs == 0 && t.files == 1 && !top_is_dir(root, top) {
                out.push_str(&format!("{top} ({})\n", human_size(t.bytes)));
            } else {
                out.push_str(&format!(
                    "{top}/: {}, {}, {}\n",
                    plural(t.dirs, "folder"),
                    plural(t.files, "file"),
                    human_size(t.bytes)
                ));
            }
        }
        out.push_str("[List a sub-folder to see its files.]\n");
    }
    Ok(ToolOutput {
        content: out,
        summary: format!(
            "{shown}: {}, {}",
            plural(total.dirs, "folder"),
            plural(total.files, "file")
        ),
        diff: None,
    })
}

fn top_is_dir(root: &Path, top: &str) -> bool {
    root.join(top).symlink_metadata().is_ok_and(|m| m.is_dir())
}

/// `12 bytes`, `3.0 KB`, `1.2 MB`, as the tools and the survey say sizes.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return plural(bytes as usize, "byte");
    }
    let mut size = bytes as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit < UNITS.len() - 1 {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;

    fn run(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        ListFiles.list(&args, &Workdir::new(dir).unwrap(), &Cancel::default())
    }

    fn tree(dir: &Path) {
        fs::create_dir_all(dir.join("src/util")).unwrap();
        fs::create_dir_all(dir.join(".git/objects")).unwrap();
        fs::write(dir.join("README.md"), "hello").unwrap();
        fs::write(dir.join("src/main.rs"), "fn main() {}").unwrap();
        fs::write(dir.join("src/util/mod.rs"), "").unwrap();
        fs::write(dir.join(".git/objects/x"), "").unwrap();
    }

    #[test]
    fn lists_one_folder_dirs_first() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = run(dir.path(), json!({})).unwrap();
        assert_eq!(
            out.content,
            ".: 2 folders, 1 file\n.git/\nsrc/\nREADME.md (5 bytes)\n"
        );
        let out = run(dir.path(), json!({"dirpath": "src"})).unwrap();
        assert_eq!(
            out.content,
            "src: 1 folder, 1 file\nutil/\nmain.rs (12 bytes)\n"
        );
    }

    #[test]
    fn recursive_listing_starts_with_a_summary() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let out = run(dir.path(), json!({"recursive": true})).unwrap();
        assert_eq!(
            out.content,
            ".: 3 folders, 3 files, 17 bytes in all (not counting inside .git)\n\n\
             .git/ (contents not listed)\nsrc/\nREADME.md (5 bytes)\nsrc/util/\nsrc/main.rs (12 bytes)\nsrc/util/mod.rs (0 bytes)\n"
        );
    }

    #[test]
    fn huge_trees_are_summarised() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["a", "b"] {
            fs::create_dir(dir.path().join(d)).unwrap();
            for i in 0..300 {
                fs::write(dir.path().join(d).join(format!("f{i}")), "x").unwrap();
            }
        }
        let out = run(dir.path(), json!({"recursive": "true"})).unwrap();
        assert!(
            out.content
                .starts_with(".: 2 folders, 600 files, 600 bytes in all\n")
        );
        assert!(out.content.contains("Too many entries to list (602)"));
        assert!(
            out.content
                .contains("a/: 0 folders, 300 files, 300 bytes\n")
        );
        assert!(!out.content.contains("f299"));
    }

    #[cfg(unix)]
    #[test]
    fn files_and_escapes_are_refused_and_links_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        symlink("/", dir.path().join("root-link")).unwrap();
        assert!(
            run(dir.path(), json!({"dirpath": "README.md"}))
                .unwrap_err()
                .to_string()
                .contains("is a file")
        );
        assert!(run(dir.path(), json!({"dirpath": ".."})).is_err());
        assert!(run(dir.path(), json!({"dirpath": "root-link"})).is_err());
        let out = run(dir.path(), json!({"recursive": true})).unwrap();
        assert!(out.content.contains("root-link@ (symbolic link)"));
        assert!(!out.content.contains("etc"));
    }
}
