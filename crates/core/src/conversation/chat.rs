//! A conversation together with its file: every message added is on disk before the call returns.

use super::message::{Message, now};
use super::record::{Record, TitleRecord, format_timestamp};
use super::store::{LoadReport, Store, StoreError};
use super::tree::{Conversation, TreeError};
use crate::vocab::new_id;
use std::io::ErrorKind;
use std::slice;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("the message is kept in memory but could not be saved: {0}")]
    Store(#[from] StoreError),
}

pub struct ChatSession {
    store: Store,
    conversation: Conversation,
    /// Whether the file exists: the header is written together with the first message.
    persisted: bool,
}

impl ChatSession {
    /// A new, empty conversation. It leaves no file until its first message.
    pub fn new(store: Store, system_prompt: &str) -> Self {
        let conversation = Conversation::new(fresh_id(&store), system_prompt);
        ChatSession {
            store,
            conversation,
            persisted: false,
        }
    }

    /// Opens a stored conversation; its cursor is its last message.
    pub fn open(
        store: Store,
        id: &str,
        system_prompt: &str,
    ) -> Result<(Self, LoadReport), StoreError> {
        let (conversation, report) = store.load(id, system_prompt)?;
        Ok((
            ChatSession {
                store,
                conversation,
                persisted: true,
            },
            report,
        ))
    }

    /// A copy that writes to the same file, for answers that run side by side: appends are
    /// whole lines under the file's lock, and the original learns what the copies added by
    /// opening the file again.
    pub fn fork(&self) -> ChatSession {
        ChatSession {
            store: self.store.clone(),
            conversation: self.conversation.clone(),
            persisted: self.persisted,
        }
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn id(&self) -> &str {
        &self.conversation.id
    }

    pub fn is_persisted(&self) -> bool {
        self.persisted
    }

    pub fn move_cursor(&mut self, id: &str) -> Result<(), TreeError> {
        self.conversation.move_cursor(id)
    }

    /// The header's metadata, for a conversation not yet written (a subagent's link to its
    /// parent): it goes into the file with the first message.
    pub fn set_metadata(&mut self, metadata: serde_json::Value) {
        if let serde_json::Value::Object(map) = metadata {
            self.conversation.metadata = map;
        }
    }

    pub fn set_system_prompt(&mut self, prompt: &str) {
        self.conversation.set_system_prompt(prompt);
    }

    /// Adds a message under the cursor, moves the cursor to it and saves it. Returns its id.
    pub fn add(&mut self, message: Message) -> Result<String, SessionError> {
        let id = self.conversation.add(message)?;
        self.save(&id)?;
        Ok(id)
    }

    fn save(&mut self, id: &str) -> Result<(), StoreError> {
        let record = Record::message(self.conversation.get(id).expect("just added"));
        if self.persisted {
            return self.store.append(&self.conversation.id, &[record]);
        }
        // A fresh id can be taken by another process between choosing it and creating the file.
        loop {
            match self
                .store
                .create(&self.conversation, slice::from_ref(&record))
            {
                Ok(()) => {
                    self.persisted = true;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    self.conversation.id = fresh_id(&self.store);
                }
                Err(e) => {
                    let path = self.store.path(&self.conversation.id);
                    return Err(StoreError::io("creating", &path, e));
                }
            }
        }
    }

    /// Names the conversation: a title record is appended (the latest one wins on load).
    pub fn set_title(&mut self, title: &str) -> Result<(), StoreError> {
        self.append_record(Record::Title(TitleRecord {
            title: title.to_string(),
            timestamp: Some(format_timestamp(&now())),
        }))?;
        self.conversation.title = Some(title.to_string());
        Ok(())
    }

    /// Names the branch whose tip is `tip` (a branch record); a name in use moves here.
    pub fn name_branch(&mut self, name: &str, tip: &str) -> Result<(), StoreError> {
        self.append_record(Record::Branch(super::record::BranchRecord {
            msg_id: tip.to_string(),
            name: name.to_string(),
            timestamp: Some(format_timestamp(&now())),
            deleted: false,
        }))?;
        self.conversation
            .branches
            .insert(name.to_string(), tip.to_string());
        Ok(())
    }

    /// Marks the user message `id` and what is below it undone (an undone record).
    pub fn mark_undone(&mut self, id: &str) -> Result<(), StoreError> {
        if self.conversation.undone.contains(id) {
            return Ok(());
        }
        self.append_record(Record::Undone(super::record::UndoneRecord {
            msg_id: id.to_string(),
            timestamp: Some(format_timestamp(&now())),
        }))?;
        self.conversation.undone.insert(id.to_string());
        Ok(())
    }

    /// Removes a branch's name (a branch record with `"deleted": true`); the branch stays.
    pub fn unname_branch(&mut self, name: &str) -> Result<(), StoreError> {
        let Some(node) = self.conversation.branches.get(name).cloned() else {
            return Ok(());
        };
        self.append_record(Record::Branch(super::record::BranchRecord {
            msg_id: node,
            name: name.to_string(),
            timestamp: Some(format_timestamp(&now())),
            deleted: true,
        }))?;
        self.conversation.branches.remove(name);
        Ok(())
    }

    /// Appends a record that is not a message.
    /// Attaches a snapshot of the working folder to node `id` (a checkpoint line).
    pub fn add_checkpoint(&mut self, id: &str, snapshot: &str) -> Result<(), StoreError> {
        if self.conversation.checkpoints.get(id).map(String::as_str) == Some(snapshot)
            && self.conversation.latest_checkpoint.as_deref() == Some(snapshot)
        {
            return Ok(());
        }
        self.append_record(Record::Checkpoint(super::record::CheckpointRecord {
            msg_id: id.to_string(),
            snapshot: snapshot.to_string(),
            timestamp: Some(super::record::format_timestamp(&super::message::now())),
        }))?;
        self.conversation
            .checkpoints
            .insert(id.to_string(), snapshot.to_string());
        self.conversation.latest_checkpoint = Some(snapshot.to_string());
        Ok(())
    }

    pub fn append_record(&mut self, record: Record) -> Result<(), StoreError> {
        if !self.persisted {
            return self
                .store
                .create(&self.conversation, &[record])
                .map_or_else(
                    |e| {
                        Err(StoreError::io(
                            "creating",
                            &self.store.path(&self.conversation.id),
                            e,
                        ))
                    },
                    |()| {
                        self.persisted = true;
                        Ok(())
                    },
                );
        }
        self.store.append(&self.conversation.id, &[record])
    }
}

fn fresh_id(store: &Store) -> String {
    loop {
        let id = new_id();
        if !store.exists(&id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Role;
    use std::fs;

    #[test]
    fn no_file_until_the_first_message_then_header_and_message_together() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut s = ChatSession::new(store.clone(), "sys");
        assert!(!store.exists(s.id()));
        s.add(Message::new(Role::User, "hi")).unwrap();
        let text = fs::read_to_string(store.path(s.id())).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(r#"{"type":"header","root_id":""#));
        assert!(lines[1].contains(r#""content":"hi""#));

        s.add(Message::new(Role::Assistant, "hello")).unwrap();
        let (reopened, report) = ChatSession::open(store, s.id(), "sys").unwrap();
        assert!(report.is_clean());
        assert_eq!(reopened.conversation().len(), 3);
    }
}
