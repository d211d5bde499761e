//! `cargo run --release --example searchbench DIR grep|glob PATTERN RUNS`: times the search tools
//! over a folder (for profiling; the suite's rows compare them with ripgrep).
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]

use new_core::fs::confine::Workdir;
use new_core::tools::Cancel;
use new_core::tools::builtin::{Glob, Grep};
use std::env;
use std::hint;
use std::path::Path;
use std::time::Duration;
use std::time::Instant;

fn main() {
    let args: Vec<String> = env::args().collect();
    let workdir = Workdir::new(Path::new(&args[1])).unwrap();
    let json = serde_json::json!({"pattern": args[3]});
    let runs: usize = args[4].parse().unwrap();
    let cancel = Cancel::default();
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let out = if args[2] == "glob" {
            Glob.find(&json, &workdir, &cancel)
        } else {
            Grep.search(&json, &workdir, &cancel)
        }
        .unwrap();
        best = best.min(start.elapsed());
        hint::black_box(out);
    }
    println!(
        "{} {}: fastest {:.1} ms",
        args[2],
        args[3],
        best.as_secs_f64() * 1e3
    );
}
