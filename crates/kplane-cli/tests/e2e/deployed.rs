//! The services as deployed, fed traffic kplane did not generate: the independent generator
//! (`kplane tracegen`, real time, over UDP) → collector → Kafka → stream processor → knowledge
//! service, each a process of its own with its default configuration but for addresses,
//! directories and the collector's `publish-reports` (the knowledge service reads the
//! processor's per-report tables). The knowledge service learns a minute of clean traffic,
//! then a DDoS from spoofed sources hits one host, and later a weak one that replaces half of
//! the background hits another: each must be raised at its victim in its first windows, typed
//! `ddos`, answered with a block of the flood's kind of traffic towards it, as one anomaly (its
//! paths and sources its collateral) — and their ends must raise nothing. Last, a host copies
//! to its peers, acknowledged by them: whatever that raises is no attack and blocks nothing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::{ChildGuard, free_port, http_get, metric_sum, run_id, sigterm, wait_ready};

use crate::common::Broker;
use serde_json::Value;

fn kplane(brokers: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kplane"));
    c.stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .env("RUST_LOG", "warn")
        .env("KPLANE__BUS__KIND", "kafka")
        .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", brokers);
    c
}

fn service(mut c: Command, args: &[&str]) -> (ChildGuard, u16) {
    let admin = free_port();
    c.args(args)
        .args(["--admin", &format!("127.0.0.1:{admin}")]);
    let child = ChildGuard::from(c.spawn().unwrap());
    wait_ready(admin, Duration::from_secs(60));
    (child, admin)
}

fn metric(admin: u16, name: &str) -> f64 {
    metric_sum(&http_get(admin, "/metrics").unwrap_or_default(), name, &[])
}

/// Polls `done` until it holds, for at most three minutes.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not in time");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn stop(child: ChildGuard) {
    sigterm(&child);
    assert!(child.into_inner().wait().unwrap().success());
}

/// The anomalies the knowledge service stored (their `start`, as it first raised them).
fn anomalies(data: &Path) -> Vec<Value> {
    use arrow_array::cast::AsArray;
    let batches = kplane_store::query::sql_blocking(
        &kplane_store::Store::local(data),
        "SELECT record FROM anomalies WHERE phase = 'start' ORDER BY start",
    )
    .unwrap();
    batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_string::<i32>()
                .iter()
                .map(|r| serde_json::from_str(r.unwrap()).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect()
}

/// The one number a query of the store answers (`SELECT count(*) …`).
fn count(data: &Path, sql: &str) -> f64 {
    use kplane_store::query::{scalar, sql_blocking};
    scalar(&sql_blocking(&kplane_store::Store::local(data), sql).unwrap())
}

#[test]
fn the_deployed_services_type_an_independent_generators_floods_and_their_ends_raise_nothing() {
    let broker = Broker::start();
    let brokers = broker.addr.clone();
    let run = run_id();
    let data = std::env::temp_dir().join(format!("kplane-deployed-{run}"));
    let udp = free_port();
    // Reports, not only events, for the processor's flows, queues and links.
    let mut c = kplane(&brokers);
    c.env("KPLANE__COLLECTOR__PUBLISH_REPORTS", "true");
    let (collector, _) = service(c, &["collector", "--listen", &format!("127.0.0.1:{udp}")]);
    let mut p = kplane(&brokers);
    p.env("KPLANE__BUS__KAFKA__GROUP_ID", format!("deployed-sp-{run}"))
        .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", &data);
    let (processor, _) = service(p, &["stream-processor"]);
    let mut k = kplane(&brokers);
    k.env("KPLANE__BUS__KAFKA__GROUP_ID", format!("deployed-k-{run}"))
        .env("KPLANE__KNOWLEDGE__STORE_DIR", &data)
        .env("KPLANE__KNOWLEDGE__STATE_DIR", data.join("knowledge"));
    let (knowledge, k_admin) = service(k, &["knowledge"]);
    let tracegen = |seconds: &str, seed: &str, scenario: &str, truth: &Path| {
        let ok = Command::new(env!("CARGO_BIN_EXE_kplane"))
            .args(["tracegen", "--collector", &format!("127.0.0.1:{udp}")])
            .args(["--duration", seconds, "--realtime", "--seed", seed])
            .args(["--scenario", scenario])
            .arg("--truth")
            .arg(truth)
            .status()
            .unwrap()
            .success();
        assert!(ok, "tracegen {scenario}");
    };
    let knows = |name: &str| metric(k_admin, name);

    // A minute and more of clean traffic: the service trains after its first minute (the
    // default `min-windows`) — on a loaded machine later than the traffic, so the flood waits
    // for its models.
    tracegen("70s", "7", "none", &data.join("clean.json"));
    wait_until("the first models", || {
        knows("kplane_knowledge_model_version") >= 1.0
    });
    // Then 110 s: a flood from 20 s to 40 s (500 spoofed sources, 5,000 packets/s together);
    // a weak one from 60 s to 80 s that replaces half of the background (400 spoofed sources,
    // 60 packets/s together: about a host's usual packets, so its victim receives no more than
    // usual, from many more sources in small packets); and 30 s of what follows an attack.
    let truth = data.join("truth.json");
    tracegen(
        "110s",
        "8",
        "ddos:victim=5,pps=5000,start=0.18,duration=0.18\
         +ddos:victim=40,sources=400,pps=60,start=0.55,duration=0.18,replace=0.5",
        &truth,
    );
    // Then 30 s of benign load: a host copying to six peers at 450 Mb/s from 6 s to 21 s,
    // acknowledged by them — small packets, many times its usual, at as many of its ports.
    let copy = data.join("copy.json");
    tracegen(
        "30s",
        "9",
        "heavy-hitter:source=20,peers=6,mbps=450,start=0.2,duration=0.5",
        &copy,
    );
    // Everything sent has gone through the pipeline once the service's windows stop growing.
    let mut seen = -1.0;
    wait_until("the last windows", || {
        std::thread::sleep(Duration::from_secs(3));
        let now = knows("kplane_knowledge_windows_total");
        std::mem::replace(&mut seen, now) == now
    });
    for s in [collector, processor, knowledge] {
        stop(s);
    }

    let truth: Value = serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    let floods: Vec<&Value> = truth["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "ddos_start")
        .collect();
    assert_eq!(floods.len(), 2, "{truth}");
    let raised = anomalies(&data);
    let window = 1_000_000_000;
    let mut at_victims = Vec::new();
    for start in floods {
        let victim = start["victim"].as_str().unwrap();
        let from = start["t_ns"].as_i64().unwrap();
        let at_victim = raised
            .iter()
            .find(|a| a["entity_kind"] == "destination" && a["entity"] == victim)
            .unwrap_or_else(|| panic!("the victim {victim} was not raised: {raised:#?}"));
        assert_eq!(at_victim["type"], "ddos", "{at_victim:#}");
        let opened = at_victim["start_ns"].as_i64().unwrap();
        assert!(
            (from - window..=from + 2 * window).contains(&opened),
            "{victim} raised at {opened}, its flood began at {from}"
        );
        // Hundreds of spoofed sources, more than are blocked one by one: the flood's kind of
        // traffic towards the victim is blocked (its UDP to port 80), not its heaviest clients.
        let recs = at_victim["recommendations"].as_array().unwrap();
        assert_eq!(recs.len(), 1, "{at_victim:#}");
        let m = &recs[0]["match"];
        assert_eq!(recs[0]["kind"], "block");
        assert_eq!(m["dst"], format!("{victim}/32"));
        assert_eq!(
            (&m["protocol"], &m["dst-port"]),
            (&"udp".into(), &"80".into()),
            "{m}"
        );
        assert!(m.get("src").is_none(), "{m}");
        at_victims.push(at_victim);
    }
    // One anomaly per flood: nothing else raised while they lasted, and nothing after them
    // (until the copy).
    let copy: Value = serde_json::from_str(&std::fs::read_to_string(&copy).unwrap()).unwrap();
    let copying = &copy["events"][0];
    assert_eq!(copying["kind"], "heavy_hitter_start", "{copy}");
    let copy_from = copying["t_ns"].as_i64().unwrap();
    let first = at_victims[0]["start_ns"].as_i64().unwrap();
    let others: Vec<&Value> = raised
        .iter()
        .filter(|a| !at_victims.iter().any(|v| std::ptr::eq(*a, *v)))
        .filter(|a| (first - window..copy_from - window).contains(&a["start_ns"].as_i64().unwrap()))
        .collect();
    assert!(
        others.is_empty(),
        "raised besides the victims during or after the floods: {others:#?}"
    );
    // The copy went through the pipeline: its peers' acknowledgements (from port 873 back
    // to the copying host) are in the store.
    let host = copying["source"].as_str().unwrap();
    let acks = count(
        &data,
        &format!("SELECT count(*) FROM flows WHERE ip_text(dst_ip) = '{host}' AND src_port = 873"),
    );
    assert!(acks >= 6.0, "{acks} flows of acknowledgements to {host}");
    // The copy may be raised, as what it is not sure of; never as an attack, never blocked.
    let about_the_copy: Vec<&Value> = raised
        .iter()
        .filter(|a| a["start_ns"].as_i64().unwrap() >= copy_from - window)
        .collect();
    for a in &about_the_copy {
        assert!(
            !["ddos", "port_scan"].contains(&a["type"].as_str().unwrap()),
            "benign copying typed as an attack: {a:#}"
        );
        assert!(
            a["recommendations"].as_array().is_none_or(|r| r.is_empty()),
            "{a:#}"
        );
    }
    let _ = std::fs::remove_dir_all(&data);
}
