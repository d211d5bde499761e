//! `cargo run --release --example checkpointbench DIR FILES RUNS`: makes a folder of FILES files of
//! about 3 KB in DIR (once), then takes RUNS snapshots of it, each after changing one file, as a
//! turn whose `bash` call changes one file does (for profiling: run under
//! `valgrind --tool=callgrind`; the suite's rows compare the same with `git status`).
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]

use new_core::checkpoint::CheckpointSettings;
use new_core::checkpoint::CheckpointStore;
use std::env;
use std::fs;
use std::path::Path;
use std::time::Duration;
use std::time::Instant;

fn main() {
    let args: Vec<String> = env::args().collect();
    let root = Path::new(&args[1]);
    let files: usize = args[2].parse().unwrap();
    let runs: usize = args[3].parse().unwrap();
    let work = root.join("work");
    if !work.exists() {
        let body = "let x = 42; // some code on a line of its own\n".repeat(64);
        for i in 0..files {
            let sub = work.join(format!("src/m{:03}", i % 100));
            fs::create_dir_all(&sub).unwrap();
            fs::write(sub.join(format!("f{i}.rs")), format!("// file {i}\n{body}")).unwrap();
        }
    }
    let store = CheckpointStore::new(&root.join("data"));
    let settings = CheckpointSettings::default();
    let (mut id, mut manifest) = store.snapshot(&work, &settings, None).unwrap();
    let mut best = Duration::MAX;
    for run in 0..runs {
        fs::write(work.join("src/m001/f1.rs"), format!("// changed {run}\n")).unwrap();
        let start = Instant::now();
        (id, manifest) = store
            .snapshot(&work, &settings, Some((&id, &manifest)))
            .unwrap();
        best = best.min(start.elapsed());
    }
    println!(
        "{} files: fastest snapshot {:.1} ms",
        manifest.files.len(),
        best.as_secs_f64() * 1e3
    );
}
