//! Incidents paged through the tools on-call engineers use, over real sockets: the API
//! (`kplane_intent_api::start`) sends them to a real Prometheus Alertmanager (Debian's
//! `prometheus-alertmanager`), whose silences and inhibitions act on them as it defines, and
//! which sees them end; a webhook gets every change, retried past a failing answer; a sink
//! that cannot keep up drops news at its bounded queue and counts it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplane_intent_api::incidents::IncidentsConfig;
use kplane_intent_api::live::Live;
use kplane_intent_api::{Config, Running, start};
use kplane_model::results::Alert;
use kplane_model::results::AlertKind::{Threshold, ThresholdCleared};
use kplane_runtime::Shutdown;
use kplane_testkit::alertmanager::{self, Alertmanager};
use serde_json::Value;

const S: i64 = 1_000_000_000;

/// Alertmanager with a route, and a rule: a critical incident inhibits the warnings of its
/// fabric.
const ALERTMANAGER: &str = r#"
route:
  receiver: on-call
  group_by: [incident_id]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: on-call
inhibit_rules:
  - source_matchers: ['severity="critical"']
    target_matchers: ['severity="warning"']
    equal: [fabric]
"#;

fn config(dir: &std::path::Path, incidents: IncidentsConfig) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: "127.0.0.1:0".parse().unwrap(),
        store_dir: dir.join("store"),
        knowledge_dir: dir.join("knowledge"),
        http: kplane_runtime::HttpConfig {
            no_auth: true,
            ..Default::default()
        },
        intents: kplane_control_plane::IntentsConfig {
            state_dir: dir.join("intent-api"),
            ..Default::default()
        },
        incidents,
        ..Config::default()
    }
}

fn now_ns() -> i64 {
    kplane_model::unix_time_ns() as i64
}

/// A flow's hop latency at `node`, `ratio` × its 2 µs threshold.
fn slow(kind: kplane_model::results::AlertKind, t: i64, node: u32, ratio: u64) -> Alert {
    Alert {
        time_ns: t,
        kind: Some(kind),
        src_ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, node as u8))),
        dst_ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1))),
        src_port: Some(1000),
        dst_port: Some(80),
        protocol: Some(6),
        node_id: Some(node),
        metric: Some("hop_latency_ns".into()),
        value: Some(2_000 * ratio),
        threshold: Some(2_000),
        path: vec![1, node],
        ..Alert::default()
    }
}

fn until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The alert of the incident rooted at switch `node`.
fn alert_of(alerts: &[Value], node: u32) -> Option<Value> {
    alerts
        .iter()
        .find(|a| a["labels"]["switch"] == node.to_string().as_str())
        .cloned()
}

fn metric(api: &Running, sink: &str, outcome: &str) -> f64 {
    let text = kplane_runtime::probe::http_get(api.admin, "/metrics").unwrap_or_default();
    kplane_runtime::probe::metric_sum(
        &text,
        "kplane_intent_api_incident_notifications_total",
        &[
            &format!("sink=\"{sink}\""),
            &format!("outcome=\"{outcome}\""),
        ],
    )
}

/// A webhook receiver: answers `503` to the first request, then `200`; keeps the bodies.
fn webhook() -> (SocketAddr, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let status = if n == 0 {
                "503 Service Unavailable"
            } else {
                seen.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                "200 OK"
            };
            let _ = write!(conn, "HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
        }
    });
    (addr, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incidents_page_through_alertmanager_whose_silences_and_inhibitions_apply() {
    if !alertmanager::available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("kplane-incidents-{}", kplane_testkit::run_id()));
    let am = Alertmanager::start(&dir.join("alertmanager"), ALERTMANAGER);
    let (hook, delivered) = webhook();
    let live = Live::new(100);
    let stop = Shutdown::new();
    let api = start(
        config(
            &dir,
            IncidentsConfig {
                alertmanager: am.url(),
                webhook: format!("http://{hook}/kplane"),
                fabric: "lab".into(),
                ..Default::default()
            },
        ),
        live.clone(),
        stop.clone(),
    )
    .await
    .unwrap();

    // Switch 4 critical (3× its threshold), switches 6 and 8 warnings. (The test's body runs
    // beside the runtime's workers: it may block.)
    let t0 = now_ns();
    live.alert(slow(Threshold, t0, 4, 3));
    live.alert(slow(Threshold, t0, 6, 1));
    live.alert(slow(Threshold, t0, 8, 1));
    let alerts = until(
        "three alerts in Alertmanager",
        Duration::from_secs(20),
        || {
            let a = am.alerts();
            (a.len() == 3).then_some(a)
        },
    );
    let four = alert_of(&alerts, 4).unwrap();
    assert_eq!(four["labels"]["severity"], "critical", "{four}");
    assert_eq!(four["labels"]["kind"], "congestion");
    assert_eq!(four["labels"]["fabric"], "lab");
    assert_eq!(four["labels"]["root_kind"], "switch");
    assert!(
        four["annotations"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("congestion at switch 4"),
        "{four}"
    );
    let id = four["labels"]["incident_id"].as_str().unwrap();
    assert!(
        four["annotations"]["console"]
            .as_str()
            .unwrap()
            .ends_with(&format!("#incident={id}")),
        "{four}"
    );
    assert_eq!(four["status"]["state"], "active");
    // The rule: the critical incident inhibits the fabric's warnings.
    let six = until("switch 6 inhibited", Duration::from_secs(20), || {
        alert_of(&am.alerts(), 6).filter(|a| a["status"]["state"] == "suppressed")
    });
    assert_eq!(
        six["status"]["inhibitedBy"].as_array().unwrap().len(),
        1,
        "{six}"
    );
    // A silence on one incident's id.
    let eight = alert_of(&alerts, 8).unwrap();
    let silence = am.silence(
        "incident_id",
        eight["labels"]["incident_id"].as_str().unwrap(),
    );
    let silenced = until("a silenced incident", Duration::from_secs(20), || {
        alert_of(&am.alerts(), 8).filter(|a| {
            a["status"]["silencedBy"]
                .as_array()
                .is_some_and(|s| s.iter().any(|x| x == silence.as_str()))
        })
    });
    assert_eq!(silenced["status"]["state"], "suppressed");

    // Switch 4's breach clears; once event time passes its 10 s hold it resolves: Alertmanager
    // sees it end, and the warnings it inhibited are active again.
    live.alert(slow(ThresholdCleared, t0 + S, 4, 3));
    live.alert(slow(Threshold, t0 + 30 * S, 10, 1));
    let six = until(
        "switch 4 resolved in Alertmanager",
        Duration::from_secs(30),
        || {
            let alerts = am.alerts();
            let gone = alert_of(&alerts, 4).is_none();
            alert_of(&alerts, 6).filter(|six| gone && six["status"]["state"] == "active")
        },
    );
    assert!(
        six["status"]["inhibitedBy"].as_array().unwrap().is_empty(),
        "{six}"
    );

    // The webhook got every change, after a retry past its first 503.
    let bodies = until("webhook deliveries", Duration::from_secs(20), || {
        let b = delivered.lock().unwrap().clone();
        (b.iter().any(|b| b["change"] == "resolve")).then_some(b)
    });
    let opened: Vec<&str> = bodies
        .iter()
        .filter(|b| b["change"] == "open")
        .map(|b| b["incident"]["root"]["entity"].as_str().unwrap())
        .collect();
    assert_eq!(opened, ["4", "6", "8", "10"], "{bodies:?}");
    assert_eq!(
        metric(&api, "webhook", "failed"),
        0.0,
        "the 503 was retried, not given up"
    );
    assert!(metric(&api, "alertmanager", "sent") >= 3.0);
    stop.trigger();
    api.wait().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sink that cannot be reached: every news is tried `attempts` times or dropped at the full
/// queue, and each is counted one way or the other — nothing lost silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_cannot_keep_up_drops_news_and_counts_every_one() {
    let dir = std::env::temp_dir().join(format!(
        "kplane-incidents-drop-{}",
        kplane_testkit::run_id()
    ));
    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let live = Live::new(100);
    let stop = Shutdown::new();
    let api = start(
        config(
            &dir,
            IncidentsConfig {
                webhook: format!("http://{closed}/"),
                queue: 2,
                attempts: 2,
                ..Default::default()
            },
        ),
        live.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    let t0 = now_ns();
    for node in 1..=40 {
        live.alert(slow(Threshold, t0, node, 1));
    }
    let counted = until("every news counted", Duration::from_secs(60), || {
        let failed = metric(&api, "webhook", "failed");
        let dropped = metric(&api, "webhook", "dropped");
        (failed + dropped == 40.0).then_some((failed, dropped))
    });
    assert!(
        counted.1 >= 30.0,
        "a queue of 2 behind 0.5 s retries: {counted:?}"
    );
    assert_eq!(metric(&api, "webhook", "sent"), 0.0);
    stop.trigger();
    api.wait().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
