//! Prometheus for tests: Debian's `prometheus` on a free port with a configuration of the
//! test's; its HTTP API (targets, instant queries) read back as JSON.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::{ChildGuard, http, served};

const PROGRAM: &str = "prometheus";

/// Whether Prometheus can run here. Without it a test returns early (skips), unless
/// `KPLANE_REQUIRE_PROMETHEUS=1` (CI), where a missing one fails it.
pub fn available() -> bool {
    served::available(PROGRAM, "KPLANE_REQUIRE_PROMETHEUS")
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
        let (child, addr) = served::start(PROGRAM, dir, "prometheus.yml", config, |file, addr| {
            vec![
                format!("--config.file={}", file.display()),
                format!("--storage.tsdb.path={}", dir.join("data").display()),
                format!("--web.listen-address={addr}"),
            ]
        });
        Self {
            addr,
            _child: child,
            dir: dir.to_path_buf(),
        }
    }

    /// What it logged (for a failing test's message).
    pub fn log(&self) -> String {
        served::log(PROGRAM, &self.dir)
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
        let path = format!("/api/v1/query?query={}", crate::percent_encode(expr));
        let a = http(self.addr, "GET", &path, None, None).expect("prometheus");
        let body = a.json();
        assert_eq!(a.status, 200, "{expr}: {}", body["error"]);
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_query_is_percent_encoded() {
        assert_eq!(
            crate::percent_encode("sum by (le) (x{a=\"b\"}[1m])"),
            "sum%20by%20%28le%29%20%28x%7Ba%3D%22b%22%7D%5B1m%5D%29"
        );
    }
}
