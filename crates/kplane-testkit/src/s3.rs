//! An S3-compatible object store for tests: moto's server (PyPI `moto[server]`) on a free
//! port, with a fresh bucket per store a test asks for. The store is configured the way a
//! deployment is, by `AWS_*` settings ([`S3::env`] for child processes, [`S3::options`] for
//! a store opened in the test's own process).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ChildGuard, free_port, http};

const PROGRAM: &str = "moto_server";

/// A running moto server.
#[derive(Debug)]
pub struct S3 {
    pub addr: SocketAddr,
    _child: ChildGuard,
    log: PathBuf,
}

impl S3 {
    /// Starts one, or `None` (the test skips) when moto is not installed — unless
    /// `KPLANE_REQUIRE_S3=1` (CI), where a missing one fails the test.
    pub fn start() -> Option<Self> {
        let found = Command::new(PROGRAM)
            .arg("--help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            assert!(
                std::env::var("KPLANE_REQUIRE_S3").as_deref() != Ok("1"),
                "KPLANE_REQUIRE_S3=1 but {PROGRAM} is missing (pip install 'moto[server]')"
            );
            eprintln!("{PROGRAM} missing: skipping (pip install 'moto[server]')");
            return None;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = std::env::temp_dir().join(format!("kplane-moto-{}.log", addr.port()));
        let child = Command::new(PROGRAM)
            .args(["-H", "127.0.0.1", "-p", &addr.port().to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("moto's log"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {PROGRAM}: {e}"));
        let s3 = Self {
            addr,
            _child: ChildGuard::new(child),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http(addr, "GET", "/", None, None).is_ok_and(|a| a.status == 200) {
            assert!(Instant::now() < deadline, "moto not ready: {}", s3.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(s3)
    }

    /// Creates `bucket` and returns the store location `s3://<bucket>/kplane`.
    pub fn bucket(&self, bucket: &str) -> String {
        let answer = http(self.addr, "PUT", &format!("/{bucket}"), None, None)
            .unwrap_or_else(|e| panic!("create bucket {bucket}: {e}"));
        assert_eq!(
            answer.status, 200,
            "create bucket {bucket}: {}",
            answer.body
        );
        format!("s3://{bucket}/kplane")
    }

    /// The settings a store uses to reach it, as `AWS_*` environment variables.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", format!("http://{}", self.addr)),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// The same settings as configuration keys (`aws_endpoint`, …).
    pub fn options(&self) -> Vec<(String, String)> {
        self.env()
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect()
    }

    /// What moto logged (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every object key in `bucket` (moto's ListObjectsV2, parsed loosely).
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut token = String::new();
        loop {
            let path = format!("/{bucket}?list-type=2{token}");
            // S3 answers 500 and 503 for a request to retry; moto does so when a listing meets
            // a concurrent write.
            let mut answer = http(self.addr, "GET", &path, None, None).expect("list objects");
            for _ in 0..5 {
                if answer.status < 500 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
                answer = http(self.addr, "GET", &path, None, None).expect("list objects");
            }
            assert_eq!(answer.status, 200, "{}", answer.body);
            keys.extend(tags(&answer.body, "Key"));
            match tags(&answer.body, "NextContinuationToken").pop() {
                Some(t) => token = format!("&continuation-token={}", crate::percent_encode(&t)),
                None => return keys,
            }
        }
    }
}

/// The texts of every `<tag>…</tag>` in `xml`.
fn tags(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    xml.split(&open)
        .skip(1)
        .filter_map(|s| s.split_once(&close).map(|(v, _)| v.to_string()))
        .collect()
}
