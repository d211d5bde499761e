//! An incremental Server-Sent Events decoder: bytes go in as they arrive, whole events come out.
//!
//! It follows the WHATWG rules that matter for LLM APIs: lines end in `\n`, `\r\n` or `\r`;
//! `data:` lines of one event are joined with `\n`; a blank line dispatches the event; lines starting
//! with `:` are comments (keep-alives); a single space after the colon is dropped. A chunk boundary may
//! fall anywhere, even inside a UTF-8 character.

use std::mem;
/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, empty when absent.
    pub event: String,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    pending: Pending,
    /// The previous chunk ended in `\r`: a `\n` starting the next chunk belongs to it.
    pending_cr: bool,
    /// How much of `buffer` is known to hold no line end: a long line arriving in many chunks is
    /// scanned once, not once per chunk.
    scanned: usize,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut bytes = bytes;
        if self.pending_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.pending_cr = false;
        self.buffer.extend_from_slice(bytes);

        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(at) = memchr::memchr2(b'\n', b'\r', &self.buffer[from..]) {
            let i = from + at;
            // Borrowed when it is valid UTF-8: a long line is copied once, into the event's data.
            let line = String::from_utf8_lossy(&self.buffer[start..i]);
            let event = self.pending.line(&line);
            let mut next = i + 1;
            if self.buffer[i] == b'\r' {
                if next < self.buffer.len() {
                    if self.buffer[next] == b'\n' {
                        next += 1;
                    }
                } else {
                    self.pending_cr = true;
                }
            }
            start = next;
            from = next;
            events.extend(event);
        }
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        events
    }

    /// The bytes held for the event being assembled (its data so far and an unfinished line): a
    /// reader bounds an event by it, so that one endless `data:` line cannot grow memory.
    pub fn pending_len(&self) -> usize {
        self.buffer.len() + self.pending.data.len() + self.pending.event.len()
    }

    /// Ends the stream: an event still open (no blank line after it) is dispatched, as servers that
    /// close the connection right after the last `data:` line expect.
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.scanned = 0;
        if !self.buffer.is_empty() {
            let line = String::from_utf8_lossy(&mem::take(&mut self.buffer)).into_owned();
            if let Some(event) = self.pending.line(&line) {
                return Some(event);
            }
        }
        self.pending.dispatch()
    }
}

/// The event being assembled from its lines.
#[derive(Debug, Default)]
struct Pending {
    event: String,
    data: String,
    has_data: bool,
}

impl Pending {
    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_string(),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = mem::take(&mut self.event);
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event,
            data: mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::slice;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn splits_events_at_blank_lines() {
        let mut d = SseDecoder::new();
        let out = d.feed(b"data: one\n\ndata: two\n\n");
        assert_eq!(out, vec![ev("", "one"), ev("", "two")]);
    }

    #[test]
    fn any_chunk_boundary_gives_the_same_events() {
        let input =
            "event: message_start\r\ndata: {\"a\":\"é\"}\r\n\r\n: ping\n\ndata: x\ndata: y\n\n"
                .as_bytes();
        let mut whole = SseDecoder::new();
        let expected = whole.feed(input);
        assert_eq!(
            expected,
            vec![ev("message_start", "{\"a\":\"é\"}"), ev("", "x\ny")]
        );
        for cut in 0..input.len() {
            let mut d = SseDecoder::new();
            let mut got = d.feed(&input[..cut]);
            got.extend(d.feed(&input[cut..]));
            assert_eq!(got, expected, "cut at {cut}");
        }
    }

    #[test]
    fn byte_by_byte_with_bare_cr() {
        let input = b"data: a\r\rdata: b\r\r";
        let mut d = SseDecoder::new();
        let mut got = Vec::new();
        for b in input {
            got.extend(d.feed(slice::from_ref(b)));
        }
        assert_eq!(got, vec![ev("", "a"), ev("", "b")]);
    }

    #[test]
    fn finish_flushes_an_unterminated_event() {
        let mut d = SseDecoder::new();
        assert!(d.feed(b"data: [DONE]").is_empty());
        assert_eq!(d.finish(), Some(ev("", "[DONE]")));
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn a_long_line_in_small_chunks_is_read_in_linear_time() {
        // 8 MB in 1 KB chunks: the old reader rescanned the whole buffer for every chunk (quadratic,
        // seconds); a linear one counts the bytes it looks at.
        let mut d = SseDecoder::new();
        assert!(d.feed(b"data: ").is_empty());
        let chunk = vec![b'x'; 1024];
        for _ in 0..8 * 1024 {
            assert!(d.feed(&chunk).is_empty());
            assert_eq!(d.scanned, d.buffer.len());
        }
        let out = d.feed(b"\n\n");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 8 * 1024 * 1024);
        assert_eq!(d.scanned, 0);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let mut d = SseDecoder::new();
        let out = d.feed(b": keep-alive\nid: 7\nretry: 10\ndata:no-space\n\n");
        assert_eq!(out, vec![ev("", "no-space")]);
    }
}
