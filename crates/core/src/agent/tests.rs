//! The loop in-process, against a scripted model: rounds of tools, errors fed back, the round
//! limit and its wrap-up, interrupts while streaming and while a tool runs, a failure after a
//! partial answer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::context;
use crate::context::Settings;
use crate::context::WindowSource;
use crate::conversation::Store;
use crate::hooks::Permission;
use crate::llm::overflow;
use crate::llm::{ChatFuture, Model};
use crate::tools;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolFuture;
use crate::tools::ToolKind;
use crate::tools::ToolOutput;
use crate::vocab::ChatMessage;
use std::fs;
use std::future;
use std::path::PathBuf;
use std::time::Instant;
use tokio::sync::Barrier;
use tokio::task;
use tokio::time;

/// One scripted answer.
enum Step {
    /// Text pieces, then tool calls; the answer completes.
    Answer(Vec<&'static str>, Vec<ToolCall>),
    /// Text pieces, then the request fails.
    Fail(Vec<&'static str>, LlmError),
    /// Text pieces, then nothing more, ever (until interrupted).
    Stall(Vec<&'static str>),
}

#[derive(Default, Clone)]
struct Scripted {
    steps: Arc<Mutex<VecDeque<Step>>>,
    requests: Arc<Mutex<Vec<ChatRequest<'static>>>>,
}

impl Scripted {
    fn new(steps: Vec<Step>) -> Scripted {
        Scripted {
            steps: Arc::new(Mutex::new(steps.into())),
            requests: Arc::default(),
        }
    }

    fn requests(&self) -> Vec<ChatRequest<'static>> {
        self.requests.lock().unwrap().clone()
    }
}

impl Model for Scripted {
    fn request_body(&self, request: &ChatRequest<'_>) -> Value {
        json!({ "messages": request.messages.len() })
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest<'_>,
        on_event: &'a mut dyn FnMut(StreamEvent<'_>),
    ) -> ChatFuture<'a> {
        self.requests.lock().unwrap().push(request.to_owned());
        let step = self
            .steps
            .lock()
            .unwrap()
            .pop_front()
            .expect("a scripted step for every request");
        Box::pin(async move {
            let pieces = match &step {
                Step::Answer(p, _) | Step::Fail(p, _) | Step::Stall(p) => p.clone(),
            };
            let mut content = String::new();
            for piece in pieces {
                task::yield_now().await;
                content.push_str(piece);
                on_event(StreamEvent::Text(piece));
            }
            match step {
                Step::Answer(_, calls) => Ok(ChatResponse {
                    content,
                    tool_calls: calls,
                    ..Default::default()
                }),
                Step::Fail(_, e) => Err(e),
                Step::Stall(_) => future::pending().await,
            }
        })
    }

    fn share(&self) -> Arc<dyn Model + Send + Sync> {
        Arc::new(self.clone())
    }
}

/// Records what the person watching would see.
#[derive(Default)]
struct Recorder {
    events: Vec<String>,
}

impl Observer for Recorder {
    fn text(&mut self, text: &str) {
        self.events.push(format!("text {text}"));
    }
    fn reasoning(&mut self, _: &str) {}
    fn tool_call_started(&mut self, _: &str) {}
    fn retry(&mut self, _: u32, _: u32, _: Duration, _: &str) {}
    fn answer_end(&mut self, response: &ChatResponse, complete: bool) {
        self.events
            .push(format!("end {complete} {:?}", response.content));
    }
    fn tool_call(&mut self, call: &ToolCall) {
        self.events.push(format!("call {}", call.function.name));
    }
    fn tool_result(&mut self, _: &ToolCall, outcome: &ToolOutcome) {
        self.events
            .push(format!("result error={}", outcome.is_error));
    }
    fn compaction(&mut self, event: &CompactionEvent<'_>) {
        self.events.push(match event {
            CompactionEvent::Started { automatic } => format!("compacting automatic={automatic}"),
            CompactionEvent::Done(done) => format!("compacted {}", done.messages),
            CompactionEvent::Failed { breaker_opened, .. } => {
                format!("compaction failed breaker={breaker_opened}")
            }
            CompactionEvent::Cancelled => "compaction cancelled".to_string(),
        });
    }
}

struct AllowAll;

impl Gate for AllowAll {
    fn check(
        &mut self,
        _: &ToolCall,
        _: &ToolRegistry,
        _: &Value,
        _: Option<Permission>,
    ) -> GateDecision {
        GateDecision::Run
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    work: PathBuf,
    session: ChatSession,
    tools: ToolRegistry,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let store = Store::open(dir.path().join("data")).unwrap();
    let mut session = ChatSession::new(store, "system prompt");
    session
        .add(Message::new(Role::User, "please help"))
        .unwrap();
    let tools = ToolRegistry::builtin(tools::test_context(&work), &[]).unwrap();
    Fixture {
        _dir: dir,
        work,
        session,
        tools,
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args.to_string())
}

async fn run(f: &mut Fixture, model: &Scripted, max_rounds: usize) -> (TurnEnd, Recorder) {
    run_interrupted(f, model, max_rounds, None).await
}

/// Runs the loop; with `interrupt_after`, the user presses Ctrl-C that long after it starts.
async fn run_interrupted(
    f: &mut Fixture,
    model: &Scripted,
    max_rounds: usize,
    interrupt_after: Option<Duration>,
) -> (TurnEnd, Recorder) {
    run_with(f, model, max_rounds, interrupt_after, None).await
}

/// Runs the loop with context management.
async fn run_with(
    f: &mut Fixture,
    model: &Scripted,
    max_rounds: usize,
    interrupt_after: Option<Duration>,
    context: Option<&Context>,
) -> (TurnEnd, Recorder) {
    let (tx, mut interrupts) = watch::channel(0u64);
    // The sender lives as long as the turn: a dropped one would read as an interrupt.
    let user = tokio::spawn(async move {
        if let Some(delay) = interrupt_after {
            time::sleep(delay).await;
            tx.send_modify(|n| *n += 1);
        }
        time::sleep(Duration::from_secs(60)).await;
        drop(tx);
    });
    let agent = Agent {
        provider: model,
        tools: &f.tools,
        model: "scripted".into(),
        max_rounds,
        context,
        allowed_tools: None,
        checkpoints: None,
        hooks: None,
        subagents: None,
        role: None,
        folder: None,
    };
    let mut recorder = Recorder::default();
    let end = agent
        .run(
            &mut f.session,
            &mut recorder,
            &mut AllowAll,
            &mut interrupts,
        )
        .await;
    user.abort();
    (end, recorder)
}

/// The stored branch as (role, content) pairs, the system prompt left out.
fn branch(f: &Fixture) -> Vec<(Role, String)> {
    let c = f.session.conversation();
    c.chain(c.cursor())
        .iter()
        .skip(1)
        .map(|m| (m.role, m.content.clone()))
        .collect()
}

fn tool_results(request: &ChatRequest<'_>) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m: &&ChatMessage| m.role == Role::Tool)
        .map(|m| m.content.to_string())
        .collect()
}

#[tokio::test]
async fn several_rounds_of_tools_then_an_answer() {
    let mut f = fixture();
    let model = Scripted::new(vec![
        Step::Answer(
            vec!["Let me look."],
            vec![
                call("a", "read_file", json!({"filepath": "notes.txt"})),
                call("b", "list_files", json!({})),
            ],
        ),
        Step::Answer(
            vec![],
            vec![call(
                "c",
                "write_file",
                json!({"filepath": "out.txt", "content": "done\n"}),
            )],
        ),
        Step::Answer(vec!["All ", "done."], vec![]),
    ]);
    let (end, rec) = run(&mut f, &model, 10).await;
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let results = tool_results(&requests[1]);
    assert!(results[0].contains("1\talpha"), "{results:?}");
    assert!(results[1].contains("notes.txt"), "{results:?}");
    assert!(tool_results(&requests[2])[2].starts_with("Created `out.txt`"));
    assert_eq!(
        fs::read_to_string(f.work.join("out.txt")).unwrap(),
        "done\n"
    );
    let roles: Vec<Role> = branch(&f).into_iter().map(|(r, _)| r).collect();
    use Role::*;
    assert_eq!(
        roles,
        [User, Assistant, Tool, Tool, Assistant, Tool, Assistant]
    );
    assert_eq!(branch(&f).last().unwrap().1, "All done.");
    assert!(rec.events.contains(&"end true \"All done.\"".to_string()));
}

#[tokio::test]
async fn a_tool_error_goes_back_to_the_model() {
    let mut f = fixture();
    let model = Scripted::new(vec![
        Step::Answer(
            vec![],
            vec![
                call("a", "read_file", json!({"filepath": "../outside.txt"})),
                call("b", "no_such_tool", json!({})),
                ToolCall::new("c", "read_file", "{not json"),
            ],
        ),
        Step::Answer(vec!["Sorry."], vec![]),
    ]);
    let (end, rec) = run(&mut f, &model, 10).await;
    assert!(matches!(end, TurnEnd::Complete));
    let results = tool_results(&model.requests()[1]);
    assert!(
        results[0].contains("outside the working folder"),
        "{results:?}"
    );
    assert!(results[1].contains("unknown tool `no_such_tool`"));
    assert!(results[2].contains("not valid JSON"));
    assert_eq!(
        rec.events
            .iter()
            .filter(|e| *e == "result error=true")
            .count(),
        3
    );
}

#[tokio::test]
async fn the_round_limit_ends_with_a_word_from_the_model_that_cannot_call_tools() {
    let mut f = fixture();
    let again = || {
        Step::Answer(
            vec![],
            vec![call("x", "read_file", json!({"filepath": "notes.txt"}))],
        )
    };
    let model = Scripted::new(vec![
        again(),
        again(),
        // The wrap-up: it even tries a tool, which is dropped.
        Step::Answer(
            vec!["I read the notes twice; ", "what is left: nothing."],
            vec![call("y", "bash", json!({"command": "ls"}))],
        ),
    ]);
    let (end, rec) = run(&mut f, &model, 2).await;
    assert!(matches!(end, TurnEnd::RoundLimit(2)), "{end:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let last = &requests[2];
    assert!(last.no_tool_calls);
    assert!(
        !last.tools.is_empty(),
        "the history's tool calls stay described"
    );
    assert!(!requests[0].no_tool_calls && !requests[1].no_tool_calls);
    assert_eq!(last.messages.last().unwrap().content, WRAP_UP_PROMPT);
    // Stored: the answer, without tool calls; the instruction is not stored.
    let stored = f.session.conversation().current();
    assert_eq!(
        stored.content,
        "I read the notes twice; what is left: nothing."
    );
    assert!(stored.extra.tool_calls.is_none());
    assert!(!branch(&f).iter().any(|(_, c)| c == WRAP_UP_PROMPT));
    assert!(
        rec.events
            .contains(&"text what is left: nothing.".to_string())
    );
}

#[tokio::test]
async fn an_interrupt_while_streaming_keeps_what_arrived() {
    let mut f = fixture();
    let model = Scripted::new(vec![Step::Stall(vec!["Half of ", "an answer"])]);
    let (end, rec) = run_interrupted(&mut f, &model, 5, Some(Duration::from_millis(50))).await;
    assert!(matches!(end, TurnEnd::Interrupted), "{end:?}");
    let stored = f.session.conversation().current();
    assert_eq!(stored.content, "Half of an answer");
    assert!(stored.interrupted);
    assert_eq!(
        rec.events.last().unwrap(),
        "end false \"Half of an answer\""
    );
}

#[tokio::test]
async fn an_interrupt_while_a_tool_runs_stops_it_and_keeps_the_branch_valid() {
    let mut f = fixture();
    let model = Scripted::new(vec![Step::Answer(
        vec![],
        vec![
            call("a", "bash", json!({"command": "sleep 30"})),
            call("b", "read_file", json!({"filepath": "notes.txt"})),
        ],
    )]);
    let started = Instant::now();
    let (end, _) = run_interrupted(&mut f, &model, 5, Some(Duration::from_millis(300))).await;
    assert!(matches!(end, TurnEnd::Interrupted), "{end:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the command was not stopped"
    );
    let contents: Vec<String> = branch(&f).into_iter().map(|(_, c)| c).collect();
    assert_eq!(contents[2], INTERRUPTED_WHILE_RUNNING);
    assert_eq!(contents[3], INTERRUPTED_RESULT);
    // The next request from here is valid: every call has its result.
    let next = f
        .session
        .conversation()
        .api_messages(f.session.conversation().cursor());
    assert_eq!(
        tool_results(&ChatRequest {
            messages: next,
            ..Default::default()
        })
        .len(),
        2
    );
}

#[tokio::test]
async fn a_failed_request_after_a_partial_answer_keeps_the_partial_answer() {
    let mut f = fixture();
    let model = Scripted::new(vec![Step::Fail(
        vec!["The answer be"],
        LlmError::StreamCut("connection reset".into()),
    )]);
    let (end, rec) = run(&mut f, &model, 5).await;
    let TurnEnd::Failed(AgentError::Llm(LlmError::StreamCut(why))) = end else {
        panic!("{end:?}")
    };
    assert_eq!(why, "connection reset");
    let stored = f.session.conversation().current();
    assert_eq!(
        (stored.content.as_str(), stored.interrupted),
        ("The answer be", true)
    );
    assert_eq!(rec.events.last().unwrap(), "end false \"The answer be\"");
    // Failing before the first word stores nothing and says nothing of an empty answer.
    let mut f = fixture();
    let model = Scripted::new(vec![Step::Fail(vec![], LlmError::Client("no".into()))]);
    let (end, rec) = run(&mut f, &model, 5).await;
    assert!(matches!(end, TurnEnd::Failed(_)));
    assert_eq!(f.session.conversation().current().role, Role::User);
    assert_eq!(rec.events, ["end false \"\""]);
}

/// Ctrl-C during a grep over a tree big enough to take a while returns within a moment, and the
/// walk itself stops (each file tool checks the flag as it goes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_stops_a_long_grep_within_a_moment() {
    let mut f = fixture();
    let big = f.work.join("big");
    let line = "lorem ipsum dolor sit amet consectetur adipiscing elit\n".repeat(400);
    for d in 0..40 {
        let dir = big.join(format!("d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for i in 0..100 {
            fs::write(dir.join(format!("f{i}.txt")), &line).unwrap();
        }
    }
    let grep = || {
        Step::Answer(
            vec![],
            vec![call(
                "g",
                "grep",
                json!({"pattern": "z[aeiou]+q$", "path": "big"}),
            )],
        )
    };
    // The whole search, to know how long it takes here.
    let model = Scripted::new(vec![grep(), Step::Answer(vec!["none"], vec![])]);
    let started = Instant::now();
    let (end, _) = run(&mut f, &model, 5).await;
    let whole = started.elapsed();
    assert!(matches!(end, TurnEnd::Complete));
    assert!(tool_results(&model.requests()[1])[0].starts_with("No matches"));
    // The same, interrupted soon after it starts.
    f.session.add(Message::new(Role::User, "again")).unwrap();
    let model = Scripted::new(vec![grep()]);
    let started = Instant::now();
    let (end, _) = run_interrupted(&mut f, &model, 5, Some(whole / 10)).await;
    let interrupted = started.elapsed();
    assert!(matches!(end, TurnEnd::Interrupted), "{end:?}");
    assert!(
        interrupted < whole / 2,
        "interrupted after {interrupted:?}; the whole search takes {whole:?}"
    );
    assert_eq!(
        f.session.conversation().current().content,
        INTERRUPTED_WHILE_RUNNING
    );
}

#[test]
fn file_walks_stop_once_cancelled() {
    use crate::tools::Cancel;
    use crate::tools::builtin::{Glob, Grep, ListFiles};
    let f = fixture();
    let workdir = f.tools.workdir().clone();
    let cancel = Cancel::default();
    cancel.set();
    let stopped = |r: Result<ToolOutput, ToolError>| {
        r.err()
            .is_some_and(|e| e.to_string() == "stopped by the user")
    };
    assert!(stopped(Grep.search(
        &json!({"pattern": "a"}),
        &workdir,
        &cancel
    )));
    assert!(stopped(Glob.find(
        &json!({"pattern": "*"}),
        &workdir,
        &cancel
    )));
    assert!(stopped(ListFiles.list(
        &json!({"recursive": true}),
        &workdir,
        &cancel
    )));
    let fresh = Cancel::default();
    assert!(
        Grep.search(&json!({"pattern": "alpha"}), &workdir, &fresh)
            .is_ok()
    );
}

/// A tool for the concurrency tests: waits at a barrier (so two of them finish only if they run
/// together), and records when it starts and ends.
struct Probe {
    name: &'static str,
    kind: ToolKind,
    barrier: Arc<Barrier>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "probe"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"tag": {"type": "string"}}})
    }
    fn kind(&self) -> ToolKind {
        self.kind
    }
    fn subject(&self, _: &Value) -> Option<String> {
        None
    }
    fn run<'a>(&'a self, args: &'a Value, _: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let tag = args["tag"].as_str().unwrap_or("?").to_string();
            self.log.lock().unwrap().push(format!("start {tag}"));
            if self.kind == ToolKind::Read {
                self.barrier.wait().await;
            } else {
                time::sleep(Duration::from_millis(20)).await;
            }
            self.log.lock().unwrap().push(format!("end {tag}"));
            Ok(ToolOutput {
                content: format!("done {tag}"),
                summary: tag,
                diff: None,
            })
        })
    }
}

#[tokio::test]
async fn reads_run_together_writes_one_at_a_time_and_results_keep_call_order() {
    let mut f = fixture();
    let barrier = Arc::new(Barrier::new(3));
    let log = Arc::new(Mutex::new(Vec::new()));
    let probe = |name, kind| -> Box<dyn Tool> {
        Box::new(Probe {
            name,
            kind,
            barrier: barrier.clone(),
            log: log.clone(),
        })
    };
    use crate::tools::ToolKind::*;
    f.tools = ToolRegistry::with_tools(
        tools::test_context(&f.work),
        vec![probe("look", Read), probe("change", Execute)],
    );
    let c = |id: &str, name: &str| call(id, name, json!({ "tag": id }));
    let model = Scripted::new(vec![
        Step::Answer(
            vec![],
            vec![
                // Three reads that can only finish together, then two writes, then a read.
                c("r1", "look"),
                c("r2", "look"),
                c("r3", "look"),
                c("w1", "change"),
                c("w2", "change"),
            ],
        ),
        Step::Answer(vec!["ok"], vec![]),
    ]);
    let (end, _) = time::timeout(Duration::from_secs(10), run(&mut f, &model, 5))
        .await
        .expect("the reads did not run together");
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    let log = log.lock().unwrap().clone();
    // The writes ran one after the other, after the reads.
    let at = |e: &str| log.iter().position(|l| l == e).unwrap();
    assert!(at("end r1") < at("start w1") && at("end r3") < at("start w1"));
    assert!(at("end w1") < at("start w2"), "{log:?}");
    // Results are stored and sent in call order.
    assert_eq!(
        tool_results(&model.requests()[1]),
        ["done r1", "done r2", "done r3", "done w1", "done w2"]
    );
}

#[tokio::test]
async fn at_most_64_calls_run_from_one_answer() {
    let mut f = fixture();
    let calls: Vec<ToolCall> = (0..100)
        .map(|i| {
            call(
                &format!("c{i}"),
                "read_file",
                json!({"filepath": "notes.txt"}),
            )
        })
        .collect();
    let model = Scripted::new(vec![
        Step::Answer(vec![], calls),
        Step::Answer(vec!["ok"], vec![]),
    ]);
    let (end, rec) = run(&mut f, &model, 5).await;
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    let results = tool_results(&model.requests()[1]);
    assert_eq!(results.len(), 100, "every call has a result");
    assert!(results[..64].iter().all(|r| r.contains("1\talpha")));
    assert!(results[64..].iter().all(|r| r == TOO_MANY_CALLS));
    assert_eq!(
        rec.events.iter().filter(|e| e.starts_with("call ")).count(),
        64
    );
}

/// A context of `window` tokens (margin and kept part a quarter of it each).
fn small_window(window: u64) -> Context {
    Context::new(
        Settings {
            window: Some(window),
            keep_recent_min_messages: 2,
            // These tests are of compaction; wrapping up a full window is tested end to end.
            safety_margin: 0,
            ..Default::default()
        },
        "scripted",
    )
}

/// Fills the branch with `turns` exchanges of about 250 tokens each, then asks.
fn long_branch(f: &mut Fixture, turns: usize) {
    for t in 0..turns {
        f.session
            .add(Message::new(
                Role::Assistant,
                format!("answer {t} {}", "a".repeat(1000)),
            ))
            .unwrap();
        f.session
            .add(Message::new(Role::User, format!("question {t}")))
            .unwrap();
    }
}

fn answer(text: &'static str) -> Step {
    Step::Answer(vec![text], vec![])
}

fn summaries(f: &Fixture) -> Vec<Message> {
    let c = f.session.conversation();
    c.chain(c.cursor())
        .into_iter()
        .filter(|m| m.is_summary())
        .cloned()
        .collect()
}

fn overflow(window: Option<u64>) -> LlmError {
    LlmError::ContextOverflow {
        url: "http://model".into(),
        message: "prompt is too long".into(),
        window,
        tokens: None,
    }
}

#[tokio::test]
async fn a_nearly_full_window_is_compacted_before_the_request_into_a_summary_node() {
    let mut f = fixture();
    long_branch(&mut f, 12);
    let asked = f.session.conversation().cursor().to_string();
    let ctx = small_window(4000);
    let model = Scripted::new(vec![answer("part one"), answer("the gist"), answer("done")]);
    let (end, rec) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    assert!(
        rec.events
            .contains(&"compacting automatic=true".to_string())
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // The summary requests: their own instructions, the transcript, no tools; the part to
    // summarise does not fit one request in this window, so it goes in two, the second
    // carrying the summary so far.
    assert!(requests[0].tools.is_empty());
    assert!(
        requests[0].messages[1]
            .content
            .contains("## User\nplease help")
    );
    assert!(
        requests[1].messages[1]
            .content
            .starts_with("# Summary so far\n\npart one")
    );
    for r in &requests[..2] {
        let tokens: u64 = r.messages.iter().map(context::estimate_message).sum();
        assert!(tokens < 4000 - 500, "{tokens}");
    }
    let requests = &requests[1..];
    // The summary node: a child of the message being answered, standing for the start.
    let s = summaries(&f);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].parent_id.as_deref(), Some(asked.as_str()));
    assert!(s[0].content.ends_with("the gist"));
    let info = s[0].extra.rare.summary.as_ref().unwrap();
    assert!(info.tokens_after < info.tokens_before, "{info:?}");
    // The answer hangs below it; the request sent the summary, then the kept part.
    assert_eq!(f.session.conversation().current().content, "done");
    let sent = &requests[1].messages;
    assert_eq!(sent[0].content, "system prompt");
    assert_eq!(sent[1].content, s[0].content);
    assert_eq!(sent.last().unwrap().content, "question 11");
    assert!(sent.len() < 10, "{}", sent.len());
    assert_eq!(
        rec.events
            .iter()
            .filter(|e| e.starts_with("compacted"))
            .count(),
        1
    );
    // Every original message is still in the tree.
    assert_eq!(f.session.conversation().len(), 1 + 1 + 24 + 1 + 1);
}

/// A summary request must fit the window it summarises for (issue 43, 18): one the server
/// refuses as too long (here in LiteLLM's words, which name the window) is sent again smaller,
/// going on from the part it failed at (the part already summarised is not asked again), and
/// the compaction succeeds: automatic compaction stays on.
#[tokio::test]
async fn a_summary_request_refused_as_too_long_is_sent_again_smaller() {
    let mut f = fixture();
    long_branch(&mut f, 12);
    let ctx = small_window(4000);
    let litellm = "litellm.ContextWindowExceededError: litellm.BadRequestError: OpenAIException - Error code: 400 - {'error': {'code': 400, 'message': 'the request exceeds the available context size, try increasing it', 'type': 'exceed_context_size_error', 'n_prompt_tokens': 4410, 'n_ctx': 4000}}";
    let refused = LlmError::ContextOverflow {
        url: "http://litellm".into(),
        message: litellm.into(),
        window: overflow::window_named_in(litellm),
        tokens: None,
    };
    let model = Scripted::new(vec![
        Step::Fail(vec![], refused),
        answer("part one"),
        answer("the gist"),
        answer("done"),
    ]);
    let (end, rec) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{:?}", rec.events);
    let size =
        |r: &ChatRequest<'_>| -> u64 { r.messages.iter().map(context::estimate_message).sum() };
    // The refused first part, then the same place asked again in less, then the rest with the
    // summary so far.
    for r in &requests[..2] {
        assert!(
            r.messages[1]
                .content
                .starts_with("# The conversation\n\n## User\nplease help")
        );
    }
    assert!(
        size(&requests[1]) < size(&requests[0]) * 3 / 4,
        "{} vs {}",
        size(&requests[1]),
        size(&requests[0])
    );
    assert!(
        requests[2].messages[1]
            .content
            .starts_with("# Summary so far\n\npart one")
    );
    assert!(
        !requests[2].messages[1]
            .content
            .contains("## User\nplease help")
    );
    // The answer's room is asked for, so that a server counting it does not refuse either.
    assert!(requests[2].max_tokens.is_some_and(|n| n < 4000 / 4));
    let s = summaries(&f);
    assert_eq!(s.len(), 1);
    assert!(s[0].content.ends_with("the gist"));
    assert_eq!(f.session.conversation().current().content, "done");
    assert!(!ctx.breaker_open());
    assert_eq!(ctx.window(), (4000, WindowSource::Error));
    assert!(
        !rec.events
            .iter()
            .any(|e| e.starts_with("compaction failed")),
        "{:?}",
        rec.events
    );
}

#[tokio::test]
async fn an_overflow_error_compacts_once_and_retries_once_believing_the_named_window() {
    let mut f = fixture();
    long_branch(&mut f, 12);
    let ctx = small_window(1_000_000);
    let model = Scripted::new(vec![
        Step::Fail(vec![], overflow(Some(8000))),
        answer("the gist"),
        answer("done"),
    ]);
    let (end, _) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    assert_eq!(ctx.window(), (8000, WindowSource::Error));
    assert_eq!(model.requests().len(), 3);
    assert_eq!(summaries(&f).len(), 1);

    // A second overflow after the compaction is the turn's error: no loop.
    let mut f = fixture();
    long_branch(&mut f, 12);
    let ctx = small_window(1_000_000);
    let model = Scripted::new(vec![
        Step::Fail(vec![], overflow(Some(8000))),
        answer("the gist"),
        Step::Fail(vec![], overflow(None)),
    ]);
    let (end, _) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
    assert!(
        matches!(
            end,
            TurnEnd::Failed(AgentError::Llm(LlmError::ContextOverflow { .. }))
        ),
        "{end:?}"
    );
    assert_eq!(model.requests().len(), 3);
    assert_eq!(summaries(&f).len(), 1);

    // Without a figure in the error, the window is taken as smaller than what was sent.
    let mut f = fixture();
    long_branch(&mut f, 12);
    let ctx = small_window(1_000_000);
    let model = Scripted::new(vec![
        Step::Fail(vec![], overflow(None)),
        Step::Fail(vec![], LlmError::StreamCut("gone".into())),
    ]);
    let (end, _) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
    assert!(
        matches!(
            end,
            TurnEnd::Failed(AgentError::Llm(LlmError::ContextOverflow { .. }))
        ),
        "the original error is reported when the compaction fails: {end:?}"
    );
    let sent = context::estimate_request(&model.requests()[0].messages, &model.requests()[0].tools);
    assert!(ctx.window().0 < sent, "{:?} vs {sent}", ctx.window());
    assert!(summaries(&f).is_empty());
}

#[tokio::test]
async fn a_failed_summary_writes_nothing_and_three_in_a_row_open_the_breaker() {
    let mut f = fixture();
    long_branch(&mut f, 12);
    let ctx = small_window(4000);
    let failure = || Step::Fail(vec![], LlmError::StreamCut("gone".into()));
    let model = Scripted::new(vec![
        failure(),
        answer("one"),
        failure(),
        answer("two"),
        Step::Answer(vec![], vec![]),
        answer("three"),
        answer("four"),
    ]);
    let before = f.session.conversation().len();
    for turn in 0..4 {
        if turn > 0 {
            f.session
                .add(Message::new(Role::User, format!("more {turn}")))
                .unwrap();
        }
        let (end, rec) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
        assert!(matches!(end, TurnEnd::Complete), "{end:?}");
        let failed: Vec<&String> = rec
            .events
            .iter()
            .filter(|e| e.starts_with("compaction failed"))
            .collect();
        match turn {
            // Two failed requests, then an empty summary: the third opens the breaker.
            0 | 1 => assert_eq!(failed, vec!["compaction failed breaker=false"]),
            2 => assert_eq!(failed, vec!["compaction failed breaker=true"]),
            // Then no more tries.
            _ => assert!(rec.events.iter().all(|e| !e.starts_with("compacting"))),
        }
    }
    assert!(ctx.breaker_open());
    assert!(summaries(&f).is_empty());
    // Three turns' user messages and four answers were added; nothing else.
    assert_eq!(f.session.conversation().len(), before + 3 + 4);
    assert_eq!(model.requests().len(), 7);
}

#[tokio::test]
async fn ctrl_c_during_a_compaction_cancels_it_and_writes_nothing() {
    let mut f = fixture();
    long_branch(&mut f, 12);
    let before = f.session.conversation().len();
    let ctx = small_window(4000);
    let model = Scripted::new(vec![Step::Stall(vec!["half a summ"])]);
    let (end, rec) = run_with(
        &mut f,
        &model,
        5,
        Some(Duration::from_millis(100)),
        Some(&ctx),
    )
    .await;
    // The gate (as a piped session's) does not go on uncompacted: the turn stops.
    assert!(matches!(end, TurnEnd::Interrupted), "{end:?}");
    assert!(rec.events.contains(&"compaction cancelled".to_string()));
    assert_eq!(f.session.conversation().len(), before);
    assert!(!ctx.breaker_open());
}

#[tokio::test]
async fn a_summary_no_smaller_than_what_it_replaces_is_not_written() {
    let mut f = fixture();
    let before = f.session.conversation().len();
    let ctx = small_window(1024);
    let rambling: &'static str = Box::leak("very long summary ".repeat(400).into_boxed_str());
    let model = Scripted::new(vec![answer(rambling), answer("done")]);
    // Asked for (`/compact`): the request goes out, and its answer is refused.
    let agent = Agent {
        provider: &model,
        tools: &f.tools,
        model: "scripted".into(),
        max_rounds: 5,
        context: Some(&ctx),
        allowed_tools: None,
        checkpoints: None,
        hooks: None,
        subagents: None,
        role: None,
        folder: None,
    };
    let (_tx, mut interrupts) = watch::channel(0u64);
    let mut rec = Recorder::default();
    let result = agent
        .compact(&mut f.session, &mut rec, &mut interrupts, None, false)
        .await;
    assert!(
        matches!(result, Err(CompactError::NoSmaller { .. })),
        "{result:?}"
    );
    assert_eq!(
        rec.events,
        [
            "compacting automatic=false",
            "compaction failed breaker=false"
        ]
    );
    assert_eq!(f.session.conversation().len(), before);
    // Automatic, on a branch this short: a summary could not shrink it, so none is asked for.
    let (end, rec) = run_with(&mut f, &model, 5, None, Some(&ctx)).await;
    assert!(matches!(end, TurnEnd::Complete), "{end:?}");
    assert!(
        rec.events.iter().all(|e| !e.contains("compact")),
        "{:?}",
        rec.events
    );
    assert_eq!(model.requests().len(), 2);
    assert!(!ctx.breaker_open());
}
