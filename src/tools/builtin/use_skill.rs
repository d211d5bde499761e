//! `use_skill`: loads a skill offered on demand (a folder `<name>/SKILL.md`, listed by name and
//! description in the system prompt). The result is the skill's whole body (never cut to a
//! preview: the context keeps it whole); the skill's folder becomes a read-only extra root, so
//! `read_file` and `grep` can open its reference files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args};

/// A skill the model can load.
#[derive(Debug, Clone)]
pub struct ShelfEntry {
    /// Its SKILL.md.
    pub source: PathBuf,
    /// Its folder.
    pub dir: PathBuf,
    /// The skill, whose body is read when it is loaded.
    pub skill: Box<crate::skill::Skill>,
    /// The most of its body sent (`skill.max_skill_size_bytes`).
    pub max_bytes: usize,
}

impl ShelfEntry {
    /// Its SKILL.md's body (the front matter is not sent), read now through the one reader of a
    /// project's files and cut at `max_bytes`.
    pub fn body(&self) -> String {
        self.skill.instructions(self.max_bytes)
    }
}

/// The skills offered on demand, by name; shared with the REPL, which refills it when skills are
/// reloaded.
#[derive(Debug, Clone, Default)]
pub struct Shelf(Arc<RwLock<BTreeMap<String, ShelfEntry>>>);

impl Shelf {
    pub fn set(&self, entries: BTreeMap<String, ShelfEntry>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = entries;
    }

    pub fn get(&self, name: &str) -> Option<ShelfEntry> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.0.read().unwrap_or_else(|e| e.into_inner()).is_empty()
    }
}

pub struct UseSkill;

impl Tool for UseSkill {
    fn name(&self) -> &str {
        "use_skill"
    }

    fn description(&self) -> &str {
        "Load a skill: instructions for a kind of task, listed by name under \"Skills\" in the system \
         prompt. Load one when the task matches its description, then follow it. Its folder's files \
         can then be read with read_file and grep at the paths it gives."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "skill_name": {"type": "string", "description": "The skill's name, as listed"}
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
        Box::pin(async move {
            let name = args::string(args, "skill_name")?.trim();
            let Some(entry) = ctx.skills.get(name) else {
                return Err(ToolError::Failed(format!("skill not found: {name}")));
            };
            let text = entry.body();
            ctx.sandbox.add_read_root(entry.dir.clone());
            Ok(ToolOutput {
                content: format!(
                    "{}\n\n[This skill's folder is {}: its files can be read with read_file and grep.]",
                    text.trim_end(),
                    entry.dir.display()
                ),
                summary: format!("skill {name} loaded"),
                diff: None,
            })
        })
    }
}
