//! Where files live: roles, skills and configuration are looked up nearest first, in the project's
//! `<WORKDIR>/.new/`, the user's `<config dir>/new/`, then the built-in files compiled into the
//! binary; CodePilot's folders are read beside ours; the instruction files a project may hold.
//! And whose a setting is ([`Origin`]): the user's, or the project's.

use std::env;
use std::path::{Path, PathBuf};

/// Built-in roles: (name, text).
pub const BUILTIN_ROLES: &[(&str, &str)] = &[
    ("default", include_str!("../../../roles/default.md")),
    (
        "code-assistant",
        include_str!("../../../roles/code-assistant.md"),
    ),
];

/// Built-in skills: (file name, text).
pub const BUILTIN_SKILLS: &[(&str, &str)] = &[
    (
        "code-reviewer.md",
        include_str!("../../../skills/code-reviewer.md"),
    ),
    (
        "data-analyst.md",
        include_str!("../../../skills/data-analyst.md"),
    ),
    (
        "translator.md",
        include_str!("../../../skills/translator.md"),
    ),
];

/// The folder of CodePilot's files, in the home folder and in a project.
pub const CODEPILOT_FOLDER: &str = ".codepilot";

/// The instruction files a project folder may hold (the writes that must ask, the OS sandbox's
/// protected names).
pub const INSTRUCTION_FILES: &[&str] = &[
    "AGENTS.md",
    "AGENTS.override.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
];

/// The two folders searched before the built-in files.
#[derive(Debug, Clone)]
pub struct Layers {
    /// `<WORKDIR>/.new`
    pub project: PathBuf,
    /// `<config dir>/new`, when the platform has a config dir.
    pub user: Option<PathBuf>,
    /// CodePilot's folder of the user's, `~/.codepilot`, read beside `user` (farther than it).
    pub codepilot_user: Option<PathBuf>,
    /// The folder `new` runs in, when it is not WORKDIR's `.new`: its `roles/` and `skills/`
    /// are read after `.new/`'s, as the seed reads `roles/ROLE.md` and `skills/*.md` relative to
    /// where the program runs (through the reader of project files, as a project's own).
    pub here: Option<PathBuf>,
}

impl Layers {
    pub fn new(workdir: &Path) -> Self {
        Layers {
            project: workdir.join(".new"),
            user: user_dir(),
            codepilot_user: dirs::home_dir().map(|h| h.join(CODEPILOT_FOLDER)),
            here: env::current_dir().ok().and_then(|d| d.canonicalize().ok()),
        }
    }

    /// The project's folder (WORKDIR), the parent of `project`.
    pub fn workdir(&self) -> &Path {
        self.project.parent().unwrap_or(&self.project)
    }

    /// CodePilot's folder of the project's, `<WORKDIR>/.codepilot`, read beside `project`.
    pub fn codepilot_project(&self) -> PathBuf {
        self.workdir().join(CODEPILOT_FOLDER)
    }

    /// The layers of a project in `workdir` and a user whose home is `home` (where the tests put
    /// them): `workdir/.new`, `home/new` as the config folder, `home/.codepilot`.
    #[cfg(test)]
    pub fn at(workdir: &Path, home: &Path) -> Self {
        Layers {
            project: workdir.join(".new"),
            user: Some(home.join("new")),
            codepilot_user: Some(home.join(CODEPILOT_FOLDER)),
            here: None,
        }
    }

    /// The on-disk layers, nearest first: `.new`, the folder `new` runs in, the user's.
    pub fn dirs(&self) -> Vec<(LayerKind, &Path)> {
        let mut dirs = vec![(LayerKind::Project, self.project.as_path())];
        if let Some(here) = &self.here {
            dirs.push((LayerKind::Project, here.as_path()));
        }
        if let Some(user) = &self.user {
            dirs.push((LayerKind::User, user.as_path()));
        }
        dirs
    }
}

/// `<config dir>/new`, e.g. `~/.config/new` on Linux.
pub fn user_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("new"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    Project,
    User,
    Builtin,
}

impl LayerKind {
    pub fn label(self) -> &'static str {
        match self {
            LayerKind::Project => "project",
            LayerKind::User => "user",
            LayerKind::Builtin => "built-in",
        }
    }
}

/// Whose a setting is (a rule, an MCP entry, a hook): the user's own are trusted; the project's
/// need the user's trust first, and may narrow but not widen what the user's allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    User,
    Project,
}

impl Origin {
    /// `user` or `project`, as the views say it.
    pub fn label(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Project => "project",
        }
    }
}
