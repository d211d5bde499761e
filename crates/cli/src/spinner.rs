//! While a turn waits with nothing to show (the model thinking before its first token, a tool
//! running, a compaction, MCP servers starting), one dim line says what it waits for and for how
//! long (`⠹ waiting for local · 3 s`, `⠼ bash · 12 s`); the first output erases it. Only on a
//! terminal, never in pipes; `NEW_SPINNER=0` turns it off.

use std::env;
use std::io;
use std::io::{IsTerminal, Write};
use std::mem;
use std::sync::MutexGuard;
use std::sync::Weak;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::thread::Builder;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a wait goes unshown (a quick tool or a fast server draws nothing).
const AFTER: Duration = Duration::from_millis(400);
const EVERY: Duration = Duration::from_millis(100);
const FRAMES: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// The lines of a board, made afresh at each frame (the frame's character given).
pub type Board = Arc<dyn Fn(char) -> Vec<String> + Send + Sync>;

#[derive(Default)]
struct State {
    /// What is waited for, and since when; None: nothing shows.
    waiting: Option<(String, Instant)>,
    /// A board of lines shows instead (answers side by side), from when it was set.
    board: Option<(Board, Instant)>,
    /// The rows on the screen (to be erased before anything else is written).
    shown: usize,
    frame: usize,
}

/// Takes back `rows` rows drawn from the start of the first to the end of the last.
fn erase(out: &mut impl Write, rows: usize) -> io::Result<()> {
    match rows {
        0 => Ok(()),
        1 => write!(out, "\r\x1b[2K"),
        n => write!(out, "\r\x1b[{}A\x1b[J", n - 1),
    }
}

/// `line` cut to one row of the terminal (or `\r` would not take it all back), dimmed when asked.
fn one_row(mut line: String, dim: bool) -> String {
    let width = super::markdown::terminal_layout(false).width.max(10) - 1;
    if let Some((at, _)) = line.char_indices().nth(width) {
        line.truncate(at);
    }
    if dim {
        format!("\x1b[2m{line}\x1b[0m")
    } else {
        line
    }
}

pub struct Spinner {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The spinner showing now, if any: whatever else writes to the terminal (a question, a line
/// from another thread) hushes it first.
static SHOWING: Mutex<Option<Weak<Mutex<State>>>> = Mutex::new(None);

/// Takes the waiting line off the screen, whoever drew it; the wait goes on unshown until the
/// next event says what is waited for.
pub fn hush_any() {
    let current = SHOWING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(Weak::upgrade);
    if let Some(state) = current {
        let mut s = lock(&state);
        s.waiting = None;
        s.board = None;
        let rows = mem::take(&mut s.shown);
        if rows > 0 {
            let mut out = io::stdout().lock();
            let _ = erase(&mut out, rows).and_then(|()| out.flush());
        }
    }
}

impl Spinner {
    /// A spinner for stdout when it is a terminal (None otherwise). `dim`: the line is dimmed.
    pub fn for_stdout(dim: bool) -> Option<Spinner> {
        if !io::stdout().is_terminal() || env::var_os("NEW_SPINNER").is_some_and(|v| v == "0") {
            return None;
        }
        let state: Arc<Mutex<State>> = Default::default();
        *SHOWING.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(&state));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (state.clone(), stop.clone());
            Builder::new()
                .name("spinner".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        thread::park_timeout(EVERY);
                        let mut s = lock(&state);
                        let since = match (&s.board, &s.waiting) {
                            (Some((_, since)), _) | (None, Some((_, since))) => *since,
                            (None, None) => continue,
                        };
                        let waited = since.elapsed();
                        if waited < AFTER || stop.load(Ordering::SeqCst) {
                            continue;
                        }
                        s.frame = (s.frame + 1) % FRAMES.len();
                        let frame = FRAMES[s.frame];
                        let lines = match (&s.board, &s.waiting) {
                            (Some((board, _)), _) => board(frame),
                            (None, Some((what, _))) => {
                                vec![format!("{frame} {what} · {} s", waited.as_secs())]
                            }
                            (None, None) => continue,
                        };
                        // A board never takes more rows than the screen has (they could not
                        // all be taken back).
                        let height = super::markdown::terminal_layout(false).height.max(2) - 1;
                        let text = lines
                            .into_iter()
                            .take(height)
                            .map(|line| one_row(line, dim))
                            .collect::<Vec<_>>();
                        let mut out = io::stdout().lock();
                        let _ = erase(&mut out, s.shown)
                            .and_then(|()| write!(out, "{}", text.join("\r\n")))
                            .and_then(|()| out.flush());
                        s.shown = text.len();
                    }
                })
                .ok()
        };
        Some(Spinner {
            state,
            stop,
            thread,
        })
    }

    /// Starts showing (after a moment) that `what` is waited for.
    pub fn wait(&self, what: String) {
        let mut s = lock(&self.state);
        s.waiting = Some((what, Instant::now()));
    }

    /// Shows `board`'s lines (after a moment), drawn again at each frame until hushed: the
    /// progress of answers side by side. Kept, with when it began, when it shows already.
    pub fn board(&self, board: &Board) {
        let mut s = lock(&self.state);
        if s.board.is_none() {
            s.board = Some((board.clone(), Instant::now()));
        }
    }

    /// Nothing is waited for any more: the line goes (before the caller writes anything).
    pub fn hush(&self) {
        let mut s = lock(&self.state);
        s.waiting = None;
        s.board = None;
        let rows = mem::take(&mut s.shown);
        if rows > 0 {
            let mut out = io::stdout().lock();
            let _ = erase(&mut out, rows).and_then(|()| out.flush());
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.hush();
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
