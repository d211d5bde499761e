//! Windows path names the file tools refuse, and Windows' way of comparing them: pure functions
//! of the text, compiled on every system so that their tests run everywhere. Windows itself
//! applies them ([`crate::platform::path_refusal`]); elsewhere these names are ordinary.
//!
//! Refused: drive-relative paths (`D:notes.txt` means "in the current folder of drive D", which
//! `new` does not know) and root-relative ones (`\notes.txt`, "on the current drive"); device
//! names in any folder (`CON`, `NUL`, `COM1`, also with an extension: `nul.txt` is the null
//! device); alternate data streams (`file.txt:secret`, which write beside the file's content
//! where no listing shows it); names ending in a dot or space, which Windows strips (so
//! `secret.txt.` would name `secret.txt`); characters Windows forbids in names; the device
//! namespace (`\\.\`). Short 8.3 names (`PROGRA~1`) need no rule: the resolver canonicalises
//! every existing component, which gives its long name, before anything is compared.

/// Why a path cannot be used on Windows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "it is relative to the current folder of drive {0}:, which is not known; give a full path (`{0}:\\…`) or one relative to the working folder"
    )]
    DriveRelative(char),
    #[error(
        "it is relative to the root of the current drive; give a full path with its drive (`C:\\…`) or one relative to the working folder"
    )]
    RootRelative,
    #[error(
        "`{0}` is a device name on Windows (CON, PRN, AUX, NUL, COM1–9, LPT1–9), in every folder and with any extension"
    )]
    Device(String),
    #[error("`{0}` names an alternate data stream (`name:stream`), which no listing shows")]
    Stream(String),
    #[error("`{0}` ends with a dot or a space, which Windows removes (it would name another file)")]
    TrailingDotOrSpace(String),
    #[error(
        "`{0}` holds a character Windows does not allow in names (< > \" | ? * or a control character)"
    )]
    Character(String),
    #[error("it is in the device namespace (`\\\\.\\`)")]
    DeviceNamespace,
}

fn is_sep(c: char) -> bool {
    c == '\\' || c == '/'
}

/// What is wrong with `path` as a Windows path, if anything.
pub fn refusal(path: &str) -> Option<Refusal> {
    let path = path.trim();
    let chars: Vec<char> = path.chars().collect();
    let rest: &str = if path.starts_with(r"\\.\") || path.starts_with("//./") {
        return Some(Refusal::DeviceNamespace);
    } else if let Some(verbatim) = path.strip_prefix(r"\\?\") {
        // `\\?\C:\…` or `\\?\UNC\server\share\…`: the rest is checked as names.
        match verbatim.get(..2) {
            Some(d) if d.ends_with(':') => &verbatim[2..],
            _ => verbatim,
        }
    } else if chars.len() >= 2 && is_sep(chars[0]) && is_sep(chars[1]) {
        // UNC: `\\server\share\…`.
        &path[2..]
    } else if chars.len() >= 2 && chars[1] == ':' && chars[0].is_ascii_alphabetic() {
        if chars.get(2).is_none_or(|c| !is_sep(*c)) {
            return Some(Refusal::DriveRelative(chars[0].to_ascii_uppercase()));
        }
        &path[2..]
    } else if chars.first().is_some_and(|c| is_sep(*c)) {
        return Some(Refusal::RootRelative);
    } else {
        path
    };
    rest.split(is_sep)
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
        .find_map(name_refusal)
}

/// What is wrong with one name of a path, if anything.
pub fn name_refusal(name: &str) -> Option<Refusal> {
    if name.contains(':') {
        return Some(Refusal::Stream(name.to_string()));
    }
    if name
        .chars()
        .any(|c| matches!(c, '<' | '>' | '"' | '|' | '?' | '*') || (c as u32) < 32)
    {
        return Some(Refusal::Character(name.to_string()));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Some(Refusal::TrailingDotOrSpace(name.to_string()));
    }
    if is_device_name(name) {
        return Some(Refusal::Device(name.to_string()));
    }
    None
}

/// Whether Windows takes `name` for a device: the part before the first dot, without trailing
/// spaces, is one of the reserved names (any case).
pub fn is_device_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or_default().trim_end();
    let upper = stem.to_uppercase();
    if matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) {
        return true;
    }
    let mut chars = upper.chars();
    let head: String = chars.by_ref().take(3).collect();
    let tail: Vec<char> = chars.collect();
    (head == "COM" || head == "LPT")
        && tail.len() == 1
        && matches!(tail[0], '1'..='9' | '¹' | '²' | '³')
}

/// Whether `path` is `root` or lies below it, comparing as Windows does: `\` and `/` alike,
/// letters in any case.
pub fn starts_with_ignoring_case(path: &str, root: &str) -> bool {
    let fold = |s: &str| -> String {
        s.chars()
            .map(|c| if c == '/' { '\\' } else { c })
            .flat_map(char::to_lowercase)
            .collect()
    };
    let (path, root) = (fold(path), fold(root));
    let root = root.trim_end_matches('\\');
    match path.strip_prefix(root) {
        Some(rest) => rest.is_empty() || rest.starts_with('\\'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_unc_verbatim_and_relative_paths_pass() {
        for ok in [
            r"D:\project\src\main.rs",
            "D:/project/src/main.rs",
            r"\\server\share\project\a.txt",
            r"\\?\C:\work\a.txt",
            r"\\?\UNC\server\share\a.txt",
            r"src\lib.rs",
            "src/lib.rs",
            "..\\x\\y.txt",
            "notes.v2.txt",
            "console.log",
            "com10",
            "PROGRA~1",
            "nullable.rs",
        ] {
            assert_eq!(refusal(ok), None, "{ok}");
        }
    }

    #[test]
    fn drive_and_root_relative_paths_are_refused() {
        assert_eq!(refusal("D:notes.txt"), Some(Refusal::DriveRelative('D')));
        assert_eq!(refusal("c:"), Some(Refusal::DriveRelative('C')));
        assert_eq!(refusal(r"\notes.txt"), Some(Refusal::RootRelative));
        assert_eq!(refusal("/etc/passwd"), Some(Refusal::RootRelative));
        assert_eq!(
            refusal(r"\\.\PhysicalDrive0"),
            Some(Refusal::DeviceNamespace)
        );
        assert!(
            Refusal::DriveRelative('D')
                .to_string()
                .contains("current folder of drive D:")
        );
    }

    #[test]
    fn device_names_are_refused_in_any_folder_case_and_extension() {
        for bad in [
            "CON",
            "nul",
            "src/NUL.txt",
            r"a\com1",
            "LPT9.log",
            "aux .c",
            "COM¹",
            "conout$",
        ] {
            assert!(
                matches!(refusal(bad), Some(Refusal::Device(_))),
                "{bad}: {:?}",
                refusal(bad)
            );
        }
        assert!(!is_device_name("COM0"));
        assert!(!is_device_name("CONFIG"));
    }

    #[test]
    fn streams_trailing_dots_and_bad_characters_are_refused() {
        assert_eq!(
            refusal("file.txt:secret"),
            Some(Refusal::Stream("file.txt:secret".into()))
        );
        assert_eq!(
            refusal(r"C:\w\a.txt::$DATA"),
            Some(Refusal::Stream("a.txt::$DATA".into()))
        );
        assert_eq!(
            refusal("secret.txt."),
            Some(Refusal::TrailingDotOrSpace("secret.txt.".into()))
        );
        assert_eq!(
            refusal("my notes/a b.txt"),
            None,
            "spaces inside names are fine"
        );
        assert!(matches!(refusal("a?b"), Some(Refusal::Character(_))));
        assert!(matches!(refusal("a|b"), Some(Refusal::Character(_))));
    }

    #[test]
    fn containment_ignores_case_and_separator_but_not_name_boundaries() {
        let root = r"\\?\C:\Users\Ann\Project";
        assert!(starts_with_ignoring_case(r"\\?\c:\users\ann\project", root));
        assert!(starts_with_ignoring_case(
            r"\\?\C:\USERS\ann\PROJECT\src\a.rs",
            root
        ));
        assert!(starts_with_ignoring_case(
            r"\\?\C:/Users/Ann/Project/src",
            root
        ));
        assert!(starts_with_ignoring_case(
            r"\\?\C:\Users\Ann\Project\",
            root
        ));
        assert!(!starts_with_ignoring_case(
            r"\\?\C:\Users\Ann\Project2\a",
            root
        ));
        assert!(!starts_with_ignoring_case(r"\\?\C:\Users\Ann", root));
        assert!(!starts_with_ignoring_case(
            r"\\?\D:\Users\Ann\Project",
            root
        ));
    }
}
