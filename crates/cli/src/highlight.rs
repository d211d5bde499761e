//! Syntax highlighting of code blocks, a line at a time: a small lexer per language family
//! (keywords, literals, types, strings, numbers, comments) rather than a grammar engine, so that it
//! costs nothing at start-up and adds no dependency. State that spans lines (block comments, Python's
//! triple-quoted strings) is carried from one line to the next.

const KEYWORD: &str = "35";
const STRING: &str = "32";
const COMMENT: &str = "90";
const NUMBER: &str = "33";
const TYPE: &str = "36";
const ADDED: &str = "32";
const REMOVED: &str = "31";
const HUNK: &str = "36";
const HEADING: &str = "1;35";

/// How a language is lexed.
struct Spec {
    names: &'static [&'static str],
    keywords: &'static [&'static str],
    literals: &'static [&'static str],
    line_comments: &'static [&'static str],
    block_comment: Option<(&'static str, &'static str)>,
    quotes: &'static [char],
    /// Capitalised identifiers are types.
    capitalised_types: bool,
    /// Triple-quoted strings span lines.
    triple_quotes: bool,
    /// `key:` / `key =` at a line's start is a key (YAML, TOML), `"key":` (JSON).
    keys: bool,
}

const C_LIKE_LITERALS: &[&str] = &["true", "false", "null", "nullptr", "NULL", "nil"];

const SPECS: &[Spec] = &[
    Spec {
        names: &["rust", "rs"],
        keywords: &[
            "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
            "extern", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
            "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
            "type", "unsafe", "use", "where", "while",
        ],
        literals: &["true", "false", "None", "Some", "Ok", "Err"],
        line_comments: &["//"],
        block_comment: Some(("/*", "*/")),
        quotes: &['"'],
        capitalised_types: true,
        triple_quotes: false,
        keys: false,
    },
    Spec {
        names: &["python", "py", "python3"],
        keywords: &[
            "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
            "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
            "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
            "with", "yield", "match", "case",
        ],
        literals: &["True", "False", "None", "self"],
        line_comments: &["#"],
        block_comment: None,
        quotes: &['"', '\''],
        capitalised_types: true,
        triple_quotes: true,
        keys: false,
    },
    Spec {
        names: &[
            "javascript",
            "js",
            "jsx",
            "typescript",
            "ts",
            "tsx",
            "mjs",
            "cjs",
            "node",
        ],
        keywords: &[
            "async",
            "await",
            "break",
            "case",
            "catch",
            "class",
            "const",
            "continue",
            "debugger",
            "default",
            "delete",
            "do",
            "else",
            "export",
            "extends",
            "finally",
            "for",
            "from",
            "function",
            "if",
            "import",
            "in",
            "instanceof",
            "interface",
            "let",
            "new",
            "of",
            "return",
            "static",
            "switch",
            "throw",
            "try",
            "type",
            "typeof",
            "var",
            "void",
            "while",
            "yield",
            "enum",
            "implements",
            "private",
            "public",
            "protected",
            "readonly",
        ],
        literals: &["true", "false", "null", "undefined", "this", "NaN"],
        line_comments: &["//"],
        block_comment: Some(("/*", "*/")),
        quotes: &['"', '\'', '`'],
        capitalised_types: true,
        triple_quotes: false,
        keys: false,
    },
    Spec {
        names: &["go", "golang"],
        keywords: &[
            "break",
            "case",
            "chan",
            "const",
            "continue",
            "default",
            "defer",
            "else",
            "fallthrough",
            "for",
            "func",
            "go",
            "goto",
            "if",
            "import",
            "interface",
            "map",
            "package",
            "range",
            "return",
            "select",
            "struct",
            "switch",
            "type",
            "var",
        ],
        literals: &["true", "false", "nil", "iota"],
        line_comments: &["//"],
        block_comment: Some(("/*", "*/")),
        quotes: &['"', '\'', '`'],
        capitalised_types: false,
        triple_quotes: false,
        keys: false,
    },
    Spec {
        names: &[
            "c", "h", "cpp", "c++", "cc", "cxx", "hpp", "java", "kotlin", "kt", "csharp", "cs",
        ],
        keywords: &[
            "auto",
            "break",
            "case",
            "catch",
            "class",
            "const",
            "continue",
            "default",
            "delete",
            "do",
            "else",
            "enum",
            "extends",
            "extern",
            "final",
            "finally",
            "for",
            "goto",
            "if",
            "implements",
            "import",
            "include",
            "inline",
            "interface",
            "namespace",
            "new",
            "package",
            "private",
            "protected",
            "public",
            "return",
            "sizeof",
            "static",
            "struct",
            "switch",
            "template",
            "this",
            "throw",
            "throws",
            "try",
            "typedef",
            "typename",
            "union",
            "using",
            "virtual",
            "void",
            "volatile",
            "while",
            "int",
            "char",
            "long",
            "short",
            "unsigned",
            "signed",
            "float",
            "double",
            "bool",
            "boolean",
            "byte",
            "define",
            "ifdef",
            "ifndef",
            "endif",
            "var",
            "val",
            "fun",
        ],
        literals: C_LIKE_LITERALS,
        line_comments: &["//"],
        block_comment: Some(("/*", "*/")),
        quotes: &['"', '\''],
        capitalised_types: true,
        triple_quotes: false,
        keys: false,
    },
    Spec {
        names: &[
            "sh",
            "bash",
            "shell",
            "zsh",
            "console",
            "shellsession",
            "fish",
            "ksh",
        ],
        keywords: &[
            "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
            "esac", "in", "function", "return", "local", "export", "readonly", "set", "unset",
            "echo", "cd", "exit", "source", "sudo",
        ],
        literals: &["true", "false"],
        line_comments: &["#"],
        block_comment: None,
        quotes: &['"', '\''],
        capitalised_types: false,
        triple_quotes: false,
        keys: false,
    },
    Spec {
        names: &["json", "jsonc", "json5", "jsonl"],
        keywords: &[],
        literals: &["true", "false", "null"],
        line_comments: &["//"],
        block_comment: Some(("/*", "*/")),
        quotes: &['"'],
        capitalised_types: false,
        triple_quotes: false,
        keys: true,
    },
    Spec {
        names: &["yaml", "yml"],
        keywords: &[],
        literals: &["true", "false", "null", "yes", "no", "on", "off", "~"],
        line_comments: &["#"],
        block_comment: None,
        quotes: &['"', '\''],
        capitalised_types: false,
        triple_quotes: false,
        keys: true,
    },
    Spec {
        names: &["toml", "ini", "cfg", "conf"],
        keywords: &[],
        literals: &["true", "false"],
        line_comments: &["#", ";"],
        block_comment: None,
        quotes: &['"', '\''],
        capitalised_types: false,
        triple_quotes: true,
        keys: true,
    },
    Spec {
        names: &[
            "sql",
            "postgres",
            "postgresql",
            "mysql",
            "sqlite",
            "psql",
            "plsql",
        ],
        keywords: &[
            "select",
            "from",
            "where",
            "and",
            "or",
            "not",
            "insert",
            "into",
            "values",
            "update",
            "set",
            "delete",
            "create",
            "table",
            "drop",
            "alter",
            "index",
            "join",
            "left",
            "right",
            "inner",
            "outer",
            "on",
            "group",
            "by",
            "order",
            "having",
            "limit",
            "offset",
            "as",
            "distinct",
            "union",
            "all",
            "primary",
            "key",
            "foreign",
            "references",
            "default",
            "begin",
            "commit",
            "rollback",
            "with",
            "case",
            "when",
            "then",
            "else",
            "end",
            "in",
            "is",
            "like",
            "exists",
            "between",
            "asc",
            "desc",
            "view",
            "returning",
        ],
        literals: &["null", "true", "false"],
        line_comments: &["--"],
        block_comment: Some(("/*", "*/")),
        quotes: &['\'', '"'],
        capitalised_types: false,
        triple_quotes: false,
        keys: false,
    },
];

/// What a code block is highlighted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Spec(usize),
    Diff,
    Markdown,
}

/// Highlights the lines of one code block in turn.
#[derive(Debug, Clone)]
pub struct Highlighter {
    kind: Kind,
    /// Inside a block comment, or a triple-quoted string (its quote), from an earlier line.
    in_comment: bool,
    in_triple: Option<&'static str>,
}

impl Highlighter {
    /// The highlighter for a fence's language (`rust`, `py`, `diff`, …); None for languages it does
    /// not know (their lines are shown plain).
    pub fn for_language(name: &str) -> Option<Highlighter> {
        let name = name.trim().to_ascii_lowercase();
        let name = name.trim_start_matches('{').trim_start_matches('.');
        let name = name.split([',', ' ', '{', '}']).next().unwrap_or("");
        let kind = match name {
            "diff" | "patch" | "udiff" => Kind::Diff,
            "markdown" | "md" => Kind::Markdown,
            _ => Kind::Spec(SPECS.iter().position(|s| s.names.contains(&name))?),
        };
        Some(Highlighter {
            kind,
            in_comment: false,
            in_triple: None,
        })
    }

    /// One line of the block with colours; its text is unchanged.
    pub fn line(&mut self, line: &str) -> String {
        let mut out = String::with_capacity(line.len() + 32);
        self.line_into(&mut out, line);
        out
    }

    /// The same, appended to `out`.
    pub fn line_into(&mut self, out: &mut String, line: &str) {
        match self.kind {
            Kind::Diff => {
                let code = if line.starts_with("+++") || line.starts_with("---") {
                    Some("1")
                } else if line.starts_with('+') {
                    Some(ADDED)
                } else if line.starts_with('-') {
                    Some(REMOVED)
                } else if line.starts_with("@@") {
                    Some(HUNK)
                } else {
                    None
                };
                push(out, code, line)
            }
            Kind::Markdown => {
                let code = line
                    .trim_start()
                    .starts_with('#')
                    .then_some(HEADING)
                    .or_else(|| line.trim_start().starts_with('>').then_some(COMMENT));
                push(out, code, line)
            }
            Kind::Spec(i) => self.lex(out, &SPECS[i], line),
        }
    }

    fn lex(&mut self, out: &mut String, spec: &Spec, line: &str) {
        let mut rest = line;
        // Carried over from the line before.
        if self.in_comment {
            let (_, close) = spec.block_comment.expect("only set for such languages");
            match rest.find(close) {
                Some(at) => {
                    let end = at + close.len();
                    push(out, Some(COMMENT), &rest[..end]);
                    rest = &rest[end..];
                    self.in_comment = false;
                }
                None => return push(out, Some(COMMENT), line),
            }
        }
        if let Some(quote) = self.in_triple {
            match rest.find(quote) {
                Some(at) => {
                    let end = at + quote.len();
                    push(out, Some(STRING), &rest[..end]);
                    rest = &rest[end..];
                    self.in_triple = None;
                }
                None => return push(out, Some(STRING), line),
            }
        }
        let at_line_start = |rest: &str| line[..line.len() - rest.len()].trim().is_empty();
        while let Some(c) = rest.chars().next() {
            // Comments.
            if let Some(marker) = spec
                .line_comments
                .iter()
                .find(|m| rest.starts_with(**m))
                // `#` in a shell word (`a#b`, `$#`) is not a comment.
                .filter(|m| {
                    **m != "#"
                        || line[..line.len() - rest.len()]
                            .chars()
                            .last()
                            .is_none_or(|p| p.is_whitespace() || p == ';')
                })
            {
                let _ = marker;
                return push(out, Some(COMMENT), rest);
            }
            if let Some((open, close)) = spec.block_comment
                && rest.starts_with(open)
            {
                match rest[open.len()..].find(close) {
                    Some(at) => {
                        let end = open.len() + at + close.len();
                        push(out, Some(COMMENT), &rest[..end]);
                        rest = &rest[end..];
                        continue;
                    }
                    None => {
                        self.in_comment = true;
                        return push(out, Some(COMMENT), rest);
                    }
                }
            }
            // Strings.
            if spec.triple_quotes
                && let Some(quote) = ["\"\"\"", "'''"].into_iter().find(|q| rest.starts_with(q))
            {
                match rest[3..].find(quote) {
                    Some(at) => {
                        let end = 3 + at + 3;
                        push(out, Some(STRING), &rest[..end]);
                        rest = &rest[end..];
                        continue;
                    }
                    None => {
                        self.in_triple = Some(quote);
                        return push(out, Some(STRING), rest);
                    }
                }
            }
            if spec.quotes.contains(&c) {
                let end = string_end(rest, c);
                let text = &rest[..end];
                // A quoted key: `"name":` in JSON.
                let is_key = spec.keys && rest[end..].trim_start().starts_with(':');
                push(out, Some(if is_key { TYPE } else { STRING }), text);
                rest = &rest[end..];
                continue;
            }
            // Numbers.
            if c.is_ascii_digit() {
                let end = rest
                    .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.' || ch == '_'))
                    .unwrap_or(rest.len());
                push(out, Some(NUMBER), &rest[..end]);
                rest = &rest[end..];
                continue;
            }
            // Words.
            if c.is_alphabetic() || c == '_' || (c == '$' && spec.names[0] == "sh") {
                let end = rest
                    .char_indices()
                    .skip(1)
                    .find(|(_, ch)| {
                        !(ch.is_alphanumeric() || *ch == '_' || *ch == '-' && spec.keys)
                    })
                    .map_or(rest.len(), |(i, _)| i);
                let word = &rest[..end];
                let after = rest[end..].trim_start();
                let code = if spec.keys
                    && at_line_start(rest)
                    && (after.starts_with(':') || after.starts_with('='))
                {
                    Some(TYPE)
                } else if spec.literals.contains(&word)
                    || (spec.names[0] == "sql"
                        && spec.literals.contains(&word.to_ascii_lowercase().as_str()))
                {
                    Some(NUMBER)
                } else if spec.keywords.contains(&word)
                    || (spec.names[0] == "sql"
                        && spec.keywords.contains(&word.to_ascii_lowercase().as_str()))
                {
                    Some(KEYWORD)
                } else if spec.capitalised_types
                    && word.starts_with(|ch: char| ch.is_uppercase())
                    && word.chars().any(|ch| ch.is_lowercase())
                {
                    Some(TYPE)
                } else {
                    None
                };
                push(out, code, word);
                rest = &rest[end..];
                continue;
            }
            // TOML section headers.
            if spec.keys && c == '[' && at_line_start(rest) && spec.names[0] == "toml" {
                return push(out, Some(KEYWORD), rest);
            }
            let len = c.len_utf8();
            out.push_str(&rest[..len]);
            rest = &rest[len..];
        }
    }
}

/// Where a string that starts `rest` with `quote` ends (after its closing quote, or at the end of
/// the line); backslashes escape.
fn string_end(rest: &str, quote: char) -> usize {
    let mut escaped = false;
    for (i, c) in rest.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return i + c.len_utf8();
        }
    }
    rest.len()
}

fn push(out: &mut String, code: Option<&str>, text: &str) {
    match code {
        Some(code) if !text.is_empty() => {
            out.push_str("\x1b[");
            out.push_str(code);
            out.push('m');
            out.push_str(text);
            out.push_str("\x1b[0m");
        }
        _ => out.push_str(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text with colours shown as `<code>…</>`, for reading.
    fn shown(s: &str) -> String {
        s.replace("\x1b[0m", "</>").replace("\x1b[", "<")
    }

    #[test]
    fn languages_by_fence_name() {
        for name in [
            "rust",
            "py",
            "JavaScript",
            "ts",
            "go",
            "c",
            "cpp",
            "java",
            "bash",
            "sh",
            "json",
            "yaml",
            "toml",
            "sql",
            "diff",
            "markdown",
            "{.python}",
        ] {
            assert!(Highlighter::for_language(name).is_some(), "{name}");
        }
        assert!(Highlighter::for_language("brainfuck").is_none());
        assert!(Highlighter::for_language("").is_none());
    }

    #[test]
    fn tokens_are_coloured_and_the_text_is_unchanged() {
        let mut h = Highlighter::for_language("rust").unwrap();
        let line = r#"    let x: Vec<u8> = vec![1, 2]; // "not a string""#;
        let out = h.line(line);
        assert_eq!(
            shown(&out),
            r#"    <35mlet</> x: <36mVec</><u8> = vec![<33m1</>, <33m2</>]; <90m// "not a string"</>"#
        );
        let plain = out
            .replace("\x1b[0m", "")
            .split("\x1b[")
            .map(|p| p.split_once('m').map_or(p, |(_, t)| t))
            .collect::<String>();
        assert_eq!(plain, line);
        let mut py = Highlighter::for_language("python").unwrap();
        assert_eq!(
            shown(&py.line("def f(s='it''s'):  # done")),
            "<35mdef</> f(s=<32m'it'</><32m's'</>):  <90m# done</>"
        );
    }

    #[test]
    fn block_comments_and_triple_quotes_carry_over_lines() {
        let mut h = Highlighter::for_language("c").unwrap();
        assert_eq!(
            shown(&h.line("int a; /* one")),
            "<35mint</> a; <90m/* one</>"
        );
        assert_eq!(
            shown(&h.line("two */ return 0;")),
            "<90mtwo */</> <35mreturn</> <33m0</>;"
        );
        let mut py = Highlighter::for_language("py").unwrap();
        py.line("x = \"\"\"start");
        assert_eq!(shown(&py.line("middle")), "<32mmiddle</>");
        assert_eq!(
            shown(&py.line("end\"\"\" + 1")),
            "<32mend\"\"\"</> + <33m1</>"
        );
    }

    #[test]
    fn data_formats_colour_their_keys() {
        let mut json = Highlighter::for_language("json").unwrap();
        assert_eq!(
            shown(&json.line(r#"  "name": "new", "n": 3, "ok": true"#)),
            r#"  <36m"name"</>: <32m"new"</>, <36m"n"</>: <33m3</>, <36m"ok"</>: <33mtrue</>"#
        );
        let mut yaml = Highlighter::for_language("yaml").unwrap();
        assert_eq!(
            shown(&yaml.line("key-name: value # note")),
            "<36mkey-name</>: value <90m# note</>"
        );
        let mut toml = Highlighter::for_language("toml").unwrap();
        assert_eq!(shown(&toml.line("[package]")), "<35m[package]</>");
        let mut diff = Highlighter::for_language("diff").unwrap();
        assert_eq!(shown(&diff.line("+added")), "<32m+added</>");
        assert_eq!(shown(&diff.line("@@ -1 +1 @@")), "<36m@@ -1 +1 @@</>");
        let mut sql = Highlighter::for_language("sql").unwrap();
        assert_eq!(
            shown(&sql.line("SELECT * FROM t -- all")),
            "<35mSELECT</> * <35mFROM</> t <90m-- all</>"
        );
        let mut sh = Highlighter::for_language("bash").unwrap();
        assert_eq!(
            shown(&sh.line("echo \"$#\" a#b # c")),
            "<35mecho</> <32m\"$#\"</> a#b <90m# c</>"
        );
    }
}
