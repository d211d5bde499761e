//! What a provider exchanges: the request, the answer assembled from the stream, and the events a
//! streamed answer produces. The vocabulary they share with conversations is [`crate::vocab`].

pub use crate::vocab::*;
use std::time::Duration;

/// Everything one request needs.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest<'a> {
    pub model: String,
    pub messages: Vec<ChatMessage<'a>>,
    pub tools: Vec<ToolSpec>,
    /// The tools are described but may not be called (`tool_choice` none): the wrap-up answer
    /// at the round limit, where the history holds tool calls the provider needs described.
    pub no_tool_calls: bool,
    /// The most tokens the answer may take, when the caller knows what the context window
    /// leaves after the request; the provider sends at most its `max_tokens` setting.
    pub max_tokens: Option<u32>,
}

impl ChatRequest<'_> {
    /// The same request owning its messages' texts.
    pub fn to_owned(&self) -> ChatRequest<'static> {
        ChatRequest {
            model: self.model.clone(),
            messages: self
                .messages
                .iter()
                .map(|m| m.clone().into_owned())
                .collect(),
            tools: self.tools.clone(),
            no_tool_calls: self.no_tool_calls,
            max_tokens: self.max_tokens,
        }
    }
}

/// Why an answer ended, in the original design's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseStatus {
    /// The model answered without asking for tools.
    Complete,
    /// The model asked for one or more tools.
    NeedTool,
}

/// A whole answer, assembled from the stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    pub content: String,
    pub reasoning: String,
    pub reasoning_signature: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
}

impl ChatResponse {
    pub fn status(&self) -> ResponseStatus {
        if self.tool_calls.is_empty() {
            ResponseStatus::Complete
        } else {
            ResponseStatus::NeedTool
        }
    }
}

/// What a streamed answer reports while it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent<'a> {
    Text(&'a str),
    Reasoning(&'a str),
    /// A tool call began; its arguments follow.
    ToolCallStarted {
        name: &'a str,
    },
    /// A request failed in a way a retry may cure; attempt `attempt` of `of` follows after `delay`.
    Retry {
        attempt: u32,
        of: u32,
        delay: Duration,
        reason: &'a str,
    },
}
