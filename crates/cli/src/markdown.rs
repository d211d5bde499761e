//! Markdown answers rendered for a terminal while they stream.
//!
//! Output is only ever appended: a line is printed once it is complete (a long paragraph line as
//! soon as each of its wrapped lines is), so the scrollback stays a plain, copyable log. Headings,
//! emphasis, inline code, links (OSC 8 hyperlinks where the terminal has them), lists, block quotes,
//! rules, fenced code with syntax highlighting ([`super::highlight`]) and tables (aligned to the
//! width, cells wrapped) are drawn; long lines wrap at word boundaries, code lines never (the
//! terminal's own soft wrap keeps them copyable as one line). A table shows its rows as they arrive
//! and is laid out when it closes: the rows it showed (never more than fit on the screen, so they
//! can be reached) are erased and the table drawn in their place.
//!
//! The renderer is plain text in, text with escape sequences out: it does no I/O, and what it is fed
//! has had its control characters escaped already.

use unicode_width::UnicodeWidthChar;

use super::highlight::Highlighter;

/// Where and how to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Terminal columns.
    pub width: usize,
    /// Terminal rows: a streaming table never shows more than fit.
    pub height: usize,
    /// OSC 8 hyperlinks; otherwise a link shows its URL after its text.
    pub hyperlinks: bool,
    /// Everything dimmed (the reasoning).
    pub dim: bool,
}

/// The layout for the terminal on stdout: its size (80 × 24 when it cannot be asked, or `COLUMNS`
/// and `LINES`), and whether it shows OSC 8 hyperlinks (judged from the variables terminals that
/// do set; `NEW_HYPERLINKS=0` or `1` decides).
pub fn terminal_layout(dim: bool) -> Layout {
    let (mut width, mut height) = (0usize, 0usize);
    if let Some((w, h)) = new_sys::platform::terminal_size(new_sys::platform::Stream::Stdout) {
        (width, height) = (w, h);
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let number = |name: &str| var(name).and_then(|v| v.parse::<usize>().ok());
    if width == 0 {
        width = number("COLUMNS").unwrap_or(80);
    }
    if height == 0 {
        height = number("LINES").unwrap_or(24);
    }
    Layout {
        width,
        height,
        hyperlinks: hyperlinks_supported(&var),
        dim,
    }
}

/// Whether the terminal shows OSC 8 hyperlinks, from the variables it sets.
fn hyperlinks_supported(var: &dyn Fn(&str) -> Option<String>) -> bool {
    if let Some(choice) = var("NEW_HYPERLINKS") {
        return choice != "0";
    }
    let program = var("TERM_PROGRAM").unwrap_or_default();
    let term = var("TERM").unwrap_or_default();
    matches!(
        program.as_str(),
        "iTerm.app" | "WezTerm" | "vscode" | "ghostty" | "Hyper" | "rio"
    ) || var("KITTY_WINDOW_ID").is_some()
        || var("WT_SESSION").is_some()
        || var("KONSOLE_VERSION").is_some()
        || var("VTE_VERSION")
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|v| v >= 5000)
        || ["kitty", "alacritty", "foot", "ghostty", "wezterm"]
            .iter()
            .any(|t| term.contains(t))
}

/// Inline style of one character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Style {
    bold: bool,
    italic: bool,
    strike: bool,
    code: bool,
    underline: bool,
    /// A faint part (a link's URL, a rule, a fence line).
    faint: bool,
    /// A link: index + 1 into the line's links.
    link: u32,
    heading: bool,
}

const HEADING: &str = "35";
const CODE: &str = "36";
const LINK: &str = "34";
const QUOTE_BAR: &str = "│ ";

/// Emphasis open at a point of a line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Open {
    /// `*` or `_` emphasis, with the marker that opened it.
    italic: Option<u8>,
    bold: Option<u8>,
    strike: bool,
}

impl Open {
    /// The emphasis a run of `width` markers opens or closes: two for bold, one for italic.
    fn emphasis(&mut self, width: usize) -> &mut Option<u8> {
        if width == 2 {
            &mut self.bold
        } else {
            &mut self.italic
        }
    }
}

/// The longest stretch searched for the end of an emphasis or code span: a marker with no end
/// within it is taken literally (keeps a pathological line linear).
const LOOKAHEAD: usize = 2048;

/// One logical line being laid out: its source, the characters parsed so far with their styles,
/// and what of it was printed.
#[derive(Debug, Default)]
struct Flow {
    src: String,
    parsed: usize,
    open: Open,
    chars: Vec<(char, Style)>,
    links: Vec<String>,
    base: Style,
    first_prefix: String,
    first_prefix_width: usize,
    next_prefix: String,
    next_prefix_width: usize,
    /// Display lines printed so far.
    printed: usize,
    /// How far the line being filled was measured (it grows while the line streams).
    scan: Scan,
}

impl Flow {
    fn prefix(&self) -> (&str, usize) {
        if self.printed == 0 {
            (&self.first_prefix, self.first_prefix_width)
        } else {
            (&self.next_prefix, self.next_prefix_width)
        }
    }

    /// Parses what can be parsed of the source: all of it when `complete`, otherwise up to the
    /// first marker whose end has not arrived yet.
    fn parse(&mut self, complete: bool, layout: &Layout) {
        let src = std::mem::take(&mut self.src);
        let bytes = src.as_bytes();
        let mut i = self.parsed;
        self.chars.reserve(src.len() - i);
        let style_now = |open: &Open, base: Style| Style {
            bold: base.bold || open.bold.is_some(),
            italic: base.italic || open.italic.is_some(),
            strike: base.strike || open.strike,
            ..base
        };
        while i < bytes.len() {
            let c = src[i..].chars().next().expect("a char boundary");
            let prev = src[..i].chars().next_back();
            let style = style_now(&self.open, self.base);
            match c {
                '\\' if bytes.get(i + 1).is_some_and(|b| b.is_ascii_punctuation()) => {
                    self.chars.push((bytes[i + 1] as char, style));
                    i += 2;
                }
                '\\' if i + 1 == bytes.len() && !complete => break,
                '`' => {
                    let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
                    let body = i + run;
                    if body == bytes.len() && !complete {
                        break;
                    }
                    let window = &src[body..(body + LOOKAHEAD).min(src.len())];
                    match find_run(window, '`', run) {
                        // A closing run at the very end may still grow into a longer one.
                        Some(at) if !complete && body + at + run == src.len() => break,
                        Some(at) => {
                            let text = &src[body..body + at];
                            let text =
                                match text.strip_prefix(' ').and_then(|t| t.strip_suffix(' ')) {
                                    Some(inner) if !inner.trim().is_empty() => inner,
                                    _ => text,
                                };
                            let code = Style {
                                code: true,
                                ..style
                            };
                            self.chars.extend(text.chars().map(|ch| (ch, code)));
                            i = body + at + run;
                        }
                        None if !complete && src.len() - body < LOOKAHEAD => break,
                        None => {
                            self.chars.extend((0..run).map(|_| ('`', style)));
                            i = body;
                        }
                    }
                }
                '*' | '_' | '~' => {
                    let marker = c as u8;
                    let run = bytes[i..].iter().take_while(|b| **b == marker).count();
                    let next = src[i + run..].chars().next();
                    if i + run == bytes.len() && !complete {
                        break; // the run may grow, or the next character decide
                    }
                    let word = |ch: Option<char>| ch.is_some_and(char::is_alphanumeric);
                    let space = |ch: Option<char>| ch.is_none_or(char::is_whitespace);
                    match self.emphasis(marker, run, prev, next, word, space, &src, i, complete) {
                        Marker::Markup => i += run,
                        Marker::Undecided => break,
                        Marker::Literal => {
                            self.chars.extend((0..run).map(|_| (c, style)));
                            i += run;
                        }
                    }
                }
                '[' => match link_at(&src[i..]) {
                    LinkParse::Link { text, url, len } => {
                        self.links.push(url.to_string());
                        let link = Style {
                            link: self.links.len() as u32,
                            ..style
                        };
                        let mut inner = Flow {
                            src: text.to_string(),
                            base: link,
                            ..Flow::default()
                        };
                        inner.parse(true, layout);
                        self.chars.extend(inner.chars);
                        if !layout.hyperlinks && url != text {
                            let faint = Style {
                                faint: true,
                                ..style
                            };
                            self.chars
                                .extend(format!(" ({url})").chars().map(|ch| (ch, faint)));
                        }
                        i += len;
                    }
                    LinkParse::Incomplete if !complete && src.len() - i < LOOKAHEAD => break,
                    _ => {
                        self.chars.push(('[', style));
                        i += 1;
                    }
                },
                // `<https://…>`, perhaps still arriving.
                '<' if !complete
                    && ["<http://", "<https://"]
                        .iter()
                        .any(|p| p.len() > src.len() - i && p.starts_with(&src[i..])) =>
                {
                    break;
                }
                '<' if src[i..].starts_with("<http://") || src[i..].starts_with("<https://") => {
                    match src[i..].find('>') {
                        Some(end) if !src[i + 1..i + end].contains(char::is_whitespace) => {
                            let url = &src[i + 1..i + end];
                            self.links.push(url.to_string());
                            let link = Style {
                                link: self.links.len() as u32,
                                ..style
                            };
                            self.chars.extend(url.chars().map(|ch| (ch, link)));
                            i += end + 1;
                        }
                        None if !complete => break,
                        _ => {
                            self.chars.push(('<', style));
                            i += 1;
                        }
                    }
                }
                c => {
                    // Plain text up to the next character that may be markup, in one go.
                    let end = bytes[i + c.len_utf8()..]
                        .iter()
                        .position(|b| matches!(b, b'\\' | b'`' | b'*' | b'_' | b'~' | b'[' | b'<'))
                        .map_or(bytes.len(), |n| i + c.len_utf8() + n);
                    self.chars.extend(src[i..end].chars().map(|ch| (ch, style)));
                    i = end;
                }
            }
        }
        self.parsed = i;
        self.src = src;
    }

    /// What an emphasis or strike-through run at `i` is; as markup, its effect is applied (and
    /// markers it does not use are added as text).
    #[allow(clippy::too_many_arguments)]
    fn emphasis(
        &mut self,
        marker: u8,
        run: usize,
        prev: Option<char>,
        next: Option<char>,
        word: impl Fn(Option<char>) -> bool,
        space: impl Fn(Option<char>) -> bool,
        src: &str,
        i: usize,
        complete: bool,
    ) -> Marker {
        let rest = &src[i + run..];
        let undecided = || {
            if complete || rest.len() >= LOOKAHEAD {
                Marker::Literal
            } else {
                Marker::Undecided
            }
        };
        if marker == b'~' {
            if run != 2 {
                return Marker::Literal;
            }
            if self.open.strike && !space(prev) {
                self.open.strike = false;
                return Marker::Markup;
            }
            if !space(next) {
                return match closer(rest, "~~", complete) {
                    Closer::Yes => {
                        self.open.strike = true;
                        Marker::Markup
                    }
                    Closer::Maybe => Marker::Undecided,
                    Closer::No => undecided(),
                };
            }
            return Marker::Literal;
        }
        // `_` inside a word (snake_case) is never markup.
        if marker == b'_' && (word(prev) && word(next)) {
            return Marker::Literal;
        }
        let closes = !space(prev) && (marker != b'_' || !word(next));
        let opens = !space(next) && (marker != b'_' || !word(prev));
        // Decided on a copy: nothing changes unless the run is settled.
        let mut open = self.open;
        let mut used = 0;
        let mut left = run;
        // Close what is open, innermost first.
        if closes {
            for width in [2, 1, 2] {
                let slot = open.emphasis(width);
                if left >= width && *slot == Some(marker) {
                    *slot = None;
                    left -= width;
                    used += width;
                }
            }
        }
        if left > 0 && opens {
            // Whether what is left opens depends on closers still to come, until the line is
            // complete (or the lookahead is exhausted).
            let waiting = !complete && rest.len() < LOOKAHEAD;
            let marker_str = |n: usize| (marker as char).to_string().repeat(n);
            for width in [2, 1] {
                if left < width || open.emphasis(width).is_some() {
                    continue;
                }
                match closer(rest, &marker_str(width), complete) {
                    Closer::Yes => {
                        *open.emphasis(width) = Some(marker);
                        left -= width;
                        used += width;
                    }
                    Closer::Maybe => return Marker::Undecided,
                    Closer::No if waiting => return Marker::Undecided,
                    Closer::No => {}
                }
            }
            if left > 0 && used == 0 {
                return undecided();
            }
        }
        if used == 0 {
            return Marker::Literal;
        }
        self.open = open;
        // Markers left over are literal.
        let style = Style {
            bold: self.base.bold || self.open.bold.is_some(),
            italic: self.base.italic || self.open.italic.is_some(),
            strike: self.base.strike || self.open.strike,
            ..self.base
        };
        self.chars
            .extend((0..left).map(|_| (marker as char, style)));
        Marker::Markup
    }
}

/// What a run of emphasis markers turned out to be.
enum Marker {
    Markup,
    Literal,
    /// Its end may still arrive.
    Undecided,
}

/// Whether `rest` holds a closing `marker`.
enum Closer {
    Yes,
    No,
    /// One at the very end of a line still arriving: its run may grow into another marker.
    Maybe,
}

/// Looks for a closing `marker` (not preceded by a space) in `rest`, within the lookahead.
fn closer(rest: &str, marker: &str, complete: bool) -> Closer {
    let window = &rest[..new_core::utf8::floor_char_boundary(rest, LOOKAHEAD)];
    let first = marker.as_bytes()[0];
    let mut from = 0;
    while let Some(at) = window[from..].find(marker) {
        let at = from + at;
        if at > 0 && !window[..at].ends_with(char::is_whitespace) {
            let run_end = at + window[at..].bytes().take_while(|b| *b == first).count();
            return if run_end == rest.len() && !complete {
                Closer::Maybe
            } else {
                Closer::Yes
            };
        }
        from = at + marker.len();
    }
    Closer::No
}

/// Where a run of exactly `n` `c`s starts in `text`.
fn find_run(text: &str, c: char, n: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == c as u8 {
            let run = bytes[i..].iter().take_while(|b| **b == c as u8).count();
            if run == n {
                return Some(i);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    None
}

enum LinkParse<'a> {
    Link {
        text: &'a str,
        url: &'a str,
        len: usize,
    },
    Incomplete,
    NotALink,
}

/// `[text](url)` at the start of `s`.
fn link_at(s: &str) -> LinkParse<'_> {
    let Some(close) = s.find(']') else {
        return LinkParse::Incomplete;
    };
    let after = &s[close + 1..];
    if after.is_empty() {
        return LinkParse::Incomplete;
    }
    if !after.starts_with('(') {
        return LinkParse::NotALink;
    }
    let Some(end) = after.find(')') else {
        return LinkParse::Incomplete;
    };
    let url = after[1..end].trim();
    if url.is_empty() || url.contains(char::is_whitespace) {
        return LinkParse::NotALink;
    }
    LinkParse::Link {
        text: &s[1..close],
        url,
        len: close + 1 + end + 1,
    }
}

/// What a text line is.
enum Line<'a> {
    Blank,
    Fence {
        marker: char,
        len: usize,
        info: &'a str,
    },
    Rule,
    Heading {
        level: usize,
        text: &'a str,
    },
    TableRow,
    /// A paragraph, list item or quote: prefixes and the text after them.
    Flowing {
        first: String,
        first_width: usize,
        next: String,
        next_width: usize,
        base: Style,
        text: &'a str,
    },
}

/// Classifies a line (complete, or the start of one: then None means "not known yet").
fn classify<'a>(line: &'a str, complete: bool, layout: &Layout) -> Option<Line<'a>> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    if trimmed.is_empty() {
        return complete.then_some(Line::Blank);
    }
    let first = trimmed.as_bytes()[0];
    // A line that may be a fence, a rule, a heading or a table row is judged when complete; the
    // start of a list item, a quote or a paragraph is enough.
    let marker_start = matches!(
        first,
        b'`' | b'~' | b'|' | b'#' | b'-' | b'*' | b'_' | b'+' | b'>'
    ) || first.is_ascii_digit();
    if marker_start && !complete {
        let list_item = list_marker(trimmed).is_some_and(|(_, len)| trimmed.len() > len);
        let quote = first == b'>' && trimmed.len() > 2;
        // `**bold** …`, `-5 …`, `2024 …`: neither a rule nor a list item, once a character
        // says so.
        let paragraph = matches!(first, b'-' | b'*' | b'_' | b'+' | b'0'..=b'9')
            && list_marker(trimmed).is_none()
            && trimmed.len() > 12
            && trimmed.bytes().any(|b| {
                !(b == first || b == b' ' || b.is_ascii_digit() || b == b'.' || b == b')')
            });
        if !(list_item || quote || paragraph) {
            return None;
        }
    }
    if indent <= 3 && (first == b'`' || first == b'~') {
        let run = trimmed.bytes().take_while(|b| *b == first).count();
        if run >= 3 && (first == b'~' || !trimmed[run..].contains('`')) {
            return Some(Line::Fence {
                marker: first as char,
                len: run,
                info: trimmed[run..].trim(),
            });
        }
    }
    if indent <= 3 && matches!(first, b'-' | b'*' | b'_') {
        let marks = trimmed.bytes().filter(|b| *b == first).count();
        if marks >= 3 && trimmed.bytes().all(|b| b == first || b == b' ') {
            return Some(Line::Rule);
        }
    }
    if indent <= 3 && first == b'#' {
        let level = trimmed.bytes().take_while(|b| *b == b'#').count();
        if level <= 6 && (trimmed[level..].starts_with([' ', '\t']) || trimmed.len() == level) {
            let text = trimmed[level..].trim();
            let text = text.trim_end_matches('#').trim_end();
            return Some(Line::Heading { level, text });
        }
    }
    if first == b'|' {
        return Some(Line::TableRow);
    }
    if first == b'>' {
        // Quotes nest: `> > text`.
        let mut rest = trimmed;
        let mut depth = 0;
        while let Some(r) = rest.strip_prefix('>') {
            depth += 1;
            rest = r.strip_prefix(' ').unwrap_or(r).trim_start_matches(' ');
            if !rest.starts_with('>') {
                break;
            }
        }
        let bars: String = QUOTE_BAR.repeat(depth);
        let bar_width = 2 * depth;
        let prefix = paint_prefix(&bars, "2", layout);
        // A list inside a quote keeps its marker; what the quote holds may not be known yet.
        let inner = classify(rest, complete, layout);
        if inner.is_none() && !complete {
            return None;
        }
        if let Some(Line::Flowing {
            first,
            first_width,
            next,
            next_width,
            base,
            text,
        }) = inner
        {
            return Some(Line::Flowing {
                first: format!("{prefix}{first}"),
                first_width: bar_width + first_width,
                next: format!("{prefix}{next}"),
                next_width: bar_width + next_width,
                base: Style {
                    italic: true,
                    ..base
                },
                text,
            });
        }
        return Some(Line::Flowing {
            first: prefix.clone(),
            first_width: bar_width,
            next: prefix,
            next_width: bar_width,
            base: Style {
                italic: true,
                ..Style::default()
            },
            text: rest,
        });
    }
    if let Some((marker, len)) = list_marker(trimmed) {
        let level = indent / 2;
        let text = trimmed[len..].trim_start();
        let (shown, text) = if marker.ends_with(['.', ')']) {
            (marker.to_string(), text)
        } else if let Some(t) = text.strip_prefix("[ ] ") {
            ("☐".to_string(), t)
        } else if let Some(t) = text
            .strip_prefix("[x] ")
            .or_else(|| text.strip_prefix("[X] "))
        {
            ("☑".to_string(), t)
        } else {
            (["•", "◦", "▪"][level.min(2)].to_string(), text)
        };
        let pad = " ".repeat(indent);
        let width = indent + display_width(&shown) + 1;
        return Some(Line::Flowing {
            first: format!("{pad}{} ", paint_prefix(&shown, "1", layout)),
            first_width: width,
            next: " ".repeat(width),
            next_width: width,
            base: Style::default(),
            text,
        });
    }
    let pad = " ".repeat(indent);
    Some(Line::Flowing {
        first: pad.clone(),
        first_width: indent,
        next: pad,
        next_width: indent,
        base: Style::default(),
        text: trimmed,
    })
}

/// `-`, `*`, `+`, `1.`, `1)` and the length of the marker with its space.
fn list_marker(s: &str) -> Option<(&str, usize)> {
    let b = s.as_bytes();
    if matches!(b.first(), Some(b'-' | b'*' | b'+')) && matches!(b.get(1), Some(b' ' | b'\t')) {
        return Some((&s[..1], 2));
    }
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if (1..=9).contains(&digits)
        && matches!(b.get(digits), Some(b'.' | b')'))
        && matches!(b.get(digits + 1), Some(b' ' | b'\t'))
    {
        return Some((&s[..digits + 1], digits + 2));
    }
    None
}

fn paint_prefix(text: &str, code: &str, layout: &Layout) -> String {
    if layout.dim {
        format!("\x1b[2m{text}\x1b[0m")
    } else {
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// The columns a text takes on a terminal.
pub(super) fn display_width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// The block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    Code {
        marker: char,
        len: usize,
        highlighter: Option<Highlighter>,
    },
    Table {
        rows: Vec<String>,
        /// Terminal lines the raw rows shown take.
        shown: usize,
        /// Rows not shown (they would not have fit on the screen), counted on one line.
        hidden: usize,
    },
}

/// Renders one answer as it streams.
#[derive(Debug)]
pub struct Renderer {
    layout: Layout,
    /// The line being received (no newline yet).
    pending: String,
    /// The flowing line being laid out from `pending`, if it is one.
    flow: Option<Flow>,
    block: Block,
    /// A `\r` that ended the last piece.
    held_cr: bool,
}

impl Renderer {
    pub fn new(layout: Layout) -> Self {
        Renderer {
            layout: Layout {
                width: layout.width.max(20),
                height: layout.height.max(4),
                ..layout
            },
            pending: String::new(),
            flow: None,
            block: Block::Text,
            held_cr: false,
        }
    }

    /// Takes more of the answer; returns what can be printed now.
    pub fn push(&mut self, text: &str) -> String {
        // A `\r` that ends a piece waits for the next: before a `\n` it is a line end's.
        let joined;
        let mut text = text;
        if std::mem::take(&mut self.held_cr) && !text.starts_with('\n') {
            joined = format!("\r{text}");
            text = &joined;
        }
        if let Some(t) = text.strip_suffix('\r') {
            self.held_cr = true;
            text = t;
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(nl) = rest.find('\n') {
            self.pending.push_str(&rest[..nl]);
            let mut line = std::mem::take(&mut self.pending);
            if line.ends_with('\r') {
                line.pop();
            }
            self.line(&line, &mut out);
            // The buffer is kept for the next line.
            line.clear();
            self.pending = line;
            rest = &rest[nl + 1..];
        }
        if !rest.is_empty() {
            self.pending.push_str(rest);
            self.stream_partial(rest, &mut out);
        }
        out
    }

    /// The answer ended (or was cut short): prints what is left, closing any open block.
    pub fn finish(&mut self) -> String {
        if std::mem::take(&mut self.held_cr) {
            self.pending.push('\r');
        }
        let mut out = String::new();
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, &mut out);
        }
        self.close_block(&mut out);
        out
    }

    fn close_block(&mut self, out: &mut String) {
        match std::mem::replace(&mut self.block, Block::Text) {
            Block::Text => {}
            Block::Code { .. } => out.push_str("\x1b[2m╰─\x1b[0m\n"),
            Block::Table {
                rows,
                shown,
                hidden,
            } => {
                if hidden > 0 {
                    out.push_str("\r\x1b[2K");
                }
                if shown > 0 {
                    out.push_str(&format!("\x1b[{shown}F\x1b[J"));
                }
                out.push_str(&self.table(&rows));
            }
        }
    }

    /// A dim rule across the width (at most 80 columns).
    fn rule(&self) -> String {
        let width = self.layout.width.min(80);
        format!("\x1b[2m{}\x1b[0m\n", "─".repeat(width))
    }

    /// A whole line.
    fn line(&mut self, line: &str, out: &mut String) {
        match &mut self.block {
            Block::Code {
                marker,
                len,
                highlighter,
            } => {
                let trimmed = line.trim();
                let closes = trimmed.len() >= *len
                    && trimmed.bytes().all(|b| b == *marker as u8)
                    && line.len() - line.trim_start().len() <= 3;
                if closes {
                    self.close_block(out);
                    return;
                }
                let dim = self.layout.dim;
                if dim {
                    out.push_str("\x1b[2m");
                }
                match highlighter {
                    Some(h) => h.line_into(out, line),
                    None => out.push_str(line),
                }
                if dim {
                    out.push_str("\x1b[0m");
                }
                out.push('\n');
                return;
            }
            Block::Table {
                rows,
                shown,
                hidden,
            } => {
                if line.trim_start().starts_with('|') {
                    rows.push(line.to_string());
                    let lines = display_width(line).div_ceil(self.layout.width).max(1);
                    if *hidden == 0 && *shown + lines + 2 < self.layout.height {
                        *shown += lines;
                        out.push_str("\x1b[2m");
                        out.push_str(line);
                        out.push_str("\x1b[0m\n");
                    } else {
                        *hidden += 1;
                        out.push_str(&format!(
                            "\r\x1b[2K\x1b[2m⋯ {hidden} more table rows\x1b[0m"
                        ));
                    }
                    return;
                }
                self.close_block(out);
            }
            Block::Text => {}
        }
        let layout = self.layout;
        match classify(line, true, &layout).expect("a complete line is always classified") {
            Line::Blank => {
                self.flow = None;
                out.push('\n');
            }
            Line::Fence { marker, len, info } => {
                self.flow = None;
                let lang = info.split_whitespace().next().unwrap_or("");
                // A short frame: the language, and where the code ends; nothing to copy by
                // mistake on the code's own lines.
                out.push_str("\x1b[2m╭─");
                if !lang.is_empty() {
                    out.push(' ');
                    out.push_str(lang);
                }
                out.push_str("\x1b[0m\n");
                self.block = Block::Code {
                    marker,
                    len,
                    highlighter: Highlighter::for_language(lang),
                };
            }
            Line::Rule => {
                self.flow = None;
                out.push_str(&self.rule());
            }
            Line::TableRow => {
                self.flow = None;
                self.block = Block::Table {
                    rows: Vec::new(),
                    shown: 0,
                    hidden: 0,
                };
                self.line(line, out);
            }
            Line::Heading { level, text } => {
                self.flow = None;
                let base = Style {
                    bold: true,
                    underline: level == 1,
                    heading: true,
                    ..Style::default()
                };
                let mut flow = Flow {
                    src: text.to_string(),
                    base,
                    ..Flow::default()
                };
                self.lay_out(&mut flow, true, out);
            }
            Line::Flowing {
                first,
                first_width,
                next,
                next_width,
                base,
                text,
            } => {
                // The line may have been streaming: go on from where it was.
                let mut flow = self.flow.take().unwrap_or_else(|| Flow {
                    src: text.to_string(),
                    base,
                    first_prefix: first,
                    first_prefix_width: first_width,
                    next_prefix: next,
                    next_prefix_width: next_width,
                    ..Flow::default()
                });
                // A line that streamed has its text already; the line's end may only drop a `\r`.
                if flow.src != text && !flow.src.starts_with(text) {
                    flow.src = text.to_string();
                }
                self.lay_out(&mut flow, true, out);
            }
        }
    }

    /// More of a line has arrived (`added`): a flowing line prints the wrapped lines it already
    /// fills.
    fn stream_partial(&mut self, added: &str, out: &mut String) {
        if !matches!(self.block, Block::Text) {
            return;
        }
        let mut flow = match self.flow.take() {
            Some(mut flow) => {
                flow.src.push_str(added);
                flow
            }
            // Worth looking only once the line could fill a terminal line.
            None if self.pending.len() < self.layout.width / 2 => return,
            None => match classify(&self.pending, false, &self.layout) {
                Some(Line::Flowing {
                    first,
                    first_width,
                    next,
                    next_width,
                    base,
                    text,
                }) => Flow {
                    src: text.to_string(),
                    base,
                    first_prefix: first,
                    first_prefix_width: first_width,
                    next_prefix: next,
                    next_prefix_width: next_width,
                    ..Flow::default()
                },
                _ => return,
            },
        };
        self.lay_out(&mut flow, false, out);
        self.flow = Some(flow);
    }

    /// Parses and wraps a flowing line, printing every wrapped line that is complete (all of them
    /// when the line is).
    fn lay_out(&self, flow: &mut Flow, complete: bool, out: &mut String) {
        flow.parse(complete, &self.layout);
        loop {
            let prefix_width = flow.prefix().1;
            let room = self.layout.width.saturating_sub(prefix_width).max(10);
            match next_break_scan(&flow.chars, room, complete, &mut flow.scan) {
                Some((end, resume)) => {
                    out.push_str(flow.prefix().0);
                    self.styled_into(out, &flow.chars[..end], &flow.links);
                    out.push('\n');
                    flow.chars.drain(..resume);
                    flow.scan = Scan::default();
                    flow.printed += 1;
                    if flow.chars.is_empty() {
                        return;
                    }
                }
                None => return,
            }
        }
    }

    /// Characters with their styles as text with escape sequences (one run per change of style),
    /// appended to `out`.
    fn styled_into(&self, out: &mut String, chars: &[(char, Style)], links: &[String]) {
        let mut i = 0;
        while i < chars.len() {
            let style = chars[i].1;
            let end = chars[i..]
                .iter()
                .position(|(_, s)| *s != style)
                .map_or(chars.len(), |n| i + n);
            let mut codes: [&str; 6] = [""; 6];
            let mut n = 0;
            let mut add = |code: &'static str| {
                codes[n] = code;
                n += 1;
            };
            if self.layout.dim || style.faint {
                add("2");
            }
            if style.bold {
                add("1");
            }
            if style.italic {
                add("3");
            }
            if style.underline || style.link > 0 {
                add("4");
            }
            if style.strike {
                add("9");
            }
            if style.code {
                add(CODE);
            } else if style.link > 0 {
                add(LINK);
            } else if style.heading {
                add(HEADING);
            }
            let url = (style.link > 0 && self.layout.hyperlinks)
                .then(|| links.get(style.link as usize - 1))
                .flatten();
            if let Some(url) = url {
                out.push_str("\x1b]8;;");
                out.push_str(url);
                out.push_str("\x1b\\");
            }
            if n > 0 {
                out.push_str("\x1b[");
                for (k, code) in codes[..n].iter().enumerate() {
                    if k > 0 {
                        out.push(';');
                    }
                    out.push_str(code);
                }
                out.push('m');
            }
            out.extend(chars[i..end].iter().map(|(c, _)| *c));
            if n > 0 {
                out.push_str("\x1b[0m");
            }
            if url.is_some() {
                out.push_str("\x1b]8;;\x1b\\");
            }
            i = end;
        }
    }

    /// A table laid out to the width; rows that do not make a table are shown as text.
    fn table(&self, rows: &[String]) -> String {
        let cells: Vec<Vec<String>> = rows.iter().map(|r| split_row(r)).collect();
        let is_delimiter = |row: &Vec<String>| {
            !row.is_empty()
                && row.iter().all(|c| {
                    let c = c.trim();
                    let inner = c.trim_start_matches(':').trim_end_matches(':');
                    !inner.is_empty() && inner.bytes().all(|b| b == b'-')
                })
        };
        if cells.len() < 2 || !is_delimiter(&cells[1]) {
            let mut out = String::new();
            for row in rows {
                out.push_str(row);
                out.push('\n');
            }
            return out;
        }
        let aligns: Vec<u8> = cells[1]
            .iter()
            .map(|c| {
                let c = c.trim();
                match (c.starts_with(':'), c.ends_with(':')) {
                    (true, true) => b'c',
                    (false, true) => b'r',
                    _ => b'l',
                }
            })
            .collect();
        let columns = cells.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let body: Vec<ParsedRow> = cells
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(i, row)| {
                let mut links = Vec::new();
                let parsed = (0..columns)
                    .map(|c| {
                        let mut flow = Flow {
                            src: row.get(c).cloned().unwrap_or_default(),
                            base: Style {
                                bold: i == 0,
                                ..Style::default()
                            },
                            ..Flow::default()
                        };
                        flow.parse(true, &self.layout);
                        // Links of all cells share one list: re-index.
                        let base = links.len() as u32;
                        links.extend(flow.links);
                        flow.chars
                            .into_iter()
                            .map(|(ch, mut s)| {
                                if s.link > 0 {
                                    s.link += base;
                                }
                                (ch, s)
                            })
                            .collect()
                    })
                    .collect();
                (i == 0, parsed, links)
            })
            .collect();
        let natural: Vec<usize> = (0..columns)
            .map(|c| {
                body.iter()
                    .map(|(_, row, _)| row[c].iter().map(|(ch, _)| ch.width().unwrap_or(0)).sum())
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        // `│ a │ b │`: 3 columns of frame per cell, and one.
        let frame = 3 * columns + 1;
        let room = self.layout.width.saturating_sub(frame);
        if room < 3 * columns {
            let mut out = String::new();
            for row in rows {
                out.push_str(row);
                out.push('\n');
            }
            return out;
        }
        let mut widths = natural.clone();
        while widths.iter().sum::<usize>() > room {
            let widest = (0..columns).max_by_key(|c| widths[*c]).expect("columns");
            widths[widest] -= 1;
        }
        let border = |left: &str, mid: &str, right: &str| {
            let mut text = String::with_capacity(widths.iter().sum::<usize>() * 3 + 32);
            text.push_str(left);
            for (k, w) in widths.iter().enumerate() {
                if k > 0 {
                    text.push_str(mid);
                }
                for _ in 0..w + 2 {
                    text.push('─');
                }
            }
            text.push_str(right);
            text.push('\n');
            text
        };
        let mut out = border("┌", "┬", "┐");
        for (n, (header, row, links)) in body.iter().enumerate() {
            let wrapped: Vec<Vec<&[(char, Style)]>> = (0..columns)
                .map(|c| wrap_cell(&row[c], widths[c]))
                .collect();
            let height = wrapped.iter().map(Vec::len).max().unwrap_or(1).max(1);
            for line in 0..height {
                out.push('│');
                for c in 0..columns {
                    let piece: &[(char, Style)] = wrapped[c].get(line).copied().unwrap_or(&[]);
                    let w: usize = piece.iter().map(|(ch, _)| ch.width().unwrap_or(0)).sum();
                    let gap = widths[c].saturating_sub(w);
                    let (before, after) = match aligns.get(c).copied().unwrap_or(b'l') {
                        b'r' => (gap, 0),
                        b'c' => (gap / 2, gap - gap / 2),
                        _ => (0, gap),
                    };
                    out.extend(std::iter::repeat_n(' ', before + 1));
                    self.styled_into(&mut out, piece, links);
                    out.extend(std::iter::repeat_n(' ', after + 1));
                    out.push('│');
                }
                out.push('\n');
            }
            if *header && n + 1 < body.len() {
                out.push_str(&border("├", "┼", "┤"));
            }
        }
        out.push_str(&border("└", "┴", "┘"));
        out
    }
}

/// A table row parsed: whether it is the header, its cells' characters, and their links.
type ParsedRow = (bool, Vec<Vec<(char, Style)>>, Vec<String>);

/// The cells of a table row: split on `|` outside code spans and escapes, the outer pipes dropped.
fn split_row(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = match row.strip_suffix('|') {
        Some(r) if !r.ends_with('\\') => r,
        _ => row,
    };
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell).trim().to_string()),
            c => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

/// A cell's characters in lines of at most `width` columns, broken at spaces where it can be.
fn wrap_cell(chars: &[(char, Style)], width: usize) -> Vec<&[(char, Style)]> {
    let mut lines = Vec::new();
    let mut rest = chars;
    while !rest.is_empty() {
        match next_break(rest, width, true) {
            Some((end, resume)) => {
                lines.push(&rest[..end]);
                rest = &rest[resume..];
            }
            None => break,
        }
    }
    lines
}

/// How far a line being filled has been measured.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    at: usize,
    width: usize,
    last_space: Option<usize>,
}

/// Where the first wrapped line of `chars` ends (exclusive) and where the next begins, for lines
/// of `room` columns. In an incomplete line only a line known to be full is returned: one followed
/// by more text. Breaks at the last space that fits; a word longer than a line is cut.
fn next_break(chars: &[(char, Style)], room: usize, complete: bool) -> Option<(usize, usize)> {
    next_break_scan(chars, room, complete, &mut Scan::default())
}

/// The same, going on from where `scan` stopped (the characters before it are unchanged).
fn next_break_scan(
    chars: &[(char, Style)],
    room: usize,
    complete: bool,
    scan: &mut Scan,
) -> Option<(usize, usize)> {
    if chars.is_empty() {
        return None;
    }
    for i in scan.at..chars.len() {
        let c = chars[i].0;
        if c == ' ' {
            scan.last_space = Some(i);
        }
        let w = c.width().unwrap_or(0);
        if scan.width + w > room && c != ' ' {
            return match scan.last_space {
                Some(s) if s > 0 => {
                    let end = chars[..s]
                        .iter()
                        .rposition(|(c, _)| *c != ' ')
                        .map_or(0, |p| p + 1);
                    Some((end.max(1), s + 1))
                }
                _ if complete || i > 0 => Some((i.max(1), i.max(1))),
                _ => None,
            };
        }
        scan.width += w;
        scan.at = i + 1;
    }
    // Everything fits: the line is done only when the text is.
    complete.then(|| {
        let end = chars
            .iter()
            .rposition(|(c, _)| *c != ' ')
            .map_or(0, |p| p + 1);
        (end, chars.len())
    })
}

#[cfg(test)]
mod tests;
