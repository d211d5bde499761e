//! Start-up and `/list` with many conversations, against the same with an empty DATADIR.
//!
//! `cargo bench --bench startup` generates a DATADIR of 10,000 conversations of 50 messages
//! (override with NEW_BENCH_CONVERSATIONS and NEW_BENCH_MESSAGES), then times the `new` binary
//! started with `/list` piped in: once cold (no index yet) and several times warm, next to the same
//! run with an empty DATADIR. It also times the library's `Store::list` alone. Figures are medians.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use new_agent::llm::Role;
use new_agent::session::{Conversation, Message, Record, Store};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn generate(dir: &Path, conversations: usize, messages: usize) {
    let store = Store::open(dir).unwrap();
    for c in 0..conversations {
        let mut conv = Conversation::new(format!("{c:08x}"), "sys");
        let mut records = Vec::with_capacity(messages);
        for m in 0..messages {
            let role = if m % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = format!(
                "message {m} of conversation {c}: {}",
                "lorem ipsum dolor sit amet ".repeat(6)
            );
            let id = conv.add(Message::new(role, text)).unwrap();
            records.push(Record::message(conv.get(&id).unwrap()));
        }
        store.create(&conv, &records).unwrap();
    }
}

/// Wall time of `new WORK default DATA` reading `/list` from a pipe, until it exits.
fn run_list(bin: &str, work: &Path, data: &Path, home: &Path) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(bin)
        .arg(work)
        .arg("default")
        .arg(data)
        .env("XDG_DATA_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"/list\n").unwrap();
    assert!(child.wait().unwrap().success());
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with no arguments and small data.
    let full = std::env::args().any(|a| a == "--bench");
    let conversations = env_usize("NEW_BENCH_CONVERSATIONS", if full { 10_000 } else { 200 });
    let messages = env_usize("NEW_BENCH_MESSAGES", 50);
    let runs = if full { 7 } else { 3 };
    let bin = env!("CARGO_BIN_EXE_new");

    let tmp = tempfile::tempdir().unwrap();
    // NEW_BENCH_DIR keeps the generated data for profiling.
    let tmp_path = std::env::var_os("NEW_BENCH_DIR").map(std::path::PathBuf::from);
    let (work, home, full_dir, empty_dir) = (
        tmp_path.clone().unwrap_or(tmp.path().to_path_buf()).join("work"),
        tmp_path.clone().unwrap_or(tmp.path().to_path_buf()).join("home"),
        tmp_path.clone().unwrap_or(tmp.path().to_path_buf()).join("full"),
        tmp_path.clone().unwrap_or(tmp.path().to_path_buf()).join("empty"),
    );
    for d in [&work, &home, &empty_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let t = Instant::now();
    generate(&full_dir, conversations, messages);
    println!(
        "generated {conversations} conversations x {messages} messages in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let cold = run_list(bin, &work, &full_dir, &home);
    let warm = median(
        (0..runs)
            .map(|_| run_list(bin, &work, &full_dir, &home))
            .collect(),
    );
    let empty = median(
        (0..runs)
            .map(|_| run_list(bin, &work, &empty_dir, &home))
            .collect(),
    );
    println!("start-up + /list, empty DATADIR:            {}", ms(empty));
    println!(
        "start-up + /list, {conversations} conversations, cold index: {}",
        ms(cold)
    );
    println!(
        "start-up + /list, {conversations} conversations, warm index: {}  ({:.2}x empty)",
        ms(warm),
        warm.as_secs_f64() / empty.as_secs_f64()
    );

    let store = Store::open(&full_dir).unwrap();
    let lib_warm = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                assert_eq!(store.list().unwrap().len(), conversations);
                t.elapsed()
            })
            .collect(),
    );
    println!(
        "Store::list alone, warm index:               {}",
        ms(lib_warm)
    );

    for (label, query) in [
        ("a rare text", "conversation 7777:"),
        ("a common word", "lorem"),
    ] {
        let t = Instant::now();
        let results = store.search(query, 50).unwrap();
        println!(
            "/search for {label} ({} hits shown) over {} conversations: {}",
            results.hits.len(),
            results.conversations_searched,
            ms(t.elapsed())
        );
    }
}
