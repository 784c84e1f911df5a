//! `kplane eval knowledge` end to end: real reports over UDP → collector → stream processor →
//! knowledge service, in virtual time. The models learn clean traffic; every scored run is a
//! restarted service that loads them; a DDoS and a port scan are found, typed, explained and
//! answered with a recommended block, a clean run raises no attack, an incast is congestion at
//! its host, and the report and CSV are written; `kplane eval replay` back-tests on the stores
//! it left. The emulator waits for the collector (pacing), so a slow machine takes longer but
//! sees the same reports.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// What an evaluation that exited successfully printed.
fn report_of(run: &std::process::Output) -> String {
    let report = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    report
}

/// `kplane eval knowledge` with `args`, one 30 s run each, 90 s of training and the shipped
/// labels, into `out`: its report.
fn eval_with_shipped_labels(out: &std::path::Path, args: &[&str]) -> String {
    let _ = std::fs::remove_dir_all(out);
    let labels =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../services/knowledge/src/types.json");
    let run = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["eval", "knowledge"])
        .args(args)
        .args(["--runs", "1", "--seconds", "30", "--train-seconds", "90"])
        .args(["--cost-windows", "50"])
        .arg("--labels")
        .arg(&labels)
        .arg("--out")
        .arg(out)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    report_of(&run)
}

/// The JSON lines of a file.
fn json_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The anomalies an evaluation wrote, each with its `eval` context.
fn anomalies_of(out: &std::path::Path) -> Vec<Value> {
    json_lines(&out.join("anomalies.jsonl"))
}

#[test]
fn a_ddos_and_a_port_scan_are_found_typed_and_explained_and_clean_traffic_raises_no_attack() {
    let out = std::env::temp_dir().join(format!("kplane-eval-{}", std::process::id()));
    let report = eval_with_shipped_labels(
        &out,
        &[
            // The first host attacked by all others at four times its link rate, as scripted.
            "--scenario",
            "ddos:start=0.5,rate=4",
            // 600 ports over 120 ms: a burst the collector takes whole even in a debug build.
            "--scenario",
            "port-scan:victim=3,scanner=12,ports=600,gap-us=200,start=0.5",
            "--scenario",
            "clean",
        ],
    );
    assert!(report.contains("| port_scan | 1 | 1 | 1.00 |"), "{report}");
    // The emulator is paced by the collector: every report sent was taken, however slow the
    // machine.
    assert!(report.contains(", 0 lost on the way"), "{report}");

    // The models were learnt once, on clean traffic, and every scored run loaded them.
    let registry: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("ft4-100m/state/models.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(registry["status"], "ready", "{registry}");
    let kinds: Vec<&str> = registry["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    for k in ["source", "destination", "queue", "link"] {
        assert!(kinds.contains(&k), "{k} model in {kinds:?}");
    }
    let version = registry["version"].clone();

    let anomalies = anomalies_of(&out);
    let of = |scenario: &str| -> Vec<&Value> {
        anomalies
            .iter()
            .filter(|a| a["eval"]["scenario"] == scenario)
            .collect()
    };
    // Nothing raised on clean traffic.
    let raised = of("clean");
    assert!(raised.is_empty(), "raised on clean traffic: {raised:#?}");

    // The DDoS victim: found and explained by the persisted models.
    let ddos = of("ddos:start=0.5,rate=4");
    let victim = ddos
        .iter()
        .find(|a| a["entity_kind"] == "destination" && a["eval"]["truth"] == "ddos")
        .unwrap_or_else(|| panic!("the DDoS victim was not raised: {anomalies:#?}"));
    assert_eq!(
        victim["model_version"], version,
        "the persisted models were used"
    );
    assert!(victim["score"].as_f64() > victim["threshold"].as_f64());
    let features = victim["explanation"]["features"].as_array().unwrap();
    assert!(features[0]["z"].as_f64().unwrap().abs() > 1.0, "{victim:#}");
    assert!(victim["explanation"]["blast_radius"]["flows_total"].as_u64() > Some(0));
    let entity = victim["entity"].as_str().unwrap();
    assert!(
        victim["explanation"]["summary"]
            .as_str()
            .unwrap()
            .contains(entity)
    );
    // Typed a DDoS — on the victim or on its attackers — and answered with blocks towards it.
    let typed: Vec<&&Value> = ddos
        .iter()
        .filter(|a| a["type"] == "ddos" && a["eval"]["truth"] == "ddos")
        .collect();
    assert!(!typed.is_empty(), "no DDoS typed: {ddos:#?}");
    for a in typed {
        let recs = a["recommendations"].as_array().unwrap();
        assert!(!recs.is_empty(), "{a:#}");
        for r in recs {
            assert_eq!(r["kind"], "block");
            assert_eq!(r["match"]["dst"], format!("{entity}/32"), "{a:#}");
            assert_eq!(r["origin"], "recommendation");
            assert_eq!(r["anomaly"], a["id"]);
        }
    }

    // One anomaly for the attack: the victim's, which lists what it explains (attackers, the
    // queues and links on their paths) instead of raising each on its own.
    let root = ddos
        .iter()
        .find(|a| a["entity_kind"] == "destination" && a["type"] == "ddos")
        .unwrap_or_else(|| panic!("the victim was not typed ddos: {ddos:#?}"));
    let collateral = root["explanation"]["blast_radius"]["collateral"]
        .as_array()
        .unwrap_or_else(|| panic!("no collateral: {root:#}"));
    assert!(
        collateral
            .iter()
            .all(|c| c["kind"] != "link" || c["type"] != "link_failure"),
        "{root:#}"
    );

    // The port scan: scanner and target typed, the scanner blocked towards its target.
    let scan = of("port-scan:victim=3,scanner=12,ports=600,gap-us=200,start=0.5");
    let scanner = scan
        .iter()
        .find(|a| a["entity_kind"] == "source" && a["type"] == "port_scan")
        .unwrap_or_else(|| panic!("no scanner typed port_scan: {scan:#?}"));
    assert!(
        scanner["explanation"]["features"][0]["name"]
            .as_str()
            .unwrap()
            .contains("dst_ports"),
        "{scanner:#}"
    );
    assert_eq!(
        scanner["recommendations"][0]["match"]["src"],
        format!("{}/32", scanner["entity"].as_str().unwrap())
    );
    // Its target is the scan's collateral, not an anomaly of its own.
    let target = &scanner["recommendations"][0]["match"]["dst"];
    assert!(
        scanner["explanation"]["blast_radius"]["collateral"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["kind"] == "destination"
                && Some(format!("{}/32", c["entity"].as_str().unwrap()).as_str())
                    == target.as_str())),
        "{scanner:#}"
    );

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.starts_with("family,table,metric,type,value\n"), "{csv}");
    assert!(
        csv.contains("all,given-labels,recall,port_scan,1\n"),
        "{csv}"
    );
    assert!(
        csv.contains("ft4-100m,cost,scoring_entity_windows_per_second,all,"),
        "{csv}"
    );
    // Incidents against the injected faults: every fault has one.
    let value = |metric: &str| -> f64 {
        csv.lines()
            .find_map(|l| l.strip_prefix(&format!("all,given-labels,{metric},all,")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {metric} in {csv}"))
    };
    assert!(report.contains("\nIncidents ("), "{report}");
    assert_eq!(value("incident_recall"), 1.0, "{report}");
    assert!(value("incident_precision") > 0.0, "{report}");
    // What was raised after the attacks ended, and of it what the clean run of the same seed
    // did not raise too.
    let after = |ty: &str| -> f64 {
        csv.lines()
            .find_map(|l| l.strip_prefix(&format!("all,given-labels,raised_after_attack,{ty},")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no raised_after_attack {ty} in {csv}"))
    };
    assert!(after("not_in_the_clean_run") <= after("all"), "{csv}");

    replay_finds_the_ddos_and_forecasts_after_the_training(&out);
    let _ = std::fs::remove_dir_all(&out);
}

/// `kplane eval replay` on the evaluation's stores: trained on the clean training run, it
/// scores the DDoS run's windows as the live service did — the victim raised as a DDoS, its
/// episode written from start to end — and writes its forecasts, for windows moved to follow
/// the training ones after a gap.
fn replay_finds_the_ddos_and_forecasts_after_the_training(out: &std::path::Path) {
    let stores = out.join("stores");
    let ddos_run = std::fs::read_dir(&stores)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ft4-100m-ddos"))
        })
        .unwrap_or_else(|| panic!("no DDoS run's store in {}", stores.display()));
    let (anomalies, forecasts) = (out.join("replayed.jsonl"), out.join("forecasts.jsonl"));
    let run = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["eval", "replay", "--train"])
        .arg(stores.join("ft4-100m-train"))
        .arg("--score")
        .arg(&ddos_run)
        .arg("--anomalies")
        .arg(&anomalies)
        .arg("--forecasts")
        .arg(&forecasts)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let report = report_of(&run);
    assert!(report.contains("| destination | ddos | 1 |"), "{report}");
    assert!(report.contains("| RMSE model |"), "{report}");
    let replayed = json_lines(&anomalies);
    let victim = replayed
        .iter()
        .find(|a| a["entity_kind"] == "destination" && a["type"] == "ddos")
        .unwrap_or_else(|| panic!("no DDoS victim replayed: {replayed:#?}"));
    // Every phase is written: the flood ends inside the run, and so does its episode.
    let phases: Vec<_> = replayed
        .iter()
        .filter(|a| a["id"] == victim["id"])
        .map(|a| a["phase"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(phases.first(), Some(&"start"), "{phases:?}");
    assert_eq!(phases.last(), Some(&"end"), "{phases:?}");
    let forecasts = json_lines(&forecasts);
    assert!(
        forecasts.iter().any(|f| f["series"] == "destination_bytes"),
        "{forecasts:#?}"
    );
    // 90 windows of training, then the scored run's after a gap of 17 the forecasts forget
    // their series across: each series starts again from the run's own values, and a forecast
    // reads three of them — none is made from the training run's.
    assert!(
        forecasts
            .iter()
            .all(|f| f["observed_end_ns"].as_i64() > Some(107_000_000_000)),
        "{:#?}",
        &forecasts[..3.min(forecasts.len())]
    );
}

/// A train of `cache` microbursts converging on one host of a 1 Gb/s leaf-spine (an incast):
/// the host is raised in the burst's first windows and typed `congestion` by the queueing its
/// flows met on the way (their transit, a feature the detector does not weigh), with nothing
/// recommended for it — on models learnt from another draw of clean traffic than the
/// evaluation's default (`--train-seed`).
#[test]
fn an_incast_is_congestion_at_the_host_it_converges_on() {
    let out = std::env::temp_dir().join(format!("kplane-eval-incast-{}", std::process::id()));
    let report = eval_with_shipped_labels(
        &out,
        &[
            "--family",
            "ls-2x4-1g",
            "--scenario",
            "microburst-cache:target=9,start=0.5,end=0.8",
            "--train-seed",
            "9002",
        ],
    );
    assert!(report.contains("clean traffic (seed 9002)"), "{report}");
    assert!(report.contains("| congestion | 1 | 1 | 1.00 |"), "{report}");
    let anomalies = anomalies_of(&out);
    let host = anomalies
        .iter()
        .find(|a| a["entity_kind"] == "destination" && a["type"] == "congestion")
        .unwrap_or_else(|| panic!("the incast's host was not typed congestion: {anomalies:#?}"));
    assert_eq!(host["entity"], "10.0.0.10", "{host:#}");
    assert_eq!(host["eval"]["truth"], "congestion", "{host:#}");
    assert_eq!(host["recommendations"], serde_json::json!([]), "{host:#}");
    // Its transit is in the explanation, with the other features it is typed by but not
    // detected by last (its late flows' share, its traffic the other way), at ≥ 4× its usual.
    let features = host["explanation"]["features"].as_array().unwrap();
    let mut last: Vec<&str> = features[features.len() - 8..]
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    last.sort_unstable();
    assert_eq!(
        last,
        [
            "answered_share",
            "late_flow_share",
            "log_bytes_other_way",
            "log_transit_us",
            "vs_usual_answered_share",
            "vs_usual_late_flow_share",
            "vs_usual_log_bytes_other_way",
            "vs_usual_log_transit_us"
        ],
        "{features:?}"
    );
    let transit = features
        .iter()
        .find(|f| f["name"] == "vs_usual_log_transit_us")
        .and_then(|f| f["value"].as_f64())
        .unwrap();
    assert!(transit >= 4f64.ln(), "{host:#}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `kplane eval lab` on a reduced lab (leaf-spine 1×2: three BMv2 switches, four hosts): the
/// knowledge service learns the lab's clean traffic, then a DDoS and a port scan drawn from the
/// seed are raised and typed on the hosts they are about, scored from the store's `anomalies`
/// table against the lab's truth file, each with an incident built from the store's `alerts`
/// and `anomalies`; the lab is gone afterwards. Needs root and BMv2
/// (skipped otherwise, failed with `KPLANE_REQUIRE_P4=1`).
#[test]
fn on_the_bmv2_lab_a_ddos_and_a_port_scan_drawn_from_the_seed_are_raised_and_typed() {
    if !kplane_testkit::bmv2::available() {
        return;
    }
    let out = std::env::temp_dir().join(format!("kplane-eval-lab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args([
            "eval",
            "lab",
            "--topology",
            "leaf-spine:1,2,2",
            "--name",
            "kpet",
        ])
        .args([
            "--scenario",
            "ddos",
            "--scenario",
            "port-scan",
            "--runs",
            "1",
        ])
        .args(["--learn", "30", "--attack", "12", "--gap", "18"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let report = report_of(&run);
    let raised = anomalies_of(&out);
    // What was raised, with why, and the services' warnings: what a failure needs explained.
    let report = format!(
        "{report}\n{}\n{}",
        raised
            .iter()
            .map(|a| format!(
                "slot {} {} {} {} ({}): {}; {}",
                a["eval"]["slot"],
                a["entity_kind"],
                a["entity"],
                a["type"],
                a["eval"]["truth"],
                a["explanation"]["summary"],
                a["explanation"]["features"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| format!("{} {:.2}", f["name"], f["value"]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&run.stderr)
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    for ty in ["ddos", "port_scan"] {
        assert!(csv.contains(&format!(",lab,recall,{ty},1\n")), "{report}");
    }
    // Every scored anomaly carries its slot and what the truth says it is; the DDoS's victim
    // is among them, typed as one.
    let truth = std::fs::read_to_string(out.join("lab-data/lab/truth.jsonl")).unwrap();
    let ddos: Value = serde_json::from_str(truth.lines().next().unwrap()).unwrap();
    assert!(
        raised.iter().all(|a| a["eval"]["truth"].is_string()),
        "{raised:?}"
    );
    assert!(
        raised.iter().any(|a| a["entity_kind"] == "destination"
            && a["entity"] == ddos["victim"]
            && a["type"] == "ddos"
            && a["eval"]["truth"] == "ddos"),
        "{report}"
    );
    // Incidents from the store's alerts and anomalies: each attack has one, and each incident
    // carries its slot.
    assert!(
        csv.contains(",lab,incident_recall,all,1\n"),
        "{report}\n{csv}"
    );
    let incidents = std::fs::read_to_string(out.join("incidents.jsonl")).unwrap();
    assert!(
        incidents.lines().all(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["eval"]["slot"].is_u64() && v["root"].is_object()
        }),
        "{incidents}"
    );
    // The child tore its fabric down.
    assert_eq!(kplane_lab::net::clean("kpet").unwrap().namespaces, 0);
    let _ = std::fs::remove_dir_all(&out);
}

/// Arguments that cannot make an evaluation are refused before any run, each with what to do.
#[test]
fn an_evaluation_that_cannot_run_is_refused_with_a_clear_error() {
    let out = std::env::temp_dir().join(format!("kplane-eval-refused-{}", std::process::id()));
    for (args, says) in [
        (&["--family", "nope"][..], "unknown family \"nope\""),
        (
            &["--family", "indep-3tier"][..],
            "no training variants to label",
        ),
        (
            &["--label-seconds", "0"][..],
            "--label-seconds must be at least 1",
        ),
        (
            &["--seconds", "0"][..],
            "--label-seconds must be at least 1",
        ),
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_kplane"))
            .args(["eval", "knowledge"])
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.join("stores").exists(), "{args:?} ran something");
    }
}
