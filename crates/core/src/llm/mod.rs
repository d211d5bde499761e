//! Language-model providers: the OpenAI-compatible Chat Completions client and the Anthropic
//! Messages client (both streaming over SSE), retries, and the types every provider shares. This
//! module knows nothing of how conversations are stored: it takes a list of [`ChatMessage`]s and
//! returns one [`ChatResponse`], reporting text as it arrives.

pub mod anthropic;
pub mod body;
pub mod openai;
pub mod overflow;
pub mod sse;
pub mod types;

use std::time::Duration;

use crate::http;
use reqwest::header::HeaderMap;
use std::fmt;
use std::fmt::Debug;
use std::fmt::Display;
use std::fmt::Formatter;
use std::future::Future;
use std::iter;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Instant;
use tokio::time;
pub use types::*;

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// When and how often to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (2: three attempts in all).
    pub max_retries: u32,
    /// The first delay; each retry doubles it, with ±25 % jitter.
    pub initial_delay: Duration,
    /// A server asking for a longer wait than this gets no retry: the error says when to try.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0-based): the server's `Retry-After` when given,
    /// otherwise exponential backoff with jitter.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after;
        }
        let base = self.initial_delay.saturating_mul(1u32 << retry.min(16));
        // Jitter from a UUID's random bits: no extra dependency for one random number.
        let unit = (uuid::Uuid::new_v4().as_u128() % 1000) as f64 / 1000.0;
        base.mul_f64(0.75 + unit * 0.5).min(self.max_delay)
    }
}

/// Everything needed to reach one provider. Built by [`crate::config`].
#[derive(Clone)]
pub struct ProviderSettings {
    /// The name the user knows it by (`openai`, `anthropic`, `deepseek`, ...).
    pub name: String,
    pub kind: ProviderKind,
    /// OpenAI-compatible: includes the version path (`https://api.openai.com/v1`).
    /// Anthropic: the host root (`https://api.anthropic.com`); a trailing `/v1` is tolerated.
    pub base_url: String,
    pub api_key: Option<String>,
    /// The variable a user sets for the key, named in messages.
    pub api_key_var: String,
    /// The variable a user sets for the base URL, named in messages.
    pub base_url_var: String,
    pub connect_timeout: Duration,
    /// How long a stream may stay silent before it counts as cut.
    pub idle_timeout: Duration,
    /// Ask for token usage in the stream (`stream_options.include_usage`, OpenAI-compatible).
    pub stream_usage: bool,
    /// The host needs a key (official APIs do; a local server does not).
    pub key_required: bool,
    pub retry: RetryPolicy,
    /// Most tokens per answer (Anthropic requires it).
    pub max_tokens: u32,
    /// Anthropic extended thinking: the token budget, when enabled.
    pub thinking_budget: Option<u32>,
    /// Mark the stable prefix for prompt caching (Anthropic `cache_control`).
    pub prompt_cache: bool,
    /// The most bytes one answer (or error body) may take: a server that streams without end must
    /// not exhaust memory.
    pub max_answer_bytes: usize,
}

impl ProviderSettings {
    /// The most tokens to ask for in one answer: `max_tokens`, or less when the request says the
    /// context window leaves less.
    pub fn answer_cap(&self, request: &ChatRequest<'_>) -> u32 {
        request
            .max_tokens
            .map_or(self.max_tokens, |room| room.min(self.max_tokens))
    }
}

impl Debug for ProviderSettings {
    // Hand-written so that the key can never reach a log or an error message.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// What to do about a failed HTTP answer; shown after its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    None,
    /// 401, 403: the key in this variable.
    Key {
        var: String,
    },
    /// 404: the model name, and the base URL in this variable (its shape differs by protocol).
    Model {
        model: String,
        var: String,
        kind: ProviderKind,
    },
    /// 429 that waiting cures.
    RateLimited,
    /// 429 from a spent quota or budget.
    Quota,
    /// 5xx.
    ServerFailed,
}

impl Display for Hint {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Hint::None => Ok(()),
            Hint::Key { var } => write!(f, "; check {var} (the API key)"),
            Hint::Model {
                model,
                var,
                kind: ProviderKind::OpenAi,
            } => write!(
                f,
                "; check the model name `{model}` (--model) and {var} (it usually ends in /v1)"
            ),
            Hint::Model {
                model,
                var,
                kind: ProviderKind::Anthropic,
            } => write!(
                f,
                "; check the model name `{model}` (--model) and {var} (the host root, without /v1)"
            ),
            Hint::RateLimited => write!(f, "; rate limited: wait a little"),
            Hint::Quota => write!(
                f,
                "; the account's quota or budget is spent: check your plan"
            ),
            Hint::ServerFailed => write!(f, "; the server failed: try again later"),
        }
    }
}

/// Why a request failed. Each variant's text says what happened and what the user can do.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("no API key for provider `{provider}`: set {var} (or `api_key` in the config file)")]
    MissingKey { provider: String, var: String },
    #[error("cannot reach {url}: {reason}. Is the server running? Check {var}")]
    Connect {
        url: String,
        reason: String,
        var: String,
    },
    #[error("{url} answered {status}: {message}{hint}")]
    Http {
        status: u16,
        url: String,
        message: String,
        /// What to do about it.
        hint: Box<Hint>,
        /// From the `Retry-After` header.
        retry_after: Option<Duration>,
        /// Whether trying again can help (429 without a spend limit, 5xx, 529).
        retryable: bool,
    },
    #[error("the server reported an error during the answer: {message}")]
    Server { message: String, retryable: bool },
    #[error("the answer stream was cut: {0}")]
    StreamCut(String),
    #[error(
        "{url} accepted the request but sent nothing for {secs} s (idle timeout; `idle_timeout_secs` in the config sets it)"
    )]
    Silent { url: String, secs: u64 },
    #[error("could not build the HTTP client: {0}")]
    Client(String),
    #[error("{url} refused the request as longer than the model's context window{}: {message}", .window.map(|n| format!(" ({n} tokens)")).unwrap_or_default())]
    ContextOverflow {
        url: String,
        message: String,
        /// The window the error names, when it does.
        window: Option<u64>,
        /// The request's tokens as the server counted them, when the error says.
        tokens: Option<u64>,
    },
}

impl LlmError {
    /// Whether the server refused the request as too long for the model's context window.
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, LlmError::ContextOverflow { .. })
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Connect { .. } | LlmError::Silent { .. } => true,
            LlmError::Http { retryable, .. } | LlmError::Server { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// The same error with `secret` (the API key) and any `Bearer` token removed from its text: a
    /// server that echoes the request's headers back in an error must not put the key on screen.
    pub fn redacted(self, secret: Option<&str>) -> Self {
        let clean = |text: String| redact(&text, secret);
        match self {
            LlmError::Connect { url, reason, var } => LlmError::Connect {
                url: clean(url),
                reason: clean(reason),
                var,
            },
            LlmError::Http {
                status,
                url,
                message,
                hint,
                retry_after,
                retryable,
            } => LlmError::Http {
                status,
                url: clean(url),
                message: clean(message),
                hint,
                retry_after,
                retryable,
            },
            LlmError::Server { message, retryable } => LlmError::Server {
                message: clean(message),
                retryable,
            },
            LlmError::StreamCut(reason) => LlmError::StreamCut(clean(reason)),
            LlmError::Client(reason) => LlmError::Client(clean(reason)),
            LlmError::Silent { url, secs } => LlmError::Silent {
                url: clean(url),
                secs,
            },
            LlmError::ContextOverflow {
                url,
                message,
                window,
                tokens,
            } => LlmError::ContextOverflow {
                url: clean(url),
                message: clean(message),
                window,
                tokens,
            },
            other @ LlmError::MissingKey { .. } => other,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// What went wrong in a few fixed words and numbers, for the log: never the server's text,
    /// which may echo the request (or, from a careless proxy, its headers).
    pub fn kind(&self) -> String {
        match self {
            LlmError::MissingKey { .. } => "missing key".into(),
            LlmError::Connect { .. } => "connection failed".into(),
            LlmError::Http { status, .. } => format!("http {status}"),
            LlmError::Server { .. } => "server error".into(),
            LlmError::StreamCut(_) => "stream cut".into(),
            LlmError::Silent { secs, .. } => format!("silent for {secs} s"),
            LlmError::Client(_) => "client error".into(),
            LlmError::ContextOverflow { .. } => "context overflow".into(),
        }
    }

    /// A few words for the retry notice.
    fn short_reason(&self) -> String {
        match self {
            LlmError::Connect { reason, .. } => reason.clone(),
            LlmError::Http {
                status, message, ..
            } => format!("{status} {}", first_words(message)),
            LlmError::Server { message, .. } => first_words(message),
            other => first_words(&other.to_string()),
        }
    }
}

/// One line in the log for a request that ended: who was asked, how long the answer took
/// (retries and their waits included), and what came back, in counts.
fn log_request(
    s: &ProviderSettings,
    model: &str,
    started: Instant,
    retries: u32,
    result: &Result<ChatResponse, LlmError>,
) {
    let ms = started.elapsed().as_millis() as u64;
    let (provider, kind) = (s.name.as_str(), s.kind.as_str());
    match result {
        Ok(r) => {
            let usage = r.usage.clone().unwrap_or_default();
            tracing::info!(
                provider,
                kind,
                model,
                ms,
                status = "ok",
                retries,
                input_tokens = usage.input_tokens,
                output_tokens = usage.output_tokens,
                cache_read_tokens = usage.cache_read_tokens.unwrap_or(0),
                tool_calls = r.tool_calls.len(),
                finish = r.finish_reason.as_deref().unwrap_or(""),
                "llm request"
            );
        }
        Err(e) => tracing::warn!(
            provider,
            kind,
            model,
            ms,
            status = "error",
            retries,
            error = e.kind(),
            "llm request"
        ),
    }
}

/// `text` with every occurrence of `secret` and every `Bearer` token replaced by `[redacted]`.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    let mut out = match secret.map(str::trim).filter(|k| k.len() >= 4) {
        Some(key) => text.replace(key, "[redacted]"),
        None => text.to_string(),
    };
    let mut from = 0;
    while let Some(at) = find_ignore_case(&out[from..], "bearer ") {
        let start = from + at + "bearer ".len();
        if out[start..].starts_with("[redacted]") {
            from = start;
            continue;
        }
        let len = out[start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '}' | ']'))
            .unwrap_or(out.len() - start);
        if len > 0 {
            out.replace_range(start..start + len, "[redacted]");
        }
        from = start;
    }
    out
}

fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

fn first_words(text: &str) -> String {
    let mut out: String = text.chars().take(80).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// Whether an HTTP status may be cured by waiting. A 429 caused by a spent quota or budget is not.
pub(crate) fn status_is_retryable(status: u16, body: &str) -> bool {
    match status {
        429 => {
            let body = body.to_ascii_lowercase();
            !["insufficient_quota", "quota", "billing", "credit", "spend"]
                .iter()
                .any(|w| body.contains(w))
        }
        408 | 409 | 500..=599 => true,
        _ => false,
    }
}

/// Reads `Retry-After` (seconds, or an HTTP date) and the `retry-after-ms` some APIs send.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        return Some(Duration::from_secs_f64((ms / 1000.0).max(0.0)));
    }
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// A model the server offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub id: String,
    pub description: Option<String>,
}

/// The answer to a chat request, once streamed to the end.
pub type ChatFuture<'a> = Pin<Box<dyn Future<Output = Result<ChatResponse, LlmError>> + 'a>>;

/// What the agent loop talks to: a provider, or in tests a scripted model in the same process.
pub trait Model {
    /// The JSON body this model's provider sends for `request`: `/dump` writes exactly this.
    fn request_body(&self, request: &ChatRequest<'_>) -> serde_json::Value;
    /// Sends one request and streams the answer, calling `on_event` for each piece as it arrives.
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest<'_>,
        on_event: &'a mut dyn FnMut(StreamEvent<'_>),
    ) -> ChatFuture<'a>;
    /// The same model for another thread (a subagent's): same server, same settings, the
    /// same connections where the client pools them.
    fn share(&self) -> Arc<dyn Model + Send + Sync>;
    /// A turn has ended: what was kept for its next request (the last body sent, whose
    /// messages the next round repeats) is let go.
    fn turn_ended(&self) {}
}

impl Model for Provider {
    fn request_body(&self, request: &ChatRequest<'_>) -> serde_json::Value {
        match self {
            Provider::OpenAi(c) => openai::request_body(request, c.settings()),
            Provider::Anthropic(c) => anthropic::request_body(request, c.settings()),
        }
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest<'_>,
        on_event: &'a mut dyn FnMut(StreamEvent<'_>),
    ) -> ChatFuture<'a> {
        Box::pin(Provider::chat(self, request, on_event))
    }

    fn share(&self) -> Arc<dyn Model + Send + Sync> {
        Arc::new(self.clone())
    }

    fn turn_ended(&self) {
        match self {
            Provider::OpenAi(c) => c.turn_ended(),
            Provider::Anthropic(c) => c.turn_ended(),
        }
    }
}

/// A configured provider client. Clones share the HTTP client (and its connections).
#[derive(Clone)]
pub enum Provider {
    OpenAi(openai::OpenAiClient),
    Anthropic(anthropic::AnthropicClient),
}

impl Provider {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        match settings.kind {
            ProviderKind::OpenAi => Ok(Provider::OpenAi(openai::OpenAiClient::new(settings)?)),
            ProviderKind::Anthropic => Ok(Provider::Anthropic(anthropic::AnthropicClient::new(
                settings,
            )?)),
        }
    }

    pub fn settings(&self) -> &ProviderSettings {
        match self {
            Provider::OpenAi(c) => c.settings(),
            Provider::Anthropic(c) => c.settings(),
        }
    }

    /// Whether the provider has a reasoning level to set: Anthropic's extended thinking budget
    /// (an OpenAI-compatible server gets none from `new`).
    pub fn has_thinking_budget(&self) -> bool {
        matches!(self, Provider::Anthropic(_))
    }

    /// The thinking budget from the next request on (None: off); nothing for a provider without
    /// one.
    pub fn set_thinking_budget(&mut self, budget: Option<u32>) {
        if let Provider::Anthropic(c) = self {
            c.set_thinking_budget(budget);
        }
    }

    /// The context window the server reports, where it does (llama.cpp's server).
    pub async fn server_window(&self) -> Option<u64> {
        match self {
            Provider::OpenAi(c) => c.server_window().await,
            Provider::Anthropic(_) => None,
        }
    }

    /// Sends one request and streams the answer, calling `on_event` for each piece as it arrives.
    /// Failures that a retry may cure, and that happen before any of the answer arrived, are tried
    /// again per the provider's [`RetryPolicy`], each retry announced as a [`StreamEvent::Retry`].
    pub async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<ChatResponse, LlmError> {
        let s = self.settings();
        if s.api_key.is_none() && s.key_required {
            return Err(LlmError::MissingKey {
                provider: s.name.clone(),
                var: s.api_key_var.clone(),
            });
        }
        let policy = s.retry;
        let mut retry = 0;
        let started = Instant::now();
        loop {
            tracing::debug!(
                provider = s.name.as_str(),
                model = request.model.as_str(),
                messages = request.messages.len(),
                tools = request.tools.len(),
                attempt = retry + 1,
                "llm request sent"
            );
            let mut received = false;
            let result = {
                let mut inner = |event: StreamEvent<'_>| {
                    received = true;
                    on_event(event)
                };
                match self {
                    Provider::OpenAi(c) => c.chat(request, &mut inner).await,
                    Provider::Anthropic(c) => c.chat(request, &mut inner).await,
                }
            };
            let error = match result.map_err(|e| e.redacted(s.api_key.as_deref())) {
                Err(e) if !received && retry < policy.max_retries && e.is_retryable() => e,
                other => {
                    log_request(s, &request.model, started, retry, &other);
                    return other;
                }
            };
            let delay = policy.delay(retry, error.retry_after());
            if delay > policy.max_delay {
                let error = Err(error);
                log_request(s, &request.model, started, retry, &error);
                return error;
            }
            retry += 1;
            tracing::warn!(
                provider = s.name.as_str(),
                model = request.model.as_str(),
                attempt = retry + 1,
                of = policy.max_retries + 1,
                reason = error.kind(),
                wait_ms = delay.as_millis() as u64,
                "llm retry"
            );
            let reason = error.short_reason();
            on_event(StreamEvent::Retry {
                attempt: retry + 1,
                of: policy.max_retries + 1,
                delay,
                reason: &reason,
            });
            time::sleep(delay).await;
        }
    }

    /// The models the server offers (`GET /models`), sorted by id.
    pub async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let key = self.settings().api_key.as_deref();
        let mut models = match self {
            Provider::OpenAi(c) => c.models().await,
            Provider::Anthropic(c) => c.models().await,
        }
        .map_err(|e| e.redacted(key))?;
        models.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(models)
    }
}

/// The HTTP client, built on first use: building it loads the system's root certificates, which
/// start-up should not wait for. A plain-`http` base URL (a local server) gets no certificates at all.
#[derive(Clone)]
pub(crate) struct LazyClient {
    connect_timeout: Duration,
    plain_http: bool,
    cell: Arc<OnceLock<Result<reqwest::Client, String>>>,
}

impl LazyClient {
    pub(crate) fn new(settings: &ProviderSettings) -> Self {
        LazyClient {
            connect_timeout: settings.connect_timeout,
            plain_http: settings.base_url.trim_start().starts_with("http://"),
            cell: Default::default(),
        }
    }

    pub(crate) fn get(&self) -> Result<&reqwest::Client, LlmError> {
        self.cell
            .get_or_init(|| {
                let mut builder = http::builder().connect_timeout(self.connect_timeout);
                if self.plain_http {
                    builder = builder.tls_certs_only(iter::empty());
                }
                builder.build().map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| LlmError::Client(e.clone()))
    }
}

/// Shared by the clients: a short, single-line excerpt of a response body.
pub(crate) fn preview(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_string();
    }
    let mut out: String = text.chars().take(300).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// What a chat request brought back.
pub(crate) enum Reply {
    /// An event stream, as asked.
    Stream(reqwest::Response),
    /// The whole answer at once, from a server that ignored `stream: true`.
    Whole(String),
}

/// Shared by the clients: sends a chat request; an answer other than 2xx becomes the error that
/// says what to do.
pub(crate) async fn send_chat(
    builder: reqwest::RequestBuilder,
    url: &str,
    s: &ProviderSettings,
    model: &str,
) -> Result<Reply, LlmError> {
    let response = send(
        builder
            .header("content-type", "application/json")
            .header("accept", "text/event-stream"),
        url,
        s,
    )
    .await?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let wait = retry_after(response.headers());
        // An error body is read only so far: its first 64 KB say what went wrong.
        let text = read_body(response, s.idle_timeout, 64 * 1024, url, Overlong::Cut)
            .await
            .unwrap_or_default();
        return Err(http_error(status, url, &text, s, model, wait));
    }
    let is_stream = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("event-stream"));
    if is_stream {
        return Ok(Reply::Stream(response));
    }
    let text = read_body(
        response,
        s.idle_timeout,
        s.max_answer_bytes,
        url,
        Overlong::Refuse,
    )
    .await?;
    Ok(Reply::Whole(text))
}

/// Sends a request. The idle timeout runs from the moment it is sent: a server that accepts the
/// connection and then says nothing must not hang the session.
async fn send(
    request: reqwest::RequestBuilder,
    url: &str,
    s: &ProviderSettings,
) -> Result<reqwest::Response, LlmError> {
    time::timeout(s.idle_timeout, request.send())
        .await
        .map_err(|_| silent(url, s.idle_timeout))?
        .map_err(|e| LlmError::Connect {
            url: url.to_string(),
            reason: http::describe_error(&e),
            var: s.base_url_var.clone(),
        })
}

fn silent(url: &str, idle: Duration) -> LlmError {
    LlmError::Silent {
        url: url.to_string(),
        secs: idle.as_secs(),
    }
}

/// What to do with a body longer than the most taken.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overlong {
    /// Keep its start (an error body: the start says what went wrong).
    Cut,
    /// An error (an answer: half of one is no answer).
    Refuse,
}

/// A whole body, read chunk by chunk: silence longer than `idle` is an error, and so is a body over
/// `max` bytes unless it is to be cut there.
async fn read_body(
    mut response: reqwest::Response,
    idle: Duration,
    max: usize,
    url: &str,
    overlong: Overlong,
) -> Result<String, LlmError> {
    let mut bytes = Vec::new();
    loop {
        let chunk = time::timeout(idle, response.chunk())
            .await
            .map_err(|_| silent(url, idle))?
            .map_err(|e| LlmError::StreamCut(http::describe_error(&e)))?;
        let Some(chunk) = chunk else { break };
        let room = max.saturating_sub(bytes.len());
        if chunk.len() > room {
            if overlong == Overlong::Refuse {
                return Err(too_big(max));
            }
            bytes.extend_from_slice(&chunk[..room]);
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn too_big(max: usize) -> LlmError {
    LlmError::StreamCut(format!(
        "the answer passed {} MB, the most `new` takes (`max_answer_mb` in the config)",
        max / (1024 * 1024)
    ))
}

/// Shared by the clients: feeds the events of a stream to `apply` as they arrive, until it says
/// the answer is complete (then true) or the stream ends (then false). Silence longer than `idle`
/// cuts the stream.
pub(crate) async fn read_events(
    mut response: reqwest::Response,
    idle: Duration,
    max_bytes: usize,
    apply: &mut dyn FnMut(&sse::SseEvent) -> Result<bool, LlmError>,
) -> Result<bool, LlmError> {
    let mut decoder = sse::SseDecoder::new();
    let mut received = 0usize;
    loop {
        let chunk = time::timeout(idle, response.chunk())
            .await
            .map_err(|_| {
                LlmError::StreamCut(format!("no data for {} s (idle timeout)", idle.as_secs()))
            })?
            .map_err(|e| LlmError::StreamCut(http::describe_error(&e)))?;
        let Some(chunk) = chunk else { break };
        received += chunk.len();
        if received > max_bytes {
            return Err(too_big(max_bytes));
        }
        for event in decoder.feed(&chunk) {
            if apply(&event)? {
                return Ok(true);
            }
        }
    }
    match decoder.finish() {
        Some(event) => apply(&event),
        None => Ok(false),
    }
}

/// Shared by the clients: a whole answer that is not the JSON it should be.
pub(crate) fn unreadable(error: serde_json::Error, text: &str) -> LlmError {
    LlmError::Server {
        message: format!("unreadable answer ({error}): {}", preview(text)),
        retryable: false,
    }
}

/// Shared by the clients: a failed HTTP answer as an error that says what to do.
pub(crate) fn http_error(
    status: u16,
    url: &str,
    body: &str,
    s: &ProviderSettings,
    model: &str,
    retry_after: Option<Duration>,
) -> LlmError {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").map(error_text))
        .unwrap_or_else(|| preview(body));
    if matches!(status, 400 | 413 | 422 | 500) && overflow::is_overflow(body) {
        return LlmError::ContextOverflow {
            url: url.to_string(),
            window: overflow::window_named_in(body),
            tokens: overflow::tokens_named_in(body),
            message,
        };
    }
    let hint = Box::new(match status {
        401 | 403 => Hint::Key {
            var: s.api_key_var.clone(),
        },
        404 => Hint::Model {
            model: model.to_string(),
            var: s.base_url_var.clone(),
            kind: s.kind,
        },
        429 if status_is_retryable(status, body) => Hint::RateLimited,
        429 => Hint::Quota,
        500..=599 => Hint::ServerFailed,
        _ => Hint::None,
    });
    LlmError::Http {
        status,
        url: url.to_string(),
        message,
        hint,
        retry_after,
        retryable: status_is_retryable(status, body),
    }
}

/// Shared by the clients: `GET …/models`, answered with `{"data":[{"id":…}]}`.
pub(crate) async fn list_models(
    url: String,
    request: reqwest::RequestBuilder,
    s: &ProviderSettings,
) -> Result<Vec<ModelInfo>, LlmError> {
    use serde_json::Value;
    let response = send(request, &url, s).await?;
    let status = response.status().as_u16();
    let wait = retry_after(response.headers());
    let text = read_body(
        response,
        s.idle_timeout,
        s.max_answer_bytes,
        &url,
        Overlong::Refuse,
    )
    .await?;
    if !(200..300).contains(&status) {
        return Err(http_error(status, &url, &text, s, "-", wait));
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| LlmError::Server {
        message: format!("unreadable model list ({e}): {}", preview(&text)),
        retryable: false,
    })?;
    let list = value
        .get("data")
        .or_else(|| value.get("models"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(list
        .iter()
        .filter_map(|m| {
            let id = m.get("id").or_else(|| m.get("name"))?.as_str()?.to_string();
            let description = m
                .get("display_name")
                .and_then(Value::as_str)
                .map(str::to_string);
            Some(ModelInfo { id, description })
        })
        .collect())
}

/// Shared by the clients: the text of an `{"error": ...}` value, whatever its shape.
pub(crate) fn error_text(error: &serde_json::Value) -> String {
    error
        .get("message")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
        .or_else(|| error.as_str().map(str::to_string))
        .unwrap_or_else(|| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderMap;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let p = RetryPolicy::default();
        for retry in 0..4 {
            let d = p.delay(retry, None).as_secs_f64();
            let base = 0.5 * f64::from(1u32 << retry);
            assert!(d >= base * 0.75 && d <= base * 1.25, "{retry}: {d}");
        }
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert!(p.delay(30, None) <= p.max_delay);
    }

    #[test]
    fn which_statuses_are_worth_a_retry() {
        assert!(status_is_retryable(
            429,
            r#"{"error":{"type":"rate_limit_error"}}"#
        ));
        assert!(!status_is_retryable(
            429,
            r#"{"error":{"code":"insufficient_quota"}}"#
        ));
        for s in [500, 502, 503, 529] {
            assert!(status_is_retryable(s, ""), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!status_is_retryable(s, ""), "{s}");
        }
    }

    #[test]
    fn keys_and_bearer_tokens_are_redacted() {
        let key = "sk-secret-123456";
        for (text, want) in [
            ("bad key sk-secret-123456!", "bad key [redacted]!"),
            (
                "got Authorization: Bearer sk-secret-123456 here",
                "got Authorization: Bearer [redacted] here",
            ),
            (
                r#"{"headers":{"authorization":"Bearer other-token"}}"#,
                r#"{"headers":{"authorization":"Bearer [redacted]"}}"#,
            ),
            (
                "x-api-key=sk-secret-123456&sk-secret-123456",
                "x-api-key=[redacted]&[redacted]",
            ),
            ("BEARER abc def", "BEARER [redacted] def"),
            ("nothing to hide", "nothing to hide"),
        ] {
            let got = redact(text, Some(key));
            assert_eq!(got, want, "{text}");
            assert!(!got.contains(key) && !got.contains("other-token"), "{got}");
        }
        let e = LlmError::Http {
            status: 401,
            url: "http://x".into(),
            message: "invalid key sk-secret-123456".into(),
            hint: Box::new(Hint::None),
            retry_after: None,
            retryable: false,
        }
        .redacted(Some(key));
        assert!(!e.to_string().contains(key), "{e}");
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        let later = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc2822();
        h.insert("retry-after", later.parse().unwrap());
        let wait = retry_after(&h).unwrap().as_secs();
        assert!((28..=30).contains(&wait), "{wait}");
    }
}
