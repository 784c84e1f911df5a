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
    Timeout(String),
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, msg) = match self {
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            Self::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m.to_string()),
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, m),
            Self::Conflict(m) => (StatusCode::CONFLICT, m),
            Self::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
            Self::Unprocessable(m) => (StatusCode::UNPROCESSABLE_ENTITY, m),
            Self::Timeout(m) => (StatusCode::REQUEST_TIMEOUT, m),
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
        r
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
