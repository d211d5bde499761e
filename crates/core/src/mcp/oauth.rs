//! OAuth 2.1 for HTTP servers, on the SDK's authorization client: protected-resource and
//! authorization-server metadata discovery (from `WWW-Authenticate` and the well-known paths),
//! PKCE, dynamic client registration, client ID metadata documents, pre-registered clients,
//! scopes (from the challenge or `scopes_supported`, step-up on a 403 `insufficient_scope`),
//! refresh tokens (refreshed before they expire), the client-credentials grant, and resource
//! indicators (tokens are for the server's URL; metadata naming another resource is refused).
//!
//! What `new` adds: the browser step (the URL said, the browser opened where there is one:
//! `$BROWSER`, else `xdg-open` on a desktop; the redirect received on a loopback port), and the
//! token store: one file private to the user (0600) in the user's config folder, never in a
//! project, keyed by server name and URL so that a token is only ever sent to the server it was
//! issued for. Tokens are never printed or logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::escape;
use crate::fs::atomic;
use crate::fs::project_file;
use crate::http;
use base64::engine::general_purpose::STANDARD;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::redirect::Policy;
use ring::rand::SystemRandom;
use rmcp::transport::AuthClient;
use rmcp::transport::auth;
use rmcp::transport::auth::OAuthTokenResponse;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, ClientCredentialsConfig,
    CredentialStore, OAuthState, StoredCredentials,
};
use std::env;
use std::fmt::Display;
use std::fs;
use std::io;
use std::io::ErrorKind;
use std::process::Command;
use std::process::Stdio;
use std::str;
use std::sync::Mutex;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time;

/// The file of the token store, in the user's config folder.
pub const TOKEN_FILE: &str = "mcp-oauth.json";

/// How long the browser step waits for the redirect.
const BROWSER_WAIT: Duration = Duration::from_secs(300);

/// The most of a key file (`privateKeyFile`) read: a PEM key is a few hundred bytes.
pub const MAX_KEY_FILE_BYTES: usize = 64 * 1024;

/// The most of an ID token file (`idTokenFile`) read.
pub const MAX_ID_TOKEN_BYTES: usize = 64 * 1024;

/// The most step-ups (a new authorization for a wider scope) one connection makes: a server that
/// keeps asking for more is refused after that.
pub const MAX_STEP_UPS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("OAuth: {0}")]
    Sdk(String),
    #[error("the token store {path}: {why}")]
    Store { path: PathBuf, why: String },
    #[error(
        "the authorization was not completed within {0} s (open the URL said above, or run `/mcp login NAME`)"
    )]
    Timeout(u64),
    #[error("the authorization server answered the redirect with an error: {0}")]
    Denied(String),
    #[error("the browser step failed: {0}")]
    Browser(String),
    #[error("the server asked for wider scopes {0} times; refused")]
    TooManyStepUps(u32),
}

impl OAuthError {
    /// What went wrong in fixed words, for the log.
    pub fn kind(&self) -> &'static str {
        match self {
            OAuthError::Sdk(_) => "oauth error",
            OAuthError::Store { .. } => "token store error",
            OAuthError::Timeout(_) => "browser step timed out",
            OAuthError::Denied(_) => "authorization denied",
            OAuthError::Browser(_) => "browser step failed",
            OAuthError::TooManyStepUps(_) => "too many step-ups",
        }
    }
}

impl From<AuthError> for OAuthError {
    fn from(e: AuthError) -> Self {
        OAuthError::Sdk(escape::escape_controls(&e.to_string()))
    }
}

/// The words for a 401 or 403 that `new` could not answer (the challenge's `error` only: its
/// other parameters are the server's).
pub fn refused(challenge: &str) -> String {
    let error = challenge
        .split([',', ' '])
        .find_map(|p| p.trim().strip_prefix("error="))
        .map(|e| e.trim_matches('"'))
        .filter(|e| e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    match error {
        Some(e) => format!("the server refused the authorization ({e})"),
        None => "the server wants an OAuth authorization (run `/mcp login NAME`)".into(),
    }
}

/// The grant an entry uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// The browser step (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// Unattended: the entry's client ID and secret.
    ClientCredentials,
    /// Enterprise-managed authorization: the user's ID token from the organisation's identity
    /// provider exchanged there for an ID-JAG (RFC 8693), redeemed at the server's
    /// authorization server (RFC 7523 jwt-bearer).
    EnterpriseManaged,
}

/// The identity provider of [`Grant::EnterpriseManaged`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpSettings {
    pub issuer: String,
    pub token_endpoint: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// The user's ID token (a file their sign-in tool keeps fresh), read at each exchange.
    pub id_token_file: PathBuf,
}

/// An entry's `oauth` object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    pub grant: Grant,
    /// The loopback port of the redirect (0: any free one).
    pub callback_port: u16,
    /// The client ID metadata document to use as client ID where the authorization server
    /// supports them: none unless the user's own entry names one.
    pub client_metadata: ClientMetadata,
    /// The client-credentials grant with `private_key_jwt`: a PKCS#8 P-256 key (PEM) that signs
    /// the client's assertion (ES256), instead of a secret.
    pub private_key_file: Option<PathBuf>,
    /// The identity provider of the enterprise-managed grant.
    pub idp: Option<IdpSettings>,
}

/// The address `docs/src/client-metadata.json` names as its own `client_id`: where `new`'s client
/// ID metadata document is to be published. It is not used unless an entry names it: whoever
/// controls that host controls the document (its redirect URIs), and the project does not
/// publish it at an address it controls yet.
pub const CLIENT_METADATA_URL: &str = "https://new-agent.github.io/new/client-metadata.json";

/// An entry's `clientMetadataUrl`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ClientMetadata {
    /// Not given, or `false`: no document; the client registers (or uses `clientId`).
    #[default]
    Off,
    /// An https URL the user's own entry names (a document they or their organisation host).
    Url(String),
}

impl ClientMetadata {
    /// The document's URL, where there is one.
    pub fn url(&self) -> Option<&str> {
        match self {
            ClientMetadata::Url(url) => Some(url),
            ClientMetadata::Off => None,
        }
    }
}

/// The token store: `{"<server> <url>": credentials}` in one file, 0600.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
}

/// One process at a time reads and rewrites the file.
static STORE_LOCK: Mutex<()> = Mutex::new(());

impl TokenStore {
    /// The store in the user's config folder `dir`.
    pub fn in_dir(dir: &Path) -> TokenStore {
        TokenStore {
            path: dir.join(TOKEN_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn key(server: &str, url: &str) -> String {
        format!("{server} {url}")
    }

    fn error(&self, why: impl Display) -> OAuthError {
        OAuthError::Store {
            path: self.path.clone(),
            why: why.to_string(),
        }
    }

    fn read_all(&self) -> Result<BTreeMap<String, serde_json::Value>, OAuthError> {
        match fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| self.error(e)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Writes the whole store: a private file written beside it, then renamed over it.
    fn write_all(&self, all: &BTreeMap<String, serde_json::Value>) -> Result<(), OAuthError> {
        let bytes = serde_json::to_vec_pretty(all).unwrap_or_default();
        atomic::write_private(&self.path, &bytes).map_err(|e| self.error(e))
    }

    pub fn load(&self, server: &str, url: &str) -> Result<Option<StoredCredentials>, OAuthError> {
        let _held = STORE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let all = self.read_all()?;
        Ok(all
            .get(&Self::key(server, url))
            .and_then(|v| serde_json::from_value(v.clone()).ok()))
    }

    pub fn save(
        &self,
        server: &str,
        url: &str,
        credentials: &StoredCredentials,
    ) -> Result<(), OAuthError> {
        let _held = STORE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read_all()?;
        all.insert(
            Self::key(server, url),
            serde_json::to_value(credentials).map_err(|e| self.error(e))?,
        );
        self.write_all(&all)
    }

    /// Forgets a server's tokens (`/mcp logout NAME`): true when there were some.
    pub fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        let _held = STORE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read_all()?;
        let before = all.len();
        let prefix = format!("{server} ");
        all.retain(|k, _| !k.starts_with(&prefix));
        if all.len() == before {
            return Ok(false);
        }
        self.write_all(&all)?;
        Ok(true)
    }
}

/// The SDK's view of one server's entry in the store.
struct Credentials {
    store: TokenStore,
    server: String,
    url: String,
}

#[async_trait::async_trait]
impl CredentialStore for Credentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.store
            .load(&self.server, &self.url)
            .map_err(|e| AuthError::InternalError(e.to_string()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.store
            .save(&self.server, &self.url, &credentials)
            .map_err(|e| AuthError::InternalError(e.to_string()))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store
            .remove(&self.server)
            .map(|_| ())
            .map_err(|e| AuthError::InternalError(e.to_string()))
    }
}

/// Where a line for the person watching goes (the authorization URL).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// What one HTTP server's OAuth needs: its name and settings, the store, who hears the URL.
#[derive(Clone)]
pub struct Login {
    pub server: String,
    pub settings: Settings,
    pub store: TokenStore,
    pub say: Say,
    /// Whether the browser step may run (false: only stored or unattended authorizations).
    pub browser: bool,
}

/// An HTTP server's authorized client: the SDK's, sharing one authorization (a step-up
/// replaces it for every stream of the connection).
pub struct Session {
    client: AuthClient<reqwest::Client>,
    step_ups: AtomicU32,
}

impl Session {
    pub fn client(&self) -> AuthClient<reqwest::Client> {
        self.client.clone()
    }
}

impl Login {
    async fn manager(&self, url: &str) -> Result<AuthorizationManager, OAuthError> {
        let mut manager = AuthorizationManager::new(url).await?;
        manager.set_credential_store(Credentials {
            store: self.store.clone(),
            server: self.server.clone(),
            url: url.to_string(),
        });
        Ok(manager)
    }

    /// The session of a server: with its stored tokens, or those of the client-credentials
    /// grant; with neither, an empty one (requests go out without a token, and a 401 says
    /// what the server wants).
    pub async fn session(
        &self,
        url: &str,
        http: &reqwest::Client,
    ) -> Result<Arc<Session>, OAuthError> {
        let mut manager = self.manager(url).await?;
        let stored = self.store.load(&self.server, url)?.is_some();
        if stored {
            // A failure (an unreachable authorization server) leaves the session empty.
            let _ = manager.initialize_from_store().await;
        } else if self.settings.grant == Grant::ClientCredentials {
            manager = self.client_credentials(url).await?;
        } else if self.settings.grant == Grant::EnterpriseManaged {
            manager = self.enterprise_managed(url).await?;
        }
        Ok(Arc::new(Session {
            client: AuthClient::new(http.clone(), manager),
            step_ups: Default::default(),
        }))
    }

    async fn client_credentials(&self, url: &str) -> Result<AuthorizationManager, OAuthError> {
        if let (Some(id), Some(key)) = (&self.settings.client_id, &self.settings.private_key_file) {
            return self.client_credentials_jwt(url, id, key).await;
        }
        let (Some(id), Some(secret)) = (&self.settings.client_id, &self.settings.client_secret)
        else {
            return Err(OAuthError::Sdk(
                "the client-credentials grant needs the entry's oauth.clientId and oauth.clientSecret".into(),
            ));
        };
        let mut state = OAuthState::Unauthorized(self.manager(url).await?);
        state
            .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
                client_id: id.clone(),
                client_secret: secret.clone(),
                scopes: self.settings.scopes.clone(),
                resource: Some(url.to_string()),
            })
            .await?;
        state
            .into_authorization_manager()
            .ok_or_else(|| OAuthError::Sdk("the client-credentials grant gave no token".into()))
    }

    /// The client-credentials grant authenticated with a signed assertion (RFC 7523,
    /// `private_key_jwt`, ES256): the token endpoint and issuer from the server's metadata, the
    /// assertion signed with the entry's key (ring), the token handed to the SDK's manager.
    async fn client_credentials_jwt(
        &self,
        url: &str,
        client_id: &str,
        key_file: &Path,
    ) -> Result<AuthorizationManager, OAuthError> {
        // Read first, through the one reader of the user's files (a regular file outside the
        // kernel's folders, bounded): without it nothing is asked of any server.
        let pem = project_file::read_own(key_file, MAX_KEY_FILE_BYTES)
            .map_err(|e| OAuthError::Sdk(format!("the key: {e}")))?
            .ok_or_else(|| OAuthError::Sdk(format!("there is no key at {}", key_file.display())))?
            .whole_text(key_file, MAX_KEY_FILE_BYTES)
            .map_err(|e| OAuthError::Sdk(format!("the key: {e}")))?;
        let manager = self.manager(url).await?;
        let metadata = manager.resolve_metadata().await?.metadata;
        let audience = metadata
            .issuer
            .clone()
            .unwrap_or_else(|| metadata.token_endpoint.clone());
        let assertion = es256_assertion(&pem, client_id, &audience)?;
        let mut form = vec![
            ("grant_type", "client_credentials".to_string()),
            ("client_id", client_id.to_string()),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_string(),
            ),
            ("client_assertion", assertion),
            ("resource", url.to_string()),
        ];
        if !self.settings.scopes.is_empty() {
            form.push(("scope", self.settings.scopes.join(" ")));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", form_escape(v)))
            .collect::<Vec<_>>()
            .join("&");
        let http = http::builder()
            .redirect(Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| OAuthError::Sdk(e.to_string()))?;
        let response = http
            .post(&metadata.token_endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| OAuthError::Sdk(http::describe_error(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| OAuthError::Sdk(http::describe_error(&e)))?;
        if !status.is_success() {
            // The error code only: the rest of the body is the server's.
            let code = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_default();
            return Err(OAuthError::Sdk(format!(
                "the token endpoint refused the client's assertion ({status} {})",
                escape::escape_controls(&code)
            )));
        }
        let token: OAuthTokenResponse = serde_json::from_slice(&bytes)
            .map_err(|e| OAuthError::Sdk(format!("the token endpoint's answer: {e}")))?;
        let mut state = OAuthState::Unauthorized(manager);
        state.set_credentials(client_id, token).await?;
        state
            .into_authorization_manager()
            .ok_or_else(|| OAuthError::Sdk("the client-credentials grant gave no token".into()))
    }

    /// Enterprise-managed authorization: the ID token exchanged at the identity provider for an
    /// ID-JAG bound to this server's authorization server and resource, redeemed there for an
    /// access token, handed to the SDK's manager. No browser step; a failure names the stage.
    async fn enterprise_managed(&self, url: &str) -> Result<AuthorizationManager, OAuthError> {
        use rmcp::transport::auth::enterprise::{
            EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
        };
        let (Some(client_id), Some(idp)) = (&self.settings.client_id, &self.settings.idp) else {
            return Err(OAuthError::Sdk(
                "the enterprise-managed grant needs the entry's oauth.clientId and oauth.idp"
                    .into(),
            ));
        };
        // Read first: without it nothing is asked of any server.
        let shown = idp.id_token_file.display();
        let id_token = project_file::read_own(&idp.id_token_file, MAX_ID_TOKEN_BYTES)
            .map_err(|e| OAuthError::Sdk(format!("the ID token: {e}")))?
            .ok_or_else(|| OAuthError::Sdk(format!("there is no ID token at {shown}")))?
            .text();
        let manager = self.manager(url).await?;
        let metadata = manager.resolve_metadata().await?.metadata;
        let issuer = metadata
            .issuer
            .clone()
            .unwrap_or_else(|| metadata.token_endpoint.clone());
        let secret = |s: &Option<String>| match s {
            Some(s) => {
                EmaClientAuthentication::ClientSecretBasic(oauth2::ClientSecret::new(s.clone()))
            }
            None => EmaClientAuthentication::None,
        };
        let resource_as = EmaAuthorizationServer::new(issuer, &metadata.token_endpoint, client_id)
            .with_client_authentication(secret(&self.settings.client_secret));
        let idp_server =
            EmaAuthorizationServer::new(&idp.issuer, &idp.token_endpoint, &idp.client_id)
                .with_client_authentication(secret(&idp.client_secret));
        let mut request =
            EmaExchangeRequest::new_with_id_token(idp_server, resource_as, url, id_token.trim());
        if !self.settings.scopes.is_empty() {
            request = request.with_scopes(self.settings.scopes.iter().cloned());
        }
        http::install_crypto_provider();
        let http = auth::default_oauth_http_client()?;
        let token = request
            .exchange(&http, &http)
            .await
            .map_err(|e| OAuthError::Sdk(format!("the enterprise-managed exchange failed: {e}")))?;
        let mut answer = serde_json::json!({
            "access_token": token.access_token.secret(),
            "token_type": "Bearer",
        });
        if let Some(expires) = token.expires_in {
            answer["expires_in"] = expires.as_secs().into();
        }
        if !token.scopes.is_empty() {
            let mut scopes: Vec<&String> = token.scopes.iter().collect();
            scopes.sort();
            answer["scope"] = scopes
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
                .into();
        }
        let token: OAuthTokenResponse = serde_json::from_value(answer)
            .map_err(|e| OAuthError::Sdk(format!("the exchanged token: {e}")))?;
        let mut state = OAuthState::Unauthorized(manager);
        state.set_credentials(client_id, token).await?;
        state
            .into_authorization_manager()
            .ok_or_else(|| OAuthError::Sdk("the enterprise-managed grant gave no token".into()))
    }

    /// Authorizes anew for `challenge` (a 401's or a 403's `WWW-Authenticate`) and puts the
    /// new authorization into `session`.
    pub async fn authorize(
        &self,
        url: &str,
        session: &Session,
        challenge: Option<&str>,
    ) -> Result<(), OAuthError> {
        if challenge.is_some_and(|c| c.contains("insufficient_scope")) {
            let n = session.step_ups.fetch_add(1, Ordering::SeqCst) + 1;
            if n > MAX_STEP_UPS {
                return Err(OAuthError::TooManyStepUps(MAX_STEP_UPS));
            }
        }
        let manager = if self.settings.grant == Grant::ClientCredentials {
            self.client_credentials(url).await?
        } else if self.settings.grant == Grant::EnterpriseManaged {
            self.enterprise_managed(url).await?
        } else {
            self.browser_step(url, challenge).await?
        };
        *session.client.auth_manager.lock().await = manager;
        Ok(())
    }

    /// The authorization code flow: the URL said (and opened), the redirect received on a
    /// loopback port, the code exchanged, the tokens stored.
    async fn browser_step(
        &self,
        url: &str,
        challenge: Option<&str>,
    ) -> Result<AuthorizationManager, OAuthError> {
        if !self.browser || !browser_reachable() {
            return Err(OAuthError::Browser(format!(
                "the server `{}` needs an OAuth authorization and there is no browser or terminal here (run `/mcp login {}` in the REPL, or give the entry a client-credentials grant)",
                self.server, self.server
            )));
        }
        let listener = TcpListener::bind(("127.0.0.1", self.settings.callback_port))
            .await
            .map_err(|e| OAuthError::Browser(format!("cannot listen on a loopback port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError::Browser(e.to_string()))?
            .port();
        let redirect = format!("http://127.0.0.1:{port}/callback");
        let mut request = AuthorizationRequest::new(&redirect).with_client_name("new");
        if let Some(id) = &self.settings.client_id {
            request = request.with_preregistered_client(id);
            if let Some(secret) = &self.settings.client_secret {
                request = request.with_client_secret(secret);
            }
        }
        if let Some(cimd) = self.settings.client_metadata.url() {
            request = request.with_client_metadata_url(cimd);
        }
        if !self.settings.scopes.is_empty() {
            request = request.with_scopes(self.settings.scopes.iter().map(String::as_str));
        }
        if let Some(c) = challenge {
            request = request.with_challenge(c);
        }
        let mut state = OAuthState::Unauthorized(self.manager(url).await?);
        state.start_authorization(request).await?;
        let address = state.get_authorization_url().await?;
        (self.say)(&format!(
            "{}: open this address to authorize new: {}",
            self.server,
            escape::escape_controls(&address)
        ));
        open_browser(&address);
        let (code, csrf, issuer) = time::timeout(BROWSER_WAIT, receive_redirect(&listener))
            .await
            .map_err(|_| OAuthError::Timeout(BROWSER_WAIT.as_secs()))??;
        state
            .handle_callback_with_issuer(&code, &csrf, issuer.as_deref())
            .await?;
        state
            .into_authorization_manager()
            .ok_or_else(|| OAuthError::Sdk("the authorization gave no token".into()))
    }
}

/// Whether someone can take the browser step: a terminal to read the address on, a `$BROWSER`,
/// or a desktop. Without any (a job in CI) the authorization fails at once instead of waiting.
fn browser_reachable() -> bool {
    use std::io::IsTerminal;
    io::stderr().is_terminal()
        || env::var_os("BROWSER").is_some_and(|b| !b.is_empty())
        || env::var_os("DISPLAY").is_some()
        || env::var_os("WAYLAND_DISPLAY").is_some()
}

/// Opens `address` in the user's browser: `$BROWSER`, else `xdg-open` on a desktop. Nothing
/// when there is neither (the URL was said).
fn open_browser(address: &str) {
    let command = match env::var("BROWSER") {
        Ok(b) if !b.trim().is_empty() => b,
        _ if env::var_os("DISPLAY").is_some() || env::var_os("WAYLAND_DISPLAY").is_some() => {
            "xdg-open".to_string()
        }
        _ => return,
    };
    let _ = Command::new(command)
        .arg(address)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// Waits for the browser's GET of the redirect; its code, state and issuer.
async fn receive_redirect(
    listener: &TcpListener,
) -> Result<(String, String, Option<String>), OAuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| OAuthError::Browser(e.to_string()))?;
        let mut buf = vec![0u8; 16 * 1024];
        let mut len = 0;
        // The request line and headers; the rest is not needed.
        while len < buf.len() {
            let read = time::timeout(Duration::from_secs(10), stream.read(&mut buf[len..]))
                .await
                .map_err(|_| OAuthError::Browser("the browser's request stalled".into()))?
                .map_err(|e| OAuthError::Browser(e.to_string()))?;
            if read == 0 {
                break;
            }
            len += read;
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_default();
        let Some(query) = target.strip_prefix("/callback?").map(str::to_string) else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let params = parse_query(&query);
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (body, result) = match (get("code"), get("state"), get("error")) {
            (Some(code), Some(state), None) => (
                "new is authorized. You can close this tab.",
                Ok((code, state, get("iss"))),
            ),
            (_, _, error) => (
                "The authorization failed. You can close this tab.",
                Err(OAuthError::Denied(escape::escape_controls(
                    &error.unwrap_or_else(|| "no code".into()),
                ))),
            ),
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        return result;
    }
}

/// A value of an `application/x-www-form-urlencoded` body.
fn form_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// A client assertion (RFC 7523): a JWT from `client_id` to `audience`, valid five minutes,
/// signed ES256 with the PKCS#8 P-256 key in `pem`.
fn es256_assertion(pem: &str, client_id: &str, audience: &str) -> Result<String, OAuthError> {
    use base64::Engine as _;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .concat();
    let der = STANDARD
        .decode(body.trim())
        .map_err(|_| OAuthError::Sdk("the private key is not a PEM file".into()))?;
    let rng = SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|_| OAuthError::Sdk("the private key is not a PKCS#8 P-256 key".into()))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": uuid::Uuid::new_v4().to_string(),
    });
    let signing_input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = key
        .sign(&rng, signing_input.as_bytes())
        .map_err(|_| OAuthError::Sdk("signing the client's assertion failed".into()))?;
    Ok(format!("{signing_input}.{}", b64(signature.as_ref())))
}

/// `a=1&b=x%20y` as pairs, percent-decoded (`+` is a space).
fn parse_query(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                    match u8::from_str_radix(hex, 16) {
                        Ok(b) => {
                            out.push(b);
                            i += 2;
                        }
                        Err(_) => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::rand::SystemRandom;
    use std::fs;
    #[cfg(all(not(windows), not(target_os = "macos")))]
    use std::fs::File;
    use std::path::Path;
    use tokio::runtime::Builder;

    /// A scripted authorization server at `base` for its own MCP server (`{base}/mcp`): its two
    /// discovery documents; a test adds the routes it plays.
    fn discovery<S: Clone + Send + Sync + 'static>(base: &str) -> axum::Router<S> {
        use axum::routing::get;
        use serde_json::json;
        let resource = json!({"resource": format!("{base}/mcp"),
            "authorization_servers": [base]});
        let server = json!({"issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "response_types_supported": ["code"]});
        axum::Router::new()
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(move || async move { axum::Json(resource) }),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(move || async move { axum::Json(server) }),
            )
    }

    fn enterprise_login(dir: &Path, id_token_file: PathBuf) -> Login {
        Login {
            server: "corp".into(),
            settings: Settings {
                client_id: Some("mcp-client".into()),
                grant: Grant::EnterpriseManaged,
                idp: Some(IdpSettings {
                    issuer: "https://idp.invalid".into(),
                    token_endpoint: "https://idp.invalid/token".into(),
                    client_id: "idp-client".into(),
                    client_secret: None,
                    id_token_file,
                }),
                ..Settings::default()
            },
            store: TokenStore::in_dir(&dir.join("new")),
            say: Arc::new(|_| {}),
            browser: false,
        }
    }

    /// The document published with the book is the one `new` names: its `client_id` is its own
    /// address, and it allows the redirect `new` listens on (a loopback port, any one: RFC 8252
    /// §7.3) as a public client.
    #[test]
    fn the_published_client_metadata_document_names_itself_and_new_s_redirect() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../../docs/src/client-metadata.json"))
                .unwrap();
        assert_eq!(doc["client_id"], CLIENT_METADATA_URL);
        assert_eq!(doc["client_name"], "new");
        assert_eq!(doc["token_endpoint_auth_method"], "none");
        assert_eq!(doc["application_type"], "native");
        let redirects: Vec<&str> = doc["redirect_uris"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        assert!(redirects.contains(&"http://127.0.0.1/callback"), "{doc}");
        assert!(CLIENT_METADATA_URL.starts_with("https://"));
        // Off unless an entry names it (the project does not control that host yet).
        assert_eq!(Settings::default().client_metadata.url(), None);
        assert_eq!(ClientMetadata::Off.url(), None);
    }

    #[test]
    fn an_enterprise_login_without_its_id_token_says_where_it_looked_and_asks_no_server() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("id-token");
        let login = enterprise_login(dir.path(), missing.clone());
        let runtime = Builder::new_current_thread().enable_all().build().unwrap();
        // An unroutable server: reaching it would fail differently (or hang), not name the file.
        let err = runtime
            .block_on(login.enterprise_managed("http://192.0.2.1:9/mcp"))
            .err()
            .expect("no ID token, no login");
        assert_eq!(
            err.to_string(),
            format!("OAuth: there is no ID token at {}", missing.display()),
        );
        // A folder where the file should be is refused, and still nothing is asked.
        fs::create_dir(&missing).unwrap();
        let err = runtime
            .block_on(login.enterprise_managed("http://192.0.2.1:9/mcp"))
            .err()
            .expect("a folder is not an ID token");
        // (Windows refuses to open a folder as a file: "access denied", said with the path.)
        let said = err.to_string();
        assert!(
            said.starts_with("OAuth: the ID token: ")
                && said.contains(&missing.display().to_string())
                && (cfg!(windows) || said.ends_with("it is not a regular file")),
            "{err}"
        );
        assert!(!login.store.path().exists(), "nothing stored");
    }

    /// Issue 41 (1): a key file of the kernel's (`/proc/self/environ`), or one larger than a key,
    /// is refused before any server is asked (the read used to be whole and unbounded).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_signing_key_is_read_bounded_and_never_from_the_kernels_folders() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.pem");
        File::create(&big)
            .unwrap()
            .set_len(MAX_KEY_FILE_BYTES as u64 + 1)
            .unwrap();
        let runtime = Builder::new_current_thread().enable_all().build().unwrap();
        let login = enterprise_login(dir.path(), dir.path().join("unused"));
        for (key, said) in [
            (
                PathBuf::from("/proc/self/environ"),
                "it is in /proc, the kernel's",
            ),
            (big.clone(), "is larger than 65536 bytes"),
            (dir.path().join("missing.pem"), "there is no key at"),
        ] {
            let err = runtime
                .block_on(login.client_credentials_jwt("http://192.0.2.1:9/mcp", "c", &key))
                .err()
                .expect("refused");
            assert!(err.to_string().contains(said), "{err}");
        }
        assert!(!login.store.path().exists(), "nothing stored");
    }

    fn credentials(token: &str) -> StoredCredentials {
        serde_json::from_value(serde_json::json!({
            "client_id": "c1",
            "token_response": {"access_token": token, "token_type": "bearer", "expires_in": 3600},
            "granted_scopes": ["read"],
            "token_received_at": 1,
        }))
        .unwrap()
    }

    #[test]
    fn the_store_is_private_and_keyed_by_server_and_url() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_dir(&dir.path().join("new"));
        store
            .save(
                "gh",
                "https://a.example/mcp",
                &credentials("secret-token-1"),
            )
            .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(store.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(store.load("gh", "https://a.example/mcp").unwrap().is_some());
        // The same name at another URL gets nothing: a token goes to the server it was for.
        assert!(store.load("gh", "https://b.example/mcp").unwrap().is_none());
        assert!(store.remove("gh").unwrap());
        assert!(!store.remove("gh").unwrap());
        assert!(store.load("gh", "https://a.example/mcp").unwrap().is_none());
        // No file but the store holds the token.
        for entry in fs::read_dir(dir.path().join("new")).unwrap() {
            let path = entry.unwrap().path();
            assert_eq!(path, store.path(), "a stray file {path:?}");
        }
    }

    /// The assertion is a JWT from the client to the audience whose ES256 signature the key's
    /// public half verifies.
    #[test]
    fn client_assertions_are_signed_es256_jwts() {
        use base64::Engine as _;
        use ring::signature::{
            ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
            UnparsedPublicKey,
        };
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let b64 = STANDARD.encode(pkcs8.as_ref());
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        let jwt = es256_assertion(&pem, "client-7", "https://as.example").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let url = URL_SAFE_NO_PAD;
        let claims: serde_json::Value =
            serde_json::from_slice(&url.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-7");
        assert_eq!(claims["sub"], "client-7");
        assert_eq!(claims["aud"], "https://as.example");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key().as_ref());
        let signed = format!("{}.{}", parts[0], parts[1]);
        assert!(
            public
                .verify(signed.as_bytes(), &url.decode(parts[2]).unwrap())
                .is_ok()
        );
        assert!(es256_assertion("not a key", "c", "a").is_err());
        assert_eq!(form_escape("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
    }

    /// The signed client-credentials grant against a scripted authorization server on
    /// loopback: the form carries the assertion and the resource, and the scopes only when
    /// there are some; a refusal is said by its error code alone (never the server's own
    /// words); a token is handed over.
    #[test]
    fn the_signed_grant_posts_its_form_and_says_a_refusal_by_its_code() {
        use axum::extract::State;
        use axum::http::StatusCode;
        use axum::routing::post;
        use base64::Engine as _;
        use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

        http::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let key = dir.path().join("key.pem");
        fs::write(
            &key,
            format!(
                "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
                STANDARD.encode(pkcs8.as_ref())
            ),
        )
        .unwrap();
        let runtime = Builder::new_current_thread().enable_all().build().unwrap();
        let forms: Arc<Mutex<Vec<String>>> = Default::default();
        let base = runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let app = discovery(&base)
                .route(
                    "/token",
                    post(
                        |State(forms): State<Arc<Mutex<Vec<String>>>>, body: String| async move {
                            let mut forms = forms.lock().unwrap();
                            forms.push(body);
                            if forms.len() == 1 {
                                let refusal = r#"{"error":"invalid_client","error_description":"\u001b[2J trust me"}"#;
                                (StatusCode::BAD_REQUEST, refusal)
                            } else {
                                let token = r#"{"access_token":"at-1","token_type":"Bearer","expires_in":3600}"#;
                                (StatusCode::OK, token)
                            }
                        },
                    ),
                )
                .with_state(forms.clone());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            base
        });
        let url = format!("{base}/mcp");
        let mut login = enterprise_login(dir.path(), dir.path().join("unused"));
        login.settings.scopes = vec!["tools".into(), "read".into()];
        let err = runtime
            .block_on(login.client_credentials_jwt(&url, "c-1", &key))
            .err()
            .expect("refused");
        assert_eq!(
            err.to_string(),
            "OAuth: the token endpoint refused the client's assertion (400 Bad Request invalid_client)"
        );
        login.settings.scopes.clear();
        runtime
            .block_on(login.client_credentials_jwt(&url, "c-1", &key))
            .expect("a token");
        let forms = forms.lock().unwrap().clone();
        assert_eq!(forms.len(), 2, "{forms:?}");
        for form in &forms {
            for part in [
                "grant_type=client_credentials".to_string(),
                "client_id=c-1".into(),
                "client_assertion=ey".into(),
                format!("resource={}", form_escape(&url)),
            ] {
                assert!(form.contains(&part), "{part}: {form}");
            }
        }
        assert!(forms[0].ends_with("&scope=tools+read"), "{}", forms[0]);
        assert!(!forms[1].contains("scope="), "{}", forms[1]);
    }

    /// The enterprise-managed grant against a scripted identity provider and authorization
    /// server on loopback: the ID token read from the user's own file goes to the IdP (and
    /// nowhere else), with the entry's scopes only when it has some; the scopes the server
    /// granted are kept with the token.
    #[test]
    fn the_enterprise_exchange_sends_the_id_token_file_and_keeps_the_granted_scopes() {
        use axum::extract::State;
        use axum::routing::post;
        use base64::Engine as _;
        use oauth2::TokenResponse as _;
        use serde_json::json;

        http::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let id_token = dir.path().join("id-token");
        fs::write(&id_token, "eyJ.the-users-id-token.sig\n").unwrap();
        let runtime = Builder::new_current_thread().enable_all().build().unwrap();
        // (path, form) of every token request, in order.
        type Seen = Arc<Mutex<Vec<(String, String)>>>;
        let seen: Seen = Default::default();
        let base = runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let issuer = base.clone();
            let app = discovery(&base)
                .route(
                    "/idp/token",
                    post(move |State(seen): State<Seen>, body: String| async move {
                        seen.lock().unwrap().push(("idp".into(), body.clone()));
                        let scope = parse_query(&body)
                            .into_iter()
                            .find(|(k, _)| k == "scope")
                            .map(|(_, v)| v);
                        let now = SystemTime::now()
                            .duration_since(UNIX_EPOCH)
                            .unwrap()
                            .as_secs();
                        let part = |v: serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
                        let mut claims = json!({"iss": format!("{issuer}/idp"), "sub": "u",
                            "aud": issuer, "client_id": "mcp-client", "jti": "j",
                            "exp": now + 300, "iat": now});
                        if let Some(scope) = &scope {
                            claims["scope"] = scope.clone().into();
                        }
                        let jag = format!(
                            "{}.{}.{}",
                            part(json!({"alg": "ES256", "typ": "oauth-id-jag+jwt"})),
                            part(claims),
                            URL_SAFE_NO_PAD.encode("sig")
                        );
                        axum::Json(json!({"access_token": jag, "token_type": "N_A",
                            "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}))
                    }),
                )
                .route(
                    "/token",
                    post(|State(seen): State<Seen>, body: String| async move {
                        seen.lock().unwrap().push(("as".into(), body));
                        r#"{"access_token":"at-1","token_type":"Bearer","expires_in":3600}"#
                    }),
                )
                .with_state(seen.clone());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            base
        });
        let url = format!("{base}/mcp");
        let mut login = enterprise_login(dir.path(), id_token);
        let idp = login.settings.idp.as_mut().unwrap();
        idp.issuer = format!("{base}/idp");
        idp.token_endpoint = format!("{base}/idp/token");
        let granted = |login: &Login| {
            let manager = runtime
                .block_on(login.enterprise_managed(&url))
                .expect("a token");
            let (_, token) = runtime.block_on(manager.get_credentials()).unwrap();
            let token = token.expect("the token is kept");
            assert_eq!(token.access_token().secret(), "at-1");
            token
                .scopes()
                .map(|s| s.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        login.settings.scopes = vec!["tools".into(), "read".into()];
        assert_eq!(
            granted(&login),
            Some(vec!["read".to_string(), "tools".to_string()])
        );
        login.settings.scopes.clear();
        assert_eq!(granted(&login), None);
        let seen = seen.lock().unwrap().clone();
        let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["idp", "as", "idp", "as"], "{seen:?}");
        for (path, form) in &seen {
            let sent = form.contains("subject_token=eyJ.the-users-id-token.sig&")
                || form.ends_with("subject_token=eyJ.the-users-id-token.sig");
            assert_eq!(sent, path == "idp", "{path}: {form}");
        }
        assert!(seen[0].1.contains("scope=tools+read"), "{}", seen[0].1);
        assert!(!seen[2].1.contains("scope="), "{}", seen[2].1);
    }

    #[test]
    fn redirects_are_parsed_and_refusals_said_in_fixed_words() {
        assert_eq!(
            parse_query("code=a%2Fb&state=x+y&iss=https%3A%2F%2Fas"),
            vec![
                ("code".into(), "a/b".into()),
                ("state".into(), "x y".into()),
                ("iss".into(), "https://as".into())
            ]
        );
        assert_eq!(
            refused(r#"Bearer error="insufficient_scope", scope="a b""#),
            "the server refused the authorization (insufficient_scope)"
        );
        assert!(refused("Bearer resource_metadata=\"x\"").contains("/mcp login"));
        assert!(!refused("Bearer error=\"\u{1b}[2J\"").contains('\u{1b}'));
    }
}
