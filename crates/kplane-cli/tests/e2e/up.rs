//! `kplane up`: the whole system in one process. Every API route answers over a real socket
//! against the running pipeline (emulator → collector → processor → API), auth negatives over
//! the wire, the live SSE stream delivers immediate events, and Ctrl-C (SIGINT) stops it
//! cleanly with the results flushed to the store.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::{ChildGuard, free_port, http, http_limited};
use serde_json::Value;

/// A fabric small enough for a debug build to keep up with: 100 Mb/s links, 40 flows/s of
/// 5 Mb/s.
const SMALL_FABRIC: &[&str] = &["--link-gbps", "0.1", "--flows", "40", "--flow-mbps", "5"];

/// A running `kplane up` with its API address, admin token and the rest of its stdout.
struct Up {
    child: ChildGuard,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    addr: SocketAddr,
    token: String,
    /// The emulator's control channel (`GET /v1/truth`).
    control: SocketAddr,
    data: std::path::PathBuf,
}

impl Up {
    /// Starts it for `duration` with `env` on a free port; returns once it printed the URL.
    fn start(tag: &str, duration: &str, env: &[(&str, &str)]) -> Self {
        Self::start_with(tag, duration, env, &[])
    }

    /// [`Up::start`] with more command-line arguments.
    fn start_with(tag: &str, duration: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        let port = free_port();
        let data = std::env::temp_dir().join(format!("kplane-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data);
        let mut child = ChildGuard::from(
            Command::new(env!("CARGO_BIN_EXE_kplane"))
                .args(["up", "--api", &format!("127.0.0.1:{port}")])
                .arg("--data-dir")
                .arg(&data)
                .args(["--duration", duration])
                .args(args)
                .envs(env.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let token = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split("#token=").nth(1).map(|t| t.trim().to_string()))
            .expect("kplane up prints the console URL with a token");
        let control = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                let c = l.split("control channel http://").nth(1)?;
                c.split(')').next()?.parse().ok()
            })
            .expect("kplane up prints the emulator's control channel");
        Self {
            child,
            lines,
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            token,
            control,
            data,
        }
    }

    /// Ctrl-C (SIGINT): it must stop cleanly; what it printed until then.
    fn interrupt(mut self) -> (Vec<String>, std::path::PathBuf) {
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        // A stop that hangs fails here (and the guard kills it) instead of hanging the run.
        let end = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < end,
                "kplane up still running 60 s after Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let rest: Vec<String> = self.lines.by_ref().map_while(Result::ok).collect();
        assert!(status.success(), "{rest:?}");
        (rest, self.data)
    }
}

#[test]
fn kplane_up_serves_the_api_and_console_over_a_running_pipeline() {
    let up = Up::start("up", "60s", &[]);
    let (addr, token) = (up.addr, up.token.clone());
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
    // /metrics, /healthz and /readyz are the admin listeners', not the API port's.
    for open in ["/metrics", "/healthz", "/readyz"] {
        assert_eq!(
            http(addr, "GET", open, None, None).unwrap().status,
            404,
            "{open}"
        );
    }
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

    // The emulator's control channel takes the same tokens: no reads or writes without one.
    for (method, path) in [("GET", "/v1/topology"), ("POST", "/v1/links/0/down")] {
        let r = http(up.control, method, path, None, None).unwrap();
        assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
    }
    let topo = http(up.control, "GET", "/v1/topology", Some(&token), None).unwrap();
    assert_eq!(topo.status, 200);

    // Ctrl-C with an event stream open: it ends the stream and stops within 5 s, flushed.
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    {
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /v1/events/stream HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\r\n"
        )
        .unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
    }
    let asked = Instant::now();
    let (rest, data) = up.interrupt();
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(5), "Ctrl-C took {took:?}");
    drop(stream);
    assert!(rest.iter().any(|l| l.contains("stopped after")), "{rest:?}");
    let stored = std::fs::read_dir(data.join("stream-processor/tables/flows"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(stored > 0, "flows stored");
    let _ = std::fs::remove_dir_all(&data);
}

/// An on-call engineer reads incidents, not events: in `kplane up`'s default scenario the
/// first minute's breaches are at most 60 incidents, every episode is a member of one, and
/// the incidents reach a real Alertmanager (when installed: Debian's
/// `prometheus-alertmanager`; CI requires it).
#[test]
fn kplane_up_correlates_its_first_minute_into_few_incidents_paged_to_alertmanager() {
    let dir = std::env::temp_dir().join(format!("kplane-up-am-{}", kplane_testkit::run_id()));
    let am = kplane_testkit::alertmanager::available().then(|| {
        kplane_testkit::alertmanager::Alertmanager::start(
            &dir,
            "route:\n  receiver: on-call\nreceivers:\n  - name: on-call\n",
        )
    });
    let url = am.as_ref().map(|a| a.url()).unwrap_or_default();
    let up = Up::start(
        "incidents",
        "90s",
        &[("KPLANE__INTENT_API__INCIDENTS__ALERTMANAGER", url.as_str())],
    );
    let (addr, token) = (up.addr, up.token.clone());
    let get = |path: &str| {
        let r = http(addr, "GET", path, Some(&token), None).unwrap();
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while get("/v1/live")["windows_seen"].as_u64().unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "no window in 60 s");
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(60));
    let list = get("/v1/incidents?limit=10000");
    let opened = list["opened"].as_u64().unwrap();
    let episodes = get("/v1/events?live=true&limit=10000");
    let episodes = episodes["events"].as_array().unwrap();
    eprintln!(
        "first minute: {opened} incidents from {} breaches ({} episodes kept live)",
        list["breaches"],
        episodes.len()
    );
    assert!(opened >= 1, "the default scenario's microbursts: {list}");
    assert!(
        opened <= 60,
        "{opened} incidents in the first minute: {list}"
    );
    // Every episode is reachable from its incident.
    let mut members = std::collections::HashSet::new();
    for i in list["incidents"].as_array().unwrap() {
        let id = i["id"].as_str().unwrap();
        let d = get(&format!("/v1/incidents/{id}"));
        assert_eq!(d["members_truncated"], false, "{id}");
        for m in d["member_list"].as_array().unwrap() {
            members.insert(m["id"].as_str().unwrap().to_string());
        }
    }
    let now = get("/v1/incidents?limit=10000");
    for i in now["incidents"].as_array().unwrap() {
        if !list["incidents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == i["id"])
        {
            let d = get(&format!("/v1/incidents/{}", i["id"].as_str().unwrap()));
            for m in d["member_list"].as_array().unwrap() {
                members.insert(m["id"].as_str().unwrap().to_string());
            }
        }
    }
    let orphans: Vec<&Value> = episodes
        .iter()
        .filter(|e| !members.contains(e["id"].as_str().unwrap()))
        .collect();
    assert!(orphans.is_empty(), "episodes in no incident: {orphans:?}");
    if let Some(am) = &am {
        // Alerts first, the incident list after: an incident opened in between is then known.
        let alerts = am.alerts();
        let after = get("/v1/incidents?limit=10000");
        let known: std::collections::HashSet<&str> = after["incidents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect();
        assert!(!alerts.is_empty(), "no incident reached Alertmanager");
        for a in &alerts {
            let id = a["labels"]["incident_id"].as_str().unwrap();
            // A merged incident's id leads to the one it joined (its resolution may still be on
            // its way to Alertmanager).
            let leads_to = get(&format!("/v1/incidents/{id}"))["id"].clone();
            assert!(
                known.contains(id) || leads_to.as_str().is_some_and(|to| known.contains(to)),
                "{a}"
            );
        }
    }
    // Resolved incidents are in the store's `incidents` table once it stopped.
    let resolved = get("/v1/incidents?state=resolved&limit=10000")["incidents"]
        .as_array()
        .unwrap()
        .len();
    let (_, data) = up.interrupt();
    let out = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["query", "SELECT count(*) AS n FROM incidents", "--data-dir"])
        .arg(data.join("stream-processor"))
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    let stored: usize = table
        .lines()
        .filter_map(|l| {
            l.trim_matches(|c: char| c == '|' || c.is_whitespace())
                .parse()
                .ok()
        })
        .next()
        .unwrap_or_else(|| panic!("no count in {table}"));
    assert!(
        stored >= resolved,
        "{stored} stored, {resolved} resolved before the stop"
    );
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Intents in `kplane up` against the live emulator, verified by its own telemetry: a block
/// scoped where it cannot take its effect is rolled back with the evidence; a block of one
/// host at the edge becomes active, and the host's traffic is gone from the windows stored
/// after it.
#[test]
fn kplane_up_verifies_intents_against_fresh_telemetry_and_rolls_back_what_does_not_show() {
    let up = Up::start(
        "up-verify",
        "120s",
        &[
            // Room for a loaded machine's pipeline to deliver fresh windows (a verdict comes
            // as soon as they show the effect; the deadline only ends the waiting).
            ("KPLANE__INTENT_API__INTENTS__VERIFY_DEADLINE", "12s"),
            // Every packet reports (no backpressure thresholds): a quiet flow is not a blocked one.
            (
                "KPLANE__INTENT_API__INTENTS__BACKPRESSURE__ENABLED",
                "false",
            ),
        ],
    );
    let (addr, token) = (up.addr, up.token.clone());
    let call = |method: &str, path: &str, body: Option<&str>| {
        http(addr, method, path, Some(&token), body).unwrap()
    };
    let sql = |q: &str| -> u64 {
        let body = serde_json::json!({ "sql": q }).to_string();
        let r = call("POST", "/v1/query", Some(&body));
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        r.json()["rows"][0]["n"].as_u64().unwrap_or(0)
    };
    let wait_state = |id: &str, want: &str| -> serde_json::Value {
        let end = Instant::now() + Duration::from_secs(40);
        loop {
            let v = call("GET", &format!("/v1/intents/{id}"), None).json();
            if v["state"] == want {
                return v;
            }
            assert!(Instant::now() < end, "{id} never {want}: {v}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    // A host sending in the latest window, and its edge switch.
    let end = Instant::now() + Duration::from_secs(60);
    let flow = loop {
        let f = call("GET", "/v1/flows?since=3s&limit=1&sort=reports", None).json();
        if f["flows"][0].is_object() {
            break f["flows"][0].clone();
        }
        assert!(Instant::now() < end, "no flows: {f}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let host = flow["src_ip"].as_str().unwrap().to_string();
    let own_edge = flow["path"][0].as_u64().unwrap();
    let switches = call("GET", "/v1/intents/switches", None).json();
    let other_edge = switches["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["name"].as_str().unwrap().starts_with("edge")
                && s["switch"].as_u64() != Some(own_edge)
        })
        .map(|s| s["switch"].as_u64().unwrap())
        .expect("another edge switch");

    // Dropping every host's packets, but only at one edge switch: the flows towards the other
    // edges still arrive, in every window.
    let body = format!(
        r#"{{"kind":"block","match":{{"src":"10.0.0.0/8"}},"switches":[{other_edge}],"ttl":"10m","reason":"scoped too narrowly"}}"#
    );
    let r = call("POST", "/v1/intents", Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    let narrow = r.json()["id"].as_str().unwrap().to_string();
    let v = wait_state(&narrow, "rolled-back");
    assert!(
        v["evidence"].to_string().contains("still reaches its sink"),
        "{v}"
    );

    // At the edge (every switch hosts attach to): active, and the host is gone.
    let body = format!(
        r#"{{"kind":"block","match":{{"src":"{host}/32"}},"reason":"tenant misbehaving"}}"#
    );
    let r = call("POST", "/v1/intents", Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    let block = r.json()["id"].as_str().unwrap().to_string();
    let v = wait_state(&block, "active");
    assert!(v["evidence"].to_string().contains("none violating"), "{v}");
    let applied = v["applied_ms"].as_u64().unwrap();
    let before = sql(&format!(
        "SELECT count(*) AS n FROM flows WHERE ip_text(src_ip) = '{host}' AND window_start < to_timestamp_millis({applied})"
    ));
    assert!(before > 0, "{host} sent before the block");
    // Three more windows (1 s each) stored after the block: none carries the host.
    let after = format!("window_start > to_timestamp_millis({})", applied + 1_000);
    let end = Instant::now() + Duration::from_secs(30);
    while sql(&format!(
        "SELECT count(DISTINCT window_start) AS n FROM flows WHERE {after}"
    )) < 3
    {
        let r = call(
            "POST",
            "/v1/query",
            Some(r#"{"sql":"SELECT max(window_start) AS m, count(*) AS n FROM flows"}"#),
        );
        assert!(
            Instant::now() < end,
            "no windows stored after the block ({after}): {}",
            r.body
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        sql(&format!(
            "SELECT count(*) AS n FROM flows WHERE ip_text(src_ip) = '{host}' AND {after}"
        )),
        0,
        "{host}'s flows after the block"
    );
    let audit = call("GET", "/v1/audit?limit=50", None).json();
    let results: Vec<String> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["intent"].as_str().unwrap_or(""),
                r["result"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(
        results.contains(&format!("{narrow} rolled-back")),
        "{results:?}"
    );
    assert!(results.contains(&format!("{block} active")), "{results:?}");

    let (_, data) = up.interrupt();
    let _ = std::fs::remove_dir_all(&data);
}

/// INT-label end to end: an `int-label` intent makes every port of the emulated fat-tree label
/// (Base A, T = 50 ms) under traffic that keeps the ports busy (flows at 2 Mb/s, an elephant
/// lasting 4 s); the collector's database, the processor's `int_label` table and the API's
/// ports and coverage follow. A link then drops 90 % of its packets: of Base A's labels on the
/// two ports sending into it, one in ten arrives, and about one telemetry interval in five is
/// covered (the same run with Pro off: 1.9 and 2.1 intervals of 10, the best port's 10).
/// Pro's controller finds those ports stale and raises their frequency through
/// `label-frequency` intents, and at their raised S their coverage returns to more than half
/// of what it was (measured, of the best port's: 0.89 → 0.89 and 0.93 → 0.82; 0.90 → 0.88 and
/// 0.95 → 0.86 with a core taken by another process).
#[test]
fn int_label_loss_triggers_pro_and_the_lossy_ports_coverage_recovers() {
    let up = Up::start_with(
        "up-label",
        "75s",
        &[
            // Stale after 5 telemetry intervals (500 ms); S stays up once raised (the test
            // compares before and after).
            ("KPLANE__INTENT_API__INTENTS__INT_LABEL_PRO__K", "5"),
            ("KPLANE__INTENT_API__INTENTS__INT_LABEL_PRO__RELAX", "1000"),
        ],
        &[
            "--flows",
            "100",
            "--flow-mbps",
            "2",
            "--scenario",
            "link-loss:loss=0.9,start=0.2,duration=0.8",
        ],
    );
    let (addr, token) = (up.addr, up.token.clone());
    let call = |method: &str, path: &str, body: Option<&str>| {
        http(addr, method, path, Some(&token), body).unwrap()
    };
    let sql = |q: &str| -> Vec<serde_json::Value> {
        let body = serde_json::json!({ "sql": q }).to_string();
        let r = call("POST", "/v1/query", Some(&body));
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        r.json()["rows"].as_array().cloned().unwrap_or_default()
    };
    let started = Instant::now();
    let give_up = started + Duration::from_secs(65);
    let r = call(
        "POST",
        "/v1/intents",
        Some(r#"{"kind": "int-label", "interval": "50ms", "reason": "coverage"}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let labelling_from = r.json()["created_ms"].as_i64().unwrap() * 1_000_000 + 2_000_000_000;

    // The lossy link as the emulator injected it, 15 s in (report time = clock base + virtual
    // time), and its two ports from the telemetry's links.
    let (loss, loss_from) = loop {
        let truth = http(up.control, "GET", "/v1/truth", Some(&up.token), None)
            .unwrap()
            .json();
        let base = truth["clock_base_ns"].as_i64().unwrap();
        if let Some(e) = truth["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "link_loss")
        {
            break (e.clone(), base + e["t_ns"].as_i64().unwrap());
        }
        assert!(Instant::now() < give_up, "no link_loss: {truth}");
        std::thread::sleep(Duration::from_secs(1));
    };
    let (a, b) = (loss["link"][0].as_u64(), loss["link"][1].as_u64());
    let links = call("GET", "/v1/links?since=2m", None).json();
    let lossy: Vec<(u64, u64)> = links["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            let ends = (l["node_id"].as_u64(), l["next_node_id"].as_u64());
            ends == (a, b) || ends == (b, a)
        })
        .map(|l| {
            (
                l["node_id"].as_u64().unwrap(),
                l["egress_port"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(lossy.len(), 2, "{loss}: {lossy:?}");

    // Each lossy port's coverage before the loss, and under it from 2 s after Pro's latest
    // raise (Pro steps S once per window while the port stays stale; a loaded machine's
    // pipeline takes longer to show it): the telemetry intervals with an update, per window,
    // over the best covered port's in that window (a loaded machine's emulator falls behind
    // the wall clock, and a window then holds fewer than ten intervals of it). Waited for
    // until four windows at the port's latest S are stored.
    let raised_at = |(node, port): (u64, u64)| -> i64 {
        let ports = call("GET", "/v1/int-label/ports", None).json();
        let view = ports["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["switch"].as_u64() == Some(node) && p["port"].as_u64() == Some(port));
        view.and_then(|v| v["intent"].as_str())
            .map(|id| call("GET", &format!("/v1/intents/{id}"), None).json())
            .and_then(|i| i["created_ms"].as_i64())
            .map_or(loss_from, |ms| ms * 1_000_000)
    };
    let coverage_of = |(node, port): (u64, u64)| {
        let settled = raised_at((node, port)).max(loss_from) + 2_000_000_000;
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for row in sql(&format!(
            "WITH best AS (SELECT window_start AS w, max(intervals_updated) AS n \
               FROM int_label GROUP BY window_start) \
             SELECT CAST(window_start AS BIGINT) AS start, CAST(window_end AS BIGINT) AS end, \
               CAST(intervals_updated AS DOUBLE) / best.n AS share \
             FROM int_label JOIN best ON window_start = best.w \
             WHERE node_id = {node} AND egress_port = {port}"
        )) {
            let (start, end) = (row["start"].as_i64().unwrap(), row["end"].as_i64().unwrap());
            let n = row["share"].as_f64().unwrap();
            if start >= labelling_from && end <= loss_from {
                before.push(n);
            } else if start >= settled {
                after.push(n);
            }
        }
        (before, after)
    };
    let seen = loop {
        let seen: Vec<_> = lossy.iter().map(|p| (*p, coverage_of(*p))).collect();
        if seen.iter().all(|(_, (_, after))| after.len() >= 4) || Instant::now() > give_up {
            break seen;
        }
        std::thread::sleep(Duration::from_secs(2));
    };

    // Every port labels; each raised port's view names its intent: owned by int-label-pro,
    // on that port; both lossy ports were raised after the loss began.
    let ports = call("GET", "/v1/int-label/ports", None).json();
    let all = ports["ports"].as_array().unwrap();
    assert!(all.len() >= 40, "the fat-tree's ports: {}", all.len());
    assert!(
        all.iter().all(|p| p["updates"].as_u64() > Some(0)),
        "{ports}"
    );
    for p in all.iter().filter(|p| p["shift"].as_u64() >= Some(1)) {
        let id = p["intent"].as_str().unwrap_or_else(|| panic!("{p}"));
        let i = call("GET", &format!("/v1/intents/{id}"), None).json();
        assert_eq!(i["spec"]["owner"], "int-label-pro", "{i}");
        assert_eq!(i["spec"]["kind"], "label-frequency", "{i}");
        assert_eq!(i["spec"]["shift"], p["shift"], "{i}");
        assert_eq!(i["spec"]["switches"][0], p["switch"], "{i}");
        assert_eq!(i["spec"]["ports"][0], p["port"], "{i}");
    }
    let intents = call("GET", "/v1/intents", None).json();
    let coverage = call("GET", "/v1/int-label/coverage?since=2m", None).json();
    assert!(
        started.elapsed() < Duration::from_secs(75),
        "looked too late"
    );
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    for ((node, port), (before, after)) in &seen {
        let view = all
            .iter()
            .find(|p| p["switch"].as_u64() == Some(*node) && p["port"].as_u64() == Some(*port))
            .unwrap_or_else(|| panic!("port {node}:{port} in {ports}"));
        eprintln!(
            "port {node}:{port} (S = {}): intervals updated per window, of the best port's: {:.2} before the loss ({} windows), {:.2} under it at Pro's S ({} windows)",
            view["shift"],
            mean(before),
            before.len(),
            mean(after),
            after.len()
        );
        assert!(view["shift"].as_u64() >= Some(1), "{view}");
        assert!(
            before.len() >= 3 && after.len() >= 3,
            "{node}:{port}: windows before {before:?}, after {after:?}"
        );
        assert!(
            mean(after) >= 0.5 * mean(before),
            "{node}:{port}: coverage did not recover: {before:?} → {after:?}"
        );
    }
    // The loss is what raised them (a port may also have been raised for an idle spell
    // before it).
    let raised_after_loss = intents["intents"].as_array().unwrap().iter().any(|i| {
        i["spec"]["owner"] == "int-label-pro"
            && lossy.iter().any(|(node, port)| {
                i["spec"]["switches"][0].as_u64() == Some(*node)
                    && i["spec"]["ports"][0].as_u64() == Some(*port)
            })
            && i["created_ms"].as_i64().unwrap() * 1_000_000 >= loss_from
    });
    assert!(raised_after_loss, "{lossy:?}: not raised after the loss");
    let rows = coverage["coverage"].as_array().unwrap();
    assert!(!rows.is_empty(), "{coverage}");
    assert!(
        rows.iter()
            .all(|r| (0.0..=1.0).contains(&r["coverage"].as_f64().unwrap_or(-1.0))),
        "{coverage}"
    );
    up.interrupt();
}

/// Traffic engineering from forecasts through the real loop: the `elephants` scenario grows
/// long flows that ECMP hashes onto shared links; once the knowledge service forecasts a link
/// at 800‰ or more, the controller moves destinations off it with `reroute` recommendations
/// (auto-applied here), verification sees their flows off the link, and the move either
/// relieves the link or is rolled back with the link's reading as evidence.
#[test]
fn a_link_forecast_hot_has_elephants_moved_off_it_and_verified() {
    let up = Up::start_with(
        "te",
        "240s",
        &[
            ("KPLANE__KNOWLEDGE__MIN_WINDOWS", "25"),
            (
                "KPLANE__INTENT_API__INTENTS__TRAFFIC_ENGINEERING__ENABLED",
                "true",
            ),
            (
                "KPLANE__INTENT_API__INTENTS__TRAFFIC_ENGINEERING__HOLD",
                "600s",
            ),
        ],
        &[
            SMALL_FABRIC,
            &[
                "--scenario",
                "elephants:flows=4,start=0.15,from=0.3,to=0.55,period=40,swing=0.25",
            ],
        ]
        .concat(),
    );
    let (addr, token) = (up.addr, up.token.clone());
    let call = |method: &str, path: &str, body: Option<&str>| {
        let r = http(addr, method, path, Some(&token), body).unwrap();
        assert!(r.status < 300, "{method} {path}: {} {}", r.status, r.body);
        r.json()
    };
    call(
        "PUT",
        "/v1/intents/policy",
        Some(r#"{"auto-apply": ["monitor", "tune", "reroute"]}"#),
    );
    // The first move to reach a verdict: active (verified) or rolled back.
    let deadline = Instant::now() + Duration::from_secs(200);
    let decided = loop {
        let list = call("GET", "/v1/intents", None);
        let found = list["intents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| {
                i["spec"]["owner"] == "traffic-engineering"
                    && ["active", "rolled-back"].contains(&i["state"].as_str().unwrap_or(""))
            })
            .cloned();
        if let Some(i) = found {
            break i;
        }
        assert!(
            Instant::now() < deadline,
            "no traffic-engineering move decided in 200 s: {list}"
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    eprintln!("{decided}");
    let reason = decided["spec"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("traffic engineering: link "), "{reason}");
    let [a, b] = [0, 1].map(|k| decided["spec"]["avoid"]["link"][k].as_u64().unwrap());
    assert_eq!(decided["spec"]["kind"], "reroute");
    assert!(decided["spec"]["dst"].as_str().unwrap().ends_with("/32"));
    // Verified: fresh windows showed flows towards it on paths avoiding the link.
    let evidence = decided["evidence"].to_string();
    assert!(evidence.contains("none violating"), "{decided}");
    let id = decided["id"].as_str().unwrap();
    // Judged `settle` (10 s) after it was written: still active means the link was below
    // 800‰ then; rolled back says what it read.
    std::thread::sleep(Duration::from_secs(14));
    let judged = call("GET", &format!("/v1/intents/{id}"), None);
    match judged["state"].as_str().unwrap() {
        "active" => {
            let applied = judged["applied_ms"].as_u64().unwrap();
            // The windows around the judgement, every partition's samples weighted.
            let sql = format!(
                "SELECT sum(tx_utilization_mean * samples) / sum(samples) AS u FROM links \
                 WHERE ((node_id = {a} AND next_node_id = {b}) OR (node_id = {b} AND next_node_id = {a})) \
                 AND window_start >= to_timestamp_millis({}) AND window_start < to_timestamp_millis({})",
                applied + 5_000,
                applied + 12_000
            );
            let body = serde_json::json!({ "sql": sql }).to_string();
            let rows = call("POST", "/v1/query", Some(&body));
            let u = rows["rows"][0]["u"].as_f64().unwrap_or(0.0);
            assert!(
                u < 800.0,
                "link {a}-{b} at {u}‰ after the move, not rolled back: {judged}"
            );
        }
        "rolled-back" => {
            let evidence = judged["evidence"].to_string();
            assert!(evidence.contains("still at"), "{judged}");
        }
        other => panic!("{other}: {judged}"),
    }
    // The destinations' forecasts, served beside what each window turned out to be: the
    // elephants' long flows are forecast from their rate, the rest by the model. In proportion
    // (MAPE) they are nearer the truth than both baselines, and nearer than the EWMA in RMSE.
    let served = call(
        "GET",
        "/v1/forecasts?series=destination_bytes&windows=600",
        None,
    );
    // Per method (model, last value, EWMA): squared errors, relative errors.
    let mut errors = [(0.0, 0.0); 3];
    let mut n = 0;
    for p in served["forecasts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["points"].as_array().unwrap())
    {
        let Some(actual) = p["actual"].as_f64().filter(|a| *a > 0.0) else {
            continue;
        };
        n += 1;
        for (e, k) in errors.iter_mut().zip(["predicted", "last_value", "ewma"]) {
            let err = p[k].as_f64().unwrap() - actual;
            e.0 += err * err;
            e.1 += err.abs() / actual;
        }
    }
    let [model, last, ewma] =
        errors.map(|(sq, rel)| ((sq / f64::from(n)).sqrt(), 100.0 * rel / f64::from(n)));
    eprintln!(
        "destination forecasts, {n} scored: RMSE / MAPE model {model:.0?}, last value {last:.0?}, EWMA {ewma:.0?}"
    );
    assert!(n >= 200, "{served}");
    assert!(
        model.1 < last.1 && model.1 < ewma.1 && model.0 < ewma.0,
        "model {model:?}, last value {last:?}, EWMA {ewma:?}"
    );
    up.interrupt();
}

/// A change nothing explains that does not go away becomes the usual: a heavy hitter that
/// starts and keeps sending — one flow at 70 % of its link rate, so the link to its
/// destination runs past half its capacity (a link less busy is not news) but its queue is not
/// congested (at 90 % the fabric's own traffic filled it now and then, and the link was that
/// congestion's collateral, never raised on its own) — is raised `unknown`, settles after
/// `settle-after` (5 s here) — its episode ends with `settled` — and is not raised again while
/// it goes on. The thresholds are calibrated for a false alarm a minute: from 25 windows of
/// training the default budget's thresholds for links were 12–14 against this link's score of
/// about 15, and some runs raised nothing; this budget's are 8–10.
#[test]
fn a_change_that_lasts_settles_and_is_not_raised_again() {
    let up = Up::start_with(
        "settle",
        "150s",
        &[
            ("KPLANE__KNOWLEDGE__MIN_WINDOWS", "25"),
            ("KPLANE__KNOWLEDGE__SETTLE_AFTER", "5s"),
            ("KPLANE__KNOWLEDGE__FALSE_ALARMS_PER_HOUR", "60"),
        ],
        &[
            SMALL_FABRIC,
            &["--scenario", "heavy-hitter:start=0.3,rate=0.7,flows=1"],
        ]
        .concat(),
    );
    let (addr, token) = (up.addr, up.token.clone());
    let anomalies = |query: &str| {
        let r = http(
            addr,
            "GET",
            &format!("/v1/anomalies?{query}"),
            Some(&token),
            None,
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["anomalies"].as_array().unwrap().clone()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let settled = loop {
        let closed = anomalies("state=closed&limit=1000");
        if let Some(a) = closed.iter().find(|a| a["settled"] == true) {
            break a.clone();
        }
        assert!(
            Instant::now() < deadline,
            "nothing settled in 120 s: {closed:#?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    eprintln!("{settled:#}");
    assert_eq!(settled["type"], "unknown", "{settled:#}");
    let lasted = settled["end_ns"].as_i64().unwrap() - settled["start_ns"].as_i64().unwrap();
    assert!(lasted >= 4_000_000_000, "{settled:#}");
    assert!(
        settled["summary"]
            .as_str()
            .unwrap()
            .contains("its usual from now on"),
        "{settled:#}"
    );
    // The heavy hitter goes on: 15 s later its entity has not been raised again.
    std::thread::sleep(Duration::from_secs(15));
    let entity = settled["entity"].as_str().unwrap();
    let again: Vec<Value> = anomalies(&format!("entity={entity}&limit=1000"))
        .into_iter()
        .filter(|a| {
            a["entity_kind"] == settled["entity_kind"]
                && a["start_ns"].as_i64() > settled["start_ns"].as_i64()
        })
        .collect();
    assert!(again.is_empty(), "raised again after settling: {again:#?}");
    // Only what no definition explained settles.
    let closed = anomalies("state=closed&limit=1000");
    assert!(
        closed
            .iter()
            .filter(|a| a["settled"] == true)
            .all(|a| a["type"] == "unknown"),
        "{closed:#?}"
    );
    up.interrupt();
}
