//! The `new` binary: parses the command line and hands over to the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use new_agent::cli::json_output::OutputFormat;
use new_agent::cli::{Launch, run};
use new_agent::config::{Lang, Overrides};
use new_agent::tools::Mode;

/// A terminal AI agent whose conversations are trees.
#[derive(Parser, Debug)]
#[command(name = "new", version, about, long_about = None)]
struct Args {
    /// The only folder the tools may touch [default: the current folder]
    workdir: Option<PathBuf>,
    /// Role: the system prompt comes from roles/<ROLE>.md [default: default]
    role: Option<String>,
    /// Where this project's conversations live [default: a per-project folder in the user's data dir]
    datadir: Option<PathBuf>,
    /// Provider: openai, anthropic, deepseek, qwen, ollama, llamacpp, or one named in the config
    #[arg(long)]
    provider: Option<String>,
    /// Model name to request
    #[arg(long)]
    model: Option<String>,
    /// Interface language
    #[arg(long, value_parser = ["en", "zh"])]
    lang: Option<String>,
    /// Which tool calls need your approval
    #[arg(long, value_parser = ["strict", "default", "permissive"])]
    permission_mode: Option<String>,
    /// Send one prompt, print the final answer and exit (`-` reads it from stdin; piped stdin
    /// otherwise follows the text)
    #[arg(short = 'p', long = "prompt", value_name = "TEXT")]
    prompt: Option<String>,
    /// What -p prints on stdout
    #[arg(long, value_parser = ["text", "json", "stream-json"], default_value = "text", requires = "prompt")]
    output_format: String,
    /// Reopen this project's latest conversation
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    continue_latest: bool,
    /// Reopen conversation ID (an unambiguous prefix is enough)
    #[arg(short = 'r', long, value_name = "ID")]
    resume: Option<String>,
    /// Trust this project's .new/config.json as it is now (it may then widen permissions)
    #[arg(long)]
    trust_project: bool,
    /// Show answers as the model wrote them, without rendering their Markdown
    #[arg(long)]
    no_render: bool,
    /// Work as the subagent role NAME (`/agents` lists them): its prompt, its tools, its model
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Start the REPL with TEXT as the first message
    #[arg(
        short = 'q',
        long = "query",
        value_name = "TEXT",
        conflicts_with = "prompt"
    )]
    query: Option<String>,
}

/// `new import SOURCE PATH…`: other agents' history as this project's conversations.
#[derive(Parser, Debug)]
#[command(name = "new import", about, long_about = None)]
struct ImportArgs {
    /// Whose history: claude (Claude Code), codex or pi
    #[arg(value_parser = ["claude", "codex", "pi"])]
    source: String,
    /// Session files (.jsonl), or folders of them
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The project whose conversations they become [default: the current folder]
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Where that project's conversations live [default: its folder in the user's data dir]
    #[arg(long)]
    datadir: Option<PathBuf>,
}

fn main() -> ExitCode {
    new_agent::os_sandbox::run_helper_if_asked();
    // `new import …` (a folder named `import` is `./import`).
    if std::env::args_os().nth(1).is_some_and(|a| a == "import") {
        let args = ImportArgs::parse_from(std::env::args_os().skip(1));
        return new_agent::cli::import_cmd::run_import(new_agent::cli::import_cmd::ImportLaunch {
            source: args.source,
            paths: args.paths,
            workdir: args.workdir,
            datadir: args.datadir,
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
        output_format: OutputFormat::parse(&args.output_format).unwrap_or_default(),
    })
}
