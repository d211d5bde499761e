//! Sample conversations for benchmarks and profiling: shaped like real use, made without a model.

use super::message::Message;
use super::record::Record;
use super::tree::Conversation;
use crate::vocab::Role;
use crate::vocab::ToolCall;

/// A conversation of `n` messages in long linear runs, with a new branch every 100 messages (a
/// retry or an edit, as a user makes them), and the records that store it.
pub fn branching(id: &str, n: usize) -> (Conversation, Vec<Record>) {
    let mut conv = Conversation::new(id, "sys");
    let mut records = Vec::with_capacity(n);
    let mut fork_point = conv.root_id.clone();
    for m in 0..n {
        let message = if m % 100 == 99 {
            let back = conv.cursor().to_string();
            conv.move_cursor(&fork_point).expect("in the tree");
            let id = conv
                .add(Message::new(Role::User, format!("alternative {m}")))
                .expect("cursor in the tree");
            records.push(Record::message(conv.get(&id).expect("just added")));
            conv.move_cursor(&back).expect("in the tree");
            fork_point = back;
            continue;
        } else {
            let role = if m % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            Message::new(
                role,
                format!("message {m}: {}", "some words of text ".repeat(5)),
            )
        };
        let id = conv.add(message).expect("cursor in the tree");
        records.push(Record::message(conv.get(&id).expect("just added")));
    }
    (conv, records)
}

/// A conversation of `n` messages shaped as a bushy tree: each message answers one of the twenty
/// most recent ones (chosen by a fixed pseudo-random sequence), so forks are everywhere, as in a
/// long session of retries, edits and side questions; every fifth answer calls a tool and its
/// result follows.
pub fn bushy(id: &str, n: usize) -> (Conversation, Vec<Record>) {
    let mut conv = Conversation::new(id, "sys");
    let mut records = Vec::with_capacity(n);
    let mut ids: Vec<String> = vec![conv.root_id.clone()];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut m = 0;
    while m < n {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let back = ((state >> 33) as usize) % ids.len().min(20);
        let parent = ids[ids.len() - 1 - back].clone();
        conv.move_cursor(&parent).expect("in the tree");
        let role = match conv.get(&parent).expect("in the tree").role {
            Role::User => Role::Assistant,
            _ => Role::User,
        };
        let mut message = Message::new(
            role,
            format!("message {m}: {}", "some words of text ".repeat(5)),
        );
        let calls = role == Role::Assistant && m % 5 == 0 && m + 1 < n;
        if calls {
            message.extra.tool_calls = Some(vec![ToolCall::new(
                format!("call{m}"),
                "read_file",
                r#"{"filepath":"src/main.rs"}"#,
            )]);
        }
        let id = conv.add(message).expect("cursor in the tree");
        records.push(Record::message(conv.get(&id).expect("just added")));
        ids.push(id);
        m += 1;
        if calls {
            let result = conv
                .add(Message::tool_result(
                    format!("call{}", m - 1),
                    "fn main() {}",
                ))
                .expect("cursor in the tree");
            records.push(Record::message(conv.get(&result).expect("just added")));
            ids.push(result);
            m += 1;
        }
    }
    (conv, records)
}

/// A linear conversation of `n` messages of about 200 characters, user and assistant in turn.
pub fn linear(id: &str, n: usize) -> (Conversation, Vec<Record>) {
    let mut conv = Conversation::new(id, "sys");
    let mut records = Vec::with_capacity(n);
    for m in 0..n {
        let role = if m % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let text = format!(
            "message {m} of conversation {id}: {}",
            "lorem ipsum dolor sit amet ".repeat(6)
        );
        let id = conv
            .add(Message::new(role, text))
            .expect("cursor in the tree");
        records.push(Record::message(conv.get(&id).expect("just added")));
    }
    (conv, records)
}

/// A conversation whose messages are `texts`, user and assistant in turn, stored in `store`.
#[cfg(test)]
pub(crate) fn stored(store: &super::Store, id: &str, texts: &[&str]) -> Conversation {
    let mut c = Conversation::new(id, "sys");
    let mut records = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let m = c.add(Message::new(role, *t)).unwrap();
        records.push(Record::message(c.get(&m).unwrap()));
    }
    store.create(&c, &records).unwrap();
    c
}
