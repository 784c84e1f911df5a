//! API errors: JSON `{"error": "…"}` with the right status; 5xx details stay in the log.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Everything the API answers an error with (the control plane's routes answer
/// [`kplane_control_plane::ControlError`] in the same form). [`ApiError::status`] is
/// its HTTP status; [`ApiError::is_retryable`] tells a condition that may clear by itself
/// (a switch that cannot answer now, a limit, a timeout) from one the caller must change.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The request clashes with the current state (an intent conflict).
    #[error("{0}")]
    Conflict(String),
    /// A dependency (a switch driver) cannot answer now; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// The query was refused or failed for a reason the caller can fix (SQL error, limits).
    #[error("{0}")]
    Unprocessable(String),
    /// The work took longer than its limit (504).
    #[error("{0}")]
    Timeout(String),
    /// A token's rate or concurrency limit (429, `Retry-After` in seconds).
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Unavailable(_) | Self::Timeout(_) | Self::TooManyRequests { .. }
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match &self {
            Self::TooManyRequests { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let status = self.status();
        let msg = match self {
            Self::Internal(detail) => {
                tracing::error!(error = %detail, "internal error answering a request");
                "internal error (details are in the server log)".to_string()
            }
            e => e.to_string(),
        };
        kplane_runtime::http::error_response(status, msg, retry_after)
    }
}

impl From<kplane_runtime::auth::AuthError> for ApiError {
    fn from(e: kplane_runtime::auth::AuthError) -> Self {
        use kplane_runtime::auth::AuthError;
        match e {
            AuthError::Unauthorized(m) => Self::Unauthorized(m),
            AuthError::Forbidden(m) => Self::Forbidden(m),
            AuthError::TooManyRequests {
                message,
                retry_after,
            } => Self::TooManyRequests {
                message,
                retry_after,
            },
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
