//! `/retry --n K` with K answers at once: they run side by side (rounds of reading tools
//! together, an answer that changes files with the folder to itself; see
//! [`new_core::agent::shared_folder`]), each one's output is kept and shown whole, in order, as soon
//! as it and those before it are done.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::Poll;

use new_core::agent::shared_folder::SharedFolder;
use new_core::agent::{Agent, Compacted, CompactionEvent, Gate, GateDecision, Observer, TurnEnd};
use new_core::conversation::ChatSession;
use new_core::llm::ChatResponse;
use new_core::tools::{ToolOutcome, ToolRegistry};
use new_core::vocab::{ToolCall, Usage};

use super::output::Printer;
use super::repl::App;

/// What an answer running beside others showed, to be shown when its turn comes.
#[derive(Default)]
struct Recorder {
    events: Vec<Event>,
}

enum Event {
    Text(String),
    Reasoning(String),
    Retry(u32, u32, std::time::Duration, String),
    AnswerEnd(ChatResponse, bool),
    ToolCall(ToolCall),
    ToolResult(ToolCall, ToolOutcome),
    Compaction(Compaction),
    HookFailed(String),
    HookNotice(String),
    Usage(Usage),
    SubagentLine(String),
    CheckpointFailed(String),
}

enum Compaction {
    Started {
        automatic: bool,
    },
    Done(Compacted),
    Failed {
        reason: String,
        breaker_opened: bool,
    },
    Cancelled,
}

impl Recorder {
    /// Shows what was kept, as it would have been shown live.
    fn replay(self, to: &mut dyn Observer) {
        for event in self.events {
            match event {
                Event::Text(t) => to.text(&t),
                Event::Reasoning(t) => to.reasoning(&t),
                Event::Retry(attempt, of, delay, reason) => to.retry(attempt, of, delay, &reason),
                Event::AnswerEnd(response, complete) => to.answer_end(&response, complete),
                Event::ToolCall(call) => to.tool_call(&call),
                Event::ToolResult(call, outcome) => to.tool_result(&call, &outcome),
                Event::Compaction(c) => to.compaction(&match &c {
                    Compaction::Started { automatic } => CompactionEvent::Started {
                        automatic: *automatic,
                    },
                    Compaction::Done(done) => CompactionEvent::Done(done),
                    Compaction::Failed {
                        reason,
                        breaker_opened,
                    } => CompactionEvent::Failed {
                        reason: reason.clone(),
                        breaker_opened: *breaker_opened,
                    },
                    Compaction::Cancelled => CompactionEvent::Cancelled,
                }),
                Event::HookFailed(line) => to.hook_failed(&line),
                Event::HookNotice(line) => to.hook_notice(&line),
                Event::Usage(u) => to.usage(&u),
                Event::SubagentLine(line) => to.subagent_line(&line),
                Event::CheckpointFailed(reason) => to.checkpoint_failed(&reason),
            }
        }
    }
}

impl Observer for Recorder {
    fn hook_failed(&mut self, line: &str) {
        self.events.push(Event::HookFailed(line.to_string()));
    }
    fn hook_notice(&mut self, line: &str) {
        self.events.push(Event::HookNotice(line.to_string()));
    }
    fn usage(&mut self, usage: &Usage) {
        self.events.push(Event::Usage(usage.clone()));
    }
    fn subagent_line(&mut self, line: &str) {
        self.events.push(Event::SubagentLine(line.to_string()));
    }
    fn text(&mut self, text: &str) {
        // Streamed pieces of one answer are kept as one.
        if let Some(Event::Text(last)) = self.events.last_mut() {
            last.push_str(text);
        } else {
            self.events.push(Event::Text(text.to_string()));
        }
    }
    fn reasoning(&mut self, text: &str) {
        if let Some(Event::Reasoning(last)) = self.events.last_mut() {
            last.push_str(text);
        } else {
            self.events.push(Event::Reasoning(text.to_string()));
        }
    }
    // A "⋯ tool" line only shows while the call streams: nothing to show afterwards.
    fn tool_call_started(&mut self, _name: &str) {}
    fn retry(&mut self, attempt: u32, of: u32, delay: std::time::Duration, reason: &str) {
        self.events
            .push(Event::Retry(attempt, of, delay, reason.to_string()));
    }
    fn answer_end(&mut self, response: &ChatResponse, complete: bool) {
        self.events
            .push(Event::AnswerEnd(response.clone(), complete));
    }
    fn tool_call(&mut self, call: &ToolCall) {
        self.events.push(Event::ToolCall(call.clone()));
    }
    fn tool_result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        self.events
            .push(Event::ToolResult(call.clone(), outcome.clone()));
    }
    fn compaction(&mut self, event: &CompactionEvent<'_>) {
        self.events.push(Event::Compaction(match event {
            CompactionEvent::Started { automatic } => Compaction::Started {
                automatic: *automatic,
            },
            CompactionEvent::Done(done) => Compaction::Done((*done).clone()),
            CompactionEvent::Failed {
                reason,
                breaker_opened,
            } => Compaction::Failed {
                reason: reason.clone(),
                breaker_opened: *breaker_opened,
            },
            CompactionEvent::Cancelled => Compaction::Cancelled,
        }));
    }
    fn checkpoint_failed(&mut self, reason: &str) {
        self.events
            .push(Event::CheckpointFailed(reason.to_string()));
    }
}

/// One answer's way to the user's gate, which the answers share: each question names the
/// answer asking (questions never overlap: a gate decides without waiting on the others).
struct SharedGate<'g, G: Gate> {
    gate: &'g RefCell<G>,
    /// Stops every answer: Ctrl-C at one question is an interrupt of them all.
    all: &'g tokio::sync::watch::Sender<u64>,
    label: String,
    /// A subagent of this answer asking.
    sub: Option<String>,
}

impl<G: Gate> SharedGate<'_, G> {
    fn labelled(&self) -> std::cell::RefMut<'_, G> {
        let mut gate = self.gate.borrow_mut();
        gate.set_label(Some(match &self.sub {
            Some(role) => format!("{} · {role}", self.label),
            None => self.label.clone(),
        }));
        gate
    }
}

impl<G: Gate> Gate for SharedGate<'_, G> {
    fn check(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &serde_json::Value,
        hook: Option<new_core::hooks::Permission>,
    ) -> GateDecision {
        let decision = self.labelled().check(call, tools, args, hook);
        if decision == GateDecision::Interrupt {
            self.all.send_modify(|n| *n += 1);
        }
        decision
    }
    fn set_label(&mut self, label: Option<String>) {
        self.sub = label;
    }
    fn unattended(&self) -> Option<Box<dyn Gate + Send>> {
        self.gate.borrow().unattended()
    }
    fn network(&mut self, host: &str, port: u16) -> bool {
        self.labelled().network(host, port)
    }
    fn continue_uncompacted(&mut self) -> bool {
        self.labelled().continue_uncompacted()
    }
}

/// Runs `futures` together; `done(i, output)` is called in index order, for each as soon as it
/// and all those before it are done.
async fn in_order<F: Future>(futures: Vec<F>, mut done: impl FnMut(usize, F::Output)) {
    let mut running: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = running.iter().map(|_| None).collect();
    let mut next = 0;
    std::future::poll_fn(|cx| {
        for (slot, output) in running.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot
                && let Poll::Ready(value) = future.as_mut().poll(cx)
            {
                *output = Some(value);
                *slot = None;
            }
        }
        while let Some(value) = outputs.get_mut(next).and_then(Option::take) {
            done(next, value);
            next += 1;
        }
        if next == outputs.len() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

impl App {
    /// Why `/retry --n K` cannot run its answers side by side here (then they run one after
    /// another): without checkpoints nothing can be put back between the answers that change
    /// files; a `post_message` hook checks an answer's end in the folder as that answer left it.
    pub(super) fn side_by_side_refusal(&self) -> Option<String> {
        if self.checkpoints.is_none() {
            return Some(self.tr("one_after_another_no_checkpoints", &[]));
        }
        if self.hooks.as_ref().is_some_and(|h| h.wants("post_message")) {
            return Some(self.tr("one_after_another_stop_hooks", &[]));
        }
        None
    }

    /// `count` answers to the user message `user`, side by side; the cursor ends on the last,
    /// as when they run one after another. False when the folder could not be snapshotted (said;
    /// nothing ran): they must run one after another.
    pub(super) fn retry_together(&mut self, user: &str, count: usize) -> bool {
        self.session.move_cursor(user).expect("from the tree");
        // They all start from the files of the message they answer (asked, as after any move)…
        self.offer_restore();
        // …or from the folder as the user keeps it: what `new` sees of it now.
        match self.checkpoints.as_ref().map(|c| c.take()) {
            Some(Ok(Some(_))) => {}
            Some(Err(e)) => {
                self.out.warn(&self.tr(
                    "checkpoint_failed",
                    &[("reason", &new_core::tools::escape_controls(&e.to_string()))],
                ));
                return false;
            }
            _ => return false,
        }
        let folder = SharedFolder::default();
        self.out.say(
            &self
                .out
                .dim(&self.tr("retry_together", &[("count", &count)])),
        );
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
            // A subagent may go on in the background after its answer ended and gave the
            // folder back: side by side, answers work alone.
            subagents: None,
            role: None,
            folder: Some(&folder),
        };
        let gate = RefCell::new(super::approval::Approvals::for_session(
            &mut self.policy,
            &mut self.reader,
            self.out,
            &self.layers,
            self.config.project_trusted,
            &self.workdir,
            self.hooks.as_ref(),
        ));
        // One interrupt for all: Ctrl-C (through the session's channel), or Ctrl-C at one
        // answer's question.
        let (all, stop) = tokio::sync::watch::channel(0u64);
        let out = self.out;
        let lang = out.lang;
        let pricing = self.config.pricing;
        let model = self.config.model.clone();
        let futures: Vec<_> = (0..count)
            .map(|i| {
                let mut session = self.session.fork();
                let mut interrupts = stop.clone();
                let mut gate = SharedGate {
                    gate: &gate,
                    all: &all,
                    label: super::text::tr(
                        lang,
                        "retry_n_of",
                        &[("i", &(i + 1)), ("count", &count)],
                    ),
                    sub: None,
                };
                let agent = &agent;
                async move {
                    let started = std::time::Instant::now();
                    let mut recorder = Recorder::default();
                    let end = agent
                        .run(&mut session, &mut recorder, &mut gate, &mut interrupts)
                        .await;
                    let tip = session.conversation().cursor().to_string();
                    (end, recorder, tip, started.elapsed())
                }
            })
            .collect();
        // (how it ended, where, its tokens and cost) of each answer.
        let mut ended: Vec<(TurnEnd, String, Option<Usage>, Option<f64>)> = Vec::new();
        self.turns_started.fetch_add(1, Ordering::SeqCst);
        self.busy.store(true, Ordering::SeqCst);
        self.interrupts.borrow_and_update();
        let outer = &mut self.interrupts;
        let answers = in_order(futures, |i, (end, recorder, tip, took)| {
            out.say(&out.bold(&super::text::tr(
                lang,
                "retry_n_of",
                &[("i", &(i + 1)), ("count", &count)],
            )));
            let mut printer = Printer::new(out);
            recorder.replay(&mut printer);
            let cost = pricing.zip(printer.turn.as_ref()).map(|(p, u)| p.cost(u));
            let line = super::output::status_line(
                lang,
                &model,
                printer.turn.as_ref(),
                None,
                took.as_secs_f64(),
                cost,
            );
            out.say(&out.dim(&line));
            ended.push((end, tip, printer.turn, cost));
        });
        self.runtime.block_on(async {
            let forward = async {
                while outer.changed().await.is_ok() {
                    all.send_modify(|n| *n += 1);
                }
                std::future::pending::<()>().await
            };
            tokio::select! {
                _ = answers => {}
                _ = forward => {}
            }
        });
        self.busy.store(false, Ordering::SeqCst);
        self.interrupts.borrow_and_update();
        drop(agent);
        for problem in folder.take_problems() {
            self.out.warn(&self.tr(
                "not_put_back",
                &[("what", &new_core::tools::escape_controls(&problem))],
            ));
        }
        // The answers wrote to the file beside this copy of it: what is there now is the tree.
        let id = self.session.id().to_string();
        match ChatSession::open(self.store.clone(), &id, &self.system_prompt) {
            Ok((session, report)) => {
                self.session = session;
                self.report_load(&report);
            }
            Err(e) => {
                self.out.error(&super::text::error(self.out.lang, &e));
                return true;
            }
        }
        let mut interrupted = false;
        for (end, tip, usage, cost) in ended {
            if let Some(usage) = &usage {
                super::output::add_usage(&mut self.totals.0, usage);
            }
            self.totals.1 += cost.unwrap_or(0.0);
            self.totals.2 += 1;
            if self.session.move_cursor(&tip).is_err() {
                continue;
            }
            match end {
                // One Ctrl-C stops them all: said once.
                TurnEnd::Interrupted => interrupted = true,
                end => {
                    self.after_turn(end, &mut Printer::new(self.out), 0);
                }
            }
        }
        if interrupted {
            self.turn_interrupted = true;
            self.out
                .warn(&self.tr("interrupted_what_arrived_is_kept", &[]));
        }
        // The folder is as they all began; the cursor's answer may have left it otherwise.
        self.offer_restore();
        true
    }
}
