//! The names people give the tools: ours, Claude Code's and CodePilot's, read wherever a person
//! names a tool.

/// Other names for the built-in tools, as Claude Code and CodePilot write them: one table for
/// wherever a person names a tool (rules, `tools` lists, skills' `allowed-tools`, agent definitions,
/// hook conditions).
pub const TOOL_ALIASES: &[(&str, &str)] = &[
    ("Bash", "bash"),
    ("Read", "read_file"),
    ("ReadFile", "read_file"),
    ("Write", "write_file"),
    ("WriteFile", "write_file"),
    ("Edit", "edit_file"),
    ("EditFile", "edit_file"),
    ("MultiEdit", "edit_file"),
    ("LS", "list_files"),
    ("ListFiles", "list_files"),
    ("Glob", "glob"),
    ("Grep", "grep"),
    ("UseSkill", "use_skill"),
    ("Skill", "use_skill"),
    ("Task", "agent"),
    ("Agent", "agent"),
    ("TaskStatus", "task_status"),
];

/// `new`'s name for a tool named by a person: ours, Claude Code's (`Bash`, `Read`, …) or
/// CodePilot's (`ReadFile`, `WriteFile`, …); a name that is none of them is returned as it is.
pub fn canonical(name: &str) -> &str {
    TOOL_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, ours)| ours)
}
