//! Subagent definitions: Markdown files whose front matter names the role (`name`, `description`,
//! `tools`, `disallowed_tools`, `model`, `max_turns`) and whose body is its prompt. Nearest wins:
//! `<WORKDIR>/.new/agents/`, then `~/.config/new/agents/`, then the built-in `explore`, `plan` and
//! `general-purpose`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gray_matter::Matter;
use gray_matter::engine::YAML;
use serde::Deserialize;

use crate::fs::project_file;
use crate::fs::project_file::ProjectFiles;
use crate::layers::Layers;
use crate::vocab;
use std::fs;

/// The `subagent` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentSettings {
    /// `subagent.enabled`: false removes the `agent` tool.
    pub enabled: bool,
    /// `subagent.global_denied_tools`: never given to a subagent (no recursion by default).
    pub global_denied_tools: Vec<String>,
    /// `subagent.default_background_timeout_seconds`: how long a foreground call waits.
    pub default_wait: Duration,
    /// `subagent.max_definition_size_bytes`: a bigger definition is refused.
    pub max_definition_bytes: usize,
    /// `subagent.background_allowed_tools`: what a subagent in the background may run where the
    /// user would be asked (a deny rule, the hard limits and protected files still hold).
    pub background_allowed_tools: Vec<String>,
    /// `subagent.auto_continue`: a background result that arrives while the parent waits at the
    /// prompt starts the parent's next turn with it.
    pub auto_continue: bool,
}

impl Default for SubagentSettings {
    fn default() -> Self {
        SubagentSettings {
            enabled: true,
            global_denied_tools: vec!["agent".into(), "task_status".into()],
            default_wait: Duration::from_secs(300),
            max_definition_bytes: 64 * 1024,
            background_allowed_tools: Vec::new(),
            auto_continue: false,
        }
    }
}

/// One role a subagent can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    pub description: String,
    /// The tools it may use (None: every tool the session allows).
    pub tools: Option<Vec<String>>,
    pub disallowed_tools: Vec<String>,
    pub model: Option<String>,
    pub max_turns: Option<usize>,
    pub prompt: String,
    /// Where it was read: a path, or `built-in`.
    pub source: String,
}

#[derive(Debug, Default, Deserialize)]
struct Front {
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, alias = "allowed-tools", alias = "allowed_tools")]
    tools: Option<serde_json::Value>,
    #[serde(default, alias = "disallowed-tools", alias = "disallowedTools")]
    disallowed_tools: Option<serde_json::Value>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, alias = "max-turns", alias = "maxTurns")]
    max_turns: Option<serde_json::Value>,
}

const READ_TOOLS: &[&str] = &["read_file", "list_files", "glob", "grep"];

/// The built-in roles: (name, description, tools, prompt).
const BUILTIN: &[(&str, &str, Option<&[&str]>, &str)] = &[
    (
        "explore",
        "Finds where things are in the code (paths, line numbers)",
        Some(READ_TOOLS),
        "You are a subagent exploring a codebase for another agent. Use the read tools to find \
         what the task asks about: search with grep and glob, read the files that matter. Report \
         what you found with file paths and line numbers (`src/a.rs:42`), briefly, and say what \
         you looked for and did not find. You cannot change files.",
    ),
    (
        "plan",
        "Plans a change, naming the files to change",
        Some(READ_TOOLS),
        "You are a subagent planning a change for another agent. Read the code the task touches, \
         then propose a plan: the steps in order, and for each the files and functions to change \
         (with paths and line numbers) and why. Point out risks and what to test. You cannot \
         change files; the other agent will carry the plan out.",
    ),
    (
        "general-purpose",
        "Carries out a task on its own with every tool allowed",
        None,
        "You are a subagent carrying out a task for another agent, with its tools. Work until the \
         task is done, then answer with what you did and what you found: that answer is all the \
         other agent sees of your work.",
    ),
];

/// The definitions in force (nearest first wins), and the problems met, one sentence each
/// naming the file.
pub fn load(
    layers: &Layers,
    settings: &SubagentSettings,
    known_tool: &dyn Fn(&str) -> bool,
) -> (Vec<Definition>, Vec<String>) {
    let mut found: Vec<Definition> = Vec::new();
    let mut problems = Vec::new();
    let files = ProjectFiles::new(layers.workdir());
    // Nearest first; the first definition of a name wins. CodePilot's and Claude Code's folders
    // beside ours, read as written.
    let workdir = layers.workdir();
    let mut dirs: Vec<(PathBuf, bool)> = vec![
        (layers.project.join("agents"), true),
        (layers.codepilot_project().join("agents"), true),
        (workdir.join(".claude/agents"), true),
    ];
    if let Some(user) = &layers.user {
        dirs.push((user.join("agents"), false));
    }
    if let Some(codepilot) = &layers.codepilot_user {
        dirs.push((codepilot.join("agents"), false));
    }
    if let Some(home) = layers.codepilot_user.as_deref().and_then(Path::parent) {
        dirs.push((home.join(".claude/agents"), false));
    }
    for (dir, from_project) in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        paths.sort();
        for path in paths {
            match read(&path, from_project.then_some(&files), settings, known_tool) {
                Ok(d) if found.iter().any(|f| f.name == d.name) => {}
                Ok(d) => found.push(d),
                Err(why) => problems.push(format!(
                    "agent definition {}: {why}; it is skipped",
                    path.display()
                )),
            }
        }
    }
    for (name, description, tools, prompt) in BUILTIN {
        if found.iter().any(|f| f.name == *name) {
            continue;
        }
        found.push(Definition {
            name: name.to_string(),
            description: description.to_string(),
            tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
            disallowed_tools: Vec::new(),
            model: None,
            max_turns: None,
            prompt: prompt.to_string(),
            source: "built-in".into(),
        });
    }
    (found, problems)
}

fn read(
    path: &Path,
    project: Option<&ProjectFiles>,
    settings: &SubagentSettings,
    known_tool: &dyn Fn(&str) -> bool,
) -> Result<Definition, String> {
    // Through the one reader: a project's definition may not be a link out of it, nor a FIFO or a
    // device, and no more than the limit is read.
    let limit = settings.max_definition_bytes;
    let got = match project {
        Some(files) => files.read(path, limit),
        None => project_file::read_own(path, limit),
    }?
    .ok_or("it is gone")?;
    if got.truncated {
        return Err(format!(
            "it is over subagent.max_definition_size_bytes ({limit} bytes)"
        ));
    }
    let text = String::from_utf8(got.bytes).map_err(|_| "it is not UTF-8 text".to_string())?;
    let parsed = Matter::<YAML>::new()
        .parse::<Front>(&text)
        .map_err(|e| format!("its front matter is not valid YAML ({e})"))?;
    let front = parsed
        .data
        .ok_or("it has no front matter (a `---` block with `name:`)")?;
    let name = front
        .name
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or("its front matter has no `name`")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "its name {name:?} must be letters, digits, `-` or `_`"
        ));
    }
    let list = |v: Option<serde_json::Value>| -> Option<Vec<String>> {
        v.map(|v| match v {
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    serde_json::Value::String(s) => vocab::canonical(s.trim()).to_string(),
                    other => other.to_string(),
                })
                .filter(|s| !s.is_empty())
                .collect(),
            serde_json::Value::String(s) => s
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| vocab::canonical(s).to_string())
                .collect(),
            _ => Vec::new(),
        })
    };
    let tools = list(front.tools);
    let disallowed_tools = list(front.disallowed_tools).unwrap_or_default();
    for tool in tools.iter().flatten().chain(&disallowed_tools) {
        if !known_tool(tool) {
            return Err(format!("it names the tool `{tool}`, which does not exist"));
        }
    }
    let max_turns = match front.max_turns {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|n| (1..=1000).contains(n))
                .ok_or("`max_turns` must be a number from 1 to 1000")? as usize,
        ),
    };
    let prompt = parsed.content.trim().to_string();
    if prompt.is_empty() {
        return Err("its body (the role's prompt) is empty".into());
    }
    Ok(Definition {
        name,
        description: front.description.unwrap_or_default().trim().to_string(),
        tools,
        disallowed_tools,
        model: front.model.filter(|m| !m.trim().is_empty()),
        max_turns,
        prompt,
        source: path.display().to_string(),
    })
}

/// The tools a subagent of `def` may use: its allow list (or all `offered`), less its own
/// denials and `subagent.global_denied_tools`, never one the session does not offer.
pub fn allowed_tools(
    def: &Definition,
    offered: &[String],
    settings: &SubagentSettings,
) -> Vec<String> {
    offered
        .iter()
        .filter(|t| def.tools.as_ref().is_none_or(|list| list.contains(t)))
        .filter(|t| !def.disallowed_tools.contains(t))
        .filter(|t| !settings.global_denied_tools.contains(t))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::NAMES;
    use std::fs;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;

    fn layers(dir: &Path) -> Layers {
        Layers::at(&dir.join("p"), &dir.join("u"))
    }

    fn known(t: &str) -> bool {
        NAMES.contains(&t) || t.starts_with("mcp__")
    }

    #[test]
    fn tiers_nearest_wins_and_bad_definitions_are_named_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        let write = |p: PathBuf, text: &str| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write(
            l.project.join("agents/explore.md"),
            "---\nname: explore\ndescription: Project explorer\ntools: [read_file, grep]\nmax_turns: 5\n---\nLook around.\n",
        );
        write(
            l.user.as_ref().unwrap().join("agents/reviewer.md"),
            "---\nname: reviewer\ndescription: Reviews\ntools: read_file, grep\ndisallowed_tools: [bash]\nmodel: small\n---\nReview the diff.\n",
        );
        write(
            l.project.join("agents/nameless.md"),
            "---\ndescription: x\n---\nBody\n",
        );
        write(
            l.project.join("agents/badtool.md"),
            "---\nname: bad\ntools: [read_file, teleport]\n---\nBody\n",
        );
        write(
            l.project.join("agents/huge.md"),
            &format!("---\nname: huge\n---\n{}", "x".repeat(70_000)),
        );
        let (defs, problems) = load(&l, &SubagentSettings::default(), &known);
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["explore", "reviewer", "plan", "general-purpose"]);
        assert_eq!(defs[0].description, "Project explorer");
        assert_eq!(defs[0].max_turns, Some(5));
        assert_eq!(defs[0].prompt, "Look around.");
        assert_eq!(
            defs[1].tools.as_deref(),
            Some(&["read_file".to_string(), "grep".to_string()][..])
        );
        assert_eq!(defs[1].disallowed_tools, ["bash"]);
        assert_eq!(defs[1].model.as_deref(), Some("small"));
        assert_eq!(defs[2].source, "built-in");
        assert!(defs[3].tools.is_none());
        let said = problems.join("\n");
        for part in [
            "nameless.md: its front matter has no `name`; it is skipped",
            "badtool.md: it names the tool `teleport`, which does not exist",
            "huge.md: it is over subagent.max_definition_size_bytes (65536 bytes)",
        ] {
            assert!(said.contains(part), "{part}: {said}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn codepilots_and_claude_codes_agent_folders_are_read_after_ours_and_links_out_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        let write = |p: PathBuf, text: &str| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        let work = dir.path().join("p");
        write(
            work.join(".codepilot/agents/tester.md"),
            "---\nname: tester\ndescription: Runs the tests\ntools: [ReadFile, Bash]\n---\nRun them.\n",
        );
        write(
            work.join(".claude/agents/tester.md"),
            "---\nname: tester\ndescription: loses to CodePilot's\n---\nx\n",
        );
        write(
            work.join(".claude/agents/doc.md"),
            "---\nname: doc\ndescription: Writes docs\ntools: Read, Write, Grep\n---\nWrite.\n",
        );
        write(
            dir.path().join("u/.codepilot/agents/mine.md"),
            "---\nname: mine\ndescription: The user's\n---\nMine.\n",
        );
        write(
            dir.path().join("u/.claude/agents/theirs.md"),
            "---\nname: theirs\ndescription: Claude Code's user agent\n---\nTheirs.\n",
        );
        // A project's definition that is a link out of the project is not read.
        write(dir.path().join("outside.md"), "---\nname: leak\n---\nx\n");
        symlink(
            dir.path().join("outside.md"),
            work.join(".codepilot/agents/leak.md"),
        )
        .unwrap();
        let (defs, problems) = load(&l, &SubagentSettings::default(), &known);
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "tester",
                "doc",
                "mine",
                "theirs",
                "explore",
                "plan",
                "general-purpose"
            ],
            "{problems:?}"
        );
        assert_eq!(defs[0].description, "Runs the tests");
        assert_eq!(
            defs[0].tools.as_deref(),
            Some(&["read_file".to_string(), "bash".to_string()][..])
        );
        assert_eq!(
            defs[1].tools.as_deref(),
            Some(
                &[
                    "read_file".to_string(),
                    "write_file".to_string(),
                    "grep".to_string()
                ][..]
            )
        );
        let said = problems.join("\n");
        assert!(said.contains("leak.md"), "{said}");
    }

    #[test]
    fn a_subagent_never_gets_more_than_the_session_offers_nor_the_denied_tools() {
        let offered: Vec<String> = ["read_file", "write_file", "bash", "agent", "task_status"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let settings = SubagentSettings::default();
        let mut def = Definition {
            name: "x".into(),
            description: String::new(),
            tools: None,
            disallowed_tools: vec!["bash".into()],
            model: None,
            max_turns: None,
            prompt: "p".into(),
            source: String::new(),
        };
        assert_eq!(
            allowed_tools(&def, &offered, &settings),
            ["read_file", "write_file"]
        );
        def.tools = Some(vec!["read_file".into(), "grep".into(), "agent".into()]);
        assert_eq!(allowed_tools(&def, &offered, &settings), ["read_file"]);
    }
}
