//! Ground truth through the whole pipeline: the emulator sends real reports over UDP to an
//! in-process collector, which publishes `int.reports` / `int.events` on the embedded bus to
//! the stream processor; the assertions read the processor's Parquet store with SQL and its
//! `int.alerts` / `int.windows` topics, and compare with what the emulator injected.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use kplane_bus::headers;
use kplane_bus::topics as result_topics;
use kplane_emulator::run::{RunConfig, build, run};
use kplane_emulator::sim::{Action, Sim, SimConfig, Truth};
use kplane_runtime::Shutdown;
use kplane_store::Store;
use kplane_store::query::{scalar, sql_blocking};
use kplane_stream_processor::Config;
use kplane_stream_processor::config::Thresholds;
use kplane_stream_processor::detect::{Alert, AlertKind};
use kplane_stream_processor::metrics::ProcessorMetrics;

const MS: u64 = 1_000_000;

struct StopOnDrop(Shutdown);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.trigger();
    }
}

/// The runtime, shut down with a timeout when dropped. After a failed assertion a plain drop
/// would wait for ever: it cancels the service task that sets the stream processor's stop
/// flag, and the processor's blocking loop runs until that flag is set.
struct Runtime(Option<tokio::runtime::Runtime>);

impl std::ops::Deref for Runtime {
    type Target = tokio::runtime::Runtime;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("the runtime until dropped")
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

struct Outcome {
    data: PathBuf,
    truth: Truth,
    alerts: Vec<Alert>,
    window_tables: Vec<String>,
    /// Reports the emulator sent.
    sent: u64,
    /// Rows the processor took after their window was written (`records{outcome="late"}`).
    late: u64,
}

impl Outcome {
    fn sql(&self, q: &str) -> Vec<RecordBatch> {
        sql_blocking(&Store::local(&self.data), q).unwrap_or_else(|e| panic!("{q}: {e}"))
    }

    fn alerts(&self, kind: AlertKind) -> Vec<&Alert> {
        self.alerts
            .iter()
            .filter(|a| a.kind == Some(kind))
            .collect()
    }

    fn truth(&self, kind: &str) -> Vec<&serde_json::Value> {
        self.truth
            .events
            .iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// Long flows between host pairs (index into the host list), `packets` every `gap_ns`, so that
/// they live through the scenario's changes.
fn long_flows(sim: &mut Sim, pairs: &[(usize, usize)], packets: u64, gap_ns: u64) {
    let hosts = sim.topo.host_indices();
    for (i, &(a, b)) in pairs.iter().enumerate() {
        let f = sim.flow(
            hosts[a],
            hosts[b],
            17,
            (50_000 + i as u16, 5_001),
            packets,
            200,
            gap_ns,
        );
        sim.schedule(0, Action::StartFlow(Box::new(f)));
    }
}

/// Runs `rc` through collector and processor; returns once the processor has written every
/// window up to the end of the emulated time.
fn pipeline(
    name: &str,
    mut rc: RunConfig,
    processor: Config,
    prepare: impl FnOnce(&mut Sim) + Send + 'static,
) -> Outcome {
    let data = std::env::temp_dir().join(format!("kplane-sp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let rt = Runtime(Some(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    ));
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
    // Stops every service if an assertion fails first (dropped before the runtime).
    let _stop = StopOnDrop(shutdown.clone());
    let collector = rt
        .block_on(kplane_collector::start(
            collector_cfg,
            Arc::new(bus.clone()),
            shutdown.clone(),
        ))
        .unwrap();
    rc.collectors = collector.udp.clone();
    let pcfg = Config {
        admin: "127.0.0.1:0".parse().unwrap(),
        data_dir: data.clone(),
        ..processor
    };
    let window = pcfg.window.as_nanos() as i64;
    kplane_stream_processor::create_result_topics(&bus, &pcfg, 1 << 16);
    let metrics = ProcessorMetrics::default();
    let sp = rt.spawn(kplane_stream_processor::run_embedded_counted(
        pcfg,
        bus.clone(),
        metrics.clone(),
        shutdown.clone(),
    ));
    let mut alerts_in = bus.consumer(result_topics::ALERTS, "test").unwrap();
    let mut windows_in = bus.consumer(result_topics::WINDOWS, "test").unwrap();

    let mut sim = build(&rc).unwrap();
    prepare(&mut sim);
    let sim = Arc::new(Mutex::new(sim));
    let summary = run(&rc, sim.clone(), || false).unwrap();
    assert!(summary.reports_sent > 0, "{summary:?}");
    let end = summary.virtual_seconds * 1e9;

    // Every window up to the end of the run is written once the processor goes idle.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // A file compacted away between listing and reading fails this poll: poll again.
        let written = sql_blocking(
            &Store::local(&data),
            "SELECT CAST(max(window_end) AS BIGINT) FROM queues",
        )
        .map_or(f64::MIN, |b| scalar(&b));
        if written + window as f64 >= end {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "windows written up to {written}, run ended at {end}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    shutdown.trigger();
    rt.block_on(async {
        sp.await.unwrap().unwrap();
        collector.wait().await.unwrap();
    });
    let alerts = alerts_in
        .drain(Duration::from_millis(50))
        .iter()
        .flat_map(|d| {
            String::from_utf8(d.message.payload.to_vec())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Alert>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut window_tables: Vec<String> = windows_in
        .drain(Duration::from_millis(50))
        .iter()
        .filter_map(|d| d.message.header(headers::SCHEMA).map(str::to_string))
        .collect();
    window_tables.sort();
    window_tables.dedup();
    let truth = sim.lock().unwrap().truth.clone();
    Outcome {
        data,
        truth,
        alerts,
        window_tables,
        sent: summary.reports_sent,
        late: metrics.late_rows(),
    }
}

fn fast(window_ms: u64) -> Config {
    Config {
        window: Duration::from_millis(window_ms),
        lateness: Duration::from_millis(window_ms / 2),
        idle_close: Duration::from_millis(500),
        thresholds: Thresholds {
            black_hole_after: Duration::from_millis(100),
            ..Thresholds::default()
        },
        ..Config::default()
    }
}

/// Paced at 4 virtual seconds per second: unpaced, the emulator sends a run's reports in one
/// burst, and on a loaded machine the collector's socket overflows with the run's last
/// reports — the last windows the tests wait for.
fn emulation(scenario: &str, seconds: u64) -> RunConfig {
    RunConfig {
        duration: Duration::from_secs(seconds),
        scenario: scenario.into(),
        flows_per_second: 100.0,
        realtime: true,
        speed: 4.0,
        ..RunConfig::default()
    }
}

fn u64_at(b: &RecordBatch, name: &str, i: usize) -> u64 {
    let c = b.column_by_name(name).unwrap();
    if let Some(a) = c.as_primitive_opt::<UInt64Type>() {
        a.value(i)
    } else if let Some(a) = c.as_primitive_opt::<UInt32Type>() {
        a.value(i).into()
    } else if let Some(a) = c.as_primitive_opt::<UInt8Type>() {
        a.value(i).into()
    } else if let Some(a) = c.as_primitive_opt::<TimestampNanosecondType>() {
        a.value(i) as u64
    } else {
        panic!("{name}: {}", c.data_type())
    }
}

fn rows(batches: &[RecordBatch]) -> impl Iterator<Item = (&RecordBatch, usize)> {
    batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(move |i| (b, i)))
}

#[test]
fn reports_that_come_after_their_window_was_written_are_counted_late() {
    // A few mice a second in real time, and a processor that closes a window after 20 ms
    // without input: it writes windows whose quiet spells outlast that, and the rest of
    // their reports miss them. Each is counted; none is lost silently.
    let rc = RunConfig {
        duration: Duration::from_secs(4),
        flows_per_second: 4.0,
        elephant_share: 0.0,
        realtime: true,
        ..RunConfig::default()
    };
    let cfg = Config {
        idle_close: Duration::from_millis(20),
        ..fast(1_000)
    };
    let o = pipeline("late", rc, cfg, |_| {});
    let stored = scalar(&o.sql("SELECT CAST(sum(reports) AS DOUBLE) FROM flows")) as u64;
    // Every report missing from the store is among the late rows (which count the events
    // lane's rows as well).
    assert!(stored < o.sent, "{stored} of {} stored", o.sent);
    assert!(
        o.late >= o.sent - stored,
        "{stored} of {} stored, {} late",
        o.sent,
        o.late
    );
}

#[test]
fn an_injected_microburst_shows_on_its_queue_in_its_window() {
    let out = pipeline("microburst", emulation("microburst", 2), fast(100), |_| {});
    let bursts = out.truth("microburst");
    assert!(!bursts.is_empty());
    let node = bursts[0]["queue"]["node"].as_u64().unwrap();
    let port = bursts[0]["queue"]["port"].as_u64().unwrap();
    // The fullest moment of that queue in the ground truth…
    let series = out
        .truth
        .queues
        .iter()
        .find(|q| u64::from(q.node) == node && u64::from(q.port) == port)
        .expect("the burst queue was sampled");
    let &(peak_t, peak) = series.samples.iter().max_by_key(|s| s.1).unwrap();
    assert!(peak > 10, "a real burst: {peak} packets");
    let window = 100 * MS;
    let start = peak_t / window * window;
    // …is in the processor's window of that time, on that queue, as that window's fullest
    // queue.
    let q = out.sql(&format!(
        "SELECT node_id, queue_id, occupancy_max, congested_ns FROM queues \
         WHERE window_start = to_timestamp_nanos({start}) ORDER BY occupancy_max DESC, node_id"
    ));
    let top = rows(&q).next().expect("queue rows in the peak's window");
    assert_eq!(
        (
            u64_at(top.0, "node_id", top.1),
            u64_at(top.0, "queue_id", top.1)
        ),
        (node, port),
        "the burst's queue is the window's fullest"
    );
    let max = u64_at(top.0, "occupancy_max", top.1);
    assert!(
        max * 2 >= peak as u64,
        "occupancy max {max} near the true peak {peak}"
    );
    // Congestion time is reported for it; a quiet queue has none.
    let congested = out.sql(&format!(
        "SELECT sum(congested_ns) FROM queues WHERE node_id = {node} AND queue_id = {port}"
    ));
    assert!(scalar(&congested) > 0.0);
    // Every window result table and the alerts went out on the result topics.
    for t in [
        "flows",
        "hop_latency",
        "queues",
        "links",
        "sources",
        "destinations",
    ] {
        assert!(
            out.window_tables.contains(&format!("{t}/v1")),
            "{t} on int.windows: {:?}",
            out.window_tables
        );
    }
    assert!(
        !out.alerts(AlertKind::Threshold).is_empty(),
        "queue threshold alerts"
    );
}

#[test]
fn a_failed_link_changes_paths_and_trajectories() {
    // 3 s: the link fails at 1 s and comes back at 2 s. Long flows across pods.
    let out = pipeline(
        "link-failure",
        emulation("link-failure", 3),
        fast(250),
        |sim| {
            // Every host to the two hosts of the farthest pod: whatever ECMP picks, some of
            // them cross the failed link.
            let pairs: Vec<(usize, usize)> = (0..16)
                .flat_map(|i| [(i, 15 - i), (i, (i + 8) % 16)])
                .collect();
            long_flows(sim, &pairs, 30_000, 100_000);
        },
    );
    let down = out.truth("link_down")[0];
    let (t_down, link) = (
        down["t_ns"].as_u64().unwrap(),
        (
            down["link"][0].as_u64().unwrap() as u32,
            down["link"][1].as_u64().unwrap() as u32,
        ),
    );
    let uses = |path: &[u32]| {
        path.windows(2)
            .any(|w| (w[0], w[1]) == link || (w[1], w[0]) == link)
    };
    let changes: Vec<&Alert> = out
        .alerts(AlertKind::PathChange)
        .into_iter()
        .filter(|a| (a.time_ns as u64) >= t_down && (a.time_ns as u64) < t_down + 100 * MS)
        .collect();
    assert!(!changes.is_empty(), "path changes right after the failure");
    let moved: Vec<&&Alert> = changes.iter().filter(|a| uses(&a.previous_path)).collect();
    assert!(
        !moved.is_empty(),
        "some flow used the failed link: {changes:?}"
    );
    for a in &moved {
        assert!(!uses(&a.path), "new path avoids the failed link: {a:?}");
    }
    // The window after the failure: path_changed rows whose trajectory avoids the link.
    let window = 250 * MS;
    let after = (t_down / window + 1) * window;
    let f = out.sql(&format!(
        "SELECT path, previous_path FROM flows WHERE path_changed \
         AND window_start <= to_timestamp_nanos({after})"
    ));
    let mut changed = 0;
    for (b, i) in rows(&f) {
        let path = b.column(0).as_list::<i32>().value(i);
        let path: Vec<u32> = path.as_primitive::<UInt32Type>().values().to_vec();
        if !uses(&path) {
            changed += 1;
        }
    }
    assert!(changed > 0, "new trajectories in the flows table");
}

#[test]
fn a_routing_loop_raises_a_loop_event() {
    let out = pipeline("loop", emulation("routing-loop", 2), fast(250), |_| {});
    let truth = out.truth("routing_loop_start")[0];
    let (start, end) = (
        truth["t_ns"].as_u64().unwrap() as i64,
        truth["end_ns"].as_u64().unwrap() as i64,
    );
    let switches: Vec<u32> = truth["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let loops = out.alerts(AlertKind::Loop);
    let hit = loops
        .iter()
        .find(|a| a.time_ns >= start && a.time_ns <= end)
        .unwrap_or_else(|| panic!("a loop alert in [{start}, {end}]: {loops:?}"));
    for s in &switches {
        assert!(
            hit.path.iter().filter(|n| *n == s).count() >= 2,
            "switch {s} twice in {:?}",
            hit.path
        );
    }
    // Stored as well.
    let stored = out.sql("SELECT count(*) FROM alerts WHERE kind = 'loop'");
    assert!(scalar(&stored) >= 1.0);
}

#[test]
fn a_black_hole_is_seen_when_the_sink_stops_but_upstream_continues() {
    // INT-MX: every switch reports, so upstream reports go on when the sink's stop.
    let mut rc = emulation("black-hole", 2);
    rc.sim = SimConfig {
        mx: true,
        ..SimConfig::default()
    };
    let out = pipeline("black-hole", rc, fast(250), |sim| {
        // Long flows into the victim (the first host) from other pods.
        long_flows(sim, &[(8, 0), (12, 0)], 20_000, 100_000);
    });
    let truth = out.truth("black_hole_start")[0];
    let (start, end) = (
        truth["t_ns"].as_u64().unwrap() as i64,
        truth["end_ns"].as_u64().unwrap() as i64,
    );
    let victim: std::net::IpAddr = truth["dst"]
        .as_str()
        .unwrap()
        .trim_end_matches("/32")
        .parse()
        .unwrap();
    let holes = out.alerts(AlertKind::BlackHole);
    let hit = holes
        .iter()
        .find(|a| a.dst_ip == Some(victim))
        .unwrap_or_else(|| panic!("a black hole into {victim}: {holes:?}"));
    assert!(
        hit.time_ns > start && hit.time_ns <= end,
        "raised during the hole: {} not in ({start}, {end}]",
        hit.time_ns
    );
    assert!(hit.value.unwrap() >= 100 * MS);
    assert!(
        out.alerts(AlertKind::BlackHoleCleared)
            .iter()
            .any(|a| a.dst_ip == Some(victim) && a.time_ns >= end),
        "cleared once the sink reports again"
    );
    // No black hole for flows that never lost their sink.
    assert!(holes.iter().all(|a| a.dst_ip == Some(victim)), "{holes:?}");
}
