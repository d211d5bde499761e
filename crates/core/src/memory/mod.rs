//! Memory across sessions (CodePilot's automatic memory): Markdown files with front matter (`name`,
//! `kind`, `description`, `created`, `updated`) at user level and project level, each folder with
//! a `MEMORY.md` index ([`index`]) that goes into the system prompt. After a turn, a background
//! review ([`review`]) may write, update or delete memories; whatever is written is first filtered
//! for secrets ([`redact_secrets`]).
//!
//! Our folders are `<data dir>/new/memory/` (the user's) and `DATADIR/memory/` (the project's).
//! CodePilot's, `~/.codepilot/memory/` and `<WORKDIR>/.codepilot/memory/` (memory that travels with
//! the repository), are read beside them and never written. Every note and index is read through
//! the project's bounded, link-safe reader rooted at its own folder: a file linked out of its
//! folder is refused, and a repository's folder that is itself a link out of WORKDIR is not read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gray_matter::Matter;
use gray_matter::engine::YAML;
use serde::Deserialize;

use crate::fs::atomic;
use crate::fs::project_file::{Bounded, ProjectFiles};
use crate::layers::Layers;
use std::fs;
use std::io;
use std::sync::OnceLock;

pub mod index;
pub mod review;

/// The kinds of memory.
/// (`project_knowledge` is the seed's and CodePilot's review's name for what a project teaches
/// beyond one fact: kept as written, in its own block.)
pub const KINDS: &[&str] = &[
    "user_preference",
    "user_feedback",
    "project_fact",
    "project_knowledge",
    "reference",
];

/// The `memory` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemorySettings {
    /// `memory.enabled`: false turns learning and injection off.
    pub enabled: bool,
    /// `memory.review_model` (or `memory.model`): the model that reviews turns (the current one
    /// when absent).
    pub review_model: Option<String>,
    /// `memory.review_every` (3): the turns worth reviewing that one review request takes.
    pub review_every: usize,
    pub index_max_lines: usize,
    pub index_max_bytes: usize,
    /// `memory.review_timeout_seconds` (60).
    pub review_timeout: Duration,
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            enabled: true,
            review_model: None,
            review_every: 3,
            index_max_lines: 200,
            index_max_bytes: 25_600,
            review_timeout: Duration::from_secs(60),
        }
    }
}

/// Where a memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    User,
    Project,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::User => "user",
            Level::Project => "project",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        match s.trim() {
            "user" => Some(Level::User),
            "project" => Some(Level::Project),
            _ => None,
        }
    }
}

/// Whose folder a memory is in: ours (written by reviews, `/remember`, `/memory forget`) or
/// CodePilot's (read only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Ours,
    CodePilot,
}

/// One memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    pub name: String,
    pub kind: String,
    pub description: String,
    pub level: Level,
    pub tier: Tier,
    pub path: PathBuf,
    /// When the note was first written (`created`), as written.
    pub created: Option<String>,
}

impl Memory {
    /// The level as `/memory` shows it: `user`, `project`, or with CodePilot's folder named.
    pub fn place(&self) -> String {
        match self.tier {
            Tier::Ours => self.level.as_str().to_string(),
            Tier::CodePilot => format!("{} (.codepilot)", self.level.as_str()),
        }
    }
}

/// What went wrong writing or forgetting a memory.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("there is no user memory folder here")]
    NoUserFolder,
    #[error("the memory has no name")]
    NoName,
    /// The note is in CodePilot's folder, which `new` reads and never changes.
    #[error("`{}` is in CodePilot's folder ({}), which new does not change", .0.name, .0.path.display())]
    NotOurs(Box<Memory>),
    #[error("{}: {why}", path.display())]
    Refused { path: PathBuf, why: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl MemoryError {
    fn io(path: &Path) -> impl FnOnce(io::Error) -> MemoryError + '_ {
        move |source| MemoryError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A front-matter value that may be written as text, a number or a date: read as text.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn text(self) -> String {
        match self {
            Scalar::Text(s) => s,
            Scalar::Int(n) => n.to_string(),
            Scalar::Float(n) => n.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<Scalar>,
    /// CodePilot's notes may say `type`.
    #[serde(default, alias = "type")]
    kind: Option<String>,
    #[serde(default, alias = "summary")]
    description: Option<Scalar>,
    #[serde(default)]
    created: Option<Scalar>,
}

/// The index file of a memory folder.
pub const INDEX: &str = "MEMORY.md";
/// The folder of memories inside `~/.codepilot` and `<WORKDIR>/.codepilot`.
pub const CODEPILOT_FOLDER: &str = "memory";
/// The most read of one note (its front matter is at the top) and of an index being updated.
const NOTE_MAX_BYTES: usize = 256 * 1024;
const INDEX_MAX_BYTES: usize = 1024 * 1024;

/// The memory folders: ours, the user's (`<data dir>/new/memory/`) and the project's
/// (`DATADIR/memory/`), and CodePilot's beside them, read only.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    pub user: Option<PathBuf>,
    pub project: PathBuf,
    /// `~/.codepilot/memory/`.
    pub codepilot_user: Option<PathBuf>,
    /// `<WORKDIR>/.codepilot/memory/`, read only while it stays inside WORKDIR.
    pub codepilot_project: Option<PathBuf>,
    workdir: Option<PathBuf>,
}

/// One folder of memories.
#[derive(Debug, Clone, Copy)]
struct Folder<'a> {
    level: Level,
    tier: Tier,
    path: &'a Path,
}

impl MemoryStore {
    pub fn new(user: Option<PathBuf>, project: PathBuf) -> Self {
        MemoryStore {
            user,
            project,
            codepilot_user: None,
            codepilot_project: None,
            workdir: None,
        }
    }

    /// With CodePilot's folders read beside ours: `~/.codepilot/memory/` and the project's
    /// `<WORKDIR>/.codepilot/memory/`.
    pub fn with_codepilot(mut self, layers: &Layers) -> Self {
        self.codepilot_user = layers
            .codepilot_user
            .as_ref()
            .map(|d| d.join(CODEPILOT_FOLDER));
        self.codepilot_project = Some(layers.codepilot_project().join(CODEPILOT_FOLDER));
        self.workdir = Some(layers.workdir().to_path_buf());
        self
    }

    /// The folders there are, user first, ours before CodePilot's. The repository's folder only
    /// when it is a folder inside WORKDIR (not a link out of it).
    fn folders<'a>(&'a self) -> Vec<Folder<'a>> {
        let repository = match (&self.codepilot_project, &self.workdir) {
            (Some(dir), Some(workdir))
                if ProjectFiles::new(workdir).is_folder_within(dir, workdir) =>
            {
                Some(dir.as_path())
            }
            _ => None,
        };
        let ours: Vec<PathBuf> = [self.user.as_deref(), Some(self.project.as_path())]
            .into_iter()
            .flatten()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()))
            .collect();
        // A folder of CodePilot's that is one of ours (DATADIR put there) is read once, as ours.
        let theirs = |path: Option<&'a Path>| {
            path.filter(|p| {
                let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
                !ours.contains(&p)
            })
        };
        [
            (Level::User, Tier::Ours, self.user.as_deref()),
            (
                Level::User,
                Tier::CodePilot,
                theirs(self.codepilot_user.as_deref()),
            ),
            (Level::Project, Tier::Ours, Some(self.project.as_path())),
            (Level::Project, Tier::CodePilot, theirs(repository)),
        ]
        .into_iter()
        .filter_map(|(level, tier, path)| {
            Some(Folder {
                level,
                tier,
                path: path?,
            })
        })
        .collect()
    }

    /// The folders (for the read tools' extra roots), user first.
    pub fn dirs(&self) -> Vec<(Level, &Path)> {
        self.folders()
            .into_iter()
            .map(|f| (f.level, f.path))
            .collect()
    }

    fn dir(&self, level: Level) -> Option<&Path> {
        match level {
            Level::User => self.user.as_deref(),
            Level::Project => Some(&self.project),
        }
    }

    /// Every memory, and one line per file that cannot be read (reported, skipped).
    pub fn list(&self) -> (Vec<Memory>, Vec<String>) {
        let (mut memories, mut problems) = (Vec::new(), Vec::new());
        for folder in self.folders() {
            let Ok(entries) = fs::read_dir(folder.path) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".md") && n != INDEX && !n.starts_with('.'))
                .collect();
            names.sort();
            let files = ProjectFiles::new(folder.path);
            for name in names {
                let path = folder.path.join(&name);
                match read_note(&files, folder.path, &name)
                    .and_then(|text| parse_note(&text, folder, &path))
                {
                    Ok(m) => memories.push(m),
                    Err(why) => {
                        problems.push(format!("memory file {} skipped: {why}", path.display()))
                    }
                }
            }
            if let Err(why) = read_in(&files, folder.path, INDEX, 0) {
                problems.push(format!(
                    "memory index {} skipped: {why}",
                    folder.path.join(INDEX).display()
                ));
            }
        }
        (memories, problems)
    }

    /// The indexes for the system prompt, each cut at `max_lines` lines and `max_bytes` bytes; None
    /// when there is no memory.
    pub fn prompt_part(&self, max_lines: usize, max_bytes: usize) -> Option<String> {
        let mut text = String::new();
        for folder in self.folders() {
            let files = ProjectFiles::new(folder.path);
            let Ok(Some(read)) = read_in(&files, folder.path, INDEX, max_bytes) else {
                continue;
            };
            let more = read.truncated;
            let mut index = read.text();
            if more {
                // The last line read is cut: it is left out with the rest.
                index.truncate(index.rfind('\n').map_or(0, |n| n + 1));
            }
            let mut body = String::new();
            let mut cut = more;
            for (n, line) in index.lines().enumerate() {
                if n >= max_lines || body.len() + line.len() + 1 > max_bytes {
                    cut = true;
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            if cut {
                body.push_str("[… the rest of the index is left out]\n");
            }
            if body.trim().is_empty() {
                continue;
            }
            let about = match (folder.level, folder.tier) {
                (Level::User, Tier::Ours) => "the user",
                (Level::Project, Tier::Ours) => "this project",
                (Level::User, Tier::CodePilot) => "the user, kept by CodePilot",
                (Level::Project, Tier::CodePilot) => {
                    "this project, kept in the repository's .codepilot/memory"
                }
            };
            text.push_str(&format!(
                "\n### About {about} (files in {})\n\n{}",
                folder.path.display(),
                body
            ));
        }
        (!text.is_empty()).then(|| {
            format!(
                "\n\n## Memory\n\nWhat you remember from earlier sessions. Each entry is a file; read one with read_file when it matters to the task.\n{text}"
            )
        })
    }

    /// Writes (or replaces) a memory, its text filtered for secrets first, and updates its line
    /// in the index. A replaced note keeps its `created` date.
    pub fn write(
        &self,
        level: Level,
        name: &str,
        kind: &str,
        description: &str,
        content: &str,
        secrets: &[String],
    ) -> Result<PathBuf, MemoryError> {
        let dir = self.dir(level).ok_or(MemoryError::NoUserFolder)?;
        // Each part is redacted before anything is made of it: the file's name, the YAML (quoted
        // after redacting, so a redaction at the start stays valid), the line on screen.
        let (name, description, content) = (
            redact_secrets(name, secrets),
            redact_secrets(description, secrets),
            redact_secrets(content, secrets),
        );
        let (name, description, content) = (name.as_str(), description.as_str(), content.as_str());
        let slug = slug(name).ok_or(MemoryError::NoName)?;
        let kind = if KINDS.contains(&kind.trim()) {
            kind.trim()
        } else {
            "reference"
        };
        let file = format!("{slug}.md");
        let path = dir.join(&file);
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let created = created_of(dir, &file).unwrap_or_else(|| now.clone());
        let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let (name, description) = (one_line(name), one_line(description));
        let text = format!(
            "---\nname: {}\nkind: {kind}\ndescription: {}\ncreated: {}\nupdated: {}\n---\n\n{}\n",
            yaml_scalar(&name),
            yaml_scalar(&description),
            yaml_scalar(&one_line(&created)),
            yaml_scalar(&now),
            content.trim()
        );
        let text = redact_secrets(&text, secrets);
        atomic::create_private_dir(dir).map_err(MemoryError::io(dir))?;
        // The index is read before the note is written: one that cannot be updated changes nothing.
        let old = read_index(dir)?;
        write_private(&path, &text).map_err(MemoryError::io(&path))?;
        let line = index::entry_line(kind, &file, &description);
        let new = index::update(&old, &file, Some((kind, line)));
        let index_path = dir.join(INDEX);
        write_private(&index_path, &new).map_err(MemoryError::io(&index_path))?;
        Ok(path)
    }

    /// Whether the index of `level`'s folder (ours) has a note of this name: what an `update`
    /// may change (one of a name not there is no update).
    pub fn indexed(&self, level: Level, name: &str) -> bool {
        let (Some(dir), Some(slug)) = (self.dir(level), slug(name)) else {
            return false;
        };
        read_index(dir).is_ok_and(|index| index.contains(&format!("]({slug}.md)")))
    }

    /// Moves a memory of ours to its folder's `.trash/`; None when there is none of that name. One
    /// only in CodePilot's folders is not ours to move.
    pub fn forget(&self, name: &str) -> Result<Option<Memory>, MemoryError> {
        let (memories, _) = self.list();
        let target = slug(name);
        let named = |m: &&Memory| m.name == name || Some(file_stem(&m.path)) == target;
        let Some(m) = memories
            .iter()
            .find(|m| m.tier == Tier::Ours && named(m))
            .cloned()
        else {
            return match memories.into_iter().find(|m| named(&m)) {
                Some(theirs) => Err(MemoryError::NotOurs(Box::new(theirs))),
                None => Ok(None),
            };
        };
        let dir = m.path.parent().unwrap_or(Path::new("."));
        let old = read_index(dir)?;
        let trash = dir.join(".trash");
        atomic::create_private_dir(&trash).map_err(MemoryError::io(&trash))?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        let to = trash.join(format!("{}-{stamp}.md", file_stem(&m.path)));
        fs::rename(&m.path, to).map_err(MemoryError::io(&m.path))?;
        let file = m.path.file_name().unwrap_or_default().to_string_lossy();
        let new = index::update(&old, &file, None);
        let index_path = dir.join(INDEX);
        write_private(&index_path, &new).map_err(MemoryError::io(&index_path))?;
        Ok(Some(m))
    }
}

/// The index of one of our folders as it is now (empty when there is none yet), whole.
fn read_index(dir: &Path) -> Result<String, MemoryError> {
    let path = dir.join(INDEX);
    let refused = |why: String| MemoryError::Refused {
        path: path.clone(),
        why,
    };
    match read_in(&ProjectFiles::new(dir), dir, INDEX, INDEX_MAX_BYTES).map_err(refused)? {
        None => Ok(String::new()),
        Some(read) => read
            .whole_text(&path, INDEX_MAX_BYTES)
            .map_err(|why| MemoryError::Refused {
                path: path.clone(),
                why,
            }),
    }
}

/// The `created` date of a note about to be replaced: its front matter's, or for a note written
/// before there was one, when the file was made (its last change where that is not kept).
fn created_of(dir: &Path, file: &str) -> Option<String> {
    let text = read_note(&ProjectFiles::new(dir), dir, file).ok()?;
    if let Some(created) = front_matter(&text)
        .ok()
        .and_then(|f| f.created)
        .map(Scalar::text)
        .filter(|c| !c.trim().is_empty())
    {
        return Some(created);
    }
    let meta = fs::symlink_metadata(dir.join(file)).ok()?;
    let made = meta.created().or_else(|_| meta.modified()).ok()?;
    Some(
        chrono::DateTime::<chrono::Utc>::from(made)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

/// Reads `name` in `folder` with the bounded, link-safe reader rooted at the folder.
fn read_in(
    files: &ProjectFiles,
    folder: &Path,
    name: &str,
    limit: usize,
) -> Result<Option<Bounded>, String> {
    let path = folder.join(name);
    // Said plainly before the reader refuses it in its own words.
    if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        let inside = match (path.canonicalize(), folder.canonicalize()) {
            (Ok(target), Ok(folder)) => target.starts_with(&folder),
            _ => false,
        };
        if !inside {
            return Err(format!(
                "{} is refused: it is a link that leads out of its memory folder",
                path.display()
            ));
        }
    }
    files.read(Path::new(name), limit)
}

/// A note's text, whole or cut at [`NOTE_MAX_BYTES`] (its front matter is at the top).
fn read_note(files: &ProjectFiles, folder: &Path, name: &str) -> Result<String, String> {
    match read_in(files, folder, name, NOTE_MAX_BYTES)? {
        Some(read) => Ok(read.text()),
        None => Err("it is not there".to_string()),
    }
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// A file name for a memory: lowercase letters, digits and `-`, at most 60; None when nothing is
/// left.
pub fn slug(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    (!out.is_empty()).then_some(out)
}

/// A one-line YAML scalar, quoted when it needs to be.
fn yaml_scalar(s: &str) -> String {
    if s.is_empty()
        || s.contains([':', '#', '"', '\'', '[', ']', '{', '}', ','])
        || s.starts_with(['-', '?', '!', '&', '*', '|', '>', '%', '@', '`', ' '])
    {
        serde_json::to_string(s).unwrap_or_default()
    } else {
        s.to_string()
    }
}

/// A note's front matter, or why it has none that can be read.
fn front_matter(text: &str) -> Result<FrontMatter, String> {
    Matter::<YAML>::new()
        .parse::<FrontMatter>(text)
        .map_err(|e| format!("its front matter is not valid YAML ({e})"))?
        .data
        .ok_or_else(|| "it has no front matter".to_string())
}

fn parse_note(text: &str, folder: Folder<'_>, path: &Path) -> Result<Memory, String> {
    let front = front_matter(text)?;
    let name = front
        .name
        .map(|n| n.text().trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "its front matter has no `name`".to_string())?;
    Ok(Memory {
        name,
        kind: front.kind.unwrap_or_else(|| "reference".into()),
        description: front.description.map(Scalar::text).unwrap_or_default(),
        level: folder.level,
        tier: folder.tier,
        path: path.to_path_buf(),
        created: front.created.map(Scalar::text),
    })
}

/// Writes a file readable by the user only, atomically.
fn write_private(path: &Path, text: &str) -> io::Result<()> {
    atomic::write_private(path, text.as_bytes())
}

/// Patterns of secrets in common formats: provider keys, cloud keys, tokens, private keys, JWTs,
/// bearer tokens, `password = …`-style assignments and credentials in URLs.
const SECRET_PATTERNS: &[&str] = &[
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    r"-----BEGIN PGP PRIVATE KEY BLOCK-----[\s\S]*?(-----END PGP PRIVATE KEY BLOCK-----|\z)",
    r"\b(sk|pk|rk)_(live|test)_[A-Za-z0-9]{10,}",
    r"\bnpm_[A-Za-z0-9]{30,}",
    r"\bhf_[A-Za-z0-9]{30,}",
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
    r"(?i)\bbasic\s+[A-Za-z0-9+/]{8,}=*",
    r"\bsk-(ant-)?[A-Za-z0-9_\-]{16,}",
    r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bglpat-[A-Za-z0-9_\-]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
    r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bAIza[0-9A-Za-z_\-]{30,}",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{12,}=*",
    r"(?i)\b[a-z0-9_]*(password|passwd|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)[a-z0-9_]*(\s*[:=]\s*|\s+is\s+)[^\s,;]{4,}",
    r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:[^\s/@]+@",
];

/// `text` with every secret-looking value replaced by `[redacted]`: the patterns above, and the
/// values given (those of the environment's key variables).
pub fn redact_secrets(text: &str, values: &[String]) -> String {
    use grep_matcher::Matcher;
    let mut out = text.to_string();
    for value in values.iter().filter(|v| v.len() >= 8) {
        out = out.replace(value.as_str(), "[redacted]");
    }
    static MATCHERS: OnceLock<Vec<grep_regex::RegexMatcher>> = OnceLock::new();
    let matchers = MATCHERS.get_or_init(|| {
        SECRET_PATTERNS
            .iter()
            .map(|p| {
                grep_regex::RegexMatcherBuilder::new()
                    .multi_line(true)
                    .build(p)
                    .expect("the secret patterns are valid")
            })
            .collect()
    });
    for matcher in matchers {
        let mut spans = Vec::new();
        let _ = matcher.find_iter(out.as_bytes(), |m| {
            spans.push((m.start(), m.end()));
            true
        });
        for (start, end) in spans.into_iter().rev() {
            out.replace_range(start..end, "[redacted]");
        }
    }
    out
}

#[cfg(test)]
mod tests;
