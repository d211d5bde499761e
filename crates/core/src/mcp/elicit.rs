//! A server's `elicitation/create` (form mode): the fields its schema asks for, each with its
//! type, its choices and its default (SEP-1034), and the dialogue that fills them in on a
//! terminal. A field left empty takes its default; what the user gives is checked against the
//! field's type before it is sent. Without a terminal nothing is asked and the answer is
//! "decline". The words of the dialogue come from the caller (the REPL's text catalogue).

use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::Arc;

use crate::escape;
use serde_json::{Map, Value};

/// What the user answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Accept(Value),
    Decline,
    Cancel,
}

/// Who answers a server's form: the terminal, or no one (declined).
pub type Elicitor = Arc<dyn Fn(Form) -> Pin<Box<dyn Future<Output = Answer> + Send>> + Send + Sync>;

/// The kinds of fields the spec allows in a form (primitive values only).
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Text,
    Number,
    Integer,
    Boolean,
    /// One of these values (`enum`, or `oneOf` with `const`s), with their titles.
    Choice(Vec<(String, String)>),
    /// Any of these (`type: array` with `items.enum` or `items.anyOf`).
    Choices(Vec<(String, String)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub title: String,
    pub description: String,
    pub kind: Kind,
    pub default: Option<Value>,
    pub required: bool,
}

/// One form: the server's message and its fields, in the schema's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    /// The server's name in `new`'s config (set by the manager).
    pub server: String,
    pub message: String,
    pub fields: Vec<Field>,
}

fn text(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}

fn options(schema: &Value) -> Option<Vec<(String, String)>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let v = v.as_str()?.to_string();
                    let title = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| v.clone());
                    Some((v, title))
                })
                .collect(),
        );
    }
    let list = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|o| {
                let v = o.get("const")?.as_str()?.to_string();
                let title = o
                    .get("title")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| v.clone());
                Some((v, title))
            })
            .collect(),
    )
}

impl Form {
    /// The form of a request's params (`{"mode": "form", "message", "requestedSchema"}`);
    /// None for another mode (a URL) or a schema that is not an object of fields.
    pub fn from_request(params: &Value) -> Option<Form> {
        if params.get("mode").and_then(Value::as_str).unwrap_or("form") != "form" {
            return None;
        }
        let schema = params.get("requestedSchema")?;
        let properties = schema.get("properties")?.as_object()?;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fields = properties
            .iter()
            .map(|(name, p)| {
                let kind = match p.get("type").and_then(Value::as_str) {
                    Some("array") => {
                        Kind::Choices(p.get("items").and_then(options).unwrap_or_default())
                    }
                    _ if options(p).is_some() => Kind::Choice(options(p).unwrap_or_default()),
                    Some("number") => Kind::Number,
                    Some("integer") => Kind::Integer,
                    Some("boolean") => Kind::Boolean,
                    _ => Kind::Text,
                };
                Field {
                    name: name.clone(),
                    title: match text(p.get("title")) {
                        t if t.is_empty() => name.clone(),
                        t => t,
                    },
                    description: text(p.get("description")),
                    kind,
                    default: p.get("default").cloned(),
                    required: required.contains(&name.as_str()),
                }
            })
            .collect::<Vec<Field>>();
        // In name order whatever the JSON map keeps (the ACP crate turns serde_json's
        // `preserve_order` on for the whole binary): the same form in every build.
        let mut fields = fields;
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        Some(Form {
            server: String::new(),
            message: text(params.get("message")),
            fields,
        })
    }

    /// Every field that has a default, at its default (what accepting without typing sends).
    pub fn defaults(&self) -> Map<String, Value> {
        self.fields
            .iter()
            .filter_map(|f| Some((f.name.clone(), f.default.clone()?)))
            .collect()
    }
}

/// What was typed is not a value of the field's type (or one of its choices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAValue;

impl Field {
    /// What the user typed as this field's value; None for an empty line (the default, or
    /// nothing).
    pub fn parse(&self, typed: &str) -> Result<Option<Value>, NotAValue> {
        let typed = typed.trim();
        if typed.is_empty() {
            return Ok(None);
        }
        let pick = |options: &[(String, String)], typed: &str| -> Option<String> {
            if let Ok(n) = typed.parse::<usize>()
                && (1..=options.len()).contains(&n)
            {
                return Some(options[n - 1].0.clone());
            }
            options
                .iter()
                .find(|(v, t)| v == typed || t.eq_ignore_ascii_case(typed))
                .map(|(v, _)| v.clone())
        };
        let value = match &self.kind {
            Kind::Text => Value::String(typed.to_string()),
            Kind::Number => typed
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or(NotAValue)?,
            Kind::Integer => Value::from(typed.parse::<i64>().map_err(|_| NotAValue)?),
            Kind::Boolean => match typed.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => Value::Bool(true),
                "n" | "no" | "false" | "0" => Value::Bool(false),
                _ => return Err(NotAValue),
            },
            Kind::Choice(options) => Value::String(pick(options, typed).ok_or(NotAValue)?),
            Kind::Choices(options) => Value::Array(
                typed
                    .split(',')
                    .map(|t| pick(options, t.trim()).map(Value::String).ok_or(NotAValue))
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(Some(value))
    }

    /// The choices or the type, for the question (`1) active  2) inactive`, `yes/no`).
    pub fn hint(&self) -> String {
        let list = |o: &[(String, String)]| {
            o.iter()
                .enumerate()
                .map(|(i, (_, t))| format!("{}) {t}", i + 1))
                .collect::<Vec<_>>()
                .join("  ")
        };
        match &self.kind {
            Kind::Text => String::new(),
            Kind::Number | Kind::Integer => "#".into(),
            Kind::Boolean => "y/n".into(),
            Kind::Choice(o) => list(o),
            Kind::Choices(o) => format!("{} (a,b)", list(o)),
        }
    }
}

/// The words of the dialogue, in the user's language.
pub struct Words {
    /// The first line: who asks (`{server}`).
    pub heading: String,
    /// After a value the field does not take.
    pub invalid: String,
    /// After a required field left empty with no default.
    pub required: String,
    /// The last question: send it? (`[Y/n]`, n: decline).
    pub send: String,
}

/// How the dialogue shows a value (a default in brackets).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "y".into(),
        Value::Bool(false) => "n".into(),
        Value::Array(a) => a.iter().map(shown).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Asks each field on `output`, reading the answers from `input`; the end of input cancels.
/// The server's words are shown with control characters escaped.
pub fn dialogue(
    form: &Form,
    words: &Words,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Answer {
    let esc = escape::escape_controls;
    let _ = writeln!(output, "{}", words.heading);
    if !form.message.trim().is_empty() {
        let _ = writeln!(output, "  {}", esc(form.message.trim()));
    }
    let mut content = Map::new();
    let mut read = |output: &mut dyn Write, prompt: &str| -> Option<String> {
        let _ = write!(output, "{prompt}");
        let _ = output.flush();
        let mut line = String::new();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    };
    for field in &form.fields {
        let mut prompt = format!("  {}", esc(&field.title));
        if !field.description.is_empty() && field.description != field.title {
            prompt.push_str(&format!(" ({})", esc(&field.description)));
        }
        let hint = field.hint();
        if !hint.is_empty() {
            prompt.push_str(&format!(" {}", esc(&hint)));
        }
        if let Some(d) = &field.default {
            prompt.push_str(&format!(" [{}]", esc(&shown(d))));
        }
        prompt.push_str(if field.required { " *: " } else { ": " });
        let mut tries = 0;
        loop {
            tries += 1;
            let Some(line) = read(output, &prompt) else {
                let _ = writeln!(output);
                return Answer::Cancel;
            };
            match field.parse(&line) {
                Ok(Some(v)) => {
                    content.insert(field.name.clone(), v);
                    break;
                }
                Ok(None) => match &field.default {
                    Some(d) => {
                        content.insert(field.name.clone(), d.clone());
                        break;
                    }
                    None if !field.required => break,
                    None => {
                        let _ = writeln!(output, "  {}", words.required);
                    }
                },
                Err(NotAValue) => {
                    let _ = writeln!(output, "  {}", words.invalid);
                }
            }
            if tries >= 3 {
                return Answer::Cancel;
            }
        }
    }
    match read(output, &format!("{} ", words.send)) {
        None => Answer::Cancel,
        Some(l) if matches!(l.trim().to_ascii_lowercase().as_str(), "n" | "no") => Answer::Decline,
        Some(_) => Answer::Accept(Value::Object(content)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Form {
        Form::from_request(&json!({
            "mode": "form",
            "message": "Who are you?\u{1b}[2J",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "email": {"type": "string"},
            }, "required": ["email"]},
        }))
        .unwrap()
    }

    fn words() -> Words {
        Words {
            heading: "server asks".into(),
            invalid: "invalid".into(),
            required: "required".into(),
            send: "send? [Y/n]".into(),
        }
    }

    #[test]
    fn fields_have_their_kinds_and_defaults() {
        let form = form();
        assert_eq!(form.fields.len(), 6);
        let status = form.fields.iter().find(|f| f.name == "status").unwrap();
        assert!(matches!(&status.kind, Kind::Choice(o) if o.len() == 2));
        assert_eq!(
            Value::Object(form.defaults()),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
        );
        assert!(Form::from_request(&json!({"mode": "url", "url": "https://x"})).is_none());
    }

    #[test]
    fn empty_answers_take_the_defaults_and_typed_ones_are_checked() {
        let form = form();
        // The fields in name order: a wrong age first, the required email typed, Enter on the
        // name and the score (their defaults), a choice by number, no, then Enter to send.
        let typed = "forty\n41\nme@example.com\n\n\n2\nn\n\n";
        let mut out = Vec::new();
        let answer = dialogue(&form, &words(), &mut typed.as_bytes(), &mut out);
        assert_eq!(
            answer,
            Answer::Accept(json!({"name": "John Doe", "age": 41, "score": 95.5,
                "status": "inactive", "verified": false, "email": "me@example.com"}))
        );
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.contains("invalid"), "{shown}");
        assert!(
            !shown.contains('\u{1b}'),
            "the server's escape reached the terminal: {shown}"
        );
    }

    #[test]
    fn no_means_decline_and_the_end_of_input_cancels() {
        let form = form();
        let mut out = Vec::new();
        let typed = "\nme\n\n\n\n\nn\n";
        assert_eq!(
            dialogue(&form, &words(), &mut typed.as_bytes(), &mut out),
            Answer::Decline
        );
        assert_eq!(
            dialogue(&form, &words(), &mut "\n".as_bytes(), &mut out),
            Answer::Cancel
        );
    }
}
