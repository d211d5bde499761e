//! One connection to one MCP server, on the official Rust SDK (`rmcp`): the protocol, both
//! transports (stdio; streamable HTTP with resumable SSE streams: `id`/`retry`, `Last-Event-ID`,
//! a GET to resume, a call completed by its answer on whichever stream it arrives) and the OAuth
//! client are the SDK's. What `new` adds around them lives here and in [`super::oauth`]: the
//! server's process (started through the sandbox, in its own process group, its stderr to a
//! log), headers and `headersHelper`, no redirects, the answers `new` gives a server's own
//! requests (`roots/list`: WORKDIR; `elicitation/create`: asked on a terminal, declined without
//! one), and errors in `new`'s words.
//!
//! The SDK's types stay inside this module and `oauth`: the rest of `new` sees JSON values and
//! [`Event`]s.

// Roots and logging are deprecated by the SDK for the 2026 draft (SEP-2577); the servers of the
// versions spoken here (2025-03-26 to 2025-11-25) use them.
#![allow(deprecated)]

use std::collections::HashMap;
use std::env;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientNotification, ClientRequest, ElicitRequestParams,
    ElicitResult, ErrorData, Implementation, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProtocolVersion, RequestId, Root,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::Transport;
use super::elicit::{Answer, Elicitor};
use crate::escape;
use crate::fs::atomic;
use crate::http;
use crate::mcp::config::HeadersHelper;
use crate::secret;
use crate::utf8;
use futures_util::stream::BoxStream;
use new_sys::os_sandbox;
use new_sys::os_sandbox::OsSandbox;
use new_sys::os_sandbox::Reach;
use new_sys::platform;
use new_sys::process;
use reqwest::header::HeaderName;
use reqwest::header::HeaderValue;
use reqwest::redirect::Policy;
use rmcp::model::CallToolRequestParams;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::model::Request;
use rmcp::service::ClientInitializeError;
use rmcp::service::QuitReason;
use rmcp::service::RequestHandle;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::SseError;
use rmcp::transport::streamable_http_client::StreamableHttpClient;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::streamable_http_client::StreamableHttpPostResponse;
use rmcp::transport::streamable_http_client::StreamableHttpResponseLimits;
use std::ffi::OsString;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::fs;
use std::fs::File;
use std::future;
use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::task::Context;
use std::task::Poll;
use tokio::io::AsyncRead;
use tokio::io::ReadBuf;
use tokio::process::Child;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::sync::watch::Receiver;
use tokio::sync::watch::Sender;
use tokio::time;

/// The biggest message read from a server (a tool result of 100 MB is refused, not buffered).
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The most of a server's `instructions` kept (they go into every system prompt).
pub const MAX_INSTRUCTIONS: usize = 16 * 1024;

#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Rpc(String),
    #[error("the server closed the connection{0}")]
    Closed(String),
    #[error("no answer within {0} s")]
    Timeout(u64),
    #[error("{0}")]
    Transport(String),
    /// The server wants an OAuth authorization `new` does not have (or it was refused), with
    /// the `WWW-Authenticate` challenge it answered.
    #[error("{why}")]
    Unauthorized { why: String, challenge: String },
}

impl McpError {
    /// What went wrong in fixed words, for the log: never the text, which may quote a
    /// server's answer, its URL or its stderr.
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::Rpc(_) => "error answer",
            McpError::Closed(_) => "closed",
            McpError::Timeout(_) => "timeout",
            McpError::Transport(_) => "transport error",
            McpError::Unauthorized { .. } => "unauthorized",
        }
    }
}

/// What the server says without being asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    ToolsChanged,
    Progress {
        token: Value,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// The connection ended (a process that exited, a stream that broke), with why.
    Closed(String),
}

/// What `initialize` answered: the version agreed, the server's instructions and name.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    pub protocol_version: String,
    pub instructions: Option<String>,
    pub name: String,
    /// Whether it offers resources and prompts (its capabilities say so).
    pub resources: bool,
    pub prompts: bool,
}

/// Everything a connection needs besides the entry's transport.
#[derive(Clone)]
pub struct Connect<'a> {
    pub workdir: &'a Path,
    /// The server's stderr and `new`'s notes about it.
    pub log: &'a Path,
    pub hidden_env: &'a [String],
    pub handshake: Duration,
    pub sandbox: Option<(&'a OsSandbox, Reach)>,
    /// Who answers the server's `elicitation/create` (none: declined).
    pub elicitor: Option<Elicitor>,
    /// OAuth for an HTTP server: the server's name, its entry's settings, where tokens live.
    pub oauth: Option<super::oauth::Login>,
}

type Log = Arc<Mutex<Option<File>>>;

/// One connection to one server.
pub struct Client {
    peer: Peer<RoleClient>,
    stop: CancellationToken,
    child: Mutex<Option<Child>>,
    info: ServerInfo,
    /// A stdio server's count of messages refused for their size.
    refused: Option<Receiver<u64>>,
    /// An HTTP server's OAuth: how to authorize, the session, the server's URL (kept to
    /// authorize again on a 403 `insufficient_scope`).
    oauth: Option<(super::oauth::Login, Arc<super::oauth::Session>, String)>,
}

impl Debug for Client {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("info", &self.info).finish()
    }
}

/// The longest a `headersHelper` may take, and the most of its output read.
const HELPER_TIMEOUT: Duration = Duration::from_secs(10);
const HELPER_MAX_OUTPUT: u64 = 64 * 1024;

/// Runs an entry's `headersHelper` (`sh -c`, in WORKDIR, where a stdio server of the entry would
/// run: a project's inside the sandbox) with `CLAUDE_CODE_MCP_SERVER_NAME` and `…_URL` set, and
/// reads its stdout as a JSON object of header names and values.
async fn headers_from_helper(
    helper: &HeadersHelper,
    url: &str,
    workdir: &Path,
    hidden_env: &[String],
    sandbox: Option<(&OsSandbox, Reach)>,
) -> Result<Vec<(String, String)>, String> {
    use tokio::io::AsyncReadExt;
    let shell = platform::posix_shell();
    let args = shell.args(&helper.command);
    let mut cmd = os_sandbox::command(
        sandbox.map(|(s, _)| s),
        sandbox.map(|(_, r)| r),
        shell.program.as_os_str(),
        &args,
        workdir,
    )
    .map_err(|e| format!("cannot start it: {e}"))?;
    for name in secret::secret_env(hidden_env) {
        cmd.env_remove(name);
    }
    cmd.env("CLAUDE_CODE_MCP_SERVER_NAME", &helper.server)
        .env("CLAUDE_CODE_MCP_SERVER_URL", url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    platform::own_process_group(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start it: {e}"))?;
    // Its own process group: ended whole if it takes too long.
    let group = child.id();
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let work = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut o, mut e) = (
            (&mut stdout).take(HELPER_MAX_OUTPUT),
            (&mut stderr).take(HELPER_MAX_OUTPUT),
        );
        let (read_out, _) = tokio::join!(o.read_to_end(&mut out), e.read_to_end(&mut err));
        read_out.map_err(|e| e.to_string())?;
        let status = child.wait().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((status, out, err))
    };
    let (status, out, err) = match time::timeout(HELPER_TIMEOUT, work).await {
        Ok(done) => done?,
        Err(_) => {
            if let Some(pid) = group {
                platform::end_group(pid, true);
            }
            return Err(format!("took longer than {} s", HELPER_TIMEOUT.as_secs()));
        }
    };
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        return Err(format!(
            "it failed ({status}){}",
            match said.trim() {
                "" => String::new(),
                s => format!(": {}", escape::escape_controls(s)),
            }
        ));
    }
    let value: Value = serde_json::from_slice(&out)
        .map_err(|e| format!("its output is not a JSON object of headers ({e})"))?;
    let Value::Object(map) = value else {
        return Err("its output is not a JSON object of headers".into());
    };
    map.into_iter()
        .map(|(k, v)| match v {
            Value::String(v) if HeaderName::try_from(k.as_str()).is_ok() => Ok((k, v)),
            _ => Err(format!("`{k}` is not a header name with a string value")),
        })
        .collect()
}

/// What answers the server: its notifications become [`Event`]s, its requests are answered.
struct Handler {
    events: mpsc::UnboundedSender<Event>,
    log: Log,
    roots: Vec<Root>,
    elicitor: Option<Elicitor>,
}

impl Handler {
    fn note(&self, text: &str) {
        note(&self.log, text);
    }
}

fn note(log: &Log, text: &str) {
    if let Some(f) = log.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = writeln!(f, "[new] {text}");
    }
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // Form elicitation (a terminal asks, or it is declined) and roots (WORKDIR).
        let capabilities: ClientCapabilities = serde_json::from_value(json!({
            "elicitation": {"form": {}},
            "roots": {"listChanged": false},
        }))
        .unwrap_or_default();
        // The newest released version: the 2026 draft's stateless lifecycle is not spoken yet.
        ClientConfig::new(
            capabilities,
            Implementation::new("new", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(self.roots.clone()))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = serde_json::to_value(&request).unwrap_or(Value::Null);
        let answer = match (&self.elicitor, super::elicit::Form::from_request(&request)) {
            (Some(elicitor), Some(form)) => elicitor(form).await,
            _ => Answer::Decline,
        };
        let result = match answer {
            Answer::Accept(content) => json!({"action": "accept", "content": content}),
            Answer::Decline => json!({"action": "decline"}),
            Answer::Cancel => json!({"action": "cancel"}),
        };
        serde_json::from_value(result).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.events.send(Event::Progress {
            token: serde_json::to_value(&params.progress_token).unwrap_or(Value::Null),
            progress: params.progress,
            total: params.total,
            message: params.message,
        });
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let p = serde_json::to_value(&params).unwrap_or(Value::Null);
        self.note(&format!("log: {p}"));
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Event::ToolsChanged);
    }
}

/// The SDK's error of a request in `new`'s words.
fn service_error(e: rmcp::ServiceError, timeout: Duration) -> McpError {
    use rmcp::ServiceError as S;
    if let Some(challenge) = e.auth_challenge() {
        return McpError::Unauthorized {
            why: super::oauth::refused(challenge),
            challenge: challenge.to_string(),
        };
    }
    match e {
        S::McpError(data) => McpError::Rpc(data.message.to_string()),
        S::Timeout { .. } => McpError::Timeout(timeout.as_secs()),
        S::TransportClosed => McpError::Closed(String::new()),
        S::Cancelled { .. } => McpError::Closed(" (the call was cancelled)".into()),
        S::TransportSend(e) => McpError::Transport(transport_words(&e.to_string())),
        other => McpError::Transport(other.to_string()),
    }
}

/// The SDK's words for a failed send, with what only repeats the request left out.
fn transport_words(text: &str) -> String {
    let text = text
        .strip_prefix("Transport send error: ")
        .unwrap_or(text)
        .trim();
    escape::escape_controls(&text.chars().take(400).collect::<String>())
}

/// The SDK's error of a handshake in `new`'s words.
fn initialize_error(e: ClientInitializeError) -> McpError {
    use rmcp::service::ClientInitializeError as I;
    if let Some(challenge) = e.auth_challenge() {
        return McpError::Unauthorized {
            why: super::oauth::refused(challenge),
            challenge: challenge.to_string(),
        };
    }
    match e {
        I::ConnectionClosed(why) => McpError::Closed(format!(" ({why})")),
        I::JsonRpcError(data) => McpError::Rpc(data.message.to_string()),
        I::TransportError { error, .. } => {
            McpError::Transport(transport_words(&error.error.to_string()))
        }
        other => McpError::Rpc(escape::escape_controls(&other.to_string())),
    }
}

/// A `tools/call` request, made directly (the call of every turn: no JSON round trip through
/// the protocol's types). Arguments that are not an object (nor null) cannot be sent.
pub fn tool_call_request(name: &str, arguments: &Value) -> Result<ClientRequest, McpError> {
    let mut params = CallToolRequestParams::new(name.to_string());
    match arguments {
        Value::Object(map) => params = params.with_arguments(map.clone()),
        Value::Null => {}
        _ => {
            return Err(McpError::Rpc(
                "cannot send `tools/call`: its arguments are not an object".into(),
            ));
        }
    }
    Ok(ClientRequest::CallToolRequest(Request::new(params)))
}

/// A request of the protocol from its method and params.
fn client_request(method: &str, params: Value) -> Result<ClientRequest, McpError> {
    let mut message = json!({"method": method});
    if params.as_object().is_some_and(|p| !p.is_empty()) {
        message["params"] = params;
    }
    serde_json::from_value(message)
        .map_err(|e| McpError::Rpc(format!("cannot send `{method}`: {e}")))
}

/// A stdio server's stdout as the SDK reads it, watched for lines over [`MAX_MESSAGE`] and lines
/// that are not JSON. The SDK passes over both; here they are said in the log, and on a refused
/// line every call waiting fails at once (its answer may have been that line) instead of by its
/// timeout.
struct Capped<R> {
    inner: R,
    /// The length of the line being read, and whether it was already refused.
    line: usize,
    over: bool,
    /// The start of the line being read (what the log shows of a line that is not JSON).
    start: Vec<u8>,
    refused: Sender<u64>,
    log: Log,
}

/// How much of a line that is not a message the log shows.
const SHOWN_OF_A_LINE: usize = 200;

impl<R> Capped<R> {
    /// `data` is the next part of the current line (no line break in it).
    fn take(&mut self, data: &[u8]) {
        let room = SHOWN_OF_A_LINE.saturating_sub(self.start.len());
        self.start.extend_from_slice(&data[..data.len().min(room)]);
        self.grow(data.len());
    }

    /// The current line ended.
    fn end_line(&mut self) {
        let text = String::from_utf8_lossy(&self.start);
        let text = text.trim();
        if !text.is_empty() && !text.starts_with('{') && !text.starts_with('[') {
            let shown: String = text.chars().take(SHOWN_OF_A_LINE).collect();
            note(
                &self.log,
                &format!(
                    "not a protocol message on stdout: {}",
                    escape::escape_controls(&shown)
                ),
            );
        }
        self.start.clear();
        self.line = 0;
        self.over = false;
    }

    fn grow(&mut self, by: usize) {
        self.line += by;
        if self.line > MAX_MESSAGE && !self.over {
            self.over = true;
            note(
                &self.log,
                &format!("a message over {} MB was refused", MAX_MESSAGE >> 20),
            );
            self.refused.send_modify(|n| *n += 1);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &read {
            let mut data = &buf.filled()[before..];
            while let Some(end) = memchr::memchr(b'\n', data) {
                this.take(&data[..end]);
                this.end_line();
                data = &data[end + 1..];
            }
            this.take(data);
        }
        read
    }
}

/// A call sent and not answered yet: its progress token; dropped before its answer, the
/// server is told it is cancelled.
pub struct Call {
    handle: Option<RequestHandle<RoleClient>>,
    pub token: String,
    timeout: Duration,
    /// A stdio server's count of refused messages, as it was when the call was sent.
    refused: Option<Receiver<u64>>,
}

impl Call {
    /// Waits for the answer (at most the call's timeout).
    pub async fn answer(mut self) -> Result<Value, McpError> {
        let handle = self.handle.take().expect("answered once");
        // Dropped while waiting (an interrupted turn): the server hears of it.
        struct Cancel(Option<(Peer<RoleClient>, RequestId)>);
        impl Drop for Cancel {
            fn drop(&mut self) {
                if let Some((peer, id)) = self.0.take()
                    && let Ok(runtime) = Handle::try_current()
                {
                    runtime.spawn(async move {
                        let cancelled = json!({
                            "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "the user interrupted"},
                        });
                        if let Ok(n) = serde_json::from_value::<ClientNotification>(cancelled) {
                            let _ = peer.send_notification(n).await;
                        }
                    });
                }
            }
        }
        let mut guard = Cancel(Some((handle.peer.clone(), handle.id.clone())));
        let timeout = self.timeout;
        let answer = match self.refused.take() {
            Some(mut refused) => {
                let refusal = async move {
                    if refused.changed().await.is_err() {
                        future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    answer = handle.await_response() => answer.map_err(|e| service_error(e, timeout)),
                    () = refusal => Err(McpError::Transport(format!(
                        "the server sent a message over {} MB; refused",
                        MAX_MESSAGE >> 20
                    ))),
                }
            }
            None => handle
                .await_response()
                .await
                .map_err(|e| service_error(e, timeout)),
        };
        guard.0 = None;
        let answer = answer?;
        Ok(serde_json::to_value(answer).unwrap_or(Value::Null))
    }
}

impl Client {
    /// Starts (stdio) or reaches (HTTP) a server and completes the handshake within
    /// `how.handshake`. The server's stderr and what it writes that is not protocol go to
    /// `how.log`.
    pub async fn connect(
        transport: &Transport,
        how: Connect<'_>,
    ) -> Result<(Arc<Client>, mpsc::UnboundedReceiver<Event>), McpError> {
        let log_file = open_log(how.log);
        let (events, receiver) = mpsc::unbounded_channel();
        let log: Log = Arc::new(Mutex::new(
            log_file.as_ref().and_then(|f| f.try_clone().ok()),
        ));
        let handler = Handler {
            events: events.clone(),
            log: log.clone(),
            roots: vec![root(how.workdir)],
            elicitor: how.elicitor.clone(),
        };
        let stop = CancellationToken::new();
        let (refusals, refused) = watch::channel(0u64);
        let mut stdio = false;
        let (running, child, oauth) = match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let dir = cwd.as_deref().unwrap_or(how.workdir);
                // Started through the sandbox's helper or the watcher, a program that is not
                // there would only look like a server that closed the connection.
                if !program_exists(command, dir, env.get("PATH").map(OsString::from)) {
                    return Err(McpError::Transport(format!(
                        "`{command}` not found{}",
                        if command.contains('/') {
                            String::new()
                        } else {
                            " on PATH (is it installed?)".to_string()
                        }
                    )));
                }
                let args: Vec<OsString> = args.iter().map(Into::into).collect();
                let mut cmd = os_sandbox::command(
                    how.sandbox.map(|(s, _)| s),
                    how.sandbox.map(|(_, r)| r),
                    command.as_ref(),
                    &args,
                    dir,
                )
                .map_err(|e| McpError::Transport(format!("cannot start `{command}`: {e}")))?;
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(match log_file {
                        Some(f) => Stdio::from(f),
                        None => Stdio::null(),
                    })
                    .kill_on_drop(true);
                // Its own process group: Ctrl-C at the terminal is for `new`, not for servers.
                platform::own_process_group(&mut cmd);
                // The provider keys the model's commands never see are not the server's either,
                // unless its entry passes them on (set after the removal).
                for name in secret::secret_env(how.hidden_env) {
                    cmd.env_remove(name);
                }
                cmd.envs(env);
                // Ended with `new`, even when `new` is killed and cannot end it.
                process::end_with_parent(&mut cmd);
                // Recorded as started on purpose: a `bash` call's clean-up of escaped processes
                // must not take a server for one.
                let mut child = process::spawn_own(&mut cmd)
                    .map_err(|e| McpError::Transport(format!("cannot start `{command}`: {e}")))?;
                let stdin = child.stdin.take().expect("piped");
                let stdout = child.stdout.take().expect("piped");
                let stdout = Capped {
                    inner: stdout,
                    line: 0,
                    over: false,
                    start: Vec::new(),
                    refused: refusals,
                    log: log.clone(),
                };
                stdio = true;
                let serving = handler.serve_with_ct((stdout, stdin), stop.clone());
                let running = match time::timeout(how.handshake, serving).await {
                    Ok(Ok(running)) => running,
                    Ok(Err(e)) => {
                        end_child(&mut child).await;
                        return Err(match initialize_error(e) {
                            // Why the process is gone, when it is.
                            McpError::Closed(_) => McpError::Closed(" (it exited)".into()),
                            other => other,
                        });
                    }
                    Err(_) => {
                        end_child(&mut child).await;
                        return Err(McpError::Timeout(how.handshake.as_secs()));
                    }
                };
                (running, Some(child), None)
            }
            Transport::Http {
                url,
                headers,
                helper,
            } => {
                let mut headers: Vec<(String, String)> = headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if let Some(helper) = helper {
                    // Its headers win over the static ones of the same name.
                    let dynamic =
                        headers_from_helper(helper, url, how.workdir, how.hidden_env, how.sandbox)
                            .await
                            .map_err(|e| McpError::Transport(format!("headersHelper: {e}")))?;
                    headers
                        .retain(|(k, _)| !dynamic.iter().any(|(d, _)| d.eq_ignore_ascii_case(k)));
                    headers.extend(dynamic);
                }
                let mut custom = HashMap::new();
                for (k, v) in &headers {
                    let (Ok(k), Ok(v)) = (
                        HeaderName::try_from(k.as_str()),
                        HeaderValue::try_from(v.as_str()),
                    ) else {
                        return Err(McpError::Transport(format!(
                            "the header `{}` cannot be sent",
                            escape::escape_controls(k)
                        )));
                    };
                    custom.insert(k, v);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let http = http_client()?;
                let connected = connect_http(handler, http, config, &how, url, &stop).await?;
                (connected.0, None, connected.1)
            }
        };
        let peer = running.peer().clone();
        let info = running
            .peer_info()
            .map(|i| {
                let server = i.server_info.clone().unwrap_or_default();
                ServerInfo {
                    protocol_version: i.protocol_version.to_string(),
                    // Bounded: a server's instructions go into every system prompt.
                    instructions: i
                        .instructions
                        .as_deref()
                        .map(|t| t[..utf8::floor_char_boundary(t, MAX_INSTRUCTIONS)].to_string()),
                    name: format!("{} {}", server.name, server.version)
                        .trim()
                        .to_string(),
                    resources: i.capabilities.resources.is_some(),
                    prompts: i.capabilities.prompts.is_some(),
                }
            })
            .unwrap_or_default();
        // The connection's end (a process that exited, a stream that broke) is an event.
        let closed = events.clone();
        let watched = log.clone();
        tokio::spawn(async move {
            let why = match running.waiting().await {
                Ok(QuitReason::Cancelled) => return,
                Ok(_) => "it exited".to_string(),
                Err(e) => format!("its connection failed: {e}"),
            };
            note(&watched, &format!("the connection ended: {why}"));
            let _ = closed.send(Event::Closed(why));
        });
        let client = Arc::new(Client {
            peer,
            stop,
            child: Mutex::new(child),
            info,
            refused: stdio.then_some(refused),
            oauth,
        });
        Ok((client, receiver))
    }

    /// What the handshake learnt.
    pub fn info(&self) -> ServerInfo {
        self.info.clone()
    }

    /// Sends a request and waits for its answer at most `timeout`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let mut again = 0;
        loop {
            let answer = self
                .start(method, params.clone(), timeout)
                .await?
                .answer()
                .await;
            // Refused for want of an authorization or a scope: authorized again, asked again.
            if let Err(McpError::Unauthorized { challenge, .. }) = &answer
                && again < super::oauth::MAX_STEP_UPS
                && self.authorize_again(challenge).await?
            {
                again += 1;
                continue;
            }
            return answer;
        }
    }

    /// Sends a request; its answer is [`Call::answer`]'s. A tool call refused for want of a
    /// scope is authorized again with the scope the server asked for (step-up), at most a few
    /// times, and sent again.
    pub async fn start(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Call, McpError> {
        self.send(client_request(method, params)?, timeout).await
    }

    /// Sends a request made already ([`tool_call_request`]); as [`Client::start`].
    pub async fn send(&self, request: ClientRequest, timeout: Duration) -> Result<Call, McpError> {
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(|e| service_error(e, timeout))?;
        let token = match serde_json::to_value(&handle.progress_token) {
            Ok(Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(_) => String::new(),
        };
        let refused = self.refused.clone().map(|mut r| {
            r.mark_unchanged();
            r
        });
        Ok(Call {
            handle: Some(handle),
            token,
            timeout,
            refused,
        })
    }

    /// Ends the connection: the SDK closes the stream (HTTP: DELETE of the session); for stdio,
    /// stdin closed, then the process group ended.
    pub async fn close(&self) {
        self.stop.cancel();
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut child) = child {
            end_child(&mut child).await;
        }
    }

    /// Authorizes again for a challenge met after the handshake (a 401: the token is gone; a
    /// 403 `insufficient_scope`: a wider scope, at most [`super::oauth::MAX_STEP_UPS`] times a
    /// connection). False for a server without OAuth.
    pub async fn authorize_again(&self, challenge: &str) -> Result<bool, McpError> {
        let Some((login, session, url)) = &self.oauth else {
            return Ok(false);
        };
        login
            .authorize(url, session, Some(challenge))
            .await
            .map_err(|e| McpError::Unauthorized {
                why: e.to_string(),
                challenge: challenge.to_string(),
            })?;
        Ok(true)
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|c| c.id())
    }
}

/// The HTTP client of MCP requests: no redirects (one to another origin would carry the entry's
/// headers, a key, there).
fn http_client() -> Result<reqwest::Client, McpError> {
    http::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(Policy::none())
        .build()
        .map_err(|e| McpError::Transport(e.to_string()))
}

/// An HTTP client of the SDK's whose SSE streams are watched: a stream that breaks (an event
/// over [`MAX_MESSAGE`], a cut connection) is said in the server's log.
#[derive(Clone)]
struct Watched<C> {
    inner: C,
    log: Log,
}

type SseStream = BoxStream<'static, Result<sse_stream::Sse, SseError>>;

impl<C> Watched<C> {
    fn watch(&self, stream: SseStream, which: &'static str) -> SseStream {
        use futures_util::StreamExt as _;
        let log = self.log.clone();
        stream
            .inspect(move |item| {
                if let Err(e) = item {
                    let e = e.to_string();
                    let why = if e.contains("exceeded the maximum size") {
                        format!("an event over {} MB", MAX_MESSAGE >> 20)
                    } else {
                        transport_words(&e)
                    };
                    note(
                        &log,
                        &format!("the server's {which} stream was closed: {why}"),
                    );
                }
            })
            .boxed()
    }
}

/// `custom_headers` of a POST, with the handshake's own where `message` is `initialize`: the
/// version it asks for (`MCP-Protocol-Version`) and `Mcp-Method`, as the 2026 draft wants on
/// every POST (SEP-2243). The SDK adds them to later requests once that version is agreed, not
/// to the handshake, which it sends with the entry's headers alone.
fn handshake_headers(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let ClientJsonRpcMessage::Request(request) = message
        && let ClientRequest::InitializeRequest(init) = &request.request
    {
        if let Ok(version) = HeaderValue::from_str(init.params.protocol_version.as_str()) {
            headers.insert(HeaderName::from_static("mcp-protocol-version"), version);
        }
        headers.insert(
            HeaderName::from_static("mcp-method"),
            HeaderValue::from_static("initialize"),
        );
    }
    headers
}

impl<C> StreamableHttpClient for Watched<C>
where
    C: StreamableHttpClient + Sync,
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        use rmcp::transport::streamable_http_client::StreamableHttpPostResponse as R;
        let custom_headers = handshake_headers(&message, custom_headers);
        match self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await?
        {
            R::Sse(stream, session) => Ok(R::Sse(self.watch(stream, "answer"), session)),
            other => Ok(other),
        }
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        use rmcp::transport::streamable_http_client::StreamableHttpPostResponse as R;
        let custom_headers = handshake_headers(&message, custom_headers);
        match self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?
        {
            R::Sse(stream, session) => Ok(R::Sse(self.watch(stream, "answer"), session)),
            other => Ok(other),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            MAX_MESSAGE,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.watch(stream, "GET"))
    }
}

type Running = RunningService<RoleClient, Handler>;
type Authorized = (super::oauth::Login, Arc<super::oauth::Session>, String);

/// The handshake over streamable HTTP: with the stored token when there is one (or one of the
/// client-credentials grant); on a 401, the OAuth flow of [`super::oauth`], then the handshake
/// again.
async fn connect_http(
    handler: Handler,
    http: reqwest::Client,
    config: StreamableHttpClientTransportConfig,
    how: &Connect<'_>,
    url: &str,
    stop: &CancellationToken,
) -> Result<(Running, Option<Authorized>), McpError> {
    use rmcp::transport::StreamableHttpClientTransport;
    // Each handshake within the handshake timeout (the browser step has its own).
    async fn within<T>(limit: Duration, serving: impl Future<Output = T>) -> Result<T, McpError> {
        time::timeout(limit, serving)
            .await
            .map_err(|_| McpError::Timeout(limit.as_secs()))
    }
    let Some(login) = &how.oauth else {
        let watched = Watched {
            inner: http,
            log: handler.log.clone(),
        };
        let transport = StreamableHttpClientTransport::with_client(watched, config);
        let running = within(
            how.handshake,
            handler.serve_with_ct(transport, stop.clone()),
        )
        .await?
        .map_err(initialize_error)?;
        return Ok((running, None));
    };
    let unauthorized = |e: super::oauth::OAuthError| {
        note(&handler.log, &format!("oauth: {}", e.kind()));
        McpError::Unauthorized {
            why: e.to_string(),
            challenge: String::new(),
        }
    };
    let session = login.session(url, &http).await.map_err(unauthorized)?;
    let watched = |client| Watched {
        inner: client,
        log: handler.log.clone(),
    };
    let transport =
        StreamableHttpClientTransport::with_client(watched(session.client()), config.clone());
    let challenge = match within(
        how.handshake,
        handler
            .clone_for_retry()
            .serve_with_ct(transport, stop.clone()),
    )
    .await?
    {
        Ok(running) => return Ok((running, Some((login.clone(), session, url.to_string())))),
        Err(e) => match e.auth_challenge() {
            Some(challenge) => challenge.to_string(),
            None => return Err(initialize_error(e)),
        },
    };
    login
        .authorize(url, &session, Some(&challenge))
        .await
        .map_err(unauthorized)?;
    let transport = StreamableHttpClientTransport::with_client(watched(session.client()), config);
    let running = within(
        how.handshake,
        handler.serve_with_ct(transport, stop.clone()),
    )
    .await?
    .map_err(initialize_error)?;
    Ok((running, Some((login.clone(), session, url.to_string()))))
}

impl Handler {
    /// The same answers for a second attempt at the handshake.
    fn clone_for_retry(&self) -> Handler {
        Handler {
            events: self.events.clone(),
            log: self.log.clone(),
            roots: self.roots.clone(),
            elicitor: self.elicitor.clone(),
        }
    }
}

/// WORKDIR as a root: a `file://` URI.
fn root(workdir: &Path) -> Root {
    let path: PathBuf = fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    // The URL library knows each system's paths (`C:\`, `\\?\C:\`, UNC shares on Windows).
    let uri = match reqwest::Url::from_file_path(&path) {
        Ok(url) => String::from(url),
        // Only a relative path (WORKDIR is made absolute at start): percent-encoded as it is.
        Err(()) => {
            let mut uri = String::from("file://");
            for byte in path.to_string_lossy().bytes() {
                match byte {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                        uri.push(byte as char)
                    }
                    other => uri.push_str(&format!("%{other:02X}")),
                }
            }
            uri
        }
    };
    let mut root = Root::new(uri);
    root.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    root
}

/// Ends a stdio server: its process group is asked to end, then ended.
async fn end_child(child: &mut Child) {
    let pid = child.id();
    if let Some(pid) = pid {
        // The process group of a server this client started (it leads its own group), so what
        // it started ends too.
        platform::end_group(pid, false);
    }
    if time::timeout(Duration::from_millis(500), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    if let Some(pid) = pid {
        // Whatever of the group is left.
        platform::end_group(pid, true);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = child.start_kill();
        }
    }
}

fn open_log(path: &Path) -> Option<File> {
    if let Some(dir) = path.parent() {
        let _ = atomic::create_private_dir(dir);
    }
    platform::private_file_options()
        .create(true)
        .append(true)
        .open(path)
        .ok()
}

/// Whether `command` names a program that can be started: a path (relative to `dir`) that is a
/// file, or a name found in one of `path`'s folders (the environment's PATH when the entry sets
/// none).
fn program_exists(command: &str, dir: &Path, path: Option<OsString>) -> bool {
    let is_file = |p: &Path| p.metadata().is_ok_and(|m| m.is_file());
    if command.contains('/') || Path::new(command).is_absolute() {
        return is_file(&dir.join(command));
    }
    let Some(path) = path.or_else(|| env::var_os("PATH")) else {
        return false;
    };
    env::split_paths(&path).any(|folder| {
        let at = folder.join(command);
        is_file(&at)
            || (cfg!(windows)
                && ["exe", "cmd", "bat", "com"]
                    .iter()
                    .any(|ext| is_file(&at.with_extension(ext))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::process::Command;

    #[test]
    fn a_tool_call_made_directly_is_the_one_made_from_json() {
        let args = json!({"text": "ping", "n": [1, {"a": null}]});
        let direct = tool_call_request("echo", &args).unwrap();
        let from_json =
            client_request("tools/call", json!({"name": "echo", "arguments": args})).unwrap();
        assert_eq!(
            serde_json::to_value(&direct).unwrap(),
            serde_json::to_value(&from_json).unwrap()
        );
        let bare = serde_json::to_value(tool_call_request("echo", &Value::Null).unwrap()).unwrap();
        assert_eq!(bare["params"], json!({"name": "echo"}));
        assert!(tool_call_request("echo", &json!([1])).is_err());
    }

    #[test]
    fn requests_are_made_from_their_method_and_params() {
        assert!(client_request("tools/list", json!({})).is_ok());
        assert!(client_request("tools/list", json!({"cursor": "2"})).is_ok());
        assert!(client_request("ping", json!({})).is_ok());
        assert!(client_request("tools/call", json!({"name": "t", "arguments": {"a": 1}})).is_ok());
    }

    #[test]
    fn workdir_is_a_file_uri_root() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a b");
        fs::create_dir(&sub).unwrap();
        let root = root(&sub);
        assert!(root.uri.starts_with("file:///"), "{}", root.uri);
        assert!(root.uri.ends_with("/a%20b"), "{}", root.uri);
        assert_eq!(root.name.as_deref(), Some("a b"));
    }

    /// A call that fails while its line is still being written (the server stopped reading, then
    /// sent a message over 16 MB, which the SDK passes over) never leaves half a line: the next
    /// call's line arrives whole and is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_call_never_cuts_its_line_in_half() {
        if Command::new("python3").arg("-V").output().is_err() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("server.py");
        let log = dir.path().join("lines.log");
        fs::write(
            &script,
            r#"import sys, json, time
log = open(sys.argv[1], "w")
def reply(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
first = json.loads(sys.stdin.readline())
reply({"jsonrpc": "2.0", "id": first["id"], "result": {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "slow", "version": "1"}}})
sys.stdin.readline()
time.sleep(1.0)
sys.stdout.write("x" * (17 * 1024 * 1024) + "\n"); sys.stdout.flush()
time.sleep(1.0)
for line in sys.stdin:
    try:
        m = json.loads(line)
        log.write("whole %s\n" % m.get("method")); log.flush()
        if "id" in m and m.get("method") != "tools/call": reply({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}})
    except ValueError:
        log.write("cut\n"); log.flush()
"#,
        )
        .unwrap();
        let transport = Transport::Stdio {
            command: "python3".into(),
            args: vec![script.display().to_string(), log.display().to_string()],
            env: Default::default(),
            cwd: None,
        };
        let mcp_log = dir.path().join("mcp.log");
        let (client, _events) = Client::connect(
            &transport,
            Connect {
                workdir: dir.path(),
                log: &mcp_log,
                hidden_env: &[],
                handshake: Duration::from_secs(10),
                sandbox: None,
                elicitor: None,
                oauth: None,
            },
        )
        .await
        .unwrap();
        let big = "y".repeat(300 * 1024);
        let first = client
            .request(
                "tools/call",
                json!({"name": "t", "arguments": {"big": big}}),
                Duration::from_secs(4),
            )
            .await;
        assert!(first.is_err(), "{first:?}");
        let second = client
            .request("tools/list", json!({}), Duration::from_secs(10))
            .await;
        assert!(second.is_ok(), "{second:?}");
        let lines = fs::read_to_string(&log).unwrap();
        assert!(!lines.contains("cut"), "{lines}");
        assert!(lines.contains("whole tools/list"), "{lines}");
        client.close().await;
    }
}
