//! Prometheus Alertmanager for tests: Debian's `prometheus-alertmanager` on a free port with
//! a configuration of the test's, its v2 API read back as JSON.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ChildGuard, free_port, http};

const PROGRAM: &str = "prometheus-alertmanager";

/// Whether Alertmanager can run here. Without it a test returns early (skips), unless
/// `KPLANE_REQUIRE_ALERTMANAGER=1` (CI), where a missing one fails it.
pub fn available() -> bool {
    let found = Command::new(PROGRAM)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var("KPLANE_REQUIRE_ALERTMANAGER").as_deref() != Ok("1"),
            "KPLANE_REQUIRE_ALERTMANAGER=1 but {PROGRAM} is missing (apt-get install {PROGRAM})"
        );
        eprintln!("{PROGRAM} missing: skipping (apt-get install {PROGRAM})");
    }
    found
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
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("alertmanager.yml");
        std::fs::write(&file, config).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = std::fs::File::create(dir.join("alertmanager.log")).unwrap();
        let child = Command::new(PROGRAM)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            // No gossip: one instance, no cluster port to collide on.
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus-alertmanager");
        let am = Self {
            addr,
            _child: ChildGuard::new(child),
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http(addr, "GET", "/-/ready", None, None).is_ok_and(|a| a.status == 200) {
            assert!(
                Instant::now() < deadline,
                "alertmanager not ready: {}",
                std::fs::read_to_string(dir.join("alertmanager.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        am
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
