//! Roles and the system prompt. A role is `roles/<name>.md`, plain Markdown used as the system prompt,
//! looked up in the layers of [`crate::layers`]. The system prompt is the role, then every enabled
//! skill, then a short note on the working folder.

use std::collections::BTreeSet;
use std::path::Path;

use crate::layers::{BUILTIN_ROLES, LayerKind, Layers};
use crate::skill::SkillRegistry;

#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error("unknown role `{name}`; available roles: {}", .available.join(", "))]
    Unknown {
        name: String,
        available: Vec<String>,
    },
    #[error("cannot read role file {path}: {cause}")]
    Read {
        path: std::path::PathBuf,
        cause: std::io::Error,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoleFile {
    pub name: String,
    pub text: String,
    pub layer: LayerKind,
}

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
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    return Ok(RoleFile {
                        name: name.to_string(),
                        text,
                        layer,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(RoleError::Read {
                        path,
                        cause: source,
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
    })
}

/// Every role name in every layer, sorted.
pub fn available_roles(layers: &Layers) -> Vec<String> {
    let mut names: BTreeSet<String> = BUILTIN_ROLES.iter().map(|(n, _)| n.to_string()).collect();
    for (_, dir) in layers.dirs() {
        if let Ok(entries) = std::fs::read_dir(dir.join("roles")) {
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
pub fn system_prompt(role: &RoleFile, skills: &SkillRegistry, workdir: &Path) -> String {
    let mut prompt = role.text.trim().to_string();
    for skill in skills.enabled() {
        prompt.push_str("\n\n## Skill: ");
        prompt.push_str(&skill.name);
        if !skill.description.is_empty() {
            prompt.push_str("\n\n");
            prompt.push_str(&skill.description);
        }
        prompt.push_str("\n\n");
        prompt.push_str(&skill.body);
    }
    prompt.push_str(&format!(
        "\n\n## Environment\n\nWorking folder: {}\nFile tools take paths relative to it.",
        workdir.display()
    ));
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(dir: &Path) -> Layers {
        Layers {
            project: dir.join("p/.new"),
            user: Some(dir.join("u/new")),
        }
    }

    #[test]
    fn builtin_roles_and_project_override() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        assert_eq!(load_role(&l, "default").unwrap().layer, LayerKind::Builtin);
        std::fs::create_dir_all(l.project.join("roles")).unwrap();
        std::fs::write(l.project.join("roles/default.md"), "mine").unwrap();
        std::fs::write(l.project.join("roles/pirate.md"), "arr").unwrap();
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
        for name in ["nope", "../default", "", ".hidden"] {
            let err = load_role(&layers(dir.path()), name).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("unknown role `{name}`; available roles: code-assistant, default")
            );
        }
    }

    #[test]
    fn prompt_holds_role_and_enabled_skills_only() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        let role = load_role(&l, "default").unwrap();
        let skills = SkillRegistry::load(&l);
        let prompt = system_prompt(&role, &skills, Path::new("/w"));
        assert!(prompt.starts_with("You are a helpful assistant"));
        assert!(prompt.contains("## Skill: code-reviewer"));
        assert!(!prompt.contains("## Skill: translator"));
        assert!(prompt.ends_with("Working folder: /w\nFile tools take paths relative to it."));
    }
}
