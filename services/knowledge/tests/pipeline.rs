//! The knowledge service behind the whole pipeline: the emulator sends real reports over UDP
//! to an in-process collector → embedded bus → stream processor → `int.windows` /
//! `int.alerts` → knowledge service → `int.anomalies`, checked against the emulator's ground
//! truth. One test: the models are learnt on clean traffic (nothing raised on it), then a
//! second run — a restarted service, loading the persisted models — meets a DDoS.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplane_bus::topics;
use kplane_emulator::run::{RunConfig, build, run};
use kplane_emulator::sim::Truth;
use kplane_emulator::topology::LinkSpec;
use kplane_knowledge::registry::{Registry, Status};
use kplane_model::results::{Anomaly, AnomalyPhase, EntityKind};
use kplane_runtime::Shutdown;

const WINDOW: Duration = Duration::from_millis(100);

struct Outcome {
    truth: Truth,
    anomalies: Vec<Anomaly>,
    forecasts: usize,
}

/// Runs `rc` through collector → processor → knowledge (state in `dir`) and returns what the
/// knowledge service published once every window has been scored.
fn pipeline(dir: &Path, mut rc: RunConfig) -> Outcome {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let collector_cfg = kplane_collector::Config {
        admin: "127.0.0.1:0".parse().unwrap(),
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        partitions: 2,
        publish_reports: true,
        linger: Duration::from_millis(5),
        queue_capacity: 1 << 16,
        bus_capacity: 1 << 16,
        ..kplane_collector::Config::default()
    };
    let bus = kplane_collector::embedded_bus(&collector_cfg);
    let shutdown = Shutdown::new();
    let collector = rt
        .block_on(kplane_collector::start(
            collector_cfg,
            Arc::new(bus.clone()),
            shutdown.clone(),
        ))
        .unwrap();
    rc.collectors = collector.udp.clone();
    let pcfg = kplane_stream_processor::Config {
        admin: "127.0.0.1:0".parse().unwrap(),
        // A store per run: each emulation starts its clock again, which a processor resuming
        // from an earlier run's checkpoint would take for a replay.
        data_dir: dir.join(format!("store-{}", rc.sim.seed)),
        window: WINDOW,
        lateness: WINDOW / 2,
        idle_close: Duration::from_millis(500),
        ..kplane_stream_processor::Config::default()
    };
    kplane_stream_processor::create_result_topics(&bus, &pcfg, 1 << 16);
    let sp = rt.spawn(kplane_stream_processor::run_embedded(
        pcfg,
        bus.clone(),
        shutdown.clone(),
    ));
    let kcfg = kplane_knowledge::Config {
        admin: "127.0.0.1:0".parse().unwrap(),
        store_dir: dir.join("store-not-used"),
        state_dir: dir.join("knowledge"),
        window: WINDOW,
        min_windows: 40,
        retrain_every: 100_000,
        idle_close: Duration::from_millis(700),
        ..kplane_knowledge::Config::default()
    };
    kplane_knowledge::create_topics(&bus, 1 << 16);
    let mut anomalies_in = bus.consumer(topics::ANOMALIES, "test").unwrap();
    let mut forecasts_in = bus.consumer(topics::FORECASTS, "test").unwrap();
    let ks = rt.spawn(kplane_knowledge::run_embedded(
        kcfg,
        bus.clone(),
        shutdown.clone(),
    ));

    let sim = Arc::new(Mutex::new(build(&rc).unwrap()));
    let summary = run(&rc, sim.clone(), || false).unwrap();
    assert!(summary.reports_sent > 0, "{summary:?}");
    // The processor closes the last windows when its input goes idle; the knowledge service
    // completes them when its own does. Wait until the results are all read, then for that.
    let deadline = Instant::now() + Duration::from_secs(120);
    while bus.stats(topics::WINDOWS).map_or(true, |s| {
        s.held.iter().sum::<usize>() > 0 || s.end_offsets.iter().sum::<u64>() == 0
    }) {
        assert!(
            Instant::now() < deadline,
            "window results never all read: {:?}",
            bus.stats(topics::WINDOWS)
        );
        if ks.is_finished() {
            let r = rt.block_on(ks);
            panic!("the knowledge service stopped: {r:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    shutdown.trigger();
    rt.block_on(async {
        sp.await.unwrap().unwrap();
        ks.await.unwrap().unwrap();
        collector.wait().await.unwrap();
    });
    let anomalies = anomalies_in
        .drain(Duration::from_millis(50))
        .iter()
        .flat_map(|d| {
            String::from_utf8(d.message.payload.to_vec())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Anomaly>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let forecasts = forecasts_in
        .drain(Duration::from_millis(50))
        .iter()
        .map(|d| {
            d.message
                .payload
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count()
        })
        .sum();
    let truth = sim.lock().unwrap().truth.clone();
    Outcome {
        truth,
        anomalies,
        forecasts,
    }
}

fn emulation(scenario: &str, seconds: u64, seed: u64) -> RunConfig {
    let mut rc = RunConfig {
        duration: Duration::from_secs(seconds),
        scenario: scenario.into(),
        flows_per_second: 300.0,
        // 100 Mb/s links: a DDoS at twice the victim's link rate stays small enough to emulate.
        link: LinkSpec {
            rate_bps: 100_000_000,
            ..LinkSpec::default()
        },
        ..RunConfig::default()
    };
    rc.sim.seed = seed;
    rc
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kplane-knowledge-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn learns_clean_traffic_quietly_then_finds_and_explains_a_ddos_after_a_restart() {
    let dir = temp("e2e");
    // 1. Clean traffic: learning for 40 windows, trained, then nothing raised.
    let clean = pipeline(&dir, emulation("none", 12, 1));
    let registry = Registry::load(&dir.join("knowledge"))
        .unwrap()
        .expect("registry written");
    assert_eq!(registry.status, Status::Ready, "{registry:?}");
    assert!(registry.version >= 1);
    let kinds: Vec<EntityKind> = registry.models.iter().map(|m| m.kind).collect();
    for k in [EntityKind::Destination, EntityKind::Link, EntityKind::Queue] {
        assert!(kinds.contains(&k), "{k:?} model in {kinds:?}");
    }
    for m in &registry.models {
        assert!(
            m.calibration.threshold.is_finite() && m.calibration.heldout_samples > 0,
            "{m:?}"
        );
    }
    assert!(
        clean.anomalies.is_empty(),
        "nothing raised on clean traffic: {:#?}",
        clean
            .anomalies
            .iter()
            .map(|a| (&a.entity, a.score, a.threshold, &a.explanation.features))
            .collect::<Vec<_>>()
    );

    // 2. A restarted service keeps its models (no learning phase) and finds the DDoS.
    let attack = pipeline(&dir, emulation("ddos", 6, 7));
    let truth = attack
        .truth
        .events
        .iter()
        .find(|e| e["kind"] == "ddos_start")
        .expect("ddos in the ground truth");
    let victim = truth["victim"].as_str().unwrap();
    let found: Vec<&Anomaly> = attack
        .anomalies
        .iter()
        .filter(|a| {
            a.phase == AnomalyPhase::Start
                && a.entity_kind == EntityKind::Destination
                && a.entity == victim
        })
        .collect();
    let a = found
        .first()
        .unwrap_or_else(|| panic!("the victim {victim} raised: {:#?}", attack.anomalies));
    assert!(a.score > a.threshold);
    assert_eq!(
        a.model_version, registry.version,
        "the persisted models were used"
    );
    // Explained: what drove it and whom it reaches.
    assert!(!a.explanation.features.is_empty());
    assert!(
        a.explanation.features[0].z.abs() > 1.0,
        "{:?}",
        a.explanation
    );
    assert!(a.explanation.blast_radius.flows_total > 0);
    assert!(!a.explanation.blast_radius.nodes.is_empty());
    assert!(a.explanation.summary.contains(victim));
    // The loaded forecast models forecast from the third window on.
    assert!(attack.forecasts > 0, "forecasts published: {registry:?}");
}
