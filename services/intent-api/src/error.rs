//! API errors: JSON `{"error": "…"}` with the right status; 5xx details stay in the log.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub enum ApiError {
    BadRequest(String),
    Unauthorized(&'static str),
    Forbidden(String),
    NotFound(String),
    /// The request clashes with the current state (an intent conflict).
    Conflict(String),
    /// A dependency (a switch driver) cannot answer now; retry later.
    Unavailable(String),
    /// The query was refused or failed for a reason the caller can fix (SQL error, limits).
    Unprocessable(String),
    /// The work took longer than its limit (504).
    Timeout(String),
    /// A token's rate or concurrency limit (429, `Retry-After` in seconds).
    TooManyRequests {
        message: String,
        retry_after: u64,
    },
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match &self {
            Self::TooManyRequests { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let (status, msg) = match self {
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            Self::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m.to_string()),
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, m),
            Self::Conflict(m) => (StatusCode::CONFLICT, m),
            Self::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
            Self::Unprocessable(m) => (StatusCode::UNPROCESSABLE_ENTITY, m),
            Self::Timeout(m) => (StatusCode::GATEWAY_TIMEOUT, m),
            Self::TooManyRequests { message, .. } => (StatusCode::TOO_MANY_REQUESTS, message),
            Self::Internal(detail) => {
                tracing::error!(error = %detail, "internal error answering a request");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error (details are in the server log)".to_string(),
                )
            }
        };
        let mut r = (status, Json(json!({ "error": msg }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(s) = retry_after {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        r
    }
}

impl From<kplane_runtime::auth::AuthError> for ApiError {
    fn from(e: kplane_runtime::auth::AuthError) -> Self {
        use kplane_runtime::auth::AuthError;
        match e {
            AuthError::Unauthorized(m) => Self::Unauthorized(m),
            AuthError::Forbidden(m) => Self::Forbidden(m),
        }
    }
}

impl From<datafusion::error::DataFusionError> for ApiError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        Self::Internal(e.to_string())
    }
}

impl From<arrow_schema::ArrowError> for ApiError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::Internal(e.to_string())
    }
}
