//! `cargo run --release --example searchbench DIR grep|glob PATTERN RUNS`: times the search tools
//! over a folder (for profiling; the suite's rows compare them with ripgrep).

use new_core::fs::confine::Workdir;
use new_core::tools::Cancel;
use new_core::tools::builtin::{Glob, Grep};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = Workdir::new(std::path::Path::new(&args[1])).unwrap();
    let json = serde_json::json!({"pattern": args[3]});
    let runs: usize = args[4].parse().unwrap();
    let cancel = Cancel::default();
    let mut best = std::time::Duration::MAX;
    for _ in 0..runs {
        let start = std::time::Instant::now();
        let out = if args[2] == "glob" {
            Glob.find(&json, &workdir, &cancel)
        } else {
            Grep.search(&json, &workdir, &cancel)
        }
        .unwrap();
        best = best.min(start.elapsed());
        std::hint::black_box(out);
    }
    println!(
        "{} {}: fastest {:.1} ms",
        args[2],
        args[3],
        best.as_secs_f64() * 1e3
    );
}
