//! Bearer tokens and roles, shared by every kplane HTTP listener (the API, each service's
//! admin listener, the emulator's control channel): viewer < operator < admin. Reads need a
//! viewer, changes an operator (or what a route asks for); only `/metrics`, `/healthz` and
//! `/readyz` on admin listeners are open. See docs/security.md.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// A bearer token, stored as the SHA-256 of its value (hex) — never the token itself.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TokenConfig {
    /// Who holds it (logged, never the token).
    pub name: String,
    pub role: Role,
    /// `sha256(token)` in hex: `printf %s "$TOKEN" | sha256sum`.
    pub sha256: String,
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

/// Why a request was refused: 401 (no or unknown token), 403 (role too low) or 429 (a
/// token's rate or concurrency limit, [`Limits`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    /// `retry_after` in seconds.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
}

impl AuthError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// A limit clears by itself; a missing token or role does not.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::TooManyRequests { .. })
    }

    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::TooManyRequests { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
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

    /// Whether every caller is let in as admin (`no-auth`).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The configured tokens (names and roles; the hashes stay inside).
    pub fn holders(&self) -> impl Iterator<Item = (&str, Role)> {
        self.tokens.iter().map(|t| (t.name.as_str(), t.role))
    }

    /// The role of the request's bearer token.
    pub fn role(&self, header: Option<&str>) -> Result<Role, AuthError> {
        self.identify(header).map(|i| i.role)
    }

    /// Who the request's bearer token belongs to, and its role.
    pub fn identify(&self, header: Option<&str>) -> Result<Identity, AuthError> {
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
            .ok_or(AuthError::Unauthorized("missing bearer token"))?;
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
        found.ok_or(AuthError::Unauthorized("unknown token"))
    }

    /// Checks the request's token against `min` and records the caller as a request
    /// extension ([`Identity`]).
    fn admit(&self, req: &mut Request, min: Role) -> Result<(), AuthError> {
        let header = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let who = self.identify(header)?;
        if who.role < min {
            return Err(AuthError::Forbidden(format!(
                "this route needs the {} role; the token has {}",
                min.as_str(),
                who.role.as_str()
            )));
        }
        req.extensions_mut().insert(who);
        Ok(())
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
    mut req: Request,
    next: Next,
) -> Result<Response, AuthError> {
    auth.admit(&mut req, min)?;
    Ok(next.run(req).await)
}

/// The role a method needs where a router states no more: reads (GET, HEAD) a viewer,
/// everything else an operator.
pub fn role_for(method: &Method) -> Role {
    if method == Method::GET || method == Method::HEAD {
        Role::Viewer
    } else {
        Role::Operator
    }
}

/// Middleware: reads need a viewer, changes an operator ([`role_for`]).
pub async fn require_by_method(
    State(auth): State<Auth>,
    mut req: Request,
    next: Next,
) -> Result<Response, AuthError> {
    let min = role_for(req.method());
    auth.admit(&mut req, min)?;
    Ok(next.run(req).await)
}

/// `router` behind [`require_by_method`].
pub fn protect(router: axum::Router, auth: Auth) -> axum::Router {
    if !router.has_routes() {
        return router;
    }
    router.route_layer(axum::middleware::from_fn_with_state(
        auth,
        require_by_method,
    ))
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
        assert_eq!(role_for(&Method::GET), Role::Viewer);
        assert_eq!(role_for(&Method::PUT), Role::Operator);
        assert_eq!(role_for(&Method::POST), Role::Operator);
    }
}
