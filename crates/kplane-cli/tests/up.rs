//! `kplane up`: the whole system in one process. Every API route answers over a real socket
//! against the running pipeline (emulator → collector → processor → API), auth negatives over
//! the wire, the live SSE stream delivers immediate events, and Ctrl-C (SIGINT) stops it
//! cleanly with the results flushed to the store.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::{ChildGuard, free_port, http, http_limited};

#[test]
fn kplane_up_serves_the_api_and_console_over_a_running_pipeline() {
    let port = free_port();
    let data = std::env::temp_dir().join(format!("kplane-up-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut child = ChildGuard::from(
        Command::new(env!("CARGO_BIN_EXE_kplane"))
            .args(["up", "--api", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(&data)
            .args(["--duration", "60s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.contains("#token="))
                .map(str::to_string)
        })
        .expect("kplane up prints the console URL with a token");
    let token = url.split("#token=").nth(1).unwrap().to_string();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let get = |path: &str| http(addr, "GET", path, Some(&token), None).unwrap();

    // Windows arrive once the first second of traffic is through the processor.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = get("/v1/live").json();
        if live["windows_seen"].as_u64().unwrap_or(0) > 0
            && !live["queues"].as_array().unwrap().is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no window result in 60 s: {live}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let flows = get("/v1/flows?since=5m&limit=5");
    assert_eq!(flows.status, 200, "{}", flows.body);
    let flows = flows.json();
    let first = &flows["flows"][0];
    assert!(first.is_object(), "flows in the store: {flows}");
    let id = format!(
        "{},{},{},{},{}",
        first["src_ip"].as_str().unwrap(),
        first["src_port"],
        first["dst_ip"].as_str().unwrap(),
        first["dst_port"],
        first["protocol"]
    );
    let path = get(&format!("/v1/flows/{id}/path?since=5m"));
    assert_eq!(path.status, 200, "{}", path.body);
    assert!(
        !path.json()["windows"][0]["hops"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let switches = get("/v1/switches?since=5m").json();
    let sw = switches["switches"][0]["node_id"]
        .as_u64()
        .expect("switches");
    assert_eq!(
        get(&format!("/v1/switches/{sw}/queues?since=5m")).status,
        200
    );
    let links = get("/v1/links?since=5m").json();
    assert!(
        links["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["next_node_id"].is_u64()),
        "{links}"
    );
    assert_eq!(get("/v1/events?since=5m").status, 200);
    let q = http(
        addr,
        "POST",
        "/v1/query",
        Some(&token),
        Some(r#"{"sql":"SELECT count(*) AS n FROM queues"}"#),
    )
    .unwrap();
    assert_eq!(q.status, 200, "{}", q.body);
    assert!(q.json()["rows"][0]["n"].as_u64().unwrap() > 0);
    let ddl = http(
        addr,
        "POST",
        "/v1/query",
        Some(&token),
        Some(r#"{"sql":"DROP TABLE flows"}"#),
    )
    .unwrap();
    assert_eq!(ddl.status, 400);
    assert!(ddl.json()["error"].as_str().unwrap().contains("read-only"));
    assert_eq!(get("/openapi.json").json()["openapi"], "3.0.3");
    let health = http(addr, "GET", "/healthz", None, None).unwrap();
    assert_eq!(health.status, 200);
    assert!(
        http(addr, "GET", "/metrics", None, None)
            .unwrap()
            .body
            .contains("kplane_build_info")
    );
    let console = http(addr, "GET", "/", None, None).unwrap();
    assert_eq!(console.status, 200);
    assert!(console.body.contains("kplane console"));
    // Auth over the wire.
    let none = http(addr, "GET", "/v1/flows", None, None).unwrap();
    assert_eq!(none.status, 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    assert_eq!(
        http(addr, "GET", "/v1/flows", Some("nope"), None)
            .unwrap()
            .status,
        401
    );

    // The live stream: immediate events as they are raised (microbursts start 5 s in).
    let sse = http_limited(addr, "GET", "/v1/events/stream", Some(&token), None, 64).unwrap();
    assert_eq!(sse.status, 200);
    assert!(
        sse.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(
        sse.body.contains("event: alert") || sse.body.contains("data:"),
        "{}",
        sse.body
    );

    // Ctrl-C: everything stops cleanly, results stay in the store.
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(child.wait().unwrap().success(), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("stopped after")), "{rest:?}");
    let stored = std::fs::read_dir(data.join("stream-processor/tables/flows"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(stored > 0, "flows stored");
    let _ = std::fs::remove_dir_all(&data);
}
