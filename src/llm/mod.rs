//! Language-model providers: the OpenAI-compatible Chat Completions client (streaming over SSE) and
//! the types every provider shares. This module knows nothing of how conversations are stored: it
//! takes a list of [`ChatMessage`]s and returns one [`ChatResponse`], reporting text as it arrives.

pub mod openai;
pub mod sse;
pub mod types;

use std::time::Duration;

pub use types::*;

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
}

/// Everything needed to reach one provider. Built by [`crate::config`].
#[derive(Clone)]
pub struct ProviderSettings {
    /// The name the user knows it by (`openai`, `deepseek`, ...).
    pub name: String,
    pub kind: ProviderKind,
    /// For OpenAI-compatible servers this includes the version path (`https://api.openai.com/v1`).
    pub base_url: String,
    pub api_key: Option<String>,
    /// The variable a user sets for the key, named in messages.
    pub api_key_var: String,
    /// The variable a user sets for the base URL, named in messages.
    pub base_url_var: String,
    pub connect_timeout: Duration,
    /// How long a stream may stay silent before it counts as cut.
    pub idle_timeout: Duration,
    /// Ask for token usage in the stream (`stream_options.include_usage`).
    pub stream_usage: bool,
    /// The host needs a key (official APIs do; a local server does not).
    pub key_required: bool,
}

impl std::fmt::Debug for ProviderSettings {
    // Hand-written so that the key can never reach a log or an error message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// Why a request failed. Each variant's text says what happened and what the user can do.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("no API key for provider `{provider}`: set {var} (or `api_key` in the config file)")]
    MissingKey { provider: String, var: String },
    #[error("cannot reach {url}: {reason}. Is the server running? Check {var}")]
    Connect {
        url: String,
        reason: String,
        var: String,
    },
    #[error("{url} answered {status}: {message}{hint}")]
    Http {
        status: u16,
        url: String,
        message: String,
        /// Starts with a separator when present.
        hint: String,
    },
    #[error("the server reported an error during the answer: {0}")]
    Server(String),
    #[error("the answer stream was cut: {0}")]
    StreamCut(String),
    #[error("could not build the HTTP client: {0}")]
    Client(String),
}

/// A configured provider client.
pub enum Provider {
    OpenAi(openai::OpenAiClient),
}

impl Provider {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        install_crypto_provider();
        match settings.kind {
            ProviderKind::OpenAi => Ok(Provider::OpenAi(openai::OpenAiClient::new(settings)?)),
        }
    }

    pub fn settings(&self) -> &ProviderSettings {
        match self {
            Provider::OpenAi(c) => c.settings(),
        }
    }

    /// Sends one request and streams the answer, calling `on_event` for each piece as it arrives.
    pub async fn chat(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent<'_>),
    ) -> Result<ChatResponse, LlmError> {
        match self {
            Provider::OpenAi(c) => c.chat(request, on_event).await,
        }
    }
}

fn install_crypto_provider() {
    // Fails only when a provider is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
