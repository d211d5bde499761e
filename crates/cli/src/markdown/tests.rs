use super::*;
use std::env;

/// Every element the renderer draws.
pub const SAMPLE: &str = "# The plan

Some **bold**, some *italic* and _underscored_ text, `inline code`, ~~struck~~, a snake_case_name, \
and a [link](https://example.com/docs) and <https://example.org>. A long sentence that goes on and \
on so that it has to wrap at the terminal's width, at word boundaries, without cutting any word in two.

## Steps

1. First, read the **config**.
2. Then:
   - a nested item
   - another one, long enough to wrap onto a second line of its own at narrow widths
     1. and deeper
3. Done.

- [ ] to do
- [x] done

> A quote that says something *wise*,
> > and a nested one.

---

```rust
fn main() {
    // a comment
    let s = \"text\"; /* block */
    println!(\"{}\", s.len() + 42);
}
```

```
plain code with a very long line that must not be wrapped by the renderer because copying it must work as one line
```

| Name | Kind | Size |
|:-----|:----:|-----:|
| `a.rs` | file | 1,204 |
| src | folder with a long description that wraps | 12 |

### Done
";

fn layout(width: usize) -> Layout {
    Layout {
        width,
        height: 50,
        hyperlinks: false,
        dim: false,
    }
}

fn render(text: &str, layout: Layout) -> String {
    let mut r = Renderer::new(layout);
    let mut out = r.push(text);
    out.push_str(&r.finish());
    out
}

/// Escape sequences made readable for snapshots: `⟨1⟩bold⟨⟩`.
fn readable(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('\x1b') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
            let (code, kind) = (&r[..end], &r[end..end + 1]);
            match (code, kind) {
                ("0", "m") => out.push_str("⟨⟩"),
                (code, "m") => out.push_str(&format!("⟨{code}⟩")),
                (code, kind) => out.push_str(&format!("⟨{code}{kind}⟩")),
            }
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix("]8;;") {
            let end = r.find("\x1b\\").unwrap();
            if end == 0 {
                out.push_str("⟨/link⟩");
            } else {
                out.push_str(&format!("⟨link {}⟩", &r[..end]));
            }
            rest = &r[end + 2..];
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn every_element_at_two_widths() {
    insta::assert_snapshot!("width_40", readable(&render(SAMPLE, layout(40))));
    insta::assert_snapshot!("width_100", readable(&render(SAMPLE, layout(100))));
}

/// However the answer is cut into streamed pieces, the output is the same.
#[test]
fn the_output_does_not_depend_on_the_chunking() {
    for width in [40, 100] {
        let whole = render(SAMPLE, layout(width));
        for size in [1, 2, 3, 7, 16, 64, 333] {
            let mut r = Renderer::new(layout(width));
            let mut out = String::new();
            let chars: Vec<char> = SAMPLE.chars().collect();
            for piece in chars.chunks(size) {
                out.push_str(&r.push(&piece.iter().collect::<String>()));
            }
            out.push_str(&r.finish());
            assert_eq!(
                readable(&out),
                readable(&whole),
                "width {width}, pieces of {size}"
            );
        }
    }
}

#[test]
fn a_long_line_prints_each_wrapped_line_as_soon_as_it_is_full() {
    let mut r = Renderer::new(layout(20));
    assert_eq!(r.push("one two three "), "");
    // The first line is full once a word no longer fits.
    assert_eq!(r.push("four five six"), "one two three four\n");
    // Exactly full, but the next word may still belong to this line's last one.
    assert_eq!(r.push(" seven eight"), "");
    assert_eq!(r.push(" nine"), "five six seven eight\n");
    assert_eq!(r.finish(), "nine\n");
}

#[test]
fn emphasis_waits_for_its_end_and_is_literal_without_one() {
    let mut r = Renderer::new(layout(100));
    let mut out = r.push("a **bold");
    out.push_str(&r.push(" word** and *a star"));
    out.push_str(&r.finish());
    assert_eq!(readable(&out), "a ⟨1⟩bold word⟨⟩ and *a star\n");
    assert_eq!(
        readable(&render(
            "2 * 3 * 4 and a_b_c and __init__ and `` a ` b ``\n",
            layout(100)
        )),
        "2 * 3 * 4 and a_b_c and ⟨1⟩init⟨⟩ and ⟨36⟩a ` b⟨⟩\n"
    );
}

#[test]
fn links_become_hyperlinks_where_the_terminal_has_them() {
    let l = Layout {
        hyperlinks: true,
        ..layout(100)
    };
    assert_eq!(
        readable(&render("see [the docs](https://x.dev/a) now\n", l)),
        "see ⟨link https://x.dev/a⟩⟨4;34⟩the docs⟨⟩⟨/link⟩ now\n"
    );
    assert_eq!(
        readable(&render(
            "see [the docs](https://x.dev/a) now\n",
            layout(100)
        )),
        "see ⟨4;34⟩the docs⟨⟩⟨2⟩ (https://x.dev/a)⟨⟩ now\n"
    );
}

#[test]
fn the_reasoning_is_dimmed_throughout() {
    let l = Layout {
        dim: true,
        ..layout(100)
    };
    assert_eq!(
        readable(&render("- a **b**\n", l)),
        "⟨2⟩•⟨⟩ ⟨2⟩a ⟨⟩⟨2;1⟩b⟨⟩\n"
    );
}

#[test]
fn wide_characters_wrap_by_their_width() {
    let out = render(&format!("{}\n", "汉字".repeat(15)), layout(20));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines.iter().all(|l| wrap::width(l) <= 20), "{out}");
}

/// Cut short in the middle of a code block or a table: what arrived is shown once, laid out.
#[test]
fn an_interrupted_block_is_closed_and_nothing_is_lost_or_repeated() {
    let mut r = Renderer::new(layout(60));
    let mut out = r.push("```python\nx = 1\ny = ");
    out.push_str(&r.finish());
    assert_eq!(
        readable(&out),
        "⟨2⟩╭─ python⟨⟩\nx = ⟨33⟩1⟨⟩\ny = \n⟨2⟩╰─⟨⟩\n"
    );
    let mut r = Renderer::new(layout(60));
    let mut out = r.push("| a | b |\n|---|---|\n| 1 | 2");
    out.push_str(&r.finish());
    let text = readable(&out);
    assert!(text.contains("┌───┬───┐"), "{text}");
    assert_eq!(
        text.matches(" 1 ").count(),
        2,
        "shown raw once, then laid out once: {text}"
    );
    assert!(text.contains("⟨3F⟩⟨J⟩"), "the raw rows are erased: {text}");
}

/// A table taller than the screen shows the rows that fit, counts the rest on one line, and is
/// drawn in their place when it ends.
#[test]
fn a_tall_table_never_shows_more_rows_than_fit() {
    let l = Layout {
        height: 6,
        ..layout(60)
    };
    let mut text = String::from("| n |\n|---|\n");
    for i in 0..10 {
        text.push_str(&format!("| {i} |\n"));
    }
    text.push_str("after\n");
    let out = readable(&render(&text, l));
    assert!(out.contains("⋯ 9 more table rows"), "{out}");
    assert!(out.contains("⟨3F⟩⟨J⟩"), "{out}");
    assert!(out.ends_with("after\n"), "{out}");
}

/// Arbitrary text (markers unbalanced, tables ragged, wide and combining characters, escapes at
/// chunk ends) never panics, and its output does not depend on the chunking.
#[test]
fn arbitrary_text_never_panics_and_chunking_never_matters() {
    let atoms = [
        "*",
        "**",
        "***",
        "_",
        "__",
        "~~",
        "~",
        "`",
        "``",
        "```",
        "```rust\n",
        "~~~\n",
        "\\",
        "[",
        "]",
        "(",
        ")",
        "](",
        "<",
        ">",
        "<https://",
        "|",
        "| a |",
        "|---|",
        ":--:",
        "\n",
        "\n\n",
        "  ",
        " ",
        "-",
        "- ",
        "1. ",
        "> ",
        "#",
        "# ",
        "---",
        "word",
        "longerword",
        "汉字",
        "é",
        "\u{301}",
        "😀",
        "\t",
        "http://x.y",
        "[t](u)",
        "a_b",
        "\r\n",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let cases: usize = env::var("NEW_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    for case in 0..cases {
        let len = (next() % 60) as usize;
        let text: String = (0..len)
            .map(|_| atoms[(next() % atoms.len() as u64) as usize])
            .collect();
        for width in [20, 80] {
            let l = Layout {
                height: 8,
                ..layout(width)
            };
            let whole = render(&text, l);
            let mut r = Renderer::new(l);
            let mut out = String::new();
            let chars: Vec<char> = text.chars().collect();
            let mut at = 0;
            while at < chars.len() {
                let size = 1 + (next() % 7) as usize;
                let end = (at + size).min(chars.len());
                out.push_str(&r.push(&chars[at..end].iter().collect::<String>()));
                at = end;
            }
            out.push_str(&r.finish());
            assert_eq!(
                readable(&out),
                readable(&whole),
                "case {case}, width {width}: {text:?}"
            );
        }
    }
}

fn with_hyperlinks(width: usize) -> Layout {
    Layout {
        hyperlinks: true,
        ..layout(width)
    }
}

/// `[text][1]` with a `[1]: …` definition before it is a link. A definition is shown, its URL a
/// link: one that comes after its use (a line cannot be taken back) still takes the reader there.
#[test]
fn reference_links_are_links() {
    assert_eq!(
        readable(&render(
            "[1]: https://x.dev/a\n\nsee [the docs][1] and [the Docs] now\n\n[the docs]: https://x.dev/b\n",
            with_hyperlinks(100)
        )),
        "⟨2⟩[1]:⟨⟩ ⟨link https://x.dev/a⟩⟨4;34⟩https://x.dev/a⟨⟩⟨/link⟩\n\n\
         see ⟨link https://x.dev/a⟩⟨4;34⟩the docs⟨⟩⟨/link⟩ and [the Docs] now\n\n\
         ⟨2⟩[the docs]:⟨⟩ ⟨link https://x.dev/b⟩⟨4;34⟩https://x.dev/b⟨⟩⟨/link⟩\n"
    );
    assert_eq!(
        readable(&render(
            "[a]: https://x.dev/a\n\n[Text] [a] and a[i][j]\n\n[1]: <https://x.dev/b> \"The docs\"\n",
            layout(100)
        )),
        "⟨2⟩[a]:⟨⟩ ⟨4;34⟩https://x.dev/a⟨⟩\n\n\
         [Text] ⟨4;34⟩a⟨⟩⟨2⟩ (https://x.dev/a)⟨⟩ and a[i][j]\n\n\
         ⟨2⟩[1]:⟨⟩ ⟨4;34⟩https://x.dev/b⟨⟩⟨2⟩ \"The docs\"⟨⟩\n"
    );
    // Not a definition: inside a paragraph, or not one by CommonMark's rules.
    assert_eq!(
        readable(&render(
            "text\n[1]: https://x.dev/a\n\n[note]: see below\n",
            layout(100)
        )),
        "text\n[1]: https://x.dev/a\n\n[note]: see below\n"
    );
}

#[test]
fn html_entities_are_decoded() {
    assert_eq!(
        readable(&render(
            "Fish &amp; chips &lt;3 &#x41;&#66; &copy; &nosuch; `&amp;`\n",
            layout(100)
        )),
        "Fish & chips <3 AB © &nosuch; ⟨36⟩&amp;⟨⟩\n"
    );
}

/// A line underlined with `===` or `---` is a heading; the paragraph line above an underline is
/// held back only until the next line shows it is none.
#[test]
fn setext_headings_are_headings() {
    assert_eq!(
        readable(&render(
            "Title\n=====\n\nSub *title*\n---\n\ntext\n\n---\n",
            layout(40)
        )),
        "⟨1;4;35⟩Title⟨⟩\n\n⟨1;35⟩Sub ⟨⟩⟨1;3;35⟩title⟨⟩\n\ntext\n\n\
         ⟨2⟩────────────────────────────────────────⟨⟩\n"
    );
    let mut r = Renderer::new(layout(40));
    assert_eq!(r.push("Title\n"), "");
    assert_eq!(r.push("=="), "");
    assert_eq!(readable(&r.push("==\nPlain\n")), "⟨1;4;35⟩Title⟨⟩\n");
    assert_eq!(r.push("- item"), "Plain\n");
    // A list item's line is no heading's text.
    assert_eq!(
        readable(&r.push("\n---\n")),
        "⟨1⟩•⟨⟩ item\n⟨2⟩────────────────────────────────────────⟨⟩\n"
    );
    assert_eq!(r.push("last"), "");
    assert_eq!(r.finish(), "last\n");
}

#[test]
fn a_url_keeps_its_parentheses() {
    assert_eq!(
        readable(&render(
            "[x](https://example.com/a_(b)) and <https://example.com/a_(b)>\n",
            with_hyperlinks(100)
        )),
        "⟨link https://example.com/a_(b)⟩⟨4;34⟩x⟨⟩⟨/link⟩ and \
         ⟨link https://example.com/a_(b)⟩⟨4;34⟩https://example.com/a_(b)⟨⟩⟨/link⟩\n"
    );
    assert_eq!(
        readable(&render("[x](https://example.com/a_(b)).\n", layout(100))),
        "⟨4;34⟩x⟨⟩⟨2⟩ (https://example.com/a_(b))⟨⟩.\n"
    );
}

/// A table's cells are parsed as Markdown too; a pipe in a code span does not split a cell.
#[test]
fn table_cells_are_markdown() {
    let out = readable(&render(
        "| op | means |\n|---|---|\n| `a || b` | either &amp; [or](https://x.dev) |\n",
        layout(60),
    ));
    assert!(
        out.contains("│ ⟨36⟩a || b⟨⟩ │ either & ⟨4;34⟩or⟨⟩⟨2⟩ (https://x.dev)⟨⟩ │"),
        "{out}"
    );
}

/// The constructs pulldown-cmark brought (references, entities, setext headings, images) never
/// make the output depend on the chunking either.
#[test]
fn references_entities_and_headings_never_depend_on_the_chunking() {
    let atoms = [
        "*",
        "**",
        "_",
        "~~",
        "`",
        "``",
        "```\n",
        "\\",
        "[",
        "]",
        "(",
        ")",
        "](",
        "<",
        ">",
        "<https://",
        "<b>",
        "</b>",
        "| a |",
        "|---|",
        "\n",
        "\n\n",
        " ",
        "- ",
        "> ",
        "# ",
        "---",
        "===",
        "\n===\n",
        "\n---\n",
        "word",
        "longerword",
        "汉字",
        "&",
        "&amp;",
        "&#x41;",
        ";",
        "[1]",
        "][1]",
        "[1]: http://a.b\n",
        "\n[1]: <u> \"t\"\n",
        "\n[t]: v\n",
        "![",
        "[t](u)",
        "[t][1]",
        "[t]",
        "http://x.y/a_(b)",
        "!",
        ":",
    ];
    let mut seed: u64 = 0x1234_5678_9ABC_DEF1;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let cases: usize = env::var("NEW_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    for case in 0..cases {
        let len = (next() % 80) as usize;
        let text: String = (0..len)
            .map(|_| atoms[(next() % atoms.len() as u64) as usize])
            .collect();
        for width in [20, 80] {
            let l = Layout {
                height: 8,
                hyperlinks: width == 80,
                ..layout(width)
            };
            let whole = render(&text, l);
            let mut r = Renderer::new(l);
            let mut out = String::new();
            let chars: Vec<char> = text.chars().collect();
            let mut at = 0;
            while at < chars.len() {
                let end = (at + 1 + (next() % 7) as usize).min(chars.len());
                out.push_str(&r.push(&chars[at..end].iter().collect::<String>()));
                at = end;
            }
            out.push_str(&r.finish());
            assert_eq!(
                readable(&out),
                readable(&whole),
                "case {case}, width {width}: {text:?}"
            );
        }
    }
}

/// The line still arriving, as its row shows it: under its prefix, rendered as far as it is
/// settled, never wider than a column less than the width, its last row when it takes more.
#[test]
fn the_line_still_arriving_shows_on_one_row() {
    // The columns a row takes, its escape sequences left out.
    let columns = |s: &str| {
        let mut n = 0;
        let mut in_escape = false;
        for c in s.chars() {
            match (in_escape, c) {
                (false, '\x1b') => in_escape = true,
                (true, c) if c.is_ascii_alphabetic() => in_escape = false,
                (true, _) => {}
                (false, _) => n += 1,
            }
        }
        n
    };
    let mut r = Renderer::new(layout(30));
    assert_eq!(r.tail(), "");
    let shown = r.push("- a list item with **bold");
    assert_eq!(shown, "");
    // Under its marker; what may still become markup as it came.
    assert_eq!(readable(&r.tail()), "⟨1⟩•⟨⟩ a list item with **bold");
    let mut short = Renderer::new(layout(30));
    short.push("# A head");
    assert_eq!(short.tail(), "# A head");
    r.push("** words that go on past the width");
    let tail = readable(&r.tail());
    assert!(!tail.contains("**"), "{tail:?}");
    assert!(tail.starts_with("  "), "{tail:?}");
    for piece in [" and on", " and further still", " until the end"] {
        r.push(piece);
        let tail = r.tail();
        assert!(!tail.contains('\n'), "{tail:?}");
        assert!(columns(&tail) <= 29, "{tail:?}");
        assert!(columns(&tail) > 2, "{tail:?}");
    }
    // The whole line printed, nothing waits.
    r.push("\n");
    assert_eq!(r.tail(), "");
    // A code line with no place to break shows its end.
    let mut r = Renderer::new(layout(20));
    r.push("```\n");
    r.push("0123456789abcdefghijklmnopqrstuvwxyz");
    assert_eq!(r.tail(), "hijklmnopqrstuvwxyz");
}
