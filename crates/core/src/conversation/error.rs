//! The errors of the conversations' storage.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{action} {path}: {cause}")]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: io::Error,
    },
    #[error("no conversation `{0}` in this project")]
    NotFound(String),
    #[error("`{prefix}` matches several conversations: {}", .matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
    #[error(
        "{0} is not a regular file (a link, a named pipe or a device): a conversation file must be one; it is left alone"
    )]
    NotRegular(PathBuf),
    #[error(
        "{path} is not a conversation of new's (it looks like {what}); it is left alone (`new import` makes one of it)"
    )]
    Foreign { path: PathBuf, what: &'static str },
}

impl StoreError {
    pub(crate) fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        StoreError::Io {
            action,
            path: path.to_path_buf(),
            cause: source,
        }
    }
}
