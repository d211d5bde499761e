//! Windows: folder handles that pin each folder on the way (opened without `FILE_SHARE_DELETE`,
//! so it cannot be renamed or replaced while held) and never pass through a reparse point
//! (`FILE_FLAG_OPEN_REPARSE_POINT`: symlinks and junctions are seen as what they are, not
//! followed), every open checked by its handle (`GetFinalPathNameByHandleW` must still name a
//! place inside the root, `GetFileType` must say a disk file); the console through its modes;
//! process trees through `taskkill /T`.

use std::ffi::{OsStr, OsString};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::ops::ControlFlow;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_NAME_NORMALIZED,
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_TYPE_DISK, GetFileType,
    GetFinalPathNameByHandleW, VOLUME_NAME_DOS,
};

use super::{FileKind, Shell, ShellKind, Stat};

/// A handle on a folder, and on every folder above it up to the root, each opened without
/// following a reparse point and without sharing deletion: while the handles are held, none of
/// these folders can be renamed, removed or swapped for a link, so a name looked up below them
/// by path lands where the check said.
#[derive(Debug, Clone)]
pub struct Dir {
    path: PathBuf,
    /// The canonical root this chain starts at, as `GetFinalPathNameByHandleW` spells it.
    root: Arc<String>,
    held: Vec<Arc<File>>,
}

/// The path an open handle names now (`\\?\C:\…`), resolved by the system from the handle.
fn final_path(file: &File) -> io::Result<String> {
    let mut buf = vec![0u16; 512];
    loop {
        // SAFETY: the buffer is ours and its length is passed; the handle is open.
        let n = unsafe {
            GetFinalPathNameByHandleW(
                file.as_raw_handle(),
                buf.as_mut_ptr(),
                buf.len() as u32,
                FILE_NAME_NORMALIZED | VOLUME_NAME_DOS,
            )
        } as usize;
        if n == 0 {
            return Err(io::Error::last_os_error());
        }
        if n < buf.len() {
            return Ok(OsString::from_wide(&buf[..n])
                .to_string_lossy()
                .into_owned());
        }
        buf.resize(n + 1, 0);
    }
}

fn link_refused(name: &OsStr) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotADirectory,
        format!(
            "`{}` is a link, a junction or not a folder",
            name.to_string_lossy()
        ),
    )
}

/// A handle on `path` that does not follow a final reparse point; `share_delete` lets others
/// rename or remove it while it is open (files being read), otherwise it is pinned (folders).
fn open_handle(path: &Path, folder: bool, share_delete: bool) -> io::Result<File> {
    let mut share = FILE_SHARE_READ | FILE_SHARE_WRITE;
    if share_delete {
        share |= FILE_SHARE_DELETE;
    }
    let mut flags = FILE_FLAG_OPEN_REPARSE_POINT;
    if folder {
        flags |= FILE_FLAG_BACKUP_SEMANTICS;
    }
    OpenOptions::new()
        .read(true)
        .share_mode(share)
        .custom_flags(flags)
        .open(path)
}

fn kind_of(meta: &std::fs::Metadata) -> FileKind {
    let t = meta.file_type();
    if t.is_symlink() || meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_file() {
        FileKind::File
    } else {
        FileKind::Unknown
    }
}

fn stat_of(meta: &std::fs::Metadata) -> Stat {
    let kind = kind_of(meta);
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    let readonly = meta.file_attributes() & FILE_ATTRIBUTE_READONLY != 0;
    Stat {
        kind,
        size: meta.len(),
        mtime_ns,
        ino: 0,
        mode: match (kind, readonly) {
            (FileKind::Dir, _) => 0o755,
            (_, true) => 0o444,
            (_, false) => 0o644,
        },
    }
}

/// Whether `path` (as the system spells it from a handle) lies in `root`, ignoring case as
/// Windows file systems do.
fn inside(path: &str, root: &str) -> bool {
    super::winpath::starts_with_ignoring_case(path, root)
}

impl Dir {
    fn check_folder(file: &File, name: &OsStr) -> io::Result<()> {
        let attributes = file.metadata()?.file_attributes();
        if attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0
            || attributes & FILE_ATTRIBUTE_DIRECTORY == 0
        {
            return Err(link_refused(name));
        }
        Ok(())
    }

    /// The folder at `path`, following links on the way (the path is a canonical root).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let file = OpenOptions::new()
            .read(true)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
            .open(path)?;
        if !file.metadata()?.is_dir() {
            return Err(link_refused(path.as_os_str()));
        }
        let root = final_path(&file)?;
        Ok(Dir {
            path: path.to_path_buf(),
            root: Arc::new(root),
            held: vec![Arc::new(file)],
        })
    }

    /// The folder at `path`, refused (`NotADirectory`) if its last component is a reparse point.
    pub fn open_no_link(path: &Path) -> io::Result<Dir> {
        let file = open_handle(path, true, false)?;
        Self::check_folder(&file, path.as_os_str())?;
        let root = final_path(&file)?;
        Ok(Dir {
            path: path.to_path_buf(),
            root: Arc::new(root),
            held: vec![Arc::new(file)],
        })
    }

    /// The folder `name` inside this one, never through a reparse point: a link, a junction or
    /// anything but a folder is an error of kind `NotADirectory`.
    pub fn dir(&self, name: &OsStr) -> io::Result<Dir> {
        let path = self.path.join(name);
        let file = open_handle(&path, true, false)?;
        Self::check_folder(&file, name)?;
        if !inside(&final_path(&file)?, &self.root) {
            return Err(link_refused(name));
        }
        let mut held = self.held.clone();
        held.push(Arc::new(file));
        Ok(Dir {
            path,
            root: self.root.clone(),
            held,
        })
    }

    /// Makes the folder `name` here; one already there is no error.
    pub fn make_dir(&self, name: &OsStr) -> io::Result<()> {
        match std::fs::create_dir(self.path.join(name)) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    }

    /// The status of `name`, not following a link.
    pub fn stat(&self, name: &OsStr) -> io::Result<Stat> {
        Ok(stat_of(&std::fs::symlink_metadata(self.path.join(name))?))
    }

    /// `name` opened for reading without following a reparse point, with the status of what was
    /// opened; a device (`CON`, a pipe) is reported as a character device, never read.
    pub fn open_file(&self, name: &OsStr) -> io::Result<(File, Stat)> {
        let file = open_handle(&self.path.join(name), false, true)?;
        let mut stat = stat_of(&file.metadata()?);
        // SAFETY: the handle is open for the call.
        if unsafe { GetFileType(file.as_raw_handle()) } != FILE_TYPE_DISK {
            stat.kind = FileKind::CharDevice;
        } else if stat.kind == FileKind::File && !inside(&final_path(&file)?, &self.root) {
            stat.kind = FileKind::Symlink;
        }
        Ok((file, stat))
    }

    /// A new file `name` (never one already there, never through a link). Windows keeps no Unix
    /// mode: a mode without write bits makes the file read-only, once written ([`set_mode`]).
    pub fn create_new(&self, name: &OsStr, _mode: u32) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(self.path.join(name))
    }

    /// Renames `from` over `to`, both in this folder (`MoveFileExW` replacing the target).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        std::fs::rename(self.path.join(from), self.path.join(to))
    }

    /// Removes the file or link `name`.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        std::fs::remove_file(self.path.join(name))
    }

    /// Makes `name` a symbolic link to `target` (Windows allows it with Developer Mode or the
    /// privilege to create links; otherwise the error says so).
    pub fn symlink(&self, target: &str, name: &OsStr) -> io::Result<()> {
        std::os::windows::fs::symlink_file(target, self.path.join(name))
    }

    /// The target of the link `name`.
    pub fn read_link(&self, name: &OsStr) -> io::Result<String> {
        Ok(std::fs::read_link(self.path.join(name))?
            .to_string_lossy()
            .into_owned())
    }

    /// Calls `each` with every name in the folder and its kind as the listing tells it (reparse
    /// points as links), until it breaks.
    pub fn for_each_entry(
        &self,
        mut each: impl FnMut(&OsStr, FileKind) -> ControlFlow<()>,
    ) -> io::Result<()> {
        for entry in std::fs::read_dir(&self.path)? {
            let Ok(entry) = entry else { break };
            let kind = match entry.file_type() {
                Ok(t) if t.is_symlink() => FileKind::Symlink,
                Ok(t) if t.is_dir() => FileKind::Dir,
                Ok(t) if t.is_file() => FileKind::File,
                _ => FileKind::Unknown,
            };
            if each(&entry.file_name(), kind).is_break() {
                break;
            }
        }
        Ok(())
    }
}

/// Windows keeps only a read-only attribute: a mode without write bits sets it.
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    if mode & 0o222 == 0 {
        let mut permissions = file.metadata()?.permissions();
        permissions.set_readonly(true);
        file.set_permissions(permissions)?;
    }
    Ok(())
}

/// A builder of folders with their parents. Folders under the user's profile are the user's
/// own through their inherited access lists; Unix modes have no meaning here.
pub fn private_dir_builder() -> DirBuilder {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    builder
}

/// Options for files of the user's own (their access list inherited from the profile folder).
pub fn private_file_options() -> OpenOptions {
    OpenOptions::new()
}

/// Options to read a file; opening never blocks on Windows.
pub fn nonblocking_read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true);
    options
}

/// Options that open a file as itself: a link at its end is opened as the link (its metadata
/// then says so), not followed; opening never blocks on Windows.
pub fn no_link_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT);
    options
}

/// Whether standard input is a pipe with something to read right now.
pub fn stdin_has_input() -> bool {
    use windows_sys::Win32::System::Pipes::PeekNamedPipe;
    let handle = std::io::stdin().as_raw_handle();
    let mut available = 0u32;
    // SAFETY: no buffer is read into; `available` is ours. A handle that is no pipe fails.
    let ok = unsafe {
        PeekNamedPipe(
            handle,
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            &mut available,
            std::ptr::null_mut(),
        )
    };
    ok != 0 && available > 0
}

/// Whether a key typed at the terminal can be waited for without reading it: not on the console
/// ([`stdin_has_input`] sees pipes only), so an idle prompt waits for a key as the line editor
/// does.
pub const KEYS_CAN_BE_AWAITED: bool = false;

/// The console input mode of stdin as it was, put back on drop.
pub struct SavedTerminal(u32);

impl SavedTerminal {
    fn change(change: impl FnOnce(u32) -> u32) -> Option<SavedTerminal> {
        use windows_sys::Win32::System::Console::{GetConsoleMode, SetConsoleMode};
        let handle = std::io::stdin().as_raw_handle();
        let mut mode = 0u32;
        // SAFETY: `mode` is ours; a handle that is no console fails and nothing changes.
        unsafe {
            if GetConsoleMode(handle, &mut mode) == 0 {
                return None;
            }
            if SetConsoleMode(handle, change(mode)) == 0 {
                return None;
            }
        }
        Some(SavedTerminal(mode))
    }

    /// The Windows console shows no `^C` for Ctrl-C: nothing to change, but a console is needed.
    pub fn quiet_control_keys() -> Option<SavedTerminal> {
        Self::change(|m| m)
    }

    /// The console stops echoing what is typed; Enter still ends the line.
    pub fn without_echo() -> Option<SavedTerminal> {
        use windows_sys::Win32::System::Console::ENABLE_ECHO_INPUT;
        Self::change(|m| m & !ENABLE_ECHO_INPUT)
    }

    /// Keys come one at a time, unechoed (see [`read_keys`]).
    pub fn raw_keys() -> Option<SavedTerminal> {
        use windows_sys::Win32::System::Console::{ENABLE_ECHO_INPUT, ENABLE_LINE_INPUT};
        Self::change(|m| m & !(ENABLE_ECHO_INPUT | ENABLE_LINE_INPUT))
    }

    /// Keys stay as typed, unechoed, for the line editor that reads them next (unused here:
    /// [`KEYS_CAN_BE_AWAITED`] is false on the console).
    pub fn keys_as_typed() -> Option<SavedTerminal> {
        Self::raw_keys()
    }

    /// Keys come one at a time, unechoed, Ctrl-C as its character rather than a signal (a
    /// question answered by one key; see [`read_keys`]).
    pub fn single_keys() -> Option<SavedTerminal> {
        use windows_sys::Win32::System::Console::{
            ENABLE_ECHO_INPUT, ENABLE_LINE_INPUT, ENABLE_PROCESSED_INPUT,
        };
        Self::change(|m| m & !(ENABLE_ECHO_INPUT | ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT))
    }
}

/// Input waits at the console on stdin (keys, or other events [`read_keys`] passes over).
pub fn keys_waiting() -> bool {
    use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
    use windows_sys::Win32::System::Threading::WaitForSingleObject;
    // SAFETY: waits on the console input handle without blocking; no memory involved.
    unsafe { WaitForSingleObject(std::io::stdin().as_raw_handle(), 0) == WAIT_OBJECT_0 }
}

impl Drop for SavedTerminal {
    fn drop(&mut self) {
        use windows_sys::Win32::System::Console::SetConsoleMode;
        // SAFETY: puts back the mode read from the same handle.
        unsafe {
            SetConsoleMode(std::io::stdin().as_raw_handle(), self.0);
        }
    }
}

/// Reads typed keys from the console in [`SavedTerminal::raw_keys`] mode, as UTF-8 (Enter as a
/// newline): 0 when nothing was typed within a tenth of a second.
pub fn read_keys(buf: &mut [u8]) -> io::Result<usize> {
    use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
    use windows_sys::Win32::System::Console::{INPUT_RECORD, KEY_EVENT, ReadConsoleInputW};
    use windows_sys::Win32::System::Threading::WaitForSingleObject;
    let handle = std::io::stdin().as_raw_handle();
    // SAFETY: waits on the console input handle; no memory involved.
    if unsafe { WaitForSingleObject(handle, 100) } != WAIT_OBJECT_0 {
        return Ok(0);
    }
    // Each record can become up to 4 bytes (a surrogate pair becomes one 4-byte character).
    let mut records = vec![INPUT_RECORD::default(); (buf.len() / 4).max(1)];
    let mut read = 0u32;
    // SAFETY: the records are ours and their number is passed; input is waiting, so this does
    // not block.
    if unsafe {
        ReadConsoleInputW(
            handle,
            records.as_mut_ptr(),
            records.len() as u32,
            &mut read,
        )
    } == 0
    {
        return Err(io::Error::last_os_error());
    }
    let mut units = Vec::new();
    for record in &records[..read as usize] {
        if u32::from(record.EventType) != KEY_EVENT {
            continue;
        }
        // SAFETY: the record is a key event, so `KeyEvent` is the union's live field.
        let key = unsafe { record.Event.KeyEvent };
        // SAFETY: both fields of the character union are plain integers.
        let unit = unsafe { key.uChar.UnicodeChar };
        if key.bKeyDown == 0 || unit == 0 {
            continue;
        }
        for _ in 0..key.wRepeatCount.max(1) {
            units.push(if unit == u16::from(b'\r') {
                u16::from(b'\n')
            } else {
                unit
            });
        }
    }
    let text: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    let n = text.len().min(buf.len());
    buf[..n].copy_from_slice(&text.as_bytes()[..n]);
    Ok(n)
}

/// Makes the child a process group of its own (Ctrl-C at the console is `new`'s).
pub fn own_process_group(cmd: &mut tokio::process::Command) {
    use windows_sys::Win32::System::Threading::CREATE_NEW_PROCESS_GROUP;
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP);
}

/// Ends the process `pid` and every process it started (`taskkill /T /F`): Windows has no
/// signal to ask politely, so `hard` makes no difference.
pub fn end_group(pid: u32, _hard: bool) {
    let _ = std::process::Command::new("taskkill")
        .args(["/T", "/F", "/PID", &pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Windows processes end with an exit code, never a signal.
pub fn exit_signal(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// A program on `PATH` (with `.exe`), not in the Windows folder (whose `bash.exe` starts WSL).
fn on_path(program: &str) -> Option<PathBuf> {
    let windows = std::env::var_os("SystemRoot").map(PathBuf::from);
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.is_file()
                && windows
                    .as_ref()
                    .is_none_or(|w| !inside(&p.to_string_lossy(), &w.to_string_lossy()))
        })
}

/// Git for Windows' bash: where its installer puts it, or beside the `git` on `PATH`.
fn git_bash() -> Option<PathBuf> {
    let installed = [
        "ProgramFiles",
        "ProgramW6432",
        "ProgramFiles(x86)",
        "LOCALAPPDATA",
    ]
    .into_iter()
    .filter_map(std::env::var_os)
    .flat_map(|base| {
        let base = PathBuf::from(base);
        [
            base.join("Git").join("bin").join("bash.exe"),
            base.join("Programs")
                .join("Git")
                .join("bin")
                .join("bash.exe"),
        ]
    });
    let beside_git = on_path("git.exe")
        .and_then(|git| Some(git.parent()?.parent()?.join("bin").join("bash.exe")));
    installed
        .chain(beside_git)
        .find(|p| p.is_file())
        .or_else(|| on_path("bash.exe"))
}

/// The shell for commands: Git Bash when installed, otherwise PowerShell (7 if on `PATH`).
pub fn shell() -> &'static Shell {
    static SHELL: OnceLock<Shell> = OnceLock::new();
    SHELL.get_or_init(|| match git_bash() {
        Some(program) => Shell {
            program,
            flags: &["-c"],
            kind: ShellKind::Bash,
        },
        None => Shell {
            program: on_path("pwsh.exe").unwrap_or_else(|| "powershell.exe".into()),
            flags: &["-NoLogo", "-NoProfile", "-NonInteractive", "-Command"],
            kind: ShellKind::PowerShell,
        },
    })
}

/// The shell for hooks and helpers written for a POSIX shell: Git Bash's when installed.
pub fn posix_shell() -> &'static Shell {
    shell()
}

/// Switches the console to VT mode so that colour escapes are shown, not printed; false when
/// the console cannot (then no colour is used).
pub fn enable_terminal_colours() -> bool {
    use windows_sys::Win32::System::Console::{
        ENABLE_VIRTUAL_TERMINAL_PROCESSING, GetConsoleMode, SetConsoleMode,
    };
    let mut ok = true;
    for handle in [
        std::io::stdout().as_raw_handle(),
        std::io::stderr().as_raw_handle(),
    ] {
        let mut mode = 0u32;
        // SAFETY: `mode` is ours; a handle that is no console fails and is left alone.
        unsafe {
            if GetConsoleMode(handle, &mut mode) != 0
                && SetConsoleMode(handle, mode | ENABLE_VIRTUAL_TERMINAL_PROCESSING) == 0
            {
                ok = false;
            }
        }
    }
    ok
}

/// The user's Ctrl-C (and Ctrl-Break), through the console control handler.
pub struct Interrupts(tokio::signal::windows::CtrlC);

impl Interrupts {
    pub fn new() -> io::Result<Interrupts> {
        tokio::signal::windows::ctrl_c().map(Interrupts)
    }

    /// The next Ctrl-C; None once no more can come.
    pub async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

/// What is wrong with `path` as a Windows path (see [`super::winpath`]).
pub fn path_refusal(path: &str) -> Option<super::winpath::Refusal> {
    super::winpath::refusal(path)
}

/// Whether `path` is `root` or below it, comparing as Windows does (case ignored).
pub fn path_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root) || inside(&path.to_string_lossy(), &root.to_string_lossy())
}

/// Whether the process `pid` exists.
pub fn process_alive(pid: u32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    // SAFETY: the handle is checked, used once and closed; `code` is ours.
    unsafe {
        let handle = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if handle.is_null() {
            // Access denied means it exists (another user's).
            return io::Error::last_os_error().raw_os_error() == Some(5);
        }
        let mut code = 0u32;
        let alive = GetExitCodeProcess(handle, &mut code) != 0 && code == STILL_ACTIVE as u32;
        CloseHandle(handle);
        alive
    }
}

/// What tells a file apart from one put in its place: its size and times, and its volume file
/// id through a handle when one can be opened (the system's own identity of a file).
pub fn file_identity(path: &Path, meta: &std::fs::Metadata) -> String {
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
    };
    let by_handle = open_handle(path, meta.is_dir(), true)
        .ok()
        .and_then(|file| {
            let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is ours and the handle is open.
            (unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } != 0).then(
                || {
                    format!(
                        "{}:{}",
                        info.dwVolumeSerialNumber,
                        (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow)
                    )
                },
            )
        });
    by_handle.unwrap_or_else(|| format!("{}:{}", meta.len(), meta.last_write_time()))
}

/// A relative path with `/` between its names, as the model writes them and snapshots list
/// them (Windows accepts both).
pub fn slash_path(rel: &Path) -> String {
    rel.display().to_string().replace('\\', "/")
}

/// The console (`CONIN$`, `CONOUT$`), whose line mode echoes, for a question asked while the
/// program's own input may be elsewhere. None without a console.
pub fn with_line_terminal<T>(
    ask: impl FnOnce(&mut dyn io::BufRead, &mut dyn io::Write) -> T,
) -> Option<T> {
    let input = OpenOptions::new()
        .read(true)
        .write(true)
        .open("CONIN$")
        .ok()?;
    let mut output = OpenOptions::new().write(true).open("CONOUT$").ok()?;
    let mut input = io::BufReader::new(input);
    Some(ask(&mut input, &mut output))
}
