//! Integration tests: the `new` binary driven as a user drives it, against a scripted server.
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]

mod acp;
mod branches;
mod checkpoints;
mod context;
mod cost;
mod docs;
mod e2e;
mod first_hour;
mod fixtures;
mod hooks;
mod import;
mod log;
mod mcp;
#[cfg(unix)]
mod mcp_oauth;
mod memory;
mod oneshot;
mod permissions;
mod project_files;
mod providers;
#[cfg(unix)]
mod pty;
mod repl;
#[cfg(unix)]
mod sandbox;
#[cfg(unix)]
mod secrets;
mod session;
mod skills;
mod subagents;
mod support;
mod tree;
mod trust;
mod web;
