//! Helpers for end-to-end tests that drive kplane binaries over real sockets.
//! A dev-dependency only; panics are how a helper fails a test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::{Duration, Instant};

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `GET path` on 127.0.0.1:port; the raw response, or `None` if nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    Some(resp)
}

/// Waits until `GET /readyz` on `port` answers 200, or fails the test after `timeout`.
pub fn wait_ready(port: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !http_get(port, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(Instant::now() < deadline, "port {port} never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGTERM to a child process.
pub fn sigterm(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with a valid signal number on our own child's pid.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill -TERM {pid}");
}
