//! While a turn waits with nothing to show (the model thinking before its first token, a tool
//! running, a compaction, MCP servers starting), one dim line says what it waits for and for how
//! long (`⠹ waiting for local · 3 s`, `⠼ bash · 12 s`); the first output erases it. Only on a
//! terminal, never in pipes; `NEW_SPINNER=0` turns it off.

use std::env;
use std::io;
use std::io::{IsTerminal, Write};
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

#[derive(Default)]
struct State {
    /// What is waited for, and since when; None: nothing shows.
    waiting: Option<(String, Instant)>,
    /// The line is on the screen (to be erased before anything else is written).
    shown: bool,
    frame: usize,
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
        if s.shown {
            s.shown = false;
            let mut out = io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K").and_then(|()| out.flush());
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
                        let Some((what, since)) = s.waiting.clone() else {
                            continue;
                        };
                        let waited = since.elapsed();
                        if waited < AFTER || stop.load(Ordering::SeqCst) {
                            continue;
                        }
                        s.frame = (s.frame + 1) % FRAMES.len();
                        let mut line =
                            format!("{} {what} · {} s", FRAMES[s.frame], waited.as_secs());
                        // One row, or `\r` would not take it all back.
                        let width = super::markdown::terminal_layout(false).width.max(10) - 1;
                        if let Some((at, _)) = line.char_indices().nth(width) {
                            line.truncate(at);
                        }
                        let line = if dim {
                            format!("\x1b[2m{line}\x1b[0m")
                        } else {
                            line
                        };
                        let mut out = io::stdout().lock();
                        let _ = write!(out, "\r\x1b[2K{line}").and_then(|()| out.flush());
                        s.shown = true;
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

    /// Nothing is waited for any more: the line goes (before the caller writes anything).
    pub fn hush(&self) {
        let mut s = lock(&self.state);
        s.waiting = None;
        if s.shown {
            s.shown = false;
            let mut out = io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K").and_then(|()| out.flush());
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
