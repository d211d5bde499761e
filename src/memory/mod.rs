//! Memory across sessions (CodePilot's automatic memory): Markdown files with front matter (`name`,
//! `kind`, `description`) at user level and project level, each folder with a `MEMORY.md` index that
//! goes into the system prompt. After a turn, a background review ([`review`]) may write, update or
//! delete memories; whatever is written is first filtered for secrets ([`redact_secrets`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gray_matter::Matter;
use gray_matter::engine::YAML;
use serde::Deserialize;

pub mod review;

/// The kinds of memory.
pub const KINDS: &[&str] = &[
    "user_preference",
    "user_feedback",
    "project_fact",
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

/// One memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    pub name: String,
    pub kind: String,
    pub description: String,
    pub level: Level,
    pub path: PathBuf,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// The index file of a memory folder.
pub const INDEX: &str = "MEMORY.md";

/// The memory folders: the user's (`<data dir>/new/memory/`) and the project's (`DATADIR/memory/`).
#[derive(Debug, Clone)]
pub struct MemoryStore {
    pub user: Option<PathBuf>,
    pub project: PathBuf,
}

impl MemoryStore {
    pub fn new(user: Option<PathBuf>, project: PathBuf) -> Self {
        MemoryStore { user, project }
    }

    /// The folders, user first.
    pub fn dirs(&self) -> Vec<(Level, &Path)> {
        let mut dirs = Vec::new();
        if let Some(user) = &self.user {
            dirs.push((Level::User, user.as_path()));
        }
        dirs.push((Level::Project, self.project.as_path()));
        dirs
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
        for (level, dir) in self.dirs() {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "md")
                        && p.file_name().is_some_and(|n| n != INDEX)
                        && p.is_file()
                })
                .collect();
            paths.sort();
            for path in paths {
                match read_memory(&path, level) {
                    Ok(m) => memories.push(m),
                    Err(why) => {
                        problems.push(format!("memory file {} skipped: {why}", path.display()))
                    }
                }
            }
        }
        (memories, problems)
    }

    /// The indexes for the system prompt, each cut at `max_lines` lines and `max_bytes` bytes; None
    /// when there is no memory.
    pub fn prompt_part(&self, max_lines: usize, max_bytes: usize) -> Option<String> {
        let mut text = String::new();
        for (level, dir) in self.dirs() {
            let Ok(index) = std::fs::read_to_string(dir.join(INDEX)) else {
                continue;
            };
            let mut body = String::new();
            for (n, line) in index.lines().enumerate() {
                if n >= max_lines || body.len() + line.len() + 1 > max_bytes {
                    body.push_str("[… the rest of the index is left out]\n");
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            if body.trim().is_empty() {
                continue;
            }
            let about = match level {
                Level::User => "the user",
                Level::Project => "this project",
            };
            text.push_str(&format!(
                "\n### About {about} (files in {})\n\n{}",
                dir.display(),
                body
            ));
        }
        (!text.is_empty()).then(|| {
            format!(
                "\n\n## Memory\n\nWhat you remember from earlier sessions. Each entry is a file; read one with read_file when it matters to the task.\n{text}"
            )
        })
    }

    /// Writes (or replaces) a memory, its text filtered for secrets first, and updates the index.
    pub fn write(
        &self,
        level: Level,
        name: &str,
        kind: &str,
        description: &str,
        content: &str,
        secrets: &[String],
    ) -> std::io::Result<PathBuf> {
        let dir = self
            .dir(level)
            .ok_or_else(|| std::io::Error::other("there is no user memory folder here"))?;
        // Each part is redacted before anything is made of it: the file's name, the YAML (quoted
        // after redacting, so a redaction at the start stays valid), the line on screen.
        let (name, description, content) = (
            redact_secrets(name, secrets),
            redact_secrets(description, secrets),
            redact_secrets(content, secrets),
        );
        let (name, description, content) = (name.as_str(), description.as_str(), content.as_str());
        let slug = slug(name).ok_or_else(|| std::io::Error::other("the memory has no name"))?;
        let kind = if KINDS.contains(&kind.trim()) {
            kind.trim()
        } else {
            "reference"
        };
        let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let text = format!(
            "---\nname: {}\nkind: {kind}\ndescription: {}\n---\n\n{}\n",
            yaml_scalar(&one_line(name)),
            yaml_scalar(&one_line(description)),
            content.trim()
        );
        let text = redact_secrets(&text, secrets);
        crate::session::error::create_private_dir(dir)?;
        let path = dir.join(format!("{slug}.md"));
        write_private(&path, &text)?;
        self.reindex(level)?;
        Ok(path)
    }

    /// Moves a memory to the folder's `.trash/`; false when there is none of that name.
    pub fn forget(&self, name: &str) -> std::io::Result<Option<Memory>> {
        let (memories, _) = self.list();
        let target = slug(name);
        let Some(m) = memories
            .into_iter()
            .find(|m| m.name == name || Some(file_stem(&m.path)) == target)
        else {
            return Ok(None);
        };
        let dir = m.path.parent().unwrap_or(Path::new("."));
        let trash = dir.join(".trash");
        crate::session::error::create_private_dir(&trash)?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        let to = trash.join(format!("{}-{stamp}.md", file_stem(&m.path)));
        std::fs::rename(&m.path, to)?;
        self.reindex(m.level)?;
        Ok(Some(m))
    }

    /// Writes a folder's `MEMORY.md` from its memory files.
    fn reindex(&self, level: Level) -> std::io::Result<()> {
        let Some(dir) = self.dir(level) else {
            return Ok(());
        };
        let (memories, _) = self.list();
        let mut text = String::from("# Memory\n\n");
        for m in memories.iter().filter(|m| m.level == level) {
            let file = m.path.file_name().unwrap_or_default().to_string_lossy();
            text.push_str(&format!(
                "- [{}]({file}) ({}): {}\n",
                m.name, m.kind, m.description
            ));
        }
        write_private(&dir.join(INDEX), &text)
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

fn read_memory(path: &Path, level: Level) -> Result<Memory, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let parsed = Matter::<YAML>::new()
        .parse::<FrontMatter>(&text)
        .map_err(|e| format!("its front matter is not valid YAML ({e})"))?;
    let front = parsed
        .data
        .ok_or_else(|| "it has no front matter".to_string())?;
    let name = front
        .name
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "its front matter has no `name`".to_string())?;
    Ok(Memory {
        name,
        kind: front.kind.unwrap_or_else(|| "reference".into()),
        description: front.description.unwrap_or_default(),
        level,
        path: path.to_path_buf(),
    })
}

/// Writes a file readable by the user only, atomically.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    crate::layers::write_private(path, text.as_bytes())
}

/// The secret-looking values of the environment: those of variables named like keys, tokens,
/// secrets and passwords (8 characters or more), for [`redact_secrets`].
pub fn secret_values(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    vars.filter(|(name, value)| {
        let name = name.to_ascii_uppercase();
        value.len() >= 8
            && ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
                .iter()
                .any(|w| name.contains(w))
    })
    .map(|(_, value)| value)
    .collect()
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
    static MATCHERS: std::sync::OnceLock<Vec<grep_regex::RegexMatcher>> =
        std::sync::OnceLock::new();
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
