//! Cutting text at character boundaries. These are `str::floor_char_boundary` and
//! `str::ceil_char_boundary`, stable only since Rust 1.91 (the crate supports 1.89).

/// The largest character boundary of `s` at or before byte `at` (`s.len()` past the end).
pub fn floor_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    (0..=at).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
}

/// The smallest character boundary of `s` at or after byte `at` (`s.len()` past the end).
pub fn ceil_char_boundary(s: &str, at: usize) -> usize {
    (at..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_round_to_whole_characters() {
        let s = "aé€";
        assert_eq!(
            (0..=7)
                .map(|i| floor_char_boundary(s, i))
                .collect::<Vec<_>>(),
            [0, 1, 1, 3, 3, 3, 6, 6]
        );
        assert_eq!(
            (0..=7)
                .map(|i| ceil_char_boundary(s, i))
                .collect::<Vec<_>>(),
            [0, 1, 3, 3, 6, 6, 6, 6]
        );
        assert_eq!(floor_char_boundary("", 3), 0);
        assert_eq!(ceil_char_boundary("", 0), 0);
    }
}
