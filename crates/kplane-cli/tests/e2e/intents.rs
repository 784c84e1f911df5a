//! A switch restart under `kplane intent-api`: the emulator runs as its own process
//! (`kplane emulate --control`); after it is killed and started again (a new boot id, empty
//! tables) the intents' entries are pushed again and the audit log says so.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::{ChildGuard, free_port, http, wait_ready};

/// The operator token of the test's `[http]`: the API's and the emulator's.
const TOKEN: &str = "ops-token";

fn emulator(control: SocketAddr, config: &std::path::Path) -> ChildGuard {
    let child = ChildGuard::from(
        Command::new(env!("CARGO_BIN_EXE_kplane"))
            .arg("--config")
            .arg(config)
            .args([
                "emulate",
                "--realtime",
                "--duration",
                "120s",
                "--flows",
                "0",
            ])
            .args(["--control", &control.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let end = Instant::now() + Duration::from_secs(20);
    while http(control, "GET", "/v1/tables", Some(TOKEN), None).is_err() {
        assert!(Instant::now() < end, "no control channel on {control}");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn drop_acl(control: SocketAddr) -> usize {
    http(control, "GET", "/v1/tables", Some(TOKEN), None)
        .map(|r| {
            r.json()["entries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["table"] == "drop_acl" && e["switch"].is_u64())
                .count()
        })
        .unwrap_or(0)
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < end, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_restarted_switch_gets_its_entries_again() {
    let control: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (api_port, admin_port) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("kplane-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        r#"
[intent-api]
listen = "127.0.0.1:{api_port}"
admin = "127.0.0.1:{admin_port}"
store-dir = "{store}"

[[http.tokens]]
name = "ops"
role = "operator"
sha256 = "{sha}"

[intent-api.intents]
state-dir = "{state}"
reconcile-interval = "100ms"
verify = false
max-backoff = "500ms"

[[intent-api.intents.drivers]]
kind = "emulator"
control = "{control}"
timeout = "2s"
token = "{TOKEN}"
"#,
        sha = kplane_runtime::auth::hash_token(TOKEN),
        store = dir.join("store").display(),
        state = dir.join("intent-api").display(),
    );
    let config_file = dir.join("kplane.toml");
    std::fs::write(&config_file, config).unwrap();

    let mut first = emulator(control, &config_file);
    let _api = ChildGuard::from(
        Command::new(env!("CARGO_BIN_EXE_kplane"))
            .arg("--config")
            .arg(&config_file)
            .arg("intent-api")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    wait_ready(admin_port, Duration::from_secs(30));
    let api: SocketAddr = format!("127.0.0.1:{api_port}").parse().unwrap();
    let r = http(
        api,
        "POST",
        "/v1/intents",
        Some(TOKEN),
        Some(r#"{"kind":"block","match":{"src":"10.0.0.2/32"},"reason":"restart test"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_string();
    wait("the intent active on 8 edge switches", || {
        http(api, "GET", &format!("/v1/intents/{id}"), Some(TOKEN), None)
            .is_ok_and(|r| r.json()["state"] == "active")
            && drop_acl(control) == 8
    });

    // The switch goes away and comes back empty, with a new boot id.
    first.kill().unwrap();
    first.wait().unwrap();
    // (No check that it starts empty: the reconciler may re-push before the
    // test can look. The audit record below proves the re-push happened.)
    let _second = emulator(control, &config_file);
    wait("the entries pushed again", || drop_acl(control) == 8);
    let audit = http(api, "GET", "/v1/audit?limit=100", Some(TOKEN), None)
        .unwrap()
        .json();
    let restarts: Vec<&serde_json::Value> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["result"] == "switch-restarted")
        .collect();
    assert!(!restarts.is_empty(), "{audit}");
    assert!(
        restarts[0]["detail"]
            .as_str()
            .unwrap()
            .contains("re-pushed"),
        "{audit}"
    );
    let v = http(api, "GET", &format!("/v1/intents/{id}"), Some(TOKEN), None)
        .unwrap()
        .json();
    assert_eq!(v["state"], "active", "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}
