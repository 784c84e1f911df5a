//! Intents end to end over real sockets: the API (`kplane_intent_api::start`) with the
//! emulator driver talking to a real emulator control channel. Submit, dry run, conflicts,
//! bad input, reroute checks, approval, drift, TTL, delete, an unreachable switch, and the
//! desired state surviving an API restart.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplane_control_plane::IntentsConfig;
use kplane_emulator::run::{RunConfig, build};
use kplane_emulator::sim::Sim;
use kplane_intent_api::auth::{Role, TokenConfig, hash_token};
use kplane_intent_api::live::Live;
use kplane_intent_api::{Config, Running, start};
use kplane_runtime::Shutdown;
use kplane_runtime::probe::{Response, request};
use kplane_southbound::{DriverConfig, emulator};
use serde_json::{Value, json};

const OPS: &str = "ops-token";
const ADMIN: &str = "admin-token";

struct Fabric {
    sim: Arc<Mutex<Sim>>,
    control: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

async fn fabric() -> Fabric {
    let cfg = RunConfig {
        flows_per_second: 0.0,
        ..RunConfig::default()
    };
    let sim = Arc::new(Mutex::new(build(&cfg).unwrap()));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control = l.local_addr().unwrap();
    // The control channel behind the same tokens as the API: the driver writes with OPS.
    let router =
        kplane_runtime::auth::protect(kplane_emulator::control::router(sim.clone()), http().auth());
    let server = tokio::spawn(async move {
        let _ = axum::serve(l, router).await;
    });
    Fabric {
        sim,
        control,
        server,
    }
}

fn http() -> kplane_runtime::HttpConfig {
    kplane_runtime::HttpConfig {
        tokens: vec![
            TokenConfig {
                name: "ops".into(),
                role: Role::Operator,
                sha256: hash_token(OPS),
            },
            TokenConfig {
                name: "root".into(),
                role: Role::Admin,
                sha256: hash_token(ADMIN),
            },
        ],
        ..Default::default()
    }
}

fn config(state: &std::path::Path, control: SocketAddr) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: "127.0.0.1:0".parse().unwrap(),
        store_dir: state.join("store"),
        http: http(),
        intents: IntentsConfig {
            state_dir: state.join("intent-api"),
            reconcile_interval: Duration::from_millis(50),
            // No stream processor here: verification is tested in crates/kplane-cli/tests/e2e.
            verify: false,
            drivers: vec![DriverConfig::Emulator(emulator::Config {
                control,
                timeout: Duration::from_secs(2),
                token: Some(OPS.into()),
            })],
            ..IntentsConfig::default()
        },
        ..Config::default()
    }
}

async fn call(api: &Running, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
    let (addr, method, path, token) = (
        api.addr,
        method.to_string(),
        path.to_string(),
        token.to_string(),
    );
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let Response { status, body } = tokio::task::spawn_blocking(move || {
        let auth = format!("Bearer {token}");
        request(
            addr,
            &method,
            &path,
            &[("authorization", &auth)],
            &body,
            Duration::from_secs(5),
        )
    })
    .await
    .unwrap()
    .unwrap();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

async fn wait_state(api: &Running, id: &str, state: &str) -> Value {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, v) = call(api, "GET", &format!("/v1/intents/{id}"), OPS, Value::Null).await;
        if v["state"] == state {
            return v;
        }
        assert!(Instant::now() < end, "{id} never became {state}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn emulator_entries(f: &Fabric, table: &str) -> Vec<Value> {
    let s = f.sim.lock().unwrap();
    s.tables
        .entries(table)
        .iter()
        .map(|r| serde_json::to_value(&r.spec).unwrap())
        .collect()
}

async fn wait_entries(f: &Fabric, table: &str, want: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let e = emulator_entries(f, table);
        if want(&e) {
            return e;
        }
        assert!(Instant::now() < end, "{table}: {e:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each body is refused (400 or 422) with an error naming its field.
async fn refused_naming_the_field<const N: usize>(api: &Running, cases: [(Value, &str); N]) {
    for (body, field) in cases {
        let (s, v) = call(api, "POST", "/v1/intents", OPS, body.clone()).await;
        assert!(s == 400 || s == 422, "{body}: {s} {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(field),
            "{body}: {v}"
        );
    }
}

/// A test's state directory, removed when the test ends (passed or not).
struct Scratch(std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp(tag: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("kplane-intents-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    Scratch(d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intents_reach_the_emulator_and_leave_it_again() {
    let f = fabric().await;
    let dir = temp("main");
    let stop = Shutdown::new();
    let api = start(config(&dir, f.control), Live::new(10), stop.clone())
        .await
        .unwrap();

    // Block: drop ACL entries on every edge switch (8 in fat-tree:4).
    let block =
        json!({"kind": "block", "match": {"src": "10.0.0.2", "protocol": "udp"}, "reason": "test"});
    let (s, v) = call(&api, "POST", "/v1/intents/dry-run", OPS, block.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["entries"], 8, "{v}");
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, block.clone()).await;
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(v["spec"]["owner"], "ops");
    let v = wait_state(&api, &id, "active").await;
    assert!(
        v["switches"]
            .as_object()
            .unwrap()
            .values()
            .all(|s| s == "installed"),
        "{v}"
    );
    let acl = wait_entries(&f, "drop_acl", |e| e.len() == 8).await;
    assert!(
        acl.iter().all(|e| e["match"]["src_addr"] == "10.0.0.2"
            && e["match"]["protocol"] == "17"
            && e["priority"] == 100),
        "{acl:?}"
    );

    // The same block again: a conflict naming the first.
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, block.clone()).await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains(&id), "{v}");
    // Overlapping with another action at the same priority: monitor is another table, fine;
    // a tune and a monitor-with-detection of the same flows at one priority clash.
    let tune = json!({"kind": "tune", "match": {"dst": "10.0.0.0/24"}, "detection": {"algorithm": "per-flow", "threshold": 5000}});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, tune).await;
    assert_eq!(s, 201, "{v}");
    let mon = json!({"kind": "monitor", "match": {"dst": "10.0.0.1"}, "detection": {"algorithm": "ewma", "threshold": 100}});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, mon).await;
    assert_eq!(s, 409, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("overlapping int_sink_detection"),
        "{v}"
    );

    // A monitor in INT-label mode selects a specific flow at the edge (INT_num from MAX_hop).
    let specific = json!({"kind": "monitor", "match": {"dst": "10.0.7.1"}, "int-label": true});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, specific).await;
    assert_eq!(s, 201, "{v}");
    let e = wait_entries(&f, "int_watchlist", |e| {
        e.iter().any(|e| e["action"] == "int_label_specific")
    })
    .await;
    let w = e
        .iter()
        .find(|e| e["action"] == "int_label_specific")
        .unwrap();
    assert_eq!(w["params"], json!({"max_hop": 5}), "{w}");

    // Complex detection compiles to `detect_complex`'s two literals (op 1: above, 3: rises by).
    let complex = json!({"kind": "tune", "match": {"dst": "10.0.5.0/24"}, "priority": 30,
        "detection": {"algorithm": "complex", "when": [
            {"measurement": "hop-latency", "above": 10000},
            {"measurement": "queue-occupancy", "rises-by": 100}]}});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, complex).await;
    assert_eq!(s, 201, "{v}");
    let e = wait_entries(&f, "int_sink_detection", |e| {
        e.iter().any(|e| e["action"] == "detect_complex")
    })
    .await;
    let c = e.iter().find(|e| e["action"] == "detect_complex").unwrap();
    assert_eq!(
        c["params"],
        json!({"measurement": 0, "op": 1, "threshold": 10000,
               "measurement1": 1, "op1": 3, "threshold1": 100,
               "measurement2": 0, "op2": 0, "threshold2": 0,
               "measurement3": 0, "op3": 0, "threshold3": 0}),
        "{c}"
    );
    let bad = json!({"kind": "tune", "match": {"dst": "10.0.6.0/24"},
        "detection": {"algorithm": "complex", "when": [{"above": 1, "below": 2}]}});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, bad).await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("detection.when[0]"),
        "{v}"
    );

    // Bad input names the field; a viewer-level token cannot submit.
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "block", "match": {"src": "10.0.0.300"}}),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("match.src:"),
        "{v}"
    );
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, json!({"kind": "blok"})).await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("kind: \"blok\""),
        "{v}"
    );
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "block", "match": {"src": "10.0.0.1"}, "switches": [99]}),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("99 is not a switch"),
        "{v}"
    );

    // Reroute: every switch but the avoided one pinned towards the host; a black hole refused.
    let (topo_edge, victim_edge) = {
        let s = f.sim.lock().unwrap();
        let h = s.topo.host_indices()[0];
        let edge = s.topo.nodes[h].ports[0].1;
        let core = s
            .topo
            .nodes
            .iter()
            .find(|n| n.name.starts_with('c'))
            .map(|n| n.id)
            .unwrap_or(17);
        (core, s.topo.nodes[edge].id)
    };
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "reroute", "dst": "10.0.0.1/32", "avoid": {"switch": victim_edge}}),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"].as_str().unwrap().contains("black hole"), "{v}");
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "reroute", "dst": "10.0.0.1/32", "avoid": {"switch": topo_edge}}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let reroute = v["id"].as_str().unwrap().to_string();
    wait_state(&api, &reroute, "active").await;
    let fwd = wait_entries(&f, "ipv4_forward", |e| !e.is_empty()).await;
    assert!(!fwd.iter().any(|e| e["switch"] == topo_edge), "{fwd:?}");
    assert!(fwd.iter().all(|e| e["match"]["dst_addr"] == "10.0.0.1/32"));

    // Drift: an entry removed behind kplane's back is re-pushed, and the audit log says so.
    f.sim.lock().unwrap().tables.clear("drop_acl");
    wait_entries(&f, "drop_acl", |e| e.len() == 8).await;
    let (_, v) = call(&api, "GET", "/v1/audit?actor=kplane", OPS, Value::Null).await;
    assert!(
        v["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["result"] == "drift"),
        "{v}"
    );

    // A recommendation of a kind the policy does not auto-apply waits for an admin.
    let rec = json!({"kind": "block", "match": {"src": "10.0.0.3"}, "origin": "recommendation", "owner": "knowledge", "reason": "ddos source"});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, rec).await;
    assert_eq!(
        (s, v["state"].as_str()),
        (201, Some("pending-approval")),
        "{v}"
    );
    let pending = v["id"].as_str().unwrap().to_string();
    let (s, _) = call(
        &api,
        "POST",
        &format!("/v1/intents/{pending}/approve"),
        OPS,
        Value::Null,
    )
    .await;
    assert_eq!(s, 403, "operators cannot approve");
    let (s, v) = call(
        &api,
        "POST",
        &format!("/v1/intents/{pending}/approve"),
        ADMIN,
        Value::Null,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["approved_by"], "root");
    wait_state(&api, &pending, "active").await;
    wait_entries(&f, "drop_acl", |e| e.len() == 16).await;

    // TTL: gone by itself.
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "monitor", "match": {"dst-port": "443"}, "ttl": "1s", "priority": 7}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let ttl = v["id"].as_str().unwrap().to_string();
    wait_entries(&f, "int_watchlist", |e| {
        e.iter().filter(|e| e["priority"] == 7).count() == 8
    })
    .await;
    wait_state(&api, &ttl, "expired").await;
    wait_entries(&f, "int_watchlist", |e| {
        !e.iter().any(|e| e["priority"] == 7)
    })
    .await;

    // Delete: its entries leave.
    let (s, _) = call(
        &api,
        "DELETE",
        &format!("/v1/intents/{id}"),
        OPS,
        Value::Null,
    )
    .await;
    assert_eq!(s, 200);
    wait_entries(&f, "drop_acl", |e| {
        e.len() == 8 && e.iter().all(|e| e["match"]["src_addr"] == "10.0.0.3")
    })
    .await;
    let (_, v) = call(
        &api,
        "GET",
        &format!("/v1/audit?intent={id}"),
        OPS,
        Value::Null,
    )
    .await;
    let actions: Vec<&str> = v["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["delete", "applied", "submit"], "{v}");

    // The desired state survives a restart of the API.
    stop.trigger();
    api.wait().await.unwrap();
    let stop = Shutdown::new();
    let api = start(config(&dir, f.control), Live::new(10), stop.clone())
        .await
        .unwrap();
    let (_, v) = call(&api, "GET", "/v1/intents?state=active", OPS, Value::Null).await;
    let ids: Vec<&str> = v["intents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&reroute.as_str()) && ids.contains(&pending.as_str()),
        "{v}"
    );
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, block).await;
    assert_eq!(s, 201, "the deleted block's match is free again: {v}");
    stop.trigger();
    api.wait().await.unwrap();
}

/// A gate in front of the control channel at `to`: while `open`, connections are passed
/// through; while closed, each is hung up on, and so is every connection it passed through
/// before (a client that kept the one it learnt the fabric on must not reach the switch
/// either). Its address stays taken for the whole test, so the switch can go away and come
/// back without a port being freed for another test to take.
async fn gate(
    to: SocketAddr,
    open: Arc<std::sync::atomic::AtomicBool>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use std::sync::atomic::Ordering;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            // An accept that fails (a client gone before it was accepted) ends nothing.
            let Ok((conn, _)) = l.accept().await else {
                continue;
            };
            if !open.load(Ordering::SeqCst) {
                continue; // dropped: hung up on
            }
            let open = open.clone();
            tokio::spawn(async move {
                let Ok(up) = tokio::net::TcpStream::connect(to).await else {
                    return;
                };
                let ((from_client, to_client), (from_switch, to_switch)) =
                    (conn.into_split(), up.into_split());
                // Whichever way ends first (a hang-up, or the gate closing) ends both.
                tokio::select! {
                    () = pass_while_open(from_client, to_switch, &open) => {}
                    () = pass_while_open(from_switch, to_client, &open) => {}
                }
            });
        }
    });
    (addr, task)
}

/// Copies `from` to `to` until either ends or `open` is false: checked after every read and
/// before its bytes are passed on, so nothing read once the gate is closed goes through.
async fn pass_while_open(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    open: &std::sync::atomic::AtomicBool,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0
            || !open.load(std::sync::atomic::Ordering::SeqCst)
            || to.write_all(&buf[..n]).await.is_err()
        {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_switch_leaves_the_intent_applying_and_is_retried() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fabric().await;
    let open = Arc::new(AtomicBool::new(true));
    let (control, gate) = gate(f.control, open.clone()).await;
    let dir = temp("down");
    let stop = Shutdown::new();
    let api = start(config(&dir, control), Live::new(10), stop.clone())
        .await
        .unwrap();
    // The control channel goes away after the API learnt the fabric.
    open.store(false, Ordering::SeqCst);
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "block", "match": {"dst": "10.0.0.1", "dst-port": "23"}}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, v) = call(&api, "GET", &format!("/v1/intents/{id}"), OPS, Value::Null).await;
        assert_eq!(v["state"], "applying", "{v}");
        if v["switches"]
            .as_object()
            .unwrap()
            .values()
            .all(|s| s.as_str().unwrap().starts_with("unreachable"))
        {
            break;
        }
        assert!(Instant::now() < end, "{v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(emulator_entries(&f, "drop_acl").is_empty());
    let (_, v) = call(&api, "GET", "/v1/intents/switches", OPS, Value::Null).await;
    let edge = v["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "edge0-0")
        .unwrap();
    assert!(
        edge["status"].as_str().unwrap().starts_with("unreachable"),
        "{v}"
    );
    // Back on the same address: retried, applied.
    open.store(true, Ordering::SeqCst);
    wait_state(&api, &id, "active").await;
    assert_eq!(emulator_entries(&f, "drop_acl").len(), 8);
    stop.trigger();
    api.wait().await.unwrap();
    gate.abort();
    f.server.abort();
}

/// A TR v2.0 report of a 3-hop flow from `src`.
fn report(seq: u32, src: std::net::Ipv4Addr) -> Vec<u8> {
    use kplane_wire::build::{Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, sample_hop};
    let hops = (1..=3).map(|n| sample_hop(n, 1_000, 10)).collect();
    let flow = FlowSpec::udp(src.into(), "10.9.9.9".parse().unwrap(), 4000, 80);
    let inner = PacketSpec {
        ethernet: false,
        ..PacketSpec::new(flow).with_int(
            IntSpec::new(kplane_wire::int::IntVersion::V2, 0xF000, hops),
            Encap::UdpPort { port: 0x4568 },
        )
    }
    .build();
    kplane_wire::build::report_v20(
        kplane_wire::report::v20::GroupHeader {
            hw_id: 1,
            sequence: seq,
            node_id: 3,
            ..Default::default()
        },
        &[IndividualSpec::int(0x1000, sample_hop(3, 0, 10), 4, inner)],
    )
}

/// Telemetry backpressure through its real inputs and outputs: a collector whose bus is full
/// (nobody consumes it) drops what it receives; the API reads that off the collector's
/// `/metrics`, steps the sinks' detection thresholds up level by level through `tune`
/// intents in the emulator, and steps them down again once the drops stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_coarsens_the_sinks_while_the_collector_drops_and_relaxes_after() {
    use kplane_control_plane::BackpressureConfig;
    use std::sync::atomic::{AtomicBool, Ordering};

    let collector_cfg = kplane_collector::Config {
        admin: "127.0.0.1:0".parse().unwrap(),
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        publish_reports: true,
        bus_capacity: 1,
        linger: Duration::from_millis(1),
        ..kplane_collector::Config::default()
    };
    let bus = kplane_collector::embedded_bus(&collector_cfg);
    let collector_stop = Shutdown::new();
    let collector =
        kplane_collector::start(collector_cfg, Arc::new(bus.clone()), collector_stop.clone())
            .await
            .unwrap();

    let f = fabric().await;
    let dir = temp("backpressure");
    let mut cfg = config(&dir, f.control);
    cfg.intents.backpressure = BackpressureConfig {
        sources: vec![collector.admin.to_string()],
        interval: Duration::from_millis(200),
        max_drop_rate: 50.0,
        hold: Duration::from_millis(600),
        relax_after: Duration::from_secs(1),
        max_level: 2,
        ..BackpressureConfig::default()
    };
    let stop = Shutdown::new();
    let api = start(cfg, Live::new(10), stop.clone()).await.unwrap();

    // Overload: 2,000 reports/s into a collector that can publish none of them.
    let sending = Arc::new(AtomicBool::new(true));
    let sender = {
        let (sending, to) = (sending.clone(), collector.udp[0]);
        std::thread::spawn(move || {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut seq = 0u32;
            while sending.load(Ordering::Relaxed) {
                for _ in 0..20 {
                    seq += 1;
                    let src = std::net::Ipv4Addr::from(0x0a00_0000 + seq % 500);
                    let _ = s.send_to(&report(seq, src), to);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Level 1, then level 2 (threshold doubled, one priority higher), each from `backpressure`.
    let thresholds = |e: &[Value]| -> Vec<(u64, u64)> {
        let mut t: Vec<(u64, u64)> = e
            .iter()
            .map(|x| {
                (
                    x["priority"].as_u64().unwrap(),
                    x["params"]["threshold"].as_u64().unwrap(),
                )
            })
            .collect();
        t.sort();
        t.dedup();
        t
    };
    let e = wait_entries(&f, "int_sink_detection", |e| {
        thresholds(e).iter().any(|t| t.1 == 40_000)
    })
    .await;
    assert!(e.iter().all(|x| x["action"] == "detect_per_flow"), "{e:?}");
    wait_entries(&f, "int_sink_detection", |e| {
        thresholds(e) == [(11, 40_000)]
    })
    .await;
    let (_, v) = call(&api, "GET", "/v1/intents?state=active", OPS, Value::Null).await;
    let mine: Vec<&Value> = v["intents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["spec"]["owner"] == "backpressure")
        .collect();
    assert_eq!(mine.len(), 1, "{v}");
    assert_eq!(mine[0]["spec"]["origin"], "recommendation");
    assert!(
        mine[0]["spec"]["reason"]
            .as_str()
            .unwrap()
            .contains("reports/s"),
        "{v}"
    );

    // Load gone: back down to level 1, then no backpressure entries at all.
    sending.store(false, Ordering::Relaxed);
    sender.join().unwrap();
    wait_entries(&f, "int_sink_detection", |e| {
        thresholds(e) == [(10, 20_000)]
    })
    .await;
    wait_entries(&f, "int_sink_detection", |e| e.is_empty()).await;
    let (_, audit) = call(
        &api,
        "GET",
        "/v1/audit?actor=backpressure&limit=100",
        ADMIN,
        Value::Null,
    )
    .await;
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "submit").count(),
        3,
        "{audit}"
    );
    stop.trigger();
    api.wait().await.unwrap();
    collector_stop.trigger();
    collector.wait().await.unwrap();
    f.server.abort();
}

/// An anomaly record as the knowledge service publishes it on `int.anomalies`.
fn anomaly(id: &str, detected_ns: i64, phase: &str, recommendations: Value) -> Vec<u8> {
    let v = json!({
        "id": id, "entity_kind": "destination", "entity": "10.0.0.2", "type": "ddos",
        "confidence": 0.97, "score": 14.2, "threshold": 4.1,
        "start_ns": detected_ns, "last_ns": detected_ns, "windows": 1,
        "detected_ns": detected_ns, "phase": phase, "model_version": 3,
        "explanation": {"summary": "a DDoS towards destination 10.0.0.2", "features": [],
                        "blast_radius": {"flows": [], "flows_total": 0, "nodes": [], "queues": [],
                                         "links": [], "other_flows": 0}},
        "recommendations": recommendations,
    });
    let mut b = serde_json::to_vec(&v).unwrap();
    b.push(b'\n');
    b
}

fn block(src: &str) -> Value {
    json!({"kind": "block", "match": {"src": src, "dst": "10.0.0.2/32"}, "origin": "recommendation",
           "owner": "knowledge", "ttl": "10m", "reason": format!("knowledge: DDoS towards 10.0.0.2: block {src}")})
}

async fn intents_of(api: &Running, anomaly: &str, n: usize) -> Vec<Value> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, v) = call(api, "GET", "/v1/intents", OPS, Value::Null).await;
        let mine: Vec<Value> = v["intents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["spec"]["anomaly"] == anomaly)
            .cloned()
            .collect();
        if mine.len() >= n {
            return mine;
        }
        assert!(Instant::now() < end, "{anomaly}: {mine:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anomalys_recommendations_become_intents_once_under_the_policy() {
    use kplane_bus::topics::ANOMALIES;
    use kplane_intent_api::live::apply;
    let f = fabric().await;
    let dir = temp("recommend");
    let stop = Shutdown::new();
    let live = Live::new(10);
    let api = start(config(&dir, f.control), live.clone(), stop.clone())
        .await
        .unwrap();
    let now = kplane_model::unix_time_ns() as i64;

    // Blocks are not auto-applied by default: both wait for an admin, naming the anomaly.
    let recs = json!([block("10.0.1.2/32"), block("10.0.1.3/32")]);
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly("destination:10.0.0.2:1", now, "start", recs.clone()),
    );
    let mine = intents_of(&api, "destination:10.0.0.2:1", 2).await;
    for i in &mine {
        assert_eq!(i["state"], "pending-approval", "{i}");
        assert_eq!(i["spec"]["origin"], "recommendation");
        assert_eq!(i["submitted_by"], "knowledge");
    }
    let (s, v) = call(
        &api,
        "GET",
        "/v1/anomalies/destination:10.0.0.2:1",
        OPS,
        Value::Null,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["intents"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["intents"][0]["state"], "pending-approval");

    // An update of the same episode does not submit them again.
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly("destination:10.0.0.2:1", now, "update", recs.clone()),
    );
    // With blocks auto-applied, the next anomaly's block reaches the switches at once.
    let (s, _) = call(
        &api,
        "PUT",
        "/v1/intents/policy",
        ADMIN,
        json!({"auto-apply": ["block"]}),
    )
    .await;
    assert_eq!(s, 200);
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly(
            "destination:10.0.0.2:2",
            now,
            "start",
            json!([block("10.0.1.9/32")]),
        ),
    );
    let mine = intents_of(&api, "destination:10.0.0.2:2", 1).await;
    let id = mine[0]["id"].as_str().unwrap();
    wait_state(&api, id, "active").await;
    wait_entries(&f, "drop_acl", |e| {
        e.iter().any(|x| x.to_string().contains("10.0.1.9"))
    })
    .await;
    assert_eq!(intents_of(&api, "destination:10.0.0.2:1", 2).await.len(), 2);

    // An attacker that joins the first episode later is blocked too, and only it.
    let mut grown = recs.as_array().unwrap().clone();
    grown.push(block("10.0.1.4/32"));
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly("destination:10.0.0.2:1", now, "update", Value::Array(grown)),
    );
    let mine = intents_of(&api, "destination:10.0.0.2:1", 3).await;
    let joined: Vec<&Value> = mine
        .iter()
        .filter(|i| i["spec"]["match"]["src"] == "10.0.1.4/32")
        .collect();
    assert_eq!(joined.len(), 1, "{mine:?}");
    wait_state(&api, joined[0]["id"].as_str().unwrap(), "active").await;

    // A block another anomaly's intent already holds is not asked for again (nor refused).
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly(
            "destination:10.0.0.2:4",
            now,
            "start",
            json!([block("10.0.1.9/32"), block("10.0.1.5/32")]),
        ),
    );
    let mine = intents_of(&api, "destination:10.0.0.2:4", 1).await;
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0]["spec"]["match"]["src"], "10.0.1.5/32");

    // A replayed old anomaly is not acted on; an unusable recommendation is refused in the
    // audit log under the knowledge service's name.
    let old = now - 600_000_000_000;
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly(
            "destination:10.0.0.2:0",
            old,
            "start",
            json!([block("10.0.1.7/32")]),
        ),
    );
    apply(
        &live,
        ANOMALIES,
        None,
        &anomaly(
            "destination:10.0.0.2:3",
            now,
            "start",
            json!([{"kind": "block"}]),
        ),
    );
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, v) = call(&api, "GET", "/v1/audit?actor=knowledge", OPS, Value::Null).await;
        let refused = v["audit"].as_array().unwrap().iter().any(|r| {
            r["result"] == "refused"
                && r["detail"]
                    .as_str()
                    .unwrap()
                    .contains("destination:10.0.0.2:3")
        });
        if refused {
            break;
        }
        assert!(Instant::now() < end, "{v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, v) = call(&api, "GET", "/v1/audit?actor=knowledge", OPS, Value::Null).await;
    let conflicts: Vec<&Value> = v["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["result"] == "refused" && r["detail"].as_str().unwrap().contains("already owns")
        })
        .collect();
    assert!(conflicts.is_empty(), "{conflicts:?}");
    let (_, v) = call(&api, "GET", "/v1/intents", OPS, Value::Null).await;
    assert!(
        !v["intents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["spec"]["anomaly"] == "destination:10.0.0.2:0"),
        "{v}"
    );
    stop.trigger();
    api.wait().await.unwrap();
    f.server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn int_label_intents_program_every_port_and_pro_frequencies_per_port() {
    let f = fabric().await;
    let dir = temp("label");
    let stop = Shutdown::new();
    let api = start(config(&dir, f.control), Live::new(10), stop.clone())
        .await
        .unwrap();

    // Every port of every switch of the fat-tree (k = 4: 20 switches × 4 ports).
    let label = json!({"kind": "int-label", "interval": "50ms", "algorithm": "base-b",
                       "function": "f2", "rest": "5ms"});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, label).await;
    assert_eq!(s, 201, "{v}");
    wait_state(&api, v["id"].as_str().unwrap(), "active").await;
    let entries = wait_entries(&f, "label_config", |e| e.len() == 80).await;
    let e = &entries[0];
    assert_eq!(e["action"], "set_labelling", "{e}");
    assert_eq!(
        e["params"],
        json!({"interval_ns": 50_000_000, "max_hop": 5, "algorithm": 1, "function": 2,
               "rest_ns": 5_000_000}),
        "{e}"
    );
    let switch = e["switch"].as_u64().unwrap();
    let port = e["match"]["egress_port"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();

    // Pro's frequency of one port: a `label_frequency` entry beside its `label_config`.
    let freq =
        json!({"kind": "label-frequency", "switches": [switch], "ports": [port], "shift": 2});
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, freq).await;
    assert_eq!(s, 201, "{v}");
    let freq_id = v["id"].as_str().unwrap().to_string();
    wait_state(&api, &freq_id, "active").await;
    let shifts = wait_entries(&f, "label_frequency", |e| e.len() == 1).await;
    assert_eq!(shifts[0]["params"]["shift"], 2, "{shifts:?}");
    assert_eq!(shifts[0]["switch"], switch, "{shifts:?}");
    call(
        &api,
        "DELETE",
        &format!("/v1/intents/{freq_id}"),
        OPS,
        Value::Null,
    )
    .await;
    wait_entries(&f, "label_frequency", <[Value]>::is_empty).await;

    refused_naming_the_field(
        &api,
        [
            (json!({"kind": "int-label", "interval": "10s"}), "interval"),
            (json!({"kind": "int-label", "max-hops": 9}), "max-hops"),
            (json!({"kind": "int-label", "shift": 1}), "shift"),
            (json!({"kind": "label-frequency", "ports": [1]}), "shift"),
            (
                json!({"kind": "label-frequency", "ports": [600], "shift": 1}),
                "ports",
            ),
            (
                json!({"kind": "block", "match": {"src": "10.0.0.2"}, "ports": [1]}),
                "ports",
            ),
        ],
    )
    .await;
    stop.trigger();
    f.server.abort();
}

/// The probes' hops as (switch, next switch), checked against the emulator's links: each
/// step over a link that is up, leaving by that link's port.
fn probe_hops(f: &Fabric, plans: &Value) -> Vec<(u64, u64)> {
    let s = f.sim.lock().unwrap();
    let id = |node: usize| u64::from(s.topo.nodes[node].id);
    let mut hops = Vec::new();
    for probe in plans["plans"][0]["probes"].as_array().unwrap() {
        let switches: Vec<u64> = probe["switches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            probe["source"].as_u64(),
            switches.first().copied(),
            "{probe}"
        );
        assert_eq!(probe["mea"].as_array().unwrap().len(), switches.len());
        for (w, sr) in switches.windows(2).zip(probe["sr"].as_array().unwrap()) {
            let (li, l) = s
                .topo
                .links
                .iter()
                .enumerate()
                .find(|(_, l)| {
                    (id(l.a.0), id(l.b.0)) == (w[0], w[1]) || (id(l.b.0), id(l.a.0)) == (w[0], w[1])
                })
                .unwrap_or_else(|| panic!("{} → {} is not a link", w[0], w[1]));
            assert!(s.link_up[li], "{probe} crosses a failed link");
            let port = if id(l.a.0) == w[0] { l.a.1 } else { l.b.1 };
            assert_eq!(sr["switch"].as_u64(), Some(w[0]), "{probe}");
            assert_eq!(sr["next_port"].as_u64(), Some(u64::from(port)), "{probe}");
            hops.push((w[0], w[1]));
        }
    }
    hops
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_plan_covers_the_fabric_and_follows_a_failed_link() {
    let f = fabric().await;
    let dir = temp("probes");
    let stop = Shutdown::new();
    let mut cfg = config(&dir, f.control);
    cfg.intents.topology_refresh = Duration::from_millis(100);
    let api = start(cfg, Live::new(10), stop.clone()).await.unwrap();

    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "probe-plan", "planner": "gpint-3", "measure": "port-packets"}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let v = wait_state(&api, &id, "active").await;
    assert!(v["entries"].as_array().is_none_or(Vec::is_empty), "{v}");

    // GPINT-3 over the fat-tree's 20 switches: ⌊3·20/10⌋ = 6 probes, every switch on one.
    let (_, plans) = call(&api, "GET", "/v1/probe-plans", OPS, Value::Null).await;
    let plan = &plans["plans"][0];
    assert_eq!(plan["intent"], id.as_str(), "{plans}");
    assert_eq!(plan["probes"].as_array().unwrap().len(), 6, "{plan}");
    assert_eq!(plan["uncovered"], json!([]), "{plan}");
    let mut seen: Vec<u64> = plan["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["switches"].as_array().unwrap().clone())
        .map(|v| v.as_u64().unwrap())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 20, "{plan}");
    // Port counters: the first to the last port (a k = 4 fat-tree switch's 0–3) at every
    // switch.
    assert!(
        plan["probes"][0]["mea"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| *r == json!([0, 3])),
        "{plan}"
    );
    let hops = probe_hops(&f, &plans);
    let links_up = plan["links_up"].as_u64().unwrap();

    // A link a probe crosses fails: the next plan avoids it.
    let (a, b) = hops[0];
    let index = {
        let s = f.sim.lock().unwrap();
        let id = |node: usize| u64::from(s.topo.nodes[node].id);
        s.topo
            .links
            .iter()
            .position(|l| (id(l.a.0), id(l.b.0)) == (a, b) || (id(l.b.0), id(l.a.0)) == (a, b))
            .unwrap()
    };
    {
        let mut s = f.sim.lock().unwrap();
        let now = s.now();
        s.schedule(now, kplane_emulator::sim::Action::LinkDown(index));
        s.run_until(now + 1);
    }
    let end = Instant::now() + Duration::from_secs(10);
    let plans = loop {
        let (_, plans) = call(&api, "GET", "/v1/probe-plans", OPS, Value::Null).await;
        if plans["plans"][0]["links_up"].as_u64() == Some(links_up - 1) {
            break plans;
        }
        assert!(
            Instant::now() < end,
            "the plan kept the failed link: {plans}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let hops = probe_hops(&f, &plans);
    assert!(
        !hops.contains(&(a, b)) && !hops.contains(&(b, a)),
        "{plans}"
    );
    assert_eq!(plans["plans"][0]["uncovered"], json!([]), "{plans}");

    refused_naming_the_field(
        &api,
        [
            (
                json!({"kind": "probe-plan", "planner": "dijkstra"}),
                "planner",
            ),
            (json!({"kind": "probe-plan", "shift": 1}), "shift"),
            (
                json!({"kind": "block", "match": {"src": "10.0.0.2"}, "planner": "euler"}),
                "planner",
            ),
        ],
    )
    .await;
    stop.trigger();
    f.server.abort();
}

/// GPINT's loop: the monitor posts a session's findings; a link it found unavailable (a gray
/// failure the drivers do not see) leaves the next plan, the prefixes whose shortest paths
/// cross it get `reroute` recommendations around it (applied under the policy), a congested
/// link is named; when a later session's probes cross the link again, the reroutes are
/// withdrawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_the_probes_found_unavailable_is_planned_and_routed_around_until_it_is_back() {
    let f = fabric().await;
    let dir = temp("probe-loop");
    let stop = Shutdown::new();
    let api = start(config(&dir, f.control), Live::new(10), stop.clone())
        .await
        .unwrap();
    let (s, v) = call(
        &api,
        "PUT",
        "/v1/intents/policy",
        ADMIN,
        json!({"auto-apply": ["monitor", "tune", "reroute"]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "probe-plan", "planner": "gpint-3"}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let plan_id = v["id"].as_str().unwrap().to_string();
    wait_state(&api, &plan_id, "active").await;
    let (_, plans) = call(&api, "GET", "/v1/probe-plans", OPS, Value::Null).await;
    let links_up = plans["plans"][0]["links_up"].as_u64().unwrap();
    let (a, b) = probe_hops(&f, &plans)[0];
    let (c, d) = probe_hops(&f, &plans)[1];
    let status = format!("/v1/probe-plans/{plan_id}/status");

    // Bad findings are refused by name.
    for (body, why) in [
        (json!({"unavailable": [{"link": [1, 1]}]}), "no link"),
        (json!({"unavailable": [{"switch": 999}]}), "not a switch"),
        (json!({"unavailable": [{}]}), "each item"),
        (json!({"unavailable": [], "lost": 1}), "unknown field"),
    ] {
        let (s, v) = call(&api, "POST", &status, OPS, body).await;
        assert_eq!(s, 400, "{v}");
        assert!(v.to_string().contains(why), "{why}: {v}");
    }
    let (s, _) = call(&api, "POST", &status, "viewer-token", json!({})).await;
    assert_eq!(s, 401);

    let (s, v) = call(
        &api,
        "POST",
        &status,
        OPS,
        json!({"session": 7, "unavailable": [{"link": [a, b]}],
               "congested": [{"link": [c, d], "queue_depth": 48}]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let recommended = v["recommended"].as_array().unwrap().clone();
    assert!(!recommended.is_empty(), "{v}");
    let ids: Vec<String> = recommended
        .iter()
        .filter_map(|r| r["id"].as_str().map(String::from))
        .collect();
    assert!(!ids.is_empty(), "every reroute refused: {v}");
    for id in &ids {
        let i = wait_state(&api, id, "active").await;
        assert_eq!(i["spec"]["owner"], "probe-monitor", "{i}");
        assert_eq!(i["spec"]["avoid"]["link"], json!([a, b]), "{i}");
        assert!(
            i["spec"]["reason"].as_str().unwrap().contains("session 7"),
            "{i}"
        );
    }
    // The same finding again recommends nothing new.
    let (_, again) = call(
        &api,
        "POST",
        &status,
        OPS,
        json!({"session": 8, "unavailable": [{"link": [b, a]}]}),
    )
    .await;
    assert_eq!(again["recommended"], json!([]), "{again}");

    let (_, plans) = call(&api, "GET", "/v1/probe-plans", OPS, Value::Null).await;
    let plan = &plans["plans"][0];
    assert_eq!(plan["links_up"].as_u64(), Some(links_up - 1), "{plan}");
    let hops = probe_hops(&f, &plans);
    assert!(
        !hops.contains(&(a, b)) && !hops.contains(&(b, a)),
        "{plans}"
    );
    let link = |x: u64, y: u64| {
        plan["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["link"] == json!([x, y]) || l["link"] == json!([y, x]))
            .unwrap()
            .clone()
    };
    assert_eq!(link(a, b)["status"], "unavailable", "{plan}");

    // Back: the reroutes go, the link is planned again.
    // Not crossed in a session is not back: the plan left it out.
    let (_, v) = call(&api, "POST", &status, OPS, json!({"session": 9})).await;
    assert_eq!(v["withdrawn"], json!([]), "{v}");
    let (_, v) = call(
        &api,
        "POST",
        &status,
        OPS,
        json!({"session": 10, "available": [{"link": [b, a]}]}),
    )
    .await;
    let mut withdrawn: Vec<String> = v["withdrawn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    withdrawn.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(withdrawn, expected, "{v}");
    for id in &ids {
        wait_state(&api, id, "deleted").await;
    }
    let (_, plans) = call(&api, "GET", "/v1/probe-plans", OPS, Value::Null).await;
    assert_eq!(
        plans["plans"][0]["links_up"].as_u64(),
        Some(links_up),
        "{plans}"
    );
    stop.trigger();
    f.server.abort();
}

/// The blast-radius rule and the TTL bounds over the API: a block that would blackhole the
/// fabric waits for an admin and must expire within the hour; what an admin approved only an
/// admin deletes; TTLs cannot wrap; the same switch twice is one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_intents_wait_for_an_admin_and_expire() {
    let f = fabric().await;
    let dir = temp("safety");
    let stop = Shutdown::new();
    let api = start(config(&dir, f.control), Live::new(10), stop.clone())
        .await
        .unwrap();
    for (m, why) in [
        (json!({"src": "0.0.0.0/0"}), "shorter than /16"),
        (json!({"protocol": "tcp"}), "protocol-only"),
        (json!({}), "a block of everything is refused"),
        (json!({"src": "10.0.0.1", "dst-port": "1-60000"}), "ports"),
    ] {
        let (s, v) = call(
            &api,
            "POST",
            "/v1/intents",
            OPS,
            json!({"kind": "block", "match": m}),
        )
        .await;
        assert_eq!(s, 422, "{m}: {v}");
        let e = v["error"].as_str().unwrap();
        assert!(e.contains(why), "{m}: {e}");
    }
    // With a short TTL it is taken, but waits for an admin and touches no switch.
    let wide = json!({"kind": "block", "match": {"protocol": "tcp"}, "ttl": "10m"});
    let (s, v) = call(&api, "POST", "/v1/intents/dry-run", OPS, wide.clone()).await;
    assert_eq!(
        (s, v["would_be"].as_str()),
        (200, Some("pending-approval")),
        "{v}"
    );
    let (s, v) = call(&api, "POST", "/v1/intents", OPS, wide.clone()).await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["state"], "pending-approval", "{v}");
    assert!(
        v["blast_radius"][0]
            .as_str()
            .unwrap()
            .contains("protocol-only"),
        "{v}"
    );
    let id = v["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(emulator_entries(&f, "drop_acl").is_empty());
    let (s, _) = call(
        &api,
        "POST",
        &format!("/v1/intents/{id}/approve"),
        OPS,
        Value::Null,
    )
    .await;
    assert_eq!(s, 403, "an operator cannot approve");
    let (s, v) = call(
        &api,
        "POST",
        &format!("/v1/intents/{id}/approve"),
        ADMIN,
        Value::Null,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    wait_entries(&f, "drop_acl", |e| e.len() == 8).await;
    // Approved by an admin: an operator cannot take it away.
    let (s, v) = call(
        &api,
        "DELETE",
        &format!("/v1/intents/{id}"),
        OPS,
        Value::Null,
    )
    .await;
    assert_eq!(s, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("admin"), "{v}");
    let (s, _) = call(
        &api,
        "DELETE",
        &format!("/v1/intents/{id}"),
        ADMIN,
        Value::Null,
    )
    .await;
    assert_eq!(s, 200);
    wait_entries(&f, "drop_acl", |e| e.is_empty()).await;

    // TTLs: past max-ttl refused, a u64 of seconds refused (no wrap to "expired at once").
    for ttl in ["31d", "18446744073709551615s"] {
        let (s, v) = call(
            &api,
            "POST",
            "/v1/intents",
            OPS,
            json!({"kind": "block", "match": {"src": "10.0.0.2"}, "ttl": ttl}),
        )
        .await;
        assert!(s == 400 || s == 422, "{ttl}: {s} {v}");
        assert!(v["error"].as_str().unwrap().contains("ttl"), "{ttl}: {v}");
    }
    // The same switch twice: one entry.
    let (s, v) = call(
        &api,
        "POST",
        "/v1/intents",
        OPS,
        json!({"kind": "block", "match": {"src": "10.0.0.3"}, "switches": [1, 1, 1]}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["spec"]["switches"], json!([1]), "{v}");
    assert_eq!(v["entries"].as_array().unwrap().len(), 1, "{v}");

    stop.trigger();
    api.wait().await.unwrap();
    f.server.abort();
}
