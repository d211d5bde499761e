//! The application: start-up, the interactive and piped loops, one-shot mode, and every command.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use tokio::sync::watch;

use super::commands::{CommandId, Input, parse};
use super::output::{Output, Printer};
use super::reader::{ReadOutcome, Reader};
use new_core::agent::{Agent, Interrupts, TurnEnd};
use new_core::config::{self, Config, Lang, Overrides};
use new_core::conversation::{ChatSession, Message, Store};
use new_core::layers::Layers;
use new_core::llm::Provider;
use new_core::prompt::{self, RoleFile};
use new_core::skill::SkillRegistry;
use new_core::tools::{Policy, Sandbox, ToolContext, ToolRegistry};
use new_core::vocab::Role;
use new_sys::platform::winpath::Refusal;

/// What the command line decided.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub workdir: Option<PathBuf>,
    pub role: Option<String>,
    pub datadir: Option<PathBuf>,
    pub overrides: Overrides,
    /// One-shot prompt (`-p`).
    pub prompt: Option<String>,
    /// Reopen this project's latest conversation (`--continue`).
    pub continue_latest: bool,
    /// Reopen this conversation (`--resume ID`, a prefix is enough).
    pub resume: Option<String>,
    /// Trust the project's `.new/config.json` as it is now (`--trust-project`).
    pub trust_project: bool,
    /// What `-p` prints on stdout (`--output-format`).
    pub output_format: super::json_output::OutputFormat,
    /// Answers as the model wrote them (`--no-render`).
    pub no_render: bool,
    /// Work as this subagent role (`--agent NAME`).
    pub agent: Option<String>,
    /// The REPL's first message, sent as if typed at the first prompt (`-q TEXT`).
    pub query: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Exit,
}

pub struct App {
    pub workdir: PathBuf,
    pub(super) layers: Layers,
    pub(super) role: RoleFile,
    pub(super) skills: SkillRegistry,
    pub(super) system_prompt: String,
    /// The system prompt by source, for `/context`.
    pub(super) prompt_parts: Vec<(String, String)>,
    /// The same parts as written, their template variables unfilled (filled again after
    /// `/model`).
    pub(super) prompt_written: Vec<(String, String)>,
    /// `subagent.auto_continue` went on once since the user's last input.
    pub(super) auto_continued: bool,
    pub(super) store: Store,
    pub(super) session: ChatSession,
    pub(super) provider: Provider,
    pub(super) tools: ToolRegistry,
    pub(super) policy: Policy,
    pub(super) config: Config,
    pub(super) out: Output,
    pub(super) reader: Reader,
    /// What the command line said, kept for reloading the configuration.
    pub(super) overrides: Overrides,
    pub(super) interrupts: Interrupts,
    /// Tokens, cost and turns of this session, and the last status line, for `/status`.
    pub(super) totals: (new_core::vocab::Usage, f64, usize),
    pub(super) last_status: Option<String>,
    pub(super) busy: Arc<AtomicBool>,
    pub(super) runtime: tokio::runtime::Runtime,
    /// Context accounting for the model in use, and whether its server was asked for its window.
    pub(super) context: new_core::context::Context,
    pub(super) asked_server_window: bool,
    /// While a skill's turn runs (`/<skill>`): the tools it allows.
    pub(super) skill_tools: Option<Vec<String>>,
    /// The skill names Tab completes.
    pub(super) skill_names: super::editor::SkillNames,
    /// Snapshots of the working folder (None when `checkpoints.enabled` is false), and the node the
    /// cursor last moved from (a restore keeps the folder as it was there).
    pub(super) checkpoints: Option<std::sync::Arc<new_core::checkpoint::Checkpoints>>,
    pub(super) came_from: Option<String>,
    /// The system prompt's parts: to be read, or being read, until [`App::ready`] takes them.
    pub(super) prompt_job: Option<PromptRead>,
    /// The memory folders (None when `memory.enabled` is false), the lines reviews running in the
    /// background leave for the next prompt, and whether the session is over (reviews then stop).
    pub(super) memory: Option<new_core::memory::MemoryStore>,
    pub(super) memory_notes: Arc<std::sync::Mutex<Vec<String>>>,
    /// Turns worth reviewing not sent for review yet (`memory.review_every` go in one request),
    /// and whether the session was told that reviews run.
    pub(super) memory_batch: Vec<String>,
    pub(super) memory_said: bool,
    /// The turns of a review that gave way to a turn, to be reviewed again; how many turns
    /// have started (a review in flight gives way when it grows).
    pub(super) memory_returned: Arc<std::sync::Mutex<Vec<String>>>,
    pub(super) turns_started: Arc<std::sync::atomic::AtomicU64>,
    /// The last turn ended interrupted (Ctrl-C, also at a question, where it is a key).
    pub(super) turn_interrupted: bool,
    pub(super) leaving: Arc<AtomicBool>,
    /// The main prompt waits for input (what other threads print then goes above it).
    pub(super) at_prompt: Arc<AtomicBool>,
    /// The user's hooks (None when there are none, or `hook.enabled` is false), and what
    /// `session_start` hooks said, added to the next message.
    pub(super) hooks: Option<new_core::hooks::Hooks>,
    pub(super) hook_context: Vec<String>,
    /// Subagent roles (None when `subagent.enabled` is false).
    pub(super) subagents: Option<new_core::agent::subagent::Subagents>,
    /// The role the session works as (`--agent NAME`): its prompt and tools replace the usual.
    pub(super) agent: Option<new_core::agent::defs::Definition>,
}

use new_core::hooks::STOP_HOOK_ROUNDS;

/// Runs `work` to completion unless the user presses Ctrl-C (then None). Takes the fields it needs
/// rather than the whole [`App`], so that `work` may borrow the rest of it.
pub(super) fn interruptible<T>(
    runtime: &tokio::runtime::Runtime,
    busy: &AtomicBool,
    interrupts: &mut Interrupts,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    busy.store(true, Ordering::SeqCst);
    interrupts.borrow_and_update();
    let result = runtime.block_on(async {
        tokio::select! {
            value = work => Some(value),
            _ = interrupts.changed() => None,
        }
    });
    busy.store(false, Ordering::SeqCst);
    result
}

/// The program after argument parsing. Exit codes: 0 done, 1 a failed one-shot answer, 2 bad
/// arguments or configuration, 130 interrupted.
pub fn run(launch: Launch) -> ExitCode {
    let interactive = launch.prompt.is_none() && std::io::stdin().is_terminal();
    // The terminal echoes no `^C` into a streaming answer (the interrupt is said on a line of
    // its own); put back as it was when `new` ends, after everything else that set it.
    let _echo = interactive.then(QuietControlKeys::new);
    let mut app = match App::new(launch.clone(), interactive) {
        Ok(app) => app,
        Err(e) => {
            let lang = launch
                .overrides
                .lang
                .unwrap_or_else(|| Lang::from_locale(&env_var));
            let out = Output {
                color: color_for(&std::io::stderr()),
                lang,
                one_shot: true,
                render: false,
            };
            out.error(&chain(lang, &e));
            return ExitCode::from(2);
        }
    };
    if let Some(prompt) = &launch.prompt {
        let code = match one_shot_prompt(prompt) {
            Ok(prompt) => app.one_shot(&prompt, launch.output_format),
            Err(e) => {
                app.out.error(&e);
                ExitCode::from(2)
            }
        };
        app.leave();
        return code;
    }
    if interactive {
        app.banner();
    }
    if app.is_first_run() {
        app.explain_configuration();
        if interactive {
            app.offer_setup();
        }
    }
    // `--continue` and `--resume`: where the conversation stands, under the banner; the node
    // they land on may hold files other than the folder's.
    if (launch.continue_latest || launch.resume.is_some()) && app.session.is_persisted() {
        app.show_resumed();
        app.ready();
        app.offer_restore();
    }
    // `-q TEXT`: the first message, sent as if typed.
    let code = match app.repl(launch.query.clone()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            app.out.error(&chain(app.out.lang, &e));
            ExitCode::from(1)
        }
    };
    app.leave();
    code
}

/// One line when a project config is in force: whether it is trusted, and the mode and base URL
/// that apply; then what an untrusted one asked for and did not get. To stderr, as warnings go.
fn announce_project_config(out: &Output, config: &Config) {
    if config.project_files.is_empty() {
        return;
    }
    let file = file_list(&config.project_files);
    let tr = |key: &str, args: &[(&str, &dyn std::fmt::Display)]| {
        new_core::tools::escape_controls(&super::text::tr(out.lang, key, args))
    };
    let trust = tr(
        if config.project_trusted {
            "trusted"
        } else {
            "not_trusted"
        },
        &[],
    );
    let line = tr(
        "project_config_in_force",
        &[
            ("file", &file),
            ("trust", &trust),
            ("mode", &config.permission_mode.as_str()),
            ("url", &config.provider.base_url),
        ],
    );
    eprintln!("{}", out.dim(&line));
    for what in &config.ignored {
        out.warn(&tr(
            "ignored_from_project",
            &[("what", what), ("file", &file)],
        ));
    }
}

/// The project's config files, as the lines about them name them.
fn file_list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asks on the terminal whether to trust a project config that widens what the user allows.
fn ask_trust(out: &Output, files: &[PathBuf], ignored: &[String]) -> bool {
    let file = file_list(files);
    let list: String = ignored
        .iter()
        .map(|w| format!("  - {}\n", new_core::tools::escape_controls(w)))
        .collect();
    let question = super::text::tr(
        out.lang,
        "trust_question",
        &[("file", &file), ("list", &list)],
    );
    ask_yes(out, &question)
}

/// Prints a question on the terminal (bold) and reads a yes (`y`, `yes`, `是`) or anything else.
fn ask_yes(out: &Output, question: &str) -> bool {
    use std::io::Write;
    print!("{}", out.bold(question));
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_lowercase().as_str(), "y" | "yes" | "是")
}

/// Whether standard input already holds something to read (piped input read ahead): then
/// the next line is handled before anything is started in the background.
fn input_waiting() -> bool {
    new_sys::platform::stdin_has_input() && !std::io::stdin().is_terminal()
}

/// Whether a project's entries of one kind (`what`: `mcp` or `hooks`) may run: already trusted,
/// or trusted now (`yes`, which asks or reads `--trust-project`) and remembered by their text;
/// otherwise `not_trusted` is said.
fn trust_entries(
    out: &Output,
    trust: &new_core::trust::Trust,
    workdir: &Path,
    (what, trusted, entries): (&str, bool, Option<&str>),
    yes: impl FnOnce() -> bool,
    not_trusted: &str,
) -> Result<bool> {
    let Some(entries) = entries.filter(|_| !trusted) else {
        return Ok(true);
    };
    if yes() {
        trust
            .trust(workdir, what, entries.as_bytes())
            .with_context(|| {
                format!("remembering that the project's {what} entries are trusted")
            })?;
        return Ok(true);
    }
    out.warn(not_trusted);
    Ok(false)
}

/// Asks on the terminal whether to trust the project's hooks (they run commands).
fn ask_hooks_trust(out: &Output, hooks: &new_core::hooks::HookSettings) -> bool {
    let list: String = hooks
        .entries
        .iter()
        .filter(|e| e.origin == new_core::mcp::Origin::Project)
        .map(|e| {
            let what = match &e.action {
                new_core::hooks::Action::Command { command, .. } => command.clone(),
                new_core::hooks::Action::Http { url, .. } => format!("POST {url}"),
                new_core::hooks::Action::Prompt(text) => format!("adds: {text}"),
                new_core::hooks::Action::Agent { role, .. } => format!("runs the subagent {role}"),
            };
            format!(
                "  - {} ({}): {}\n",
                new_core::tools::escape_controls(&e.name),
                e.event,
                new_core::tools::escape_controls(&what)
            )
        })
        .collect();
    let question = super::text::tr(out.lang, "hooks_trust_question", &[("list", &list)]);
    ask_yes(out, &question)
}

/// Asks on the terminal whether to trust the project's MCP servers (they start programs).
fn ask_mcp_trust(out: &Output, mcp: &new_core::mcp::McpSettings, hidden: &[String]) -> bool {
    let list: String = mcp
        .servers
        .iter()
        .filter(|s| s.origin == new_core::mcp::Origin::Project)
        .map(|s| describe_server(out, s, hidden))
        .collect();
    let question = super::text::tr(out.lang, "mcp_trust_question", &[("list", &list)]);
    ask_yes(out, &question)
}

/// A project's MCP server as the trust question shows it: everything that runs and everything it
/// gets (command, arguments, folder, variables, headers, URL), as written, `${…}` unexpanded, and
/// each reference to a secret-looking variable marked.
fn describe_server(out: &Output, s: &new_core::mcp::ServerConfig, hidden: &[String]) -> String {
    let mut text = format!(
        "  - {}: {}\n",
        new_core::tools::escape_controls(&s.name),
        new_core::tools::escape_controls(&s.raw)
    );
    for name in s
        .references
        .iter()
        .filter(|n| new_core::mcp::config::is_secret_reference(n, hidden))
    {
        text.push_str(&format!(
            "    {}\n",
            out.bold(&super::text::tr(
                out.lang,
                "mcp_passes_a_secret",
                &[("name", &new_core::tools::escape_controls(name))]
            ))
        ));
    }
    text
}

/// A project's MCP servers that pass a secret-looking variable on (a provider key in `env`, a
/// header or the URL) run only once that entry is confirmed on its own, as it is now; the rest
/// are turned off, each said. Confirmations are remembered like trust.
fn confirm_secret_servers(
    out: &Output,
    trust: &new_core::trust::Trust,
    workdir: &Path,
    config: &mut Config,
    interactive: bool,
) -> Result<()> {
    let hidden = config.secret_vars.clone();
    for server in config
        .mcp
        .servers
        .iter_mut()
        .filter(|s| s.origin == new_core::mcp::Origin::Project && !s.disabled)
    {
        let secrets: Vec<String> = server
            .references
            .iter()
            .filter(|n| new_core::mcp::config::is_secret_reference(n, &hidden))
            .cloned()
            .collect();
        if secrets.is_empty() {
            continue;
        }
        let what = format!("mcp-secret:{}", server.name);
        if trust.is_trusted(workdir, &what, server.raw.as_bytes()) {
            continue;
        }
        let shown = new_core::tools::escape_controls(&server.name);
        let names = new_core::tools::escape_controls(&secrets.join(", "));
        let yes = interactive && {
            let question = super::text::tr(
                out.lang,
                "mcp_secret_question",
                &[
                    ("entry", &describe_server(out, server, &hidden)),
                    ("name", &shown),
                    ("secrets", &names),
                ],
            );
            ask_yes(out, &question)
        };
        if yes {
            trust
                .trust(workdir, &what, server.raw.as_bytes())
                .context("remembering the confirmed MCP server")?;
        } else {
            server.disabled = true;
            out.warn(&super::text::tr(
                out.lang,
                "mcp_secret_refused",
                &[("name", &shown), ("secrets", &names)],
            ));
        }
    }
    Ok(())
}

/// The one-shot prompt: `-p -` reads it from stdin; otherwise piped stdin, if any, follows the
/// text after a blank line (`git diff | new -p "review this"`), as `llm` does.
fn one_shot_prompt(text: &str) -> Result<String, String> {
    use std::io::Read;
    let stdin = std::io::stdin();
    if text != "-" && stdin.is_terminal() {
        return Ok(text.to_string());
    }
    let mut piped = String::new();
    if !stdin.is_terminal() {
        // No standard input at all (a closed descriptor) is an empty one, unless it was asked for.
        let read = stdin.lock().read_to_string(&mut piped);
        if let Err(e) = read
            && text == "-"
        {
            return Err(format!("reading the prompt from standard input: {e}"));
        }
    }
    let prompt = match (text, piped.trim().is_empty()) {
        ("-", true) => {
            return Err("-p - reads the prompt from standard input, which is empty".into());
        }
        ("-", false) => piped,
        (_, true) => text.to_string(),
        (_, false) => format!("{text}\n\n{piped}"),
    };
    Ok(prompt)
}

/// An error and its causes on one line, each in the interface's language where the catalogue has
/// it (`{e:#}` in English).
fn chain(lang: Lang, e: &anyhow::Error) -> String {
    match lang {
        Lang::En => format!("{e:#}"),
        Lang::Zh => e
            .chain()
            .map(|cause| super::text::error(lang, cause))
            .collect::<Vec<_>>()
            .join("：")
            .to_string(),
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn color_for(stream: &impl IsTerminal) -> bool {
    stream.is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && new_sys::platform::terminal_colours()
}

/// The session's operating-system sandbox: None when nothing would run in it (no `bash`, no
/// hook, no MCP server). Files that hooks and MCP servers run from WORKDIR stay read-only in it.
fn session_sandbox(
    config: &Config,
    workdir: &Path,
    datadir: &Path,
) -> Option<Arc<new_sys::os_sandbox::OsSandbox>> {
    let bash = config.tools.is_empty() || config.tools.iter().any(|t| t == "bash");
    if !bash && config.hooks.entries.is_empty() && config.mcp.servers.is_empty() {
        return None;
    }
    let mut commands: Vec<String> = config
        .hooks
        .entries
        .iter()
        .filter_map(|e| match &e.action {
            new_core::hooks::Action::Command { command, .. } => Some(command.clone()),
            _ => None,
        })
        .collect();
    for server in &config.mcp.servers {
        if let new_core::mcp::Transport::Http {
            helper: Some(helper),
            ..
        } = &server.transport
        {
            commands.push(helper.command.clone());
        }
        if let new_core::mcp::Transport::Stdio { command, args, .. } = &server.transport {
            commands.push(command.clone());
            commands.extend(args.iter().cloned());
        }
    }
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let helper = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("new"));
    Some(new_sys::os_sandbox::OsSandbox::new(
        config.sandbox.clone(),
        &workdir,
        datadir,
        helper,
        new_sys::os_sandbox::files_named(&workdir, &commands),
        new_core::layers::user_dir().into_iter().collect(),
    ))
}

/// While it lives, the terminal does not echo control keys (`^C`) as text: the line editor
/// keeps the setting it finds, so it holds for the session.
struct QuietControlKeys {
    _saved: Option<new_sys::platform::SavedTerminal>,
}

impl QuietControlKeys {
    fn new() -> Self {
        QuietControlKeys {
            _saved: new_sys::platform::SavedTerminal::quiet_control_keys(),
        }
    }
}

/// Whether a WORKDIR that does not exist was meant as a message: words with spaces, or a
/// question.
fn looks_like_a_sentence(text: &str) -> bool {
    text.trim().contains(char::is_whitespace) || text.trim_end().ends_with('?')
}

/// The default DATADIR: a folder per project under the user's data dir, keyed by the canonical
/// WORKDIR, so two projects never share conversations.
pub fn default_datadir(workdir: &Path) -> PathBuf {
    let name: String = workdir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in workdir.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let base = dirs::data_dir().unwrap_or_else(|| workdir.join(".new"));
    base.join("new")
        .join("projects")
        .join(format!("{name}-{hash:016x}"))
}

impl App {
    pub fn new(launch: Launch, interactive: bool) -> Result<App> {
        let workdir = launch.workdir.clone().unwrap_or_else(|| PathBuf::from("."));
        // `new "what does wc.py do"`, the habit of the peers: a sentence, not a folder.
        if !workdir.exists() && looks_like_a_sentence(&workdir.to_string_lossy()) {
            let text = new_core::tools::escape_controls(&workdir.to_string_lossy());
            let lang = launch
                .overrides
                .lang
                .unwrap_or_else(|| Lang::from_locale(&env_var));
            anyhow::bail!(
                "{}",
                super::text::tr(lang, "a_sentence_not_a_folder", &[("text", &text)])
            );
        }
        // `new D:project` on Windows: relative to a drive's current folder, which `new` would
        // guess wrong. Drive and UNC paths (`D:\project`, `D:/project`, `\\server\share`) pass.
        if let Some(reason @ (Refusal::DriveRelative(_) | Refusal::RootRelative)) =
            new_sys::platform::path_refusal(&workdir.to_string_lossy())
        {
            let lang = launch
                .overrides
                .lang
                .unwrap_or_else(|| Lang::from_locale(&env_var));
            anyhow::bail!(
                "{}",
                super::text::tr(
                    lang,
                    "workdir_windows_refused",
                    &[("text", &workdir.display()), ("reason", &reason)]
                )
            );
        }
        let workdir = workdir
            .canonicalize()
            .with_context(|| format!("working folder {} cannot be used", workdir.display()))?;
        anyhow::ensure!(
            workdir.is_dir(),
            "working folder {} is not a folder",
            workdir.display()
        );
        let layers = Layers::new(&workdir);
        let mut config = config::load(&layers, &launch.overrides, &env_var)?;
        let one_shot = launch.prompt.is_some();
        let out = Output {
            color: if one_shot {
                color_for(&std::io::stderr())
            } else {
                color_for(&std::io::stdout())
            },
            lang: config.lang,
            one_shot,
            // Markdown is rendered where the answer shows: stdout, on a terminal, with colour.
            render: config.render && !launch.no_render && color_for(&std::io::stdout()),
        };
        if !config.project_trusted
            && !config.project_files.is_empty()
            && (launch.trust_project
                || (interactive
                    && !config.ignored.is_empty()
                    && ask_trust(&out, &config.project_files, &config.ignored)))
        {
            let trust = new_core::trust::Trust::new(layers.user.as_deref());
            for file in &config.project_files {
                let bytes =
                    std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
                trust
                    .trust(&workdir, config::trust_kind(file), &bytes)
                    .context("remembering that the project's config is trusted")?;
            }
            config = config::load(&layers, &launch.overrides, &env_var)?;
        }
        // A project's own entries that start processes run once the user trusts them.
        let trust = new_core::trust::Trust::new(layers.user.as_deref());
        let ask = |ask: &dyn Fn() -> bool| launch.trust_project || (interactive && ask());
        config.hooks_trusted = trust_entries(
            &out,
            &trust,
            &workdir,
            (
                "hooks",
                config.hooks_trusted,
                config.hooks.project_entries.as_deref(),
            ),
            || ask(&|| ask_hooks_trust(&out, &config.hooks)),
            &super::text::tr(out.lang, "hooks_not_trusted", &[]),
        )?;
        config.mcp_trusted = trust_entries(
            &out,
            &trust,
            &workdir,
            (
                "mcp",
                config.mcp_trusted,
                config.mcp.project_entries.as_deref(),
            ),
            || ask(&|| ask_mcp_trust(&out, &config.mcp, &config.secret_vars)),
            &super::text::tr(out.lang, "mcp_not_trusted", &[]),
        )?;
        if config.mcp_trusted {
            confirm_secret_servers(&out, &trust, &workdir, &mut config, interactive)?;
        }
        // A project's Claude Code allow rules widen what runs unasked: only once trusted.
        let claude_allow = trust_entries(
            &out,
            &trust,
            &workdir,
            (
                "claude-permissions",
                config.claude_allow_trusted,
                config.claude_allow_text.as_deref(),
            ),
            || {
                ask(&|| {
                    let list: String = config
                        .claude_allow
                        .iter()
                        .map(|r| {
                            format!("  - {}\n", new_core::tools::escape_controls(&r.describe()))
                        })
                        .collect();
                    ask_yes(
                        &out,
                        &super::text::tr(out.lang, "claude_allow_question", &[("list", &list)]),
                    )
                })
            },
            &super::text::tr(out.lang, "claude_allow_not_trusted", &[]),
        )?;
        if claude_allow {
            let allow = std::mem::take(&mut config.claude_allow);
            config.project_rules.extend(allow);
        }
        announce_project_config(&out, &config);
        for warning in &config.warnings {
            out.warn(&new_core::tools::escape_controls(warning));
        }
        let role = prompt::load_role(&layers, launch.role.as_deref().unwrap_or("default"))?;
        let datadir = launch
            .datadir
            .clone()
            .unwrap_or_else(|| default_datadir(&workdir));
        let os_sandbox = session_sandbox(&config, &workdir, &datadir);
        if let Some(sandbox) = &os_sandbox {
            new_sys::os_sandbox::set_current(sandbox.clone());
            if interactive {
                sandbox.ask_about_hosts();
            }
            // Found out on a thread of its own (the helper is started once): the prompt does not
            // wait for it; the first input does (see `ready`), and says when it is off.
            let probing = sandbox.clone();
            std::thread::spawn(move || {
                tracing::info!(state = ?probing.state(), "sandbox");
            });
        }
        let memory = config.memory.enabled.then(|| {
            new_core::memory::MemoryStore::new(
                dirs::data_dir().map(|d| d.join("new").join("memory")),
                datadir.join("memory"),
            )
            .with_codepilot(&layers)
        });
        // The system prompt's parts (skills, AGENTS.md, memory, the environment with its `git
        // status`) are read on a second thread: the prompt shows without waiting for hundreds of
        // skill files, and the first input waits for them ([`App::ready`]). The thread starts
        // once start-up is done and input is awaited ([`App::start_prompt_read`]), so that it
        // does not slow start-up down; at once when they are needed soon (a one-shot, a resumed
        // conversation), to be read while the rest starts. It fills what Tab completion and
        // `use_skill` read itself.
        let skill_names: super::editor::SkillNames = Default::default();
        let shelf = new_core::tools::builtin::Shelf::default();
        let prompt_job = {
            let (layers, role, workdir) = (layers.clone(), role.clone(), workdir.clone());
            let (skill_settings, memory_settings) = (config.skill.clone(), config.memory.clone());
            let (memory, names, shelf) = (memory.clone(), skill_names.clone(), shelf.clone());
            let read = Box::new(move || {
                read_prompt(
                    &layers,
                    &role,
                    &workdir,
                    &skill_settings,
                    memory.as_ref(),
                    &memory_settings,
                    &names,
                    &shelf,
                )
            });
            if one_shot || launch.resume.is_some() || launch.continue_latest {
                PromptRead::Running(std::thread::spawn(read))
            } else {
                PromptRead::Waiting(read)
            }
        };
        let store = Store::open(&datadir)?;
        let resume = match (&launch.resume, launch.continue_latest) {
            (Some(id), _) => Some(store.resolve(id)?),
            (None, true) => {
                // A one-shot goes on from the latest of any kind; the REPL from the latest
                // conversation that was one (`-p` ones are reachable with /list).
                let latest = if one_shot {
                    store.latest()?
                } else {
                    store.latest_interactive()?
                };
                if latest.is_none() {
                    out.warn(&super::text::tr(out.lang, "nothing_to_continue", &[]));
                }
                latest
            }
            (None, false) => None,
        };
        let (mut session, report) = match resume {
            Some(id) => {
                let (session, report) = ChatSession::open(store.clone(), &id, "")?;
                (session, Some(report))
            }
            None => {
                let mut session = ChatSession::new(store.clone(), "");
                if one_shot {
                    session.set_metadata(serde_json::json!({"one_shot": true}));
                }
                (session, None)
            }
        };
        let mcp_slot: super::editor::McpSlot = Default::default();
        let reader = if one_shot {
            Reader::Closed
        } else if interactive {
            Reader::editor(
                store.clone(),
                out.color,
                skill_names.clone(),
                mcp_slot.clone(),
            )
            .context("starting the line editor")?
        } else {
            Reader::piped()
        };
        let provider = Provider::new(config.provider.clone())?;
        let mut tools = ToolRegistry::builtin(
            ToolContext {
                sandbox: Sandbox::new(&workdir)?,
                bash_timeout: config.bash_timeout,
                hidden_env: config.secret_vars.clone(),
                skills: shelf,
                os_sandbox: os_sandbox.clone(),
            },
            &config.tools,
        )?;
        let mut policy = Policy::new(
            config.permission_mode,
            config.project_rules.clone(),
            config.user_rules.clone(),
        )?
        .project_untrusted(!config.project_trusted);
        policy.background_allowed = config.subagent.background_allowed_tools.clone();

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        // MCP servers start in the background: the prompt does not wait for them.
        if !config.mcp.servers.is_empty() {
            let manager = new_core::mcp::Manager::new(
                config.mcp.clone(),
                &workdir,
                &datadir,
                config.secret_vars.clone(),
                config.mcp_trusted,
                runtime.handle().clone(),
            );
            manager.on_progress(Arc::new(|line: &str| {
                super::spinner::hush_any();
                eprintln!("  … {line}")
            }));
            manager.set_sandbox(os_sandbox.clone());
            manager.set_token_store(
                layers
                    .user
                    .as_deref()
                    .map(new_core::mcp::oauth::TokenStore::in_dir),
            );
            manager.set_elicitor(super::mcp_view::terminal_elicitor(config.lang));
            let _ = mcp_slot.set(manager.clone());
            tools.set_mcp(manager);
        }
        let (tx, interrupts) = watch::channel(0u64);
        let busy = Arc::new(AtomicBool::new(false));
        let busy_flag = busy.clone();
        // Registered now, so no Ctrl-C is missed once the prompt shows. (rustyline is built with its
        // `signal-hook` feature: without it, it takes SIGINT for itself for the editor's lifetime and
        // Ctrl-C during an answer would never reach us.)
        let mut sigint = runtime
            .block_on(async { interrupt_signal() })
            .context("installing the Ctrl-C handler")?;
        runtime.spawn(async move {
            while sigint.recv().await.is_some() {
                if busy_flag.load(Ordering::SeqCst) {
                    tx.send_modify(|n| *n += 1);
                } else if !interactive {
                    // Nothing to stop and no line editor to clear: Ctrl-C ends a piped session.
                    std::process::exit(130);
                }
            }
        });

        let checkpoints = config.checkpoints.enabled.then(|| {
            let c = new_core::checkpoint::Checkpoints::new(
                store.dir(),
                &workdir,
                config.checkpoints.clone(),
            );
            // The conversation's latest snapshot spares the first walk from reading every file.
            if let Some(latest) = &session.conversation().latest_checkpoint {
                c.hint(latest);
            }
            std::sync::Arc::new(c)
        });
        // Subagent roles; a definition that cannot be used is said and skipped.
        let subagents = config.subagent.enabled.then(|| {
            let known =
                |t: &str| new_core::tools::builtin::NAMES.contains(&t) || t.starts_with("mcp__");
            let (defs, problems) = new_core::agent::defs::load(&layers, &config.subagent, &known);
            for p in problems {
                out.warn(&new_core::tools::escape_controls(&p));
            }
            new_core::agent::subagent::Subagents {
                defs,
                settings: config.subagent.clone(),
                environment: prompt::environment(&workdir),
                tasks: Default::default(),
            }
        });
        // `--agent NAME`: the session works as that role, with its model unless `--model` said.
        let agent = match &launch.agent {
            None => None,
            Some(name) => {
                let Some(subagents) = &subagents else {
                    anyhow::bail!(
                        "--agent {name}: subagents are off (`subagent.enabled` is false)"
                    );
                };
                let Some(def) = subagents.defs.iter().find(|d| &d.name == name) else {
                    let known: Vec<&str> = subagents.defs.iter().map(|d| d.name.as_str()).collect();
                    anyhow::bail!(
                        "--agent {name}: no such role; the roles are {}",
                        known.join(", ")
                    );
                };
                Some(def.clone())
            }
        };
        if let Some(model) = agent.as_ref().and_then(|d| d.model.clone())
            && launch.overrides.model.is_none()
        {
            config.model = model;
        }
        let context = new_core::context::Context::new(config.context.clone(), &config.model);
        tracing::info!(workdir = ?workdir, provider = ?config.provider.name, model = ?config.model,
            sandbox = os_sandbox.is_some(), interactive, "configured");
        if let Some(def) = &agent
            && report.is_none()
        {
            session.set_metadata(serde_json::json!({ "agent": def.name }));
        }
        let (config_hooks, config_hooks_trusted) = (config.hooks.clone(), config.hooks_trusted);
        let (hooks_workdir, hooks_hidden) = (workdir.clone(), config.secret_vars.clone());
        let mut app = App {
            workdir,
            layers,
            role,
            skills: SkillRegistry::default(),
            system_prompt: String::new(),
            prompt_parts: Vec::new(),
            prompt_written: Vec::new(),
            auto_continued: false,
            store,
            session,
            provider,
            tools,
            policy,
            config,
            out,
            reader,
            overrides: launch.overrides.clone(),
            interrupts,
            totals: Default::default(),
            last_status: None,
            busy,
            runtime,
            context,
            asked_server_window: false,
            skill_tools: None,
            skill_names,
            prompt_job: Some(prompt_job),
            checkpoints,
            came_from: None,
            // A one-shot reviews nothing: what waits is the next REPL's.
            memory_batch: memory
                .as_ref()
                .filter(|_| !one_shot)
                .map(|m| new_core::memory::review::load_pending(m, true))
                .unwrap_or_default(),
            memory_said: false,
            memory_returned: Default::default(),
            turns_started: Default::default(),
            turn_interrupted: false,
            memory,
            memory_notes: Default::default(),
            leaving: Default::default(),
            at_prompt: Default::default(),
            hooks: (!config_hooks.entries.is_empty()).then(|| {
                new_core::hooks::Hooks::new(
                    config_hooks.clone(),
                    config_hooks_trusted,
                    &hooks_workdir,
                    hooks_hidden.clone(),
                )
                .with_sandbox(os_sandbox.clone())
            }),
            hook_context: Vec::new(),
            subagents,
            agent,
        };
        app.install_hook_agents();
        app.install_self_skills();
        // The memory folders can be read by the read tools (never written).
        if let Some(m) = &app.memory {
            for (_, dir) in m.dirs() {
                app.tools.sandbox().add_read_root(dir.to_path_buf());
            }
        }
        app.tell_tasks_at_the_prompt();
        app.fire_hooks(new_core::hooks::Input::new("program_start"));
        tracing::info!(session = %app.session.id(), "session start");
        if let Some(started) = app.fire_hooks(new_core::hooks::Input::new("session_start")) {
            app.hook_context.extend(started.context);
        }
        if let Some(report) = report {
            app.report_load(&report);
        }
        Ok(app)
    }

    /// With `subagent.auto_continue` on and an ended background task's answer not yet given to
    /// this conversation: gives it (with the answers of any others) and runs a turn on it, as
    /// if the user had asked to go on. True when it did.
    fn auto_continue(&mut self) -> bool {
        let Some(subagents) = self.subagents.as_ref().filter(|s| s.settings.auto_continue) else {
            return false;
        };
        // Once for each input of the user's: a model that starts a task in every turn it goes
        // on with does not go on alone for ever.
        if self.agent.is_some()
            || self.auto_continued
            || !subagents.tasks.has_finished(self.session.id())
        {
            return false;
        }
        self.auto_continued = true;
        let mut printer = Printer::new(self.out).waiting_for(&self.provider.settings().name);
        let Some(n) = self.deliver_finished_tasks(&mut printer) else {
            return false;
        };
        self.out
            .say(&self.tr("auto_continuing", &[("n", &n.to_string())]));
        self.answer_with(&mut printer);
        self.report_turn(&printer);
        true
    }

    /// The answers of this conversation's background tasks that ended since its last turn, each
    /// a message of its own, their tokens counted by `observer`. How many; None when one could not
    /// be stored (said).
    fn deliver_finished_tasks(
        &mut self,
        observer: &mut dyn new_core::agent::Observer,
    ) -> Option<usize> {
        let Some(subagents) = &self.subagents else {
            return Some(0);
        };
        let tasks = subagents.tasks.take_finished(self.session.id());
        for task in &tasks {
            observer.usage(&subagents.tasks.take_pending(&task.id));
            if let Err(e) = self.session.add(Message::new(Role::User, task.delivery())) {
                self.out.error(&super::text::error(self.out.lang, &e));
                return None;
            }
        }
        Some(tasks.len())
    }

    /// Gives the hooks what runs their `agent` actions, when any has one and subagents are on.
    fn install_hook_agents(&mut self) {
        let wanted = self
            .config
            .hooks
            .entries
            .iter()
            .any(|e| matches!(e.action, new_core::hooks::Action::Agent { .. }));
        let Some(subagents) = self.subagents.as_ref().filter(|_| wanted) else {
            return;
        };
        let Some(hooks) = self.hooks.take() else {
            return;
        };
        let policy = self.policy.clone();
        let runner = new_core::agent::hook_agent::HookAgents {
            provider: new_core::llm::Model::share(&self.provider),
            tools: self.tools.detached(),
            subagents: subagents.clone(),
            model: self.config.model.clone(),
            max_rounds: self.config.max_rounds,
            context: new_core::context::Context::new(
                self.config.context.clone(),
                &self.config.model,
            ),
            store: self.store.clone(),
            gate: std::sync::Arc::new(move || super::approval::Unattended::boxed(&policy)),
            workdir: self.workdir.clone(),
        };
        self.hooks = Some(hooks.with_agent(std::sync::Arc::new(runner)));
    }

    /// What writes the built-in skills that describe `new` and the project
    /// (`config-management`, `codebase-overview`), and the template variables of skills.
    pub(super) fn install_self_skills(&mut self) {
        let shelf = self.tools.context().skills.clone();
        shelf.set_variables(&self.workdir, &self.config.model);
        let current = self.config.describe();
        let workdir = self.workdir.clone();
        let checkpoints = self.checkpoints.clone();
        let cache: std::sync::Arc<std::sync::Mutex<Option<(String, String)>>> = Default::default();
        shelf.set_generator(std::sync::Arc::new(move |kind, body| match kind {
            new_core::skill::Generated::ConfigManagement => {
                new_core::skill::builtin::config_management(body, &current)
            }
            new_core::skill::Generated::CodebaseOverview => {
                let write = |files: &mut dyn Iterator<Item = (&str, u64)>| {
                    new_core::skill::builtin::codebase_overview(body, &workdir, files)
                };
                // Cached per checkpoint: the same snapshot is the same survey.
                if let Some(Ok(Some((id, manifest)))) = checkpoints.as_deref().map(|c| c.peek()) {
                    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some((cached, text)) = cache.as_ref()
                        && *cached == id
                    {
                        return text.clone();
                    }
                    let text = write(
                        &mut manifest
                            .files
                            .iter()
                            .filter(|(_, e)| e.kind != "link")
                            .map(|(p, e)| (p.as_str(), e.size)),
                    );
                    *cache = Some((id, text.clone()));
                    return text;
                }
                let files = new_core::skill::builtin::walk(
                    &workdir,
                    new_core::skill::builtin::SURVEY_MAX_FILES,
                );
                write(&mut files.iter().map(|(p, s)| (p.as_str(), *s)))
            }
        }));
    }

    /// Ends the application without freeing the conversation tree: every message is on disk
    /// already, and freeing a big tree one node at a time only delays the exit. Everything else
    /// (the line editor, the runtime) is dropped as usual.
    fn leave(mut self) {
        tracing::info!(session = %self.session.id(), "session end");
        self.fire_hooks(new_core::hooks::Input::new("session_end"));
        self.fire_hooks(new_core::hooks::Input::new("program_exit"));
        // Reviews still running stop before they write anything; subagents still running stop
        // and keep what they said. Turns not reviewed yet wait for the next session.
        self.leaving.store(true, Ordering::SeqCst);
        self.take_returned_reviews();
        if let Some(memory) = &self.memory
            && !self.memory_batch.is_empty()
        {
            let _ = new_core::memory::review::save_pending(memory, &self.memory_batch);
        }
        if let Some(subagents) = &self.subagents {
            let n = subagents.tasks.stop_all(std::time::Duration::from_secs(5));
            if n > 0 {
                self.out.say(
                    &self
                        .out
                        .dim(&self.tr("tasks_stopped_at_exit", &[("n", &n)])),
                );
            }
        }
        // MCP servers are ended, not left behind.
        if let Some(mcp) = self.tools.mcp() {
            self.runtime.block_on(mcp.shutdown());
        }
        // The sandbox's private folder goes with the session.
        if let Some(sandbox) = &self.tools.context().os_sandbox {
            sandbox.cleanup();
        }
        let App { session, .. } = self;
        std::mem::forget(session);
    }

    /// The tools the model is offered: the registry's and the loop's own (`agent`,
    /// `task_status`), narrowed as a turn narrows them.
    pub(super) fn offered_tools(&self) -> Vec<new_core::vocab::ToolSpec> {
        let mut specs =
            new_core::agent::subagent::Subagents::specs(self.subagents.as_ref(), &self.tools);
        if let Some(allowed) = self.turn_tools() {
            specs.retain(|t| allowed.contains(&t.name));
        }
        specs
    }

    /// Fires the hooks of `input.event` (when any follows it) and says their failures. None when
    /// the user pressed Ctrl-C: the hooks running then are stopped, each with its process group.
    pub(super) fn fire_hooks(
        &mut self,
        input: new_core::hooks::Input,
    ) -> Option<new_core::hooks::Outcome> {
        let Some(hooks) = self.hooks.as_ref().filter(|h| h.wants(&input.event)) else {
            return Some(Default::default());
        };
        hooks.set_session(self.session.id(), &self.store.path(self.session.id()));
        let Some(outcome) = interruptible(
            &self.runtime,
            &self.busy,
            &mut self.interrupts,
            hooks.fire(&input),
        ) else {
            self.out.warn(&self.tr(
                "hook_interrupted",
                &[("event", &new_core::tools::escape_controls(&input.event))],
            ));
            return None;
        };
        for line in &outcome.failures {
            self.out.warn(line);
        }
        for line in &outcome.notices {
            self.out.warn(&new_core::tools::escape_controls(line));
        }
        Some(outcome)
    }

    /// The text for `key` in the interface's language ([`super::text`]).
    pub(super) fn tr(&self, key: &str, args: &[(&str, &dyn std::fmt::Display)]) -> String {
        super::text::tr(self.out.lang, key, args)
    }

    fn banner(&self) {
        let s = self.provider.settings();
        self.out.say(&format!(
            "{} {} · {} {} · {} {} · {} {}",
            self.out.bold("new"),
            env!("CARGO_PKG_VERSION"),
            self.tr("provider", &[]),
            s.name,
            self.tr("model", &[]),
            self.config.model,
            self.tr("role", &[]),
            self.role.name,
        ));
        self.out.say(&self.out.dim(&format!(
            "{} {} · {}",
            self.tr("working_folder", &[]),
            self.workdir.display(),
            self.tr("help_for_commands_alt_enter_or", &[])
        )));
        if !self.config.has_credentials && !self.is_first_run() {
            self.out.warn(&self.tr(
                "no_api_key_for",
                &[
                    ("name", &s.name),
                    ("key", &s.api_key_var),
                    ("url", &s.base_url_var),
                ],
            ));
        }
    }

    /// The read-process loop, typed or piped.
    /// The REPL: `first` (`-q TEXT`) as if typed at the first prompt, then line after line.
    fn repl(&mut self, first: Option<String>) -> Result<()> {
        if let Some(line) = first {
            self.out.say(&format!(
                "{}{}",
                self.prompt_text(),
                new_core::tools::escape_controls(&line)
            ));
            if self.run_lines(line) == Flow::Exit {
                return Ok(());
            }
        }
        loop {
            self.say_memory_notes();
            self.say_task_notes();
            // MCP servers start once `new` waits for its first input (the prompt is up), or
            // earlier when a turn or `/mcp` needs them: they never delay the prompt.
            if let Some(mcp) = self.tools.mcp()
                && !input_waiting()
            {
                mcp.start();
            }
            // Start-up is done: the skills and the rest of the system prompt are read beside
            // what comes next.
            self.start_prompt_read();
            // `subagent.auto_continue` (CodePilot's): a background answer that came in goes to
            // the conversation at once, and the model goes on with it.
            if self.auto_continue() {
                continue;
            }
            let prompt = self.prompt_text();
            self.at_prompt.store(true, Ordering::SeqCst);
            // What was typed during the last turn without an Enter: this prompt's line.
            let typed_ahead = self.reader.typed_ahead();
            let read = self.reader.read(&prompt, &typed_ahead, true, &self.out);
            self.at_prompt.store(false, Ordering::SeqCst);
            match read.context("reading input")? {
                ReadOutcome::Line(line) => {
                    self.auto_continued = false;
                    if self.run_lines(line) == Flow::Exit {
                        return Ok(());
                    }
                }
                ReadOutcome::Interrupted => continue, // Ctrl-C at the prompt clears the line
                ReadOutcome::Eof => {
                    self.say_memory_notes();
                    self.say_task_notes();
                    return Ok(());
                }
            }
        }
    }

    /// Runs a line, then the lines typed while it ran, in order, as if typed then; Ctrl-C
    /// drops those with the turn it stopped.
    fn run_lines(&mut self, line: String) -> Flow {
        let mut lines = std::collections::VecDeque::from([line]);
        while let Some(line) = lines.pop_front() {
            let before = *self.interrupts.borrow();
            self.turn_interrupted = false;
            self.reader.begin_typeahead();
            let flow = self.handle_line(&line);
            let typed = self.reader.end_typeahead();
            if flow == Flow::Exit {
                return Flow::Exit;
            }
            if *self.interrupts.borrow() != before || std::mem::take(&mut self.turn_interrupted) {
                if !typed.is_empty() || !lines.is_empty() {
                    let n = typed.len() + lines.len();
                    self.out
                        .say(&self.out.dim(&self.tr("queued_dropped", &[("n", &n)])));
                }
                return Flow::Continue;
            }
            lines.extend(typed);
            if let Some(next) = lines.front() {
                self.out.say(&format!(
                    "{}{}",
                    self.out.dim(&self.prompt_text()),
                    new_core::tools::escape_controls(next)
                ));
            }
        }
        Flow::Continue
    }

    fn prompt_text(&self) -> String {
        let c = self.session.conversation();
        // The branch's name, when it has one and there is more than one branch.
        let name = match c.names_of(c.cursor()).first() {
            Some(name) if c.leaves().len() > 1 => format!("[{name}] "),
            _ => String::new(),
        };
        if c.is_leaf(c.cursor()) {
            format!("{name}› ")
        } else {
            // The next message starts a new branch: say where.
            let n = c.number_of(c.cursor()).unwrap_or(0);
            format!("{name}[{n}]⑂ › ")
        }
    }

    /// Asks the user a question; the answer comes from the next input line. None when cancelled
    /// (Ctrl-C, end of input, or nobody to ask). `remember`: the answer goes into the input history.
    pub(super) fn ask(&mut self, question: &str, initial: &str, remember: bool) -> Option<String> {
        if self.reader.is_piped() {
            self.out.say(question.trim_end());
        }
        match self.reader.read(question, initial, remember, &self.out) {
            Ok(ReadOutcome::Line(line)) => Some(line),
            Ok(_) => None,
            Err(e) => {
                self.out
                    .error(&self.tr("reading_input_failed", &[("error", &e)]));
                None
            }
        }
    }

    /// Starts reading the system prompt's parts on a thread of their own (the prompt is up).
    fn start_prompt_read(&mut self) {
        self.prompt_job = match self.prompt_job.take() {
            Some(PromptRead::Waiting(read)) => Some(PromptRead::Running(std::thread::spawn(read))),
            other => other,
        };
    }

    /// Takes the skills and the system prompt read at start-up (waiting for them if need be, or
    /// reading them when that has not started): before any input is handled.
    pub(super) fn ready(&mut self) {
        let done = match self.prompt_job.take() {
            None => return,
            Some(PromptRead::Waiting(read)) => read(),
            Some(PromptRead::Running(job)) => match job.join() {
                Ok(done) => done,
                Err(_) => return self.out.error("reading the skills and AGENTS.md failed"),
            },
        };
        // Said once, before the first turn: a sandbox that could not be set up.
        if let Some(sandbox) = &self.tools.context().os_sandbox
            && !sandbox.is_on()
        {
            self.out
                .warn(&new_core::tools::escape_controls(&sandbox.one_line()));
        }
        self.take_prompt(done, true);
    }

    /// Puts a system prompt read by [`read_prompt`] in force, for the conversation in use too;
    /// with `report`, what could not be read is said.
    pub(super) fn take_prompt(&mut self, done: PromptJob, report: bool) {
        if report {
            for problem in done.skills.problems.iter().chain(&done.problems) {
                self.out.warn(&new_core::tools::escape_controls(problem));
            }
        }
        self.skills = done.skills;
        self.prompt_written = match (&self.agent, &self.subagents) {
            // A role's own context, as a defined subagent's.
            (Some(def), Some(subagents)) => subagents.fresh_context(def),
            _ => {
                let mut parts = done.parts;
                // One line each on the hooks and the MCP servers in force.
                if let Some(lines) = self.config.prompt_lines() {
                    parts.push(("configuration".to_string(), lines));
                }
                parts
            }
        };
        self.fill_prompt();
    }

    /// The system prompt from its parts, CodePilot's template variables (`{{OS}}`, `{{CWD}}`,
    /// `{{MODEL}}`, …) filled for the model in use.
    pub(super) fn fill_prompt(&mut self) {
        self.prompt_parts = self
            .prompt_written
            .iter()
            .map(|(source, text)| {
                let filled = prompt::fill_variables(text, &self.workdir, &self.config.model);
                (source.clone(), filled)
            })
            .collect();
        self.system_prompt = self.prompt_parts.iter().map(|(_, t)| t.as_str()).collect();
        self.session.set_system_prompt(&self.system_prompt);
    }

    /// Processes one line of input, typed or piped.
    pub fn handle_line(&mut self, line: &str) -> Flow {
        // Leaving needs none of it: nothing waits for the skills then.
        if !matches!(parse(line), Input::Command(CommandId::Exit, _)) {
            self.ready();
        }
        match parse(line) {
            Input::Empty => {}
            Input::Chat(text) => {
                if let Some(text) = self.with_resources(text) {
                    self.chat(&text);
                }
            }
            Input::Goto(n) => self.goto(n),
            Input::Unknown(word) => {
                let name = word.trim_start_matches('/');
                let args = line.trim().strip_prefix(word).unwrap_or("").trim();
                if self.skills.get(name).is_some() {
                    self.run_skill(name, args);
                } else if name.starts_with("mcp__") && self.run_mcp_prompt(name, args) {
                } else {
                    self.out.error(&self.tr(
                        "unknown_command_help_lists_the_commands",
                        &[("word", &word)],
                    ));
                }
            }
            Input::Command(id, args) => return self.command(id, args),
        }
        Flow::Continue
    }

    fn command(&mut self, id: CommandId, args: &str) -> Flow {
        match id {
            CommandId::Tree => self.tree(args),
            CommandId::Branches => self.branches(args),
            CommandId::Branch => self.branch(args),
            CommandId::Btw => self.btw(args),
            CommandId::Undo => self.undo(args),
            CommandId::Merge => self.merge(args),
            CommandId::Compare => self.compare(args),
            CommandId::Prev => self.flip(args, -1),
            CommandId::Next => self.flip(args, 1),
            CommandId::Retry => self.retry(args),
            CommandId::Edit => self.edit(args),
            CommandId::List => self.list(args),
            CommandId::Switch => self.switch(args),
            CommandId::New => self.new_conversation(args),
            CommandId::Clear => self.clear(args),
            CommandId::Title => self.title(args),
            CommandId::Delete => self.delete(args),
            CommandId::Search => self.search(args),
            CommandId::Export => self.export(args),
            CommandId::Dump => self.dump(args),
            CommandId::Compact => self.compact(args),
            CommandId::Context => self.show_context(args),
            CommandId::Permissions => self.permissions(args),
            CommandId::Sandbox => self.sandbox(args),
            CommandId::Model => self.model(args),
            CommandId::Models => self.models(args),
            CommandId::Status => self.status(args),
            CommandId::Init => self.init(args),
            CommandId::Skills => self.skills_command(args),
            CommandId::Memory => self.memory_command(args),
            CommandId::Diff => self.diff(args),
            CommandId::Checkpoints => self.checkpoints_command(args),
            CommandId::Mcp => self.mcp_command(args),
            CommandId::Hooks => self.hooks_command(),
            CommandId::Agents => self.agents_command(),
            CommandId::Tasks => self.tasks_command(args),
            CommandId::Restore => self.restore(args),
            CommandId::Remember => self.remember(args),
            CommandId::Help => self.help(args),
            CommandId::Exit => {
                self.out.say(&self.tr("bye", &[]));
                return Flow::Exit;
            }
        }
        Flow::Continue
    }

    /// Sends a user message and runs the agent loop. Returns how the turn ended, or None when the
    /// message could not even be stored.
    pub(super) fn chat(&mut self, text: &str) -> Option<TurnEnd> {
        // The hooks' subagents decide by the permissions as they are now (a `/permissions`
        // change, a rule allowed for the session).
        self.install_hook_agents();
        let mut printer = Printer::new(self.out).waiting_for(&self.provider.settings().name);
        let end = self.chat_with(text, &mut printer);
        if end.is_some() {
            self.report_turn(&printer);
        }
        if matches!(end, Some(TurnEnd::Complete)) && !self.out.one_shot {
            self.review_turn();
        }
        end
    }

    /// The status line after a turn (one dim line), and the session's totals.
    fn report_turn(&mut self, printer: &Printer) {
        let cost = self
            .config
            .pricing
            .zip(printer.turn.as_ref())
            .map(|(p, turn)| p.cost(turn));
        if let Some(turn) = &printer.turn {
            super::output::add_usage(&mut self.totals.0, turn);
        }
        self.totals.1 += cost.unwrap_or(0.0);
        self.totals.2 += 1;
        let line = super::output::status_line(
            self.out.lang,
            &self.config.model,
            printer.turn.as_ref(),
            Some(self.context_use()),
            printer.started.elapsed().as_secs_f64(),
            cost,
        );
        self.out.say(&self.out.dim(&line));
        self.last_status = Some(line);
    }

    fn chat_with(
        &mut self,
        text: &str,
        observer: &mut dyn new_core::agent::Observer,
    ) -> Option<TurnEnd> {
        // `pre_message` hooks may block the message (it is not sent; the reason is said) or add
        // to it, as `session_start` hooks' output is added to the first message.
        let hooked = self.fire_hooks(new_core::hooks::Input {
            prompt: Some(text.to_string()),
            ..new_core::hooks::Input::new("pre_message")
        })?;
        if let Some(reason) = hooked.block {
            self.out.error(&self.tr(
                "blocked_by_hook",
                &[("reason", &new_core::tools::escape_controls(&reason))],
            ));
            return None;
        }
        // Background subagents of this conversation that ended since its last turn: each
        // answer is a message before the user's (and the user is told, once).
        self.say_task_notes();
        self.deliver_finished_tasks(observer)?;
        let mut extra = std::mem::take(&mut self.hook_context);
        extra.extend(hooked.context);
        let text = if extra.is_empty() {
            text.to_string()
        } else {
            format!("{text}\n\n{}", extra.join("\n\n"))
        };
        if let Err(e) = self.session.add(Message::new(Role::User, text)) {
            self.out.error(&super::text::error(self.out.lang, &e));
            return None;
        }
        Some(self.answer_with(observer))
    }

    /// The only tools a turn may offer and run: those of the role the session works as
    /// (`--agent`), narrowed by a running skill's `allowed-tools`; None: every tool.
    pub(super) fn turn_tools(&self) -> Option<Vec<String>> {
        let role = self
            .agent
            .as_ref()
            .zip(self.subagents.as_ref())
            .map(|(def, s)| {
                new_core::agent::defs::allowed_tools(def, &self.tools.names(), &s.settings)
            });
        match (role, &self.skill_tools) {
            (Some(role), Some(skill)) => {
                Some(role.into_iter().filter(|t| skill.contains(t)).collect())
            }
            (role, skill) => role.or_else(|| skill.clone()),
        }
    }

    /// Asks the server for its context window once, when neither the config nor the model's
    /// family says.
    pub(super) fn learn_server_window(&mut self) {
        if self.asked_server_window || !self.context.wants_server_window() {
            return;
        }
        self.asked_server_window = true;
        if let Some(n) = self.runtime.block_on(self.provider.server_window()) {
            self.context.set_server_window(n);
        }
    }

    /// A fresh context accounting, after the model or the configuration changed.
    pub(super) fn reset_context(&mut self) {
        self.context =
            new_core::context::Context::new(self.config.context.clone(), &self.config.model);
        self.asked_server_window = false;
        // `{{MODEL}}` says the model in use, in the system prompt and in skills.
        if !self.prompt_written.is_empty() {
            self.fill_prompt();
        }
        self.install_self_skills();
        self.install_hook_agents();
    }

    /// Runs the agent loop on the branch at the cursor and reports how it ended.
    pub(super) fn answer(&mut self) -> TurnEnd {
        let mut printer = Printer::new(self.out).waiting_for(&self.provider.settings().name);
        let end = self.answer_with(&mut printer);
        self.report_turn(&printer);
        end
    }

    fn answer_with(&mut self, observer: &mut dyn new_core::agent::Observer) -> TurnEnd {
        self.answer_at_depth(observer, 0)
    }

    /// The turn; `depth`: how many times a `post_message` (Claude Code's `Stop`) hook has asked it
    /// to go on (at most [`STOP_HOOK_ROUNDS`]).
    fn answer_at_depth(
        &mut self,
        observer: &mut dyn new_core::agent::Observer,
        depth: usize,
    ) -> TurnEnd {
        self.learn_server_window();
        let allowed = self.turn_tools();
        let agent = Agent {
            provider: &self.provider,
            tools: &self.tools,
            model: self.config.model.clone(),
            max_rounds: self.config.max_rounds,
            context: Some(&self.context),
            allowed_tools: allowed.as_deref(),
            checkpoints: self.checkpoints.as_deref(),
            hooks: self.hooks.as_ref(),
            subagents: self.subagents.as_ref(),
            role: None,
            folder: None,
        };
        let mut gate = super::approval::Approvals::for_session(
            &mut self.policy,
            &mut self.reader,
            self.out,
            &self.layers,
            self.config.project_trusted,
            &self.workdir,
            self.hooks.as_ref(),
        );
        self.turns_started.fetch_add(1, Ordering::SeqCst);
        self.busy.store(true, Ordering::SeqCst);
        let end = self.runtime.block_on(agent.run(
            &mut self.session,
            observer,
            &mut gate,
            &mut self.interrupts,
        ));
        self.busy.store(false, Ordering::SeqCst);
        self.after_turn(end, observer, depth)
    }

    /// What follows a turn: the `post_message` hooks of an answer (which may ask it to go on),
    /// the warning of one that did not end well.
    pub(super) fn after_turn(
        &mut self,
        end: TurnEnd,
        observer: &mut dyn new_core::agent::Observer,
        depth: usize,
    ) -> TurnEnd {
        match &end {
            TurnEnd::Complete => {
                let response = self
                    .session
                    .conversation()
                    .get(self.session.conversation().cursor())
                    .map(|m| m.content.clone());
                let hooked = self.fire_hooks(new_core::hooks::Input {
                    response,
                    stop_hook_active: depth > 0,
                    ..new_core::hooks::Input::new("post_message")
                });
                // A hook that blocks the end asks the model to go on, with its reason (unless
                // one also said `"continue": false`).
                let hooked = hooked.unwrap_or_default();
                if let Some(reason) = &hooked.stop {
                    self.out.warn(&self.tr(
                        "stopped_by_hook",
                        &[("reason", &new_core::tools::escape_controls(reason))],
                    ));
                } else if let Some(reason) = hooked.block {
                    if depth >= STOP_HOOK_ROUNDS {
                        self.out
                            .warn(&self.tr("stop_hook_gave_up", &[("n", &STOP_HOOK_ROUNDS)]));
                        return end;
                    }
                    let text = format!("[A hook asks you to go on: {reason}]");
                    self.out
                        .say(&self.out.dim(&new_core::tools::escape_controls(&text)));
                    if let Err(e) = self.session.add(Message::new(Role::User, text)) {
                        self.out.error(&super::text::error(self.out.lang, &e));
                        return end;
                    }
                    return self.answer_at_depth(observer, depth + 1);
                }
            }
            TurnEnd::RoundLimit(n) => self.out.warn(&self.tr("round_limit", &[("n", n)])),
            TurnEnd::ContextFull => self.out.warn(&self.tr("context_full", &[])),
            TurnEnd::Interrupted => {
                self.turn_interrupted = true;
                self.out
                    .warn(&self.tr("interrupted_what_arrived_is_kept", &[]))
            }
            TurnEnd::Stopped(reason) => self.out.warn(&self.tr(
                "stopped_by_hook",
                &[("reason", &new_core::tools::escape_controls(reason))],
            )),
            TurnEnd::Failed(e) => {
                self.out.error(&format!(
                    "{}\n{}",
                    super::text::error(self.out.lang, e),
                    self.tr("your_message_is_saved_send_it", &[])
                ));
                let error = Some(e.to_string());
                self.fire_hooks(new_core::hooks::Input {
                    error,
                    ..new_core::hooks::Input::new("error")
                });
            }
        }
        end
    }

    fn one_shot(&mut self, prompt: &str, format: super::json_output::OutputFormat) -> ExitCode {
        self.ready();
        use super::json_output::{JsonObserver, OutputFormat, ResultFields, write_line};
        // `@server:uri` is read before anything is sent, as at the prompt; one that cannot be
        // read is said (on stderr, and in the JSON's `error`) and nothing is sent.
        let expanded = self.with_resources(prompt);
        if format != OutputFormat::Text {
            let stream = format == OutputFormat::StreamJson;
            let mut observer = JsonObserver::new(Printer::new(self.out), stream);
            observer.emit(serde_json::json!({
                "type": "start",
                "conversation_id": self.session.id(),
                "model": self.config.model,
            }));
            let end = match &expanded {
                Some(prompt) => self.chat_with(prompt, &mut observer),
                None => None,
            };
            let current = self.session.conversation().current();
            let error = match &end {
                None if expanded.is_none() => {
                    Some("an @server:uri resource could not be read".to_string())
                }
                Some(TurnEnd::Complete)
                | Some(TurnEnd::RoundLimit(_))
                | Some(TurnEnd::ContextFull) => None,
                Some(TurnEnd::Interrupted) => Some("interrupted".to_string()),
                Some(TurnEnd::Stopped(reason)) => Some(format!("stopped by a hook: {reason}")),
                Some(TurnEnd::Failed(e)) => Some(e.to_string()),
                None => Some("the message could not be stored".to_string()),
            };
            let answered = current.role == Role::Assistant;
            let mut result = observer.result(ResultFields {
                text: if answered { &current.content } else { "" },
                conversation_id: self.session.id(),
                node_id: &current.id,
                model: &self.config.model,
                error,
            });
            let failed = self.mcp_failures();
            // Said on stderr too: whoever reads only the JSON's `result` still hears of it.
            for (server, error) in &failed {
                self.out.warn(&self.tr(
                    "mcp_server_failed",
                    &[
                        ("server", server),
                        ("error", &new_core::tools::escape_controls(error)),
                    ],
                ));
            }
            result["mcp_errors"] = serde_json::json!(
                failed
                    .iter()
                    .map(|(server, error)| serde_json::json!({"server": server, "error": error}))
                    .collect::<Vec<_>>()
            );
            write_line(&result);
            return match end {
                Some(TurnEnd::Complete)
                | Some(TurnEnd::RoundLimit(_))
                | Some(TurnEnd::ContextFull) => ExitCode::SUCCESS,
                Some(TurnEnd::Interrupted) => ExitCode::from(130),
                _ => ExitCode::from(1),
            };
        }
        let Some(prompt) = expanded else {
            return ExitCode::from(1);
        };
        let end = self.chat(&prompt);
        for (server, error) in self.mcp_failures() {
            self.out.warn(&self.tr(
                "mcp_server_failed",
                &[
                    ("server", &server),
                    ("error", &new_core::tools::escape_controls(&error)),
                ],
            ));
        }
        match end {
            Some(TurnEnd::Complete) => {
                use std::io::Write;
                let answer = &self.session.conversation().current().content;
                let shown = if self.out.render {
                    let mut r =
                        super::markdown::Renderer::new(super::markdown::terminal_layout(false));
                    let mut text = r.push(&new_core::tools::escape_controls_keep_lines(answer));
                    text.push_str(&r.finish());
                    text.trim_end_matches('\n').to_string()
                } else {
                    answer.clone()
                };
                let mut stdout = std::io::stdout().lock();
                // A closed pipe (`new -p … | head -c1`) is the reader's choice, not a failure.
                let _ = writeln!(stdout, "{shown}").and_then(|()| stdout.flush());
                ExitCode::SUCCESS
            }
            Some(TurnEnd::Interrupted) => {
                // What arrived goes where the answer would have (`-p … > out.txt`), and stderr
                // says it is partial and where it is kept; the exit code is 130.
                use std::io::Write;
                let current = self.session.conversation().current();
                if current.role == Role::Assistant && !current.content.is_empty() {
                    let mut stdout = std::io::stdout().lock();
                    let _ = writeln!(stdout, "{}", current.content).and_then(|()| stdout.flush());
                    self.out
                        .warn(&self.tr("partial_answer_on_stdout", &[("id", &self.session.id())]));
                }
                ExitCode::from(130)
            }
            _ => ExitCode::from(1),
        }
    }
}

impl App {
    /// The MCP servers that failed to start (or to answer), with why: said in `-p` mode, where
    /// there is no `/mcp` to look at.
    fn mcp_failures(&self) -> Vec<(String, String)> {
        self.tools
            .mcp()
            .map(|m| m.statuses())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| match s.state {
                new_core::mcp::State::Failed(why) => Some((s.name, why)),
                _ => None,
            })
            .collect()
    }
}

/// What the start-up thread reads: the skills, what AGENTS.md reported, the system prompt's parts.
/// The reading of the system prompt's parts: not started (the prompt is not up yet), or running.
pub(super) enum PromptRead {
    Waiting(Box<dyn FnOnce() -> PromptJob + Send>),
    Running(std::thread::JoinHandle<PromptJob>),
}

pub(super) struct PromptJob {
    skills: SkillRegistry,
    problems: Vec<String>,
    parts: Vec<(String, String)>,
}

/// Reads what the system prompt is made of (the skills, AGENTS.md, the memory indexes, the
/// environment) and fills what Tab completion (`names`) and `use_skill` (`shelf`) read.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_prompt(
    layers: &Layers,
    role: &RoleFile,
    workdir: &Path,
    skill_settings: &new_core::skill::SkillSettings,
    memory: Option<&new_core::memory::MemoryStore>,
    memory_settings: &new_core::memory::MemorySettings,
    names: &super::editor::SkillNames,
    shelf: &new_core::tools::builtin::Shelf,
) -> PromptJob {
    let skills = SkillRegistry::load_with(layers, skill_settings);
    *names.write().unwrap_or_else(|e| e.into_inner()) =
        skills.all().map(|s| s.name.clone()).collect();
    shelf.set(skills.shelf(skill_settings.max_bytes));
    let instructions = prompt::agents::load(layers.user.as_deref(), workdir);
    // What the instructions are made of (the files they include) is kept like `.new/`: the
    // model's writes there are asked for, and commands cannot change them.
    if let Some(sandbox) = new_sys::os_sandbox::current() {
        let root = workdir
            .canonicalize()
            .unwrap_or_else(|_| workdir.to_path_buf());
        sandbox.protect(
            instructions
                .sources
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .filter(|p| p.starts_with(&root)),
        );
    }
    let mut parts = prompt::system_prompt_parts(role, &instructions.text, &skills, workdir);
    parts.extend(memory_part(memory, memory_settings));
    PromptJob {
        skills,
        problems: instructions.problems,
        parts,
    }
}

/// The memory indexes as a part of the system prompt.
pub(super) fn memory_part(
    memory: Option<&new_core::memory::MemoryStore>,
    settings: &new_core::memory::MemorySettings,
) -> Option<(String, String)> {
    let text = memory?.prompt_part(settings.index_max_lines, settings.index_max_bytes)?;
    Some(("memory".to_string(), text))
}

/// A stream of SIGINTs, registered when this is called (it must run inside the runtime).
fn interrupt_signal() -> std::io::Result<new_sys::platform::Interrupts> {
    new_sys::platform::Interrupts::new()
}
