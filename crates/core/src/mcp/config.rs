//! The `mcp` config section (CodePilot's) and the project's `.mcp.json` (the file Claude Code,
//! Cursor and VS Code share), read leniently: an entry with a bad field is reported by name and
//! field and left out; the others load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::escape::escape_controls;
use crate::fs::project_file::ProjectFiles;
use crate::layers::Origin;
use crate::mcp::oauth::IdpSettings;
use crate::mcp::oauth::Settings;

/// How `new` talks to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        /// Claude Code's `headersHelper`: a command whose output (a JSON object of strings)
        /// adds headers at each connection, over the static ones.
        helper: Option<HeadersHelper>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadersHelper {
    pub command: String,
    /// The entry's name (`CLAUDE_CODE_MCP_SERVER_NAME` for the command).
    pub server: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// The longest a call may take.
    pub timeout: Duration,
    pub disabled: bool,
    /// Why it does not run although its file enables it (a project's server that passes a
    /// secret-looking variable on, not confirmed): said where failures are (`-p`'s
    /// `mcp_errors`, `/mcp`), not only at start-up.
    pub held: Option<String>,
    pub origin: Origin,
    /// `"sandbox": true|false` for a stdio server (a project's run inside the sandbox whatever
    /// it says).
    pub sandbox: Option<bool>,
    /// `"network": true`: inside the sandbox, the network is on.
    pub network: bool,
    /// The entry as written (`${…}` not expanded), for the trust question.
    pub raw: String,
    /// The variables it references (`${NAME}`), as written.
    pub references: Vec<String>,
    /// Tools of the server never offered (`disabledTools`).
    pub disabled_tools: Vec<String>,
    /// Tools of the server run without a question (`alwaysAllow`); a deny rule still wins.
    pub always_allow: Vec<String>,
    /// The entry's `oauth` object (an http server's client, scopes and grant).
    pub oauth: Settings,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSettings {
    pub servers: Vec<ServerConfig>,
    pub handshake_timeout: Duration,
    pub list_tools_ttl: Duration,
    /// The project's entries as read (the config's section and `.mcp.json`), for the trust
    /// question: trusting is of exactly this text.
    pub project_entries: Option<String>,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            servers: Vec::new(),
            handshake_timeout: Duration::from_secs(30),
            list_tools_ttl: Duration::from_secs(60),
            project_entries: None,
        }
    }
}

/// The largest `.mcp.json` read.
const MAX_MCP_JSON_BYTES: usize = 1024 * 1024;

/// The keys of an `mcp.servers` entry.
const SERVER_KEYS: &[&str] = &[
    "name",
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "headersHelper",
    "timeout",
    "disabled",
    "disabledTools",
    "alwaysAllow",
    "sandbox",
    "network",
    "oauth",
];

/// The keys of an entry's `oauth` object.
const OAUTH_KEYS: &[&str] = &[
    "clientId",
    "clientSecret",
    "scopes",
    "grant",
    "callbackPort",
    "clientMetadataUrl",
    "privateKeyFile",
    "idp",
];

/// Keys peers write in `.mcp.json` that mean nothing here but describe (never change) what runs.
const DESCRIPTIVE_KEYS: &[&str] = &["description", "$schema"];

/// Builds the settings from each config file's `mcp` section (farthest first) and the project's
/// `.mcp.json`; what cannot be used is said in `warnings`, naming the file, the entry and the
/// field. A nearer entry replaces a farther one of the same name.
pub fn settings(
    sections: &[(Origin, PathBuf, Value)],
    workdir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> McpSettings {
    let mut out = McpSettings::default();
    let mut project = serde_json::Map::new();
    let mut by_name: BTreeMap<String, ServerConfig> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut add = |server: ServerConfig| {
        if !order.contains(&server.name) {
            order.push(server.name.clone());
        }
        by_name.insert(server.name.clone(), server);
    };
    for (origin, path, section) in sections {
        let Some(section) = section.as_object() else {
            warnings.push(format!(
                "`mcp` in {} must be an object; ignored",
                path.display()
            ));
            continue;
        };
        let seconds =
            |key: &str, default: Duration, warnings: &mut Vec<String>| match section.get(key) {
                None => default,
                Some(v) => match v.as_u64().filter(|n| (1..=3600).contains(n)) {
                    Some(n) => Duration::from_secs(n),
                    None => {
                        warnings.push(format!(
                            "`mcp.{key}` in {} must be a number of seconds from 1 to 3600; {} used",
                            path.display(),
                            default.as_secs()
                        ));
                        default
                    }
                },
            };
        out.handshake_timeout =
            seconds("handshake_timeout_seconds", out.handshake_timeout, warnings);
        out.list_tools_ttl = seconds("list_tools_cache_ttl_seconds", out.list_tools_ttl, warnings);
        for key in section.keys() {
            if ![
                "servers",
                "handshake_timeout_seconds",
                "list_tools_cache_ttl_seconds",
            ]
            .contains(&key.as_str())
            {
                warnings.push(format!(
                    "unknown key `mcp.{key}` in {} is ignored",
                    path.display()
                ));
            }
        }
        let servers = match section.get("servers") {
            None => continue,
            Some(Value::Array(servers)) => servers,
            Some(_) => {
                warnings.push(format!(
                    "`mcp.servers` in {} must be a list; ignored",
                    path.display()
                ));
                continue;
            }
        };
        if *origin == Origin::Project {
            project.insert("config".into(), Value::Array(servers.clone()));
        }
        for (i, entry) in servers.iter().enumerate() {
            match server(entry, None, *origin, env) {
                Ok(s) => add(s),
                Err(e) => warnings.push(format!(
                    "mcp.servers[{i}] in {}: {e}; this server is left out",
                    path.display()
                )),
            }
        }
    }
    // The project's `.mcp.json`: `{"mcpServers": {NAME: {...}}}`.
    let file = workdir.join(".mcp.json");
    // Through the one reader of a project's files: not a link out of it, not a FIFO, bounded.
    let read = ProjectFiles::new(workdir)
        .read(&file, MAX_MCP_JSON_BYTES)
        .and_then(|r| match r {
            Some(r) => r.whole_text(&file, MAX_MCP_JSON_BYTES).map(Some),
            None => Ok(None),
        });
    match read {
        Ok(Some(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(value) => match value.get("mcpServers").and_then(Value::as_object) {
                Some(servers) => {
                    project.insert(".mcp.json".into(), Value::Object(servers.clone()));
                    for (name, entry) in servers {
                        // A key this reader does not know is said, never dropped silently.
                        if let Some(o) = entry.as_object() {
                            for k in o.keys().filter(|k| {
                                !SERVER_KEYS.contains(&k.as_str())
                                    && !DESCRIPTIVE_KEYS.contains(&k.as_str())
                            }) {
                                warnings.push(format!(
                                    "server `{name}` in {}: `{k}` is not used by new; ignored",
                                    file.display()
                                ));
                            }
                        }
                        match server(entry, Some(name), Origin::Project, env) {
                            Ok(s) => add(s),
                            Err(e) => warnings.push(format!(
                                "server `{name}` in {}: {e}; this server is left out",
                                file.display()
                            )),
                        }
                    }
                }
                None => warnings.push(format!(
                    "{} has no `mcpServers` object; ignored",
                    file.display()
                )),
            },
            Err(e) => warnings.push(format!(
                "{} is not valid JSON ({e}); ignored",
                file.display()
            )),
        },
        Ok(None) => {}
        Err(why) => warnings.push(format!("{why}; ignored")),
    }
    out.servers = order
        .into_iter()
        .filter_map(|n| by_name.remove(&n))
        .collect();
    if !project.is_empty() {
        out.project_entries = serde_json::to_string_pretty(&Value::Object(project)).ok();
    }
    out
}

/// One entry; the error names the field.
fn server(
    entry: &Value,
    key_name: Option<&str>,
    origin: Origin,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, String> {
    let Some(o) = entry.as_object() else {
        return Err("an entry must be an object".into());
    };
    if key_name.is_none()
        && let Some(k) = o.keys().find(|k| !SERVER_KEYS.contains(&k.as_str()))
    {
        return Err(format!("unknown field `{k}`"));
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{key}` must be a string")),
        }
    };
    let name = match key_name {
        Some(n) => n.to_string(),
        None => string("name")?.ok_or("`name` is required")?,
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(format!(
            "`name` {:?} must be letters, digits, `-`, `_` or `.`",
            name
        ));
    }
    let map = |key: &str| -> Result<BTreeMap<String, String>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), expand(s, env))),
                    _ => Err(format!("`{key}.{k}` must be a string")),
                })
                .collect(),
            Some(_) => Err(format!("`{key}` must be an object of strings")),
        }
    };
    let kind = string("type")?;
    let helper = string("headersHelper")?.map(|command| HeadersHelper {
        command,
        server: name.clone(),
    });
    let transport = match kind.as_deref() {
        Some("http") | Some("streamable-http") | Some("streamableHttp") => Transport::Http {
            url: expand(
                &string("url")?.ok_or("`url` is required for type http")?,
                env,
            ),
            headers: map("headers")?,
            helper: helper.clone(),
        },
        None if o.contains_key("url") && !o.contains_key("command") => Transport::Http {
            url: expand(&string("url")?.unwrap_or_default(), env),
            headers: map("headers")?,
            helper: helper.clone(),
        },
        None | Some("stdio") => Transport::Stdio {
            command: string("command")?.ok_or("`command` is required for type stdio")?,
            args: match o.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("`args` must be a list of strings")?,
                Some(_) => return Err("`args` must be a list of strings".into()),
            },
            env: map("env")?,
            cwd: string("cwd")?.map(PathBuf::from),
        },
        Some(other) => return Err(format!("`type` {other:?} must be stdio or http")),
    };
    if helper.is_some() && matches!(transport, Transport::Stdio { .. }) {
        return Err("`headersHelper` is for an http server".into());
    }
    let names = |key: &str| -> Result<Vec<String>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("`{key}` must be a list of tool names")),
            Some(_) => Err(format!("`{key}` must be a list of tool names")),
        }
    };
    if let Transport::Http { url, .. } = &transport
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(format!("`url` {url:?} must start with http:// or https://"));
    }
    let timeout = match o.get("timeout") {
        None | Some(Value::Null) => Duration::from_secs(600),
        Some(v) => match v.as_u64().filter(|n| (1..=86_400).contains(n)) {
            Some(n) => Duration::from_secs(n),
            None => return Err("`timeout` must be a number of seconds from 1 to 86400".into()),
        },
    };
    let flag = |key: &str| match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("`{key}` must be true or false")),
    };
    let oauth = oauth(o.get("oauth"), env)?;
    if o.contains_key("oauth") && matches!(transport, Transport::Stdio { .. }) {
        return Err("`oauth` is for an http server".into());
    }
    if origin == Origin::Project
        && let Transport::Http { url, .. } = &transport
        && let Some(refusal) = names_a_file(&oauth, url)
    {
        return Err(refusal);
    }
    // The document names the redirects an authorization server allows for the client ID: a
    // cloned repository must not pick it for the user's login.
    if origin == Origin::Project
        && let Some(document) = oauth.client_metadata.url()
    {
        return Err(format!(
            "`oauth.clientMetadataUrl`: a project's entry may not name a client ID metadata \
             document ({}); an entry of your own config (`mcp.servers` in the user's \
             config.json) may",
            escape_controls(document)
        ));
    }
    let raw = serde_json::to_string(entry).unwrap_or_default();
    Ok(ServerConfig {
        name,
        transport,
        timeout,
        disabled: flag("disabled")?.unwrap_or(false),
        held: None,
        origin,
        sandbox: flag("sandbox")?,
        network: flag("network")?.unwrap_or(false),
        references: references(&raw),
        raw,
        disabled_tools: names("disabledTools")?,
        always_allow: names("alwaysAllow")?,
        oauth,
    })
}

/// Why a project's entry is refused for naming a file that `new` itself would read and send out:
/// `new` reads such a file outside the sandbox, so a cloned repository could name the user's
/// environment or SSH key and have it posted to a server of its choice. Only the user's own
/// config may name files.
fn names_a_file(oauth: &Settings, url: &str) -> Option<String> {
    let own = "a project's entry may not name files; an entry of your own config \
               (`mcp.servers` in the user's config.json) may";
    if let Some(idp) = &oauth.idp {
        return Some(format!(
            "`oauth.idp.idTokenFile`: this server would read {} and send it to {}; {own}",
            escape_controls(&idp.id_token_file.to_string_lossy()),
            escape_controls(&idp.token_endpoint)
        ));
    }
    oauth.private_key_file.as_ref().map(|key| {
        format!(
            "`oauth.privateKeyFile`: this server would read {} and sign with it what goes to \
             the token endpoint of {}; {own}",
            escape_controls(&key.to_string_lossy()),
            escape_controls(url)
        )
    })
}

/// An entry's `oauth` object: `clientId`, `clientSecret` (`${VAR}` expanded), `scopes`,
/// `grant` (`authorization_code` or `client_credentials`), `callbackPort`, `clientMetadataUrl`,
/// `privateKeyFile` (the client-credentials grant signed with a key instead of a secret), `idp`
/// (the identity provider of the `enterprise_managed` grant).
fn oauth(value: Option<&Value>, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings, String> {
    use crate::mcp::oauth::{ClientMetadata, Grant, Settings};
    let o = match value {
        None | Some(Value::Null) => return Ok(Settings::default()),
        Some(Value::Object(o)) => o,
        Some(_) => return Err("`oauth` must be an object".into()),
    };
    if let Some(k) = o.keys().find(|k| !OAUTH_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown field `oauth.{k}`"));
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(expand(s, env))),
            Some(_) => Err(format!("`oauth.{key}` must be a string")),
        }
    };
    let scopes = match o.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("`oauth.scopes` must be a list of strings")?,
        Some(_) => return Err("`oauth.scopes` must be a list of strings".into()),
    };
    let grant = match string("grant")?.as_deref() {
        None | Some("authorization_code") => Grant::AuthorizationCode,
        Some("client_credentials") => Grant::ClientCredentials,
        Some("enterprise_managed") => Grant::EnterpriseManaged,
        Some(other) => {
            return Err(format!(
                "`oauth.grant` {other:?} must be authorization_code, client_credentials or enterprise_managed"
            ));
        }
    };
    let callback_port = match o.get("callbackPort") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .ok_or("`oauth.callbackPort` must be a port number")?,
    };
    let client_metadata = match o.get("clientMetadataUrl") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => ClientMetadata::Off,
        Some(Value::String(u)) if expand(u, env).starts_with("https://") => {
            ClientMetadata::Url(expand(u, env))
        }
        Some(_) => {
            return Err("`oauth.clientMetadataUrl` must be an https:// URL, or false".into());
        }
    };
    let settings = Settings {
        client_id: string("clientId")?,
        client_secret: string("clientSecret")?,
        scopes,
        grant,
        callback_port,
        client_metadata,
        private_key_file: string("privateKeyFile")?.map(PathBuf::from),
        idp: match o.get("idp") {
            None | Some(Value::Null) => None,
            Some(v) => Some(idp_settings(v, env)?),
        },
    };
    if grant == Grant::EnterpriseManaged && (settings.client_id.is_none() || settings.idp.is_none())
    {
        return Err(
            "`oauth.grant` enterprise_managed needs `clientId` and `idp` (issuer, tokenEndpoint, clientId, idTokenFile)"
                .into(),
        );
    }
    if grant == Grant::ClientCredentials
        && (settings.client_id.is_none()
            || (settings.client_secret.is_none() && settings.private_key_file.is_none()))
    {
        return Err(
            "`oauth.grant` client_credentials needs `clientId`, and `clientSecret` or `privateKeyFile`"
                .into(),
        );
    }
    Ok(settings)
}

/// An entry's `oauth.idp`: the organisation's identity provider of enterprise-managed
/// authorization (`issuer`, `tokenEndpoint`, `clientId`, optional `clientSecret`, and
/// `idTokenFile`: where the user's sign-in tool keeps their ID token, read at each exchange).
fn idp_settings(v: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<IdpSettings, String> {
    let o = v.as_object().ok_or("`oauth.idp` must be an object")?;
    for key in o.keys() {
        if ![
            "issuer",
            "tokenEndpoint",
            "clientId",
            "clientSecret",
            "idTokenFile",
        ]
        .contains(&key.as_str())
        {
            return Err(format!("`oauth.idp` has an unknown key `{key}`"));
        }
    }
    let string = |k: &str| -> Result<Option<String>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(expand(s, env))),
            Some(_) => Err(format!("`oauth.idp.{k}` must be a string")),
        }
    };
    let needed = |k: &str| string(k)?.ok_or_else(|| format!("`oauth.idp` needs `{k}`"));
    Ok(IdpSettings {
        issuer: needed("issuer")?,
        token_endpoint: needed("tokenEndpoint")?,
        client_id: needed("clientId")?,
        client_secret: string("clientSecret")?,
        id_token_file: PathBuf::from(needed("idTokenFile")?),
    })
}

/// The names of the variables `text` references as `${NAME}`, in order, once each.
pub fn references(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some((_, after)) = rest.split_once("${") {
        let Some((inner, tail)) = after.split_once('}') else {
            break;
        };
        // `${NAME:-default}` references NAME.
        let name = inner.split_once(":-").map_or(inner, |(name, _)| name);
        if !name.is_empty() && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
        rest = tail;
    }
    out
}

/// `${VAR}` from the environment (an unset variable expands to nothing); `$$` is not special.
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        match rest[at + 2..].find('}') {
            Some(end) => {
                let inner = &rest[at + 2..at + 2 + end];
                // `${NAME:-default}`: the default when NAME is unset or empty (as Claude Code
                // and the shell read it).
                let (name, default) = match inner.split_once(":-") {
                    Some((name, default)) => (name, Some(default)),
                    None => (inner, None),
                };
                if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() {
                    let value = env(name).filter(|v| !v.is_empty() || default.is_none());
                    out.push_str(&value.or(default.map(str::to_string)).unwrap_or_default());
                } else {
                    out.push_str(&rest[at..at + 3 + end]);
                }
                rest = &rest[at + 3 + end..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "HOST" => Some("example.com".into()),
            _ => None,
        }
    }

    #[test]
    fn entries_from_both_files_load_bad_ones_are_named_and_left_out() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "fs"], "env": {"K": "${TOKEN}"}},
                "web": {"type": "http", "url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "bad": {"command": 3}}}"#,
        )
        .unwrap();
        let user = json!({"servers": [
            {"name": "time", "command": "mcp-server-time", "timeout": 5},
            {"name": "files", "command": "old"},
            {"name": "x", "command": "y", "colour": "red"},
            {"command": "nameless"},
            {"name": "h", "type": "http"}
        ], "handshake_timeout_seconds": 10});
        let mut warnings = Vec::new();
        let s = settings(
            &[(Origin::User, PathBuf::from("/u/config.json"), user)],
            dir.path(),
            &env,
            &mut warnings,
        );
        let names: Vec<&str> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["time", "files", "web"]);
        assert_eq!(s.handshake_timeout, Duration::from_secs(10));
        assert_eq!(s.servers[0].timeout, Duration::from_secs(5));
        assert_eq!(s.servers[0].origin, Origin::User);
        // The project's `files` replaced the user's, and came with its origin.
        assert_eq!(s.servers[1].origin, Origin::Project);
        assert_eq!(
            s.servers[1].transport,
            Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "fs".into()],
                env: [("K".to_string(), "s3cret".to_string())].into(),
                cwd: None
            }
        );
        assert_eq!(
            s.servers[2].transport,
            Transport::Http {
                url: "https://example.com/mcp".into(),
                headers: [("Authorization".to_string(), "Bearer s3cret".to_string())].into(),
                helper: None,
            }
        );
        let said = warnings.join("\n");
        for part in [
            "mcp.servers[2] in /u/config.json: unknown field `colour`",
            "mcp.servers[3] in /u/config.json: `name` is required",
            "mcp.servers[4] in /u/config.json: `url` is required for type http",
            "server `bad` in",
            "`command` must be a string",
        ] {
            assert!(said.contains(part), "{part}: {said}");
        }
        assert!(s.project_entries.unwrap().contains("npx"));
    }

    /// An http entry's `oauth` object is read (its `${VAR}` expanded); one on a stdio entry, an
    /// unknown key, or a client-credentials grant without a secret or a key is refused, named.
    #[test]
    fn an_oauth_object_is_read_and_bad_ones_refused() {
        use crate::mcp::oauth::Grant;
        let s = oauth_entry(
            json!({"clientId": "c", "clientSecret": "${TOKEN}", "scopes": "read write",
            "grant": "client_credentials", "callbackPort": 8976}),
            Origin::User,
        )
        .unwrap();
        assert_eq!(s.oauth.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(s.oauth.scopes, ["read", "write"]);
        assert_eq!(s.oauth.grant, Grant::ClientCredentials);
        assert_eq!(s.oauth.callback_port, 8976);
        let s = oauth_entry(
            json!({"clientId": "c", "grant": "enterprise_managed", "idp": {
            "issuer": "https://idp.example", "tokenEndpoint": "https://idp.example/token",
            "clientId": "i", "clientSecret": "${TOKEN}", "idTokenFile": "/run/me/id-token"}}),
            Origin::User,
        )
        .unwrap();
        assert_eq!(s.oauth.grant, Grant::EnterpriseManaged);
        let idp = s.oauth.idp.unwrap();
        assert_eq!(idp.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(idp.id_token_file, Path::new("/run/me/id-token"));
        assert_eq!(idp.token_endpoint, "https://idp.example/token");
        for (bad, said) in [
            (
                json!({"grant": "enterprise_managed", "clientId": "c"}),
                "enterprise_managed needs `clientId` and `idp`",
            ),
            (
                json!({"idp": {"issuer": "i", "tokenEndpoint": "t", "clientId": "c"}}),
                "`oauth.idp` needs `idTokenFile`",
            ),
            (
                json!({"idp": {"issuer": "i", "idToken": "x"}}),
                "`oauth.idp` has an unknown key `idToken`",
            ),
            (json!({"clientID": "c"}), "unknown field `oauth.clientID`"),
            (
                json!({"grant": "client_credentials", "clientId": "c"}),
                "needs `clientId`",
            ),
            (
                json!({"grant": "password"}),
                "must be authorization_code, client_credentials or enterprise_managed",
            ),
            (
                json!({"clientMetadataUrl": "http://x"}),
                "must be an https:// URL",
            ),
        ] {
            let e = oauth_entry(bad, Origin::User).unwrap_err();
            assert!(e.contains(said), "{e}");
        }
        let e = server(
            &json!({"name": "s", "command": "x", "oauth": {}}),
            None,
            Origin::User,
            &env,
        )
        .unwrap_err();
        assert!(e.contains("`oauth` is for an http server"), "{e}");
    }

    /// An http entry named `d` with `oauth` as given, from `origin`.
    fn oauth_entry(oauth: serde_json::Value, origin: Origin) -> Result<ServerConfig, String> {
        server(
            &json!({"name": "d", "url": "https://d.example/mcp", "oauth": oauth}),
            None,
            origin,
            &env,
        )
    }

    /// Issue 41 (1): a project's entry that names a file `new` would read and send (the ID token
    /// of an enterprise-managed grant, the key of a signed client-credentials grant) is
    /// refused, saying the file and where it would go; the user's own entry may name them, and
    /// a project's entry that names none is kept.
    #[test]
    fn a_projects_entry_may_not_name_files_and_the_users_may() {
        let enterprise = json!({"clientId": "c", "grant": "enterprise_managed", "idp": {
            "issuer": "https://idp.example", "tokenEndpoint": "http://127.0.0.1:9/idp/token",
            "clientId": "i", "idTokenFile": "/proc/self/environ"}});
        let signed = json!({"clientId": "c", "grant": "client_credentials",
            "privateKeyFile": "/home/u/.ssh/id_rsa"});
        assert_eq!(
            oauth_entry(enterprise.clone(), Origin::Project).unwrap_err(),
            "`oauth.idp.idTokenFile`: this server would read /proc/self/environ and send it to \
             http://127.0.0.1:9/idp/token; a project's entry may not name files; an entry of \
             your own config (`mcp.servers` in the user's config.json) may"
        );
        assert_eq!(
            oauth_entry(signed.clone(), Origin::Project).unwrap_err(),
            "`oauth.privateKeyFile`: this server would read /home/u/.ssh/id_rsa and sign with it \
             what goes to the token endpoint of https://d.example/mcp; a project's entry may \
             not name files; an entry of your own config (`mcp.servers` in the user's \
             config.json) may"
        );
        // Both at once: the ID token is said (it is what would be sent whole).
        let mut both = enterprise.clone();
        both["privateKeyFile"] = json!("/k");
        assert!(
            oauth_entry(both, Origin::Project)
                .unwrap_err()
                .starts_with("`oauth.idp.idTokenFile`")
        );
        assert!(oauth_entry(enterprise, Origin::User).is_ok());
        assert!(oauth_entry(signed, Origin::User).is_ok());
        let secret = json!({"clientId": "c", "grant": "client_credentials", "clientSecret": "s"});
        assert!(oauth_entry(secret, Origin::Project).is_ok());
        // A path with a terminal's control characters is said escaped.
        let odd = json!({"clientId": "c", "grant": "client_credentials",
            "privateKeyFile": "/k\u{1b}[2J"});
        let e = oauth_entry(odd, Origin::Project).unwrap_err();
        assert!(!e.contains('\u{1b}'), "{e:?}");
    }

    /// The client ID metadata document is off unless the user's own entry names one: a
    /// project's entry that names one is refused (the document says where the authorization
    /// server may send the user's code), and `false` is the same as not naming one.
    #[test]
    fn only_the_users_entry_names_a_client_metadata_document_and_none_is_the_default() {
        use crate::mcp::oauth::ClientMetadata;
        let url = "https://org.example/new-client.json";
        let named = json!({"clientMetadataUrl": url});
        assert_eq!(
            oauth_entry(named.clone(), Origin::Project).unwrap_err(),
            "`oauth.clientMetadataUrl`: a project's entry may not name a client ID metadata \
             document (https://org.example/new-client.json); an entry of your own config \
             (`mcp.servers` in the user's config.json) may"
        );
        let user = oauth_entry(named, Origin::User).unwrap();
        assert_eq!(user.oauth.client_metadata, ClientMetadata::Url(url.into()));
        for (oauth, origin) in [
            (json!({}), Origin::User),
            (json!({}), Origin::Project),
            (json!({"clientMetadataUrl": false}), Origin::Project),
            (json!({"clientMetadataUrl": null}), Origin::User),
        ] {
            let s = oauth_entry(oauth, origin).unwrap();
            assert_eq!(s.oauth.client_metadata.url(), None);
        }
    }

    #[test]
    fn variables_expand_and_odd_text_stays() {
        assert_eq!(expand("a${TOKEN}b${NOPE}c", &env), "as3cretbc");
        assert_eq!(expand("${not a name} ${open", &env), "${not a name} ${open");
        assert_eq!(expand("$TOKEN", &env), "$TOKEN");
    }

    /// Every `${NAME}` once, in order; an empty or unclosed one is no reference.
    #[test]
    fn references_are_found_once_each() {
        assert_eq!(
            references("a ${X} ${}b${Y}c ${X} ${W:-w} ${Z"),
            vec!["X".to_string(), "Y".to_string(), "W".to_string()]
        );
        assert_eq!(
            references("${GITHUB_TOKEN:-}"),
            vec!["GITHUB_TOKEN".to_string()]
        );
        assert!(references("no braces $X").is_empty());
    }

    /// `${NAME:-default}`: NAME's value, or the default when it is unset or empty.
    #[test]
    fn a_default_stands_in_for_an_unset_or_empty_variable() {
        let env = |name: &str| match name {
            "SET" => Some("v".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand("${SET:-d}", &env), "v");
        assert_eq!(expand("${EMPTY:-d}", &env), "d");
        assert_eq!(expand("${UNSET:-d}", &env), "d");
        assert_eq!(expand("${UNSET:-}", &env), "");
        assert_eq!(expand("${EMPTY}", &env), "");
        assert_eq!(expand("a${SET}b", &env), "avb");
    }
}
