//! The `MEMORY.md` index of a memory folder, in CodePilot's layout: a block by kind (the four
//! [`KINDS`], in that order, each under its heading, a kind with no note without one), one line per
//! note, `- [type](slug.md) — summary`.
//!
//! The index is also a file people edit. An update changes only the line of the note written or
//! forgotten, and moves the lines the earlier format wrote (`- [name](slug.md) (kind): summary`,
//! recognisable as ours) into their blocks; every other line, a heading, a remark or an entry a
//! person added, stays as it was, where it was.

use super::KINDS;

/// The heading of each kind's block, in the order of [`KINDS`].
pub const HEADINGS: &[(&str, &str)] = &[
    ("user_preference", "## User preferences"),
    ("user_feedback", "## User feedback"),
    ("project_fact", "## Project facts"),
    ("project_knowledge", "## Project knowledge"),
    ("reference", "## References"),
];

/// The line of a note in the index, CodePilot's `- [type](slug.md) — summary` (the kind in the
/// link: a note's name is its file's).
pub fn entry_line(kind: &str, file: &str, summary: &str) -> String {
    let mut text = String::new();
    for c in kind.chars() {
        if matches!(c, '\\' | '[' | ']') {
            text.push('\\');
        }
        text.push(c);
    }
    if summary.is_empty() {
        format!("- [{text}]({file})")
    } else {
        format!("- [{text}]({file}) — {summary}")
    }
}

/// The index of `index` after a note's change: the line of `file` replaced by `entry` (a kind and
/// its line) or, with no entry, removed. An empty index starts as `# Memory`.
pub fn update(index: &str, file: &str, entry: Option<(&str, String)>) -> String {
    let mut lines: Vec<String> = index.lines().map(str::to_string).collect();
    if lines.iter().all(|l| l.trim().is_empty()) {
        lines = vec!["# Memory".to_string(), String::new()];
    }
    // The earlier format's lines, taken out to go into their blocks.
    let mut moved: Vec<(&str, String)> = Vec::new();
    let mut kept = Vec::with_capacity(lines.len());
    for line in lines {
        match parse(&line) {
            Some(e) if e.file == file => kept.push(Line::Written),
            Some(e) => match e.old_kind() {
                Some((kind, summary)) => moved.push((kind, entry_line(kind, e.file, summary))),
                None => kept.push(Line::Other(line)),
            },
            None => kept.push(Line::Other(line)),
        }
    }
    // The note's line stays where it was when it is in its kind's block; else it goes to the end
    // of that block. A second line of the same note is dropped.
    let mut lines: Vec<String> = Vec::with_capacity(kept.len() + 2);
    let mut entry = entry;
    let mut block: Option<&str> = None;
    for line in kept {
        match line {
            Line::Other(line) => {
                if let Some(kind) = heading_kind(&line) {
                    block = Some(kind);
                } else if line.trim_start().starts_with('#') {
                    block = None;
                }
                lines.push(line);
            }
            Line::Written => {
                if let Some((_, text)) = entry.take_if(|(kind, _)| Some(*kind) == block) {
                    lines.push(text);
                }
            }
        }
    }
    for (kind, text) in moved.into_iter().chain(entry) {
        ensure_heading(&mut lines, kind);
        insert(&mut lines, kind, text);
    }
    drop_empty_blocks(&mut lines);
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

enum Line {
    /// A line of the note being changed.
    Written,
    Other(String),
}

/// One `- [text](file.md)…` line whose link is a note of the folder (a plain file name).
struct Entry<'a> {
    file: &'a str,
    tail: &'a str,
}

impl<'a> Entry<'a> {
    /// The kind and summary of a line in the earlier format, ` (kind): summary` after the link.
    fn old_kind(&self) -> Option<(&'static str, &'a str)> {
        let rest = self.tail.strip_prefix(" (")?;
        let (kind, summary) = rest.split_once("):")?;
        let kind = KINDS.iter().find(|k| **k == kind)?;
        Some((kind, summary.trim()))
    }
}

fn parse(line: &str) -> Option<Entry<'_>> {
    let rest = line.trim_start().strip_prefix("- [")?;
    let mut end = None;
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            ']' => {
                end = Some(i);
                break;
            }
            _ => {}
        }
    }
    let end = end?;
    let after = rest[end + 1..].strip_prefix('(')?;
    let close = after.find(')')?;
    let file = &after[..close];
    let plain = file.ends_with(".md")
        && !file.starts_with('.')
        && !file.contains(['/', '\\', ' ', '<', '>']);
    plain.then(|| Entry {
        file,
        tail: &after[close + 1..],
    })
}

fn heading_kind(line: &str) -> Option<&'static str> {
    HEADINGS
        .iter()
        .find(|(_, h)| line.trim_end() == *h)
        .map(|(kind, _)| *kind)
}

fn heading_at(lines: &[String], kind: &str) -> Option<usize> {
    lines.iter().position(|l| heading_kind(l) == Some(kind))
}

/// Adds the heading of `kind` when it is missing: before the next kind's block, or at the end.
fn ensure_heading(lines: &mut Vec<String>, kind: &str) {
    if heading_at(lines, kind).is_some() {
        return;
    }
    let heading = HEADINGS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, h)| h.to_string())
        .unwrap_or_default();
    let later = HEADINGS
        .iter()
        .skip_while(|(k, _)| *k != kind)
        .skip(1)
        .find_map(|(k, _)| heading_at(lines, k));
    match later {
        Some(at) => {
            lines.splice(at..at, [heading, String::new()]);
        }
        None => {
            if lines.last().is_some_and(|l| !l.trim().is_empty()) {
                lines.push(String::new());
            }
            lines.extend([heading, String::new()]);
        }
    }
}

/// Removes the headings of our blocks that hold nothing (only blank lines): a kind with no note
/// has no block, and takes none of the lines the prompt has room for.
fn drop_empty_blocks(lines: &mut Vec<String>) {
    let mut at = 0;
    while at < lines.len() {
        if heading_kind(&lines[at]).is_none() {
            at += 1;
            continue;
        }
        let end = lines[at + 1..]
            .iter()
            .position(|l| !l.trim().is_empty())
            .map_or(lines.len(), |n| at + 1 + n);
        if end == lines.len() || lines[end].trim_start().starts_with('#') {
            lines.drain(at..end);
        } else {
            at += 1;
        }
    }
}

/// Adds `text` at the end of `kind`'s block (its heading exists).
fn insert(lines: &mut Vec<String>, kind: &str, text: String) {
    let Some(at) = heading_at(lines, kind) else {
        lines.push(text);
        return;
    };
    let end = lines[at + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('#'))
        .map_or(lines.len(), |n| at + 1 + n);
    match lines[at + 1..end]
        .iter()
        .rposition(|l| !l.trim().is_empty())
    {
        Some(last) => lines.insert(at + 1 + last + 1, text),
        None => {
            lines.splice(at + 1..at + 1, [String::new(), text]);
        }
    }
}
