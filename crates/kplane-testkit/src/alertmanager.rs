//! Prometheus Alertmanager for tests: Debian's `prometheus-alertmanager` on a free port with
//! a configuration of the test's, its v2 API read back as JSON.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{ChildGuard, http, served};

const PROGRAM: &str = "prometheus-alertmanager";

/// Whether Alertmanager can run here. Without it a test returns early (skips), unless
/// `KPLANE_REQUIRE_ALERTMANAGER=1` (CI), where a missing one fails it.
pub fn available() -> bool {
    served::available(PROGRAM, "KPLANE_REQUIRE_ALERTMANAGER")
}

/// A running Alertmanager.
#[derive(Debug)]
pub struct Alertmanager {
    pub addr: SocketAddr,
    _child: ChildGuard,
    pub dir: PathBuf,
}

impl Alertmanager {
    /// Starts one in `dir` with `config` (its YAML) and waits until it is ready.
    pub fn start(dir: &Path, config: &str) -> Self {
        let (child, addr) =
            served::start(PROGRAM, dir, "alertmanager.yml", config, |file, addr| {
                vec![
                    format!("--config.file={}", file.display()),
                    format!("--storage.path={}", dir.join("data").display()),
                    format!("--web.listen-address={addr}"),
                    // No gossip: one instance, no cluster port to collide on.
                    "--cluster.listen-address=".into(),
                ]
            });
        Self {
            addr,
            _child: child,
            dir: dir.to_path_buf(),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `GET /api/v2/alerts`: every alert it holds that has not resolved.
    pub fn alerts(&self) -> Vec<serde_json::Value> {
        let a = http(self.addr, "GET", "/api/v2/alerts", None, None).expect("alertmanager");
        assert_eq!(a.status, 200, "{}", a.body);
        a.json().as_array().cloned().unwrap_or_default()
    }

    /// Silences alerts whose `label` is `value` for an hour; the silence's id.
    pub fn silence(&self, label: &str, value: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let body = serde_json::json!({
            "matchers": [{"name": label, "value": value, "isRegex": false, "isEqual": true}],
            "startsAt": rfc3339(now.saturating_sub(60)),
            "endsAt": rfc3339(now + 3_600),
            "createdBy": "kplane tests",
            "comment": "silenced by a test",
        })
        .to_string();
        let a = http(self.addr, "POST", "/api/v2/silences", None, Some(&body)).unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
        a.json()["silenceID"].as_str().unwrap().to_string()
    }
}

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}
