//! The built-in tools: files (`read_file`, `write_file`, `edit_file`, `list_files`), search
//! (`glob`, `grep`), the shell (`bash`) and skills on demand (`use_skill`).

mod bash;
mod change;
mod edit_file;
mod glob;
mod grep;
mod list_files;
mod read_file;
mod use_skill;
pub(crate) mod walk;
mod write_file;

pub use bash::{Bash, leaves_sandbox, sandbox_for};
pub use edit_file::EditFile;
pub use glob::Glob;
pub use grep::Grep;
pub use list_files::ListFiles;
pub use list_files::human_size;
pub use read_file::ReadFile;
pub use use_skill::{Generator, Shelf, ShelfEntry, UseSkill};
pub use write_file::WriteFile;

use super::Tool;

/// The built-in tools' names, in the order [`all`] gives them.
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
        Box::new(UseSkill),
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
