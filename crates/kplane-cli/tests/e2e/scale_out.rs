//! The docker-compose topology as processes on loopback, against a broker of its own: the
//! emulator (fixed seed) → **two** collectors (the emulator spreads its reports over them by
//! source, so both see the shared switches) → Kafka → a consumer group of **one** stream
//! processor, and a second group of **three** sharing one store, one of which is killed with
//! SIGKILL once it has written windows. A knowledge service trains on each store and the
//! intent API serves it; the answers (flows and trajectories, hop-latency percentiles, queues,
//! links, sources, destinations, alerts, the switches' merged change log, per-switch views,
//! the trained models) must be the same for both: splitting the work, and a member's death
//! mid-run, change nothing — no window lost or written twice. The two collectors' views of
//! each switch make one change log: one `new` per switch key, where the collectors raised one
//! each.

use crate::common::{Broker, written_through};

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::{
    ChildGuard, free_port, http, http_get, metric_sum, run_id, sigterm, wait_ready,
};

const PARTITIONS: u32 = 8;

fn kplane() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kplane"));
    c.stdout(Stdio::null()).env("RUST_LOG", "warn");
    c
}

fn on_kafka(c: &mut Command, brokers: &str) {
    c.env("KPLANE__BUS__KIND", "kafka")
        .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", brokers);
}

fn processor(brokers: &str, group: &str, data: &Path) -> (ChildGuard, u16) {
    let admin = free_port();
    let mut c = kplane();
    c.args(["stream-processor", "--admin", &format!("127.0.0.1:{admin}")]);
    on_kafka(&mut c, brokers);
    c.env("KPLANE__BUS__KAFKA__GROUP_ID", group)
        .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", data)
        .env("KPLANE__STREAM_PROCESSOR__IDLE_CLOSE", "2s")
        .env("KPLANE__STREAM_PROCESSOR__PUBLISH", "false");
    let child = ChildGuard::from(c.spawn().unwrap());
    wait_ready(admin, Duration::from_secs(60));
    (child, admin)
}

/// The knowledge service over the store at `data`: a cold start trains on its history.
fn knowledge(brokers: &str, group: &str, data: &Path) -> ChildGuard {
    let admin = free_port();
    let mut c = kplane();
    c.args(["knowledge", "--admin", &format!("127.0.0.1:{admin}")]);
    on_kafka(&mut c, brokers);
    c.env("KPLANE__BUS__KAFKA__GROUP_ID", group)
        .env("KPLANE__KNOWLEDGE__STORE_DIR", data)
        .env("KPLANE__KNOWLEDGE__STATE_DIR", data.join("knowledge"))
        .env("KPLANE__KNOWLEDGE__MIN_WINDOWS", "4")
        .env("KPLANE__KNOWLEDGE__CALIBRATION_FOLDS", "2")
        .env("KPLANE__KNOWLEDGE__PUBLISH", "false");
    let child = ChildGuard::from(c.spawn().unwrap());
    wait_ready(admin, Duration::from_secs(60));
    child
}

fn metric(admin: u16, name: &str) -> f64 {
    metric_sum(&http_get(admin, "/metrics").unwrap_or_default(), name, &[])
}

/// The API's answer to `sql` over the store at `data`, as JSON rows.
fn answers(api: SocketAddr, sql: &str) -> serde_json::Value {
    let body = serde_json::json!({ "sql": sql }).to_string();
    let r = http(api, "POST", "/v1/query", None, Some(&body)).unwrap();
    assert_eq!(r.status, 200, "{sql}: {}", r.body);
    r.json()["rows"].clone()
}

/// What the comparison asks of each store (ordered; `flow_id` is keyed per store, so it is
/// left out).
const QUESTIONS: [&str; 9] = [
    "SELECT window_start, ip_text(src_ip) s, ip_text(dst_ip) d, src_port, dst_port, reports, \
     bytes, path, path_changed, e2e_latency_mean_ns, e2e_latency_max_ns FROM flows \
     ORDER BY 1, 2, 3, 4, 5, 6, 7, 10, 11",
    "SELECT window_start, ip_text(src_ip) s, src_port, dst_port, node_id, samples, p50_ns, \
     p99_ns, max_ns FROM hop_latency ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9",
    "SELECT window_start, node_id, queue_id, samples, occupancy_mean, occupancy_max, \
     congested_samples FROM queues ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "SELECT window_start, node_id, egress_port, next_node_id, samples, tx_utilization_mean, \
     tx_utilization_max FROM links ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "SELECT window_start, ip_text(src_ip) s, flows, reports, bytes, destinations, dst_ports \
     FROM sources ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "SELECT window_start, ip_text(dst_ip) d, flows, reports, bytes, sources, dst_ports \
     FROM destinations ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "SELECT time, kind, ip_text(src_ip) s, src_port, node_id, queue_id, value FROM alerts \
     ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "SELECT time, kind, metric, node_id, queue_id, egress_port, value, previous, threshold, \
     views FROM switch_changes ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
    "SELECT count(*) AS windows, sum(reports) AS reports FROM flows",
];

fn api(data: &Path) -> (ChildGuard, SocketAddr) {
    let (admin, port) = (free_port(), free_port());
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut c = kplane();
    c.args(["intent-api", "--admin", &format!("127.0.0.1:{admin}")])
        .env("KPLANE__INTENT_API__LISTEN", addr.to_string())
        .env("KPLANE__HTTP__NO_AUTH", "true")
        .env("KPLANE__INTENT_API__STORE_DIR", data)
        .env("KPLANE__INTENT_API__KNOWLEDGE_DIR", data.join("knowledge"))
        .env(
            "KPLANE__INTENT_API__INTENTS__STATE_DIR",
            data.join("intents"),
        );
    let child = ChildGuard::from(c.spawn().unwrap());
    wait_ready(admin, Duration::from_secs(60));
    (child, addr)
}

#[test]
fn three_processors_and_a_killed_one_answer_as_one_processor_does() {
    let broker = Broker::start();
    let run = run_id();
    let tmp = std::env::temp_dir();
    let (one, three) = (
        tmp.join(format!("kplane-scale-1-{run}")),
        tmp.join(format!("kplane-scale-3-{run}")),
    );

    // The data plane and two collectors, once: both groups read the same topics.
    let collectors: Vec<(ChildGuard, u16, u16)> = (0..2)
        .map(|_| {
            let (udp, admin) = (free_port(), free_port());
            let mut c = kplane();
            c.args(["collector", "--listen", &format!("127.0.0.1:{udp}")])
                .args(["--admin", &format!("127.0.0.1:{admin}")])
                .env("KPLANE__COLLECTOR__PUBLISH_REPORTS", "true");
            on_kafka(&mut c, &broker.addr);
            let child = ChildGuard::from(c.spawn().unwrap());
            wait_ready(admin, Duration::from_secs(60));
            (child, udp, admin)
        })
        .collect();
    let mut emulate = kplane();
    emulate.arg("emulate");
    for (_, udp, _) in &collectors {
        emulate.args(["--collector", &format!("127.0.0.1:{udp}")]);
    }
    let emulated = emulate
        .args(["--duration", "8s", "--flows", "150", "--seed", "11"])
        .args(["--scenario", "microburst"])
        .status()
        .unwrap();
    assert!(emulated.success());
    // Everything received is published and acknowledged before the collectors stop.
    let received = |admin| metric(admin, "kplane_collector_datagrams_received_total");
    let mut last = vec![-1.0; collectors.len()];
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now: Vec<f64> = collectors.iter().map(|c| received(c.2)).collect();
        if now == last {
            break;
        }
        last = now;
    }
    for (child, _, _) in collectors {
        sigterm(&child);
        assert!(child.into_inner().wait().unwrap().success());
    }
    assert!(
        last.iter().all(|&n| n > 500.0),
        "each collector got part of the reports: {last:?}"
    );

    // One processor, and three in another group (one of them killed once it has written).
    let (a, _) = processor(&broker.addr, &format!("scale-1-{run}"), &one);
    let mut group: Vec<(ChildGuard, u16)> = (0..3)
        .map(|_| processor(&broker.addr, &format!("scale-3-{run}"), &three))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let victim = loop {
        assert!(
            Instant::now() < deadline,
            "no member of three wrote a window"
        );
        if let Some(i) = group.iter().position(|(_, admin)| {
            metric(*admin, "kplane_stream_processor_windows_written_total") > 0.0
        }) {
            break i;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut killed, _) = group.remove(victim);
    killed.kill().unwrap();
    killed.wait().unwrap();

    // Both stores through the end of the emulated (virtual) time, which starts at 0.
    let end = 8_000_000_000;
    let deadline = Instant::now() + Duration::from_secs(240);
    for data in [&one, &three] {
        while written_through(data, PARTITIONS).is_none_or(|t| t < end) {
            assert!(
                Instant::now() < deadline,
                "{} did not finish: {:?}",
                data.display(),
                written_through(data, PARTITIONS)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // Stopped, so nothing is written while the answers are compared.
    for (child, _) in group.into_iter().chain([(a, 0)]) {
        sigterm(&child);
        assert!(child.into_inner().wait().unwrap().success());
    }

    let _knows_one = knowledge(&broker.addr, &format!("know-1-{run}"), &one);
    let _knows_three = knowledge(&broker.addr, &format!("know-3-{run}"), &three);
    let (_api_one, at_one) = api(&one);
    let (_api_three, at_three) = api(&three);
    for q in QUESTIONS {
        let (x, y) = (answers(at_one, q), answers(at_three, q));
        let (x, y) = (x.as_array().unwrap(), y.as_array().unwrap());
        assert!(!x.is_empty(), "{q}: no rows");
        if let Some(i) = (0..x.len().max(y.len())).find(|&i| x.get(i) != y.get(i)) {
            panic!(
                "one processor and three answer {q} differently ({} rows and {}): \
                 row {i}: {:?} ≠ {:?}",
                x.len(),
                y.len(),
                x.get(i),
                y.get(i)
            );
        }
    }
    // Each collector raised a `new` event for every switch key it saw; the merged log has
    // one per key, so the keys both collectors saw were merged.
    let number = |sql: &str| answers(at_one, sql)[0]["n"].as_i64().unwrap();
    let raised = number(
        "SELECT CAST(sum(count) AS BIGINT) AS n FROM event_counts WHERE kind = 'new' AND \
         metric IN ('queue_occupancy', 'queue_congestion', 'link_utilization')",
    );
    let merged = number("SELECT count(*) AS n FROM switch_changes WHERE kind = 'new'");
    let keys = number(
        "SELECT count(*) AS n FROM (SELECT DISTINCT metric, node_id, queue_id, egress_port \
         FROM switch_changes)",
    );
    assert_eq!(merged, keys, "one `new` per switch key");
    assert!(
        0 < merged && merged < raised,
        "{raised} collector `new` events, {merged} merged: the collectors shared no switch"
    );
    eprintln!("switch keys: {raised} `new` events from two collectors, {merged} merged");
    // The API's per-switch views merge each switch's rows from every lane (weighted means,
    // summed samples): the same answers, and one row per switch, queue and window.
    let range = "from=1970-01-01T00:00:00Z&to=1970-01-01T01:00:00Z";
    let get = |at: SocketAddr, path: &str| {
        let r = http(at, "GET", path, None, None).unwrap();
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
    };
    for path in [
        format!("/v1/switches?{range}"),
        format!("/v1/switches/13/queues?{range}"),
        format!("/v1/links?{range}"),
    ] {
        assert_eq!(get(at_one, &path), get(at_three, &path), "{path}");
    }
    let queues = get(at_one, &format!("/v1/switches/13/queues?{range}"));
    let rows = queues["queues"].as_array().unwrap();
    let mut keys: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["window_start"].as_str().unwrap().to_string(),
                r["queue_id"].as_u64().unwrap(),
            )
        })
        .collect();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "one row per window and queue: {queues}");
    // The knowledge service trained on each store's history: the same models.
    let models = |at: SocketAddr| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = get(at, "/v1/models?detail=true");
            if m["models"].as_array().is_some_and(|a| !a.is_empty()) {
                break m;
            }
            assert!(Instant::now() < deadline, "no model trained: {m}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let (mut m1, mut m3) = (models(at_one), models(at_three));
    // The training log says when and how long each training took: not part of the answer.
    for m in [&mut m1, &mut m3] {
        m.as_object_mut().unwrap().remove("history");
    }
    assert_eq!(m1, m3, "the knowledge service's models over each store");
    let totals = answers(at_one, QUESTIONS[QUESTIONS.len() - 1]);
    eprintln!("both stores: {totals}; one of three members killed mid-run");
    let _ = std::fs::remove_dir_all(&one);
    let _ = std::fs::remove_dir_all(&three);
}
