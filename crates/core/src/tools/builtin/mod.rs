//! The built-in tools: files (`read_file`, `write_file`, `edit_file`, `list_files`), search
//! (`glob`, `grep`) and the shell (`bash`). Skills on demand (`use_skill`) are the skills'
//! ([`crate::skill::Shelf`]), offered through a [`super::ToolSource`].

mod bash;
mod change;
mod edit_file;
mod glob;
mod grep;
mod list_files;
mod read_file;
pub(crate) mod walk;
mod write_file;

pub use bash::{Bash, leaves_sandbox, sandbox_for};
pub use edit_file::EditFile;
pub use glob::Glob;
pub use grep::{Grep, MAX_MATCHES as GREP_MAX_MATCHES};
pub use list_files::ListFiles;
pub use list_files::human_size;
pub use read_file::ReadFile;
pub use write_file::WriteFile;

use super::Tool;

/// The names of the tools `new` itself offers, as the model sees them in a request: those [`all`]
/// gives, in its order, then the skills' `use_skill`. (The subagent tools, `agent` and
/// `task_status`, are the agent loop's.)
pub const NAMES: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "glob",
    "grep",
    "bash",
    "use_skill",
];

pub fn all() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(ReadFile),
        Box::new(WriteFile),
        Box::new(EditFile),
        Box::new(ListFiles),
        Box::new(Glob),
        Box::new(Grep),
        Box::new(Bash),
    ]
}

/// "1 line", "2 lines", "3 entries", "2 matches": counts read better in the model's and the
/// user's summaries.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        return format!("1 {word}");
    }
    let plural = if let Some(stem) = word.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'o', 'u'])
    {
        format!("{stem}ies")
    } else if word.ends_with("ch")
        || word.ends_with("sh")
        || word.ends_with('s')
        || word.ends_with('x')
    {
        format!("{word}es")
    } else {
        format!("{word}s")
    };
    format!("{n} {plural}")
}
