//! What the server refuses or fails with, and the HTTP status each maps to.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A refused request or a failed server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A request the model cannot generate: an unknown prompt word, a length out of range, ...
    #[error("{0}")]
    Invalid(String),
    /// The library refused the request (the same message `generate` prints).
    #[error(transparent)]
    Request(#[from] flashforward::Error),
    /// Every generation slot and queue place is taken.
    #[error("the server is busy: {running} generation(s) running and {waiting} queued (the queue holds {queue}); try again later")]
    Busy {
        /// Generations running.
        running: usize,
        /// Generations waiting.
        waiting: usize,
        /// Queue places.
        queue: usize,
    },
    /// The address could not be bound or served.
    #[error("cannot serve on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The generation's MP4 could not be written.
    #[error("cannot write the video: {0}")]
    Video(String),
}

/// Shorthand for results with [`ServeError`].
pub type Result<T, E = ServeError> = std::result::Result<T, E>;

impl ServeError {
    /// The HTTP status of the refusal: 503 when busy, 400 for a bad request, else 500.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Invalid(_) | Self::Request(_) => StatusCode::BAD_REQUEST,
            Self::Bind { .. } | Self::Video(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A JSON body `{"error": message}` with [`ServeError::status`].
impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        (self.status(), Json(serde_json::json!({ "error": self.to_string() }))).into_response()
    }
}
