//! What counts as a secret in the environment, in one place. Three questions are asked of it,
//! and they are answered differently on purpose (each answer is what its caller has always done):
//!
//! - which variables a program started on the model's or the user's behalf (`bash`, MCP servers,
//!   hooks) must not see: [`secret_env`] (every `*_API_KEY`, and the provider keys the config
//!   names). The OS sandbox hides more in the programs it contains
//!   (`new_sys::os_sandbox::is_secret_name`);
//! - whether a variable an MCP entry references needs the user's own yes:
//!   [`is_secret_reference`] (a provider key, or a name the OS sandbox would hide);
//! - which values to cut out of what memory writes: [`secret_values`] (those of variables named
//!   like keys, tokens, secrets and passwords).

/// The variables of this process that no program started on the model's or the user's behalf
/// (`bash`, MCP servers, hooks) may see: every `*_API_KEY`, and `hidden` (the provider keys the
/// config names). Removed from such a program's environment; a variable its config sets on
/// purpose is set after the removal.
pub fn secret_env(hidden: &[String]) -> Vec<std::ffi::OsString> {
    secret_names(std::env::vars_os().map(|(name, _)| name), hidden)
}

/// Of the variable names `names`, those [`secret_env`] removes.
pub fn secret_names(
    names: impl Iterator<Item = std::ffi::OsString>,
    hidden: &[String],
) -> Vec<std::ffi::OsString> {
    names
        .filter(|name| {
            let text = name.to_string_lossy();
            text.ends_with("_API_KEY") || hidden.iter().any(|h| *h == text)
        })
        .collect()
}

/// Whether a variable named like this holds a secret: a provider's key (`hidden`), or a name
/// that looks like a credential.
pub fn is_secret_reference(name: &str, hidden: &[String]) -> bool {
    hidden.iter().any(|h| h == name) || new_sys::os_sandbox::is_secret_name(name)
}

/// The secret-looking values of the environment: those of variables named like keys, tokens,
/// secrets and passwords (8 characters or more), for [`crate::memory::redact_secrets`].
pub fn secret_values(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    vars.filter(|(name, value)| {
        let name = name.to_ascii_uppercase();
        value.len() >= 8
            && ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
                .iter()
                .any(|w| name.contains(w))
    })
    .map(|(_, value)| value)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret is a variable of the user's provider keys or one named like a credential; others
    /// are not.
    #[test]
    fn a_secret_reference_is_a_provider_key_or_a_credential_name() {
        let hidden = vec!["MY_LLM_VAR".to_string()];
        assert!(is_secret_reference("MY_LLM_VAR", &hidden));
        assert!(is_secret_reference("GITHUB_TOKEN", &hidden));
        assert!(is_secret_reference("GITHUB_TOKEN", &[]));
        assert!(!is_secret_reference("PATH", &hidden));
        assert!(!is_secret_reference("MY_LLM", &hidden));
        assert!(!is_secret_reference("HOME", &[]));
    }

    #[test]
    fn provider_keys_are_not_passed_on() {
        // Which names are removed (the whole run, with keys set in `new`'s environment, is
        // tests/it/trust.rs: no key reaches a command's `env`).
        let names = ["SOMEONE_API_KEY", "LAB_TOKEN", "HOME", "API_KEY_HINT"]
            .map(std::ffi::OsString::from)
            .into_iter();
        let removed = secret_names(names, &["LAB_TOKEN".to_string()]);
        assert_eq!(removed, ["SOMEONE_API_KEY", "LAB_TOKEN"]);
    }
}
