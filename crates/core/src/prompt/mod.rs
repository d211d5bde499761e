//! Roles and the system prompt. A role is `roles/<name>.md`, plain Markdown used as the system prompt,
//! looked up in the layers of [`crate::layers`]. The system prompt is the role, then every enabled
//! skill, then a short note on the working folder.

use std::collections::BTreeSet;
use std::path::Path;

pub mod agents;

use crate::fs::project_file;
use crate::fs::project_file::ProjectFiles;
use crate::layers::{BUILTIN_ROLES, LayerKind, Layers};
use crate::skill::{SkillRegistry, Tier, find_git_dir, operating_system};
use std::fs;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error(
        "unknown role `{name}`; looked for {name}.md in {} and the built-in roles; available roles: {}",
        .searched.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        .available.join(", ")
    )]
    Unknown {
        name: String,
        available: Vec<String>,
        /// Every `roles/` folder looked in, nearest first.
        searched: Vec<PathBuf>,
    },
    #[error("cannot read role file {path}: {cause}")]
    Read { path: PathBuf, cause: io::Error },
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoleFile {
    pub name: String,
    pub text: String,
    pub layer: LayerKind,
}

/// The largest role file read (a role is the whole system prompt's start).
pub const MAX_ROLE_BYTES: usize = 256 * 1024;

/// Loads a role by name, nearest layer first.
pub fn load_role(layers: &Layers, name: &str) -> Result<RoleFile, RoleError> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if valid {
        for (layer, dir) in layers.dirs() {
            let path = dir.join("roles").join(format!("{name}.md"));
            // A project's role may not be a link out of it (the folder `new` runs in is a
            // project's too); no role is read past the limit.
            let root = if dir == layers.project {
                layers.workdir()
            } else {
                dir
            };
            let got = match layer {
                LayerKind::Project => ProjectFiles::new(root).read(&path, MAX_ROLE_BYTES),
                _ => project_file::read_own(&path, MAX_ROLE_BYTES),
            };
            match got.and_then(|r| r.map(|r| r.whole_text(&path, MAX_ROLE_BYTES)).transpose()) {
                Ok(Some(text)) => {
                    return Ok(RoleFile {
                        name: name.to_string(),
                        text,
                        layer,
                    });
                }
                Ok(None) => {}
                Err(why) => {
                    return Err(RoleError::Read {
                        path,
                        cause: io::Error::other(why),
                    });
                }
            }
        }
        if let Some((_, text)) = BUILTIN_ROLES.iter().find(|(n, _)| *n == name) {
            return Ok(RoleFile {
                name: name.to_string(),
                text: text.to_string(),
                layer: LayerKind::Builtin,
            });
        }
    }
    Err(RoleError::Unknown {
        name: name.to_string(),
        available: available_roles(layers),
        searched: layers.dirs().iter().map(|(_, d)| d.join("roles")).collect(),
    })
}

/// Every role name in every layer, sorted.
pub fn available_roles(layers: &Layers) -> Vec<String> {
    let mut names: BTreeSet<String> = BUILTIN_ROLES.iter().map(|(n, _)| n.to_string()).collect();
    for (_, dir) in layers.dirs() {
        if let Ok(entries) = fs::read_dir(dir.join("roles")) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|x| x == "md")
                    && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                {
                    names.insert(stem.to_string());
                }
            }
        }
    }
    names.into_iter().collect()
}

/// The system prompt: the role, every enabled skill, and where the tools work.
pub fn system_prompt(
    role: &RoleFile,
    instructions: &str,
    skills: &SkillRegistry,
    workdir: &Path,
) -> String {
    system_prompt_parts(role, instructions, skills, workdir)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// The system prompt by source (`role default`, `AGENTS.md`, `skill <name>`, `environment`):
/// the texts, joined, are the system prompt.
pub fn system_prompt_parts(
    role: &RoleFile,
    instructions: &str,
    skills: &SkillRegistry,
    workdir: &Path,
) -> Vec<(String, String)> {
    let mut parts = vec![(format!("role {}", role.name), role.text.trim().to_string())];
    if !instructions.trim().is_empty() {
        parts.push((
            "AGENTS.md".to_string(),
            format!(
                "\n\n# Instructions from the project and the user (AGENTS.md)\n\n{}",
                instructions.trim()
            ),
        ));
    }
    for skill in skills.enabled() {
        let mut text = format!("\n\n## Skill: {}", skill.name);
        if !skill.description.is_empty() {
            text.push_str("\n\n");
            text.push_str(&skill.description);
        }
        text.push_str("\n\n");
        text.push_str(&skill.body);
        parts.push((format!("skill {}", skill.name), text));
    }
    let index: Vec<String> = skills
        .on_demand()
        .map(|s| {
            // Where it comes from: a project's skill is the project's word, not the user's. A
            // built-in one goes unmarked (it is new's own, and the index is sent every request).
            let mut line = format!("- `{}`", s.name);
            if s.tier != Tier::Builtin {
                line.push_str(&format!(" ({})", s.tier.label()));
            }
            if !s.description.is_empty() {
                line.push_str(": ");
                line.push_str(&s.description.replace('\n', " "));
            }
            line
        })
        .collect();
    if !index.is_empty() {
        parts.push((
            "skills index".to_string(),
            format!("\n\n## Skills\n{}", index.join("\n")),
        ));
    }
    parts.push((
        "environment".to_string(),
        format!("\n\n{}", environment(workdir)),
    ));
    parts
}

/// What the model should know of where it works: the folder, the operating system, today's date,
/// and for a git repository its branch.
pub fn environment(workdir: &Path) -> String {
    let mut text = format!(
        "## Environment\n\nWorking folder: {} (file tools take paths relative to it, and cannot leave it)\nOperating system: {}\nToday's date: {}",
        workdir.display(),
        operating_system(),
        chrono::Local::now().format("%Y-%m-%d (%A)")
    );
    if let Some(git) = git_state(workdir) {
        text.push_str("\nGit: ");
        text.push_str(&git);
    }
    text
}

/// `branch main` (or `detached HEAD at 0123456789ab`), read from `.git` without running git: the
/// first request waits for nothing git does. Whether the work tree has changes is left to the
/// model (`git status`): asking git before every session's first request cost more than a
/// one-shot's whole start-up. None outside a repository.
fn git_state(workdir: &Path) -> Option<String> {
    let git_dir = find_git_dir(workdir)?;
    let head = fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    Some(match head.strip_prefix("ref: refs/heads/") {
        Some(branch) => format!("branch {branch}"),
        None => format!("detached HEAD at {}", head.get(..12).unwrap_or(head)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skill::SkillSettings;
    use std::env::consts::OS;
    use std::fs;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;
    use std::process::Command;

    fn layers(dir: &Path) -> Layers {
        Layers::at(&dir.join("p"), &dir.join("u"))
    }

    #[test]
    fn the_environment_names_os_date_folder_and_git_state() {
        let dir = tempfile::tempdir().unwrap();
        let text = environment(dir.path());
        assert!(text.contains(&format!("Working folder: {} (", dir.path().display())));
        assert!(text.contains(&format!("Operating system: {}", OS)));
        let today = chrono::Local::now().format("%Y-%m-%d").to_string();
        assert!(text.contains(&format!("Today's date: {today}")), "{text}");
        assert!(!text.contains("Git:"), "not a repository: {text}");
        // A repository, read from .git: the branch without git; a detached HEAD; a worktree file.
        fs::create_dir_all(dir.path().join(".git")).unwrap();
        fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir_all(&sub).unwrap();
        assert!(
            environment(&sub).contains("Git: branch feature/x"),
            "{}",
            environment(&sub)
        );
        fs::write(dir.path().join(".git/HEAD"), "0123456789abcdef0123\n").unwrap();
        assert!(environment(dir.path()).contains("Git: detached HEAD at 0123456789ab"));
        let other = tempfile::tempdir().unwrap();
        fs::write(
            other.path().join(".git"),
            format!("gitdir: {}\n", dir.path().join(".git").display()),
        )
        .unwrap();
        assert!(environment(other.path()).contains("Git: detached HEAD"));
    }

    #[test]
    fn a_real_repository_gives_its_branch_and_no_work_tree_state() {
        let dir = tempfile::tempdir().unwrap();
        let Ok(out) = Command::new("git")
            .args(["init", "-q", "-b", "trunk"])
            .current_dir(dir.path())
            .output()
        else {
            return; // without git, the `.git` read alone is tested above
        };
        assert!(out.status.success());
        fs::write(dir.path().join("a.txt"), "1").unwrap();
        let text = environment(dir.path());
        assert!(text.ends_with("\nGit: branch trunk"), "{text}");
    }

    #[test]
    fn builtin_roles_and_project_override() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        assert_eq!(load_role(&l, "default").unwrap().layer, LayerKind::Builtin);
        fs::create_dir_all(l.project.join("roles")).unwrap();
        fs::write(l.project.join("roles/default.md"), "mine").unwrap();
        fs::write(l.project.join("roles/pirate.md"), "arr").unwrap();
        let role = load_role(&l, "default").unwrap();
        assert_eq!(
            (role.text.as_str(), role.layer),
            ("mine", LayerKind::Project)
        );
        assert_eq!(available_roles(&l), ["code-assistant", "default", "pirate"]);
    }

    #[test]
    fn unknown_and_path_like_roles_list_the_available_ones() {
        let dir = tempfile::tempdir().unwrap();
        let searched = format!(
            "{}, {}",
            dir.path().join("p").join(".new").join("roles").display(),
            dir.path().join("u").join("new").join("roles").display()
        );
        for name in ["nope", "../default", "", ".hidden"] {
            let err = load_role(&layers(dir.path()), name).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "unknown role `{name}`; looked for {name}.md in {searched} and the built-in roles; available roles: code-assistant, default"
                )
            );
        }
    }

    /// The seed's layout: `roles/ROLE.md` in the folder `new` runs in is a role, after `.new/`'s,
    /// read through the reader of project files (a link out of that folder is refused).
    #[cfg(unix)]
    #[test]
    fn a_role_in_the_folder_new_runs_in_is_read_after_new_s() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("here");
        let mut l = layers(dir.path());
        l.here = Some(here.clone());
        fs::create_dir_all(here.join("roles")).unwrap();
        fs::write(here.join("roles/pirate.md"), "Arr.").unwrap();
        let role = load_role(&l, "pirate").unwrap();
        assert_eq!(
            (role.text.as_str(), role.layer),
            ("Arr.", LayerKind::Project)
        );
        assert!(available_roles(&l).contains(&"pirate".to_string()));
        fs::create_dir_all(l.project.join("roles")).unwrap();
        fs::write(l.project.join("roles/pirate.md"), "Nearer.").unwrap();
        assert_eq!(load_role(&l, "pirate").unwrap().text, "Nearer.");
        fs::remove_file(l.project.join("roles/pirate.md")).unwrap();
        fs::write(dir.path().join("secret.md"), "outside").unwrap();
        fs::remove_file(here.join("roles/pirate.md")).unwrap();
        symlink(dir.path().join("secret.md"), here.join("roles/pirate.md")).unwrap();
        assert!(matches!(
            load_role(&l, "pirate"),
            Err(RoleError::Read { .. })
        ));
        let err = load_role(&l, "nobody").unwrap_err().to_string();
        assert!(
            err.contains(&here.join("roles").display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn prompt_holds_role_and_enabled_skills_only() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        let role = load_role(&l, "default").unwrap();
        let skills = SkillRegistry::load(&l);
        let prompt = system_prompt(&role, "", &skills, Path::new("/w"));
        assert!(prompt.starts_with("You are a helpful assistant"));
        // `new`'s own skills are offered on demand: listed, not injected; the example skills
        // ship off (issue 44): a new user's prompt does not name them.
        assert!(prompt.contains("\n- `codebase-overview`: "), "{prompt}");
        assert!(!prompt.contains("code-reviewer"), "{prompt}");
        assert!(!prompt.contains("data-analyst"), "{prompt}");
        assert!(!prompt.contains("## Skill: "), "{prompt}");
        // A flat skill of the user's own is injected; one turned on for the project too.
        fs::create_dir_all(l.project.join("skills")).unwrap();
        fs::write(
            l.project.join("skills/mine.md"),
            "---\nname: mine\ndescription: d\n---\nDo it my way.\n",
        )
        .unwrap();
        let settings = SkillSettings {
            overrides: [("translator".to_string(), true)].into(),
            ..SkillSettings::default()
        };
        let skills = SkillRegistry::load_with(&l, &settings);
        let prompt = system_prompt(&role, "", &skills, Path::new("/w"));
        assert!(
            prompt.contains("## Skill: mine\n\nd\n\nDo it my way."),
            "{prompt}"
        );
        assert!(prompt.contains("## Skill: translator"), "{prompt}");
        assert!(!prompt.contains("## Skill: code-reviewer"), "{prompt}");
        // Without skills on demand, an example skill turned on is injected as before.
        let off = SkillSettings {
            on_demand: false,
            overrides: [("code-reviewer".to_string(), true)].into(),
            ..SkillSettings::default()
        };
        let prompt = system_prompt(
            &role,
            "",
            &SkillRegistry::load_with(&l, &off),
            Path::new("/w"),
        );
        assert!(prompt.contains("## Skill: code-reviewer"), "{prompt}");
        assert!(!prompt.contains("## Skills"), "{prompt}");
        assert!(prompt.contains("## Environment\n\nWorking folder: /w (file tools take paths relative to it, and cannot leave it)\nOperating system: "));
    }
}
