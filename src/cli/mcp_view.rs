//! `/mcp`: the MCP servers, their state, tools and log; `/mcp restart NAME`. `/hooks`: the hooks.
//! `/agents`: the subagent roles.

use super::repl::App;

impl App {
    pub(super) fn mcp_command(&mut self, args: &str) {
        let words: Vec<&str> = args.split_whitespace().collect();
        let Some(manager) = self.tools.mcp().cloned() else {
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
                    let mut state = crate::mcp::describe(&s.state);
                    if !s.server.is_empty() {
                        state = format!("{state} ({})", s.server);
                    }
                    // A ready server is asked whether it still answers.
                    match self.runtime.block_on(manager.ping(&s.name)) {
                        Some(Ok(took)) => state = format!("{state}, ping {} ms", took.as_millis()),
                        Some(Err(why)) => state = format!("{state}, not answering ping: {why}"),
                        None => {}
                    }
                    self.out.say(&crate::tools::escape_controls(&self.tr(
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
                    for (key, names) in [
                        ("mcp_resources", &s.offers.resources),
                        ("mcp_prompts", &s.offers.prompts),
                    ] {
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
                        let line = self.tr(key, &[("n", &names.len()), ("list", &list)]);
                        self.out.say(&crate::tools::escape_controls(&line));
                    }
                }
            }
            ["login", name] | ["logout", name] => {
                let Some(store) = self
                    .layers
                    .user
                    .as_deref()
                    .map(crate::mcp::oauth::TokenStore::in_dir)
                else {
                    return self.out.error(&self.tr("mcp_no_token_store", &[]));
                };
                let shown = crate::tools::escape_controls(name);
                let removed = match store.remove(name) {
                    Ok(removed) => removed,
                    Err(e) => {
                        return self
                            .out
                            .error(&crate::tools::escape_controls(&e.to_string()));
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
                        &[("name", &crate::tools::escape_controls(name))],
                    ));
                }
            }
            _ => self.out.error(&self.tr(
                "mcp_usage",
                &[("args", &crate::tools::escape_controls(args))],
            )),
        }
    }
}

impl App {
    /// `/hooks`: each entry with its event, how often it fired and failed, and whether it runs.
    pub(super) fn hooks_command(&mut self) {
        let Some(hooks) = self.hooks.as_ref() else {
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
            self.out.say(&crate::tools::escape_controls(&self.tr(
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
        let Some(subagents) = self.subagents.as_ref() else {
            return self.out.say(&self.tr("agents_off", &[]));
        };
        for d in &subagents.defs {
            let tools = match &d.tools {
                Some(list) => list.join(", "),
                None => self.tr("agents_every_tool", &[]),
            };
            self.out.say(&crate::tools::escape_controls(&self.tr(
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
        let Some(subagents) = self.subagents.as_ref() else {
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
                    self.out.say(&crate::tools::escape_controls(&row));
                    if t.state == crate::agent::tasks::TaskState::Running
                        && let Some(last) = &t.last
                    {
                        self.out.say(
                            &self
                                .out
                                .dim(&format!("  {}", crate::tools::escape_controls(last))),
                        );
                    }
                }
            }
            ["stop", id] => match subagents.tasks.stop(id) {
                Ok(id) => self.out.say(&self.tr("tasks_stopping", &[("id", &id)])),
                Err(e) => self.out.error(&crate::tools::escape_controls(&e)),
            },
            _ => self
                .out
                .error(&self.tr("tasks_usage", &[("args", &args.trim())])),
        }
    }

    /// Says which background tasks ended since the last prompt, one line each.
    pub(super) fn say_task_notes(&mut self) {
        let Some(subagents) = self.subagents.as_ref() else {
            return;
        };
        for t in subagents.tasks.take_ended() {
            self.out.say(&task_ended(&self.out, &t));
        }
    }

    /// From now on, a background task that ends while the prompt waits is said at once, above
    /// the prompt (on a terminal; otherwise at the next prompt).
    pub(super) fn tell_tasks_at_the_prompt(&mut self) {
        let Some(subagents) = self.subagents.as_ref() else {
            return;
        };
        let Some(printer) = self.reader.external_printer() else {
            return;
        };
        let printer = std::sync::Mutex::new(printer);
        let (at_prompt, out) = (self.at_prompt.clone(), self.out);
        let auto = subagents.settings.auto_continue && self.agent.is_none();
        subagents.tasks.on_end(std::sync::Arc::new(move |t| {
            if !at_prompt.load(std::sync::atomic::Ordering::SeqCst) {
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
fn task_ended(out: &super::output::Output, t: &crate::agent::tasks::TaskView) -> String {
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
    out.dim(&crate::tools::escape_controls(&line))
}

/// The answerer of servers' forms: the terminal, when `new` has one (each field asked on
/// /dev/tty, the type-ahead held meanwhile); none without a terminal (the forms are declined).
pub(super) fn terminal_elicitor(lang: crate::config::Lang) -> Option<crate::mcp::elicit::Elicitor> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return None;
    }
    Some(std::sync::Arc::new(
        move |form: crate::mcp::elicit::Form| {
            Box::pin(async move {
                tokio::task::spawn_blocking(move || ask_on_terminal(lang, &form))
                    .await
                    .unwrap_or(crate::mcp::elicit::Answer::Cancel)
            })
        },
    ))
}

/// One form at a time, on the terminal in its line mode (echo on), put back as it was after.
fn ask_on_terminal(
    lang: crate::config::Lang,
    form: &crate::mcp::elicit::Form,
) -> crate::mcp::elicit::Answer {
    use crate::mcp::elicit::{Answer, Words, dialogue};
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = crate::tools::escape_controls(&form.server);
    let words = Words {
        heading: super::text::tr(lang, "elicit_heading", &[("server", &server)]),
        invalid: super::text::tr(lang, "elicit_invalid", &[]),
        required: super::text::tr(lang, "elicit_required", &[]),
        send: super::text::tr(lang, "elicit_send", &[]),
    };
    super::spinner::hush_any();
    super::typeahead::held(|| {
        crate::platform::with_line_terminal(|input, output| dialogue(form, &words, input, output))
            .unwrap_or(Answer::Decline)
    })
}
