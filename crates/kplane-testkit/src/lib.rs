//! Helpers for end-to-end tests that drive kplane binaries over real sockets.
//! A dev-dependency only; panics are how a helper fails a test.

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

pub use kplane_runtime::probe::metric_sum;

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `GET path` on 127.0.0.1:port; the raw response, or `None` if nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    kplane_runtime::probe::http_get(SocketAddr::from(([127, 0, 0, 1], port)), path)
}

/// Waits until `GET /readyz` on `port` answers 200, or fails the test after `timeout`.
pub fn wait_ready(port: u16, timeout: Duration) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        kplane_runtime::probe::wait_ready(addr, timeout),
        "port {port} never became ready"
    );
}

/// Sends SIGTERM to a child process.
pub fn sigterm(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with a valid signal number on our own child's pid.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill -TERM {pid}");
}

/// The broker for tests that need Kafka: `KPLANE_KAFKA_BROKERS`, or `None` (the test then
/// returns early) — unless `KPLANE_REQUIRE_KAFKA` is set, as in CI, where that fails the test.
pub fn kafka_brokers() -> Option<String> {
    match std::env::var("KPLANE_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => Some(b),
        _ => {
            assert!(
                std::env::var_os("KPLANE_REQUIRE_KAFKA").is_none(),
                "KPLANE_REQUIRE_KAFKA is set but KPLANE_KAFKA_BROKERS is not"
            );
            eprintln!("KPLANE_KAFKA_BROKERS unset: Kafka tests not run");
            None
        }
    }
}
