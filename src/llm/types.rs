//! Types shared by every provider: the messages a request carries, tool calls in the OpenAI shape,
//! token usage, and the events a streamed answer produces.

use serde::{Deserialize, Deserializer, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool call as the OpenAI API shapes it: `{"id","type":"function","function":{"name","arguments"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".to_string()
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    #[serde(default)]
    pub name: String,
    /// The arguments as a JSON text. Files written by other tools sometimes hold an object here;
    /// it is read back as its JSON text.
    #[serde(default, deserialize_with = "string_or_json")]
    pub arguments: String,
}

fn string_or_json<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(match value {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// Token counts reported by a server for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// One message of a request, in provider-neutral form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub reasoning: Option<String>,
    /// The provider's signature of the reasoning (Anthropic thinking blocks), sent back with it.
    pub reasoning_signature: Option<String>,
}

impl ChatMessage {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning: None,
            reasoning_signature: None,
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            tool_call_id: Some(call_id.into()),
            ..ChatMessage::text(Role::Tool, content)
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Everything one request needs.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
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
        delay: std::time::Duration,
        reason: &'a str,
    },
}
