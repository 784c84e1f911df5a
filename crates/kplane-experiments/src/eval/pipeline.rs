//! One run through the whole pipeline in one process, in virtual time: the emulator (or the
//! independent generator, `kplane-tracegen`) sends real reports over UDP to a collector → embedded bus → stream processor →
//! `int.windows` / `int.alerts` → knowledge service (its state in a directory that outlives
//! the run) → `int.anomalies` / `int.forecasts`, read back here with the ground truth.
//!
//! The emulator is paced by the collector: it never has more than [`IN_FLIGHT`] reports sent
//! and not yet taken, so a slow machine (a debug build on two busy cores) takes longer but
//! sees the same reports as a fast one, instead of losing the ones its socket could not hold.
//! Nothing in a run is timed by the wall clock either: the stages close their windows on
//! event time, and the run ends by stopping them in order (collector, processor, knowledge
//! service), each handing all it holds to the next — never on a quiet spell, which a stall of
//! a loaded machine in the middle of a run would also be (see [`STALL`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kplane_bus::topics;
use kplane_collector::metrics::{CollectorMetrics, DropLabels};
use kplane_emulator::run::{RunConfig, build, run_paced};
use kplane_emulator::sim::Congested;
use kplane_emulator::topology::Topology;
use kplane_model::results::{Alert, Anomaly, Forecast};
use kplane_runtime::Shutdown;

/// What one run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The ground truth's events (docs/emulator.md#ground-truth; the independent generator's
    /// use the same vocabulary).
    pub events: Vec<serde_json::Value>,
    /// The emulator's topology (`None` for the independent generator, whose link events name
    /// their ports).
    pub topology: Option<Topology>,
    /// The emulator's queues as they were congested: at or over the breach depth (the hop
    /// latency the processor raises a breach above, in 1500-byte packets at the link rate)
    /// for at least the breach's minimum duration (empty for the independent generator,
    /// which has no queues).
    pub congested: Vec<Congested>,
    /// The stream processor's immediate events (`int.alerts`).
    pub alerts: Vec<Alert>,
    pub anomalies: Vec<Anomaly>,
    pub forecasts: Vec<Forecast>,
    pub virtual_seconds: f64,
    /// Where the run's scored part begins: what the service did before is its warm-up
    /// ([`Outcome::after_warm_up`]).
    pub scored_from_ns: i64,
    /// Reports the emulator sent.
    pub reports_sent: u64,
    /// Reports the collector dropped (socket or queue overflow), or never took.
    pub reports_lost: u64,
    /// Rows (reports, events) the stream processor took after their window was written: in
    /// no window, so the knowledge service never saw them.
    pub rows_late: u64,
}

impl Outcome {
    /// The run with its first `warm_ns` as the service's warm-up, not scored: the anomalies
    /// that ended by then, and the forecasts, breaches and congestion before it, are left out.
    /// An anomaly still raised after it is kept whole, however early it began: a deployed
    /// service would be raising it too.
    pub fn after_warm_up(mut self, warm_ns: i64) -> Self {
        let lasting: std::collections::HashSet<String> = self
            .anomalies
            .iter()
            .filter(|a| a.last_ns > warm_ns)
            .map(|a| a.id.clone())
            .collect();
        self.anomalies.retain(|a| lasting.contains(&a.id));
        self.forecasts.retain(|f| f.window_end_ns > warm_ns);
        self.alerts.retain(|a| a.time_ns >= warm_ns);
        self.congested.retain(|c| c.end_ns as i64 > warm_ns);
        self.scored_from_ns = warm_ns;
        self
    }

    /// The virtual seconds scored: the run's, less its warm-up.
    pub fn scored_seconds(&self) -> f64 {
        self.virtual_seconds - self.scored_from_ns as f64 / 1e9
    }
}

/// Reports sent and not yet taken by the collector before the emulator waits.
pub const IN_FLIGHT: u64 = 1_024;
/// How long the emulator waits for the collector before it counts the rest as lost.
const PACE_TIMEOUT: Duration = Duration::from_secs(10);
/// The processor's and the knowledge service's `idle-close`: a quiet spell this long would
/// close their open windows, so it is far longer than a loaded machine stalls (a processor
/// that closed a window at a 300 ms stall took 90 % of a 10 Gb/s window's flows for late).
/// A run's end does not wait for it: stopping the processor writes its open windows.
const STALL: Duration = Duration::from_secs(60);

/// Reports the collector has taken: decoded or rejected by its pipeline, or dropped (and
/// counted) on the way in.
fn taken(m: &CollectorMetrics) -> u64 {
    let dropped = |stage, reason| m.dropped.get_or_create(&DropLabels { stage, reason }).get();
    m.datagrams.get() + dropped("socket", "rcvbuf_overflow") + dropped("queue", "full")
}

/// Blocks until the collector is at most `behind` reports behind `sent`, or
/// [`PACE_TIMEOUT`] has passed without progress.
fn wait_for(m: &CollectorMetrics, sent: u64, behind: u64) {
    let mut last = taken(m);
    let mut since = Instant::now();
    while sent.saturating_sub(taken(m)) > behind {
        let now = taken(m);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() > PACE_TIMEOUT {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The knowledge service's settings for a run of windows of `window`.
pub fn knowledge_config(
    state: &Path,
    window: Duration,
    min_windows: usize,
) -> kplane_knowledge::Config {
    kplane_knowledge::Config {
        admin: "127.0.0.1:0".parse().expect("an address"),
        store_dir: state.join("store-not-used"),
        state_dir: state.to_path_buf(),
        window,
        min_windows,
        // One training per deployment: the clean run's.
        retrain_every: 1_000_000,
        // Windows are completed on the processor's progress, the last ones when it stops.
        idle_close: STALL,
        publish: true,
        ..kplane_knowledge::Config::default()
    }
}

fn lines<T: serde::de::DeserializeOwned>(
    c: &mut kplane_bus::EmbeddedConsumer,
) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    for d in c.drain(Duration::from_millis(50)) {
        for l in d
            .message
            .payload
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            out.push(serde_json::from_slice(l).context("a result record that does not decode")?);
        }
    }
    Ok(out)
}

/// Where a run's reports come from.
#[derive(Clone, Debug)]
pub enum Source {
    Emulator(RunConfig),
    Independent(kplane_tracegen::run::Config),
}

/// Runs `source` with the processor's store in `store` (raising breaches at `thresholds`) and the
/// knowledge service's state in `kcfg.state_dir`; returns once every window has been scored
/// and `done()` holds.
pub fn run_pipeline(
    store: &Path,
    window: Duration,
    thresholds: &kplane_stream_processor::config::Thresholds,
    kcfg: kplane_knowledge::Config,
    source: Source,
    done: impl Fn() -> bool,
) -> anyhow::Result<Outcome> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let collector_cfg = kplane_collector::Config {
        admin: "127.0.0.1:0".parse()?,
        listen: vec!["127.0.0.1:0".parse()?],
        // One lane: the processor publishes each window once, in order, so the knowledge
        // service completes every window on its mark and a run is repeatable. (With several
        // lanes the processor, running ahead in virtual time, may finish one lane's windows
        // well before another's, and the service would take the laggard for a quiet lane.)
        partitions: 1,
        publish_reports: true,
        linger: Duration::from_millis(5),
        queue_capacity: 1 << 16,
        bus_capacity: 1 << 16,
        ..kplane_collector::Config::default()
    };
    let bus = kplane_collector::embedded_bus(&collector_cfg);
    // One stop per stage, so that each can hand all it holds to the next at the end.
    let (collector_stop, processor_stop, knowledge_stop) =
        (Shutdown::new(), Shutdown::new(), Shutdown::new());
    let collector = rt
        .block_on(kplane_collector::start(
            collector_cfg,
            Arc::new(bus.clone()),
            collector_stop.clone(),
        ))
        .map_err(|e| anyhow::anyhow!("collector: {e}"))?;
    let pcfg = kplane_stream_processor::Config {
        admin: "127.0.0.1:0".parse()?,
        // A store per run: each emulation starts its clock again, which a processor resuming
        // from an earlier run's checkpoint would take for a replay.
        data_dir: store.to_path_buf(),
        window,
        lateness: window / 2,
        idle_close: STALL,
        thresholds: thresholds.clone(),
        ..kplane_stream_processor::Config::default()
    };
    kplane_stream_processor::create_result_topics(&bus, &pcfg, 1 << 16);
    let processor_metrics = kplane_stream_processor::metrics::ProcessorMetrics::default();
    let sp = rt.spawn(kplane_stream_processor::run_embedded_counted(
        pcfg,
        bus.clone(),
        processor_metrics.clone(),
        processor_stop.clone(),
    ));
    kplane_knowledge::create_topics(&bus, 1 << 16);
    let mut alerts_in = bus.consumer(topics::ALERTS, "eval")?;
    let mut anomalies_in = bus.consumer(topics::ANOMALIES, "eval")?;
    let mut forecasts_in = bus.consumer(topics::FORECASTS, "eval")?;
    let ks = rt.spawn(kplane_knowledge::run_embedded(
        kcfg,
        bus.clone(),
        knowledge_stop.clone(),
    ));

    let metrics = collector.metrics.clone();
    let pace = |sent| wait_for(&metrics, sent, IN_FLIGHT);
    let sent = match source {
        Source::Emulator(mut rc) => {
            rc.collectors = collector.udp.clone();
            let sim = Arc::new(Mutex::new(build(&rc).map_err(anyhow::Error::msg)?));
            let summary =
                run_paced(&rc, sim.clone(), || false, pace).map_err(anyhow::Error::msg)?;
            let s = sim
                .lock()
                .map_err(|_| anyhow::anyhow!("emulator poisoned"))?;
            let depth =
                thresholds.hop_latency_ns as f64 * rc.link.rate_bps as f64 / 1e9 / (8.0 * 1500.0);
            Sent {
                events: s.truth.events.clone(),
                topology: Some(s.topo.clone()),
                congested: s.truth.congested(
                    depth.ceil() as usize,
                    thresholds.min_duration.as_nanos() as u64,
                    s.cfg.sample_ns,
                ),
                reports: summary.reports_sent,
                virtual_seconds: summary.virtual_seconds,
            }
        }
        Source::Independent(cfg) => {
            let o = kplane_tracegen::run::run(&cfg, &collector.udp, |sent, _| pace(sent))
                .map_err(|e| anyhow::anyhow!("independent generator: {e}"))?;
            Sent {
                events: o.events,
                topology: None,
                congested: Vec::new(),
                reports: o.reports_sent,
                virtual_seconds: o.virtual_seconds,
            }
        }
    };
    if sent.reports == 0 {
        bail!("the run sent no report");
    }
    // The collector publishes all it took when it stops; the processor reads the rest of its
    // input and writes every open window when it stops (an in-process bus cannot replay
    // them), saying that its lane is through them, which completes them at the knowledge
    // service.
    wait_for(&metrics, sent.reports, 0);
    collector_stop.trigger();
    rt.block_on(collector.wait())
        .map_err(|e| anyhow::anyhow!("collector: {e}"))?;
    processor_stop.trigger();
    rt.block_on(sp)?
        .map_err(|e| anyhow::anyhow!("stream processor: {e}"))?;
    // A window message is held until the service commits it, which it does after scoring it
    // and publishing the results.
    let deadline = Instant::now() + Duration::from_secs(300);
    while bus.stats(topics::WINDOWS).map_or(true, |s| {
        s.held.iter().sum::<usize>() > 0 || s.end_offsets.iter().sum::<u64>() == 0
    }) {
        if Instant::now() > deadline {
            bail!(
                "window results never all read: {:?}",
                bus.stats(topics::WINDOWS)
            );
        }
        if ks.is_finished() {
            let r = rt.block_on(ks);
            bail!("the knowledge service stopped: {r:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    while !done() {
        if Instant::now() > deadline {
            bail!("the knowledge service did not finish (e.g. its training) in time");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    knowledge_stop.trigger();
    rt.block_on(ks)?
        .map_err(|e| anyhow::anyhow!("knowledge: {e}"))?;
    // What its pipeline did not see, dropped or never received (the collector flushed its
    // counts when it stopped).
    let reports_lost = sent.reports.saturating_sub(metrics.datagrams.get());
    if reports_lost > 0 {
        eprintln!(
            "kplane eval: the collector lost {reports_lost} of {} reports",
            sent.reports
        );
    }
    let rows_late = processor_metrics.late_rows();
    if rows_late > 0 {
        eprintln!(
            "kplane eval: the stream processor took {rows_late} rows too late for their window"
        );
    }
    Ok(Outcome {
        events: sent.events,
        topology: sent.topology,
        congested: sent.congested,
        alerts: lines(&mut alerts_in)?,
        anomalies: lines(&mut anomalies_in)?,
        forecasts: lines(&mut forecasts_in)?,
        virtual_seconds: sent.virtual_seconds,
        scored_from_ns: 0,
        reports_sent: sent.reports,
        reports_lost,
        rows_late,
    })
}

/// What the traffic source did.
struct Sent {
    events: Vec<serde_json::Value>,
    topology: Option<Topology>,
    congested: Vec<Congested>,
    reports: u64,
    virtual_seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_quiet_for_a_while_in_the_middle_of_a_window_loses_none_of_it() {
        let dir = std::env::temp_dir().join(format!("kplane-pipeline-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // A few mice a second, in real time: quiet spells of hundreds of milliseconds inside
        // windows, as a machine that stalls makes them. None may close a window early and
        // turn the rest of its reports away as late.
        let source = Source::Emulator(RunConfig {
            realtime: true,
            duration: Duration::from_secs(4),
            flows_per_second: 4.0,
            elephant_share: 0.0,
            ..RunConfig::default()
        });
        let window = Duration::from_secs(1);
        let o = run_pipeline(
            &dir.join("store"),
            window,
            &Default::default(),
            knowledge_config(&dir.join("state"), window, 1_000),
            source,
            || true,
        )
        .unwrap();
        let store = kplane_store::Store::open(&dir.join("store")).unwrap();
        let (windows, unreadable) = kplane_knowledge::history::windows(&store, usize::MAX);
        let stored: f64 = windows
            .iter()
            .flat_map(|w| &w.flows)
            .map(|f| f.reports)
            .sum();
        assert_eq!(unreadable, 0);
        assert!(o.reports_sent > 0);
        assert_eq!(o.rows_late, 0);
        assert_eq!(stored as u64, o.reports_sent, "{} windows", windows.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
