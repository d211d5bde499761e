//! The program's own log, for finding out what `new` did: `<state dir>/new/new.log`
//! (`~/.local/state/new/new.log` on Linux; the data dir where there is no state dir, as on
//! macOS), at the level `NEW_LOG` says (`info` unless told; `off` writes nothing and creates no
//! file), kept to [`MAX_BYTES`] per file and [`KEEP`] older files.
//!
//! What goes in is names, timings and counts: requests (provider, model, duration, tokens,
//! retries), tool calls (name, duration, outcome), MCP servers, hooks and sessions. Never the
//! contents of a message, a tool's arguments or output, a header or a key. Only `new`'s own
//! events are recorded unless `NEW_LOG` names another crate, so that an HTTP library's debug
//! output (which may print headers) is never caught by a plain `NEW_LOG=trace`.
//!
//! Not for the user's conversations (those are the session files) nor for messages to the user.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use std::env;
use std::fs;
#[cfg(unix)]
use std::os::unix::fs::OpenOptionsExt;
use std::process;
use tracing::subscriber;
use tracing_appender::non_blocking::NonBlockingBuilder;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// The variable holding the level: an `EnvFilter` directive such as `debug` or `new::llm=trace`.
pub const VAR: &str = "NEW_LOG";
/// How many log lines may wait for the writer thread.
const LINES_QUEUED: usize = 4_096;
/// The most one log file holds before it is moved aside.
pub const MAX_BYTES: u64 = 4 * 1024 * 1024;
/// How many older files are kept beside the current one (`new.log.1` is the newest).
pub const KEEP: usize = 3;

/// Keeps the log's writer thread alive; dropping it writes what is still queued.
#[must_use = "the log stops when the guard is dropped"]
pub struct Guard(#[allow(dead_code)] WorkerGuard);

/// Starts the log. None when it is off, or cannot be written: the program goes on all the same.
///
/// A log that cannot be opened is said in one line on stderr only when `NEW_LOG` was set: a user
/// who asked for a log wants to know why there is none, and one who did not (a read-only home, a
/// sandbox) should not be told at every start about a file they never look at.
pub fn init() -> Option<Guard> {
    let asked = env::var(VAR).ok().filter(|v| !v.trim().is_empty());
    let filter = match filter(asked.as_deref().unwrap_or("info")) {
        Ok(filter) => filter?,
        Err(e) => {
            eprintln!("new: {VAR}: {e}; the log is at the level info");
            filter("info").ok()??
        }
    };
    let path = path()?;
    let file = match RotatingFile::open(&path, MAX_BYTES, KEEP) {
        Ok(file) => file,
        Err(e) => {
            if asked.is_some() {
                eprintln!("new: cannot write the log {}: {e}", path.display());
            }
            return None;
        }
    };
    // Room for a burst of lines (the default's 128,000 slots take 4 MB of memory up front, a
    // quarter of what `new` needs at start); a line that finds the queue full is dropped.
    let (writer, guard) = NonBlockingBuilder::default()
        .buffered_lines_limit(LINES_QUEUED)
        .lossy(true)
        .finish(file);
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(writer)
        .with_env_filter(filter)
        .finish();
    subscriber::set_global_default(subscriber).ok()?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        pid = process::id(),
        "new started"
    );
    Some(Guard(guard))
}

/// Where the log is written: `<state dir>/new/new.log`, else `<data dir>/new/new.log`.
pub fn path() -> Option<PathBuf> {
    dirs::state_dir()
        .or_else(dirs::data_dir)
        .map(|d| d.join("new").join("new.log"))
}

/// The filter `spec` stands for, None when it lets nothing through. A bare level (`debug`) is
/// `new`'s own events at that level; `new` in a directive (`new::llm=trace`) is `new`'s own
/// crates (the engine `new_core`, the front ends `new_cli`, the OS layer `new_sys`), a module
/// after it the crate that holds it; other crates are recorded only when named.
pub fn filter(spec: &str) -> Result<Option<EnvFilter>, String> {
    let directives: Vec<String> = spec
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .flat_map(directive)
        .collect();
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::OFF.into())
        .parse(directives.join(","))
        .map_err(|e| format!("cannot read `{spec}` ({e})"))?;
    Ok((filter.max_level_hint() != Some(LevelFilter::OFF)).then_some(filter))
}

/// `new`'s crates, as their events name them.
const CRATES: [&str; 3] = ["new_core", "new_cli", "new_sys"];

/// One directive in the crates' names: a bare level, or `new` alone, applies to `new`'s crates
/// only; `new::MODULE` to the crate that holds the module.
fn directive(d: &str) -> Vec<String> {
    if d.parse::<LevelFilter>().is_ok() {
        return CRATES.iter().map(|c| format!("{c}={d}")).collect();
    }
    match d.strip_prefix("new") {
        Some(rest) if rest.is_empty() || rest.starts_with('=') => {
            CRATES.iter().map(|c| format!("{c}{rest}")).collect()
        }
        Some(rest) if rest.starts_with("::") => {
            let path = &rest[2..];
            let module = path.split(['=', ':', '[']).next().unwrap_or("");
            let (krate, path) = match module {
                "cli" => ("new_cli", path.strip_prefix("cli").unwrap_or(path)),
                "platform" | "os_sandbox" => ("new_sys", path),
                _ => ("new_core", path),
            };
            let path = path.strip_prefix("::").unwrap_or(path);
            if path.is_empty() || path.starts_with('=') {
                vec![format!("{krate}{path}")]
            } else {
                vec![format!("{krate}::{path}")]
            }
        }
        _ => vec![d.to_string()],
    }
}

/// A file that is moved aside once it holds `max` bytes: `new.log` becomes `new.log.1`,
/// `new.log.1` becomes `new.log.2`, and so on up to `keep` older files (the oldest is removed).
/// Each write is one whole line (one event), so no line is split across two files.
///
/// Several `new` processes may write the same log: before moving a full file aside, its size on
/// disk is looked at again, so a file another process has just moved is not moved twice.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max: u64,
    keep: usize,
    file: File,
    written: u64,
}

impl RotatingFile {
    /// Opens (or creates, with its folder) the file at `path` for appending.
    pub fn open(path: &Path, max: u64, keep: usize) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let file = append(path)?;
        let written = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max,
            keep,
            file,
            written,
        })
    }

    /// `new.log.N`.
    fn older(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Makes room for `incoming` bytes.
    fn rotate(&mut self, incoming: u64) -> io::Result<()> {
        let on_disk = fs::metadata(&self.path).map_or(0, |m| m.len());
        if on_disk > 0 && on_disk + incoming > self.max {
            if self.keep == 0 {
                fs::remove_file(&self.path)?;
            } else {
                for n in (1..self.keep).rev() {
                    let from = self.older(n);
                    if from.exists() {
                        fs::rename(&from, self.older(n + 1))?;
                    }
                }
                fs::rename(&self.path, self.older(1))?;
            }
        }
        self.file = append(&self.path)?;
        self.written = self.file.metadata()?.len();
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written > 0 && self.written + buf.len() as u64 > self.max {
            // A file that cannot be moved aside (its folder is read-only now) grows instead:
            // losing the next lines would hide more than an oversized log does.
            let _ = self.rotate(buf.len() as u64);
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Opened for appending; created readable by the user only (the log names folders and models).
fn append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn a_full_file_is_moved_aside_and_only_keep_older_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/new.log");
        let mut log = RotatingFile::open(&path, 20, 2).unwrap();
        for line in ["line 1 .......\n", "line 2 .......\n", "line 3 .......\n"] {
            log.write_all(line.as_bytes()).unwrap();
        }
        assert_eq!(read(&path), "line 3 .......\n");
        assert_eq!(read(&dir.path().join("logs/new.log.1")), "line 2 .......\n");
        assert_eq!(read(&dir.path().join("logs/new.log.2")), "line 1 .......\n");
        log.write_all(b"line 4 .......\n").unwrap();
        assert_eq!(read(&path), "line 4 .......\n");
        assert_eq!(read(&dir.path().join("logs/new.log.1")), "line 3 .......\n");
        assert_eq!(read(&dir.path().join("logs/new.log.2")), "line 2 .......\n");
        assert!(!dir.path().join("logs/new.log.3").exists());
        // Lines that fit share a file; a line longer than the limit still goes in whole.
        log.write_all(b"a\n").unwrap();
        assert_eq!(read(&path), "line 4 .......\na\n");
        log.write_all(&[b'x'; 50]).unwrap();
        assert_eq!(read(&path).len(), 50);
    }

    #[test]
    fn reopening_appends_and_counts_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.log");
        RotatingFile::open(&path, 20, 1)
            .unwrap()
            .write_all(b"first ....\n")
            .unwrap();
        let mut log = RotatingFile::open(&path, 20, 1).unwrap();
        log.write_all(b"second ...\n").unwrap();
        assert_eq!(read(&path), "second ...\n");
        assert_eq!(read(&dir.path().join("new.log.1")), "first ....\n");
    }

    #[test]
    fn a_file_another_process_moved_aside_is_not_moved_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.log");
        let mut log = RotatingFile::open(&path, 20, 2).unwrap();
        log.write_all(b"mine .........\n").unwrap();
        // Another `new` moves the full file aside and starts a new one.
        fs::rename(&path, dir.path().join("new.log.1")).unwrap();
        fs::write(&path, "theirs\n").unwrap();
        log.write_all(b"mine 2\n").unwrap();
        assert_eq!(read(&path), "theirs\nmine 2\n");
        assert!(!dir.path().join("new.log.2").exists());
    }

    #[test]
    fn the_level_is_new_s_own_unless_another_crate_is_named() {
        // The directives as a set (the filter's own order is not the one written).
        let shown = |spec: &str| {
            filter(spec).unwrap().map(|f| {
                let mut all: Vec<String> = f.to_string().split(',').map(String::from).collect();
                all.sort();
                all.join(",")
            })
        };
        assert_eq!(
            shown("info").as_deref(),
            Some("new_cli=info,new_core=info,new_sys=info")
        );
        assert_eq!(
            shown("new=debug, new::llm=trace").as_deref(),
            Some("new_cli=debug,new_core::llm=trace,new_core=debug,new_sys=debug")
        );
        assert_eq!(
            shown("warn,hyper=debug").as_deref(),
            Some("hyper=debug,new_cli=warn,new_core=warn,new_sys=warn")
        );
        assert_eq!(directive("new::cli::repl=debug"), ["new_cli::repl=debug"]);
        assert_eq!(directive("new::cli=debug"), ["new_cli=debug"]);
        assert_eq!(
            directive("new::os_sandbox=trace"),
            ["new_sys::os_sandbox=trace"]
        );
        assert_eq!(shown("off"), None);
        assert_eq!(shown("new=off"), None);
        assert!(filter("new=loud").is_err());
        // A crate whose name starts with `new` is not this one.
        assert_eq!(directive("newtype=debug"), ["newtype=debug"]);
    }
}
