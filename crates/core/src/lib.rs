//! The engine of `new`, a terminal AI agent whose conversations are trees. No terminal here: the
//! front ends (the REPL, `-p`, in the `new` crate) call it and render what it tells them; every OS
//! detail and every `unsafe` is in `new_sys`.
//!
//!
//! - [`session`]: messages, the conversation tree and its append-only JSONL storage;
//! - [`llm`]: the provider clients and the types they share;
//! - [`tools`]: the sandboxed file tools the model may call;
//! - [`skill`] and [`prompt`]: roles and skills, and the system prompt built from them;
//! - [`context`]: token accounting, previews of big tool results, summary nodes;
//! - [`memory`]: what is remembered across sessions, and the review that learns it;
//! - [`mcp`]: MCP servers and their tools;
//! - [`hooks`]: the user's programs run at points of the loop;
//! - [`agent`]: one user input → model ⇄ tools → final answer;
//! - [`config`]: layered configuration;
//! - [`log`]: the program's own log file (timings and counts, never contents).

#![forbid(unsafe_code)]

pub mod agent;
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod conversation;
pub mod hooks;
pub mod layers;
pub mod llm;
pub mod log;
pub mod mcp;
pub mod memory;
pub mod project_file;
pub mod prompt;
pub mod skill;
pub mod tools;
pub mod trust;
pub mod utf8;
pub mod vocab;
