//! Where input lines come from: the line editor on a terminal, standard input otherwise. Commands
//! that ask a question (`/delete`'s confirmation, `/edit`'s new text) read their answer from the
//! same place, so piped input answers them with its next line.

use new_core::escape;
use new_sys::platform;
use std::io::{BufRead, StdinLock, Write};
use std::path::PathBuf;
use std::str;

use rustyline::error::ReadlineError;
use rustyline::history::{FileHistory, History};
use rustyline::{Cmd, CompletionType, EditMode, Editor, KeyCode, KeyEvent, Modifiers};

use super::editor::{ReplHelper, join_continuations};
use super::output::Output;
use new_core::conversation::Store;
use new_core::fs::atomic;
use std::io;
use std::io::Lines;
use std::mem;
use std::path::Path;

/// The answer to a question of one key ([`Reader::key`]).
pub enum Key {
    /// The key typed, lower case as typed (`esc` for Esc, empty for Enter); a whole line when
    /// the input is piped.
    Line(String),
    /// What came was no key: kept for the prompt; ask again.
    Kept,
    Interrupted,
    Eof,
}

pub enum ReadOutcome {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    Eof,
}

pub enum Reader {
    Editor {
        editor: Box<Editor<ReplHelper, FileHistory>>,
        history: Option<PathBuf>,
        /// What is typed while a turn runs.
        typeahead: super::typeahead::TypeAhead,
        /// A question paused it: it goes on at [`Reader::resume_typeahead`].
        paused: bool,
    },
    Piped(Lines<StdinLock<'static>>),
    /// One-shot mode: there is nobody to ask.
    Closed,
}

impl Reader {
    pub fn editor(
        store: Store,
        color: bool,
        skills: super::editor::SkillNames,
        mcp: super::editor::McpSlot,
    ) -> rustyline::Result<Reader> {
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .completion_type(CompletionType::List)
            .edit_mode(EditMode::Emacs)
            .max_history_size(10_000)?
            .build();
        let mut editor: Editor<ReplHelper, FileHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(ReplHelper {
            store,
            color,
            skills,
            mcp,
        }));
        editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
        editor.bind_sequence(KeyEvent::ctrl('J'), Cmd::Newline);
        let history = history_path();
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        Ok(Reader::Editor {
            editor: Box::new(editor),
            history,
            typeahead: Default::default(),
            paused: false,
        })
    }

    pub fn piped() -> Reader {
        Reader::Piped(io::stdin().lock().lines())
    }

    /// A way for other threads to print above the prompt while the line editor waits (None
    /// without a terminal).
    pub fn external_printer(&mut self) -> Option<Box<dyn rustyline::ExternalPrinter + Send>> {
        match self {
            Reader::Editor { editor, .. } => editor
                .create_external_printer()
                .ok()
                .map(|p| Box::new(p) as Box<dyn rustyline::ExternalPrinter + Send>),
            _ => None,
        }
    }

    /// A turn (or a command) starts: keys typed from now on are collected, not echoed.
    pub fn begin_typeahead(&mut self) {
        if let Reader::Editor { typeahead, .. } = self {
            typeahead.start();
        }
    }

    /// It ended: the lines typed meanwhile (ended by Enter).
    pub fn end_typeahead(&mut self) -> Vec<String> {
        match self {
            Reader::Editor {
                typeahead, paused, ..
            } => {
                *paused = false;
                typeahead.finish()
            }
            _ => Vec::new(),
        }
    }

    /// Collecting goes on after the questions that paused it.
    pub fn resume_typeahead(&mut self) {
        if let Reader::Editor {
            typeahead, paused, ..
        } = self
            && mem::take(paused)
        {
            typeahead.start();
        }
    }

    /// A line typed into a question that was no answer to it (the question came up while the
    /// user typed ahead): kept for the prompt, in order. Piped input reads questions from its
    /// next line, as it always has, so nothing is kept there.
    pub fn keep_for_the_prompt(&mut self, line: String) -> bool {
        match self {
            Reader::Editor { typeahead, .. } => {
                typeahead.queue(line);
                true
            }
            _ => false,
        }
    }

    /// What was typed without an Enter, for the next prompt's line.
    pub fn typed_ahead(&mut self) -> String {
        match self {
            Reader::Editor { typeahead, .. } => typeahead.take_partial(),
            _ => String::new(),
        }
    }

    /// Reads the answer to a question of one key (one of `keys`, in any case; Enter, Esc and
    /// Ctrl-C answer too) when the terminal allows it; otherwise (piped input, no terminal) the
    /// next line, as [`Reader::read`] does. What was typed ahead before the question, what comes
    /// at once with more than one key (a paste, fast typing) and a character none of `keys` is
    /// no answer: it is kept for the prompt, as if typed there ([`Key::Kept`]).
    pub fn key(&mut self, prompt: &str, keys: &str, out: &Output) -> io::Result<Key> {
        let Reader::Editor {
            typeahead, paused, ..
        } = self
        else {
            return Ok(match self.read(prompt, "", false, out)? {
                ReadOutcome::Line(line) => Key::Line(line),
                ReadOutcome::Interrupted => Key::Interrupted,
                ReadOutcome::Eof => Key::Eof,
            });
        };
        super::spinner::hush_any();
        if typeahead.pause() {
            *paused = true;
        }
        // The question shows once what was typed before it is set apart.
        let ask = || {
            let mut stdout = io::stdout().lock();
            let _ = stdout
                .write_all(prompt.as_bytes())
                .and_then(|()| stdout.flush());
        };
        let Some(read) = platform::one_key(ask) else {
            // No terminal to read keys from after all: the line editor asks.
            return Ok(match self.read(prompt, "", false, out)? {
                ReadOutcome::Line(line) => Key::Line(line),
                ReadOutcome::Interrupted => Key::Interrupted,
                ReadOutcome::Eof => Key::Eof,
            });
        };
        let read = read?;
        let Reader::Editor { typeahead, .. } = self else {
            unreachable!("an editor above")
        };
        if !read.ahead.is_empty() {
            typeahead.feed(&read.ahead);
        }
        // A key and the Enter after it are that key.
        let key = match read.key.as_slice() {
            [k @ .., b'\r' | b'\n'] if !k.is_empty() => k,
            k => k,
        };
        let answer = match key {
            [] => Key::Eof,
            [0x03] => Key::Interrupted,
            [0x04] => Key::Eof,
            [0x1b] => Key::Line("esc".into()),
            [b'\r' | b'\n'] => Key::Line(String::new()),
            _ => match str::from_utf8(key) {
                Ok(text)
                    if text.chars().count() == 1
                        && text.chars().all(|c| keys.contains(c.to_ascii_lowercase())) =>
                {
                    Key::Line(text.to_string())
                }
                // More than a key, another character, or no character (an arrow): kept as
                // typed.
                _ => {
                    typeahead.feed(&read.key);
                    Key::Kept
                }
            },
        };
        // The key answered shows after the question, and the line ends.
        let shown = match &answer {
            Key::Line(k) if k == "esc" => "Esc".to_string(),
            Key::Line(k) => escape::escape_controls(k),
            Key::Interrupted => "^C".to_string(),
            _ => String::new(),
        };
        println!("{shown}");
        Ok(answer)
    }

    pub fn is_piped(&self) -> bool {
        matches!(self, Reader::Piped(_))
    }

    /// Reads one entry; `initial` pre-fills the line editor (ignored for piped input). Only
    /// entries to `remember` go into the input history: not the answers to yes/no questions.
    pub fn read(
        &mut self,
        prompt: &str,
        initial: &str,
        remember: bool,
        out: &Output,
    ) -> io::Result<ReadOutcome> {
        match self {
            Reader::Editor {
                editor,
                history,
                typeahead,
                paused,
            } => {
                // A question during a turn: the line editor has the terminal, until whoever
                // asked is done asking (`resume_typeahead`); no waiting line over it.
                super::spinner::hush_any();
                if typeahead.pause() {
                    *paused = true;
                }
                let read = editor.readline_with_initial(prompt, (initial, ""));
                match read {
                    Ok(line) => {
                        if remember && !line.trim().is_empty() {
                            let _ = editor.add_history_entry(line.as_str());
                            save_history(editor, history.as_deref(), out);
                        }
                        Ok(ReadOutcome::Line(join_continuations(&line)))
                    }
                    Err(ReadlineError::Interrupted) => Ok(ReadOutcome::Interrupted),
                    Err(ReadlineError::Eof) => Ok(ReadOutcome::Eof),
                    Err(ReadlineError::Io(e)) => Err(e),
                    Err(e) => Err(io::Error::other(e)),
                }
            }
            Reader::Piped(lines) => {
                // A line ending in `\` continues on the next one.
                let mut entry = String::new();
                loop {
                    match lines.next() {
                        Some(line) => {
                            let line = line?;
                            match line.strip_suffix('\\') {
                                Some(head) => {
                                    entry.push_str(head);
                                    entry.push('\n');
                                }
                                None => {
                                    entry.push_str(&line);
                                    return Ok(ReadOutcome::Line(entry));
                                }
                            }
                        }
                        None if entry.is_empty() => return Ok(ReadOutcome::Eof),
                        None => return Ok(ReadOutcome::Line(entry)),
                    }
                }
            }
            Reader::Closed => Ok(ReadOutcome::Eof),
        }
    }
}

/// Appends the new entries to the history file, then reloads it, so that several `new` processes
/// share one history without overwriting each other's.
fn save_history(editor: &mut Editor<ReplHelper, FileHistory>, path: Option<&Path>, out: &Output) {
    let Some(path) = path else { return };
    if let Some(dir) = path.parent() {
        let _ = atomic::create_private_dir(dir);
    }
    // What the user typed may hold secrets: the file is theirs alone, created so before the
    // editor writes to it.
    let _ = atomic::private_options()
        .append(true)
        .create(true)
        .open(path);
    if let Err(e) = editor.append_history(path) {
        out.warn(&super::text::tr(
            out.lang,
            "history_not_saved",
            &[("path", &path.display()), ("error", &e)],
        ));
        return;
    }
    let _ = editor.history_mut().clear();
    let _ = editor.load_history(path);
}

/// The input history file, shared by every project.
fn history_path() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("new").join("history.txt"))
}
