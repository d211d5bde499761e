//! Instructions a project keeps for agents, read the way Codex and Claude Code read them.
//!
//! The user's own first: `<config dir>/new/AGENTS.md`, `~/.codex/AGENTS.override.md` (or, when it
//! is missing or empty, `~/.codex/AGENTS.md`) and `~/.claude/CLAUDE.md`. Then the project's, from
//! the repository's top down to WORKDIR, nearer folders last: in each folder `AGENTS.override.md`
//! (or `AGENTS.md`), `CLAUDE.md`, `.claude/CLAUDE.md` and `CLAUDE.local.md`. The repository's top is
//! the nearest folder above WORKDIR holding `.git`, looked for only through folders of the user's
//! own and not above the home folder (a `.git` planted in `/tmp` makes nobody's instructions
//! ours); without one, WORKDIR alone. The user's and the project's are merged by `## ` section,
//! the project's winning where both have one.
//!
//! `@path` imports another file, on a line of its own (replaced by the file) or inline (`See
//! @README.md`, `- Make: @Makefile`: the file follows the line), never inside code; an inline
//! word that does not look like a path (`@alice`) is one only when such a file exists. A
//! project's file imports relative paths only, inside the project (resolved as the file tools
//! resolve them); the user's may import `~/…` and absolute paths too. No cycles, five levels at
//! most, 64 KB in all; a file already read (a `CLAUDE.md` that says `@AGENTS.md`) is not read
//! twice; an import that is refused or missing is said once and leaves a marker where it was.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::fs::confine::Workdir;
use crate::fs::project_file;
use crate::fs::project_file::{Bounded, ProjectFiles};
#[cfg(not(windows))]
use new_sys::process;
use std::fs;

/// Most bytes of instructions, includes counted.
pub const MAX_BYTES: usize = 64 * 1024;
/// Deepest include chain.
pub const MAX_DEPTH: usize = 5;
/// Of [`MAX_BYTES`], what is kept for the markers that say what was left out or cut: the model
/// reads where the instructions stop, not only the user at start-up.
const MARKER_ROOM: usize = 2 * 1024;
/// Most of what is left that one import may take, so that the text after it (the rest of the
/// importing file, the next sections and files) is not dropped whole by one big import.
const IMPORT_SHARE: usize = 2;

/// The merged instructions, the files they came from, and what had to be skipped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Instructions {
    pub text: String,
    pub sources: Vec<PathBuf>,
    pub problems: Vec<String>,
}

/// Whose file is being read: what its imports may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whose {
    /// The user's own (their config and home folders): links anywhere, `~/` and absolute imports.
    User,
    /// The project's: inside the project, relative imports only.
    Project,
    /// Imported by one of the user's files from elsewhere (another repository, say): relative
    /// imports only, below its own folder.
    Elsewhere,
}

/// Reads the user's and the project's instructions.
pub fn load(user_dir: Option<&Path>, workdir: &Path) -> Instructions {
    load_with(user_dir, workdir, dirs::home_dir())
}

/// The same, with `home` as the home folder.
fn load_with(user_dir: Option<&Path>, workdir: &Path, home: Option<PathBuf>) -> Instructions {
    let Ok(work) = workdir.canonicalize() else {
        return Instructions::default();
    };
    let (root, stopped) = project_root(&work, home.as_deref());
    let Ok(project) = Workdir::new(&root) else {
        return Instructions::default();
    };
    let mut reading = Reading {
        files: ProjectFiles::new(&root),
        project,
        user_dirs: user_dir
            .map(Path::to_path_buf)
            .into_iter()
            .chain(
                home.iter()
                    .flat_map(|h| [h.join(".claude"), h.join(".codex")]),
            )
            .filter_map(|d| d.canonicalize().ok())
            .collect(),
        home: home.clone(),
        budget: MAX_BYTES - MARKER_ROOM,
        markers: MARKER_ROOM,
        reported: HashSet::new(),
        out: Instructions::default(),
    };
    reading.out.problems.extend(stopped);
    let join = |parts: Vec<String>| {
        let parts: Vec<String> = parts
            .into_iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        Some(parts.join("\n\n")).filter(|t| !t.is_empty())
    };
    let mut user = Vec::new();
    if let Some(dir) = user_dir {
        user.extend(reading.top(&dir.join("AGENTS.md"), Whose::User));
    }
    if let Some(home) = &home {
        user.extend(reading.first_of(
            &[
                home.join(".codex/AGENTS.override.md"),
                home.join(".codex/AGENTS.md"),
            ],
            Whose::User,
        ));
        user.extend(reading.top(&home.join(".claude/CLAUDE.md"), Whose::User));
    }
    let user = join(user);
    let mut project = Vec::new();
    for dir in folders_down(&root, &work) {
        project.extend(reading.first_of(
            &[dir.join("AGENTS.override.md"), dir.join("AGENTS.md")],
            Whose::Project,
        ));
        for name in ["CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"] {
            project.extend(reading.top(&dir.join(name), Whose::Project));
        }
    }
    let project = join(project);
    let mut out = reading.out;
    out.text = match (user, project) {
        (None, None) => String::new(),
        (Some(u), None) => u,
        (None, Some(p)) => p,
        (Some(u), Some(p)) => merge(&u, &p),
    };
    out
}

/// The repository's top above `work` (both resolved), or `work`; and, when a `.git` above was
/// not climbed to because a folder on the way may be written by others, which folder and why.
fn project_root(work: &Path, home: Option<&Path>) -> (PathBuf, Option<String>) {
    let home = home.and_then(|h| h.canonicalize().ok());
    for dir in work.ancestors() {
        // The home folder is nobody's repository top (a `~/.git` of dotfiles would make every
        // unpacked download a folder of it), unless it is WORKDIR itself.
        if home.as_deref() == Some(dir) && dir != work {
            break;
        }
        if fs::symlink_metadata(dir.join(".git")).is_ok() {
            return (dir.to_path_buf(), None);
        }
        if home.as_deref() == Some(dir) {
            break;
        }
        // Only through the user's own folders, which nobody else may write.
        let Some(parent) = dir.parent() else { break };
        if let Err(why) = own_folder(parent) {
            // Said only when there was a repository to reach: a walk that would have stopped
            // anyway is no surprise.
            let above = parent
                .ancestors()
                .take_while(|d| home.as_deref() != Some(*d))
                .find(|d| fs::symlink_metadata(d.join(".git")).is_ok());
            let said = above.map(|top| {
                format!(
                    "the instructions of the repository at {} above WORKDIR are not read: {} {why}, so the walk from WORKDIR up stopped below it",
                    top.display(),
                    parent.display()
                )
            });
            return (work.to_path_buf(), said);
        }
    }
    (work.to_path_buf(), None)
}

/// Whether `dir` is the user's own folder, which nobody else may write; if not, why.
#[cfg(unix)]
fn own_folder(dir: &Path) -> Result<(), &'static str> {
    use std::os::unix::fs::MetadataExt;
    let me = process::effective_uid();
    let m = fs::metadata(dir).map_err(|_| "cannot be read")?;
    if !m.is_dir() || m.uid() != me {
        return Err("is not yours");
    }
    if m.mode() & 0o002 != 0 {
        return Err("may be written by anybody");
    }
    // Group-writable is the user's own when the group has no other member: the per-user group
    // of a umask 002 system (Ubuntu's default), not a group shared with others.
    if m.mode() & 0o020 != 0 {
        let group = fs::read_to_string("/etc/group").unwrap_or_default();
        let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
        if !group_is_private(m.gid(), me, &group, &passwd) {
            return Err("may be written by its group, which has other members");
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn own_folder(_dir: &Path) -> Result<(), &'static str> {
    Err("is not known to be yours on this system")
}

/// Whether group `gid` has no member but user `uid`, as `/etc/group` and `/etc/passwd` say:
/// nobody else has it as their primary group nor is listed in it. A group the files do not name
/// (from a directory service) is not known to be private.
#[cfg(any(unix, test))]
fn group_is_private(gid: u32, uid: u32, group: &str, passwd: &str) -> bool {
    let users: Vec<(&str, u32, u32)> = passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((
                *f.first()?,
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect();
    let Some(my_name) = users.iter().find(|u| u.1 == uid).map(|u| u.0) else {
        return false;
    };
    let Some(members) = group.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.get(2)?.parse::<u32>().ok()? == gid).then(|| f.get(3).copied().unwrap_or(""))
    }) else {
        return false;
    };
    let others_listed = members
        .split(',')
        .map(str::trim)
        .any(|m| !m.is_empty() && m != my_name);
    let others_primary = users.iter().any(|u| u.2 == gid && u.1 != uid);
    !others_listed && !others_primary
}

/// `root`, then each folder below it down to `work` (which is inside it, or is it).
fn folders_down(root: &Path, work: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if let Ok(rest) = work.strip_prefix(root) {
        let mut dir = root.to_path_buf();
        for part in rest.components() {
            dir.push(part);
            out.push(dir.clone());
        }
    }
    out
}

/// An inline `@word` that imports only when such a file exists: it does not look like a path.
fn looks_like_path(target: &str) -> bool {
    target.contains('/') || target.contains('.')
}

/// The `@targets` written inline in a line, outside code spans: an `@` at the start or after a
/// space or `(`, up to the next space, less the punctuation that ends a sentence.
fn inline_imports(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut in_code = false;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        if c == '`' {
            in_code = !in_code;
        } else if c == '@' && !in_code && (prev.is_whitespace() || prev == '(') {
            let rest = &line[i + 1..];
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '`' || c == ')')
                .unwrap_or(rest.len());
            let target = rest[..end].trim_end_matches(|c: char| {
                matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | '"' | '\'' | ']')
            });
            if !target.is_empty() {
                found.push(target);
            }
        }
        prev = c;
    }
    found
}

struct Reading {
    /// The project (the repository's top, or WORKDIR): what its files may import.
    project: Workdir,
    files: ProjectFiles,
    home: Option<PathBuf>,
    /// The user's own folders (the config folder, `~/.claude`, `~/.codex`), resolved: what a
    /// user's file imports from there is the user's too.
    user_dirs: Vec<PathBuf>,
    /// Bytes the instructions may still hold.
    budget: usize,
    /// Bytes the markers of what was left out or cut may still take.
    markers: usize,
    reported: HashSet<String>,
    out: Instructions,
}

impl Reading {
    fn refuse(&mut self, why: String) {
        if self.reported.insert(why.clone()) {
            self.out.problems.push(why);
        }
    }

    fn read(&self, path: &Path, origin: Whose, limit: usize) -> Result<Option<Bounded>, String> {
        match origin {
            Whose::Project => self.files.read(path, limit),
            Whose::User | Whose::Elsewhere => {
                // What the kernel makes up is nobody's instructions (`/proc/self/environ`).
                let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
                if ["/proc", "/sys", "/dev"]
                    .iter()
                    .any(|p| real.starts_with(p))
                {
                    return Err(format!(
                        "{} is refused: not a file of instructions",
                        path.display()
                    ));
                }
                project_file::read_own(path, limit)
            }
        }
    }

    /// The first of `paths` that holds something.
    fn first_of(&mut self, paths: &[PathBuf], origin: Whose) -> Option<String> {
        paths
            .iter()
            .find_map(|p| self.top(p, origin).filter(|t| !t.trim().is_empty()))
    }

    /// One instructions file, its imports expanded; None when there is none (or it was read
    /// already, or refused: said).
    fn top(&mut self, path: &Path, origin: Whose) -> Option<String> {
        // One byte more than may be used, so that a longer file is said to be cut.
        let text = match self.read(path, origin, MAX_BYTES + 1) {
            Ok(Some(read)) => read.text(),
            Ok(None) => return None,
            Err(why) => {
                self.out.problems.push(why);
                return None;
            }
        };
        // Read already (a link to one read before, or an import of an earlier file's).
        let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if self.out.sources.contains(&real) {
            return None;
        }
        self.out.sources.push(real.clone());
        let mut stack = vec![real];
        Some(self.expand(&text, path, origin, &mut stack))
    }

    /// Adds `text` and a line break while the budget allows; false once it is spent, when the
    /// rest of `from` is left out and a marker in the text says so.
    fn push(&mut self, out: &mut String, text: &str, from: &Path) -> bool {
        if text.len() + 1 > self.budget {
            self.refuse(format!(
                "{}: instructions cut at {MAX_BYTES} bytes",
                from.display()
            ));
            self.mark(
                out,
                &format!(
                    "[the rest of {} is left out: the instructions hold {MAX_BYTES} bytes in all]",
                    from.display()
                ),
            );
            return false;
        }
        out.push_str(text);
        out.push('\n');
        self.budget -= text.len() + 1;
        true
    }

    /// A marker in the text (what was left out, cut or refused), from the room kept for them;
    /// once that is spent too, one last marker says that more was left out.
    fn mark(&mut self, out: &mut String, text: &str) {
        const MORE: &str = "[more instruction files are left out or cut]";
        if text.len() + 1 + MORE.len() < self.markers {
            out.push_str(text);
            out.push('\n');
            self.markers -= text.len() + 1;
        } else if self.markers > MORE.len() {
            out.push_str(MORE);
            out.push('\n');
            self.markers = 0;
        }
    }

    /// `text` with its imports expanded, within the guards.
    fn expand(
        &mut self,
        text: &str,
        from: &Path,
        origin: Whose,
        stack: &mut Vec<PathBuf>,
    ) -> String {
        let mut out = String::new();
        let mut fence: Option<&str> = None;
        for line in text.lines() {
            let trimmed = line.trim_start();
            let marks = ["```", "~~~"];
            if let Some(mark) = marks.iter().find(|m| trimmed.starts_with(**m)) {
                fence = match fence {
                    Some(open) if open == *mark => None,
                    None => Some(mark),
                    other => other,
                };
            }
            let whole = line
                .trim()
                .strip_prefix('@')
                .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace));
            match whole {
                Some(target) if fence.is_none() => {
                    self.import(target, from, origin, stack, &mut out, true);
                }
                _ => {
                    if !self.push(&mut out, line, from) {
                        break;
                    }
                    if fence.is_none() {
                        for target in inline_imports(line) {
                            self.import(target, from, origin, stack, &mut out, false);
                        }
                    }
                }
            }
        }
        out
    }

    /// Where an import of `from` leads, and whose the file there is.
    fn resolve(
        &self,
        target: &str,
        from: &Path,
        origin: Whose,
    ) -> Result<(PathBuf, Whose), String> {
        match origin {
            Whose::Project => {
                if Path::new(target).is_absolute() || target.starts_with('~') {
                    return Err("only relative paths are imported by a project's file".into());
                }
                // Relative to the importing file's folder.
                let base = from
                    .parent()
                    .and_then(|p| p.strip_prefix(self.project.root()).ok())
                    .map(|p| p.join(target))
                    .unwrap_or_else(|| PathBuf::from(target));
                self.project
                    .resolve(&base.to_string_lossy())
                    .map(|p| (p, Whose::Project))
                    .map_err(|e| e.to_string())
            }
            Whose::User => {
                let path = match target.strip_prefix("~/") {
                    Some(rest) => self
                        .home
                        .as_ref()
                        .ok_or("there is no home folder")?
                        .join(rest),
                    None if target.starts_with('~') => {
                        return Err("only `~/` names the home folder".into());
                    }
                    None if Path::new(target).is_absolute() => PathBuf::from(target),
                    None => from.parent().unwrap_or(Path::new("")).join(target),
                };
                // The user's own folders stay the user's; a file elsewhere reaches no further
                // than its own folder.
                let real = path.canonicalize().unwrap_or_else(|_| path.clone());
                let own = self.user_dirs.iter().any(|d| real.starts_with(d));
                Ok((path, if own { Whose::User } else { Whose::Elsewhere }))
            }
            Whose::Elsewhere => {
                if Path::new(target).is_absolute() || target.starts_with('~') {
                    return Err("only relative paths are imported by this file".into());
                }
                let folder = from.parent().unwrap_or(Path::new(""));
                let path = folder.join(target);
                let real = path.canonicalize().unwrap_or_else(|_| path.clone());
                let within = folder.canonicalize().is_ok_and(|f| real.starts_with(&f));
                if !within {
                    return Err("it leads out of the importing file's folder".into());
                }
                Ok((path, Whose::Elsewhere))
            }
        }
    }

    /// Imports `target` into `out`: the file (its own imports expanded), or a marker saying why
    /// not. `whole`: it stood on a line of its own; else it was a word in one, which imports
    /// nothing when it does not look like a path and no such file exists.
    fn import(
        &mut self,
        target: &str,
        from: &Path,
        origin: Whose,
        stack: &mut Vec<PathBuf>,
        out: &mut String,
        whole: bool,
    ) {
        let resolved = self.resolve(target, from, origin);
        let exists = resolved
            .as_ref()
            .is_ok_and(|(p, _)| fs::symlink_metadata(p).is_ok());
        if !whole && !exists && !looks_like_path(target) {
            return;
        }
        let shown = format!("{}: import `{target}`", from.display());
        let refused = |this: &mut Self, out: &mut String, why: String| {
            this.refuse(format!("{shown} refused: {why}"));
            this.mark(out, &format!("[@{target} is not included: {why}]"));
        };
        let (path, origin) = match resolved {
            Ok(found) => found,
            Err(why) => return refused(self, out, why),
        };
        if !exists {
            return refused(self, out, "there is no such file".into());
        }
        if stack.len() > MAX_DEPTH {
            return refused(self, out, format!("imports go at most {MAX_DEPTH} deep"));
        }
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if stack.contains(&real) {
            return refused(self, out, "it imports itself".into());
        }
        // In the instructions already (`CLAUDE.md` saying `@AGENTS.md`): not twice.
        if self.out.sources.contains(&real) {
            return;
        }
        // One import takes at most a share of what is left, so that what follows it still fits
        // (a 20 GB import is cut here).
        let share = self.budget / IMPORT_SHARE;
        let kept = self.budget - share;
        let text = match self.read(&path, origin, share + 1) {
            Ok(Some(read)) if read.truncated => read.text(),
            Ok(Some(read)) => match String::from_utf8(read.bytes) {
                Ok(text) => text,
                Err(_) => return refused(self, out, "not UTF-8 text".into()),
            },
            Ok(None) => return refused(self, out, "there is no such file".into()),
            Err(why) => return refused(self, out, why),
        };
        self.out.sources.push(real.clone());
        stack.push(real);
        self.budget = share;
        let expanded = self.expand(&text, &path, origin, stack);
        self.budget += kept;
        out.push_str(&expanded);
        stack.pop();
    }
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
    use crate::checkpoint;
    use crate::layers::INSTRUCTION_FILES;
    use new_sys::os_sandbox::PROTECTED;
    use std::fs;
    #[cfg(not(windows))]
    use std::fs::Permissions;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let user = dir.path().join("user");
        fs::create_dir_all(&work).unwrap();
        fs::create_dir_all(&user).unwrap();
        let work = work.canonicalize().unwrap();
        (dir, work, user)
    }

    #[test]
    fn user_then_project_merged_by_section_the_project_winning() {
        let (_d, work, user) = setup();
        fs::write(
            user.join("AGENTS.md"),
            "Be brief.\n\n## Style\nUser style.\n\n## Tests\nRun them always.\n",
        )
        .unwrap();
        fs::write(
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
        fs::write(work.join("CLAUDE.md"), "From CLAUDE.md\n").unwrap();
        assert_eq!(load(None, &work).text, "From CLAUDE.md");
        fs::write(work.join("AGENTS.md"), "From AGENTS.md\n").unwrap();
        assert_eq!(load(None, &work).text, "From AGENTS.md\n\nFrom CLAUDE.md");
        // The common CLAUDE.md that points to AGENTS.md and adds its own: AGENTS.md once.
        fs::write(
            work.join("CLAUDE.md"),
            "@AGENTS.md\n\n## Claude only\nUse the tools.\n",
        )
        .unwrap();
        fs::write(work.join("CLAUDE.local.md"), "My sandbox URL is x.\n").unwrap();
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

    #[cfg(unix)]
    #[test]
    fn includes_are_guarded() {
        let (d, work, _user) = setup();
        fs::create_dir_all(work.join("docs")).unwrap();
        fs::write(d.path().join("secret.txt"), "SECRET").unwrap();
        symlink(d.path().join("secret.txt"), work.join("docs/link.md")).unwrap();
        fs::write(work.join("docs/build.md"), "Build with make.\n@nested.md\n").unwrap();
        fs::write(work.join("docs/nested.md"), "Nested fact.\n").unwrap();
        fs::write(work.join("loop.md"), "Loop start.\n@loop.md\n").unwrap();
        // A chain seven files deep.
        for i in 0..7 {
            fs::write(
                work.join(format!("c{i}.md")),
                format!("level {i}\n@c{}.md\n", i + 1),
            )
            .unwrap();
        }
        fs::write(
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
            "import `/etc/passwd` refused: only relative paths",
            "import `../secret.txt` refused: `docs/../../secret.txt`",
            "import `~/x.md` refused: only relative paths",
            "import `docs/link.md` refused",
            "import `loop.md` refused: it imports itself",
            "import `missing.md` refused",
            "refused: imports go at most 5 deep",
        ] {
            assert!(
                problems.contains(what)
                    || (what.contains("secret")
                        && problems.contains("import `../secret.txt` refused")),
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
        fs::write(work.join("AGENTS.md"), line.repeat(100)).unwrap();
        let i = load(None, &work);
        assert!(i.text.len() <= MAX_BYTES, "{}", i.text.len());
        assert!(
            i.problems.iter().any(|p| p.contains("cut at 65536 bytes")),
            "{:?}",
            i.problems
        );
    }

    /// A CLAUDE.md that imports a big file (`@docs/architecture.md`, 100 KB) before its rules:
    /// the import is cut with a marker naming it, the section after it is still there, and a
    /// nearer file is still read; the whole stays within 64 KB.
    #[test]
    fn a_big_import_is_cut_with_a_marker_and_what_follows_it_stays() {
        let (_d, work, _user) = setup();
        let line = "architecture ".repeat(79) + "\n";
        write(&work.join("docs/architecture.md"), &line.repeat(100));
        write(
            &work.join("CLAUDE.md"),
            "# Project\n\n## Architecture\n@docs/architecture.md\n\n## Rules\n- Always run `cargo test`.\n",
        );
        write(
            &work.join(".claude/CLAUDE.md"),
            "## Local\nUse the staging host.\n",
        );
        let i = load(None, &work);
        assert!(i.text.len() <= MAX_BYTES, "{}", i.text.len());
        assert!(i.text.contains("architecture architecture"));
        let marker = format!(
            "[the rest of {} is left out: the instructions hold 65536 bytes in all]",
            work.canonicalize()
                .unwrap()
                .join("docs/architecture.md")
                .display()
        );
        assert!(
            i.text.contains(&marker),
            "{}",
            &i.text[i.text.len() - 600..]
        );
        assert!(i.text.contains("- Always run `cargo test`."));
        assert!(i.text.contains("Use the staging host."));
        let rules = i.text.find("## Rules").unwrap();
        assert!(i.text.find(&marker).unwrap() < rules);
        // Files that no longer fit at all are each named in the text.
        let many: String = (0..70).map(|n| format!("@part{n}.md\n")).collect();
        write(&work.join("CLAUDE.md"), &many);
        for n in 0..70 {
            write(&work.join(format!("part{n}.md")), &"y".repeat(1500));
        }
        let i = load(None, &work);
        assert!(i.text.len() <= MAX_BYTES, "{}", i.text.len());
        assert!(
            i.text.contains("part69.md is left out")
                || i.text
                    .contains("[more instruction files are left out or cut]")
        );
        assert!(
            i.text.contains("is left out: the instructions hold"),
            "{}",
            &i.text[i.text.len() - 600..]
        );
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn from_the_repository_s_top_down_to_a_subfolder_nearer_last_an_override_winning() {
        let (d, _work, _user) = setup();
        let repo = d.path().canonicalize().unwrap().join("repo");
        let api = repo.join("packages/api");
        fs::create_dir_all(repo.join(".git")).unwrap();
        write(&repo.join("AGENTS.md"), "Top agents.\n");
        write(&repo.join("CLAUDE.md"), "Top claude.\n");
        write(&repo.join("packages/AGENTS.md"), "Packages agents.\n");
        write(&api.join("AGENTS.md"), "Api agents, overridden.\n");
        write(&api.join("AGENTS.override.md"), "Api override.\n");
        write(&api.join(".claude/CLAUDE.md"), "Api dot-claude.\n");
        write(&api.join("CLAUDE.local.md"), "Api local.\n");
        // Below WORKDIR: not read.
        write(&api.join("src/AGENTS.md"), "Deeper.\n");
        let i = load_with(None, &api, None);
        assert_eq!(
            i.text,
            "Top agents.\n\nTop claude.\n\nPackages agents.\n\nApi override.\n\nApi dot-claude.\n\nApi local."
        );
        assert_eq!(i.sources.len(), 6, "{:?}", i.sources);
        // An empty override is as none.
        write(&api.join("AGENTS.override.md"), "\n");
        assert!(
            load_with(None, &api, None)
                .text
                .contains("Api agents, overridden.")
        );
        // A project file imports inside the repository, also above WORKDIR.
        write(&repo.join("README.md"), "The readme.\n");
        write(
            &api.join("CLAUDE.local.md"),
            "See @../../README.md for the overview.\n",
        );
        let i = load_with(None, &api, None);
        assert!(
            i.text
                .ends_with("See @../../README.md for the overview.\nThe readme."),
            "{}",
            i.text
        );
        assert!(i.problems.is_empty(), "{:?}", i.problems);
    }

    #[cfg(unix)]
    #[test]
    fn without_a_repository_or_through_a_folder_others_may_write_only_workdir_is_read() {
        let (d, work, _user) = setup();
        let top = d.path().canonicalize().unwrap();
        write(&top.join("AGENTS.md"), "Above, no repository.\n");
        write(&work.join("AGENTS.md"), "Here.\n");
        assert_eq!(load_with(None, &work, None).text, "Here.");
        // A `.git` above a folder anybody may write (as /tmp): never climbed to.
        let shared = top.join("shared");
        let inner = shared.join("inner");
        fs::create_dir_all(shared.join(".git")).unwrap();
        write(&shared.join("AGENTS.md"), "Planted.\n");
        write(&inner.join("AGENTS.md"), "Inner.\n");
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
        assert_eq!(load_with(None, &inner, None).text, "Inner.");
        fs::set_permissions(&shared, Permissions::from_mode(0o755)).unwrap();
        assert_eq!(load_with(None, &inner, None).text, "Planted.\n\nInner.");
        // Nor above the home folder.
        assert_eq!(load_with(None, &inner, Some(inner.clone())).text, "Inner.");
        // The walk that stops short of a repository says which folder stopped it, and why.
        fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
        let deeper = inner.join("src");
        fs::create_dir_all(&deeper).unwrap();
        let read = load_with(None, &deeper, None);
        assert!(
            read.problems.iter().any(|p| p
                .contains(&format!("{} may be written by anybody", shared.display()))
                && p.contains("repository at")),
            "{:?}",
            read.problems
        );
        fs::set_permissions(&shared, Permissions::from_mode(0o755)).unwrap();
    }

    /// Ubuntu's per-user groups (umask 002 makes every folder group-writable): a group with no
    /// other member is the user's own; a group others are in, or have as their primary group,
    /// is not; a group the files do not name is not known to be private.
    #[test]
    fn a_group_of_the_user_s_own_is_private() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      ana:x:1000:1000:Ana,,,:/home/ana:/bin/bash\n\
                      bo:x:1001:1001:Bo,,,:/home/bo:/bin/bash\n\
                      cy:x:1002:1003::/home/cy:/bin/sh\n";
        let group = "root:x:0:\nadm:x:4:syslog,ana\nsudo:x:27:ana\nana:x:1000:\nbo:x:1001:bo\n\
                     devs:x:1003:\nteam:x:1004:ana,bo\nsolo:x:1005:ana\n";
        assert!(group_is_private(1000, 1000, group, passwd));
        assert!(
            group_is_private(1001, 1001, group, passwd),
            "listing oneself"
        );
        assert!(group_is_private(1005, 1000, group, passwd));
        assert!(!group_is_private(1004, 1000, group, passwd), "shared");
        assert!(
            !group_is_private(1003, 1000, group, passwd),
            "cy's primary group"
        );
        assert!(!group_is_private(1001, 1000, group, passwd), "bo's group");
        assert!(
            !group_is_private(4242, 1000, group, passwd),
            "not in /etc/group"
        );
        assert!(!group_is_private(1000, 4242, group, passwd), "no such user");
    }

    #[test]
    fn imports_inline_and_in_list_items_but_never_in_code_and_a_missing_one_leaves_a_marker() {
        let (_d, work, _user) = setup();
        write(&work.join("README.md"), "Readme body.\n");
        write(&work.join("Makefile"), "test:\n\tcargo test\n");
        write(&work.join("code.md"), "CODE SHOULD NOT COME\n");
        write(
            &work.join("CLAUDE.md"),
            "See @README.md for the overview.\n- Make commands: @Makefile\n- Ask @alice, or mail a@code.md.\nNot `@code.md` in a span.\n```\n@code.md\n```\nAnd @missing/notes.md too.\n",
        );
        let i = load_with(None, &work, None);
        assert_eq!(
            i.text,
            "See @README.md for the overview.\nReadme body.\n- Make commands: @Makefile\ntest:\n\tcargo test\n- Ask @alice, or mail a@code.md.\nNot `@code.md` in a span.\n```\n@code.md\n```\nAnd @missing/notes.md too.\n[@missing/notes.md is not included: there is no such file]"
        );
        assert_eq!(i.problems.len(), 1, "{:?}", i.problems);
        assert!(
            i.problems[0].contains("import `missing/notes.md` refused: there is no such file"),
            "{:?}",
            i.problems
        );
    }

    #[test]
    fn the_user_s_files_import_from_home_and_codex_s_override_wins() {
        let (d, work, user) = setup();
        let home = d.path().canonicalize().unwrap().join("home");
        write(&home.join(".codex/AGENTS.md"), "Codex plain.\n");
        write(&home.join(".codex/AGENTS.override.md"), "Codex override.\n");
        write(&home.join("notes/style.md"), "Home style.\n");
        write(&home.join(".claude/CLAUDE.md"), "@~/notes/style.md\n");
        write(&user.join("AGENTS.md"), "Ours.\n");
        // A project's file may not reach home.
        write(&work.join("AGENTS.md"), "@~/notes/style.md\n");
        let i = load_with(Some(&user), &work, Some(home.clone()));
        assert_eq!(
            i.text,
            "Ours.\n\nCodex override.\n\nHome style.\n\n[@~/notes/style.md is not included: only relative paths are imported by a project's file]"
        );
        assert!(!i.text.contains("Codex plain"));
    }

    #[test]
    fn every_instruction_file_is_protected_from_the_model_s_writes() {
        for name in INSTRUCTION_FILES {
            assert!(PROTECTED.contains(name), "{name}");
            assert!(checkpoint::decides_what_runs(name), "{name}");
        }
    }

    #[test]
    fn the_home_folder_is_no_repository_top_and_a_file_from_elsewhere_reaches_no_further() {
        let (d, _work, user) = setup();
        let home = d.path().canonicalize().unwrap().join("home");
        // Dotfiles in git: `~/.git`. A download below home is no part of that repository.
        fs::create_dir_all(home.join(".git")).unwrap();
        write(&home.join(".ssh/id_ed25519"), "PRIVATE KEY\n");
        let download = home.join("Downloads/x");
        write(&download.join("AGENTS.md"), "@../../.ssh/id_ed25519\n");
        let i = load_with(None, &download, Some(home.clone()));
        assert!(!i.text.contains("PRIVATE KEY"), "{}", i.text);
        assert!(i.text.contains("is not included"), "{}", i.text);
        // The user's file imports another repository's; that one gets no `~/`, no way up.
        let team = home.join("work/team");
        write(
            &team.join("CONVENTIONS.md"),
            "Team rules.\n@~/.ssh/id_ed25519\n@../../.ssh/id_ed25519\n",
        );
        write(
            &user.join("AGENTS.md"),
            "@~/work/team/CONVENTIONS.md\n@/proc/self/environ\n",
        );
        let i = load_with(Some(&user), &download, Some(home.clone()));
        assert!(i.text.contains("Team rules."), "{}", i.text);
        assert!(!i.text.contains("PRIVATE KEY"), "{}", i.text);
        let problems = i.problems.join("\n");
        assert!(
            problems.contains("only relative paths are imported by this file"),
            "{problems}"
        );
        assert!(
            problems.contains("leads out of the importing file's folder"),
            "{problems}"
        );
        assert!(
            problems.contains("not a file of instructions"),
            "{problems}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn files_above_workdir_linked_out_of_the_repository_are_refused() {
        let (d, _work, _user) = setup();
        let top = d.path().canonicalize().unwrap();
        let repo = top.join("repo");
        let sub = repo.join("sub");
        fs::create_dir_all(repo.join(".git")).unwrap();
        fs::create_dir_all(repo.join(".claude")).unwrap();
        write(&top.join("secret.txt"), "SECRET\n");
        symlink(top.join("secret.txt"), repo.join("CLAUDE.md")).unwrap();
        symlink(top.join("secret.txt"), repo.join(".claude/CLAUDE.md")).unwrap();
        write(&repo.join("AGENTS.md"), "@../secret.txt\nTop.\n");
        write(&sub.join("AGENTS.md"), "Sub.\n");
        let i = load_with(None, &sub, None);
        assert!(!i.text.contains("SECRET"), "{}", i.text);
        assert!(
            i.text.contains("Top.") && i.text.contains("Sub."),
            "{}",
            i.text
        );
        assert!(i.problems.len() >= 3, "{:?}", i.problems);
    }
}
