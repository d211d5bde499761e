//! A shell command line read the way bash reads it, for judging it before it runs: quotes and
//! escapes removed, `;` `&&` `||` `|` `&` and newlines splitting it into simple commands,
//! redirections set apart from the words, and the text of `$(…)`, backticks, `<(…)`, `>(…)` and
//! `${…}` read as command lines of their own. Words that the shell would expand at run time
//! (variables, substitutions, globs, braces) are marked, since what they become cannot be known.
//!
//! [`views`] then looks through what wraps a command (`sudo`, `env X=1`, `timeout 5`, `xargs`,
//! `bash -c '…'`, `find -exec`, …) and past the options between a program and its subcommand
//! (`git -C x push`), so that rules and hard limits see the command that really runs.
//!
//! It is a reader for judging, not a shell: it errs towards finding more commands, never fewer.

use std::mem;
use std::ops::Range;
/// One word of a command, quotes removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    pub text: String,
    /// Holds a variable, a substitution or arithmetic: its value is known only at run time.
    pub dynamic: bool,
    /// Holds an unquoted glob (`*`, `?`, `[`) or brace expansion (`{a,b}`).
    pub glob: bool,
}

/// A redirection: `2>err.txt`, `>>log`, `<in`, `&>/dev/null`, `>&2`, `<<EOF`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The descriptor written before the operator (`2` in `2>`), if any.
    pub fd: Option<String>,
    pub op: &'static str,
    pub target: Word,
    /// A here-document's text.
    pub body: Option<String>,
}

impl Redirect {
    /// Whether it writes to a file (not a descriptor copy, not `/dev/null` and its kin).
    pub fn writes_to_path(&self) -> bool {
        let writes = matches!(self.op, ">" | ">>" | ">|" | "&>" | "&>>" | "<>" | ">&");
        if !writes {
            return false;
        }
        let target = self.target.text.as_str();
        if self.op == ">&"
            && !self.target.dynamic
            && (target == "-" || target.chars().all(|c| c.is_ascii_digit()))
        {
            return false; // `>&2`, `>&-`: descriptors
        }
        self.target.dynamic
            || !matches!(
                target,
                "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
            )
    }
}

/// One simple command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stage {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

impl Stage {
    pub fn texts(&self) -> Vec<String> {
        self.words.iter().map(|w| w.text.clone()).collect()
    }

    /// The words with the shell's reserved words in front removed (`if`, `then`, `!`, `{`, …).
    pub fn command_words(&self) -> &[Word] {
        let skip = self
            .words
            .iter()
            .take_while(|w| {
                !w.dynamic
                    && matches!(
                        w.text.as_str(),
                        "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{"
                    )
            })
            .count();
        &self.words[skip..]
    }

    /// The text of [`Stage::command_words`].
    pub fn command_texts(&self) -> Vec<String> {
        self.command_words()
            .iter()
            .map(|w| w.text.clone())
            .collect()
    }

    /// A stage that runs nothing by itself: `fi`, `done`, `}`, `for x in …`, `case … in`, `[[ … ]]`.
    pub fn is_control(&self) -> bool {
        let words = self.command_words();
        match words.first() {
            None => self.redirects.is_empty(),
            Some(w) if w.dynamic => false,
            Some(w) => {
                matches!(
                    w.text.as_str(),
                    "fi" | "done" | "esac" | "}" | ";;" | "for" | "case" | "select" | "in"
                ) || (w.text == "[[" && words.last().is_some_and(|l| l.text == "]]"))
            }
        }
    }
}

/// A command line: its pipelines of stages, and the command lines found inside it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// Every simple command, in order.
    pub stages: Vec<Stage>,
    /// Pipelines as ranges of `stages`; `a | b && c` is two: `a | b`, then `c`.
    pub pipelines: Vec<Range<usize>>,
    /// What `$(…)`, backticks, `<(…)`, `>(…)` and `${…}` hold, each read as a command line.
    pub inner: Vec<Script>,
}

impl Script {
    pub fn pipeline(&self, i: usize) -> &[Stage] {
        &self.stages[self.pipelines[i].clone()]
    }

    /// This script's stages and those of every script inside it, depth first.
    pub fn all_stages(&self) -> Vec<&Stage> {
        let mut out: Vec<&Stage> = self.stages.iter().collect();
        for inner in &self.inner {
            out.extend(inner.all_stages());
        }
        out
    }
}

/// Deepest nesting of substitutions read; deeper text is kept as words, marked dynamic.
const MAX_DEPTH: usize = 16;

/// Reads a command line.
pub fn parse(text: &str) -> Script {
    parse_depth(text, 0)
}

fn parse_depth(text: &str, depth: usize) -> Script {
    let mut p = Parser {
        chars: text.chars().collect(),
        i: 0,
        depth,
        script: Script::default(),
        stage: Stage::default(),
        word: Word::default(),
        in_word: false,
        pipeline_start: 0,
        heredocs: Vec::new(),
    };
    p.run();
    p.script
}

struct Parser {
    chars: Vec<char>,
    i: usize,
    depth: usize,
    script: Script,
    stage: Stage,
    word: Word,
    in_word: bool,
    pipeline_start: usize,
    /// Here-documents whose text starts after the next newline: (stage, redirect, delimiter, strip tabs, expands).
    heredocs: Vec<(usize, usize, String, bool, bool)>,
}

impl Parser {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).copied()
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.stage.words.push(mem::take(&mut self.word));
            self.in_word = false;
        }
    }

    fn end_stage(&mut self) {
        self.end_word();
        if !self.stage.words.is_empty() || !self.stage.redirects.is_empty() {
            self.script.stages.push(mem::take(&mut self.stage));
        }
    }

    fn end_pipeline(&mut self) {
        self.end_stage();
        let end = self.script.stages.len();
        if end > self.pipeline_start {
            self.script.pipelines.push(self.pipeline_start..end);
        }
        self.pipeline_start = end;
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '\n' => {
                    self.i += 1;
                    self.end_pipeline();
                    self.read_heredocs();
                }
                c if c.is_whitespace() => {
                    self.i += 1;
                    self.end_word();
                }
                '#' if !self.in_word => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                ';' => {
                    self.i += 1;
                    self.end_pipeline();
                }
                '&' if self.peek(1) == Some('>') => {
                    self.end_word();
                    self.i += 1;
                    self.redirect(None);
                }
                '&' => {
                    self.i += if self.peek(1) == Some('&') { 2 } else { 1 };
                    self.end_pipeline();
                }
                '|' if self.peek(1) == Some('|') => {
                    self.i += 2;
                    self.end_pipeline();
                }
                '|' => {
                    self.i += if self.peek(1) == Some('&') { 2 } else { 1 };
                    self.end_stage();
                }
                '(' | ')' => {
                    self.i += 1;
                    self.end_pipeline();
                }
                '<' | '>' if self.peek(1) == Some('(') => {
                    // Process substitution: a word whose command runs at once.
                    self.i += 1;
                    let inner = self.take_parens();
                    self.add_inner(&inner);
                    self.in_word = true;
                    self.word.dynamic = true;
                    self.word.text.push(c);
                    self.word.text.push_str(&format!("({inner})"));
                }
                '<' | '>' => {
                    // A word made only of digits (or `{name}`) right before is the descriptor.
                    let fd = if self.in_word
                        && !self.word.dynamic
                        && (self.word.text.chars().all(|c| c.is_ascii_digit())
                            || (self.word.text.starts_with('{') && self.word.text.ends_with('}')))
                    {
                        self.in_word = false;
                        Some(mem::take(&mut self.word).text)
                    } else {
                        self.end_word();
                        None
                    };
                    self.redirect(fd);
                }
                _ => self.word_char(),
            }
        }
        self.end_pipeline();
    }

    /// Reads a redirection operator at `self.i` and its target word.
    fn redirect(&mut self, fd: Option<String>) {
        let rest: String = self.chars[self.i..].iter().take(3).collect();
        let op: &'static str = if fd.is_none() && self.i > 0 && self.chars[self.i - 1] == '&' {
            // `&>` / `&>>`: the `&` was consumed by the caller.
            if rest.starts_with(">>") { "&>>" } else { "&>" }
        } else if rest.starts_with("<<<") {
            "<<<"
        } else if rest.starts_with("<<-") {
            "<<-"
        } else {
            ["<<", ">>", ">|", ">&", "<&", "<>", ">", "<"]
                .into_iter()
                .find(|op| rest.starts_with(op))
                .unwrap_or(">")
        };
        let consumed = match op {
            "&>" => 1,
            "&>>" => 2,
            op => op.len(),
        };
        self.i += consumed;
        while self.peek(0).is_some_and(|c| c == ' ' || c == '\t') {
            self.i += 1;
        }
        // The target is one word, read with the same rules.
        let saved_stage = mem::take(&mut self.stage);
        let saved_word = mem::take(&mut self.word);
        let saved_in = mem::replace(&mut self.in_word, false);
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '<' | '>') {
                break;
            }
            self.word_char();
        }
        let target = mem::take(&mut self.word);
        self.stage = saved_stage;
        self.word = saved_word;
        self.in_word = saved_in;
        let heredoc = matches!(op, "<<" | "<<-");
        if heredoc {
            let quoted = self.chars[..self.i]
                .iter()
                .rev()
                .take(target.text.len() + 2)
                .any(|c| *c == '\'' || *c == '"' || *c == '\\');
            // The stage being read is pushed next: its index is the count so far.
            self.heredocs.push((
                self.script.stages.len(),
                self.stage.redirects.len(),
                target.text.clone(),
                op == "<<-",
                !quoted,
            ));
        }
        self.stage.redirects.push(Redirect {
            fd,
            op,
            target,
            body: None,
        });
    }

    /// After a newline: the text of pending here-documents, up to each delimiter line.
    fn read_heredocs(&mut self) {
        let pending = mem::take(&mut self.heredocs);
        for (stage_at, redirect, delimiter, strip_tabs, expands) in pending {
            let mut body = String::new();
            loop {
                let start = self.i;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.i += 1;
                }
                let line: String = self.chars[start..self.i].iter().collect();
                let at_end = self.peek(0).is_none();
                self.i += 1;
                let check = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if check == delimiter || at_end {
                    if check != delimiter {
                        body.push_str(&line);
                    }
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if expands {
                let inner = parse_depth(&body, self.depth + 1);
                self.script.inner.extend(inner.inner);
            }
            // The stage that asked for it (in `cat <<EOF | sh`, `cat`, not the last one closed).
            if let Some(stage) = self.script.stages.get_mut(stage_at)
                && let Some(r) = stage.redirects.get_mut(redirect)
            {
                r.body = Some(body);
            }
        }
        self.i = self.i.min(self.chars.len());
    }

    fn add_inner(&mut self, text: &str) {
        if self.depth < MAX_DEPTH {
            self.script.inner.push(parse_depth(text, self.depth + 1));
        }
    }

    /// At an opening `(` (at `self.i`): the text up to its matching `)`, which is consumed.
    fn take_parens(&mut self) -> String {
        self.take_matching('(', ')', true)
    }

    /// At an opening `{` of `${`: the text up to its matching `}`, which is consumed.
    fn take_braces(&mut self) -> String {
        self.take_matching('{', '}', false)
    }

    /// At `open`: the text up to its matching `close`, which is consumed; with `quotes`, quoted
    /// text may hold either without counting. Unclosed, the rest of the line.
    fn take_matching(&mut self, open: char, close: char, quotes: bool) -> String {
        self.i += 1;
        let start = self.i;
        let mut depth = 1;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.i += 1,
                '\'' if quotes => {
                    self.i += 1;
                    while self.peek(0).is_some_and(|c| c != '\'') {
                        self.i += 1;
                    }
                }
                '"' if quotes => {
                    self.i += 1;
                    while let Some(c) = self.peek(0) {
                        if c == '\\' {
                            self.i += 1;
                        } else if c == '"' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        let text: String = self.chars[start..self.i].iter().collect();
                        self.i += 1;
                        return text;
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
        self.i = self.chars.len();
        self.chars[start.min(self.chars.len())..].iter().collect()
    }

    /// At a backtick: the text up to the next unescaped one, which is consumed.
    fn take_backticks(&mut self) -> String {
        self.i += 1;
        let mut text = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '`' => return text,
                '\\' => {
                    if let Some(n) = self.peek(0) {
                        if !matches!(n, '`' | '\\' | '$') {
                            text.push('\\');
                        }
                        text.push(n);
                        self.i += 1;
                    }
                }
                c => text.push(c),
            }
        }
        text
    }

    /// A `$` at `self.i`: a substitution, an expansion or a plain dollar.
    fn dollar(&mut self, quoted: bool) {
        self.in_word = true;
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                // Arithmetic; it may hold substitutions.
                self.i += 1;
                let inner = self.take_parens();
                let inner_text = inner
                    .strip_prefix('(')
                    .and_then(|t| t.strip_suffix(')'))
                    .unwrap_or(&inner)
                    .to_string();
                let found = parse_depth(&inner_text, self.depth + 1).inner;
                self.script.inner.extend(found);
                self.word.text.push_str(&format!("$({inner})"));
                self.word.dynamic = true;
            }
            Some('(') => {
                self.i += 1;
                let inner = self.take_parens();
                self.add_inner(&inner);
                self.word.text.push_str(&format!("$({inner})"));
                self.word.dynamic = true;
            }
            Some('{') => {
                self.i += 1;
                let inner = self.take_braces();
                // `${x:-$(cmd)}`: what the braces hold may run commands too.
                let found = parse_depth(&inner, self.depth + 1).inner;
                self.script.inner.extend(found);
                self.word.text.push_str(&format!("${{{inner}}}"));
                self.word.dynamic = true;
            }
            Some('\'') if !quoted => {
                self.i += 2;
                self.ansi_c();
            }
            Some('"') if !quoted => {
                self.i += 1; // `$"…"`: a translated string, read as "…"
            }
            Some(c) if c.is_alphanumeric() || c == '_' => {
                self.i += 1;
                self.word.text.push('$');
                while let Some(c) = self.peek(0).filter(|c| c.is_alphanumeric() || *c == '_') {
                    self.word.text.push(c);
                    self.i += 1;
                }
                self.word.dynamic = true;
            }
            Some(c) if "@*#?$!-".contains(c) => {
                self.word.text.push('$');
                self.word.text.push(c);
                self.i += 2;
                self.word.dynamic = true;
            }
            _ => {
                self.word.text.push('$');
                self.i += 1;
            }
        }
    }

    /// `$'…'` (after the quote): backslash escapes decoded.
    fn ansi_c(&mut self) {
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '\'' => return,
                '\\' => {
                    let Some(e) = self.peek(0) else { return };
                    self.i += 1;
                    let decoded = match e {
                        'n' => Some('\n'),
                        't' => Some('\t'),
                        'r' => Some('\r'),
                        'e' | 'E' => Some('\u{1b}'),
                        'a' => Some('\u{7}'),
                        'b' => Some('\u{8}'),
                        'v' => Some('\u{b}'),
                        'f' => Some('\u{c}'),
                        'x' | 'u' | 'U' => {
                            let max = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let mut digits = String::new();
                            while digits.len() < max
                                && let Some(d) = self.peek(0).filter(char::is_ascii_hexdigit)
                            {
                                digits.push(d);
                                self.i += 1;
                            }
                            u32::from_str_radix(&digits, 16)
                                .ok()
                                .and_then(char::from_u32)
                        }
                        '0'..='7' => {
                            let mut digits = e.to_string();
                            while digits.len() < 3
                                && let Some(d) = self.peek(0).filter(|d| ('0'..='7').contains(d))
                            {
                                digits.push(d);
                                self.i += 1;
                            }
                            u32::from_str_radix(&digits, 8)
                                .ok()
                                .and_then(char::from_u32)
                        }
                        other => Some(other),
                    };
                    if let Some(d) = decoded {
                        self.word.text.push(d);
                    }
                }
                c => self.word.text.push(c),
            }
        }
    }

    /// One piece of a word at `self.i`.
    fn word_char(&mut self) {
        let c = self.peek(0).expect("called with a character");
        self.in_word = true;
        match c {
            '\'' => {
                self.i += 1;
                while let Some(c) = self.peek(0) {
                    self.i += 1;
                    if c == '\'' {
                        break;
                    }
                    self.word.text.push(c);
                }
            }
            '"' => {
                self.i += 1;
                while let Some(c) = self.peek(0) {
                    match c {
                        '"' => {
                            self.i += 1;
                            break;
                        }
                        '\\' => {
                            self.i += 1;
                            match self.peek(0) {
                                Some('\n') => self.i += 1,
                                Some(n @ ('$' | '`' | '"' | '\\')) => {
                                    self.word.text.push(n);
                                    self.i += 1;
                                }
                                _ => self.word.text.push('\\'),
                            }
                        }
                        '$' => self.dollar(true),
                        '`' => {
                            let inner = self.take_backticks();
                            self.add_inner(&inner);
                            self.word.text.push_str(&format!("`{inner}`"));
                            self.word.dynamic = true;
                        }
                        c => {
                            self.word.text.push(c);
                            self.i += 1;
                        }
                    }
                }
            }
            '\\' => {
                self.i += 1;
                match self.peek(0) {
                    Some('\n') => {
                        self.i += 1;
                        if self.word.text.is_empty() {
                            self.in_word = false;
                        }
                    }
                    Some(n) => {
                        self.word.text.push(n);
                        self.i += 1;
                    }
                    None => {}
                }
            }
            '$' => self.dollar(false),
            '`' => {
                let inner = self.take_backticks();
                self.add_inner(&inner);
                self.word.text.push_str(&format!("`{inner}`"));
                self.word.dynamic = true;
            }
            '*' | '?' | '[' => {
                self.word.glob = true;
                self.word.text.push(c);
                self.i += 1;
            }
            '{' => {
                // `{a,b}` and `{1..3}` expand; a lone `{` is a word of its own.
                let rest: String = self.chars[self.i..]
                    .iter()
                    .take_while(|c| **c != '}' && !c.is_whitespace())
                    .collect();
                if rest.contains(',') || rest.contains("..") {
                    self.word.glob = true;
                }
                self.word.text.push(c);
                self.i += 1;
            }
            c => {
                self.word.text.push(c);
                self.i += 1;
            }
        }
    }
}

/// The program's name: `/usr/bin/git` and `\git` are `git`.
pub fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Whether a word assigns a variable (`X=1`, `PATH+=:x`).
pub fn is_assignment(word: &str) -> bool {
    match word.find('=') {
        Some(0) | None => false,
        Some(at) => {
            let name = word[..at].strip_suffix('+').unwrap_or(&word[..at]);
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        }
    }
}

/// The shells: their `-c` string is a command line.
pub fn is_shell(program: &str) -> bool {
    matches!(
        program,
        "sh" | "bash"
            | "zsh"
            | "dash"
            | "ksh"
            | "mksh"
            | "fish"
            | "csh"
            | "tcsh"
            | "ash"
            | "yash"
            | "busybox-sh"
    )
}

/// Wrappers that run the command after their options: (name, options that take a value).
const WRAPPERS: &[(&str, &[&str])] = &[
    (
        "sudo",
        &[
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--other-user",
            "--close-from",
            "--command-timeout",
        ],
    ),
    ("doas", &["-u", "-C"]),
    (
        "env",
        &[
            "-u",
            "-C",
            "--unset",
            "--chdir",
            "-P",
            "--split-string",
            "-S",
        ],
    ),
    ("nohup", &[]),
    ("setsid", &[]),
    ("command", &[]),
    ("builtin", &[]),
    ("exec", &["-a"]),
    ("time", &["-f", "-o", "--format", "--output"]),
    ("nice", &["-n", "--adjustment"]),
    (
        "ionice",
        &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
    ),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    (
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
    ),
    ("chrt", &[]),
    ("taskset", &[]),
    (
        "xargs",
        // (`-i`, `-l` and `-e` take their value attached or none: `xargs -i rm {}`.)
        &[
            "-I",
            "-n",
            "-P",
            "-L",
            "-d",
            "-a",
            "-E",
            "-s",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
            "--replace",
            "--max-lines",
            "--eof",
            "--max-chars",
            "--process-slot-var",
        ],
    ),
    ("unbuffer", &[]),
    ("nocache", &[]),
    ("caffeinate", &["-t", "-w"]),
    ("proxychains", &["-f"]),
    ("proxychains4", &["-f"]),
    ("torsocks", &[]),
    ("strace", &["-e", "-o", "-p", "-s", "-u", "-E"]),
    ("ltrace", &["-e", "-o", "-p", "-s", "-u"]),
    ("chroot", &["--userspec", "--groups"]),
    ("runuser", &["-u", "-g", "-G", "--user", "--group"]),
    ("flock", &["-w", "-E", "--timeout", "--conflict-exit-code"]),
    (
        "systemd-run",
        &[
            "-p",
            "-u",
            "--unit",
            "--property",
            "--uid",
            "--gid",
            "-E",
            "--setenv",
        ],
    ),
    ("watch", &["-n", "-d", "--interval", "--differences"]),
    ("busybox", &[]),
    ("fakeroot", &[]),
    ("firejail", &[]),
    ("unshare", &[]),
    ("nsenter", &["-t", "--target"]),
    ("catchsegv", &[]),
    ("valgrind", &[]),
    ("eatmydata", &[]),
    ("pkexec", &["--user"]),
];

/// What a stage runs, seen through its wrappers: each view is a list of words whose first is a
/// program name. The first view is the stage as written (its program reduced to a name); then
/// the command after assignments and each wrapper; then, for the innermost command, the same
/// with the options between the program and its subcommand left out (`git -C x push` is also
/// seen as `git push`); and the commands of `bash -c '…'`, `eval …`, `su -c '…'`,
/// `find … -exec … ;` and the like.
pub fn views(stage_words: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    views_into(stage_words, &mut out, 0, true);
    out
}

/// [`views`] without the readings that leave options out: the commands as they run, each with
/// all its words, for judging what they do.
pub fn command_views(stage_words: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    views_into(stage_words, &mut out, 0, false);
    out
}

fn named(words: &[String]) -> Vec<String> {
    let mut v = words.to_vec();
    if let Some(first) = v.first_mut() {
        *first = program_name(first).to_string();
    }
    v
}

fn views_into(words: &[String], out: &mut Vec<Vec<String>>, depth: usize, skip_options: bool) {
    if words.is_empty() || depth > 8 {
        return;
    }
    out.push(named(words));
    let mut i = 0;
    // Assignments in front.
    while words.get(i).is_some_and(|w| is_assignment(w)) {
        i += 1;
    }
    if i >= words.len() {
        return;
    }
    if i > 0 {
        return views_into(&words[i..], out, depth + 1, skip_options);
    }
    // Brace expansion in the command word: `{rm,-f,x}` runs `rm -f x`.
    if let Some(inner) = words[0]
        .strip_prefix('{')
        .and_then(|w| w.strip_suffix('}'))
        .filter(|w| w.contains(','))
    {
        let mut expanded: Vec<String> = inner.split(',').map(str::to_string).collect();
        expanded.extend(words[1..].iter().cloned());
        return views_into(&expanded, out, depth + 1, skip_options);
    }
    let program = program_name(&words[0]);
    if let Some((name, takes_value)) = WRAPPERS.iter().find(|(n, _)| *n == program) {
        let mut j = 1;
        let mut strings = Vec::new();
        while let Some(w) = words.get(j) {
            if w == "--" {
                j += 1;
                break;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            // `env -S 'cmd args'`, `flock -c cmd`, `su -c cmd`: a command line as a value.
            let string_opt = matches!(
                (*name, w.as_str()),
                ("env", "-S" | "--split-string") | ("flock", "-c" | "--command")
            );
            let (opt, inline) = match w.split_once('=') {
                Some((o, v)) if o.starts_with("--") => (o, Some(v)),
                _ => (w.as_str(), None),
            };
            if string_opt {
                if let Some(v) = inline
                    .map(str::to_string)
                    .or_else(|| words.get(j + 1).cloned())
                {
                    strings.push(v);
                }
                j += if inline.is_some() { 1 } else { 2 };
                continue;
            }
            j += 1;
            let short_with_value =
                opt.len() > 2 && !opt.starts_with("--") && takes_value.contains(&&opt[..2]);
            if inline.is_none() && takes_value.contains(&opt) && !short_with_value {
                j += 1;
            }
        }
        // Positional arguments before the command: `timeout 5 cmd`, `chrt 10 cmd`,
        // `taskset 0x3 cmd`, `flock FILE cmd`, `busybox` applets need none.
        let positional = match *name {
            "timeout" | "chrt" | "taskset" | "flock" | "chroot" => 1,
            "runuser" | "nsenter" => 0,
            _ => 0,
        };
        if *name == "env" {
            while words.get(j).is_some_and(|w| is_assignment(w)) {
                j += 1;
            }
        }
        for s in strings {
            script_views(&s, out, depth + 1, skip_options);
        }
        let j = (j + positional).min(words.len());
        if *name == "watch" && j < words.len() {
            // watch runs its arguments through `sh -c`.
            return script_views(&words[j..].join(" "), out, depth + 1, skip_options);
        }
        if j < words.len() {
            views_into(&words[j..], out, depth + 1, skip_options);
        }
        return;
    }
    let opens = |w: Option<&String>| w.is_some_and(|w| w == "{" || w == "(");
    match program {
        "eval" => script_views(&words[1..].join(" "), out, depth + 1, skip_options),
        // `function f { body; }`: the body's commands.
        "function" => {
            let mut k = 2;
            if words.get(k).is_some_and(|w| w == "()") {
                k += 1;
            }
            if opens(words.get(k)) {
                k += 1;
            }
            if k < words.len() {
                views_into(&words[k..], out, depth + 1, skip_options);
            }
        }
        // `coproc cmd`, `coproc { cmd; }`, `coproc NAME { cmd; }`.
        "coproc" => {
            let k = if opens(words.get(1)) {
                2
            } else if opens(words.get(2)) {
                3
            } else {
                1
            };
            if k < words.len() {
                views_into(&words[k..], out, depth + 1, skip_options);
            }
        }
        // `trap 'cmd' EXIT`: the command it sets.
        "trap" => {
            if let Some(command) = words[1..].iter().find(|w| !w.starts_with('-')) {
                script_views(command, out, depth + 1, skip_options);
            }
        }
        // `alias z='cmd'`: what the alias would run.
        "alias" => {
            for value in words[1..]
                .iter()
                .filter_map(|w| w.split_once('=').map(|(_, v)| v))
            {
                script_views(value, out, depth + 1, skip_options);
            }
        }
        // `git -c alias.x='!cmd' x`, `-c core.pager=cmd`: commands in git's options.
        "git" => {
            for value in git_embedded_commands(words) {
                script_views(&value, out, depth + 1, skip_options);
            }
        }
        "su" => {
            if let Some(at) = words.iter().position(|w| w == "-c" || w == "--command") {
                if let Some(s) = words.get(at + 1) {
                    script_views(s, out, depth + 1, skip_options);
                }
            } else if let Some(s) = words.iter().find_map(|w| w.strip_prefix("--command=")) {
                script_views(s, out, depth + 1, skip_options);
            }
        }
        p if is_shell(p) => {
            // `bash -c 'cmd'`, also `bash -xc 'cmd'` and `bash -e -c 'cmd'`.
            let mut k = 1;
            while let Some(w) = words.get(k) {
                if w.starts_with('-') && !w.starts_with("--") && w.contains('c') {
                    if let Some(s) = words.get(k + 1) {
                        script_views(s, out, depth + 1, skip_options);
                    }
                    break;
                }
                if !w.starts_with('-') && !w.starts_with('+') {
                    break;
                }
                k += 1;
            }
        }
        "find" => {
            // `-exec cmd … ;` and its kin: a command per file found.
            let mut k = 1;
            while k < words.len() {
                if matches!(words[k].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                    let start = k + 1;
                    let end = words[start..]
                        .iter()
                        .position(|w| w == ";" || w == "+")
                        .map_or(words.len(), |p| start + p);
                    views_into(&words[start..end], out, depth + 1, skip_options);
                    k = end;
                }
                k += 1;
            }
        }
        _ => {}
    }
    if !skip_options {
        return;
    }
    // The subcommand past the program's own options: `git -C x push`, `git --no-pager push`,
    // `docker --context c rm`. Each option may or may not take the word after it as a value, so
    // both readings are views.
    let mut starts = Vec::new();
    let mut k = 1;
    while let Some(w) = words.get(k) {
        if !w.starts_with('-') || w == "-" {
            break;
        }
        if w == "--" {
            starts.push(k + 1);
            break;
        }
        starts.push(k + 1);
        if !w.contains('=') && words.get(k + 1).is_some_and(|n| !n.starts_with('-')) {
            starts.push(k + 2);
        }
        k += 1;
    }
    for s in starts {
        if s < words.len() {
            let mut v = vec![program.to_string()];
            v.extend(words[s..].iter().cloned());
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
}

/// The commands a git command line carries in its options: `-c alias.NAME=!cmd`, `-c
/// core.pager=cmd` and the other settings that name a program, `--config-env=KEY=VAR`.
pub fn git_embedded_commands(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, w) in words.iter().enumerate() {
        let setting = if w == "-c" {
            words.get(k + 1).map(String::as_str)
        } else {
            w.strip_prefix("-c").filter(|s| s.contains('='))
        };
        let Some((key, value)) = setting.and_then(|s| s.split_once('=')) else {
            continue;
        };
        let key = key.to_ascii_lowercase();
        if let Some(command) = value
            .strip_prefix('!')
            .filter(|_| key.starts_with("alias."))
        {
            out.push(command.to_string());
        } else if git_setting_runs(&key) {
            out.push(value.to_string());
        }
    }
    out
}

/// Whether a git setting names a program git may run.
pub fn git_setting_runs(key: &str) -> bool {
    key.starts_with("core.")
        || key.starts_with("alias.")
        || key.starts_with("filter.")
        || key.starts_with("diff.")
        || key.starts_with("merge.")
        || key.starts_with("credential")
        || key.ends_with(".command")
        || key.ends_with(".cmd")
        || key.ends_with("program")
        || key.ends_with("sshcommand")
        || key.ends_with("editor")
        || key.ends_with("pager")
}

fn script_views(text: &str, out: &mut Vec<Vec<String>>, depth: usize, skip_options: bool) {
    if depth > 8 {
        return;
    }
    let script = parse_depth(text, depth);
    for stage in script.all_stages() {
        let words: Vec<String> = stage.command_texts();
        views_into(&words, out, depth + 1, skip_options);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(text: &str) -> Vec<String> {
        parse(text)
            .all_stages()
            .iter()
            .map(|s| s.texts().join(" "))
            .collect()
    }

    #[test]
    fn splits_like_the_shell() {
        assert_eq!(
            stages("git add . && git commit -m 'a; b' | cat; echo \"x && y\" & ls"),
            [
                "git add .",
                "git commit -m a; b",
                "cat",
                "echo x && y",
                "ls"
            ]
        );
        assert_eq!(stages("a || b\nc |& d"), ["a", "b", "c", "d"]);
        assert_eq!(
            stages("(cd x && make) ; { ls; }"),
            ["cd x", "make", "{ ls", "}"]
        );
        assert_eq!(stages("echo a # rm -rf /\nls"), ["echo a", "ls"]);
        assert_eq!(stages(r"r\m -rf \/"), ["rm -rf /"]);
        assert_eq!(stages("$'\\x72m' -rf $'\\057'"), ["rm -rf /"]);
        assert_eq!(stages("git st\\\natus"), ["git status"]);
    }

    #[test]
    fn substitutions_are_commands_of_their_own() {
        let s = parse("git status $(touch X) `id -u` <(curl x) >(tee y) \"$(rm a)\" ${V:-$(rm b)}");
        assert_eq!(s.stages.len(), 1);
        assert!(s.stages[0].words[2].dynamic);
        let inner: Vec<String> = s
            .inner
            .iter()
            .flat_map(|i| i.stages.iter().map(|st| st.texts().join(" ")))
            .collect();
        assert_eq!(
            inner,
            ["touch X", "id -u", "curl x", "tee y", "rm a", "rm b"]
        );
        // Nested, and with quotes and parentheses inside.
        let s = parse("echo $(echo $(rm -rf x) ')' \"(\")");
        assert_eq!(s.all_stages().len(), 3);
        // Arithmetic is no command, but what it holds may be.
        let s = parse("echo $((1 + $(rm z)))");
        assert_eq!(
            s.all_stages()
                .iter()
                .map(|s| s.texts().join(" "))
                .collect::<Vec<_>>(),
            ["echo $((1 + $(rm z)))", "rm z"]
        );
        // Single quotes keep it text.
        assert!(parse("echo '$(rm x)'").inner.is_empty());
    }

    #[test]
    fn redirections_are_set_apart() {
        let s = parse("git log > ../out 2>&1 >>x 1>y 2> z &>w <in 3>|q {fd}>f");
        let st = &s.stages[0];
        assert_eq!(st.texts(), ["git", "log"]);
        let shown: Vec<String> = st
            .redirects
            .iter()
            .map(|r| {
                format!(
                    "{}{}{}",
                    r.fd.clone().unwrap_or_default(),
                    r.op,
                    r.target.text
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ">../out", "2>&1", ">>x", "1>y", "2>z", "&>w", "<in", "3>|q", "{fd}>f"
            ]
        );
        let writes: Vec<bool> = st.redirects.iter().map(Redirect::writes_to_path).collect();
        assert_eq!(
            writes,
            [true, false, true, true, true, true, false, true, true]
        );
        let s = parse("ls >/dev/null 2>/dev/null &>/dev/null >&2");
        assert!(s.stages[0].redirects.iter().all(|r| !r.writes_to_path()));
        let s = parse("cat <<EOF > out\nhello $(rm q)\nEOF\nls");
        assert_eq!(stages("cat <<EOF\nrm -rf /\nEOF\nls"), ["cat", "ls"]);
        assert_eq!(
            s.stages[0].redirects[0].body.as_deref(),
            Some("hello $(rm q)\n")
        );
        assert_eq!(s.inner.len(), 1);
    }

    #[test]
    fn views_look_through_wrappers_and_options() {
        let v = |cmd: &str| -> Vec<String> {
            let s = parse(cmd);
            views(&s.stages[0].texts())
                .iter()
                .map(|v| v.join(" "))
                .collect()
        };
        for (cmd, want) in [
            ("git -C x push origin", "git push origin"),
            ("git --no-pager -c a=b push", "git push"),
            ("command git push", "git push"),
            ("env X=1 git push", "git push"),
            ("env -i PATH=/bin git push", "git push"),
            ("X=1 Y=2 git push", "git push"),
            ("/usr/bin/git push", "git push"),
            ("sudo -u root git push", "git push"),
            ("timeout 5 git push", "git push"),
            ("timeout -s KILL 5 git push", "git push"),
            ("nice -n 5 ionice -c3 git push", "git push"),
            ("setsid nohup git push", "git push"),
            ("xargs -n1 git push", "git push"),
            ("bash -c 'git push'", "git push"),
            ("sh -ec \"cd x && git push\"", "git push"),
            ("eval git push", "git push"),
            ("su -c 'git push' me", "git push"),
            ("find . -exec git push \\;", "git push"),
            ("env -S 'git push'", "git push"),
            ("watch -n1 git push", "git push"),
            ("stdbuf -o0 git push", "git push"),
            ("exec -a x git push", "git push"),
        ] {
            assert!(v(cmd).contains(&want.to_string()), "{cmd}: {:?}", v(cmd));
        }
    }
}
