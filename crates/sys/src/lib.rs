//! Every OS detail of `new`, and all of its `unsafe`: the platform layer (files, terminals,
//! process groups, shells, Windows paths) and the OS sandbox (Landlock, seccomp and namespaces on
//! Linux, Seatbelt on macOS, job objects on Windows) with its network proxy. The engine
//! (`new_core`) and the front ends (`new`) forbid `unsafe`; what they need of the OS is here.
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]

pub mod os_sandbox;
pub mod platform;
pub mod process;
pub mod secret;
