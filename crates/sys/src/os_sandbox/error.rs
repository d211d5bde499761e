//! What can go wrong with the sandbox, as data: tests match the variants, and the front end says
//! each one in the user's language. The English text of each is its `Display`.
//!
//! Three layers: [`SettingsError`] is a `sandbox` section that cannot be used; [`SandboxError`]
//! is the session's side failing to prepare a program's start (its folder, its proxy);
//! [`SetupError`] is the helper failing to build the sandbox, told back to the session across the
//! process boundary (so it is plain, serializable data). [`OffReason`] gathers why the sandbox is
//! off.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::proxy::HostsError;
use std::io;
use std::process::ExitStatus;

/// A `sandbox` section of a config file that cannot be used; [`SettingsError::key`] names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "`sandbox.network` is not valid: `{word}` is not \"none\", \"all\" or a list of domains"
    )]
    NetworkWord { word: String },
    #[error("`sandbox.network` is not valid: {0}")]
    Hosts(HostsError),
    #[error(
        "`sandbox.{key}` is not valid: `{path}` is not an absolute path (or one starting with ~/)"
    )]
    NotAbsolute { key: &'static str, path: String },
}

impl SettingsError {
    /// The key of the section that holds the bad value (`sandbox.network`).
    pub fn key(&self) -> String {
        match self {
            SettingsError::NetworkWord { .. } | SettingsError::Hosts(_) => "sandbox.network".into(),
            SettingsError::NotAbsolute { key, .. } => format!("sandbox.{key}"),
        }
    }
}

/// The session's side could not prepare a program's start inside the sandbox. Plain data (a
/// hook's failure carries it, and is kept and compared).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("creating the sandbox's temp folder {path}: {cause}")]
    TempFolder { path: PathBuf, cause: OsCause },
    #[error("no proxy is configured")]
    NoProxy,
    #[error("starting the network proxy: {cause}")]
    Proxy { cause: OsCause },
    #[error("writing the sandbox description: {cause}")]
    Describe { cause: String },
}

/// An operating system's error as plain data: its number, when it has one, and its text. The
/// helper reports it across the process boundary; values that are kept and compared hold it
/// where an `io::Error` could not be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct OsCause {
    pub errno: Option<i32>,
    pub message: String,
}

impl From<io::Error> for OsCause {
    fn from(e: io::Error) -> Self {
        OsCause {
            errno: e.raw_os_error(),
            message: e.to_string(),
        }
    }
}

impl OsCause {
    /// The error of the last system call.
    pub fn last() -> Self {
        io::Error::last_os_error().into()
    }
}

/// The helper could not build the sandbox (Linux: namespaces, mounts, Landlock, seccomp).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum SetupError {
    #[error("no sandbox description given")]
    NoSpec,
    #[error("reading the sandbox description: {cause}")]
    BadSpec { cause: String },
    #[error("no program to run")]
    NoProgram,
    #[error("fork: {cause}")]
    Fork { cause: OsCause },
    #[error("cannot run `{program}`: {cause}")]
    Exec { program: String, cause: OsCause },
    #[error("waiting: {cause}")]
    Wait { cause: OsCause },
    #[error("entering {path}: {cause}")]
    EnterFolder { path: PathBuf, cause: OsCause },
    #[error("user namespaces are unavailable (unshare: {cause})")]
    Unshare { cause: OsCause },
    #[error("writing {path}: {cause}")]
    WriteProc { path: String, cause: OsCause },
    #[error("making the mounts private: {cause}")]
    PrivateMounts { cause: OsCause },
    #[error("pinning {path}: {cause}")]
    Pin { path: PathBuf, cause: OsCause },
    #[error("hiding {path}: {cause}")]
    Hide { path: PathBuf, cause: OsCause },
    #[error("mounting a private /dev/shm: {cause}")]
    SharedMemory { cause: OsCause },
    #[error("protecting {path}: {cause}")]
    Protect { path: PathBuf, cause: OsCause },
    #[error("making what lies outside the writable folders read-only: {cause}")]
    ReadOnlyOutside { cause: OsCause },
    #[error("keeping {path} writable: {cause}")]
    KeepWritable { path: PathBuf, cause: OsCause },
    #[error("making the sandbox's first process impossible to trace: {cause}")]
    Untraceable { cause: OsCause },
    #[error("bringing up loopback: {cause}")]
    Loopback { cause: OsCause },
    #[error("listening for the proxy: {cause}")]
    ProxyListener { cause: OsCause },
    #[error("Landlock: {cause}")]
    Landlock { cause: String },
    #[error("Landlock is not available in this kernel")]
    LandlockUnavailable,
    #[error("Landlock is too old in this kernel (ABI 6, Linux 6.12, is needed)")]
    LandlockTooOld,
    #[error("dropping capability {capability}: {cause}")]
    DropCapability { capability: i32, cause: OsCause },
    #[error("dropping capabilities: {cause}")]
    DropCapabilities { cause: OsCause },
    #[error("no seccomp filter for this architecture")]
    NoSeccompFilter,
    #[error("installing the seccomp filter: {cause}")]
    Seccomp { cause: OsCause },
}

/// Why the sandbox is off for the session.
#[derive(Debug, thiserror::Error)]
pub enum OffReason {
    #[error("sandbox.enabled is false in the config")]
    Disabled,
    #[error("not available on {os} yet")]
    Unsupported { os: &'static str },
    /// The session could not describe the sandbox (its folder, its proxy).
    #[error(transparent)]
    Session(SandboxError),
    /// The helper could not build it.
    #[error(transparent)]
    Setup(SetupError),
    /// The helper failed with a line that is not one of its reports (said as it came).
    #[error("{line}")]
    Helper { line: String },
    /// The helper failed without a word.
    #[error("the helper failed ({status})")]
    HelperFailed { status: ExitStatus },
    #[error("cannot start the sandbox helper {path}: {cause}")]
    CannotStart { path: PathBuf, cause: io::Error },
}
