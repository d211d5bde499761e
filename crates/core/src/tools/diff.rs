//! Unified diffs of file changes, shown to the user after a write and before approving one.

use similar::TextDiff;

/// The unified diff (3 lines of context) from `old` to `new`; empty when they are equal. A file
/// that did not exist diffs from `/dev/null`.
pub fn unified(path: &str, old: Option<&str>, new: &str) -> String {
    let before = old.unwrap_or("");
    if old == Some(new) {
        return String::new();
    }
    let from = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_string()
    };
    TextDiff::from_lines(before, new)
        .unified_diff()
        .context_radius(3)
        .header(&from, &format!("b/{path}"))
        .to_string()
}

/// Lines added and removed in a unified diff.
pub fn counts(diff: &str) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in diff.lines() {
        if line.starts_with('+') && !line.starts_with("+++") {
            added += 1;
        } else if line.starts_with('-') && !line.starts_with("---") {
            removed += 1;
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_changes_and_creations() {
        let d = unified("f.txt", Some("a\nb\nc\n"), "a\nB\nc\n");
        assert_eq!(
            d,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(counts(&d), (1, 1));
        let d = unified("new.txt", None, "x\n");
        assert!(d.starts_with("--- /dev/null\n+++ b/new.txt\n"));
        assert_eq!(counts(&d), (1, 0));
        assert_eq!(unified("f", Some("same"), "same"), "");
    }
}
