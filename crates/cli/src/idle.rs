//! Waiting at an idle prompt for the user's first key or for something `new` goes on with by
//! itself (a background task's answer, with `subagent.auto_continue`). The line editor cannot be
//! woken without a key, so it starts only once one is typed: until then the prompt is drawn here
//! and the terminal gives keys one at a time without echo, and nothing typed is read here (the
//! line editor reads it, as typed).

use std::io;
use std::io::Write;
use std::thread;
use std::time::Duration;

use new_sys::platform;
use new_sys::platform::SavedTerminal;

/// How an idle wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// A key was typed (or the terminal cannot be waited on): the line editor takes over.
    Key,
    /// `woken` said so before any key: the prompt's line is erased.
    Woken,
}

/// How often the wait looks at the terminal and at `woken`.
const TICK: Duration = Duration::from_millis(50);

/// Shows `prompt` and waits for a key or for `woken` to say true.
pub fn wait(prompt: &str, woken: &dyn Fn() -> bool) -> Waited {
    if !platform::KEYS_CAN_BE_AWAITED {
        return Waited::Key;
    }
    let Some(raw) = SavedTerminal::keys_as_typed() else {
        return Waited::Key;
    };
    // The output is locked only to write: a thread that says something meanwhile is not blocked.
    let say = |text: &str| {
        let mut out = io::stdout().lock();
        let _ = write!(out, "{text}").and_then(|()| out.flush());
    };
    say(prompt);
    // Input, or its end (a hangup: the line editor then sees the end and `new` exits).
    let waited = loop {
        if platform::stdin_has_input() {
            break Waited::Key;
        }
        if woken() {
            break Waited::Woken;
        }
        thread::sleep(TICK);
    };
    // The line editor draws its own prompt; a woken prompt leaves no trace.
    say("\r\x1b[2K");
    drop(raw);
    waited
}
