//! Where a key is in a JSON text: the line and column of the value at a key path
//! (`permissions.rules[3].tool`), so that an error found after parsing (a value out of range, a rule
//! naming no tool) points at the place to change, as a parse error does.

use std::str;
/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// `a.b[3].c` as steps; None for a path that is not one.
pub fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            steps.push(Step::Key(key.to_string()));
        } else if rest.is_empty() {
            return None;
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            steps.push(Step::Index(inner[..end].parse().ok()?));
            rest = &inner[end + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(steps)
}

/// The line and column (both from 1, the column in characters) where the value at `path` starts
/// in `text`; None when the text holds no such value or is not JSON as far as the scan goes.
pub fn locate(text: &str, path: &[Step]) -> Option<(usize, usize)> {
    let mut scan = Scanner {
        bytes: text.as_bytes(),
        at: 0,
    };
    scan.find(path)?;
    let before = &text[..scan.at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Some((line, column))
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn blank(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.blank();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Leaves `at` on the value at `path`, from the value that starts here.
    fn find(&mut self, path: &[Step]) -> Option<()> {
        let Some((step, rest)) = path.split_first() else {
            self.blank();
            return Some(());
        };
        match (step, self.peek()?) {
            (Step::Key(want), b'{') => {
                self.at += 1;
                if self.peek()? == b'}' {
                    return None;
                }
                loop {
                    let key = self.string()?;
                    self.eat(b':')?;
                    if key == *want {
                        return self.find(rest);
                    }
                    self.skip()?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        _ => return None,
                    }
                }
            }
            (Step::Index(want), b'[') => {
                self.at += 1;
                if self.peek()? == b']' {
                    return None;
                }
                for i in 0.. {
                    if i == *want {
                        return self.find(rest);
                    }
                    self.skip()?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        _ => return None,
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// A string's text, escapes read as JSON reads them.
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let start = self.at;
        let mut escaped = false;
        while let Some(&b) = self.bytes.get(self.at) {
            self.at += 1;
            match (escaped, b) {
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    let raw = str::from_utf8(&self.bytes[start - 1..self.at]).ok()?;
                    return serde_json::from_str(raw).ok();
                }
                _ => escaped = false,
            }
        }
        None
    }

    /// Passes over one value.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.at += 1;
                if self.peek()? == close {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    if open == b'{' {
                        self.string()?;
                        self.eat(b':')?;
                    }
                    self.skip()?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        b if b == close => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            _ => {
                // A number, true, false or null: up to the next delimiter.
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
                {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, path: &str) -> Option<(usize, usize)> {
        locate(text, &parse_path(path).unwrap())
    }

    #[test]
    fn finds_keys_and_indexes_past_nested_values_and_escapes() {
        let text = r#"{
  "a\"b": {"x": [1, {"y": "}"}]},
  "permissions": {
    "mode": "default",
    "rules": [
      {"tool": "Bash"},
      {"tool": "nope", "action": "deny"}
    ]
  },
  "max_rounds": 0
}"#;
        assert_eq!(at(text, "permissions.rules[1].tool"), Some((7, 16)));
        assert_eq!(at(text, "permissions.rules[0]"), Some((6, 7)));
        assert_eq!(at(text, "max_rounds"), Some((10, 17)));
        assert_eq!(at(text, "a\"b.x[1].y"), Some((2, 27)));
        assert_eq!(locate(text, &[Step::Key("a\"b".into())]), Some((2, 11)));
        assert_eq!(at(text, "permissions.rules[2]"), None);
        assert_eq!(at(text, "missing"), None);
        assert_eq!(at("{\"é\": 1, \"k\": 2}", "k"), Some((1, 15)));
    }

    #[test]
    fn paths_parse_and_bad_ones_are_refused() {
        assert_eq!(
            parse_path("a.b[3][0].c"),
            Some(vec![
                Step::Key("a".into()),
                Step::Key("b".into()),
                Step::Index(3),
                Step::Index(0),
                Step::Key("c".into())
            ])
        );
        assert_eq!(parse_path("[2]"), Some(vec![Step::Index(2)]));
        assert_eq!(parse_path("a..b"), None);
        assert_eq!(parse_path("a[x]"), None);
        assert_eq!(parse_path("a[1]b"), None);
    }
}
