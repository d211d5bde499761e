//! The REPL's commands, one method each. Every command checks its arguments first and changes
//! nothing when they are wrong.

use crate::config::Lang;
use std::path::PathBuf;

use super::commands::COMMANDS;
use super::repl::{App, interruptible};
use super::tree_view::{Row, describe, format_row, preview, tree_rows};
use crate::llm::ChatRequest;
use crate::prompt;
use crate::session::{ChatSession, LoadReport, export};
use crate::skill::SkillRegistry;
use crate::vocab::Role;

/// How many conversations `/list` shows without `all`.
const LIST_LIMIT: usize = 50;
/// Most hits `/search` prints.
const SEARCH_LIMIT: usize = 50;

impl App {
    fn refuse(&self, en: &str, zh: &str) {
        self.out.error(&self.t(en, zh));
    }

    fn no_args(&self, command: &str, args: &str) -> bool {
        if args.is_empty() {
            return true;
        }
        self.refuse(
            &format!("{command} takes no argument (got `{args}`)"),
            &format!("{command} 不接受参数（收到 `{args}`）"),
        );
        false
    }

    /// Moves the cursor and says where it is and what the next message will do.
    fn move_to(&mut self, id: &str) {
        self.session
            .move_cursor(id)
            .expect("ids come from the tree");
        let c = self.session.conversation();
        let n = c.number_of(id).unwrap_or(0);
        let what = describe(c.current(), self.out.lang);
        let next = if c.is_leaf(id) {
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

    pub(super) fn goto(&mut self, n: usize) {
        let conversation = self.session.conversation();
        match conversation.id_by_number(n).map(str::to_string) {
            Some(id) => self.move_to(&id),
            None => {
                let last = conversation.len() - 1;
                self.refuse(
                    &format!("no node [{n}]; this tree has nodes [0] to [{last}] (see /tree)"),
                    &format!("没有节点 [{n}]；此树的节点为 [0] 到 [{last}]（见 /tree）"),
                );
            }
        }
    }

    pub(super) fn tree(&mut self, args: &str) {
        let full = match args {
            "" => false,
            "--full" => true,
            _ => {
                return self.refuse(
                    &format!("/tree takes no argument but --full (got `{args}`)"),
                    &format!("/tree 只接受 --full 参数（收到 `{args}`）"),
                );
            }
        };
        let mut text = String::new();
        for row in tree_rows(self.session.conversation(), full, self.out.lang) {
            let drawn = format_row(&row, self.out.lang);
            match &row {
                Row::Node(line) if line.is_current => {
                    text.push_str(&self.out.bold(&self.out.green(&drawn)))
                }
                Row::Gap { .. } => text.push_str(&self.out.dim(&drawn)),
                Row::Node(_) => text.push_str(&drawn),
            }
            text.push('\n');
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    pub(super) fn branches(&mut self, args: &str) {
        if !self.no_args("/branches", args) {
            return;
        }
        let c = self.session.conversation();
        let current_tip = c.tip(c.cursor()).map(|m| m.id.clone());
        let mut text = String::new();
        for (number, (_, m)) in c.preorder().into_iter().enumerate() {
            if !m.children_ids.is_empty() {
                continue;
            }
            let mark = if Some(&m.id) == current_tip.as_ref() {
                "*"
            } else {
                " "
            };
            let depth = c.chain(&m.id).len() - 1;
            let line = format!(
                "{mark} [{number}] {}  {}",
                describe(m, self.out.lang),
                self.out.dim(&self.t(
                    &format!("({})", super::text::count(Lang::En, depth, "message")),
                    &format!("（{depth} 条消息）")
                ))
            );
            text.push_str(&line);
            text.push('\n');
        }
        if c.is_empty() {
            text = self.t("no branches yet\n", "还没有分支\n");
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// `/prev` and `/next`: the neighbouring alternative at the nearest fork above the cursor.
    pub(super) fn flip(&mut self, args: &str, step: isize) {
        let name = if step < 0 { "/prev" } else { "/next" };
        if !self.no_args(name, args) {
            return;
        }
        let c = self.session.conversation();
        let Some((alternatives, at)) = c.alternatives(c.cursor()) else {
            return self.refuse(
                "there is no fork above this point: nothing to flip between",
                "此处上方没有分叉：没有可切换的分支",
            );
        };
        let count = alternatives.len();
        let to = at as isize + step;
        if to < 0 || to >= count as isize {
            let (en, zh) = if step < 0 {
                ("first", "第一个")
            } else {
                ("last", "最后一个")
            };
            return self.refuse(
                &format!("this is the {en} of {count} alternatives"),
                &format!("这已是 {count} 个分支中的{zh}"),
            );
        }
        let target = alternatives[to as usize];
        let tip = c.tip(target).expect("a child exists").id.clone();
        self.out.say(&self.out.dim(&self.t(
            &format!("alternative {} of {count}", to + 1),
            &format!("第 {} 个分支，共 {count} 个", to + 1),
        )));
        self.move_to(&tip);
    }

    /// `/retry`: a new answer to the nearest user message, as a sibling of the old answer.
    pub(super) fn retry(&mut self, args: &str) {
        if !self.no_args("/retry", args) {
            return;
        }
        let c = self.session.conversation();
        let Some(user) = c.nearest_user(c.cursor()).map(|m| m.id.clone()) else {
            return self.refuse(
                "nothing to retry: there is no user message on this branch",
                "无法重试：此分支上没有用户消息",
            );
        };
        self.session.move_cursor(&user).expect("from the tree");
        self.answer();
    }

    /// `/edit [N]`: a changed copy of user message N, as its sibling, then answered.
    pub(super) fn edit(&mut self, args: &str) {
        let c = self.session.conversation();
        let target = if args.is_empty() {
            match c.nearest_user(c.cursor()) {
                Some(m) => m.id.clone(),
                None => {
                    return self.refuse(
                        "nothing to edit: there is no user message on this branch",
                        "无法编辑：此分支上没有用户消息",
                    );
                }
            }
        } else {
            let Some(id) = args
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(args)
                .parse::<usize>()
                .ok()
                .and_then(|n| c.id_by_number(n))
            else {
                return self.refuse(
                    &format!("/edit takes a node number from /tree (got `{args}`)"),
                    &format!("/edit 需要 /tree 中的节点编号（收到 `{args}`）"),
                );
            };
            id.to_string()
        };
        let m = c.get(&target).expect("from the tree");
        if m.role != Role::User {
            let n = c.number_of(&target).unwrap_or(0);
            return self.refuse(
                &format!(
                    "[{n}] is {} {} message; only user messages can be edited (/retry asks for a new answer)",
                    super::text::article(m.role.as_str()),
                    m.role.as_str()
                ),
                &format!(
                    "[{n}] 是 {} 消息；只能编辑用户消息（/retry 可重新回答）",
                    m.role.as_str()
                ),
            );
        }
        let old = m.content.clone();
        let parent = m.parent_id.clone().expect("a user message has a parent");
        let question = self.t(
            "Edit the message (Enter sends it as a new branch; Ctrl-C cancels)\n✎ ",
            "编辑消息（回车作为新分支发送；Ctrl-C 取消）\n✎ ",
        );
        let Some(text) = self.ask(&question, &old, true) else {
            return self.out.say(&self.t("edit cancelled", "已取消编辑"));
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return self
                .out
                .say(&self.t("edit cancelled: the text is empty", "已取消编辑：内容为空"));
        }
        if text == old {
            return self.out.say(&self.t(
                "the text is unchanged; /retry asks for a new answer to it",
                "内容未改变；/retry 可重新回答",
            ));
        }
        self.session.move_cursor(&parent).expect("from the tree");
        self.chat(text);
    }

    pub(super) fn list(&mut self, args: &str) {
        let all = match args {
            "" => false,
            "all" => true,
            other => {
                return self.refuse(
                    &format!("/list takes no argument but `all` (got `{other}`)"),
                    &format!("/list 只接受参数 all（收到 `{other}`）"),
                );
            }
        };
        let listed = if all {
            self.store.list().map(|s| {
                let n = s.len();
                (s, n)
            })
        } else {
            self.store.list_recent(LIST_LIMIT)
        };
        let (summaries, total) = match listed {
            Ok(listed) => listed,
            Err(e) => return self.out.error(&e.to_string()),
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
        let shown = summaries.len();
        for s in &summaries {
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
        if shown < total {
            text.push_str(&self.out.dim(&self.t(
                &format!("… {} more; /list all shows every one", total - shown),
                &format!("… 还有 {} 个；/list all 显示全部", total - shown),
            )));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    pub(super) fn switch(&mut self, args: &str) {
        if args.is_empty() {
            return self.refuse(
                "usage: /switch <id> (see /list)",
                "用法：/switch <id>（见 /list）",
            );
        }
        let id = match self.store.resolve(args) {
            Ok(id) => id,
            Err(e) => return self.out.error(&e.to_string()),
        };
        if id == self.session.id() && self.session.is_persisted() {
            return self.out.say(&self.t(
                &format!("{id} is already the current conversation"),
                &format!("{id} 已经是当前对话"),
            ));
        }
        match ChatSession::open(self.store.clone(), &id, &self.system_prompt) {
            Ok((session, report)) => {
                self.session = session;
                self.report_load(&report);
                let n = self.session.conversation().len() - 1;
                self.out.say(&self.t(
                    &format!(
                        "switched to {id} ({}); /tree shows it",
                        super::text::count(Lang::En, n, "message")
                    ),
                    &format!("已切换到 {id}（{n} 条消息）；/tree 查看"),
                ));
            }
            Err(e) => self.out.error(&e.to_string()),
        }
    }

    pub(super) fn report_load(&self, report: &LoadReport) {
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
            self.out.warn(&self.t(
                &format!(
                    "ignored repeated message ids: {}",
                    report.duplicates.join(", ")
                ),
                &format!("忽略了重复的消息 id：{}", report.duplicates.join(", ")),
            ));
        }
    }

    pub(super) fn new_conversation(&mut self, args: &str) {
        if !self.no_args("/new", args) {
            return;
        }
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

    /// The title shown by `/list`: the latest title record, else the first user message.
    fn current_title(&self) -> String {
        let c = self.session.conversation();
        c.title
            .clone()
            .or_else(|| c.first_user_message().map(|m| preview(&m.content, 60)))
            .unwrap_or_default()
    }

    pub(super) fn title(&mut self, args: &str) {
        if args.is_empty() {
            let title = self.current_title();
            return self.out.say(&if title.is_empty() {
                self.t("this conversation has no title yet", "当前对话还没有标题")
            } else {
                title
            });
        }
        if !self.session.is_persisted() {
            return self.refuse(
                "nothing to name yet: send a first message, then /title",
                "还没有可命名的内容：先发送一条消息，再 /title",
            );
        }
        match self.session.set_title(args) {
            Ok(()) => self
                .out
                .say(&self.t(&format!("titled “{args}”"), &format!("标题已设为“{args}”"))),
            Err(e) => self.out.error(&e.to_string()),
        }
    }

    pub(super) fn delete(&mut self, args: &str) {
        if args.is_empty() {
            return self.refuse(
                "usage: /delete <id> (see /list)",
                "用法：/delete <id>（见 /list）",
            );
        }
        let id = match self.store.resolve(args) {
            Ok(id) => id,
            Err(e) => return self.out.error(&e.to_string()),
        };
        if id == self.session.id() {
            return self.refuse(
                "that is the current conversation: /new or /switch to another one first",
                "这是当前对话：请先 /new 或 /switch 到其他对话",
            );
        }
        let summary = self
            .store
            .list()
            .ok()
            .and_then(|all| all.into_iter().find(|s| s.id == id));
        let about = summary
            .map(|s| {
                format!(
                    " “{}” ({} {})",
                    preview(&s.title, 40),
                    s.messages,
                    self.t("messages", "条消息")
                )
            })
            .unwrap_or_default();
        let question = self.t(
            &format!("Move conversation {id}{about} to the trash? [y/N] "),
            &format!("把对话 {id}{about} 移到回收站？[y/N] "),
        );
        let yes = self
            .ask(&question, "", false)
            .is_some_and(|a| matches!(a.trim().to_lowercase().as_str(), "y" | "yes" | "是"));
        if !yes {
            return self.out.say(&self.t("nothing deleted", "未删除"));
        }
        match self.store.trash(&id) {
            Ok(path) => self.out.say(&self.t(
                &format!("moved {id} to {}", path.display()),
                &format!("已把 {id} 移到 {}", path.display()),
            )),
            Err(e) => self.out.error(&e.to_string()),
        }
    }

    pub(super) fn search(&mut self, args: &str) {
        if args.is_empty() {
            return self.refuse("usage: /search <text>", "用法：/search <文字>");
        }
        let results = match self.store.search(args, SEARCH_LIMIT) {
            Ok(r) => r,
            Err(e) => return self.out.error(&e.to_string()),
        };
        let mut text = String::new();
        for hit in &results.hits {
            let mark = if hit.conversation == self.session.id() {
                "*"
            } else {
                " "
            };
            text.push_str(&format!(
                "{mark} {} [{}] {}: {}{}{}\n",
                hit.conversation,
                hit.number,
                hit.role.as_str(),
                hit.before,
                self.out.paint("1;33", &hit.matched),
                hit.after
            ));
        }
        let found = results.hits.len();
        let summary = if results.truncated {
            self.t(
                &format!(
                    "first {} shown; narrow the search to see others",
                    super::text::count(Lang::En, found, "match")
                ),
                &format!("仅显示前 {found} 条结果；请缩小搜索范围"),
            )
        } else {
            self.t(
                &format!(
                    "{} in {}; /switch ID then /N opens one",
                    super::text::count(Lang::En, found, "match"),
                    super::text::count(Lang::En, results.conversations_searched, "conversation")
                ),
                &format!(
                    "在 {} 个对话中找到 {found} 条；用 /switch ID 再 /N 打开",
                    results.conversations_searched
                ),
            )
        };
        text.push_str(&self.out.dim(&summary));
        self.out.say(&text);
    }

    pub(super) fn export(&mut self, args: &str) {
        let mut json = false;
        let mut file = None;
        for word in args.split_whitespace() {
            match word {
                "--json" => json = true,
                w if w.starts_with("--") => {
                    return self.refuse(
                        &format!("/export knows --json only (got `{w}`)"),
                        &format!("/export 只支持 --json（收到 `{w}`）"),
                    );
                }
                w if file.is_none() => file = Some(PathBuf::from(w)),
                w => {
                    return self.refuse(
                        &format!("/export takes one file name (got another: `{w}`)"),
                        &format!("/export 只接受一个文件名（多出 `{w}`）"),
                    );
                }
            }
        }
        let c = self.session.conversation();
        if c.is_empty() {
            return self.refuse(
                "nothing to export: this conversation has no messages",
                "没有可导出的内容：当前对话没有消息",
            );
        }
        let title = self.current_title();
        let (text, ext) = if json {
            let v = export::tree_json(c, &title);
            (
                serde_json::to_string_pretty(&v).expect("json") + "\n",
                "json",
            )
        } else {
            (export::branch_markdown(c, &title), "md")
        };
        let path = file.unwrap_or_else(|| PathBuf::from(format!("{}.{ext}", c.id)));
        match std::fs::write(&path, text) {
            Ok(()) => self.out.say(&self.t(
                &format!("wrote {}", path.display()),
                &format!("已写入 {}", path.display()),
            )),
            Err(e) => self.out.error(&format!("writing {}: {e}", path.display())),
        }
    }

    /// `/dump`: the request the model would get for the branch at the cursor, as JSON (the exact
    /// body) and as Markdown, beside the conversation file.
    pub(super) fn dump(&mut self, args: &str) {
        if !self.no_args("/dump", args) {
            return;
        }
        let c = self.session.conversation();
        let request = ChatRequest {
            model: self.config.model.clone(),
            messages: c.api_messages(c.cursor()),
            tools: self.tools.specs(),
            no_tool_calls: false,
        };
        // Exactly what the provider in use would send.
        let body = crate::llm::Model::request_body(&self.provider, &request);
        let mut md = format!(
            "# What the model sees\n\nConversation `{}` at node [{}], model `{}`, provider `{}`.\n",
            c.id,
            c.number_of(c.cursor()).unwrap_or(0),
            request.model,
            self.config.provider.name
        );
        for m in &request.messages {
            md.push_str(&format!("\n## {}", m.role.as_str()));
            if let Some(id) = &m.tool_call_id {
                md.push_str(&format!(" (result of `{id}`)"));
            }
            md.push_str("\n\n");
            if !m.content.is_empty() {
                md.push_str(&export::fenced(&m.content));
                md.push('\n');
            }
            for call in &m.tool_calls {
                md.push_str(&format!(
                    "\nTool call `{}` (`{}`): `{}`\n",
                    call.function.name, call.id, call.function.arguments
                ));
            }
        }
        md.push_str("\n## Tools\n\n");
        for t in &request.tools {
            md.push_str(&format!("- `{}`: {}\n", t.name, t.description));
        }
        let dir = self.store.dir();
        let (md_path, json_path) = (
            dir.join(format!("{}.dump.md", c.id)),
            dir.join(format!("{}.dump.json", c.id)),
        );
        let json = serde_json::to_string_pretty(&body).expect("json") + "\n";
        let result = std::fs::write(&md_path, md).and_then(|()| std::fs::write(&json_path, json));
        match result {
            Ok(()) => self.out.say(&self.t(
                &format!("wrote {} and {}", md_path.display(), json_path.display()),
                &format!("已写入 {} 和 {}", md_path.display(), json_path.display()),
            )),
            Err(e) => self.out.error(&format!("writing the dump: {e}")),
        }
    }

    pub(super) fn permissions(&mut self, args: &str) {
        if !args.is_empty() {
            let Some(mode) = crate::tools::Mode::parse(args) else {
                return self.refuse(
                    &format!("unknown permission mode `{args}`; use strict, default or permissive"),
                    &format!("未知权限模式 `{args}`；可用 strict、default 或 permissive"),
                );
            };
            self.policy.mode = mode;
        }
        let mode = self.policy.mode;
        let table = |kind| format!("{:?}", mode.action(kind)).to_lowercase();
        use crate::tools::ToolKind::*;
        let mut text = format!(
            "{} {} · {} {} · {} {} · {} {}\n",
            self.t("mode", "模式"),
            self.out.bold(mode.as_str()),
            self.t("read", "读取"),
            table(Read),
            self.t("write", "写入"),
            table(Write),
            self.t("execute", "执行"),
            table(Execute),
        );
        let rules: Vec<String> = self
            .policy
            .rules()
            .map(|(r, origin)| {
                format!(
                    "  {:<8} {}",
                    origin.label(),
                    crate::tools::escape_controls(&r.describe())
                )
            })
            .chain(self.policy.session_rules().map(|r| {
                format!(
                    "  {:<8} {}",
                    "session",
                    crate::tools::escape_controls(&r.describe())
                )
            }))
            .collect();
        if rules.is_empty() {
            text.push_str(&self.t("no rules; the mode decides\n", "没有规则；由模式决定\n"));
        } else {
            text.push_str(&self.t("rules, first match wins:\n", "规则（先匹配者生效）：\n"));
            text.push_str(&rules.join("\n"));
            text.push('\n');
        }
        text.push_str(&self.out.dim(&self.t(
            "Hard limits (rm -rf /, mkfs, dd to a disk, fork bombs, shutdown, curl | sh, …) are refused in every mode; file tools never leave the working folder.",
            "硬性限制（rm -rf /、mkfs、dd 写磁盘、fork 炸弹、关机、curl | sh 等）在任何模式下都会被拒绝；文件工具永远不会离开工作目录。",
        )));
        self.out.say(&text);
    }

    pub(super) fn model(&mut self, args: &str) {
        let s = self.provider.settings();
        if args.is_empty() {
            return self.out.say(&self.t(
                &format!(
                    "provider {} ({}, {}) · model {}",
                    s.name,
                    s.kind.as_str(),
                    s.base_url,
                    self.config.model
                ),
                &format!(
                    "服务 {}（{}，{}）· 模型 {}",
                    s.name,
                    s.kind.as_str(),
                    s.base_url,
                    self.config.model
                ),
            ));
        }
        if args.contains(char::is_whitespace) {
            return self.refuse(
                &format!("a model name has no spaces (got `{args}`)"),
                &format!("模型名不含空格（收到 `{args}`）"),
            );
        }
        self.config.model = args.to_string();
        self.out.say(&self.t(
            &format!(
                "model {args} for the rest of this session (/models lists what the server offers)"
            ),
            &format!("本次会话改用模型 {args}（/models 列出可用模型）"),
        ));
    }

    pub(super) fn models(&mut self, args: &str) {
        if !self.no_args("/models", args) {
            return;
        }
        let result = interruptible(
            &self.runtime,
            &self.busy,
            &mut self.interrupts,
            self.provider.models(),
        );
        let models = match result {
            Some(Ok(models)) => models,
            Some(Err(e)) => {
                return self.out.error(&self.t(
                    &format!("cannot list the models: {e}"),
                    &format!("无法列出模型：{e}"),
                ));
            }
            None => return self.out.warn(&self.t("interrupted", "已中断")),
        };
        if models.is_empty() {
            return self
                .out
                .say(&self.t("the server lists no models", "服务没有列出模型"));
        }
        let mut text = String::new();
        for m in &models {
            let mark = if m.id == self.config.model { "*" } else { " " };
            let about = m
                .description
                .as_deref()
                .filter(|d| *d != m.id)
                .map(|d| self.out.dim(&format!("  {d}")))
                .unwrap_or_default();
            text.push_str(&format!("{mark} {}{about}\n", m.id));
        }
        text.push_str(
            &self
                .out
                .dim(&self.t("/model NAME switches", "/model NAME 切换模型")),
        );
        self.out.say(&text);
    }

    pub(super) fn list_skills(&mut self, args: &str) {
        if !self.no_args("/skills", args) {
            return;
        }
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

    pub(super) fn help(&mut self, args: &str) {
        if !self.no_args("/help", args) {
            return;
        }
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
        let aliases: Vec<String> = COMMANDS
            .iter()
            .flat_map(|c| {
                c.names[1..]
                    .iter()
                    .map(move |a| format!("{a} = {}", c.names[0]))
            })
            .collect();
        text.push_str(&self.out.dim(&format!(
            "{}\n{}",
            self.t("Aliases:", "别名：") + " " + &aliases.join(", "),
            self.t(
                "Alt-Enter, Ctrl-J or a trailing \\ starts a new line; Ctrl-C stops an answer or clears the line; Ctrl-D leaves.",
                "Alt-Enter、Ctrl-J 或行尾 \\ 换行；Ctrl-C 中断回答或清空输入；Ctrl-D 退出。",
            )
        )));
        self.out.say(&text);
    }
}
