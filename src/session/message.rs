//! One node of a conversation tree.

use chrono::{DateTime, Utc};

use crate::llm::{Role, ToolCall, Usage};

/// A message id: 8 hex characters taken from a UUID v4.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub role: Role,
    /// None for the root (the system prompt).
    pub parent_id: Option<String>,
    pub content: String,
    pub timestamp: DateTime<Utc>,
    /// Derived from the children's `parent_id`, in creation order; never stored.
    pub children_ids: Vec<String>,
    /// For tool messages: the call this result answers.
    pub tool_call_id: Option<String>,
    /// For assistant messages that asked for tools.
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The answer was cut short by the user or the network.
    pub interrupted: bool,
    pub reasoning: Option<String>,
    pub reasoning_signature: Option<String>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            id: new_id(),
            role,
            parent_id: None,
            content: content.into(),
            timestamp: now(),
            children_ids: Vec::new(),
            tool_call_id: None,
            tool_calls: None,
            interrupted: false,
            reasoning: None,
            reasoning_signature: None,
            model: None,
            usage: None,
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Message::new(Role::Tool, content)
        }
    }

    /// The tool calls of an assistant message, empty for any other.
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }
}

/// The current time at the precision the file format uses (whole seconds).
pub fn now() -> DateTime<Utc> {
    use chrono::Timelike;
    let t = Utc::now();
    t.with_nanosecond(0).unwrap_or(t)
}
