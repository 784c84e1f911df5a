//! The services as deployed, fed traffic kplane did not generate: the independent generator
//! (`kplane tracegen`, real time, over UDP) → collector → Kafka → stream processor → knowledge
//! service, each a process of its own with its default configuration but for addresses,
//! directories and the collector's `publish-reports` (the knowledge service reads the
//! processor's per-report tables). The knowledge service learns its first minute, then a DDoS from spoofed
//! sources hits one host: it must be raised at that host in its first windows, typed `ddos`,
//! answered with blocks towards it, as one anomaly (its paths and sources its collateral) —
//! and its end must raise nothing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kplane_testkit::{ChildGuard, free_port, run_id, sigterm, wait_ready};

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

fn stop(child: ChildGuard) {
    sigterm(&child);
    assert!(child.into_inner().wait().unwrap().success());
}

/// The anomalies the knowledge service stored (their `start`, as it first raised them).
fn anomalies(data: &Path) -> Vec<Value> {
    use arrow_array::cast::AsArray;
    let batches = kplane_store::query::sql_blocking(
        data,
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

#[test]
fn the_deployed_services_type_an_independent_generators_ddos_and_its_end_raises_nothing() {
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
    let (knowledge, _) = service(k, &["knowledge"]);

    // 150 s: the first minute learnt (the default `min-windows`), the flood from 90 s to 110 s
    // (500 spoofed sources, 5,000 packets/s together), then 40 s of what follows an attack.
    let truth = data.join("truth.json");
    let generated = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["tracegen", "--collector", &format!("127.0.0.1:{udp}")])
        .args(["--duration", "150s", "--realtime", "--seed", "7"])
        .args([
            "--scenario",
            "ddos:victim=5,pps=5000,start=0.6,duration=0.1333",
        ])
        .arg("--truth")
        .arg(&truth)
        .status()
        .unwrap();
    assert!(generated.success());
    std::thread::sleep(Duration::from_secs(3));
    for s in [collector, processor, knowledge] {
        stop(s);
    }

    let truth: Value = serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    let start = truth["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "ddos_start")
        .unwrap_or_else(|| panic!("no DDoS in the truth: {truth}"));
    let victim = start["victim"].as_str().unwrap();
    let (from, to) = (
        start["t_ns"].as_i64().unwrap(),
        start["end_ns"].as_i64().unwrap(),
    );
    let raised = anomalies(&data);
    let window = 1_000_000_000;
    let at_victim = raised
        .iter()
        .find(|a| a["entity_kind"] == "destination" && a["entity"] == victim)
        .unwrap_or_else(|| panic!("the victim {victim} was not raised: {raised:#?}"));
    assert_eq!(at_victim["type"], "ddos", "{at_victim:#}");
    let opened = at_victim["start_ns"].as_i64().unwrap();
    assert!(
        (from - window..=from + 2 * window).contains(&opened),
        "raised at {opened}, the flood began at {from}"
    );
    let recs = at_victim["recommendations"].as_array().unwrap();
    assert!(!recs.is_empty(), "{at_victim:#}");
    for r in recs {
        assert_eq!(r["kind"], "block");
        assert_eq!(r["match"]["dst"], format!("{victim}/32"));
    }
    // One anomaly: nothing else raised while the flood lasted, and nothing after it.
    let others: Vec<&Value> = raised
        .iter()
        .filter(|a| !std::ptr::eq(*a, at_victim))
        .filter(|a| a["start_ns"].as_i64().unwrap() >= from - window)
        .collect();
    assert!(
        others.is_empty(),
        "raised besides the victim during or after the flood ({from}–{to}): {others:#?}"
    );
    let _ = std::fs::remove_dir_all(&data);
}
