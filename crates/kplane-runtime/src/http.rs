//! Every kplane HTTP listener's server (`[http]`): a connection cap, a header-read timeout
//! that is also the keep-alive idle timeout, and a bounded graceful shutdown — so a careless
//! or hostile caller can hold neither the process nor its shutdown — and the Host allow-list
//! against DNS rebinding ([`guard_hosts`]). Tokens and roles: [`crate::auth`]. See
//! docs/security.md.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::auth::{Auth, AuthError, Role, TokenConfig};
use crate::shutdown::Shutdown;

/// `[http]`: shared by the API, every admin listener and the emulator's control channel.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct HttpConfig {
    /// Serve without authentication (every caller is admin) — only on loopback listeners.
    pub no_auth: bool,
    /// Bearer tokens (`[[http.tokens]]`), stored as SHA-256 hashes.
    pub tokens: Vec<TokenConfig>,
    /// Host header values answered (`name` or `name:port`); empty: any host, except with
    /// `no-auth`, where only loopback names are (`localhost`, `127.0.0.1`, `[::1]`).
    pub allowed_hosts: Vec<String>,
    /// A request's headers must arrive within this; also how long an idle keep-alive
    /// connection is kept.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// Open connections per listener at most; more are closed at once.
    pub max_connections: usize,
    /// At shutdown, how long open requests and streams get to finish before they are cut.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            no_auth: false,
            tokens: Vec::new(),
            allowed_hosts: Vec::new(),
            header_read_timeout: Duration::from_secs(10),
            max_connections: 4_096,
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

impl crate::Validate for HttpConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        for t in &self.tokens {
            if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                problems.push(format!(
                    "http: token {:?}: sha256 must be 64 hex digits",
                    t.name
                ));
            }
        }
        if self.header_read_timeout < Duration::from_millis(100) {
            problems.push("http: header-read-timeout must be >= 100ms".into());
        }
        if self.max_connections == 0 {
            problems.push("http: max-connections must be >= 1".into());
        }
        if self.shutdown_grace > Duration::from_secs(60) {
            problems.push("http: shutdown-grace must be <= 60s".into());
        }
        for h in &self.allowed_hosts {
            if h.is_empty() || h.bytes().any(|b| b.is_ascii_whitespace() || b == b'/') {
                problems.push(format!("http: allowed-hosts: {h:?} is not a host[:port]"));
            }
        }
    }
}

impl HttpConfig {
    /// The tokens as an [`Auth`].
    pub fn auth(&self) -> Auth {
        Auth::new(self.tokens.clone(), self.no_auth)
    }

    /// A listener that may serve under this configuration: `no-auth` only on loopback.
    pub fn check_listener(&self, what: &str, addr: SocketAddr, problems: &mut Vec<String>) {
        if self.no_auth && !addr.ip().is_loopback() {
            problems.push(format!(
                "{what}: http.no-auth is only allowed on loopback listeners, not {addr}"
            ));
        }
    }

    /// An admin token for kplane's own calls between its parts in one process (`kplane up`):
    /// added to the tokens, returned in clear.
    pub fn add_internal_token(&mut self, name: &str, role: Role) -> std::io::Result<String> {
        let t = crate::auth::new_token()?;
        self.tokens.push(TokenConfig {
            name: name.into(),
            role,
            sha256: crate::auth::hash_token(&t),
        });
        Ok(t)
    }

    fn hosts(&self) -> Option<Arc<Vec<String>>> {
        let names: Vec<String> = if !self.allowed_hosts.is_empty() {
            self.allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect()
        } else if self.no_auth {
            ["localhost", "127.0.0.1", "[::1]"]
                .map(String::from)
                .to_vec()
        } else {
            return None;
        };
        Some(Arc::new(names))
    }
}

/// A refused request ([`crate::auth`], [`crate::limits`]) answered like every other error.
impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        error_response(self.status(), self.to_string(), self.retry_after())
    }
}

/// What a 5xx answer says: the detail goes to the log, not to the caller.
pub fn internal_message(detail: &str) -> String {
    tracing::error!(error = %detail, "internal error answering a request");
    "internal error (details are in the server log)".to_string()
}

/// Every kplane listener's error answer: `{"error": message}` with `status`, `WWW-Authenticate:
/// Bearer` on 401 and `Retry-After` (seconds) when given.
pub fn error_response(status: StatusCode, message: String, retry_after: Option<u64>) -> Response {
    let mut r = (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
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

/// Whether `host` (a Host header: `name`, `name:port`, `[v6]:port`) is in `allowed`, whose
/// entries match any port unless they name one.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.rfind(':') {
        // `[::1]:8080` or `name:8080`; a bare `[::1]` has its last ':' inside the brackets.
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host.as_str(),
    };
    allowed.iter().any(|a| *a == host || *a == name)
}

async fn check_host(State(allowed): State<Arc<Vec<String>>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    if !host_allowed(host, &allowed) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            axum::Json(serde_json::json!({
                "error": format!("Host {host:?} is not one this server answers (http.allowed-hosts)")
            })),
        )
            .into_response();
    }
    next.run(req).await
}

/// `router` answering only the Host names of `cfg` ([`HttpConfig::allowed_hosts`]), 421
/// otherwise. Every route but the admin listeners' open ones (`/metrics`, `/healthz`,
/// `/readyz`, which probes and scrapers reach by address) goes behind it.
pub fn guard_hosts(router: Router, cfg: &HttpConfig) -> Router {
    match cfg.hosts() {
        Some(h) if router.has_routes() => {
            router.route_layer(axum::middleware::from_fn_with_state(h, check_host))
        }
        _ => router,
    }
}

/// Serves `router` on `listener` until `shutdown`, with `cfg`'s limits: at most
/// `max-connections` connections (more are closed at once), `header-read-timeout`, and after
/// `shutdown` at most `shutdown-grace` for open requests and streams.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    cfg: &HttpConfig,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    raise_open_files_limit();
    let slots = Arc::new(Semaphore::new(cfg.max_connections));
    let header_timeout = cfg.header_read_timeout;
    let mut conns = JoinSet::new();
    let mut refused_warned: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.wait() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        // Out of file descriptors and the like: wait for connections to end.
                        tracing::warn!(error = %e, "accept failed; retrying");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    if refused_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(max = cfg.max_connections, "connection cap reached: closing new connections");
                        refused_warned = Some(Instant::now());
                    }
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(router.clone());
                let stop = shutdown.clone();
                conns.spawn(async move {
                    let _slot = slot;
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
                    let conn = builder.serve_connection(TokioIo::new(stream), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stop.wait() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(cfg.shutdown_grace, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::info!(
            open = conns.len(),
            "connections still open after the shutdown grace: closed"
        );
        conns.shutdown().await;
    }
    Ok(())
}

/// Binds `addr` and serves `router` there ([`serve`]) in a task; returns the bound address.
pub async fn spawn(
    addr: SocketAddr,
    router: Router,
    cfg: &HttpConfig,
    shutdown: Shutdown,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let cfg = cfg.clone();
    let task = tokio::spawn(async move { serve(listener, router, &cfg, shutdown).await });
    Ok((local, task))
}

/// Lifts the soft open-files limit to the hard one (once): each connection is a descriptor,
/// and the usual soft limit of 1,024 is below the connection cap.
fn raise_open_files_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit with a valid pointer to a local rlimit.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
                l.rlim_cur = l.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &l);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_with_or_without_port() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "[::1]", "api.example:8443"]
            .map(String::from)
            .to_vec();
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:8080",
            "api.example:8443",
        ] {
            assert!(host_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "api.example:80",
            "",
            "127.0.0.2",
        ] {
            assert!(!host_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn refusals_are_answered_with_their_status_and_headers() {
        let r = AuthError::Unauthorized("no token").into_response();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers()[axum::http::header::WWW_AUTHENTICATE], "Bearer");
        let r = AuthError::TooManyRequests {
            message: "slow down".into(),
            retry_after: 7,
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[axum::http::header::RETRY_AFTER], "7");
        let r = AuthError::Forbidden("admin only".into()).into_response();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert!(r.headers().get(axum::http::header::RETRY_AFTER).is_none());
        assert!(
            AuthError::TooManyRequests {
                message: String::new(),
                retry_after: 1
            }
            .is_retryable()
        );
        assert!(!AuthError::Forbidden(String::new()).is_retryable());
    }

    #[test]
    fn no_auth_answers_only_loopback_names() {
        let open = HttpConfig {
            no_auth: true,
            ..HttpConfig::default()
        };
        assert_eq!(open.hosts().unwrap().len(), 3);
        assert!(HttpConfig::default().hosts().is_none());
        let mut p = Vec::new();
        open.check_listener("api", "0.0.0.0:80".parse().unwrap(), &mut p);
        open.check_listener("api", "127.0.0.1:80".parse().unwrap(), &mut p);
        assert_eq!(p.len(), 1, "{p:?}");
    }
}

/// The server over real sockets: half-open connections, the cap, the Host list, shutdown.
#[cfg(test)]
mod serving {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use axum::routing::get;

    use super::*;

    async fn start(
        cfg: HttpConfig,
    ) -> (
        SocketAddr,
        Shutdown,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let router = Router::new().route("/", get(|| async { "ok" })).route(
            "/forever",
            get(|| async {
                // A response that never ends, like an event stream.
                let s =
                    futures_util::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
                axum::body::Body::from_stream(s)
            }),
        );
        let router = guard_hosts(router, &cfg);
        let stop = Shutdown::new();
        let (addr, task) = spawn("127.0.0.1:0".parse().unwrap(), router, &cfg, stop.clone())
            .await
            .unwrap();
        (addr, stop, task)
    }

    /// `GET /` with `host`, on a blocking socket (the test's own thread).
    fn get_root(addr: SocketAddr, host: &str) -> std::io::Result<String> {
        let mut s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(
            s,
            "GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
        )?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_half_open_connections_do_not_hold_up_a_real_request() {
        raise_open_files_limit();
        let (addr, stop, task) = start(HttpConfig::default()).await;
        let held = tokio::task::spawn_blocking(move || {
            let held: Vec<TcpStream> = (0..1_000)
                .map(|_| {
                    let mut s = TcpStream::connect(addr).unwrap();
                    // Half a request line, never finished.
                    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: ")
                        .unwrap();
                    s
                })
                .collect();
            let started = Instant::now();
            let answer = get_root(addr, "x").unwrap();
            (held, started.elapsed(), answer)
        })
        .await
        .unwrap();
        let (held, took, answer) = held;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // Answered, not held until the half-open connections' header-read timeout freed a
        // slot (10 s). The time itself is not asserted: a loaded 2-core test run stretches it.
        let timeout = HttpConfig::default().header_read_timeout;
        assert!(took < timeout / 2, "took {took:?}");
        drop(held);
        stop.trigger();
        task.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_cap_connections_are_closed_and_slow_ones_time_out() {
        let cfg = HttpConfig {
            max_connections: 4,
            header_read_timeout: Duration::from_millis(300),
            ..HttpConfig::default()
        };
        let (addr, stop, task) = start(cfg).await;
        tokio::task::spawn_blocking(move || {
            let held: Vec<TcpStream> = (0..4)
                .map(|_| {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.write_all(b"GET / HTTP/1.1\r\n").unwrap();
                    s
                })
                .collect();
            std::thread::sleep(Duration::from_millis(100));
            // The fifth is closed without an answer.
            let refused = get_root(addr, "x").unwrap_or_default();
            assert!(refused.is_empty(), "{refused}");
            // The header-read timeout frees the slots: then requests are answered again.
            for mut s in held {
                let mut rest = Vec::new();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = s.read_to_end(&mut rest);
            }
            let ok = get_root(addr, "x").unwrap();
            assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        })
        .await
        .unwrap();
        stop.trigger();
        task.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_tokens_only_loopback_names_are_answered() {
        let (addr, stop, task) = start(HttpConfig {
            no_auth: true,
            ..HttpConfig::default()
        })
        .await;
        tokio::task::spawn_blocking(move || {
            let port = addr.port();
            for ok in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
                assert!(
                    get_root(addr, &ok).unwrap().starts_with("HTTP/1.1 200"),
                    "{ok}"
                );
            }
            // A DNS-rebinding page names its own host.
            let evil = get_root(addr, &format!("evil.example:{port}")).unwrap();
            assert!(evil.starts_with("HTTP/1.1 421"), "{evil}");
            assert!(evil.contains("allowed-hosts"), "{evil}");
        })
        .await
        .unwrap();
        stop.trigger();
        task.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_ends_within_the_grace_even_with_an_endless_response() {
        let cfg = HttpConfig {
            shutdown_grace: Duration::from_millis(200),
            ..HttpConfig::default()
        };
        let (addr, stop, task) = start(cfg).await;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /forever HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        stop.trigger();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the server stops despite the open response")
            .unwrap()
            .unwrap();
    }
}
