//! `/search`: messages matching a text across every conversation of the project.
//!
//! Files are streamed one at a time, newest first. A raw byte scan (ASCII case folded) rejects the
//! files that cannot match before any JSON is parsed, so a search over 10,000 conversations costs
//! little more than reading them; only files that pass are parsed, to number their nodes as `/tree`
//! does.

use memchr::memmem;

use super::store::{Store, StoreError, parse_conversation};
use crate::vocab::Role;
use std::fs;

/// Characters of context shown on each side of a match.
const CONTEXT_CHARS: usize = 30;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub conversation: String,
    /// The node's `/tree` number.
    pub number: usize,
    pub role: Role,
    /// Context before the match, the match as written, context after (whitespace collapsed).
    pub before: String,
    pub matched: String,
    pub after: String,
}

#[derive(Debug, Default)]
pub struct SearchResults {
    pub hits: Vec<Hit>,
    /// More hits existed than the limit allowed.
    pub truncated: bool,
    pub conversations_searched: usize,
}

impl Store {
    /// Finds messages containing `query` (case-insensitive), newest conversations first.
    pub fn search(&self, query: &str, limit: usize) -> Result<SearchResults, StoreError> {
        let mut results = SearchResults::default();
        let needle: Vec<char> = query.chars().flat_map(char::to_lowercase).collect();
        if needle.is_empty() {
            return Ok(results);
        }
        // What the query looks like inside a JSON string, ASCII-lowercased, for the byte scan.
        let escaped = serde_json::to_string(&query.to_lowercase()).expect("a string serializes");
        let escaped = escaped.as_bytes()[1..escaped.len() - 1].to_vec();
        let finder = memmem::Finder::new(&escaped);
        let mut folded = Vec::new();

        for summary in self.list()? {
            results.conversations_searched += 1;
            let path = self.path(&summary.id);
            let Ok(bytes) = fs::read(&path) else {
                continue; // deleted meanwhile
            };
            folded.clear();
            folded.extend(bytes.iter().map(u8::to_ascii_lowercase));
            // Writers that escape non-ASCII text (`\u4f60`) defeat the byte scan: parse those.
            let maybe = finder.find(&folded).is_some()
                || (!query.is_ascii() && memmem::find(&bytes, b"\\u").is_some());
            if !maybe {
                continue;
            }
            let (conversation, _) = parse_conversation(&summary.id, &bytes, "");
            for (number, (_, m)) in conversation.preorder().into_iter().enumerate().skip(1) {
                let mut text = m.content.clone();
                for call in m.calls() {
                    text.push_str(&format!(
                        " {}({})",
                        call.function.name, call.function.arguments
                    ));
                }
                if let Some((before, matched, after)) = find(&text, &needle) {
                    if results.hits.len() == limit {
                        results.truncated = true;
                        return Ok(results);
                    }
                    results.hits.push(Hit {
                        conversation: summary.id.clone(),
                        number,
                        role: m.role,
                        before,
                        matched,
                        after,
                    });
                }
            }
        }
        Ok(results)
    }
}

/// The first case-insensitive occurrence of `needle` (already lowercased) in `text`, with context.
fn find(text: &str, needle: &[char]) -> Option<(String, String, String)> {
    let chars: Vec<char> = text.chars().collect();
    // Lowercase char by char, remembering which original char each lowered char came from.
    let mut lowered = Vec::with_capacity(chars.len());
    let mut origin = Vec::with_capacity(chars.len());
    for (i, c) in chars.iter().enumerate() {
        for l in c.to_lowercase() {
            lowered.push(l);
            origin.push(i);
        }
    }
    let at = lowered.windows(needle.len()).position(|w| w == needle)?;
    let start = origin[at];
    let end = origin[at + needle.len() - 1] + 1;
    let flat = |s: &[char]| -> String {
        s.iter()
            .map(|c| if c.is_whitespace() { ' ' } else { *c })
            .collect()
    };
    let from = start.saturating_sub(CONTEXT_CHARS);
    let to = (end + CONTEXT_CHARS).min(chars.len());
    let mut before = flat(&chars[from..start]);
    if from > 0 {
        before.insert(0, '…');
    }
    let mut after = flat(&chars[end..to]);
    if to < chars.len() {
        after.push('…');
    }
    Some((before, flat(&chars[start..end]), after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::sample;
    use std::fs;

    fn save(store: &Store, id: &str, texts: &[&str]) {
        sample::stored(store, id, texts);
    }

    #[test]
    fn finds_matches_with_numbers_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        save(
            &store,
            "aaaa0001",
            &[
                "How do I parse JSON in Rust?",
                "Use serde_json: it parses\nJSON quickly.",
            ],
        );
        save(&store, "aaaa0002", &["Unrelated", "Nothing here"]);
        save(&store, "aaaa0003", &["你好，世界", "\"quoted\" text"]);
        let r = store.search("json", 10).unwrap();
        assert_eq!(r.conversations_searched, 3);
        let found: Vec<(&str, usize, &str)> = r
            .hits
            .iter()
            .map(|h| (h.conversation.as_str(), h.number, h.matched.as_str()))
            .collect();
        assert_eq!(found, [("aaaa0001", 1, "JSON"), ("aaaa0001", 2, "json")]);
        assert_eq!(r.hits[1].before, "Use serde_");
        assert_eq!(r.hits[1].after, ": it parses JSON quickly.");
        assert_eq!(store.search("世界", 10).unwrap().hits[0].before, "你好，");
        assert_eq!(store.search("\"QUOTED\"", 10).unwrap().hits.len(), 1);
        assert!(store.search("absent", 10).unwrap().hits.is_empty());
        let limited = store.search("json", 1).unwrap();
        assert!(limited.truncated && limited.hits.len() == 1);
    }

    #[test]
    fn long_text_gets_ellipses() {
        let text = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        let (before, matched, after) = find(&text, &['n', 'e', 'e', 'd', 'l', 'e']).unwrap();
        assert_eq!(before, format!("…{}", "a".repeat(30)));
        assert_eq!(matched, "needle");
        assert_eq!(after, format!("{}…", "b".repeat(30)));
    }

    #[test]
    fn escaped_non_ascii_files_are_still_searched() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(
            store.path("esc00001"),
            "{\"type\":\"header\",\"root_id\":\"r\",\"metadata\":{}}\n{\"type\":\"message\",\"msg_id\":\"m\",\"role\":\"user\",\"content\":\"\\u4f60\\u597d\",\"parent_id\":\"r\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n",
        )
        .unwrap();
        assert_eq!(store.search("你好", 5).unwrap().hits.len(), 1);
    }
}
