//! Typing while a turn runs: the keys are neither echoed into the answer nor left for the next
//! prompt to misread (the terminal's Enter would arrive there as a line break). The terminal stops
//! echoing and reading by lines; a thread collects the keys; each line ended by Enter is queued,
//! to run after the turn as if typed at the prompt, and what was typed without an Enter is put on
//! the next prompt's line. A question asked meanwhile (an approval) pauses it: the line editor has
//! the terminal. Ctrl-C still interrupts (the terminal's signals stay on).

use new_sys::platform;
use new_sys::platform::SavedTerminal;
use std::io;
use std::io::ErrorKind;
use std::mem;
use std::str;
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::thread::Builder;
use std::thread::JoinHandle;
use std::time::Duration;

/// Set while another reader has the terminal (a server's question, asked from the MCP task): the
/// collecting thread leaves the keys alone.
static HELD: AtomicBool = AtomicBool::new(false);

/// Runs `ask` with the terminal to itself: the collecting thread, if any, stops reading first.
pub fn held<T>(ask: impl FnOnce() -> T) -> T {
    HELD.store(true, Ordering::SeqCst);
    // A read in progress returns within a tenth of a second (VTIME).
    thread::sleep(Duration::from_millis(150));
    let answer = ask();
    HELD.store(false, Ordering::SeqCst);
    answer
}

/// What was typed: lines ended by Enter, and the line being typed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Typed {
    pub lines: Vec<String>,
    pub partial: String,
}

#[derive(Default)]
struct Keys {
    typed: Typed,
    /// Bytes of a character not whole yet.
    pending: Vec<u8>,
    /// Inside an escape sequence (arrows and the like are not text), and its parameters.
    escape: Escape,
    params: Vec<u8>,
    /// Inside a bracketed paste: its line breaks are the text's, not Enter.
    pasting: bool,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    #[default]
    No,
    /// After ESC.
    Started,
    /// After ESC [ or ESC O: until a final byte.
    Sequence,
}

impl Keys {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match self.escape {
                Escape::Started => {
                    self.escape = match b {
                        b'[' | b'O' => Escape::Sequence,
                        // Alt-Enter: a line break inside the message.
                        b'\r' | b'\n' => {
                            self.typed.partial.push('\n');
                            Escape::No
                        }
                        _ => Escape::No,
                    };
                    continue;
                }
                Escape::Sequence => {
                    if (0x40..=0x7e).contains(&b) {
                        self.escape = Escape::No;
                        // ESC [ 200 ~ opens a paste, ESC [ 201 ~ closes it.
                        if b == b'~' {
                            match self.params.as_slice() {
                                b"200" => self.pasting = true,
                                b"201" => self.pasting = false,
                                _ => {}
                            }
                        }
                        self.params.clear();
                    } else {
                        self.params.push(b);
                    }
                    continue;
                }
                Escape::No => {}
            }
            match b {
                0x1b => self.escape = Escape::Started,
                b'\r' | b'\n' if self.pasting => self.typed.partial.push('\n'),
                b'\r' | b'\n' => {
                    let line = mem::take(&mut self.typed.partial);
                    self.pending.clear();
                    if !line.trim().is_empty() {
                        self.typed.lines.push(line);
                    }
                }
                0x7f | 0x08 => {
                    self.pending.clear();
                    self.typed.partial.pop();
                }
                // Ctrl-U: the line is dropped.
                0x15 => {
                    self.pending.clear();
                    self.typed.partial.clear();
                }
                b if b < 0x20 => {}
                b => {
                    self.pending.push(b);
                    match str::from_utf8(&self.pending) {
                        Ok(s) => {
                            self.typed.partial.push_str(s);
                            self.pending.clear();
                        }
                        Err(e) if e.error_len().is_some() => self.pending.clear(),
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

/// Collects keys while it is running (between [`TypeAhead::start`] and [`TypeAhead::finish`],
/// outside [`TypeAhead::pause`]).
#[derive(Default)]
pub struct TypeAhead {
    keys: Arc<Mutex<Keys>>,
    running: Option<Running>,
}

struct Running {
    saved: SavedTerminal,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// Asks the terminal to bracket pastes (or no longer).
fn bracketed_paste(on: bool) {
    use std::io::Write;
    let mut out = io::stdout().lock();
    let _ = out
        .write_all(if on { b"\x1b[?2004h" } else { b"\x1b[?2004l" })
        .and_then(|()| out.flush());
}

fn lock(m: &Mutex<Keys>) -> MutexGuard<'_, Keys> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TypeAhead {
    /// Starts collecting: the terminal on stdin stops echoing and reading by lines. Nothing
    /// happens when stdin is not a terminal.
    pub fn start(&mut self) {
        if self.running.is_some() {
            return;
        }
        // A read returns after a tenth of a second even with nothing typed, so the thread
        // sees that it should stop.
        let Some(saved) = SavedTerminal::raw_keys() else {
            return;
        };
        // A paste arrives bracketed: its lines are one message.
        bracketed_paste(true);
        let stop = Arc::new(AtomicBool::new(false));
        let (keys, flag) = (self.keys.clone(), stop.clone());
        let thread = Builder::new().name("type-ahead".into()).spawn(move || {
            let mut buf = [0u8; 256];
            while !flag.load(Ordering::SeqCst) {
                if HELD.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
                match platform::read_keys(&mut buf) {
                    Ok(n) if n > 0 => lock(&keys).feed(&buf[..n]),
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        });
        match thread {
            Ok(thread) => {
                self.running = Some(Running {
                    saved,
                    stop,
                    thread,
                })
            }
            // The settings found are put back as `saved` is dropped.
            Err(_) => drop(saved),
        }
    }

    /// Stops collecting for a while (the line editor asks a question); true if it was running.
    pub fn pause(&mut self) -> bool {
        let Some(r) = self.running.take() else {
            return false;
        };
        r.stop.store(true, Ordering::SeqCst);
        let _ = r.thread.join();
        bracketed_paste(false);
        // The settings found at the start are put back.
        drop(r.saved);
        true
    }

    /// Stops collecting; the lines ended by Enter. The line being typed stays (the next
    /// collection goes on with it) until [`TypeAhead::take_partial`].
    pub fn finish(&mut self) -> Vec<String> {
        self.pause();
        let mut keys = lock(&self.keys);
        keys.escape = Escape::No;
        keys.params.clear();
        keys.pasting = false;
        mem::take(&mut keys.typed.lines)
    }

    /// A line typed into a question that was no answer to it: it runs after the lines already
    /// typed, as if typed at the prompt.
    pub fn queue(&mut self, line: String) {
        lock(&self.keys).typed.lines.push(line);
    }

    /// Keys typed meanwhile that a question read but did not take as its answer: kept as if
    /// collected here (a line ended by Enter runs after the turn, the rest waits on the prompt).
    pub fn feed(&mut self, bytes: &[u8]) {
        lock(&self.keys).feed(bytes);
    }

    /// The line typed without an Enter, for the prompt's line.
    pub fn take_partial(&mut self) -> String {
        let mut keys = lock(&self.keys);
        keys.pending.clear();
        mem::take(&mut keys.typed.partial)
    }
}

impl Drop for TypeAhead {
    fn drop(&mut self) {
        self.pause();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_lines_edited_as_typed_without_escape_sequences() {
        let mut k = Keys::default();
        k.feed("héllo wrld".as_bytes());
        // Backspace over `wrld` less one, then retype; an arrow key is no text.
        k.feed(b"\x7f\x7f\x7forld\x1b[A\r");
        k.feed(b"second\x1b\rline\r\r");
        k.feed(b"gone\x15kept");
        // A paste's line breaks are the message's.
        let mut p = Keys::default();
        p.feed(b"\x1b[200~one\rtwo\x1b[201~ three\r");
        assert_eq!(p.typed.lines, ["one\ntwo three"]);
        // A character split across reads.
        let e = "é".as_bytes();
        k.feed(&e[..1]);
        k.feed(&e[1..]);
        assert_eq!(
            k.typed,
            Typed {
                lines: vec!["héllo world".into(), "second\nline".into()],
                partial: "kepté".into(),
            }
        );
    }
}
