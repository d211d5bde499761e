//! Skills: Markdown prompt modules with YAML front matter (`name` required and unique, `description`,
//! `enabled` defaulting to true). Enabled skills' bodies are appended to the system prompt. Skills
//! come from three layers (see [`crate::layers`]); a nearer layer overrides a farther one by name. A
//! broken file is reported and skipped, never fatal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gray_matter::Matter;
use gray_matter::engine::YAML;
use serde::Deserialize;

use crate::layers::{BUILTIN_SKILLS, LayerKind, Layers};

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub body: String,
    pub layer: LayerKind,
    /// The file it came from; the built-in file name for built-in skills.
    pub source: PathBuf,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
}

#[derive(Debug, Default, Clone)]
pub struct SkillRegistry {
    /// By name, so listing and the prompt are in a stable order.
    skills: BTreeMap<String, Skill>,
    /// One line per broken or duplicate skill file.
    pub problems: Vec<String>,
}

impl SkillRegistry {
    pub fn load(layers: &Layers) -> Self {
        let mut registry = SkillRegistry::default();
        // Farthest first, so that nearer layers override by name.
        for (file, text) in BUILTIN_SKILLS {
            registry.add_layer_file(LayerKind::Builtin, Path::new(file), text);
        }
        for (kind, dir) in layers.dirs().into_iter().rev() {
            let dir = dir.join("skills");
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect();
            paths.sort();
            for path in paths {
                match std::fs::read_to_string(&path) {
                    Ok(text) => registry.add_layer_file(kind, &path, &text),
                    Err(e) => registry
                        .problems
                        .push(format!("skill file {} skipped: {e}", path.display())),
                }
            }
        }
        registry
    }

    fn add_layer_file(&mut self, layer: LayerKind, path: &Path, text: &str) {
        match parse_skill(text) {
            Ok((name, description, enabled, body)) => {
                if let Some(existing) = self.skills.get(&name)
                    && existing.layer == layer
                {
                    self.problems.push(format!(
                        "skill file {} skipped: the name `{name}` is already used by {}",
                        path.display(),
                        existing.source.display()
                    ));
                    return;
                }
                self.skills.insert(
                    name.clone(),
                    Skill {
                        name,
                        description,
                        enabled,
                        body,
                        layer,
                        source: path.to_path_buf(),
                    },
                );
            }
            Err(reason) => self
                .problems
                .push(format!("skill file {} skipped: {reason}", path.display())),
        }
    }

    pub fn all(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    pub fn enabled(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values().filter(|s| s.enabled)
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }
}

/// (name, description, enabled, body) of a skill file, or why it is broken.
fn parse_skill(text: &str) -> Result<(String, String, bool, String), String> {
    let matter = Matter::<YAML>::new();
    let parsed = matter
        .parse::<FrontMatter>(text)
        .map_err(|e| format!("its front matter is not valid YAML ({e})"))?;
    let front = parsed
        .data
        .ok_or_else(|| "it has no front matter (a `---` block with `name:`)".to_string())?;
    let name = front
        .name
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "its front matter has no `name`".to_string())?;
    Ok((
        name,
        front.description.unwrap_or_default().trim().to_string(),
        front.enabled.unwrap_or(true),
        parsed.content.trim().to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(dir: &Path) -> Layers {
        Layers {
            project: dir.join("project/.new"),
            user: Some(dir.join("user/new")),
        }
    }

    fn write(path: PathBuf, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn builtin_skills_parse() {
        let dir = tempfile::tempdir().unwrap();
        let r = SkillRegistry::load(&layers(dir.path()));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let names: Vec<_> = r.all().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["code-reviewer", "data-analyst", "translator"]);
        assert!(
            r.all()
                .all(|s| !s.body.is_empty() && !s.description.is_empty())
        );
    }

    #[test]
    fn nearer_layers_override_and_broken_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        write(
            l.user.clone().unwrap().join("skills/t.md"),
            "---\nname: translator\nenabled: true\n---\nuser translator",
        );
        write(
            l.project.join("skills/t.md"),
            "---\nname: translator\nenabled: false\n---\nproject translator",
        );
        write(
            l.project.join("skills/broken.md"),
            "---\nname: [unclosed\n---\nbody",
        );
        write(
            l.project.join("skills/noname.md"),
            "---\ndescription: x\n---\nbody",
        );
        write(l.project.join("skills/plain.md"), "just text");
        write(
            l.project.join("skills/zdup.md"),
            "---\nname: translator\n---\nagain",
        );
        write(l.project.join("skills/notes.txt"), "ignored");
        let r = SkillRegistry::load(&l);
        let t = r.get("translator").unwrap();
        assert_eq!(
            (t.body.as_str(), t.enabled, t.layer),
            ("project translator", false, LayerKind::Project)
        );
        assert_eq!(r.problems.len(), 4, "{:?}", r.problems);
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("broken.md") && p.contains("YAML"))
        );
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("noname.md") && p.contains("`name`"))
        );
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("plain.md") && p.contains("no front matter"))
        );
        assert!(r.problems.iter().any(|p| p.contains("zdup.md")));
    }
}
