//! A Model Context Protocol client: JSON-RPC 2.0 over a server's stdin and stdout (one message a
//! line) or over streamable HTTP (a POST a message, answered with JSON or an SSE stream;
//! `Mcp-Session-Id` kept, `MCP-Protocol-Version` sent, a GET stream for the server's own messages
//! where it offers one, DELETE on close).
//!
//! Lenient where servers differ: non-JSON lines on stdout are logged and passed over, a message
//! over [`MAX_MESSAGE`] is refused (and a call waiting for it fails), unknown notifications are
//! ignored, and requests from the server other than `ping` are answered "method not found".

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::config::Transport;

/// The protocol versions spoken, newest first: what `initialize` offers, and what a server's
/// answer may choose.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

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

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, McpError>>>>>;

enum Link {
    Stdio {
        /// Whole lines for the one task that writes the server's stdin: a caller that is
        /// cancelled (Ctrl-C, a timeout, an answer that came first) can never cut a line.
        stdin: mpsc::UnboundedSender<Vec<u8>>,
        child: Mutex<Option<tokio::process::Child>>,
    },
    Http {
        client: reqwest::Client,
        url: String,
        headers: Vec<(String, String)>,
        session: Mutex<Option<String>>,
        version: Mutex<Option<String>>,
    },
}

/// One connection to one server.
pub struct Client {
    link: Link,
    pending: Pending,
    next_id: AtomicU64,
    events: mpsc::UnboundedSender<Event>,
    log: Arc<Mutex<Option<std::fs::File>>>,
    info: std::sync::OnceLock<ServerInfo>,
}

/// What `initialize` answered: the version agreed, the server's instructions and name.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    pub protocol_version: String,
    pub instructions: Option<String>,
    pub name: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
    helper: &crate::mcp::config::HeadersHelper,
    url: &str,
    workdir: &Path,
    hidden_env: &[String],
    sandbox: Option<(&crate::os_sandbox::OsSandbox, crate::os_sandbox::Reach)>,
) -> Result<Vec<(String, String)>, String> {
    use tokio::io::AsyncReadExt;
    let shell = crate::platform::posix_shell();
    let args = shell.args(&helper.command);
    let mut cmd = crate::os_sandbox::command(
        sandbox.map(|(s, _)| s),
        sandbox.map(|(_, r)| r),
        shell.program.as_os_str(),
        &args,
        workdir,
    )
    .map_err(|e| format!("cannot start it: {e}"))?;
    for name in crate::tools::secret_env(hidden_env) {
        cmd.env_remove(name);
    }
    cmd.env("CLAUDE_CODE_MCP_SERVER_NAME", &helper.server)
        .env("CLAUDE_CODE_MCP_SERVER_URL", url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    crate::platform::own_process_group(&mut cmd);
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
    let (status, out, err) = match tokio::time::timeout(HELPER_TIMEOUT, work).await {
        Ok(done) => done?,
        Err(_) => {
            if let Some(pid) = group {
                crate::platform::end_group(pid, true);
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
                s => format!(": {}", crate::tools::escape_controls(s)),
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
            Value::String(v) if reqwest::header::HeaderName::try_from(k.as_str()).is_ok() => {
                Ok((k, v))
            }
            _ => Err(format!("`{k}` is not a header name with a string value")),
        })
        .collect()
}

impl Client {
    /// Starts (stdio) or reaches (HTTP) a server and completes the handshake within `handshake`.
    /// The server's stderr and what it writes that is not protocol go to `log`.
    pub async fn connect(
        transport: &Transport,
        workdir: &Path,
        log: &Path,
        hidden_env: &[String],
        handshake: Duration,
        sandbox: Option<(&crate::os_sandbox::OsSandbox, crate::os_sandbox::Reach)>,
    ) -> Result<(Arc<Client>, mpsc::UnboundedReceiver<Event>), McpError> {
        let log_file = open_log(log);
        let (events, receiver) = mpsc::unbounded_channel();
        let pending: Pending = Default::default();
        let log = Arc::new(Mutex::new(
            log_file.as_ref().and_then(|f| f.try_clone().ok()),
        ));
        let link = match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let dir = cwd.as_deref().unwrap_or(workdir);
                let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
                let mut cmd = crate::os_sandbox::command(
                    sandbox.map(|(s, _)| s),
                    sandbox.map(|(_, r)| r),
                    command.as_ref(),
                    &args,
                    dir,
                )
                .map_err(|e| McpError::Transport(format!("cannot start `{command}`: {e}")))?;
                cmd.stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(match log_file {
                        Some(f) => std::process::Stdio::from(f),
                        None => std::process::Stdio::null(),
                    })
                    .kill_on_drop(true);
                // Its own process group: Ctrl-C at the terminal is for `new`, not for servers.
                crate::platform::own_process_group(&mut cmd);
                // The provider keys the model's commands never see are not the server's either,
                // unless its entry passes them on (set after the removal).
                for name in crate::tools::secret_env(hidden_env) {
                    cmd.env_remove(name);
                }
                cmd.envs(env);
                #[cfg(target_os = "linux")]
                // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
                unsafe {
                    cmd.pre_exec(|| {
                        // Ended with `new`, even when `new` is killed and cannot end it.
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                        Ok(())
                    });
                }
                // Recorded as started on purpose: a `bash` call's clean-up of escaped processes
                // must not take a server for one.
                let mut child = crate::tools::builtin::reaper::spawn_own(&mut cmd)
                    .map_err(|e| McpError::Transport(format!("cannot start `{command}`: {e}")))?;
                let stdin = child.stdin.take().expect("piped");
                let stdout = child.stdout.take().expect("piped");
                let reader = Reader {
                    pending: pending.clone(),
                    events: events.clone(),
                    log: log.clone(),
                };
                let (replies, mut to_send) = mpsc::unbounded_channel::<Value>();
                let (lines, mut to_write) = mpsc::unbounded_channel::<Vec<u8>>();
                tokio::spawn(async move {
                    let mut stdin = stdin;
                    while let Some(line) = to_write.recv().await {
                        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                            return;
                        }
                    }
                });
                let link = Link::Stdio {
                    stdin: lines,
                    child: Mutex::new(Some(child)),
                };
                tokio::spawn(reader.stdio(stdout, replies));
                let client = Arc::new(Client::new(link, pending, events, log));
                // Answers to the server's own requests (ping), written in order.
                let weak = Arc::downgrade(&client);
                tokio::spawn(async move {
                    while let Some(message) = to_send.recv().await {
                        let Some(client) = weak.upgrade() else { return };
                        let _ = client.send(&message).await;
                    }
                });
                return Self::handshake(client, receiver, handshake).await;
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
                    let dynamic = headers_from_helper(helper, url, workdir, hidden_env, sandbox)
                        .await
                        .map_err(|e| McpError::Transport(format!("headersHelper: {e}")))?;
                    headers
                        .retain(|(k, _)| !dynamic.iter().any(|(d, _)| d.eq_ignore_ascii_case(k)));
                    headers.extend(dynamic);
                }
                crate::llm::install_crypto_provider();
                // No redirects: one to another origin would carry the entry's headers (a key)
                // there.
                let client = reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| McpError::Transport(e.to_string()))?;
                Link::Http {
                    client,
                    url: url.clone(),
                    headers,
                    session: Mutex::new(None),
                    version: Mutex::new(None),
                }
            }
        };
        let client = Arc::new(Client::new(link, pending, events, log));
        Self::handshake(client, receiver, handshake).await
    }

    fn new(
        link: Link,
        pending: Pending,
        events: mpsc::UnboundedSender<Event>,
        log: Arc<Mutex<Option<std::fs::File>>>,
    ) -> Client {
        Client {
            link,
            pending,
            next_id: AtomicU64::new(1),
            events,
            log,
            info: std::sync::OnceLock::new(),
        }
    }

    /// What the handshake learnt.
    pub fn info(&self) -> ServerInfo {
        self.info.get().cloned().unwrap_or_default()
    }

    async fn handshake(
        client: Arc<Client>,
        receiver: mpsc::UnboundedReceiver<Event>,
        handshake: Duration,
    ) -> Result<(Arc<Client>, mpsc::UnboundedReceiver<Event>), McpError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": {"name": "new", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = client.request("initialize", params, handshake).await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !PROTOCOL_VERSIONS.contains(&version.as_str()) {
            client.close().await;
            return Err(McpError::Rpc(format!(
                "the server speaks protocol version {version:?}; new speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
        if let Link::Http { version: v, .. } = &client.link {
            *v.lock().unwrap_or_else(|e| e.into_inner()) = Some(version.clone());
        }
        let info = result.get("serverInfo");
        let name = info
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let server_version = info
            .and_then(|i| i.get("version"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let _ = client.info.set(ServerInfo {
            protocol_version: version,
            // Bounded: a server's instructions go into every system prompt.
            instructions: result
                .get("instructions")
                .and_then(Value::as_str)
                .map(|t| t[..crate::utf8::floor_char_boundary(t, MAX_INSTRUCTIONS)].to_string()),
            name: format!("{name} {server_version}").trim().to_string(),
        });
        client
            .notify("notifications/initialized", json!({}))
            .await?;
        if matches!(client.link, Link::Http { .. }) {
            let listener = client.clone();
            tokio::spawn(async move { listener.listen().await });
        }
        Ok((client, receiver))
    }

    /// Sends a request and waits for its answer at most `timeout`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        self.request_as(self.new_id(), method, params, timeout)
            .await
    }

    /// A fresh request id (for a request whose cancellation must name it).
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::SeqCst)
    }

    /// [`Client::request`] with an id from [`Client::new_id`].
    pub async fn request_as(
        &self,
        id: u64,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let forget = || {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        };
        let exchange = async {
            let mut rx = rx;
            // The answer may come before the sending ends: an HTTP server may keep the stream
            // that carried it open. The call completes when its answer arrives.
            let answered = tokio::select! {
                answer = &mut rx => Some(answer),
                sent = self.send(&message) => {
                    sent?;
                    None
                }
            };
            let answer = match answered {
                Some(answer) => answer,
                None => rx.await,
            };
            answer.unwrap_or_else(|_| Err(McpError::Closed(String::new())))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => {
                forget();
                result
            }
            Err(_) => {
                forget();
                Err(McpError::Timeout(timeout.as_secs()))
            }
        }
    }

    pub async fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Writes one message: a line on stdin, or a POST whose answer is read here.
    async fn send(&self, message: &Value) -> Result<(), McpError> {
        match &self.link {
            Link::Stdio { stdin, .. } => {
                let mut line = serde_json::to_vec(message).expect("a JSON value");
                line.push(b'\n');
                stdin
                    .send(line)
                    .map_err(|_| McpError::Closed(" (its input is closed)".into()))
            }
            Link::Http { .. } => self.post(message).await,
        }
    }

    fn http_request(&self, method: reqwest::Method) -> Option<reqwest::RequestBuilder> {
        let Link::Http {
            client,
            url,
            headers,
            session,
            version,
        } = &self.link
        else {
            return None;
        };
        let mut request = client
            .request(method, url)
            .header("accept", "application/json, text/event-stream");
        for (k, v) in headers {
            request = request.header(k, v);
        }
        if let Some(id) = session.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            request = request.header("mcp-session-id", id);
        }
        if let Some(v) = version.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            request = request.header("mcp-protocol-version", v);
        }
        Some(request)
    }

    async fn post(&self, message: &Value) -> Result<(), McpError> {
        let request = self
            .http_request(reqwest::Method::POST)
            .expect("an HTTP link")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(message).expect("a JSON value"));
        let response = request
            .send()
            .await
            .map_err(|e| McpError::Transport(crate::llm::describe_reqwest_error(&e)))?;
        if let Link::Http { session, .. } = &self.link
            && let Some(id) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            *session.lock().unwrap_or_else(|e| e.into_inner()) = Some(id.to_string());
        }
        let status = response.status();
        if status.as_u16() == 202 || (status.is_success() && message.get("id").is_none()) {
            return Ok(());
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let text: String = body.chars().take(300).collect();
            let e = McpError::Transport(format!("HTTP {status}: {}", text.trim()));
            self.fail_request(message, e.clone());
            return Err(e);
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let reader = self.reader();
        if is_sse {
            reader.sse(response, Some(self)).await;
        } else {
            let bytes = read_capped(response).await?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Array(batch)) => {
                    for m in batch {
                        reader.dispatch(m, Some(self)).await;
                    }
                }
                Ok(m) => reader.dispatch(m, Some(self)).await,
                Err(e) => {
                    let e = McpError::Transport(format!("the server's answer is not JSON ({e})"));
                    self.fail_request(message, e.clone());
                    return Err(e);
                }
            }
        }
        // The answer to a request comes in the answer to its POST or never (a stream resumed
        // after a break is not asked for): a call still waiting now fails at once, not by its
        // timeout.
        self.fail_request(
            message,
            McpError::Transport("the server ended its answer without a result".into()),
        );
        Ok(())
    }

    /// Fails the call waiting for `message`'s answer.
    fn fail_request(&self, message: &Value, e: McpError) {
        if let Some(id) = message.get("id").and_then(Value::as_u64)
            && let Some(tx) = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id)
        {
            let _ = tx.send(Err(e));
        }
    }

    fn reader(&self) -> Reader {
        Reader {
            pending: self.pending.clone(),
            events: self.events.clone(),
            log: self.log.clone(),
        }
    }

    /// The GET stream of an HTTP server's own messages, where it offers one.
    async fn listen(self: Arc<Self>) {
        let Some(request) = self.http_request(reqwest::Method::GET) else {
            return;
        };
        let Ok(response) = request.send().await else {
            return;
        };
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if response.status().is_success() && is_sse {
            let weak = Arc::downgrade(&self);
            drop(self);
            let reader = match weak.upgrade() {
                Some(c) => c.reader(),
                None => return,
            };
            reader.sse_weak(response, weak).await;
        }
    }

    /// Ends the connection: DELETE for HTTP; for stdio, stdin closed, then the process ended.
    pub async fn close(&self) {
        match &self.link {
            Link::Http { .. } => {
                if let Some(request) = self.http_request(reqwest::Method::DELETE) {
                    let _ = tokio::time::timeout(Duration::from_secs(2), request.send()).await;
                }
            }
            Link::Stdio { child, .. } => {
                let child = child.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(mut child) = child {
                    let pid = child.id();
                    if let Some(pid) = pid {
                        // The process group of a server this client started (it leads its own
                        // group), so what it started ends too.
                        crate::platform::end_group(pid, false);
                    }
                    if tokio::time::timeout(Duration::from_millis(500), child.wait())
                        .await
                        .is_err()
                    {
                        let _ = child.kill().await;
                    }
                    if let Some(pid) = pid {
                        // Whatever of the group is left.
                        crate::platform::end_group(pid, true);
                    }
                }
            }
        }
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<u32> {
        match &self.link {
            Link::Stdio { child, .. } => child
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .and_then(|c| c.id()),
            Link::Http { .. } => None,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Link::Stdio { child, .. } = &self.link
            && let Some(mut child) = child.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let _ = child.start_kill();
        }
    }
}

fn open_log(path: &Path) -> Option<std::fs::File> {
    if let Some(dir) = path.parent() {
        let _ = crate::session::error::create_private_dir(dir);
    }
    crate::platform::private_file_options()
        .create(true)
        .append(true)
        .open(path)
        .ok()
}

async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, McpError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| McpError::Transport(crate::llm::describe_reqwest_error(&e)))?
    {
        if bytes.len() + chunk.len() > MAX_MESSAGE {
            return Err(McpError::Transport(format!(
                "the server's answer is over {} MB; refused",
                MAX_MESSAGE >> 20
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// What reads the server's messages: answers go to the waiting calls, notifications become
/// [`Event`]s, requests are answered.
struct Reader {
    pending: Pending,
    events: mpsc::UnboundedSender<Event>,
    log: Arc<Mutex<Option<std::fs::File>>>,
}

impl Reader {
    fn note(&self, text: &str) {
        if let Some(f) = self.log.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let _ = writeln!(f, "[new] {text}");
        }
    }

    /// Lines from a stdio server until it closes its stdout.
    async fn stdio(
        self,
        stdout: tokio::process::ChildStdout,
        replies: mpsc::UnboundedSender<Value>,
    ) {
        let mut lines = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
        let mut line = Vec::new();
        let reason = loop {
            line.clear();
            match read_line_capped(&mut lines, &mut line).await {
                Ok(None) => break "it exited".to_string(),
                Ok(Some(false)) => {
                    self.note(&format!(
                        "a message over {} MB was refused",
                        MAX_MESSAGE >> 20
                    ));
                    // The call it answered (unknown: the id is inside) fails by its timeout;
                    // every call now waiting is told at once instead.
                    self.fail_all(McpError::Transport(format!(
                        "the server sent a message over {} MB; refused",
                        MAX_MESSAGE >> 20
                    )));
                    continue;
                }
                Ok(Some(true)) => {}
                Err(e) => break format!("reading its output failed: {e}"),
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(batch)) => {
                    for m in batch {
                        if let Some(reply) = self.handle(m) {
                            let _ = replies.send(reply);
                        }
                    }
                }
                Ok(m) => {
                    if let Some(reply) = self.handle(m) {
                        let _ = replies.send(reply);
                    }
                }
                Err(_) => {
                    let shown: String = text.chars().take(200).collect();
                    self.note(&format!("not a protocol message on stdout: {shown}"));
                }
            }
        };
        self.fail_all(McpError::Closed(format!(" ({reason})")));
        let _ = self.events.send(Event::Closed(reason));
    }

    fn fail_all(&self, e: McpError) {
        let waiting: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (_, tx) in waiting {
            let _ = tx.send(Err(e.clone()));
        }
    }

    /// An SSE answer to a POST: each event's data is a message.
    async fn sse(&self, mut response: reqwest::Response, client: Option<&Client>) {
        let mut decoder = crate::llm::sse::SseDecoder::new();
        let mut seen = 0usize;
        while let Ok(Some(chunk)) = response.chunk().await {
            seen += chunk.len();
            if seen > MAX_MESSAGE * 4 {
                self.fail_all(McpError::Transport("the server's stream is too big".into()));
                return;
            }
            for event in decoder.feed(&chunk) {
                self.event(&event.data, client).await;
            }
            if decoder.pending_len() > MAX_MESSAGE {
                self.fail_all(McpError::Transport(format!(
                    "an event of the server's stream is over {} MB; refused",
                    MAX_MESSAGE >> 20
                )));
                return;
            }
        }
        if let Some(event) = decoder.finish() {
            self.event(&event.data, client).await;
        }
    }

    /// The GET stream, holding the client only while a message is handled.
    async fn sse_weak(&self, mut response: reqwest::Response, client: std::sync::Weak<Client>) {
        let mut decoder = crate::llm::sse::SseDecoder::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            let Some(client) = client.upgrade() else {
                return;
            };
            for event in decoder.feed(&chunk) {
                self.event(&event.data, Some(&client)).await;
            }
            // The same bound per event as on every stream: one endless `data:` line is not
            // kept growing; the stream is dropped and said.
            if decoder.pending_len() > MAX_MESSAGE {
                self.note(&format!(
                    "an event of the server's GET stream is over {} MB; the stream was closed",
                    MAX_MESSAGE >> 20
                ));
                return;
            }
        }
    }

    async fn event(&self, data: &str, client: Option<&Client>) {
        if data.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(m) => self.dispatch(m, client).await,
            Err(_) => self.note(&format!(
                "not a protocol message in the stream: {}",
                data.chars().take(200).collect::<String>()
            )),
        }
    }

    async fn dispatch(&self, message: Value, client: Option<&Client>) {
        if let Some(reply) = self.handle(message)
            && let Some(client) = client
        {
            // A reply to the server's request is itself a POST, answered with 202.
            let _ = Box::pin(client.send(&reply)).await;
        }
    }

    /// One message; a reply when it was a request.
    fn handle(&self, message: Value) -> Option<Value> {
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").cloned();
        match (method, id) {
            (None, Some(id)) => {
                let id = id.as_u64()?;
                let tx = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                if let Some(tx) = tx {
                    let result = match message.get("error") {
                        Some(e) => Err(McpError::Rpc(
                            e.get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("the server answered with an error")
                                .to_string(),
                        )),
                        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    let _ = tx.send(result);
                }
                None
            }
            (Some("ping"), Some(id)) => Some(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            (Some(method), Some(id)) => Some(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32601, "message": format!("method not found: {method}")}
            })),
            (Some("notifications/tools/list_changed"), None) => {
                let _ = self.events.send(Event::ToolsChanged);
                None
            }
            (Some("notifications/progress"), None) => {
                let p = message.get("params").cloned().unwrap_or(Value::Null);
                let _ = self.events.send(Event::Progress {
                    token: p.get("progressToken").cloned().unwrap_or(Value::Null),
                    progress: p.get("progress").and_then(Value::as_f64).unwrap_or(0.0),
                    total: p.get("total").and_then(Value::as_f64),
                    message: p.get("message").and_then(Value::as_str).map(str::to_string),
                });
                None
            }
            (Some("notifications/message"), None) => {
                let p = message.get("params").cloned().unwrap_or(Value::Null);
                self.note(&format!("log: {p}"));
                None
            }
            _ => None,
        }
    }
}

/// Reads one line into `line` (without its end). Ok(None) at the end of input; Ok(Some(false))
/// for a line over [`MAX_MESSAGE`], whose bytes are passed over, not kept.
async fn read_line_capped<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                None
            } else {
                Some(!too_long)
            });
        }
        let (take, done) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        if !too_long {
            if line.len() + take > MAX_MESSAGE {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(&buffer[..take]);
            }
        }
        reader.consume(take);
        if done {
            return Ok(Some(!too_long));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_passed_over_and_the_next_ones_read() {
        let mut input = vec![b'x'; MAX_MESSAGE + 10];
        input.extend_from_slice(b"\n{\"a\":1}\n");
        let mut reader = tokio::io::BufReader::new(&input[..]);
        let mut line = Vec::new();
        assert_eq!(
            read_line_capped(&mut reader, &mut line).await.unwrap(),
            Some(false)
        );
        line.clear();
        assert_eq!(
            read_line_capped(&mut reader, &mut line).await.unwrap(),
            Some(true)
        );
        assert_eq!(line, b"{\"a\":1}\n");
        line.clear();
        assert_eq!(
            read_line_capped(&mut reader, &mut line).await.unwrap(),
            None
        );
    }

    /// A call that fails while its line is still being written (the server stopped reading, then
    /// sent a message over 16 MB, which fails every waiting call) never leaves half a line: the
    /// next call's line arrives whole and is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_call_never_cuts_its_line_in_half() {
        if std::process::Command::new("python3")
            .arg("-V")
            .output()
            .is_err()
        {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("server.py");
        let log = dir.path().join("lines.log");
        std::fs::write(
            &script,
            r#"import sys, json, time
log = open(sys.argv[1], "w")
def reply(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
first = json.loads(sys.stdin.readline())
reply({"jsonrpc": "2.0", "id": first["id"], "result": {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "slow"}}})
sys.stdin.readline()
time.sleep(1.0)
sys.stdout.write("x" * (17 * 1024 * 1024) + "\n"); sys.stdout.flush()
time.sleep(1.0)
for line in sys.stdin:
    try:
        m = json.loads(line)
        log.write("whole %s\n" % m.get("method")); log.flush()
        if "id" in m: reply({"jsonrpc": "2.0", "id": m["id"], "result": {}})
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
        let (client, _events) = Client::connect(
            &transport,
            dir.path(),
            &dir.path().join("mcp.log"),
            &[],
            Duration::from_secs(10),
            None,
        )
        .await
        .unwrap();
        let big = "y".repeat(300 * 1024);
        let first = client
            .request(
                "tools/call",
                json!({"name": "t", "arguments": {"big": big}}),
                Duration::from_secs(20),
            )
            .await;
        assert!(first.is_err(), "{first:?}");
        let second = client
            .request("tools/list", json!({}), Duration::from_secs(10))
            .await;
        assert!(second.is_ok(), "{second:?}");
        let lines = std::fs::read_to_string(&log).unwrap();
        assert!(!lines.contains("cut"), "{lines}");
        assert!(lines.contains("whole tools/list"), "{lines}");
        client.close().await;
    }
}
