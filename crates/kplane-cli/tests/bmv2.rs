//! Intents on a real P4Runtime switch: BMv2 `simple_switch_grpc` running `p4/kplane_int.p4`
//! (pushed by the intent API's `p4runtime` driver), with its ports on veth pairs whose far
//! ends sit in a network namespace: a sending host, a receiving host and the collector
//! (`kplane collector` inside the namespace). Through the real entry points — `kplane
//! intent-api`, `kplane intent apply|show|delete` — a monitor intent makes a flow's packets
//! produce a Telemetry Report that reaches the collector, `tune` intents with complex detection
//! keep or let out the sink's reports, and a block intent drops the flow.
//! Skipped without BMv2 or root unless `KPLANE_REQUIRE_P4=1` (CI).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kplane_testkit::bmv2::{self, Bmv2, Netns, RawPort};
use kplane_testkit::{ChildGuard, free_port, http, wait_ready};

const TOKEN: &str = "bmv2-test-token";
const PAYLOAD: &[u8] = b"kplane-bmv2-probe";

fn kplane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kplane"))
}

/// Ethernet + IPv4 + UDP from 10.0.1.1:1000 to 10.0.2.1:5000.
fn frame() -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 8 + PAYLOAD.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 1,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let sum = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum::<u32>();
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&((8 + PAYLOAD.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(PAYLOAD);
    f
}

/// Sends the probe from host 1 and returns how many copies host 2 received.
fn probe(ns: &Netns, h1: &str, h2: &str) -> usize {
    let (h1, h2) = (h1.to_string(), h2.to_string());
    let (tx, rx) = mpsc::channel();
    let name = ns.name.clone();
    let listener = std::thread::spawn(move || {
        Netns { name }.enter_keep(move || {
            let port = RawPort::open(&h2);
            tx.send(()).unwrap();
            port.recv_for(Duration::from_secs(2), |f| {
                f.windows(PAYLOAD.len()).any(|w| w == PAYLOAD)
            })
            .len()
        })
    });
    rx.recv().unwrap();
    ns.enter(move || {
        let port = RawPort::open(&h1);
        for _ in 0..3 {
            port.send(&frame());
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    listener.join().unwrap()
}

fn cli(api: &str, args: &[&str]) -> (bool, String) {
    let out = kplane()
        .arg("intent")
        .args(["--api", api, "--token", TOKEN])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn wait_for_state(api: std::net::SocketAddr, id: &str, state: &str) -> serde_json::Value {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let v = http(api, "GET", &format!("/v1/intents/{id}"), Some(TOKEN), None)
            .unwrap()
            .json();
        if v["state"] == state {
            return v;
        }
        assert!(Instant::now() < end, "{id} never became {state}: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn intents_on_a_bmv2_switch_watch_and_block_real_packets() {
    if !bmv2::available() {
        return;
    }
    let pid = std::process::id();
    let ns = Netns::new("b");
    let port = |n: u32| format!("k{pid}p{n}");
    let host = |n: u32| format!("k{pid}h{n}");
    for n in 1..=3 {
        ns.veth(&port(n), &host(n));
    }
    ns.ip(&["addr", "add", "10.99.0.254/24", "dev", &host(3)]);
    let sw = Bmv2::start(1, &[(1, &port(1)), (2, &port(2)), (3, &port(3))]);

    // The collector, inside the namespace, on the address the switch reports to.
    let mut collector = ChildGuard::from(
        Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(env!("CARGO_BIN_EXE_kplane"))
            .args(["collector", "--listen", "10.99.0.254:32766", "--print"])
            .args(["--admin", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let (events_tx, events) = mpsc::channel::<String>();
    let out = collector.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = events_tx.send(line);
        }
    });

    // The intent API with one P4Runtime switch: hosts on ports 1 and 2, reports on port 3.
    let dir = std::env::temp_dir().join(format!("kplane-bmv2-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (api_port, admin_port) = (free_port(), free_port());
    let config = format!(
        r#"
[intent-api]
listen = "127.0.0.1:{api_port}"
admin = "127.0.0.1:{admin_port}"
store-dir = "{store}"
[[intent-api.tokens]]
name = "test"
role = "admin"
sha256 = "{sha}"
[intent-api.intents]
state-dir = "{state}"
reconcile-interval = "100ms"
verify = false
[[intent-api.intents.drivers]]
kind = "p4runtime"
switch = 1
addr = "{grpc}"
device-id = 1
report-port = 3
hosts = [{{ prefix = "10.0.1.1/32", port = 1 }}, {{ prefix = "10.0.2.1/32", port = 2 }}]
entries = [{{ table = "ipv4_forward", match = {{ dst_addr = "10.0.2.1/32" }}, action = "set_egress", params = {{ port = 2 }} }}]
"#,
        store = dir.join("store").display(),
        state = dir.join("intent-api").display(),
        sha = kplane_intent_api::auth::hash_token(TOKEN),
        grpc = sw.grpc,
    );
    let config_file = dir.join("kplane.toml");
    std::fs::write(&config_file, config).unwrap();
    let _api = ChildGuard::from(
        kplane()
            .arg("--config")
            .arg(&config_file)
            .arg("intent-api")
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    wait_ready(admin_port, Duration::from_secs(30));
    let api = format!("http://127.0.0.1:{api_port}");
    let api_addr: std::net::SocketAddr = format!("127.0.0.1:{api_port}").parse().unwrap();

    // Monitor the flow: the driver pushes the pipeline, then the watchlist entry.
    let monitor = dir.join("monitor.yaml");
    std::fs::write(
        &monitor,
        "kind: monitor\nmatch:\n  dst: 10.0.2.1\n  protocol: udp\nreason: bmv2 test\n",
    )
    .unwrap();
    let (ok, out) = cli(&api, &["apply", "-f", monitor.to_str().unwrap()]);
    assert!(ok, "{out}");
    let id: serde_json::Value = serde_json::from_str(&out).unwrap();
    let monitor_id = id["id"].as_str().unwrap().to_string();
    wait_for_state(api_addr, &monitor_id, "active");
    let dump = sw.cli("table_dump int_watchlist\n");
    assert!(
        dump.contains("int_source"),
        "the entry is on the switch: {dump}"
    );

    // Provisioning in registers (Thrift CLI): the switch's identity, the collector, the
    // host-facing ports. (Forwarding to host 2 is the driver's static entry, written with
    // the pipeline: table entries must all go through P4Runtime, whose server keeps state.)
    let mac = {
        let out = Command::new("ip")
            .args(["-n", &ns.name, "-o", "link", "show", &host(3)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mac = text
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .unwrap()
            .replace(':', "");
        u64::from_str_radix(&mac, 16).unwrap()
    };
    let ip = |s: &str| u32::from(s.parse::<std::net::Ipv4Addr>().unwrap());
    sw.cli(&format!(
        "register_write KplaneEgress.switch_id 0 1\n\
         register_write KplaneEgress.switch_ip 0 {}\n\
         register_write KplaneEgress.collector_ip 0 {}\n\
         register_write KplaneEgress.collector_mac 0 {mac}\n\
         register_write KplaneIngress.host_port 1 1\n\
         register_write KplaneIngress.host_port 2 1\n",
        ip("10.99.0.1"),
        ip("10.99.0.254"),
    ));

    // A watched packet crosses the switch, and its report reaches the collector.
    assert!(
        probe(&ns, &host(1), &host(2)) > 0,
        "host 2 receives the flow"
    );
    let end = Instant::now() + Duration::from_secs(15);
    let event = loop {
        match events.recv_timeout(Duration::from_millis(200)) {
            Ok(l) if l.contains("10.0.2.1") => break l,
            Ok(_) => {}
            Err(_) => assert!(Instant::now() < end, "no report reached the collector"),
        }
    };
    let e: serde_json::Value = serde_json::from_str(&event).unwrap();
    assert_eq!(
        e["path"],
        serde_json::json!([1]),
        "the path is the switch's INT node id: {e}"
    );
    assert_eq!(e["flow"]["src_port"], 1000, "{e}");

    // Complex detection in the sink (the event-detection paper's `complex_detection`), set by
    // `tune` intents: a condition that never holds keeps the flow's reports in the switch,
    // one that always holds lets every packet report. The switch counts the reports it sends
    // in its report sequence register.
    let reports = || -> u64 {
        let out = sw.cli("register_read KplaneEgress.report_seq 0\n");
        out.lines()
            .find_map(|l| l.split("report_seq[0]=").nth(1))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no report_seq in {out}"))
    };
    let tune = |name: &str, condition: &str| -> String {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!(
                "kind: tune\nmatch: {{dst: 10.0.2.1, protocol: udp}}\npriority: 20\n\
                 detection: {{algorithm: complex, when: [{condition}]}}\n"
            ),
        )
        .unwrap();
        let (ok, out) = cli(&api, &["apply", "-f", file.to_str().unwrap()]);
        assert!(ok, "{out}");
        let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        wait_for_state(api_addr, &id, "active");
        id
    };
    let never = tune("never", "{measurement: hop-latency, above: 4000000000}");
    let dump = sw.cli("table_dump int_sink_detection\n");
    assert!(dump.contains("detect_complex"), "{dump}");
    let before = reports();
    assert!(probe(&ns, &host(1), &host(2)) > 0);
    assert_eq!(reports(), before, "no packet met the condition: no report");
    let (ok, out) = cli(&api, &["delete", &never]);
    assert!(ok, "{out}");
    let end = Instant::now() + Duration::from_secs(10);
    while sw
        .cli("table_dump int_sink_detection\n")
        .contains("detect_complex")
    {
        assert!(Instant::now() < end, "the detection entry was not removed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let always = tune("always", "{measurement: hop-latency, below: 4000000000}");
    let before = reports();
    let delivered = probe(&ns, &host(1), &host(2));
    assert!(delivered > 0);
    assert!(
        reports() >= before + delivered as u64,
        "every packet met the condition: {} reports for {delivered} packets",
        reports() - before
    );
    let (ok, out) = cli(&api, &["delete", &always]);
    assert!(ok, "{out}");

    // Block it: the flow no longer reaches host 2.
    let block = dir.join("block.json");
    std::fs::write(
        &block,
        r#"{"kind": "block", "match": {"src": "10.0.1.1", "dst-port": "5000"}, "priority": 10}"#,
    )
    .unwrap();
    let (ok, out) = cli(&api, &["apply", "-f", block.to_str().unwrap()]);
    assert!(ok, "{out}");
    let block_id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for_state(api_addr, &block_id, "active");
    assert!(sw.cli("table_dump drop_acl\n").contains("acl_drop"));
    assert_eq!(
        probe(&ns, &host(1), &host(2)),
        0,
        "the blocked flow is dropped"
    );
    let (ok, out) = cli(&api, &["show", &block_id]);
    assert!(ok && out.contains("\"installed\""), "{out}");

    // Deleted: it flows again, and the audit log has the whole story.
    let (ok, out) = cli(&api, &["delete", &block_id]);
    assert!(ok, "{out}");
    let end = Instant::now() + Duration::from_secs(10);
    while sw.cli("table_dump drop_acl\n").contains("acl_drop") {
        assert!(Instant::now() < end, "the ACL entry was not removed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(probe(&ns, &host(1), &host(2)) > 0, "unblocked");
    let (ok, out) = cli(&api, &["audit", "--intent", &block_id]);
    assert!(
        ok && out.contains("\"delete\"") && out.contains("\"submit\""),
        "{out}"
    );

    // Invalid intents are refused by the CLI with the API's reason, exit status 1.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "kind: block\nmatch:\n  src: 10.0.1.300\n").unwrap();
    let (ok, out) = cli(&api, &["apply", "-f", bad.to_str().unwrap()]);
    assert!(!ok && out.contains("match.src"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
