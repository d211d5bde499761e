//! Writing a file whole, the one way `new` writes its own files: the bytes go to a temporary file
//! beside the target, which is renamed over it, so a reader or a kill never sees half a file.
//! (The file tools write inside WORKDIR through [`super::confine::Workdir::write`] instead, which
//! does the same inside a folder handle that was checked.)

use crate::vocab;
use new_sys::platform;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Creates a folder (and its parents) readable by the user only: conversations are private.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    platform::private_dir_builder().create(dir)
}

/// Options that create files readable and writable by the user only (0600).
pub fn private_options() -> OpenOptions {
    platform::private_file_options()
}

/// Writes a file of the user's (config, trust, credentials, memory) readable by them only: its
/// folder is created 0700, the text goes to a temporary 0600 file beside it, is synced, and
/// renamed over the old one.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write(path, bytes, Readers::UserOnly, Sync::Yes)
}

/// Writes a file of `new`'s own data whole, private as [`write_private`] does but not synced: what
/// it holds can be made again, or was only a copy (use [`write_private`] for what must survive a
/// power cut).
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write(path, bytes, Readers::UserOnly, Sync::No)
}

/// Writes a file that may be read by others too (a project's config): an existing file keeps its
/// permissions, a new one gets the usual ones; synced. Its folder must exist.
pub fn write_keeping_mode(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write(path, bytes, Readers::AsBefore, Sync::Yes)
}

/// Who may read the file written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Readers {
    /// The user only: the folder is made 0700 if missing, the file is 0600.
    UserOnly,
    /// Whoever could before: the old file's permissions, or the umask's for a new one.
    AsBefore,
}

/// Whether the file is on the disk before the rename (survives a power cut).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sync {
    Yes,
    No,
}

fn write(path: &Path, bytes: &[u8], readers: Readers, sync: Sync) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    if readers == Readers::UserOnly {
        create_private_dir(dir)?;
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", vocab::new_id()));
    let result = (|| {
        let mut file = match readers {
            Readers::UserOnly => private_options().write(true).create_new(true).open(&tmp)?,
            Readers::AsBefore => File::create(&tmp)?,
        };
        file.write_all(bytes)?;
        if sync == Sync::Yes {
            file.sync_all()?;
        }
        if readers == Readers::AsBefore
            && let Ok(meta) = fs::metadata(path)
        {
            fs::set_permissions(&tmp, meta.permissions())?;
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
