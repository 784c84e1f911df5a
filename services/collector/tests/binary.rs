//! `kplane-collector`, the service's own binary: reads its section of a shared config file,
//! lets `KPLANE__…` override it, serves the admin router, stops on SIGTERM.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    Some(r)
}

#[test]
fn thin_binary_layers_file_and_env_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("kplane-collector-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("kplane.toml");
    let (file_port, env_port) = (free_port(), free_port());
    std::fs::write(
        &cfg,
        format!("[log]\nformat = \"json\"\n\n[collector]\nadmin = \"127.0.0.1:{file_port}\"\n"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kplane-collector"))
        .arg("--config")
        .arg(&cfg)
        .env("KPLANE__COLLECTOR__ADMIN", format!("127.0.0.1:{env_port}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !get(env_port, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(
            Instant::now() < deadline,
            "never ready on the env-configured port"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        get(file_port, "/healthz").is_none(),
        "env overrides the file"
    );
    // SAFETY: signalling our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
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
        last.starts_with('{') && last.contains("\"stopped\""),
        "expected JSON log lines ending with `stopped`: {log}"
    );
}
