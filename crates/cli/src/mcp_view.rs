//! `/mcp`: the MCP servers, their state, tools and log; `/mcp restart NAME`. `/hooks`: the hooks.
//! `/agents`: the subagent roles.

use super::repl::{App, interruptible};
use new_core::agent::tasks::TaskState;
use new_core::agent::tasks::TaskView;
use new_core::config::Lang;
use new_core::escape;
use new_core::mcp;
use new_core::mcp::Manager;
use new_core::mcp::Prompt;
use new_core::mcp::elicit::Answer;
use new_core::mcp::elicit::Elicitor;
use new_core::mcp::elicit::Form;
use new_core::mcp::oauth::TokenStore;
use new_sys::platform;
use std::fmt::Display;
use std::io;
use std::mem;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use tokio::task;

/// The most of one resource's contents a message takes (`@server:uri`).
const MAX_RESOURCE_BYTES: usize = 256 * 1024;

/// The `@server:uri` words of a message whose server is one of `servers`: (server, uri), a
/// sentence's `,.;!?` after the URI left out.
pub(super) fn resource_mentions<'t>(text: &'t str, servers: &[String]) -> Vec<(&'t str, &'t str)> {
    text.split_whitespace()
        .filter_map(|word| word.strip_prefix('@')?.split_once(':'))
        // A sentence's punctuation after the word is not the URI's.
        .map(|(server, uri)| (server, uri.trim_end_matches([',', '.', ';', '!', '?'])))
        .filter(|(server, uri)| !uri.is_empty() && servers.iter().any(|s| s == server))
        .collect()
}

/// A prompt's arguments from what followed its command: in the order the prompt lists them,
/// a word each, the last taking the rest of the line. Err names a required one missing.
pub(super) fn prompt_arguments(
    prompt: &Prompt,
    args: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut out = serde_json::Map::new();
    let mut rest = args.trim();
    for (i, (name, required)) in prompt.arguments.iter().enumerate() {
        let value = if i + 1 == prompt.arguments.len() {
            mem::take(&mut rest)
        } else {
            let (word, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            rest = after.trim_start();
            word
        };
        if value.is_empty() {
            if *required {
                return Err(name.clone());
            }
            continue;
        }
        out.insert(name.clone(), serde_json::Value::String(value.to_string()));
    }
    Ok(out)
}

impl App {
    /// A message with the contents of each `@server:uri` it names appended (read from the
    /// server, so the stored message holds them and its branch stands on its own). None, with
    /// the reason said, when one cannot be read: then nothing is sent.
    pub(super) fn with_resources(&mut self, text: &str) -> Option<String> {
        let Some(manager) = self.engine.tools.source::<Manager>() else {
            return Some(text.to_string());
        };
        let servers: Vec<String> = manager.statuses().into_iter().map(|s| s.name).collect();
        let mentions = resource_mentions(text, &servers);
        if mentions.is_empty() {
            return Some(text.to_string());
        }
        let mut out = text.to_string();
        for (server, uri) in mentions {
            let read = interruptible(
                &self.runtime,
                &self.engine.busy,
                &mut self.engine.interrupts,
                manager.read_resource(server, uri, MAX_RESOURCE_BYTES),
            );
            match read {
                Some(Ok(contents)) => out.push_str(&format!(
                    "\n\n<mcp_resource server=\"{server}\" uri=\"{uri}\">\n{contents}\n</mcp_resource>"
                )),
                Some(Err(why)) => {
                    self.out.error(&escape::escape_controls(&self.tr(
                        "mcp_resource_unread",
                        &[("why", &why)],
                    )));
                    return None;
                }
                None => {
                    self.out.warn(&self.tr("interrupted", &[]));
                    return None;
                }
            }
        }
        Some(out)
    }

    /// `/mcp__server__prompt ARGS`: the server's prompt, filled with ARGS, sent as a message.
    /// False when no server offers a prompt of that command.
    pub(super) fn run_mcp_prompt(&mut self, command: &str, args: &str) -> bool {
        let Some(manager) = self.engine.tools.source::<Manager>() else {
            return false;
        };
        let found = interruptible(
            &self.runtime,
            &self.engine.busy,
            &mut self.engine.interrupts,
            manager.prompt_for(command),
        );
        let Some(Some((server, prompt))) = found else {
            return false;
        };
        let arguments = match prompt_arguments(&prompt, args) {
            Ok(a) => a,
            Err(missing) => {
                let usage: Vec<String> = prompt
                    .arguments
                    .iter()
                    .map(|(n, required)| {
                        if *required {
                            n.clone()
                        } else {
                            format!("[{n}]")
                        }
                    })
                    .collect();
                self.out.error(&escape::escape_controls(&self.tr(
                    "mcp_prompt_needs",
                    &[
                        ("name", &missing),
                        ("usage", &format!("/{command} {}", usage.join(" "))),
                    ],
                )));
                return true;
            }
        };
        let got = interruptible(
            &self.runtime,
            &self.engine.busy,
            &mut self.engine.interrupts,
            manager.get_prompt(&server, &prompt.name, arguments),
        );
        match got {
            Some(Ok(text)) => {
                self.chat(&text);
            }
            Some(Err(why)) => self.out.error(&escape::escape_controls(&why)),
            None => self.out.warn(&self.tr("interrupted", &[])),
        }
        true
    }

    pub(super) fn mcp_command(&mut self, args: &str) {
        let words: Vec<&str> = args.split_whitespace().collect();
        let Some(manager) = self.engine.tools.source::<Manager>() else {
            return self.out.say(&self.tr("mcp_none", &[]));
        };
        match words.as_slice() {
            [] => {
                manager.start();
                let statuses = manager.statuses();
                if statuses.is_empty() {
                    return self.out.say(&self.tr("mcp_none", &[]));
                }
                for s in statuses {
                    let origin = s.origin.label();
                    let mut state = mcp::describe(&s.state);
                    if !s.server.is_empty() {
                        state = format!("{state} ({})", s.server);
                    }
                    // A ready server is asked whether it still answers.
                    match self.runtime.block_on(manager.ping(&s.name)) {
                        Some(Ok(took)) => state = format!("{state}, ping {} ms", took.as_millis()),
                        Some(Err(why)) => state = format!("{state}, not answering ping: {why}"),
                        None => {}
                    }
                    self.out.say(&escape::escape_controls(&self.tr(
                        "mcp_row",
                        &[
                            ("name", &s.name),
                            ("origin", &origin),
                            ("state", &state),
                            ("tools", &s.tools),
                            ("log", &s.log.display()),
                        ],
                    )));
                    // What it offers besides tools, by name (the server's words, escaped).
                    let prompts: Vec<String> = s
                        .offers
                        .prompts
                        .iter()
                        .map(|p| mcp::exposed_name(&s.name, &p.name))
                        .map(|c| format!("/{c}"))
                        .collect();
                    for (resources, names) in [(true, &s.offers.resources), (false, &prompts)] {
                        if names.is_empty() {
                            continue;
                        }
                        let mut list = names
                            .iter()
                            .take(10)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ");
                        if names.len() > 10 {
                            list.push_str(&format!(", … (+{})", names.len() - 10));
                        }
                        let args: [(&str, &dyn Display); 2] =
                            [("n", &names.len()), ("list", &list)];
                        let line = if resources {
                            self.tr("mcp_resources", &args)
                        } else {
                            self.tr("mcp_prompts", &args)
                        };
                        self.out.say(&escape::escape_controls(&line));
                    }
                }
            }
            ["login", name] | ["logout", name] => {
                let Some(store) = self.engine.layers.user.as_deref().map(TokenStore::in_dir) else {
                    return self.out.error(&self.tr("mcp_no_token_store", &[]));
                };
                let shown = escape::escape_controls(name);
                let removed = match store.remove(name) {
                    Ok(removed) => removed,
                    Err(e) => {
                        return self.out.error(&escape::escape_controls(&e.to_string()));
                    }
                };
                if words[0] == "logout" {
                    if removed {
                        self.out.say(&self.tr(
                            "mcp_logged_out",
                            &[("name", &shown), ("file", &store.path().display())],
                        ));
                    } else {
                        self.out
                            .say(&self.tr("mcp_not_logged_in", &[("name", &shown)]));
                    }
                    // The connection drops the token it holds.
                    self.runtime.block_on(manager.restart(name));
                } else if self.runtime.block_on(manager.restart(name)) {
                    self.out
                        .say(&self.tr("mcp_login_started", &[("name", &shown)]));
                } else {
                    self.out
                        .error(&self.tr("mcp_no_such_server", &[("name", &shown)]));
                }
            }
            ["restart", name] => {
                if self.runtime.block_on(manager.restart(name)) {
                    self.out.say(&self.tr("mcp_restarting", &[("name", name)]));
                } else {
                    self.out.error(&self.tr(
                        "mcp_no_such_server",
                        &[("name", &escape::escape_controls(name))],
                    ));
                }
            }
            _ => self
                .out
                .error(&self.tr("mcp_usage", &[("args", &escape::escape_controls(args))])),
        }
    }
}

impl App {
    /// `/hooks`: each entry with its event, how often it fired and failed, and whether it runs.
    pub(super) fn hooks_command(&mut self) {
        let Some(hooks) = self.engine.hooks.as_ref() else {
            return self.out.say(&self.tr("hooks_none", &[]));
        };
        for s in hooks.statuses() {
            let origin = s.origin.label();
            let note = if s.runs {
                String::new()
            } else if !hooks.enabled() {
                " · off (hook.enabled is false)".to_string()
            } else {
                " · not trusted: a project's hook runs once you trust it".to_string()
            };
            self.out.say(&escape::escape_controls(&self.tr(
                "hooks_row",
                &[
                    ("name", &s.name),
                    ("origin", &origin),
                    ("event", &s.event),
                    ("fired", &s.fired),
                    ("failed", &s.failed),
                    ("note", &note),
                ],
            )));
        }
    }
}

impl App {
    /// `/agents`: each subagent role, where it was read, its tools.
    pub(super) fn agents_command(&mut self) {
        let Some(subagents) = self.engine.subagents.as_ref() else {
            return self.out.say(&self.tr("agents_off", &[]));
        };
        for d in &subagents.defs {
            let tools = match &d.tools {
                Some(list) => list.join(", "),
                None => self.tr("agents_every_tool", &[]),
            };
            self.out.say(&escape::escape_controls(&self.tr(
                "agents_row",
                &[
                    ("name", &d.name),
                    ("source", &d.source),
                    ("description", &d.description),
                    ("tools", &tools),
                ],
            )));
        }
    }

    /// `/tasks` (every subagent task of this program run) and `/tasks stop ID`.
    pub(super) fn tasks_command(&mut self, args: &str) {
        let Some(subagents) = self.engine.subagents.as_ref() else {
            return self.out.say(&self.tr("agents_off", &[]));
        };
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [] => {
                let tasks = subagents.tasks.list();
                if tasks.is_empty() {
                    return self.out.say(&self.tr("tasks_none", &[]));
                }
                for t in tasks {
                    let row = self.tr(
                        "tasks_row",
                        &[
                            ("id", &t.id),
                            ("role", &t.role),
                            ("state", &t.state.as_str()),
                            (
                                "where",
                                &if t.background {
                                    self.tr("tasks_background", &[])
                                } else {
                                    String::new()
                                },
                            ),
                            ("elapsed", &t.elapsed.as_secs()),
                            ("calls", &t.calls),
                            ("input", &t.usage.input_tokens),
                            ("output", &t.usage.output_tokens),
                            ("task", &super::tree_view::preview(&t.task, 60)),
                        ],
                    );
                    self.out.say(&escape::escape_controls(&row));
                    if t.state == TaskState::Running
                        && let Some(last) = &t.last
                    {
                        self.out.say(
                            &self
                                .out
                                .dim(&format!("  {}", escape::escape_controls(last))),
                        );
                    }
                }
            }
            ["stop", id] => match subagents.tasks.stop(id) {
                Ok(id) => self.out.say(&self.tr("tasks_stopping", &[("id", &id)])),
                Err(e) => self.out.error(&escape::escape_controls(&e)),
            },
            _ => self
                .out
                .error(&self.tr("tasks_usage", &[("args", &args.trim())])),
        }
    }

    /// Says which background tasks ended since the last prompt, one line each.
    pub(super) fn say_task_notes(&mut self) {
        let Some(subagents) = self.engine.subagents.as_ref() else {
            return;
        };
        for t in subagents.tasks.take_ended() {
            self.out.say(&task_ended(&self.out, &t));
        }
    }

    /// Whether the idle prompt should also wait for a background task of this conversation:
    /// `subagent.auto_continue` is on, the conversation has not gone on by itself since the
    /// user's last input, and one is running (on a terminal only).
    pub(super) fn goes_on_with_a_task(&self) -> bool {
        let Some(subagents) = self.engine.subagents.as_ref() else {
            return false;
        };
        let id = self.engine.chat.id();
        subagents.settings.auto_continue
            && self.engine.agent.is_none()
            && !self.engine.auto_continued
            && !self.reader.is_piped()
            && !self.out.one_shot
            && subagents
                .tasks
                .list()
                .iter()
                .any(|t| t.parent == id && t.background && t.state == TaskState::Running)
    }

    /// After Ctrl-C stopped a turn: the background tasks that go on regardless, by id and role,
    /// and where to see or stop them.
    pub(super) fn say_tasks_going_on(&mut self) {
        let Some(subagents) = self.engine.subagents.as_ref() else {
            return;
        };
        let going: Vec<String> = subagents
            .tasks
            .list()
            .into_iter()
            .filter(|t| t.background && t.state == TaskState::Running)
            .map(|t| format!("{} ({})", t.id, t.role))
            .collect();
        if going.is_empty() {
            return;
        }
        let line = super::text::tr(
            self.out.lang,
            "tasks_go_on",
            &[("n", &going.len()), ("tasks", &going.join(", "))],
        );
        self.out.say(&self.out.dim(&escape::escape_controls(&line)));
    }

    /// From now on, a background task that ends while the prompt waits is said at once, above
    /// the prompt (on a terminal; otherwise at the next prompt).
    pub(super) fn tell_tasks_at_the_prompt(&mut self) {
        let Some(subagents) = self.engine.subagents.as_ref() else {
            return;
        };
        let Some(printer) = self.reader.external_printer() else {
            return;
        };
        let printer = Mutex::new(printer);
        let (at_prompt, out) = (self.at_prompt.clone(), self.out);
        let auto = subagents.settings.auto_continue && self.engine.agent.is_none();
        subagents.tasks.on_end(Arc::new(move |t| {
            if !at_prompt.load(Ordering::SeqCst) {
                return false;
            }
            let mut line = task_ended(&out, t);
            // The line editor cannot be woken: an empty Enter lets the conversation go on.
            if auto {
                line.push_str(&out.dim(&super::text::tr(out.lang, "enter_to_go_on", &[])));
            }
            let mut printer = printer.lock().unwrap_or_else(|e| e.into_inner());
            printer.print(format!("{line}\n")).is_ok()
        }));
    }
}

/// The one line that says a background task ended.
pub(super) fn task_ended(out: &super::output::Output, t: &TaskView) -> String {
    let line = super::text::tr(
        out.lang,
        "task_ended",
        &[
            ("id", &t.id),
            ("role", &t.role),
            ("state", &t.state.as_str()),
            ("parent", &t.parent),
        ],
    );
    out.dim(&escape::escape_controls(&line))
}

/// The answerer of servers' forms: the terminal, when `new` has one (each field asked on
/// /dev/tty, the type-ahead held meanwhile); none without a terminal (the forms are declined).
pub(super) fn terminal_elicitor(lang: Lang) -> Option<Elicitor> {
    use std::io::IsTerminal;
    if !io::stdin().is_terminal() {
        return None;
    }
    Some(Arc::new(move |form: Form| {
        Box::pin(async move {
            task::spawn_blocking(move || ask_on_terminal(lang, &form))
                .await
                .unwrap_or(Answer::Cancel)
        })
    }))
}

/// One form at a time, on the terminal in its line mode (echo on), put back as it was after.
fn ask_on_terminal(lang: Lang, form: &Form) -> Answer {
    use new_core::mcp::elicit::{Answer, Words, dialogue};
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = escape::escape_controls(&form.server);
    let words = Words {
        heading: super::text::tr(lang, "elicit_heading", &[("server", &server)]),
        invalid: super::text::tr(lang, "elicit_invalid", &[]),
        required: super::text::tr(lang, "elicit_required", &[]),
        send: super::text::tr(lang, "elicit_send", &[]),
    };
    super::spinner::hush_any();
    super::typeahead::held(|| {
        platform::with_line_terminal(|input, output| dialogue(form, &words, input, output))
            .unwrap_or(Answer::Decline)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use new_core::mcp::Prompt;

    #[test]
    fn mentions_are_words_naming_a_configured_server() {
        let servers = vec!["docs".to_string(), "gh".to_string()];
        assert_eq!(
            resource_mentions(
                "see @docs:file:///a.md and @gh:repo://x/y, mail me@docs:x, @other:u @docs: @gh",
                &servers
            ),
            vec![("docs", "file:///a.md"), ("gh", "repo://x/y")]
        );
        assert!(resource_mentions("no mentions here", &servers).is_empty());
    }

    #[test]
    fn a_prompt_s_arguments_fill_in_order_and_the_last_takes_the_rest() {
        let prompt = Prompt {
            name: "review".into(),
            arguments: vec![("file".into(), true), ("focus".into(), false)],
        };
        let args = prompt_arguments(&prompt, " a.rs  error handling ").unwrap();
        assert_eq!(args["file"], "a.rs");
        assert_eq!(args["focus"], "error handling");
        let args = prompt_arguments(&prompt, "a.rs").unwrap();
        assert_eq!(args.len(), 1);
        assert_eq!(prompt_arguments(&prompt, "  "), Err("file".to_string()));
        let none = Prompt::default();
        assert!(prompt_arguments(&none, "ignored words").unwrap().is_empty());
    }
}
