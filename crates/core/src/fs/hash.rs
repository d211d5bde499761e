//! Naming bytes by their hash: checkpoints' content store, trusted files, results' file names.

/// SHA-256 of `bytes`, in hex.
pub fn digest(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
