//! docker-compose.yml's services as processes on loopback, watched as its Prometheus watches
//! them: a broker of its own whose topics `kplane topics create` makes (compose's
//! `kafka-init`; the services only check them), the demo emulator in real time → a collector → Kafka → two
//! stream processors in one group sharing a store → the knowledge service and the intent
//! API. A real Prometheus (Debian's) scrapes them with `deploy/compose/prometheus.yml` — its
//! jobs and targets, each compose host replaced by the process's admin address — and then:
//! every target is up, every query of every panel of the Grafana dashboard
//! (`deploy/compose/grafana/dashboards/kplane-overview.json`) returns series through
//! Prometheus' API, the two heatmaps included, and the API answers flows from the emulator.
//! This is the check of the compose run that needs no container registry; scripts/compose-check.sh
//! runs the compose file itself where a container engine exists.

use crate::common::{
    Broker, compose_kplane as kplane, configure_api, demo_emulator_args, root,
    start_service as service,
};

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::prometheus::{self, Prometheus};
use kplane_testkit::{ChildGuard, free_port, http, reports, run_id};
use serde_yaml::Value;

/// The compose Prometheus configuration with each `host:port` target replaced by the admin
/// address of the process standing for `host`, scraped every second.
fn prometheus_config(admins: &BTreeMap<&str, u16>) -> String {
    let path = root().join("deploy/compose/prometheus.yml");
    let mut config: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["global"]["scrape_interval"] = Value::from("1s");
    let jobs = config["scrape_configs"].as_sequence_mut().unwrap();
    for job in jobs {
        for statics in job["static_configs"].as_sequence_mut().unwrap() {
            for target in statics["targets"].as_sequence_mut().unwrap() {
                let host = target.as_str().unwrap().split(':').next().unwrap();
                let port = admins
                    .get(host)
                    .unwrap_or_else(|| panic!("no process stands for compose host {host}"));
                *target = Value::from(format!("127.0.0.1:{port}"));
            }
        }
    }
    serde_yaml::to_string(&config).unwrap()
}

/// Every query of the dashboard's panels: `(panel title, PromQL)`, with Grafana's
/// `$__rate_interval` as the one-minute range the other panels use.
fn panel_queries(dashboard: &Path) -> Vec<(String, String)> {
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard).unwrap()).unwrap();
    let mut out = Vec::new();
    for panel in d["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap_or_default().to_string();
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push((title.clone(), expr.replace("$__rate_interval", "1m")));
            }
        }
    }
    out
}

/// `c` run as PID 1 of a new PID namespace (`unshare --pid --fork`), where that is allowed.
fn in_own_pid_namespace(c: &Command) -> Option<Command> {
    let allowed = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !allowed {
        eprintln!("unshare --pid not allowed here: the processors keep their own PIDs");
        return None;
    }
    let mut u = Command::new("unshare");
    u.args(["--pid", "--fork", "--kill-child"])
        .arg(c.get_program())
        .args(c.get_args())
        .stdout(Stdio::null());
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            u.env(k, v);
        }
    }
    Some(u)
}

/// The sum of an instant query's values (0 without series).
fn value(prom: &Prometheus, expr: &str) -> f64 {
    prom.query(expr)
        .iter()
        .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn prometheus_scrapes_every_service_and_every_grafana_panel_has_series() {
    if !prometheus::available() {
        return;
    }
    let broker = Broker::start();
    let b = broker.addr.as_str();
    let data = std::env::temp_dir().join(format!("kplane-compose-{}", run_id()));
    let store = data.join("stream-processor");

    // kafka-init: every topic with the partitions the services check.
    let init = kplane(&["topics", "create", "--wait", "30s"], b)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let created = String::from_utf8_lossy(&init.stdout);
    assert!(
        init.status.success(),
        "{created}{}",
        String::from_utf8_lossy(&init.stderr)
    );
    for line in [
        "int.events\t8 partitions",
        "int.reports\t8 partitions",
        "int.windows\t4 partitions",
        "int.alerts\t4 partitions",
        "int.anomalies\t1 partitions",
        "int.forecasts\t1 partitions",
    ] {
        assert!(created.contains(line), "{created}");
    }
    // A configuration that disagrees with the topics is refused, naming the topic.
    let mut c = kplane(&["topics", "create"], b);
    let refused = c
        .env("KPLANE__STREAM_PROCESSOR__RESULT_PARTITIONS", "6")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("int.windows has 4 partitions"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // The services as docker-compose.yml runs them (its KPLANE__… settings, its commands).
    let udp = free_port();
    let mut c = kplane(&["collector", "--listen", &format!("127.0.0.1:{udp}")], b);
    c.env("KPLANE__COLLECTOR__PUBLISH_REPORTS", "true");
    let (_collector, collector) = service(c);
    // Each processor in a PID namespace of its own where this runs as root (CI), so both are
    // PID 1 on the shared store, as in their containers.
    let processor = || {
        let mut c = kplane(&["stream-processor"], b);
        if let Some(wrapped) = in_own_pid_namespace(&c) {
            c = wrapped;
        }
        c.env("KPLANE__BUS__KAFKA__GROUP_ID", "kplane-stream-processor")
            .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", &store);
        service(c)
    };
    let ((mut p1, processor_1), (mut p2, processor_2)) = (processor(), processor());
    let mut c = kplane(&["knowledge"], b);
    c.env("KPLANE__KNOWLEDGE__STORE_DIR", &store)
        .env("KPLANE__KNOWLEDGE__STATE_DIR", data.join("knowledge"));
    let (_knowledge, knowledge) = service(c);
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut c = kplane(&["intent-api"], b);
    configure_api(&mut c, api, &store, &data);
    let (_api, intent_api) = service(c);

    let admins = BTreeMap::from([
        ("collector", collector),
        ("processor-1", processor_1),
        ("processor-2", processor_2),
        ("knowledge", knowledge),
        ("intent-api", intent_api),
    ]);
    let prom = Prometheus::start(&data.join("prometheus"), &prometheus_config(&admins));

    // The demo profile's data plane.
    let args = demo_emulator_args(udp);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _emulator = ChildGuard::from(kplane(&args, b).spawn().unwrap());
    // What the drops, malformed and loss panels count: a datagram that is no report, and a
    // node whose sequence numbers skip.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sink = format!("127.0.0.1:{udp}");
    sock.send_to(b"definitely not a telemetry report", &sink)
        .unwrap();
    for seq in [1, 2, 9, 10] {
        sock.send_to(&reports::report(250, seq, "10.250.0.1", 1_000), &sink)
            .unwrap();
    }

    let queries =
        panel_queries(&root().join("deploy/compose/grafana/dashboards/kplane-overview.json"));
    assert!(queries.len() >= 12, "{queries:?}");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let targets = prom.targets();
        let down: Vec<String> = targets
            .iter()
            .filter(|t| t["health"] != "up")
            .map(|t| {
                format!(
                    "{} {}: {}",
                    t["labels"]["job"], t["scrapeUrl"], t["lastError"]
                )
            })
            .collect();
        let empty: Vec<String> = queries
            .iter()
            .filter(|(_, expr)| prom.query(expr).is_empty())
            .map(|(title, expr)| format!("{title}: {expr}"))
            .collect();
        // The panels show what happened, not only series that exist from the start: the
        // node whose sequence skipped, the datagram that was no report, and windows' queues
        // and flows in the heatmaps' histograms.
        let counted: Vec<&str> = [
            "kplane_collector_reports_lost_total{node=\"250\"}",
            "sum(kplane_collector_malformed_total)",
            "sum(kplane_stream_processor_queue_occupancy_count)",
            "sum(kplane_stream_processor_flow_latency_seconds_count)",
            // Merges ran on the shared store (and, below, none failed).
            "sum(kplane_stream_processor_compactions_total)",
        ]
        .into_iter()
        .filter(|expr| value(&prom, expr) <= 0.0)
        .collect();
        if targets.len() == admins.len()
            && down.is_empty()
            && empty.is_empty()
            && counted.is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} targets ({} expected), down: {down:#?}\npanel queries without series: \
             {empty:#?}\nnot counted: {counted:?}\n{}",
            targets.len(),
            admins.len(),
            prom.log()
        );
        std::thread::sleep(Duration::from_secs(2));
    }

    // Two processors sharing a store never publish each other's staged files (which killed
    // one of them, or left another table's rows in a table): both still run.
    for (name, p) in [("processor-1", &mut p1), ("processor-2", &mut p2)] {
        assert!(p.try_wait().unwrap().is_none(), "{name} exited");
    }

    // The API answers flows from the emulator.
    let flows = http(api, "GET", "/v1/flows?since=10m", None, None).unwrap();
    assert_eq!(flows.status, 200, "{}", flows.body);
    assert!(
        !flows.json()["flows"].as_array().unwrap().is_empty(),
        "{}",
        flows.body
    );
    let _ = std::fs::remove_dir_all(&data);
}
