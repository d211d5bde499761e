//! CodePilot's template variables (`{{OS}}`, `{{CWD}}`, `{{MODEL}}`, …), filled in skills when they
//! are loaded, and in what else a person writes them (roles, instructions); and the two facts of
//! the environment they say, which the system prompt tells too.

use std::env::consts::ARCH;
use std::env::consts::OS;
use std::fs;
use std::path::{Path, PathBuf};

/// CodePilot's template variables, in roles, instructions and skills: `{{OS}}`, `{{CWD}}` and
/// `{{WORKDIR}}` (the working folder), `{{GIT_BRANCH}}` (empty outside a repository or on a
/// detached HEAD), `{{DATE}}` (`YYYY-MM-DD`), `{{MODEL}}`. Other `{{…}}` stay as written.
pub fn fill_variables(text: &str, workdir: &Path, model: &str) -> String {
    if !text.contains("{{") {
        return text.to_string();
    }
    let branch = find_git_dir(workdir)
        .and_then(|g| fs::read_to_string(g.join("HEAD")).ok())
        .and_then(|h| {
            h.trim()
                .strip_prefix("ref: refs/heads/")
                .map(str::to_string)
        })
        .unwrap_or_default();
    let folder = workdir.display().to_string();
    let values = [
        ("{{OS}}", operating_system()),
        ("{{CWD}}", folder.clone()),
        ("{{WORKDIR}}", folder),
        ("{{GIT_BRANCH}}", branch),
        (
            "{{DATE}}",
            chrono::Local::now().format("%Y-%m-%d").to_string(),
        ),
        ("{{MODEL}}", model.to_string()),
    ];
    let mut out = text.to_string();
    for (name, value) in &values {
        out = out.replace(name, value);
    }
    out
}

pub(crate) fn operating_system() -> String {
    let os = OS;
    let pretty = fs::read_to_string("/etc/os-release").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
    });
    match pretty {
        Some(p) if !p.is_empty() => format!("{os} ({p}, {})", ARCH),
        _ => format!("{os} ({})", ARCH),
    }
}

/// The repository's git folder: `.git` in WORKDIR or above, or where a `.git` file (a worktree,
/// a submodule) points.
pub(crate) fn find_git_dir(workdir: &Path) -> Option<PathBuf> {
    for dir in workdir.ancestors() {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(dot_git);
        }
        if let Ok(text) = fs::read_to_string(&dot_git) {
            let target = text.trim().strip_prefix("gitdir:")?.trim().to_string();
            let path = PathBuf::from(target);
            return Some(if path.is_absolute() {
                path
            } else {
                dir.join(path)
            });
        }
    }
    None
}
