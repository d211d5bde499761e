//! Markdown answers rendered for a terminal while they stream.
//!
//! Output is only ever appended: a line is printed once it is complete (a long paragraph line as
//! soon as each of its wrapped lines is), so the scrollback stays a plain, copyable log; what of the
//! line still arriving is not printed yet is shown on its own row meanwhile ([`Renderer::tail`]),
//! which the caller takes back before printing more. Headings
//! (ATX and setext), emphasis, inline code, links (OSC 8 hyperlinks where the terminal has them;
//! reference links too), lists, block quotes, rules, fenced code with syntax highlighting
//! ([`super::highlight`]) and tables (aligned to the width, cells wrapped) are drawn; long lines
//! wrap at word boundaries ([`super::wrap`]), code lines never (the terminal's own soft wrap keeps
//! them copyable as one line). A table shows its rows as they arrive and is laid out when it
//! closes: the rows it showed (never more than fit on the screen, so they can be reached) are
//! erased and the table drawn in their place.
//!
//! The streaming part here only decides where lines and blocks end and what prefixes a line gets
//! (list markers, quote bars); what a line, a heading or a table says is parsed by
//! `pulldown-cmark`, and its events are drawn. A line still arriving is parsed as far as it goes,
//! and only the characters no later text can change (see [`settled`]) are printed.
//!
//! The renderer is plain text in, text with escape sequences out: it does no I/O, and what it is fed
//! has had its control characters escaped already.

use std::collections::HashMap;
use std::ops::Range;

use pulldown_cmark::{
    Alignment, BrokenLink, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd,
};
use unicode_width::UnicodeWidthChar;

use super::highlight::Highlighter;
use super::wrap::{self, LongWords};
use new_sys::platform;
use new_sys::platform::Stream;
use std::borrow::Cow;
use std::env;
use std::iter;
use std::mem;

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
    if let Some((w, h)) = platform::terminal_size(Stream::Stdout) {
        (width, height) = (w, h);
    }
    let var = |name: &str| env::var(name).ok().filter(|v| !v.is_empty());
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

/// A line still arriving whose unsettled part is longer than this is parsed again only once it has
/// grown by half.
const LOOKAHEAD: usize = 2048;

/// Put before a line's text when it is parsed: a space (to CommonMark's emphasis rules, like the
/// start of a line) that is no block marker, so the text is read as a paragraph whatever it starts
/// with (`# `, `1. `, `> `, four spaces…). Its characters are not shown.
const GUARD: &str = "\u{a0}";

/// What pulldown-cmark is asked to read.
fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES
}

/// Link reference definitions (`[1]: https://…`) seen so far in the answer, by normalized label.
#[derive(Debug, Default)]
struct Definitions(HashMap<String, String>);

impl Definitions {
    /// CommonMark matches labels without regard to case or runs of spaces.
    fn key(label: &str) -> String {
        label
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    }

    /// A reference pulldown-cmark found no definition for in the text it was given: one seen
    /// earlier in the answer. One whose definition has not arrived stays as written (`[text][1]`,
    /// or `a[i][j]`, which is no link): its definition, when it comes, shows the URL.
    fn resolve<'a>(&self, link: BrokenLink<'a>) -> Option<(CowStr<'a>, CowStr<'a>)> {
        let url = self.0.get(&Self::key(&link.reference))?;
        Some((url.clone().into(), "".into()))
    }
}

/// A link reference definition that is the whole line: its label, URL and title.
fn definition(line: &str) -> Option<(String, String, String)> {
    if !line.trim_start().starts_with('[') {
        return None;
    }
    let mut parser = Parser::new_ext(line, options());
    let (label, def) = parser.reference_definitions().iter().next()?;
    let title = def.title.as_deref().unwrap_or_default().to_string();
    let found = (label.to_string(), def.dest.to_string(), title);
    parser.next().is_none().then_some(found)
}

/// The styled characters of a piece of Markdown, with what the parse saw where.
#[derive(Debug, Default)]
struct Inline {
    chars: Vec<(char, Style)>,
    /// The byte offset in the source each character comes from (the URL shown after a link: the
    /// link's start).
    offsets: Vec<usize>,
    /// The URLs the characters' `link` fields point into, after the caller's own.
    links: Vec<String>,
    /// Where each of those links starts.
    link_starts: Vec<usize>,
    /// Source ranges shown as text, and those of them shown exactly as written (no escape, no
    /// entity).
    text: Vec<Range<usize>>,
    verbatim: Vec<Range<usize>>,
    /// Code spans, inline HTML and autolinks: source ranges taken whole.
    whole: Vec<Range<usize>>,
    /// Other links (their text is Markdown too).
    link_spans: Vec<Range<usize>>,
    /// Emphasis, strong, strike-through and link spans.
    spans: Vec<Range<usize>>,
}

/// A link being drawn: its number, where its text starts in the characters and in the source.
#[derive(Debug)]
struct OpenLink {
    link: u32,
    text_from: usize,
    start: usize,
}

/// Draws pulldown-cmark's inline events as styled characters.
struct Walk<'a> {
    layout: &'a Layout,
    base: Style,
    /// Links the caller has already: this walk's are numbered after them.
    first_link: usize,
    /// Source bytes not shown (the [`GUARD`]); offsets are counted after them.
    hidden: usize,
    bold: u32,
    italic: u32,
    strike: u32,
    open: Vec<OpenLink>,
    out: Inline,
}

impl<'a> Walk<'a> {
    fn new(layout: &'a Layout, base: Style, first_link: usize, hidden: usize) -> Self {
        Walk {
            layout,
            base,
            first_link,
            hidden,
            bold: 0,
            italic: 0,
            strike: 0,
            open: Vec::new(),
            out: Inline::default(),
        }
    }

    fn style(&self) -> Style {
        let link = self.open.last().map_or(self.base.link, |open| open.link);
        Style {
            bold: self.base.bold || self.bold > 0,
            italic: self.base.italic || self.italic > 0,
            strike: self.base.strike || self.strike > 0,
            link,
            ..self.base
        }
    }

    /// `text` in `style`, all its characters from source offset `at`.
    fn push(&mut self, text: &str, style: Style, at: usize) {
        for c in text.chars() {
            self.out.chars.push((c, style));
            self.out.offsets.push(at);
        }
    }

    fn event(&mut self, event: Event<'_>, range: Range<usize>, source: &str) {
        let hidden = self.hidden;
        let local = range.start.saturating_sub(hidden)..range.end.saturating_sub(hidden);
        let at = local.start;
        match event {
            Event::Text(text) => {
                let style = self.style();
                if source.get(range.clone()) == Some(&*text) {
                    for (i, c) in text.char_indices() {
                        if range.start + i >= hidden {
                            self.out.chars.push((c, style));
                            self.out.offsets.push(range.start + i - hidden);
                        }
                    }
                    self.out.verbatim.push(local.clone());
                } else {
                    self.push(&text, style, at);
                }
                self.out.text.push(local);
            }
            Event::Code(text) => {
                let style = Style {
                    code: true,
                    ..self.style()
                };
                self.push(&text, style, at);
                self.out.whole.push(local);
            }
            Event::InlineHtml(text) | Event::Html(text) => {
                self.push(&text, self.style(), at);
                self.out.whole.push(local);
            }
            Event::SoftBreak | Event::HardBreak => self.push(" ", self.style(), at),
            Event::Start(Tag::Emphasis) => {
                self.italic += 1;
                self.out.spans.push(local);
            }
            Event::Start(Tag::Strong) => {
                self.bold += 1;
                self.out.spans.push(local);
            }
            Event::Start(Tag::Strikethrough) => {
                self.strike += 1;
                self.out.spans.push(local);
            }
            Event::End(TagEnd::Emphasis) => self.italic = self.italic.saturating_sub(1),
            Event::End(TagEnd::Strong) => self.bold = self.bold.saturating_sub(1),
            Event::End(TagEnd::Strikethrough) => self.strike = self.strike.saturating_sub(1),
            Event::Start(
                Tag::Link {
                    link_type,
                    dest_url,
                    ..
                }
                | Tag::Image {
                    link_type,
                    dest_url,
                    ..
                },
            ) => {
                self.out.spans.push(local.clone());
                if matches!(link_type, LinkType::Autolink | LinkType::Email) {
                    self.out.whole.push(local);
                } else {
                    self.out.link_spans.push(local);
                }
                self.out.links.push(dest_url.to_string());
                self.out.link_starts.push(at);
                self.open.push(OpenLink {
                    link: (self.first_link + self.out.links.len()) as u32,
                    text_from: self.out.chars.len(),
                    start: at,
                });
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if let Some(open) = self.open.pop() {
                    let url = &self.out.links[open.link as usize - self.first_link - 1];
                    let shown: String = self.out.chars[open.text_from..]
                        .iter()
                        .map(|c| c.0)
                        .collect();
                    if !self.layout.hyperlinks && *url != shown {
                        let suffix = format!(" ({url})");
                        let faint = Style {
                            faint: true,
                            ..self.style()
                        };
                        self.push(&suffix, faint, open.start);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The characters of one line's text (its prefixes taken off), parsed as inline Markdown.
fn parse_inline(
    text: &str,
    base: Style,
    first_link: usize,
    layout: &Layout,
    definitions: &Definitions,
) -> Inline {
    // Most lines, and most of what is left of a line still arriving, have nothing pulldown-cmark
    // would read as markup: they are their own text, less the spaces that end them.
    if !text.bytes().any(|b| {
        matches!(
            b,
            b'\\' | b'`' | b'*' | b'_' | b'~' | b'[' | b'<' | b'&' | b'\r'
        )
    }) {
        let shown = text.trim_end_matches([' ', '\t']);
        let mut out = Inline {
            chars: Vec::with_capacity(shown.len()),
            offsets: Vec::with_capacity(shown.len()),
            ..Inline::default()
        };
        for (i, c) in shown.char_indices() {
            out.chars.push((c, base));
            out.offsets.push(i);
        }
        if !shown.is_empty() {
            out.text.push(0..shown.len());
            out.verbatim.push(0..shown.len());
        }
        return out;
    }
    let source = format!("{GUARD}{text}");
    let mut walk = Walk::new(layout, base, first_link, GUARD.len());
    walk.out.chars.reserve(text.len());
    walk.out.offsets.reserve(text.len());
    let resolve = |link| definitions.resolve(link);
    let parser = Parser::new_with_broken_link_callback(&source, options(), Some(resolve));
    for (event, range) in parser.into_offset_iter() {
        walk.event(event, range, &source);
    }
    walk.out
}

/// How much of a line still arriving is settled. Its characters from before the first returned
/// offset are the same however the line goes on: what comes before is free of anything a later
/// character could still turn into markup or out of it (an emphasis marker that may open, a code
/// span or a bracket still open, an entity or an escape cut short, a marker at the very end). The
/// second offset (not after the first) falls between two words of plain text, where the rest
/// can be parsed on its own; 0 when there is none.
fn settled(text: &str, parsed: &Inline) -> (usize, usize) {
    let bytes = text.as_bytes();
    let covered = |ranges: &[Range<usize>], at: usize| {
        let k = ranges.partition_point(|r| r.end <= at);
        ranges.get(k).is_some_and(|r| r.start <= at)
    };
    // A link at the end, or before `(` or `[` (pulldown-cmark reads `\[` as one there too), may
    // still turn into another.
    let mut cut = parsed
        .link_spans
        .iter()
        .filter(|r| matches!(bytes.get(r.end), None | Some(b'(' | b'[' | b'\\')))
        .map(|r| r.start)
        .min()
        .unwrap_or(bytes.len());
    let mut whole = parsed.whole.iter().peekable();
    let mut i = 0;
    while i < cut {
        while whole.peek().is_some_and(|r| r.end <= i) {
            whole.next();
        }
        if let Some(r) = whole.peek()
            && r.start <= i
        {
            // A code span's closing run may still grow.
            if r.end == bytes.len() {
                cut = r.start;
                break;
            }
            i = r.end;
            continue;
        }
        let unsettled = match bytes[i] {
            b'\\' if i + 1 == bytes.len() => true,
            b'\\' => {
                i += if bytes[i + 1].is_ascii_punctuation() {
                    2
                } else {
                    1
                };
                continue;
            }
            // One that closes none yet: a later one of the same length may.
            b'`' => true,
            c @ (b'*' | b'_' | b'~') => {
                let run = bytes[i..].iter().take_while(|b| **b == c).count();
                let literal = (i..i + run).any(|at| covered(&parsed.text, at));
                if i + run == bytes.len() || (literal && can_open(text, i, run)) {
                    true
                } else {
                    i += run;
                    continue;
                }
            }
            b'[' => covered(&parsed.text, i) && !bracket_settled(text, i, &parsed.whole),
            // Outside a tag or an autolink, even in a link's destination: one may still close.
            b'<' => bytes
                .get(i + 1)
                .is_none_or(|b| b.is_ascii_alphabetic() || matches!(b, b'/' | b'!' | b'?')),
            b'&' => {
                covered(&parsed.text, i)
                    && bytes[i + 1..]
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'#')
            }
            _ => false,
        };
        if unsettled {
            cut = if bytes[i] == b'[' && i > 0 && bytes[i - 1] == b'!' {
                i - 1
            } else {
                i
            };
            break;
        }
        i += 1;
    }
    // Not inside a span (its end may not be where it will be), nor inside the run of markers
    // that opened one.
    loop {
        while cut > 0
            && cut < bytes.len()
            && matches!(bytes[cut], b'*' | b'_' | b'~')
            && bytes[cut - 1] == bytes[cut]
        {
            cut -= 1;
        }
        match parsed
            .spans
            .iter()
            .filter(|r| r.start < cut && cut < r.end)
            .map(|r| r.start)
            .min()
        {
            Some(start) => cut = start,
            None => break,
        }
    }
    // Spans are in the order they start: how far those that started before a point reach.
    let mut reach = Vec::with_capacity(parsed.spans.len());
    let mut far = 0;
    for r in &parsed.spans {
        far = far.max(r.end);
        reach.push(far);
    }
    let in_span = |at: usize| {
        let n = parsed.spans.partition_point(|r| r.start < at);
        n > 0 && reach[n - 1] > at
    };
    let commit = (1..cut.min(bytes.len().saturating_sub(1)) + 1)
        .rev()
        .find(|&k| {
            k < bytes.len()
                && bytes[k - 1] == b' '
                && !bytes[k].is_ascii_whitespace()
                && covered(&parsed.verbatim, k - 1)
                && covered(&parsed.verbatim, k)
                && !in_span(k)
        })
        .unwrap_or(0);
    (cut, commit)
}

/// Whether a run of `*`, `_` or `~` at `i` may open emphasis, by pulldown-cmark's rules (left
/// flanking; `_` not inside a word; `~~` anywhere), judged generously where Unicode punctuation is
/// concerned: a run wrongly judged able to only holds the line back.
fn can_open(text: &str, i: usize, run: usize) -> bool {
    let prev = text[..i].chars().next_back();
    let next = text[i + run..].chars().next();
    let space = |c: Option<char>| c.is_none_or(char::is_whitespace);
    if space(next) {
        return false;
    }
    let surely_punctuation = next.is_some_and(|c| c.is_ascii_punctuation());
    let maybe_punctuation = prev.is_some_and(|c| !c.is_alphanumeric() && !c.is_whitespace());
    match text.as_bytes()[i] {
        b'~' => true,
        b'*' if !surely_punctuation => true,
        _ => space(prev) || maybe_punctuation,
    }
}

/// Whether a `[` shown as text at `i` stays text however the line goes on: its `]` has come, with
/// neither a code span nor a tag that might still swallow it before, and what follows it makes
/// no link.
fn bracket_settled(text: &str, i: usize, whole: &[Range<usize>]) -> bool {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut k = i;
    while k < bytes.len() {
        let j = whole.partition_point(|r| r.end <= k);
        if let Some(r) = whole.get(j)
            && r.start <= k
        {
            k = r.end;
            continue;
        }
        match bytes[k] {
            b'\\' => k += 1,
            b'`' | b'<' => return false,
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return bytes
                        .get(k + 1)
                        .is_some_and(|b| !matches!(b, b'(' | b'[' | b'\\'));
                }
            }
            _ => {}
        }
        k += 1;
    }
    false
}

/// A table row with the pipes inside its code spans escaped: models seldom escape them, and GFM
/// would split the cell there.
fn protect_code_pipes(row: &str) -> Cow<'_, str> {
    if !row.contains('`') {
        return row.into();
    }
    let mut out = String::with_capacity(row.len() + 8);
    // The length of the backtick run that opened the code span the text is in.
    let mut open = 0;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                let mut run = 1;
                while chars.next_if_eq(&'`').is_some() {
                    run += 1;
                }
                if open == 0 {
                    open = run;
                } else if run == open {
                    open = 0;
                }
                out.extend(iter::repeat_n('`', run));
            }
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                out.push_str("\\|");
            }
            '|' if open > 0 => out.push_str("\\|"),
            c => out.push(c),
        }
    }
    out.into()
}

/// The columns characters take.
fn chars_width(chars: &[(char, Style)]) -> usize {
    chars.iter().map(|(c, _)| c.width().unwrap_or(0)).sum()
}

/// The first characters of `chars` that fit in `room` columns.
fn fit_chars(chars: &[(char, Style)], room: usize) -> &[(char, Style)] {
    let mut width = 0;
    let end = chars
        .iter()
        .position(|(c, _)| {
            width += c.width().unwrap_or(0);
            width > room
        })
        .unwrap_or(chars.len());
    &chars[..end]
}

/// Where styled characters break into lines of `first` columns, then `rest`: character ranges.
fn wrap_chars(chars: &[(char, Style)], first: usize, rest: usize) -> Vec<Range<usize>> {
    // A text that fits is one line (as textwrap would have it), without its trailing spaces.
    if chars.is_empty() {
        return Vec::new();
    }
    if chars_width(chars) <= first {
        let end = chars
            .iter()
            .rposition(|(c, _)| *c != ' ')
            .map_or(0, |p| p + 1);
        return iter::once(0..end).collect();
    }
    let plain: String = chars.iter().map(|(c, _)| *c).collect();
    // The ranges come in order: count the characters up to each end once.
    let (mut byte, mut index) = (0, 0);
    let mut to_index = |to: usize| {
        index += plain[byte..to].chars().count();
        byte = to;
        index
    };
    wrap::ranges(&plain, first, rest, LongWords::Break)
        .into_iter()
        .map(|r| to_index(r.start)..to_index(r.end))
        .collect()
}

/// One logical line being laid out: its source, what of it is settled, and what was printed.
#[derive(Debug, Default)]
struct Flow {
    /// The line's text, its prefixes taken off.
    src: String,
    /// Bytes of `src` whose characters are settled (in `chars`, or printed).
    from: usize,
    /// Settled characters not printed yet.
    chars: Vec<(char, Style)>,
    /// Characters of the parse from `from` on that were printed already (they were known not to
    /// change before `from` could move past them).
    skip: usize,
    /// URLs of the settled characters' links.
    links: Vec<String>,
    base: Style,
    first_prefix: String,
    first_prefix_width: usize,
    next_prefix: String,
    next_prefix_width: usize,
    /// Display lines printed so far.
    printed: usize,
    /// The length `src` must reach before parsing it again may print more.
    parse_at: usize,
}

impl Flow {
    fn prefix(&self) -> (&str, usize) {
        if self.printed == 0 {
            (&self.first_prefix, self.first_prefix_width)
        } else {
            (&self.next_prefix, self.next_prefix_width)
        }
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
        /// A paragraph's line: no list marker, no quote bar.
        plain: bool,
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
        // A list inside a quote keeps its marker. What the quote holds may not be known yet: the
        // start of a list item (`-   --`) may still look like a rule.
        let inner = classify(rest, complete, layout);
        if !complete && !matches!(inner, Some(Line::Flowing { .. })) {
            return None;
        }
        if let Some(Line::Flowing {
            first,
            first_width,
            next,
            next_width,
            base,
            text,
            ..
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
                plain: false,
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
            plain: false,
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
        let width = indent + wrap::width(&shown) + 1;
        return Some(Line::Flowing {
            first: format!("{pad}{} ", paint_prefix(&shown, "1", layout)),
            first_width: width,
            next: " ".repeat(width),
            next_width: width,
            base: Style::default(),
            plain: false,
            text,
        });
    }
    // `[label]: …` may be a link reference definition, drawn differently: known once complete.
    if !complete && indent <= 3 && may_be_definition(trimmed) {
        return None;
    }
    let pad = " ".repeat(indent);
    Some(Line::Flowing {
        first: pad.clone(),
        first_width: indent,
        next: pad,
        next_width: indent,
        base: Style::default(),
        plain: true,
        text: trimmed,
    })
}

/// Whether the start of a line may be that of a link reference definition: `[`, a label not
/// closed yet or closed by `]:`.
fn may_be_definition(line: &str) -> bool {
    let Some(label) = line.strip_prefix('[') else {
        return false;
    };
    let bytes = label.as_bytes();
    let mut k = 0;
    while k < bytes.len() {
        match bytes[k] {
            b'\\' => k += 1,
            b']' => return bytes.get(k + 1).is_none_or(|b| *b == b':'),
            _ => {}
        }
        k += 1;
    }
    true
}

/// The level of the heading a line makes of the paragraph line above it (`===` 1, `---` 2).
fn setext_underline(line: &str) -> Option<usize> {
    let marks = line.trim_start_matches(' ');
    let indent = line.len() - marks.len();
    let marks = marks.trim_end_matches([' ', '\t']);
    let level = match marks.bytes().next() {
        Some(b'=') => 1,
        Some(b'-') => 2,
        _ => return None,
    };
    (indent <= 3 && marks.bytes().all(|b| b == marks.as_bytes()[0])).then_some(level)
}

/// Whether the start of a line may still become a setext underline.
fn may_be_underline(start: &str) -> bool {
    let marks = start.trim_start_matches(' ');
    if start.len() - marks.len() > 3 {
        return false;
    }
    let Some(first) = marks.bytes().next() else {
        return true;
    };
    let run = marks.bytes().take_while(|b| *b == first).count();
    matches!(first, b'=' | b'-') && marks[run..].bytes().all(|b| b == b' ' || b == b'\t')
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

/// What the line before was, for what the next one may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Previous {
    /// Nothing, a blank line or a block other than text: a link reference definition may follow.
    Other,
    /// A paragraph's line: the next may be a setext underline.
    Paragraph,
    /// A list item's or a quote's line, or a paragraph line that continues one.
    Item,
}

/// A paragraph line drawn on one terminal line and not printed yet: a setext underline under it
/// would make it a heading.
#[derive(Debug)]
struct Held {
    text: String,
    shown: String,
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
    held: Option<Held>,
    previous: Previous,
    definitions: Definitions,
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
            held: None,
            previous: Previous::Other,
            definitions: Definitions::default(),
        }
    }

    /// Takes more of the answer; returns what can be printed now.
    pub fn push(&mut self, text: &str) -> String {
        // A `\r` that ends a piece waits for the next: before a `\n` it is a line end's.
        let joined;
        let mut text = text;
        if mem::take(&mut self.held_cr) && !text.starts_with('\n') {
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
            let mut line = mem::take(&mut self.pending);
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

    /// What of the line being received is not printed yet, as one terminal row (with the prefix
    /// it will get when it is a flowing line's), to show until the next output: the caller takes
    /// it back with `\r\x1b[2K` before writing anything else, so a slow model's words appear as
    /// they come while the scrollback stays what [`Renderer::push`] prints. Its last row when it
    /// would take more than one; fits in a column less than the width (never wrapped). Empty when
    /// nothing waits, and in a table (its rows show as they arrive).
    pub fn tail(&self) -> String {
        let room = self.layout.width.saturating_sub(1).max(10);
        let mut out = String::new();
        match (&self.block, &self.flow) {
            (Block::Table { .. }, _) => {}
            (Block::Text, Some(flow)) => {
                let text = &flow.src[flow.from..];
                let mut chars = flow.chars.clone();
                let mut links = flow.links.clone();
                // A long unsettled run (an open code span) is shown as far as the parse is cheap.
                if text.len() <= 8 * self.layout.width {
                    let parsed = parse_inline(
                        text,
                        flow.base,
                        links.len(),
                        &self.layout,
                        &self.definitions,
                    );
                    chars.extend_from_slice(parsed.chars.get(flow.skip..).unwrap_or_default());
                    links.extend(parsed.links);
                }
                let (prefix, width) = flow.prefix();
                let lines = wrap_chars(
                    &chars,
                    self.room(width).min(room.saturating_sub(width)),
                    self.room(flow.next_prefix_width)
                        .min(room.saturating_sub(flow.next_prefix_width)),
                );
                let Some(last) = lines.last() else {
                    return out;
                };
                out.push_str(if lines.len() == 1 {
                    prefix
                } else {
                    &flow.next_prefix
                });
                let cut = fit_chars(&chars[last.clone()], room);
                self.styled_into(&mut out, cut, &links);
            }
            _ => {
                let pending = self.pending.trim_end_matches('\r');
                if pending.is_empty() {
                    if let Some(held) = &self.held {
                        return held.shown.trim_end_matches('\n').to_string();
                    }
                    return out;
                }
                let plain: Vec<(char, Style)> = pending
                    .chars()
                    .map(|c| (if c == '\t' { ' ' } else { c }, Style::default()))
                    .collect();
                // The end of a line too long for a row: what arrives last shows.
                let mut start = plain.len();
                let mut width = 0;
                while start > 0 {
                    let w = plain[start - 1].0.width().unwrap_or(0);
                    if width + w > room {
                        break;
                    }
                    width += w;
                    start -= 1;
                }
                self.styled_into(&mut out, &plain[start..], &[]);
            }
        }
        out
    }

    /// The answer ended (or was cut short): prints what is left, closing any open block.
    pub fn finish(&mut self) -> String {
        if mem::take(&mut self.held_cr) {
            self.pending.push('\r');
        }
        let mut out = String::new();
        if !self.pending.is_empty() {
            let line = mem::take(&mut self.pending);
            self.line(&line, &mut out);
        }
        if let Some(held) = self.held.take() {
            out.push_str(&held.shown);
        }
        self.close_block(&mut out);
        out
    }

    fn close_block(&mut self, out: &mut String) {
        match mem::replace(&mut self.block, Block::Text) {
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
                    let lines = wrap::width(line).div_ceil(self.layout.width).max(1);
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
        if let Some(held) = self.held.take() {
            if let Some(level) = setext_underline(line) {
                self.flow = None;
                self.previous = Previous::Other;
                self.heading(&held.text, level, out);
                return;
            }
            out.push_str(&held.shown);
        }
        let layout = self.layout;
        let previous = mem::replace(&mut self.previous, Previous::Other);
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
                self.heading(text, level, out);
            }
            Line::Flowing {
                first,
                first_width,
                next,
                next_width,
                base,
                plain,
                text,
            } => {
                let top = plain && first_width <= 3;
                if top
                    && previous == Previous::Other
                    && let Some((label, url, title)) = definition(text)
                {
                    self.flow = None;
                    self.definitions
                        .0
                        .entry(Definitions::key(&label))
                        .or_insert_with(|| url.clone());
                    self.definition_line(&first, &label, &url, &title, out);
                    return;
                }
                // The line may have been streaming: go on from where it was.
                let mut flow = self.flow.take().unwrap_or_else(|| Flow {
                    base,
                    first_prefix: first,
                    first_prefix_width: first_width,
                    next_prefix: next,
                    next_prefix_width: next_width,
                    ..Flow::default()
                });
                // A line that streamed has its text already, or the start of it.
                if flow.src != text {
                    flow.src.clear();
                    flow.src.push_str(text);
                }
                let mut shown = String::new();
                self.lay_out(&mut flow, true, &mut shown);
                self.previous = match previous {
                    _ if !plain => Previous::Item,
                    Previous::Item => Previous::Item,
                    _ => Previous::Paragraph,
                };
                if top && self.previous == Previous::Paragraph && flow.printed == 1 {
                    self.held = Some(Held {
                        text: text.to_string(),
                        shown,
                    });
                } else {
                    out.push_str(&shown);
                }
            }
        }
    }

    /// A heading's text, bold and coloured (the first level underlined).
    fn heading(&self, text: &str, level: usize, out: &mut String) {
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

    /// A link reference definition, shown (its use may have been printed before it came): the
    /// label dimmed, the URL a link.
    fn definition_line(&self, pad: &str, label: &str, url: &str, title: &str, out: &mut String) {
        let faint = Style {
            faint: true,
            ..Style::default()
        };
        let link = Style {
            link: 1,
            ..Style::default()
        };
        let mut chars: Vec<(char, Style)> =
            format!("[{label}]:").chars().map(|c| (c, faint)).collect();
        chars.push((' ', Style::default()));
        chars.extend(url.chars().map(|c| (c, link)));
        if !title.is_empty() {
            chars.extend(format!(" \"{title}\"").chars().map(|c| (c, faint)));
        }
        let mut flow = Flow {
            chars,
            links: vec![url.to_string()],
            first_prefix: pad.to_string(),
            first_prefix_width: pad.len(),
            next_prefix: pad.to_string(),
            next_prefix_width: pad.len(),
            ..Flow::default()
        };
        self.lay_out(&mut flow, true, out);
    }

    /// More of a line has arrived (`added`): a flowing line prints the wrapped lines it already
    /// fills.
    fn stream_partial(&mut self, added: &str, out: &mut String) {
        if !matches!(self.block, Block::Text) {
            return;
        }
        if let Some(held) = &self.held {
            if may_be_underline(&self.pending) {
                return;
            }
            out.push_str(&held.shown);
            self.held = None;
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
                    ..
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

    /// Parses what is new of a flowing line and prints every wrapped line that is complete (all
    /// of them when the line is).
    fn lay_out(&self, flow: &mut Flow, complete: bool, out: &mut String) {
        let rest = flow.src.len() - flow.from;
        // Not worth parsing before the line could fill a terminal line (a byte takes at most a
        // column, but for a link's URL shown after it, which only delays the print).
        let room = self.room(flow.first_prefix_width.max(flow.next_prefix_width));
        if !complete && (flow.src.len() < flow.parse_at || chars_width(&flow.chars) + rest <= room)
        {
            return;
        }
        let first_link = flow.links.len();
        let text = &flow.src[flow.from..];
        let parsed = parse_inline(text, flow.base, first_link, &self.layout, &self.definitions);
        let (cut, commit) = if complete {
            (text.len(), text.len())
        } else {
            settled(text, &parsed)
        };
        let unsettled = text.len() - cut;
        let before = |limit: usize| parsed.offsets.iter().take_while(|o| **o < limit).count();
        let (stable, committed) = if complete {
            (parsed.chars.len(), parsed.chars.len())
        } else {
            (before(cut), before(commit))
        };
        // What can be printed: the settled characters not printed yet, then the stable ones.
        let skip = flow.skip.min(stable);
        let settled_len = flow.chars.len();
        let mut view = mem::take(&mut flow.chars);
        view.reserve(stable - skip);
        view.extend_from_slice(&parsed.chars[skip..stable]);
        flow.links.extend(parsed.links);
        let printed = self.print_lines(flow, &view, complete, out);
        // Another line fills only once the last one, with what is not settled, has grown past the
        // room; past the lookahead, not before the line has grown by half (keeps a pathological
        // line linear).
        let pending = chars_width(&view[printed..]) + unsettled;
        let mut need = room.saturating_sub(pending);
        if rest > LOOKAHEAD {
            need = need.max(rest / 2);
        }
        flow.parse_at = flow.src.len() + need;
        // Keep the settled characters not printed, and add those settled now.
        let skip = skip + printed.saturating_sub(settled_len);
        view.truncate(settled_len.max(printed));
        view.drain(..printed);
        if committed > skip {
            view.extend_from_slice(&parsed.chars[skip..committed]);
        }
        flow.chars = view;
        flow.skip = skip.saturating_sub(committed);
        flow.from += commit;
        let kept = parsed.link_starts.iter().filter(|s| **s < commit).count();
        flow.links.truncate(first_link + kept);
    }

    /// The columns for a line's text after a prefix this wide.
    fn room(&self, prefix: usize) -> usize {
        self.layout.width.saturating_sub(prefix).max(10)
    }

    /// Prints the wrapped lines of `chars` that are complete (all of them when the text is), each
    /// after the flow's prefix; returns how many characters they took.
    fn print_lines(
        &self,
        flow: &mut Flow,
        chars: &[(char, Style)],
        complete: bool,
        out: &mut String,
    ) -> usize {
        if chars.is_empty() {
            return 0;
        }
        let lines = wrap_chars(
            chars,
            self.room(flow.prefix().1),
            self.room(flow.next_prefix_width),
        );
        let done = if complete {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        for line in &lines[..done] {
            out.push_str(flow.prefix().0);
            self.styled_into(out, &chars[line.clone()], &flow.links);
            out.push('\n');
            flow.printed += 1;
        }
        match lines.get(done) {
            Some(next) => next.start,
            None => chars.len(),
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

    /// A table laid out to the width; rows that do not make a table are shown as written.
    fn table(&self, rows: &[String]) -> String {
        let raw = || {
            rows.iter()
                .map(|row| format!("{row}\n"))
                .collect::<String>()
        };
        let source = rows
            .iter()
            .map(|row| protect_code_pipes(row))
            .collect::<Vec<_>>()
            .join("\n");
        let Some((aligns, body)) = self.parse_table(&source) else {
            return raw();
        };
        let columns = aligns.len().max(1);
        let natural: Vec<usize> = (0..columns)
            .map(|c| {
                body.iter()
                    .map(|row| chars_width(row.cell(c)))
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        // `│ a │ b │`: 3 columns of frame per cell, and one.
        let frame = 3 * columns + 1;
        let room = self.layout.width.saturating_sub(frame);
        if room < 3 * columns {
            return raw();
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
        for (n, row) in body.iter().enumerate() {
            let wrapped: Vec<Vec<&[(char, Style)]>> = (0..columns)
                .map(|c| {
                    let chars = row.cell(c);
                    wrap_chars(chars, widths[c], widths[c])
                        .into_iter()
                        .map(|r| &chars[r])
                        .collect()
                })
                .collect();
            let height = wrapped.iter().map(Vec::len).max().unwrap_or(1).max(1);
            for line in 0..height {
                out.push('│');
                for c in 0..columns {
                    let piece: &[(char, Style)] = wrapped[c].get(line).copied().unwrap_or(&[]);
                    let gap = widths[c].saturating_sub(chars_width(piece));
                    let (before, after) = match aligns.get(c) {
                        Some(Alignment::Right) => (gap, 0),
                        Some(Alignment::Center) => (gap / 2, gap - gap / 2),
                        _ => (0, gap),
                    };
                    out.extend(iter::repeat_n(' ', before + 1));
                    self.styled_into(&mut out, piece, &row.links);
                    out.extend(iter::repeat_n(' ', after + 1));
                    out.push('│');
                }
                out.push('\n');
            }
            if row.header && n + 1 < body.len() {
                out.push_str(&border("├", "┼", "┤"));
            }
        }
        out.push_str(&border("└", "┴", "┘"));
        out
    }

    /// A table's rows parsed by pulldown-cmark, with its columns' alignments; None when the rows
    /// are not a table, or not only one.
    fn parse_table(&self, source: &str) -> Option<(Vec<Alignment>, Vec<ParsedRow>)> {
        let resolve = |link| self.definitions.resolve(link);
        let mut events = Parser::new_with_broken_link_callback(source, options(), Some(resolve))
            .into_offset_iter();
        let Some((Event::Start(Tag::Table(aligns)), _)) = events.next() else {
            return None;
        };
        let mut rows = Vec::new();
        let mut row = ParsedRow::default();
        let mut walk = Walk::new(&self.layout, Style::default(), 0, 0);
        for (event, range) in events.by_ref() {
            match event {
                Event::Start(Tag::TableHead | Tag::TableRow) => {
                    let header = matches!(event, Event::Start(Tag::TableHead));
                    let base = Style {
                        bold: header,
                        ..Style::default()
                    };
                    walk = Walk::new(&self.layout, base, 0, 0);
                    row = ParsedRow {
                        header,
                        ..ParsedRow::default()
                    };
                }
                Event::Start(Tag::TableCell) => {}
                Event::End(TagEnd::TableCell) => {
                    row.cells.push(mem::take(&mut walk.out.chars));
                }
                Event::End(TagEnd::TableHead | TagEnd::TableRow) => {
                    row.links = mem::take(&mut walk.out.links);
                    rows.push(mem::take(&mut row));
                }
                Event::End(TagEnd::Table) => break,
                event => walk.event(event, range, source),
            }
        }
        events.next().is_none().then_some((aligns, rows))
    }
}

/// A table row parsed: whether it is the header, its cells' characters, and their links.
#[derive(Debug, Default)]
struct ParsedRow {
    header: bool,
    cells: Vec<Vec<(char, Style)>>,
    links: Vec<String>,
}

impl ParsedRow {
    /// A cell's characters; none for a cell the row lacks.
    fn cell(&self, column: usize) -> &[(char, Style)] {
        self.cells.get(column).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests;
