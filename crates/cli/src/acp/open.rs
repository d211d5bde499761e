//! A session for an editor's folder: the same configuration, keys, roles, skills, AGENTS.md,
//! hooks, MCP servers and trust as the REPL, with nobody at a terminal to ask. What a project
//! asks that needs a yes (its untrusted config, hooks or MCP servers) stays off, as in a piped
//! session; the servers the editor names are the user's own choice and join the user's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::runtime::Runtime;
use tokio::sync::watch;

use crate::output::Output;
use crate::repl::{Asking, default_datadir, session_sandbox, settle_trust};
use new_core::config;
use new_core::config::Overrides;
use new_core::layers::{Layers, Origin};
use new_core::mcp::{ServerConfig, Transport};
use new_core::prompt;
use new_core::session::{Options, Recorder, Resume, Session};
use new_core::skill::Shelf;
use new_sys::os_sandbox;
use serde_json::Value;
use std::collections::BTreeMap;
use std::env;

/// What `new acp` was started with.
#[derive(Debug, Clone, Default)]
pub struct AcpLaunch {
    pub datadir: Option<PathBuf>,
    pub overrides: Overrides,
}

/// A session and the sender of its interrupts (an editor's cancel raises them).
pub struct Opened {
    pub engine: Session,
    pub interrupts: Arc<watch::Sender<u64>>,
    /// What opening said that a terminal would have shown (warnings), for the log.
    pub warnings: Vec<String>,
}

fn env_var(name: &str) -> Option<String> {
    env::var(name).ok()
}

/// The DATADIR of a folder: `--datadir`, else the project's own, as the REPL picks it.
pub fn datadir_for(launch: &AcpLaunch, workdir: &Path) -> PathBuf {
    launch
        .datadir
        .clone()
        .unwrap_or_else(|| default_datadir(workdir))
}

/// The editor's MCP servers (`mcpServers` of session/new and session/load), as entries of the
/// user's. Those that cannot be read are skipped, each said.
pub fn client_servers(servers: &Value) -> (Vec<ServerConfig>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for server in servers.as_array().into_iter().flatten() {
        let name = server["name"].as_str().unwrap_or_default().to_string();
        let pairs = |key: &str, value: &str| -> BTreeMap<String, String> {
            server[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p["name"].as_str()?.into(), p[value].as_str()?.into())))
                .collect()
        };
        let transport = if let Some(command) = server["command"].as_str() {
            Transport::Stdio {
                command: command.to_string(),
                args: server["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect(),
                env: pairs("env", "value"),
                cwd: None,
            }
        } else if let Some(url) = server["url"].as_str() {
            Transport::Http {
                url: url.to_string(),
                headers: pairs("headers", "value"),
                helper: None,
            }
        } else {
            problems.push(format!(
                "the editor's MCP server {name:?} has no command or url"
            ));
            continue;
        };
        if name.is_empty() {
            problems.push("an MCP server of the editor's has no name".to_string());
            continue;
        }
        out.push(ServerConfig {
            raw: server.to_string(),
            name,
            transport,
            timeout: Duration::from_secs(60),
            disabled: false,
            origin: Origin::User,
            sandbox: None,
            network: false,
            references: Vec::new(),
            disabled_tools: Vec::new(),
            always_allow: Vec::new(),
            oauth: Default::default(),
            held: None,
        });
    }
    (out, problems)
}

/// Opens a session in `workdir` (absolute, a folder: checked by the caller), continuing
/// `resume`. `extra_servers` are the editor's MCP servers.
pub fn open(
    launch: &AcpLaunch,
    workdir: &Path,
    resume: Resume,
    extra_servers: Vec<ServerConfig>,
    runtime: &Runtime,
) -> Result<Opened> {
    let workdir = workdir
        .canonicalize()
        .with_context(|| format!("working folder {} cannot be used", workdir.display()))?;
    let layers = Layers::new(&workdir);
    let config = config::load(&layers, &launch.overrides, &env_var)?;
    let out = Output {
        color: false,
        lang: config.lang,
        one_shot: true,
        render: false,
    };
    // Nobody can be asked: a project's entries that need a yes run only if trusted already,
    // settled as the REPL settles them; what stays off goes to the log.
    let nobody = Asking {
        trust_project: false,
        interactive: false,
    };
    let mut said = Vec::new();
    let mut config = settle_trust(
        &out,
        nobody,
        &layers,
        &workdir,
        &launch.overrides,
        config,
        &mut |line| said.push(line),
    )?;
    let mut warnings = config.warnings.clone();
    warnings.extend(said);
    for server in extra_servers {
        config.mcp.servers.retain(|s| s.name != server.name);
        config.mcp.servers.push(server);
    }
    let role = prompt::load_role(&layers, "default")?;
    let datadir = datadir_for(launch, &workdir);
    let sandbox = session_sandbox(&config, &workdir, &datadir);
    if let Some(sandbox) = &sandbox
        && os_sandbox::current().is_none()
    {
        os_sandbox::set_current(sandbox.clone());
    }
    let (tx, interrupts) = watch::channel(0u64);
    let busy = Arc::new(AtomicBool::new(false));
    let opened = Session::open(Options {
        workdir: workdir.clone(),
        layers,
        config,
        overrides: launch.overrides.clone(),
        role,
        datadir: datadir.clone(),
        resume,
        one_shot: false,
        agent: None,
        os_sandbox: sandbox.clone(),
        shelf: Shelf::default(),
        interrupts,
        busy,
    })?;
    warnings.extend(opened.warnings);
    let mut engine = opened.session;
    // The system prompt's parts, read now: the session answers once they are in force.
    let read = engine.prompt_reader();
    warnings.extend(engine.take_prompt(read()));
    if let Some(manager) = engine.mcp_manager(&datadir, runtime.handle().clone(), sandbox) {
        manager.on_progress(Arc::new(|line: &str| tracing::info!(line, "mcp")));
        engine.set_mcp(manager);
    }
    // The hooks of a start: what they say goes to the log; what `session_start` adds goes with
    // the first message, as in the REPL.
    runtime.block_on(engine.fire_start_hooks(&mut Recorder::default()));
    tracing::info!(workdir = ?engine.workdir, session = %engine.chat.id(), "acp session opened");
    Ok(Opened {
        engine,
        interrupts: Arc::new(tx),
        warnings,
    })
}
