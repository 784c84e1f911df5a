//! The web console: three static files compiled into the binary (no Node.js at run time, no
//! build step — plain JavaScript and SVG; see docs/console.md for why).

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("console/index.html");
const JS: &str = include_str!("console/console.js");
const CSS: &str = include_str!("console/console.css");

/// Only the console's own files run, nothing frames it, and no address leaks to others.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn asset(body: &'static str, ty: &'static str) -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, ty),
            (CACHE_CONTROL, "no-cache"),
            (CONTENT_SECURITY_POLICY, CSP),
            (X_FRAME_OPTIONS, "DENY"),
            (REFERRER_POLICY, "no-referrer"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}

/// `/`, `/console.js`, `/console.css` (no data in them, so no token needed).
pub fn router() -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/console.js",
            get(|| async { asset(JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console.css",
            get(|| async { asset(CSS, "text/css; charset=utf-8") }),
        )
}
