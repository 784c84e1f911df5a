//! `kplane experiment` through the binary, in its fast mode (what CI runs): every experiment
//! writes its CSV, plots and markdown and holds the paper's qualitative shape (the command
//! exits 1 when it does not). The off-the-wire ones need root (CI runs as root).

use std::path::Path;
use std::process::Command;

fn experiment(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .arg("experiment")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Runs `name` in fast mode into a fresh directory and checks what it left there.
fn fast(name: &str, plots: usize) -> String {
    let dir = std::env::temp_dir().join(format!("kplane-experiment-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ok, out, err) = experiment(&[name, "--fast", "--out", dir.to_str().unwrap()]);
    assert!(ok, "{name}: {out}\n{err}");
    assert!(out.contains("shape: as the paper's"), "{out}");
    let csv = std::fs::read_to_string(dir.join(format!("{name}.csv"))).unwrap();
    assert!(csv.starts_with("run,seed,"), "{csv}");
    assert!(csv.lines().count() > 2, "{csv}");
    let md = std::fs::read_to_string(dir.join(format!("{name}.md"))).unwrap();
    assert!(md.contains("| | paper | kplane |"), "{md}");
    let svgs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    assert_eq!(svgs.len(), plots, "{svgs:?}");
    for svg in &svgs {
        let s = std::fs::read_to_string(svg).unwrap();
        assert!(
            s.starts_with("<svg") && s.contains("<polyline"),
            "{}",
            svg.display()
        );
        assert!(md.contains(&*svg.file_name().unwrap().to_string_lossy()));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    md
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn list_names_every_experiment_and_an_unknown_one_is_refused() {
    let (ok, out, _) = experiment(&["list"]);
    assert!(ok);
    for name in [
        "intcollector-accuracy",
        "intcollector-cpu",
        "detection-rate",
        "detection-capacity",
        "complex-detection",
        "int-label-traffic",
        "int-label-packets",
        "int-label-coverage",
        "int-label-timeline",
        "int-label-pro",
        "int-label-base-b",
        "gpint-congestion",
        "gpint-degradation",
        "gpint-recovery",
        "kdn-cpu",
        "te",
    ] {
        assert!(out.contains(name), "{out}");
    }
    let (ok, _, err) = experiment(&["no-such-thing"]);
    assert!(!ok && err.contains("intcollector-accuracy"), "{err}");
}

#[test]
fn intcollector_accuracy_trades_events_for_error() {
    let md = fast("intcollector-accuracy", 3);
    assert!(md.contains("T = 40 ns"), "{md}");
}

#[test]
fn two_runs_average_with_confidence_intervals() {
    let dir = std::env::temp_dir().join(format!("kplane-experiment-runs-{}", std::process::id()));
    let (ok, out, err) = experiment(&[
        "detection-capacity",
        "--fast",
        "--runs",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains(" ± "), "{out}");
    let csv = std::fs::read_to_string(dir.join("detection-capacity.csv")).unwrap();
    assert!(
        csv.lines().any(|l| l.starts_with("1,2,")),
        "the second run, seed 2"
    );
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}

#[test]
fn complex_detection_agrees_between_switch_and_collector() {
    fast("complex-detection", 2);
}

#[test]
fn int_label_base_b_labels_fewer_packets_and_coverage_falls_with_the_interval() {
    fast("int-label-packets", 2);
    fast("int-label-coverage", 2);
}

#[test]
fn int_label_coverage_rises_with_traffic_and_falls_with_the_interval_over_time() {
    fast("int-label-traffic", 2);
    fast("int-label-timeline", 1);
}

#[test]
fn int_label_pro_recovers_coverage() {
    fast("int-label-pro", 2);
}

#[test]
fn int_label_base_b_gathers_items_and_trades_labels_for_packets() {
    fast("int-label-base-b", 4);
}

#[test]
fn gpint_probes_lose_less_than_euler_and_recovery_completes_every_session() {
    fast("gpint-congestion", 4);
    fast("gpint-degradation", 4);
    fast("gpint-recovery", 3);
}

#[test]
fn intcollector_cpu_off_the_wire() {
    if !root() {
        eprintln!("skipped: off-the-wire experiments need root (veth pairs, namespaces, XDP)");
        return;
    }
    fast("intcollector-cpu", 5);
}

#[test]
fn kdn_cpu_off_the_wire() {
    if !root() {
        eprintln!("skipped: off-the-wire experiments need root (veth pairs, namespaces, XDP)");
        return;
    }
    let md = fast("kdn-cpu", 1);
    // Table I's row, with a time per report measured at the paper's top rate.
    let row = md
        .lines()
        .find(|l| l.contains("processing time per INT report (Table I)"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        row.contains("µs at 2,400/s") && !row.contains("– at"),
        "{row}"
    );
}

#[test]
fn detection_rate_off_the_wire() {
    if !root() {
        eprintln!("skipped: off-the-wire experiments need root (veth pairs, namespaces, XDP)");
        return;
    }
    fast("detection-rate", 2);
}
