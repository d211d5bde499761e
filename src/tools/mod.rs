//! Tools the model can call. The [`ToolRegistry`] declares them with JSON Schema and routes calls;
//! it does no truncation of its own: each tool owns its output (what is useful, how to page it, what
//! to do next). A failed or refused call becomes an error text for the model, never a crash.

pub mod builtin;
pub mod sandbox;

use serde_json::Value;

pub use sandbox::{Sandbox, SandboxError};

use crate::llm::ToolSpec;

/// Why a tool call failed; the text goes back to the model.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    #[error("invalid arguments: {0}")]
    Arguments(String),
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    pub fn io(action: &str, path: &str, e: std::io::Error) -> Self {
        ToolError::Failed(format!("{action} `{path}` failed: {e}"))
    }
}

/// A tool's answer: the text for the model and a one-line summary for the person watching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub summary: String,
}

/// What a call produced, success or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub content: String,
    pub summary: String,
    pub is_error: bool,
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;
    fn run(&self, args: &Value, sandbox: &Sandbox) -> Result<ToolOutput, ToolError>;
}

pub struct ToolRegistry {
    tools: Vec<Box<dyn Tool>>,
    sandbox: Sandbox,
}

impl ToolRegistry {
    /// The built-in file tools, confined to `sandbox`.
    pub fn builtin(sandbox: Sandbox) -> Self {
        ToolRegistry {
            tools: builtin::all(),
            sandbox,
        }
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// Runs one call. Unknown tools and unreadable arguments are answered, not raised.
    pub fn call(&self, name: &str, arguments: &str) -> ToolOutcome {
        let Some(tool) = self.tools.iter().find(|t| t.name() == name) else {
            return error_outcome(format!(
                "unknown tool `{name}`; available tools: {}",
                self.names().join(", ")
            ));
        };
        let args: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(arguments) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => {
                    return error_outcome("invalid arguments: expected a JSON object".to_string());
                }
                Err(e) => {
                    return error_outcome(format!(
                        "invalid arguments: not valid JSON ({e}); send the arguments as one JSON object"
                    ));
                }
            }
        };
        match tool.run(&args, &self.sandbox) {
            Ok(out) => ToolOutcome {
                content: out.content,
                summary: out.summary,
                is_error: false,
            },
            Err(e) => error_outcome(e.to_string()),
        }
    }
}

fn error_outcome(message: String) -> ToolOutcome {
    ToolOutcome {
        summary: message.clone(),
        content: format!("Error: {message}"),
        is_error: true,
    }
}

/// Argument helpers shared by the tools.
pub(crate) mod args {
    use super::ToolError;
    use serde_json::Value;

    pub fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
        match args.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(ToolError::Arguments(format!("`{key}` must be a string"))),
            None => Err(ToolError::Arguments(format!("`{key}` is required"))),
        }
    }

    pub fn opt_string<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::Arguments(format!("`{key}` must be a string"))),
        }
    }

    /// A non-negative integer; numbers sent as strings ("10") are accepted, as small models send them.
    pub fn opt_usize(args: &Value, key: &str) -> Result<Option<usize>, ToolError> {
        let bad = || ToolError::Arguments(format!("`{key}` must be a non-negative integer"));
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(|n| Some(n as usize)).ok_or_else(bad),
            Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    /// A boolean; "true"/"false" strings are accepted.
    pub fn opt_bool(args: &Value, key: &str) -> Result<Option<bool>, ToolError> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(_) => Err(ToolError::Arguments(format!(
                "`{key}` must be true or false"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> (tempfile::TempDir, ToolRegistry) {
        let dir = tempfile::tempdir().unwrap();
        let r = ToolRegistry::builtin(Sandbox::new(dir.path()).unwrap());
        (dir, r)
    }

    #[test]
    fn unknown_tools_and_bad_arguments_are_answered() {
        let (_d, r) = registry();
        let out = r.call("rm_rf", "{}");
        assert!(out.is_error);
        assert!(out.content.contains("unknown tool `rm_rf`"));
        assert!(out.content.contains("read_file, write_file, list_files"));
        let out = r.call("read_file", "{not json");
        assert!(out.is_error && out.content.contains("not valid JSON"));
        let out = r.call("read_file", "[1]");
        assert!(out.is_error && out.content.contains("JSON object"));
        let out = r.call("read_file", "{}");
        assert!(out.is_error && out.content.contains("`filepath` is required"));
    }

    #[test]
    fn specs_are_valid_schemas() {
        let (_d, r) = registry();
        for spec in r.specs() {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(spec.parameters["properties"].is_object());
            assert!(!spec.description.is_empty());
        }
    }
}
