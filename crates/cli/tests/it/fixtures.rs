//! Fixture folders for the file tools: `tests/fixtures/tools/<case>/` holds `before/` (the working
//! folder), `call.json` (`{"tool", "arguments"}`; `$WORKDIR` stands for the folder's path),
//! `after/` (the folder expected afterwards) and `result.txt` (the text the model gets).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use new_core::fs::confine::Workdir;
use new_core::tools::{ToolContext, ToolRegistry};
use std::fs;
use tokio::runtime::Builder;

fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(
                    path.strip_prefix(root).unwrap().to_path_buf(),
                    fs::read(&path).unwrap(),
                );
            }
        }
    }
    out
}

fn copy(from: &Path, to: &Path) {
    for (rel, bytes) in files(from) {
        let dest = to.join(rel);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, bytes).unwrap();
    }
}

#[test]
fn file_tool_fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools");
    let runtime = Builder::new_current_thread().enable_all().build().unwrap();
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "fixtures missing: {cases:?}");
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let outer = tempfile::tempdir().unwrap();
        let work = outer.path().join("work");
        fs::create_dir_all(&work).unwrap();
        copy(&case.join("before"), &work);
        let call = fs::read_to_string(case.join("call.json"))
            .unwrap()
            .replace("$WORKDIR", &work.canonicalize().unwrap().to_string_lossy());
        let call: serde_json::Value = serde_json::from_str(&call).unwrap();
        let registry = ToolRegistry::builtin(
            ToolContext {
                workdir: Workdir::new(&work).unwrap(),
                bash_timeout: Duration::from_secs(5),
                hidden_env: Vec::new(),
                os_sandbox: None,
            },
            &[],
        )
        .unwrap();
        let outcome = runtime.block_on(registry.call(
            call["tool"].as_str().unwrap(),
            &call["arguments"].to_string(),
        ));
        let expected = fs::read_to_string(case.join("result.txt")).unwrap();
        assert_eq!(outcome.content, expected, "{name}: result");
        assert_eq!(
            files(&work),
            files(&case.join("after")),
            "{name}: folder afterwards"
        );
        // Nothing was written beside the working folder either.
        assert_eq!(
            fs::read_dir(outer.path()).unwrap().count(),
            1,
            "{name}: wrote outside"
        );
    }
}
