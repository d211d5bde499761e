//! The built-in file tools: `read_file`, `write_file`, `list_files`.

mod list_files;
mod read_file;
mod write_file;

pub use list_files::ListFiles;
pub use read_file::ReadFile;
pub use write_file::WriteFile;

use super::Tool;

pub fn all() -> Vec<Box<dyn Tool>> {
    vec![Box::new(ReadFile), Box::new(WriteFile), Box::new(ListFiles)]
}

/// "1 line", "2 lines": counts read better in the model's and the user's summaries.
pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}
