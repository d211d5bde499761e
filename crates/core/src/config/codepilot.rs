//! CodePilot's `setting.json` as it is written: its shapes (`"tools": {"enabled": […]}`,
//! `"permissions": {"mode": …, "rules": […]}`) read beside ours, and its key names folded into
//! ours (or warned about, with the reason, where they ask for what `new` does otherwise).
//!
//! The shapes are read by visitors over the text's own deserializer, so a wrong value deep inside
//! still names its key path, line and column.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::tools::Rule;
use std::fs;
use std::path::Path;

/// The file CodePilot reads, in `~/.codepilot/` and `<project>/.codepilot/`.
pub const SETTING_FILE: &str = "setting.json";

/// `permissions`: a list of rules (ours), or CodePilot's section with a `mode` beside the rules.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Permissions {
    pub mode: Option<String>,
    pub rules: Vec<Rule>,
}

impl Permissions {
    pub fn is_empty(&self) -> bool {
        self.mode.is_none() && self.rules.is_empty()
    }
}

/// The keys of CodePilot's `permissions` section.
pub const PERMISSIONS_KEYS: &[&str] = &["mode", "rules"];

/// The keys of CodePilot's `tools` section.
pub const TOOLS_KEYS: &[&str] = &["enabled"];

impl Serialize for Permissions {
    /// In the shape it was read in (a file rewritten by `/setup` keeps its mode): CodePilot's
    /// when it has a mode, ours otherwise.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match &self.mode {
            None => self.rules.serialize(s),
            Some(mode) => {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("mode", mode)?;
                map.serialize_entry("rules", &self.rules)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Permissions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of rules or an object with `mode` and `rules`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Permissions, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element()? {
                    rules.push(rule);
                }
                Ok(Permissions { mode: None, rules })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Permissions, A::Error> {
                let mut out = Permissions::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "mode" => out.mode = Some(map.next_value()?),
                        "rules" => out.rules = map.next_value()?,
                        // Named as unknown by the check of keys.
                        _ => drop(map.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

/// `tools`: a list of names (ours), or CodePilot's `{"enabled": […]}`.
pub fn tools<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Vec<String>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of tool names or an object with `enabled`")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut names = Vec::new();
            while let Some(name) = seq.next_element()? {
                names.push(name);
            }
            Ok(Some(names))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut enabled = None;
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "enabled" => enabled = Some(map.next_value::<Vec<String>>()?),
                    _ => drop(map.next_value::<IgnoredAny>()?),
                }
            }
            Ok(enabled)
        }
    }
    d.deserialize_any(V)
}

/// CodePilot's key names folded into ours; ours win when a file sets both. What cannot be
/// honoured is said in `warnings`, with the reason.
pub fn fold(file: &mut super::FileConfig, path: &Path, workdir: &Path, warnings: &mut Vec<String>) {
    if let Some(mode) = file.permissions.mode.take() {
        file.permission_mode.get_or_insert(mode);
    }
    if let Some(n) = file.max_agent_loop_iterations.take() {
        file.max_rounds.get_or_insert(n);
    }
    if let Some(n) = file.tool_execution_timeout_seconds.take() {
        file.bash_timeout_secs.get_or_insert(n);
    }
    // CodePilot's `timeout` bounds a whole request; an answer that streams is never cut here, so it
    // bounds the silence between two pieces of an answer instead.
    if let Some(n) = file.timeout.take() {
        file.idle_timeout_secs.get_or_insert(n);
    }
    let same = |p: &Path| fs::canonicalize(p).ok();
    if let Some(dir) = file.tool_working_directory.take()
        // A relative folder is WORKDIR's, as CodePilot reads it from the project.
        && same(&workdir.join(&dir)).is_none_or(|d| Some(d) != same(workdir))
    {
        warnings.push(format!(
            "`tool_working_directory` (`{dir}`) in {} is ignored: the tools work in the folder `new` is started in (WORKDIR), the one the sandbox, the checkpoints and the conversations belong to; start `new` there instead",
            path.display()
        ));
    }
}

/// CodePilot's defaults for what its file leaves out: 50 rounds, 16,384 tokens an answer, a
/// 200,000-token window for a model whose window is not known. Set at that file's layer, so a
/// nearer file (the user's `config.json`, the project's) still wins, and only where a CodePilot
/// file is in force (an untrusted project's raises nothing).
pub fn defaults(file: &mut super::FileConfig, path: &Path) {
    if path.file_name().is_none_or(|n| n != SETTING_FILE) {
        return;
    }
    file.max_rounds.get_or_insert(DEFAULT_ROUNDS);
    file.max_tokens.get_or_insert(DEFAULT_MAX_TOKENS);
    file.fallback_window.get_or_insert(DEFAULT_WINDOW);
}

/// CodePilot's `max_agent_loop_iterations` when its file has none.
pub const DEFAULT_ROUNDS: usize = 50;
/// CodePilot's `max_tokens` when its file has none.
pub const DEFAULT_MAX_TOKENS: u32 = 16_384;
/// The window CodePilot assumes for a model it does not know.
pub const DEFAULT_WINDOW: u64 = 200_000;
