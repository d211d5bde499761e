//! The errors of the session layer's storage, and the few file helpers that the store and its
//! index share (private folders and files).

use std::fs::{self, OpenOptions};
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

/// Creates a folder (and its parents) readable by the user only: conversations are private.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Options that create files readable and writable by the user only (0600).
pub fn private_options() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.mode(0o600);
    options
}
