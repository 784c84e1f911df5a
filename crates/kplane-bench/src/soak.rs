//! `kplane bench soak`: flow churn through the collector's pipeline (decode → loss →
//! detection → publish, reports published) and the stream processor's immediate detectors
//! fed from what it publishes, in virtual time; prints resident memory and every state
//! table's size and evictions once a virtual minute. Memory should level off under the caps
//! while the eviction counters grow. Default configuration, but for the flags.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use kplane_bus::{BusError, Message, Producer, topics};
use kplane_collector::bench::{fat_tree_reports, rss_bytes};
use kplane_collector::metrics::CollectorMetrics;
use kplane_collector::pipeline::{Pipeline, SharedWatchlist};
use kplane_collector::publish::Publisher;
use kplane_model::FlowHashKey;
use kplane_model::id_table::{Evictions, Limits};
use kplane_model::rng::Rng;
use kplane_stream_processor::ProcessorError;
use kplane_stream_processor::detect::{Alert, Detector};
use kplane_stream_processor::frame::report_frame;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Distinct flows over the run.
    #[arg(long, default_value_t = 10_000_000)]
    flows: u64,
    /// Virtual seconds.
    #[arg(long, default_value_t = 1800)]
    seconds: u64,
    /// Reports per virtual second.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Flows sending at any moment (the rest have ended).
    #[arg(long, default_value_t = 20_000)]
    active: usize,
    /// Flow-state idle timeout, collector and processor (default: their configured ones).
    #[arg(long, value_parser = humantime::parse_duration)]
    flow_idle: Option<Duration>,
    /// Flow-state cap, collector and processor (default: their configured ones).
    #[arg(long)]
    max_flows: Option<usize>,
}

/// Bus partitions, as the collector's default.
const PARTITIONS: u32 = 8;

/// The processor side: one immediate-event detector per partition, fed with every
/// `int.reports` message the collector publishes.
struct Detectors {
    key: FlowHashKey,
    /// Per partition; alerts (discarded); rows checked; the first message that failed.
    lanes: Mutex<Lanes>,
}

struct Lanes {
    detectors: Vec<Detector>,
    alerts: Vec<Alert>,
    rows: u64,
    error: Option<ProcessorError>,
}

impl Lanes {
    fn check(&mut self, m: &Message, key: &FlowHashKey) -> Result<(), ProcessorError> {
        for b in kplane_stream_processor::input::batches(None, &m.payload, true)? {
            // Receive time as event time: the template reports' own timestamps stand still.
            let f = report_frame(&b, false, key)?;
            self.rows += b.num_rows() as u64;
            self.detectors[m.partition as usize].reports(
                &f.reports,
                &f.hops,
                &f.hop_offsets,
                &mut self.alerts,
            )?;
            self.alerts.clear();
        }
        Ok(())
    }
}

impl std::fmt::Debug for Detectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detectors").finish_non_exhaustive()
    }
}

impl Producer for Detectors {
    fn send(&self, m: Message) -> Result<(), BusError> {
        if m.topic != topics::REPORTS || m.payload.is_empty() {
            return Ok(());
        }
        let mut lanes = self.lanes.lock().map_err(|_| BusError::Closed)?;
        if let Err(e) = lanes.check(&m, &self.key) {
            lanes.error.get_or_insert(e);
        }
        Ok(())
    }

    fn partitions(&self, _: &str) -> Result<u32, BusError> {
        Ok(PARTITIONS)
    }
}

/// Where in a template report the inner packet's IPv4 source address sits: found once by
/// its value (the template's source) followed by its destination.
fn source_offset(report: &[u8], src: u32) -> Option<usize> {
    let mut needle = src.to_be_bytes().to_vec();
    needle.extend_from_slice(&[10, 255, 0, 1]);
    report.windows(8).position(|w| w == needle.as_slice())
}

fn with_limits(l: Limits, idle: Option<Duration>, max: Option<usize>) -> Limits {
    Limits {
        idle: idle.unwrap_or(l.idle),
        max: max.unwrap_or(l.max),
    }
}

/// One line of the state tables: `name entries (idle, capacity)`.
fn table_cell(name: &str, entries: usize, e: Evictions) -> String {
    format!("{name} {entries} ({}/{})", e.idle, e.capacity)
}

pub fn run(a: SoakArgs) -> anyhow::Result<()> {
    let mut cfg = kplane_collector::Config::default();
    let proc_cfg = kplane_stream_processor::Config::default();
    cfg.partitions = PARTITIONS;
    cfg.publish_reports = true;
    cfg.state.flows = with_limits(cfg.state.flows, a.flow_idle, a.max_flows);
    let mut proc_state = proc_cfg.state.clone();
    proc_state.flows = with_limits(proc_state.flows, a.flow_idle, a.max_flows);

    let key = FlowHashKey::random();
    let detectors = Arc::new(Detectors {
        key,
        lanes: Mutex::new(Lanes {
            detectors: (0..PARTITIONS)
                .map(|p| Detector::new(p, proc_cfg.thresholds.clone(), &proc_state, key))
                .collect(),
            alerts: Vec::new(),
            rows: 0,
            error: None,
        }),
    });
    let metrics = CollectorMetrics::default();
    let publisher = Publisher::new(
        detectors.clone(),
        metrics.clone(),
        PARTITIONS,
        cfg.encoding,
        cfg.batch_size,
        cfg.linger,
        true,
        "soak".into(),
    );
    let mut pipeline = Pipeline::new(&cfg, publisher, metrics, SharedWatchlist::default());

    let mut templates = fat_tree_reports(64);
    let offsets = templates
        .iter()
        .enumerate()
        .map(|(i, r)| source_offset(r, 0x0A00_0000 + i as u32))
        .collect::<Option<Vec<_>>>()
        .context("a template report without its source address")?;
    let exporter = std::net::SocketAddr::from(([10, 255, 0, 9], 5000));
    let active = a.active.max(1);
    let mut slots: Vec<u64> = (0..active as u64).collect();
    let mut next_flow = active as u64;
    let new_per_second = a.flows.saturating_sub(active as u64) / a.seconds.max(1);
    let mut replace_at = 0usize;
    let mut seq = [0u32; 64];
    let mut rng = Rng::new(42);
    let step_ns = 1_000_000_000 / a.rate.max(1);
    let start_ns = 1_000_000_000u64;
    let wall = Instant::now();

    println!(
        "kplane bench soak: {} flows over {} virtual s ({} reports/s, {} active, {} new/s); \
         collector flows {:?}, processor flows {:?} per partition",
        a.flows, a.seconds, a.rate, active, new_per_second, cfg.state.flows, proc_state.flows
    );
    println!(
        "{:>4} {:>10} {:>8} {:>8} {:>8}  collector tables: entries (evicted idle/capacity)  |  processor (all partitions)",
        "min", "flows", "RSS MB", "coll. MB", "proc. MB"
    );
    for second in 0..a.seconds {
        // Churn: this second's new flows replace the oldest active ones.
        for _ in 0..new_per_second {
            slots[replace_at] = next_flow;
            next_flow += 1;
            replace_at = (replace_at + 1) % active;
        }
        for k in 0..a.rate {
            let flow = slots[rng.below(active as u64) as usize];
            let t = (flow % 64) as usize;
            let r = &mut templates[t];
            let address = 0x0B00_0000u32.wrapping_add(flow as u32);
            r[offsets[t]..offsets[t] + 4].copy_from_slice(&address.to_be_bytes());
            // The sink's next sequence number (22 bits), as the pipeline benchmark does.
            let node = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) as usize % seq.len();
            let w = (u32::from_be_bytes([r[0], r[1], r[2], r[3]]) & !0x3F_FFFF)
                | (seq[node] & 0x3F_FFFF);
            seq[node] += 1;
            r[..4].copy_from_slice(&w.to_be_bytes());
            let now = start_ns + second * 1_000_000_000 + k * step_ns;
            pipeline.datagram(r, exporter, now, false);
        }
        pipeline.flush_metrics();
        if (second + 1) % 60 == 0 || second + 1 == a.seconds {
            let collector: Vec<String> = pipeline
                .state_tables()
                .iter()
                .filter(|t| t.entries > 0 || t.evicted != Evictions::default())
                .map(|t| table_cell(t.table, t.entries, t.evicted))
                .collect();
            let guard = detectors
                .lanes
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            let mut flows = (0usize, Evictions::default());
            let mut processor_bytes = 0;
            for d in &guard.detectors {
                let (_, n, e) = d.tables()[0];
                flows.0 += n;
                flows.1.idle += e.idle;
                flows.1.capacity += e.capacity;
                processor_bytes += d.state_bytes();
            }
            println!(
                "{:>4} {:>10} {:>8.0} {:>8.0} {:>8.0}  {}  |  {}",
                (second + 1) / 60,
                next_flow,
                rss_bytes().unwrap_or(0) as f64 / 1e6,
                pipeline.key_footprint().1 as f64 / 1e6,
                processor_bytes as f64 / 1e6,
                collector.join(", "),
                table_cell("flows", flows.0, flows.1),
            );
        }
    }
    pipeline.finish();
    let lanes = detectors
        .lanes
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    if let Some(e) = &lanes.error {
        anyhow::bail!("the processor's detectors refused a message: {e}");
    }
    let rows = lanes.rows;
    println!(
        "{} reports, {} reached the processor's detectors, {next_flow} distinct flows, {:.1} s wall",
        a.seconds * a.rate,
        rows,
        wall.elapsed().as_secs_f64()
    );
    Ok(())
}
