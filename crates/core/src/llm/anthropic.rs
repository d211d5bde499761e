//! The Anthropic Messages client: `POST {base}/v1/messages` with `stream: true`.
//!
//! Stored messages keep the OpenAI shape; this module maps them. The system prompt goes apart; tool
//! calls become `tool_use` blocks and tool results `tool_result` blocks at the start of the next user
//! message; consecutive messages of one role are merged (text joined by a blank line, tool results
//! first), an empty assistant message is left out, and a conversation that starts with the assistant
//! gets a user turn before it. So any fork of any tree makes a valid request. Reasoning comes back as
//! `thinking` blocks with their signature. The stable prefix (tools, system prompt, the conversation
//! so far) is marked with `cache_control` for prompt caching.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::body::Span;
use super::sse::SseEvent;
use super::{
    ChatMessage, ChatRequest, ChatResponse, LlmError, ModelInfo, ProviderSettings, Reply, Role,
    StreamEvent, ToolCall, Usage, error_text, list_models, read_events, send_chat, unreadable,
};
use std::mem;

/// The API version this client speaks.
pub const API_VERSION: &str = "2023-06-01";

#[derive(Clone)]
pub struct AnthropicClient {
    settings: ProviderSettings,
    http: super::LazyClient,
    /// The last body sent, the start of the next (a copy of the client starts without it).
    reuse: super::body::Reuse,
}

impl AnthropicClient {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        Ok(AnthropicClient {
            http: super::LazyClient::new(&settings),
            settings,
            reuse: super::body::Reuse::default(),
        })
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// Extended thinking from the next request on (None: off). The next body is written whole.
    pub fn set_thinking_budget(&mut self, budget: Option<u32>) {
        self.settings.thinking_budget = budget;
        self.reuse = super::body::Reuse::default();
    }

    /// Lets go of the last body sent (see [`super::Model::turn_ended`]).
    pub fn turn_ended(&self) {
        self.reuse.clear();
    }

    /// `{base}/v1/{path}`, whether or not the base already ends in `/v1`.
    fn url(&self, path: &str) -> String {
        let base = self.settings.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        format!("{base}/v1/{path}")
    }

    fn with_headers(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let builder = builder.header("anthropic-version", API_VERSION);
        match &self.settings.api_key {
            Some(key) => builder.header("x-api-key", key),
            None => builder,
        }
    }

    pub async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let url = self.url("models?limit=1000");
        let request = self.with_headers(self.http.get()?.get(&url));
        list_models(url, request, &self.settings).await
    }

    pub async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<ChatResponse, LlmError> {
        let (body, ticket) = request_bytes(request, &self.settings, &self.reuse);
        tracing::debug!(
            bytes = body.len(),
            copied = self.reuse.copied(),
            in_place = self.reuse.in_place(),
            "request body"
        );
        let answer = self.send(request, body, on_event).await;
        // Another round follows an answer with calls, and the same request a failure that a
        // retry may cure.
        let more = match &answer {
            Ok(response) => !response.tool_calls.is_empty(),
            Err(e) => e.is_retryable(),
        };
        self.reuse.answered(ticket, &request.messages, more);
        answer
    }

    /// Sends `body`, the text of `request`, and reads the answer.
    async fn send(
        &self,
        request: &ChatRequest<'_>,
        body: bytes::Bytes,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<ChatResponse, LlmError> {
        let s = &self.settings;
        let url = self.url("messages");
        let builder = self.with_headers(self.http.get()?.post(&url).body(body));
        let mut answer = Answer::default();
        match send_chat(builder, &url, s, &request.model).await? {
            Reply::Whole(text) => {
                let message: Value =
                    serde_json::from_str(&text).map_err(|e| unreadable(e, &text))?;
                answer.apply_whole(&message, on_event)?;
                Ok(answer.finish())
            }
            Reply::Stream(response) => {
                let done =
                    read_events(response, s.idle_timeout, s.max_answer_bytes, &mut |event| {
                        answer.apply(event, on_event)
                    })
                    .await?;
                if done {
                    return Ok(answer.finish());
                }
                Err(LlmError::StreamCut(
                    "the server closed the connection before `message_stop`".into(),
                ))
            }
        }
    }
}

/// Tool-use ids must match `^[a-zA-Z0-9_-]+$`; ids made by other providers may not.
fn tool_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "call".to_string()
    } else {
        clean
    }
}

/// A call's arguments, read as the object `tool_use.input` requires when written (a turn copied
/// from the last request's text is not read again).
struct Input<'a>(&'a str);

impl Serialize for Input<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        tool_input(self.0).serialize(serializer)
    }
}

/// Arguments as the JSON object `tool_use.input` requires.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => json!({ "value": other }),
        Err(_) if arguments.trim().is_empty() => json!({}),
        // Kept whole so the model can see what it sent.
        Err(_) => json!({ "unparsed_arguments": arguments }),
    }
}

/// One turn of the request while it is built, borrowing from the request's messages.
#[derive(Default)]
struct Turn<'a> {
    role: &'static str,
    thinking: Vec<WireBlock<'a>>,
    results: Vec<WireBlock<'a>>,
    /// The texts so far, joined by a blank line (borrowed while there is one).
    text: Option<Cow<'a, str>>,
    tool_uses: Vec<WireBlock<'a>>,
}

impl<'a> Turn<'a> {
    fn push_text(&mut self, text: Cow<'a, str>) {
        self.text = Some(match self.text.take() {
            None => text,
            Some(before) => {
                let mut joined = before.into_owned();
                joined.push_str("\n\n");
                joined.push_str(&text);
                Cow::Owned(joined)
            }
        });
    }

    /// Blocks in the order the API wants: thinking first in an assistant turn, tool results first
    /// in a user turn, text joined by a blank line, tool uses last.
    fn into_wire(self) -> WireTurn<'a> {
        let text = self.text.filter(|t| !t.trim().is_empty());
        let mut blocks = Vec::with_capacity(
            self.thinking.len()
                + self.results.len()
                + usize::from(text.is_some())
                + self.tool_uses.len(),
        );
        blocks.extend(self.thinking);
        blocks.extend(self.results);
        if let Some(text) = text {
            blocks.push(WireBlock::Text {
                text,
                cache_control: None,
            });
        }
        blocks.extend(self.tool_uses);
        WireTurn {
            role: self.role,
            content: blocks,
        }
    }
}

/// `{"type": "ephemeral"}`: the prompt cache's mark.
#[derive(Serialize, Clone, Copy)]
struct Cache {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Cache = Cache { kind: "ephemeral" };

/// One content block as sent.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache>,
    },
    ToolResult {
        tool_use_id: String,
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache>,
    },
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache>,
    },
    ToolUse {
        id: String,
        name: &'a str,
        input: Input<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Cache>,
    },
}

impl WireBlock<'_> {
    fn mark(&mut self) {
        let (WireBlock::Thinking { cache_control, .. }
        | WireBlock::ToolResult { cache_control, .. }
        | WireBlock::Text { cache_control, .. }
        | WireBlock::ToolUse { cache_control, .. }) = self;
        *cache_control = Some(EPHEMERAL);
    }
}

#[derive(Serialize)]
struct WireTurn<'a> {
    role: &'static str,
    content: Vec<WireBlock<'a>>,
}

/// The system prompt of a request: its system messages, joined.
fn system<'a>(messages: &'a [ChatMessage<'_>]) -> Cow<'a, str> {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| &*m.content)
        .collect();
    match system.as_slice() {
        [one] => Cow::Borrowed(*one),
        many => Cow::Owned(many.join("\n\n")),
    }
}

/// The turns of a request as the messages each is made from, merged as the API wants them
/// (neighbours of one role are one turn; an empty answer is left out, so that its neighbours
/// merge; a turn that says nothing is not sent), without making them. A first turn of the
/// assistant's is preceded by the user's "(The conversation continues.)", the span `0..0`.
fn spans(messages: &[ChatMessage<'_>]) -> Vec<Span> {
    let mut spans: Vec<(&'static str, Span, bool)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let (role, says) = match m.role {
            Role::System => continue,
            Role::User => ("user", !m.content.trim().is_empty()),
            Role::Tool => ("user", true),
            Role::Assistant => {
                let says = (m.reasoning().is_some() && m.reasoning_signature().is_some())
                    || !m.content.trim().is_empty()
                    || !m.tool_calls().is_empty();
                if !says {
                    continue;
                }
                ("assistant", true)
            }
        };
        match spans.last_mut() {
            Some((last, span, said)) if *last == role => {
                span.to = i as u32 + 1;
                *said |= says;
            }
            _ => spans.push((role, Span::one(i, 0), says)),
        }
    }
    spans.retain(|(_, _, says)| *says);
    let continues = spans.first().is_some_and(|(role, ..)| *role == "assistant");
    continues
        .then_some(Span {
            from: 0,
            to: 0,
            variant: 0,
        })
        .into_iter()
        .chain(spans.into_iter().map(|(_, span, _)| span))
        .collect()
}

/// The turn made from the messages of `span` (see [`spans`]), its last block marked for the
/// prompt cache when `span.variant` is 1.
fn turn<'a>(messages: &'a [ChatMessage<'_>], span: Span) -> WireTurn<'a> {
    if span.from == span.to {
        return Turn {
            role: "user",
            text: Some(Cow::Borrowed("(The conversation continues.)")),
            ..Turn::default()
        }
        .into_wire();
    }
    let mut turn = Turn::default();
    for m in &messages[span.from as usize..span.to as usize] {
        match m.role {
            Role::System => {}
            Role::User => {
                turn.role = "user";
                turn.push_text(Cow::Borrowed(&m.content));
            }
            Role::Tool => {
                turn.role = "user";
                turn.results.push(WireBlock::ToolResult {
                    tool_use_id: tool_id(m.tool_call_id().unwrap_or("")),
                    content: if m.content.is_empty() {
                        "(no output)"
                    } else {
                        &m.content
                    },
                    cache_control: None,
                });
            }
            Role::Assistant => {
                turn.role = "assistant";
                if let (Some(thinking), Some(signature)) = (m.reasoning(), m.reasoning_signature())
                {
                    turn.thinking.push(WireBlock::Thinking {
                        thinking,
                        signature,
                        cache_control: None,
                    });
                }
                if !m.content.trim().is_empty() {
                    // The API refuses trailing whitespace at the end of an assistant turn.
                    turn.push_text(Cow::Borrowed(m.content.trim_end()));
                }
                for call in m.tool_calls() {
                    turn.tool_uses.push(WireBlock::ToolUse {
                        id: tool_id(&call.id),
                        name: &call.function.name,
                        input: Input(&call.function.arguments),
                        cache_control: None,
                    });
                }
            }
        }
    }
    let mut wire = turn.into_wire();
    if span.variant == 1
        && let Some(block) = wire.content.last_mut()
    {
        block.mark();
    }
    wire
}

/// The system prompt and the messages of a request, mapped from the OpenAI shape (as JSON, for
/// the tests and `/dump`).
pub fn map_messages(messages: &[ChatMessage]) -> (String, Vec<Value>) {
    let values = spans(messages)
        .into_iter()
        .map(|span| serde_json::to_value(turn(messages, span)).expect("a turn is JSON"))
        .collect();
    (system(messages).into_owned(), values)
}

/// What a Messages request body has after its `model` and `messages`.
#[derive(Serialize)]
struct WireTail<'a> {
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireBlock<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Cache>,
}

#[derive(Serialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// The JSON body of a Messages request: the text sent, read back (for `/dump` and the tests).
pub fn request_body(request: &ChatRequest<'_>, s: &ProviderSettings) -> Value {
    serde_json::from_str(&request_text(request, s)).expect("a request body is JSON")
}

/// The same body as the text sent, written afresh: serialised in one pass, borrowing the
/// request's strings.
pub fn request_text(request: &ChatRequest<'_>, s: &ProviderSettings) -> String {
    let (text, _) = request_bytes(request, s, &super::body::Reuse::once());
    String::from_utf8(Vec::from(text)).expect("serde_json writes UTF-8")
}

/// The body as sent, written from the last one `reuse` wrote where this one repeats it.
pub fn request_bytes(
    request: &ChatRequest<'_>,
    s: &ProviderSettings,
    reuse: &super::body::Reuse,
) -> (bytes::Bytes, super::body::Ticket) {
    let system = system(&request.messages);
    let mut spans = spans(&request.messages);
    let cache = s.prompt_cache.then_some(EPHEMERAL);
    let system = if system.is_empty() {
        Vec::new()
    } else {
        vec![WireBlock::Text {
            text: system,
            cache_control: cache,
        }]
    };
    let mut tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        .map(|t| WireTool {
            name: &t.name,
            description: &t.description,
            input_schema: &t.parameters,
            cache_control: None,
        })
        .collect();
    if let Some(last) = tools.last_mut() {
        last.cache_control = cache;
    }
    // The conversation so far is the prefix of the next request too: cache up to its last block.
    if s.prompt_cache
        && let Some(span) = spans.last_mut()
    {
        span.variant = 1;
    }
    let tail = WireTail {
        // Above the thinking budget, which Anthropic requires.
        max_tokens: s.thinking_budget.map_or(s.answer_cap(request), |b| {
            s.answer_cap(request).max(b.saturating_add(1))
        }),
        stream: true,
        system,
        tool_choice: (!request.tools.is_empty() && request.no_tool_calls)
            .then_some(Kind { kind: "none" }),
        tools,
        thinking: s.thinking_budget.map(|budget| Thinking {
            kind: "enabled",
            budget_tokens: budget,
        }),
    };
    reuse.write(
        &request.messages,
        &super::body::head(&request.model),
        spans,
        |span| turn(&request.messages, span),
        &tail,
    )
}

#[derive(Default)]
struct Block {
    kind: String,
    id: String,
    name: String,
    json: String,
    /// The input given whole in `content_block_start` (non-streaming proxies do this).
    start_input: Option<Value>,
}

/// Assembles one answer from the stream.
#[derive(Default)]
struct Answer {
    content: String,
    reasoning: String,
    signature: String,
    blocks: BTreeMap<u64, Block>,
    calls: Vec<ToolCall>,
    input_tokens: u64,
    cache_read: u64,
    cache_write: u64,
    output_tokens: u64,
    saw_usage: bool,
    stop_reason: Option<String>,
}

impl Answer {
    /// Applies one event; returns true at `message_stop`.
    fn apply(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<bool, LlmError> {
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
            return Ok(false); // a line we cannot read is skipped, not fatal
        };
        let kind = data["type"].as_str().unwrap_or(event.event.as_str());
        match kind {
            "message_start" => self.usage(&data["message"]["usage"]),
            "content_block_start" => {
                let index = data["index"].as_u64().unwrap_or(0);
                let block = &data["content_block"];
                let b = Block {
                    kind: block["type"].as_str().unwrap_or("").to_string(),
                    id: block["id"].as_str().unwrap_or("").to_string(),
                    name: block["name"].as_str().unwrap_or("").to_string(),
                    json: String::new(),
                    start_input: block
                        .get("input")
                        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                        .cloned(),
                };
                match b.kind.as_str() {
                    "tool_use" => on_event(StreamEvent::ToolCallStarted { name: &b.name }),
                    "text" => self.text(block["text"].as_str().unwrap_or(""), on_event),
                    "thinking" => self.thinking(block["thinking"].as_str().unwrap_or(""), on_event),
                    _ => {}
                }
                self.blocks.insert(index, b);
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap_or(0);
                let delta = &data["delta"];
                match delta["type"].as_str().unwrap_or("") {
                    "text_delta" => self.text(delta["text"].as_str().unwrap_or(""), on_event),
                    "thinking_delta" => {
                        self.thinking(delta["thinking"].as_str().unwrap_or(""), on_event)
                    }
                    "signature_delta" => self
                        .signature
                        .push_str(delta["signature"].as_str().unwrap_or("")),
                    "input_json_delta" => {
                        if let Some(b) = self.blocks.get_mut(&index) {
                            b.json
                                .push_str(delta["partial_json"].as_str().unwrap_or(""));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = data["index"].as_u64().unwrap_or(0);
                if let Some(b) = self.blocks.remove(&index) {
                    self.close(b);
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                self.usage(&data["usage"]);
            }
            "message_stop" => {
                // Blocks never closed (a lenient proxy) still count.
                for (_, b) in mem::take(&mut self.blocks) {
                    self.close(b);
                }
                return Ok(true);
            }
            "error" => {
                let error = &data["error"];
                let kind = error["type"].as_str().unwrap_or("");
                return Err(LlmError::Server {
                    message: format!("{} ({kind})", error_text(error)),
                    retryable: matches!(
                        kind,
                        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
                    ),
                });
            }
            _ => {} // ping, and event types added later
        }
        Ok(false)
    }

    /// A whole (non-streamed) message.
    fn apply_whole(
        &mut self,
        message: &Value,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), LlmError> {
        if message["type"] == "error" {
            return Err(LlmError::Server {
                message: error_text(&message["error"]),
                retryable: false,
            });
        }
        self.usage(&message["usage"]);
        self.stop_reason = message["stop_reason"].as_str().map(str::to_string);
        for block in message["content"].as_array().into_iter().flatten() {
            match block["type"].as_str().unwrap_or("") {
                "text" => self.text(block["text"].as_str().unwrap_or(""), on_event),
                "thinking" => {
                    self.thinking(block["thinking"].as_str().unwrap_or(""), on_event);
                    self.signature
                        .push_str(block["signature"].as_str().unwrap_or(""));
                }
                "tool_use" => self.close(Block {
                    kind: "tool_use".into(),
                    id: block["id"].as_str().unwrap_or("").to_string(),
                    name: block["name"].as_str().unwrap_or("").to_string(),
                    json: String::new(),
                    start_input: block.get("input").cloned(),
                }),
                _ => {}
            }
        }
        Ok(())
    }

    fn text(&mut self, text: &str, on_event: &mut dyn FnMut(StreamEvent<'_>)) {
        if !text.is_empty() {
            on_event(StreamEvent::Text(text));
            self.content.push_str(text);
        }
    }

    fn thinking(&mut self, text: &str, on_event: &mut dyn FnMut(StreamEvent<'_>)) {
        if !text.is_empty() {
            on_event(StreamEvent::Reasoning(text));
            self.reasoning.push_str(text);
        }
    }

    fn close(&mut self, b: Block) {
        if b.kind != "tool_use" || b.name.is_empty() {
            return;
        }
        let arguments = if !b.json.trim().is_empty() {
            b.json
        } else {
            b.start_input
                .map(|v| v.to_string())
                .unwrap_or_else(|| "{}".to_string())
        };
        let id = if b.id.is_empty() {
            format!("toolu_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        } else {
            b.id
        };
        self.calls.push(ToolCall::new(id, b.name, arguments));
    }

    fn usage(&mut self, u: &Value) {
        let get = |k: &str| u[k].as_u64();
        if let Some(n) = get("input_tokens") {
            self.input_tokens = n;
            self.saw_usage = true;
        }
        if let Some(n) = get("cache_read_input_tokens") {
            self.cache_read = n;
        }
        if let Some(n) = get("cache_creation_input_tokens") {
            self.cache_write = n;
        }
        if let Some(n) = get("output_tokens") {
            self.output_tokens = n; // cumulative in message_delta
            self.saw_usage = true;
        }
    }

    fn finish(self) -> ChatResponse {
        let usage = self.saw_usage.then(|| Usage {
            // Anthropic counts cached input apart; the total is what the prompt cost.
            input_tokens: self.input_tokens + self.cache_read + self.cache_write,
            output_tokens: self.output_tokens,
            cache_read_tokens: (self.cache_read > 0).then_some(self.cache_read),
            cache_write_tokens: (self.cache_write > 0).then_some(self.cache_write),
            reasoning_tokens: None,
        });
        ChatResponse {
            content: self.content,
            reasoning: self.reasoning,
            reasoning_signature: (!self.signature.is_empty()).then_some(self.signature),
            tool_calls: self.calls,
            usage,
            finish_reason: self.stop_reason,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::llm::ProviderKind;
    use crate::llm::{RetryPolicy, ToolSpec};
    use std::time::Duration;

    pub(crate) fn settings() -> ProviderSettings {
        ProviderSettings {
            name: "anthropic".into(),
            kind: ProviderKind::Anthropic,
            base_url: "https://api.anthropic.com".into(),
            api_key: Some("k".into()),
            api_key_var: "ANTHROPIC_API_KEY".into(),
            base_url_var: "ANTHROPIC_BASE_URL".into(),
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            stream_usage: true,
            key_required: true,
            retry: RetryPolicy::default(),
            max_tokens: 1024,
            thinking_budget: None,
            prompt_cache: true,
            max_answer_bytes: 1 << 20,
        }
    }

    fn run(events: &[Value]) -> Result<(ChatResponse, Vec<String>), LlmError> {
        let mut a = Answer::default();
        let mut seen = Vec::new();
        let mut on = |e: StreamEvent<'_>| seen.push(format!("{e:?}"));
        for e in events {
            let ev = SseEvent {
                event: e["type"].as_str().unwrap_or("").into(),
                data: e.to_string(),
            };
            if a.apply(&ev, &mut on)? {
                break;
            }
        }
        Ok((a.finish(), seen))
    }

    #[test]
    fn every_event_kind_is_understood() {
        let (r, seen) = run(&[
            json!({"type":"message_start","message":{"id":"m","usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":5,"output_tokens":1}}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me see."}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig=="}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading "}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"it."}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"filepath\":"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_2","name":"list_files","input":{}}}),
            json!({"type":"content_block_stop","index":3}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}),
            json!({"type":"message_stop"}),
        ])
        .unwrap();
        assert_eq!(r.content, "Reading it.");
        assert_eq!(r.reasoning, "Let me see.");
        assert_eq!(r.reasoning_signature.as_deref(), Some("sig=="));
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall::new("toolu_1", "read_file", r#"{"filepath":"a.txt"}"#),
                ToolCall::new("toolu_2", "list_files", "{}"),
            ]
        );
        assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
        let u = r.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (115, 42));
        assert_eq!(
            (u.cache_read_tokens, u.cache_write_tokens),
            (Some(100), Some(5))
        );
        assert!(seen[0].starts_with("Reasoning"));
        assert!(seen.iter().any(|s| s.contains("ToolCallStarted")));
    }

    #[test]
    fn error_events_after_200_are_errors_and_say_if_a_retry_helps() {
        let err = run(&[
            json!({"type":"message_start","message":{"usage":{"input_tokens":1}}}),
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the server reported an error during the answer: Overloaded (overloaded_error)"
        );
        assert!(err.is_retryable());
        let err = run(&[
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}}),
        ])
        .unwrap_err();
        assert!(!err.is_retryable());
    }

    #[test]
    fn a_forked_tree_with_tool_calls_maps_to_a_valid_request() {
        let call = |ids: &[&str]| {
            ChatMessage::text(Role::Assistant, "Let me look. ").with_calls(
                ids.iter()
                    .map(|id| ToolCall::new(*id, "read_file", r#"{"filepath":"a"}"#))
                    .collect::<Vec<_>>(),
            )
        };
        // A fork under a call (synthetic result), two user messages in a row, an empty answer,
        // and an id another provider made.
        let messages = vec![
            ChatMessage::text(Role::System, "sys"),
            ChatMessage::text(Role::User, "first"),
            call(&["call.1", "call 2"]),
            ChatMessage::tool_result("call.1", "A"),
            ChatMessage::tool_result("call 2", ""),
            ChatMessage::text(Role::User, "and then"),
            ChatMessage::text(Role::Assistant, ""),
            ChatMessage::text(Role::User, "again"),
            call(&["toolu_9"]).with_reasoning(Some("hm".into()), Some("sig".into())),
            ChatMessage::tool_result("toolu_9", "B"),
        ];
        let (system, msgs) = map_messages(&messages);
        assert_eq!(system, "sys");
        let expected = json!([
            {"role":"user","content":[{"type":"text","text":"first"}]},
            {"role":"assistant","content":[
                {"type":"text","text":"Let me look."},
                {"type":"tool_use","id":"call_1","name":"read_file","input":{"filepath":"a"}},
                {"type":"tool_use","id":"call_2","name":"read_file","input":{"filepath":"a"}}]},
            {"role":"user","content":[
                {"type":"tool_result","tool_use_id":"call_1","content":"A"},
                {"type":"tool_result","tool_use_id":"call_2","content":"(no output)"},
                {"type":"text","text":"and then\n\nagain"}]},
            {"role":"assistant","content":[
                {"type":"thinking","thinking":"hm","signature":"sig"},
                {"type":"text","text":"Let me look."},
                {"type":"tool_use","id":"toolu_9","name":"read_file","input":{"filepath":"a"}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"B"}]},
        ]);
        assert_eq!(Value::Array(msgs.clone()), expected);
        assert_valid(&msgs);
    }

    /// The rules the Messages API enforces on the message list.
    fn assert_valid(msgs: &[Value]) {
        assert_eq!(msgs[0]["role"], "user");
        for pair in msgs.windows(2) {
            assert_ne!(pair[0]["role"], pair[1]["role"], "roles alternate");
            let uses: Vec<&Value> = pair[0]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| &b["id"])
                .collect();
            let results: Vec<&Value> = pair[1]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| &b["tool_use_id"])
                .collect();
            assert_eq!(
                uses, results,
                "each tool_use answered right after, in order"
            );
        }
        for m in msgs {
            let blocks = m["content"].as_array().unwrap();
            assert!(!blocks.is_empty());
            let first_text = blocks.iter().position(|b| b["type"] == "text");
            let last_result = blocks.iter().rposition(|b| b["type"] == "tool_result");
            if let (Some(t), Some(r)) = (first_text, last_result) {
                assert!(r < t, "tool results come first");
            }
        }
    }

    #[test]
    fn a_conversation_starting_with_the_assistant_gets_a_user_turn() {
        let (_, msgs) = map_messages(&[
            ChatMessage::text(Role::System, "s"),
            ChatMessage::text(Role::Assistant, "orphan"),
            ChatMessage::text(Role::User, "hi"),
        ]);
        assert_eq!(msgs[0]["role"], "user");
        assert_eq!(msgs.len(), 3);
        assert_valid(&msgs);
    }

    #[test]
    fn neighbours_merge_across_what_says_nothing_and_the_first_turn_sent_is_the_user_s() {
        let (system, msgs) = map_messages(&[
            ChatMessage::text(Role::System, "s1"),
            ChatMessage::text(Role::User, "  "),
            ChatMessage::text(Role::Assistant, ""),
            ChatMessage::text(Role::User, "hi"),
            ChatMessage::text(Role::System, "s2"),
            ChatMessage::text(Role::Assistant, "ans  "),
            ChatMessage::tool_result("c.9", ""),
            ChatMessage::text(Role::Assistant, " \n"),
        ]);
        assert_eq!(system, "s1\n\ns2");
        assert_eq!(
            Value::Array(msgs),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "  \n\nhi"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "ans"}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c_9", "content": "(no output)"}
                ]},
            ])
        );
        // A user's turn of blanks is not sent: the assistant's would come first.
        let (_, msgs) = map_messages(&[
            ChatMessage::text(Role::User, "   "),
            ChatMessage::text(Role::Assistant, "x"),
        ]);
        assert_eq!(
            msgs[0]["content"][0]["text"],
            "(The conversation continues.)"
        );
        assert_eq!(msgs.len(), 2);
        assert_valid(&msgs);
    }

    #[test]
    fn body_marks_the_stable_prefix_for_caching() {
        let req = ChatRequest {
            model: "claude".into(),
            messages: vec![
                ChatMessage::text(Role::System, "sys"),
                ChatMessage::text(Role::User, "hi"),
            ],
            tools: vec![
                ToolSpec {
                    name: "a".into(),
                    description: "A".into(),
                    parameters: json!({"type":"object"}),
                },
                ToolSpec {
                    name: "b".into(),
                    description: "B".into(),
                    parameters: json!({"type":"object"}),
                },
            ],
            ..Default::default()
        };
        let mut s = settings();
        let body = request_body(&req, &s);
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["tools"][1]["input_schema"]["type"], "object");
        assert_eq!(
            body["messages"][0]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
        assert_eq!(body["max_tokens"], 1024);
        assert!(body.get("thinking").is_none());
        s.prompt_cache = false;
        s.thinking_budget = Some(2048);
        let body = request_body(&req, &s);
        assert!(!body.to_string().contains("cache_control"));
        assert_eq!(body["thinking"]["budget_tokens"], 2048);
        assert_eq!(body["thinking"]["type"], "enabled");
        // The text sent is that body, block for block.
        let sent: Value = serde_json::from_str(&request_text(&req, &s)).unwrap();
        assert_eq!(sent, body);
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        );
        assert_eq!(body["system"], json!([{"type": "text", "text": "sys"}]));
    }

    #[test]
    fn base_urls_with_or_without_v1() {
        for base in [
            "https://api.anthropic.com",
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
        ] {
            let c = AnthropicClient::new(ProviderSettings {
                base_url: base.into(),
                ..settings()
            })
            .unwrap();
            assert_eq!(c.url("messages"), "https://api.anthropic.com/v1/messages");
        }
    }

    #[test]
    fn unparseable_arguments_are_kept() {
        assert_eq!(
            tool_input("{broken"),
            json!({"unparsed_arguments": "{broken"})
        );
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input("[1]"), json!({"value": [1]}));
    }
}
