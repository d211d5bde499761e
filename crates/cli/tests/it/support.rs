//! Test support: a scripted OpenAI-compatible server on loopback that streams SSE chunk by chunk,
//! and helpers to drive the `new` binary through piped stdin in a sandboxed home.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::Uri;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing;
use axum::routing::post;
use futures_util::stream;
use serde_json::{Value, json};
use std::env;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Formatter;
use std::fs;
use std::io;
use std::io::ErrorKind;
use std::net;
use std::process::Child;
use std::thread;
use tokio::net::TcpListener;
use tokio::runtime::Builder;
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::sync::mpsc;
use tokio::time;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// SSE `data:` payloads sent one by one, each followed by a pause; the stream then ends normally.
    Sse(Vec<String>),
    /// Same, but the connection is dropped after the payloads, without `[DONE]`.
    Cut(Vec<String>),
    /// Payloads, then a stall of this long before the rest (for interrupt tests).
    SseStall(Vec<String>, Duration, Vec<String>),
    /// An HTTP error status with this body.
    Status(u16, String),
    /// An HTTP error status with this body and these headers.
    StatusWith(u16, String, Vec<(&'static str, String)>),
    /// Payloads sent one by one, each after the first only once the test adds a permit.
    Gated(Vec<String>, Arc<Semaphore>),
    /// The reply is made from the request's body when it arrives.
    With(MakeReply),
}

/// Makes a reply from a request's body.
#[derive(Clone)]
pub struct MakeReply(pub Arc<dyn Fn(&Value) -> Reply + Send + Sync>);

impl Debug for MakeReply {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("<reply made from the request>")
    }
}

/// A reply made from the request's body when it arrives.
pub fn with(make: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Reply {
    Reply::With(MakeReply(Arc::new(make)))
}

/// The system prompt of `new`'s summary requests starts so.
pub const SUMMARIZER_START: &str = "You summarise a conversation";
/// And that of the built-in roles' subagents.
pub const SUBAGENT_START: &str = "You are a subagent";
/// And that of its memory reviews.
pub const REVIEWER_START: &str = "You maintain the memory of a coding assistant";

pub fn chunk_text(text: &str) -> String {
    json!({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":text},"finish_reason":null}]}).to_string()
}

pub fn chunk_finish(reason: &str) -> String {
    json!({"id":"x","choices":[{"index":0,"delta":{},"finish_reason":reason}]}).to_string()
}

pub fn chunk_usage(input: u64, output: u64) -> String {
    json!({"id":"x","choices":[],"usage":{"prompt_tokens":input,"completion_tokens":output,"total_tokens":input+output}}).to_string()
}

/// `reply`'s chunks, each after the first only once the test adds a permit to `gate`.
pub fn gated(reply: Reply, gate: &Arc<Semaphore>) -> Reply {
    let Reply::Sse(chunks) = reply else {
        panic!("an SSE reply")
    };
    Reply::Gated(chunks, gate.clone())
}

/// A plain answer streamed in the given pieces, with usage.
pub fn text(pieces: &[&str]) -> Reply {
    let mut chunks = vec![json!({"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":""}]}).to_string()];
    chunks.extend(pieces.iter().map(|p| chunk_text(p)));
    chunks.push(chunk_finish("stop"));
    chunks.push(chunk_usage(11, pieces.len() as u64));
    chunks.push("[DONE]".into());
    Reply::Sse(chunks)
}

/// An answer asking for tools: (id, name, arguments JSON), each call's arguments split in two
/// fragments, later fragments repeating the id as "" as some servers do.
pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
    let mut chunks = Vec::new();
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let cut = args.len() / 2;
        chunks.push(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":i,"id":id,"type":"function","function":{"name":name,"arguments":&args[..cut]}}]}}]}).to_string());
        chunks.push(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":i,"id":"","function":{"arguments":&args[cut..]}}]}}]}).to_string());
    }
    chunks.push(chunk_finish("tool_calls"));
    chunks.push("[DONE]".into());
    Reply::Sse(chunks)
}

struct Shared {
    /// A context window in tokens (4 characters each): longer requests are refused with the
    /// provider's real error, and usage reports the count.
    window: Mutex<Option<u64>>,
    /// In front of the window, LiteLLM's proxy before llama-server: tokens counted 3 characters
    /// each (a small model's tokenizer, denser than `new`'s estimate), refusals in LiteLLM's
    /// words on both endpoints.
    litellm: Mutex<bool>,
    /// The answer to every summary request, which then takes no scripted reply.
    summary: Mutex<Option<String>>,
    /// The answer to every memory review, after a delay (no changes, at once, unless set). Reviews
    /// run in the background, so they take no scripted reply and are kept apart.
    review: Mutex<Option<(String, Duration)>>,
    reviews: Mutex<Vec<Value>>,
    replies: Mutex<VecDeque<Reply>>,
    /// The window llama-server's `GET /props` tells (none: that route answers 404), and how many
    /// times it was asked.
    props: Mutex<(Option<u64>, usize)>,
    /// How long `GET /props` takes to answer.
    props_delay: Mutex<Duration>,
    /// For each `GET /models`: how many model requests had come before it.
    models_after: Mutex<Vec<usize>>,
    /// Replies to the built-in roles' subagents (their system prompt starts with
    /// [`SUBAGENT_START`]), kept apart when set: they run beside their parent.
    subagent_replies: Mutex<Option<VecDeque<Reply>>>,
    requests: Mutex<Vec<Value>>,
    headers: Mutex<Vec<HeaderMap>>,
}

/// The scripted server. Each request takes the next reply; with none left it answers 500.
pub struct Server {
    pub base_url: String,
    shared: Arc<Shared>,
    _runtime: Runtime,
}

impl Server {
    pub fn start(replies: Vec<Reply>) -> Server {
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let shared = Arc::new(Shared {
            window: Mutex::new(None),
            litellm: Mutex::new(false),
            summary: Mutex::new(None),
            review: Mutex::new(None),
            reviews: Mutex::new(Vec::new()),
            replies: Mutex::new(replies.into()),
            props: Mutex::new((None, 0)),
            props_delay: Mutex::new(Duration::ZERO),
            models_after: Mutex::new(Vec::new()),
            subagent_replies: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            headers: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/messages", post(handle))
            .route("/v1/models", routing::get(models))
            .route("/props", routing::get(props))
            .with_state(shared.clone());
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server {
            base_url: format!("http://{addr}/v1"),
            shared,
            _runtime: runtime,
        }
    }

    /// Gives the server a context window of `tokens` (4 characters each).
    /// Plays llama-server's `GET /props`, telling a context window of `tokens`.
    pub fn serve_props(&self, tokens: u64) {
        self.shared.props.lock().unwrap().0 = Some(tokens);
    }

    /// [`Server::serve_props`], answering after `delay`.
    pub fn serve_props_after(&self, tokens: u64, delay: Duration) {
        self.serve_props(tokens);
        *self.shared.props_delay.lock().unwrap() = delay;
    }

    /// For each `GET /models` asked: how many model requests had come before it.
    pub fn models_asked_after(&self) -> Vec<usize> {
        self.shared.models_after.lock().unwrap().clone()
    }

    /// How many times `GET /props` was asked.
    pub fn props_asked(&self) -> usize {
        self.shared.props.lock().unwrap().1
    }

    pub fn set_window(&self, tokens: u64) {
        *self.shared.window.lock().unwrap() = Some(tokens);
    }

    /// Plays LiteLLM's proxy in front of llama-server with a window of `tokens`: counted 3
    /// characters each ([`count_tokens_litellm`]), a longer request refused in LiteLLM's words
    /// on either endpoint (llama-server's body quoted as a Python dict, the request's count first).
    pub fn behind_litellm(&self, tokens: u64) {
        *self.shared.litellm.lock().unwrap() = true;
        self.set_window(tokens);
    }

    /// Answers every summary request with `text`, outside the script.
    pub fn answer_summaries(&self, text: &str) {
        *self.shared.summary.lock().unwrap() = Some(text.to_string());
    }

    /// Answers every memory review with `text`, `after` a delay, outside the script.
    pub fn answer_reviews(&self, text: &str, after: Duration) {
        *self.shared.review.lock().unwrap() = Some((text.to_string(), after));
    }

    /// Answers the subagents of the built-in roles from `replies`, apart from the script (a
    /// background subagent's requests come between its parent's).
    pub fn answer_subagents(&self, replies: Vec<Reply>) {
        *self.shared.subagent_replies.lock().unwrap() = Some(replies.into());
    }

    /// Every memory review request received so far.
    pub fn reviews(&self) -> Vec<Value> {
        self.shared.reviews.lock().unwrap().clone()
    }

    /// Every request body received so far (memory reviews aside).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The server's root, for providers whose base URL has no version path (Anthropic).
    pub fn root_url(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_string()
    }

    pub fn headers(&self) -> Vec<HeaderMap> {
        self.shared.headers.lock().unwrap().clone()
    }

    /// The (role, content) pairs of request `n`.
    pub fn messages(&self, n: usize) -> Vec<(String, String)> {
        messages_of(&self.requests()[n])
    }
}

/// The content of the last tool result in a request body (empty without one).
pub fn last_result(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// The names of the tools a request body offers.
pub fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The (role, content) pairs of a request body.
pub fn messages_of(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The system prompt of a request body (either protocol).
pub fn system_of(body: &Value) -> &str {
    body["system"]
        .as_str()
        .or_else(|| body["system"][0]["text"].as_str())
        .or_else(|| body["messages"][0]["content"].as_str())
        .unwrap_or("")
}

/// Whether a request body is one of `new`'s summary requests (either protocol).
pub fn is_summary_request(body: &Value) -> bool {
    system_of(body).starts_with(SUMMARIZER_START)
}

/// Whether a request body is one of `new`'s memory reviews.
pub fn is_review_request(body: &Value) -> bool {
    system_of(body).starts_with(REVIEWER_START)
}

/// The tokens of a request as the scripted server counts them: 4 characters each.
pub fn count_tokens(body: &str) -> u64 {
    body.chars().count() as u64 / 4
}

/// The tokens of a request as the scripted server counts them behind LiteLLM: 3 characters each.
pub fn count_tokens_litellm(body: &str) -> u64 {
    body.chars().count() as u64 / 3
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let anthropic = uri.path().ends_with("/messages");
    if is_review_request(&value) {
        shared.reviews.lock().unwrap().push(value);
        let (text, after) = shared
            .review
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| (r#"{"changes": []}"#.to_string(), Duration::ZERO));
        time::sleep(after).await;
        let reply = if anthropic {
            anthropic_text(&[&text])
        } else {
            self::text(&[&text])
        };
        let Reply::Sse(chunks) = reply else {
            unreachable!()
        };
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(
                chunks.iter().map(|c| sse_event(c)).collect::<String>(),
            ))
            .unwrap();
    }
    shared.requests.lock().unwrap().push(value.clone());
    shared.headers.lock().unwrap().push(headers);
    let litellm = *shared.litellm.lock().unwrap();
    let tokens = if litellm {
        count_tokens_litellm(&body)
    } else {
        count_tokens(&body)
    };
    let window = *shared.window.lock().unwrap();
    if let Some(window) = window
        && tokens > window
    {
        // The providers' own words.
        let error = if litellm {
            json!({"error":{"message": format!("litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - Error code: 400 - {{'error': {{'code': 400, 'message': 'the request exceeds the available context size, try increasing it', 'type': 'exceed_context_size_error', 'n_prompt_tokens': {tokens}, 'n_ctx': {window}}}}}\nmodel=claude-local. context_window_fallbacks=None. fallbacks=None.\n\nSet 'context_window_fallback' - https://docs.litellm.ai/docs/routing#fallbacks. Received Model Group=claude-local\nAvailable Model Group Fallbacks=None"),
                "type": null, "param": null, "code": "400"}})
        } else if anthropic {
            json!({"type":"error","error":{"type":"invalid_request_error",
                "message": format!("prompt is too long: {tokens} tokens > {window} maximum")}})
        } else {
            json!({"error":{"message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                "type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})
        };
        return status(400, &error.to_string());
    }
    let summary = shared.summary.lock().unwrap().clone();
    let mut reply = match summary {
        Some(text) if is_summary_request(&value) => Some(if anthropic {
            anthropic_text(&[&text])
        } else {
            self::text(&[&text])
        }),
        _ => match shared.subagent_replies.lock().unwrap().as_mut() {
            Some(lane) if system_of(&value).starts_with(SUBAGENT_START) => lane.pop_front(),
            _ => shared.replies.lock().unwrap().pop_front(),
        },
    };
    if let Some(Reply::With(make)) = &reply {
        reply = Some((make.0)(&value));
    }
    // Usage reports what was counted.
    if window.is_some()
        && let Some(Reply::Sse(chunks)) = &mut reply
    {
        for chunk in chunks.iter_mut() {
            if let Ok(mut v) = serde_json::from_str::<Value>(chunk) {
                if v["usage"]["prompt_tokens"].is_u64() {
                    v["usage"]["prompt_tokens"] = json!(tokens);
                }
                if v["message"]["usage"]["input_tokens"].is_u64() {
                    v["message"]["usage"] = json!({"input_tokens": tokens, "output_tokens": 1});
                }
                *chunk = v.to_string();
            }
        }
    }
    if let Some(Reply::Gated(chunks, gate)) = &reply {
        let (chunks, gate) = (chunks.clone(), gate.clone());
        let (tx, rx) = mpsc::channel::<Result<String, io::Error>>(1);
        tokio::spawn(async move {
            for (i, c) in chunks.iter().enumerate() {
                if i > 0 {
                    gate.acquire().await.unwrap().forget();
                }
                if tx.send(Ok(sse_event(c))).await.is_err() {
                    return;
                }
            }
        });
        let stream = stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap();
    }
    let (before, stall, after, end_clean) = match reply {
        None => {
            return status(
                500,
                r#"{"error":{"message":"the script has no more replies"}}"#,
            );
        }
        Some(Reply::Status(code, body)) => return status(code, &body),
        Some(Reply::StatusWith(code, body, headers)) => {
            let mut response = status(code, &body);
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            return response;
        }
        Some(Reply::Sse(chunks)) => (chunks, Duration::ZERO, Vec::new(), true),
        Some(Reply::Cut(chunks)) => (chunks, Duration::ZERO, Vec::new(), false),
        Some(Reply::SseStall(a, d, b)) => (a, d, b, true),
        Some(Reply::Gated(..)) | Some(Reply::With(..)) => unreachable!("handled above"),
    };
    let (tx, rx) = mpsc::channel::<Result<String, io::Error>>(4);
    tokio::spawn(async move {
        for c in before {
            if tx.send(Ok(sse_event(&c))).await.is_err() {
                return;
            }
            time::sleep(Duration::from_millis(5)).await;
        }
        time::sleep(stall).await;
        for c in after {
            if tx.send(Ok(sse_event(&c))).await.is_err() {
                return;
            }
        }
        if !end_clean {
            let _ = tx.send(Err(io::Error::other("cut"))).await;
        }
    });
    let stream = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// One SSE event; payloads with a `type` (Anthropic's) get the matching `event:` line too.
fn sse_event(payload: &str) -> String {
    match serde_json::from_str::<Value>(payload)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_string))
    {
        Some(kind) => format!("event: {kind}\ndata: {payload}\n\n"),
        None => format!("data: {payload}\n\n"),
    }
}

async fn props(State(shared): State<Arc<Shared>>) -> Response {
    let delay = *shared.props_delay.lock().unwrap();
    time::sleep(delay).await;
    let window = {
        let mut props = shared.props.lock().unwrap();
        props.1 += 1;
        props.0
    };
    match window {
        Some(n) => status(
            200,
            &json!({"default_generation_settings": {"n_ctx": n}}).to_string(),
        ),
        None => status(404, r#"{"error":"not found"}"#),
    }
}

async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.headers.lock().unwrap().push(headers);
    let before = shared.requests.lock().unwrap().len();
    shared.models_after.lock().unwrap().push(before);
    status(
        200,
        r#"{"object":"list","data":[{"id":"model-b","object":"model"},{"id":"model-a","object":"model","display_name":"Model A"}]}"#,
    )
}

/// Anthropic stream events for a plain text answer, with usage.
pub fn anthropic_text(pieces: &[&str]) -> Reply {
    let mut events = vec![
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":20,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,"output_tokens":1}}}).to_string(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}).to_string(),
        json!({"type":"ping"}).to_string(),
    ];
    for p in pieces {
        events.push(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":p}})
                .to_string(),
        );
    }
    events.push(json!({"type":"content_block_stop","index":0}).to_string());
    events.push(json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":pieces.len()}}).to_string());
    events.push(json!({"type":"message_stop"}).to_string());
    Reply::Sse(events)
}

/// Anthropic stream events asking for tools: (id, name, input JSON) split into two deltas each.
pub fn anthropic_tools(calls: &[(&str, &str, &str)]) -> Reply {
    let mut events = vec![json!({"type":"message_start","message":{"id":"msg_2","usage":{"input_tokens":30,"output_tokens":1}}}).to_string()];
    for (i, (id, name, input)) in calls.iter().enumerate() {
        let cut = input.len() / 2;
        events.push(json!({"type":"content_block_start","index":i,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}).to_string());
        events.push(json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":&input[..cut]}}).to_string());
        events.push(json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":&input[cut..]}}).to_string());
        events.push(json!({"type":"content_block_stop","index":i}).to_string());
    }
    events.push(json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}).to_string());
    events.push(json!({"type":"message_stop"}).to_string());
    Reply::Sse(events)
}

fn status(code: u16, body: &str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The tool results the model got in request `n`, in order.
pub fn results(server: &Server, n: usize) -> Vec<String> {
    results_of(&server.requests()[n])
}

/// The tool results in a request body, in order.
pub fn results_of(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

/// Whether `done` becomes true within `tries` checks `every` apart (for what happens in another
/// process: a server started, a file written).
pub fn eventually(tries: u32, every: Duration, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if done() {
            return true;
        }
        thread::sleep(every);
    }
    done()
}

/// A loopback port nothing listens on (it was free a moment ago).
pub fn unused_port() -> u16 {
    net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A sandbox for one test: a working folder, a data folder and a private home.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        for d in ["work", "data", "home", "xdg-data", "xdg-config"] {
            fs::create_dir_all(env.dir.path().join(d)).unwrap();
        }
        // Retries wait milliseconds, not seconds, in tests.
        env.write_config(r#"{"retry_initial_ms": 5}"#);
        env
    }

    /// Replaces the user config file.
    pub fn write_config(&self, json: &str) {
        fs::create_dir_all(self.config_dir()).unwrap();
        fs::write(self.config_dir().join("config.json"), json).unwrap();
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("xdg-config/new")
    }

    /// The `new` command with a clean environment: no key, no colour, English, private dirs.
    pub fn command(&self, base_url: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_new"));
        cmd.env_clear()
            .env("PATH", env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_DATA_HOME", self.dir.path().join("xdg-data"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("xdg-config"))
            .env("LANG", "C")
            .env("NO_COLOR", "1")
            .env("OPENAI_BASE_URL", base_url)
            .current_dir(self.work());
        cmd
    }

    /// Runs `new WORK default DATA [extra]` with `stdin` piped in.
    pub fn run(&self, base_url: &str, extra: &[&str], stdin: &str) -> Run {
        let mut cmd = self.command(base_url);
        cmd.arg(self.work())
            .arg("default")
            .arg(self.data())
            .args(extra);
        run_with_stdin(cmd, stdin)
    }

    /// Starts `new WORK default DATA` with every stream piped, for a test that writes its input
    /// over time and signals the process.
    pub fn spawn(&self, base_url: &str) -> Child {
        let mut cmd = self.command(base_url);
        cmd.arg(self.work())
            .arg("default")
            .arg(self.data())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    }

    /// The conversation files in DATADIR.
    pub fn conversation_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = fs::read_dir(self.data())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        files
    }

    /// The only conversation file's lines, parsed.
    pub fn only_conversation(&self) -> (String, Vec<Value>) {
        let files = self.conversation_files();
        assert_eq!(files.len(), 1, "expected one conversation file: {files:?}");
        let id = files[0].file_stem().unwrap().to_string_lossy().into_owned();
        (id, read_lines(&files[0]))
    }
}

pub fn read_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
}

impl Debug for Run {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn run_with_stdin(mut cmd: Command, stdin: &str) -> Run {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A program that exits before reading all its input (a bad config, say) closes the pipe early.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    Run {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        code: status.code(),
    }
}

#[cfg(unix)]
/// Whether any process has `marker` in its command line.
pub fn running(marker: &str) -> bool {
    fs::read_dir("/proc").unwrap().flatten().any(|e| {
        fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

/// The tree drawing printed last in `run`, below its `[0] system` line.
pub fn last_tree(run: &Run) -> Vec<String> {
    let text = run.stdout.rsplit("[0] system").next().unwrap();
    text.lines()
        .skip(1)
        .take_while(|l| l.contains('['))
        .map(str::to_string)
        .collect()
}

/// The text of the last user message of a request the scripted server received.
pub fn last_user_text(request: &serde_json::Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `text` with the ids that name nodes beside their numbers left out (`[4 · 3fa9c1d2]` reads
/// `[4]`), for tests about the numbers alone.
pub fn without_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" · ") {
        let after = &rest[at + " · ".len()..];
        let id_len = after.find(']').filter(|&end| {
            end > 0
                && after[..end]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
        let before_is_number = rest[..at]
            .rsplit('[')
            .next()
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        match id_len {
            Some(end) if before_is_number => {
                out.push_str(&rest[..at]);
                rest = &after[end..];
            }
            _ => {
                out.push_str(&rest[..at + " · ".len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
