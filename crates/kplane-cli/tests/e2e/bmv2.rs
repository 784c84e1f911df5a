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

pub(crate) fn wait_for_state(
    api: std::net::SocketAddr,
    id: &str,
    state: &str,
) -> serde_json::Value {
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

/// `kplane collector --print` (run by `cmd`, which ends in the kplane binary) listening on
/// `listen`, reports published too; its printed lines, a JSON record each.
fn printing_collector(cmd: &mut Command, listen: &str) -> (ChildGuard, mpsc::Receiver<String>) {
    let mut collector = ChildGuard::from(
        cmd.args(["collector", "--listen", listen, "--print"])
            .env("KPLANE__COLLECTOR__PUBLISH_REPORTS", "true")
            .args(["--admin", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let (tx, lines) = mpsc::channel::<String>();
    let out = collector.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (collector, lines)
}

/// `kplane intent-api` with its store in `dir` and `drivers` (TOML, the
/// `[[intent-api.intents.drivers]]` tables); returns once it is ready.
fn intent_api(dir: &std::path::Path, drivers: &str) -> (ChildGuard, std::net::SocketAddr) {
    let (api_port, admin_port) = (free_port(), free_port());
    let config = format!(
        r#"
[intent-api]
listen = "127.0.0.1:{api_port}"
admin = "127.0.0.1:{admin_port}"
store-dir = "{store}"
[[http.tokens]]
name = "test"
role = "admin"
sha256 = "{sha}"
[intent-api.intents]
state-dir = "{state}"
reconcile-interval = "100ms"
verify = false
{drivers}
"#,
        store = dir.join("store").display(),
        state = dir.join("intent-api").display(),
        sha = kplane_intent_api::auth::hash_token(TOKEN),
    );
    let config_file = dir.join("kplane.toml");
    std::fs::write(&config_file, config).unwrap();
    let api = ChildGuard::from(
        kplane()
            .arg("--config")
            .arg(&config_file)
            .arg("intent-api")
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    wait_ready(admin_port, Duration::from_secs(30));
    (api, format!("127.0.0.1:{api_port}").parse().unwrap())
}

/// Applies an intent written into `dir` as `file` (`kplane apply` reads `.json` as JSON, else
/// YAML) and waits until it is active; its id.
fn apply(api: std::net::SocketAddr, dir: &std::path::Path, file: &str, text: &str) -> String {
    let file = dir.join(file);
    std::fs::write(&file, text).unwrap();
    let (ok, out) = cli(
        &format!("http://{api}"),
        &["apply", "-f", file.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for_state(api, &id, "active");
    id
}

/// A BMv2 switch (device 1, INT node id 1, 10.99.0.1) with `ports` ports on veths whose far
/// ends sit in a namespace, the last port carrying reports to the collector (`kplane
/// collector --print` inside the namespace, on 10.99.0.254), and the intent API driving the
/// switch over P4Runtime, which provisions all of it (no Thrift). `hosts`: host-facing
/// (prefix, port), the INT sink's ports; `routes`: forwarding (prefix, port); `extra`: more
/// driver keys (TOML lines).
pub(crate) struct Rig {
    pub(crate) ns: Netns,
    pub(crate) sw: Bmv2,
    dir: std::path::PathBuf,
    api: String,
    pub(crate) api_addr: std::net::SocketAddr,
    /// What the collector publishes (events and reports), a JSON line each.
    events: mpsc::Receiver<String>,
    names: String,
    _collector: ChildGuard,
    _api: ChildGuard,
}

impl Rig {
    pub(crate) fn start(
        tag: &str,
        ports: u32,
        hosts: &[(&str, u32)],
        routes: &[(&str, u32)],
        extra: &str,
    ) -> Self {
        let names = format!("k{}{tag}", std::process::id());
        let ns = Netns::new(tag);
        for n in 1..=ports {
            ns.veth(&format!("{names}p{n}"), &format!("{names}h{n}"));
        }
        let report = format!("{names}h{ports}");
        ns.ip(&["addr", "add", "10.99.0.254/24", "dev", &report]);
        let collector_mac = {
            let out = Command::new("ip")
                .args(["-n", &ns.name, "-o", "link", "show", &report])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            text.split_whitespace()
                .skip_while(|w| *w != "link/ether")
                .nth(1)
                .unwrap()
                .to_string()
        };
        let ifaces: Vec<(u32, String)> = (1..=ports).map(|n| (n, format!("{names}p{n}"))).collect();
        let refs: Vec<(u32, &str)> = ifaces.iter().map(|(n, i)| (*n, i.as_str())).collect();
        let sw = Bmv2::start(1, &refs);

        let (collector, events) = printing_collector(
            Command::new("ip")
                .args(["netns", "exec", &ns.name])
                .arg(env!("CARGO_BIN_EXE_kplane")),
            "10.99.0.254:32766",
        );

        let dir = std::env::temp_dir().join(format!("kplane-bmv2-{names}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let list = |items: Vec<String>| items.join(", ");
        let hosts = list(
            hosts
                .iter()
                .map(|(p, n)| format!("{{ prefix = \"{p}\", port = {n} }}"))
                .collect(),
        );
        let entries = list(
            routes
                .iter()
                .map(|(p, n)| {
                    format!(
                        "{{ table = \"ipv4_forward\", match = {{ dst_addr = \"{p}\" }}, action = \"set_egress\", params = {{ port = {n} }} }}"
                    )
                })
                .collect(),
        );
        let driver = format!(
            r#"
[[intent-api.intents.drivers]]
kind = "p4runtime"
switch = 1
addr = "{grpc}"
device-id = 1
report-port = {ports}
switch-ip = "10.99.0.1"
collector-ip = "10.99.0.254"
collector-mac = "{collector_mac}"
hosts = [{hosts}]
entries = [{entries}]
{extra}
"#,
            grpc = sw.grpc,
        );
        let (api, api_addr) = intent_api(&dir, &driver);
        Self {
            ns,
            sw,
            dir,
            api: format!("http://{api_addr}"),
            api_addr,
            events,
            names,
            _collector: collector,
            _api: api,
        }
    }

    /// The far end (in the namespace) of switch port `n`.
    pub(crate) fn host(&self, n: u32) -> String {
        format!("{}h{n}", self.names)
    }

    /// Captures for 3 s on the far end of switch port `n` the frames `keep` accepts; returns
    /// once the capture is open.
    pub(crate) fn capture(
        &self,
        n: u32,
        keep: fn(&[u8]) -> bool,
    ) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
        self.capture_up_to(n, usize::MAX, Duration::from_secs(3), keep)
    }

    /// Captures on the far end of switch port `n` the frames `keep` accepts until `count`
    /// arrived or `wait` passed (a switch on a loaded machine can take seconds); returns once
    /// the capture is open.
    pub(crate) fn capture_up_to(
        &self,
        n: u32,
        count: usize,
        wait: Duration,
        keep: fn(&[u8]) -> bool,
    ) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
        let (iface, name) = (self.host(n), self.ns.name.clone());
        let (tx, rx) = mpsc::channel();
        let h = std::thread::spawn(move || {
            Netns { name }.enter_keep(move || {
                let port = RawPort::open(&iface);
                tx.send(()).unwrap();
                port.recv_up_to(count, wait, keep)
            })
        });
        rx.recv().unwrap();
        h
    }

    /// Sends `frames` into switch port `n` (from its far end), `gap` apart.
    pub(crate) fn send(&self, n: u32, frames: Vec<Vec<u8>>, gap: Duration) {
        let iface = self.host(n);
        self.ns.enter(move || {
            let port = RawPort::open(&iface);
            for f in &frames {
                port.send(f);
                std::thread::sleep(gap);
            }
        });
    }

    /// Applies an intent given as YAML and waits until it is active; its id.
    pub(crate) fn apply(&self, name: &str, yaml: &str) -> String {
        apply(self.api_addr, &self.dir, &format!("{name}.yaml"), yaml)
    }

    /// The next collector record that `pick` accepts, within `wait`.
    fn next_record(
        &self,
        wait: Duration,
        pick: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let end = Instant::now() + wait;
        loop {
            match self.events.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l)
                        && pick(&v)
                    {
                        return v;
                    }
                }
                Err(_) => assert!(Instant::now() < end, "no such record reached the collector"),
            }
        }
    }
}

/// Ethernet, IPv4 and UDP before a report's Telemetry Report header.
const REPORT_HEADERS: usize = 14 + 20 + 8;

/// A report frame off the switch's report port, decoded by kplane's decoder with `opts`.
pub(crate) fn decode_report_frame(
    f: &[u8],
    opts: kplane_wire::DecodeOptions,
) -> kplane_model::ReportRecord {
    let mut out = None;
    kplane_wire::Decoder::new(opts).decode_report(
        &f[REPORT_HEADERS..],
        kplane_wire::RecordMeta::default(),
        |r| out = Some(r.clone()),
    );
    out.expect("the report decodes")
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until `sw`'s answer to the Thrift CLI `command` (not kplane's P4Runtime client)
/// contains `needle`; the answer. Until the pipeline is pushed the switch knows no table.
fn wait_for_cli(sw: &Bmv2, command: &str, needle: &str, within: Duration) -> String {
    let end = Instant::now() + within;
    loop {
        let (_, out) = sw.try_cli(command);
        if out.contains(needle) {
            return out;
        }
        assert!(
            Instant::now() < end,
            "{command:?} never answered {needle:?}: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `sw` holds the forwarding entry of `Rig`'s routes; the table dump.
pub(crate) fn wait_for_forwarding(sw: &Bmv2, within: Duration) -> String {
    wait_for_cli(sw, "table_dump ipv4_forward\n", "set_egress", within)
}

#[test]
fn a_switch_is_provisioned_at_start_and_again_after_it_restarts() {
    if !bmv2::available() {
        return;
    }
    let mut rig = Rig::start(
        "v",
        3,
        &[("10.0.1.1/32", 1), ("10.0.2.1/32", 2)],
        &[("10.0.2.1/32", 2)],
        "",
    );
    let (h1, h2) = (rig.host(1), rig.host(2));

    // No intent: the API pushes the pipeline, the configured forwarding and the report clone
    // session on its own, and the switch forwards.
    wait_for_forwarding(&rig.sw, Duration::from_secs(15));
    assert!(
        rig.sw.cli("mirroring_get 500\n").contains("port"),
        "the report clone session is on the switch"
    );
    // Its identity and where reports go: the keyless table's default action.
    let config = rig.sw.cli("table_dump switch_config\n");
    assert!(
        config.contains("set_switch") && config.contains("0a630001"),
        "switch_config holds switch 1 at 10.99.0.1: {config}"
    );
    assert!(
        probe(&rig.ns, &h1, &h2) > 0,
        "host 2 receives host 1's packets"
    );
    let switches = http(
        rig.api_addr,
        "GET",
        "/v1/intents/switches",
        Some(TOKEN),
        None,
    )
    .unwrap()
    .json();
    assert_eq!(switches["switches"][0]["status"], "ok", "{switches}");
    let intents = http(rig.api_addr, "GET", "/v1/intents", Some(TOKEN), None)
        .unwrap()
        .json();
    assert_eq!(intents["intents"], serde_json::json!([]), "{intents}");

    // The switch restarts empty; the next passes provision it again.
    rig.sw.restart();
    wait_for_forwarding(&rig.sw, Duration::from_secs(15));
    assert!(
        probe(&rig.ns, &h1, &h2) > 0,
        "host 2 receives host 1's packets after the restart"
    );
    let audit = http(rig.api_addr, "GET", "/v1/audit", Some(TOKEN), None)
        .unwrap()
        .json();
    assert!(
        audit["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["result"] == "switch-restarted"),
        "the restart is in the audit log: {audit}"
    );
}

#[test]
fn intents_on_a_bmv2_switch_watch_and_block_real_packets() {
    if !bmv2::available() {
        return;
    }
    // Hosts on ports 1 and 2, reports on port 3.
    let rig = Rig::start(
        "b",
        3,
        &[("10.0.1.1/32", 1), ("10.0.2.1/32", 2)],
        &[("10.0.2.1/32", 2)],
        "",
    );
    let (ns, sw, dir, api, api_addr) = (&rig.ns, &rig.sw, &rig.dir, &rig.api, rig.api_addr);
    let host = |n: u32| rig.host(n);

    // Monitor the flow: the driver pushes the pipeline, then the watchlist entry.
    rig.apply(
        "monitor",
        "kind: monitor\nmatch:\n  dst: 10.0.2.1\n  protocol: udp\nreason: bmv2 test\n",
    );
    let dump = sw.cli("table_dump int_watchlist\n");
    assert!(
        dump.contains("int_source"),
        "the entry is on the switch: {dump}"
    );

    // A watched packet crosses the switch, and its report reaches the collector.
    assert!(
        probe(ns, &host(1), &host(2)) > 0,
        "host 2 receives the flow"
    );
    let e = rig.next_record(Duration::from_secs(15), |v| {
        v.get("path").is_some() && v.to_string().contains("10.0.2.1")
    });
    assert_eq!(
        e["path"],
        serde_json::json!([1]),
        "the path is the switch's INT node id: {e}"
    );
    assert_eq!(e["flow"]["src_port"], 1000, "{e}");

    // Complex detection in the sink (the event-detection paper's `complex_detection`), set by
    // `tune` intents: a condition that never holds keeps the flow's reports in the switch but
    // its first (a flow new to the sink's rules is reported whatever the rule), one that
    // always holds lets every packet report. The switch counts the reports it sends in its
    // report sequence register.
    let reports = || sw.register("KplaneEgress.report_seq", 0);
    let tune = |name: &str, condition: &str| -> String {
        rig.apply(
            name,
            &format!(
                "kind: tune\nmatch: {{dst: 10.0.2.1, protocol: udp}}\npriority: 20\n\
                 detection: {{algorithm: complex, when: [{condition}]}}\n"
            ),
        )
    };
    let never = tune("never", "{measurement: hop-latency, above: 4000000000}");
    let dump = sw.cli("table_dump int_sink_detection\n");
    assert!(dump.contains("detect_complex"), "{dump}");
    let before = reports();
    assert!(probe(ns, &host(1), &host(2)) > 1);
    assert_eq!(
        reports(),
        before + 1,
        "no packet met the condition: the new flow's first report only"
    );
    let (ok, out) = cli(api, &["delete", &never]);
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
    let delivered = probe(ns, &host(1), &host(2));
    assert!(delivered > 0);
    assert!(
        reports() >= before + delivered as u64,
        "every packet met the condition: {} reports for {delivered} packets",
        reports() - before
    );
    let (ok, out) = cli(api, &["delete", &always]);
    assert!(ok, "{out}");

    // Block it: the flow no longer reaches host 2.
    let block_id = apply(
        api_addr,
        dir,
        "block.json",
        r#"{"kind": "block", "match": {"src": "10.0.1.1", "dst-port": "5000"}, "priority": 10}"#,
    );
    assert!(sw.cli("table_dump drop_acl\n").contains("acl_drop"));
    assert_eq!(
        probe(ns, &host(1), &host(2)),
        0,
        "the blocked flow is dropped"
    );
    let (ok, out) = cli(api, &["show", &block_id]);
    assert!(ok && out.contains("\"installed\""), "{out}");

    // Deleted: it flows again, and the audit log has the whole story.
    let (ok, out) = cli(api, &["delete", &block_id]);
    assert!(ok, "{out}");
    let end = Instant::now() + Duration::from_secs(10);
    while sw.cli("table_dump drop_acl\n").contains("acl_drop") {
        assert!(Instant::now() < end, "the ACL entry was not removed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(probe(ns, &host(1), &host(2)) > 0, "unblocked");
    let (ok, out) = cli(api, &["audit", "--intent", &block_id]);
    assert!(
        ok && out.contains("\"delete\"") && out.contains("\"submit\""),
        "{out}"
    );

    // Invalid intents are refused by the CLI with the API's reason, exit status 1.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "kind: block\nmatch:\n  src: 10.0.1.300\n").unwrap();
    let (ok, out) = cli(api, &["apply", "-f", bad.to_str().unwrap()]);
    assert!(!ok && out.contains("match.src"), "{out}");
}

/// Upstream items (node ids) a crafted packet arrives with: each port 9 → 4, label time
/// 1000·node.
fn upstream(nodes: &[u32]) -> Vec<kplane_emulator::report::Hop> {
    nodes
        .iter()
        .map(|&n| kplane_emulator::report::Hop {
            node: n,
            in_port: 9,
            out_port: 4,
            egress_ns: u64::from(n) * 1000,
            ..Default::default()
        })
        .collect()
}

/// Host A's packet (UDP 10.0.1.1:`sport` → `dst`:`dport`), carrying an INT-label option with
/// `items` when there are any.
fn label_frame(dst: &str, sport: u16, dport: u16, items: &[u32]) -> Vec<u8> {
    use kplane_wire::build::{Encap, FlowSpec, IntSpec, PacketSpec};
    let flow = FlowSpec::udp(
        "10.0.1.1".parse().unwrap(),
        dst.parse().unwrap(),
        sport,
        dport,
    );
    let spec = PacketSpec::new(flow);
    let spec = if items.is_empty() {
        spec
    } else {
        let hops = upstream(items).iter().map(label_item).collect();
        spec.with_int(
            IntSpec::new(kplane_wire::int::IntVersion::V2, 0, hops),
            Encap::IntLabel {
                protocol: 253,
                int_num_offset: 0,
            },
        )
    };
    spec.build()
}

/// An item as the INT-label option carries it (the label time in the ingress timestamp).
fn label_item(h: &kplane_emulator::report::Hop) -> kplane_model::HopRecord {
    let mut r = h.record();
    r.set(kplane_model::HopField::IngressTimestamp, h.egress_ns);
    r
}

/// What a frame out of the switch carries: IP protocol and length, the INT-label option's
/// INT_num and items (device, ingress port, egress port, label time) newest first, and the
/// UDP source port after it.
#[derive(Debug)]
struct Seen {
    protocol: u8,
    ip_len: u16,
    int_num: Option<u8>,
    items: Vec<(u32, u16, u16, u64)>,
    sport: u16,
}

fn seen(f: &[u8]) -> Option<Seen> {
    let ip = f.get(14..)?;
    if f.get(12..14)? != [0x08, 0x00] || ip.get(12..16)? != [10, 0, 1, 1] {
        return None;
    }
    let be16 = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let protocol = ip[9];
    let mut l4 = 20;
    let (mut int_num, mut items) = (None, Vec::new());
    if protocol == 253 {
        let n = ip[21];
        int_num = Some(n);
        let count = if n > 5 { n - 5 } else { n };
        for i in 0..usize::from(count) {
            let it = ip.get(22 + 32 * i..22 + 32 * (i + 1))?;
            items.push((
                u32::from_be_bytes(it[0..4].try_into().unwrap()),
                be16(it, 4),
                be16(it, 6),
                u64::from_be_bytes(it[8..16].try_into().unwrap()),
            ));
        }
        l4 = 22 + 32 * usize::from(count);
    }
    Some(Seen {
        protocol,
        ip_len: be16(ip, 2),
        int_num,
        items,
        sport: be16(ip, l4),
    })
}

/// INT-label in the P4 program on BMv2, against the emulator's labelling
/// (`kplane_emulator::label::PortConfig::labels`, what `kplane emulate` runs) for the same
/// packets at the same times: Base A's interval, MAX_hop, a specific flow selected by a
/// `monitor` intent's INT-label mode, Base B with F1, the host-facing port's labelling and
/// export to the collector (compared with the emulator's export of the same items) and the
/// packet restored for the host. Intents (`int-label`, `monitor`) through the API and its
/// P4Runtime driver.
#[test]
fn int_label_on_bmv2_labels_exports_and_restores_as_the_emulator_does() {
    use kplane_emulator::label::{Algorithm, Function, PacketLabel, PortConfig};
    if !bmv2::available() {
        return;
    }
    // Host A on port 1, a fabric port 2 (the next switch's side, captured), host B on port
    // 3, reports on port 4.
    let rig = Rig::start(
        "l",
        4,
        &[("10.0.1.1/32", 1), ("10.0.3.1/32", 3)],
        &[("10.0.2.0/24", 2), ("10.0.3.1/32", 3)],
        "",
    );
    const T: Duration = Duration::from_millis(500);
    let base_a = rig.apply(
        "label-a",
        "kind: int-label\nswitches: [1]\nports: [2, 3]\ninterval: 500ms\n",
    );
    rig.apply(
        "specific",
        "kind: monitor\nmatch: {dst: 10.0.2.1, dst-port: 6000}\nint-label: true\n",
    );

    // Packets: (pause before, destination, dst port, upstream items). Source ports number
    // them (2000 + index).
    let burst = |pause: u64, list: &[(&'static str, u16, &'static [u32])]| {
        list.iter()
            .enumerate()
            .map(|(i, &(dst, dport, items))| (if i == 0 { pause } else { 20 }, dst, dport, items))
            .collect::<Vec<_>>()
    };
    let run = |packets: &[(u64, &str, u16, &[u32])], first: u16| {
        // Capture on the fabric port's and host B's far ends while host A sends.
        let (fabric, host_b) = (
            rig.capture(2, |f| seen(f).is_some()),
            rig.capture(3, |f| seen(f).is_some()),
        );
        let frames: Vec<(u64, Vec<u8>)> = packets
            .iter()
            .enumerate()
            .map(|(i, &(pause, dst, dport, items))| {
                (pause, label_frame(dst, first + i as u16, dport, items))
            })
            .collect();
        let h1 = rig.host(1);
        let sent: Vec<Instant> = rig.ns.enter(move || {
            let port = RawPort::open(&h1);
            frames
                .iter()
                .map(|(pause, f)| {
                    std::thread::sleep(Duration::from_millis(*pause));
                    port.send(f);
                    Instant::now()
                })
                .collect()
        });
        let parse =
            |frames: Vec<Vec<u8>>| frames.iter().filter_map(|f| seen(f)).collect::<Vec<_>>();
        (
            sent,
            parse(fabric.join().unwrap()),
            parse(host_b.join().unwrap()),
        )
    };
    let epoch = Instant::now();
    let ns = |t: Instant| t.duration_since(epoch).as_nanos() as u64;
    // The emulator's decision for port 2, its last labelling kept across bursts.
    let mut last: Option<u64> = None;
    let mut check = |cfg: &PortConfig,
                     packets: &[(u64, &str, u16, &[u32])],
                     first: u16,
                     sent: &[Instant],
                     out: &[Seen]| {
        for (i, &(_, dst, dport, items)) in packets.iter().enumerate() {
            if dst != "10.0.2.1" {
                continue;
            }
            let sport = first + i as u16;
            let got = out
                .iter()
                .find(|s| s.sport == sport)
                .unwrap_or_else(|| panic!("packet {sport} never left port 2: {out:?}"));
            let label = PacketLabel {
                items: upstream(items),
                offset: if dport == 6000 { 5 } else { 0 },
            };
            let now = ns(sent[i]);
            let labels = cfg.labels(last, now, &label, || 0.5);
            let int_num = label.int_num() + u8::from(labels);
            assert_eq!(
                got.int_num.unwrap_or(0),
                int_num,
                "packet {sport} ({} items, offset {}): the emulator {} it: {got:?}",
                items.len(),
                label.offset,
                if labels { "labels" } else { "does not label" }
            );
            if labels {
                last = Some(now);
                let top = got.items[0];
                assert_eq!(
                    (top.0, top.1, top.2),
                    (1, 1, 2),
                    "this switch's item on top"
                );
                assert!(
                    top.3 > 0 && top.3 % 1000 == 0,
                    "BMv2's µs clock in ns: {top:?}"
                );
            }
            let upstream: Vec<u32> = got
                .items
                .iter()
                .skip(usize::from(labels))
                .map(|i| i.0)
                .collect();
            let mut want = items.to_vec();
            want.reverse();
            assert_eq!(
                upstream, want,
                "packet {sport}: upstream items kept, newest first"
            );
        }
    };

    // Base A (T = 500 ms; packets 20 ms apart, pauses of 1 s: margins no load on the machine
    // turns into another decision): a port that never labelled labels; within T it does not,
    // not even a packet with items; a specific flow is labelled anyway, from INT_num = MAX_hop.
    let cfg_a = PortConfig {
        interval_ns: T.as_nanos() as u64,
        max_hop: 5,
        algorithm: Algorithm::BaseA,
        function: Function::F1,
        rest_ns: 0,
        shift: 0,
    };
    let one = burst(
        0,
        &[
            ("10.0.2.1", 5000, &[]),
            ("10.0.2.1", 5000, &[]),
            ("10.0.2.1", 5000, &[7, 8]),
            ("10.0.2.1", 6000, &[]),
            // To host B: port 3 labels it (its first), exports and restores it.
            ("10.0.3.1", 5000, &[7, 8]),
            // Port 3 within T: no labelling, nothing to export.
            ("10.0.3.1", 5000, &[]),
        ],
    );
    let (sent, fabric, host_b) = run(&one, 2000);
    check(&cfg_a, &one, 2000, &sent, &fabric);
    // Restored for host B: UDP again, the option gone, the original length.
    let plain_len = (20 + 8 + b"kplane".len()) as u16;
    assert_eq!(host_b.len(), 2, "{host_b:?}");
    for s in &host_b {
        assert_eq!(
            (s.protocol, s.int_num, s.ip_len),
            (17, None, plain_len),
            "{s:?}"
        );
    }
    // The export: the upstream items and port 3's, as the emulator exports them.
    let export = rig.next_record(Duration::from_secs(10), |v| {
        v["hops"].as_array().is_some_and(|h| h.len() == 3)
    });
    let mut items = upstream(&[7, 8]);
    items.push(kplane_emulator::report::Hop {
        node: 1,
        in_port: 1,
        out_port: 3,
        ..Default::default()
    });
    let info = kplane_emulator::report::PacketInfo {
        src: "10.0.1.1".parse().unwrap(),
        dst: "10.0.3.1".parse().unwrap(),
        protocol: 17,
        src_port: 2004,
        dst_port: 5000,
        bytes: u32::from(plain_len),
    };
    let bytes =
        kplane_emulator::report::label_report(0, 0, 1, &PacketLabel { items, offset: 0 }, &info);
    let mut emulated = None;
    kplane_wire::Decoder::new(kplane_wire::DecodeOptions::default()).decode_report(
        &bytes,
        kplane_wire::RecordMeta::default(),
        |r| emulated = Some(serde_json::to_value(r).unwrap()),
    );
    let emulated = emulated.expect("the emulator's export decodes");
    let ports = |v: &serde_json::Value| -> Vec<(u64, u64, u64)> {
        v["hops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let f = |k: &str| h[k].as_u64().unwrap_or(u64::MAX);
                (f("node_id"), f("l1_ingress_port"), f("l1_egress_port"))
            })
            .collect()
    };
    assert_eq!(ports(&export), ports(&emulated), "{export}\n{emulated}");
    assert_eq!(ports(&export)[2], (1, 1, 3), "port 3's item last: {export}");
    assert_eq!(
        export["flow"], emulated["flow"],
        "the flow, restored: {export}"
    );

    // T later: MAX_hop items take no more; the next packet is labelled, then T again.
    let two = burst(
        1000,
        &[
            ("10.0.2.1", 5000, &[7, 8, 9, 10, 11]),
            ("10.0.2.1", 5000, &[7, 8]),
            ("10.0.2.1", 5000, &[]),
        ],
    );
    let (sent, fabric, _) = run(&two, 2100);
    check(&cfg_a, &two, 2100, &sent, &fabric);

    // Base B with F1: after T a packet is labelled by the interval; within T, one that
    // carries an item is (probability 1), one that carries none is not.
    let (ok, out) = cli(&rig.api, &["delete", &base_a]);
    assert!(ok, "{out}");
    rig.apply(
        "label-b",
        "kind: int-label\nswitches: [1]\nports: [2, 3]\ninterval: 500ms\nalgorithm: base-b\nfunction: f1\n",
    );
    let cfg_b = PortConfig {
        algorithm: Algorithm::BaseB,
        ..cfg_a
    };
    let three = burst(
        1000,
        &[
            ("10.0.2.1", 5000, &[]),
            ("10.0.2.1", 5000, &[7]),
            ("10.0.2.1", 5000, &[]),
        ],
    );
    let (sent, fabric, _) = run(&three, 2200);
    check(&cfg_b, &three, 2200, &sent, &fabric);
}

/// A GPINT probe frame entering the switch: from the monitor (10.0.1.1) to 10.0.9.9, IP
/// protocol 254, DSCP 0x17, request `request` (rule hits), `route` as its SR stack, and one
/// upstream switch's DLV and measurement already on it.
fn probe_frame(request: u16, route: &[u8]) -> Vec<u8> {
    use kplane_wire::papers::{DlvHeader, GpintProbe, SrHeader};
    let sr: Vec<SrHeader> = route
        .iter()
        .map(|&p| SrHeader {
            next_port: p,
            measurement_range: 1,
        })
        .collect();
    let upstream = DlvHeader {
        switch_id: 9,
        queue_depth: 3,
        measurement_count: 1,
    };
    let mut body = Vec::new();
    GpintProbe::write(request, 0, &sr, &[(upstream, vec![77])], &mut body);
    let ip = kplane_wire::build::ip_packet(
        "10.0.1.1".parse().unwrap(),
        "10.0.9.9".parse().unwrap(),
        254,
        0x17,
        &body,
    );
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f
}

/// What a probe frame off the switch says: (DSCP, request, SR ports left, DLVs as (switch,
/// queue depth, #MEA), measurements), decoded by kplane's decoder.
type ProbeSeen = (u8, u16, Vec<u8>, Vec<(u8, u8, u16)>, Vec<u32>);

fn probe_seen(f: &[u8]) -> Option<ProbeSeen> {
    use kplane_wire::packet::Telemetry;
    let opts = kplane_wire::DecodeOptions::default();
    let kplane_wire::Decoded::Packet(p) =
        kplane_wire::decode_frame(f, kplane_wire::Start::Ethernet, &opts).ok()?
    else {
        return None;
    };
    let Telemetry::Gpint(g) = p.telemetry else {
        return None;
    };
    Some((
        g.kind.dscp(),
        g.request_id,
        g.source_route().map(|s| s.next_port).collect(),
        g.devices()
            .map(|d| (d.switch_id, d.queue_depth, d.measurement_count))
            .collect(),
        g.measurements().collect(),
    ))
}

/// GPINT probes in the P4 program on BMv2 against the emulator's probe data plane
/// (`kplane_emulator::probe`, what the GPINT experiments run) for the same probes: the switch
/// forwards a probe by its SR header and pops it, pushes its DLV and its rule-hit counter on
/// top of the upstream ones, answers a request it has not seen with a feedback (DSCP 0x19, Req
/// META alone) out of the port the probe came in on, and one it has seen (the loop check) with
/// none. (SQR's ring and port-counter ranges: the `kplane probe` test below.)
#[test]
fn gpint_probes_on_bmv2_are_forwarded_measured_and_confirmed_as_the_emulator_does() {
    use kplane_emulator::probe::{Delivery, Fabric, FabricConfig, Probe};
    if !bmv2::available() {
        return;
    }
    // The monitor on port 1, the next switch's side on port 2 (captured), reports on port 3.
    // SQR's recovery mode on (feedback for probes from port 1 goes back out of port 1), with
    // a hold far longer than the test: a protected probe's clone stays in the ring.
    let rig = Rig::start(
        "g",
        3,
        &[("10.0.1.1/32", 1)],
        &[],
        "probe-recovery = { monitor-port = 1, hold = \"60s\" }",
    );
    rig.apply("plan", "kind: probe-plan\nplanner: gpint-3\n");
    // Provisioned: the host port is a sink port, and the last feedback session is written
    // (the report port's, 1000 + 3).
    wait_for_cli(
        &rig.sw,
        "table_dump sink_ports\n",
        "host_facing",
        Duration::from_secs(15),
    );
    wait_for_cli(
        &rig.sw,
        "mirroring_get 1003\n",
        "port",
        Duration::from_secs(15),
    );

    // Requests 5, 5 again (a loop), 6; the route's next hops: port 2, then port 7 beyond.
    let requests = [5u16, 5, 6];
    let (monitor, next) = (
        rig.capture(1, |f| probe_seen(f).is_some()),
        rig.capture(2, |f| probe_seen(f).is_some()),
    );
    let h1 = rig.host(1);
    rig.ns.enter(move || {
        let port = RawPort::open(&h1);
        for r in requests {
            port.send(&probe_frame(r, &[2, 7]));
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let seen = |frames: Vec<Vec<u8>>| -> Vec<ProbeSeen> {
        frames.iter().filter_map(|f| probe_seen(f)).collect()
    };
    let (back, forwarded) = (seen(monitor.join().unwrap()), seen(next.join().unwrap()));
    // What comes back out of port 1: the feedbacks (DSCP 0x19).
    let feedback: Vec<u16> = back
        .iter()
        .filter(|p| p.0 == 0x19)
        .map(|p| {
            assert!(p.2.is_empty() && p.3.is_empty() && p.4.is_empty(), "{p:?}");
            p.1
        })
        .collect();
    eprintln!("BMv2: feedback for {feedback:?}; forwarded {forwarded:?}");
    assert_eq!(forwarded.len(), 3, "{forwarded:?}");
    for (p, r) in forwarded.iter().zip(requests) {
        assert_eq!((p.0, p.1), (0x17, r), "{p:?}");
        assert_eq!(p.2, [7], "the switch's SR header popped: {p:?}");
        assert_eq!(p.3.len(), 2, "{p:?}");
        assert_eq!(p.3[1], (9, 3, 1), "the upstream DLV kept under ours: {p:?}");
        assert_eq!(p.4[1], 77, "{p:?}");
    }

    // The emulator's data plane, the same requests into a switch with SQR on.
    let mut fabric = Fabric::new(
        FabricConfig {
            recovery: true,
            ..FabricConfig::default()
        },
        vec![vec![1], vec![0]],
        &[0.0, 0.0],
        1,
        0,
    );
    let (mut emulated_feedback, mut emulated) = (Vec::new(), Vec::new());
    for r in requests {
        fabric.send_probe(Probe {
            request: r,
            route: vec![0],
            pos: 0,
            dlv: Vec::new(),
            mea: Vec::new(),
        });
        let until = fabric.now() + 100_000_000;
        while let Some(d) = fabric.next(until) {
            match d {
                Delivery::Feedback { request, .. } => emulated_feedback.push(request),
                Delivery::Probe { probe, .. } => emulated.push(probe),
                Delivery::Snmp { .. } => {}
            }
        }
    }
    assert_eq!(
        feedback, emulated_feedback,
        "feedback: BMv2 vs the emulator"
    );
    assert_eq!(feedback, [5, 6]);
    // Both new requests were protected: their clones wait in the ring for the next switch's
    // feedback (the loop's repeat was not).
    assert_eq!(rig.sw.register("KplaneIngress.probe_ring_used", 0), 2);
    for (bmv2, emu) in forwarded.iter().zip(&emulated) {
        let ours = bmv2.3[0];
        assert_eq!(ours.0, 1, "the switch's id: {bmv2:?}");
        assert_eq!(
            (ours.1, ours.2),
            (emu.dlv[0].queue_depth, emu.dlv[0].measurements),
            "DLV: BMv2 {bmv2:?} vs the emulator {emu:?}"
        );
        assert_eq!(
            u64::from(bmv2.4[0]),
            emu.mea[0],
            "the rule-hit counter: BMv2 {bmv2:?} vs the emulator {emu:?}"
        );
    }
}

/// GPINT end to end on real switches: `kplane probe` (the monitoring module) over three BMv2
/// switches in a chain, each attached to the monitor by its port 1, with the plan from a
/// `probe-plan` intent through the intent API (the P4Runtime drivers' links), and every
/// returned probe reported to `kplane collector`. While the chain is up each session's probe
/// crosses all three switches, reads each one's port counters over its MEA range (a pass per
/// port, recirculating), and the collector decodes it into hops in path order. Then the
/// path's second link fails: the middle switch's SQR ring holds its clone of the probe, no
/// feedback comes, and after the hold time the clone reaches the monitor as the failure
/// notification carrying what was measured so far — the emulator's probe data plane sends the
/// same notice for the same loss — and the monitor (Algorithms 1–2) marks the link
/// unavailable and recovers the path from its last switch: the session completes.
#[test]
fn kplane_probe_over_bmv2_recovers_a_failed_link_through_sqr_and_feeds_the_collector() {
    use bmv2::Veth;
    use kplane_emulator::probe::{DSCP_FAILURE, Delivery, Fabric, FabricConfig, Probe};
    if !bmv2::available() {
        return;
    }
    let tag = format!("k{}q", std::process::id());
    // Switch n's port 1 ↔ the monitor's m{n}; switch 1 port 2 ↔ switch 2 port 2; switch 2
    // port 3 ↔ switch 3 port 2.
    let monitor: Vec<Veth> = (1..=3)
        .map(|n| Veth::pair(&format!("{tag}s{n}"), &format!("{tag}m{n}")))
        .collect();
    let l12 = Veth::pair(&format!("{tag}a12"), &format!("{tag}b12"));
    let l23 = Veth::pair(&format!("{tag}a23"), &format!("{tag}b23"));
    let switches = [
        Bmv2::start(1, &[(1, &monitor[0].a), (2, &l12.a)]),
        Bmv2::start(2, &[(1, &monitor[1].a), (2, &l12.b), (3, &l23.a)]),
        Bmv2::start(3, &[(1, &monitor[2].a), (2, &l23.b)]),
    ];
    let links = [
        "[{ port = 2, peer = 2, peer-port = 2 }]",
        "[{ port = 2, peer = 1, peer-port = 2 }, { port = 3, peer = 3, peer-port = 2 }]",
        "[{ port = 2, peer = 2, peer-port = 3 }]",
    ];
    let drivers: String = switches
        .iter()
        .zip(links)
        .map(|(sw, links)| {
            format!(
                "[[intent-api.intents.drivers]]\nkind = \"p4runtime\"\nswitch = {id}\n\
                 addr = \"{grpc}\"\ndevice-id = {id}\nlinks = {links}\n\
                 probe-recovery = {{ monitor-port = 1, hold = \"400ms\" }}\n",
                id = sw.device_id,
                grpc = sw.grpc,
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("kplane-bmv2-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_api, api) = intent_api(&dir, &drivers);
    let collector_addr = format!("127.0.0.1:{}", free_port());
    let (_collector, records) = printing_collector(
        &mut Command::new(env!("CARGO_BIN_EXE_kplane")),
        &collector_addr,
    );

    // A monitor intent on every switch has the drivers push the pipeline; then the plan.
    apply(
        api,
        &dir,
        "watch.yaml",
        "kind: monitor\nmatch: {dst: 10.0.8.8}\nswitches: [1, 2, 3]\n",
    );
    let plan_id = apply(
        api,
        &dir,
        "plan.yaml",
        "kind: probe-plan\nplanner: gpint-3\nmeasure: port-packets\n",
    );
    // Each switch was provisioned over P4Runtime: its id, SQR on with a 400 ms hold, the
    // monitor on port 1, feedback sessions back out of each port, the ring's clone session.
    for sw in &switches {
        let last = if sw.device_id == 2 { 1003 } else { 1002 };
        wait_for_cli(
            sw,
            &format!("mirroring_get {last}\n"),
            "port",
            Duration::from_secs(15),
        );
    }
    let plans = http(api, "GET", "/v1/probe-plans", Some(TOKEN), None)
        .unwrap()
        .json();
    let route: Vec<u32> = plans["plans"][0]["probes"][0]["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(
        plans["plans"][0]["probes"].as_array().unwrap().len(),
        1,
        "{plans}"
    );
    assert!(route == [1, 2, 3] || route == [3, 2, 1], "{plans}");

    let mut prober = ChildGuard::from(
        kplane()
            .args(["probe", "--api", &format!("http://{api}"), "--token", TOKEN])
            .args(["--collector", &collector_addr, "--period", "500ms"])
            .args(["--feedback-timeout", "1500ms"])
            .args(
                monitor
                    .iter()
                    .enumerate()
                    .flat_map(|(i, m)| ["--link".to_string(), format!("{}={}:1", i + 1, m.b)]),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let (tx, sessions) = mpsc::channel::<serde_json::Value>();
    let out = prober.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            eprintln!("kplane probe: {line}");
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    let next_session = || {
        sessions
            .recv_timeout(Duration::from_secs(20))
            .expect("kplane probe printed no session")
    };
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v["hops"]
            .as_array()
            .map(|h| {
                h.iter()
                    .filter_map(|h| h["node_id"].as_u64())
                    .map(|n| n as u32)
                    .collect()
            })
            .unwrap_or_default()
    };
    let probe_record = |want: &[u32]| {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let line = records
                .recv_timeout(Duration::from_millis(200))
                .unwrap_or_default();
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && v["embedded"] == "gpint-probe"
                && ids(&v) == want
            {
                return v;
            }
            assert!(
                Instant::now() < end,
                "the collector never decoded a probe over {want:?}"
            );
        }
    };

    // The chain up: every session complete with no recovery; the probe's hops in path order;
    // each switch's port counters (switch 2: ports 2 and 3, two passes) growing.
    let mut counters = Vec::new();
    let mut feedback = 0;
    for _ in 0..2 {
        let s = next_session();
        counters.push(s["measurements"]["2"].clone());
        assert_eq!(s["intent"], plan_id.as_str(), "{s}");
        assert_eq!(s["complete"], true, "{s}");
        assert_eq!(s["recovery_probes"], 0, "{s}");
        feedback += s["network"]["feedback"].as_u64().unwrap();
        assert_eq!(s["network"]["failure_notices"], 0, "{s}");
        assert_eq!(s["network"]["reports_sent"], 1, "{s}");
    }
    // The first switch's feedback for each probe. Each monitor link has its own reader, so on
    // a loaded machine a feedback frame can be read after the probe that completed its session
    // (on another link), and counted in the next session's line.
    assert!(
        (1..=2).contains(&feedback),
        "the first switch's feedback over two sessions: {feedback}"
    );
    for c in &counters {
        assert_eq!(c.as_array().map(Vec::len), Some(2), "{counters:?}");
    }
    for port in 0..2 {
        assert!(
            counters[1][port].as_u64() > counters[0][port].as_u64(),
            "switch 2's port counters grow: {counters:?}"
        );
    }
    let whole = probe_record(&route);
    assert_eq!(whole["hops"][1]["node_id"], route[1], "{whole}");

    // The path's second link fails.
    let (b, c) = (route[1], route[2]);
    if c == 3 {
        l23.lose(&l23.a)
    } else {
        l12.lose(&l12.b)
    };
    let end = Instant::now() + Duration::from_secs(30);
    let recovered = loop {
        let s = next_session();
        if s["network"]["failure_notices"] == 1 {
            break s;
        }
        assert!(Instant::now() < end, "no failure notification: {s}");
    };
    assert_eq!(recovered["complete"], true, "{recovered}");
    assert_eq!(recovered["recovered_paths"], 1, "{recovered}");
    assert!(
        recovered["recovery_probes"].as_u64().unwrap() >= 1,
        "{recovered}"
    );
    assert_eq!(
        recovered["unavailable"],
        serde_json::json!([{ "link": [b, c] }]),
        "{recovered}"
    );
    // Fed back: the API took the finding (the chain has no hosts, so there is nothing to
    // reroute), names the link unavailable and plans without it.
    assert!(
        recovered["feedback"]["recommended"].is_array(),
        "{recovered}"
    );
    let plans = http(api, "GET", "/v1/probe-plans", Some(TOKEN), None)
        .unwrap()
        .json();
    let plan = &plans["plans"][0];
    assert_eq!(plan["uncovered"], serde_json::json!([c]), "{plan}");
    assert!(
        plan["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["status"] == "unavailable"
                && (l["link"] == serde_json::json!([b, c])
                    || l["link"] == serde_json::json!([c, b]))),
        "{plan}"
    );
    // The next session, planned without it, does not take it for repaired.
    let next = next_session();
    assert_eq!(next["unavailable"], serde_json::json!([]), "{next}");
    let plans = http(api, "GET", "/v1/probe-plans", Some(TOKEN), None)
        .unwrap()
        .json();
    assert_eq!(
        plans["plans"][0]["uncovered"],
        serde_json::json!([c]),
        "{plans}"
    );
    // The notice carries the first two switches' measurements, the recovery probe the last's.
    probe_record(&route[..2]);
    probe_record(&route[2..]);
    // With the monitor stopped and the hold time past, every ring is empty again: each held
    // clone gave its slot back, released by feedback or sent as a notice.
    drop(prober);
    let held = || -> Vec<u64> {
        switches
            .iter()
            .map(|sw| sw.register("KplaneIngress.probe_ring_used", 0))
            .collect()
    };
    let end = Instant::now() + Duration::from_secs(5);
    while held() != [0, 0, 0] {
        assert!(Instant::now() < end, "slots still held: {:?}", held());
        std::thread::sleep(Duration::from_millis(100));
    }

    // The emulator's data plane, the same path and loss: the same notice.
    let mut fabric = Fabric::new(
        FabricConfig {
            recovery: true,
            hold_ns: 400_000_000,
            ..FabricConfig::default()
        },
        vec![vec![1], vec![0, 2], vec![1]],
        &[0.0; 3],
        1,
        0,
    );
    fabric.script_loss(1, 2, 1);
    fabric.send_probe(Probe {
        request: 1,
        route: vec![0, 1, 2],
        pos: 0,
        dlv: Vec::new(),
        mea: Vec::new(),
    });
    let mut notices = Vec::new();
    while let Some(d) = fabric.next(1_000_000_000) {
        if let Delivery::Probe { dscp, probe } = d {
            assert_eq!(dscp, DSCP_FAILURE);
            notices.push(probe);
        }
    }
    assert_eq!(notices.len(), 1);
    let emulated: Vec<u32> = notices[0].dlv.iter().map(|d| route[d.switch]).collect();
    assert_eq!(
        emulated,
        route[..2],
        "the emulator's notice measured the same switches"
    );
    assert_eq!(notices[0].pos, 1, "sent by the path's second switch");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the KDN paper's §VI-B bandwidth example is made of: UDP packets with 80 bytes of data.
const KDN_DATA: usize = 80;
const KDN_MARK: &[u8] = b"kdn-bandwidth";

/// A UDP packet to 10.0.2.1:5000 with [`KDN_DATA`] bytes of data, from `src`, with `upstream`
/// hops of INT-MD v2 (node id, hop latency, queue occupancy) already in it, as a switch
/// before this one would have sent it.
fn kdn_frame(src: &str, upstream: &[u32]) -> Vec<u8> {
    use kplane_wire::build::{Encap, FlowSpec, IntSpec, PacketSpec, sample_hop};
    use kplane_wire::int::IntVersion;
    let flow = FlowSpec::udp(
        src.parse().unwrap(),
        "10.0.2.1".parse().unwrap(),
        1000,
        5000,
    );
    let mut spec = PacketSpec::new(flow);
    spec.payload = KDN_MARK.to_vec();
    spec.payload.resize(KDN_DATA, 0);
    if !upstream.is_empty() {
        let hops = upstream.iter().map(|&n| sample_hop(n, 1_000, 3)).collect();
        spec = spec.with_int(
            IntSpec::new(IntVersion::V2, KDN_BITMAP, hops),
            Encap::Dscp { dscp: 0x17 },
        );
    }
    spec.build()
}

/// The paper's three monitoring fields: node id, hop latency, queue occupancy.
const KDN_BITMAP: u16 = 0xB000;

/// The KDN paper's §VI-B bandwidth overhead, measured on the wire: packets leave a BMv2 switch
/// running `p4/kplane_int.p4` on a switch-to-switch port (INT kept) after it was the INT
/// source (one hop) or a transit behind two upstream hops (three), and their growth is set
/// against the paper's B = P × (12 + N × F × 4) × 8.
#[test]
fn int_bandwidth_on_bmv2_is_the_kdn_formula_with_a_v2_header() {
    if !bmv2::available() {
        return;
    }
    // Host on port 1; port 2 from an upstream switch, port 3 towards the next one; reports
    // on port 4.
    let rig = Rig::start("w", 4, &[("10.0.1.1/32", 1)], &[("10.0.2.1/32", 3)], "");
    rig.apply(
        "monitor",
        &format!(
            "kind: monitor\nmatch: {{dst: 10.0.2.1, protocol: udp}}\ninstructions: {KDN_BITMAP:#06x}\n"
        ),
    );
    wait_for_forwarding(&rig.sw, Duration::from_secs(10));
    let keep: fn(&[u8]) -> bool = |f| f.windows(KDN_MARK.len()).any(|w| w == KDN_MARK);
    // Sends `frame` into switch port `port` and returns the lengths of the frames that left
    // port 3.
    let through = |port: u32, frame: Vec<u8>| -> Vec<usize> {
        let out = rig.capture(3, keep);
        rig.send(port, vec![frame; 3], Duration::from_millis(50));
        out.join().unwrap().iter().map(Vec::len).collect()
    };
    let plain = kdn_frame("10.0.1.1", &[]).len();
    assert_eq!(
        plain,
        14 + 20 + 8 + KDN_DATA,
        "the paper's 126 bytes less the FCS"
    );
    let fields = KDN_BITMAP.count_ones() as usize;
    // The INT-MD v2 shim (4 bytes) and MD header (12): the paper's draft had 12 in all.
    let header = 4 + 12;

    // INT source: the host's packet leaves with its first hop.
    let one = through(1, kdn_frame("10.0.1.1", &[]));
    assert!(
        !one.is_empty(),
        "the monitored packet left towards the next switch"
    );
    for len in &one {
        assert_eq!(*len - plain, header + fields * 4, "N = 1: {one:?}");
    }
    // Transit behind two switches: the third hop's metadata added.
    let upstream = kdn_frame("10.0.9.9", &[7, 8]);
    assert_eq!(upstream.len() - plain, header + 2 * fields * 4);
    let three = through(2, upstream);
    assert!(
        !three.is_empty(),
        "the transit packet left towards the next switch"
    );
    for len in &three {
        assert_eq!(*len - plain, header + 3 * fields * 4, "N = 3: {three:?}");
    }
    // The paper's worked example on what was measured: two flows share a link equally, one is
    // monitored, N = 3: the data they carry is what the link's bytes leave of it.
    let fcs = 4;
    let (bare, monitored) = (plain + fcs, three[0] + fcs);
    let reduction = 1.0 - (2 * bare) as f64 / (bare + monitored) as f64;
    let paper: f64 = 1.0 - (2.0 * 126.0) / (126.0 + 126.0 + 12.0 + 3.0 * 3.0 * 4.0);
    assert!((paper - 0.16).abs() < 0.005, "the paper's example: {paper}");
    assert!(
        (reduction - 0.171).abs() < 0.001,
        "measured: {reduction} (the paper's 16 % with a 4-byte-longer header)"
    );
}
