//! The shared vocabulary, on the ground floor: who wrote a message ([`Role`]), tool calls in the
//! OpenAI shape ([`ToolCall`]), token counts ([`Usage`]), a message of a request ([`ChatMessage`])
//! and a tool as the model sees it ([`ToolSpec`]); a message's [`Id`]; the names people give
//! the tools ([`canonical`]). Conversations and providers (`llm`) both stand on it; it knows
//! neither.

mod id;
mod tool_names;

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};

pub use id::{Id, new_id};
use serde::de::Error;
#[cfg(test)]
use std::mem;
pub use tool_names::{TOOL_ALIASES, canonical};

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
/// Written in that shape; read also flat, `{"id","name","arguments"}`, as some writers store it
/// (arguments as a JSON text or an object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    pub id: String,
    /// Always `function` in practice: kept without an allocation then (a big conversation holds
    /// many calls).
    #[serde(rename = "type", default = "function_kind")]
    pub kind: Cow<'static, str>,
    pub function: FunctionCall,
}

fn function_kind() -> Cow<'static, str> {
    Cow::Borrowed("function")
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Either {
            #[serde(default)]
            id: Option<String>,
            #[serde(rename = "type", default)]
            kind: Option<String>,
            #[serde(default)]
            function: Option<FunctionCall>,
            #[serde(default)]
            name: Option<String>,
            #[serde(default, deserialize_with = "string_or_json")]
            arguments: String,
        }
        let raw = Either::deserialize(d)?;
        let function = match raw.function {
            Some(f) => f,
            None => FunctionCall {
                name: raw.name.ok_or_else(|| Error::missing_field("function"))?,
                arguments: raw.arguments,
            },
        };
        Ok(ToolCall {
            id: raw.id.unwrap_or_default(),
            kind: match raw.kind {
                Some(kind) if kind != "function" => Cow::Owned(kind),
                _ => function_kind(),
            },
            function,
        })
    }
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

impl Usage {
    /// Adds one answer's token counts to this total.
    pub fn add(&mut self, u: &Usage) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.cache_read_tokens = add(self.cache_read_tokens, u.cache_read_tokens);
        self.cache_write_tokens = add(self.cache_write_tokens, u.cache_write_tokens);
        self.reasoning_tokens = add(self.reasoning_tokens, u.reasoning_tokens);
    }
}

/// One message of a request, in provider-neutral form, borrowing from the conversation what it
/// sends as stored (a request copies no message of the branch, only what it changes: a result
/// sent as a preview, the marker of an interrupted answer).
#[derive(Debug, Clone)]
pub struct ChatMessage<'a> {
    pub role: Role,
    pub content: Cow<'a, str>,
    /// What few messages of a request have, boxed so that a long branch's request stays small
    /// (48 bytes a message); read through [`ChatMessage::tool_calls`] and its neighbours.
    pub extra: Option<Box<ChatExtra<'a>>>,
    /// The node this message was made from, when it is that node as stored (its text borrowed,
    /// its calls and reasoning its own): what lets the next request of the conversation reuse
    /// the text this one was written as. Not part of what the message says.
    pub source: Option<&'a Id>,
}

/// Two messages are equal when they say the same; where they came from does not count.
impl PartialEq for ChatMessage<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role && self.content == other.content && self.extra == other.extra
    }
}

impl Eq for ChatMessage<'_> {}

/// The fields of a request's message that most lack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatExtra<'a> {
    /// The calls an assistant message made.
    pub tool_calls: Cow<'a, [ToolCall]>,
    pub tool_call_id: Option<Cow<'a, str>>,
    pub reasoning: Option<Cow<'a, str>>,
    /// The provider's signature of the reasoning (Anthropic thinking blocks), sent back with it.
    pub reasoning_signature: Option<Cow<'a, str>>,
}

impl<'a> ChatMessage<'a> {
    pub fn text(role: Role, content: impl Into<Cow<'a, str>>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            extra: None,
            source: None,
        }
    }

    /// The same message, said to be node `id` as stored.
    pub fn from_node(mut self, id: &'a Id) -> Self {
        self.source = Some(id);
        self
    }

    pub fn tool_result(call_id: impl Into<Cow<'a, str>>, content: impl Into<Cow<'a, str>>) -> Self {
        ChatMessage {
            extra: Some(Box::new(ChatExtra {
                tool_call_id: Some(call_id.into()),
                ..ChatExtra::default()
            })),
            ..ChatMessage::text(Role::Tool, content)
        }
    }

    /// The same message with the reasoning (and its signature) that produced it; boxed only
    /// when there is some.
    pub fn with_reasoning(
        mut self,
        reasoning: Option<Cow<'a, str>>,
        signature: Option<Cow<'a, str>>,
    ) -> Self {
        if reasoning.is_some() || signature.is_some() {
            let extra = self.extra.get_or_insert_with(Box::default);
            extra.reasoning = reasoning;
            extra.reasoning_signature = signature;
        }
        self
    }

    /// The same message with the calls it made (boxed only when there are some).
    pub fn with_calls(mut self, calls: impl Into<Cow<'a, [ToolCall]>>) -> Self {
        let calls = calls.into();
        if !calls.is_empty() {
            self.extra.get_or_insert_with(Box::default).tool_calls = calls;
        }
        self
    }

    /// The calls an assistant message made; none for any other.
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.extra.as_ref().map_or(&[], |e| &e.tool_calls)
    }

    /// The call a tool result answers.
    pub fn tool_call_id(&self) -> Option<&str> {
        self.extra.as_ref()?.tool_call_id.as_deref()
    }

    pub fn reasoning(&self) -> Option<&str> {
        self.extra.as_ref()?.reasoning.as_deref()
    }

    pub fn reasoning_signature(&self) -> Option<&str> {
        self.extra.as_ref()?.reasoning_signature.as_deref()
    }

    /// The same message owning its texts (to keep it beyond the conversation it came from).
    pub fn into_owned(self) -> ChatMessage<'static> {
        let owned = |c: Option<Cow<'a, str>>| c.map(|c| Cow::Owned(c.into_owned()));
        ChatMessage {
            role: self.role,
            content: Cow::Owned(self.content.into_owned()),
            extra: self.extra.map(|e| {
                Box::new(ChatExtra {
                    tool_calls: Cow::Owned(e.tool_calls.into_owned()),
                    tool_call_id: owned(e.tool_call_id),
                    reasoning: owned(e.reasoning),
                    reasoning_signature: owned(e.reasoning_signature),
                })
            }),
            source: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_are_read_nested_or_flat_and_written_nested() {
        let nested: ToolCall = serde_json::from_str(
            r#"{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"filepath\":\"a\"}"}}"#,
        )
        .unwrap();
        for flat in [
            r#"{"id":"c1","name":"read_file","arguments":"{\"filepath\":\"a\"}"}"#,
            r#"{"id":"c1","name":"read_file","arguments":{"filepath":"a"}}"#,
            r#"{"id":"c1","type":"function","name":"read_file","arguments":{"filepath":"a"}}"#,
        ] {
            let call: ToolCall = serde_json::from_str(flat).unwrap();
            assert_eq!(call, nested, "{flat}");
        }
        assert_eq!(
            serde_json::to_string(&nested).unwrap(),
            r#"{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"filepath\":\"a\"}"}}"#
        );
        assert!(serde_json::from_str::<ToolCall>(r#"{"id":"c1"}"#).is_err());
    }

    #[test]
    fn a_request_message_is_small_and_boxes_only_what_it_has() {
        // A long branch's request is a list of these: 48 bytes each on 64-bit systems.
        assert!(mem::size_of::<ChatMessage<'_>>() <= 48);
        let plain = ChatMessage::text(Role::Assistant, "hi").with_reasoning(None, None);
        assert!(plain.extra.is_none());
        assert_eq!((plain.reasoning(), plain.tool_call_id()), (None, None));
        let thought = plain.with_reasoning(Some("why".into()), Some("sig".into()));
        assert_eq!(thought.reasoning(), Some("why"));
        assert_eq!(thought.reasoning_signature(), Some("sig"));
        let result = ChatMessage::tool_result("c1", "done").into_owned();
        assert_eq!(result.tool_call_id(), Some("c1"));
        assert_eq!(result.reasoning(), None);
    }
}
