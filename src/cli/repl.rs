//! The application: start-up, the interactive and piped loops, one-shot mode, and every command.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use tokio::sync::watch;

use super::commands::{COMMANDS, CommandId, Input, parse};
use super::editor::{ReplHelper, join_continuations};
use super::output::{Output, Printer};
use super::tree_view::{format_line, preview, tree_lines};
use crate::agent::{Agent, Interrupts, TurnEnd};
use crate::config::{self, Config, Lang, Overrides};
use crate::layers::Layers;
use crate::llm::{Provider, Role};
use crate::prompt::{self, RoleFile};
use crate::session::{ChatSession, LoadReport, Message, Store};
use crate::skill::SkillRegistry;
use crate::tools::{Sandbox, ToolRegistry};

/// How many conversations `/list` shows without `all`.
const LIST_LIMIT: usize = 50;

/// What the command line decided.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub workdir: Option<PathBuf>,
    pub role: Option<String>,
    pub datadir: Option<PathBuf>,
    pub overrides: Overrides,
    /// One-shot prompt (`-p`).
    pub prompt: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Exit,
}

pub struct App {
    pub workdir: PathBuf,
    layers: Layers,
    role: RoleFile,
    skills: SkillRegistry,
    system_prompt: String,
    store: Store,
    session: ChatSession,
    provider: Provider,
    tools: ToolRegistry,
    config: Config,
    out: Output,
    interrupts: Interrupts,
    busy: Arc<AtomicBool>,
    runtime: tokio::runtime::Runtime,
}

/// The program after argument parsing. Exit codes: 0 done, 1 a failed one-shot answer, 2 bad
/// arguments or configuration, 130 interrupted.
pub fn run(launch: Launch) -> ExitCode {
    let interactive = launch.prompt.is_none() && std::io::stdin().is_terminal();
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
            };
            out.error(&format!("{e:#}"));
            return ExitCode::from(2);
        }
    };
    if let Some(prompt) = launch.prompt {
        return app.one_shot(&prompt);
    }
    let result = if interactive {
        app.interactive()
    } else {
        app.piped()
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            app.out.error(&format!("{e:#}"));
            ExitCode::from(1)
        }
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn color_for(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
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
                color_for(&std::io::stderr())
            } else {
                color_for(&std::io::stdout())
            },
            lang: config.lang,
            one_shot,
        };
        let role = prompt::load_role(&layers, launch.role.as_deref().unwrap_or("default"))?;
        let skills = SkillRegistry::load(&layers);
        for problem in &skills.problems {
            out.warn(problem);
        }
        let system_prompt = prompt::system_prompt(&role, &skills, &workdir);
        let datadir = launch
            .datadir
            .clone()
            .unwrap_or_else(|| default_datadir(&workdir));
        let store = Store::open(&datadir)?;
        let session = ChatSession::new(store.clone(), &system_prompt);
        let provider = Provider::new(config.provider.clone())?;
        let tools = ToolRegistry::builtin(Sandbox::new(&workdir)?);

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting the async runtime")?;
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

        Ok(App {
            workdir,
            layers,
            role,
            skills,
            system_prompt,
            store,
            session,
            provider,
            tools,
            config,
            out,
            interrupts,
            busy,
            runtime,
        })
    }

    fn t(&self, en: &str, zh: &str) -> String {
        match self.out.lang {
            Lang::En => en.to_string(),
            Lang::Zh => zh.to_string(),
        }
    }

    fn banner(&self) {
        let s = self.provider.settings();
        self.out.say(&format!(
            "{} {} · {} {} · {} {} · {} {}",
            self.out.bold("new"),
            env!("CARGO_PKG_VERSION"),
            self.t("provider", "服务"),
            s.name,
            self.t("model", "模型"),
            self.config.model,
            self.t("role", "角色"),
            self.role.name,
        ));
        self.out.say(&self.out.dim(&format!(
            "{} {} · {}",
            self.t("working folder", "工作目录"),
            self.workdir.display(),
            self.t(
                "/help for commands, Alt-Enter or a trailing \\ for a new line",
                "/help 查看命令，Alt-Enter 或行尾 \\ 换行"
            )
        )));
        if !self.config.has_credentials {
            self.out.warn(&self.t(
                &format!(
                    "no API key for `{}`: set {} (or point {} at a local server, which needs none)",
                    s.name, s.api_key_var, s.base_url_var
                ),
                &format!(
                    "`{}` 没有 API 密钥：请设置 {}（或把 {} 指向无需密钥的本地服务）",
                    s.name, s.api_key_var, s.base_url_var
                ),
            ));
        }
    }

    fn interactive(&mut self) -> Result<()> {
        use rustyline::error::ReadlineError;
        use rustyline::history::{FileHistory, History};
        use rustyline::{Cmd, CompletionType, EditMode, Editor, KeyCode, KeyEvent, Modifiers};

        self.banner();
        let config = rustyline::Config::builder()
            .auto_add_history(true)
            .completion_type(CompletionType::List)
            .edit_mode(EditMode::Emacs)
            .max_history_size(10_000)?
            .build();
        let mut editor: Editor<ReplHelper, FileHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(ReplHelper {
            store: self.store.clone(),
            color: self.out.color,
        }));
        editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
        editor.bind_sequence(KeyEvent::ctrl('J'), Cmd::Newline);
        let history = history_path();
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        let flush_history = |editor: &mut Editor<ReplHelper, FileHistory>, out: &Output| {
            if let Some(path) = &history {
                if let Some(dir) = path.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                if let Err(e) = editor.append_history(path) {
                    out.warn(&format!(
                        "could not save the input history to {}: {e}",
                        path.display()
                    ));
                }
                let _ = editor.history_mut().clear();
                let _ = editor.load_history(path);
            }
        };
        loop {
            let prompt = self.prompt_text();
            match editor.readline(&prompt) {
                Ok(line) => {
                    let flow = self.handle_line(&join_continuations(&line));
                    flush_history(&mut editor, &self.out);
                    if flow == Flow::Exit {
                        break;
                    }
                }
                Err(ReadlineError::Interrupted) => continue, // Ctrl-C at the prompt clears the line
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(e).context("reading input"),
            }
        }
        Ok(())
    }

    fn prompt_text(&self) -> String {
        let c = self.session.conversation();
        if c.is_leaf(c.cursor()) {
            self.out.green("› ")
        } else {
            // The next message starts a new branch: say where.
            let n = c
                .preorder()
                .iter()
                .position(|(_, m)| m.id == c.cursor())
                .unwrap_or(0);
            self.out.green(&format!("[{n}]⑂ › "))
        }
    }

    /// Standard input that is not a terminal: each line is processed as if typed.
    fn piped(&mut self) -> Result<()> {
        let stdin = std::io::stdin();
        let mut pending = String::new();
        for line in stdin.lock().lines() {
            let line = line.context("reading standard input")?;
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                pending.push('\n');
                continue;
            }
            pending.push_str(&line);
            let input = std::mem::take(&mut pending);
            if self.handle_line(&input) == Flow::Exit {
                return Ok(());
            }
        }
        if !pending.is_empty() {
            self.handle_line(&pending);
        }
        Ok(())
    }

    /// Reads the next answer line for a command that asks a question (used by later commands).
    /// Processes one line of input, typed or piped.
    pub fn handle_line(&mut self, line: &str) -> Flow {
        match parse(line) {
            Input::Empty => {}
            Input::Chat(text) => {
                self.chat(text);
            }
            Input::Goto(n) => self.goto(n),
            Input::Unknown(word) => self.out.error(&self.t(
                &format!("unknown command {word}; /help lists the commands (start with // to send a line beginning with /)"),
                &format!("未知命令 {word}；/help 列出所有命令（以 // 开头可发送以 / 开头的文字）"),
            )),
            Input::Command(id, args) => return self.command(id, args),
        }
        Flow::Continue
    }

    fn command(&mut self, id: CommandId, args: &str) -> Flow {
        match id {
            CommandId::Tree => self.tree(args),
            CommandId::List => self.list(args),
            CommandId::Switch => self.switch(args),
            CommandId::New => self.new_conversation(),
            CommandId::Skills => self.list_skills(),
            CommandId::Help => self.help(),
            CommandId::Exit => return Flow::Exit,
        }
        Flow::Continue
    }

    /// Sends a user message and runs the agent loop. Returns how the turn ended, or None when the
    /// message could not even be stored.
    fn chat(&mut self, text: &str) -> Option<TurnEnd> {
        if let Err(e) = self.session.add(Message::new(Role::User, text)) {
            self.out.error(&e.to_string());
            return None;
        }
        let agent = Agent {
            provider: &self.provider,
            tools: &self.tools,
            model: self.config.model.clone(),
            max_rounds: self.config.max_rounds,
        };
        let mut printer = Printer::new(self.out);
        self.busy.store(true, Ordering::SeqCst);
        let end =
            self.runtime
                .block_on(agent.run(&mut self.session, &mut printer, &mut self.interrupts));
        self.busy.store(false, Ordering::SeqCst);
        match &end {
            TurnEnd::Complete => {}
            TurnEnd::RoundLimit(n) => self.out.warn(&self.t(
                &format!("stopped after {n} rounds of tool calls (max_rounds in the config); send a message to let it go on"),
                &format!("工具调用已达 {n} 轮上限（配置项 max_rounds）；发送消息可继续"),
            )),
            TurnEnd::Interrupted => self.out.warn(&self.t(
                "interrupted; what arrived is kept",
                "已中断；已收到的内容已保存",
            )),
            TurnEnd::Failed(e) => self.out.error(&format!(
                "{e}\n{}",
                self.t(
                    "Your message is saved; send it again or fork from it once this is fixed.",
                    "你的消息已保存；修复后可重新发送或从此处分支。"
                )
            )),
        }
        Some(end)
    }

    fn one_shot(&mut self, prompt: &str) -> ExitCode {
        let end = self.chat(prompt);
        match end {
            Some(TurnEnd::Complete) => {
                use std::io::Write;
                let answer = &self.session.conversation().current().content;
                let mut stdout = std::io::stdout().lock();
                // A closed pipe (`new -p … | head -c1`) is the reader's choice, not a failure.
                let _ = writeln!(stdout, "{answer}").and_then(|()| stdout.flush());
                ExitCode::SUCCESS
            }
            Some(TurnEnd::Interrupted) => ExitCode::from(130),
            _ => ExitCode::from(1),
        }
    }

    fn goto(&mut self, n: usize) {
        let conversation = self.session.conversation();
        let Some(id) = conversation.id_by_number(n).map(str::to_string) else {
            let last = conversation.len() - 1;
            self.out.error(&self.t(
                &format!("no node [{n}]; this tree has nodes [0] to [{last}] (see /tree)"),
                &format!("没有节点 [{n}]；此树的节点为 [0] 到 [{last}]（见 /tree）"),
            ));
            return;
        };
        self.session
            .move_cursor(&id)
            .expect("the id comes from the tree");
        let m = self.session.conversation().current();
        let what = super::tree_view::describe(m);
        let next = if self.session.conversation().is_leaf(&id) {
            self.t(
                "the next message continues from here",
                "下一条消息从这里继续",
            )
        } else {
            self.t(
                "the next message starts a new branch here",
                "下一条消息将从这里开始新分支",
            )
        };
        self.out
            .say(&format!("→ [{n}] {what}\n{}", self.out.dim(&next)));
    }

    fn tree(&mut self, args: &str) {
        if !matches!(args, "" | "--full") {
            self.out.error(&self.t(
                &format!("/tree takes no argument but --full (got `{args}`)"),
                &format!("/tree 只接受 --full 参数（收到 `{args}`）"),
            ));
            return;
        }
        let mut text = String::new();
        for line in tree_lines(self.session.conversation()) {
            let drawn = format_line(&line, self.out.lang);
            if line.is_current {
                text.push_str(&self.out.bold(&self.out.green(&drawn)));
            } else {
                text.push_str(&drawn);
            }
            text.push('\n');
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    fn list(&mut self, args: &str) {
        let all = match args {
            "" => false,
            "all" => true,
            other => {
                self.out.error(&self.t(
                    &format!("/list takes no argument but `all` (got `{other}`)"),
                    &format!("/list 只接受参数 all（收到 `{other}`）"),
                ));
                return;
            }
        };
        let summaries = match self.store.list() {
            Ok(s) => s,
            Err(e) => {
                self.out.error(&e.to_string());
                return;
            }
        };
        let current = self.session.id().to_string();
        let mut text = String::new();
        if !self.session.is_persisted() {
            text.push_str(&format!(
                "* {current}  {}\n",
                self.t(
                    "(this new conversation, not saved until its first message)",
                    "（当前新对话，发送第一条消息后才保存）"
                )
            ));
        }
        if summaries.is_empty() && self.session.is_persisted() {
            text.push_str(&self.t("no conversations yet\n", "还没有对话\n"));
        }
        let shown = if all {
            summaries.len()
        } else {
            summaries.len().min(LIST_LIMIT)
        };
        for s in &summaries[..shown] {
            let mark = if s.id == current { "*" } else { " " };
            let when = s
                .last_activity
                .map(|t| {
                    t.with_timezone(&chrono::Local)
                        .format("%Y-%m-%d %H:%M")
                        .to_string()
                })
                .unwrap_or_else(|| "-".repeat(16));
            let title = if s.title.is_empty() {
                "-".to_string()
            } else {
                preview(&s.title, 60)
            };
            text.push_str(&format!(
                "{mark} {}  {:>4} {}  {when}  {title}\n",
                s.id,
                s.messages,
                self.t("msgs", "条"),
            ));
        }
        if shown < summaries.len() {
            text.push_str(&self.out.dim(&self.t(
                &format!(
                    "… {} more; /list all shows every one",
                    summaries.len() - shown
                ),
                &format!("… 还有 {} 个；/list all 显示全部", summaries.len() - shown),
            )));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    fn switch(&mut self, args: &str) {
        if args.is_empty() {
            self.out.error(&self.t(
                "usage: /switch <id> (see /list)",
                "用法：/switch <id>（见 /list）",
            ));
            return;
        }
        let id = match self.store.resolve(args) {
            Ok(id) => id,
            Err(e) => {
                self.out.error(&e.to_string());
                return;
            }
        };
        if id == self.session.id() && self.session.is_persisted() {
            self.out.say(&self.t(
                &format!("{id} is already the current conversation"),
                &format!("{id} 已经是当前对话"),
            ));
            return;
        }
        match ChatSession::open(self.store.clone(), &id, &self.system_prompt) {
            Ok((session, report)) => {
                self.session = session;
                self.report_load(&report);
                let c = self.session.conversation();
                self.out.say(&self.t(
                    &format!(
                        "switched to {id} ({} messages); /tree shows it",
                        c.len() - 1
                    ),
                    &format!("已切换到 {id}（{} 条消息）；/tree 查看", c.len() - 1),
                ));
            }
            Err(e) => self.out.error(&e.to_string()),
        }
    }

    fn report_load(&self, report: &LoadReport) {
        if !report.skipped_lines.is_empty() {
            let lines: Vec<String> = report
                .skipped_lines
                .iter()
                .map(|(n, _)| n.to_string())
                .collect();
            self.out.warn(&self.t(
                &format!(
                    "skipped {} unreadable line(s) of the file (line {}): the rest loaded",
                    lines.len(),
                    lines.join(", ")
                ),
                &format!(
                    "跳过了文件中 {} 行无法读取的内容（第 {} 行）；其余已加载",
                    lines.len(),
                    lines.join(", ")
                ),
            ));
        }
        if !report.orphans.is_empty() {
            self.out.warn(&self.t(
                &format!(
                    "{} message(s) had a missing parent and hang under the root: {}",
                    report.orphans.len(),
                    report.orphans.join(", ")
                ),
                &format!(
                    "{} 条消息缺少父消息，已挂在根节点下：{}",
                    report.orphans.len(),
                    report.orphans.join(", ")
                ),
            ));
        }
        if !report.duplicates.is_empty() {
            self.out.warn(&format!(
                "ignored repeated message ids: {}",
                report.duplicates.join(", ")
            ));
        }
    }

    fn new_conversation(&mut self) {
        // Role and skill files are read again, so edits take effect.
        match prompt::load_role(&self.layers, &self.role.name) {
            Ok(role) => self.role = role,
            Err(e) => self.out.warn(&format!("{e}; keeping the role as it was")),
        }
        self.skills = SkillRegistry::load(&self.layers);
        for problem in &self.skills.problems {
            self.out.warn(problem);
        }
        self.system_prompt = prompt::system_prompt(&self.role, &self.skills, &self.workdir);
        self.session = ChatSession::new(self.store.clone(), &self.system_prompt);
        self.out.say(&self.t(
            &format!("new conversation {}", self.session.id()),
            &format!("新对话 {}", self.session.id()),
        ));
    }

    fn list_skills(&mut self) {
        let mut text = String::new();
        for skill in self.skills.all() {
            let state = if skill.enabled {
                self.out.green(&self.t("enabled ", "已启用"))
            } else {
                self.out.dim(&self.t("disabled", "已停用"))
            };
            text.push_str(&format!(
                "{state}  {} ({}) {}\n",
                skill.name,
                skill.layer.label(),
                self.out.dim(&skill.description)
            ));
        }
        if text.is_empty() {
            text = self.t("no skills\n", "没有技能\n");
        }
        for problem in &self.skills.problems {
            text.push_str(&format!("{}\n", self.out.dim(&format!("! {problem}"))));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    fn help(&mut self) {
        let lang = self.out.lang;
        let mut text = String::new();
        for c in COMMANDS {
            let usage = if c.args.is_empty() {
                c.names[0].to_string()
            } else {
                format!("{} {}", c.names[0], c.args)
            };
            text.push_str(&format!("  {usage:<18} {}\n", c.help(lang)));
        }
        text.push_str(&format!(
            "  {:<18} {}\n",
            "/N",
            self.t(
                "move to node N of /tree; the next message forks from there",
                "移动到 /tree 中的节点 N；下一条消息从那里分支"
            )
        ));
        text.push_str(&format!(
            "  {:<18} {}\n",
            "//text",
            self.t("send text that starts with /", "发送以 / 开头的文字")
        ));
        text.push_str(&self.out.dim(&self.t(
            "Alt-Enter, Ctrl-J or a trailing \\ starts a new line; Ctrl-C stops an answer or clears the line; Ctrl-D leaves.",
            "Alt-Enter、Ctrl-J 或行尾 \\ 换行；Ctrl-C 中断回答或清空输入；Ctrl-D 退出。",
        )));
        self.out.say(&text);
    }
}

/// A stream of SIGINTs, registered when this is called (it must run inside the runtime).
fn interrupt_signal() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
}

/// The input history file, shared by every project.
fn history_path() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("new").join("history.txt"))
}
