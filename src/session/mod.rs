//! Conversations: [`Message`], the tree ([`Conversation`]), the JSONL repository ([`Store`]) and
//! [`ChatSession`], which keeps a conversation and its file in step. Nothing here knows of the
//! terminal.

mod chat;
pub mod conversation;
pub mod error;
pub mod export;
pub mod index;
pub mod message;
pub mod record;
pub mod sample;
pub mod search;
pub mod store;

pub use chat::{ChatSession, SessionError};
pub use conversation::{Conversation, NOT_RUN_RESULT, TreeError};
pub use index::Summary;
pub use message::{Message, new_id};
pub use record::Record;
pub use store::{LoadReport, Store, StoreError};
