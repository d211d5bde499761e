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
        || t.contains("longer than the model's context length")
        || ((t.contains("context window") || t.contains("context length"))
            && (t.contains("exceed") || t.contains("too long")))
}

/// The smallest window an error is believed to name: a smaller figure is another number of the
/// text (an echoed request, a quoted example), not a model's window.
pub const MIN_WINDOW: u64 = 1_024;
/// The largest window an error is believed to name.
pub const MAX_WINDOW: u64 = 10_000_000;

/// The window an overflow error names, where it does: `"n_ctx": 4096` (llama-server, also quoted
/// by a proxy: LiteLLM quotes llama-server's body as a Python dict, `'n_ctx': 2048`, or as JSON
/// inside a JSON string, `\"n_ctx\": 2048`), else the last of "maximum context length is 8192
/// tokens" (OpenAI, vLLM), "prompt is too long: 208000 tokens > 200000 maximum" (Anthropic) and
/// the like: the server's own words come after what it echoes of the request. Only the number
/// that names the window is taken, never another one of the text (the tokens asked for, those of
/// the messages, a status code); and only from [`MIN_WINDOW`] to [`MAX_WINDOW`], and smaller than
/// the request's tokens where the error counts them (the request did not fit). None otherwise.
pub fn window_named_in(text: &str) -> Option<u64> {
    let t = text.to_ascii_lowercase();
    let requested = requested_tokens_in(&t);
    let sane = |n: u64| (MIN_WINDOW..=MAX_WINDOW).contains(&n) && requested.is_none_or(|r| n < r);
    // The structured field first; then each name of the window, the number right after it (between
    // them only quotes, escapes, a colon, an equals sign, an opening parenthesis or blanks).
    const STRUCTURED: &[&str] = &["n_ctx"];
    const NAMES: &[&str] = &[
        "maximum context length is",
        "context length of",
        "context length (",
        "context window of",
        "context window (",
        "context size (",
    ];
    let last_after = |names: &[&str]| -> Option<(usize, u64)> {
        let mut found = None;
        for name in names {
            let mut from = 0;
            while let Some(at) = t[from..].find(name) {
                let after = from + at + name.len();
                from = after;
                let rest = &t[after..];
                // `n_ctx_train`, `n_ctx_slot`: other figures.
                if rest.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()) {
                    continue;
                }
                let gap = rest
                    .find(|c: char| !matches!(c, ' ' | '"' | '\'' | '\\' | ':' | '=' | '('))
                    .unwrap_or(rest.len());
                if gap > 8 {
                    continue;
                }
                if let Some(n) = leading_number(&rest[gap..]).filter(|n| sane(*n))
                    && found.is_none_or(|(p, _)| p < after)
                {
                    found = Some((after, n));
                }
            }
        }
        found
    };
    if let Some((_, n)) = last_after(STRUCTURED) {
        return Some(n);
    }
    let mut found = last_after(NAMES);
    // `… 208000 tokens > 200000 maximum`: the number right before ` maximum`, after a `>`.
    let mut from = 0;
    while let Some(at) = t[from..].find(" maximum") {
        let end = from + at;
        from = end + 1;
        let before = t[..end].trim_end();
        let digits_start = before
            .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
            .map_or(0, |i| i + 1);
        if before[..digits_start].trim_end().ends_with('>')
            && let Some(n) = leading_number(&before[digits_start..]).filter(|n| sane(*n))
            && found.is_none_or(|(p, _)| p < end)
        {
            found = Some((end, n));
        }
    }
    found.map(|(_, n)| n)
}

/// The most tokens an overflow error says the request needed: its prompt ([`tokens_named_in`]),
/// or all it asked for with the answer's room (vLLM's and OpenAI's "you requested 2212 tokens").
fn requested_tokens_in(lowercase: &str) -> Option<u64> {
    let asked = lowercase.rfind("you requested").and_then(|at| {
        let rest = lowercase[at + "you requested".len()..].trim_start();
        leading_number(rest)
    });
    match (tokens_named_in(lowercase), asked) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The request's tokens as an overflow error counts them, where it does: llama-server's
/// `n_prompt_tokens` (also quoted by a proxy), OpenAI's "your messages resulted in 9013 tokens",
/// vLLM's "(1991 in the messages", Anthropic's "prompt is too long: 208310 tokens", SGLang's
/// "The input (2212 tokens)". Not a count that adds the answer's room ("you requested").
pub fn tokens_named_in(text: &str) -> Option<u64> {
    let t = text.to_ascii_lowercase();
    const NAMES: &[&str] = &[
        "n_prompt_tokens",
        "messages resulted in",
        "prompt is too long:",
        "the input (",
    ];
    for name in NAMES {
        let Some(at) = t.find(name) else { continue };
        let rest = &t[at + name.len()..];
        let gap = rest
            .find(|c: char| !matches!(c, ' ' | '"' | '\'' | '\\' | ':' | '=' | '('))
            .unwrap_or(rest.len());
        if gap <= 8
            && let Some(n) = leading_number(&rest[gap..])
        {
            return Some(n);
        }
    }
    // vLLM: `you requested 2212 tokens (1991 in the messages, 221 in the completion)`.
    let at = t.find(" in the messages")?;
    let before = &t[..at];
    let start = before
        .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
        .map_or(0, |i| i + 1);
    leading_number(&before[start..])
}

/// The number a text starts with (`2048`, `200,000`), if it starts with one.
fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LiteLLM's proxy in front of llama-server (`openai/` model, either endpoint, a 2,048-token
    /// window): its own words around the server's body, quoted as a Python dict; the tokens of
    /// the request come first.
    pub(crate) const LITELLM_LLAMA: &str = r#"{"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - Error code: 400 - {'error': {'code': 400, 'message': 'the request exceeds the available context size, try increasing it', 'type': 'exceed_context_size_error', 'n_prompt_tokens': 2212, 'n_ctx': 2048}}\nmodel=claude-local. context_window_fallbacks=None. fallbacks=None.\n\nSet 'context_window_fallback' - https://docs.litellm.ai/docs/routing#fallbacks. Received Model Group=claude-local\nAvailable Model Group Fallbacks=None","type":null,"param":null,"code":"400"}}"#;
    /// LiteLLM in front of vLLM: the request's count, and the messages' (1,991), beside the window.
    const LITELLM_VLLM: &str = r#"{"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: OpenAIException - This model's maximum context length is 2048 tokens. However, you requested 2212 tokens (1991 in the messages, 221 in the completion). Please reduce the length of the messages or completion. Received Model Group=claude-local\nAvailable Model Group Fallbacks=None","type":null,"param":null,"code":"400"}}"#;
    /// llama-server's body as JSON inside the proxy's message string.
    const LITELLM_ESCAPED: &str = r#"{"error":{"message":"litellm.ContextWindowExceededError: OpenAIException - {\"error\":{\"code\":400,\"message\":\"the request exceeds the available context size, try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":2212,\"n_ctx\":2048}}","type":null,"param":null,"code":"400"}}"#;
    /// SGLang's wording.
    const SGLANG: &str = r#"{"object":"error","message":"The input (2212 tokens) is longer than the model's context length (2048 tokens).","type":"BadRequestError","param":null,"code":400}"#;

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
            (LITELLM_LLAMA, Some(2048)),
            (LITELLM_VLLM, Some(2048)),
            (LITELLM_ESCAPED, Some(2048)),
            (SGLANG, Some(2048)),
            (
                r#"{"error":{"message":"context_length_exceeded: 3 parts > 2 allowed; prompt is too long: 2212 tokens > 2,048 maximum"}}"#,
                Some(2048),
            ),
        ] {
            assert!(is_overflow(body), "{body}");
            assert_eq!(window_named_in(body), window, "{body}");
        }
        // The request's own count, where the error gives it.
        for (body, tokens) in [
            (openai, Some(9013)),
            (anthropic, Some(208_310)),
            (llama, Some(5291)),
            (litellm, None),
            (LITELLM_LLAMA, Some(2212)),
            (LITELLM_VLLM, Some(1991)),
            (LITELLM_ESCAPED, Some(2212)),
            (SGLANG, Some(2212)),
        ] {
            assert_eq!(tokens_named_in(body), tokens, "{body}");
        }
        for other in [
            r#"{"error":{"message":"invalid api key"}}"#,
            r#"{"error":{"message":"rate limit exceeded, try again in 20s"}}"#,
            "Internal Server Error",
        ] {
            assert!(!is_overflow(other), "{other}");
        }
    }

    /// An error cannot set the window to a figure it merely quotes: the server's own words come
    /// last, the structured field wins over the words, a figure under [`MIN_WINDOW`] or over
    /// [`MAX_WINDOW`] is none, and a window not smaller than the request it refused is none.
    #[test]
    fn only_a_sane_window_is_taken_and_the_servers_own_words_win_over_an_echo() {
        for (body, window) in [
            // A validation error that echoes the user's text, then the server's window.
            (
                "Invalid content: 'see: maximum context length is 16 tokens' ... This model's maximum context length is 128000 tokens",
                Some(128_000),
            ),
            (
                "Invalid content: 'maximum context length is 4096 tokens'. This model's maximum context length is 128000 tokens",
                Some(128_000),
            ),
            // The structured field over the words.
            (
                r#"maximum context length is 8192 tokens {"n_prompt_tokens": 5000, "n_ctx": 4096}"#,
                Some(4096),
            ),
            ("maximum context length is 16 tokens", None),
            ("maximum context length is 1 tokens", None),
            (r#"{"n_ctx": 1}"#, None),
            ("maximum context length is 99999999999 tokens", None),
            ("prompt is too long: 20 tokens > 10 maximum", None),
            // The e2e servers' small windows are still taken.
            (r#"{"n_prompt_tokens": 2212, "n_ctx": 2048}"#, Some(2048)),
            (
                "maximum context length is 1024 tokens. However, your messages resulted in 1500 tokens.",
                Some(1024),
            ),
            // Not smaller than what was refused: another figure.
            (
                "maximum context length is 128000 tokens. However, your messages resulted in 9013 tokens.",
                None,
            ),
            (r#"{"n_prompt_tokens": 2000, "n_ctx": 4096}"#, None),
        ] {
            assert_eq!(window_named_in(body), window, "{body}");
        }
    }
}
