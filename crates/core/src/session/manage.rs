//! What the commands about conversations and settings mean, with no terminal: `/list`, `/title`,
//! `/delete`, `/search`, `/export`, `/dump`, `/permissions` (the mode), `/model` and `/compact`. A
//! front end parses the command, calls these, and says what they return in its own words.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::Session;
use super::event::{Frontend, Relay};
use crate::agent;
use crate::agent::Agent;
use crate::context;
use crate::context::Breakdown;
use crate::conversation::search::SearchResults;
use crate::conversation::{StoreError, Summary, export};
use crate::escape;
use crate::fs::atomic;
use crate::llm::ChatRequest;
use crate::llm::Model;
use crate::tools::Mode;
use std::cell::RefCell;
use std::fs;
use std::io;

/// Why a command about conversations or settings did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error("this conversation has no message yet: there is nothing to name")]
    NothingToName,
    #[error("{0} is the current conversation: start another (/new) or switch first")]
    Current(String),
    #[error("this conversation has no message yet: there is nothing to export")]
    NothingToExport,
    #[error("a model name has no spaces: {0:?}")]
    ModelWithSpaces(String),
    #[error("writing {path} failed: {error}")]
    Write { path: PathBuf, error: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One conversation of a `/list`.
#[derive(Debug, Clone)]
pub struct Listed {
    pub summary: Summary,
    /// A one-shot's (`-p`).
    pub one_shot: bool,
    /// The conversation at hand.
    pub current: bool,
}

/// What `/list` shows: the newest conversations first.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The conversation at hand, when it has no file yet (it is not among the others).
    pub unsaved: Option<String>,
    pub conversations: Vec<Listed>,
    /// Subagents' conversations left out (`/list all` shows them).
    pub hidden: usize,
    /// Conversations beyond the page, besides the hidden ones.
    pub more: usize,
}

/// What `/export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// The branch at the cursor, as Markdown.
    Markdown,
    /// The whole tree, as JSON.
    Json,
}

impl Session {
    /// The newest `limit` conversations (all of them with `all`, subagents' too), each header
    /// read once to tell a subagent's (left out unless `all`) and a one-shot's.
    pub fn list(&self, all: bool, limit: usize) -> Result<Listing, StoreError> {
        let (summaries, total) = if all {
            let all = self.store.list()?;
            let n = all.len();
            (all, n)
        } else {
            // A few more are read so that the page stays full without the subagents'.
            self.store.list_recent(limit * 2)?
        };
        let current = self.chat.id();
        let mut hidden = 0;
        let mut conversations: Vec<Listed> = Vec::with_capacity(summaries.len());
        for summary in summaries {
            let kind = self.store.kind(&summary.id);
            if !all && kind.subagent {
                hidden += 1;
                continue;
            }
            conversations.push(Listed {
                current: summary.id == current,
                one_shot: kind.one_shot,
                summary,
            });
        }
        if !all {
            conversations.truncate(limit);
        }
        let more = total.saturating_sub(conversations.len() + hidden);
        Ok(Listing {
            unsaved: (!self.chat.is_persisted()).then(|| current.to_string()),
            conversations,
            hidden,
            more,
        })
    }

    /// The conversation's title as `/list`, `/title` and `/export` show it: its latest title
    /// record, else its first message of the user cut to 60 characters; empty when it has
    /// neither.
    pub fn title(&self) -> String {
        let c = self.chat.conversation();
        c.title
            .clone()
            .or_else(|| {
                c.first_user_message()
                    .map(|m| escape::preview(&m.content, 60))
            })
            .unwrap_or_default()
    }

    /// `/title TEXT`: a title record appended to the conversation's file.
    pub fn set_title(&mut self, title: &str) -> Result<(), ManageError> {
        if !self.chat.is_persisted() {
            return Err(ManageError::NothingToName);
        }
        Ok(self.chat.set_title(title)?)
    }

    /// The conversation `/delete PREFIX` would move to the trash, and its summary when the index
    /// has one; the conversation at hand is refused.
    pub fn delete_target(&self, prefix: &str) -> Result<(String, Option<Summary>), ManageError> {
        let id = self.store.resolve(prefix)?;
        if id == self.chat.id() {
            return Err(ManageError::Current(id));
        }
        let summary = self
            .store
            .list()
            .ok()
            .and_then(|all| all.into_iter().find(|s| s.id == id));
        Ok((id, summary))
    }

    /// Moves a conversation (not the one at hand) to DATADIR's trash; where it went.
    pub fn delete(&mut self, id: &str) -> Result<PathBuf, ManageError> {
        if id == self.chat.id() {
            return Err(ManageError::Current(id.to_string()));
        }
        Ok(self.store.trash(id)?)
    }

    /// `/search TEXT` over every conversation of DATADIR.
    pub fn search(&self, text: &str, limit: usize) -> Result<SearchResults, StoreError> {
        self.store.search(text, limit)
    }

    /// `/export`: the branch at the cursor as Markdown, or the whole tree as JSON, written to
    /// `file` (default: `ID.md` or `ID.json` in the current folder). Where it went.
    pub fn export(
        &self,
        format: ExportFormat,
        file: Option<PathBuf>,
    ) -> Result<PathBuf, ManageError> {
        let c = self.chat.conversation();
        if c.is_empty() {
            return Err(ManageError::NothingToExport);
        }
        let title = self.title();
        let (text, ext) = match format {
            ExportFormat::Json => (
                serde_json::to_string_pretty(&export::tree_json(c, &title)).expect("json") + "\n",
                "json",
            ),
            ExportFormat::Markdown => (export::branch_markdown(c, &title), "md"),
        };
        let path = file.unwrap_or_else(|| PathBuf::from(format!("{}.{ext}", c.id)));
        fs::write(&path, text).map_err(|error| ManageError::Write {
            path: path.clone(),
            error,
        })?;
        Ok(path)
    }

    /// `/dump`: the request the model would get for the branch at the cursor, as the exact body
    /// the provider in use would send (JSON) and as Markdown, beside the conversation file,
    /// readable by the user only (they hold the whole system prompt). The two paths.
    pub fn dump(&self) -> Result<(PathBuf, PathBuf), ManageError> {
        let c = self.chat.conversation();
        let results = context::results_dir(self.store.dir(), c.id.as_str());
        let mut messages = self.context.request_messages(c, c.cursor(), &results);
        agent::add_mcp_instructions(&mut messages, &self.tools);
        let request = ChatRequest {
            model: self.config.model.clone(),
            messages,
            tools: self.offered_tools(),
            no_tool_calls: false,
            max_tokens: None,
        };
        let body = Model::request_body(&self.provider, &request);
        let mut md = format!(
            "# What the model sees\n\nConversation `{}` at node [{}], model `{}`, provider `{}`.\n",
            c.id,
            c.number_of(c.cursor()).unwrap_or(0),
            request.model,
            self.config.provider.name
        );
        for m in &request.messages {
            md.push_str(&format!("\n## {}", m.role.as_str()));
            if let Some(id) = m.tool_call_id() {
                md.push_str(&format!(" (result of `{id}`)"));
            }
            md.push_str("\n\n");
            if !m.content.is_empty() {
                md.push_str(&export::fenced(&m.content));
                md.push('\n');
            }
            for call in m.tool_calls() {
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
        let md_path = dir.join(format!("{}.dump.md", c.id));
        let json_path = dir.join(format!("{}.dump.json", c.id));
        let json = serde_json::to_string_pretty(&body).expect("json") + "\n";
        let write = |path: &Path, bytes: &[u8]| {
            atomic::write_private(path, bytes).map_err(|error| ManageError::Write {
                path: path.to_path_buf(),
                error,
            })
        };
        write(&md_path, md.as_bytes())?;
        write(&json_path, json.as_bytes())?;
        Ok((md_path, json_path))
    }

    /// `/permissions MODE`: the mode for the rest of the session; background subagents decide by
    /// it from their next call on.
    pub fn set_mode(&mut self, mode: Mode) {
        self.policy.mode = mode;
        if let Some(subagents) = &self.subagents {
            let policy = &self.policy;
            subagents
                .tasks
                .renew_fallbacks(|| super::gate::Unattended::boxed(policy));
        }
    }

    /// `/model NAME`: the model for the rest of the session, its context accounting and prompt
    /// variables renewed.
    pub fn set_model(&mut self, model: &str) -> Result<(), ManageError> {
        if model.is_empty() || model.contains(char::is_whitespace) {
            return Err(ManageError::ModelWithSpaces(model.to_string()));
        }
        self.config.model = model.to_string();
        self.reset_context();
        Ok(())
    }

    /// The reasoning level for the next requests: Anthropic's extended thinking budget in tokens
    /// (None: off), as `thinking_budget` in the configuration sets it.
    pub fn set_thinking_budget(&mut self, budget: Option<u32>) {
        self.config.provider.thinking_budget = budget;
        self.provider.set_thinking_budget(budget);
    }

    /// What the next request for the branch at the cursor holds, measured.
    pub fn breakdown(&self) -> Breakdown {
        let c = self.chat.conversation();
        let results = context::results_dir(self.store.dir(), c.id.as_str());
        let messages = self.context.request_messages(c, c.cursor(), &results);
        let has_summary = c.sent(c.cursor()).summary.is_some();
        Breakdown::of(
            &self.prompt_parts,
            &self.offered_tools(),
            &messages[1..],
            has_summary,
        )
    }

    /// The tokens in use (calibrated) and the window.
    pub fn context_use(&self) -> (u64, u64) {
        let used = self.context.scale(self.breakdown().total());
        (used, self.context.window().0)
    }

    /// `/compact [FOCUS]`: a summary node for the start of the branch at the cursor. Its course
    /// (started, done, failed, cancelled) reaches the front end as compaction events.
    pub async fn compact(&mut self, focus: Option<&str>, front: &mut dyn Frontend) {
        self.learn_server_window().await;
        let agent = Agent {
            provider: &self.provider,
            tools: &self.tools,
            model: self.config.model.clone(),
            max_rounds: self.config.max_rounds,
            context: Some(&self.context),
            allowed_tools: None,
            checkpoints: None,
            hooks: self.hooks.as_ref(),
            subagents: None,
            role: None,
            folder: None,
        };
        let focus = focus.map(str::trim).filter(|f| !f.is_empty());
        let shared = RefCell::new(front);
        let mut relay = Relay::new(&shared);
        self.busy.store(true, Ordering::SeqCst);
        // The outcome travels as events; the result says the same.
        let _ = agent
            .compact(
                &mut self.chat,
                &mut relay,
                &mut self.interrupts,
                focus,
                false,
            )
            .await;
        self.busy.store(false, Ordering::SeqCst);
    }
}
