//! The one HTTP client setup: the TLS provider installed once, the error said from its innermost
//! cause. Every request `new` makes (providers, MCP servers, OAuth, hooks) starts from
//! [`builder`] and adds its own timeouts and redirect policy.

use rustls::crypto::ring;
use std::error::Error;
/// A client builder with the TLS provider in place.
pub fn builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}

/// Installs rustls' `ring` provider as the process default (reqwest and rmcp's clients use it).
pub fn install_crypto_provider() {
    // Fails only when a provider is already installed, which is what we want anyway.
    let _ = ring::default_provider().install_default();
}

/// The reason a request could not be sent, from the innermost cause.
pub fn describe_error(e: &reqwest::Error) -> String {
    // reqwest's own text is "error sending request for url (...)"; the cause says what really failed.
    let mut reason = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = Error::source(e);
    let mut last = None;
    while let Some(s) = source {
        last = Some(s.to_string());
        source = s.source();
    }
    if let Some(last) = last {
        reason.push_str(" (");
        reason.push_str(&last);
        reason.push(')');
    }
    reason
}
