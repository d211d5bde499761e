//! Layer 2: a summary node that stands for the start of a branch. The summary is asked of the
//! model in a request of its own (several, one part of the branch after another, when the part to
//! summarise does not fit the window at once) and stored as a new message, a child of the current
//! node: every original message stays where it was.

use crate::conversation::message::SummaryInfo;
use crate::conversation::{Conversation, Message};
use crate::llm::{ChatRequest, LlmError, Model, StreamEvent};
use crate::vocab::{ChatMessage, Role};

use super::{Context, estimate_text};
use crate::utf8;
use std::future::Future;
use tokio::sync::Notify;

/// The summary node's text starts with this line; the summary follows.
pub const SUMMARY_HEADING: &str = "[Summary of the earlier part of this conversation, which was compacted to fit the context window. The messages it stands for are no longer sent.]";

/// The system prompt of a summary request.
const SUMMARIZER: &str = "You summarise a conversation between a user and a coding assistant that \
works with tools in the user's project, so that the assistant can carry on without the original \
messages. Write plain text, no preamble. Keep: what the user asked for and still wants; decisions \
made and why; files read, created or changed (with paths) and their state; commands run and what \
they showed; errors met and how they were solved; what was being done last and what is left to do. \
Quote exact names, paths, numbers and short code where they matter. Leave out pleasantries and \
anything settled that no longer matters.";

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("nothing to compact: the branch is too short")]
    Nothing,
    #[error("the summary request failed: {0}")]
    Llm(#[from] LlmError),
    #[error("the model returned an empty summary")]
    Empty,
    #[error("the compaction was cancelled")]
    Cancelled,
    #[error("the context window ({0} tokens) is too small to write a summary in")]
    TooSmall(u64),
    #[error("the summary could not be stored: {0}")]
    Store(String),
    #[error(
        "the summary ({after} tokens with what it keeps) is no smaller than what it would replace ({before}); nothing was written"
    )]
    NoSmaller { before: u64, after: u64 },
}

/// Where a compaction cuts the branch at node `id`.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The summary in force, summarised again with the rest.
    pub previous: Option<&'a Message>,
    /// The messages the new summary stands for (after the previous summary), oldest first.
    pub summarized: Vec<&'a Message>,
    /// The messages sent verbatim after it.
    pub kept: Vec<&'a Message>,
}

/// The tokens a stored message takes in a request (a big tool result counts as its preview).
fn message_tokens(m: &Message, ctx: &Context) -> u64 {
    let s = &ctx.settings;
    let mut text = estimate_text(&m.content);
    if m.role == Role::Tool && s.enabled && text > s.tool_result_threshold {
        text = s.preview_tokens + 80;
    }
    let calls: u64 = m
        .calls()
        .iter()
        .map(|c| 8 + estimate_text(&c.function.name) + estimate_text(&c.function.arguments))
        .sum();
    4 + text + calls
}

/// The tokens of what a plan's summary would stand for (the previous summary included).
pub fn replaced_tokens(plan: &Plan<'_>, ctx: &Context) -> u64 {
    plan.previous
        .into_iter()
        .chain(plan.summarized.iter().copied())
        .map(|m| message_tokens(m, ctx))
        .sum()
}

/// Chooses the cut: the kept part is the most recent `keep` tokens and at least
/// `keep_recent_min_messages` messages, starting at a user message (so no tool call is parted
/// from its results), and no bigger than `cap`; failing that, nothing is kept. At least one
/// message is summarised.
pub fn plan<'a>(
    conversation: &'a Conversation,
    id: &str,
    ctx: &Context,
    keep: u64,
    cap: u64,
) -> Result<Plan<'a>, CompactError> {
    let sent = conversation.sent(id);
    let messages = sent.messages;
    let n = messages.len();
    if n == 0 {
        return Err(CompactError::Nothing);
    }
    let tokens: Vec<u64> = messages.iter().map(|m| message_tokens(m, ctx)).collect();
    // suffix[i]: the tokens of messages[i..].
    let mut suffix = vec![0u64; n + 1];
    for i in (0..n).rev() {
        suffix[i] = suffix[i + 1] + tokens[i];
    }
    let by_tokens = (0..=n).find(|&i| suffix[i] <= keep).unwrap_or(n);
    let raw = by_tokens.min(n.saturating_sub(ctx.settings.keep_recent_min_messages));
    let starts = |i: &usize| messages[*i].role == Role::User;
    // The nearest start at or before the raw cut keeps at least what was asked; failing that
    // (too big), the first later start that fits, down to the last user message alone.
    let earlier = (1..=raw.min(n - 1))
        .rev()
        .find(starts)
        .filter(|&i| suffix[i] <= cap);
    let later = (raw.max(1)..n).filter(starts).find(|&i| suffix[i] <= cap);
    let cut = earlier.or(later).unwrap_or(n);
    Ok(Plan {
        previous: sent.summary,
        summarized: messages[..cut].to_vec(),
        kept: messages[cut..].to_vec(),
    })
}

/// One message as a line of the transcript a summary is written from; long texts keep their
/// start and end.
fn transcript_entry(m: &Message, limit: u64) -> String {
    let body = |text: &str| clip(text, limit);
    match m.role {
        Role::User if m.is_summary() => format!("## Summary of what came before\n{}", m.content),
        Role::User => format!("## User\n{}", body(&m.content)),
        Role::Assistant => {
            let mut entry = format!("## Assistant\n{}", body(&m.content));
            for call in m.calls() {
                entry.push_str(&format!(
                    "\n→ called {}({})",
                    call.function.name,
                    clip(&call.function.arguments, 150)
                ));
            }
            entry
        }
        Role::Tool => format!("## Tool result\n{}", body(&m.content)),
        Role::System => String::new(),
    }
}

/// A text cut to about `limit` tokens: its start and its end, with a note of what was left out.
fn clip(text: &str, limit: u64) -> String {
    let max = (limit * 4) as usize;
    if text.len() <= max {
        return text.to_string();
    }
    let head = utf8::floor_char_boundary(text, max * 2 / 3);
    let tail = utf8::ceil_char_boundary(text, text.len() - (max - head));
    format!(
        "{}\n[… {} bytes left out …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// The most summary requests one compaction makes: past that, old tool results are cut short,
/// then the oldest messages are left out (the newest kept), so that a small window does not
/// cost a request per message.
const MAX_PARTS: usize = 8;

/// How many of `entries` (transcript entries with their sizes) each part holds, parts of at most
/// `budget` tokens each (an entry bigger than that alone).
fn split(sizes: &[u64], budget: u64) -> Vec<usize> {
    let mut parts = Vec::new();
    let (mut n, mut used) = (0usize, 0u64);
    for &size in sizes {
        if used + size > budget && n > 0 {
            parts.push(n);
            (n, used) = (0, 0);
        }
        n += 1;
        used += size;
    }
    if n > 0 {
        parts.push(n);
    }
    parts
}

/// The transcript of what a summary stands for from its `skip`th message on (the previous
/// summary first), in parts that each fit `budget` tokens (tool results cut to `result_limit`),
/// each with how many messages it covers. At most [`MAX_PARTS`] parts: past that, tool results
/// are cut to a tenth of the budget, then the oldest messages after the previous summary are left
/// out, with a line saying how many.
fn transcript_parts(
    plan: &Plan<'_>,
    skip: usize,
    budget: u64,
    result_limit: u64,
) -> Vec<(usize, String)> {
    let messages: Vec<&Message> = plan
        .previous
        .into_iter()
        .chain(plan.summarized.iter().copied())
        .skip(skip)
        .collect();
    let render = |result_limit: u64| -> Vec<String> {
        messages
            .iter()
            .map(|m| {
                let limit = if m.role == Role::Tool {
                    result_limit
                } else {
                    (budget / 2).max(100)
                };
                transcript_entry(m, limit.min(budget))
            })
            .collect()
    };
    let size = |entry: &String| estimate_text(entry) + 2;
    let mut entries = render(result_limit);
    if split(&entries.iter().map(size).collect::<Vec<_>>(), budget).len() > MAX_PARTS {
        entries = render(result_limit.min(budget / 10).max(20));
    }
    // The oldest raw messages go first; a previous summary (first) stays. The sizes are
    // measured once; how many to leave out is the fewest (searched by halves: leaving out more
    // never needs more parts) whose parts, the note saying so counted, are at most MAX_PARTS.
    let keep_first = usize::from(plan.previous.is_some() && skip == 0);
    let note = |dropped: usize| {
        format!(
            "[{dropped} earlier messages are left out: the window is too small to summarise them all]"
        )
    };
    let sizes: Vec<u64> = entries.iter().map(size).collect();
    let parts_without = |dropped: usize| -> usize {
        let note_size = (dropped > 0).then(|| size(&note(dropped)));
        let kept = sizes[..keep_first]
            .iter()
            .copied()
            .chain(note_size)
            .chain(sizes[keep_first + dropped..].iter().copied());
        // `split`'s count, without collecting.
        let (mut parts, mut used, mut open) = (0usize, 0u64, false);
        for size in kept {
            if open && used + size > budget {
                parts += 1;
                used = 0;
            }
            open = true;
            used += size;
        }
        parts + usize::from(open)
    };
    let most = entries.len().saturating_sub(keep_first + 1);
    let mut dropped = 0usize;
    if parts_without(0) > MAX_PARTS && most > 0 {
        // The fewest in 1..=most that fits; `most` when none does (the newest is kept).
        let (mut low, mut high) = (1usize, most);
        while low < high {
            let mid = low + (high - low) / 2;
            if parts_without(mid) <= MAX_PARTS {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        dropped = low;
    }
    entries.drain(keep_first..keep_first + dropped);
    // How many messages each entry stands for: the note, those it says were left out.
    let mut weights = vec![1; entries.len()];
    if dropped > 0 {
        entries.insert(keep_first, note(dropped));
        weights.insert(keep_first, dropped);
    }
    let sizes: Vec<u64> = entries.iter().map(size).collect();
    let mut parts = Vec::new();
    let mut rest = entries.into_iter().zip(weights);
    for n in split(&sizes, budget) {
        let mut part = String::new();
        let mut covered = 0;
        for (entry, weight) in rest.by_ref().take(n) {
            part.push_str(&entry);
            part.push_str("\n\n");
            covered += weight;
        }
        parts.push((covered, part));
    }
    parts
}

/// The answer's room of a summary request: half as much again as the summary's budget, or an
/// eighth of the window where that is more; at most `u32::MAX` (a huge window never wraps to a
/// small figure).
fn answer_room(summary_budget: u64, window: u64) -> u32 {
    u32::try_from((summary_budget.saturating_mul(3) / 2).max(window / 8)).unwrap_or(u32::MAX)
}

/// The instruction ending a summary request.
fn instruction(budget: u64, focus: Option<&str>, continuing: bool) -> String {
    let words = budget * 3 / 4;
    let mut text = if continuing {
        format!(
            "Update the summary so far with the part of the conversation above, in at most {words} words."
        )
    } else {
        format!("Summarise the conversation above in at most {words} words.")
    };
    if let Some(focus) = focus.filter(|f| !f.trim().is_empty()) {
        text.push_str(&format!(" Pay most attention to: {}", focus.trim()));
    }
    text
}

/// How many times a summary request the server refused as too long is made smaller and sent
/// again.
const SHRINKS: u32 = 3;

/// Asks the model for the summary of `plan`, part by part. `stop` resolves when the user
/// interrupts. A summary request must fit the window it summarises for: one the server refuses as
/// too long is sent again smaller (the window it names believed, parts two thirds the size, tool
/// results cut shorter), up to [`SHRINKS`] times, going on from the part it failed at.
pub async fn summarize(
    model: &dyn Model,
    model_name: &str,
    ctx: &Context,
    plan: &Plan<'_>,
    focus: Option<&str>,
    stop: &mut (dyn Future<Output = ()> + Unpin),
) -> Result<String, CompactError> {
    let mut summary: Option<String> = None;
    // The messages already summarised: not asked again after a refusal.
    let mut done = 0usize;
    let mut shrink = 0u32;
    'sizes: loop {
        let window = ctx.window().0;
        let summary_budget = ctx.summary_budget();
        // Room for one part: the window less the answer, the instructions, the running summary
        // and a tenth for the estimate's error; smaller after each refusal.
        let overhead = estimate_text(SUMMARIZER) + 120 + 2 * summary_budget + window / 10;
        let budget = (window.saturating_sub(overhead) as f64 / ctx.factor()
            * (2.0f64 / 3.0).powi(shrink as i32)) as u64;
        if budget < 200 {
            return Err(CompactError::TooSmall(window));
        }
        let result_limit = ctx.settings.preview_tokens.min(budget >> (shrink + 1));
        for (covered, part) in transcript_parts(plan, done, budget, result_limit) {
            let mut prompt = String::new();
            if let Some(s) = &summary {
                prompt.push_str("# Summary so far\n\n");
                prompt.push_str(s);
                prompt.push_str("\n\n# The conversation continues\n\n");
            } else {
                prompt.push_str("# The conversation\n\n");
            }
            prompt.push_str(&part);
            prompt.push_str(&instruction(summary_budget, focus, summary.is_some()));
            let request = ChatRequest {
                model: model_name.to_string(),
                messages: vec![
                    ChatMessage::text(Role::System, SUMMARIZER),
                    ChatMessage::text(Role::User, prompt),
                ],
                tools: Vec::new(),
                no_tool_calls: false,
                // The answer's room in the window, which the budget left free (a server that
                // counts it refuses a request asking for more); a big window's is the
                // provider's `max_tokens` as before.
                max_tokens: Some(answer_room(summary_budget, window)),
            };
            match ask(model, &request, (summary_budget * 5) as usize, stop).await {
                Ok(text) => {
                    summary = Some(text);
                    done += covered;
                }
                Err(CompactError::Llm(LlmError::ContextOverflow { window, .. }))
                    if shrink < SHRINKS =>
                {
                    if let Some(named) = window {
                        ctx.learn_window(named);
                    }
                    shrink += 1;
                    continue 'sizes;
                }
                Err(e) => return Err(e),
            }
        }
        return summary.ok_or(CompactError::Nothing);
    }
}

/// One summary request. The answer is cut at `cap` bytes: a model that rambles on must not fill
/// the window it was asked to free.
async fn ask(
    model: &dyn Model,
    request: &ChatRequest<'_>,
    cap: usize,
    stop: &mut (dyn Future<Output = ()> + Unpin),
) -> Result<String, CompactError> {
    let mut text = String::new();
    let full = Notify::new();
    let result = {
        let mut on_event = |event: StreamEvent<'_>| {
            if let StreamEvent::Text(t) = event
                && text.len() < cap
            {
                text.push_str(t);
                if text.len() >= cap {
                    full.notify_one();
                }
            }
        };
        tokio::select! {
            result = model.chat(request, &mut on_event) => Some(result),
            _ = full.notified() => None,
            _ = stop => return Err(CompactError::Cancelled),
        }
    };
    match result {
        Some(Ok(response)) if text.is_empty() => text = response.content,
        Some(Ok(_)) | None => {}
        Some(Err(e)) => return Err(e.into()),
    }
    if text.len() > cap {
        text.truncate(utf8::floor_char_boundary(&text, cap));
        text.push('…');
    }
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(CompactError::Empty);
    }
    Ok(text)
}

/// The summary node for `plan`, to be added under node `at`.
pub fn summary_message(
    plan: &Plan<'_>,
    ctx: &Context,
    text: &str,
    focus: Option<&str>,
    tokens_before: u64,
    fixed: u64,
) -> Option<Message> {
    let last = plan.summarized.last()?;
    let content = format!("{SUMMARY_HEADING}\n\n{text}");
    // The kept part as it is sent (big results as their previews), as the cut measured it.
    let kept: u64 = plan.kept.iter().map(|m| message_tokens(m, ctx)).sum();
    let messages = plan.summarized.len() as u64
        + plan
            .previous
            .and_then(|p| p.extra.rare.summary.as_ref())
            .map_or(0, |s| s.messages);
    let tokens_after = fixed + 4 + estimate_text(&content) + kept;
    let mut summary = Message::new(Role::User, content);
    summary.extra.rare.summary = Some(Box::new(SummaryInfo {
        replaces: last.id.to_string(),
        messages,
        tokens_before,
        tokens_after,
        focus: focus
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_string),
    }));
    Some(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Two thousand messages of 4 KB for a 2,000-token budget: the messages to leave out are
    /// found at once (each size measured once, not all again for each one left out), the note
    /// saying so counts in the parts, and the newest message is kept.
    #[test]
    fn a_long_branch_is_cut_to_eight_parts_quickly_counting_the_note() {
        let messages: Vec<Message> = (0..2000)
            .map(|i| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                Message::new(role, format!("message {i} {}", "m".repeat(4096)))
            })
            .collect();
        let plan = Plan {
            previous: None,
            summarized: messages.iter().collect(),
            kept: Vec::new(),
        };
        let started = Instant::now();
        let parts = transcript_parts(&plan, 0, 2000, 200);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(
            !parts.is_empty() && parts.len() <= MAX_PARTS,
            "{}",
            parts.len()
        );
        let covered: usize = parts.iter().map(|(n, _)| n).sum();
        assert_eq!(covered, messages.len());
        let text: String = parts.iter().map(|(_, t)| t.as_str()).collect();
        assert!(text.contains("earlier messages are left out"));
        assert!(text.contains("message 1999 "));
    }

    /// The answer's room of a summary request never wraps: a window past `u32::MAX` tokens asks
    /// for `u32::MAX`, not for what is left of it modulo 2^32.
    #[test]
    fn the_answers_room_of_a_huge_window_does_not_wrap() {
        assert_eq!(answer_room(1000, 4096), 1500);
        assert_eq!(answer_room(1000, 128_000), 16_000);
        assert_eq!(answer_room(1000, 1 << 35), u32::MAX);
        assert_eq!(answer_room(u64::MAX, 0), u32::MAX);
    }

    /// A long branch summarised for a small window: at most [`MAX_PARTS`] requests, old tool
    /// results cut first, then the oldest messages left out with a line saying how many; the
    /// previous summary and the newest messages are kept, and the parts account for every message.
    #[test]
    fn a_small_window_asks_eight_parts_at_most_keeping_the_newest() {
        let mut previous = Message::new(Role::User, "[Summary] THE OLD GIST");
        previous.extra.rare.summary = Some(Box::new(SummaryInfo {
            replaces: "m0".into(),
            messages: 10,
            tokens_before: 9000,
            tokens_after: 900,
            focus: None,
        }));
        let mut messages = Vec::new();
        for i in 0..60 {
            messages.push(Message::new(
                Role::User,
                format!("question {i} {}", "q".repeat(400)),
            ));
            messages.push(Message::new(
                Role::Tool,
                format!("result {i} {}", "r".repeat(4000)),
            ));
        }
        let plan = Plan {
            previous: Some(&previous),
            summarized: messages.iter().collect(),
            kept: Vec::new(),
        };
        let parts = transcript_parts(&plan, 0, 400, 200);
        assert!(parts.len() <= MAX_PARTS, "{}", parts.len());
        let covered: usize = parts.iter().map(|(n, _)| n).sum();
        assert_eq!(covered, 1 + messages.len());
        let text: String = parts.iter().map(|(_, t)| t.as_str()).collect();
        assert!(text.starts_with("## Summary of what came before\n[Summary] THE OLD GIST"));
        assert!(text.contains(" earlier messages are left out: the window is too small"));
        assert!(text.contains("question 59 "), "the newest is kept");
        assert!(!text.contains("question 0 "), "the oldest is left out");
        // Tool results were cut to a tenth of the budget: 40 tokens, about 160 bytes.
        let result = text.split("## Tool result\n").nth(1).unwrap();
        assert!(result.find("\n\n").unwrap() < 400, "{result}");
        // Going on from a later message: only what follows it, no note about the summary.
        let rest = transcript_parts(&plan, 115, 400, 200);
        let covered: usize = rest.iter().map(|(n, _)| n).sum();
        assert_eq!(covered, 1 + messages.len() - 115);
        assert!(
            rest[0].1.starts_with("## User\nquestion 57 "),
            "{}",
            rest[0].1
        );
    }
}
