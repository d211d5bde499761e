//! Profiling aid: generate a conversation of N messages (forks every 100), then, unless the second
//! argument is `gen`, load it and draw `/tree` (or, with `values`, only parse its lines into
//! `serde_json::Value`s, the benchmark's floor). Run under `valgrind --tool=callgrind` to count
//! instructions for each part. `loadtree N bushy DIR` writes the benchmark's bushy tree of N
//! messages (forks everywhere, tool calls) into DIR as `bushy.jsonl` and keeps it, for timing and
//! profiling the binary's `--resume` of it.
// `clippy::absolute_paths` is checked on Linux, where all but the other systems' own code builds.
#![cfg_attr(not(target_os = "linux"), allow(clippy::absolute_paths))]

use new_cli::tree_view::{render_rows, tree_rows};
use new_core::config::Lang;
use new_core::conversation::{Store, sample};
use std::env;
use std::fs;
use std::path::Path;

fn main() {
    let n: usize = env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let only_generate = env::args().nth(2).as_deref() == Some("gen");
    if env::args().nth(2).as_deref() == Some("bushy") {
        let dir = env::args().nth(3).expect("loadtree N bushy DIR");
        let store = Store::open(Path::new(&dir)).unwrap();
        let (conv, records) = sample::bushy("bushy", n);
        let _ = fs::remove_file(store.path("bushy"));
        store.create(&conv, &records).unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (conv, records) = sample::branching("big", n);
    store.create(&conv, &records).unwrap();
    drop((conv, records));
    if only_generate {
        return;
    }
    if env::args().nth(2).as_deref() == Some("values") {
        let text = fs::read_to_string(store.path("big")).unwrap();
        let n = text
            .lines()
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .unwrap()
                    .is_object()
            })
            .count();
        assert!(n > 0);
        return;
    }
    let (conv, _) = store.load("big", "system prompt").unwrap();
    let text = render_rows(&tree_rows(&conv, false, Lang::En), Lang::En);
    fs::write(dir.path().join("tree.txt"), text).unwrap();
}
