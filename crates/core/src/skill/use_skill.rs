//! `use_skill`: loads a skill offered on demand (a folder `<name>/SKILL.md`, listed by name and
//! description in the system prompt). The skills' own tool: the [`Shelf`] of skills offered on
//! demand is the [`ToolSource`] that offers it, while it holds some. The result is the skill's whole body (never cut to a
//! preview: the context keeps it whole); the skill's folder becomes a read-only extra root, so
//! `read_file` and `grep` can open its reference files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use super::{Generated, Skill, builtin};
use crate::tools;
use crate::tools::{
    Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, ToolSource, args,
};
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::path::Path;

/// A skill the model can load.
#[derive(Debug, Clone)]
pub struct ShelfEntry {
    /// The skill (its file, its folder, none for a built-in skill written when loaded), whose
    /// body is read when it is loaded.
    pub skill: Box<Skill>,
    /// The most of its body sent (`skill.max_skill_size_bytes`).
    pub max_bytes: usize,
}

/// Writes the body of a built-in skill from the session's state when it is loaded, given the
/// skill file's own body (its instructions).
pub type Generator = Arc<dyn Fn(Generated, &str) -> String + Send + Sync>;

/// The skills offered on demand, by name; shared with the REPL, which refills it when skills are
/// reloaded, and sets what writes the generated ones.
#[derive(Clone, Default)]
pub struct Shelf {
    entries: Arc<RwLock<BTreeMap<String, ShelfEntry>>>,
    generator: Arc<RwLock<Option<Generator>>>,
    /// The working folder and the model, for the template variables (`{{CWD}}`, `{{MODEL}}`, …).
    variables: Arc<RwLock<Option<(PathBuf, String)>>>,
}

impl Debug for Shelf {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shelf")
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl Shelf {
    pub fn set(&self, entries: BTreeMap<String, ShelfEntry>) {
        *self.entries.write().unwrap_or_else(|e| e.into_inner()) = entries;
    }

    pub fn set_generator(&self, generator: Generator) {
        *self.generator.write().unwrap_or_else(|e| e.into_inner()) = Some(generator);
    }

    /// Where and with which model the session works: skills' template variables say it.
    pub fn set_variables(&self, workdir: &Path, model: &str) {
        *self.variables.write().unwrap_or_else(|e| e.into_inner()) =
            Some((workdir.to_path_buf(), model.to_string()));
    }

    pub fn get(&self, name: &str) -> Option<ShelfEntry> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// A skill's instructions: a folder skill's SKILL.md body, or a generated skill's text written
    /// now (its static part alone when nothing writes it), cut at `max_bytes`, with the template
    /// variables filled.
    pub fn instructions(&self, skill: &Skill, max_bytes: usize) -> String {
        let text = match skill.generated {
            None => skill.instructions(max_bytes),
            // Written by `new` itself: its own text may quote the variables (the docs do).
            Some(kind) => {
                let generator = self
                    .generator
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                let mut text = match generator {
                    Some(write) => write(kind, &skill.body),
                    None => skill.body.clone(),
                };
                super::cut_to_size(&mut text, max_bytes);
                return text;
            }
        };
        match &*self.variables.read().unwrap_or_else(|e| e.into_inner()) {
            Some((workdir, model)) => super::fill_variables(&text, workdir, model),
            None => text,
        }
    }
}

/// The shelf offers `use_skill` while it holds some skill; a call with none on it still runs, and
/// says the skill is not found.
impl ToolSource for Shelf {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(UseSkill {
            shelf: self.clone(),
        })]
    }

    fn offered(&self) -> bool {
        !self.is_empty()
    }
}

/// The `use_skill` tool, loading from its shelf.
pub struct UseSkill {
    shelf: Shelf,
}

impl Tool for UseSkill {
    fn name(&self) -> &str {
        "use_skill"
    }

    fn description(&self) -> &str {
        "Load a skill of the Skills list when the task matches it, then follow it; read its files \
         at the paths it gives."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "skill_name": {"type": "string"}
            },
            "required": ["skill_name"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn subject(&self, args: &Value) -> Option<String> {
        args::subject(args, "skill_name")
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        let (args, shelf, workdir) = (args.clone(), self.shelf.clone(), ctx.workdir.clone());
        // Off the runtime's threads: a generated skill may survey the working folder.
        tools::blocking(move |_| {
            let name = args::string(&args, "skill_name")?.trim();
            // A sub-document of a built-in skill about `new`: `codebase-overview/context`.
            if let Some((skill, doc)) = name.split_once('/')
                && let Some(entry) = shelf.get(skill)
                && entry.skill.generated == Some(Generated::CodebaseOverview)
            {
                let mut content = builtin::self_document(doc.trim())
                    .map_err(ToolError::Failed)?
                    .to_string();
                super::cut_to_size(&mut content, entry.max_bytes);
                return Ok(ToolOutput {
                    content,
                    summary: format!("skill {name} loaded"),
                    diff: None,
                });
            }
            let Some(entry) = shelf.get(name) else {
                return Err(ToolError::Failed(format!("skill not found: {name}")));
            };
            let mut content = shelf.instructions(&entry.skill, entry.max_bytes);
            content.truncate(content.trim_end().len());
            if let Some(dir) = &entry.skill.dir {
                workdir.add_read_root(dir.clone());
                content.push_str(&format!(
                    "\n\n[This skill's folder is {}: its files can be read with read_file and grep.]",
                    dir.display()
                ));
            }
            Ok(ToolOutput {
                content,
                summary: format!("skill {name} loaded"),
                diff: None,
            })
        })
    }
}
