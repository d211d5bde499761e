//! Unix: folder handles through `openat` (rustix), the terminal through termios, process groups
//! through `kill(-pgid)`.

use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{FileKind, Shell, ShellKind, Stat};
use rustix::fs;
use rustix::io::Errno;
use std::fs::Metadata;
use std::mem;
use std::ops::ControlFlow;
use std::process::ExitStatus;
use tokio::process::Command;
use tokio::signal::unix;
use tokio::signal::unix::Signal;
use tokio::signal::unix::SignalKind;

/// A handle on a folder, opened without following a link (below the root it was opened from):
/// names are looked up in it, not by path, so a folder swapped for a link after the check
/// cannot lead elsewhere.
#[derive(Debug)]
pub struct Dir(OwnedFd);

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

fn kind_of(t: FileType) -> FileKind {
    match t {
        FileType::RegularFile => FileKind::File,
        FileType::Directory => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        FileType::Fifo => FileKind::Fifo,
        FileType::Socket => FileKind::Socket,
        FileType::CharacterDevice => FileKind::CharDevice,
        FileType::BlockDevice => FileKind::BlockDevice,
        FileType::Unknown => FileKind::Unknown,
    }
}

// The field types differ between systems (`st_mode` is 16 bits on macOS, `st_ino` 32 on some).
#[allow(clippy::unnecessary_cast)]
fn stat_of(s: &fs::Stat) -> Stat {
    Stat {
        kind: kind_of(FileType::from_raw_mode(s.st_mode)),
        size: s.st_size as u64,
        mtime_ns: i128::from(s.st_mtime) * 1_000_000_000 + i128::from(s.st_mtime_nsec),
        ino: s.st_ino as u64,
        mode: s.st_mode as u32 & 0o7777,
    }
}

/// `ELOOP`/`ENOTDIR` from a link-free folder open: the name is a link or no folder.
fn not_a_folder(e: Errno) -> io::Error {
    match e {
        Errno::LOOP | Errno::NOTDIR => io::Error::new(io::ErrorKind::NotADirectory, e),
        e => e.into(),
    }
}

impl Dir {
    /// The folder at `path`, following links on the way (the path is a canonical root).
    pub fn open(path: &Path) -> io::Result<Dir> {
        Ok(Dir(fs::open(path, DIR_FLAGS, Mode::empty())?))
    }

    /// The folder at `path`, refused (`NotADirectory`) if its last component is a link.
    pub fn open_no_link(path: &Path) -> io::Result<Dir> {
        fs::open(path, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())
            .map(Dir)
            .map_err(not_a_folder)
    }

    /// The folder `name` inside this one, never through a link: a link or anything but a
    /// folder is an error of kind `NotADirectory`.
    pub fn dir(&self, name: &OsStr) -> io::Result<Dir> {
        fs::openat(&self.0, name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())
            .map(Dir)
            .map_err(not_a_folder)
    }

    /// Makes the folder `name` here; one already there is no error.
    pub fn make_dir(&self, name: &OsStr) -> io::Result<()> {
        match fs::mkdirat(&self.0, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The status of `name`, not following a link.
    pub fn stat(&self, name: &OsStr) -> io::Result<Stat> {
        Ok(stat_of(&fs::statat(
            &self.0,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?))
    }

    /// `name` opened for reading without following a link and without blocking (a FIFO would
    /// otherwise wait for a writer), with the status of what was opened.
    pub fn open_file(&self, name: &OsStr) -> io::Result<(File, Stat)> {
        let fd = fs::openat(
            &self.0,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let stat = stat_of(&fs::fstat(&fd)?);
        Ok((File::from(fd), stat))
    }

    /// A new file `name` (never one already there, never through a link) with `mode`.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let fd = fs::openat(
            &self.0,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode as _),
        )?;
        Ok(File::from(fd))
    }

    /// Renames `from` over `to`, both in this folder.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        Ok(fs::renameat(&self.0, from, &self.0, to)?)
    }

    /// Removes the file or link `name`.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        Ok(fs::unlinkat(&self.0, name, AtFlags::empty())?)
    }

    /// Makes `name` a symbolic link to `target`.
    pub fn symlink(&self, target: &str, name: &OsStr) -> io::Result<()> {
        Ok(fs::symlinkat(target, &self.0, name)?)
    }

    /// The target of the link `name`.
    pub fn read_link(&self, name: &OsStr) -> io::Result<String> {
        Ok(fs::readlinkat(&self.0, name, Vec::new())?
            .to_string_lossy()
            .into_owned())
    }

    /// Calls `each` with every name in the folder (not `.` and `..`) and its kind as the listing
    /// tells it ([`FileKind::Unknown`] when it does not), until it breaks (a listing that may be
    /// huge, read only as far as it is used).
    pub fn for_each_entry(
        &self,
        mut each: impl FnMut(&OsStr, FileKind) -> ControlFlow<()>,
    ) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let mut reader = fs::Dir::read_from(&self.0)?;
        while let Some(entry) = reader.read() {
            let Ok(entry) = entry else { break };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = kind_of(entry.file_type());
            if each(OsStr::from_bytes(name), kind).is_break() {
                break;
            }
        }
        Ok(())
    }
}

/// Sets the permission bits of an open file.
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    Ok(fs::fchmod(file, Mode::from_raw_mode((mode & 0o7777) as _))?)
}

/// A builder of folders only their owner can enter (0700), with their parents.
pub fn private_dir_builder() -> DirBuilder {
    let mut builder = DirBuilder::new();
    builder.recursive(true).mode(0o700);
    builder
}

/// Options that create files readable and writable by their owner only (0600).
pub fn private_file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600);
    options
}

/// Options to read a file without blocking on opening it (a FIFO would wait for a writer).
pub fn nonblocking_read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK);
    options
}

/// Options that open a file as itself: not through a link at its end (`O_NOFOLLOW`: a link
/// fails to open), and without blocking on opening it (a FIFO would wait for a writer).
pub fn no_link_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options
}

/// Whether standard input has something to read right now, or its end: a hangup or an error
/// (a terminal closed while `SIGHUP` is ignored, a pipe whose writer is gone) counts too, so that
/// the reader that comes next sees the end instead of a waiter polling it for ever.
pub fn stdin_has_input() -> bool {
    let mut fds = [libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd, no timeout.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
    ready > 0 && fds[0].revents != 0
}

/// Whether a key typed at the terminal can be waited for without reading it
/// ([`stdin_has_input`] in [`SavedTerminal::keys_as_typed`] mode): then `new` can wait at an idle
/// prompt for a key or for something else to go on with. Not on macOS, whose `poll` does not
/// support devices (its manual says so).
pub const KEYS_CAN_BE_AWAITED: bool = cfg!(not(target_os = "macos"));

/// The terminal settings of stdin as they were, put back on drop.
pub struct SavedTerminal(libc::termios);

impl SavedTerminal {
    /// Changes stdin's terminal settings with `change`; None when stdin is no terminal.
    fn change(change: impl FnOnce(&mut libc::termios)) -> Option<SavedTerminal> {
        // SAFETY: termios is plain data; tcgetattr/tcsetattr only read and write it for fd 0.
        unsafe {
            let mut t: libc::termios = mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return None;
            }
            let saved = t;
            change(&mut t);
            if libc::tcsetattr(0, libc::TCSANOW, &t) != 0 {
                return None;
            }
            Some(SavedTerminal(saved))
        }
    }

    /// The terminal stops echoing control keys as text (`^C`).
    pub fn quiet_control_keys() -> Option<SavedTerminal> {
        Self::change(|t| t.c_lflag &= !libc::ECHOCTL)
    }

    /// The terminal stops echoing what is typed (a key being entered); Enter still moves on.
    pub fn without_echo() -> Option<SavedTerminal> {
        Self::change(|t| {
            t.c_lflag &= !libc::ECHO;
            t.c_lflag |= libc::ECHONL;
        })
    }

    /// Keys come one at a time, unechoed; a read returns within a tenth of a second even with
    /// nothing typed (see [`read_keys`]).
    pub fn raw_keys() -> Option<SavedTerminal> {
        Self::change(|t| {
            t.c_lflag &= !(libc::ICANON | libc::ECHO);
            t.c_cc[libc::VMIN] = 0;
            t.c_cc[libc::VTIME] = 1;
        })
    }

    /// Keys stay as typed, unechoed, for the line editor that reads them next (as its raw mode
    /// would receive them): no line buffering, Enter left a carriage return (not turned into the
    /// line feed the editor takes for Ctrl-J), Ctrl-C, Ctrl-Z and Ctrl-V keys rather than signals.
    pub fn keys_as_typed() -> Option<SavedTerminal> {
        Self::change(|t| {
            t.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
            t.c_iflag &= !(libc::ICRNL | libc::INLCR | libc::IGNCR | libc::IXON);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
        })
    }

    /// Keys come one at a time, unechoed, Ctrl-C as its byte rather than a signal (a question
    /// answered by one key); a read returns within a tenth of a second even with nothing typed.
    pub fn single_keys() -> Option<SavedTerminal> {
        Self::change(|t| {
            t.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
            t.c_cc[libc::VMIN] = 0;
            t.c_cc[libc::VTIME] = 1;
        })
    }
}

/// Keys typed at the terminal on stdin wait to be read.
pub fn keys_waiting() -> bool {
    stdin_has_input()
}

impl Drop for SavedTerminal {
    fn drop(&mut self) {
        // SAFETY: as above; the settings found are put back.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.0);
        }
    }
}

/// Reads typed keys from stdin in [`SavedTerminal::raw_keys`] mode: 0 when nothing came within
/// a moment.
pub fn read_keys(buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reads into a buffer of ours, at most its length.
    let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Makes the child lead a process group of its own, so it and what it starts can be ended
/// together (and Ctrl-C at the terminal is `new`'s, not the child's).
pub fn own_process_group(cmd: &mut Command) {
    cmd.process_group(0);
}

/// Ends the process group led by `pid`: `hard` kills, otherwise asks to terminate.
pub fn end_group(pid: u32, hard: bool) {
    let Ok(pid) = i32::try_from(pid) else { return };
    // SAFETY: kill(2) with a negative pid signals the process group; no memory is involved.
    unsafe {
        libc::kill(-pid, if hard { libc::SIGKILL } else { libc::SIGTERM });
    }
}

/// The signal that ended a process, if one did.
pub fn exit_signal(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// The shell for commands: bash where installed, otherwise `sh`.
pub fn shell() -> &'static Shell {
    static SHELL: OnceLock<Shell> = OnceLock::new();
    SHELL.get_or_init(|| Shell {
        program: if Path::new("/bin/bash").exists() {
            "/bin/bash".into()
        } else {
            "/bin/sh".into()
        },
        flags: &["-c"],
        kind: ShellKind::Bash,
    })
}

/// The plain `sh` for hooks and helpers written for a POSIX shell.
pub fn posix_shell() -> &'static Shell {
    static SHELL: OnceLock<Shell> = OnceLock::new();
    SHELL.get_or_init(|| Shell {
        program: "sh".into(),
        flags: &["-c"],
        kind: ShellKind::Posix,
    })
}

/// Colours need nothing switched on in a Unix terminal.
pub fn enable_terminal_colours() -> bool {
    true
}

/// The user's Ctrl-C, as a stream (registered when made; it must be made inside the runtime).
pub struct Interrupts(Signal);

impl Interrupts {
    pub fn new() -> io::Result<Interrupts> {
        unix::signal(SignalKind::interrupt()).map(Interrupts)
    }

    /// The next Ctrl-C; None once no more can come.
    pub async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

/// What is wrong with `path` as a path on this system: nothing is, on Unix (every name but
/// `/` and NUL is allowed, and they cannot reach here).
pub fn path_refusal(_path: &str) -> Option<super::winpath::Refusal> {
    None
}

/// Whether `path` is `root` or below it (Unix names are compared exactly).
pub fn path_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

/// Whether the process `pid` exists (it may be another user's).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only asks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// What tells a file apart from one put in its place: device and inode.
pub fn file_identity(_path: &Path, meta: &Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}:{}", meta.dev(), meta.ino())
}

/// A relative path with `/` between its names (as it is on Unix).
pub fn slash_path(rel: &Path) -> String {
    rel.display().to_string()
}

/// The controlling terminal (`/dev/tty`) in its line mode with echo on, for a question asked
/// while the program's own input may be elsewhere; its settings are put back after. None
/// without a terminal.
pub fn with_line_terminal<T>(
    ask: impl FnOnce(&mut dyn io::BufRead, &mut dyn io::Write) -> T,
) -> Option<T> {
    use std::os::fd::AsRawFd;
    let tty = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain data; these calls only read and set the terminal's settings.
    let saved = unsafe {
        let mut t: libc::termios = mem::zeroed();
        (libc::tcgetattr(fd, &mut t) == 0).then(|| {
            let saved = t;
            t.c_lflag |= libc::ICANON | libc::ECHO;
            libc::tcsetattr(fd, libc::TCSANOW, &t);
            saved
        })
    };
    let mut input = io::BufReader::new(&tty);
    let mut output = &tty;
    let answer = ask(&mut input, &mut output);
    if let Some(saved) = saved {
        // SAFETY: as above; the settings found are put back.
        unsafe {
            libc::tcsetattr(fd, libc::TCSANOW, &saved);
        }
    }
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `stdin_has_input` says in a child whose standard input is a pipe set up by `setup`
    /// (given the pipe's ends), as its exit code: 1 for yes.
    fn child_says(setup: fn(libc::c_int, libc::c_int)) -> i32 {
        let mut ends = [0 as libc::c_int; 2];
        // SAFETY: two ints for pipe(2); the child only calls async-signal-safe functions (close,
        // write, dup2, poll) before _exit; the parent closes its ends and waits for it.
        unsafe {
            assert_eq!(libc::pipe(ends.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                setup(ends[0], ends[1]);
                libc::dup2(ends[0], 0);
                libc::_exit(i32::from(stdin_has_input()));
            }
            libc::close(ends[0]);
            libc::close(ends[1]);
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            assert!(libc::WIFEXITED(status));
            libc::WEXITSTATUS(status)
        }
    }

    /// Bytes to read say yes, an open empty pipe no, and its end (the writer gone: `POLLHUP`
    /// without `POLLIN`) yes: the reader then sees the end, where a waiter would poll for ever.
    #[test]
    fn input_and_the_end_of_input_both_count_and_an_empty_open_pipe_does_not() {
        let data: fn(libc::c_int, libc::c_int) = |_, w| {
            // SAFETY: a valid fd and one byte.
            unsafe { libc::write(w, b"x".as_ptr().cast(), 1) };
        };
        let open: fn(libc::c_int, libc::c_int) = |_, _| {};
        let ended: fn(libc::c_int, libc::c_int) = |_, w| {
            // SAFETY: the child's own copy of the write end.
            unsafe { libc::close(w) };
        };
        assert_eq!(child_says(data), 1);
        assert_eq!(child_says(open), 0);
        assert_eq!(child_says(ended), 1);
    }
}
