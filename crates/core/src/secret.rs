//! The environment's secrets: the one policy, kept in `new_sys::secret` so that the sandbox's
//! spawner below the engine removes the same variables as `bash`, hooks, MCP servers and memory
//! here. See that module for what counts as a secret.

pub use new_sys::secret::{
    has_user_info, is_secret, is_secret_name, is_secret_reference, secret_env, secret_names,
    secret_values,
};
