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
use super::terminal::{Stream, Terminal};
use new_core::agent::Interrupts;
use new_core::config::{self, Config, Lang, Overrides};
use new_core::escape;
use new_core::hooks::Action;
use new_core::hooks::HookSettings;
use new_core::layers::Layers;
use new_core::layers::Origin;
use new_core::mcp::Manager;
use new_core::mcp::McpSettings;
use new_core::mcp::ServerConfig;
use new_core::mcp::State;
use new_core::memory::MemorySettings;
use new_core::memory::MemoryStore;
use new_core::prompt::{self, RoleFile};
use new_core::secret;
use new_core::session;
pub(super) use new_core::session::os_sandbox_for as session_sandbox;
use new_core::session::{Ended, Options, Resume, Session};
use new_core::skill::Shelf;
use new_core::skill::SkillSettings;
use new_core::trust::Trust;
use new_core::vocab::Role;
use new_sys::os_sandbox;
use new_sys::platform;
use new_sys::platform::SavedTerminal;
use new_sys::platform::winpath::Refusal;
use std::collections::VecDeque;
use std::env;
use std::fmt::Display;
use std::fs;
use std::future::Future;
use std::io;
use std::mem;
use std::process;
use std::thread;
use std::thread::JoinHandle;
use tokio::runtime::Builder;
use tokio::runtime::Runtime;

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
    pub output_format: super::print_mode::OutputFormat,
    /// Answers as the model wrote them (`--no-render`).
    pub no_render: bool,
    /// Work as this subagent role (`--agent NAME`).
    pub agent: Option<String>,
    /// The REPL's first message, sent as if typed at the first prompt (`-q TEXT`).
    pub query: Option<String>,
    /// Run the setup wizard again (`--setup`).
    pub setup: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Exit,
}

pub struct App {
    /// The engine: everything a session is, with no terminal in it.
    pub engine: Session,
    pub(super) out: Output,
    pub(super) reader: Reader,
    /// The last status line, for `/status`.
    pub(super) last_status: Option<String>,
    pub(super) runtime: Runtime,
    /// The skill names Tab completes.
    pub(super) skill_names: super::editor::SkillNames,
    /// The system prompt's parts: to be read, or being read, until [`App::ready`] takes them.
    pub(super) prompt_job: Option<PromptRead>,
    /// The last turn ended interrupted (Ctrl-C, also at a question, where it is a key).
    pub(super) turn_interrupted: bool,
    /// The main prompt waits for input (what other threads print then goes above it).
    pub(super) at_prompt: Arc<AtomicBool>,
    /// The node numbers shown, each with the node it stood for then.
    pub(super) shown: super::numbers::Shown,
    /// Raises the session's interrupts, as Ctrl-C does (the page's Stop).
    pub(super) interrupt: watch::Sender<u64>,
    /// The sandbox's state was said (once): before the first turn when the probe is done by
    /// then, else after that turn, which does not wait for it.
    pub(super) sandbox_said: bool,
}

/// Runs `work` to completion unless the user presses Ctrl-C (then None): the engine's
/// [`new_core::session::interruptible`], waited for here.
pub(super) fn interruptible<T>(
    runtime: &Runtime,
    busy: &AtomicBool,
    interrupts: &mut Interrupts,
    work: impl Future<Output = T>,
) -> Option<T> {
    runtime.block_on(session::interruptible(busy, interrupts, work))
}

pub fn run(launch: Launch) -> ExitCode {
    let interactive = launch.prompt.is_none() && io::stdin().is_terminal();
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
                color: color_for(&io::stderr()),
                lang,
                one_shot: true,
                render: false,
            };
            out.error(&chain(lang, &e));
            return ExitCode::from(2);
        }
    };
    if let Some(prompt) = &launch.prompt {
        let code = match super::print_mode::one_shot_prompt(prompt) {
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
    if launch.setup && interactive {
        app.run_setup();
    } else if app.is_first_run() {
        app.explain_configuration();
        if interactive {
            app.offer_setup();
        }
    }
    // `--continue` and `--resume`: where the conversation stands, under the banner; the node
    // they land on may hold files other than the folder's.
    if (launch.continue_latest || launch.resume.is_some()) && app.engine.chat.is_persisted() {
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
    let tr = |key: &str, args: &[(&str, &dyn Display)]| {
        escape::escape_controls(&super::text::tr(out.lang, key, args))
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
    // Said once, in one line: everything the file asked for and did not get.
    if !config.ignored.is_empty() {
        let what = config.ignored.join(", ");
        out.warn(&tr(
            "ignored_from_project",
            &[("what", &what), ("file", &file)],
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
        .map(|w| format!("  - {}\n", escape::escape_controls(w)))
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
    let _ = io::stdout().flush();
    let mut answer = String::new();
    if io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_lowercase().as_str(), "y" | "yes" | "是")
}

/// Whether standard input already holds something to read (piped input read ahead): then
/// the next line is handled before anything is started in the background.
fn input_waiting() -> bool {
    platform::stdin_has_input() && !io::stdin().is_terminal()
}

/// Whether a project's entries of one kind (`what`: `mcp` or `hooks`) may run: already trusted,
/// or trusted now (`yes`, which asks or reads `--trust-project`) and remembered by their text;
/// otherwise `not_trusted` is said.
fn trust_entries(
    say: &mut dyn FnMut(String),
    trust: &Trust,
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
    say(not_trusted.to_owned());
    Ok(false)
}

/// Who can settle a project's trust at start: `--trust-project`, and someone at a terminal.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asking {
    pub trust_project: bool,
    pub interactive: bool,
}

/// The configuration of `workdir` with the project's trust settled, one way for every front end
/// (the REPL, `-p`, `new web`, `new acp`): its untrusted config (trusted by `--trust-project` or a
/// yes, then read again), its hooks and MCP servers (they start programs), the MCP servers that
/// pass a secret on, and Claude Code's allow rules (they widen what runs unasked). Nobody to ask
/// and no `--trust-project`: what needs a yes stays off. What stays off is said through `say`.
pub(super) fn settle_trust(
    out: &Output,
    asking: Asking,
    layers: &Layers,
    workdir: &Path,
    overrides: &Overrides,
    mut config: Config,
    say: &mut dyn FnMut(String),
) -> Result<Config> {
    if !config.project_trusted
        && !config.project_files.is_empty()
        && (asking.trust_project
            || (asking.interactive
                && !config.ignored.is_empty()
                && ask_trust(out, &config.project_files, &config.ignored)))
    {
        let trust = Trust::new(layers.user.as_deref());
        for file in &config.project_files {
            let bytes = fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            trust
                .trust(workdir, config::trust_kind(file), &bytes)
                .context("remembering that the project's config is trusted")?;
        }
        config = config::load(layers, overrides, &env_var)?;
    }
    // A project's own entries that start processes run once the user trusts them.
    let trust = Trust::new(layers.user.as_deref());
    let ask = |ask: &dyn Fn() -> bool| asking.trust_project || (asking.interactive && ask());
    config.hooks_trusted = trust_entries(
        say,
        &trust,
        workdir,
        (
            "hooks",
            config.hooks_trusted,
            config.hooks.project_entries.as_deref(),
        ),
        || ask(&|| ask_hooks_trust(out, &config.hooks)),
        &super::text::tr(out.lang, "hooks_not_trusted", &[]),
    )?;
    config.mcp_trusted = trust_entries(
        say,
        &trust,
        workdir,
        (
            "mcp",
            config.mcp_trusted,
            config.mcp.project_entries.as_deref(),
        ),
        || ask(&|| ask_mcp_trust(out, &config.mcp, &config.secret_vars)),
        &super::text::tr(out.lang, "mcp_not_trusted", &[]),
    )?;
    if config.mcp_trusted {
        confirm_secret_servers(out, &trust, workdir, &mut config, asking.interactive, say)?;
    }
    // A project's Claude Code allow rules widen what runs unasked: only once trusted.
    let claude_allow = trust_entries(
        say,
        &trust,
        workdir,
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
                    .map(|r| format!("  - {}\n", escape::escape_controls(&r.describe())))
                    .collect();
                ask_yes(
                    out,
                    &super::text::tr(out.lang, "claude_allow_question", &[("list", &list)]),
                )
            })
        },
        &super::text::tr(out.lang, "claude_allow_not_trusted", &[]),
    )?;
    if claude_allow {
        let allow = mem::take(&mut config.claude_allow);
        config.project_rules.extend(allow);
    }
    Ok(config)
}

/// Asks on the terminal whether to trust the project's hooks (they run commands).
fn ask_hooks_trust(out: &Output, hooks: &HookSettings) -> bool {
    let list: String = hooks
        .entries
        .iter()
        .filter(|e| e.origin == Origin::Project)
        .map(|e| {
            let what = match &e.action {
                Action::Command { command, .. } => command.clone(),
                Action::Http { url, .. } => format!("POST {url}"),
                Action::Prompt(text) => format!("adds: {text}"),
                Action::Agent { role, .. } => format!("runs the subagent {role}"),
            };
            format!(
                "  - {} ({}): {}\n",
                escape::escape_controls(&e.name),
                e.event,
                escape::escape_controls(&what)
            )
        })
        .collect();
    let question = super::text::tr(out.lang, "hooks_trust_question", &[("list", &list)]);
    ask_yes(out, &question)
}

/// Asks on the terminal whether to trust the project's MCP servers (they start programs).
fn ask_mcp_trust(out: &Output, mcp: &McpSettings, hidden: &[String]) -> bool {
    let list: String = mcp
        .servers
        .iter()
        .filter(|s| s.origin == Origin::Project)
        .map(|s| describe_server(out, s, hidden))
        .collect();
    let question = super::text::tr(out.lang, "mcp_trust_question", &[("list", &list)]);
    ask_yes(out, &question)
}

/// A project's MCP server as the trust question shows it: everything that runs and everything it
/// gets (command, arguments, folder, variables, headers, URL), as written, `${…}` unexpanded, and
/// each reference to a secret-looking variable marked.
fn describe_server(out: &Output, s: &ServerConfig, hidden: &[String]) -> String {
    let mut text = format!(
        "  - {}: {}\n",
        escape::escape_controls(&s.name),
        escape::escape_controls(&s.raw)
    );
    for name in s
        .references
        .iter()
        .filter(|n| secret::is_secret_reference(n, hidden))
    {
        text.push_str(&format!(
            "    {}\n",
            out.bold(&super::text::tr(
                out.lang,
                "mcp_passes_a_secret",
                &[("name", &escape::escape_controls(name))]
            ))
        ));
    }
    text
}

/// A project's MCP servers that pass a secret-looking variable on (a provider key in `env`, a
/// header or the URL) run only once that entry is confirmed on its own, as it is now; the rest
/// are turned off, each said through `say`. Confirmations are remembered like trust.
pub(super) fn confirm_secret_servers(
    out: &Output,
    trust: &Trust,
    workdir: &Path,
    config: &mut Config,
    interactive: bool,
    say: &mut dyn FnMut(String),
) -> Result<()> {
    let hidden = config.secret_vars.clone();
    for server in config
        .mcp
        .servers
        .iter_mut()
        .filter(|s| s.origin == Origin::Project && !s.disabled)
    {
        let secrets: Vec<String> = server
            .references
            .iter()
            .filter(|n| secret::is_secret_reference(n, &hidden))
            .cloned()
            .collect();
        if secrets.is_empty() {
            continue;
        }
        let what = format!("mcp-secret:{}", server.name);
        if trust.is_trusted(workdir, &what, server.raw.as_bytes()) {
            continue;
        }
        let shown = escape::escape_controls(&server.name);
        let names = escape::escape_controls(&secrets.join(", "));
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
            let said = super::text::tr(
                out.lang,
                "mcp_secret_refused",
                &[("name", &shown), ("secrets", &names)],
            );
            say(said.clone());
            // Said again where failures are (`-p`'s `mcp_errors`, `/mcp`).
            server.held = Some(said);
        }
    }
    Ok(())
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
    env::var(name).ok()
}

fn color_for(stream: &impl IsTerminal) -> bool {
    stream.is_terminal()
        && env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && platform::terminal_colours()
}

/// While it lives, the terminal does not echo control keys (`^C`) as text: the line editor
/// keeps the setting it finds, so it holds for the session.
struct QuietControlKeys {
    _saved: Option<SavedTerminal>,
}

impl QuietControlKeys {
    fn new() -> Self {
        QuietControlKeys {
            _saved: SavedTerminal::quiet_control_keys(),
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
            let text = escape::escape_controls(&workdir.to_string_lossy());
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
            platform::path_refusal(&workdir.to_string_lossy())
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
        let config = config::load(&layers, &launch.overrides, &env_var)?;
        let one_shot = launch.prompt.is_some();
        let out = Output {
            color: if one_shot {
                color_for(&io::stderr())
            } else {
                color_for(&io::stdout())
            },
            lang: config.lang,
            one_shot,
            // Markdown is rendered where the answer shows: stdout, on a terminal, with colour.
            render: config.render && !launch.no_render && color_for(&io::stdout()),
        };
        let config = settle_trust(
            &out,
            Asking {
                trust_project: launch.trust_project,
                interactive,
            },
            &layers,
            &workdir,
            &launch.overrides,
            config,
            &mut |line| out.warn(&line),
        )?;
        announce_project_config(&out, &config);
        for warning in &config.warnings {
            out.warn(&escape::escape_controls(warning));
        }
        let role = prompt::load_role(&layers, launch.role.as_deref().unwrap_or("default"))?;
        let datadir = launch
            .datadir
            .clone()
            .unwrap_or_else(|| default_datadir(&workdir));
        let os_sandbox = session_sandbox(&config, &workdir, &datadir);
        if let Some(sandbox) = &os_sandbox {
            os_sandbox::set_current(sandbox.clone());
            if interactive {
                sandbox.ask_about_hosts();
            }
            // Found out on a thread of its own (the helper is started once): nothing waits for
            // it but a command (see `say_sandbox`). A one-shot leaves it to its first command:
            // started beside its request, it would only take the request's CPU.
            if launch.prompt.is_none() {
                let probing = sandbox.clone();
                thread::spawn(move || {
                    tracing::info!(state = ?probing.state(), "sandbox");
                });
            }
        }
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let (tx, interrupts) = watch::channel(0u64);
        let busy = Arc::new(AtomicBool::new(false));
        let shelf = Shelf::default();
        let resume = match (&launch.resume, launch.continue_latest) {
            (Some(id), _) => Resume::Id(id.clone()),
            (None, true) => Resume::Latest,
            (None, false) => Resume::Fresh,
        };
        let opened = Session::open(Options {
            workdir,
            layers,
            config,
            overrides: launch.overrides.clone(),
            role,
            datadir: datadir.clone(),
            resume,
            one_shot,
            agent: launch.agent.clone(),
            os_sandbox: os_sandbox.clone(),
            shelf: shelf.clone(),
            interrupts,
            busy: busy.clone(),
        })?;
        if opened.nothing_to_continue {
            out.warn(&super::text::tr(out.lang, "nothing_to_continue", &[]));
        }
        for warning in &opened.warnings {
            out.warn(&escape::escape_controls(warning));
        }
        let (mut engine, report) = (opened.session, opened.report);
        // The system prompt's parts (skills, AGENTS.md, memory, the environment with its `git
        // status`) are read on a second thread: the prompt shows without waiting for hundreds of
        // skill files, and the first input waits for them ([`App::ready`]). The thread starts
        // once start-up is done and input is awaited ([`App::start_prompt_read`]), so that it
        // does not slow start-up down; at once when they are needed soon (a one-shot, a resumed
        // conversation), to be read while the rest starts. It fills what Tab completion and
        // `use_skill` read itself.
        let skill_names: super::editor::SkillNames = Default::default();
        let prompt_job = {
            let (layers, role, workdir) = (
                engine.layers.clone(),
                engine.role.clone(),
                engine.workdir.clone(),
            );
            let (skill_settings, memory_settings) =
                (engine.config.skill.clone(), engine.config.memory.clone());
            let (memory, names) = (engine.memory.clone(), skill_names.clone());
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
                PromptRead::Running(thread::spawn(read))
            } else {
                PromptRead::Waiting(read)
            }
        };
        let mcp_slot: super::editor::McpSlot = Default::default();
        let reader = if one_shot {
            Reader::Closed
        } else if interactive {
            Reader::editor(
                engine.store.clone(),
                out.color,
                skill_names.clone(),
                mcp_slot.clone(),
            )
            .context("starting the line editor")?
        } else {
            Reader::piped()
        };
        // MCP servers start in the background: the prompt does not wait for them.
        if let Some(manager) =
            engine.mcp_manager(&datadir, runtime.handle().clone(), os_sandbox.clone())
        {
            manager.on_progress(Arc::new(|line: &str| {
                super::spinner::hush_any();
                eprintln!("  … {line}")
            }));
            manager.set_elicitor(super::mcp_view::terminal_elicitor(engine.config.lang));
            let _ = mcp_slot.set(manager.clone());
            engine.set_mcp(manager);
        }
        let busy_flag = busy.clone();
        let interrupt = tx.clone();
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
                    process::exit(130);
                }
            }
        });
        tracing::info!(workdir = ?engine.workdir, provider = ?engine.config.provider.name,
            model = ?engine.config.model, sandbox = os_sandbox.is_some(), interactive, "configured");
        let mut app = App {
            engine,
            out,
            reader,
            last_status: None,
            runtime,
            skill_names,
            prompt_job: Some(prompt_job),
            turn_interrupted: false,
            at_prompt: Default::default(),
            shown: Default::default(),
            interrupt,
            sandbox_said: false,
        };
        app.tell_tasks_at_the_prompt();
        tracing::info!(session = %app.engine.chat.id(), "session start");
        let mut front = Terminal::plain(app.out);
        app.runtime
            .block_on(app.engine.fire_start_hooks(&mut front));
        if let Some(report) = report {
            app.report_load(&report);
        }
        Ok(app)
    }

    /// With `subagent.auto_continue` on and an ended background task's answer not yet given to
    /// this conversation: gives it (with the answers of any others) and runs a turn on it, as
    /// if the user had asked to go on. True when it did.
    fn auto_continue(&mut self) -> bool {
        let mut printer = Printer::new(self.out).waiting_for(&self.engine.provider.settings().name);
        let mut front = Terminal::turn(self.out, &mut printer, &mut self.reader);
        let end = self.runtime.block_on(self.engine.auto_continue(&mut front));
        self.turn_interrupted |= front.interrupted;
        if end.is_none() {
            return false;
        }
        self.report_turn(&printer);
        true
    }

    /// Gives the hooks what runs their `agent` actions ([`Session::install_hook_agents`]).
    fn install_hook_agents(&mut self) {
        self.engine.install_hook_agents();
    }

    /// Ends the application without freeing the conversation tree: every message is on disk
    /// already, and freeing a big tree one node at a time only delays the exit. Everything else
    /// (the line editor, the runtime) is dropped as usual.
    pub(super) fn leave(mut self) {
        let mut front = Terminal::plain(self.out);
        let closed = self.runtime.block_on(self.engine.close(&mut front));
        if !closed.protected_changed.is_empty() {
            let names = closed.protected_changed.join(", ");
            self.out
                .warn(&self.tr("protected_changed_at_exit", &[("names", &names)]));
        }
        if closed.tasks_stopped > 0 {
            self.out.say(
                &self
                    .out
                    .dim(&self.tr("tasks_stopped_at_exit", &[("n", &closed.tasks_stopped)])),
            );
        }
        let App { engine, .. } = self;
        mem::forget(engine.chat);
    }

    /// The text for `key` in the interface's language ([`super::text`]).
    pub(super) fn tr(&self, key: &str, args: &[(&str, &dyn Display)]) -> String {
        super::text::tr(self.out.lang, key, args)
    }

    fn banner(&self) {
        let s = self.engine.provider.settings();
        self.out.say(&format!(
            "{} {} · {} {} · {} {} · {} {}",
            self.out.bold("new"),
            env!("CARGO_PKG_VERSION"),
            self.tr("provider", &[]),
            s.name,
            self.tr("model", &[]),
            self.engine.config.model,
            self.tr("role", &[]),
            self.engine.role.name,
        ));
        self.out.say(&self.out.dim(&format!(
            "{} {} · {}",
            self.tr("working_folder", &[]),
            self.engine.workdir.display(),
            self.tr("help_for_commands_alt_enter_or", &[])
        )));
        if !self.engine.config.has_credentials && !self.is_first_run() {
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
                escape::escape_controls(&line)
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
            if let Some(mcp) = self.engine.tools.source::<Manager>()
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
            // Lines kept from a question asked outside any command (after `--continue`): they
            // run now, as typed.
            let kept = self.reader.end_typeahead();
            if !kept.is_empty() {
                let mut kept = VecDeque::from(kept);
                let first = kept.pop_front().expect("not empty");
                self.out.say(&format!(
                    "{}{}",
                    self.out.dim(&self.prompt_text()),
                    escape::escape_controls(&first)
                ));
                if self.run_queue(first, kept) == Flow::Exit {
                    return Ok(());
                }
                continue;
            }
            let prompt = self.prompt_text();
            // What was typed during the last turn without an Enter: this prompt's line.
            let typed_ahead = self.reader.typed_ahead();
            // A background task whose answer the conversation goes on with when it ends: the
            // prompt waits for it as well as for a key (the line editor waits for keys only).
            if typed_ahead.is_empty() && self.goes_on_with_a_task() {
                let tasks = self.engine.subagents.as_ref().map(|s| s.tasks.clone());
                let id = self.engine.chat.id().to_string();
                let ended = move || tasks.as_ref().is_some_and(|t| t.has_finished(&id));
                if super::idle::wait(&prompt, &ended) == super::idle::Waited::Woken {
                    continue;
                }
            }
            self.at_prompt.store(true, Ordering::SeqCst);
            let read = self.reader.read(&prompt, &typed_ahead, true, &self.out);
            self.at_prompt.store(false, Ordering::SeqCst);
            match read.context("reading input")? {
                ReadOutcome::Line(line) => {
                    self.engine.auto_continued = false;
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
        self.run_queue(line, VecDeque::new())
    }

    /// [`App::run_lines`] with lines already waiting after the first.
    fn run_queue(&mut self, line: String, mut lines: VecDeque<String>) -> Flow {
        lines.push_front(line);
        while let Some(line) = lines.pop_front() {
            let before = *self.engine.interrupts.borrow();
            self.turn_interrupted = false;
            self.reader.begin_typeahead();
            let flow = self.handle_line(&line);
            let typed = self.reader.end_typeahead();
            if flow == Flow::Exit {
                return Flow::Exit;
            }
            if *self.engine.interrupts.borrow() != before || mem::take(&mut self.turn_interrupted) {
                self.say_tasks_going_on();
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
                    escape::escape_controls(next)
                ));
            }
        }
        Flow::Continue
    }

    fn prompt_text(&self) -> String {
        let c = self.engine.chat.conversation();
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
    /// A question that came up unasked-for (after a move, after answers side by side): a line
    /// that is none of `answers` was typed ahead, not meant for it; it is kept for the prompt,
    /// said, and the question takes its default (None).
    pub(super) fn ask_unasked(&mut self, question: &str, answers: &[&str]) -> Option<String> {
        let line = self.ask(question, "", false)?;
        let answer = line.trim().to_lowercase();
        if answer.is_empty() || answers.contains(&answer.as_str()) {
            return Some(answer);
        }
        if self.reader.keep_for_the_prompt(line.clone()) {
            self.out.say(&self.out.dim(&self.tr(
                "not_an_answer_kept",
                &[("line", &escape::escape_controls(line.trim()))],
            )));
            return None;
        }
        Some(answer)
    }

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
            Some(PromptRead::Waiting(read)) => Some(PromptRead::Running(thread::spawn(read))),
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
        self.say_sandbox(false);
        self.take_prompt(done, true);
    }

    /// Puts a system prompt read by [`read_prompt`] in force, for the conversation in use too;
    /// with `report`, what could not be read is said.
    pub(super) fn take_prompt(&mut self, done: PromptJob, report: bool) {
        let problems = self.engine.take_prompt(done);
        if report {
            for problem in &problems {
                self.out.warn(&escape::escape_controls(problem));
            }
        }
    }

    /// Said once: a sandbox that could not be set up, or WORKDIR that is the home folder (so
    /// commands may write all of it but what runs later outside the sandbox). Before the first
    /// turn when the probe (a process of its own, started at start-up) has answered by then; the
    /// first request does not wait for it, so otherwise after that turn (`wait`). A command run
    /// in the turn waits for the probe itself and is asked about or refused as the state says.
    pub(super) fn say_sandbox(&mut self, wait: bool) {
        if self.sandbox_said {
            return;
        }
        let Some(sandbox) = self.engine.tools.context().os_sandbox.clone() else {
            self.sandbox_said = true;
            return;
        };
        let state = if wait {
            Some(sandbox.state())
        } else {
            sandbox.state_if_known()
        };
        let Some(state) = state else { return };
        self.sandbox_said = true;
        if !matches!(state, os_sandbox::State::On) {
            let line = super::sandbox_view::one_line(self.out.lang, state, sandbox.settings());
            self.out.warn(&escape::escape_controls(&line));
        } else if sandbox.workdir_is_home() {
            self.out.warn(&self.tr("sandbox_workdir_is_home", &[]));
        }
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
                self.say_sandbox(true);
            }
            Input::Goto(n) => self.goto(n, line.trim().trim_start_matches('/')),
            Input::Unknown(word) => {
                let name = word.trim_start_matches('/');
                let args = line.trim().strip_prefix(word).unwrap_or("").trim();
                if self.engine.skills.get(name).is_some() {
                    self.run_skill(name, args);
                } else if (name.starts_with("mcp__") && self.run_mcp_prompt(name, args))
                    || (args.is_empty() && self.goto_id(name))
                {
                    // An MCP server's prompt ran, or `/ID` moved to that node.
                } else if let Some(near) = super::commands::nearest(word) {
                    self.out.error(&self.tr(
                        "unknown_command_did_you_mean",
                        &[("word", &word), ("near", &near)],
                    ));
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
            CommandId::Setup => {
                if self.no_args_for("/setup", args) {
                    self.run_setup();
                }
            }
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
    /// message was not sent.
    pub(super) fn chat(&mut self, text: &str) -> Option<Ended> {
        // The hooks' subagents decide by the permissions as they are now (a `/permissions`
        // change, a rule allowed for the session).
        self.install_hook_agents();
        let mut printer = Printer::new(self.out).waiting_for(&self.engine.provider.settings().name);
        let end = self.chat_with(text, &mut printer);
        if end.is_some() {
            self.report_turn(&printer);
        }
        if matches!(end, Some(Ended::Complete)) && !self.out.one_shot {
            self.review_turn();
        }
        end
    }

    /// The status line after a turn (one dim line), and the session's totals.
    pub(super) fn report_turn(&mut self, printer: &Printer) {
        let cost = self
            .engine
            .config
            .pricing
            .zip(printer.turn.as_ref())
            .map(|(p, turn)| p.cost(turn));
        if let Some(turn) = &printer.turn {
            super::output::add_usage(&mut self.engine.totals.0, turn);
        }
        self.engine.totals.1 += cost.unwrap_or(0.0);
        self.engine.totals.2 += 1;
        let line = super::output::status_line(
            self.out.lang,
            &self.engine.config.model,
            printer.turn.as_ref(),
            Some(self.context_use()),
            self.turn_seconds(printer),
            cost,
        );
        self.out.say(&self.out.dim(&line));
        self.last_status = Some(line);
    }

    /// How long the turn took: as its answer keeps it (what `/compare` says), else as measured.
    fn turn_seconds(&self, printer: &Printer) -> f64 {
        let c = self.engine.chat.conversation();
        c.get(c.cursor())
            .filter(|m| m.role == Role::Assistant)
            .and_then(|m| m.extra.seconds)
            .map_or_else(|| printer.started.elapsed().as_secs_f64(), f64::from)
    }

    pub(super) fn chat_with(&mut self, text: &str, stream: &mut dyn Stream) -> Option<Ended> {
        let mut front = Terminal::turn(self.out, stream, &mut self.reader);
        let end = self.runtime.block_on(self.engine.send(text, &mut front));
        self.turn_interrupted |= front.interrupted;
        end
    }

    /// Asks the server for its context window once, when neither the config nor the model's
    /// family says.
    pub(super) fn learn_server_window(&mut self) {
        self.runtime.block_on(self.engine.learn_server_window());
    }

    /// A fresh context accounting, after the model or the configuration changed.
    pub(super) fn reset_context(&mut self) {
        self.engine.reset_context();
    }

    /// Runs the agent loop on the branch at the cursor and reports how it ended.
    pub(super) fn answer(&mut self) -> Ended {
        let mut printer = Printer::new(self.out).waiting_for(&self.engine.provider.settings().name);
        let mut front = Terminal::turn(self.out, &mut printer, &mut self.reader);
        let end = self.runtime.block_on(self.engine.answer(&mut front));
        self.turn_interrupted |= front.interrupted;
        self.report_turn(&printer);
        end
    }
}

impl App {
    /// The MCP servers that failed to start (or to answer), with why: said in `-p` mode, where
    /// there is no `/mcp` to look at.
    pub(super) fn mcp_failures(&self) -> Vec<(String, String)> {
        self.engine
            .tools
            .source::<Manager>()
            .map(|m| m.statuses())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| match s.state {
                State::Failed(why) | State::Held(why) => Some((s.name, why)),
                _ => None,
            })
            .collect()
    }
}

/// The reading of the system prompt's parts: not started (the prompt is not up yet), or running.
pub(super) enum PromptRead {
    Waiting(Box<dyn FnOnce() -> PromptJob + Send>),
    Running(JoinHandle<PromptJob>),
}

/// What the start-up thread reads: the skills, what AGENTS.md reported, the system prompt's parts.
pub(super) type PromptJob = session::PromptRead;

/// Reads what the system prompt is made of ([`session::read_prompt`]) and fills what Tab
/// completion (`names`) reads too.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_prompt(
    layers: &Layers,
    role: &RoleFile,
    workdir: &Path,
    skill_settings: &SkillSettings,
    memory: Option<&MemoryStore>,
    memory_settings: &MemorySettings,
    names: &super::editor::SkillNames,
    shelf: &Shelf,
) -> PromptJob {
    let done = session::read_prompt(
        layers,
        role,
        workdir,
        skill_settings,
        memory,
        memory_settings,
        shelf,
    );
    *names.write().unwrap_or_else(|e| e.into_inner()) =
        done.skills.all().map(|s| s.name.clone()).collect();
    done
}

/// A stream of SIGINTs, registered when this is called (it must run inside the runtime).
fn interrupt_signal() -> io::Result<platform::Interrupts> {
    platform::Interrupts::new()
}
