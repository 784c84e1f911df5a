//! A minimal HTTP/1.1 client for admin endpoints (`/metrics`, `/readyz`), for tools and
//! tests that talk to a running kplane service without an HTTP client dependency.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// `GET path` on `addr`; the raw response, or `None` if nothing answers.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
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

/// Waits until `GET /readyz` answers 200; false after `timeout`.
pub fn wait_ready(addr: SocketAddr, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if http_get(addr, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The sum of a metric's samples (lines starting with `name`, containing every `filter`) in
/// a Prometheus/OpenMetrics text exposition.
pub fn metric_sum(text: &str, name: &str, filters: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_matching_samples() {
        let text = "# HELP x_total x\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3\ny_total 7\n";
        assert_eq!(metric_sum(text, "x_total", &[]), 5.0);
        assert_eq!(metric_sum(text, "x_total", &["a=\"2\""]), 3.0);
        assert_eq!(metric_sum(text, "z_total", &[]), 0.0);
    }
}
