//! Prometheus for tests: Debian's `prometheus` on a free port with a configuration of the
//! test's; its HTTP API (targets, instant queries) read back as JSON.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ChildGuard, free_port, http};

const PROGRAM: &str = "prometheus";

/// Whether Prometheus can run here. Without it a test returns early (skips), unless
/// `KPLANE_REQUIRE_PROMETHEUS=1` (CI), where a missing one fails it.
pub fn available() -> bool {
    let found = Command::new(PROGRAM)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var("KPLANE_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "KPLANE_REQUIRE_PROMETHEUS=1 but {PROGRAM} is missing (apt-get install {PROGRAM})"
        );
        eprintln!("{PROGRAM} missing: skipping (apt-get install {PROGRAM})");
    }
    found
}

/// A running Prometheus.
#[derive(Debug)]
pub struct Prometheus {
    pub addr: SocketAddr,
    _child: ChildGuard,
    pub dir: PathBuf,
}

impl Prometheus {
    /// Starts one in `dir` with `config` (its YAML) and waits until it is ready.
    pub fn start(dir: &Path, config: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(PROGRAM)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Self {
            addr,
            _child: ChildGuard::new(child),
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http(addr, "GET", "/-/ready", None, None).is_ok_and(|a| a.status == 200) {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// What it logged (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/targets`: the active targets (`job`, `health`, `lastError`, …).
    pub fn targets(&self) -> Vec<serde_json::Value> {
        let a =
            http(self.addr, "GET", "/api/v1/targets?state=active", None, None).expect("prometheus");
        assert_eq!(a.status, 200, "{}", a.body);
        a.json()["data"]["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// An instant query's result (one entry per series); a query Prometheus refuses fails
    /// the test.
    pub fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/v1/query?query={}", query_encode(expr));
        let a = http(self.addr, "GET", &path, None, None).expect("prometheus");
        let body = a.json();
        assert_eq!(a.status, 200, "{expr}: {}", body["error"]);
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// `s` percent-encoded for a URL's query string (everything but unreserved characters).
fn query_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_query_is_percent_encoded() {
        assert_eq!(
            super::query_encode("sum by (le) (x{a=\"b\"}[1m])"),
            "sum%20by%20%28le%29%20%28x%7Ba%3D%22b%22%7D%5B1m%5D%29"
        );
    }
}
