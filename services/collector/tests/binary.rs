//! `kplane-collector`, the service's own binary: reads its section of a shared config file,
//! lets `KPLANE__…` override it, serves the admin router, stops on SIGTERM.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use kplane_testkit::{ChildGuard, free_port, http_get, sigterm, wait_ready};

#[test]
fn thin_binary_layers_file_and_env_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("kplane-collector-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("kplane.toml");
    let (file_port, env_port) = (free_port(), free_port());
    std::fs::write(
        &cfg,
        format!("[log]\nformat = \"json\"\n\n[collector]\nadmin = \"127.0.0.1:{file_port}\"\nlisten = [\"127.0.0.1:0\"]\n"),
    )
    .unwrap();
    let mut child = ChildGuard::from(
        Command::new(env!("CARGO_BIN_EXE_kplane-collector"))
            .arg("--config")
            .arg(&cfg)
            .env("KPLANE__COLLECTOR__ADMIN", format!("127.0.0.1:{env_port}"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_ready(env_port, Duration::from_secs(20));
    assert!(
        http_get(file_port, "/healthz").is_none(),
        "env overrides the file"
    );
    sigterm(&child);
    assert!(child.wait().unwrap().success());
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with('{') && last.contains("stopped"),
        "expected JSON log lines ending with `stopped`: {log}"
    );
}
