//! The admin listener every service runs: `/metrics`, `/healthz` and `/readyz` open (the
//! Prometheus convention), a service's own routes behind the `[http]` tokens (reads a viewer,
//! changes an operator).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::error::RuntimeError;
use crate::http::HttpConfig;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

/// What the admin routes report on.
#[derive(Clone, Debug)]
pub struct AdminState {
    pub metrics: Metrics,
    ready: Arc<AtomicBool>,
}

impl AdminState {
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics,
            ready: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Marks the service ready (or not) to take traffic.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .with_state(self.clone())
    }
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

/// Alive: the process answers.
async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready: the service finished starting and is not shutting down.
async fn readyz(State(s): State<AdminState>) -> (StatusCode, &'static str) {
    if s.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

/// The admin server task.
pub type AdminTask = tokio::task::JoinHandle<Result<(), RuntimeError>>;

/// Binds `addr` and serves the admin router until `shutdown`. Returns the bound address
/// (useful with port 0) and the server task.
pub async fn serve_admin(
    addr: SocketAddr,
    state: AdminState,
    http: &HttpConfig,
    shutdown: Shutdown,
) -> Result<(SocketAddr, AdminTask), RuntimeError> {
    serve_admin_with(addr, state, Router::new(), http, shutdown).await
}

/// [`serve_admin`] with a service's own routes (e.g. the collector's watchlist) behind the
/// tokens: reads need a viewer, changes an operator.
pub async fn serve_admin_with(
    addr: SocketAddr,
    state: AdminState,
    extra: Router,
    http: &HttpConfig,
    shutdown: Shutdown,
) -> Result<(SocketAddr, AdminTask), RuntimeError> {
    let extra = crate::http::guard_hosts(crate::auth::protect(extra, http.auth()), http);
    let app = state.router().merge(extra);
    let (local, task) = crate::http::spawn(addr, app, http, shutdown)
        .await
        .map_err(|source| RuntimeError::AdminBind { addr, source })?;
    let task = tokio::spawn(async move {
        task.await
            .map_err(|e| RuntimeError::AdminServe(std::io::Error::other(e)))?
            .map_err(RuntimeError::AdminServe)
    });
    Ok((local, task))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get(state: &AdminState, path: &str) -> (StatusCode, String) {
        let res = state
            .router()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = res.status();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn health_readiness_and_metrics() {
        let state = AdminState::new(Metrics::new("test"));
        assert_eq!(get(&state, "/healthz").await.0, StatusCode::OK);
        assert_eq!(
            get(&state, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        state.set_ready(true);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
        let (status, body) = get(&state, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("kplane_build_info{"), "{body}");
        assert!(body.contains("service=\"test\""), "{body}");
        assert_eq!(get(&state, "/nope").await.0, StatusCode::NOT_FOUND);
    }

    /// Every admin listener: the open routes without a token, a service's own routes by role
    /// (reads a viewer, changes an operator).
    #[tokio::test]
    async fn a_services_routes_need_their_role_the_open_ones_none() {
        use crate::auth::{Role, TokenConfig, hash_token};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let http = HttpConfig {
            tokens: [Role::Viewer, Role::Operator, Role::Admin]
                .map(|r| TokenConfig {
                    name: r.as_str().into(),
                    role: r,
                    sha256: hash_token(r.as_str()),
                })
                .to_vec(),
            ..HttpConfig::default()
        };
        let extra = Router::new().route(
            "/v1/thing",
            axum::routing::get(|| async { "read" }).put(|| async { "written" }),
        );
        let shutdown = Shutdown::new();
        let state = AdminState::new(Metrics::new("test"));
        state.set_ready(true);
        let (addr, task) = serve_admin_with(
            "127.0.0.1:0".parse().unwrap(),
            state,
            extra,
            &http,
            shutdown.clone(),
        )
        .await
        .unwrap();
        let status = |method: &'static str, path: &'static str, token: Option<&'static str>| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
            let req = format!(
                "{method} {path} HTTP/1.1\r\nhost: x\r\n{auth}content-length: 0\r\nconnection: close\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await.unwrap();
            let mut resp = String::new();
            s.read_to_string(&mut resp).await.unwrap();
            resp[9..12].parse::<u16>().unwrap()
        };
        for open in ["/metrics", "/healthz", "/readyz"] {
            assert_eq!(status("GET", open, None).await, 200, "{open}");
        }
        for (method, who, want) in [
            ("GET", None, 401),
            ("GET", Some("nope"), 401),
            ("GET", Some("viewer"), 200),
            ("GET", Some("operator"), 200),
            ("GET", Some("admin"), 200),
            ("PUT", None, 401),
            ("PUT", Some("viewer"), 403),
            ("PUT", Some("operator"), 200),
            ("PUT", Some("admin"), 200),
        ] {
            assert_eq!(
                status(method, "/v1/thing", who).await,
                want,
                "{method} as {who:?}"
            );
        }
        shutdown.trigger();
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn serves_on_a_real_socket_and_stops_on_shutdown() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let shutdown = Shutdown::new();
        let state = AdminState::new(Metrics::new("test"));
        let (addr, task) = serve_admin(
            "127.0.0.1:0".parse().unwrap(),
            state,
            &HttpConfig::default(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).await.unwrap();
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        shutdown.trigger();
        task.await.unwrap().unwrap();
    }
}
