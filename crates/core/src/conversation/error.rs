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

/// Creates a folder (and its parents) readable by the user only: conversations are private.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    new_sys::platform::private_dir_builder().create(dir)
}

/// Writes a file of `new`'s own data whole: a temporary 0600 file in its (0700) folder, renamed
/// over the target, so a reader or a kill never sees half of it. Not synced: what it holds can be
/// made again, or was only a copy (use [`crate::layers::write_private`] for what must survive a
/// power cut).
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let tmp = dir.join(format!(".{}.tmp", crate::vocab::new_id()));
    let result = (|| {
        let mut file = private_options().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Options that create files readable and writable by the user only (0600).
pub fn private_options() -> OpenOptions {
    new_sys::platform::private_file_options()
}
