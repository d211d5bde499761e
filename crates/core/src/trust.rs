//! What the user has trusted: a project's own files may narrow what the user allows, but anything
//! that widens it (a more permissive mode, allow rules, another provider URL; later, servers and
//! hooks that start processes) applies only once the user has trusted that exact content.
//!
//! Trust is remembered in the user's config folder (`<config dir>/new/trust.json`), keyed by the
//! project's canonical folder and the SHA-256 of the file trusted: change one byte of the file and it
//! is untrusted again until the user looks at it. Nothing in a project can write there, since the
//! file tools never leave WORKDIR.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::atomic;
use crate::fs::hash::digest;
use std::fs;
use std::io;

pub const TRUST_FILE: &str = "trust.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    /// Project folder → (what, e.g. `config`) → SHA-256 of the trusted content, hex.
    #[serde(default)]
    projects: BTreeMap<String, BTreeMap<String, String>>,
}

/// The trust store of one user.
#[derive(Debug, Clone)]
pub struct Trust {
    path: Option<PathBuf>,
}

impl Trust {
    /// The store in `user_dir` (`<config dir>/new`); without one, nothing is ever trusted.
    pub fn new(user_dir: Option<&Path>) -> Trust {
        Trust {
            path: user_dir.map(|d| d.join(TRUST_FILE)),
        }
    }

    fn read(&self) -> TrustFile {
        self.path
            .as_ref()
            .and_then(|p| fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// Whether `what` of `project` with exactly `content` was trusted.
    pub fn is_trusted(&self, project: &Path, what: &str, content: &[u8]) -> bool {
        let file = self.read();
        file.projects
            .get(&project.to_string_lossy().into_owned())
            .and_then(|p| p.get(what))
            .is_some_and(|hash| *hash == digest(content))
    }

    /// Remembers that the user trusts `what` of `project` with exactly `content`.
    pub fn trust(&self, project: &Path, what: &str, content: &[u8]) -> io::Result<()> {
        let Some(path) = &self.path else {
            return Err(io::Error::other("this platform has no config folder"));
        };
        let mut file = self.read();
        file.projects
            .entry(project.to_string_lossy().into_owned())
            .or_default()
            .insert(what.to_string(), digest(content));
        let text = serde_json::to_string_pretty(&file).map_err(io::Error::other)? + "\n";
        atomic::write_private(path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_for_exact_content_and_one_project() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::new(Some(dir.path()));
        let (a, b) = (Path::new("/p/a"), Path::new("/p/b"));
        assert!(!trust.is_trusted(a, "config", b"{}"));
        trust.trust(a, "config", b"{}").unwrap();
        assert!(trust.is_trusted(a, "config", b"{}"));
        assert!(!trust.is_trusted(a, "config", b"{} "));
        assert!(!trust.is_trusted(b, "config", b"{}"));
        assert!(!trust.is_trusted(a, "mcp", b"{}"));
        trust.trust(a, "config", b"{\"x\":1}").unwrap();
        assert!(!trust.is_trusted(a, "config", b"{}"));
        assert!(!Trust::new(None).is_trusted(a, "config", b"{}"));
        assert_eq!(
            digest(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
