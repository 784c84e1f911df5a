//! Who may call the API and how much: the tokens and roles are the runtime's
//! ([`kplane_runtime::auth`], shared by every kplane listener), and so are the per-token limits
//! ([`kplane_runtime::limits`]: `query-rate`, `query-concurrency`; the control plane spends
//! `intent-rate`).

pub use kplane_runtime::auth::{Auth, Identity, Role, TokenConfig, hash_token, new_token, require};
pub use kplane_runtime::limits::Limits;
