//! Conversations: [`Message`], the tree ([`Conversation`]), the JSONL repository ([`Store`]) and
//! [`ChatSession`], which keeps a conversation and its file in step. Nothing here knows of the
//! terminal.

mod chat;
pub mod error;
pub mod export;
pub mod import;
pub mod index;
pub mod message;
pub mod record;
pub mod sample;
pub mod search;
pub mod store;
pub mod tree;

pub use chat::{ChatSession, SessionError};
pub use index::Summary;
pub use message::Message;
pub use record::Record;
pub use store::{LoadReport, Store, StoreError};
pub use tree::{Conversation, NOT_RUN_RESULT, TreeError};

/// Whether `name` may name a branch: letters, digits, `-`, `_`, `.` and `/`, at most 40
/// characters, not all digits (`/3` is a node) and not starting with `-`. A name read from a file
/// that is not one is passed over (it would be printed on the terminal).
pub fn valid_branch_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 40
        && !name.starts_with('-')
        && !name.chars().all(|c| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}
