//! API errors: JSON `{"error": "…"}` with the right status; 5xx details stay in the log.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kplane_runtime::auth::AuthError;

/// Everything the API answers an error with (the control plane's routes answer
/// [`kplane_control_plane::ControlError`] in the same form). [`ApiError::status`] is
/// its HTTP status; [`ApiError::is_retryable`] tells a condition that may clear by itself
/// (a query worker that cannot answer now, a limit, a timeout) from one the caller must
/// change.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// A dependency (a query worker) cannot answer now; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// The query was refused or failed for a reason the caller can fix (SQL error, limits).
    #[error("{0}")]
    Unprocessable(String),
    /// The work took longer than its limit (504).
    #[error("{0}")]
    Timeout(String),
    /// No token, a role too low, or a token's limit (401, 403, 429 with `Retry-After`).
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Auth(e) => e.status(),
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unavailable(_) | Self::Timeout(_) => true,
            Self::Auth(e) => e.is_retryable(),
            _ => false,
        }
    }
}

impl IntoResponse for ApiError {
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
