//! User-facing text: counts with their plurals, and (as they move here) the sentences the REPL
//! shows, in English and Chinese.

use crate::config::Lang;

/// `1 message`, `2 messages`, `1 entry`, `3 entries`: a count with its noun in English. Chinese
/// text writes its measure words itself, so this is for English only; `_lang` keeps call sites
/// honest about which language they are in.
pub fn count(_lang: Lang, n: usize, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let plural = if let Some(stem) = noun.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'o', 'u'])
    {
        format!("{stem}ies")
    } else if noun.ends_with("ch")
        || noun.ends_with("sh")
        || noun.ends_with('s')
        || noun.ends_with('x')
    {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    };
    format!("{n} {plural}")
}

/// `a user message`, `an assistant message`: the English article for a word (a `u` sounding as
/// "you" takes `a`, as in "a user"; words starting with "un" take `an`).
pub fn article(word: &str) -> &'static str {
    let lower = word.to_ascii_lowercase();
    if lower.starts_with(['a', 'e', 'i', 'o']) || lower.starts_with("un") {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_articles() {
        for (n, noun, want) in [
            (0, "conversation", "0 conversations"),
            (1, "conversation", "1 conversation"),
            (2, "round", "2 rounds"),
            (1, "round", "1 round"),
            (3, "entry", "3 entries"),
            (2, "day", "2 days"),
            (2, "match", "2 matches"),
            (5, "message", "5 messages"),
        ] {
            assert_eq!(count(Lang::En, n, noun), want);
        }
        assert_eq!(article("assistant"), "an");
        assert_eq!(article("user"), "a");
        assert_eq!(article("tool"), "a");
        assert_eq!(article("system"), "a");
    }
}
