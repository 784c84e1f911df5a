//! The control plane's error: what a route answers (its [`ControlError::status`]) and whether
//! it may clear by itself ([`ControlError::is_retryable`]: a switch that cannot answer now, a
//! rate limit).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kplane_runtime::auth::AuthError;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A malformed request: a body that is not the JSON the route takes, a bad parameter.
    #[error("{0}")]
    BadRequest(String),
    /// A well-formed intent or policy that cannot be carried out as written.
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    NotFound(String),
    /// The request clashes with the current state (an intent conflict, a forwarding loop).
    #[error("{0}")]
    Conflict(String),
    /// The caller's role or ownership does not allow it.
    #[error("{0}")]
    Forbidden(String),
    /// No token, a role too low, or a token's limit.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// No switch can answer now; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// The intents' state directory failed (details in the log).
    #[error("{0}")]
    Internal(String),
}

impl ControlError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::Auth(e) => e.status(),
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Auth(e) => e.is_retryable(),
            _ => false,
        }
    }

    /// What an intent refused for this reason records (`refuse`, the audit log): the
    /// message of a refusal the submitter can act on, none for the others.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Self::Unprocessable(m) | Self::Conflict(m) | Self::Unavailable(m) => Some(m),
            _ => None,
        }
    }
}

impl IntoResponse for ControlError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry_after = match &self {
            Self::Auth(e) => e.retry_after(),
            _ => None,
        };
        let message = match self {
            Self::Internal(detail) => kplane_runtime::http::internal_message(&detail),
            e => e.to_string(),
        };
        kplane_runtime::http::error_response(status, message, retry_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_retries_and_refusals() {
        let cases = [
            (ControlError::BadRequest("x".into()), 400, false, None),
            (
                ControlError::Unprocessable("x".into()),
                422,
                false,
                Some("x"),
            ),
            (ControlError::NotFound("x".into()), 404, false, None),
            (ControlError::Conflict("x".into()), 409, false, Some("x")),
            (ControlError::Forbidden("x".into()), 403, false, None),
            (ControlError::Unavailable("x".into()), 503, true, Some("x")),
            (ControlError::Internal("x".into()), 500, false, None),
            (
                AuthError::TooManyRequests {
                    message: "x".into(),
                    retry_after: 3,
                }
                .into(),
                429,
                true,
                None,
            ),
        ];
        for (e, status, retryable, refusal) in cases {
            assert_eq!(e.status().as_u16(), status, "{e:?}");
            assert_eq!(e.is_retryable(), retryable, "{e:?}");
            assert_eq!(e.refusal(), refusal, "{e:?}");
        }
    }

    #[tokio::test]
    async fn an_internal_error_keeps_its_detail_out_of_the_answer() {
        let r = ControlError::Internal("disk /var/lib full".into()).into_response();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let body = String::from_utf8_lossy(&body);
        assert!(
            body.contains("server log") && !body.contains("/var/lib"),
            "{body}"
        );
        let r = ControlError::from(AuthError::TooManyRequests {
            message: "x".into(),
            retry_after: 9,
        })
        .into_response();
        assert_eq!(r.headers()[axum::http::header::RETRY_AFTER], "9");
    }
}
