//! `kplane lab` end to end on real switches: a reduced lab (leaf-spine 1×2, three BMv2
//! switches, four hosts in namespaces) is built, provisioned over P4Runtime by the API's
//! drivers (no intent, no Thrift), its hosts' traffic crosses the switches, and the sinks'
//! reports reach the collector and the store (flows through `/v1/query`). A scripted flood's
//! packets are counted at the victim's interface until a `block` intent, written over
//! P4Runtime, stops them there while other hosts' traffic still arrives. The lab is then
//! killed without warning, and `kplane lab down` removes every switch process, namespace and
//! veth it left. Needs root and BMv2 (skipped otherwise, failed with `KPLANE_REQUIRE_P4=1`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kplane_testkit::{ChildGuard, bmv2, free_port, http};
use serde_json::{Value, json};

const NAME: &str = "kplt";
const VICTIM: &str = "10.0.2.1";
/// The flood's one source: the first host other than the victim.
const ATTACKER: &str = "10.0.1.1";

/// What the victim received from each source so far (`received.json`).
fn at_victim(dir: &std::path::Path) -> serde_json::Map<String, Value> {
    std::fs::read_to_string(dir.join("lab/received.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v[VICTIM].as_object().cloned())
        .unwrap_or_default()
}

fn count(m: &serde_json::Map<String, Value>, src: &str) -> u64 {
    m.get(src).and_then(Value::as_u64).unwrap_or(0)
}

fn others(m: &serde_json::Map<String, Value>) -> u64 {
    m.iter()
        .filter(|(s, _)| *s != ATTACKER)
        .filter_map(|(_, n)| n.as_u64())
        .sum()
}

fn leftovers() -> (usize, usize) {
    let out = |args: &[&str]| {
        String::from_utf8_lossy(&Command::new("ip").args(args).output().unwrap().stdout).to_string()
    };
    let namespaces = out(&["netns", "list"])
        .lines()
        .filter(|l| l.starts_with(&format!("{NAME}-")))
        .count();
    let links = out(&["-o", "link", "show"])
        .lines()
        .filter(|l| l.contains(&format!(": {NAME}")))
        .count();
    (namespaces, links)
}

/// A `kplane lab up` child, come up and provisioned; `kplane lab down` when dropped, whether
/// the test passed or not.
struct Lab {
    name: &'static str,
    child: ChildGuard,
    api: SocketAddr,
    token: String,
    /// Its `--data-dir`.
    dir: std::path::PathBuf,
}

impl Lab {
    /// `kplane lab up --name NAME` with `args` for 5 minutes, once it printed its console's
    /// token and said its switches are provisioned.
    fn up(name: &'static str, args: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("kplane-lab-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut child = ChildGuard::from(
            Command::new(env!("CARGO_BIN_EXE_kplane"))
                .args(["lab", "up", "--name", name, "--duration", "5m"])
                .args(["--api", &api.to_string()])
                .arg("--data-dir")
                .arg(&dir)
                .args(args)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let (tx, lines) = mpsc::channel::<String>();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut token = None;
        loop {
            let l = lines
                .recv_timeout(Duration::from_secs(90))
                .expect("kplane lab up printed its console and came up");
            eprintln!("{l}");
            if let Some(t) = l.split("#token=").nth(1) {
                token = Some(t.trim().to_string());
            }
            if l.contains("provisioned") {
                break;
            }
        }
        Self {
            name,
            child,
            api,
            token: token.expect("a console token"),
            dir,
        }
    }

    /// An API call with the console's token; its JSON answer (a 2xx).
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string());
        let r = http(self.api, method, path, Some(&self.token), body.as_deref()).unwrap();
        assert!(r.status < 300, "{method} {path}: {} {}", r.status, r.body);
        r.json()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_kplane"))
            .args(["lab", "down", "--name", self.name])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits up to `within` for `ok`, failing with `what`.
fn wait(what: &str, within: Duration, ok: &dyn Fn() -> bool) {
    let end = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_lab_of_bmv2_switches_carries_traffic_reports_it_and_blocks_a_flood() {
    if !bmv2::available() {
        return;
    }
    let mut lab = Lab::up(
        NAME,
        &[
            "--topology",
            "leaf-spine:1,2,2",
            "--flows",
            "4",
            "--attack",
            &format!("ddos:start=3s,duration=5m,victim={VICTIM},sources=1,pps=40"),
        ],
    );
    let dir = lab.dir.clone();
    let call = |method: &str, path: &str, body: Option<Value>| lab.call(method, path, body);
    let switches = call("GET", "/v1/intents/switches", None);
    assert_eq!(
        switches["switches"].as_array().map(Vec::len),
        Some(3),
        "{switches}"
    );

    // The flood arrives at the victim's interface, through the leaf, the spine and the leaf.
    wait(
        "the flood reaches the victim",
        Duration::from_secs(30),
        &|| count(&at_victim(&dir), ATTACKER) > 40,
    );
    // The sinks' reports became flows in the store, the flood's among them.
    wait(
        "the flood's reports are flows in the store",
        Duration::from_secs(60),
        &|| {
            let v = call(
                "POST",
                "/v1/query",
                Some(json!({"sql": format!(
                    "SELECT count(*) AS n FROM flows WHERE ip_text(src_ip) = '{ATTACKER}' \
                     AND ip_text(dst_ip) = '{VICTIM}'"
                )})),
            );
            v["rows"][0]["n"].as_u64() > Some(0)
        },
    );

    // Block the flood's source over P4Runtime (verified against fresh telemetry): its
    // packets stop at the victim, other hosts' do not.
    let intent = call(
        "POST",
        "/v1/intents",
        Some(json!({
            "kind": "block",
            "match": {"src": ATTACKER, "dst": VICTIM},
            "reason": "lab e2e"
        })),
    );
    let id = intent["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{intent}"))
        .to_string();
    wait("the block is active", Duration::from_secs(30), &|| {
        call("GET", &format!("/v1/intents/{id}"), None)["state"] == "active"
    });
    std::thread::sleep(Duration::from_secs(1));
    let before = at_victim(&dir);
    std::thread::sleep(Duration::from_secs(6));
    let after = at_victim(&dir);
    eprintln!("at the victim: before {before:?}; after {after:?}");
    assert!(
        count(&after, ATTACKER) <= count(&before, ATTACKER) + 2,
        "the flood (40 packets/s) stopped at the victim: {before:?} → {after:?}"
    );
    assert!(
        others(&after) > others(&before),
        "other hosts still reach the victim: {before:?} → {after:?}"
    );

    // Killed without warning, the lab leaves its fabric behind; `kplane lab down` removes it.
    let _ = lab.child.kill();
    let _ = lab.child.wait();
    let (namespaces, _) = leftovers();
    assert!(namespaces > 0, "a killed lab leaves its namespaces");
    let down = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["lab", "down", "--name", NAME])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&down.stdout);
    assert!(down.status.success(), "{text}");
    assert!(text.contains("removed 3 switch processes"), "{text}");
    assert_eq!(leftovers(), (0, 0), "nothing of the lab is left: {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// GPINT's loop on real switches with hosts: a lab with two spines (leaf-spine 2×2, two hosts
/// a leaf) gets the probe monitor's finding that the link leaf 1 – spine 4 is unavailable
/// (what `kplane probe` posts; the probes themselves are tested on BMv2 in `bmv2.rs`). The
/// `reroute` recommendations for the hosts whose shortest paths cross it are written over
/// P4Runtime and verified against the real hosts' telemetry; the link is then cut for real
/// and every host behind leaf 2 still receives leaf 1's traffic. Found available again, the
/// reroutes are withdrawn.
#[test]
fn a_link_the_probes_found_unavailable_is_routed_around_on_real_switches() {
    const NAME: &str = "kplr";
    if !bmv2::available() {
        return;
    }
    let lab = Lab::up(NAME, &["--topology", "leaf-spine:2,2,2", "--flows", "10"]);
    let dir = lab.dir.clone();
    let call = |method: &str, path: &str, body: Option<Value>| lab.call(method, path, body);
    call(
        "PUT",
        "/v1/intents/policy",
        Some(json!({"auto-apply": ["monitor", "tune", "reroute"]})),
    );
    let plan = call(
        "POST",
        "/v1/intents",
        Some(json!({"kind": "probe-plan", "planner": "gpint-3"})),
    );
    let plan = plan["id"].as_str().unwrap().to_string();
    let status = format!("/v1/probe-plans/{plan}/status");
    let found = call(
        "POST",
        &status,
        Some(json!({"session": 1, "unavailable": [{"link": [1, 4]}]})),
    );
    let ids: Vec<String> = found["recommended"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["id"]
                .as_str()
                .unwrap_or_else(|| panic!("refused: {found}"))
                .to_string()
        })
        .collect();
    // Every host's shortest paths from the other leaf may cross the link: four reroutes.
    assert_eq!(ids.len(), 4, "{found}");
    for id in &ids {
        wait(
            &format!("reroute {id} verified on the switches"),
            Duration::from_secs(60),
            &|| call("GET", &format!("/v1/intents/{id}"), None)["state"] == "active",
        );
    }

    // The link cut for real: the spine's end of its veth down leaves leaf 1's end without
    // carrier, so nothing crosses it. (Not leaf 1's end: a BMv2 switch with one of its own
    // interfaces set down stops forwarding on every port.)
    let spine_end = format!("{NAME}4p1");
    let s = Command::new("ip")
        .args(["link", "set", &spine_end, "down"])
        .status()
        .unwrap();
    assert!(s.success(), "ip link set {spine_end} down");
    // Every host behind leaf 2 still hears from leaf 1's hosts.
    let from_leaf1 = |dst: &str| -> u64 {
        let all: Value = std::fs::read_to_string(dir.join("lab/received.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        all[dst]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(s, _)| s.starts_with("10.0.1."))
                    .filter_map(|(_, n)| n.as_u64())
                    .sum()
            })
            .unwrap_or(0)
    };
    let before: Vec<u64> = ["10.0.2.1", "10.0.2.2"].map(from_leaf1).to_vec();
    wait(
        "both hosts behind leaf 2 receive leaf 1's traffic with the link cut",
        Duration::from_secs(30),
        &|| {
            ["10.0.2.1", "10.0.2.2"]
                .iter()
                .zip(&before)
                .all(|(d, b)| from_leaf1(d) > b + 5)
        },
    );

    // Found available again: the reroutes are withdrawn.
    let back = call(
        "POST",
        &status,
        Some(json!({"session": 2, "available": [{"link": [4, 1]}]})),
    );
    let mut withdrawn: Vec<String> = back["withdrawn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    withdrawn.sort();
    let mut ids = ids;
    ids.sort();
    assert_eq!(withdrawn, ids, "{back}");
}

/// Two labs side by side on one host each hear their own switches' reports only: lab A
/// (leaf-spine 1×2, hosts 10.0.1.x and 10.0.2.x) and lab B (leaf-spine 1×4, one host a leaf)
/// both have a switch 1 and 2 whose sinks report; B's flows from 10.0.3.1 and 10.0.4.1 to
/// 10.0.1.1 and 10.0.2.1 leave through those switches, and must not reach A's store.
#[test]
fn two_labs_side_by_side_each_hear_only_their_own_switches() {
    if !bmv2::available() {
        return;
    }
    let a = Lab::up("kpsa", &["--topology", "leaf-spine:1,2,2", "--flows", "10"]);
    let b = Lab::up("kpsb", &["--topology", "leaf-spine:1,4,1", "--flows", "10"]);
    let flows_from = |lab: &Lab, sources: &str| -> u64 {
        lab.call(
            "POST",
            "/v1/query",
            Some(json!({"sql": format!(
                "SELECT count(*) AS n FROM flows WHERE ip_text(src_ip) IN ({sources})"
            )})),
        )["rows"][0]["n"]
            .as_u64()
            .unwrap_or(0)
    };
    let (bs_own, as_own) = ("'10.0.3.1', '10.0.4.1'", "'10.0.1.2', '10.0.2.2'");
    wait(
        "lab B's store holds its leaves 3 and 4's flows, lab A's its own",
        Duration::from_secs(60),
        &|| flows_from(&b, bs_own) >= 5 && flows_from(&a, as_own) >= 5,
    );
    // Let both carry on a while: a share of B's reports would have kept reaching A.
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(
        flows_from(&a, bs_own),
        0,
        "lab A's store holds flows of lab B's hosts"
    );
    assert_eq!(
        flows_from(&b, as_own),
        0,
        "lab B's store holds flows of lab A's hosts"
    );
}
