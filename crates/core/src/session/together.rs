//! `/retry --n K` with K answers at once: they run side by side (rounds of reading tools
//! together, an answer that changes files with the folder to itself; see
//! [`crate::agent::shared_folder`]), each one's events kept and handed to the front end whole, in
//! order, as soon as it and those before it are done.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::Poll;

use super::Session;
use super::event::{Ended, Event, Frontend, Recorder, Relay};
use super::gate::SessionGate;
use crate::agent::shared_folder::SharedFolder;
use crate::agent::{Agent, Gate, GateDecision};
use crate::conversation::{ChatSession, LoadReport, StoreError};
use crate::hooks::Permission;
use crate::tools::ToolRegistry;
use crate::vocab::ToolCall;
use std::cell::RefMut;
use std::future;
use std::time::Duration;
use std::time::Instant;
use tokio::sync::watch;
use tokio::sync::watch::Sender;

/// One answer's way to the user's gate, which the answers share: each question names the
/// answer asking (questions never overlap: a gate decides without waiting on the others).
struct SharedGate<'g, G: Gate> {
    gate: &'g RefCell<G>,
    /// Stops every answer: Ctrl-C at one question is an interrupt of them all.
    all: &'g Sender<u64>,
    label: String,
    /// A subagent of this answer asking.
    sub: Option<String>,
}

impl<G: Gate> SharedGate<'_, G> {
    fn labelled(&self) -> RefMut<'_, G> {
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
        hook: Option<Permission>,
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

/// What sees each answer's events as they happen: (answer index, event).
type Watch<'f> = &'f mut dyn FnMut(usize, &Event);

/// One answer's events, kept, and shown to the watcher as they happen.
struct Watched<'w, 'f> {
    i: usize,
    watch: &'w RefCell<Watch<'f>>,
    recorder: Recorder,
}

impl Frontend for Watched<'_, '_> {
    fn event(&mut self, event: Event) {
        (self.watch.borrow_mut())(self.i, &event);
        self.recorder.event(event);
    }
}

/// Runs `futures` together; `done(i, output)` is called in index order, for each as soon as it
/// and all those before it are done.
async fn in_order<F: Future>(futures: Vec<F>, mut done: impl FnMut(usize, F::Output)) {
    let mut running: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = running.iter().map(|_| None).collect();
    let mut next = 0;
    future::poll_fn(|cx| {
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

/// Why answers run one after another instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OneAfterAnother {
    /// Without checkpoints nothing can be put back between the answers that change files.
    NoCheckpoints,
    /// A `post_message` hook checks an answer's end in the folder as that answer left it.
    StopHooks,
    /// The folder could not be snapshotted (nothing ran).
    SnapshotFailed(String),
}

/// What answers side by side left.
pub struct Together {
    /// How each ended and its tip, in order.
    pub ends: Vec<(Ended, String)>,
    /// What could not be put back in the folder between them.
    pub problems: Vec<String>,
    /// The conversation opened again (the answers wrote beside this copy of it).
    pub reopened: Result<LoadReport, StoreError>,
}

impl Session {
    /// Why `/retry --n K` cannot run its answers side by side here; None: it can.
    pub fn side_by_side_refusal(&self) -> Option<OneAfterAnother> {
        if self.checkpoints.is_none() {
            return Some(OneAfterAnother::NoCheckpoints);
        }
        if self.hooks.as_ref().is_some_and(|h| h.wants("post_message")) {
            return Some(OneAfterAnother::StopHooks);
        }
        None
    }

    /// How many answers `user` (a message's id) has already, as `/compare` numbers them (side
    /// answers of `/btw` not counted): new answers to it are numbered after these.
    pub fn answers_to(&self, user: &str) -> usize {
        self.chat
            .conversation()
            .children(user)
            .iter()
            .filter(|m| !m.side)
            .count()
    }

    /// Whether answers can run side by side now: the folder as the user keeps it is snapshotted
    /// (what `new` sees of it now is what they all start from).
    pub fn ready_together(&self) -> Result<(), OneAfterAnother> {
        if let Some(why) = self.side_by_side_refusal() {
            return Err(why);
        }
        match self.checkpoints.as_ref().map(|c| c.take()) {
            Some(Ok(Some(_))) => Ok(()),
            Some(Err(e)) => Err(OneAfterAnother::SnapshotFailed(e.to_string())),
            _ => Err(OneAfterAnother::NoCheckpoints),
        }
    }

    /// `count` answers to the user message at the cursor, side by side, from the folder as it
    /// is now: snapshotted by [`Session::ready_together`], which comes first. Each answer's events go to `done` whole, with how long it took, in order, as soon
    /// as it and those before it are done; the questions of all go to `asking`, each labelled
    /// with `label(i)`. The cursor ends on the last, as when they run one after another; what
    /// follows each answer ([`Session::finish`]) is the caller's.
    pub async fn answer_together(
        &mut self,
        count: usize,
        label: &dyn Fn(usize) -> String,
        asking: &mut dyn Frontend,
        done: &mut dyn FnMut(usize, Recorder, Duration),
    ) -> Result<Together, OneAfterAnother> {
        self.answer_together_watched(count, label, asking, done, &mut |_, _| {})
            .await
    }

    /// [`Session::answer_together`], with each answer's events also handed to `watch` as they
    /// happen (answer index, event), before they are kept: what a front end shows of the
    /// answers' progress while they run (their text comes whole to `done`).
    pub async fn answer_together_watched(
        &mut self,
        count: usize,
        label: &dyn Fn(usize) -> String,
        asking: &mut dyn Frontend,
        done: &mut dyn FnMut(usize, Recorder, Duration),
        watch: &mut dyn FnMut(usize, &Event),
    ) -> Result<Together, OneAfterAnother> {
        if let Some(why) = self.side_by_side_refusal() {
            return Err(why);
        }
        let folder = SharedFolder::default();
        self.learn_server_window().await;
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
        let asking = RefCell::new(asking);
        let gate = RefCell::new(SessionGate::new(
            &mut self.policy,
            &asking,
            &self.layers,
            self.config.project_trusted,
            &self.workdir,
            self.hooks.as_ref(),
        ));
        // One interrupt for all: the session's, or an interrupt at one answer's question.
        let (all, stop) = watch::channel(0u64);
        let watch = RefCell::new(watch);
        let futures: Vec<_> = (0..count)
            .map(|i| {
                let mut session = self.chat.fork();
                let mut interrupts = stop.clone();
                let mut gate = SharedGate {
                    gate: &gate,
                    all: &all,
                    label: label(i),
                    sub: None,
                };
                let agent = &agent;
                let watch = &watch;
                async move {
                    let started = Instant::now();
                    let mut watched = Watched {
                        i,
                        watch,
                        recorder: Recorder::default(),
                    };
                    let end = {
                        let front = RefCell::new(&mut watched as &mut dyn Frontend);
                        let mut relay = Relay::new(&front);
                        agent
                            .run(&mut session, &mut relay, &mut gate, &mut interrupts)
                            .await
                    };
                    let tip = session.conversation().cursor().to_string();
                    // The time its answer keeps (what `/compare` says), else as measured here.
                    let took = session
                        .conversation()
                        .get(&tip)
                        .and_then(|m| m.extra.seconds)
                        .map_or_else(|| started.elapsed(), Duration::from_secs_f32);
                    (Ended::from(end), watched.recorder, tip, took)
                }
            })
            .collect();
        let mut ends: Vec<(Ended, String)> = Vec::new();
        self.turns_started.fetch_add(1, Ordering::SeqCst);
        self.busy.store(true, Ordering::SeqCst);
        self.interrupts.borrow_and_update();
        let outer = &mut self.interrupts;
        let answers = in_order(futures, |i, (end, recorder, tip, took)| {
            done(i, recorder, took);
            ends.push((end, tip));
        });
        let forward = async {
            while outer.changed().await.is_ok() {
                all.send_modify(|n| *n += 1);
            }
            future::pending::<()>().await
        };
        tokio::select! {
            _ = answers => {}
            _ = forward => {}
        }
        self.busy.store(false, Ordering::SeqCst);
        self.interrupts.borrow_and_update();
        drop(agent);
        drop(gate);
        let mut problems = folder.take_problems();
        // The folder as the answers put it back is `new`'s own doing: what `new` last saw of
        // it, so a restore after them does not take the put-back for someone else's change.
        if let Some(Err(e)) = self.checkpoints.as_ref().map(|c| c.take()) {
            problems.push(e.to_string());
        }
        // The answers wrote to the file beside this copy of it: what is there now is the tree.
        let id = self.chat.id().to_string();
        let reopened = ChatSession::open(self.store.clone(), &id, &self.system_prompt).map(
            |(chat, report)| {
                self.chat = chat;
                report
            },
        );
        if reopened.is_ok() {
            // The cursor on the last, as one after another leaves it.
            if let Some((_, tip)) = ends.last() {
                let _ = self.chat.move_cursor(tip);
            }
        }
        Ok(Together {
            ends,
            problems,
            reopened,
        })
    }
}
