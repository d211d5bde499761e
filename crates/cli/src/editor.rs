//! The rustyline helper: Tab completes commands and conversation ids; a line ending in `\` continues
//! on the next one.

use std::borrow::Cow;

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use super::commands::{COMMANDS, complete_names};
use new_core::conversation::Store;
use new_core::escape;
use new_core::mcp;
use new_core::mcp::Manager;
use new_core::mcp::Status;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::RwLock;

pub struct ReplHelper {
    pub store: Store,
    /// Colour the prompt (only on a terminal, never with NO_COLOR).
    pub color: bool,
    /// The skills `/<name>` runs, completed like commands.
    pub skills: SkillNames,
    /// The MCP servers, once started: their prompts complete as `/mcp__server__prompt`, their
    /// resources as `@server:uri` anywhere in a line.
    pub mcp: McpSlot,
}

/// Where the REPL puts the MCP manager once it has one (after the editor is made).
pub type McpSlot = Arc<OnceLock<Arc<Manager>>>;

/// A server's word is offered only when it can be typed back as one word and shown as is (no
/// control character, no bidirectional override that would make it look like another).
fn plain_word(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(char::is_whitespace) && escape::escape_controls(s) == s
}

/// The `@server:uri` of every resource the servers listed, starting with `word`.
fn resource_candidates(statuses: &[Status], word: &str) -> Vec<String> {
    let mut out: Vec<String> = statuses
        .iter()
        .flat_map(|s| {
            s.offers
                .resources
                .iter()
                .map(move |uri| format!("@{}:{uri}", s.name))
        })
        .filter(|c| c.starts_with(word) && plain_word(c))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `/mcp__server__prompt` commands of the servers' prompts, starting with `prefix`.
fn prompt_candidates(statuses: &[Status], prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = statuses
        .iter()
        .flat_map(|s| {
            s.offers
                .prompts
                .iter()
                .map(move |p| format!("/{}", mcp::exposed_name(&s.name, &p.name)))
        })
        .filter(|c| c.starts_with(prefix))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The names of the skills, kept current by the REPL as skills are reloaded.
pub type SkillNames = Arc<RwLock<Vec<String>>>;

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let pair = |s: &str| Pair {
            display: s.to_string(),
            replacement: s.to_string(),
        };
        let statuses = || self.mcp.get().map(|m| m.statuses()).unwrap_or_default();
        let word_start = before.rfind(char::is_whitespace).map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
        if before[word_start..].starts_with('@') {
            let found = resource_candidates(&statuses(), &before[word_start..]);
            return Ok((word_start, found.iter().map(|c| pair(c)).collect()));
        }
        if !before.starts_with('/') {
            return Ok((pos, Vec::new()));
        }
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
                let prompts: Vec<String> = prompt_candidates(&statuses(), before)
                    .into_iter()
                    .filter(|p| !names.contains(p))
                    .collect();
                names.extend(prompts);
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

#[cfg(test)]
mod tests {
    use super::*;
    use new_core::layers::Origin;
    use new_core::mcp::{Offers, Prompt, State, Status};

    fn server(name: &str, resources: &[&str], prompts: &[&str]) -> Status {
        Status {
            name: name.into(),
            state: State::Ready,
            tools: 0,
            offers: Offers {
                resources: resources.iter().map(|r| r.to_string()).collect(),
                prompts: prompts
                    .iter()
                    .map(|p| Prompt {
                        name: p.to_string(),
                        arguments: Vec::new(),
                    })
                    .collect(),
            },
            log: Default::default(),
            origin: Origin::User,
            server: String::new(),
        }
    }

    #[test]
    fn resources_complete_as_at_server_uri_and_odd_ones_are_left_out() {
        let servers = [
            server(
                "docs",
                &[
                    "mem://b",
                    "mem://a",
                    "has space",
                    "esc\x1b[2J",
                    "mem://\u{202e}gpj.exe",
                ],
                &[],
            ),
            server("db", &["pg://t"], &[]),
        ];
        assert_eq!(
            resource_candidates(&servers, "@"),
            ["@db:pg://t", "@docs:mem://a", "@docs:mem://b"]
        );
        assert_eq!(
            resource_candidates(&servers, "@docs:mem://b"),
            ["@docs:mem://b"]
        );
        assert!(resource_candidates(&servers, "@x").is_empty());
    }

    #[test]
    fn prompts_complete_as_commands_with_their_exposed_names() {
        let servers = [server("docs", &[], &["review", "sum up"])];
        assert_eq!(
            prompt_candidates(&servers, "/mcp"),
            ["/mcp__docs__review", "/mcp__docs__sum_up"]
        );
        assert_eq!(
            prompt_candidates(&servers, "/mcp__docs__r"),
            ["/mcp__docs__review"]
        );
        assert!(prompt_candidates(&servers, "/tree").is_empty());
    }
}
