//! The operating-system sandbox for what the model runs: every `bash` call (and the hooks and MCP
//! servers a project brings) starts inside it, and so does everything they start, for good.
//!
//! The kernel holds the line, not a reading of the command: writes only in WORKDIR, the session's
//! private temp folder (`$TMPDIR`) and a few devices; inside WORKDIR, `.git`, `.new`, the
//! instruction files and the files hooks run stay read-only; secret places (`~/.ssh`, keys, `new`'s
//! own config and conversations) are covered; the network is off, all on, or limited to a list of
//! domains through a proxy `new` runs outside. On Linux this is Landlock plus user, mount and
//! network namespaces, set up by `new` itself started again as a helper ([`HELPER_ARG`]), so no
//! setup happens between a fork and an exec. Where it cannot work, the sandbox says it is off
//! and why, and `bash` goes back to asking for every command.

mod error;
mod internal;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod proxy;
pub mod seatbelt;
#[cfg(target_os = "linux")]
mod watch;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::platform;
use crate::secret;
pub use error::{OffReason, OsCause, SandboxError, SettingsError, SetupError};
use std::env;
use std::env::consts::OS;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::fs;
use std::future;
use std::mem;
use std::process;
use std::process::ExitStatus;
use std::process::Stdio;
use std::sync::Once;
use std::sync::RwLock;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use tokio::process::Command;
use tokio::runtime::Handle;
use tokio::sync;
use tokio::sync::mpsc;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::mpsc::UnboundedSender;

/// The first argument that makes `new` the sandbox helper: `new __sandbox SPEC PROGRAM ARGS…`.
pub const HELPER_ARG: &str = "__sandbox";

/// The first argument that makes `new` the watcher of a program outside the sandbox:
/// `new __watch PID PROGRAM ARGS…` (see `watch.rs`).
pub const WATCH_ARG: &str = "__watch";

/// Whether this process's binary is `new` with its helpers (`main` asked): not a test binary of
/// the library, which cannot be the watcher.
static CAN_WATCH: AtomicBool = AtomicBool::new(false);

/// Runs the helper (or the watcher) and never returns when this process was started as one;
/// returns otherwise. `main` calls it first of all.
pub fn run_helper_if_asked() {
    let mut args = env::args_os();
    let first = args.nth(1);
    #[cfg(target_os = "linux")]
    if first.as_deref() == Some(OsStr::new(WATCH_ARG)) {
        watch::main(args.collect());
    }
    if first.as_deref() != Some(OsStr::new(HELPER_ARG)) {
        // This binary answers `__watch`: programs outside the sandbox may run under the watcher.
        CAN_WATCH.store(true, Ordering::SeqCst);
        return;
    }
    #[cfg(target_os = "linux")]
    linux::main(args.collect());
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("new: the sandbox is not available on this system");
        std::process::exit(125);
    }
}

/// What the helper sets up: every path absolute and existing when it was made.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Spec {
    /// Folders (and files) that may be written.
    pub writable: Vec<PathBuf>,
    /// Device files that may be written (`/dev/null`, …).
    pub devices: Vec<PathBuf>,
    /// Paths inside the writable folders that stay read-only.
    pub read_only: Vec<PathBuf>,
    /// Secret places, covered.
    pub hidden: Vec<PathBuf>,
    /// A network namespace of its own: loopback only.
    pub isolate_network: bool,
    /// With `isolate_network`: connections to 127.0.0.1:PORT are relayed to this proxy socket.
    pub proxy_socket: Option<PathBuf>,
    /// The folder the program starts in.
    pub cwd: PathBuf,
    /// Folders above the read-only and hidden paths inside the writable ones: made mount points
    /// (so they cannot be renamed or removed), parents first.
    #[serde(default)]
    pub pinned: Vec<PathBuf>,
    /// Refuse creating Unix sockets (seccomp).
    #[serde(default)]
    pub block_unix_sockets: bool,
    /// Set everything up, then exit 0 instead of running a program.
    #[serde(default)]
    pub probe: bool,
}

/// The devices a shell and common tools write to.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Inside WORKDIR, what decides what runs next time or instructs later sessions: never written
/// from inside the sandbox.
pub const PROTECTED: &[&str] = &[
    ".git",
    ".new",
    ".claude",
    ".codex",
    ".codepilot",
    ".agents",
    ".mcp.json",
    "AGENTS.md",
    "AGENTS.override.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
];

/// In the home folder, what runs later outside the sandbox (the shell's start-up files, git's
/// configuration, programs started at login, `~/.local/bin` on `PATH`): kept read-only when a
/// writable folder holds them (WORKDIR is the home folder).
pub const RUN_LATER_IN_HOME: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish",
    ".gitconfig",
    ".config/git",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".local/bin",
];

/// Secret places under the home folder, covered inside the sandbox (besides `new`'s own config
/// and data folders, and `sandbox.deny_read`).
pub const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".config/github-copilot",
    ".password-store",
    ".pgpass",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".config/hub",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
];

/// Sockets that hand out root or the user's other sessions, covered too.
const HIDDEN_SOCKETS: &[&str] = &["/run/docker.sock", "/var/run/docker.sock"];

/// The `sandbox` section of a config file.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `"none"`, `"all"`, or a list of domains (`["github.com", "*.npmjs.org"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_write: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_read: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unsandboxed: Option<bool>,
    /// Let commands create Unix sockets (which can reach services outside: tmux, ssh-agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unix_sockets: Option<bool>,
}

/// The keys of the `sandbox` section.
pub const KEYS: &[&str] = &[
    "enabled",
    "network",
    "allow_write",
    "deny_read",
    "allow_unsandboxed",
    "allow_unix_sockets",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetworkEntry {
    Word(String),
    Hosts(Vec<String>),
}

impl NetworkEntry {
    /// How much it lets through, for comparing a project's with the user's: none < a list < all.
    /// A list is narrower than another only when each of its hosts is allowed by the other.
    fn within(&self, other: &NetworkEntry) -> bool {
        match (self, other) {
            (NetworkEntry::Word(w), _) if w == "none" => true,
            (_, NetworkEntry::Word(w)) if w == "all" => true,
            (NetworkEntry::Hosts(mine), NetworkEntry::Hosts(theirs)) => {
                proxy::Hosts::parse(theirs).is_ok_and(|h| mine.iter().all(|m| h.covers(m)))
            }
            _ => false,
        }
    }
}

impl SandboxEntry {
    /// `nearer` over `self`: its values win; the writable and hidden lists add up.
    pub fn overlay(self, nearer: SandboxEntry) -> SandboxEntry {
        let join = |a: Option<Vec<String>>, b: Option<Vec<String>>| match (a, b) {
            (Some(mut a), Some(b)) => {
                a.extend(b.into_iter().filter(|x| !a.contains(x)).collect::<Vec<_>>());
                Some(a)
            }
            (a, b) => b.or(a),
        };
        SandboxEntry {
            enabled: nearer.enabled.or(self.enabled),
            network: nearer.network.or(self.network),
            allow_write: join(self.allow_write, nearer.allow_write),
            deny_read: join(self.deny_read, nearer.deny_read),
            allow_unsandboxed: nearer.allow_unsandboxed.or(self.allow_unsandboxed),
            allow_unix_sockets: nearer.allow_unix_sockets.or(self.allow_unix_sockets),
        }
    }

    /// Removes from an untrusted project's section what would widen the user's (`farther`):
    /// switching the sandbox off, a wider network, extra writable folders, allowing to leave it.
    /// Returns what was removed.
    pub fn narrow(&mut self, farther: Option<&SandboxEntry>) -> Vec<String> {
        let farther = farther.cloned().unwrap_or_default();
        let mut ignored = Vec::new();
        if self.enabled == Some(false) && farther.enabled != Some(false) {
            ignored.push("sandbox.enabled `false`".to_string());
            self.enabled = None;
        }
        if let Some(network) = &self.network {
            let base = farther
                .network
                .clone()
                .unwrap_or(NetworkEntry::Word("none".into()));
            if !network.within(&base) {
                ignored.push(format!(
                    "sandbox.network `{}`",
                    serde_json::to_string(network).unwrap_or_default()
                ));
                self.network = None;
            }
        }
        if let Some(list) = self.allow_write.take().filter(|l| !l.is_empty()) {
            ignored.push(format!("sandbox.allow_write `{}`", list.join(", ")));
        }
        if self.allow_unsandboxed == Some(true) && farther.allow_unsandboxed == Some(false) {
            ignored.push("sandbox.allow_unsandboxed `true`".to_string());
            self.allow_unsandboxed = None;
        }
        if self.allow_unix_sockets == Some(true) && farther.allow_unix_sockets != Some(true) {
            ignored.push("sandbox.allow_unix_sockets `true`".to_string());
            self.allow_unix_sockets = None;
        }
        ignored
    }
}

/// What the network of a sandboxed program may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Loopback of its own only.
    None,
    /// Everything, as outside.
    All,
    /// These domains, through `new`'s proxy.
    Hosts(proxy::Hosts),
}

/// The sandbox as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    pub enabled: bool,
    pub network: Network,
    pub allow_write: Vec<PathBuf>,
    pub deny_read: Vec<PathBuf>,
    pub allow_unsandboxed: bool,
    pub allow_unix_sockets: bool,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            enabled: true,
            network: Network::None,
            allow_write: Vec::new(),
            deny_read: Vec::new(),
            allow_unsandboxed: true,
            allow_unix_sockets: false,
        }
    }
}

impl SandboxSettings {
    /// From the merged section; `~/` in paths is the home folder. Errors name the key.
    pub fn from_entry(entry: &SandboxEntry, home: Option<&Path>) -> Result<Self, SettingsError> {
        let network = match &entry.network {
            None => Network::None,
            Some(NetworkEntry::Word(w)) if w == "none" => Network::None,
            Some(NetworkEntry::Word(w)) if w == "all" => Network::All,
            Some(NetworkEntry::Word(w)) => {
                return Err(SettingsError::NetworkWord { word: w.clone() });
            }
            Some(NetworkEntry::Hosts(list)) => {
                Network::Hosts(proxy::Hosts::parse(list).map_err(SettingsError::Hosts)?)
            }
        };
        let paths = |key: &'static str,
                     list: &Option<Vec<String>>|
         -> Result<Vec<PathBuf>, SettingsError> {
            list.iter()
                .flatten()
                .map(|p| {
                    let path = match (p.strip_prefix("~/"), home) {
                        (Some(rest), Some(home)) => home.join(rest),
                        _ => PathBuf::from(p),
                    };
                    if path.is_absolute() {
                        Ok(path)
                    } else {
                        Err(SettingsError::NotAbsolute {
                            key,
                            path: p.clone(),
                        })
                    }
                })
                .collect()
        };
        Ok(SandboxSettings {
            enabled: entry.enabled.unwrap_or(true),
            network,
            allow_write: paths("allow_write", &entry.allow_write)?,
            deny_read: paths("deny_read", &entry.deny_read)?,
            allow_unsandboxed: entry.allow_unsandboxed.unwrap_or(true),
            allow_unix_sockets: entry.allow_unix_sockets.unwrap_or(false),
        })
    }
}

/// How the note for the model on a command the sandbox seems to have refused begins.
pub const REFUSAL_NOTE: &str = "[sandbox] This command ran in new's sandbox";

/// Whether the sandbox holds for this session.
#[derive(Debug)]
pub enum State {
    On,
    /// Off, and why.
    Off(OffReason),
}

/// The network a program started inside gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// What `sandbox.network` says.
    Configured,
    /// No network (a project's hook or server whose entry does not ask for it).
    None,
    /// The network as outside (an entry that asks for it).
    All,
}

/// The one way a program is started on the model's or a project's behalf (`bash`, hooks, MCP
/// servers): inside `sandbox` with `reach` when both are given and the sandbox is on, as it is
/// otherwise; in `cwd` either way.
pub fn command(
    sandbox: Option<&OsSandbox>,
    reach: Option<Reach>,
    program: &OsStr,
    args: &[OsString],
    cwd: &Path,
) -> Result<Command, SandboxError> {
    let mut cmd = match (sandbox.filter(|s| s.is_on()), reach) {
        (Some(sandbox), Some(reach)) => sandbox.command(program, args, reach, cwd)?,
        _ => watched(program, args),
    };
    cmd.current_dir(cwd);
    Ok(cmd)
}

/// A program outside the sandbox. On Linux it runs under a watcher (`new __watch`, see
/// `watch.rs`): when `new` dies, even by SIGKILL, the watcher ends the program's process group
/// (the caller's `process_group(0)` makes one) and every process that left it. Elsewhere,
/// without `/proc`, or in a binary that is not `new` (the library's tests), the program itself.
fn watched(program: &OsStr, args: &[OsString]) -> Command {
    #[cfg(target_os = "linux")]
    {
        // `new`'s own binary, also if it was replaced or removed since it started.
        let own = Path::new("/proc/self/exe");
        // A program that is not there is started plainly, so that starting it fails as such
        // (`cannot start …: No such file`), not as a watcher that ends at once.
        if CAN_WATCH.load(Ordering::SeqCst) && own.exists() && found(program) {
            let mut cmd = Command::new(own);
            cmd.arg(WATCH_ARG)
                .arg(process::id().to_string())
                .arg(program)
                .args(args);
            return cmd;
        }
    }
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd
}

/// Whether `program` names a file to run: a path that is a file, or a name found on `PATH`.
#[cfg(target_os = "linux")]
fn found(program: &OsStr) -> bool {
    let path = Path::new(program);
    if path.components().count() > 1 || path.is_absolute() {
        return path.is_file();
    }
    env::var_os("PATH")
        .is_some_and(|dirs| env::split_paths(&dirs).any(|d| d.join(program).is_file()))
}

/// Whether a program a config entry starts (a hook, an MCP server) runs inside the sandbox, and
/// with which network: a project's always, with the network only when its entry says
/// `"network": true`; the user's own only when its entry says `"sandbox": true`.
pub fn entry_reach(from_project: bool, sandbox: Option<bool>, network: bool) -> Option<Reach> {
    (from_project || sandbox == Some(true)).then_some(if network {
        Reach::All
    } else {
        Reach::None
    })
}

/// The files inside `workdir` that these command lines name (a hook's script, an MCP server's
/// program): kept read-only inside the sandbox, so that a command cannot change what runs next.
pub fn files_named(workdir: &Path, commands: &[String]) -> Vec<PathBuf> {
    /// Programs that read a file of the folder by its usual name.
    const READS: &[(&str, &[&str])] = &[
        ("make", &["Makefile", "makefile", "GNUmakefile"]),
        ("npm", &["package.json"]),
        ("npx", &["package.json"]),
        ("yarn", &["package.json"]),
        ("pnpm", &["package.json"]),
        ("just", &["justfile", "Justfile"]),
    ];
    let mut out = Vec::new();
    let mut add = |word: &str| {
        let word = word.strip_prefix("$WORKDIR/").unwrap_or(word);
        if let Ok(real) = workdir.join(word).canonicalize()
            && real.is_file()
            && real.starts_with(workdir)
            && !out.contains(&real)
        {
            out.push(real);
        }
    };
    for command in commands {
        // Every word that names a file of the folder (a script, its interpreter's argument, a
        // config it is given), except where output goes: a hook's log is not what it runs.
        let mut redirect = false;
        for word in command.split_whitespace() {
            let bare =
                word.trim_matches(|c| c == '"' || c == '\'' || c == ';' || c == '&' || c == '|');
            if bare.starts_with('>') || bare.starts_with("2>") || bare.starts_with("&>") {
                // `>file` names its target itself; `>` alone, the next word.
                redirect = bare.trim_start_matches(['2', '&', '>']).is_empty();
                continue;
            }
            if mem::take(&mut redirect) || bare.is_empty() {
                continue;
            }
            // `--config=x.toml`, `VAR=./x.sh`: the part after `=`.
            add(bare.rsplit('=').next().unwrap_or(bare));
            let name = bare.rsplit('/').next().unwrap_or(bare);
            for (program, files) in READS {
                if name == *program {
                    files.iter().for_each(|f| add(f));
                }
            }
        }
    }
    out
}

/// The sandbox of one session: its private temp folder, its proxy, its state.
pub struct OsSandbox {
    settings: SandboxSettings,
    helper: PathBuf,
    workdir: PathBuf,
    /// Private to this session (0700): `tmp/` ($TMPDIR inside) and the proxy's socket.
    base: PathBuf,
    /// Absolute paths kept read-only when they exist (more are added once the instructions are
    /// read: the files they include).
    protected: RwLock<Vec<PathBuf>>,
    /// The protected names as last looked at by [`OsSandbox::protected_news`] (none: nobody
    /// looks: no program runs beside the commands, whose own comparison says what they did).
    looked: Mutex<Option<Vec<(PathBuf, String)>>>,
    /// Absolute paths covered when they exist.
    hidden: Vec<PathBuf>,
    state: OnceLock<State>,
    proxy: Mutex<Option<proxy::Proxy>>,
    questions: sync::Mutex<Option<UnboundedReceiver<proxy::NetQuestion>>>,
    ask: Mutex<Option<UnboundedSender<proxy::NetQuestion>>>,
}

impl Debug for OsSandbox {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("OsSandbox")
            .field("workdir", &self.workdir)
            .field("state", &self.state.get())
            .finish()
    }
}

impl Drop for OsSandbox {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// The names of `before` whose state in `now` differs (a name only in one of them is not
/// compared: the list grows once the instructions are read).
fn changes(before: &[(PathBuf, String)], now: &[(PathBuf, String)]) -> Vec<PathBuf> {
    before
        .iter()
        .filter(|(path, state)| {
            now.iter()
                .find(|(p, _)| p == path)
                .is_some_and(|(_, s)| s != state)
        })
        .map(|(p, _)| p.clone())
        .collect()
}

/// Why a probe of the helper failed, from what it wrote: its report ([`SetupError`] as JSON, what
/// a probe writes), a line of another kind (said as it came), or nothing (its exit status).
fn helper_failure(stderr: &[u8], status: ExitStatus) -> OffReason {
    let text = String::from_utf8_lossy(stderr);
    let line = text.trim().lines().next().unwrap_or_default().trim();
    if let Ok(report) = serde_json::from_str::<SetupError>(line) {
        return OffReason::Setup(report);
    }
    let line = line
        .strip_prefix("new: the sandbox could not be set up: ")
        .unwrap_or(line);
    if line.is_empty() {
        OffReason::HelperFailed { status }
    } else {
        OffReason::Helper {
            line: line.to_string(),
        }
    }
}

/// The session's sandbox, for what `new` itself runs in the project (its `git status`).
static CURRENT: OnceLock<Arc<OsSandbox>> = OnceLock::new();

/// Makes `sandbox` the session's (once; later calls change nothing).
pub fn set_current(sandbox: Arc<OsSandbox>) {
    let _ = CURRENT.set(sandbox);
}

/// The session's sandbox, once set.
pub fn current() -> Option<Arc<OsSandbox>> {
    CURRENT.get().cloned()
}

/// Where `new` keeps what a session's sandbox uses.
fn session_base() -> PathBuf {
    let id = uuid::Uuid::new_v4().simple().to_string();
    env::temp_dir().join(format!(
        "{}{}-{}",
        session_prefix(),
        process::id(),
        &id[..8]
    ))
}

/// `new-UID-`: the start of the names of this user's session folders (`new-UID-PID-RANDOM`).
fn session_prefix() -> String {
    // SAFETY: getuid cannot fail.
    #[cfg(unix)]
    let uid = unsafe { libc::getuid() };
    #[cfg(not(unix))]
    let uid = 0;
    format!("new-{uid}-")
}

/// The other sessions' folders in the temp folder: those of live sessions (covered inside the
/// sandbox), and those whose session is gone (removed).
fn session_folders(mine: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let prefix = session_prefix();
    let (mut live, mut stale) = (Vec::new(), Vec::new());
    let Ok(entries) = fs::read_dir(env::temp_dir()) else {
        return (live, stale);
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        if path == mine {
            continue;
        }
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(platform::process_alive);
        if alive {
            live.push(path);
        } else {
            stale.push(path);
        }
    }
    (live, stale)
}

impl OsSandbox {
    /// The sandbox of a session in `workdir`. `helper`: the `new` binary (it is started again as
    /// the helper). `datadir`: the conversations (hidden, or read-only when inside WORKDIR).
    /// `also_protected`: more files inside WORKDIR to keep read-only (those hooks and MCP servers
    /// run); `also_hidden`: more paths to hide (the user's configuration folder). Nothing is
    /// started or probed yet.
    pub fn new(
        settings: SandboxSettings,
        workdir: &Path,
        datadir: &Path,
        helper: PathBuf,
        also_protected: Vec<PathBuf>,
        also_hidden: Vec<PathBuf>,
    ) -> Arc<OsSandbox> {
        let workdir = workdir
            .canonicalize()
            .unwrap_or_else(|_| workdir.to_path_buf());
        let datadir = datadir
            .canonicalize()
            .unwrap_or_else(|_| datadir.to_path_buf());
        let mut protected: Vec<PathBuf> = PROTECTED.iter().map(|p| workdir.join(p)).collect();
        protected.extend(also_protected);
        let home = dirs::home_dir();
        // Only those inside a writable folder are mounted read-only (see `spec`).
        protected.extend(
            home.iter()
                .flat_map(|h| RUN_LATER_IN_HOME.iter().map(move |p| h.join(p))),
        );
        let mut hidden: Vec<PathBuf> = home
            .iter()
            .flat_map(|h| HIDDEN_IN_HOME.iter().map(move |p| h.join(p)))
            .collect();
        hidden.extend(also_hidden);
        hidden.extend(dirs::data_dir().map(|d| d.join("new")));
        hidden.extend(HIDDEN_SOCKETS.iter().map(PathBuf::from));
        hidden.extend(settings.deny_read.iter().cloned());
        if datadir.starts_with(&workdir) {
            protected.push(datadir);
        } else {
            hidden.push(datadir);
        }
        Arc::new(OsSandbox {
            settings,
            helper,
            workdir,
            base: session_base(),
            protected: RwLock::new(protected),
            looked: Mutex::new(None),
            hidden,
            state: OnceLock::new(),
            proxy: Mutex::new(None),
            questions: sync::Mutex::new(None),
            ask: Mutex::new(None),
        })
    }

    /// Whether WORKDIR is the user's home folder (its start-up files stay read-only; the
    /// front end says so once).
    pub fn workdir_is_home(&self) -> bool {
        dirs::home_dir()
            .and_then(|h| h.canonicalize().ok())
            .is_some_and(|h| h == self.workdir)
    }

    /// Keeps these paths read-only too (the files the instructions include).
    pub fn protect(&self, paths: impl IntoIterator<Item = PathBuf>) {
        let mut protected = self.protected.write().unwrap_or_else(|e| e.into_inner());
        for p in paths {
            if !protected.contains(&p) {
                protected.push(p);
            }
        }
    }

    /// Whether `path` (absolute, resolved) is one of the protected paths or inside one: a file
    /// tool writing there is asked every time, as for `.new/`.
    pub fn protects(&self, path: &Path) -> bool {
        self.protected_list().iter().any(|p| path.starts_with(p))
    }

    fn protected_list(&self) -> Vec<PathBuf> {
        self.protected
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// On or off; the first call finds out (it starts the helper once, a few milliseconds).
    pub fn state(&self) -> &State {
        self.state.get_or_init(|| self.probe())
    }

    /// The state if it is known without waiting for the helper: found out already, or off by
    /// the settings or the system (a one-shot's request does not wait for the probe).
    pub fn state_if_known(&self) -> Option<&State> {
        if !self.settings.enabled || !cfg!(target_os = "linux") {
            return Some(self.state());
        }
        self.state.get()
    }

    pub fn is_on(&self) -> bool {
        matches!(self.state(), State::On)
    }

    /// Whether a command may ask to run outside (`"sandbox": false`).
    pub fn may_leave(&self) -> bool {
        self.settings.allow_unsandboxed
    }

    /// `$TMPDIR` inside the sandbox.
    pub fn temp_dir(&self) -> PathBuf {
        self.base.join("tmp")
    }

    fn probe(&self) -> State {
        if !self.settings.enabled {
            return State::Off(OffReason::Disabled);
        }
        if !cfg!(target_os = "linux") {
            return State::Off(OffReason::Unsupported { os: OS });
        }
        let spec = match self.spec(Reach::Configured) {
            Ok(spec) => Spec {
                probe: true,
                ..spec
            },
            Err(e) => return State::Off(OffReason::Session(e)),
        };
        let json = serde_json::to_string(&spec).expect("JSON");
        let output = process::Command::new(&self.helper)
            .arg(HELPER_ARG)
            .arg(json)
            .stdin(Stdio::null())
            .output();
        match output {
            Ok(out) if out.status.success() => State::On,
            Ok(out) => State::Off(helper_failure(&out.stderr, out.status)),
            Err(cause) => State::Off(OffReason::CannotStart {
                path: self.helper.clone(),
                cause,
            }),
        }
    }

    /// Creates the session's private folders (once; they are removed when the session ends).
    fn ensure_base(&self) -> Result<(), SandboxError> {
        static SWEPT: Once = Once::new();
        // Folders left by sessions that were killed are removed, once.
        SWEPT.call_once(|| {
            for stale in session_folders(&self.base).1 {
                let _ = fs::remove_dir_all(stale);
            }
        });
        platform::private_dir_builder()
            .create(self.temp_dir())
            .map_err(|e| SandboxError::TempFolder {
                path: self.temp_dir(),
                cause: e.into(),
            })
    }

    /// The helper's instructions for one program, from what exists now.
    pub fn spec(&self, reach: Reach) -> Result<Spec, SandboxError> {
        self.ensure_base()?;
        let existing = |paths: &[PathBuf]| -> Vec<PathBuf> {
            let mut out: Vec<PathBuf> = paths
                .iter()
                .filter_map(|p| {
                    // A covered place is covered where it really is: a link leads to its target.
                    fs::symlink_metadata(p).ok()?;
                    p.canonicalize().ok()
                })
                .collect();
            out.sort();
            out.dedup();
            out
        };
        let mut writable = vec![self.workdir.clone(), self.temp_dir()];
        writable.extend(self.settings.allow_write.iter().cloned());
        let writable = existing(&writable);
        // Other sessions' private folders are covered too.
        let mut hidden_now = self.hidden.clone();
        hidden_now.extend(self.other_sessions());
        // A covered place that holds a writable folder would hide it: it stays visible.
        let hidden: Vec<PathBuf> = existing(&hidden_now)
            .into_iter()
            .filter(|h| !writable.iter().any(|w| w.starts_with(h)))
            .collect();
        let read_only: Vec<PathBuf> = existing(&self.protected_list())
            .into_iter()
            .filter(|p| writable.iter().any(|w| p.starts_with(w)))
            .collect();
        let mut pinned: Vec<PathBuf> = Vec::new();
        for path in read_only.iter().chain(&hidden) {
            for above in path.ancestors().skip(1) {
                if writable
                    .iter()
                    .any(|w| above.starts_with(w) && above != w.as_path())
                    && !pinned.iter().any(|p| p == above)
                {
                    pinned.push(above.to_path_buf());
                }
            }
        }
        pinned.sort_by_key(|p| p.components().count());
        let (isolate_network, proxy_socket) = match (reach, &self.settings.network) {
            (Reach::All, _) | (Reach::Configured, Network::All) => (false, None),
            (Reach::None, _) | (Reach::Configured, Network::None) => (true, None),
            (Reach::Configured, Network::Hosts(_)) => (true, Some(self.proxy_socket()?)),
        };
        Ok(Spec {
            writable,
            devices: DEVICES.iter().map(PathBuf::from).collect(),
            read_only,
            hidden,
            isolate_network,
            proxy_socket,
            cwd: self.workdir.clone(),
            pinned,
            block_unix_sockets: !self.settings.allow_unix_sockets,
            probe: false,
        })
    }

    /// The private folders of other live sessions of this user.
    fn other_sessions(&self) -> Vec<PathBuf> {
        session_folders(&self.base).0
    }

    /// Removes the session's private folder and stops the proxy (at the end of the session;
    /// the process may not run destructors then).
    pub fn cleanup(&self) {
        if let Ok(mut proxy) = self.proxy.lock() {
            proxy.take();
        }
        let _ = fs::remove_dir_all(&self.base);
    }

    /// The proxy's socket, the proxy started on first use (inside the runtime).
    fn proxy_socket(&self) -> Result<PathBuf, SandboxError> {
        let Network::Hosts(hosts) = &self.settings.network else {
            return Err(SandboxError::NoProxy);
        };
        let socket = self.base.join("proxy.sock");
        let mut proxy = self.proxy.lock().unwrap_or_else(|e| e.into_inner());
        if proxy.is_none() {
            if Handle::try_current().is_err() {
                // Only the probe asks outside the runtime: it needs the path, not the proxy.
                return Ok(socket);
            }
            let ask = self.ask.lock().unwrap_or_else(|e| e.into_inner()).clone();
            *proxy = Some(
                proxy::Proxy::start(&socket, hosts.clone(), ask)
                    .map_err(|e| SandboxError::Proxy { cause: e.into() })?,
            );
        }
        Ok(socket)
    }

    /// Lets the proxy ask about a domain not on the list (a terminal is there to answer);
    /// [`OsSandbox::next_question`] hands the questions out.
    pub fn ask_about_hosts(&self) {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.ask.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        if let Ok(mut q) = self.questions.try_lock() {
            *q = Some(rx);
        }
    }

    /// The next question of the proxy; pending for ever when none can come.
    pub async fn next_question(&self) -> proxy::NetQuestion {
        let mut guard = self.questions.lock().await;
        match guard.as_mut() {
            Some(rx) => match rx.recv().await {
                Some(q) => q,
                None => future::pending().await,
            },
            None => future::pending().await,
        }
    }

    /// The domains the proxy refused since the last call.
    pub fn take_refused(&self) -> Vec<String> {
        self.proxy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.take_refused())
            .unwrap_or_default()
    }

    /// A command that runs `program args` in `cwd` inside the sandbox, with `$TMPDIR` pointing to
    /// the session's private temp folder. (The helper enters `cwd` again once the mounts are in
    /// place, so a folder that is covered looks covered from inside too.)
    pub fn command(
        &self,
        program: &OsStr,
        args: &[OsString],
        reach: Reach,
        cwd: &Path,
    ) -> Result<Command, SandboxError> {
        let mut spec = self.spec(reach)?;
        spec.cwd = cwd.to_path_buf();
        let json = serde_json::to_string(&spec).map_err(|e| SandboxError::Describe {
            cause: e.to_string(),
        })?;
        let mut cmd = Command::new(&self.helper);
        cmd.arg(HELPER_ARG)
            .arg(json)
            .arg(program)
            .args(args)
            .env("TMPDIR", self.temp_dir());
        // The one secret policy (the callers remove the config's provider keys as well).
        for name in secret::secret_env(&[]) {
            cmd.env_remove(name);
        }
        Ok(cmd)
    }

    /// The protected names inside WORKDIR that do not exist now (a command could create them).
    pub fn missing_protected(&self) -> Vec<PathBuf> {
        self.protected_list()
            .into_iter()
            .filter(|p| p.starts_with(&self.workdir) && fs::symlink_metadata(p).is_err())
            .collect()
    }

    /// What each protected name inside WORKDIR is now: missing, a link and where it leads, or
    /// a file or folder by its inode. A name that is a link, or is missing, is not kept
    /// read-only by a mount (only its target is), so a command can change it: comparing this
    /// before and after a command says whether one did.
    pub fn protected_state(&self) -> Vec<(PathBuf, String)> {
        self.protected_list()
            .into_iter()
            .filter(|p| p.starts_with(&self.workdir))
            .map(|p| {
                let state = match fs::symlink_metadata(&p) {
                    Err(_) => "missing".to_string(),
                    Ok(m) if m.file_type().is_symlink() => format!(
                        "link to {}",
                        fs::read_link(&p).unwrap_or_default().display()
                    ),
                    Ok(m) => platform::file_identity(&p, &m),
                };
                (p, state)
            })
            .collect()
    }

    /// The protected names whose state changed since `before` ([`OsSandbox::protected_state`]).
    /// What a command changed is said by the command's report: [`OsSandbox::protected_news`]
    /// does not say it again.
    pub fn changed_protected(&self, before: &[(PathBuf, String)]) -> Vec<PathBuf> {
        let now = self.protected_state();
        let changed = changes(before, &now);
        if let Some(looked) = self
            .looked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            for (path, state) in looked.iter_mut() {
                if let Some((_, s)) = now.iter().find(|(p, _)| changed.contains(p) && p == path) {
                    state.clone_from(s);
                }
            }
        }
        changed
    }

    /// The protected names whose state changed since the last look, which this one replaces.
    /// The first look is the start: it says nothing. Programs that run beside the commands
    /// (MCP servers, for the whole session) are watched so: a name missing when they started
    /// is not covered by a read-only mount, and one of them could create it (`AGENTS.md`,
    /// `.git/hooks/pre-commit`, `.claude/settings.json`).
    pub fn protected_news(&self) -> Vec<PathBuf> {
        let now = self.protected_state();
        let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
        let changed = looked
            .as_deref()
            .map(|before| changes(before, &now))
            .unwrap_or_default();
        *looked = Some(now);
        changed
    }

    /// A note for the model when a sandboxed command's output looks like the sandbox refused it
    /// (it starts with [`REFUSAL_NOTE`], which a front end may look for to tell the user).
    pub fn refusal_note(
        &self,
        output: &str,
        failed: bool,
        refused_hosts: &[String],
    ) -> Option<String> {
        let lower = output.to_lowercase();
        let network_off = !matches!(self.settings.network, Network::All);
        let write_signs = [
            "permission denied",
            "read-only file system",
            "operation not permitted",
            "invalid cross-device link",
        ];
        let net_signs = [
            "network is unreachable",
            "could not resolve",
            "temporary failure in name resolution",
            "name or service not known",
            "failed to resolve",
            "no address associated",
            "connection refused",
            "couldn't connect to server",
            "failed to connect",
            "name resolution",
        ];
        let wrote = write_signs.iter().any(|s| lower.contains(s));
        let net = network_off && net_signs.iter().any(|s| lower.contains(s));
        if refused_hosts.is_empty() && !(failed || wrote) {
            return None;
        }
        if refused_hosts.is_empty() && !wrote && !net {
            return None;
        }
        let mut note = String::from(REFUSAL_NOTE);
        note.push_str(
            ": it may write only inside the working \
             folder and $TMPDIR (and never in .git, .new, AGENTS.md or CLAUDE.md), secret \
             folders such as ~/.ssh look empty, and ",
        );
        note.push_str(&match &self.settings.network {
            Network::None => "it has no network.".to_string(),
            Network::All => "it has the network.".to_string(),
            Network::Hosts(h) => format!(
                "it reaches only {} through a proxy.",
                h.patterns().join(", ")
            ),
        });
        if !refused_hosts.is_empty() {
            note.push_str(&format!(
                " The sandbox refused connections to {}.",
                refused_hosts.join(", ")
            ));
        } else {
            note.push_str(" The error above looks like the sandbox refusing it.");
        }
        if self.settings.allow_unsandboxed {
            note.push_str(
                " If the command really needs this, call bash again with \"sandbox\": false and \
                 a \"reason\"; the user will be asked. Do not retry it unchanged.",
            );
        } else {
            note.push_str(" Leaving the sandbox is not allowed here; do without it.");
        }
        Some(note)
    }
}

#[cfg(test)]
mod tests {

    #[cfg(target_os = "linux")]
    #[test]
    fn a_program_is_found_by_path_or_on_path() {
        assert!(super::found("sh".as_ref()));
        assert!(super::found("/bin/sh".as_ref()));
        assert!(!super::found("/nonexistent/mcp-server".as_ref()));
        assert!(!super::found("no-such-program-here".as_ref()));
    }
    use super::*;
    use std::fs;
    #[cfg(not(windows))]
    use std::io;
    #[cfg(all(not(windows), not(target_os = "macos")))]
    use std::io::ErrorKind;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;
    #[cfg(not(windows))]
    use std::process::ExitStatus;

    #[test]
    fn the_files_hooks_and_servers_run_are_found_and_their_outputs_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().canonicalize().unwrap();
        for f in [
            "guard.sh",
            "lint.py",
            "log.txt",
            "server.js",
            "data.json",
            "x.sh",
            "Makefile",
            "out.txt",
            "cfg.toml",
        ] {
            fs::write(work.join(f), "").unwrap();
        }
        let found = files_named(
            &work,
            &[
                "./guard.sh --strict >> log.txt".into(),
                "bash -e lint.py data.json && echo ok >out.txt".into(),
                "node --inspect".into(),
                "server.js".into(),
                "env FOO=1 sh -c ./x.sh --config=cfg.toml".into(),
                "make lint 2> log.txt".into(),
            ],
        );
        let names: Vec<String> = found
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "guard.sh",
                "lint.py",
                "data.json",
                "server.js",
                "x.sh",
                "cfg.toml",
                "Makefile"
            ]
        );
    }

    #[test]
    fn an_untrusted_project_may_only_narrow_the_sandbox() {
        let user = SandboxEntry {
            network: Some(NetworkEntry::Hosts(vec!["*.example.com".into()])),
            allow_unsandboxed: Some(false),
            ..Default::default()
        };
        let mut project = SandboxEntry {
            enabled: Some(false),
            network: Some(NetworkEntry::Word("all".into())),
            allow_write: Some(vec!["/".into()]),
            deny_read: Some(vec!["/secret".into()]),
            allow_unsandboxed: Some(true),
            allow_unix_sockets: Some(true),
        };
        let ignored = project.narrow(Some(&user));
        assert_eq!(ignored.len(), 5, "{ignored:?}");
        assert_eq!(
            project,
            SandboxEntry {
                deny_read: Some(vec!["/secret".into()]),
                ..Default::default()
            }
        );
        // Narrower networks stay: none, and a list inside the user's.
        for narrower in [
            NetworkEntry::Word("none".into()),
            NetworkEntry::Hosts(vec!["api.example.com".into()]),
        ] {
            let mut p = SandboxEntry {
                network: Some(narrower.clone()),
                enabled: Some(true),
                ..Default::default()
            };
            assert!(p.narrow(Some(&user)).is_empty());
            assert_eq!(p.network, Some(narrower));
        }
        // A list is wider than the default (none).
        let mut p = SandboxEntry {
            network: Some(NetworkEntry::Hosts(vec!["github.com".into()])),
            ..Default::default()
        };
        assert_eq!(p.narrow(None).len(), 1);
        // The hidden and writable lists add up.
        let merged = SandboxEntry {
            deny_read: Some(vec!["/a".into()]),
            ..Default::default()
        }
        .overlay(SandboxEntry {
            deny_read: Some(vec!["/b".into(), "/a".into()]),
            ..Default::default()
        });
        assert_eq!(merged.deny_read, Some(vec!["/a".into(), "/b".into()]));
    }

    /// A sandbox whose helper is not there is off, and says which helper could not start.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_missing_helper_turns_the_sandbox_off_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let helper = dir.path().join("no-such-new");
        let sandbox = OsSandbox::new(
            SandboxSettings::default(),
            dir.path(),
            &dir.path().join("data"),
            helper.clone(),
            Vec::new(),
            Vec::new(),
        );
        match sandbox.state() {
            State::Off(OffReason::CannotStart { path, cause }) => {
                assert_eq!(path, &helper);
                assert_eq!(cause.kind(), ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        assert!(!sandbox.is_on());
        let said = match sandbox.state() {
            State::Off(why) => why.to_string(),
            State::On => unreachable!(),
        };
        assert!(
            said.starts_with(&format!(
                "cannot start the sandbox helper {}: ",
                helper.display()
            )),
            "{said}"
        );
        // Switched off in the config, it does not even try.
        let off = OsSandbox::new(
            SandboxSettings {
                enabled: false,
                ..SandboxSettings::default()
            },
            dir.path(),
            &dir.path().join("data"),
            helper,
            Vec::new(),
            Vec::new(),
        );
        assert!(matches!(off.state(), State::Off(OffReason::Disabled)));
    }

    /// Issue 41 (7): what a program beside the commands (an MCP server) creates among the
    /// protected names is news once, from the first look on; what a command did (and its own
    /// report said) is not news again; a name replaced by a link is news too.
    #[cfg(unix)]
    #[test]
    fn protected_names_created_beside_the_commands_are_news_once() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().canonicalize().unwrap();
        let sandbox = OsSandbox::new(
            SandboxSettings::default(),
            &work,
            &work.join("data"),
            work.join("no-such-new"),
            Vec::new(),
            Vec::new(),
        );
        fs::write(work.join("CLAUDE.md"), "mine").unwrap();
        assert!(
            sandbox.protected_news().is_empty(),
            "the first look is the start"
        );
        assert!(sandbox.protected_news().is_empty());
        fs::write(work.join("AGENTS.md"), "planted").unwrap();
        fs::create_dir_all(work.join(".git/hooks")).unwrap();
        fs::write(work.join(".git/hooks/pre-commit"), "planted").unwrap();
        let mut news = sandbox.protected_news();
        news.sort();
        assert_eq!(news, [work.join(".git"), work.join("AGENTS.md")]);
        assert!(sandbox.protected_news().is_empty(), "said once");
        // A command's own comparison says what it changed: not news afterwards.
        let before = sandbox.protected_state();
        fs::write(work.join("AGENTS.override.md"), "by a command").unwrap();
        assert_eq!(
            sandbox.changed_protected(&before),
            [work.join("AGENTS.override.md")]
        );
        assert!(sandbox.protected_news().is_empty());
        // Replaced by a link: news (the mount keeps the target, not the name).
        fs::remove_file(work.join("CLAUDE.md")).unwrap();
        symlink(work.join("AGENTS.md"), work.join("CLAUDE.md")).unwrap();
        // What the command did not change stays news for the next look.
        let before = sandbox.protected_state();
        assert!(sandbox.changed_protected(&before).is_empty());
        assert_eq!(sandbox.protected_news(), [work.join("CLAUDE.md")]);
    }

    /// The helper's report crosses the process boundary as JSON and comes back as the same
    /// variant; a line of another kind is kept as it came; silence is the exit status.
    #[cfg(unix)]
    #[test]
    fn a_helper_s_report_comes_back_as_its_variant() {
        use std::os::unix::process::ExitStatusExt;
        let status = ExitStatus::from_raw(125 << 8);
        let report = SetupError::Pin {
            path: "/w/scripts".into(),
            cause: io::Error::from_raw_os_error(libc::EPERM).into(),
        };
        let json = serde_json::to_string(&report).unwrap();
        match helper_failure(format!("{json}\n").as_bytes(), status) {
            OffReason::Setup(back) => {
                assert_eq!(back, report);
                assert_eq!(
                    back.to_string(),
                    format!(
                        "pinning /w/scripts: {}",
                        io::Error::from_raw_os_error(libc::EPERM)
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        for unit in [SetupError::LandlockTooOld, SetupError::NoSeccompFilter] {
            let json = serde_json::to_string(&unit).unwrap();
            assert!(
                matches!(helper_failure(json.as_bytes(), status), OffReason::Setup(back) if back == unit)
            );
        }
        match helper_failure(b"new: the sandbox could not be set up: odd\nmore", status) {
            OffReason::Helper { line } => assert_eq!(line, "odd"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            helper_failure(b"  \n", status),
            OffReason::HelperFailed { .. }
        ));
    }

    #[test]
    fn settings_name_the_bad_key() {
        let bad = SandboxEntry {
            network: Some(NetworkEntry::Word("some".into())),
            ..Default::default()
        };
        let error = SandboxSettings::from_entry(&bad, None).unwrap_err();
        assert_eq!(
            error,
            SettingsError::NetworkWord {
                word: "some".into()
            }
        );
        assert_eq!(error.key(), "sandbox.network");
        let bad = SandboxEntry {
            network: Some(NetworkEntry::Hosts(vec!["https://x.org".into()])),
            ..Default::default()
        };
        let error = SandboxSettings::from_entry(&bad, None).unwrap_err();
        assert!(matches!(
            &error,
            SettingsError::Hosts(proxy::HostsError::Bad {
                problem: proxy::HostProblem::Scheme,
                ..
            })
        ));
        assert_eq!(error.key(), "sandbox.network");
        let bad = SandboxEntry {
            allow_write: Some(vec!["relative/x".into()]),
            ..Default::default()
        };
        let error = SandboxSettings::from_entry(&bad, None).unwrap_err();
        assert_eq!(
            error,
            SettingsError::NotAbsolute {
                key: "allow_write",
                path: "relative/x".into()
            }
        );
        assert_eq!(error.key(), "sandbox.allow_write");
        assert_eq!(
            error.to_string(),
            "`sandbox.allow_write` is not valid: `relative/x` is not an absolute path (or one starting with ~/)"
        );
        let ok = SandboxEntry {
            deny_read: Some(vec!["~/.secrets".into()]),
            network: Some(NetworkEntry::Word("all".into())),
            ..Default::default()
        };
        let s = SandboxSettings::from_entry(&ok, Some(Path::new("/home/u"))).unwrap();
        assert_eq!(s.deny_read, [PathBuf::from("/home/u/.secrets")]);
        assert_eq!(s.network, Network::All);
        assert!(s.enabled && s.allow_unsandboxed);
    }
}
