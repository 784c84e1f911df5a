//! Server programs the tests run beside kplane (Debian's Prometheus and Alertmanager): found
//! or skipped, started in a directory of the test's with its configuration, ready once
//! `GET /-/ready` answers 200.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ChildGuard, free_port, http};

/// Whether `program` runs here. Without it a test returns early (skips), unless the
/// environment variable `require` is `1` (CI), where a missing one fails it.
pub(crate) fn available(program: &str, require: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var(require).as_deref() != Ok("1"),
            "{require}=1 but {program} is missing (apt-get install {program})"
        );
        eprintln!("{program} missing: skipping (apt-get install {program})");
    }
    found
}

/// Starts `program` on a free loopback port with `config` written to `dir/<config_name>`;
/// `args(config file, address)` are its flags. Its stderr goes to `dir/<program>.log`
/// ([`log`]). Waits until it is ready, or fails the test with its log.
pub(crate) fn start(
    program: &str,
    dir: &Path,
    config_name: &str,
    config: &str,
    args: impl FnOnce(&Path, SocketAddr) -> Vec<String>,
) -> (ChildGuard, SocketAddr) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join(config_name);
    std::fs::write(&file, config).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let stderr = std::fs::File::create(dir.join(format!("{program}.log"))).unwrap();
    let child = Command::new(program)
        .args(args(&file, addr))
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    let child = ChildGuard::new(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http(addr, "GET", "/-/ready", None, None).is_ok_and(|a| a.status == 200) {
        assert!(
            Instant::now() < deadline,
            "{program} not ready: {}",
            log(program, dir)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, addr)
}

/// What `program` started in `dir` logged (for a failing test's message).
pub(crate) fn log(program: &str, dir: &Path) -> String {
    std::fs::read_to_string(dir.join(format!("{program}.log"))).unwrap_or_default()
}
