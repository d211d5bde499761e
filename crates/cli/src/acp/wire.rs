//! JSON-RPC 2.0 over stdio, one message a line, as ACP frames it: what `new acp` writes (answers,
//! notifications, its own requests to the editor) and what it reads, sorted. stdout carries
//! nothing else.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value, json};
use std::io;

/// JSON-RPC's error codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP's: the session named is not known here.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// An error to answer a request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub fn params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(INTERNAL_ERROR, message)
    }
}

/// What the editor sent that the main loop handles.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
    },
    /// stdin closed: the editor is gone.
    Closed,
}

/// The answer to one of our requests: its result, or the error's message.
pub type Reply = Result<Value, String>;

/// The writing half, shared by the main loop, the front end of a turn and the reading thread.
pub struct Wire {
    out: Mutex<Box<dyn Write + Send>>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, Sender<Reply>>>,
}

impl Wire {
    pub fn stdout() -> Arc<Wire> {
        Arc::new(Wire {
            out: Mutex::new(Box::new(io::stdout())),
            next_id: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// One message, one line, flushed. A closed stdout means the editor left: reading then ends
    /// too, so the failure is logged rather than raised.
    fn write(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "writing to the editor");
        }
    }

    pub fn respond(&self, id: &Value, result: impl Serialize) {
        let result = serde_json::to_value(result).unwrap_or(Value::Null);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub fn error(&self, id: &Value, error: &RpcError) {
        self.write(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": error.code, "message": error.message},
        }));
    }

    pub fn notify(&self, method: &str, params: impl Serialize) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request to the editor; its answer arrives on the receiver (dropped unanswered
    /// when stdin closes).
    pub fn request(&self, method: &str, params: impl Serialize) -> Receiver<Reply> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx
    }

    fn deliver(&self, id: &Value, reply: Reply) {
        let Some(id) = id.as_u64() else {
            return;
        };
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(tx) = waiting {
            let _ = tx.send(reply);
        }
    }

    /// No answer will come: every request still waiting is dropped.
    fn abandon(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// What the reading thread decides alone, without the main loop (which may be busy with a turn).
pub trait Urgent: Send + Sync {
    /// `session/cancel`.
    fn cancel(&self, session: &str);
    /// A request the main loop must not queue: its error, when it is refused at once.
    fn refuse(&self, method: &str, params: &Value) -> Option<RpcError>;
    /// stdin closed: stop whatever runs.
    fn closed(&self);
}

/// Reads stdin line by line until it closes: answers to our requests go to whoever waits for
/// them, `session/cancel` acts at once, bad lines are answered with their error, the rest is
/// handed to the main loop.
pub fn read_loop(
    input: impl BufRead,
    wire: &Wire,
    urgent: &dyn Urgent,
    to_main: &Sender<Incoming>,
) {
    for line in input.lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(m) => m,
            Err(e) => {
                wire.error(
                    &Value::Null,
                    &RpcError::new(PARSE_ERROR, format!("not JSON: {e}")),
                );
                continue;
            }
        };
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            (Some("session/cancel"), None) => {
                if let Some(session) = params.get("sessionId").and_then(Value::as_str) {
                    urgent.cancel(session);
                }
            }
            (Some(method), None) => {
                let _ = to_main.send(Incoming::Notification {
                    method: method.to_string(),
                });
            }
            (Some(method), Some(id)) => {
                if let Some(error) = urgent.refuse(method, &params) {
                    wire.error(&id, &error);
                    continue;
                }
                let _ = to_main.send(Incoming::Request {
                    id,
                    method: method.to_string(),
                    params,
                });
            }
            (None, Some(id)) if message.get("result").is_some() => {
                wire.deliver(&id, Ok(message["result"].clone()));
            }
            (None, Some(id)) if message.get("error").is_some() => {
                let text = message["error"]["message"]
                    .as_str()
                    .unwrap_or("error")
                    .to_string();
                wire.deliver(&id, Err(text));
            }
            (None, id) => wire.error(
                &id.unwrap_or(Value::Null),
                &RpcError::new(INVALID_REQUEST, "neither a request nor an answer"),
            ),
        }
    }
    urgent.closed();
    wire.abandon();
    let _ = to_main.send(Incoming::Closed);
}
