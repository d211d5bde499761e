//! The REPL: line editing, the command table and its dispatch, tree drawing and output.
//! [`run`] is the whole program once the arguments are parsed.
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]
#![forbid(unsafe_code)]

pub mod acp;
mod branch_view;
mod checkpoint_view;
pub mod commands;
pub mod context_view;
mod editor;
mod handlers;
pub mod highlight;
mod idle;
pub mod import_cmd;
pub mod markdown;
mod mcp_view;
mod memory_view;
mod numbers;
pub mod output;
pub mod print_mode;
mod reader;
mod repl;
pub mod sandbox_view;
mod setup;
mod skills_view;
mod spinner;
mod terminal;
pub mod text;
pub mod tree_view;
mod typeahead;
pub mod web;
mod wrap;

pub use repl::{App, Flow, Launch, default_datadir, run};
