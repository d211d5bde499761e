//! The rustyline helper: Tab completes commands and conversation ids; a line ending in `\` continues
//! on the next one.

use std::borrow::Cow;

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use super::commands::{COMMANDS, complete_names};
use crate::session::Store;

pub struct ReplHelper {
    pub store: Store,
    /// Colour the prompt (only on a terminal, never with NO_COLOR).
    pub color: bool,
    /// The skills `/<name>` runs, completed like commands.
    pub skills: SkillNames,
}

/// The names of the skills, kept current by the REPL as skills are reloaded.
pub type SkillNames = std::sync::Arc<std::sync::RwLock<Vec<String>>>;

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        if !before.starts_with('/') {
            return Ok((pos, Vec::new()));
        }
        let pair = |s: &str| Pair {
            display: s.to_string(),
            replacement: s.to_string(),
        };
        match before.split_once(' ') {
            None => {
                let mut names: Vec<String> = complete_names(before)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                let skills = self.skills.read().unwrap_or_else(|e| e.into_inner());
                let extra: Vec<String> = skills
                    .iter()
                    .map(|s| format!("/{s}"))
                    .filter(|s| s.starts_with(before) && !names.contains(s))
                    .collect();
                names.extend(extra);
                Ok((0, names.iter().map(|n| pair(&format!("{n} "))).collect()))
            }
            Some((command, arg)) => {
                let takes_id = COMMANDS
                    .iter()
                    .any(|c| c.takes_conversation && c.names.contains(&command));
                if !takes_id || arg.contains(' ') {
                    return Ok((pos, Vec::new()));
                }
                let mut ids: Vec<String> = self
                    .store
                    .ids()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|id| id.starts_with(arg))
                    .collect();
                ids.sort();
                Ok((command.len() + 1, ids.iter().map(|id| pair(id)).collect()))
            }
        }
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    // The prompt is given plain, so that the editor measures its width right, and coloured here.
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        if self.color {
            Cow::Owned(format!("\x1b[32m{prompt}\x1b[0m"))
        } else {
            Cow::Borrowed(prompt)
        }
    }
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        if ctx.input().ends_with('\\') {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

impl Helper for ReplHelper {}

/// Turns the `\`-newline continuations of a multi-line entry into plain newlines.
pub fn join_continuations(input: &str) -> String {
    input.replace("\\\n", "\n")
}
