//! A message's id, kept without an allocation of its own.
//!
//! `new`'s own ids are 8 hex characters (shared/docs/DESIGN.md §3), and a big conversation holds
//! two of them a node (its id and its parent's): as `String`s they were two allocations and 48
//! bytes a node. An [`Id`] keeps any id of up to 8 bytes inline (16 bytes, `Option<Id>` too);
//! a longer one, from another writer's file, goes to the heap and reads and writes the same.

use serde::de;
use serde::de::Visitor;
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::Hash;
use std::hash::Hasher;
use std::ops::Deref;
use std::str;

/// A new message id: 8 hex characters taken from a UUID v4.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// The longest id kept inline.
const INLINE: usize = 8;

/// A message id: a string, kept inline when it is short (see the module's comment).
#[derive(Clone, PartialEq, Eq)]
pub struct Id(Repr);

/// One text has one form: inline exactly when it has at most [`INLINE`] bytes and no NUL byte (the
/// padding), so equal ids have equal representations.
#[derive(Clone, PartialEq, Eq)]
enum Repr {
    /// The bytes, padded with NULs.
    Inline([u8; INLINE]),
    /// A thin box keeps `Option<Id>` as small as `Id`.
    #[allow(clippy::box_collection)]
    Heap(Box<String>),
}

impl Id {
    pub fn new(text: &str) -> Id {
        match inline(text) {
            Some(bytes) => Id(Repr::Inline(bytes)),
            None => Id(Repr::Heap(Box::new(text.to_string()))),
        }
    }

    pub fn as_str(&self) -> &str {
        // Made from a `&str` cut at a NUL-free end: always UTF-8.
        str::from_utf8(self.as_bytes()).expect("an id is UTF-8")
    }

    /// The id's text as bytes, without reading them as UTF-8 (hashing needs no more).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(bytes) => {
                let len = memchr::memchr(0, bytes).unwrap_or(INLINE);
                &bytes[..len]
            }
            Repr::Heap(text) => text.as_bytes(),
        }
    }

    /// Whether the id is `text`, told without reading the id as UTF-8 again (loading a big tree
    /// compares ids on every line).
    pub fn is(&self, text: &str) -> bool {
        match &self.0 {
            Repr::Inline(bytes) => inline(text).is_some_and(|other| other == *bytes),
            Repr::Heap(own) => own.as_str() == text,
        }
    }

    /// Whether the id is kept inline (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline(_))
    }
}

fn inline(text: &str) -> Option<[u8; INLINE]> {
    let b = text.as_bytes();
    if b.len() > INLINE || b.contains(&0) {
        return None;
    }
    let mut bytes = [0; INLINE];
    bytes[..b.len()].copy_from_slice(b);
    Some(bytes)
}

impl Default for Id {
    fn default() -> Self {
        Id(Repr::Inline([0; INLINE]))
    }
}

impl Deref for Id {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// Hashed as its text, so that a set of ids can be asked about a `&str` ([`Borrow`]).
impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Id {
    fn from(text: &str) -> Self {
        Id::new(text)
    }
}

impl From<&String> for Id {
    fn from(text: &String) -> Self {
        Id::new(text)
    }
}

impl From<String> for Id {
    fn from(text: String) -> Self {
        match inline(&text) {
            Some(bytes) => Id(Repr::Inline(bytes)),
            None => Id(Repr::Heap(Box::new(text))),
        }
    }
}

impl From<&Id> for Id {
    fn from(id: &Id) -> Self {
        id.clone()
    }
}

impl From<Id> for String {
    fn from(id: Id) -> Self {
        match id.0 {
            Repr::Heap(text) => *text,
            Repr::Inline(_) => id.as_str().to_string(),
        }
    }
}

impl From<&Id> for String {
    fn from(id: &Id) -> Self {
        id.as_str().to_string()
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        self.is(other)
    }
}

impl PartialEq<Id> for str {
    fn eq(&self, other: &Id) -> bool {
        other.is(self)
    }
}

impl PartialEq<Id> for &str {
    fn eq(&self, other: &Id) -> bool {
        other.is(self)
    }
}

impl PartialEq<Id> for String {
    fn eq(&self, other: &Id) -> bool {
        other.is(self)
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Read in place: a short id is never copied into a `String` first.
impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Id, E> {
                Ok(Id::new(text))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Id, E> {
                Ok(Id::from(text))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::mem;

    #[test]
    fn ours_are_inline_and_foreign_ones_read_and_write_the_same() {
        assert_eq!(mem::size_of::<Id>(), 16);
        assert_eq!(mem::size_of::<Option<Id>>(), 16);
        for (text, inline) in [
            ("009f13ac", true),
            ("u1", true),
            ("", true),
            ("日本", true),
            ("r0000000x", false),
            ("toolu_01ABCdefGHIjkl", false),
            ("a\0b", false),
            ("日本語", false),
        ] {
            let id = Id::new(text);
            assert_eq!(id.as_str(), text);
            assert_eq!(id.is_inline(), inline, "{text:?}");
            assert_eq!(Id::from(text.to_string()), id);
            assert_eq!(String::from(id.clone()), text);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, serde_json::to_string(text).unwrap());
            let back: Id = serde_json::from_str(&json).unwrap();
            assert_eq!(back, id);
            assert_eq!(back.is_inline(), inline);
            // Read from an owned value too (a buffered record goes that way).
            let value: Id = serde_json::from_value(serde_json::Value::from(text)).unwrap();
            assert_eq!(value, id);
        }
        let escaped: Id = serde_json::from_str(r#""ab\u0063d""#).unwrap();
        assert_eq!(escaped, "abcd");
        assert!(serde_json::from_str::<Id>("12").is_err());
    }

    #[test]
    fn compares_and_hashes_as_its_text() {
        let set: HashSet<Id> = ["a1", "a2", "a-long-foreign-id"].map(Id::new).into();
        assert!(set.contains("a2") && set.contains("a-long-foreign-id"));
        assert!(!set.contains("a3"));
        assert!(Id::new("b") > Id::new("a-long-foreign-id"));
        assert_eq!(Id::new("x"), "x");
        assert_eq!("x", Id::new("x"));
        for (a, b) in [
            ("82981a45", "82981a45"),
            ("82981a45", "82981a4"),
            ("82981a4", "82981a45"),
            ("", ""),
            ("", "\0"),
            ("a", "a\0"),
            ("a-long-foreign-id", "a-long-foreign-id"),
            ("a-long-foreign-id", "a-long-foreign-i"),
            ("日本", "日本"),
        ] {
            assert_eq!(Id::new(a) == b, a == b, "{a:?} {b:?}");
            assert_eq!(b == Id::new(a), a == b, "{a:?} {b:?}");
        }
        assert_eq!(format!("{} {:?}", Id::new("x"), Id::new("x")), "x \"x\"");
    }
}
