//! Profiling aid: generate a conversation of N messages (forks every 100), then, unless the second
//! argument is `gen`, load it and draw `/tree` (or, with `values`, only parse its lines into
//! `serde_json::Value`s, the benchmark's floor). Run under `valgrind --tool=callgrind` to count
//! instructions for each part. `loadtree N bushy DIR` writes the benchmark's bushy tree of N
//! messages (forks everywhere, tool calls) into DIR as `bushy.jsonl` and keeps it, for timing and
//! profiling the binary's `--resume` of it.

use new_cli::tree_view::{render_rows, tree_rows};
use new_core::config::Lang;
use new_core::conversation::{Store, sample};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let only_generate = std::env::args().nth(2).as_deref() == Some("gen");
    if std::env::args().nth(2).as_deref() == Some("bushy") {
        let dir = std::env::args().nth(3).expect("loadtree N bushy DIR");
        let store = Store::open(std::path::Path::new(&dir)).unwrap();
        let (conv, records) = sample::bushy("bushy", n);
        let _ = std::fs::remove_file(store.path("bushy"));
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
    if std::env::args().nth(2).as_deref() == Some("values") {
        let text = std::fs::read_to_string(store.path("big")).unwrap();
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
    std::fs::write(dir.path().join("tree.txt"), text).unwrap();
}
