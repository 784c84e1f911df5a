//! Bearer tokens and roles: viewer < operator < admin. Every read route needs viewer.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::TokenConfig;
use crate::error::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }
}

/// `sha256(token)` as lowercase hex: what the config stores.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A new random token (32 bytes from the OS, hex).
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(format!("kp_{}", hex::encode(b)))
}

/// Who may call: the configured tokens, or everyone (`no-auth`).
#[derive(Clone, Debug)]
pub struct Auth {
    tokens: Arc<Vec<TokenConfig>>,
    open: bool,
}

impl Auth {
    pub fn new(tokens: Vec<TokenConfig>, no_auth: bool) -> Self {
        Self {
            tokens: Arc::new(tokens),
            open: no_auth,
        }
    }

    /// The role of the request's bearer token.
    pub fn role(&self, header: Option<&str>) -> Result<Role, ApiError> {
        self.identify(header).map(|i| i.role)
    }

    /// Who the request's bearer token belongs to, and its role.
    pub fn identify(&self, header: Option<&str>) -> Result<Identity, ApiError> {
        if self.open {
            return Ok(Identity {
                name: "anonymous".into(),
                role: Role::Admin,
            });
        }
        let token = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(ApiError::Unauthorized("missing bearer token"))?;
        let hash = hash_token(token);
        // Compare every configured hash fully (no early exit on the first byte).
        let found = self.tokens.iter().fold(None, |acc, t| {
            let same = t
                .sha256
                .to_ascii_lowercase()
                .bytes()
                .zip(hash.bytes())
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0
                && t.sha256.len() == hash.len();
            if same {
                Some(Identity {
                    name: t.name.clone(),
                    role: t.role,
                })
            } else {
                acc
            }
        });
        found.ok_or(ApiError::Unauthorized("unknown token"))
    }
}

/// The caller of a request (a request extension set by [`require`]): the token's name is the
/// actor the audit log records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub role: Role,
}

/// Middleware: the request needs at least `min`.
pub async fn require(
    State((auth, min)): State<(Auth, Role)>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let who = auth.identify(header)?;
    if who.role < min {
        return Err(ApiError::Forbidden(format!(
            "this route needs the {} role; the token has {}",
            min.as_str(),
            who.role.as_str()
        )));
    }
    let mut req = req;
    req.extensions_mut().insert(who);
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_come_from_hashed_tokens() {
        let auth = Auth::new(
            vec![TokenConfig {
                name: "ops".into(),
                role: Role::Operator,
                sha256: hash_token("s3cret"),
            }],
            false,
        );
        assert_eq!(auth.role(Some("Bearer s3cret")).unwrap(), Role::Operator);
        assert!(auth.role(Some("Bearer nope")).is_err());
        assert!(auth.role(Some("s3cret")).is_err(), "scheme required");
        assert!(auth.role(None).is_err());
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
    }
}
