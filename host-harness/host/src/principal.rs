//! [`Principal`]: who a gated call is bound to, the user and tenant as the gate binds them
//! (keyed pseudonyms under host keys, [`crate::host_keys::Pseudonyms`]), and the one way a
//! host names the operator's own user.

use std::sync::Arc;

/// Who a gated call is bound to: the user and tenant as the gate binds them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The user.
    pub user: String,
    /// The tenant.
    pub tenant: String,
}

impl Principal {
    /// The principal of `user` and `tenant`, as given.
    pub fn new(user: impl Into<String>, tenant: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            tenant: tenant.into(),
        }
    }
}

/// How a user and tenant someone named (a flag, trusted headers) become the principal the gate
/// binds: as named, or their keyed pseudonyms under host keys.
pub type BindPrincipal = Arc<dyn Fn(&str, &str) -> Principal + Send + Sync>;

/// The user a command binds when none is named (`--user`): `$USER`, else `user`.
pub fn default_user(named: Option<&str>) -> String {
    named
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "user".into())
}
