//! `new acp`: the Agent Client Protocol (version 1) over stdin and stdout, for editors (Zed,
//! JetBrains IDEs, Neovim, acpx). One more front end of the same [`Session`]: a session id is a
//! conversation id (`<id>@<branch>` for a fork, a named branch of the same tree), prompts run the
//! same turn as the REPL, approvals are the editor's permission requests, and `/NAME` in a prompt
//! runs a command. The protocol's types are the official crate's (`agent-client-protocol`); the
//! framing is [`wire`]. stdout carries only protocol messages; logs go to the log file.

mod front;
mod open;
mod slash;
mod wire;

use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::thread::JoinHandle;

use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate,
    ConfigOptionUpdate, ContentBlock, ContentChunk, CurrentModeUpdate, EmbeddedResourceResource,
    ForkSessionResponse, Implementation, InitializeResponse, ListSessionsResponse,
    LoadSessionResponse, McpCapabilities, NewSessionResponse, PromptCapabilities, PromptResponse,
    SessionCapabilities, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigSelectOption, SessionForkCapabilities, SessionInfo, SessionListCapabilities,
    SessionMode, SessionModeState, SessionUpdate, SetSessionConfigOptionResponse,
    SetSessionModeResponse, StopReason, ToolCallStatus, UnstructuredCommandInput,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::env;
use std::io;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::{oneshot, watch};
use tokio::time;

use agent_client_protocol::schema::ProtocolVersion;
use front::{EditorFiles, Running, Turn, call_started, result_update, update};
use new_core::conversation::Store;
use new_core::llm::Provider;
use new_core::session::{Ended, Recorder, Resume, Session};
use new_core::sync::lock;
use new_core::tools::{Mode, ToolOutcome};
use new_core::vocab::Role;
pub use open::AcpLaunch;
use wire::{Incoming, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, RpcError, Urgent, Wire};

/// The permission modes, as the `mode` option offers them.
const MODES: &[(&str, &str, &str)] = &[
    (
        "strict",
        "Strict",
        "Asks before anything that writes or runs",
    ),
    (
        "default",
        "Default",
        "Reads freely; asks before writes and commands outside the sandbox",
    ),
    (
        "permissive",
        "Permissive",
        "Runs everything but what rules and hard limits refuse",
    ),
];

/// The reasoning levels, as the `reasoning` option offers them: Anthropic's extended thinking
/// budget in tokens (None: off).
const THINKING: &[(&str, &str, Option<u32>)] = &[
    ("off", "Off", None),
    ("low", "Low (1,024 tokens)", Some(1024)),
    ("medium", "Medium (4,096 tokens)", Some(4096)),
    ("high", "High (16,384 tokens)", Some(16384)),
];

/// What the reading thread shares with the main loop: the turns that run now, one per session
/// at most.
#[derive(Default)]
struct Control {
    running: Mutex<Vec<Arc<Running>>>,
}

impl Control {
    fn list(&self) -> MutexGuard<'_, Vec<Arc<Running>>> {
        lock(&self.running)
    }

    fn running(&self, session: &str) -> Option<Arc<Running>> {
        self.list().iter().find(|r| r.session == session).cloned()
    }

    /// A turn starts, unless one runs in its session already.
    fn start(&self, running: Arc<Running>) -> Result<(), RpcError> {
        let mut list = self.list();
        if list.iter().any(|r| r.session == running.session) {
            return Err(already_running(&running.session));
        }
        list.push(running);
        Ok(())
    }

    fn end(&self, running: &Arc<Running>) {
        self.list().retain(|r| !Arc::ptr_eq(r, running));
    }
}

fn already_running(session: &str) -> RpcError {
    RpcError::new(
        wire::INVALID_REQUEST,
        format!(
            "a prompt is already running in session {session}: cancel it or wait for its answer"
        ),
    )
}

impl Urgent for Control {
    fn cancel(&self, session: &str) {
        if let Some(running) = self.running(session) {
            running.cancel();
        }
    }

    fn refuse(&self, method: &str, params: &Value) -> Option<RpcError> {
        let session = params.get("sessionId").and_then(Value::as_str)?;
        (method == "session/prompt" && self.running(session).is_some())
            .then(|| already_running(session))
    }

    fn closed(&self) {
        for running in self.list().iter() {
            running.cancel();
        }
    }
}

/// One conversation open here, and the editor sessions on it (the conversation's own, and its
/// forks). A turn holds its engine while it runs: turns of different conversations run at once,
/// those of one conversation (a fork and its original) one after another.
struct Open {
    engine: Mutex<Session>,
    interrupts: Arc<watch::Sender<u64>>,
    /// The editor session whose turn runs now (the editor's file reads name it).
    current: Arc<Mutex<String>>,
    /// A prompt came (the model list then waits for the end of its turn: the first request
    /// does not need it).
    prompted: AtomicBool,
    /// The context window asked when the session opened, for its first turn to take.
    window: Mutex<Option<oneshot::Receiver<Option<u64>>>>,
    /// The editor session owed the model list, asked when the turn running now ends.
    models_due: Mutex<Option<String>>,
}

impl Open {
    fn engine(&self) -> MutexGuard<'_, Session> {
        lock(&self.engine)
    }
}

type Views = Arc<Mutex<HashMap<String, View>>>;

/// The models each provider (by base URL) said it offers.
type ModelCache = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// An editor session: a conversation, where its cursor is, and for a fork the branch it names.
#[derive(Debug, Clone)]
struct View {
    conversation: String,
    cursor: String,
    branch: Option<String>,
}

struct Agent {
    wire: Arc<Wire>,
    control: Arc<Control>,
    runtime: Arc<Runtime>,
    launch: AcpLaunch,
    open: HashMap<String, Arc<Open>>,
    views: Views,
    /// The models each provider (by base URL) said it offers.
    models: ModelCache,
    /// The editor reads files for us (`fs.readTextFile`): its buffers, unsaved changes included.
    editor_reads: bool,
    /// The threads of the turns started (each answers its prompt itself).
    turns: Vec<JoinHandle<()>>,
}

/// Runs `new acp` until stdin closes.
pub fn run(launch: AcpLaunch) -> ExitCode {
    let wire = Wire::stdout();
    let control = Arc::new(Control::default());
    let (tx, rx) = channel();
    // Reading starts first: the editor's `initialize` is read while the runtime starts.
    {
        let (wire, control) = (wire.clone(), control.clone());
        thread::spawn(move || {
            let stdin = io::stdin();
            wire::read_loop(BufReader::new(stdin.lock()), &wire, &*control, &tx);
        });
    }
    let runtime = match Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("new acp: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    tracing::info!("acp started");
    let mut agent = Agent {
        wire,
        control,
        runtime: Arc::new(runtime),
        launch,
        open: HashMap::new(),
        views: Default::default(),
        models: Default::default(),
        editor_reads: false,
        turns: Vec::new(),
    };
    while let Ok(incoming) = rx.recv() {
        match incoming {
            // A prompt runs on a thread of its own, which answers it.
            Incoming::Request { id, method, params } if method == "session/prompt" => {
                if let Err(e) = agent.prompt(id.clone(), &params) {
                    agent.wire.error(&id, &e);
                }
            }
            Incoming::Request { id, method, params } => match agent.request(&method, params) {
                Ok(Done { result, after }) => {
                    agent.wire.respond(&id, result);
                    for (session, commands) in after {
                        agent.offer_commands(&session, commands);
                        agent.warm_up(&session);
                    }
                }
                Err(e) => agent.wire.error(&id, &e),
            },
            Incoming::Notification { method, .. } => {
                tracing::debug!(method, "acp notification ignored");
            }
            Incoming::Closed => break,
        }
    }
    agent.close();
    tracing::info!("acp ended: stdin closed");
    ExitCode::SUCCESS
}

/// A request's answer, and the sessions whose commands are offered after it.
struct Done {
    result: Value,
    after: Vec<(String, bool)>,
}

impl Done {
    fn of(result: impl Serialize) -> Self {
        Done {
            result: serde_json::to_value(result).unwrap_or(Value::Null),
            after: Vec::new(),
        }
    }

    fn then_offer(mut self, session: &str) -> Self {
        self.after.push((session.to_string(), true));
        self
    }
}

fn param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params(format!("`{key}` is missing or not a string")))
}

/// `cwd`: an absolute path of a folder, or a clear error.
fn workdir_param(params: &Value) -> Result<PathBuf, RpcError> {
    let cwd = PathBuf::from(param(params, "cwd")?);
    if !cwd.is_absolute() {
        return Err(RpcError::params(format!(
            "cwd {} is not an absolute path",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(RpcError::params(format!(
            "cwd {} is not a folder",
            cwd.display()
        )));
    }
    Ok(cwd)
}

fn error_chain(e: &anyhow::Error) -> RpcError {
    RpcError::internal(format!("{e:#}"))
}

impl Agent {
    fn request(&mut self, method: &str, params: Value) -> Result<Done, RpcError> {
        match method {
            "initialize" => {
                self.editor_reads = params["clientCapabilities"]["fs"]["readTextFile"] == true;
                Ok(Done::of(self.initialize(&params)))
            }
            "authenticate" => Ok(Done::of(json!({}))),
            "session/new" => self.new_session(&params),
            "session/load" => self.load_session(&params),
            "session/list" => self.list_sessions(&params),
            "session/set_mode" => {
                let session = param(&params, "sessionId")?.to_string();
                let mode = param(&params, "modeId")?.to_string();
                self.set_option(&session, "mode", &mode)?;
                Ok(Done::of(SetSessionModeResponse::new()))
            }
            "session/set_config_option" => {
                let session = param(&params, "sessionId")?.to_string();
                let option = param(&params, "configId")?.to_string();
                let value = param(&params, "value")?.to_string();
                self.set_option(&session, &option, &value)?;
                let options = self.config_options(&session)?;
                Ok(Done::of(SetSessionConfigOptionResponse::new(options)))
            }
            "session/fork" => self.fork(&params),
            _ => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("no method {method} here"),
            )),
        }
    }

    fn initialize(&self, _params: &Value) -> InitializeResponse {
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .fork(SessionForkCapabilities::new()),
            );
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("new", env!("CARGO_PKG_VERSION")))
    }

    /// Opens (or finds open) the conversation `resume` names, in `cwd`.
    fn open_conversation(
        &mut self,
        cwd: &Path,
        resume: Resume,
        params: &Value,
    ) -> Result<String, RpcError> {
        if let Resume::Id(id) = &resume
            && self.open.contains_key(id)
        {
            return Ok(id.clone());
        }
        let (servers, problems) = open::client_servers(&params["mcpServers"]);
        for problem in problems {
            tracing::warn!(problem, "acp");
        }
        let opened = open::open(&self.launch, cwd, resume, servers, &self.runtime)
            .map_err(|e| error_chain(&e))?;
        for warning in &opened.warnings {
            tracing::warn!(warning, "acp session");
        }
        let id = opened.engine.chat.id().to_string();
        let current = Arc::new(Mutex::new(id.clone()));
        if self.editor_reads {
            opened
                .engine
                .tools
                .workdir()
                .set_buffers(Arc::new(EditorFiles {
                    wire: self.wire.clone(),
                    session: current.clone(),
                }));
        }
        self.open.insert(
            id.clone(),
            Arc::new(Open {
                engine: Mutex::new(opened.engine),
                interrupts: opened.interrupts,
                current,
                prompted: AtomicBool::new(false),
                window: Mutex::new(None),
                models_due: Mutex::new(None),
            }),
        );
        Ok(id)
    }

    /// The engine of an open conversation (waited for while a turn of it runs).
    fn engine(&self, conversation: &str) -> MutexGuard<'_, Session> {
        self.open[conversation].engine()
    }

    fn views(&self) -> MutexGuard<'_, HashMap<String, View>> {
        lock(&self.views)
    }

    fn new_session(&mut self, params: &Value) -> Result<Done, RpcError> {
        let cwd = workdir_param(params)?;
        let id = self.open_conversation(&cwd, Resume::Fresh, params)?;
        let cursor = self.engine(&id).chat.conversation().cursor().to_string();
        self.views().insert(
            id.clone(),
            View {
                conversation: id.clone(),
                cursor,
                branch: None,
            },
        );
        let response = NewSessionResponse::new(id.clone())
            .modes(self.modes(&id)?)
            .config_options(self.config_options(&id)?);
        Ok(Done::of(response).then_offer(&id))
    }

    /// `session/load`: the conversation (a fork: its branch's tip), its branch replayed as
    /// updates before the answer.
    fn load_session(&mut self, params: &Value) -> Result<Done, RpcError> {
        let session = param(params, "sessionId")?.to_string();
        let cwd = workdir_param(params)?;
        let (conversation, branch) = match session.split_once('@') {
            Some((c, b)) => (c.to_string(), Some(b.to_string())),
            None => (session.clone(), None),
        };
        let id = self
            .open_conversation(&cwd, Resume::Id(conversation.clone()), params)
            .map_err(|e| RpcError::new(RESOURCE_NOT_FOUND, e.message))?;
        let engine = self.engine(&id);
        let c = engine.chat.conversation();
        let cursor = match &branch {
            Some(name) => c
                .branch_tip(name)
                .map(|m| m.id.to_string())
                .ok_or_else(|| {
                    RpcError::new(RESOURCE_NOT_FOUND, format!("no branch {name} in {id}"))
                })?,
            // An editor session already open here keeps its place (a fork may have moved the
            // conversation's cursor since).
            None => self
                .views()
                .get(&id)
                .map_or_else(|| c.cursor().to_string(), |v| v.cursor.clone()),
        };
        drop(engine);
        let session = match &branch {
            Some(name) => format!("{id}@{name}"),
            None => id.clone(),
        };
        self.views().insert(
            session.clone(),
            View {
                conversation: id.clone(),
                cursor: cursor.clone(),
                branch,
            },
        );
        self.replay(&session, &id, &cursor);
        let response = LoadSessionResponse::new()
            .modes(self.modes(&session)?)
            .config_options(self.config_options(&session)?);
        Ok(Done::of(response).then_offer(&session))
    }

    /// The branch ending at `cursor`, as the updates that told it: the user's messages, the
    /// answers (and their reasoning), the tool calls with their results.
    fn replay(&self, session: &str, conversation: &str, cursor: &str) {
        let engine = self.engine(conversation);
        let c = engine.chat.conversation();
        let workdir = &engine.workdir;
        let mut calls = HashMap::new();
        for m in c.chain(cursor) {
            let chunk = |text: &str| ContentChunk::new(ContentBlock::from(text.to_string()));
            match m.role {
                Role::System => {}
                Role::User => update(
                    &self.wire,
                    session,
                    SessionUpdate::UserMessageChunk(chunk(&m.content)),
                ),
                Role::Assistant => {
                    if let Some(reasoning) = m.extra.rare.reasoning.as_deref() {
                        update(
                            &self.wire,
                            session,
                            SessionUpdate::AgentThoughtChunk(chunk(reasoning)),
                        );
                    }
                    if !m.content.is_empty() {
                        update(
                            &self.wire,
                            session,
                            SessionUpdate::AgentMessageChunk(chunk(&m.content)),
                        );
                    }
                    for call in m.extra.tool_calls.iter().flatten() {
                        calls.insert(call.id.clone(), call.clone());
                        update(
                            &self.wire,
                            session,
                            SessionUpdate::ToolCall(call_started(
                                call,
                                workdir,
                                ToolCallStatus::Pending,
                            )),
                        );
                    }
                }
                Role::Tool => {
                    let Some(call) = m.extra.tool_call_id.as_deref().and_then(|id| calls.get(id))
                    else {
                        continue;
                    };
                    let outcome = ToolOutcome {
                        content: m.content.clone(),
                        summary: String::new(),
                        diff: None,
                        is_error: m.content.starts_with("Error"),
                    };
                    update(
                        &self.wire,
                        session,
                        SessionUpdate::ToolCallUpdate(result_update(call, &outcome, None)),
                    );
                }
            }
        }
    }

    fn list_sessions(&mut self, params: &Value) -> Result<Done, RpcError> {
        let cwd = match params.get("cwd").and_then(Value::as_str) {
            Some(_) => workdir_param(params)?,
            None => env::current_dir()
                .map_err(|e| RpcError::internal(format!("the current folder: {e}")))?,
        };
        let workdir = cwd.canonicalize().unwrap_or(cwd);
        let datadir = open::datadir_for(&self.launch, &workdir);
        if !datadir.is_dir() {
            return Ok(Done::of(ListSessionsResponse::new(Vec::new())));
        }
        let store = Store::open(&datadir).map_err(|e| RpcError::internal(e.to_string()))?;
        let (summaries, _) = store
            .list_recent(100)
            .map_err(|e| RpcError::internal(e.to_string()))?;
        let sessions = summaries
            .into_iter()
            .filter(|s| !store.kind(&s.id).subagent)
            .map(|s| {
                let mut info = SessionInfo::new(s.id.clone(), workdir.clone()).title(s.title);
                if let Some(at) = s.last_activity {
                    info = info.updated_at(at.to_rfc3339());
                }
                info
            })
            .collect();
        Ok(Done::of(ListSessionsResponse::new(sessions)))
    }

    fn view(&self, session: &str) -> Result<View, RpcError> {
        self.views()
            .get(session)
            .cloned()
            .ok_or_else(|| RpcError::new(RESOURCE_NOT_FOUND, format!("no session {session}")))
    }

    fn modes(&self, session: &str) -> Result<SessionModeState, RpcError> {
        let view = self.view(session)?;
        let engine = self.engine(&view.conversation);
        let available = MODES
            .iter()
            .map(|(id, name, about)| SessionMode::new(*id, *name).description(*about))
            .collect();
        Ok(SessionModeState::new(
            engine.policy.mode.as_str(),
            available,
        ))
    }

    /// The session's options: its permission mode, its model, its reasoning level.
    fn config_options(&self, session: &str) -> Result<Vec<SessionConfigOption>, RpcError> {
        let view = self.view(session)?;
        let engine = self.engine(&view.conversation);
        let models = lock(&self.models)
            .get(&engine.provider.settings().base_url)
            .cloned()
            .unwrap_or_default();
        Ok(options(
            engine.policy.mode.as_str(),
            &engine.config.model,
            models,
            thinking(&engine),
        ))
    }

    /// What the session's first request needs from the server, asked while the editor's user
    /// writes the first prompt instead of after it: the context window of a model neither the
    /// configuration nor its family names (`/props`; the connection stays open for the prompt),
    /// which the first turn takes (waiting for it if need be, as it would have asked itself).
    /// Then the provider's models (see [`ModelsAsk`]), unless a prompt came meanwhile: they wait
    /// for the end of its turn. Nothing holds the engine while the server is asked.
    fn warm_up(&self, session: &str) {
        let Ok(view) = self.view(session) else {
            return;
        };
        let Some(open) = self.open.get(&view.conversation).cloned() else {
            return;
        };
        let (question, models) = {
            let mut engine = open.engine();
            (engine.take_window_question(), ModelsAsk::of(&engine))
        };
        let (told, window) = oneshot::channel();
        if question.is_some() {
            *lock(&open.window) = Some(window);
        }
        let (cache, wire, session) = (self.models.clone(), self.wire.clone(), session.to_string());
        self.runtime.spawn(async move {
            if let Some(provider) = question {
                let _ = told.send(provider.server_window().await);
            }
            if open.prompted.load(Ordering::SeqCst) {
                *lock(&open.models_due) = Some(session);
            } else {
                models.run(cache, wire, session).await;
            }
        });
    }

    fn set_option(&self, session: &str, option: &str, value: &str) -> Result<(), RpcError> {
        let view = self.view(session)?;
        let mut engine = self.engine(&view.conversation);
        match option {
            "mode" => {
                let mode = Mode::parse(value).ok_or_else(|| {
                    RpcError::params(format!("no mode {value}: strict, default or permissive"))
                })?;
                engine.set_mode(mode);
                update(
                    &self.wire,
                    session,
                    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(value.to_string())),
                );
            }
            "model" => {
                engine
                    .set_model(value)
                    .map_err(|e| RpcError::params(e.to_string()))?;
                // A window asked for the model before is not this one's.
                lock(&self.open[&view.conversation].window).take();
            }
            "reasoning" if engine.provider.has_thinking_budget() => {
                let budget = THINKING
                    .iter()
                    .find(|(id, _, _)| *id == value)
                    .map(|(_, _, budget)| *budget)
                    .or_else(|| value.parse::<u32>().ok().map(Some))
                    .ok_or_else(|| {
                        RpcError::params(format!(
                            "no reasoning level {value}: off, low, medium or high"
                        ))
                    })?;
                engine.set_thinking_budget(budget);
            }
            _ => {
                return Err(RpcError::params(format!(
                    "no option {option} here: mode, model{}",
                    if engine.provider.has_thinking_budget() {
                        " or reasoning"
                    } else {
                        ""
                    }
                )));
            }
        }
        Ok(())
    }

    /// `session/fork`: a branch of the same conversation from the session's node, named, with
    /// its own session id `<conversation>@<branch>`.
    fn fork(&mut self, params: &Value) -> Result<Done, RpcError> {
        let session = param(params, "sessionId")?.to_string();
        let view = self.view(&session)?;
        let mut engine = self.engine(&view.conversation);
        let chat = &mut engine.chat;
        if !chat.is_persisted() {
            return Err(RpcError::params(
                "this session has no message yet: there is nothing to fork",
            ));
        }
        let names = &chat.conversation().branches;
        let name = (1..)
            .map(|n| format!("fork-{n}"))
            .find(|n| !names.contains_key(n))
            .expect("a free name");
        chat.name_branch(&name, &view.cursor)
            .map_err(|e| RpcError::internal(e.to_string()))?;
        drop(engine);
        let forked = format!("{}@{name}", view.conversation);
        self.views().insert(
            forked.clone(),
            View {
                conversation: view.conversation.clone(),
                cursor: view.cursor.clone(),
                branch: Some(name),
            },
        );
        let response = ForkSessionResponse::new(forked.clone())
            .modes(self.modes(&forked)?)
            .config_options(self.config_options(&forked)?);
        Ok(Done::of(response).then_offer(&forked))
    }

    /// The slash commands this session offers.
    fn offer_commands(&self, session: &str, _all: bool) {
        let Ok(view) = self.view(session) else {
            return;
        };
        let engine = self.engine(&view.conversation);
        let mut commands: Vec<AvailableCommand> = slash::COMMANDS
            .iter()
            .map(|c| {
                let mut command = AvailableCommand::new(c.name, c.about);
                if !c.hint.is_empty() {
                    command = command.input(AvailableCommandInput::Unstructured(
                        UnstructuredCommandInput::new(c.hint),
                    ));
                }
                command
            })
            .collect();
        let mut skills: Vec<_> = engine.skills.all().filter(|s| s.enabled).collect();
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        for skill in skills {
            if slash::COMMANDS.iter().any(|c| c.name == skill.name) {
                continue;
            }
            commands.push(
                AvailableCommand::new(skill.name.clone(), skill.description.clone()).input(
                    AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                        "what to do",
                    )),
                ),
            );
        }
        update(
            &self.wire,
            session,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
        );
    }

    /// `session/prompt`: the prompt's blocks as one message (an attached file is its content),
    /// or a command; the turn runs on a thread of its own (other sessions' prompts run beside
    /// it), which streams the answer as updates and answers `id` with the stop reason.
    fn prompt(&mut self, id: Value, params: &Value) -> Result<(), RpcError> {
        let session = param(params, "sessionId")?.to_string();
        let view = self.view(&session)?;
        let blocks: Vec<ContentBlock> =
            serde_json::from_value(params["prompt"].clone()).map_err(|e| {
                RpcError::params(format!("`prompt` is not a list of content blocks: {e}"))
            })?;
        let text = prompt_text(&blocks);
        let open = self.open[&view.conversation].clone();
        open.prompted.store(true, Ordering::SeqCst);
        let running = Arc::new(Running {
            session: session.clone(),
            cancelled: AtomicBool::new(false),
            interrupts: open.interrupts.clone(),
        });
        self.control.start(running.clone())?;
        let (wire, control, runtime, views, cache) = (
            self.wire.clone(),
            self.control.clone(),
            self.runtime.clone(),
            self.views.clone(),
            self.models.clone(),
        );
        self.turns.retain(|turn| !turn.is_finished());
        self.turns.push(thread::spawn(move || {
            let answer = run_turn(&wire, &runtime, &open, &views, &running, &text);
            control.end(&running);
            match answer {
                Ok(response) => wire.respond(&id, response),
                Err(e) => wire.error(&id, &e),
            }
            let due = lock(&open.models_due).take();
            if let Some(session) = due {
                let models = ModelsAsk::of(&open.engine());
                runtime.spawn(models.run(cache, wire.clone(), session));
            }
        }));
        Ok(())
    }

    /// stdin closed: every session ends as the REPL's does (hooks, MCP servers, subagents).
    fn close(&mut self) {
        // The turns were cancelled when stdin closed: they end first.
        for turn in self.turns.drain(..) {
            if turn.join().is_err() {
                tracing::warn!("a turn's thread panicked");
            }
        }
        let mut quiet = Recorder::default();
        for (_, open) in self.open.drain() {
            self.runtime.block_on(open.engine().close(&mut quiet));
        }
    }
}

/// One turn (or command) of the editor session `running` names, on its conversation's engine
/// (waited for while another session of it runs a turn): the answer streams as updates, and the
/// stop reason is the prompt's answer.
fn run_turn(
    wire: &Wire,
    runtime: &Runtime,
    open: &Open,
    views: &Views,
    running: &Arc<Running>,
    text: &str,
) -> Result<PromptResponse, RpcError> {
    let session = running.session.as_str();
    let mut engine = open.engine();
    // The window asked when the session opened (see `Agent::warm_up`).
    let asked = lock(&open.window).take();
    if let Some(Ok(Some(window))) = asked.map(|told| runtime.block_on(told)) {
        engine.context.set_server_window(window);
    }
    *lock(&open.current) = session.to_string();
    let view = lock(views)
        .get(session)
        .cloned()
        .ok_or_else(|| RpcError::new(RESOURCE_NOT_FOUND, format!("no session {session}")))?;
    // Each editor session keeps its own place in the tree.
    if engine.chat.conversation().cursor() != view.cursor {
        let _ = engine.chat.move_cursor(&view.cursor);
    }
    let workdir = engine.workdir.clone();
    let mut turn = Turn::new(wire, session, &workdir, running.clone());
    engine.install_hook_agents();
    let end = match slash::parse(text) {
        Some((name, args)) => runtime.block_on(slash::run(&mut engine, &mut turn, name, args)),
        None => runtime.block_on(engine.send(text, &mut turn)),
    };
    if matches!(end, Some(Ended::Complete)) {
        engine.review_turn();
    }
    let finish = turn.finish.clone();
    // Where the session is now; a fork's branch name follows its tip.
    let cursor = engine.chat.conversation().cursor().to_string();
    if let Some(name) = &view.branch
        && cursor != view.cursor
        && engine.chat.is_persisted()
        && let Err(e) = engine.chat.name_branch(name, &cursor)
    {
        tracing::warn!(error = %e, "moving the fork's branch name");
    }
    if let Some(v) = lock(views).get_mut(session) {
        v.cursor = cursor;
    }
    let reason = match end {
        Some(Ended::Failed(e)) => return Err(RpcError::internal(e.to_string())),
        _ if running.is_cancelled() => StopReason::Cancelled,
        Some(Ended::Interrupted) => StopReason::Cancelled,
        Some(Ended::RoundLimit(_)) => StopReason::MaxTurnRequests,
        Some(Ended::ContextFull) => StopReason::MaxTokens,
        _ if finish.as_deref() == Some("length") => StopReason::MaxTokens,
        _ if finish.as_deref() == Some("content_filter") => StopReason::Refusal,
        _ => StopReason::EndTurn,
    };
    Ok(PromptResponse::new(reason))
}

/// The reasoning level of a session whose provider has one: its thinking budget now.
/// What asking the provider of a session for its models needs: the list comes to the editor
/// session as a `config_option_update` (its answer did not wait for it), once per server.
struct ModelsAsk {
    provider: Provider,
    url: String,
    mode: String,
    model: String,
    thinking: Option<Option<u32>>,
}

impl ModelsAsk {
    fn of(engine: &Session) -> ModelsAsk {
        ModelsAsk {
            provider: engine.provider.clone(),
            url: engine.provider.settings().base_url.clone(),
            mode: engine.policy.mode.as_str().to_string(),
            model: engine.config.model.clone(),
            thinking: thinking(engine),
        }
    }

    async fn run(self, cache: ModelCache, wire: Arc<Wire>, session: String) {
        if lock(&cache).contains_key(&self.url) {
            return;
        }
        let asked = time::timeout(time::Duration::from_secs(10), self.provider.models()).await;
        let models: Vec<String> = match asked {
            Ok(Ok(models)) => models.into_iter().map(|m| m.id).take(200).collect(),
            _ => return,
        };
        lock(&cache).insert(self.url, models.clone());
        update(
            &wire,
            &session,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options(
                &self.mode,
                &self.model,
                models,
                self.thinking,
            ))),
        );
    }
}

fn thinking(engine: &Session) -> Option<Option<u32>> {
    engine
        .provider
        .has_thinking_budget()
        .then_some(engine.config.provider.thinking_budget)
}

/// The options a session offers: the permission mode, the model (`models`: what the provider
/// said it offers, perhaps nothing yet), and the reasoning level where the provider has one
/// (`thinking`: its budget now).
fn options(
    mode: &str,
    current: &str,
    mut models: Vec<String>,
    thinking: Option<Option<u32>>,
) -> Vec<SessionConfigOption> {
    let modes: Vec<SessionConfigSelectOption> = MODES
        .iter()
        .map(|(id, name, about)| SessionConfigSelectOption::new(*id, *name).description(*about))
        .collect();
    let mode = SessionConfigOption::select("mode", "Mode", mode.to_string(), modes)
        .category(SessionConfigOptionCategory::Mode)
        .description("When new asks before a tool runs");
    if !models.iter().any(|m| m == current) {
        models.insert(0, current.to_string());
    }
    let models: Vec<SessionConfigSelectOption> = models
        .into_iter()
        .map(|m| SessionConfigSelectOption::new(m.clone(), m))
        .collect();
    let model = SessionConfigOption::select("model", "Model", current.to_string(), models)
        .category(SessionConfigOptionCategory::Model);
    let Some(budget) = thinking else {
        return vec![mode, model];
    };
    let mut levels: Vec<SessionConfigSelectOption> = THINKING
        .iter()
        .map(|(id, name, _)| SessionConfigSelectOption::new(*id, *name))
        .collect();
    // A budget of the configuration's own that is none of the levels is offered as it is.
    let now = match THINKING.iter().find(|(_, _, b)| *b == budget) {
        Some((id, _, _)) => id.to_string(),
        None => {
            let tokens = budget.unwrap_or_default().to_string();
            levels.push(SessionConfigSelectOption::new(
                tokens.clone(),
                format!("{tokens} tokens"),
            ));
            tokens
        }
    };
    let reasoning = SessionConfigOption::select("reasoning", "Reasoning", now, levels)
        .category(SessionConfigOptionCategory::ThoughtLevel)
        .description("How much the model may think before it answers");
    vec![mode, model, reasoning]
}

/// The prompt's blocks as the message's text: text as it is, an embedded file as its content
/// under its name, a link by its address.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    parts.push(format!("<file uri=\"{}\">\n{}\n</file>", t.uri, t.text))
                }
                other => parts.push(format!("[an attachment that is not text: {other:?}]")),
            },
            ContentBlock::ResourceLink(l) => parts.push(format!("@{}", l.uri)),
            _ => parts.push("[an attachment new cannot read: images are not supported]".into()),
        }
    }
    parts.join("\n\n")
}
