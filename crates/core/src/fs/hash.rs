//! Naming bytes by their hash: checkpoints' content store, trusted files, results' file names.

use ring::digest::{SHA256, digest as sha256};
/// SHA-256 of `bytes`, in hex.
pub fn digest(bytes: &[u8]) -> String {
    sha256(&SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
