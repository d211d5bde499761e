//! Reading a provider's error: whether it says the request was longer than the model's context
//! window, and which window it names. The client reads it (an [`super::LlmError::ContextOverflow`]);
//! the context management acts on it.

/// Whether an error from a server says the request was longer than the model's context window:
/// OpenAI's `context_length_exceeded`, llama-server's `exceed_context_size_error`, Anthropic's
/// "prompt is too long", and the wordings other servers and proxies use.
pub fn is_overflow(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("context_length_exceeded")
        || t.contains("exceed_context_size")
        || t.contains("contextwindowexceeded")
        || t.contains("prompt is too long")
        || t.contains("maximum context length")
        || t.contains("exceeds the available context size")
        || ((t.contains("context window") || t.contains("context length"))
            && (t.contains("exceed") || t.contains("too long")))
}

/// The window an overflow error names, where it does: "maximum context length is 8192 tokens"
/// (OpenAI), "prompt is too long: 208000 tokens > 200000 maximum" (Anthropic), `"n_ctx": 4096`
/// (llama-server).
pub fn window_named_in(text: &str) -> Option<u64> {
    let t = text.to_ascii_lowercase();
    let number_after = |marker: &str| -> Option<u64> {
        let at = t.find(marker)? + marker.len();
        let digits: String = t[at..]
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    if let Some(n) = number_after("maximum context length is") {
        return Some(n);
    }
    if let Some(n) = number_after("\"n_ctx\"") {
        return Some(n);
    }
    // `… 208000 tokens > 200000 maximum`
    if let Some(at) = t.find(" maximum")
        && let Some(gt) = t[..at].rfind('>')
    {
        let n: String = t[gt + 1..at].chars().filter(char::is_ascii_digit).collect();
        if let Ok(n) = n.parse() {
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error bodies real servers send when a request is too long, and the window each names.
    #[test]
    fn overflow_errors_of_real_servers_are_recognised_with_their_window() {
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9013 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5291,"n_ctx":4096}}"#;
        let litellm = r#"{"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: ...","type":null,"param":null,"code":"400"}}"#;
        for (body, window) in [
            (openai, Some(8192)),
            (anthropic, Some(200_000)),
            (llama, Some(4096)),
            (litellm, None),
        ] {
            assert!(is_overflow(body), "{body}");
            assert_eq!(window_named_in(body), window, "{body}");
        }
        for other in [
            r#"{"error":{"message":"invalid api key"}}"#,
            r#"{"error":{"message":"rate limit exceeded, try again in 20s"}}"#,
            "Internal Server Error",
        ] {
            assert!(!is_overflow(other), "{other}");
        }
    }
}
