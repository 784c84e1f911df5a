//! `kplane bench processor`: records per second through the window analytics, on one core.
//!
//! Input: decoded `int.reports` batches (5-hop reports of `flows` flows over 20 switches,
//! event time advancing by `rate` reports per second), the same few batches replayed with
//! their timestamps shifted. Measured: detectors + panes + at every window close the
//! DataFusion queries and the Parquet store — everything the processor does per record except
//! reading the bus (Arrow IPC decoding is measured on its own and reported beside it).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use kplane_bus::PartitionEvent;
use kplane_bus::topics;
use kplane_model::batch::ReportBatchBuilder;
use kplane_model::schema::col;
use kplane_model::{FlowKey, HopField, HopRecord, ReportRecord};

use crate::ProcessorError;
use crate::config::Config;
use crate::metrics::ProcessorMetrics;
use crate::processor::Processor;
use crate::stages::StageTimes;

#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub records: u64,
    /// Reports per second of event time (a 1 s window holds this many).
    pub rate: u64,
    pub flows: u32,
    pub batch: usize,
    pub window: Duration,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            records: 4_000_000,
            rate: 1_000_000,
            flows: 10_000,
            batch: 8_192,
            window: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug)]
pub struct BenchReport {
    pub records: u64,
    pub seconds: f64,
    pub windows: u64,
    pub result_rows: u64,
    pub ipc_decode_records_per_s: f64,
    /// Where the time went.
    pub stages: StageTimes,
}

impl BenchReport {
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.seconds.max(1e-9)
    }
}

/// One synthetic report: flow `f`, 5 hops through a fixed path of 20 switches.
fn report(i: u64, flows: u32, t_ns: u64) -> ReportRecord {
    let f = (i % u64::from(flows)) as u32;
    let mut r = ReportRecord::default();
    r.envelope.received_ns = t_ns;
    r.envelope.timestamp_ns = Some(t_ns);
    r.envelope.node_id = Some(1 + f % 20);
    r.envelope.sequence = Some(i as u32);
    r.flow = Some(FlowKey {
        src_ip: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (f >> 4))),
        dst_ip: IpAddr::V4(Ipv4Addr::from(0x0a01_0000 | (f & 0xFF))),
        src_port: 10_000 + (f % 50_000) as u16,
        dst_port: 80,
        protocol: 6,
    });
    for h in 0..5u32 {
        let mut hop = HopRecord::default();
        let node = 1 + (f + h * 4) % 20;
        hop.set(HopField::NodeId, node.into());
        hop.set(HopField::L1IngressPort, 1);
        hop.set(HopField::L1EgressPort, u64::from(h % 4 + 1));
        hop.set(
            HopField::HopLatency,
            500 + (i * 7 + u64::from(h) * 13) % 5_000,
        );
        hop.set(HopField::QueueId, u64::from(h % 4));
        hop.set(HopField::QueueOccupancy, (i + u64::from(h)) % 40);
        hop.set(HopField::IngressTimestamp, t_ns + u64::from(h) * 1_000);
        hop.set(HopField::EgressTimestamp, t_ns + u64::from(h) * 1_000 + 500);
        hop.set(HopField::TxUtilization, i % 1000);
        r.hops.push(hop);
    }
    r
}

/// `batch` with its `timestamp_ns` and `received` shifted by `by` ns.
fn shifted(batch: &RecordBatch, by: u64) -> Result<RecordBatch, ProcessorError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{TimestampNanosecondType, UInt64Type};
    let schema = batch.schema();
    let cols = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| -> Result<ArrayRef, ProcessorError> {
            Ok(match f.name().as_str() {
                col::TIMESTAMP_NS => Arc::new(UInt64Array::from_iter(
                    c.as_primitive::<UInt64Type>()
                        .iter()
                        .map(|v| v.map(|v| v + by)),
                )),
                col::RECEIVED => Arc::new(
                    arrow_array::TimestampNanosecondArray::from_iter_values(
                        c.as_primitive::<TimestampNanosecondType>()
                            .values()
                            .iter()
                            .map(|v| v + by as i64),
                    )
                    .with_timezone("UTC"),
                ),
                _ => c.clone(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema, cols)?)
}

/// Runs the benchmark with its store under `data_dir` (emptied first).
pub fn run(b: &BenchConfig, data_dir: &std::path::Path) -> Result<BenchReport, ProcessorError> {
    let _ = std::fs::remove_dir_all(data_dir);
    let spacing = 1_000_000_000 / b.rate.max(1);
    let distinct = 16usize;
    let base = 1_800_000_000_000_000_000u64;
    let mut batches = Vec::with_capacity(distinct);
    let mut i = 0u64;
    for _ in 0..distinct {
        let mut builder = ReportBatchBuilder::new(b.batch);
        for _ in 0..b.batch {
            builder.append(&report(i, b.flows, base + i * spacing))?;
            i += 1;
        }
        batches.push(builder.finish()?);
    }
    let round_ns = i * spacing;

    // IPC decode on its own.
    let mut payload = Vec::new();
    {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut payload, &batches[0].schema())?;
        w.write(&batches[0])?;
        w.finish()?;
    }
    let started = Instant::now();
    let mut decoded = 0u64;
    while started.elapsed() < Duration::from_millis(300) {
        for bt in crate::input::batches(None, &payload, true)? {
            decoded += bt.num_rows() as u64;
        }
    }
    let ipc = decoded as f64 / started.elapsed().as_secs_f64();

    let cfg = Config {
        data_dir: data_dir.to_path_buf(),
        window: b.window,
        lateness: Duration::ZERO,
        consume_events: false,
        publish: false,
        ..Config::default()
    };
    let mut p = Processor::new(cfg, ProcessorMetrics::default(), None)?;
    let windows = Arc::new(AtomicU64::new(0));
    let rows = Arc::new(AtomicU64::new(0));
    {
        let (windows, rows) = (windows.clone(), rows.clone());
        p.on_windows(Box::new(move |n, _, results| {
            windows.fetch_add(n as u64, Ordering::Relaxed);
            let r: usize = results.iter().map(|(_, b)| b.num_rows()).sum();
            rows.fetch_add(r as u64, Ordering::Relaxed);
        }));
    }
    let key = (topics::REPORTS.to_string(), 0u32);
    p.rebalance(vec![PartitionEvent::Assigned(vec![key.clone()])])?;
    let started = Instant::now();
    let mut fed = 0u64;
    let mut offset = 0i64;
    'outer: for round in 0.. {
        for bt in &batches {
            if fed >= b.records {
                break 'outer;
            }
            let bt = shifted(bt, round * round_ns)?;
            fed += bt.num_rows() as u64;
            p.offer_batches(&key, offset, &[bt]);
            offset += 1;
            p.close_lane(&key, false)?;
        }
    }
    p.flush()?;
    Ok(BenchReport {
        records: fed,
        seconds: started.elapsed().as_secs_f64(),
        windows: windows.load(Ordering::Relaxed),
        result_rows: rows.load(Ordering::Relaxed),
        ipc_decode_records_per_s: ipc,
        stages: p.stage_times(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run through the real processor: windows close, results come out, and the
    /// stage times name where the time went.
    #[test]
    fn a_small_run_reports_windows_rows_and_stage_times() {
        let dir = std::env::temp_dir().join(format!("kplane-bench-test-{}", std::process::id()));
        let b = BenchConfig {
            records: 16_384,
            rate: 4_096,
            flows: 50,
            batch: 1_024,
            window: Duration::from_secs(1),
        };
        let r = run(&b, &dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(r.records, 16_384);
        assert!(r.windows >= 4, "{} windows", r.windows);
        assert!(r.result_rows > 0);
        assert!(!r.stages.frame.is_zero() && !r.stages.detect.is_zero());
        assert!(!r.stages.queries[crate::analytics::Table::HopLatency as usize].is_zero());
        let shown = r.stages.to_string();
        assert!(
            shown.contains("hop_latency") && shown.contains("frame"),
            "{shown}"
        );
    }
}
