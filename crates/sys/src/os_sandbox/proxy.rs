//! The network proxy for sandboxed commands.
//!
//! With `sandbox.network` set to a list of domains, a sandboxed command runs in a network
//! namespace of its own that has only loopback. Its one way out is this proxy, which `new` runs
//! *outside* the sandbox on a Unix-domain socket; the sandbox side forwards `127.0.0.1:PORT` to
//! that socket and points `HTTP_PROXY`/`HTTPS_PROXY` at it.
//!
//! What it serves, one request per client connection:
//! - `CONNECT host:port` (HTTPS and anything else tunnelled): a TCP connection to `host:port`,
//!   then bytes copied both ways, untouched.
//! - absolute-form plain HTTP (`GET http://host/path`): the request is rewritten to origin-form
//!   and sent to `host`, then bytes are copied both ways.
//!
//! What it refuses, and why:
//! - hosts not on the list (`403`), unless the user, asked through [`NetQuestion`], says yes:
//!   the list is the whole point of the sandbox's network rule;
//! - origin-form requests, `https://` in absolute form, user info in URLs, malformed or oversized
//!   header blocks (`400`): the proxy only forwards what it fully understood, so that the host it
//!   checked is the host it connects to. The head is parsed by `httparse` (HTTP/1.0 and 1.1, no
//!   folded lines, no bare CR, no empty line before the request line), then checked for what a
//!   proxy must refuse: more than one `Host`, a body length given two ways or two different ones;
//!   forwarded header lines are written again from the parsed names and values;
//! - numeric host forms other than dotted IPv4 and IPv6 (`127.1`, `0x7f000001`): the resolver
//!   would turn them into addresses, which would dodge the rule that IP literals must be listed
//!   literally.
//!
//! Names are resolved here, outside the sandbox, so the sandbox needs no DNS. The proxy checks
//! names, not what a TLS tunnel carries: a client that puts another name in TLS SNI or an inner
//! `Host` header (domain fronting) still reaches only the address of the checked name.
//! For plain HTTP the proxy does rewrite `Host` to the URL's host, as RFC 9112 asks of proxies.

// The proxy listens on a Unix-domain socket: where there are none (Windows, whose sandbox is
// unavailable anyway), it cannot start, and its serving code is unused.
#![cfg_attr(not(unix), allow(dead_code))]

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
#[cfg(unix)]
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
#[cfg(not(windows))]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
#[cfg(unix)]
use tokio::task::JoinSet;

use super::internal::{is_internal, local_addresses};
#[cfg(not(windows))]
use std::collections::VecDeque;
use std::fmt::Display;
#[cfg(not(windows))]
use std::fs;
#[cfg(not(windows))]
use std::fs::Metadata;
#[cfg(not(windows))]
use std::fs::Permissions;
use std::io;
#[cfg(not(windows))]
use std::io::ErrorKind;
use std::mem;
use tokio::io::copy;
use tokio::io::copy_bidirectional;
use tokio::io::sink;
use tokio::net;
#[cfg(not(windows))]
use tokio::runtime::Handle;
#[cfg(not(windows))]
use tokio::task::AbortHandle;
use tokio::time;

/// The largest header block accepted; a client that needs more is not a normal HTTP client.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client has to send its header block, so idle connections do not pile up.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long resolving and connecting to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long writing a short error reply may take, so a client that never reads can't hold a task.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How much a refused client's further input is read (and discarded) before closing.
const DRAIN_LIMIT: u64 = 1024 * 1024;
/// Connections served at once; past this the proxy stops accepting until one ends.
const MAX_CONNECTIONS: usize = 256;
/// Addresses of one name tried in turn before giving up.
const MAX_ADDRESSES: usize = 16;
/// Distinct refused hosts kept between two [`Proxy::take_refused`] calls (the note stays short
/// and a command that tries many names can't grow memory without bound).
const MAX_REFUSED: usize = 64;

/// A `sandbox.network` list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostsError {
    #[error("sandbox.network entry {number} is empty")]
    Empty { number: usize },
    #[error("bad sandbox.network entry `{pattern}`: {problem}")]
    Bad {
        pattern: String,
        problem: HostProblem,
    },
}

/// What is wrong with a host, or with an entry of `sandbox.network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostProblem {
    #[error("it is empty")]
    Empty,
    #[error("it contains a space")]
    Space,
    #[error("write just the host, without a scheme (like `github.com`)")]
    Scheme,
    #[error("write just the host, without a path")]
    Path,
    #[error("write just the host, without a port (ports are not filtered)")]
    Port,
    #[error("`*` may only appear once, as a leading `*.`")]
    StarTwice,
    #[error("`*` may only appear alone or as a leading `*.`")]
    StarPlace,
    #[error("`*.` needs a domain name after it, not an IP")]
    StarBeforeIp,
    #[error("it is not a valid bracketed IPv6 address")]
    BadIpv6,
    #[error("it is neither a host name nor an IP address")]
    NotAHost,
    #[error("the host is empty")]
    EmptyHost,
    #[error("the host name is longer than 253 bytes")]
    TooLong,
    #[error("a part of the host name is empty or over 63 bytes")]
    BadLabel,
    #[error(
        "the host name has a character other than letters, digits, `-`, `_` and `.` (write international names in their `xn--` form)"
    )]
    BadCharacter,
    #[error("it looks numeric but is not a dotted IPv4 address")]
    Numeric,
}

/// The domains a sandboxed command may reach: `github.com` (that name only), `*.npmjs.org`
/// (any subdomain of npmjs.org, not npmjs.org itself), `*` (everything). Matching is
/// case-insensitive and ignores one trailing dot. IP literals match only when listed literally
/// (`127.0.0.1`, `[::1]` or `::1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    /// The entries as written, for showing back to the user.
    patterns: Vec<String>,
    /// The entries as parsed, in the same order.
    rules: Vec<Rule>,
}

/// One parsed entry of [`Hosts`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// `*`: every host, IP literals included.
    Any,
    /// `github.com`: that name only (lowercase, no trailing dot).
    Exact(String),
    /// `*.npmjs.org`: names ending in `.npmjs.org` (stored as `npmjs.org`).
    Subdomains(String),
    /// `127.0.0.1`, `::1`: that address only.
    Ip(IpAddr),
}

impl Hosts {
    /// Parses `sandbox.network` entries.
    ///
    /// Errors name the bad entry: empty, spaces, a scheme (`https://x`), a path, a port, a `*`
    /// anywhere but a leading `*.`.
    pub fn parse(patterns: &[String]) -> Result<Hosts, HostsError> {
        let mut rules = Vec::with_capacity(patterns.len());
        for (index, pattern) in patterns.iter().enumerate() {
            let rule = parse_rule(pattern).map_err(|problem| {
                if pattern.is_empty() {
                    HostsError::Empty { number: index + 1 }
                } else {
                    HostsError::Bad {
                        pattern: pattern.clone(),
                        problem,
                    }
                }
            })?;
            rules.push(rule);
        }
        Ok(Hosts {
            patterns: patterns.to_vec(),
            rules,
        })
    }

    /// Whether `host` (a name or an IP literal, IPv6 with or without brackets, no port) is on
    /// the list. A host that is not a valid name is never allowed.
    pub fn allows(&self, host: &str) -> bool {
        parse_host(host).is_ok_and(|name| self.allows_name(&name))
    }

    /// Whether every host that the entry `pattern` names is allowed here: `a.npmjs.org` and
    /// `*.npmjs.org` are covered by `*.npmjs.org`, everything by `*`. For comparing two lists,
    /// where [`Hosts::allows`] would see `*.x` as no host at all. An invalid entry covers
    /// nothing.
    pub fn covers(&self, pattern: &str) -> bool {
        match parse_rule(pattern) {
            Ok(Rule::Any) => self.rules.contains(&Rule::Any),
            Ok(Rule::Exact(domain)) => self.allows_name(&Name::Domain(domain)),
            Ok(Rule::Ip(ip)) => self.allows_name(&Name::Ip(ip)),
            Ok(Rule::Subdomains(parent)) => self.rules.iter().any(|rule| match rule {
                Rule::Any => true,
                Rule::Subdomains(wider) => *wider == parent || is_subdomain(&parent, wider),
                Rule::Exact(_) | Rule::Ip(_) => false,
            }),
            Err(_) => false,
        }
    }

    /// The entries as they were given to [`Hosts::parse`].
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    fn allows_name(&self, name: &Name) -> bool {
        self.rules.iter().any(|rule| rule.matches(name))
    }

    /// Whether `name` is on the list as itself (`localhost`, `127.0.0.1`), not through a
    /// wildcard: only such a name may lead to an address of this machine or its network.
    fn lists_exactly(&self, name: &Name) -> bool {
        self.rules.iter().any(|rule| match (rule, name) {
            (Rule::Exact(exact), Name::Domain(domain)) => exact == domain,
            (Rule::Ip(ip), Name::Ip(addr)) => ip == addr,
            _ => false,
        })
    }
}

impl Rule {
    fn matches(&self, name: &Name) -> bool {
        match (self, name) {
            (Rule::Any, _) => true,
            (Rule::Exact(exact), Name::Domain(domain)) => exact == domain,
            (Rule::Subdomains(parent), Name::Domain(domain)) => is_subdomain(domain, parent),
            (Rule::Ip(ip), Name::Ip(addr)) => ip == addr,
            _ => false,
        }
    }
}

/// Whether `domain` is a proper subdomain of `parent` (`a.npmjs.org` of `npmjs.org`, but not
/// `npmjs.org` itself nor `evilnpmjs.org`).
fn is_subdomain(domain: &str, parent: &str) -> bool {
    domain
        .strip_suffix(parent)
        .and_then(|prefix| prefix.strip_suffix('.'))
        .is_some_and(|label| !label.is_empty())
}

/// Parses one `sandbox.network` entry; the error is the reason, without the entry.
fn parse_rule(pattern: &str) -> Result<Rule, HostProblem> {
    if pattern.is_empty() {
        return Err(HostProblem::Empty);
    }
    if pattern.chars().any(char::is_whitespace) {
        return Err(HostProblem::Space);
    }
    if pattern.contains("://") {
        return Err(HostProblem::Scheme);
    }
    if pattern.contains('/') {
        return Err(HostProblem::Path);
    }
    if pattern == "*" {
        return Ok(Rule::Any);
    }
    if let Some(parent) = pattern.strip_prefix("*.") {
        if parent.contains('*') {
            return Err(HostProblem::StarTwice);
        }
        return match parse_host(parent)? {
            Name::Domain(domain) => Ok(Rule::Subdomains(domain)),
            Name::Ip(_) => Err(HostProblem::StarBeforeIp),
        };
    }
    if pattern.contains('*') {
        return Err(HostProblem::StarPlace);
    }
    if !pattern.starts_with('[') && !is_ipv6_literal(pattern) && pattern.contains(':') {
        return Err(HostProblem::Port);
    }
    Ok(match parse_host(pattern)? {
        Name::Domain(domain) => Rule::Exact(domain),
        Name::Ip(ip) => Rule::Ip(ip),
    })
}

/// `::1` or `[::1]`.
fn is_ipv6_literal(text: &str) -> bool {
    let inner = text
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(text);
    inner.parse::<Ipv6Addr>().is_ok()
}

/// A host as the proxy checks and connects to it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    /// A domain name, lowercase, without a trailing dot.
    Domain(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl Name {
    /// The form used for the session's allowed set, questions and refusals (IPv6 unbracketed).
    fn key(&self) -> String {
        match self {
            Name::Domain(domain) => domain.clone(),
            Name::Ip(ip) => ip.to_string(),
        }
    }

    /// `host:port`, IPv6 in brackets.
    fn with_port(&self, port: u16) -> String {
        match self {
            Name::Ip(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
            _ => format!("{}:{port}", self.key()),
        }
    }
}

/// Parses a host without a port: a domain name, a dotted IPv4 address, or an IPv6 address with
/// or without brackets. One trailing dot is ignored; case is folded.
fn parse_host(host: &str) -> Result<Name, HostProblem> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if let Some(rest) = host.strip_prefix('[') {
        return rest
            .strip_suffix(']')
            .and_then(|inner| inner.parse::<Ipv6Addr>().ok())
            .map(|ip| Name::Ip(IpAddr::V6(ip)))
            .ok_or(HostProblem::BadIpv6);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Name::Ip(ip));
    }
    if host.contains(':') {
        return Err(HostProblem::NotAHost);
    }
    check_domain(host)?;
    Ok(Name::Domain(host.to_ascii_lowercase()))
}

/// Checks a domain name's syntax: labels of letters, digits, `-` and `_`, 1 to 63 bytes each,
/// 253 bytes in all, and not only numeric labels (the resolver reads `127.1` as an address).
fn check_domain(domain: &str) -> Result<(), HostProblem> {
    if domain.is_empty() {
        return Err(HostProblem::EmptyHost);
    }
    if domain.len() > 253 {
        return Err(HostProblem::TooLong);
    }
    for label in domain.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(HostProblem::BadLabel);
        }
        let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        if !label.bytes().all(valid) {
            return Err(HostProblem::BadCharacter);
        }
    }
    let numeric = |label: &str| label.bytes().next().is_some_and(|b| b.is_ascii_digit());
    if domain.split('.').all(numeric) {
        return Err(HostProblem::Numeric);
    }
    Ok(())
}

/// A connection to a host not on the list, while someone can be asked.
pub struct NetQuestion {
    /// The host as checked: lowercase, no trailing dot, IPv6 without brackets.
    pub host: String,
    /// The port asked for (not filtered: a "yes" is for the host, every port).
    pub port: u16,
    /// true: allow this host for the rest of the session.
    pub reply: oneshot::Sender<bool>,
}

/// The HTTP/HTTPS proxy; it serves until dropped.
pub struct Proxy {
    socket: PathBuf,
    /// Device and inode of the socket file it bound, so drop removes only its own file.
    socket_id: (u64, u64),
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

/// What the accept task and every connection task share with the [`Proxy`] handle.
struct Shared {
    hosts: Hosts,
    questions: Option<mpsc::UnboundedSender<NetQuestion>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Hosts allowed during the session, by [`Name::key`].
    allowed: HashSet<String>,
    /// Questions awaiting an answer, by host: later connections wait on the same answer.
    pending: HashMap<String, watch::Receiver<Option<bool>>>,
    /// `host:port` refused since the last [`Proxy::take_refused`], deduplicated, in order.
    refused: Vec<String>,
}

impl Proxy {
    /// Where there are no Unix-domain sockets, the proxy cannot start.
    #[cfg(not(unix))]
    pub fn start(
        _socket: &Path,
        _hosts: Hosts,
        _questions: Option<mpsc::UnboundedSender<NetQuestion>>,
    ) -> std::io::Result<Proxy> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "the sandbox proxy needs Unix-domain sockets, which this system does not offer",
        ))
    }

    /// Binds a Unix socket at `socket` (its parent folder exists; an old socket file there is
    /// replaced; the socket is made 0600) and serves on the current tokio runtime (call inside
    /// one) until dropped. `questions`: where to ask about a host not on the list (None: refuse
    /// at once).
    ///
    /// The mode is set right after binding, so for that instant the socket has the umask's
    /// mode: the parent folder should be one only the user can enter. Anything at `socket` that
    /// is not a socket is left alone and is an error.
    #[cfg(unix)]
    pub fn start(
        socket: &Path,
        hosts: Hosts,
        questions: Option<mpsc::UnboundedSender<NetQuestion>>,
    ) -> io::Result<Proxy> {
        let runtime = Handle::try_current().map_err(|e| {
            io::Error::other(format!("the sandbox proxy needs a tokio runtime: {e}"))
        })?;
        remove_stale_socket(socket)?;
        let listener = UnixListener::bind(socket).map_err(|e| with_path(e, "bind", socket))?;
        let metadata = make_private(socket).inspect_err(|_| {
            let _ = fs::remove_file(socket);
        })?;
        let shared = Arc::new(Shared {
            hosts,
            questions,
            state: Mutex::new(State::default()),
        });
        let accept = runtime.spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Proxy {
            socket: socket.to_path_buf(),
            socket_id: (metadata.dev(), metadata.ino()),
            shared,
            accept,
        })
    }

    /// The socket the proxy listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Allows `host` for the rest of the session (what a "yes" to a question does too).
    /// A string that is not a valid host name or IP literal allows nothing.
    pub fn allow(&self, host: &str) {
        if let Ok(name) = parse_host(host) {
            self.shared.lock().allowed.insert(name.key());
        }
    }

    /// The hosts refused since the last call, deduplicated, in order (for a note in the tool
    /// result), as `host:port`.
    pub fn take_refused(&self) -> Vec<String> {
        mem::take(&mut self.shared.lock().refused)
    }
}

#[cfg(unix)]
impl Drop for Proxy {
    /// Stops serving (the accept task owns the connection tasks, so aborting it ends them all)
    /// and removes the socket file, if it is still the one this proxy bound.
    fn drop(&mut self) {
        self.accept.abort();
        let ours =
            fs::symlink_metadata(&self.socket).is_ok_and(|m| (m.dev(), m.ino()) == self.socket_id);
        if ours {
            let _ = fs::remove_file(&self.socket);
        }
    }
}

/// Removes an old socket file at `path`, which a crashed session may have left; anything else
/// there is an error, so a wrong path can't delete a user's file.
#[cfg(unix)]
fn remove_stale_socket(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_socket() => {
            fs::remove_file(path).map_err(|e| with_path(e, "remove old socket", path))
        }
        Ok(_) => Err(io::Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "sandbox proxy: {} exists and is not a socket",
                path.display()
            ),
        )),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(with_path(e, "stat", path)),
    }
}

/// Makes the socket file 0600 and returns its metadata (to recognise it at drop).
#[cfg(unix)]
fn make_private(socket: &Path) -> io::Result<Metadata> {
    fs::set_permissions(socket, Permissions::from_mode(0o600))
        .map_err(|e| with_path(e, "chmod", socket))?;
    fs::metadata(socket).map_err(|e| with_path(e, "stat", socket))
}

/// Adds what was being done, and to which path, to an I/O error.
fn with_path(error: io::Error, action: &str, path: &Path) -> io::Error {
    io::Error::new(
        error.kind(),
        format!("sandbox proxy: {action} {}: {error}", path.display()),
    )
}

impl Shared {
    /// Locks the state; a poisoned lock is still usable (the state stays consistent: every
    /// update is a single insert, remove or push).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Decides whether a connection to `name:port` may go ahead, asking if someone can be
    /// asked; a refusal is recorded and comes back as the reply to send.
    /// Whether `name` was allowed as itself: listed exactly, allowed by the user at a question
    /// or with [`Proxy::allow`], or everything is (`*`).
    fn named_exactly(&self, name: &Name) -> bool {
        self.hosts.lists_exactly(name)
            || self.hosts.rules.contains(&Rule::Any)
            || self
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .allowed
                .contains(&name.key())
    }

    async fn permit(&self, name: &Name, port: u16) -> Result<(), Reply> {
        if self.hosts.allows_name(name) {
            return Ok(());
        }
        let key = name.key();
        let declined = match self.ticket(&key) {
            Ticket::Allowed => return Ok(()),
            Ticket::NoOne => false,
            Ticket::Ask(answer) => match self.ask(&key, port, answer).await {
                Some(true) => return Ok(()),
                Some(false) => true,
                None => false,
            },
            Ticket::Wait(answer) => {
                if wait_for_answer(answer).await {
                    return Ok(());
                }
                true
            }
        };
        let target = name.with_port(port);
        self.record_refused(&target);
        Err(Reply::refused(&target, &key, declined))
    }

    /// What this connection must do to learn whether `key` is allowed.
    fn ticket(&self, key: &str) -> Ticket {
        let mut state = self.lock();
        if state.allowed.contains(key) {
            return Ticket::Allowed;
        }
        if self.questions.is_none() {
            return Ticket::NoOne;
        }
        if let Some(answer) = state.pending.get(key) {
            return Ticket::Wait(answer.clone());
        }
        let (answer, waiters) = watch::channel(None);
        state.pending.insert(key.to_string(), waiters);
        Ticket::Ask(answer)
    }

    /// Asks the question about `key`, records the answer for the session and passes it to the
    /// connections waiting on it. A dropped reply counts as no; a closed question channel too,
    /// but comes back as `None` (no one was asked).
    async fn ask(&self, key: &str, port: u16, answer: watch::Sender<Option<bool>>) -> Option<bool> {
        let (reply, replied) = oneshot::channel();
        let question = NetQuestion {
            host: key.to_string(),
            port,
            reply,
        };
        let sent = self
            .questions
            .as_ref()
            .is_some_and(|questions| questions.send(question).is_ok());
        let yes = sent && replied.await.unwrap_or(false);
        let asked = sent.then_some(yes);
        {
            let mut state = self.lock();
            state.pending.remove(key);
            if yes {
                state.allowed.insert(key.to_string());
            }
        }
        answer.send_replace(Some(yes));
        asked
    }

    fn record_refused(&self, target: &str) {
        let mut state = self.lock();
        if state.refused.len() < MAX_REFUSED && !state.refused.iter().any(|t| t == target) {
            state.refused.push(target.to_string());
        }
    }
}

/// How a connection learns whether its host is allowed.
enum Ticket {
    /// Allowed earlier in the session.
    Allowed,
    /// Not allowed, and no one to ask.
    NoOne,
    /// This connection asks, and publishes the answer here.
    Ask(watch::Sender<Option<bool>>),
    /// Another connection is asking; the answer comes here.
    Wait(watch::Receiver<Option<bool>>),
}

/// Waits for another connection's question to be answered; if that connection went away
/// without an answer, it is a no.
async fn wait_for_answer(mut answer: watch::Receiver<Option<bool>>) -> bool {
    match answer.wait_for(Option::is_some).await {
        Ok(value) => *value == Some(true),
        Err(_) => false,
    }
}

/// Accepts connections until aborted. The connection tasks live in a [`JoinSet`] owned by this
/// task, so aborting it aborts them too. With [`MAX_CONNECTIONS`] served, a new connection
/// takes the place of the oldest one that has not sent its header block yet (a command holding
/// idle connections open would otherwise starve every other); when all are serving, it waits
/// for one to end.
#[cfg(unix)]
async fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    // The connections without a header block yet, oldest first, with their "head read" flags.
    let mut waiting: VecDeque<(AbortHandle, Arc<AtomicBool>)> = VecDeque::new();
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            // Out of file descriptors and the like: wait a little rather than spin.
            Err(_) => {
                time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        while connections.len() >= MAX_CONNECTIONS {
            waiting.retain(|(task, head_read)| {
                !task.is_finished() && !head_read.load(Ordering::SeqCst)
            });
            if let Some((oldest, _)) = waiting.pop_front() {
                oldest.abort();
            }
            connections.join_next().await;
        }
        let head_read = Arc::new(AtomicBool::new(false));
        let task = connections.spawn(serve(client, Arc::clone(&shared), Arc::clone(&head_read)));
        waiting.push_back((task, head_read));
    }
}

/// A short plain-text reply sent before closing a connection.
#[derive(Debug)]
struct Reply {
    status: &'static str,
    body: String,
}

impl Reply {
    fn bad_request(reason: impl Display) -> Reply {
        Reply {
            status: "400 Bad Request",
            body: format!("new's sandbox proxy could not handle the request: {reason}\n"),
        }
    }

    fn refused(target: &str, host: &str, declined: bool) -> Reply {
        let body = if declined {
            format!(
                "new's sandbox refused a connection to {target}: {host} is not in sandbox.network and the user did not allow it.\n"
            )
        } else {
            format!(
                "new's sandbox refused a connection to {target}: {host} is not in sandbox.network. Ask the user to allow it, or run the command with \"sandbox\": false.\n"
            )
        };
        Reply {
            status: "403 Forbidden",
            body,
        }
    }

    fn bad_gateway(target: &str, reason: &ConnectError) -> Reply {
        Reply {
            status: "502 Bad Gateway",
            body: format!("new's sandbox proxy could not reach {target}: {reason}\n"),
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        format!(
            "HTTP/1.1 {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            self.status,
            self.body.len(),
            self.body
        )
        .into_bytes()
    }

    /// Sends the reply, closes the write side, then reads and discards what the client still
    /// sends (a bounded amount, for a bounded time): closing a socket with unread input resets
    /// the connection, and the client could lose the reply. Errors are moot here: the
    /// connection ends anyway.
    async fn send<S: AsyncRead + AsyncWrite + Unpin>(&self, client: &mut S) {
        let bytes = self.to_bytes();
        let _ = time::timeout(REPLY_TIMEOUT, async {
            client.write_all(&bytes).await?;
            client.shutdown().await?;
            let mut rest = (&mut *client).take(DRAIN_LIMIT);
            copy(&mut rest, &mut sink()).await
        })
        .await;
    }
}

/// Serves one client connection: one request, then (if allowed) a byte pipe to its host.
#[cfg(unix)]
async fn serve(mut client: UnixStream, shared: Arc<Shared>, head_read: Arc<AtomicBool>) {
    let (buffer, head_len) = match time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(head)) => {
            head_read.store(true, Ordering::SeqCst);
            head
        }
        Ok(Err(HeadError::TooLarge)) => {
            let reason = format!("the request header block is over {} KB", MAX_HEAD / 1024);
            return Reply::bad_request(reason).send(&mut client).await;
        }
        // Closed early, an I/O error, or too slow: no one to answer.
        Ok(Err(HeadError::Closed)) | Err(_) => return,
    };
    let request = match parse_request(&buffer[..head_len]) {
        Ok(request) => request,
        Err(reason) => return Reply::bad_request(reason).send(&mut client).await,
    };
    if let Err(reply) = shared.permit(&request.host, request.port).await {
        return reply.send(&mut client).await;
    }
    let target = request.host.with_port(request.port);
    // A name reached through a wildcard (or asked for) may not lead to this machine or the
    // local network: its owner could point its DNS at 127.0.0.1 and reach the user's local
    // services. A name or address listed exactly may.
    let internal_ok = shared.named_exactly(&request.host);
    let mut upstream = match connect(&request.host, request.port, internal_ok).await {
        Ok(upstream) => upstream,
        Err(reason) => return Reply::bad_gateway(&target, &reason).send(&mut client).await,
    };
    let early = &buffer[head_len..];
    let _ = tunnel(&mut client, &mut upstream, &request, early).await;
}

/// Sends the response to CONNECT or the rewritten request, forwards the bytes the client sent
/// after its header block, then copies both ways until both sides are done.
async fn tunnel<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut C,
    upstream: &mut TcpStream,
    request: &Request,
    early: &[u8],
) -> io::Result<()> {
    match &request.forward {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?
        }
        Some(head) => upstream.write_all(head).await?,
    }
    upstream.write_all(early).await?;
    copy_bidirectional(client, upstream).await?;
    Ok(())
}

/// Why no connection to the upstream could be made (said in the `502` reply).
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("could not resolve {domain}: {cause}")]
    Resolve { domain: String, cause: io::Error },
    #[error("{host} resolved to no address")]
    NoAddress { host: String },
    #[error(
        "{host} resolves to {ip}, an address of this machine or its local network; list the name exactly in sandbox.network to allow it"
    )]
    Internal { host: String, ip: IpAddr },
    #[error("could not read this machine's addresses: {cause}")]
    Interfaces { cause: io::Error },
    #[error("could not connect to {address}: {cause}")]
    Connect {
        address: SocketAddr,
        cause: io::Error,
    },
    #[error("no connection within {secs} s")]
    Timeout { secs: u64 },
}

/// Resolves `host` here, outside the sandbox, and connects to the first address that answers,
/// within [`CONNECT_TIMEOUT`]; the error says what failed (the last address's, when several
/// failed).
async fn connect(host: &Name, port: u16, internal_ok: bool) -> Result<TcpStream, ConnectError> {
    let attempt = async {
        let addresses: Vec<SocketAddr> = match host {
            Name::Ip(ip) => vec![SocketAddr::new(*ip, port)],
            Name::Domain(domain) => net::lookup_host((domain.as_str(), port))
                .await
                .map_err(|cause| ConnectError::Resolve {
                    domain: domain.clone(),
                    cause,
                })?
                .take(MAX_ADDRESSES)
                .collect(),
        };
        // This machine's addresses, read now: interfaces come and go.
        let local = if internal_ok {
            Vec::new()
        } else {
            local_addresses().map_err(|cause| ConnectError::Interfaces { cause })?
        };
        let mut last_error = ConnectError::NoAddress { host: host.key() };
        for address in addresses {
            if !internal_ok && is_internal(address.ip(), &local) {
                last_error = ConnectError::Internal {
                    host: host.key(),
                    ip: address.ip(),
                };
                continue;
            }
            match TcpStream::connect(address).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(cause) => last_error = ConnectError::Connect { address, cause },
            }
        }
        Err(last_error)
    };
    time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or(Err(ConnectError::Timeout {
            secs: CONNECT_TIMEOUT.as_secs(),
        }))
}

/// Why no header block could be read.
#[derive(Debug)]
enum HeadError {
    /// Over [`MAX_HEAD`] bytes without an end.
    TooLarge,
    /// The client closed, or reading failed, before the end of the header block.
    Closed,
}

/// Reads until the end of the header block, at most [`MAX_HEAD`] bytes of it (plus one read's
/// worth past it). Returns the bytes read and the header block's length; bytes past it are the
/// start of the body or tunnel, to be forwarded.
async fn read_head<R: AsyncRead + Unpin>(client: &mut R) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let read = client
            .read(&mut chunk)
            .await
            .map_err(|_| HeadError::Closed)?;
        if read == 0 {
            return Err(HeadError::Closed);
        }
        let scan_from = buffer.len().saturating_sub(2);
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = find_head_end(&buffer, scan_from) {
            return if end > MAX_HEAD {
                Err(HeadError::TooLarge)
            } else {
                Ok((buffer, end))
            };
        }
        if buffer.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

/// The length of the header block in `buffer` (through the empty line that ends it), looking
/// at line ends from `from` on. Accepts CRLF and bare LF line ends.
fn find_head_end(buffer: &[u8], from: usize) -> Option<usize> {
    (from..buffer.len())
        .filter(|&i| buffer[i] == b'\n')
        .find_map(|i| match (buffer.get(i + 1), buffer.get(i + 2)) {
            (Some(b'\n'), _) => Some(i + 2),
            (Some(b'\r'), Some(b'\n')) => Some(i + 3),
            _ => None,
        })
}

/// A request the proxy understood.
#[derive(Debug)]
struct Request {
    host: Name,
    port: u16,
    /// For plain HTTP, the header block to send upstream; `None` for CONNECT.
    forward: Option<Vec<u8>>,
}

/// Why a request was refused with `400` (said in the reply's body). Hostile input in it is
/// shortened.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum RequestError {
    #[error("the request line is empty")]
    EmptyRequestLine,
    /// Not HTTP/1.x as RFC 9112 writes it: the request line, a header line or a line end.
    #[error("the request head is malformed: {0}")]
    Malformed(httparse::Error),
    #[error("the header block is not complete")]
    Incomplete,
    #[error("the request has more than {MAX_HEADERS} header lines")]
    TooManyHeaders,
    #[error("the request target is not ASCII")]
    NonAsciiTarget,
    #[error("the request has more than one Host header")]
    DuplicateHost,
    #[error("the request has both Content-Length and Transfer-Encoding")]
    LengthAndEncoding,
    #[error("the request's Content-Length is not one number")]
    BadContentLength,
    #[error("this is a proxy: send the full URL (`GET http://host/path`) or use CONNECT")]
    NotAbsolute,
    #[error("`{target}` is not an http:// URL")]
    NotHttp { target: String },
    #[error("https:// URLs must go through CONNECT")]
    Https,
    #[error("unsupported URL scheme `{scheme}`")]
    Scheme { scheme: String },
    #[error("URLs with user info (`user@host`) are not supported")]
    UserInfo,
    #[error("`{authority}` is not host:port")]
    NotHostPort { authority: String },
    #[error("`{authority}` has an unclosed `[`")]
    UnclosedBracket { authority: String },
    #[error("`{authority}`: IPv6 addresses need brackets, like `[::1]:443`")]
    Ipv6NeedsBrackets { authority: String },
    #[error("CONNECT needs host:port, not `{authority}`")]
    ConnectNeedsPort { authority: String },
    #[error("bad port `{port}`")]
    BadPort { port: String },
    #[error("bad host `{host}`: {problem}")]
    BadHost { host: String, problem: HostProblem },
}

/// The most header lines a request may have (browsers send a few dozen).
const MAX_HEADERS: usize = 128;

/// Parses a header block (as [`read_head`] found it) with `httparse`, then checks what a proxy
/// must: the target's form (authority for CONNECT, an absolute `http://` URL otherwise), one
/// `Host` at most, an unambiguous body length, so that what is forwarded is what was checked.
fn parse_request(head: &[u8]) -> Result<Request, RequestError> {
    // `httparse` skips empty lines before the request line (RFC 9112 §2.2); a proxy that
    // checks what it forwards takes none.
    if head.starts_with(b"\r") || head.starts_with(b"\n") {
        return Err(RequestError::EmptyRequestLine);
    }
    let mut slots = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    match parsed.parse(head) {
        // The whole block, and nothing but it, is the head.
        Ok(httparse::Status::Complete(end)) if end == head.len() => {}
        Ok(_) => return Err(RequestError::Incomplete),
        Err(httparse::Error::TooManyHeaders) => return Err(RequestError::TooManyHeaders),
        Err(e) => return Err(RequestError::Malformed(e)),
    }
    let (Some(method), Some(target), Some(minor)) = (parsed.method, parsed.path, parsed.version)
    else {
        return Err(RequestError::Incomplete);
    };
    if !target.is_ascii() {
        return Err(RequestError::NonAsciiTarget);
    }
    let headers = &*parsed.headers;
    check_framing(headers)?;
    if method == "CONNECT" {
        if target.contains(['/', '@', '?', '#']) {
            return Err(RequestError::ConnectNeedsPort {
                authority: shorten(target),
            });
        }
        let (host, port) = parse_authority(target, None)?;
        return Ok(Request {
            host,
            port,
            forward: None,
        });
    }
    let url = parse_absolute_url(target)?;
    let forward = rewrite_head(method, &url, minor, headers);
    Ok(Request {
        host: url.host,
        port: url.port,
        forward: Some(forward),
    })
}

/// One `Host` at most, and a body length only one way (RFC 9112 §3.2, §6.3): a request that
/// two readers could frame differently is refused rather than passed on.
fn check_framing(headers: &[httparse::Header]) -> Result<(), RequestError> {
    let named = |name: &'static str| {
        headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
    };
    if named("host").count() > 1 {
        return Err(RequestError::DuplicateHost);
    }
    let mut lengths = named("content-length").map(|h| h.value);
    if let Some(first) = lengths.next() {
        if named("transfer-encoding").next().is_some() {
            return Err(RequestError::LengthAndEncoding);
        }
        let number = |v: &[u8]| !v.is_empty() && v.iter().all(u8::is_ascii_digit);
        if !number(first) || lengths.any(|other| other != first) {
            return Err(RequestError::BadContentLength);
        }
    }
    Ok(())
}

/// An `http://` URL from an absolute-form request.
#[derive(Debug)]
struct Url {
    host: Name,
    port: u16,
    /// `host[:port]` as written, for the `Host` header.
    authority: String,
    /// Origin-form target: path and query, no fragment.
    path: String,
}

/// Parses the target of a non-CONNECT request, which must be an absolute `http://` URL.
fn parse_absolute_url(target: &str) -> Result<Url, RequestError> {
    let Some((scheme, rest)) = target.split_once("://") else {
        return Err(if target.starts_with('/') || target == "*" {
            RequestError::NotAbsolute
        } else {
            RequestError::NotHttp {
                target: shorten(target),
            }
        });
    };
    if scheme.eq_ignore_ascii_case("https") {
        return Err(RequestError::Https);
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(RequestError::Scheme {
            scheme: shorten(scheme),
        });
    }
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(split);
    if authority.contains('@') {
        return Err(RequestError::UserInfo);
    }
    let (host, port) = parse_authority(authority, Some(80))?;
    let tail = tail.split('#').next().unwrap_or_default();
    let path = if tail.starts_with('/') {
        tail.to_string()
    } else {
        format!("/{tail}")
    };
    Ok(Url {
        host,
        port,
        authority: authority.to_string(),
        path,
    })
}

/// Parses `host:port` (`[v6]:port` for IPv6); the port may be left out when there is a default.
fn parse_authority(
    authority: &str,
    default_port: Option<u16>,
) -> Result<(Name, u16), RequestError> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let (host, after) = authority.split_at(end + 1);
                let port = match after.strip_prefix(':') {
                    Some(port) => Some(port),
                    None if after.is_empty() => None,
                    None => {
                        return Err(RequestError::NotHostPort {
                            authority: shorten(authority),
                        });
                    }
                };
                (host, port)
            }
            None => {
                return Err(RequestError::UnclosedBracket {
                    authority: shorten(authority),
                });
            }
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err(RequestError::Ipv6NeedsBrackets {
                    authority: shorten(authority),
                });
            }
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match (port, default_port) {
        (Some(port), _) => parse_port(port)?,
        (None, Some(default)) => default,
        (None, None) => {
            return Err(RequestError::ConnectNeedsPort {
                authority: shorten(authority),
            });
        }
    };
    let name = parse_host(host).map_err(|problem| RequestError::BadHost {
        host: shorten(host),
        problem,
    })?;
    Ok((name, port))
}

fn parse_port(port: &str) -> Result<u16, RequestError> {
    let bad = || RequestError::BadPort {
        port: shorten(port),
    };
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(port) => Ok(port),
    }
}

/// The header block to send upstream for plain HTTP: origin-form request line, `Host` from
/// the URL (RFC 9112 §3.2.2), no `Proxy-*` credentials or hints, and `Connection: close`
/// (unless the client asks for an upgrade) so the server ends the connection after one
/// response: the proxy connection is bound to this host, and a client that reused it for
/// another host would otherwise get answers from the wrong server.
fn rewrite_head(method: &str, url: &Url, minor: u8, headers: &[httparse::Header]) -> Vec<u8> {
    let upgrade = headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("connection")
            && h.value
                .split(|&b| b == b',')
                .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
    });
    let mut head = format!(
        "{method} {} HTTP/1.{minor}\r\nHost: {}\r\n",
        url.path, url.authority
    )
    .into_bytes();
    for header in headers {
        let dropped = ["host", "proxy-connection", "proxy-authorization"]
            .iter()
            .chain(if upgrade {
                &[][..]
            } else {
                &["connection", "keep-alive"][..]
            })
            .any(|name| header.name.eq_ignore_ascii_case(name));
        if !dropped {
            // Written again from the parsed name and value: one spelling of each line.
            head.extend_from_slice(header.name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(header.value);
            head.extend_from_slice(b"\r\n");
        }
    }
    if !upgrade {
        head.extend_from_slice(b"Connection: close\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Cuts hostile input down to a length fit for an error message.
fn shorten(text: &str) -> String {
    const MAX: usize = 100;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::env;
    use std::fs;
    use std::io::ErrorKind;
    use std::ops::Deref;
    #[cfg(unix)]
    use std::os::unix::net::UnixListener;
    use std::pin::Pin;
    use std::process;
    use std::process::Command;
    use std::sync::atomic::AtomicUsize;
    use std::task::Context;
    use std::task::Poll;
    use tokio::io;
    use tokio::io::ReadBuf;
    use tokio::net::TcpListener;
    use tokio::time;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn hosts(items: &[&str]) -> Hosts {
        Hosts::parse(&strings(items)).expect("valid test patterns")
    }

    /// A fresh folder for one test's socket (short, to fit the 108-byte socket path limit).
    fn socket_path() -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = env::temp_dir().join(format!("new-px-{}-{n}", process::id()));
        fs::create_dir_all(&dir).expect("create test folder");
        dir.join("proxy.sock")
    }

    /// A proxy whose test folder is removed with it.
    struct TestProxy(Option<Proxy>);

    impl Deref for TestProxy {
        type Target = Proxy;
        fn deref(&self) -> &Proxy {
            self.0.as_ref().expect("proxy until drop")
        }
    }

    impl Drop for TestProxy {
        fn drop(&mut self) {
            if let Some(proxy) = self.0.take() {
                let socket = proxy.socket().to_path_buf();
                drop(proxy);
                remove_test_dir(&socket);
            }
        }
    }

    /// Removes the folder [`socket_path`] made for `socket`.
    fn remove_test_dir(socket: &Path) {
        if let Some(dir) = socket.parent() {
            let _ = fs::remove_dir_all(dir);
        }
    }

    fn start(allowed: &[&str], questions: Option<mpsc::UnboundedSender<NetQuestion>>) -> TestProxy {
        let proxy = Proxy::start(&socket_path(), hosts(allowed), questions).expect("start proxy");
        TestProxy(Some(proxy))
    }

    async fn client(proxy: &Proxy) -> UnixStream {
        UnixStream::connect(proxy.socket())
            .await
            .expect("connect to proxy")
    }

    /// Reads a response's header block, byte by byte so nothing after it is consumed.
    async fn read_response_head(stream: &mut UnixStream) -> String {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let byte = stream.read_u8().await.expect("response head");
            head.push(byte);
        }
        String::from_utf8(head).expect("ASCII head")
    }

    async fn read_all(stream: &mut UnixStream) -> String {
        let mut bytes = Vec::new();
        time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
            .await
            .expect("response within 10 s")
            .expect("read response");
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Sends `request` and returns the whole response (the proxy closes after errors).
    async fn exchange(proxy: &Proxy, request: &[u8]) -> String {
        let mut stream = client(proxy).await;
        stream.write_all(request).await.expect("send request");
        read_all(&mut stream).await
    }

    /// A TCP echo server on 127.0.0.1; returns its port and a count of accepted connections.
    async fn echo_server() -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
        let port = listener.local_addr().expect("echo address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.split();
                    let _ = io::copy(&mut reader, &mut writer).await;
                });
            }
        });
        (port, accepted)
    }

    /// A one-shot HTTP server on 127.0.0.1: it sends back the head (and `Content-Length` body)
    /// it received, and answers `ok`.
    async fn http_server() -> (u16, oneshot::Receiver<(String, String)>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
        let port = listener.local_addr().expect("http address").port();
        let (seen, received) = oneshot::channel();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let (buffer, end) = read_head(&mut stream).await.expect("request head");
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |n| n.trim().parse::<usize>().expect("length"));
            let mut body = buffer[end..].to_vec();
            while body.len() < length {
                let mut more = [0u8; 1024];
                let n = stream.read(&mut more).await.expect("body");
                assert!(n > 0, "body cut short");
                body.extend_from_slice(&more[..n]);
            }
            let _ = seen.send((head, String::from_utf8_lossy(&body).into_owned()));
            let response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
            stream.write_all(response).await.expect("respond");
        });
        (port, received)
    }

    /// Opens a tunnel through the proxy to `localhost:port` and checks it echoes.
    async fn tunnel_through(proxy: &Proxy, port: u16) {
        let mut stream = client(proxy).await;
        let connect = format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        stream.write_all(connect.as_bytes()).await.expect("send");
        let head = read_response_head(&mut stream).await;
        assert_eq!(head, "HTTP/1.1 200 Connection Established\r\n\r\n");
        stream.write_all(b"ping").await.expect("send ping");
        let mut echoed = [0u8; 4];
        stream.read_exact(&mut echoed).await.expect("echo");
        assert_eq!(&echoed, b"ping");
    }

    #[test]
    fn hosts_exact_and_subdomains() {
        let list = hosts(&["github.com", "*.npmjs.org"]);
        assert!(list.allows("github.com"));
        assert!(!list.allows("api.github.com"));
        assert!(!list.allows("xgithub.com"));
        assert!(list.allows("registry.npmjs.org"));
        assert!(list.allows("a.b.npmjs.org"));
        assert!(!list.allows("npmjs.org"));
        assert!(!list.allows("evilnpmjs.org"));
        assert!(!list.allows("npmjs.org.evil.com"));
        assert_eq!(
            list.patterns(),
            &strings(&["github.com", "*.npmjs.org"])[..]
        );
    }

    #[test]
    fn hosts_fold_case_and_one_trailing_dot() {
        let list = hosts(&["GitHub.com", "*.NPMJS.org."]);
        assert!(list.allows("github.COM"));
        assert!(list.allows("github.com."));
        assert!(!list.allows("github.com.."));
        assert!(list.allows("Registry.npmjs.org."));
    }

    #[test]
    fn hosts_star_allows_everything() {
        let list = hosts(&["*"]);
        assert!(list.allows("example.com"));
        assert!(list.allows("127.0.0.1"));
        assert!(list.allows("[::1]"));
        assert!(!list.allows("not a host"));
        assert!(!Hosts::default().allows("example.com"));
    }

    #[test]
    fn hosts_ip_literals_match_only_literally() {
        let list = hosts(&["127.0.0.1", "[::1]", "localhost", "*.example.com"]);
        assert!(list.allows("127.0.0.1"));
        assert!(list.allows("::1"));
        assert!(list.allows("[::1]"));
        assert!(list.allows("[0:0::1]"));
        assert!(!list.allows("127.0.0.2"));
        assert!(!list.allows("127.1"));
        assert!(!list.allows("2130706433"));
        assert!(!hosts(&["localhost"]).allows("127.0.0.1"));
        assert!(hosts(&["::1"]).allows("[::1]"));
    }

    #[test]
    fn hosts_cover_narrower_patterns() {
        let list = hosts(&["github.com", "*.npmjs.org", "::1"]);
        assert!(list.covers("github.com"));
        assert!(list.covers("GitHub.com."));
        assert!(list.covers("*.npmjs.org"));
        assert!(list.covers("*.registry.npmjs.org"));
        assert!(list.covers("registry.npmjs.org"));
        assert!(list.covers("[::1]"));
        assert!(!list.covers("npmjs.org"));
        assert!(!list.covers("*.github.com"));
        assert!(!list.covers("*"));
        assert!(!list.covers("https://github.com"));
        assert!(hosts(&["*"]).covers("*"));
        assert!(hosts(&["*"]).covers("*.anything.org"));
    }

    #[test]
    fn hosts_bad_entries_are_named() {
        let cases = [
            ("git hub.com", HostProblem::Space, "space"),
            ("https://github.com", HostProblem::Scheme, "scheme"),
            ("github.com/org", HostProblem::Path, "path"),
            ("github.com:443", HostProblem::Port, "port"),
            ("git*.com", HostProblem::StarPlace, "`*`"),
            ("*github.com", HostProblem::StarPlace, "`*`"),
            ("a.*.com", HostProblem::StarPlace, "`*`"),
            ("*.*.com", HostProblem::StarTwice, "`*`"),
            ("*.", HostProblem::EmptyHost, "empty"),
            ("*.127.0.0.1", HostProblem::StarBeforeIp, "IP"),
            ("127.1", HostProblem::Numeric, "numeric"),
            ("exa$mple.com", HostProblem::BadCharacter, "character"),
            ("[::1", HostProblem::BadIpv6, "IPv6"),
        ];
        for (entry, problem, reason) in cases {
            let error = Hosts::parse(&strings(&["ok.com", entry])).expect_err(entry);
            assert_eq!(
                error,
                HostsError::Bad {
                    pattern: entry.to_string(),
                    problem
                }
            );
            let text = error.to_string();
            assert!(text.contains(&format!("`{entry}`")), "{entry}: {text}");
            assert!(text.contains(reason), "{entry}: {text}");
        }
        let error = Hosts::parse(&strings(&["ok.com", ""])).expect_err("empty");
        assert_eq!(error, HostsError::Empty { number: 2 });
        assert_eq!(error.to_string(), "sandbox.network entry 2 is empty");
    }

    #[test]
    fn requests_parse_strictly() {
        let ok = parse_request(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").expect("v6 connect");
        assert_eq!(
            (ok.host, ok.port),
            (Name::Ip("::1".parse().expect("ip")), 443)
        );
        let ok = parse_request(b"GET http://Example.com?q HTTP/1.0\n\n").expect("bare LF");
        assert_eq!(ok.port, 80);
        let head = String::from_utf8(ok.forward.expect("forward")).expect("ascii");
        assert!(
            head.starts_with("GET /?q HTTP/1.0\r\nHost: Example.com\r\n"),
            "{head}"
        );
        use RequestError as E;
        let malformed = |e| Some(E::Malformed(e));
        let cases: &[(&[u8], Option<RequestError>)] = &[
            (b"GET / HTTP/1.1\r\n\r\n", Some(E::NotAbsolute)),
            (b"OPTIONS * HTTP/1.1\r\n\r\n", Some(E::NotAbsolute)),
            (b"GET https://x.com/ HTTP/1.1\r\n\r\n", Some(E::Https)),
            (b"GET ftp://x.com/ HTTP/1.1\r\n\r\n", None),
            (b"GET http://u@x.com/ HTTP/1.1\r\n\r\n", Some(E::UserInfo)),
            (b"GET http://x.com:0/ HTTP/1.1\r\n\r\n", None),
            (b"GET http://x.com:/ HTTP/1.1\r\n\r\n", None),
            (b"GET http://127.1/ HTTP/1.1\r\n\r\n", None),
            (b"GET http://ex%61mple.com/ HTTP/1.1\r\n\r\n", None),
            (b"GET http://\xc3\xa9.com/ HTTP/1.1\r\n\r\n", Some(E::NonAsciiTarget)),
            (b"CONNECT x.com HTTP/1.1\r\n\r\n", None),
            (b"CONNECT x.com:99999 HTTP/1.1\r\n\r\n", None),
            (b"CONNECT ::1:443 HTTP/1.1\r\n\r\n", None),
            (b"CONNECT http://x.com:443 HTTP/1.1\r\n\r\n", None),
            (b"CONNECT u@x.com:443 HTTP/1.1\r\n\r\n", None),
            (b"CONNECT [::1 HTTP/1.1\r\n\r\n", None),
            (b"CONNECT  x.com:443 HTTP/1.1\r\n\r\n", malformed(httparse::Error::Token)),
            (b"CONNECT x.com:443 HTTP/2.0\r\n\r\n", malformed(httparse::Error::Version)),
            (b"CONNECT x.com:443 HTTP/1.1 \r\n\r\n", None),
            // Folded (obs-fold) and nameless lines, spaces in names, bare CR, NUL.
            (b"CONNECT x.com:443 HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", malformed(httparse::Error::HeaderName)),
            (b"CONNECT x.com:443 HTTP/1.1\r\n folded\r\n\r\n", malformed(httparse::Error::HeaderName)),
            (b"CONNECT x.com:443 HTTP/1.1\r\nNoColon\r\n\r\n", malformed(httparse::Error::HeaderName)),
            (b"CONNECT x.com:443 HTTP/1.1\r\nBad Name: x\r\n\r\n", malformed(httparse::Error::HeaderName)),
            (b"CONNECT x.com:443 HTTP/1.1\r\nHost : x\r\n\r\n", malformed(httparse::Error::HeaderName)),
            (b"CONNECT x.com:443 HTTP/1.1\r\nA: b\rc\r\n\r\n", None),
            (b"CONNECT x.com:443 HTTP/1.1\r\nA: b\0c\r\n\r\n", malformed(httparse::Error::HeaderValue)),
            (b"CONNECT x\xff.com:443 HTTP/1.1\r\n\r\n", malformed(httparse::Error::Token)),
            (b"\r\n\r\n", Some(E::EmptyRequestLine)),
            (b"\r\nGET http://x.com/ HTTP/1.1\r\n\r\n", Some(E::EmptyRequestLine)),
            // Not the whole head (what `read_head` never hands over, but a parser must refuse).
            (b"GET http://x.com/ HTTP/1.1\r\nA: b\r\n", Some(E::Incomplete)),
            (b"GET http://x.com/ HTTP/1.1\r\n\r\nGET http://y.com/ HTTP/1.1\r\n\r\n", Some(E::Incomplete)),
            // Smuggling: two Hosts, two framings, lengths that disagree or are not numbers.
            (b"GET http://x.com/ HTTP/1.1\r\nHost: x.com\r\nhost: evil.com\r\n\r\n", Some(E::DuplicateHost)),
            (b"POST http://x.com/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", Some(E::LengthAndEncoding)),
            (b"POST http://x.com/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", Some(E::BadContentLength)),
            (b"POST http://x.com/ HTTP/1.1\r\nContent-Length: +3\r\n\r\n", Some(E::BadContentLength)),
            (b"POST http://x.com/ HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n", Some(E::BadContentLength)),
        ];
        for (bad, want) in cases {
            let shown = String::from_utf8_lossy(bad);
            let got = parse_request(bad).expect_err(&shown);
            if let Some(want) = want {
                assert_eq!(&got, want, "{shown}");
            }
        }
        // Many header lines: within the limit they pass, past it the request is refused.
        let with_headers = |n: usize| {
            let mut head = b"CONNECT x.com:443 HTTP/1.1\r\n".to_vec();
            for i in 0..n {
                head.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
            }
            head.extend_from_slice(b"\r\n");
            head
        };
        assert!(parse_request(&with_headers(MAX_HEADERS)).is_ok());
        assert_eq!(
            parse_request(&with_headers(MAX_HEADERS + 1)).unwrap_err(),
            E::TooManyHeaders
        );
        // The same length twice is one length; what is forwarded is written again, one
        // spelling per line.
        let ok = parse_request(
            b"POST http://x.com/a HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\nX-A:\tb  \r\n\r\n",
        )
        .expect("same length twice");
        let head = String::from_utf8(ok.forward.expect("forward")).expect("ascii");
        assert_eq!(
            head,
            "POST /a HTTP/1.1\r\nHost: x.com\r\nContent-Length: 3\r\ncontent-length: 3\r\nX-A: b\r\nConnection: close\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn connect_tunnels_both_ways_with_early_bytes() {
        let (port, accepted) = echo_server().await;
        let proxy = start(&["localhost"], None);
        let mut stream = client(&proxy).await;
        let request = format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\n\r\nhello");
        stream.write_all(request.as_bytes()).await.expect("send");
        let head = read_response_head(&mut stream).await;
        assert_eq!(head, "HTTP/1.1 200 Connection Established\r\n\r\n");
        let mut echoed = [0u8; 5];
        stream.read_exact(&mut echoed).await.expect("early bytes");
        assert_eq!(&echoed, b"hello");
        stream.write_all(b" world").await.expect("send more");
        let mut echoed = [0u8; 6];
        stream.read_exact(&mut echoed).await.expect("more bytes");
        assert_eq!(&echoed, b" world");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert!(proxy.take_refused().is_empty());
    }

    #[tokio::test]
    async fn connect_to_unlisted_address_is_refused_without_connecting() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let proxy = start(&["localhost"], None);
        let request = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
        let response = exchange(&proxy, request.as_bytes()).await;
        let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
        assert!(head.contains("\r\nContent-Type: text/plain"), "{head}");
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(
            head.contains(&format!("\r\nContent-Length: {}", body.len())),
            "{head}"
        );
        let target = format!("127.0.0.1:{port}");
        assert!(
            body.contains(&format!("refused a connection to {target}")),
            "{body}"
        );
        assert!(
            body.contains("127.0.0.1 is not in sandbox.network"),
            "{body}"
        );
        let connection = time::timeout(Duration::from_millis(300), listener.accept()).await;
        assert!(connection.is_err(), "the proxy connected anyway");
        assert_eq!(proxy.take_refused(), vec![target.clone()]);
        exchange(&proxy, request.as_bytes()).await;
        exchange(&proxy, request.as_bytes()).await;
        assert_eq!(proxy.take_refused(), vec![target], "deduplicated");
        assert!(proxy.take_refused().is_empty());
        // An IPv6 address is named in brackets, so that its port stands apart.
        let v6 = format!("CONNECT [::1]:{port} HTTP/1.1\r\n\r\n");
        let response = exchange(&proxy, v6.as_bytes()).await;
        assert!(
            response.contains(&format!("refused a connection to [::1]:{port}")),
            "{response}"
        );
        assert!(
            response.contains("::1 is not in sandbox.network"),
            "{response}"
        );
        assert_eq!(proxy.take_refused(), vec![format!("[::1]:{port}")]);
    }

    #[tokio::test]
    async fn absolute_get_is_sent_in_origin_form_without_proxy_headers() {
        let (port, received) = http_server().await;
        let proxy = start(&["localhost"], None);
        let request = format!(
            "GET http://localhost:{port}/path?q=1#frag HTTP/1.1\r\nHost: elsewhere.com\r\n\
             Proxy-Connection: keep-alive\r\nproxy-authorization: Basic eDp5\r\n\
             User-Agent: test\r\nAccept: */*\r\n\r\n"
        );
        let response = exchange(&proxy, request.as_bytes()).await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.ends_with("\r\n\r\nok"), "{response}");
        let (head, _) = received.await.expect("server saw a request");
        assert!(head.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("\r\nHost: localhost:{port}\r\n")),
            "{head}"
        );
        assert!(!head.contains("elsewhere"), "{head}");
        assert!(!head.to_ascii_lowercase().contains("proxy-"), "{head}");
        assert!(head.contains("\r\nUser-Agent: test\r\n"), "{head}");
        assert!(head.contains("\r\nAccept: */*\r\n"), "{head}");
        assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
    }

    #[tokio::test]
    async fn absolute_post_forwards_the_body_sent_with_the_head() {
        let (port, received) = http_server().await;
        let proxy = start(&["localhost"], None);
        let request = format!(
            "POST http://localhost:{port}/submit HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world"
        );
        let response = exchange(&proxy, request.as_bytes()).await;
        assert!(response.ends_with("ok"), "{response}");
        let (head, body) = received.await.expect("server saw a request");
        assert!(head.starts_with("POST /submit HTTP/1.1\r\n"), "{head}");
        assert_eq!(body, "hello world");
    }

    #[tokio::test]
    async fn one_question_for_concurrent_connections_and_yes_sticks() {
        let (port, accepted) = echo_server().await;
        let (ask, mut questions) = mpsc::unbounded_channel();
        let proxy = start(&[], Some(ask));
        let first = tunnel_through(&proxy, port);
        let second = tunnel_through(&proxy, port);
        let answer = async {
            let question = questions.recv().await.expect("a question");
            assert_eq!((question.host.as_str(), question.port), ("localhost", port));
            // Give the second connection time to reach the proxy and wait on this question.
            time::sleep(Duration::from_millis(300)).await;
            assert!(questions.try_recv().is_err(), "asked twice");
            question
                .reply
                .send(true)
                .expect("proxy waits for the reply");
        };
        tokio::join!(first, second, answer);
        tunnel_through(&proxy, port).await;
        assert!(questions.try_recv().is_err(), "asked again after yes");
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        assert!(proxy.take_refused().is_empty());
    }

    #[tokio::test]
    async fn no_or_dropped_reply_refuses() {
        let (port, accepted) = echo_server().await;
        let (ask, mut questions) = mpsc::unbounded_channel();
        let proxy = start(&[], Some(ask));
        let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
        let (response, ()) = tokio::join!(exchange(&proxy, request.as_bytes()), async {
            let question = questions.recv().await.expect("a question");
            question.reply.send(false).expect("proxy waits");
        });
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{response}"
        );
        assert!(response.contains("the user did not allow it"), "{response}");
        let (response, ()) = tokio::join!(exchange(&proxy, request.as_bytes()), async {
            drop(questions.recv().await.expect("asked again"));
        });
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{response}"
        );
        drop(questions);
        let response = exchange(&proxy, request.as_bytes()).await;
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{response}"
        );
        assert!(response.contains("Ask the user to allow it"), "{response}");
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        assert_eq!(proxy.take_refused(), vec![format!("localhost:{port}")]);
    }

    #[tokio::test]
    async fn a_name_through_a_wildcard_may_not_lead_to_this_machine() {
        let (port, _) = echo_server().await;
        // `localhost` resolves to 127.0.0.1; listed through `*.localhost`-like wildcards only, it
        // is refused with the reason; listed exactly, it passes.
        let proxy = start(&["*.example.org", "localhost"], None);
        tunnel_through(&proxy, port).await;
        let err = connect(&Name::Domain("localhost".into()), port, false)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ConnectError::Internal { host, ip } if host == "localhost" && ip.is_loopback()),
            "{err}"
        );
        assert!(
            err.to_string().contains("an address of this machine"),
            "{err}"
        );
    }

    /// A command holding more idle connections than the proxy serves at once (a head never
    /// sent) starved every other: now the oldest idle ones make room, and a CONNECT is answered.
    #[tokio::test]
    async fn idle_connections_do_not_starve_a_request() {
        let (port, _) = echo_server().await;
        let proxy = start(&["localhost"], None);
        // A tunnel opened first serves on: only connections without a request make room.
        let mut serving = client(&proxy).await;
        let connect = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
        serving.write_all(connect.as_bytes()).await.expect("send");
        read_response_head(&mut serving).await;
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 4 {
            idle.push(client(&proxy).await);
        }
        time::timeout(Duration::from_secs(8), tunnel_through(&proxy, port))
            .await
            .expect("a CONNECT answered within 8 s");
        // The oldest idle connection was closed to make room; the newest is still open.
        let mut byte = [0u8; 1];
        let read = time::timeout(Duration::from_secs(5), idle[0].read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        let newest = idle.last_mut().expect("connections");
        let still = time::timeout(Duration::from_millis(200), newest.read(&mut byte)).await;
        assert!(
            still.is_err(),
            "the newest idle connection was closed: {still:?}"
        );
        serving.write_all(b"ping").await.expect("send ping");
        let mut echoed = [0u8; 4];
        serving
            .read_exact(&mut echoed)
            .await
            .expect("the tunnel still serves");
        assert_eq!(&echoed, b"ping");
    }

    #[test]
    fn only_a_name_or_address_listed_as_itself_is_listed_exactly() {
        let list = hosts(&["127.0.0.1", "localhost", "*.example.org"]);
        assert!(list.lists_exactly(&Name::Ip("127.0.0.1".parse().unwrap())));
        assert!(!list.lists_exactly(&Name::Ip("127.0.0.2".parse().unwrap())));
        assert!(list.lists_exactly(&Name::Domain("localhost".into())));
        assert!(!list.lists_exactly(&Name::Domain("a.example.org".into())));
        assert!(!list.lists_exactly(&Name::Domain("example.org".into())));
    }

    /// The attack as it was made: `*.allowed.test` listed, a name under it resolving to an
    /// address of this machine that is in no private range, a local service listening there;
    /// plain HTTP and CONNECT both reached it. Repeated inside a user, network and mount
    /// namespace of its own (`unshare -rnm`): the address is put on its loopback interface and
    /// the name in its `/etc/hosts`. Now both get 502 and the service sees no connection; the
    /// name listed exactly still reaches it.
    #[test]
    fn a_wildcard_name_may_not_reach_this_machine_s_own_public_address() {
        let test = "os_sandbox::proxy::tests::inside_namespaces_a_wildcard_name_resolving_here";
        let out = Command::new("unshare")
            .args(["-rnm", "--"])
            .arg(env::current_exe().expect("the test binary"))
            .args([
                "--exact",
                test,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("NEW_PROXY_TEST_NAMESPACES", "1")
            .output()
            .expect("this test needs `unshare` (util-linux) to make its namespaces");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.contains("1 passed"),
            "this test needs user namespaces (unshare -rnm) and `ip`; it did not pass inside them:\n{said}"
        );
    }

    #[tokio::test]
    #[ignore = "run inside namespaces by a_wildcard_name_may_not_reach_this_machine_s_own_public_address"]
    async fn inside_namespaces_a_wildcard_name_resolving_here() {
        assert!(
            env::var_os("NEW_PROXY_TEST_NAMESPACES").is_some(),
            "run only inside the namespaces the outer test makes: it changes /etc/hosts and lo"
        );
        let run = |args: &[&str]| {
            let status = Command::new(args[0])
                .args(&args[1..])
                .status()
                .expect("a setup command");
            assert!(status.success(), "{args:?}");
        };
        const HERE: &str = "93.184.216.34";
        run(&["ip", "link", "set", "lo", "up"]);
        run(&["ip", "addr", "add", &format!("{HERE}/32"), "dev", "lo"]);
        let hosts_file = env::temp_dir().join(format!("new-px-hosts-{}", process::id()));
        fs::write(&hosts_file, format!("{HERE} svc.allowed.test\n")).expect("hosts");
        run(&[
            "mount",
            "--bind",
            &hosts_file.display().to_string(),
            "/etc/hosts",
        ]);
        let listener = TcpListener::bind((HERE, 0)).await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlocal")
                    .await;
            }
        });
        let proxy = start(&["*.allowed.test"], None);
        let connect = format!("CONNECT svc.allowed.test:{port} HTTP/1.1\r\n\r\n");
        let get = format!("GET http://svc.allowed.test:{port}/ HTTP/1.1\r\n\r\n");
        for request in [&connect, &get] {
            let response = exchange(&proxy, request.as_bytes()).await;
            assert!(
                response.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
                "{response}"
            );
            assert!(
                response.contains(&format!(
                    "svc.allowed.test resolves to {HERE}, an address of this machine"
                )),
                "{response}"
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        // Listed exactly, the same name reaches the service: the setup did lead here.
        let exact = start(&["svc.allowed.test"], None);
        let response = exchange(&exact, get.as_bytes()).await;
        assert!(response.ends_with("local"), "{response}");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        let _ = fs::remove_file(&hosts_file);
    }

    #[tokio::test]
    async fn allow_lets_a_host_through() {
        let (port, _) = echo_server().await;
        let proxy = start(&[], None);
        let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
        let response = exchange(&proxy, request.as_bytes()).await;
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{response}"
        );
        assert!(response.contains("Ask the user to allow it"), "{response}");
        proxy.allow("LOCALHOST.");
        tunnel_through(&proxy, port).await;
    }

    #[tokio::test]
    async fn bad_requests_get_400_and_the_proxy_goes_on() {
        let (port, _) = echo_server().await;
        let proxy = start(&["*"], None);
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"[..],
            b"nonsense\r\n\r\n",
            b"CONNECT localhost HTTP/1.1\r\n\r\n",
            b"CONNECT 127.1:80 HTTP/1.1\r\n\r\n",
            b"\x00\x01\x02\xff\r\n\r\n",
            b"CONNECT localhost:1 HTTP/1.1\r\nX: a\r\n\tfolded\r\n\r\n",
            b"GET http://localhost/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        ] {
            let response = exchange(&proxy, bad).await;
            assert!(
                response.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{response}"
            );
        }
        // A client that leaves mid-head gets nothing and costs nothing.
        drop(client(&proxy).await);
        tunnel_through(&proxy, port).await;
    }

    /// A reader that hands out its pieces one read at a time, then ends.
    struct Pieces(VecDeque<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(piece) = self.0.pop_front() {
                buf.put_slice(&piece);
            }
            Poll::Ready(Ok(()))
        }
    }

    fn pieces(bytes: &[u8], cuts: &[usize]) -> Pieces {
        let mut out = VecDeque::new();
        let mut from = 0;
        for &cut in cuts.iter().chain([&bytes.len()]) {
            out.push_back(bytes[from..cut].to_vec());
            from = cut;
        }
        Pieces(out)
    }

    #[tokio::test]
    async fn a_head_split_over_reads_is_found_wherever_it_is_cut() {
        let head = b"CONNECT x.com:443 HTTP/1.1\r\nHost: x.com\r\n\r\n";
        let sent = [&head[..], b"early"].concat();
        // Cut once anywhere, and byte by byte.
        let mut cuttings: Vec<Vec<usize>> = (1..sent.len()).map(|cut| vec![cut]).collect();
        cuttings.push((1..sent.len()).collect());
        // Cut inside each of the final CR LF CR LF.
        let end = head.len();
        cuttings.push(vec![end - 3, end - 2, end - 1]);
        for cuts in cuttings {
            let (buffer, length) = read_head(&mut pieces(&sent, &cuts))
                .await
                .unwrap_or_else(|e| panic!("{cuts:?}: {e:?}"));
            assert_eq!(length, head.len(), "{cuts:?}");
            assert!(b"early".starts_with(&buffer[length..]), "{cuts:?}");
            let request = parse_request(&buffer[..length]).expect("a valid head");
            assert_eq!(request.host, Name::Domain("x.com".into()));
        }
        // A client that stops mid-head, or sends too much without an end, gets no head.
        let mut cut = pieces(&head[..head.len() - 1], &[5]);
        assert!(matches!(read_head(&mut cut).await, Err(HeadError::Closed)));
        let endless = vec![b'a'; MAX_HEAD + 10];
        let cuts: Vec<usize> = (1..endless.len() / 1000).map(|i| i * 1000).collect();
        assert!(matches!(
            read_head(&mut pieces(&endless, &cuts)).await,
            Err(HeadError::TooLarge)
        ));
    }

    #[tokio::test]
    async fn a_head_sent_in_pieces_through_the_socket_is_served() {
        let (port, _) = echo_server().await;
        let proxy = start(&["localhost"], None);
        let mut stream = client(&proxy).await;
        let request = format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        for piece in request.as_bytes().chunks(7) {
            stream.write_all(piece).await.expect("send");
            stream.flush().await.expect("flush");
            time::sleep(Duration::from_millis(5)).await;
        }
        let head = read_response_head(&mut stream).await;
        assert_eq!(head, "HTTP/1.1 200 Connection Established\r\n\r\n");
        stream.write_all(b"ping").await.expect("send ping");
        let mut echoed = [0u8; 4];
        stream.read_exact(&mut echoed).await.expect("echo");
        assert_eq!(&echoed, b"ping");
    }

    #[tokio::test]
    async fn oversized_head_gets_400() {
        let proxy = start(&["*"], None);
        let mut stream = client(&proxy).await;
        let mut request = b"GET http://localhost/ HTTP/1.1\r\nX-Big: ".to_vec();
        request.resize(request.len() + 70 * 1024, b'a');
        let (mut reader, mut writer) = stream.split();
        let send = async {
            let _ = writer.write_all(&request).await;
        };
        let mut response = Vec::new();
        let receive = reader.read_to_end(&mut response);
        let ((), read) = tokio::join!(send, receive);
        read.expect("read response");
        let response = String::from_utf8_lossy(&response);
        assert!(
            response.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{response}"
        );
        assert!(response.contains("over 64 KB"), "{response}");
    }

    #[tokio::test]
    async fn unreachable_upstream_gets_502() {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            listener.local_addr().expect("address").port()
        };
        let proxy = start(&["127.0.0.1"], None);
        let request = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
        let response = exchange(&proxy, request.as_bytes()).await;
        assert!(
            response.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
            "{response}"
        );
        assert!(
            response.contains(&format!("could not reach 127.0.0.1:{port}")),
            "{response}"
        );
    }

    #[tokio::test]
    async fn drop_removes_the_socket_and_ends_tunnels() {
        let (port, _) = echo_server().await;
        let path = socket_path();
        drop(UnixListener::bind(&path).expect("stale socket"));
        assert!(path.exists(), "a stale socket file is left behind");
        let proxy = Proxy::start(&path, hosts(&["localhost"]), None).expect("replace stale socket");
        let mode = fs::metadata(&path).expect("socket").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut stream = client(&proxy).await;
        let request = format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        read_response_head(&mut stream).await;
        drop(proxy);
        assert!(!path.exists(), "socket file left after drop");
        let mut rest = Vec::new();
        let ended = time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest));
        assert!(ended.await.is_ok(), "tunnel still open after drop");
        remove_test_dir(&path);
    }

    #[tokio::test]
    async fn start_refuses_to_replace_a_regular_file() {
        let path = socket_path();
        fs::write(&path, "not a socket").expect("write file");
        let error = Proxy::start(&path, Hosts::default(), None)
            .err()
            .expect("refused");
        assert_eq!(error.kind(), ErrorKind::AlreadyExists);
        assert!(path.exists());
        remove_test_dir(&path);
    }

    #[test]
    fn start_outside_a_runtime_is_an_error() {
        let path = socket_path();
        let error = Proxy::start(&path, Hosts::default(), None)
            .err()
            .expect("no runtime");
        assert!(error.to_string().contains("tokio runtime"), "{error}");
        assert!(!path.exists());
        remove_test_dir(&path);
    }
}
