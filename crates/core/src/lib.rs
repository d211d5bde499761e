//! The engine of `new`, a terminal AI agent whose conversations are trees. No terminal here: the
//! front ends (the REPL, `-p`, in the `new` crate) call it and render what it tells them; every OS
//! detail and every `unsafe` is in `new_sys`.
//!
//! Its modules stand on floors, listed here from the ground up; a module uses only those listed
//! before it, never one after (so none forms a circle with another: `modgraph.py` checks it):
//!
//! - the ground floor, which knows no feature: [`vocab`] (roles, tool calls, usage, message ids,
//!   the names people give the tools), [`fs`] (paths confined to WORKDIR, project files read
//!   safely, files written whole, hashes), [`layers`] (where files live, whose a setting is),
//!   [`secret`] (the environment's secrets), [`http`] (the one HTTP client setup), [`escape`]
//!   (text made safe for a terminal), [`utf8`], [`sync`] (a lock a panicked thread leaves usable), [`log`] (the program's own log file: timings and
//!   counts, never contents);
//! - [`conversation`]: messages, the conversation tree and its append-only JSONL storage;
//!   [`llm`]: the provider clients and the types they share; [`trust`]: what the user trusted;
//! - [`tools`]: the file tools and `bash`, permissions, and the [`tools::ToolSource`]s that add
//!   tools a feature owns; [`context`]: token accounting, previews of big tool results, summary
//!   nodes; [`memory`]: what is remembered across sessions, and the review that learns it;
//! - [`skill`] (and its `use_skill` tool), [`mcp`] (MCP servers, and their tools as a source),
//!   [`hooks`] (the user's programs run at points of the loop), [`checkpoint`] (snapshots of
//!   WORKDIR);
//! - [`prompt`]: roles, instructions and the system prompt; [`agent`]: one user input → model ⇄
//!   tools → final answer;
//! - [`config`]: layered configuration, which reads every feature's section;
//! - [`session`]: one run of `new` with all of the above, its events and its front ends'
//!   requests (what the REPL, `-p` and other front ends call).
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]
#![forbid(unsafe_code)]

pub mod agent;
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod conversation;
pub mod escape;
pub mod fs;
pub mod hooks;
pub mod http;
pub mod layers;
pub mod llm;
pub mod log;
pub mod mcp;
pub mod memory;
pub mod prompt;
pub mod secret;
pub mod session;
pub mod skill;
pub mod sync;
pub mod tools;
pub mod trust;
pub mod utf8;
pub mod vocab;
