//! The performance suite: every figure is a ratio measured in one run, next to what a user would
//! otherwise pick or to the physical limit, because machines here are noisy.
//!
//! `cargo bench --bench suite` generates its own data and runs a scripted OpenAI-compatible server on
//! loopback that answers instantly. `NEW_BENCH_SCALE=small` (what `.ci/run` uses) shrinks the data so
//! that the suite only proves it still works. `NEW_BENCH_LLM=0` skips Simon Willison's `llm`, which is
//! installed from PyPI into a cached virtual environment on first use. `NEW_BENCH_AGENTS=1` adds the
//! table against the other agents (Claude Code, Codex, pi, OpenCode: see `suite/agents.rs`), off
//! by default and in `.ci/run`.
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]

use std::io::Read;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::routing;
use new_cli::markdown::Layout;
use new_cli::markdown::Renderer;
use new_cli::output::tail_due;
use new_cli::sandbox_view;
use new_cli::tree_view::push_tree;
use new_cli::web::view::export_page;
use new_core::checkpoint;
use new_core::checkpoint::CheckpointSettings;
use new_core::checkpoint::CheckpointStore;
use new_core::config::Lang;
use new_core::context;
use new_core::context::Context;
use new_core::conversation::Conversation;
use new_core::conversation::{ChatSession, Message, Store, sample};
use new_core::escape;
use new_core::fs::confine::Workdir;
use new_core::layers;
use new_core::layers::Origin;
use new_core::llm::ProviderKind;
use new_core::llm::ProviderSettings;
use new_core::llm::Role;
use new_core::llm::anthropic;
use new_core::llm::body::Reuse;
use new_core::llm::body::Ticket;
use new_core::llm::openai;
use new_core::llm::sse::SseDecoder;
use new_core::mcp::Manager;
use new_core::mcp::McpSettings;
use new_core::mcp::ServerConfig;
use new_core::mcp::Transport;
use new_core::tools::ToolContext;
use new_core::tools::ToolRegistry;
use new_core::vocab::ToolCall;
use new_sys::os_sandbox::OsSandbox;
use std::collections::BTreeSet;
use std::env;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::fs;
use std::fs::File;
use std::fs::OpenOptions;
use std::io::BufReader;
use std::iter;
#[cfg(not(windows))]
use std::mem;
use std::net::TcpListener as StdListener;
use std::net::TcpStream;
use std::process;
#[cfg(not(windows))]
use std::process::Child;
#[cfg(not(windows))]
use std::ptr;
use std::sync::Arc;
use std::sync::Mutex;
use std::thread;
use tokio::net::TcpListener;
use tokio::runtime::Builder;
use tokio::runtime::Runtime;
use tokio::time;

#[cfg(target_os = "linux")]
#[path = "suite/agents.rs"]
mod agents;

struct Scale {
    conversations: usize,
    messages: usize,
    big: usize,
    runs: usize,
}

fn scale() -> Scale {
    if env::var("NEW_BENCH_SCALE").as_deref() == Ok("small") {
        Scale {
            conversations: 1_000,
            messages: 20,
            big: 20_000,
            runs: 5,
        }
    } else {
        Scale {
            conversations: 10_000,
            messages: 50,
            big: 100_000,
            runs: 15,
        }
    }
}

struct Row {
    what: String,
    measured: String,
    baseline: String,
    ratio: f64,
    target: String,
    ok: bool,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The fastest of several runs: on a noisy machine, the run least disturbed by others.
fn fastest(v: Vec<Duration>) -> Duration {
    v.into_iter().min().expect("at least one run")
}

/// Wall time and peak memory (KB) of a child process, fed `stdin`.
fn run(cmd: &mut Command, stdin: &[u8]) -> (Duration, u64) {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let (ok, peak_kb) = wait_measured(child);
    let elapsed = start.elapsed();
    assert!(ok, "{cmd:?} failed");
    (elapsed, peak_kb)
}

/// Waits for the child: whether it succeeded, and its peak memory in KB (from `wait4`).
#[cfg(unix)]
fn wait_measured(child: Child) -> (bool, u64) {
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: rusage is plain data filled by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4");
    mem::forget(child); // already reaped
    (
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        usage.ru_maxrss as u64,
    )
}

/// Waits for the child; Windows has no `wait4`, so its peak memory is not measured (0).
#[cfg(not(unix))]
fn wait_measured(mut child: std::process::Child) -> (bool, u64) {
    (child.wait().is_ok_and(|s| s.success()), 0)
}

/// A terminal to write to: a pseudo-terminal whose other side is read as fast as it is written.
#[cfg(unix)]
fn terminal_sink() -> File {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors we then own.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            ptr::null_mut(),
            // Mutable pointers: macOS declares them so (Linux takes them as const).
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    use std::os::fd::FromRawFd;
    // SAFETY: both descriptors come from openpty above and are used only through these.
    let (mut master, terminal) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    thread::spawn(move || {
        use std::io::Read;
        let mut buf = vec![0u8; 1 << 16];
        while matches!(master.read(&mut buf), Ok(n) if n > 0) {}
    });
    terminal
}

/// A terminal to write to: the console's screen buffer.
#[cfg(not(unix))]
fn terminal_sink() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("CONOUT$")
        .expect("a console")
}

/// Wall time and peak resident memory (KB, the process's own `VmHWM`) of an interactive session
/// fed `stdin`, read once `done` says the session has done its work and before its input ends.
/// (`ru_maxrss` would not do: it keeps the peak of the forked copy of this process.)
fn session_peak(cmd: &mut Command, stdin: &[u8], done: impl Fn() -> bool) -> (Duration, u64) {
    let (took, peak, _) = session_peak_split(cmd, stdin, done);
    (took, peak)
}

/// [`session_peak`], and of that peak the pages of files (the binary's code, the libraries),
/// as resident at the end: mapped pages of files stay mapped, so the rest is the peak of what
/// the process allocated. How many file pages a run maps varies with how the page cache holds
/// the binary (large folios after a fresh build), by more than a long session grows.
fn session_peak_split(
    cmd: &mut Command,
    stdin: &[u8],
    done: impl Fn() -> bool,
) -> (Duration, u64, u64) {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    let status = format!("/proc/{}/status", child.id());
    let field = |text: &str, name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    while !done() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the session ended early"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let elapsed = start.elapsed();
    let text = fs::read_to_string(&status).unwrap_or_default();
    let (peak, files) = (field(&text, "VmHWM:"), field(&text, "RssFile:"));
    drop(input);
    assert!(child.wait().unwrap().success(), "{cmd:?} failed");
    (elapsed, peak, files)
}

/// Wall time and peak memory (KB) of a child process, fed `stdin`, measured by a copy of this
/// program started for it: the kernel counts in a child's peak the memory of the process that
/// started it, up to its `exec` (this one holds the suite's data; that copy holds nothing). The
/// command's environment must be set in full (`env_clear`, as `env` in `main` does).
fn run_measured(cmd: &Command, stdin: &[u8]) -> (Duration, u64) {
    let mut wrapper = Command::new(env::current_exe().expect("the suite's own path"));
    wrapper
        .arg(MEASURE)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            wrapper.env(key, value);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapper.current_dir(dir);
    }
    let start = Instant::now();
    let mut child = wrapper
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().expect("the measuring copy");
    let elapsed = start.elapsed();
    assert!(out.status.success(), "{cmd:?} failed");
    let peak = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a peak in KB");
    (elapsed, peak)
}

/// The argument that makes this program the measuring copy of [`run_measured`].
const MEASURE: &str = "--measure-child";

/// The measuring copy: runs the command given after [`MEASURE`] with this process's input and
/// environment, and prints its peak resident memory in KB.
fn measure_child(program: &OsStr, args: &[OsString]) -> ! {
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let (ok, peak) = wait_measured(child);
    println!("{peak}");
    process::exit(if ok { 0 } else { 1 });
}

/// Every conversation file in a DATADIR, one after the other (to count what sessions stored).
fn conversations_text(data: &Path) -> String {
    fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect()
}

/// The fastest of `runs` runs of each of two commands, run by turns (a, b, a, b, …) so that both
/// meet the machine as it is: a ratio of two start-ups is not the drift between two blocks of runs.
fn fastest_by_turns(
    runs: usize,
    mut a: impl FnMut() -> (Duration, u64),
    mut b: impl FnMut() -> (Duration, u64),
) -> (Duration, Duration) {
    // Warm the page cache.
    a();
    b();
    let (mut fa, mut fb) = (Duration::MAX, Duration::MAX);
    for _ in 0..runs {
        fa = fa.min(a().0);
        fb = fb.min(b().0);
    }
    (fa, fb)
}

/// One prompt through `new acp` over its stdin and stdout, from start to exit.
fn acp_prompt(cmd: &mut Command, cwd: &Path, prompt: &str) -> (Duration, u64) {
    use std::io::BufRead;
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut call = |id: u64, method: &str, params: serde_json::Value| {
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("an answer").unwrap();
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id && message.get("method").is_none() {
                assert!(message.get("error").is_none(), "{message}");
                return message["result"].clone();
            }
        }
    };
    call(1, "initialize", serde_json::json!({"protocolVersion": 1}));
    let session = call(
        2,
        "session/new",
        serde_json::json!({"cwd": cwd, "mcpServers": []}),
    );
    let answer = call(
        3,
        "session/prompt",
        serde_json::json!({"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": prompt}]}),
    );
    assert_eq!(answer["stopReason"], "end_turn");
    drop(stdin);
    let (ok, peak_kb) = wait_measured(child);
    assert!(ok, "new acp failed");
    (start.elapsed(), peak_kb)
}

fn times(runs: usize, mut f: impl FnMut() -> (Duration, u64)) -> (Duration, u64) {
    f(); // warm the page cache
    let results: Vec<(Duration, u64)> = (0..runs).map(|_| f()).collect();
    let peak = results.iter().map(|r| r.1).max().unwrap_or(0);
    (fastest(results.into_iter().map(|r| r.0).collect()), peak)
}

fn generate_many(dir: &Path, conversations: usize, messages: usize) {
    let store = Store::open(dir).unwrap();
    for c in 0..conversations {
        let (conv, records) = sample::linear(&format!("{c:08x}"), messages);
        store.create(&conv, &records).unwrap();
    }
}

fn generate_bushy(store: &Store, id: &str, n: usize) {
    let (conv, records) = sample::bushy(id, n);
    let _ = fs::remove_file(store.path(id));
    store.create(&conv, &records).unwrap();
}

fn generate_big(store: &Store, id: &str, n: usize) {
    let (conv, records) = sample::branching(id, n);
    let _ = fs::remove_file(store.path(id));
    store.create(&conv, &records).unwrap();
}

/// Load a conversation and draw `/tree` into a file, as the REPL does. The clock stops when the
/// file is written: freeing the tree afterwards is not part of what the user waits for.
fn load_and_draw(store: &Store, id: &str, out: &Path) -> Duration {
    let start = Instant::now();
    let (conv, _) = store.load(id, "system prompt").unwrap();
    let loaded = start.elapsed();
    let mut text = String::new();
    push_tree(&mut text, &conv, false, Lang::En, &|_, line| {
        line.to_string()
    });
    fs::write(out, text).unwrap();
    let elapsed = start.elapsed();
    if env::var_os("NEW_BENCH_PHASES").is_some() {
        eprintln!(
            "{id}: load {loaded:?}, draw and write {:?}",
            elapsed - loaded
        );
    }
    drop(conv);
    elapsed
}

/// The floor: read the file and parse each line into a `serde_json::Value`, nothing more.
fn parse_values(path: &Path) -> Duration {
    let start = Instant::now();
    let text = fs::read_to_string(path).unwrap();
    let mut n = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        n += usize::from(v.is_object());
    }
    assert!(n > 0);
    start.elapsed()
}

fn best(f: impl Fn() -> Duration, runs: usize) -> Duration {
    fastest((0..runs.max(5)).map(|_| f()).collect())
}

/// Serves `app` on loopback from a runtime of its own; its base URL (`…/v1`) and the runtime.
fn serve(app: axum::Router) -> (String, Runtime) {
    let runtime = Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), runtime)
}

/// Lets the tool list a server changed be listed again.
async fn runtime_settle(manager: &Arc<Manager>) {
    time::sleep(Duration::from_millis(100)).await;
    manager.settle().await;
}

/// The scripted server: answers every chat request at once with a short streamed text.
fn start_server() -> (String, Runtime) {
    use axum::Router;
    use axum::body::Body;
    use axum::response::Response;
    let sse = [
        r#"{"id":"b","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}"#,
        r#"{"id":"b","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"content":" there."},"finish_reason":null}]}"#,
        r#"{"id":"b","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ]
    .iter()
    .map(|c| format!("data: {c}\n\n"))
    .collect::<String>()
        + "data: [DONE]\n\n";
    let app = Router::new().route(
        "/v1/chat/completions",
        routing::post(move || {
            let sse = sse.clone();
            async move {
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(sse))
                    .unwrap()
            }
        }),
    );
    serve(app)
}

/// The scripted server of [`start_server`], keeping the body of every request it gets.
fn start_recording_server() -> (String, Runtime, Arc<Mutex<Vec<String>>>) {
    use axum::Router;
    use axum::body::Body;
    use axum::response::Response;
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    let sse = concat!(
        r#"data: {"id":"b","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello."},"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"id":"b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "\n\ndata: [DONE]\n\n"
    );
    let app = Router::new().route(
        "/v1/chat/completions",
        routing::post(move |body: String| {
            kept.lock().unwrap().push(body);
            async move {
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(sse))
                    .unwrap()
            }
        }),
    );
    let (url, runtime) = serve(app);
    (url, runtime, bodies)
}

/// The budget of the system prompt and tool definitions of a one-shot "hi" in an empty folder, in
/// bytes; `tests/it/cost.rs` fails past it. Issue 45 asked for 6,000; this is what pi sent on
/// 2026-12-06 (4 tools to our 10), the cheapest of the other agents measured here.
const REQUEST_BUDGET: usize = 5_339;
/// The same figure before issue 45 (2,602 B of system prompt, 7,300 B of tool definitions, as
/// built from the commit before it on 2026-12-05): where growth is seen from.
const REQUEST_BEFORE: usize = 9_902;
/// The largest release binary wanted, in bytes.
const BINARY_BUDGET: u64 = 30 * 1024 * 1024;

/// Tokens as bytes ÷ 4: an estimate, not a tokenizer's count (OpenAI's o200k would need its
/// vocabulary in the suite; English prose and JSON run about 4 to 4.5 bytes a token there).
fn estimated_tokens(bytes: usize) -> usize {
    bytes.div_ceil(4)
}

fn cost_rows(
    bin: &str,
    s: &Scale,
    root: &Path,
    env: &dyn Fn(&mut Command, &str),
    rows: &mut Vec<Row>,
) {
    let (url, _server, bodies) = start_recording_server();
    let (empty, data) = (root.join("empty"), root.join("data"));
    fs::create_dir_all(&empty).unwrap();
    let one_shot = |dir: &Path| {
        let mut cmd = Command::new(bin);
        env(&mut cmd, &url);
        cmd.arg(dir)
            .arg("default")
            .arg(&data)
            .args(["--model", "bench", "-p", "hi"]);
        run(&mut cmd, b"")
    };
    one_shot(&empty);
    let first: serde_json::Value = serde_json::from_str(&bodies.lock().unwrap()[0]).unwrap();
    let system = first["messages"][0]["content"].as_str().unwrap_or("").len();
    let tools = first["tools"].to_string().len();
    let bytes = system + tools;
    rows.push(Row {
        what: "system prompt + tool definitions of a one-shot \"hi\", empty folder (tokens: bytes ÷ 4, an estimate)".into(),
        measured: format!(
            "{bytes} B ({system} + {tools}), ≈ {} tokens",
            estimated_tokens(bytes)
        ),
        baseline: format!(
            "before issue 45: {REQUEST_BEFORE} B, ≈ {} tokens",
            estimated_tokens(REQUEST_BEFORE)
        ),
        ratio: bytes as f64 / REQUEST_BEFORE as f64,
        target: format!("≤ {REQUEST_BUDGET} B"),
        ok: bytes <= REQUEST_BUDGET,
    });
    // A git repository of a few hundred files with a change, against the same files without git.
    let (plain, repo) = (root.join("plain"), root.join("repo"));
    for dir in [&plain, &repo] {
        for i in 0..300 {
            let sub = dir.join(format!("src/m{}", i % 20));
            fs::create_dir_all(&sub).unwrap();
            fs::write(sub.join(format!("f{i}.rs")), format!("fn f{i}() {{}}\n")).unwrap();
        }
    }
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@x")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@x")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?} failed");
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "one"]);
    fs::write(repo.join("src/m1/f1.rs"), "fn changed() {}\n").unwrap();
    let (in_repo, in_plain) = fastest_by_turns(s.runs, || one_shot(&repo), || one_shot(&plain));
    let ratio = in_repo.as_secs_f64() / in_plain.as_secs_f64();
    rows.push(Row {
        what: "one-shot `new -p` in a git repository of 300 files with a change".into(),
        measured: ms(in_repo),
        baseline: format!("the same files, no git {}", ms(in_plain)),
        ratio,
        target: "≤ 1.15×".into(),
        ok: ratio <= 1.15,
    });
    let size = fs::metadata(bin).unwrap().len();
    let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
    rows.push(Row {
        what: "the binary as built (`strip = \"debuginfo\"`: symbols kept for backtraces; fat LTO)"
            .into(),
        measured: format!("{:.1} MB", mb(size)),
        baseline: format!("{:.0} MB", mb(BINARY_BUDGET)),
        ratio: size as f64 / BINARY_BUDGET as f64,
        target: "≤ 1 (30 MB)".into(),
        ok: size <= BINARY_BUDGET,
    });
}

/// A scripted server for agent turns: a user message is answered with a call of `tool` with
/// `arguments` (JSON text), its result with a short text, and a summary request with a short
/// summary.
fn start_tool_server(tool: &'static str, arguments: &'static str) -> (String, Runtime) {
    start_batch_server(tool, arguments, 1)
}

/// [`start_tool_server`] whose every tool turn asks for `per_turn` calls at once.
fn start_batch_server(
    tool: &'static str,
    arguments: &'static str,
    per_turn: usize,
) -> (String, Runtime) {
    use axum::Router;
    use axum::body::Body;
    use axum::response::Response;
    use std::sync::atomic::{AtomicU64, Ordering};
    let calls = Arc::new(AtomicU64::new(0));
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let c = serde_json::json!({"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
        format!("data: {c}\n\n")
    };
    let app = Router::new().route(
        "/v1/chat/completions",
        routing::post(move |body: String| {
            let calls = calls.clone();
            async move {
                let request: serde_json::Value = serde_json::from_str(&body).unwrap();
                let messages = request["messages"].as_array().unwrap();
                let system = messages[0]["content"].as_str().unwrap_or("");
                let summary = system.starts_with("You summarise");
                let review = system.starts_with("You maintain the memory");
                let last = messages.last().unwrap()["role"].as_str().unwrap_or("");
                let sse = if summary || review || last == "tool" {
                    let text = if summary {
                        "The user asked for big.txt again and again; it was read each time."
                    } else if review {
                        "{\"changes\": []}"
                    } else {
                        "Read it."
                    };
                    chunk(serde_json::json!({"role":"assistant","content":text}), None)
                        + &chunk(serde_json::json!({}), Some("stop"))
                } else {
                    let n = calls.fetch_add(1, Ordering::SeqCst);
                    let batch: Vec<serde_json::Value> = (0..per_turn)
                        .map(|i| serde_json::json!({"index":i,"id":format!("call{n}-{i}"),"type":"function","function":{"name":tool,"arguments":arguments}}))
                        .collect();
                    chunk(
                        serde_json::json!({"role":"assistant","tool_calls":batch}),
                        None,
                    ) + &chunk(serde_json::json!({}), Some("tool_calls"))
                };
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(sse + "data: [DONE]\n\n"))
                    .unwrap()
            }
        }),
    );
    serve(app)
}

/// A linear branch of `n` messages as compaction leaves it: a summary node 40 messages above the
/// tip, standing for everything up to ten messages above itself.
fn compacted_branch(n: usize) -> Conversation {
    use new_core::conversation::message::SummaryInfo;
    let mut c = Conversation::new("bench", "system prompt");
    let mut ids: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        if i == n - 40 {
            let replaces = ids[ids.len() - 10].clone();
            let mut summary = Message::new(Role::User, "summary ".repeat(400));
            summary.extra.rare.summary = Some(Box::new(SummaryInfo {
                replaces,
                messages: (n - 50) as u64,
                tokens_before: 0,
                tokens_after: 0,
                focus: None,
            }));
            c.add(summary).unwrap();
        }
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        ids.push(
            c.add(Message::new(
                role,
                format!("message {i} {}", "w".repeat(300)),
            ))
            .unwrap(),
        );
    }
    c
}

/// Simon Willison's `llm` in a cached virtual environment, if it can be installed.
fn llm_cli() -> Option<PathBuf> {
    if env::var("NEW_BENCH_LLM").as_deref() == Ok("0") {
        return None;
    }
    let cache = dirs::cache_dir()?.join("new-bench");
    let venv = cache.join("llm-venv");
    let bin = venv.join("bin/llm");
    if !bin.exists() {
        fs::create_dir_all(&cache).ok()?;
        eprintln!(
            "installing llm from PyPI into {} (first run only)",
            venv.display()
        );
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .ok()?
            .success()
            && Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "llm"])
                .status()
                .ok()?
                .success();
        if !ok {
            return None;
        }
    }
    Some(bin)
}

/// A source tree for the search rows: `files` files of source-like text (about 15 KB each, a
/// third of them `.rs`), a `.gitignore`d `target/` beside them, and the word `needle_hit` twice in
/// each of 50 files.
fn generate_corpus(root: &Path, files: usize) {
    let words = [
        "let", "fn", "match", "self", "value", "return", "struct", "impl", "for", "in", "if",
        "else", "Some", "None", "Ok", "Err", "config", "path", "buffer", "len", "index", "iter",
        "map", "collect", "String", "Vec", "usize", "mut", "pub", "use", "crate", "error",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let exts = ["rs", "py", "ts", "md", "rs", "txt", "go", "rs", "c"];
    let needles: BTreeSet<usize> = (0..50).map(|i| i * (files / 50)).collect();
    let mut write = |rel: String, lines: usize, needle: bool| {
        let lines = lines + (next() % 240) as usize;
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut text = String::with_capacity(lines * 48);
        for line in 0..lines {
            let indent = (next() % 4) as usize * 4;
            text.extend(iter::repeat_n(' ', indent));
            for _ in 0..(3 + next() % 7) {
                text.push_str(words[(next() % words.len() as u64) as usize]);
                text.push(' ');
            }
            if needle && (line == lines / 3 || line == 2 * lines / 3) {
                text.push_str("needle_hit");
            }
            text.push_str(";\n");
        }
        fs::write(path, text).unwrap();
    };
    for i in 0..files {
        let rel = format!(
            "src/d{:02}/m{:02}/f{i}.{}",
            i % 40,
            (i / 40) % 25,
            exts[i % exts.len()]
        );
        write(rel, 200, needles.contains(&i));
    }
    for i in 0..files / 20 {
        write(format!("target/debug/g{i}.rs"), 100, i % 7 == 0);
    }
    fs::write(root.join(".gitignore"), "target/\n").unwrap();
}

/// Times `ours` and `rg args…` (piped into `head -n N` when `head` is given) alternately, `runs` pairs after one warm-up of each: the median of
/// each, and the median of the pair ratios (ours / rg).
fn against_rg(
    runs: usize,
    root: &Path,
    args: &[&str],
    head: Option<usize>,
    ours: &mut dyn FnMut(),
) -> (Duration, Duration, f64) {
    let rg = || {
        let start = Instant::now();
        // `head` ends the pipe (and so rg) once it has its lines, as a person's `rg | head` does.
        let mut cmd = match head {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("rg \"$@\" | head -n {n}"))
                    .arg("sh")
                    .args(args);
                c
            }
            None => {
                let mut c = Command::new("rg");
                c.args(args);
                c
            }
        };
        let status = cmd
            .current_dir(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("rg");
        // 1 is "nothing found".
        assert!(
            matches!(status.code(), Some(0 | 1)),
            "rg {args:?}: {status}"
        );
        start.elapsed()
    };
    let timed = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    timed(ours);
    rg();
    let (mut a, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let (x, y) = (timed(ours), rg());
        ratios.push(x.as_secs_f64() / y.as_secs_f64());
        a.push(x);
        b.push(y);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    ratios.sort_by(f64::total_cmp);
    (median(&mut a), median(&mut b), ratios[ratios.len() / 2])
}

fn search_rows(s: &Scale, root: &Path, rows: &mut Vec<Row>) {
    use new_core::fs::confine::Workdir;
    use new_core::tools::Cancel;
    use new_core::tools::builtin::{GREP_MAX_MATCHES, Glob, Grep};
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("search rows skipped: ripgrep (`rg`) is not installed");
        rows.push(Row {
            what: "grep and glob tools against ripgrep: skipped, `rg` is not installed".into(),
            measured: "-".into(),
            baseline: "-".into(),
            ratio: f64::NAN,
            target: "-".into(),
            ok: true,
        });
        return;
    }
    let full = s.big >= 100_000;
    let files = if full { 20_000 } else { 300 };
    generate_corpus(root, files);
    let workdir = Workdir::new(root).unwrap();
    let cancel = Cancel::default();
    let size: u64 = ignore::WalkBuilder::new(root)
        .hidden(false)
        .build()
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let corpus = format!("{:.0} MB / {files} files", size as f64 / 1e6);
    // Both sides see the same files: hidden ones too, and .gitignore outside a git repository.
    let rg_common = ["--hidden", "--no-require-git"];
    let runs = s.runs.max(5);
    struct Case {
        what: &'static str,
        args: serde_json::Value,
        rg: &'static [&'static str],
        expect: &'static str,
        target: f64,
        shown: &'static str,
        /// The tool stops at its cap of lines: rg's output is cut by `head` as a person would.
        head: Option<usize>,
    }
    let cases = [
        Case {
            what: "grep tool, no match",
            args: serde_json::json!({"pattern": "zq_no_such_word"}),
            rg: &["zq_no_such_word"],
            expect: "No matches",
            target: 1.1,
            shown: "rg",
            head: None,
        },
        Case {
            what: "grep tool, 100 matches in 50 files",
            args: serde_json::json!({"pattern": "needle_hit"}),
            rg: &["-n", "needle_hit"],
            expect: "needle_hit",
            target: 1.1,
            shown: "rg -n",
            head: None,
        },
        Case {
            what: "grep tool, a common word, capped at 200 lines",
            args: serde_json::json!({"pattern": "config"}),
            rg: &["-n", "config"],
            expect: "[stopped at 200 matching lines",
            target: 1.1,
            shown: "rg -n config",
            head: Some(GREP_MAX_MATCHES),
        },
        Case {
            what: "glob tool `*.rs`, newest 200",
            args: serde_json::json!({"pattern": "*.rs"}),
            rg: &["--files", "-g", "*.rs"],
            expect: ".rs\n",
            target: 1.2,
            shown: "rg --files -g '*.rs'",
            head: None,
        },
    ];
    for Case {
        what,
        args,
        rg: rg_args,
        expect,
        target,
        shown,
        head,
    } in cases
    {
        let glob = what.starts_with("glob");
        let mut ours = || {
            let out = if glob {
                Glob.find(&args, &workdir, &cancel)
            } else {
                Grep.search(&args, &workdir, &cancel)
            }
            .unwrap();
            assert!(out.content.contains(expect), "{}", out.content);
        };
        for single in [false, true] {
            let mut all: Vec<&str> = rg_common.to_vec();
            if single {
                all.push("-j1");
            }
            all.extend(rg_args);
            let (a, b, ratio) = against_rg(runs, root, &all, head, &mut ours);
            let limit = if single { 1.0 } else { target };
            let piped = head.map_or(String::new(), |n| format!(" | head -n {n}"));
            rows.push(Row {
                what: format!("{what}, {corpus}"),
                measured: ms(a),
                baseline: format!(
                    "`{shown}{}{piped}` {}",
                    if single { " -j1" } else { "" },
                    ms(b)
                ),
                ratio,
                target: format!("≤ {limit:.1}×"),
                ok: ratio <= limit,
            });
        }
    }
}

/// `NEW_BENCH_ONLY=oneshot|list|tree|bushy|sse|store|search|…` (a name given to `wanted` below)
/// runs one part (for profiling).
fn wanted(part: &str) -> bool {
    env::var("NEW_BENCH_ONLY").map_or(true, |only| only == part)
}

fn main() {
    let args: Vec<OsString> = env::args_os().collect();
    if args.get(1).is_some_and(|a| a == MEASURE) {
        measure_child(&args[2], &args[3..]);
    }
    #[cfg(target_os = "linux")]
    if args.get(1).is_some_and(|a| a == agents::IN_NETNS) {
        agents::in_netns(&args[2..]);
    }
    let s = scale();
    let bin = env!("CARGO_BIN_EXE_new");
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| {
        let d = tmp.path().join(name);
        fs::create_dir_all(&d).unwrap();
        d
    };
    let (work, home) = (dir("work"), dir("home"));
    let mut rows = Vec::new();
    let env = |cmd: &mut Command, url: &str| {
        cmd.env_clear()
            .env("PATH", env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_DATA_HOME", &home)
            .env("XDG_CONFIG_HOME", &home)
            .env("OPENAI_BASE_URL", url)
            .env("OPENAI_API_KEY", "bench-key");
    };

    // 1, 2: one-shot round trips against an instant server.
    let (url, _server) = start_server();
    if wanted("oneshot") {
        let oneshot_data = dir("oneshot");
        let one_shot_p = || {
            let mut cmd = Command::new(bin);
            env(&mut cmd, &url);
            cmd.arg(&work).arg("default").arg(&oneshot_data).args([
                "--model",
                "bench",
                "-p",
                "Say hello.",
            ]);
            run(&mut cmd, b"")
        };
        let (ours, _) = times(s.runs, one_shot_p);
        let body = r#"{"model":"bench","messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"Say hello."}],"stream":true}"#;
        let (curl, _) = times(s.runs, || {
            let mut cmd = Command::new("curl");
            cmd.args([
                "-s",
                "-N",
                "-X",
                "POST",
                "-H",
                "content-type: application/json",
                "-H",
                "authorization: Bearer bench-key",
                "-d",
                body,
            ])
            .arg(format!("{url}/chat/completions"));
            run(&mut cmd, b"")
        });
        let ratio = ours.as_secs_f64() / curl.as_secs_f64();
        rows.push(Row {
            what: "one-shot `new -p`, instant server".into(),
            measured: ms(ours),
            baseline: format!("curl {}", ms(curl)),
            ratio,
            target: "≤ 1.5× curl".into(),
            ok: ratio <= 1.5,
        });
        // The same prompt through `new acp`, as an editor sends it: initialize, session/new,
        // session/prompt, then stdin closed; by turns with `-p`, a ratio of two start-ups.
        let acp_data = dir("acp");
        let (acp, one_shot) = fastest_by_turns(
            s.runs,
            || {
                let mut cmd = Command::new(bin);
                env(&mut cmd, &url);
                cmd.current_dir(&work)
                    .arg("acp")
                    .arg("--datadir")
                    .arg(&acp_data)
                    .args(["--model", "bench"]);
                acp_prompt(&mut cmd, &work, "Say hello.")
            },
            one_shot_p,
        );
        let ratio = acp.as_secs_f64() / one_shot.as_secs_f64();
        rows.push(Row {
            what: "the same prompt through `new acp` (start, session/new, prompt, exit)".into(),
            measured: ms(acp),
            baseline: format!("`new -p` {}", ms(one_shot)),
            ratio,
            target: "≤ 1.1×".into(),
            ok: ratio <= 1.1,
        });
        match llm_cli() {
            Some(llm) => {
                let llm_home = dir("llm-home");
                fs::write(
                    llm_home.join("extra-openai-models.yaml"),
                    format!("- model_id: bench\n  model_name: bench\n  api_base: \"{url}\"\n"),
                )
                .unwrap();
                let (theirs, _) = times(s.runs.min(7), || {
                    let mut cmd = Command::new(&llm);
                    env(&mut cmd, &url);
                    cmd.env("LLM_USER_PATH", &llm_home)
                        .args(["-m", "bench", "Say hello."]);
                    run(&mut cmd, b"")
                });
                let speedup = theirs.as_secs_f64() / ours.as_secs_f64();
                rows.push(Row {
                    what: "the same one-shot".into(),
                    measured: ms(ours),
                    baseline: format!("llm {}", ms(theirs)),
                    ratio: speedup,
                    target: "≥ 5× faster than llm".into(),
                    ok: speedup >= 5.0,
                });
            }
            None => eprintln!("llm could not be installed: its comparison is skipped"),
        }
    }

    // What each request costs (issue 45): the first request's system prompt and tool definitions,
    // a one-shot in a git repository against a plain folder, the binary's size.
    if wanted("cost") {
        cost_rows(bin, &s, &tmp.path().join("cost"), &env, &mut rows);
    }

    // 3, 4: start-up and /list with many conversations, against an empty DATADIR.
    if wanted("list") {
        let full = dir("full");
        let empty = dir("empty");
        let t = Instant::now();
        generate_many(&full, s.conversations, s.messages);
        eprintln!(
            "generated {} conversations of {} messages in {:.1} s",
            s.conversations,
            s.messages,
            t.elapsed().as_secs_f64()
        );
        let list = |data: &Path| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, "http://127.0.0.1:9/v1");
            cmd.arg(&work).arg("default").arg(data);
            run_measured(&cmd, b"/list\n")
        };
        list(&full); // the first /list builds the index
        let (t_full, m_full) = times(s.runs, || list(&full));
        let (t_empty, m_empty) = times(s.runs, || list(&empty));
        let ratio = t_full.as_secs_f64() / t_empty.as_secs_f64();
        rows.push(Row {
            what: format!(
                "start-up + /list, {} conversations of {}",
                s.conversations, s.messages
            ),
            measured: ms(t_full),
            baseline: format!("empty {}", ms(t_empty)),
            ratio,
            target: "≤ 1.5×".into(),
            ok: ratio <= 1.5,
        });
        let ratio = m_full as f64 / m_empty as f64;
        rows.push(Row {
            what: "peak memory of that".into(),
            measured: format!("{:.1} MB", m_full as f64 / 1024.0),
            baseline: format!("empty {:.1} MB", m_empty as f64 / 1024.0),
            ratio,
            target: "≤ 2×".into(),
            ok: ratio <= 2.0,
        });

        // `/search` streams through every file; measured against reading them all, nothing more.
        let store = Store::open(&full).unwrap();
        let needle = format!("conversation {:08x}:", s.conversations / 2);
        let searched = best(
            || {
                let t = Instant::now();
                let found = store.search(&needle, 50).unwrap();
                assert!(!found.hits.is_empty());
                t.elapsed()
            },
            5,
        );
        let read_all = best(
            || {
                let t = Instant::now();
                let mut bytes = 0;
                for entry in fs::read_dir(&full).unwrap() {
                    let path = entry.unwrap().path();
                    if path.extension().is_some_and(|x| x == "jsonl") {
                        bytes += fs::read(&path).unwrap().len();
                    }
                }
                assert!(bytes > 0);
                t.elapsed()
            },
            5,
        );
        rows.push(Row {
            what: format!("(reference) /search in {} conversations", s.conversations),
            measured: ms(searched),
            baseline: format!("reading every file {}", ms(read_all)),
            ratio: searched.as_secs_f64() / read_all.as_secs_f64(),
            target: "-".into(),
            ok: true,
        });
    }

    if wanted("web") {
        // `new web` and `/export --html`: a tree's page (every node, its Markdown rendered, the
        // page's own script and style) drawn by headless Chromium through ChromeDriver when they
        // are here: from asking for the page to its tree drawn, and the page's JS heap after a
        // collection. Without them, the server's half only (building the page).
        let pages: Vec<(usize, PathBuf, Duration, usize)> = [1_000, 10_000]
            .into_iter()
            .map(|n| {
                let (conv, _) = sample::branching(&format!("web{n}"), n);
                let built = best(
                    || {
                        let start = Instant::now();
                        let html = export_page(&conv, "");
                        let took = start.elapsed();
                        drop(html);
                        took
                    },
                    s.runs.min(5),
                );
                let html = export_page(&conv, "");
                let file = tmp.path().join(format!("web{n}.html"));
                fs::write(&file, &html).unwrap();
                (conv.len(), file, built, html.len())
            })
            .collect();
        let (small, big) = (&pages[0], &pages[1]);
        let kb = |bytes: usize| bytes / 1024;
        let row = match drawn_in_chromium(&[(&small.1, small.0), (&big.1, big.0)], s.runs.min(5)) {
            Some(drawn) => {
                let ((small_t, small_heap), (big_t, big_heap)) = (drawn[0], drawn[1]);
                let growth = big_t.as_secs_f64() / small_t.as_secs_f64();
                Row {
                    what: format!(
                        "web: a 10000-message tree drawn in Chromium vs 1000 (JS heap {:.1} vs \
                         {:.1} MB; page {} vs {} KB)",
                        big_heap as f64 / 1e6,
                        small_heap as f64 / 1e6,
                        kb(big.3),
                        kb(small.3)
                    ),
                    measured: ms(big_t),
                    baseline: format!("1000 msgs {}", ms(small_t)),
                    ratio: growth,
                    target: "≤ 12×".into(),
                    ok: growth <= 12.0,
                }
            }
            None => {
                let growth = big.2.as_secs_f64() / small.2.as_secs_f64();
                Row {
                    what: format!(
                        "web page of a 10000-message tree vs 1000, built (no Chromium here; \
                         {} vs {} KB of page)",
                        kb(big.3),
                        kb(small.3)
                    ),
                    measured: ms(big.2),
                    baseline: format!("1000 msgs {}", ms(small.2)),
                    ratio: growth,
                    target: "≤ 12×".into(),
                    ok: growth <= 12.0,
                }
            }
        };
        rows.push(row);
    }

    // 5, 7: loading a big conversation and drawing /tree, against parsing its lines into Values.
    let big_dir = dir("big");
    let store = Store::open(&big_dir).unwrap();
    let small_n = s.big / 10;
    generate_big(&store, "big", s.big);
    generate_big(&store, "tenth", small_n);
    let drawn = tmp.path().join("tree.txt");
    if wanted("tree") {
        let ours = best(|| load_and_draw(&store, "big", &drawn), s.runs.min(7));
        let floor = best(|| parse_values(&store.path("big")), s.runs.min(7));
        let ratio = ours.as_secs_f64() / floor.as_secs_f64();
        rows.push(Row {
            what: format!(
                "load a {}-message conversation and draw /tree to a file",
                s.big
            ),
            measured: ms(ours),
            baseline: format!("Value parse {}", ms(floor)),
            ratio,
            target: "≤ 3×".into(),
            ok: ratio <= 3.0,
        });
        let tenth = best(|| load_and_draw(&store, "tenth", &drawn), s.runs.min(7));
        let growth = ours.as_secs_f64() / tenth.as_secs_f64();
        let floor_tenth = best(|| parse_values(&store.path("tenth")), s.runs.min(7));
        rows.push(Row {
            what: format!(
                "(reference) growth of the Value parse itself, {} vs {small_n}",
                s.big
            ),
            measured: ms(floor),
            baseline: format!("{small_n} msgs {}", ms(floor_tenth)),
            ratio: floor.as_secs_f64() / floor_tenth.as_secs_f64(),
            target: "-".into(),
            ok: true,
        });
        rows.push(Row {
            what: format!(
                "cost growth of load + /tree, {} vs {} messages",
                s.big, small_n
            ),
            measured: ms(ours),
            baseline: format!("{} msgs {}", small_n, ms(tenth)),
            ratio: growth,
            target: "≤ 11×".into(),
            ok: growth <= 11.0,
        });
    }

    // 8: the binary resuming a bushy tree (forks everywhere, tool calls) and leaving at once,
    // against reading its file and parsing each line into a Value.
    if wanted("bushy") {
        let bushy_dir = dir("bushy");
        let bushy_store = Store::open(&bushy_dir).unwrap();
        generate_bushy(&bushy_store, "bushy", s.big);
        let resume = || {
            let mut cmd = Command::new(bin);
            env(&mut cmd, "http://127.0.0.1:9/v1");
            cmd.arg(&work)
                .arg("default")
                .arg(&bushy_dir)
                .args(["--resume", "bushy"]);
            run_measured(&cmd, b"/exit\n")
        };
        let (ours, peak) = times(s.runs.min(7), resume);
        let floor = best(|| parse_values(&bushy_store.path("bushy")), s.runs.min(7));
        let ratio = ours.as_secs_f64() / floor.as_secs_f64();
        let file = fs::metadata(bushy_store.path("bushy")).unwrap().len();
        rows.push(Row {
            what: format!(
                "`new --resume` a bushy {}-message tree ({:.1} MB), then /exit",
                s.big,
                file as f64 / 1e6
            ),
            measured: ms(ours),
            baseline: format!("Value parse {}", ms(floor)),
            ratio,
            target: "≤ 1.5×".into(),
            ok: ratio <= 1.5,
        });
        let ratio = (peak * 1024) as f64 / file as f64;
        rows.push(Row {
            what: "peak memory of that resume".into(),
            measured: format!("{:.1} MB", peak as f64 / 1024.0),
            baseline: format!("the file {:.1} MB", file as f64 / 1e6),
            ratio,
            target: "≤ 1.5× the file".into(),
            ok: ratio <= 1.5,
        });
        // The same tree opened from inside a session and drawn whole.
        let switch = || {
            let mut cmd = Command::new(bin);
            env(&mut cmd, "http://127.0.0.1:9/v1");
            cmd.arg(&work).arg("default").arg(&bushy_dir);
            run(&mut cmd, b"/switch bushy\n/tree\n/exit\n")
        };
        let (switched, _) = times(s.runs.min(7), switch);
        let ratio = switched.as_secs_f64() / floor.as_secs_f64();
        rows.push(Row {
            what: "`/switch` to that tree, then `/tree` of it all".into(),
            measured: ms(switched),
            baseline: format!("Value parse {}", ms(floor)),
            ratio,
            target: "≤ 1.8×".into(),
            ok: ratio <= 1.8,
        });
    }

    // 9: the SSE reader on one huge `data:` line arriving in small chunks, against copying the
    // same bytes: linear, whatever the line's length.
    if wanted("sse") {
        let mb = if s.big >= 100_000 { 50 } else { 8 };
        let line = {
            let mut l = b"data: ".to_vec();
            l.extend(iter::repeat_n(b'x', mb * 1024 * 1024));
            l.extend_from_slice(b"\n\n");
            l
        };
        let decode = || {
            let start = Instant::now();
            let mut d = SseDecoder::new();
            let mut events = 0;
            for chunk in line.chunks(16 * 1024) {
                events += d.feed(chunk).len();
            }
            assert_eq!(events, 1);
            start.elapsed()
        };
        let copy = || {
            let start = Instant::now();
            let mut buf = Vec::new();
            for chunk in line.chunks(16 * 1024) {
                buf.extend_from_slice(chunk);
            }
            assert_eq!(buf.len(), line.len());
            start.elapsed()
        };
        let ours = best(decode, 5);
        let floor = best(copy, 5);
        rows.push(Row {
            what: format!("SSE: one {mb} MB `data:` line in 16 KB chunks"),
            measured: ms(ours),
            baseline: format!("copying the bytes {}", ms(floor)),
            ratio: ours.as_secs_f64() / floor.as_secs_f64(),
            target: "≤ 10× (linear)".into(),
            ok: ours.as_secs_f64() <= floor.as_secs_f64() * 10.0,
        });
    }

    // 10, 11: context management. The cost of one turn's accounting and request building on a
    // long compacted branch against a short one (flat), and the peak memory of a long session of
    // big tool results against its start and its file.
    if wanted("context") {
        let ctx = Context::new(Default::default(), "bench");
        let results = tmp.path().join("results");
        let per_turn = |c: &Conversation| {
            let turns = 2_000;
            let start = Instant::now();
            for _ in 0..turns {
                let messages = ctx.request_messages(c, c.cursor(), &results);
                let estimate = context::estimate_request(&messages, &[]);
                assert!(!ctx.should_compact(estimate));
            }
            start.elapsed() / turns
        };
        let long = compacted_branch(s.big);
        let short = compacted_branch(1_000);
        let t_long = best(|| per_turn(&long), 5);
        let t_short = best(|| per_turn(&short), 5);
        let ratio = t_long.as_secs_f64() / t_short.as_secs_f64();
        rows.push(Row {
            what: format!(
                "one turn's accounting + request building, {}- vs 1,000-message compacted branch",
                s.big
            ),
            measured: format!("{:.1} µs", t_long.as_secs_f64() * 1e6),
            baseline: format!("{:.1} µs", t_short.as_secs_f64() * 1e6),
            ratio,
            target: "flat: ≤ 1.5×".into(),
            ok: ratio <= 1.5,
        });
        drop((long, short));

        let (tool_url, _tool_server) = start_tool_server("read_file", r#"{"filepath":"big.txt"}"#);
        let turns = if s.big >= 100_000 { 500 } else { 100 };
        let session_work = dir("context-work");
        let line: String = format!("{}\n", "x".repeat(49));
        fs::write(session_work.join("big.txt"), line.repeat(1024)).unwrap();
        let session = |data: &Path, input: &[u8], answers: usize| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, &tool_url);
            cmd.arg(&session_work)
                .arg("default")
                .arg(data)
                .args(["--model", "bench"]);
            let started = Instant::now();
            session_peak(&mut cmd, input, || {
                if answers == 0 {
                    return started.elapsed() > Duration::from_millis(500);
                }
                conversations_text(data).matches("\"Read it.\"").count() >= answers
            })
        };
        let (_, at_start) = session(&dir("context-empty"), b"", 0);
        let long_data = dir("context-long");
        let input: String = (0..turns)
            .map(|i| format!("read big.txt ({i})\n"))
            .collect();
        let (took, peak) = session(&long_data, input.as_bytes(), turns);
        let file_kb = conversations_text(&long_data).len() as u64 / 1024;
        let allowed = at_start + 2 * file_kb;
        rows.push(Row {
            what: format!(
                "peak memory after {turns} turns of 50 KB tool results ({:.1} s)",
                took.as_secs_f64()
            ),
            measured: format!("{:.1} MB", peak as f64 / 1024.0),
            baseline: format!(
                "start {:.1} MB + 2 × file {:.1} MB",
                at_start as f64 / 1024.0,
                file_kb as f64 / 1024.0
            ),
            ratio: peak as f64 / allowed as f64,
            target: "≤ 1 (of that sum)".into(),
            ok: peak <= allowed,
        });
    }

    // 16: the peak memory of a long session of short turns against its start and its file:
    // nothing a turn leaves behind but what it stored.
    if wanted("turns") {
        let turns = if s.big >= 100_000 { 2_000 } else { 300 };
        let session = |data: &Path, input: &[u8], answers: usize| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, &url);
            cmd.arg(&work)
                .arg("default")
                .arg(data)
                .args(["--model", "bench"]);
            let started = Instant::now();
            session_peak_split(&mut cmd, input, || {
                if answers == 0 {
                    return started.elapsed() > Duration::from_millis(500);
                }
                conversations_text(data).matches("Hello there.").count() >= answers
            })
        };
        // What the process allocated at its peak (the peak less the pages of files: the
        // binary's code, mapped in as it runs, by an amount that varies from run to run with the
        // page cache), the smallest of three sessions of each kind, and the file's size.
        let smallest = |name: &str, input: &[u8], answers: usize| {
            let mut best = (Duration::MAX, u64::MAX, u64::MAX, 0);
            for run in 0..3 {
                let data = dir(&format!("{name}-{run}"));
                let (took, peak, files) = session(&data, input, answers);
                let file_kb = conversations_text(&data).len() as u64 / 1024;
                let allocated = peak.saturating_sub(files);
                best = (
                    best.0.min(took),
                    best.1.min(allocated),
                    best.2.min(peak),
                    file_kb,
                );
            }
            best
        };
        // The first turn allocates what every turn uses (the HTTP client and its connection,
        // the stream's buffers): the growth is measured from there.
        let (_, after_one, _, one_kb) = smallest("turns-one", b"a short question, number 0\n", 1);
        let input: String = (0..turns)
            .map(|i| format!("a short question, number {i}\n"))
            .collect();
        let (took, allocated, peak, file_kb) = smallest("turns-long", input.as_bytes(), turns);
        let grown = file_kb.saturating_sub(one_kb);
        let allowed = after_one + 2 * grown;
        rows.push(Row {
            what: format!(
                "memory allocated at the peak of {turns} short turns ({:.1} s)",
                took.as_secs_f64()
            ),
            measured: format!(
                "{:.2} MB (peak RSS {:.1} MB with files' pages)",
                allocated as f64 / 1024.0,
                peak as f64 / 1024.0
            ),
            baseline: format!(
                "after one turn {:.2} MB + 2 × the file's growth {:.2} MB",
                after_one as f64 / 1024.0,
                grown as f64 / 1024.0
            ),
            ratio: allocated as f64 / allowed as f64,
            target: "≤ 1 (of that sum)".into(),
            ok: allocated <= allowed,
        });
    }

    // 15: building the text of one request for a 2,000-message branch, the way the agent does each
    // round (the branch's messages, then the OpenAI-compatible body), against `serde_json` writing
    // the same messages as borrowed structs: the floor of any request.
    if wanted("request") {
        #[derive(serde::Serialize)]
        struct Borrowed<'a> {
            role: &'a str,
            content: &'a str,
        }
        let mut c = Conversation::new("bench", "system prompt");
        for i in 0..2_000 {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            c.add(Message::new(
                role,
                format!("message {i} {}", "w".repeat(300)),
            ))
            .unwrap();
        }
        let ctx = Context::new(Default::default(), "bench");
        let results = tmp.path().join("request-results");
        let settings = ProviderSettings {
            name: "llamacpp".into(),
            kind: ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:8080/v1".into(),
            api_key: None,
            api_key_var: "LLAMACPP_API_KEY".into(),
            base_url_var: "LLAMACPP_BASE_URL".into(),
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            stream_usage: true,
            key_required: false,
            retry: Default::default(),
            max_tokens: 8192,
            thinking_budget: None,
            prompt_cache: false,
            max_answer_bytes: 1 << 20,
        };
        let rounds = 50;
        // One provider's body: the branch's messages, then the request's text.
        let body = |text: fn(&new_core::llm::ChatRequest, &ProviderSettings) -> String| {
            let start = Instant::now();
            for _ in 0..rounds {
                let request = new_core::llm::ChatRequest {
                    model: "bench".into(),
                    messages: ctx.request_messages(&c, c.cursor(), &results),
                    ..Default::default()
                };
                assert!(text(&request, &settings).len() > 600_000);
            }
            start.elapsed() / rounds
        };
        let ours = || body(openai::request_text);
        let anthropic = || body(anthropic::request_text);
        let floor = || {
            let start = Instant::now();
            for _ in 0..rounds {
                let mut messages: Vec<Borrowed<'_>> = c
                    .ancestors(c.cursor())
                    .map(|m| Borrowed {
                        role: m.role.as_str(),
                        content: &m.content,
                    })
                    .collect();
                messages.reverse();
                let text = serde_json::to_string(&messages).unwrap();
                assert!(text.len() > 600_000);
            }
            start.elapsed() / rounds
        };
        let (mut a, mut b, mut an) = (Duration::MAX, Duration::MAX, Duration::MAX);
        for _ in 0..7 {
            a = a.min(ours());
            b = b.min(floor());
            an = an.min(anthropic());
        }
        let ratio = a.as_secs_f64() / b.as_secs_f64();
        rows.push(Row {
            what: "building one request's text for a 2,000-message branch".into(),
            measured: format!("{:.2} ms", a.as_secs_f64() * 1e3),
            baseline: format!(
                "serde_json of the same messages as borrowed structs: {:.2} ms",
                b.as_secs_f64() * 1e3
            ),
            ratio,
            target: "≤ 2×".into(),
            ok: ratio <= 2.0,
        });
        let ratio = an.as_secs_f64() / b.as_secs_f64();
        rows.push(Row {
            what: "the same, Anthropic's Messages body".into(),
            measured: format!("{:.2} ms", an.as_secs_f64() * 1e3),
            baseline: format!("the same floor: {:.2} ms", b.as_secs_f64() * 1e3),
            ratio,
            target: "≤ 2×".into(),
            ok: ratio <= 2.0,
        });

        // The next rounds of a turn on that branch: each adds a call and its result, and the
        // request's text is written from the last one sent (what it repeats copied), against
        // writing each afresh. Both build the branch's messages first.
        type Bytes =
            fn(&new_core::llm::ChatRequest, &ProviderSettings, &Reuse) -> (bytes::Bytes, Ticket);
        let next_rounds = |write: Bytes, afresh: bool| {
            let mut c = c.clone();
            let reuse = Reuse::default();
            let (mut copied, mut total) = (0, 0);
            let start = Instant::now();
            for round in 0..rounds {
                let mut asking = Message::new(Role::Assistant, "");
                asking.extra.tool_calls = Some(vec![ToolCall::new(
                    format!("call{round}"),
                    "read_file",
                    r#"{"filepath":"src/main.rs"}"#,
                )]);
                c.add(asking).unwrap();
                c.add(Message::tool_result(
                    format!("call{round}"),
                    "x".repeat(300),
                ))
                .unwrap();
                let request = new_core::llm::ChatRequest {
                    model: "bench".into(),
                    messages: ctx.request_messages(&c, c.cursor(), &results),
                    ..Default::default()
                };
                let text = if afresh {
                    write(&request, &settings, &Reuse::once()).0
                } else {
                    // Answered with a call: another round follows.
                    let (text, ticket) = write(&request, &settings, &reuse);
                    reuse.answered(ticket, &request.messages, true);
                    text
                };
                assert!(text.len() > 600_000);
                copied += reuse.copied();
                total += text.len();
            }
            (start.elapsed() / rounds, copied as f64 / total as f64)
        };
        let mut anthropic_settings = settings.clone();
        anthropic_settings.kind = ProviderKind::Anthropic;
        for (name, write) in [
            ("OpenAI", openai::request_bytes as Bytes),
            ("Anthropic", anthropic::request_bytes as Bytes),
        ] {
            let (mut reused, mut fresh, mut copied) = (Duration::MAX, Duration::MAX, 0.0);
            for _ in 0..7 {
                let (t, c) = next_rounds(write, false);
                reused = reused.min(t);
                copied = c;
                fresh = fresh.min(next_rounds(write, true).0);
            }
            let ratio = reused.as_secs_f64() / fresh.as_secs_f64();
            rows.push(Row {
                what: format!(
                    "a turn's next round on that branch, {name}: the request's text written from the last one ({:.0}% copied)",
                    copied * 100.0
                ),
                measured: format!("{:.2} ms", reused.as_secs_f64() * 1e3),
                baseline: format!("written afresh {:.2} ms", fresh.as_secs_f64() * 1e3),
                ratio,
                target: "≤ 0.5×".into(),
                ok: ratio <= 0.5,
            });
        }
    }

    // 12: rendering a 200 KB Markdown answer as it streams, against writing it raw the way an
    // unrendered answer is written (each streamed piece escaped, written and flushed).
    if wanted("render") {
        // An answer of the kind models write: prose and lists, a code block now and then, a
        // table less often.
        let prose = "## A section\n\nSome **bold** text, *italic* text, `inline code` and a \
[link](https://example.com/page) in a paragraph long enough to wrap at least once on a normal \
terminal, so that wrapping is measured too. Another sentence follows it, with a `name_with_underscores` \
and more words, because answers are mostly prose.\n\n1. First item, which says what to do first\n\
2. Second item with `code` in it\n   - nested bullet with a detail\n\n> A quote with *emphasis*.\n\n";
        let code = "```rust\nfn main() {\n    let x = vec![1, 2, 3]; // a comment\n    \
println!(\"{}\", x.len());\n}\n```\n\n";
        let table = "| Name | Size | Kind |\n|---|---:|:---:|\n| a.rs | 1,204 | file |\n\
| src | 12 | folder |\n\n";
        let mut doc = String::new();
        let mut n = 0;
        while doc.len() < 200 * 1024 {
            doc.push_str(prose);
            if n % 2 == 1 {
                doc.push_str(code);
            }
            if n % 4 == 3 {
                doc.push_str(table);
            }
            n += 1;
        }
        // Pieces of about the size models stream.
        let pieces: Vec<&str> = {
            let mut v = Vec::new();
            let mut at = 0;
            while at < doc.len() {
                let mut end = (at + 24).min(doc.len());
                while !doc.is_char_boundary(end) {
                    end += 1;
                }
                v.push(&doc[at..end]);
                at = end;
            }
            v
        };
        let layout = Layout {
            width: 100,
            height: 40,
            hyperlinks: true,
            dim: false,
        };
        // What `new` does with each streamed piece, rendered or not, writing to `sink`: rendered,
        // the row of the line still arriving too, as often as the printer draws it.
        let rendered = |sink: &File| {
            let mut sink = sink;
            let start = Instant::now();
            let mut r = Renderer::new(layout);
            let (mut drawn, mut last) = (None, None);
            for p in &pieces {
                let text = escape::escape_controls_keep_lines(p);
                let mut out = r.push(&text);
                if tail_due(&mut drawn, &mut last) {
                    drawn = Some(Instant::now());
                    out.insert_str(0, "\r\x1b[2K");
                    out.push_str(&r.tail());
                }
                if !out.is_empty() {
                    sink.write_all(out.as_bytes()).unwrap();
                    sink.flush().unwrap();
                }
            }
            sink.write_all(r.finish().as_bytes()).unwrap();
            start.elapsed()
        };
        let raw = |sink: &File| {
            let mut sink = sink;
            let start = Instant::now();
            for p in &pieces {
                let text = escape::escape_controls_keep_lines(p);
                sink.write_all(text.as_bytes()).unwrap();
                sink.flush().unwrap();
            }
            start.elapsed()
        };
        let terminal = terminal_sink();
        // Interleaved, so that both meet the same moments of a noisy machine; the fastest of each.
        let (mut on_terminal, mut raw_terminal) = (Duration::MAX, Duration::MAX);
        for _ in 0..(2 * s.runs).max(11) {
            on_terminal = on_terminal.min(rendered(&terminal));
            raw_terminal = raw_terminal.min(raw(&terminal));
        }
        let ratio = on_terminal.as_secs_f64() / raw_terminal.as_secs_f64();
        rows.push(Row {
            what: format!(
                "render a {} KB Markdown answer streamed in 24-byte pieces, to a terminal",
                doc.len() / 1024
            ),
            measured: ms(on_terminal),
            baseline: format!("writing it raw {}", ms(raw_terminal)),
            ratio,
            target: "≤ 2×".into(),
            ok: ratio <= 2.0,
        });
        let null = OpenOptions::new().write(true).open("/dev/null").unwrap();
        let cpu = best(|| rendered(&null), s.runs);
        let raw_null = best(|| raw(&null), s.runs);
        rows.push(Row {
            what: "(reference) the same to /dev/null: the renderer's own work".into(),
            measured: ms(cpu),
            baseline: format!("writing it raw {}", ms(raw_null)),
            ratio: cpu.as_secs_f64() / raw_null.as_secs_f64(),
            target: "-".into(),
            ok: true,
        });
    }

    // 11: start-up with three MCP servers configured against none: they start in the background,
    // the prompt does not wait for them.
    if wanted("mcp") && Command::new("python3").arg("--version").output().is_ok() {
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures_mcp/fake_mcp.py");
        let config_home = dir("mcp-config");
        fs::create_dir_all(config_home.join("new")).unwrap();
        let servers: Vec<serde_json::Value> = ["one", "two", "three"]
            .iter()
            .map(|n| serde_json::json!({"name": n, "command": "python3", "args": [fake.display().to_string()]}))
            .collect();
        fs::write(
            config_home.join("new/config.json"),
            serde_json::json!({"mcp": {"servers": servers}}).to_string(),
        )
        .unwrap();
        let (work_mcp, data_mcp, data_plain) = (dir("mcp-work"), dir("mcp-data"), dir("mcp-plain"));
        let start = |data: &Path, with: bool| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, "http://127.0.0.1:9/v1");
            if with {
                cmd.env("XDG_CONFIG_HOME", &config_home);
            }
            cmd.arg(&work_mcp).arg("default").arg(data);
            run(&mut cmd, b"/exit\n")
        };
        let (with, without) = fastest_by_turns(
            s.runs,
            || start(&data_mcp, true),
            || start(&data_plain, false),
        );
        let ratio = with.as_secs_f64() / without.as_secs_f64();
        rows.push(Row {
            what: "start-up with three MCP servers configured, then /exit".into(),
            measured: ms(with),
            baseline: format!("none {}", ms(without)),
            ratio,
            target: "≤ 1.1×".into(),
            ok: ratio <= 1.1,
        });

        // One `tools/call` round trip through `new` (the registry, the manager, the client)
        // against the same call written and read by a minimal client on the same kind of pipe.
        let calls = if s.big >= 100_000 { 2_000 } else { 200 };
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let settings = McpSettings {
            servers: vec![ServerConfig {
                name: "fake".into(),
                transport: Transport::Stdio {
                    command: "python3".into(),
                    args: vec![fake.display().to_string()],
                    env: Default::default(),
                    cwd: None,
                },
                timeout: Duration::from_secs(30),
                disabled: false,
                held: None,
                origin: Origin::User,
                sandbox: None,
                network: false,
                raw: String::new(),
                references: Vec::new(),
                disabled_tools: Vec::new(),
                always_allow: Vec::new(),
                oauth: Default::default(),
            }],
            ..Default::default()
        };
        let manager = Manager::new(
            settings,
            &work_mcp,
            &data_mcp,
            Vec::new(),
            true,
            runtime.handle().clone(),
        );
        let mut registry = ToolRegistry::builtin(
            ToolContext {
                workdir: Workdir::new(&work_mcp).unwrap(),
                bash_timeout: Duration::from_secs(30),
                hidden_env: Vec::new(),
                os_sandbox: None,
            },
            &[],
        )
        .unwrap();
        registry.add_source(manager.clone());
        runtime.block_on(manager.settle());
        let through_new = runtime.block_on(async {
            let args = serde_json::json!({"text": "ping"});
            // The first echo adds a tool to the fake server's list: out of the measurement.
            registry.run("mcp__fake__echo", &args).await;
            runtime_settle(&manager).await;
            // The fastest of three batches, as for the minimal client below.
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let start = Instant::now();
                for _ in 0..calls {
                    let out = registry.run("mcp__fake__echo", &args).await;
                    assert_eq!(out.content, "echo: ping");
                }
                best = best.min(start.elapsed() / calls);
            }
            best
        });
        runtime.block_on(manager.shutdown());
        let direct = {
            use std::io::BufRead;
            let mut child = Command::new("python3")
                .arg(&fake)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut input = child.stdin.take().unwrap();
            let mut output = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            let mut exchange = |message: serde_json::Value, answer: bool| {
                writeln!(input, "{message}").unwrap();
                input.flush().unwrap();
                if !answer {
                    return;
                }
                loop {
                    line.clear();
                    output.read_line(&mut line).unwrap();
                    if line.starts_with('{') && line.contains("\"id\"") {
                        break;
                    }
                }
            };
            exchange(
                serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}}),
                true,
            );
            exchange(
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                false,
            );
            let call = |id: u32| serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "ping"}}});
            exchange(call(1), true);
            let mut took = Duration::MAX;
            for batch in 0..3 {
                let start = Instant::now();
                for i in 0..calls {
                    exchange(call(batch * calls + i + 2), true);
                }
                took = took.min(start.elapsed() / calls);
            }
            drop(input);
            let _ = child.wait();
            took
        };
        let ratio = through_new.as_secs_f64() / direct.as_secs_f64();
        rows.push(Row {
            what:
                "(reference) one MCP tools/call round trip through new (registry, manager, client)"
                    .into(),
            measured: format!("{:.1} µs", through_new.as_secs_f64() * 1e6),
            baseline: format!(
                "a minimal client on the pipe {:.1} µs",
                direct.as_secs_f64() * 1e6
            ),
            ratio,
            // The issue names no target: the figure says what the async client costs a call.
            target: "-".into(),
            ok: true,
        });
    }

    // 13: start-up with 200 skills on demand and a full memory index, against none.
    if wanted("skills") {
        let rich = dir("skills-project");
        let plain = dir("skills-plain");
        for i in 0..200 {
            let skill = rich.join(format!(".new/skills/skill-{i:03}"));
            fs::create_dir_all(skill.join("reference")).unwrap();
            fs::write(
                skill.join("SKILL.md"),
                format!(
                    "---\nname: skill-{i:03}\ndescription: Does task number {i} of a kind the user asks for now and then\nallowed-tools: Read, Grep\n---\n{}",
                    "Step by step instructions for this kind of task.\n".repeat(40)
                ),
            )
            .unwrap();
        }
        let rich_data = dir("skills-data");
        let plain_data = dir("skills-plain-data");
        let memory = rich_data.join("memory");
        fs::create_dir_all(&memory).unwrap();
        let index: String = (0..200)
            .map(|i| format!("- [fact {i}](fact-{i}.md) (project_fact): something true about the project, number {i}\n"))
            .collect();
        fs::write(memory.join("MEMORY.md"), format!("# Memory\n\n{index}")).unwrap();
        let start = |work: &Path, data: &Path, input: &[u8]| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, "http://127.0.0.1:9/v1");
            cmd.arg(work).arg("default").arg(data);
            run(&mut cmd, input)
        };
        let (with, without) = fastest_by_turns(
            s.runs,
            || start(&rich, &rich_data, b"/exit\n"),
            || start(&plain, &plain_data, b"/exit\n"),
        );
        let ratio = with.as_secs_f64() / without.as_secs_f64();
        rows.push(Row {
            what: "start-up with 200 skills on demand and a full memory index, then /exit".into(),
            measured: ms(with),
            baseline: format!("none {}", ms(without)),
            ratio,
            target: "≤ 1.2×".into(),
            ok: ratio <= 1.2,
        });
        // The work moved off the way: what the first input that needs the prompt waits for.
        let (with, without) = fastest_by_turns(
            s.runs,
            || start(&rich, &rich_data, b"/context\n"),
            || start(&plain, &plain_data, b"/context\n"),
        );
        rows.push(Row {
            what: "(reference) the same, then /context: the skills and memory read".into(),
            measured: ms(with),
            baseline: format!("none {}", ms(without)),
            ratio: with.as_secs_f64() / without.as_secs_f64(),
            target: "-".into(),
            ok: true,
        });
    }

    // 14: checkpoints of a working folder inside a git repository, against git doing the same.
    if wanted("checkpoints") && Command::new("git").arg("--version").output().is_ok() {
        let files = if s.big >= 100_000 { 10_000 } else { 2_000 };
        let repo = dir("checkpoint-repo");
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("GIT_AUTHOR_NAME", "b")
                .env("GIT_AUTHOR_EMAIL", "b@b")
                .env("GIT_COMMITTER_NAME", "b")
                .env("GIT_COMMITTER_EMAIL", "b@b")
                .output()
                .expect("git");
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        // About 3 KB a file: 30 MB for 10,000.
        let body: String = "let x = 42; // some code on a line of its own\n".repeat(64);
        for i in 0..files {
            let sub = repo.join(format!("src/m{:03}", i % 100));
            fs::create_dir_all(&sub).unwrap();
            fs::write(sub.join(format!("f{i}.rs")), format!("// file {i}\n{body}")).unwrap();
        }
        let timed = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            f();
            start.elapsed()
        };
        let settings = CheckpointSettings::default();
        let data = dir("checkpoint-data");
        // The first snapshot comes last: `git add -A` into a fresh index deletes ten thousand
        // objects, and ext4 then makes every file creation slower for a while (it looks for
        // inodes not recently deleted), which would weigh on the rows below and on neither side
        // evenly.
        git(&["add", "-A"]);
        git(&["commit", "-qm", "base"]);
        // A project's files are older than two seconds; younger ones are read again by the
        // next snapshot (they may change again within one tick of the clock, unseen).
        thread::sleep(Duration::from_secs(2));
        // A snapshot with one file changed, against `git status --porcelain`.
        let store = CheckpointStore::new(&data.join("incremental"));
        let (mut id, mut manifest) = store.snapshot(&repo, &settings, None).unwrap();
        let mut snaps = Vec::new();
        let mut statuses = Vec::new();
        for run in 0..s.runs.min(7) {
            fs::write(repo.join("src/m000/f0.rs"), format!("// changed {run}\n")).unwrap();
            snaps.push(timed(&mut || {
                let (i, m) = store
                    .snapshot(&repo, &settings, Some((&id, &manifest)))
                    .unwrap();
                id = i;
                manifest = m;
            }));
            statuses.push(timed(&mut || git(&["status", "--porcelain"])));
        }
        let (snap, status) = (fastest(snaps), fastest(statuses));
        rows.push(Row {
            what: format!("checkpoint with one file changed, {files}-file tree"),
            measured: ms(snap),
            baseline: format!("`git status --porcelain` {}", ms(status)),
            ratio: snap.as_secs_f64() / status.as_secs_f64(),
            target: "≤ 1.0×".into(),
            ok: snap <= status,
        });
        // A restore of 100 changed files, against `git checkout` of the same files.
        let workdir = Workdir::new(&repo).unwrap();
        let changed: Vec<String> = (0..100)
            .map(|i| format!("src/m{:03}/f{i}.rs", i % 100))
            .collect();
        let (base_id, base) = store
            .snapshot(&repo, &settings, Some((&id, &manifest)))
            .unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-qm", "state"]);
        let mut restores = Vec::new();
        let mut checkouts = Vec::new();
        for _ in 0..s.runs.min(5) {
            for p in &changed {
                fs::write(repo.join(p), "edited\n").unwrap();
            }
            let now = store
                .snapshot(&repo, &settings, Some((&base_id, &base)))
                .unwrap()
                .1;
            restores.push(timed(&mut || {
                let applied = checkpoint::apply(&store, &workdir, &now, &base, &changed, true);
                assert_eq!((applied.done, applied.kept.len()), (100, 0));
            }));
            for p in &changed {
                fs::write(repo.join(p), "edited\n").unwrap();
            }
            let mut args = vec!["checkout", "--"];
            args.extend(changed.iter().map(String::as_str));
            checkouts.push(timed(&mut || git(&args)));
        }
        let (restore, checkout) = (fastest(restores), fastest(checkouts));
        rows.push(Row {
            what: "restore 100 changed files from a checkpoint".into(),
            measured: ms(restore),
            baseline: format!("`git checkout` of them {}", ms(checkout)),
            ratio: restore.as_secs_f64() / checkout.as_secs_f64(),
            target: "≤ 1.5×".into(),
            ok: restore.as_secs_f64() <= checkout.as_secs_f64() * 1.5,
        });
        // The first snapshot, against `git add -A` into a fresh index.
        let mut firsts = Vec::new();
        let mut adds = Vec::new();
        for run in 0..3 {
            let store = CheckpointStore::new(&data.join(format!("first{run}")));
            firsts.push(timed(&mut || {
                store.snapshot(&repo, &settings, None).unwrap();
            }));
            let _ = fs::remove_file(repo.join(".git/index"));
            let _ = fs::remove_dir_all(repo.join(".git/objects"));
            fs::create_dir_all(repo.join(".git/objects")).unwrap();
            adds.push(timed(&mut || git(&["add", "-A"])));
        }
        let (first, add) = (fastest(firsts), fastest(adds));
        rows.push(Row {
            what: format!("first checkpoint of a {files}-file tree in a git repository"),
            measured: ms(first),
            baseline: format!("`git add -A` into a fresh index {}", ms(add)),
            ratio: first.as_secs_f64() / add.as_secs_f64(),
            target: "≤ 1.5×".into(),
            ok: first.as_secs_f64() <= add.as_secs_f64() * 1.5,
        });
        // A turn whose `bash` call changes nothing (snapshots before and after it) in a folder of
        // 1,000 against one of `files` files: the watch answers, the folder is not walked. Per
        // turn: the difference between a session of many turns and one of a few, so that start-up
        // and the session's first walk (which reads every file once) cancel out.
        let (bash_url, _bash_server) = start_tool_server("bash", r#"{"command":"true"}"#);
        let small = dir("flat-small");
        for i in 0..1_000 {
            let sub = small.join(format!("src/m{:03}", i % 100));
            fs::create_dir_all(&sub).unwrap();
            fs::write(sub.join(format!("f{i}.rs")), format!("// file {i}\n{body}")).unwrap();
        }
        // One data folder a tree: its checkpoint store holds the tree's contents after the first
        // session, so later sessions' first walks only read.
        let (small_data, big_data) = (dir("flat-small-data"), dir("flat-big-data"));
        let session = |work: &Path, data: &Path, turns: usize| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, &bash_url);
            cmd.arg(work).arg("default").arg(data).args([
                "--model",
                "bench",
                "--permission-mode",
                "permissive",
            ]);
            let input: String = (0..turns).map(|i| format!("run it ({i})\n")).collect();
            let answers = || conversations_text(data).matches("\"Read it.\"").count();
            let before = answers();
            session_peak(&mut cmd, input.as_bytes(), || answers() >= before + turns).0
        };
        let (few, many) = if s.big >= 100_000 { (5, 85) } else { (3, 23) };
        session(&small, &small_data, few);
        session(&repo, &big_data, few);
        // The two folders in turn, so that both meet the machine in the same state.
        let (mut t_small, mut t_big) = (Duration::MAX, Duration::MAX);
        for _ in 0..3 {
            for (work, data, best) in [
                (&small, &small_data, &mut t_small),
                (&repo, &big_data, &mut t_big),
            ] {
                let t = session(work, data, many).saturating_sub(session(work, data, few));
                *best = (*best).min(t / (many - few) as u32);
            }
        }
        let ratio = t_big.as_secs_f64() / t_small.as_secs_f64();
        rows.push(Row {
            what: format!("a turn whose bash call changes nothing, {files}- vs 1,000-file folder"),
            measured: ms(t_big),
            baseline: ms(t_small),
            ratio,
            target: "flat: ≤ 1.2×".into(),
            ok: ratio <= 1.2,
        });
        // What checkpoints add to a turn whose bash call changes one file of the repository: a
        // turn with them against one without (each per turn, as above), against `git status`.
        let (edit_url, _edit_server) =
            start_tool_server("bash", r#"{"command":"date +%s%N > src/m001/f1.rs"}"#);
        let off_home = dir("checkpoints-off-home");
        fs::create_dir_all(off_home.join("new")).unwrap();
        fs::write(
            off_home.join("new/config.json"),
            r#"{"checkpoints": {"enabled": false}}"#,
        )
        .unwrap();
        let (on_data, off_data) = (dir("edit-on-data"), dir("edit-off-data"));
        let edit = |data: &Path, config: &Path, turns: usize| {
            let mut cmd = Command::new(bin);
            env(&mut cmd, &edit_url);
            cmd.env("XDG_CONFIG_HOME", config)
                .arg(&repo)
                .arg("default")
                .arg(data)
                .args(["--model", "bench", "--permission-mode", "permissive"]);
            let input: String = (0..turns).map(|i| format!("change it ({i})\n")).collect();
            let answers = || conversations_text(data).matches("\"Read it.\"").count();
            let before = answers();
            session_peak(&mut cmd, input.as_bytes(), || answers() >= before + turns).0
        };
        edit(&on_data, &home, few);
        edit(&off_data, &off_home, few);
        let (mut t_on, mut t_off) = (Duration::MAX, Duration::MAX);
        for _ in 0..3 {
            for (data, config, best) in [
                (&on_data, &home, &mut t_on),
                (&off_data, &off_home, &mut t_off),
            ] {
                let t = edit(data, config, many).saturating_sub(edit(data, config, few));
                *best = (*best).min(t / (many - few) as u32);
            }
        }
        let cost = t_on.saturating_sub(t_off);
        rows.push(Row {
            what: format!(
                "checkpoints' cost in a turn whose bash call changes one file, {files}-file git repository"
            ),
            measured: ms(cost),
            baseline: format!("`git status --porcelain` {}", ms(status)),
            ratio: cost.as_secs_f64() / status.as_secs_f64(),
            target: "≤ 1.2×".into(),
            ok: cost.as_secs_f64() <= status.as_secs_f64() * 1.2,
        });
    }

    // 7: the sandbox: one `bash` call of `true` inside it against one outside, through the tool
    // (interleaved, fastest of several batches), and a whole turn of 20 calls through `new -p`
    // with the sandbox on against one with `sandbox.enabled: false`.
    if wanted("sandbox") {
        let (work_sb, data_sb) = (dir("sandbox-work"), dir("sandbox-data"));
        let sandbox = OsSandbox::new(
            Default::default(),
            &work_sb,
            &data_sb,
            PathBuf::from(bin),
            Vec::new(),
            layers::user_dir().into_iter().collect(),
        );
        if sandbox.is_on() {
            let runtime = Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let registry = |os| {
                ToolRegistry::builtin(
                    ToolContext {
                        workdir: Workdir::new(&work_sb).unwrap(),
                        bash_timeout: Duration::from_secs(30),
                        hidden_env: Vec::new(),
                        os_sandbox: os,
                    },
                    &[],
                )
                .unwrap()
            };
            let (inside, outside) = (registry(Some(sandbox.clone())), registry(None));
            let calls = if s.big >= 100_000 { 40 } else { 10 };
            let args = serde_json::json!({"command": "true"});
            let (t_in, t_out) = runtime.block_on(async {
                let (mut t_in, mut t_out) = (Duration::MAX, Duration::MAX);
                for _ in 0..5 {
                    for (registry, best) in [(&inside, &mut t_in), (&outside, &mut t_out)] {
                        let start = Instant::now();
                        for _ in 0..calls {
                            let out = registry.run("bash", &args).await;
                            assert!(out.content.starts_with("Exit code: 0"), "{}", out.content);
                        }
                        *best = (*best).min(start.elapsed() / calls);
                    }
                }
                (t_in, t_out)
            });
            let ratio = t_in.as_secs_f64() / t_out.as_secs_f64();
            rows.push(Row {
                what: "one bash call (`true`) inside the sandbox".into(),
                measured: ms(t_in),
                baseline: format!("unsandboxed {}", ms(t_out)),
                ratio,
                target: "≤ 1.3×".into(),
                ok: ratio <= 1.3,
            });
            let (batch_url, _batch_server) =
                start_batch_server("bash", r#"{"command":"true"}"#, 20);
            let (on_home, off_home) = (dir("sandbox-on-home"), dir("sandbox-off-home"));
            for (home, enabled) in [(&on_home, true), (&off_home, false)] {
                fs::create_dir_all(home.join("new")).unwrap();
                fs::write(
                    home.join("new/config.json"),
                    format!(r#"{{"sandbox": {{"enabled": {enabled}}}}}"#),
                )
                .unwrap();
            }
            let turn = |home: &Path| {
                let mut cmd = Command::new(bin);
                env(&mut cmd, &batch_url);
                cmd.env("XDG_CONFIG_HOME", home)
                    .arg(&work_sb)
                    .arg("default")
                    .arg(&data_sb)
                    .args([
                        "--model",
                        "bench",
                        "--permission-mode",
                        "permissive",
                        "-p",
                        "run",
                    ]);
                run(&mut cmd, b"")
            };
            let (mut on, mut off) = (Duration::MAX, Duration::MAX);
            for _ in 0..s.runs.max(3) {
                on = on.min(turn(&on_home).0);
                off = off.min(turn(&off_home).0);
            }
            let ratio = on.as_secs_f64() / off.as_secs_f64();
            rows.push(Row {
                what: "a turn of 20 bash calls (`new -p`), sandbox on".into(),
                measured: ms(on),
                baseline: format!("sandbox off {}", ms(off)),
                ratio,
                target: "≤ 1.2×".into(),
                ok: ratio <= 1.2,
            });
        } else {
            let line = sandbox_view::one_line(Lang::En, sandbox.state(), sandbox.settings());
            eprintln!("sandbox rows skipped: {line}");
        }
    }

    // 15: the search tools over a generated source tree, against ripgrep on all cores and on one.
    if wanted("search") {
        search_rows(&s, &dir("search-corpus"), &mut rows);
    }

    // 6: storing one message in a small and in a big conversation.
    if wanted("store") {
        generate_big(&store, "hundred", 100);
        let store_one = |id: &str| {
            let (mut session, _) = ChatSession::open(store.clone(), id, "sys").unwrap();
            let adds = 300;
            let start = Instant::now();
            for i in 0..adds {
                session
                    .add(Message::new(Role::User, format!("one more message {i}")))
                    .unwrap();
            }
            start.elapsed() / adds
        };
        let small = best(|| store_one("hundred"), 5);
        let large = best(|| store_one("big"), 5);
        let ratio = large.as_secs_f64() / small.as_secs_f64();
        rows.push(Row {
            what: format!("store one message, {} vs 100 messages", s.big),
            measured: format!("{:.1} µs", large.as_secs_f64() * 1e6),
            baseline: format!("{:.1} µs", small.as_secs_f64() * 1e6),
            ratio,
            target: "flat: ≤ 1.2×".into(),
            ok: ratio <= 1.2,
        });
    }

    // 17 (issue 45): against the other agents, opt-in: their npm packages are installed on first
    // use, and they run in a network namespace of their own.
    let agents_table = if !wanted("agents") {
        None
    } else if env::var("NEW_BENCH_AGENTS").as_deref() == Ok("1") {
        agents_table(Path::new(bin), s.runs.min(5))
    } else {
        if env::var_os("NEW_BENCH_ONLY").is_some() {
            eprintln!("agents: set NEW_BENCH_AGENTS=1 to run the comparison with the other agents");
        }
        None
    };

    let (cores, cpu) = machine();
    let table = table(&rows);
    println!("\n{table}\nmachine: {cores} cores, {cpu}");
    if let Some(agents) = &agents_table {
        println!("\n{agents}");
    }
    let root = &Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = "docs/src/performance.md";
    // The agents' table has a block of its own in the page; a run of that part alone writes
    // only it.
    if let Some(agents) = agents_table.filter(|_| env::args().any(|a| a == "--write-docs")) {
        let path = root.join(doc);
        let text = fs::read_to_string(&path).unwrap();
        let written = replace_between(&text, AGENTS_BEGIN, AGENTS_END, &agents)
            .unwrap_or_else(|| panic!("{doc} has no {AGENTS_BEGIN} … {AGENTS_END} block"));
        fs::write(&path, written).unwrap();
        eprintln!("wrote the agents' table into {doc}");
    }
    // `cargo bench --bench suite -- --write-docs`: the table of this run replaces the one in the
    // performance page, with the run's date, scale and machine.
    if !rows.is_empty() && env::args().any(|a| a == "--write-docs") {
        let whole = env::var_os("NEW_BENCH_ONLY").is_none();
        let scale = if s.big >= 100_000 { "full" } else { "small" };
        let block = format!(
            "{table}\nWritten by `cargo bench --bench suite -- --write-docs` on {} ({}{scale} \
             scale; {cores} cores, {cpu}).\n",
            chrono::Utc::now().format("%Y-%m-%d"),
            if whole { "" } else { "some rows only, " },
        );
        let path = root.join(doc);
        let text = fs::read_to_string(&path).unwrap();
        let written = replace_block(&text, &block)
            .unwrap_or_else(|| panic!("{doc} has no {TABLE_BEGIN} … {TABLE_END} block"));
        fs::write(&path, written).unwrap();
        eprintln!("wrote the table into {doc}");
    }
}

/// The table against the other agents (`suite/agents.rs`).
#[cfg(target_os = "linux")]
fn agents_table(bin: &Path, runs: usize) -> Option<String> {
    agents::table(bin, runs)
}

/// The other agents run in a network namespace of their own: Linux only.
#[cfg(not(target_os = "linux"))]
fn agents_table(_: &Path, _: usize) -> Option<String> {
    eprintln!("agents: the comparison with the other agents runs on Linux only");
    None
}

/// One WebDriver command to ChromeDriver on `port` (JSON over HTTP/1.1): its `value`.
fn webdriver(port: u16, method: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("ChromeDriver listens");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("a request to ChromeDriver");
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let length = head.lines().find_map(|l| {
        l.strip_prefix("content-length:")?
            .trim()
            .parse::<usize>()
            .ok()
    });
    let mut answer = Vec::new();
    match length {
        Some(n) => {
            answer.resize(n, 0);
            stream
                .read_exact(&mut answer)
                .expect("ChromeDriver's answer");
        }
        None => {
            stream
                .read_to_end(&mut answer)
                .expect("ChromeDriver's answer");
        }
    }
    let value: serde_json::Value = serde_json::from_slice(&answer)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", String::from_utf8_lossy(&answer)));
    value["value"].clone()
}

/// Each page (a file, and how many nodes its tree has) opened `runs` times in headless Chromium
/// through ChromeDriver: the fastest time from asking for it to its tree drawn (WebDriver's
/// navigation returns once the page has loaded, and the page draws as it loads; the count of
/// drawn nodes is checked), and its JS heap in bytes after a collection. None (said) when
/// `chromium` and `chromedriver` are not here (`NEW_CHROMIUM`, `NEW_CHROMEDRIVER` name others).
fn drawn_in_chromium(pages: &[(&Path, usize)], runs: usize) -> Option<Vec<(Duration, u64)>> {
    let driver = env::var("NEW_CHROMEDRIVER").unwrap_or("/usr/bin/chromedriver".into());
    let chromium = env::var("NEW_CHROMIUM").unwrap_or("/usr/bin/chromium".into());
    if !Path::new(&driver).exists() || !Path::new(&chromium).exists() {
        eprintln!("web: no {driver} or {chromium}: the page is built, not drawn");
        return None;
    }
    let port = StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Command::new(&driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ChromeDriver starts");
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "ChromeDriver never listened"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let profile = tempfile::tempdir().unwrap();
    let caps = serde_json::json!({"capabilities": {"alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--enable-precise-memory-info", "--js-flags=--expose-gc", "--window-size=1280,800",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        },
    }}});
    let session = webdriver(port, "POST", "/session", &caps)["sessionId"]
        .as_str()
        .expect("a WebDriver session")
        .to_string();
    let at = |path: &str| format!("/session/{session}{path}");
    let mut out = Vec::new();
    for (file, nodes) in pages {
        let url = format!("file://{}", file.display());
        let mut times = Vec::new();
        for _ in 0..runs.max(3) {
            webdriver(
                port,
                "POST",
                &at("/url"),
                &serde_json::json!({"url": "about:blank"}),
            );
            let start = Instant::now();
            webdriver(port, "POST", &at("/url"), &serde_json::json!({"url": url}));
            let drawn = webdriver(
                port,
                "POST",
                &at("/execute/sync"),
                &serde_json::json!({"script":
                    "return document.querySelectorAll('#tree [data-node-id]').length", "args": []}),
            );
            times.push(start.elapsed());
            assert_eq!(
                drawn.as_u64(),
                Some(*nodes as u64),
                "{url}: every node drawn"
            );
        }
        let heap = webdriver(
            port,
            "POST",
            &at("/execute/sync"),
            &serde_json::json!({"script":
                "if (window.gc) gc(); return performance.memory.usedJSHeapSize", "args": []}),
        );
        out.push((fastest(times), heap.as_u64().unwrap_or(0)));
    }
    webdriver(port, "DELETE", &at(""), &serde_json::Value::Null);
    let _ = child.kill();
    let _ = child.wait();
    Some(out)
}

const TABLE_BEGIN: &str = "<!-- bench-table:begin -->";
const TABLE_END: &str = "<!-- bench-table:end -->";

/// This machine as the tables name it: its cores and its processor's model name.
fn machine() -> (usize, String) {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    (thread::available_parallelism().map_or(0, |n| n.get()), cpu)
}

/// The rows as a Markdown table, as the docs show them.
fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| what | measured | compared with | ratio | target | |\n|---|---|---|---|---|---|\n",
    );
    // A `|` inside a cell (a shell pipe in a command) would end the cell: escaped, as GitHub's
    // Markdown and mdBook read `\|`, also inside backticks.
    let cell = |text: &str| text.replace('|', "\\|");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} | {} |\n",
            cell(&r.what),
            cell(&r.measured),
            cell(&r.baseline),
            r.ratio,
            cell(&r.target),
            if r.ok { "met" } else { "MISSED" }
        ));
    }
    out
}

/// `text` with what lies between the table markers replaced by `block`; None without markers.
fn replace_block(text: &str, block: &str) -> Option<String> {
    replace_between(text, TABLE_BEGIN, TABLE_END, block)
}

const AGENTS_BEGIN: &str = "<!-- agents-table:begin -->";
const AGENTS_END: &str = "<!-- agents-table:end -->";

/// `text` with what lies between `begin` and `end` replaced by `block`; None without them.
fn replace_between(text: &str, begin: &str, end: &str, block: &str) -> Option<String> {
    let start = text.find(begin)? + begin.len();
    let stop = start + text[start..].find(end)?;
    Some(format!("{}\n{block}{}", &text[..start], &text[stop..]))
}
