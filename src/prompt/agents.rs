//! Instructions a project keeps for agents: `AGENTS.md`, then `CLAUDE.md`, then `CLAUDE.local.md`
//! in WORKDIR (all that exist, as Codex and Claude Code read them), after the user's own:
//! `<config dir>/new/AGENTS.md`, `~/.codex/AGENTS.md` and `~/.claude/CLAUDE.md`. The user's and the
//! project's are merged by `## ` section, the project's winning where both have one. A line `@path`
//! includes another file: relative paths only, inside WORKDIR (resolved as the file tools resolve
//! them), no cycles, five levels at most, 64 KB in all; a file already read (a `CLAUDE.md` that says
//! `@AGENTS.md`) is not read twice; a refused include is reported once and skipped.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::tools::Sandbox;

/// Most bytes of instructions, includes counted.
pub const MAX_BYTES: usize = 64 * 1024;
/// Deepest include chain.
pub const MAX_DEPTH: usize = 5;

/// The merged instructions, the files they came from, and what had to be skipped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Instructions {
    pub text: String,
    pub sources: Vec<PathBuf>,
    pub problems: Vec<String>,
}

/// Reads the user's and the project's instructions.
pub fn load(user_dir: Option<&Path>, workdir: &Path) -> Instructions {
    let mut out = Instructions::default();
    let Ok(sandbox) = Sandbox::new(workdir) else {
        return out;
    };
    let mut budget = MAX_BYTES;
    let mut reported = HashSet::new();
    // Files through the one reader: the project's may not be links out of it, none may be a
    // FIFO or a device, and no more is read than the instructions may hold.
    let files = crate::project_file::ProjectFiles::new(workdir);
    let mut read = |path: &Path, out: &mut Instructions, budget: &mut usize| -> Option<String> {
        // One byte more than may be used, so that a longer file is said to be cut.
        let got = if path.starts_with(sandbox.root()) {
            files.read(path, MAX_BYTES + 1)
        } else {
            crate::project_file::read_own(path, MAX_BYTES + 1)
        };
        let text = match got {
            Ok(Some(read)) => read.text(),
            Ok(None) => return None,
            Err(why) => {
                out.problems.push(why);
                return None;
            }
        };
        // Read already (a link to one read before, or an include of an earlier file's).
        let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if out.sources.contains(&real) {
            return None;
        }
        out.sources.push(real.clone());
        let mut stack = vec![real];
        let mut included = out.sources.clone();
        let text = expand(
            &text,
            path,
            &sandbox,
            (&mut stack, &mut included),
            budget,
            &mut out.problems,
            &mut reported,
        );
        for p in included {
            if !out.sources.contains(&p) {
                out.sources.push(p);
            }
        }
        Some(text)
    };
    let home = dirs::home_dir();
    let join = |parts: Vec<String>| Some(parts.join("\n\n")).filter(|t| !t.trim().is_empty());
    let user_files: Vec<PathBuf> = [
        user_dir.map(|d| d.join("AGENTS.md")),
        home.as_ref().map(|h| h.join(".codex/AGENTS.md")),
        home.as_ref().map(|h| h.join(".claude/CLAUDE.md")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let user = join(
        user_files
            .iter()
            .filter_map(|p| read(p, &mut out, &mut budget))
            .map(|t| t.trim().to_string())
            .collect(),
    );
    let project = join(
        ["AGENTS.md", "CLAUDE.md", "CLAUDE.local.md"]
            .into_iter()
            .map(|name| sandbox.root().join(name))
            .filter_map(|p| read(&p, &mut out, &mut budget))
            .map(|t| t.trim().to_string())
            .collect(),
    );
    out.text = match (user, project) {
        (None, None) => String::new(),
        (Some(u), None) => u.trim().to_string(),
        (None, Some(p)) => p.trim().to_string(),
        (Some(u), Some(p)) => merge(&u, &p),
    };
    out
}

/// Replaces `@path` lines with the files they name, recursively, within the guards.
fn expand(
    text: &str,
    from: &Path,
    sandbox: &Sandbox,
    (stack, included): (&mut Vec<PathBuf>, &mut Vec<PathBuf>),
    budget: &mut usize,
    problems: &mut Vec<String>,
    reported: &mut HashSet<String>,
) -> String {
    let mut out = String::new();
    let refuse = |why: String, problems: &mut Vec<String>, reported: &mut HashSet<String>| {
        if reported.insert(why.clone()) {
            problems.push(why);
        }
    };
    for line in text.lines() {
        let Some(target) = line
            .trim()
            .strip_prefix('@')
            .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
        else {
            let take = (line.len() + 1).min(*budget);
            if take < line.len() + 1 {
                refuse(
                    format!("{}: instructions cut at {MAX_BYTES} bytes", from.display()),
                    problems,
                    reported,
                );
                *budget = 0;
                break;
            }
            out.push_str(line);
            out.push('\n');
            *budget -= take;
            continue;
        };
        let shown = format!("{}: include `{target}`", from.display());
        if Path::new(target).is_absolute() || target.starts_with('~') {
            refuse(
                format!("{shown} refused: only relative paths are included"),
                problems,
                reported,
            );
            continue;
        }
        if stack.len() > MAX_DEPTH {
            refuse(
                format!("{shown} refused: includes go at most {MAX_DEPTH} deep"),
                problems,
                reported,
            );
            continue;
        }
        // Relative to the including file when it is inside WORKDIR, else to WORKDIR.
        let base = from
            .parent()
            .filter(|p| p.starts_with(sandbox.root()))
            .and_then(|p| p.strip_prefix(sandbox.root()).ok())
            .map(|p| p.join(target))
            .unwrap_or_else(|| PathBuf::from(target));
        let path = match sandbox.resolve(&base.to_string_lossy()) {
            Ok(p) => p,
            Err(e) => {
                refuse(format!("{shown} refused: {e}"), problems, reported);
                continue;
            }
        };
        if stack.contains(&path) {
            refuse(
                format!("{shown} refused: it includes itself"),
                problems,
                reported,
            );
            continue;
        }
        // In the instructions already (`CLAUDE.md` saying `@AGENTS.md`): not twice.
        if included.contains(&path) {
            continue;
        }
        let text = match sandbox.open_read(&path, target) {
            Ok(f) => {
                // No more than the instructions may still hold (a 20 GB include is cut here).
                let mut bytes = Vec::new();
                let mut f = std::io::Read::take(f.file, *budget as u64 + 1);
                if let Err(e) = std::io::Read::read_to_end(&mut f, &mut bytes) {
                    refuse(format!("{shown} refused: {e}"), problems, reported);
                    continue;
                }
                let cut = bytes.len() > *budget;
                match String::from_utf8(bytes) {
                    Ok(s) => s,
                    // A character cut at the limit is replaced; text that is not UTF-8 is not read.
                    Err(e) if cut => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                    Err(_) => {
                        refuse(
                            format!("{shown} refused: not UTF-8 text"),
                            problems,
                            reported,
                        );
                        continue;
                    }
                }
            }
            Err(e) => {
                refuse(format!("{shown} refused: {e}"), problems, reported);
                continue;
            }
        };
        stack.push(path.clone());
        if !included.contains(&path) {
            included.push(path.clone());
        }
        out.push_str(&expand(
            &text,
            &path,
            sandbox,
            (&mut *stack, &mut *included),
            budget,
            problems,
            reported,
        ));
        stack.pop();
        if *budget == 0 {
            break;
        }
    }
    out
}

/// The user's instructions, then the project's; a `## ` section the project also has is the
/// project's alone.
fn merge(user: &str, project: &str) -> String {
    let project_titles: HashSet<String> = sections(project)
        .into_iter()
        .filter_map(|(title, _)| title)
        .collect();
    let mut out = String::new();
    for (title, body) in sections(user) {
        if title.as_ref().is_some_and(|t| project_titles.contains(t)) {
            continue;
        }
        out.push_str(&body);
    }
    let user_part = out.trim().to_string();
    let project_part = project.trim();
    match (user_part.is_empty(), project_part.is_empty()) {
        (true, _) => project_part.to_string(),
        (_, true) => user_part,
        _ => format!("{user_part}\n\n{project_part}"),
    }
}

/// The text cut at `## ` headings: (the heading's title, the section's text with its heading).
fn sections(text: &str) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = vec![(None, String::new())];
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && let Some(title) = line.strip_prefix("## ") {
            out.push((Some(title.trim().to_lowercase()), String::new()));
        }
        let last = out.last_mut().expect("never empty");
        last.1.push_str(line);
        last.1.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let user = dir.path().join("user");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&user).unwrap();
        let work = work.canonicalize().unwrap();
        (dir, work, user)
    }

    #[test]
    fn user_then_project_merged_by_section_the_project_winning() {
        let (_d, work, user) = setup();
        std::fs::write(
            user.join("AGENTS.md"),
            "Be brief.\n\n## Style\nUser style.\n\n## Tests\nRun them always.\n",
        )
        .unwrap();
        std::fs::write(
            work.join("AGENTS.md"),
            "# Project\n\n## Tests\ncargo test --all\n\n## Layout\nsrc/ holds it.\n",
        )
        .unwrap();
        let i = load(Some(&user), &work);
        assert_eq!(
            i.text,
            "Be brief.\n\n## Style\nUser style.\n\n# Project\n\n## Tests\ncargo test --all\n\n## Layout\nsrc/ holds it."
        );
        assert_eq!(i.sources.len(), 2);
        assert!(i.problems.is_empty());
    }

    #[test]
    fn agents_md_claude_md_and_claude_local_md_are_all_read_and_an_import_not_twice() {
        let (_d, work, _user) = setup();
        std::fs::write(work.join("CLAUDE.md"), "From CLAUDE.md\n").unwrap();
        assert_eq!(load(None, &work).text, "From CLAUDE.md");
        std::fs::write(work.join("AGENTS.md"), "From AGENTS.md\n").unwrap();
        assert_eq!(load(None, &work).text, "From AGENTS.md\n\nFrom CLAUDE.md");
        // The common CLAUDE.md that points to AGENTS.md and adds its own: AGENTS.md once.
        std::fs::write(
            work.join("CLAUDE.md"),
            "@AGENTS.md\n\n## Claude only\nUse the tools.\n",
        )
        .unwrap();
        std::fs::write(work.join("CLAUDE.local.md"), "My sandbox URL is x.\n").unwrap();
        let i = load(None, &work);
        assert_eq!(
            i.text,
            "From AGENTS.md\n\n## Claude only\nUse the tools.\n\nMy sandbox URL is x."
        );
        assert_eq!(i.sources.len(), 3, "{:?}", i.sources);
        assert!(i.problems.is_empty(), "{:?}", i.problems);
        assert!(
            load(
                None,
                &tempfile::tempdir().unwrap().path().canonicalize().unwrap()
            )
            .text
            .is_empty()
        );
    }

    #[test]
    fn includes_are_guarded() {
        let (d, work, _user) = setup();
        std::fs::create_dir_all(work.join("docs")).unwrap();
        std::fs::write(d.path().join("secret.txt"), "SECRET").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret.txt"), work.join("docs/link.md")).unwrap();
        std::fs::write(work.join("docs/build.md"), "Build with make.\n@nested.md\n").unwrap();
        std::fs::write(work.join("docs/nested.md"), "Nested fact.\n").unwrap();
        std::fs::write(work.join("loop.md"), "Loop start.\n@loop.md\n").unwrap();
        // A chain seven files deep.
        for i in 0..7 {
            std::fs::write(
                work.join(format!("c{i}.md")),
                format!("level {i}\n@c{}.md\n", i + 1),
            )
            .unwrap();
        }
        std::fs::write(
            work.join("AGENTS.md"),
            format!(
                "Top.\n@docs/build.md\n@/etc/passwd\n@../secret.txt\n@~/x.md\n@docs/link.md\n@loop.md\n@missing.md\n@docs/build.md\n@c0.md\n  @ not an include\n{}/etc\n",
                "@"
            ),
        )
        .unwrap();
        let i = load(None, &work);
        assert!(
            i.text.starts_with("Top.\nBuild with make.\nNested fact.\n"),
            "{}",
            i.text
        );
        assert!(
            !i.text.contains("SECRET") && !i.text.contains("root:"),
            "{}",
            i.text
        );
        assert!(i.text.contains("Loop start."));
        assert!(
            i.text.contains("level 4") && !i.text.contains("level 5"),
            "{}",
            i.text
        );
        assert!(i.text.contains("  @ not an include"));
        let problems = i.problems.join("\n");
        for what in [
            "include `/etc/passwd` refused: only relative paths",
            "include `../secret.txt` refused: `docs/../../secret.txt`",
            "include `~/x.md` refused: only relative paths",
            "include `docs/link.md` refused",
            "include `loop.md` refused: it includes itself",
            "include `missing.md` refused",
            "refused: includes go at most 5 deep",
        ] {
            assert!(
                problems.contains(what)
                    || (what.contains("secret")
                        && problems.contains("include `../secret.txt` refused")),
                "{what} not in:\n{problems}"
            );
        }
        // Each refusal once, even when met again.
        assert_eq!(
            i.problems.len(),
            i.problems.iter().collect::<HashSet<_>>().len()
        );
    }

    #[test]
    fn instructions_stop_at_64_kb() {
        let (_d, work, _user) = setup();
        let line = "x".repeat(1023) + "\n";
        std::fs::write(work.join("AGENTS.md"), line.repeat(100)).unwrap();
        let i = load(None, &work);
        assert!(i.text.len() <= MAX_BYTES, "{}", i.text.len());
        assert!(
            i.problems.iter().any(|p| p.contains("cut at 65536 bytes")),
            "{:?}",
            i.problems
        );
    }
}
