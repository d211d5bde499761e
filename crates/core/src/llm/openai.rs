//! The OpenAI-compatible Chat Completions client: `POST {base}/chat/completions` with
//! `stream: true`, decoded leniently, because real servers (llama.cpp, vLLM, Ollama, DeepSeek, Qwen)
//! each bend the format a little: empty `finish_reason`, tool-call ids repeated as `""`, whole
//! arguments in one chunk, missing `index`, `reasoning_content` or `reasoning` fields.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body::Span;
use super::sse::SseEvent;
use super::{
    ChatMessage, ChatRequest, ChatResponse, LlmError, ModelInfo, ProviderSettings, Reply, Role,
    StreamEvent, ToolCall, Usage, error_text, list_models, read_events, send_chat, unreadable,
};
#[cfg(test)]
use crate::llm::ProviderKind;
#[cfg(test)]
use crate::llm::RetryPolicy;
use crate::vocab;
use std::time::Duration;
use tokio::time;

#[derive(Clone)]
pub struct OpenAiClient {
    settings: ProviderSettings,
    http: super::LazyClient,
    /// The last body sent, the start of the next (a copy of the client starts without it).
    reuse: super::body::Reuse,
}

impl OpenAiClient {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        Ok(OpenAiClient {
            http: super::LazyClient::new(&settings),
            settings,
            reuse: super::body::Reuse::default(),
        })
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// Lets go of the last body sent (see [`super::Model::turn_ended`]).
    pub fn turn_ended(&self) {
        self.reuse.clear();
    }

    pub async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let url = format!("{}/models", self.settings.base_url.trim_end_matches('/'));
        let mut request = self.http.get()?.get(&url);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        list_models(url, request, &self.settings).await
    }

    /// The context window a llama.cpp server runs with (`GET /props`, at the host root), asked
    /// with a short timeout; None from any other server.
    pub async fn server_window(&self) -> Option<u64> {
        let base = self.settings.base_url.trim_end_matches('/');
        let root = base.strip_suffix("/v1").unwrap_or(base);
        let url = format!("{root}/props");
        let mut request = self.http.get().ok()?.get(&url);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = time::timeout(Duration::from_secs(2), request.send())
            .await
            .ok()?
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let text = time::timeout(Duration::from_secs(2), response.text())
            .await
            .ok()?
            .ok()?;
        let value: Value = serde_json::from_str(&text).ok()?;
        value
            .pointer("/default_generation_settings/n_ctx")
            .or_else(|| value.get("n_ctx"))
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.settings.base_url.trim_end_matches('/')
        )
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
        let url = self.url();
        let mut builder = self.http.get()?.post(&url).body(body);
        if let Some(key) = &s.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut answer = AnswerBuilder::default();
        match send_chat(builder, &url, s, &request.model).await? {
            Reply::Whole(text) => {
                let completion: Completion =
                    serde_json::from_str(&text).map_err(|e| unreadable(e, &text))?;
                answer.apply_completion(completion, on_event)?;
                Ok(answer.finish())
            }
            Reply::Stream(response) => {
                let done =
                    read_events(response, s.idle_timeout, s.max_answer_bytes, &mut |event| {
                        answer.apply_event(event, on_event)
                    })
                    .await?;
                // Some servers close the stream without `[DONE]`; a finish reason says it is whole.
                if done || answer.finish_reason.is_some() {
                    return Ok(answer.finish());
                }
                Err(LlmError::StreamCut(
                    "the server closed the connection before the answer was complete".into(),
                ))
            }
        }
    }
}

/// The JSON body of a Chat Completions request to the server of `s`, its answer capped: the
/// text sent, read back (for `/dump` and the tests).
pub fn request_body(request: &ChatRequest<'_>, s: &ProviderSettings) -> Value {
    serde_json::from_str(&request_text(request, s)).expect("a request body is JSON")
}

/// The same body as the text sent, written afresh: serialised in one pass from the request,
/// borrowing every string (no `Value` tree in between).
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
    // Reasoning goes back only within the current turn (after the last user message), on the
    // assistant messages that called tools: DeepSeek's thinking mode requires it there, and servers
    // reject or ignore it elsewhere.
    let turn_start = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    // Variant 1: the message's reasoning goes with it.
    let reasoning = |i: usize, m: &ChatMessage<'_>| {
        i > turn_start && !m.tool_calls().is_empty() && m.reasoning().is_some_and(|r| !r.is_empty())
    };
    let spans =
        (request.messages.iter().enumerate()).map(|(i, m)| Span::one(i, u8::from(reasoning(i, m))));
    let make = |span: Span| {
        let m = &request.messages[span.from as usize];
        let mut w = wire_message(m);
        if span.variant == 1 {
            w.reasoning_content = m.reasoning();
        }
        w
    };
    reuse.write(
        &request.messages,
        &super::body::head(&request.model),
        spans,
        make,
        &wire_tail(request, s),
    )
}

fn wire_tail<'a>(request: &'a ChatRequest<'_>, s: &ProviderSettings) -> WireTail<'a> {
    // OpenAI's own API takes the newer name (its reasoning models refuse the older one);
    // compatible servers (llama.cpp, vLLM, Ollama, DeepSeek, …) the older.
    let cap = s.answer_cap(request);
    let (max_tokens, max_completion_tokens) = if s.base_url.contains("api.openai.com") {
        (None, Some(cap))
    } else {
        (Some(cap), None)
    };
    let tools = request
        .tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            function: WireFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        })
        .collect();
    WireTail {
        stream: true,
        stream_options: s.stream_usage.then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens,
        max_completion_tokens,
        tool_choice: (!request.tools.is_empty() && request.no_tool_calls).then_some("none"),
        tools,
    }
}

/// What a request body has after its `model` and `messages`: `max_tokens` or
/// `max_completion_tokens` is the field that caps the answer's tokens.
#[derive(Serialize)]
struct WireTail<'a> {
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message: `content` is null on an assistant message that only calls tools.
#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<&'a [vocab::ToolCall]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn wire_message<'a>(m: &'a ChatMessage<'_>) -> WireMessage<'a> {
    let plain = WireMessage {
        role: m.role.as_str(),
        tool_call_id: None,
        content: Some(&m.content),
        tool_calls: None,
        reasoning_content: None,
    };
    match m.role {
        Role::Assistant if !m.tool_calls().is_empty() => WireMessage {
            content: (!m.content.is_empty()).then_some(&*m.content),
            tool_calls: Some(m.tool_calls()),
            ..plain
        },
        Role::Tool => WireMessage {
            tool_call_id: Some(m.tool_call_id().unwrap_or_default()),
            ..plain
        },
        _ => plain,
    }
}

// Lenient wire types: every field optional, unknown fields ignored.

#[derive(Deserialize, Default)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize, Default)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize, Default)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize, Default)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<Value>,
    #[serde(default)]
    completion_tokens_details: Option<Value>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        let detail = |v: &Option<Value>, key: &str| v.as_ref()?.get(key)?.as_u64();
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cache_read_tokens: detail(&u.prompt_tokens_details, "cached_tokens").filter(|&n| n > 0),
            cache_write_tokens: None,
            reasoning_tokens: detail(&u.completion_tokens_details, "reasoning_tokens")
                .filter(|&n| n > 0),
        }
    }
}

/// A non-streamed completion.
#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<CompletionChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionChoice {
    #[serde(default)]
    message: Option<CompletionMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CompletionMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles one answer from stream events.
#[derive(Default)]
struct AnswerBuilder {
    content: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    by_index: HashMap<u32, usize>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
}

impl AnswerBuilder {
    /// Applies one SSE event; returns true at the end of the stream (`[DONE]`).
    fn apply_event(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<bool, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            // A chunk we cannot read is skipped rather than failing a whole answer.
            Err(_) => return Ok(false),
        };
        if let Some(error) = chunk.error {
            return Err(LlmError::Server {
                message: error_text(&error),
                retryable: false,
            });
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(r) = delta
                .reasoning_content
                .or(delta.reasoning)
                .filter(|r| !r.is_empty())
            {
                on_event(StreamEvent::Reasoning(&r));
                self.reasoning.push_str(&r);
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                on_event(StreamEvent::Text(&text));
                self.content.push_str(&text);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.apply_tool_delta(call, on_event);
            }
        }
        Ok(false)
    }

    fn apply_completion(
        &mut self,
        completion: Completion,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<(), LlmError> {
        if let Some(error) = completion.error {
            return Err(LlmError::Server {
                message: error_text(&error),
                retryable: false,
            });
        }
        self.usage = completion.usage.map(Usage::from);
        if let Some(choice) = completion.choices.into_iter().next() {
            self.finish_reason = choice.finish_reason.filter(|r| !r.is_empty());
            if let Some(m) = choice.message {
                if let Some(r) = m
                    .reasoning_content
                    .or(m.reasoning)
                    .filter(|r| !r.is_empty())
                {
                    on_event(StreamEvent::Reasoning(&r));
                    self.reasoning = r;
                }
                if let Some(text) = m.content.filter(|t| !t.is_empty()) {
                    on_event(StreamEvent::Text(&text));
                    self.content = text;
                }
                for call in m.tool_calls.unwrap_or_default() {
                    self.apply_tool_delta(call, on_event);
                }
            }
        }
        Ok(())
    }

    fn apply_tool_delta(
        &mut self,
        delta: ToolCallDelta,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) {
        let id = delta.id.filter(|id| !id.is_empty());
        let existing = match delta.index {
            Some(i) => self.by_index.get(&i).copied(),
            // Without an index a fresh id starts a call; anything else continues the last one.
            None => match &id {
                Some(id)
                    if self
                        .calls
                        .last()
                        .is_none_or(|c| !c.id.is_empty() && &c.id != id) =>
                {
                    None
                }
                _ => self.calls.len().checked_sub(1),
            },
        };
        // Some servers reuse index 0 for every call of an answer, each with its own id.
        let existing = existing.filter(|&at| match &id {
            Some(id) => self.calls[at].id.is_empty() || &self.calls[at].id == id,
            None => true,
        });
        let at = match existing {
            Some(at) => at,
            None => {
                self.calls.push(PartialCall::default());
                let at = self.calls.len() - 1;
                if let Some(i) = delta.index {
                    self.by_index.insert(i, at);
                }
                at
            }
        };
        let call = &mut self.calls[at];
        if let Some(id) = id {
            call.id = id;
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                if call.name.is_empty() {
                    call.name = name;
                    on_event(StreamEvent::ToolCallStarted { name: &call.name });
                } else if call.name != name {
                    call.name.push_str(&name);
                }
            }
            match function.arguments {
                Some(Value::String(s)) => call.arguments.push_str(&s),
                Some(Value::Null) | None => {}
                // Whole arguments sent as an object rather than a JSON text.
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
        }
    }

    fn finish(self) -> ChatResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .map(|c| {
                let id = if c.id.is_empty() {
                    format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
                } else {
                    c.id
                };
                let arguments = if c.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    c.arguments
                };
                ToolCall::new(id, c.name, arguments)
            })
            .collect();
        ChatResponse {
            content: self.content,
            reasoning: self.reasoning,
            reasoning_signature: None,
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn run(chunks: &[&str]) -> (ChatResponse, Vec<String>) {
        let mut b = AnswerBuilder::default();
        let mut seen = Vec::new();
        let mut on = |e: StreamEvent<'_>| seen.push(format!("{e:?}"));
        for c in chunks {
            let ev = SseEvent {
                event: String::new(),
                data: c.to_string(),
            };
            if b.apply_event(&ev, &mut on).unwrap() {
                break;
            }
        }
        (b.finish(), seen)
    }

    #[test]
    fn text_and_usage() {
        let (r, seen) = run(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":""}]}"#,
            r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            "[DONE]",
        ]);
        assert_eq!(r.content, "Hello");
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage.unwrap().output_tokens, 2);
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn tool_calls_from_fragments_with_empty_repeated_ids() {
        let (r, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"","function":{"arguments":"{\"filepath\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"","function":{"arguments":"\"x\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"list_files","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall::new("a", "read_file", r#"{"filepath":"x"}"#),
                ToolCall::new("b", "list_files", "{}"),
            ]
        );
    }

    #[test]
    fn calls_without_index_and_reused_index_are_told_apart_by_id() {
        let (r, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":{"x":1}}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"h"}}]}}]}"#,
        ]);
        let names: Vec<_> = r
            .tool_calls
            .iter()
            .map(|c| c.function.name.as_str())
            .collect();
        assert_eq!(names, ["f", "g", "h"]);
        assert_eq!(r.tool_calls[0].function.arguments, r#"{"x":1}"#);
        assert_eq!(r.tool_calls[2].function.arguments, "{}");
    }

    #[test]
    fn reasoning_fields_are_collected_apart() {
        let (r, seen) = run(&[
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"ing"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok"}}]}"#,
        ]);
        assert_eq!(r.reasoning, "thinking");
        assert_eq!(r.content, "ok");
        assert!(seen[0].starts_with("Reasoning"));
    }

    #[test]
    fn missing_ids_are_generated() {
        let (r, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}"#,
        ]);
        assert!(r.tool_calls[0].id.starts_with("call_"));
    }

    #[test]
    fn error_chunk_after_200_is_an_error() {
        let mut b = AnswerBuilder::default();
        let ev = SseEvent {
            event: String::new(),
            data: r#"{"error":{"message":"overloaded"}}"#.into(),
        };
        let err = b.apply_event(&ev, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("overloaded"));
    }

    #[test]
    fn reasoning_goes_back_only_with_tool_calls_of_the_current_turn() {
        let with_reasoning =
            |m: ChatMessage<'static>| m.with_reasoning(Some("thought".into()), None);
        let call = |id: &str| {
            ChatMessage::text(Role::Assistant, "").with_calls(vec![ToolCall::new(id, "f", "{}")])
        };
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::text(Role::User, "old question"),
                with_reasoning(call("a")),
                ChatMessage::tool_result("a", "r"),
                with_reasoning(ChatMessage::text(Role::Assistant, "old answer")),
                ChatMessage::text(Role::User, "new question"),
                with_reasoning(call("b")),
                ChatMessage::tool_result("b", "r"),
            ],
            tools: vec![],
            ..Default::default()
        };
        let body = request_body(&req, &local(false, 1000));
        let sent: Vec<bool> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.get("reasoning_content").is_some())
            .collect();
        assert_eq!(sent, [false, false, false, false, false, true, false]);
    }

    #[test]
    fn request_shapes_assistant_tool_calls_and_results() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::text(Role::System, "sys"),
                ChatMessage::text(Role::Assistant, "")
                    .with_calls(vec![ToolCall::new("c1", "f", "{}")]),
                ChatMessage::tool_result("c1", "done"),
            ],
            tools: vec![],
            ..Default::default()
        };
        let body = request_body(&req, &local(true, 77));
        assert_eq!(body["messages"][1]["content"], Value::Null);
        // Every message keeps its content field.
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "done"})
        );
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["name"],
            "f"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 77);
        assert!(body.get("tools").is_none());
    }

    /// A local server's settings: answers capped at `max_tokens`.
    pub(crate) fn local(stream_usage: bool, max_tokens: u32) -> ProviderSettings {
        ProviderSettings {
            base_url: "http://127.0.0.1:8080/v1".into(),
            stream_usage,
            max_tokens,
            key_required: false,
            ..openai()
        }
    }

    fn openai() -> ProviderSettings {
        ProviderSettings {
            name: "openai".into(),
            kind: ProviderKind::OpenAi,
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            api_key_var: "OPENAI_API_KEY".into(),
            base_url_var: "OPENAI_BASE_URL".into(),
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            stream_usage: false,
            key_required: true,
            retry: RetryPolicy::default(),
            max_tokens: 1000,
            thinking_budget: None,
            prompt_cache: false,
            max_answer_bytes: 1 << 20,
        }
    }

    #[test]
    fn the_cap_is_the_window_s_room_at_most_max_tokens_named_as_the_host_wants() {
        let mut s = openai();
        let mut req = ChatRequest::default();
        let body = request_body(&req, &s);
        assert_eq!(body["max_completion_tokens"], 1000);
        assert!(body.get("max_tokens").is_none());
        req.max_tokens = Some(300);
        s.base_url = "http://127.0.0.1:8080/v1".into();
        let body = request_body(&req, &s);
        assert_eq!(body["max_tokens"], 300);
        req.max_tokens = Some(5000);
        assert_eq!(request_body(&req, &s)["max_tokens"], 1000);
        // The text sent is that body.
        let text: Value = serde_json::from_str(&request_text(&req, &s)).unwrap();
        assert_eq!(text, request_body(&req, &s));
    }
}
