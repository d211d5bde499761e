//! `use_skill`: loads a skill offered on demand (a folder `<name>/SKILL.md`, listed by name and
//! description in the system prompt). The result is the whole SKILL.md; the skill's folder becomes
//! a read-only extra root, so `read_file` and `grep` can open its reference files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args};

/// A skill the model can load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShelfEntry {
    /// Its SKILL.md, read when the skill is loaded.
    pub source: PathBuf,
    /// Its folder.
    pub dir: PathBuf,
    /// The most of the file sent (`skill.max_skill_size_bytes`).
    pub max_bytes: usize,
}

impl ShelfEntry {
    /// The SKILL.md whole, cut at `max_bytes` with a note.
    pub fn text(&self) -> std::io::Result<String> {
        let mut text = std::fs::read_to_string(&self.source)?;
        crate::skill::cut_to_size(&mut text, self.max_bytes);
        Ok(text)
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
            let text = entry
                .text()
                .map_err(|e| ToolError::Failed(format!("skill {name} cannot be read: {e}")))?;
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
