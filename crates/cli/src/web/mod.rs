//! `new web`: the session as a local page. The engine runs on this thread as it does for the
//! REPL; a small HTTP server on loopback ([`server`]) hands the page's requests to it as jobs and
//! streams its events to the page. What the page shows is built here ([`view`]): the tree, the
//! branch at the cursor with Markdown rendered on pulldown-cmark (raw HTML escaped), and the same
//! data written as one self-contained file by `/export --html`.
//!
//! Not for: deciding what a command means (the session does), or trusting anything a model, a
//! tool or a request says (everything reaching the page is escaped or sanitized here).

pub mod files;
mod front;
mod server;
pub mod view;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::watch;

use super::commands::{CommandId, Input, parse};
use super::output::{self, Said};
use super::repl::{App, Launch};
use super::tree_view::{Highlight, push_tree};
use files::{FilePanel, secret_places};
use front::WebFront;
use new_core::conversation::valid_branch_name;
use new_core::escape;
use new_core::mcp::Manager;
use new_core::session::{
    CommandError, Ended, Event, Kept, ManageError, OneAfterAnother, Recorder, Restored, Switched,
};
use new_core::tools::Mode;
use new_core::vocab::Usage;
use new_sys::platform;
use std::env;
use std::ffi::OsStr;
use std::fs;
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
    /// Open it on the address itself, not on a launcher file (which a snap or flatpak browser
    /// may not be allowed to read).
    pub open_address: bool,
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
    /// The secret: in the address's fragment, then in the page's `X-New-Token` header.
    pub token: String,
    pub port: u16,
    /// The page's state as JSON ([`view::state`]), renewed after every job.
    pub state: Mutex<String>,
    /// Events for the pages listening (JSON texts).
    pub events: broadcast::Sender<String>,
    pub jobs: Mutex<mpsc::Sender<Job>>,
    /// The question waiting for the page's answer (its number, and the question as sent, for a
    /// page loaded meanwhile), and where the answer goes.
    pub pending: Mutex<Option<(u64, Value)>>,
    pub answers: Mutex<mpsc::Sender<(u64, String)>>,
    pub questions: AtomicU64,
    /// A job runs (Stop then raises the interrupts).
    pub working: AtomicBool,
    pub interrupt: watch::Sender<u64>,
    /// WORKDIR, read-only, for the file panel.
    pub files: FilePanel,
    /// The private folder of the file that opened the browser, removed once the page has its
    /// secret (or when the session ends).
    pub launcher: Mutex<Option<PathBuf>>,
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
        let pending = self.pending.lock().expect("pending").as_ref().map(|q| q.0);
        if let Some(id) = pending {
            let _ = self
                .answers
                .lock()
                .expect("answers")
                .send((id, "stop".into()));
        }
    }

    /// The page has its secret: the launcher's folder goes.
    pub fn launched(&self) {
        if let Some(folder) = self.launcher.lock().expect("launcher").take() {
            let _ = fs::remove_dir_all(folder);
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
        files: FilePanel::new(
            &app.engine.workdir,
            secret_places(&app.engine.config.sandbox.deny_read),
        ),
        launcher: Mutex::new(None),
    });
    // The sandbox's network questions come to the page (as to a terminal).
    if let Some(sandbox) = &app.engine.tools.context().os_sandbox {
        sandbox.ask_about_hosts();
    }
    publish(&app, &shared);
    if let Err(e) = server::start(listener, shared.clone()) {
        eprintln!("new web: starting the server failed: {e}");
        return ExitCode::from(2);
    }
    // The secret in the fragment: a browser never sends it to a server, nor in a Referer.
    let url = format!("http://127.0.0.1:{port}/#t={}", shared.token);
    {
        let mut stdout = io::stdout().lock();
        if writeln!(stdout, "{url}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return ExitCode::from(2);
        }
    }
    if web.open && web.open_address {
        // Asked for: the secret is on the opener's command line while it runs.
        open_browser(OsStr::new(&url));
    } else if web.open {
        match launcher(&url) {
            Ok((folder, file)) => {
                *shared.launcher.lock().expect("launcher") = Some(folder);
                if open_browser(file.as_os_str()) {
                    eprintln!(
                        "new web: the browser was sent to {}, a launcher page that goes on to \
the address. If it says the file was not found (a snap or flatpak browser may not read that \
folder) or another program opened it, open this address in the browser:\n  {url}\n\
or start `new web --open-address` next time.",
                        escape::escape_controls(&file.display().to_string())
                    );
                }
            }
            Err(e) => eprintln!(
                "new web: the browser could not be opened ({}): open the address above",
                escape::escape_controls(&e.to_string())
            ),
        }
    }
    app.ready();
    if let Some(mcp) = app.engine.tools.source::<Manager>() {
        mcp.start();
    }
    publish(&app, &shared);
    let mut health = view::mcp_health(&app.engine);
    loop {
        // Idle, the MCP servers' health is watched: a change is drawn.
        let job = match jobs.recv_timeout(Duration::from_millis(500)) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => {
                let now = view::mcp_health(&app.engine);
                if now != health {
                    health = now;
                    publish(&app, &shared);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        shared.working.store(true, Ordering::SeqCst);
        shared.emit(json!({"type": "busy", "busy": true}));
        let go_on = run_job(&mut app, &shared, &answers, job);
        shared.working.store(false, Ordering::SeqCst);
        publish(&app, &shared);
        shared.emit(json!({"type": "busy", "busy": false}));
        health = view::mcp_health(&app.engine);
        if !go_on {
            break;
        }
    }
    shared.emit(json!({"type": "exit"}));
    shared.launched();
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
        Job::Goto(id) => match app.engine.move_to(&id) {
            Ok(_) => offer_restore(app, shared, answers),
            Err(e) => error(shared, &e.to_string()),
        },
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
            let end = app.runtime.block_on(app.engine.send(text, &mut front));
            front.count(&mut app.engine);
            after_turn(app, shared, end.as_ref());
        }
        Input::Goto(n) => match app.engine.node(n) {
            Ok(id) => match app.engine.move_to(&id) {
                Ok(_) => offer_restore(app, shared, answers),
                Err(e) => error(shared, &e.to_string()),
            },
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
        CommandId::Retry => retry(app, shared, answers, args),
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
                Ok(_) => {
                    say(shared, &format!("switched to {}", app.engine.chat.id()));
                    offer_restore(app, shared, answers);
                }
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
        CommandId::Tree => {
            if !matches!(args, "" | "--full") {
                error(shared, "/tree takes no argument but --full");
            } else {
                let mut text = String::new();
                push_tree(
                    &mut text,
                    app.engine.chat.conversation(),
                    args == "--full",
                    app.out.lang,
                    &|_: Highlight, drawn: &str| drawn.to_string(),
                );
                say(shared, text.trim_end());
            }
        }
        CommandId::Branch => branch(app, shared, args),
        // `--files`: the REPL's own code, its question asked in the page.
        CommandId::Merge if args.split_whitespace().any(|w| w == "--files") => {
            let mut front = WebFront::new(shared, answers);
            let mut ask = |question: &str, list: &str| front.yes_or_no("merge", question, list);
            as_in_the_repl(app, shared, |app| app.merge_asking(args, Some(&mut ask)));
        }
        CommandId::Merge => merge(app, shared, args),
        CommandId::Compare => compare(app, shared, args),
        CommandId::Restore => {
            if args.is_empty() {
                restore(app, shared, answers);
            } else {
                error(shared, "/restore takes no argument");
            }
        }
        CommandId::Model => {
            if args.is_empty() {
                let s = app.engine.provider.settings();
                say(
                    shared,
                    &format!(
                        "provider {} ({}, {}), model {}",
                        s.name,
                        s.kind.as_str(),
                        s.base_url,
                        app.engine.config.model
                    ),
                );
            } else {
                match app.engine.set_model(args) {
                    Ok(()) => say(
                        shared,
                        &format!("model {args} for the rest of this session"),
                    ),
                    Err(e) => manage_error(&e),
                }
            }
        }
        CommandId::List => as_in_the_repl(app, shared, |app| app.list(args)),
        CommandId::Search => as_in_the_repl(app, shared, |app| app.search(args)),
        CommandId::Context => as_in_the_repl(app, shared, |app| app.show_context(args)),
        CommandId::Help => say(shared, PAGE_HELP),
        _ => error(
            shared,
            "that command is the terminal's only for now (/help lists those of the page)",
        ),
    }
    true
}

const PAGE_HELP: &str = "Commands of the page: /N (move to node N), /tree [--full], \
/retry [--model NAME] [--n K], /undo, /btw QUESTION, /branch [NAME | -d NAME], \
/merge N|NAME [--files], /compare, /restore, /model [NAME], /new, /switch ID, /list [all], \
/search TEXT, /context, /title [TEXT], /permissions [MODE], /export --html [FILE], /exit. \
Click a node of the tree to make it current.";

/// A command the REPL has, run by its own code: what it says goes to the page as lines (text,
/// notices, errors), without colours.
fn as_in_the_repl(app: &mut App, shared: &Shared, run: impl FnOnce(&mut App)) {
    let saved = app.out;
    app.out.color = false;
    app.out.render = false;
    let ((), said) = output::capture(|| run(app));
    app.out = saved;
    for piece in said {
        match piece {
            Said::Text(text) => say(shared, &text),
            Said::Warning(text) => shared.emit(json!({"type": "notice", "text": text})),
            Said::Error(text) => error(shared, &text),
        }
    }
}

/// After the cursor moved (a click, `/N`, a sibling, `/switch`): when the folder differs from
/// the node's files, the page says how and asks whether to restore them, as the REPL does
/// (with `checkpoints.restore: never` it only says so).
fn offer_restore(app: &mut App, shared: &Shared, answers: &mpsc::Receiver<(u64, String)>) {
    let Some((n, differ)) = app.engine.folder_differs() else {
        return;
    };
    let mut list = String::new();
    for (path, what) in differ.iter().take(20) {
        list.push_str(&format!("{what} {}\n", escape::escape_controls(path)));
    }
    if differ.len() > 20 {
        list.push_str(&format!("and {} more\n", differ.len() - 20));
    }
    let title = format!("The folder differs from node {n}'s files. Restore them?");
    // The move drawn before the question.
    publish(app, shared);
    if !app.engine.config.checkpoints.ask {
        return say(
            shared,
            &format!(
                "The folder differs from node {n}'s files:\n{}\n(/restore makes it hold them)",
                list.trim_end()
            ),
        );
    }
    let mut front = WebFront::new(shared, answers);
    if front.yes_or_no("restore", &title, list.trim_end()) {
        restore_with(app, shared, answers, false);
    } else {
        say(
            shared,
            "the folder is as it was (/restore makes it hold the node's files)",
        );
    }
}

/// What follows a message sent from the page, as after one typed in the REPL: the memory review
/// of a completed turn (in the background; a retried answer is not reviewed, as in the REPL),
/// and what earlier reviews changed, said.
fn after_turn(app: &mut App, shared: &Shared, end: Option<&Ended>) {
    if matches!(end, Some(Ended::Complete)) {
        app.engine.review_turn();
    }
    memory_notes(app, shared);
}

/// What the reviews running in the background changed since the last time, one line each.
fn memory_notes(app: &mut App, shared: &Shared) {
    for note in app.engine.take_memory_notes() {
        shared.emit(json!({"type": "notice", "text": format!("memory: {note}")}));
    }
}

/// `/retry [--model NAME] [--n K]`: new answers to the nearest user message, as siblings; K of
/// them side by side when the session can (as the REPL does), else one after another.
fn retry(app: &mut App, shared: &Shared, answers: &mpsc::Receiver<(u64, String)>, args: &str) {
    let mut model: Option<String> = None;
    let mut count = 1usize;
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        match (word, words.next()) {
            ("--model", Some(name)) => model = Some(name.to_string()),
            ("--n", Some(n)) => match n.parse::<usize>() {
                Ok(n @ 1..=5) => count = n,
                _ => return error(shared, "/retry [--model NAME] [--n K], K from 1 to 5"),
            },
            _ => return error(shared, "/retry [--model NAME] [--n K], K from 1 to 5"),
        }
    }
    let user = match app.engine.retry_from() {
        Ok(user) => user,
        Err(e) => return error(shared, &e.to_string()),
    };
    let saved = model.map(|m| app.engine.swap_model(m));
    let together = count > 1 && {
        let why = app.engine.side_by_side_refusal();
        match why {
            Some(OneAfterAnother::NoCheckpoints) => say(
                shared,
                "one after another: without checkpoints the folder cannot be put back between them",
            ),
            Some(OneAfterAnother::StopHooks) => say(
                shared,
                "one after another: a post_message hook checks each answer in the folder it left",
            ),
            _ => {}
        }
        why.is_none() && app.engine.ready_together().is_ok()
    };
    // Numbered as `/compare` numbers the answers at that message: after those it has.
    let before = app.engine.answers_to(&user);
    if together {
        retry_together(app, shared, answers, before, count);
    } else {
        for i in 0..count {
            if count > 1 {
                say(
                    shared,
                    &format!("answer {} of {}", before + i + 1, before + count),
                );
            }
            if app.engine.chat.move_cursor(&user).is_err() {
                break;
            }
            let mut front = WebFront::new(shared, answers);
            let end = app.runtime.block_on(app.engine.answer(&mut front));
            front.count(&mut app.engine);
            memory_notes(app, shared);
            if !end.is_complete() {
                break;
            }
        }
    }
    if let Some(saved) = saved {
        app.engine.restore_model(saved);
    }
}

/// The answers of `/retry --n K` side by side: each one's text said as it is done, then each
/// finished as a turn is; the cursor ends on the last.
fn retry_together(
    app: &mut App,
    shared: &Shared,
    answers: &mpsc::Receiver<(u64, String)>,
    before: usize,
    count: usize,
) {
    say(shared, &format!("{count} answers side by side"));
    let label = |i: usize| format!("answer {} of {}", before + i + 1, before + count);
    // Their tokens, for the status line (each answer's events come whole, recorded).
    let mut spent = Usage::default();
    let mut done = |i: usize, recorded: Recorder, took: Duration| {
        for event in &recorded.events {
            match event {
                Event::AnswerEnd { response, .. } => {
                    if let Some(u) = &response.usage {
                        spent.add(u);
                    }
                }
                Event::Usage(u) => spent.add(u),
                _ => {}
            }
        }
        say(
            shared,
            &format!(
                "{} ({:.1} s): {}",
                label(i),
                took.as_secs_f64(),
                recorded.text()
            ),
        );
    };
    let mut asking = WebFront::new(shared, answers);
    let together =
        app.runtime.block_on(
            app.engine
                .answer_together(count, &label, &mut asking, &mut done),
        );
    app.engine.totals.0.add(&spent);
    let Ok(together) = together else {
        return error(shared, "the answers could not run side by side");
    };
    for problem in &together.problems {
        error(shared, &format!("not put back: {problem}"));
    }
    if let Err(e) = &together.reopened {
        return error(shared, &e.to_string());
    }
    for (end, tip) in together.ends {
        if app.engine.chat.move_cursor(&tip).is_err() {
            continue;
        }
        if !matches!(end, Ended::Interrupted) {
            let mut front = WebFront::new(shared, answers);
            app.runtime.block_on(app.engine.finish(end, &mut front));
            front.count(&mut app.engine);
            memory_notes(app, shared);
        }
    }
}

/// `/branch NAME` names the branch at the cursor; `/branch` lists the names; `/branch -d NAME`
/// removes one (the branch stays).
fn branch(app: &mut App, shared: &Shared, args: &str) {
    let mut words = args.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (None, _, _) => {
            let c = app.engine.chat.conversation();
            if c.branches.is_empty() {
                return say(
                    shared,
                    "no branch has a name yet (/branch NAME names this one)",
                );
            }
            let here = c.tip(c.cursor()).map(|m| m.id.clone());
            let mut text = String::new();
            for (name, node) in &c.branches {
                let Some(tip) = c.tip(node) else { continue };
                let mark = if Some(&tip.id) == here.as_ref() {
                    "*"
                } else {
                    " "
                };
                let n = c.number_of(&tip.id).unwrap_or(0);
                text.push_str(&format!("{mark} {name}  [{n}]\n"));
            }
            say(shared, text.trim_end());
        }
        (Some("-d" | "--delete"), Some(name), None) => {
            if !app.engine.chat.conversation().branches.contains_key(name) {
                return error(shared, &format!("no branch is named {name}"));
            }
            match app.engine.chat.unname_branch(name) {
                Ok(()) => say(
                    shared,
                    &format!("{name} is no longer a name (the branch stays)"),
                ),
                Err(e) => error(shared, &e.to_string()),
            }
        }
        (Some(name), None, _) if valid_branch_name(name) => {
            if !app.engine.chat.is_persisted() {
                return error(shared, "nothing to name yet: send a message first");
            }
            let c = app.engine.chat.conversation();
            let Some(tip) = c.tip(c.cursor()).map(|m| m.id.clone()) else {
                return error(shared, "the cursor is not in the tree");
            };
            let n = c.number_of(&tip).unwrap_or(0);
            match app.engine.chat.name_branch(name, &tip) {
                Ok(()) => say(shared, &format!("branch {name} names [{n}]")),
                Err(e) => error(shared, &e.to_string()),
            }
        }
        _ => error(
            shared,
            "/branch [NAME | -d NAME]: a name of letters, digits, - _ . /",
        ),
    }
}

/// `/merge N` or `/merge NAME`: the model's account of that branch appended here as a merge node
/// (`--files` runs the REPL's code, above).
fn merge(app: &mut App, shared: &Shared, args: &str) {
    let words: Vec<&str> = args.split_whitespace().collect();
    let [target] = words[..] else {
        return error(
            shared,
            "/merge N or /merge NAME: a node's number or a branch's name",
        );
    };
    let tip = match app.engine.merge_tip(target) {
        Ok(tip) => tip,
        Err(e) => return error(shared, &e.to_string()),
    };
    let mut asking = |n: usize, count: usize| {
        say(
            shared,
            &format!("asking the model to sum up [{n}]: {count} messages"),
        );
    };
    match app.runtime.block_on(app.engine.merge(&tip, &mut asking)) {
        Ok(merged) => {
            let c = app.engine.chat.conversation();
            say(
                shared,
                &format!(
                    "merged [{}] into [{}]: {}",
                    c.number_of(&merged.tip).unwrap_or(0),
                    c.number_of(&merged.node).unwrap_or(0),
                    merged.summary.chars().take(200).collect::<String>()
                ),
            );
        }
        Err(e) => error(shared, &e.to_string()),
    }
}

/// `/compare`: the alternatives at the nearest fork above the cursor, for the page to put side by
/// side (each answer's Markdown rendered as every message is).
fn compare(app: &mut App, shared: &Shared, args: &str) {
    if !args.is_empty() {
        return error(shared, "/compare takes no argument");
    }
    match app.engine.compare() {
        Ok(alternatives) => {
            let alternatives: Vec<Value> = alternatives
                .iter()
                .map(|a| {
                    json!({
                        "n": a.n,
                        "tip": a.tip,
                        "current": a.current,
                        "models": a.models,
                        "input_tokens": a.usage.input_tokens,
                        "output_tokens": a.usage.output_tokens,
                        "seconds": a.seconds,
                        "cost": a.cost,
                        "html": view::markdown_html(&a.answer),
                        "files": a.files.iter().map(|(p, w)| format!("{w} {p}")).collect::<Vec<_>>(),
                    })
                })
                .collect();
            shared.emit(json!({"type": "compare", "alternatives": alternatives}));
        }
        Err(e) => error(shared, &e.to_string()),
    }
}

/// `/restore`: the folder made to hold the current node's state, after the page's yes.
fn restore(app: &mut App, shared: &Shared, answers: &mpsc::Receiver<(u64, String)>) {
    restore_with(app, shared, answers, true);
}

/// The restore; `ask`: list and ask first (the offer after a move has asked already).
fn restore_with(
    app: &mut App,
    shared: &Shared,
    answers: &mpsc::Receiver<(u64, String)>,
    ask: bool,
) {
    let mut front = WebFront::new(shared, answers);
    match app.engine.restore(ask, &mut front) {
        Ok(Restored::Done { n, done, kept, .. }) => {
            say(
                shared,
                &format!("restored node [{n}]'s files: {done} changed"),
            );
            for (path, why) in kept {
                let why = match why {
                    Kept::Outside => "changed outside new".to_string(),
                    Kept::ChangedMeanwhile => "changed since the question".to_string(),
                    Kept::Failed(why) => why,
                };
                error(shared, &format!("not restored: {path} ({why})"));
            }
        }
        Ok(Restored::Matches { n }) => say(shared, &format!("the folder holds node [{n}]'s files")),
        Ok(Restored::Cancelled) => say(shared, "restore cancelled: the folder is as it was"),
        Err(e) => error(shared, &e.to_string()),
    }
}

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

/// The file a browser is opened on: a page in a folder of its own that only this user may enter
/// (0700; the file 0600), sending the browser on to `url`. Given by name on the opener's command
/// line, which every user of the machine may read (`/proc/PID/cmdline`), where the address and
/// its secret would be. Returns the folder (removed once the page has its secret) and the file.
fn launcher(url: &str) -> io::Result<(PathBuf, PathBuf)> {
    let base = env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .unwrap_or_else(env::temp_dir);
    let folder = base.join(format!("new-web-{}", uuid::Uuid::new_v4().simple()));
    // Never one already there (made by someone else to read what is put in it).
    let mut builder = platform::private_dir_builder();
    builder.recursive(false);
    builder.create(&folder)?;
    let file = folder.join("open.html");
    let page = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\n\
<meta name=\"referrer\" content=\"no-referrer\">\n\
<meta http-equiv=\"refresh\" content=\"0;url={0}\">\n<title>new web</title></head>\n\
<body><p><a href=\"{0}\">Open the page of new web</a></p></body></html>\n",
        view::escape_html(url)
    );
    let written = platform::private_file_options()
        .write(true)
        .create_new(true)
        .open(&file)
        .and_then(|mut f| f.write_all(page.as_bytes()));
    if let Err(e) = written {
        let _ = fs::remove_dir_all(&folder);
        return Err(e);
    }
    Ok((folder, file))
}

/// Opens the default browser on `target` (the launcher file, or the address when asked); one
/// that cannot be started is said, and the address is on stdout anyway. True if it started.
fn open_browser(target: &OsStr) -> bool {
    let mut command = if cfg!(target_os = "macos") {
        Command::new("open")
    } else if cfg!(windows) {
        // Not `cmd /C start`: cmd would read `&` or `^` in the path (a user's name in %TEMP%)
        // as its own syntax. Explorer hands the file to the program it opens with.
        Command::new("explorer.exe")
    } else {
        Command::new("xdg-open")
    };
    command
        .arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match command.spawn() {
        Ok(mut child) => {
            thread::spawn(move || child.wait());
            true
        }
        Err(e) => {
            eprintln!(
                "new web: no browser could be opened ({}): open the address above",
                escape::escape_controls(&e.to_string())
            );
            false
        }
    }
}
