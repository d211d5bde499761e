//! What differs between operating systems, in one place: folder handles for the file tools and
//! the snapshot walk ([`fs`]), the terminal (size, echo, raw keys), process groups and their
//! ending, files readable by their owner only. Each item has the same name and signature on
//! every system; the callers never see a `cfg`.
//!
//! Not here: the OS sandbox for commands (`os_sandbox`, Landlock on Linux, Seatbelt profiles
//! for macOS), and pure rules about Windows path names ([`winpath`], compiled everywhere so
//! that their tests run on every machine).

pub mod winpath;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(not(windows))]
use std::ffi::CString;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::io;
#[cfg(not(windows))]
use std::io::ErrorKind;
use std::ops::ControlFlow;
use std::ops::Range;
#[cfg(not(windows))]
use std::path::Path;
use std::path::PathBuf;
use std::sync::OnceLock;
#[cfg(windows)]
pub use windows::*;

/// What [`one_key`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OneKey {
    /// Typed before the question was asked and still waiting: never its answer.
    pub ahead: Vec<u8>,
    /// What came next, all that came at once: one key's bytes (a character, Enter, Esc, an
    /// escape sequence), or more when pasted or typed faster than a read. Empty: the terminal
    /// is gone (end of input).
    pub key: Vec<u8>,
}

/// The next key typed at the terminal on stdin, without Enter and unechoed (Ctrl-C comes as
/// its byte, 0x03); what waited already is kept apart in [`OneKey::ahead`], and only then is
/// `ask` called (it shows the question: a key typed once it shows is its answer). The
/// terminal's settings are put back before it returns. None when stdin is no terminal (`ask`
/// is not called).
pub fn one_key(ask: impl FnOnce()) -> Option<io::Result<OneKey>> {
    use std::time::{Duration, Instant};
    let saved = SavedTerminal::single_keys()?;
    let mut buf = [0u8; 256];
    let mut read = OneKey::default();
    while keys_waiting() {
        match read_keys(&mut buf) {
            Ok(0) => break,
            Ok(n) => read.ahead.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Some(Err(e)),
        }
    }
    ask();
    // A read with nothing typed takes a tenth of a second; one that returns nothing at once,
    // again and again, reads a terminal that is gone.
    let mut at_once = 0;
    let result = loop {
        let began = Instant::now();
        match read_keys(&mut buf) {
            Ok(0) if began.elapsed() < Duration::from_millis(20) => {
                at_once += 1;
                if at_once > 50 {
                    break Ok(read);
                }
            }
            Ok(0) => at_once = 0,
            Ok(n) => {
                read.key.extend_from_slice(&buf[..n]);
                break Ok(read);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    drop(saved);
    Some(result)
}

/// The kind of thing a name in a folder is, as the file tools judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    /// The folder listing did not say (the name has to be looked at).
    Unknown,
}

impl FileKind {
    /// What a path names, when it is not a regular file or folder the tools may use.
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Fifo => "a named pipe (FIFO)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Symlink => "a symbolic link",
            FileKind::Dir => "a folder",
            FileKind::File | FileKind::Unknown => "not a regular file",
        }
    }
}

/// The status of a name in a folder, never following a final link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: FileKind,
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// The inode (Unix); 0 where the system gives none cheaply (Windows).
    pub ino: u64,
    /// Permission bits (`0o7777`); on Windows only the read-only attribute is kept.
    pub mode: u32,
}

/// The names of one folder, one after the other in one buffer (no allocation a name), with the
/// kind the listing told of each: what [`Dir::names`] reads.
#[derive(Debug, Default)]
pub struct Names {
    buffer: Vec<u8>,
    entries: Vec<(Range<usize>, FileKind)>,
}

impl Names {
    fn push(&mut self, name: &OsStr, kind: FileKind) {
        let bytes = name.as_encoded_bytes();
        self.entries
            .push((self.buffer.len()..self.buffer.len() + bytes.len(), kind));
        self.buffer.extend_from_slice(bytes);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each name with its kind, in the order the listing gave them.
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, FileKind)> + '_ {
        self.entries.iter().map(|(at, kind)| {
            // SAFETY: `entries` is private and only `push` adds to it: each range holds exactly
            // the bytes of one name taken from an `OsStr` by `as_encoded_bytes`, unchanged.
            let name = unsafe { OsStr::from_encoded_bytes_unchecked(&self.buffer[at.clone()]) };
            (name, *kind)
        })
    }
}

impl Dir {
    /// Every name in the folder (not `.` and `..`) with its kind as the listing tells it.
    pub fn names(&self) -> io::Result<Names> {
        let mut names = Names::default();
        self.for_each_entry(|name, kind| {
            names.push(name, kind);
            ControlFlow::Continue(())
        })?;
        Ok(names)
    }
}

/// Which of the terminal's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The columns and rows of the terminal on `stream`; None when it is not one.
pub fn terminal_size(stream: Stream) -> Option<(usize, usize)> {
    let size = match stream {
        Stream::Stdout => terminal_size::terminal_size_of(io::stdout()),
        Stream::Stderr => terminal_size::terminal_size_of(io::stderr()),
    };
    size.map(|(w, h)| (w.0 as usize, h.0 as usize))
        .filter(|(w, _)| *w > 0)
}

/// Which language the shell tool's command lines are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellKind {
    /// bash (on Windows, Git Bash).
    Bash,
    /// A POSIX `sh`.
    Posix,
    /// Windows PowerShell or PowerShell 7 (`pwsh`): the rules that read bash command lines do
    /// not apply, only rules about whole commands.
    PowerShell,
}

/// How the shell tool (and hooks, and helpers) run a command line.
#[derive(Debug)]
pub struct Shell {
    pub program: PathBuf,
    /// The arguments before the command line (`-c`; PowerShell's `-Command`).
    pub flags: &'static [&'static str],
    pub kind: ShellKind,
}

impl Shell {
    /// The arguments that run `command`.
    pub fn args(&self, command: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = self.flags.iter().map(Into::into).collect();
        args.push(command.into());
        args
    }
}

/// Large buffers that live for one request (a long branch's messages and request text) go back
/// to the system when they are freed. glibc otherwise raises its mmap threshold after the first
/// such buffer is freed and takes the later ones from the heap, where a long session's peak
/// memory grows with them. Elsewhere nothing is changed. Called first thing in `main`.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets one of the allocator's parameters; it is called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Whether the terminal shows colour escapes: always on Unix; on Windows once the console is
/// switched to VT mode (done the first time this is asked).
pub fn terminal_colours() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(enable_terminal_colours)
}

/// Makes a named pipe (FIFO) at `path`, readable by all and writable by its owner (tests of
/// readers that must not block on one). `mkfifo` is on every Unix (rustix's `mknodat` is not on
/// macOS).
#[cfg(unix)]
pub fn make_fifo(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
    // SAFETY: mkfifo reads a NUL-terminated path that lives through the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
