//! The `kplane` binary end to end: decode real capture files, run a service over real
//! sockets and stop it with SIGTERM, reject bad configuration.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kplane_pcap::{CaptureFormat, CaptureWriter, LINKTYPE_ETHERNET};
use kplane_testkit::{ChildGuard, free_port, http_get, sigterm, wait_ready};

fn kplane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kplane"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kplane-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("kplane runs")
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

#[test]
fn decode_reads_every_sample_format_from_pcapng_and_pcap() {
    for (name, format) in [("s.pcapng", "pcapng"), ("s.pcap", "pcap")] {
        let file = tmp(name);
        let out = run(kplane()
            .args(["sample-capture", "--format", format])
            .arg(&file));
        assert!(out.status.success(), "{out:?}");
        let out = run(kplane().args(["decode", "--kdn-port", "5001"]).arg(&file));
        assert!(out.status.success(), "{out:?}");
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 21, "one object per telemetry frame");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("22 packets: 21 decoded") && stderr.contains("1 without telemetry"),
            "{stderr}"
        );
        // The INT-label authors' layout (EtherType 0x0700/0x0701): two items in path order,
        // BMv2's µs as ns.
        let authors = lines
            .iter()
            .find(|l| l["headers"]["packet"]["telemetry"]["int_label"]["layout"] == "authors")
            .expect("the authors' INT-label frame");
        let hops = authors["records"][0]["hops"].as_array().unwrap();
        assert_eq!(hops.len(), 2, "{authors}");
        assert_eq!(hops[0]["node_id"], 1, "{authors}");
        assert_eq!(hops[1]["node_id"], 2, "{authors}");
        assert_eq!(hops[1]["hop_latency_ns"], 40_000, "{authors}");
        assert_eq!(hops[1]["queue_occupancy"], 7, "{authors}");
        assert_eq!(
            hops[1]["ingress_timestamp_ns"], 1_000_250_000u64,
            "{authors}"
        );
        // The 5-hop TR v2.0 report: sink 6 reports a path 1..6, flow restored.
        let tr = lines
            .iter()
            .find(|l| {
                l["format"] == "telemetry-report-v2.0"
                    && l["records"][0]["hops"].as_array().map(Vec::len) == Some(6)
            })
            .expect("the 5-hop report");
        let path: Vec<_> = tr["records"][0]["hops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["node_id"].as_u64().unwrap())
            .collect();
        assert_eq!(path, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(tr["records"][0]["flow"]["dst_port"], 9000);
        assert_eq!(tr["records"][0]["exporter"], "10.255.0.1:50000");
        assert_eq!(tr["headers"]["report"]["report"]["group"]["node_id"], 6);
        // Every line names its format and frame number.
        assert!(
            lines
                .iter()
                .all(|l| l["format"].is_string() && l["frame"].is_u64())
        );
    }
}

#[test]
fn shipped_sample_capture_is_current() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/int-formats.pcapng");
    let fresh = tmp("fresh.pcapng");
    assert!(
        run(kplane().arg("sample-capture").arg(&fresh))
            .status
            .success()
    );
    assert_eq!(
        std::fs::read(&shipped).expect("samples/int-formats.pcapng is shipped"),
        std::fs::read(&fresh).unwrap(),
        "regenerate with: cargo run -- sample-capture samples/int-formats.pcapng"
    );
}

#[test]
fn malformed_frames_are_counted_by_reason_and_strict_fails() {
    let file = tmp("bad.pcap");
    let frames = kplane_wire::samples::all();
    let good = &frames[3].1; // tr-v2.0-int-md-5hop
    let mut w = CaptureWriter::create(&file, CaptureFormat::Pcap, LINKTYPE_ETHERNET).unwrap();
    w.write(1, good).unwrap();
    // Cut inside the report, keeping the UDP length as sent: a truncated datagram.
    w.write(2, &good[..good.len() - 100]).unwrap();
    w.write(3, &good[..20]).unwrap();
    w.finish().unwrap();
    let out = run(kplane().arg("decode").arg(&file));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json_lines(&out).len(), 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("2 malformed (truncated 2)"), "{stderr}");
    assert!(
        stderr.contains("frame 2:") && stderr.contains("at byte"),
        "{stderr}"
    );
    let strict = run(kplane().args(["decode", "--strict"]).arg(&file));
    assert_eq!(strict.status.code(), Some(1));
}

#[test]
fn unreadable_files_exit_2_with_a_clear_error() {
    let out = run(kplane().args(["decode", "/nonexistent/capture.pcap"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open /nonexistent/capture.pcap"));
    let not_pcap = tmp("text.pcap");
    std::fs::write(&not_pcap, "not a capture").unwrap();
    let out = run(kplane().arg("decode").arg(&not_pcap));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a pcap or pcapng file"));
}

#[test]
fn invalid_configuration_lists_every_problem_and_exits_78() {
    let cfg = tmp("bad.toml");
    std::fs::write(&cfg, "[log]\nlevel = \"[[[\"\n").unwrap();
    let out = run(kplane().arg("--config").arg(&cfg).arg("config"));
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("log.level"), "{stderr}");
    std::fs::write(&cfg, "[collector]\nadmim = \"127.0.0.1:1\"\n").unwrap();
    let out = run(kplane().arg("--config").arg(&cfg).arg("collector"));
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("admim"));
    // Retention: a table the store does not have, and one kept too briefly.
    std::fs::write(
        &cfg,
        "[stream-processor.retention]\nflowz = \"7d\"\nalerts = \"10m\"\nflows = \"7d\"\nflows_1h = \"365d\"\n",
    )
    .unwrap();
    let out = run(kplane().arg("--config").arg(&cfg).arg("config"));
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"flowz\", which is no table the processor writes"),
        "{stderr}"
    );
    assert!(stderr.contains("\"alerts\" must be >= 2h"), "{stderr}");
    assert!(!stderr.contains("\"flows\""), "{stderr}");
    assert!(
        !stderr.contains("flows_1h"),
        "a rollup table is a table: {stderr}"
    );
    // Environment overrides the file.
    let out = run(kplane().env("KPLANE__LOG__FORMAT", "json").arg("config"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("format = \"json\""));
}

#[test]
fn every_service_serves_its_admin_router_and_stops_on_sigterm() {
    for service in ["collector", "stream-processor", "knowledge", "intent-api"] {
        let port = free_port();
        let mut args = vec![
            service.to_string(),
            "--admin".into(),
            format!("127.0.0.1:{port}"),
        ];
        if service == "collector" {
            args.extend(["--listen".into(), "127.0.0.1:0".into()]);
        }
        let data =
            std::env::temp_dir().join(format!("kplane-cli-{service}-{}", std::process::id()));
        let mut child = ChildGuard::from(
            kplane()
                .args(&args)
                .env("RUST_LOG", "info")
                .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", &data)
                .env("KPLANE__INTENT_API__STORE_DIR", &data)
                .env("KPLANE__INTENT_API__LISTEN", "127.0.0.1:0")
                .env("KPLANE__HTTP__NO_AUTH", "true")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        wait_ready(port, Duration::from_secs(20));
        assert!(
            http_get(port, "/healthz")
                .unwrap()
                .starts_with("HTTP/1.1 200")
        );
        let metrics = http_get(port, "/metrics").unwrap();
        assert!(
            metrics.contains(&format!(
                "kplane_build_info{{version=\"{}\",service=\"{service}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{metrics}"
        );
        sigterm(&child);
        let status = child.wait().unwrap();
        let _ = std::fs::remove_dir_all(&data);
        assert!(status.success(), "{service} exited with {status}");
        let mut log = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut log)
            .unwrap();
        assert!(log.contains("stopped"), "{log}");
    }
}

/// A `kplane collector` process listening on a free UDP port: (process, UDP port, admin port).
fn collector() -> (ChildGuard, u16, u16) {
    let (udp, admin) = (free_port(), free_port());
    let child = ChildGuard::from(
        kplane()
            .args([
                "collector",
                "--listen",
                &format!("127.0.0.1:{udp}"),
                "--admin",
                &format!("127.0.0.1:{admin}"),
            ])
            .env("KPLANE__COLLECTOR__QUEUE_CAPACITY", "65536")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(admin, Duration::from_secs(20));
    (child, udp, admin)
}

/// The collector's metrics once it has received `sent` datagrams (or after 5 s).
fn metrics_once_received(admin: u16, sent: f64) -> String {
    let mut m = String::new();
    for _ in 0..100 {
        m = http_get(admin, "/metrics").unwrap_or_default();
        if kplane_testkit::metric_sum(&m, "kplane_collector_datagrams_received_total", &[]) >= sent
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    m
}

#[test]
fn the_emulator_feeds_a_collector_over_udp() {
    use kplane_testkit::metric_sum;
    let (mut collector, udp, admin) = collector();
    let truth = tmp("truth.json");
    let out = run(kplane()
        .args([
            "emulate",
            "--duration",
            "200ms",
            "--flows",
            "200",
            "--scenario",
            "link-failure",
            // Paced to the wall clock: a debug-build collector sharing two cores with the
            // rest of the suite must not be flooded (that is the UDP benchmark's job).
            "--realtime",
        ])
        .args(["--collector", &format!("127.0.0.1:{udp}"), "--truth"])
        .arg(&truth));
    assert!(out.status.success(), "{out:?}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("fat-tree:4 (20 switches, 16 hosts)"),
        "{summary}"
    );
    assert!(summary.contains("link_down 1"), "{summary}");
    // "... N sent to [...]": the number before "sent".
    let words: Vec<&str> = summary.split_whitespace().collect();
    let sent: f64 = words
        .windows(2)
        .find(|w| w[1] == "sent" && w[0].parse::<f64>().is_ok())
        .and_then(|w| w[0].parse().ok())
        .unwrap_or(0.0);
    assert!(sent > 100.0, "{summary}");
    // The collector decodes every report: no malformed, nothing lost by sequence number.
    let m = metrics_once_received(admin, sent);
    assert_eq!(
        metric_sum(&m, "kplane_collector_datagrams_received_total", &[]),
        sent,
        "{m}"
    );
    assert_eq!(
        metric_sum(
            &m,
            "kplane_collector_reports_decoded_total",
            &["telemetry-report-v2.0"]
        ),
        sent
    );
    assert_eq!(metric_sum(&m, "kplane_collector_malformed_total", &[]), 0.0);
    assert_eq!(
        metric_sum(&m, "kplane_collector_reports_lost_total", &[]),
        0.0
    );
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    assert!(
        t["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "link_down")
    );
    sigterm(&collector);
    assert!(collector.wait().unwrap().success());
}

#[test]
fn the_independent_generator_feeds_a_collector_that_decodes_every_report() {
    use kplane_testkit::metric_sum;
    let (mut collector, udp, admin) = collector();
    let truth = tmp("tracegen-truth.json");
    let out = run(kplane()
        .args([
            "tracegen",
            "--duration",
            "400ms",
            "--scenario",
            "ddos:victim=9,sources=40,pps=4000,start=0.25,duration=0.5",
            "--realtime",
        ])
        .args(["--collector", &format!("127.0.0.1:{udp}"), "--truth"])
        .arg(&truth));
    assert!(out.status.success(), "{out:?}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("64 hosts"), "{summary}");
    let words: Vec<&str> = summary.split_whitespace().collect();
    let sent: f64 = words
        .windows(2)
        .find(|w| w[1] == "reports")
        .and_then(|w| w[0].parse().ok())
        .unwrap_or(0.0);
    assert!(sent > 500.0, "{summary}");
    // Written from the specifications, decoded by the collector: every report, none malformed.
    let m = metrics_once_received(admin, sent);
    assert_eq!(
        metric_sum(
            &m,
            "kplane_collector_reports_decoded_total",
            &["telemetry-report-v2.0"]
        ),
        sent,
        "{m}"
    );
    assert_eq!(metric_sum(&m, "kplane_collector_malformed_total", &[]), 0.0);
    assert_eq!(
        metric_sum(&m, "kplane_collector_reports_lost_total", &[]),
        0.0
    );
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
    let ddos = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "ddos_start")
        .expect("the DDoS in the ground truth");
    assert_eq!(ddos["victim"], "172.16.2.11");
    assert_eq!(ddos["sources"].as_array().unwrap().len(), 40);
    // A bad scenario is refused with the configuration exit code.
    let bad = run(kplane().args([
        "tracegen",
        "--collector",
        "127.0.0.1:9",
        "--scenario",
        "ddos:victum=3",
    ]));
    assert_eq!(bad.status.code(), Some(78), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("victum"));
    sigterm(&collector);
    assert!(collector.wait().unwrap().success());
}
