//! `new web`: the session as a local page. The engine runs on this thread as it does for the
//! REPL; a small HTTP server on loopback ([`server`]) hands the page's requests to it as jobs and
//! streams its events to the page. What the page shows is built here ([`view`]): the tree, the
//! branch at the cursor with Markdown rendered on pulldown-cmark (raw HTML escaped), and the same
//! data written as one self-contained file by `/export --html`.
//!
//! Not for: deciding what a command means (the session does), or trusting anything a model, a
//! tool or a request says (everything reaching the page is escaped or sanitized here).

mod front;
mod server;
pub mod view;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::watch;

use super::commands::{CommandId, Input, parse};
use super::repl::{App, Launch};
use front::WebFront;
use new_core::escape;
use new_core::mcp::Manager;
use new_core::session::{CommandError, ManageError, Switched};
use new_core::tools::Mode;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;

/// What `new web` was asked on its command line besides a session's options.
#[derive(Debug, Clone, Default)]
pub struct WebLaunch {
    pub launch: Launch,
    /// Serve on this port (otherwise a free one).
    pub port: Option<u16>,
    /// Open the default browser on the address.
    pub open: bool,
}

/// What the page asks the engine to do, one at a time, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// A line typed in the box: a message, `/N` or a command.
    Line(String),
    /// Make this node current (a click in the tree).
    Goto(String),
    /// The permission mode from now on.
    Mode(Mode),
    /// `/exit`, from the page.
    Exit,
}

/// What the server and the engine share.
pub struct Shared {
    /// The secret of the first address, then of the cookie.
    pub token: String,
    pub port: u16,
    /// The page's state as JSON ([`view::state`]), renewed after every job.
    pub state: Mutex<String>,
    /// Events for the pages listening (JSON texts).
    pub events: broadcast::Sender<String>,
    pub jobs: Mutex<mpsc::Sender<Job>>,
    /// The question waiting for the page's answer (its number), and where the answer goes.
    pub pending: Mutex<Option<u64>>,
    pub answers: Mutex<mpsc::Sender<(u64, String)>>,
    pub questions: AtomicU64,
    /// A job runs (Stop then raises the interrupts).
    pub working: AtomicBool,
    pub interrupt: watch::Sender<u64>,
}

impl Shared {
    /// Sends one event to every page listening (none listening is not an error).
    pub fn emit(&self, event: Value) {
        let _ = self.events.send(event.to_string());
    }

    /// The page's Stop: what runs is interrupted, as by Ctrl-C, and a question waiting is
    /// answered so.
    pub fn stop(&self) {
        if self.working.load(Ordering::SeqCst) {
            self.interrupt.send_modify(|n| *n += 1);
        }
        if let Some(id) = *self.pending.lock().expect("pending") {
            let _ = self
                .answers
                .lock()
                .expect("answers")
                .send((id, "stop".into()));
        }
    }
}

/// A random secret of 244 bits (two version-4 UUIDs, from the system's generator).
fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// `new web`: the whole program once its arguments are parsed.
pub fn run(web: WebLaunch) -> ExitCode {
    let listener = match TcpListener::bind(SocketAddr::from((
        Ipv4Addr::LOCALHOST,
        web.port.unwrap_or(0),
    ))) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "new web: listening on 127.0.0.1:{} failed: {e}",
                web.port.unwrap_or(0)
            );
            return ExitCode::from(2);
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            eprintln!("new web: reading the port listened on failed: {e}");
            return ExitCode::from(2);
        }
    };
    let mut app = match App::new(web.launch.clone(), false) {
        Ok(app) => app,
        Err(e) => {
            eprintln!("new web: {e:#}");
            return ExitCode::from(2);
        }
    };
    let (events, _) = broadcast::channel(4096);
    let (jobs_tx, jobs) = mpsc::channel();
    let (answers_tx, answers) = mpsc::channel();
    let shared = Arc::new(Shared {
        token: new_token(),
        port,
        state: Mutex::new(String::new()),
        events,
        jobs: Mutex::new(jobs_tx),
        pending: Mutex::new(None),
        answers: Mutex::new(answers_tx),
        questions: AtomicU64::new(0),
        working: AtomicBool::new(false),
        interrupt: app.interrupt.clone(),
    });
    publish(&app, &shared);
    if let Err(e) = server::start(listener, shared.clone()) {
        eprintln!("new web: starting the server failed: {e}");
        return ExitCode::from(2);
    }
    let url = format!("http://127.0.0.1:{port}/?token={}", shared.token);
    {
        let mut stdout = io::stdout().lock();
        if writeln!(stdout, "{url}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return ExitCode::from(2);
        }
    }
    if web.open {
        open_browser(&url);
    }
    app.ready();
    if let Some(mcp) = app.engine.tools.source::<Manager>() {
        mcp.start();
    }
    publish(&app, &shared);
    while let Ok(job) = jobs.recv() {
        shared.working.store(true, Ordering::SeqCst);
        shared.emit(json!({"type": "busy", "busy": true}));
        let go_on = run_job(&mut app, &shared, &answers, job);
        shared.working.store(false, Ordering::SeqCst);
        publish(&app, &shared);
        shared.emit(json!({"type": "busy", "busy": false}));
        if !go_on {
            break;
        }
    }
    shared.emit(json!({"type": "exit"}));
    app.leave();
    ExitCode::SUCCESS
}

/// The page's state renewed, and the pages told.
fn publish(app: &App, shared: &Shared) {
    let state = view::state(&app.engine).to_string();
    *shared.state.lock().expect("state") = state;
    shared.emit(json!({"type": "state"}));
}

/// A line of output for the page (what the REPL would print).
fn say(shared: &Shared, text: &str) {
    shared.emit(json!({"type": "output", "text": text}));
}

fn error(shared: &Shared, text: &str) {
    shared.emit(json!({"type": "error", "text": text}));
}

/// Runs one job; false when the page asked to leave.
fn run_job(
    app: &mut App,
    shared: &Shared,
    answers: &mpsc::Receiver<(u64, String)>,
    job: Job,
) -> bool {
    match job {
        Job::Exit => return false,
        Job::Goto(id) => {
            if let Err(e) = app.engine.move_to(&id) {
                error(shared, &e.to_string());
            }
        }
        Job::Mode(mode) => {
            app.engine.set_mode(mode);
            say(shared, &format!("permission mode: {}", mode.as_str()));
        }
        Job::Line(line) => return run_line(app, shared, answers, &line),
    }
    true
}

fn run_line(
    app: &mut App,
    shared: &Shared,
    answers: &mpsc::Receiver<(u64, String)>,
    line: &str,
) -> bool {
    match parse(line) {
        Input::Empty => {}
        Input::Chat(text) => {
            app.engine.install_hook_agents();
            let mut front = WebFront::new(shared, answers);
            let _ = app.runtime.block_on(app.engine.send(text, &mut front));
            front.count(&mut app.engine);
        }
        Input::Goto(n) => match app.engine.node(n) {
            Ok(id) => {
                if let Err(e) = app.engine.move_to(&id) {
                    error(shared, &e.to_string());
                }
            }
            Err(e) => error(shared, &e.to_string()),
        },
        Input::Unknown(word) => error(
            shared,
            &format!("{word}: no such command (/help lists those of the page)"),
        ),
        Input::Command(id, args) => return command(app, shared, answers, id, args),
    }
    true
}

/// The commands of the page: the REPL's meaning, through the same session calls.
fn command(
    app: &mut App,
    shared: &Shared,
    answers: &mpsc::Receiver<(u64, String)>,
    id: CommandId,
    args: &str,
) -> bool {
    let command_error = |e: &CommandError| error(shared, &e.to_string());
    let manage_error = |e: &ManageError| error(shared, &e.to_string());
    match id {
        CommandId::Exit => return false,
        CommandId::Retry => match app.engine.retry_from() {
            Ok(_) => {
                let mut front = WebFront::new(shared, answers);
                let _ = app.runtime.block_on(app.engine.answer(&mut front));
                front.count(&mut app.engine);
            }
            Err(e) => command_error(&e),
        },
        CommandId::Undo => match app.engine.undo() {
            Ok(_) => say(shared, "undone"),
            Err(e) => command_error(&e),
        },
        CommandId::Btw => {
            let mut front = WebFront::new(shared, answers);
            if let Err(e) = app.runtime.block_on(app.engine.btw(args, &mut front)) {
                command_error(&e);
            }
        }
        CommandId::New => {
            let mut front = WebFront::new(shared, answers);
            app.runtime
                .block_on(app.engine.new_conversation(&mut front));
            say(
                shared,
                &format!("new conversation {}", app.engine.chat.id()),
            );
        }
        CommandId::Switch => {
            let mut front = WebFront::new(shared, answers);
            match app.runtime.block_on(app.engine.switch(args, &mut front)) {
                Ok(Switched::Already(id)) => {
                    say(shared, &format!("{id} is already the conversation at hand"))
                }
                Ok(_) => say(shared, &format!("switched to {}", app.engine.chat.id())),
                Err(e) => command_error(&e),
            }
        }
        CommandId::Title => {
            if args.is_empty() {
                say(shared, &app.engine.title());
            } else if let Err(e) = app.engine.set_title(args) {
                manage_error(&e);
            }
        }
        CommandId::Permissions => match Mode::parse(args.trim()) {
            Some(mode) => {
                app.engine.set_mode(mode);
                say(shared, &format!("permission mode: {}", mode.as_str()));
            }
            None => say(
                shared,
                &format!(
                    "permission mode: {} (strict, default or permissive to change it)",
                    app.engine.policy.mode.as_str()
                ),
            ),
        },
        CommandId::Export => match export_html_args(args) {
            Some(Ok(file)) => match view::export_html(&app.engine, file) {
                Ok(path) => say(shared, &format!("wrote {}", path.display())),
                Err(e) => manage_error(&e),
            },
            Some(Err(word)) => error(shared, &format!("/export --html [FILE]: {word}?")),
            None => error(
                shared,
                "the page exports --html only: /export --html [FILE]",
            ),
        },
        CommandId::Help => say(shared, PAGE_HELP),
        _ => error(
            shared,
            "that command is the terminal's only for now (/help lists those of the page)",
        ),
    }
    true
}

const PAGE_HELP: &str = "Commands of the page: /N (move to node N), /retry, /undo, /btw QUESTION, \
/new, /switch ID, /title [TEXT], /permissions [MODE], /export --html [FILE], /exit. \
Click a node of the tree to make it current.";

/// `/export`'s arguments when `--html` is among them: the file, if named (Err: a word that does
/// not belong). None without `--html`.
pub fn export_html_args(args: &str) -> Option<Result<Option<PathBuf>, String>> {
    let words: Vec<&str> = args.split_whitespace().collect();
    if !words.contains(&"--html") {
        return None;
    }
    let mut file = None;
    for w in words.into_iter().filter(|w| *w != "--html") {
        if w.starts_with("--") || file.is_some() {
            return Some(Err(w.to_string()));
        }
        file = Some(PathBuf::from(w));
    }
    Some(Ok(file))
}

/// Opens the default browser on the address; one that cannot be started is said, and the
/// address is on stdout anyway.
fn open_browser(url: &str) {
    let mut command = if cfg!(target_os = "macos") {
        Command::new("open")
    } else if cfg!(windows) {
        let mut c = Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        Command::new("xdg-open")
    };
    command
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match command.spawn() {
        Ok(mut child) => {
            thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!(
            "new web: no browser could be opened ({}): open the address above",
            escape::escape_controls(&e.to_string())
        ),
    }
}
