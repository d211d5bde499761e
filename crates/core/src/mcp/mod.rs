//! MCP servers: their tools offered to the model as `mcp__<server>__<tool>`, behind the same
//! permissions as the built-in tools (the execute kind; the read kind for a tool annotated
//! `readOnlyHint`).
//!
//! Servers start in the background when `new` starts; the prompt never waits for them, and a turn
//! waits for a server still starting at most `mcp.handshake_timeout_seconds`. A server that fails,
//! hangs or dies is isolated; a stdio server that dies is started again after 1 s, 3 s and 9 s, then
//! left down. Its stderr goes to `DATADIR/mcp/<name>.log`. A project's servers run only once the
//! user trusts them.

pub mod client;
pub mod config;
pub mod elicit;
pub mod oauth;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use client::{Client, Event, McpError};
pub use config::{McpSettings, ServerConfig, Transport};

use crate::escape;
use crate::fs::hash;
use crate::layers::Origin;
use crate::sync::lock;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, ToolSource};
use crate::utf8;
use new_sys::os_sandbox;
use new_sys::os_sandbox::OsSandbox;
use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::sync::Weak;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time;

/// The delays before a dead stdio server is started again; then it is left down.
const RESTARTS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(3),
    Duration::from_secs(9),
];

/// Where a line for the person watching goes.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// A server's state, as `/mcp` shows it.
#[derive(Debug, Clone)]
pub enum State {
    /// Configured, not started yet (they start once `new` is idle, or when needed).
    Waiting,
    Disabled,
    /// Enabled in its file but held back, with the reason (see `ServerConfig::held`).
    Held(String),
    /// A project's server the user has not trusted.
    Untrusted,
    Starting,
    Ready,
    Failed(String),
}

/// One tool of a server.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    /// The name the model sees.
    pub exposed: String,
    /// The server's own name for it.
    pub remote: String,
    pub description: String,
    pub schema: Value,
    pub read_only: bool,
    /// In the entry's `alwaysAllow`: run without a question.
    pub always_allow: bool,
}

struct Server {
    config: ServerConfig,
    log: PathBuf,
    state: Mutex<State>,
    client: Mutex<Option<Arc<Client>>>,
    tools: Mutex<(Vec<RemoteTool>, Option<Instant>)>,
    /// Those tools as the registry offers them, made once a listing (not once a request).
    offered: Mutex<Vec<Arc<dyn Tool>>>,
    /// Its resources' URIs and its prompts' names, as first listed after it connected.
    offers: Mutex<Offers>,
    /// Bumped on each start, so a stale connection's death does not restart a newer one.
    generation: AtomicU64,
    settled: Notify,
    /// The progress tokens of the calls in flight, each with when its last line was said: a
    /// notification for any other token is dropped, and a call's lines are said at most once per
    /// [`PROGRESS_EVERY`].
    in_flight: Mutex<HashMap<String, Option<Instant>>>,
}

/// The least time between two progress lines of one call.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The least time between two listings a server's `list_changed` notifications ask for: a storm
/// of them becomes one listing per this much time.
const RELIST_EVERY: Duration = Duration::from_millis(500);

/// The most tools taken from one server.
pub const MAX_TOOLS: usize = 500;

/// Every configured server, and what they offer now.
pub struct Manager {
    settings: McpSettings,
    workdir: PathBuf,
    hidden_env: Vec<String>,
    /// The sandbox a project's stdio servers (and the user's that ask) run in.
    os_sandbox: Mutex<Option<Arc<OsSandbox>>>,
    servers: Vec<Arc<Server>>,
    runtime: Handle,
    /// One line a progress notification, for the person watching (and the address of an
    /// authorization to open).
    progress: Mutex<Option<Say>>,
    /// Where HTTP servers' OAuth tokens are kept (the user's config folder); none: no OAuth.
    tokens: Mutex<Option<oauth::TokenStore>>,
    /// Who answers a server's `elicitation/create`; none: declined.
    elicitor: Mutex<Option<elicit::Elicitor>>,
    /// Whether an authorization may ask the user through the browser step.
    browser: AtomicBool,
}

impl Debug for Manager {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("Manager")
            .field("servers", &self.servers.len())
            .finish()
    }
}

/// What a server offers besides tools: its resources' URIs and its prompts' names (each list
/// at most [`MAX_TOOLS`] long).
#[derive(Debug, Clone, Default)]
pub struct Offers {
    pub resources: Vec<String>,
    pub prompts: Vec<Prompt>,
}

/// One prompt of a server: its name and its arguments in the order listed (name, required).
#[derive(Debug, Clone, Default)]
pub struct Prompt {
    pub name: String,
    pub arguments: Vec<(String, bool)>,
}

/// One row of `/mcp`.
#[derive(Debug, Clone)]
pub struct Status {
    pub name: String,
    pub state: State,
    pub tools: usize,
    pub offers: Offers,
    pub log: PathBuf,
    pub origin: Origin,
    pub server: String,
}

impl Manager {
    /// Starts the servers that belong inside it in `sandbox` (set before [`Manager::start`]).
    pub fn set_sandbox(&self, sandbox: Option<Arc<OsSandbox>>) {
        *lock(&self.os_sandbox) = sandbox;
    }

    /// The servers of `settings`; a project's run only when `project_trusted`. Nothing starts
    /// until [`Manager::start`].
    pub fn new(
        settings: McpSettings,
        workdir: &Path,
        datadir: &Path,
        hidden_env: Vec<String>,
        project_trusted: bool,
        runtime: Handle,
    ) -> Arc<Manager> {
        let servers = settings
            .servers
            .iter()
            .map(|c| {
                let state = if let Some(why) = &c.held {
                    State::Held(why.clone())
                } else if c.disabled {
                    State::Disabled
                } else if c.origin == Origin::Project && !project_trusted {
                    State::Untrusted
                } else {
                    State::Waiting
                };
                Arc::new(Server {
                    config: c.clone(),
                    log: datadir.join("mcp").join(format!("{}.log", c.name)),
                    state: Mutex::new(state),
                    client: Mutex::new(None),
                    tools: Mutex::new((Vec::new(), None)),
                    offered: Mutex::new(Vec::new()),
                    offers: Mutex::new(Offers::default()),
                    generation: Default::default(),
                    settled: Notify::new(),
                    in_flight: Mutex::new(Default::default()),
                })
            })
            .collect();
        Arc::new(Manager {
            settings,
            workdir: workdir.to_path_buf(),
            hidden_env,
            os_sandbox: Mutex::new(None),
            servers,
            runtime,
            progress: Mutex::new(None),
            tokens: Mutex::new(None),
            elicitor: Mutex::new(None),
            browser: AtomicBool::new(true),
        })
    }

    /// Keeps HTTP servers' OAuth tokens in `store` (set before [`Manager::start`]).
    pub fn set_token_store(&self, store: Option<oauth::TokenStore>) {
        *lock(&self.tokens) = store;
    }

    /// Answers servers' `elicitation/create` with `elicitor` (set before [`Manager::start`]).
    pub fn set_elicitor(&self, elicitor: Option<elicit::Elicitor>) {
        *lock(&self.elicitor) = elicitor;
    }

    /// Whether an authorization may print its address and wait for the browser (false: only
    /// stored tokens and the client-credentials grant).
    pub fn allow_browser(&self, allowed: bool) {
        self.browser.store(allowed, Ordering::SeqCst);
    }

    /// What an HTTP server's OAuth needs, when there is a token store.
    fn login(&self, server: &Server) -> Option<oauth::Login> {
        let store = lock(&self.tokens).clone()?;
        let progress = lock(&self.progress).clone();
        let name = server.config.name.clone();
        Some(oauth::Login {
            server: name.clone(),
            settings: server.config.oauth.clone(),
            store,
            say: Arc::new(move |line: &str| match &progress {
                Some(say) => say(line),
                None => tracing::info!(server = name.as_str(), "mcp authorization needed"),
            }),
            browser: self.browser.load(Ordering::SeqCst),
        })
    }

    /// Starts, in the background, every server that may run and has not started yet.
    pub fn start(self: &Arc<Self>) {
        // The protected names as they are before any server runs: what a server creates is
        // said after each call and at the end ([`Manager::protected_news`]).
        if let Some(sandbox) = lock(&self.os_sandbox).as_deref() {
            sandbox.protected_news();
        }
        for server in &self.servers {
            let waiting = {
                let mut state = lock(&server.state);
                let waiting = matches!(*state, State::Waiting);
                if waiting {
                    *state = State::Starting;
                }
                waiting
            };
            if waiting {
                self.launch(server.clone(), 0);
            }
        }
    }

    /// Says progress notifications through `say` (one line each).
    pub fn on_progress(&self, say: Say) {
        *lock(&self.progress) = Some(say);
    }

    fn launch(self: &Arc<Self>, server: Arc<Server>, attempt: usize) {
        let manager = self.clone();
        let generation = server.generation.fetch_add(1, Ordering::SeqCst) + 1;
        // A first start is "starting" (a turn waits for it); a retry leaves the failure shown.
        if attempt == 0 {
            *lock(&server.state) = State::Starting;
        } else if let State::Failed(why) = &mut *lock(&server.state) {
            *why = format!("{why}; trying again ({attempt} of {})", RESTARTS.len());
        }
        self.runtime.spawn(async move {
            let sandbox = lock(&manager.os_sandbox).clone();
            let reach = os_sandbox::entry_reach(
                server.config.origin == Origin::Project,
                server.config.sandbox,
                server.config.network,
            );
            let name = server.config.name.as_str();
            let transport = match &server.config.transport {
                Transport::Stdio { .. } => "stdio",
                Transport::Http { .. } => "http",
            };
            tracing::info!(server = name, transport, attempt, "mcp server starting");
            let started = Instant::now();
            let login = match &server.config.transport {
                Transport::Http { .. } => manager.login(&server),
                Transport::Stdio { .. } => None,
            };
            let elicitor = lock(&manager.elicitor).clone();
            let connected = Client::connect(
                &server.config.transport,
                client::Connect {
                    workdir: &manager.workdir,
                    log: &server.log,
                    hidden_env: &manager.hidden_env,
                    handshake: manager.settings.handshake_timeout,
                    sandbox: sandbox.as_deref().zip(reach),
                    elicitor: elicitor.map(|e| named(e, &server.config.name)),
                    oauth: login,
                },
            )
            .await;
            let (client, mut events) = match connected {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(
                        server = name,
                        error = e.kind(),
                        "mcp server failed to start"
                    );
                    *lock(&server.state) = State::Failed(e.to_string());
                    server.settled.notify_waiters();
                    manager.maybe_restart(&server, generation, attempt);
                    return;
                }
            };
            *lock(&server.client) = Some(client.clone());
            let ms = started.elapsed().as_millis() as u64;
            match manager.list(&server, &client).await {
                Ok(()) => {
                    let tools = lock(&server.tools).0.len();
                    tracing::info!(server = name, ms, tools, "mcp server connected");
                    *lock(&server.state) = State::Ready
                }
                Err(e) => {
                    tracing::warn!(server = name, ms, error = e.kind(), "mcp tools/list failed");
                    *lock(&server.state) = State::Failed(format!("listing its tools: {e}"))
                }
            }
            server.settled.notify_waiters();
            // Resources and prompts are listed beside the events (a server slow to list them
            // delays nothing).
            tokio::spawn({
                let (manager, server, client) = (manager.clone(), server.clone(), client.clone());
                async move { manager.list_offers(&server, &client).await }
            });
            let mut listed = Instant::now();
            let mut pending = VecDeque::new();
            loop {
                let event = match pending.pop_front() {
                    Some(e) => e,
                    None => match events.recv().await {
                        Some(e) => e,
                        None => break,
                    },
                };
                match event {
                    Event::ToolsChanged => {
                        // Stale until listed again (a turn starting meanwhile lists first).
                        lock(&server.tools).1 = None;
                        // Coalesced: wait out the least interval, then every notification that
                        // came meanwhile is answered by this one listing.
                        time::sleep_until((listed + RELIST_EVERY).into()).await;
                        while let Ok(e) = events.try_recv() {
                            if !matches!(e, Event::ToolsChanged) {
                                pending.push_back(e);
                            }
                        }
                        let _ = manager.list(&server, &client).await;
                        listed = Instant::now();
                    }
                    Event::Progress {
                        token,
                        progress,
                        total,
                        message,
                    } => {
                        let token = match token {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        let due = match lock(&server.in_flight).get_mut(&token) {
                            Some(last) if last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) => {
                                *last = Some(Instant::now());
                                true
                            }
                            _ => false,
                        };
                        let say = lock(&manager.progress).clone();
                        if let Some(say) = say.filter(|_| due) {
                            let amount = match total {
                                Some(t) => format!("{progress}/{t}"),
                                None => format!("{progress}"),
                            };
                            let text = message.map(|m| format!(" {m}")).unwrap_or_default();
                            say(&escape::escape_controls(&format!(
                                "{}: {amount}{text}",
                                server.config.name
                            )));
                        }
                    }
                    Event::Closed(why) => {
                        if server.generation.load(Ordering::SeqCst) == generation {
                            tracing::warn!(server = name, "mcp server closed the connection");
                            *lock(&server.state) = State::Failed(why);
                            *lock(&server.client) = None;
                            lock(&server.tools).0.clear();
                            lock(&server.offered).clear();
                            *lock(&server.offers) = Offers::default();
                            manager.maybe_restart(&server, generation, attempt);
                        }
                        return;
                    }
                }
            }
        });
    }

    /// A stdio server that failed or died is started again after 1, 3, 9 s, then left down.
    fn maybe_restart(self: &Arc<Self>, server: &Arc<Server>, generation: u64, attempt: usize) {
        if !matches!(server.config.transport, Transport::Stdio { .. }) || attempt >= RESTARTS.len()
        {
            return;
        }
        let manager = self.clone();
        let server = server.clone();
        self.runtime.spawn(async move {
            time::sleep(RESTARTS[attempt]).await;
            if server.generation.load(Ordering::SeqCst) == generation
                && matches!(*lock(&server.state), State::Failed(_))
            {
                manager.launch(server, attempt + 1);
            }
        });
    }

    /// `tools/list`, every page.
    async fn list(self: &Arc<Self>, server: &Arc<Server>, client: &Client) -> Result<(), McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = client
                .request("tools/list", params, self.settings.handshake_timeout)
                .await?;
            for t in page
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(name) = t.get("name").and_then(Value::as_str) else {
                    continue;
                };
                // The entry's `disabledTools` are never offered.
                if server.config.disabled_tools.iter().any(|d| d == name) {
                    continue;
                }
                tools.push(RemoteTool {
                    always_allow: server.config.always_allow.iter().any(|a| a == name),
                    exposed: exposed_name(&server.config.name, name),
                    remote: name.to_string(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    schema: t
                        .get("inputSchema")
                        .cloned()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                    read_only: t
                        .get("annotations")
                        .and_then(|a| a.get("readOnlyHint"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                });
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            // A cursor seen before would page for ever; a server may offer so many tools.
            if cursor
                .as_ref()
                .is_none_or(|c| !seen_cursors.insert(c.clone()))
                || tools.len() >= MAX_TOOLS
            {
                break;
            }
        }
        if tools.len() > MAX_TOOLS {
            tools.truncate(MAX_TOOLS);
        }
        // Names that came out alike (`dup` twice, `a.b` and `a_b`): a suffix tells them apart.
        let mut taken: HashSet<String> = HashSet::new();
        for t in &mut tools {
            if !taken.insert(t.exposed.clone()) {
                let base: String = t.exposed.chars().take(60).collect();
                let mut n = 2;
                while !taken.insert(format!("{base}_{n}")) {
                    n += 1;
                }
                t.exposed = format!("{base}_{n}");
            }
        }
        *lock(&server.offered) = tools
            .iter()
            .map(|t| {
                Arc::new(McpTool {
                    manager: Arc::downgrade(self),
                    server: Arc::downgrade(server),
                    tool: t.clone(),
                }) as Arc<dyn Tool>
            })
            .collect();
        *lock(&server.tools) = (tools, Some(Instant::now()));
        Ok(())
    }

    /// The first pages of a server's `resources/list` and `prompts/list`, where its capabilities
    /// offer them (for `/mcp`; a failure leaves the list empty and is noted in the log).
    async fn list_offers(&self, server: &Server, client: &Client) {
        let info = client.info();
        let mut offers = Offers::default();
        for (offered, method, key, field) in [
            (info.resources, "resources/list", "resources", "uri"),
            (info.prompts, "prompts/list", "prompts", "name"),
        ] {
            if !offered {
                continue;
            }
            let page = match client
                .request(method, json!({}), self.settings.handshake_timeout)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(
                        server = server.config.name.as_str(),
                        error = e.kind(),
                        "mcp {method} failed"
                    );
                    continue;
                }
            };
            let listed = page
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|r| r.get(field).and_then(Value::as_str).is_some())
                .take(MAX_TOOLS);
            if key == "resources" {
                offers.resources = listed
                    .filter_map(|r| r[field].as_str().map(str::to_string))
                    .collect();
            } else {
                offers.prompts = listed
                    .map(|p| Prompt {
                        name: p[field].as_str().unwrap_or_default().to_string(),
                        arguments: p
                            .get("arguments")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|a| {
                                let name = a.get("name").and_then(Value::as_str)?;
                                let required = a.get("required").and_then(Value::as_bool);
                                Some((name.to_string(), required.unwrap_or(false)))
                            })
                            .collect(),
                    })
                    .collect();
            }
        }
        *lock(&server.offers) = offers;
    }

    /// Waits for servers still starting, each at most the handshake timeout; lists again the
    /// tools of servers whose list is older than `mcp.list_tools_cache_ttl_seconds`.
    pub async fn settle(self: &Arc<Self>) {
        self.start();
        let deadline = time::Instant::now() + self.settings.handshake_timeout;
        for server in &self.servers {
            loop {
                let notified = server.settled.notified();
                if !matches!(*lock(&server.state), State::Starting) {
                    break;
                }
                if time::timeout_at(deadline, notified).await.is_err() {
                    break;
                }
            }
            let ready = matches!(*lock(&server.state), State::Ready);
            let stale = lock(&server.tools)
                .1
                .is_none_or(|t| t.elapsed() > self.settings.list_tools_ttl);
            let client = lock(&server.client).clone();
            if ready
                && stale
                && let Some(client) = client
            {
                let _ = self.list(server, &client).await;
            }
        }
    }

    /// The ready servers' instructions, under their names, for the system prompt.
    pub fn instructions(&self) -> Option<String> {
        let mut parts = Vec::new();
        for server in &self.servers {
            let client = lock(&server.client).clone();
            if let Some(text) = client.and_then(|c| c.info().instructions)
                && !text.trim().is_empty()
            {
                parts.push(format!(
                    "## MCP server `{}`\n\n{}",
                    server.config.name,
                    text.trim()
                ));
            }
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    pub fn statuses(&self) -> Vec<Status> {
        self.servers
            .iter()
            .map(|s| Status {
                name: s.config.name.clone(),
                state: lock(&s.state).clone(),
                tools: lock(&s.tools).0.len(),
                offers: lock(&s.offers).clone(),
                log: s.log.clone(),
                origin: s.config.origin,
                server: lock(&s.client)
                    .as_ref()
                    .map(|c| c.info().name)
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// A server's client once it is ready (waiting for one still starting), or why there is none.
    async fn ready_client(self: &Arc<Self>, name: &str) -> Result<Arc<Client>, String> {
        let Some(server) = self.servers.iter().find(|s| s.config.name == name) else {
            return Err(format!("there is no MCP server `{name}`"));
        };
        self.settle().await;
        let state = lock(&server.state).clone();
        match (state, lock(&server.client).clone()) {
            (State::Ready, Some(client)) => Ok(client),
            (state, _) => Err(format!("the MCP server `{name}` is {}", describe(&state))),
        }
    }

    /// `resources/read` of one resource: its contents as text for a message (binary contents
    /// named with their size), at most `cap` bytes of it.
    pub async fn read_resource(
        self: &Arc<Self>,
        name: &str,
        uri: &str,
        cap: usize,
    ) -> Result<String, String> {
        let client = self.ready_client(name).await?;
        let timeout = self.timeout_of(name);
        let answer = client
            .request("resources/read", json!({"uri": uri}), timeout)
            .await
            .map_err(|e| format!("reading `{uri}` from `{name}`: {e}"))?;
        let mut parts = Vec::new();
        for item in answer
            .get("contents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let field = |k: &str| item.get(k).and_then(Value::as_str);
            match (field("text"), field("blob")) {
                (Some(text), _) => parts.push(text.to_string()),
                (None, Some(blob)) => parts.push(format!(
                    "[{} {}, {} bytes]",
                    field("uri").unwrap_or(uri),
                    field("mimeType").unwrap_or("binary"),
                    blob.len() / 4 * 3
                )),
                _ => {}
            }
        }
        let mut text = parts.join("\n");
        if text.len() > cap {
            let kept = utf8::floor_char_boundary(&text, cap);
            let dropped = text.len() - kept;
            text.truncate(kept);
            text.push_str(&format!("\n[… {dropped} more bytes not included]"));
        }
        Ok(text)
    }

    /// The server and prompt a command (`mcp__server__prompt`) runs: from the listing, or, when
    /// it is not there, from the servers listed again (the first listing may not have been
    /// answered yet, or the server's prompts changed).
    pub async fn prompt_for(self: &Arc<Self>, command: &str) -> Option<(String, Prompt)> {
        self.settle().await;
        let find = |s: &Server| {
            lock(&s.offers)
                .prompts
                .iter()
                .find(|p| exposed_name(&s.config.name, &p.name) == command)
                .cloned()
        };
        for server in &self.servers {
            if let Some(p) = find(server) {
                return Some((server.config.name.clone(), p));
            }
            let client = lock(&server.client).clone();
            if let Some(client) = client {
                self.list_offers(server, &client).await;
                if let Some(p) = find(server) {
                    return Some((server.config.name.clone(), p));
                }
            }
        }
        None
    }

    /// `prompts/get`: the prompt's messages as one text for a user message (each message's text;
    /// one of the assistant's marked as such).
    pub async fn get_prompt(
        self: &Arc<Self>,
        name: &str,
        prompt: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<String, String> {
        let client = self.ready_client(name).await?;
        let timeout = self.timeout_of(name);
        let answer = client
            .request(
                "prompts/get",
                json!({"name": prompt, "arguments": arguments}),
                timeout,
            )
            .await
            .map_err(|e| format!("getting the prompt `{prompt}` of `{name}`: {e}"))?;
        let mut parts = Vec::new();
        for message in answer
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let content = message.get("content").cloned().unwrap_or(Value::Null);
            let (text, _) = render_result(&json!({"content": [content]}));
            if text.trim().is_empty() {
                continue;
            }
            match message.get("role").and_then(Value::as_str) {
                Some("assistant") => parts.push(format!("[assistant]\n{text}")),
                _ => parts.push(text),
            }
        }
        if parts.is_empty() {
            return Err(format!("the prompt `{prompt}` of `{name}` has no text"));
        }
        Ok(parts.join("\n\n"))
    }

    fn timeout_of(&self, name: &str) -> Duration {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .map(|s| s.config.timeout)
            .unwrap_or(Duration::from_secs(60))
    }

    /// Pings a ready server (`ping`, at most 2 s): how long it took to answer, or why not.
    pub async fn ping(&self, name: &str) -> Option<Result<Duration, String>> {
        let server = self.servers.iter().find(|s| s.config.name == name)?;
        if !matches!(*lock(&server.state), State::Ready) {
            return None;
        }
        let client = lock(&server.client).clone()?;
        let started = Instant::now();
        Some(
            client
                .request("ping", json!({}), Duration::from_secs(2))
                .await
                .map(|_| started.elapsed())
                .map_err(|e| e.to_string()),
        )
    }

    /// `/mcp restart NAME`: ends the server's connection and starts it again (restarts
    /// counted afresh). False when there is no such server or it may not run.
    pub async fn restart(self: &Arc<Self>, name: &str) -> bool {
        let Some(server) = self.servers.iter().find(|s| s.config.name == name) else {
            return false;
        };
        if matches!(
            *lock(&server.state),
            State::Disabled | State::Untrusted | State::Held(_)
        ) {
            return false;
        }
        // A newer generation first: the old connection's end is not taken for a death.
        server.generation.fetch_add(1, Ordering::SeqCst);
        let old = lock(&server.client).take();
        if let Some(old) = old {
            old.close().await;
        }
        tracing::info!(server = name, "mcp server restarted by the user");
        self.launch(server.clone(), 0);
        true
    }

    /// Ends every server (on exit).
    pub async fn shutdown(&self) {
        for server in &self.servers {
            server.generation.fetch_add(1, Ordering::SeqCst);
            let client = lock(&server.client).take();
            if let Some(client) = client {
                client.close().await;
                tracing::info!(server = server.config.name.as_str(), "mcp server stopped");
            }
        }
    }

    /// The protected names (instructions, `.git`, `.new`, `.claude`, …) created or replaced since
    /// the servers started or this was last asked, not by a command (whose own report says
    /// it): a server runs beside the session and a name missing at its start is no read-only
    /// mount, so it could plant one. Asked after each call and when the session ends.
    pub fn protected_news(&self) -> Vec<PathBuf> {
        lock(&self.os_sandbox)
            .as_deref()
            .map(OsSandbox::protected_news)
            .unwrap_or_default()
    }

    /// [`Manager::protected_news`] as the user reads them: relative to WORKDIR, escaped.
    pub fn protected_news_shown(&self) -> Vec<String> {
        self.shown(&self.protected_news())
    }

    fn shown(&self, paths: &[PathBuf]) -> Vec<String> {
        let real = self
            .workdir
            .canonicalize()
            .unwrap_or_else(|_| self.workdir.clone());
        paths
            .iter()
            .map(|p| {
                let relative = p
                    .strip_prefix(&real)
                    .or_else(|_| p.strip_prefix(&self.workdir))
                    .unwrap_or(p);
                escape::escape_controls(&relative.display().to_string())
            })
            .collect()
    }

    /// What to add to a call's result when protected names changed while it ran: a clause for
    /// the summary the user sees, a line for the model.
    fn protected_note(&self, server: &Server) -> Option<(String, String)> {
        let changed = self.protected_news();
        if changed.is_empty() {
            return None;
        }
        let names = self.shown(&changed).join(", ");
        Some((
            format!(
                "; meanwhile {names} was created or replaced while the MCP server `{}` ran \
                 (protected: check it before the next session)",
                server.config.name
            ),
            format!(
                "\n[protected] While the MCP server `{}` ran, {names} was created or replaced; \
                 new protects these names (they shape later sessions), and the user is told.",
                server.config.name
            ),
        ))
    }

    /// Calls a tool; the result as text for the model.
    async fn call(
        &self,
        server: &Server,
        tool: &RemoteTool,
        args: &Value,
    ) -> Result<ToolOutput, ToolError> {
        let client = lock(&server.client).clone().ok_or_else(|| {
            ToolError::Failed(format!(
                "the MCP server `{}` is not running ({})",
                server.config.name,
                describe(&lock(&server.state))
            ))
        })?;
        // In flight while this future lives: its progress notifications are said.
        struct InFlight<'a>(&'a Server, String);
        impl Drop for InFlight<'_> {
            fn drop(&mut self) {
                lock(&self.0.in_flight).remove(&self.1);
            }
        }
        let mut result;
        let mut step_ups = 0;
        loop {
            // Interrupted (this future dropped while waiting): the call says so to the server.
            let sent = match client::tool_call_request(&tool.remote, args) {
                Ok(request) => client.send(request, server.config.timeout).await,
                Err(e) => Err(e),
            };
            let call = match sent {
                Ok(call) => call,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            lock(&server.in_flight).insert(call.token.clone(), None);
            let _in_flight = InFlight(server, call.token.clone());
            result = call.answer().await;
            // A 401 or a 403 for want of a scope: authorized again, and asked again.
            if let Err(McpError::Unauthorized { challenge, .. }) = &result
                && step_ups < oauth::MAX_STEP_UPS
            {
                step_ups += 1;
                match client.authorize_again(challenge).await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => result = Err(e),
                }
            }
            break;
        }
        // Whatever the answer, what changed meanwhile is said.
        let note = self.protected_note(server);
        let result = result.map_err(|e| {
            let mut text = format!("the MCP server `{}`: {e}", server.config.name);
            if let Some((clause, _)) = &note {
                text.push_str(clause);
            }
            ToolError::Failed(text)
        })?;
        let (mut text, is_error) = render_result(&result);
        let mut summary = format!(
            "{} → {}",
            tool.exposed,
            first_line(&text).chars().take(80).collect::<String>()
        );
        if let Some((clause, line)) = note {
            summary.push_str(&clause);
            text.push_str(&line);
        }
        if is_error {
            return Err(ToolError::Failed(text));
        }
        Ok(ToolOutput {
            content: text,
            summary,
            diff: None,
        })
    }
}

/// The ready servers' tools, offered beside the built-in ones (named `mcp__<server>__<tool>`).
impl ToolSource for Manager {
    /// The tools offered now, as tools of the registry.
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers {
            if matches!(*lock(&server.state), State::Ready) {
                out.extend(lock(&server.offered).iter().cloned());
            }
        }
        out
    }
}

/// An elicitor that tells the form which server asks.
fn named(elicitor: elicit::Elicitor, server: &str) -> elicit::Elicitor {
    let server = server.to_string();
    Arc::new(move |mut form: elicit::Form| {
        form.server = server.clone();
        elicitor(form)
    })
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A state in words (`/mcp`, errors).
pub fn describe(state: &State) -> String {
    match state {
        State::Waiting => "not started yet".into(),
        State::Disabled => "disabled".into(),
        State::Held(why) => format!("not run: {why}"),
        State::Untrusted => "not trusted: a project's server runs once you trust it".into(),
        State::Starting => "starting".into(),
        State::Ready => "ready".into(),
        State::Failed(why) => format!("failed: {why}"),
    }
}

/// `mcp__<server>__<tool>`, with what providers refuse in a name made `_`, and 64 characters at
/// most (a long name keeps its start and a short hash of the whole, so two stay distinct).
pub fn exposed_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let name = format!("mcp__{}__{}", clean(server), clean(tool));
    if name.len() <= 64 {
        return name;
    }
    let hash = &hash::digest(name.as_bytes())[..8];
    format!("{}_{hash}", &name[..55])
}

/// A `tools/call` result as text: text content as text, images and audio by type and size,
/// resource links and embedded resources by URI (and text), `structuredContent` as JSON when
/// there is no text. Returns the text and whether the server marked it an error.
pub fn render_result(result: &Value) -> (String, bool) {
    let mut parts = Vec::new();
    for item in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
        let size = |k: &str| field(k).len() / 4 * 3;
        match field("type") {
            "text" => parts.push(field("text").to_string()),
            "image" | "audio" => parts.push(format!(
                "[{} {}, {} bytes]",
                field("type"),
                field("mimeType"),
                size("data")
            )),
            "resource_link" => parts.push(format!(
                "[resource link {}{}]",
                field("uri"),
                match field("name") {
                    "" => String::new(),
                    n => format!(" ({n})"),
                }
            )),
            "resource" => {
                let r = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                match (
                    r.get("text").and_then(Value::as_str),
                    r.get("blob").and_then(Value::as_str),
                ) {
                    (Some(text), _) => parts.push(format!("[resource {uri}]\n{text}")),
                    (None, Some(blob)) => {
                        parts.push(format!("[resource {uri}, {} bytes]", blob.len() / 4 * 3))
                    }
                    _ => parts.push(format!("[resource {uri}]")),
                }
            }
            other => parts.push(format!("[{other} content]")),
        }
    }
    let has_text = parts.iter().any(|p| !p.trim().is_empty());
    if !has_text && let Some(structured) = result.get("structuredContent") {
        parts = vec![serde_json::to_string_pretty(structured).unwrap_or_default()];
    }
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (parts.join("\n"), is_error)
}

/// A server's tool as a tool of the registry (weak links: the server holds its tools).
struct McpTool {
    manager: Weak<Manager>,
    server: Weak<Server>,
    tool: RemoteTool,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.tool.exposed
    }

    fn description(&self) -> &str {
        &self.tool.description
    }

    fn parameters(&self) -> Value {
        self.tool.schema.clone()
    }

    fn kind(&self) -> ToolKind {
        if self.tool.read_only {
            ToolKind::Read
        } else {
            ToolKind::Execute
        }
    }

    fn subject(&self, args: &Value) -> Option<String> {
        Some(args.to_string())
    }

    fn preapproved(&self) -> bool {
        self.tool.always_allow
    }

    fn run<'a>(&'a self, args: &'a Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let (Some(manager), Some(server)) = (self.manager.upgrade(), self.server.upgrade())
            else {
                return Err(ToolError::Failed(
                    "the MCP servers have been shut down".into(),
                ));
            };
            manager.call(&server, &self.tool, args).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_providers_accept() {
        assert_eq!(
            exposed_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(
            exposed_name("my.server", "do it!"),
            "mcp__my_server__do_it_"
        );
        let long = exposed_name("server", &"x".repeat(100));
        let other = exposed_name("server", &format!("{}y", "x".repeat(99)));
        assert_eq!(long.len(), 64);
        assert_ne!(long, other);
    }

    #[test]
    fn results_become_text_without_dumping_binary_data() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA".repeat(100)},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}},
        ]});
        let (text, err) = render_result(&result);
        assert!(!err);
        assert_eq!(
            text,
            "hello\n[image image/png, 300 bytes]\n[resource link file:///a.txt (a)]\n[resource mem://x]\ninside"
        );
        let (text, _) = render_result(&json!({"content": [], "structuredContent": {"t": 1}}));
        assert_eq!(text, "{\n  \"t\": 1\n}");
        let (text, err) =
            render_result(&json!({"content": [{"type": "text", "text": "bad"}], "isError": true}));
        assert!(err && text == "bad");
    }
}
