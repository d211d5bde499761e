//! A session put together from what its front end decided: the configuration as trusted, the
//! role, where conversations live, which one to open. Everything asked of the user (trusting a
//! project's files) is the front end's, before; what is started beside it (MCP servers, the
//! system prompt's reading) is added after.
//!
//! Every front end opens a session the same way: [`Session::open`], then the system prompt's
//! parts read by [`read_prompt`] (at once, or on a thread of their own while the REPL's prompt
//! shows: [`Session::prompt_reader`]) and put in force by [`Session::take_prompt`], which gives
//! back what could not be read, for the front end to show.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::Session;
use crate::agent::Interrupts;
use crate::agent::defs;
use crate::agent::subagent::Subagents;
use crate::checkpoint::Checkpoints;
use crate::config::{Config, Overrides};
use crate::context::Context;
use crate::conversation::{ChatSession, LoadReport, Store, StoreError};
use crate::fs::confine::Workdir;
use crate::hooks::Action;
use crate::hooks::Hooks;
use crate::layers;
use crate::layers::Layers;
use crate::llm::{LlmError, Provider};
use crate::mcp::Transport;
use crate::memory::review;
use crate::memory::{MemorySettings, MemoryStore};
use crate::prompt;
use crate::prompt::RoleFile;
use crate::skill::Shelf;
use crate::skill::SkillRegistry;
use crate::skill::SkillSettings;
use crate::tools::builtin::NAMES;
use crate::tools::permissions::RuleError;
use crate::tools::{Policy, ToolContext, ToolRegistry, UnknownTool};
use new_sys::os_sandbox;
use new_sys::os_sandbox::OsSandbox;
use std::env;
use std::io;
use std::path::Path;

/// Which conversation a session opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// A new one (written once it has a message).
    Fresh,
    /// This one (an id, or a prefix of one).
    Id(String),
    /// The latest of this project's: for the REPL, the latest that was one (one-shots are
    /// reachable with `/list`); for a one-shot, the latest of any kind.
    Latest,
}

/// What a session is made of.
pub struct Options {
    /// The working folder, canonical.
    pub workdir: PathBuf,
    pub layers: Layers,
    /// The configuration, with the user's trust decisions made.
    pub config: Config,
    /// What the command line said, kept for reloading the configuration.
    pub overrides: Overrides,
    pub role: RoleFile,
    /// Where conversations, snapshots and project memory live.
    pub datadir: PathBuf,
    pub resume: Resume,
    /// A one-shot (`-p`): its conversation says so, and it reviews no memory.
    pub one_shot: bool,
    /// Work as this subagent role (`--agent NAME`).
    pub agent: Option<String>,
    /// The OS sandbox commands run in, when there is one.
    pub os_sandbox: Option<Arc<OsSandbox>>,
    /// What `use_skill` reads, filled when the system prompt's parts are read.
    pub shelf: Shelf,
    /// The front end's interrupts, raised while `busy` is up.
    pub interrupts: Interrupts,
    pub busy: Arc<AtomicBool>,
}

/// A session just opened, and what the front end should tell.
pub struct Opened {
    pub session: Session,
    /// What loading a resumed conversation worked around.
    pub report: Option<LoadReport>,
    /// `Resume::Latest` found none: a new conversation was started.
    pub nothing_to_continue: bool,
    /// Subagent definitions that cannot be used (skipped), one line each.
    pub warnings: Vec<String>,
}

/// Why a session could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Provider(#[from] LlmError),
    #[error("the working folder {path} cannot be used: {source}")]
    Workdir { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Tools(#[from] UnknownTool),
    #[error(transparent)]
    Rules(#[from] RuleError),
    #[error("--agent {0}: subagents are off (`subagent.enabled` is false)")]
    SubagentsOff(String),
    #[error("--agent {name}: no such role; the roles are {known}")]
    NoSuchAgent { name: String, known: String },
}

impl Session {
    /// Puts a session together. Nothing is asked and nothing is printed; hooks are not fired
    /// (the front end fires `program_start` and `session_start` once it can show what they say).
    pub fn open(o: Options) -> Result<Opened, OpenError> {
        let Options {
            workdir,
            layers,
            mut config,
            overrides,
            role,
            datadir,
            resume,
            one_shot,
            agent,
            os_sandbox,
            shelf,
            interrupts,
            busy,
        } = o;
        let memory = config.memory.enabled.then(|| {
            MemoryStore::new(
                dirs::data_dir().map(|d| d.join("new").join("memory")),
                datadir.join("memory"),
            )
            .with_codepilot(&layers)
        });
        let store = Store::open(&datadir)?;
        let mut nothing_to_continue = false;
        let resume = match resume {
            Resume::Fresh => None,
            Resume::Id(id) => Some(store.resolve(&id)?),
            Resume::Latest => {
                let latest = if one_shot {
                    store.latest()?
                } else {
                    store.latest_interactive()?
                };
                nothing_to_continue = latest.is_none();
                latest
            }
        };
        let (mut chat, report) = match resume {
            Some(id) => {
                let (chat, report) = ChatSession::open(store.clone(), &id, "")?;
                (chat, Some(report))
            }
            None => {
                let mut chat = ChatSession::new(store.clone(), "");
                if one_shot {
                    chat.set_metadata(serde_json::json!({"one_shot": true}));
                }
                (chat, None)
            }
        };
        let provider = Provider::new(config.provider.clone())?;
        let confined = Workdir::new(&workdir).map_err(|source| OpenError::Workdir {
            path: workdir.clone(),
            source,
        })?;
        let mut tools = ToolRegistry::builtin(
            ToolContext {
                workdir: confined,
                bash_timeout: config.bash_timeout,
                hidden_env: config.secret_vars.clone(),
                os_sandbox: os_sandbox.clone(),
            },
            &config.tools,
        )?;
        tools.add_source(Arc::new(shelf));
        let mut policy = Policy::new(
            config.permission_mode,
            config.project_rules.clone(),
            config.user_rules.clone(),
        )?
        .project_untrusted(!config.project_trusted);
        policy.background_allowed = config.subagent.background_allowed_tools.clone();
        let checkpoints = config.checkpoints.enabled.then(|| {
            let c = Checkpoints::new(store.dir(), &workdir, config.checkpoints.clone());
            // The conversation's latest snapshot spares the first walk from reading every file.
            if let Some(latest) = &chat.conversation().latest_checkpoint {
                c.hint(latest);
            }
            Arc::new(c)
        });
        // Subagent roles; a definition that cannot be used is told and skipped.
        let mut warnings = Vec::new();
        let subagents = config.subagent.enabled.then(|| {
            let known = |t: &str| NAMES.contains(&t) || t.starts_with("mcp__");
            let (defs, problems) = defs::load(&layers, &config.subagent, &known);
            warnings.extend(problems);
            Subagents {
                defs,
                settings: config.subagent.clone(),
                environment: prompt::environment(&workdir),
                tasks: Default::default(),
            }
        });
        // `--agent NAME`: the session works as that role, with its model unless `--model` said.
        let agent = match agent {
            None => None,
            Some(name) => {
                let Some(subagents) = &subagents else {
                    return Err(OpenError::SubagentsOff(name));
                };
                let Some(def) = subagents.defs.iter().find(|d| d.name == name) else {
                    let known: Vec<&str> = subagents.defs.iter().map(|d| d.name.as_str()).collect();
                    return Err(OpenError::NoSuchAgent {
                        name,
                        known: known.join(", "),
                    });
                };
                Some(def.clone())
            }
        };
        if let Some(model) = agent.as_ref().and_then(|d| d.model.clone())
            && overrides.model.is_none()
        {
            config.model = model;
        }
        let context = Context::new(config.context.clone(), &config.model);
        if let Some(def) = &agent
            && report.is_none()
        {
            chat.set_metadata(serde_json::json!({ "agent": def.name }));
        }
        let hooks = (!config.hooks.entries.is_empty()).then(|| {
            Hooks::new(
                config.hooks.clone(),
                config.hooks_trusted,
                &workdir,
                config.secret_vars.clone(),
            )
            .with_sandbox(os_sandbox.clone())
        });
        // A one-shot reviews nothing: what waits is the next REPL's.
        let memory_batch = memory
            .as_ref()
            .filter(|_| !one_shot)
            .map(|m| review::load_pending(m, true))
            .unwrap_or_default();
        let mut session = Session {
            workdir,
            layers,
            role,
            skills: SkillRegistry::default(),
            system_prompt: String::new(),
            prompt_parts: Vec::new(),
            prompt_written: Vec::new(),
            auto_continued: false,
            store,
            chat,
            provider,
            tools,
            policy,
            config,
            overrides,
            interrupts,
            busy,
            totals: Default::default(),
            context,
            asked_server_window: false,
            skill_tools: None,
            checkpoints,
            came_from: None,
            memory,
            memory_notes: Default::default(),
            memory_batch,
            memory_said: false,
            memory_returned: Default::default(),
            turns_started: Default::default(),
            leaving: Default::default(),
            hooks,
            hook_context: Vec::new(),
            subagents,
            agent,
        };
        session.install_hook_agents();
        session.install_self_skills();
        // The memory folders can be read by the read tools (never written).
        if let Some(m) = &session.memory {
            for (_, dir) in m.dirs() {
                session.tools.workdir().add_read_root(dir.to_path_buf());
            }
        }
        Ok(Opened {
            session,
            report,
            nothing_to_continue,
            warnings,
        })
    }
}

/// What the system prompt is made of, read: the skills, the instruction files' problems, and
/// the parts by source.
pub struct PromptRead {
    pub skills: SkillRegistry,
    pub problems: Vec<String>,
    pub parts: Vec<(String, String)>,
}

/// Reads what the system prompt is made of (the skills, AGENTS.md, the memory indexes, the
/// environment) and fills what `use_skill` reads (`shelf`).
pub fn read_prompt(
    layers: &Layers,
    role: &RoleFile,
    workdir: &Path,
    skill_settings: &SkillSettings,
    memory: Option<&MemoryStore>,
    memory_settings: &MemorySettings,
    shelf: &Shelf,
) -> PromptRead {
    let skills = SkillRegistry::load_with(layers, skill_settings);
    shelf.set(skills.shelf(skill_settings.max_bytes));
    let instructions = prompt::agents::load(layers.user.as_deref(), workdir);
    // What the instructions are made of (the files they include) is kept like `.new/`: the
    // model's writes there are asked for, and commands cannot change them.
    if let Some(sandbox) = os_sandbox::current() {
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
    PromptRead {
        skills,
        problems: instructions.problems,
        parts,
    }
}

/// The memory indexes as a part of the system prompt.
pub fn memory_part(
    memory: Option<&MemoryStore>,
    settings: &MemorySettings,
) -> Option<(String, String)> {
    let text = memory?.prompt_part(settings.index_max_lines, settings.index_max_bytes)?;
    Some(("memory".to_string(), text))
}

impl Session {
    /// The reading of this session's system prompt ([`read_prompt`]), to run now or on a
    /// thread of its own; it fills the shelf the session's `use_skill` reads.
    pub fn prompt_reader(&self) -> impl FnOnce() -> PromptRead + Send + 'static {
        let (layers, role, workdir) =
            (self.layers.clone(), self.role.clone(), self.workdir.clone());
        let (skill_settings, memory_settings) =
            (self.config.skill.clone(), self.config.memory.clone());
        let memory = self.memory.clone();
        let shelf = self
            .tools
            .source::<Shelf>()
            .map(|shelf| (*shelf).clone())
            .unwrap_or_default();
        move || {
            read_prompt(
                &layers,
                &role,
                &workdir,
                &skill_settings,
                memory.as_ref(),
                &memory_settings,
                &shelf,
            )
        }
    }

    /// Puts a system prompt read by [`read_prompt`] in force, for the conversation in use too.
    /// Returns what could not be read (broken skills, instruction files), for the front end to
    /// show.
    pub fn take_prompt(&mut self, read: PromptRead) -> Vec<String> {
        let problems = read
            .skills
            .problems
            .iter()
            .chain(&read.problems)
            .cloned()
            .collect();
        self.skills = read.skills;
        self.prompt_written = match (&self.agent, &self.subagents) {
            // A role's own context, as a defined subagent's.
            (Some(def), Some(subagents)) => subagents.fresh_context(def),
            _ => {
                let mut parts = read.parts;
                // One line each on the hooks and the MCP servers in force.
                if let Some(lines) = self.config.prompt_lines() {
                    parts.push(("configuration".to_string(), lines));
                }
                parts
            }
        };
        self.fill_prompt();
        problems
    }
}

/// The session's operating-system sandbox: None when nothing would run in it (no `bash`, no
/// hook, no MCP server). Files that hooks and MCP servers run from WORKDIR stay read-only in it.
pub fn os_sandbox_for(config: &Config, workdir: &Path, datadir: &Path) -> Option<Arc<OsSandbox>> {
    let bash = config.tools.is_empty() || config.tools.iter().any(|t| t == "bash");
    if !bash && config.hooks.entries.is_empty() && config.mcp.servers.is_empty() {
        return None;
    }
    let mut commands: Vec<String> = config
        .hooks
        .entries
        .iter()
        .filter_map(|e| match &e.action {
            Action::Command { command, .. } => Some(command.clone()),
            _ => None,
        })
        .collect();
    for server in &config.mcp.servers {
        if let Transport::Http {
            helper: Some(helper),
            ..
        } = &server.transport
        {
            commands.push(helper.command.clone());
        }
        if let Transport::Stdio { command, args, .. } = &server.transport {
            commands.push(command.clone());
            commands.extend(args.iter().cloned());
        }
    }
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let helper = env::current_exe().unwrap_or_else(|_| PathBuf::from("new"));
    Some(OsSandbox::new(
        config.sandbox.clone(),
        &workdir,
        datadir,
        helper,
        os_sandbox::files_named(&workdir, &commands),
        layers::user_dir().into_iter().collect(),
    ))
}
