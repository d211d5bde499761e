//! Text broken into lines for the terminal, on `textwrap`: words are split at spaces and laid out
//! first-fit (a line ends where the next word no longer fits), widths are terminal columns (wide
//! characters take two, escape sequences such as colours and OSC 8 hyperlinks none). Command output
//! ([`fit`]), help and `/compare` columns ([`lines`]) and rendered Markdown ([`ranges`], on the
//! plain text of its styled characters) all wrap here.
//!
//! First-fit is what lets a streamed line print early: the lines before the last one never change
//! when more text is added at the end.

use std::borrow::Cow;
use std::ops::Range;

use std::iter;
use std::str::Chars;
use textwrap::WordSeparator;
use textwrap::core::{Word, break_words};
use textwrap::wrap_algorithms::wrap_first_fit;
use unicode_width::UnicodeWidthChar;

/// What becomes of a word longer than a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongWords {
    /// It stays whole on a line of its own, wider than the width (a path or a URL stays
    /// copyable; the terminal folds it).
    Keep,
    /// It is cut where the width ends.
    Break,
}

/// The columns `s` takes on a terminal: its characters' widths, escape sequences (colours,
/// hyperlinks) taking none, a tab up to the next multiple of 8.
pub fn width(s: &str) -> usize {
    let mut width = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\t' => width += 8 - width % 8,
            '\x1b' => skip_escape(&mut chars),
            c => width += c.width().unwrap_or(0),
        }
    }
    width
}

/// Skips the rest of an escape sequence whose `ESC` was just read: a CSI up to its final byte, an
/// OSC (a hyperlink) up to BEL or `ESC \`.
fn skip_escape(chars: &mut Chars<'_>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\x07' {
                    break;
                }
                if c == '\x1b' {
                    chars.next();
                    break;
                }
            }
        }
        _ => {}
    }
}

/// Where one line of text breaks into lines of `first` columns, then `rest`: the byte range of
/// each line, without the spaces at the breaks (nor trailing ones). Empty for an empty text.
pub fn ranges(text: &str, first: usize, rest: usize, long: LongWords) -> Vec<Range<usize>> {
    let (first, rest) = (first.max(1), rest.max(1));
    let mut words: Vec<Word<'_>> = Vec::with_capacity(text.len() / 4 + 1);
    words.extend(WordSeparator::AsciiSpace.find_words(text));
    if long == LongWords::Break && words.iter().any(|w| w.width > rest) {
        words = break_words(words, rest);
    }
    let mut out = Vec::new();
    // The words tile the text: each line's range is the sum of the lengths before it.
    let mut at = 0;
    for line in wrap_first_fit(&words, &[first as f64, rest as f64]) {
        let start = at;
        let mut end = at;
        for word in line {
            end = at + word.word.len();
            at = end + word.whitespace.len();
        }
        out.push(start..end);
    }
    debug_assert_eq!(at, text.len());
    out
}

/// `text` with each line wider than `width` wrapped at spaces, the continuation under the line's
/// own indent (or `hang` columns on the first line, for a `warning: ` line; none where that would
/// leave less than 20 columns). A word longer than the width stays whole; lines that fit are left
/// as they are.
pub fn fit(text: &str, width: usize, hang: usize) -> Cow<'_, str> {
    if text.split('\n').all(|l| self::width(l) <= width) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        if self::width(line) <= width {
            out.push_str(line);
            continue;
        }
        let lead = line.len() - line.trim_start_matches(' ').len();
        let indent = if n == 0 { lead.max(hang) } else { lead };
        let indent = if indent + 20 > width { 0 } else { indent };
        for (k, range) in ranges(line, width, width - indent, LongWords::Keep)
            .into_iter()
            .enumerate()
        {
            if k > 0 {
                out.push('\n');
                out.extend(iter::repeat_n(' ', indent));
            }
            out.push_str(&line[range]);
        }
    }
    out.into()
}

/// `text` in lines of at most `width` columns: at spaces where it can, inside a word too long for
/// a line. Each line of `text` starts a line.
pub fn lines(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for source in text.lines() {
        let ranges = ranges(source, width, width, LongWords::Break);
        if ranges.is_empty() {
            out.push(String::new());
        }
        out.extend(ranges.into_iter().map(|r| source[r].to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wider_than_the_terminal_wrap_at_spaces_under_their_indent() {
        assert_eq!(
            width("\x1b[2mdim\x1b[0m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
            8
        );
        let line = "warning: one two three four five six seven";
        assert_eq!(
            fit(line, 30, 9),
            "warning: one two three four\n         five six seven"
        );
        assert_eq!(
            fit("  a bb ccc dddd eeeee ffffff", 22, 0),
            "  a bb ccc dddd eeeee\n  ffffff"
        );
        // Too narrow for the indent: none.
        assert_eq!(fit("    a bb ccc", 8, 0), "    a bb\nccc");
        // Colours take no room; a word longer than the width stays whole.
        assert_eq!(fit("\x1b[33mshort\x1b[0m", 5, 0), "\x1b[33mshort\x1b[0m");
        assert_eq!(
            fit(
                "\x1b[33mone\x1b[0m two \x1b]8;;http://x\x1b\\three\x1b]8;;\x1b\\",
                9,
                0
            ),
            "\x1b[33mone\x1b[0m two\n\x1b]8;;http://x\x1b\\three\x1b]8;;\x1b\\"
        );
        assert_eq!(fit("averyveryverylongword", 5, 0), "averyveryverylongword");
        assert_eq!(fit("fits\nalso fits", 40, 0), "fits\nalso fits");
    }

    #[test]
    fn help_lines_break_inside_a_word_too_long_for_them() {
        assert_eq!(
            lines("ab verylongword c\n\nd", 5),
            ["ab", "veryl", "ongwo", "rd c", "", "d"]
        );
        assert_eq!(lines("汉字汉字汉字 x", 8), ["汉字汉字", "汉字 x"]);
    }

    /// A line that is still arriving: every line but the last is final.
    #[test]
    fn the_lines_before_the_last_do_not_change_as_text_is_added() {
        let text = "one two three four five six seven eight nine averyveryverylongword ten";
        let whole: Vec<&str> = ranges(text, 12, 10, LongWords::Break)
            .into_iter()
            .map(|r| &text[r])
            .collect();
        for end in 1..text.len() {
            let part = &text[..end];
            let lines = ranges(part, 12, 10, LongWords::Break);
            for (k, r) in lines[..lines.len() - 1].iter().enumerate() {
                assert_eq!(&part[r.clone()], whole[k], "{part:?}");
            }
        }
    }
}
