//! The `new` binary: parses the command line and hands over to the library.
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use new_cli::acp;
use new_cli::acp::AcpLaunch;
use new_cli::import_cmd;
use new_cli::import_cmd::ImportLaunch;
use new_cli::print_mode::OutputFormat;
use new_cli::web;
use new_cli::web::WebLaunch;
use new_cli::{Launch, run};
use new_core::config::{Lang, Overrides};
use new_core::log;
use new_core::tools::Mode;
use new_sys::os_sandbox;
use new_sys::platform;
use std::env;

/// A terminal AI agent whose conversations are trees.
#[derive(Parser, Debug)]
#[command(
    name = "new",
    version,
    about = "A terminal AI agent whose conversations are trees (and: new import, new web)",
    long_about = None
)]
struct Args {
    /// The only folder the tools may touch [default: .]
    workdir: Option<PathBuf>,
    /// The system prompt's role, roles/<ROLE>.md [default: default]
    role: Option<String>,
    /// Where the conversations live [default: one per project]
    datadir: Option<PathBuf>,
    /// openai, anthropic, ollama, llamacpp, …
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// The model to ask
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// The interface's language: en or zh
    #[arg(long, value_name = "LANG", value_parser = ["en", "zh"], hide_possible_values = true)]
    lang: Option<String>,
    /// strict, default or permissive
    #[arg(long, value_name = "MODE", value_parser = ["strict", "default", "permissive"], hide_possible_values = true)]
    permission_mode: Option<String>,
    /// Send TEXT, print the answer and exit (-: stdin)
    #[arg(short = 'p', long = "prompt", value_name = "TEXT")]
    prompt: Option<String>,
    /// What -p prints: text, json or stream-json
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json", "stream-json"], default_value = "text", hide_default_value = true, hide_possible_values = true, requires = "prompt")]
    output_format: String,
    /// Start the REPL with TEXT as the first message
    #[arg(
        short = 'q',
        long = "query",
        value_name = "TEXT",
        conflicts_with = "prompt"
    )]
    query: Option<String>,
    /// Reopen this project's latest conversation
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    continue_latest: bool,
    /// Reopen conversation ID (a prefix is enough)
    #[arg(short = 'r', long, value_name = "ID")]
    resume: Option<String>,
    /// Trust the project's .new/config.json as it is
    #[arg(long)]
    trust_project: bool,
    /// Show answers as written (Markdown unrendered)
    #[arg(long)]
    no_render: bool,
    /// Work as subagent role NAME (see /agents)
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Run the setup wizard again (provider, address, key, model); kept out of --help, which
    /// fits a screen: the docs and the no-key screen name it
    #[arg(long, conflicts_with = "prompt", hide = true)]
    setup: bool,
}

/// `new import SOURCE PATH…`: other agents' history as this project's conversations.
#[derive(Parser, Debug)]
#[command(
    name = "new import",
    bin_name = "new import",
    about = "Other agents' history (Claude Code, Codex, pi) as this project's conversations",
    long_about = None
)]
struct ImportArgs {
    /// Whose history: claude (Claude Code), codex or pi
    #[arg(value_parser = ["claude", "codex", "pi"], hide_possible_values = true)]
    source: String,
    /// Session files (.jsonl), or folders of them
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The project they become conversations of [default: .]
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Where its conversations live [default: its own folder]
    #[arg(long, value_name = "DIR")]
    datadir: Option<PathBuf>,
}

/// `new acp`: an Agent Client Protocol agent on stdin and stdout, for editors.
#[derive(Parser, Debug)]
#[command(
    name = "new acp",
    bin_name = "new acp",
    about = "Speak the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, acpx)",
    long_about = None
)]
struct AcpArgs {
    /// Where the conversations live [default: one per project]
    #[arg(long, value_name = "DIR")]
    datadir: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
}

/// The mode, provider and model options `new acp` and `new web` share.
#[derive(clap::Args, Debug)]
struct EngineArgs {
    /// strict, default or permissive
    #[arg(long, value_name = "MODE", value_parser = ["strict", "default", "permissive"], hide_possible_values = true)]
    permission_mode: Option<String>,
    /// openai, anthropic, ollama, llamacpp, …
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// The model to ask
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
}

impl EngineArgs {
    fn overrides(self) -> Overrides {
        Overrides {
            provider: self.provider,
            model: self.model,
            lang: None,
            permission_mode: self.permission_mode.as_deref().and_then(Mode::parse),
        }
    }
}

/// `new web`: the session as a local page in the browser.
#[derive(Parser, Debug)]
#[command(
    name = "new web",
    bin_name = "new web",
    about = "The session as a local page: the tree drawn, a click to branch",
    long_about = None
)]
struct WebArgs {
    /// The only folder the tools may touch [default: .]
    workdir: Option<PathBuf>,
    /// The system prompt's role, roles/<ROLE>.md [default: default]
    role: Option<String>,
    /// Where the conversations live [default: one per project]
    datadir: Option<PathBuf>,
    /// Serve on this port of 127.0.0.1 [default: a free one]
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// Print the address only; do not open the browser
    #[arg(long)]
    no_open: bool,
    /// Open the browser on the address itself, not on a launcher file (for a browser that cannot
    /// read it, as a snap or flatpak one may not)
    #[arg(long, conflicts_with = "no_open")]
    open_address: bool,
    #[command(flatten)]
    engine: EngineArgs,
    /// Reopen this project's latest conversation
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    continue_latest: bool,
    /// Reopen conversation ID (a prefix is enough)
    #[arg(short = 'r', long, value_name = "ID")]
    resume: Option<String>,
    /// Trust the project's .new/config.json as it is
    #[arg(long)]
    trust_project: bool,
}

fn main() -> ExitCode {
    platform::tune_allocator();
    os_sandbox::run_helper_if_asked();
    let _log = log::init();
    // `new import …` (a folder named `import` is `./import`).
    if env::args_os().nth(1).is_some_and(|a| a == "import") {
        let args = ImportArgs::parse_from(env::args_os().skip(1));
        return import_cmd::run_import(ImportLaunch {
            source: args.source,
            paths: args.paths,
            workdir: args.workdir,
            datadir: args.datadir,
        });
    }
    // `new acp …` (a folder named `acp` is `./acp`).
    if env::args_os().nth(1).is_some_and(|a| a == "acp") {
        let args = AcpArgs::parse_from(env::args_os().skip(1));
        return acp::run(AcpLaunch {
            datadir: args.datadir,
            overrides: args.engine.overrides(),
        });
    }
    // `new web …` (a folder named `web` is `./web`).
    if env::args_os().nth(1).is_some_and(|a| a == "web") {
        let args = WebArgs::parse_from(env::args_os().skip(1));
        return web::run(WebLaunch {
            launch: Launch {
                workdir: args.workdir,
                role: args.role,
                datadir: args.datadir,
                overrides: args.engine.overrides(),
                continue_latest: args.continue_latest,
                resume: args.resume,
                trust_project: args.trust_project,
                ..Launch::default()
            },
            port: args.port,
            open: !args.no_open,
            open_address: args.open_address,
        });
    }
    let args = Args::parse();
    run(Launch {
        workdir: args.workdir,
        role: args.role,
        datadir: args.datadir,
        overrides: Overrides {
            provider: args.provider,
            model: args.model,
            lang: args.lang.as_deref().and_then(Lang::parse),
            permission_mode: args.permission_mode.as_deref().and_then(Mode::parse),
        },
        prompt: args.prompt,
        continue_latest: args.continue_latest,
        resume: args.resume,
        trust_project: args.trust_project,
        no_render: args.no_render,
        agent: args.agent,
        query: args.query,
        setup: args.setup,
        output_format: OutputFormat::parse(&args.output_format).unwrap_or_default(),
    })
}
