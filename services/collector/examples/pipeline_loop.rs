//! Runs the collector pipeline over the benchmark's reports N times (for profilers:
//! `valgrind --tool=callgrind`); prints ns per report.
use std::sync::Arc;

use kplane_bus::{BusError, Message, Producer};
use kplane_collector::Config;
use kplane_collector::bench::fat_tree_reports;
use kplane_collector::metrics::CollectorMetrics;
use kplane_collector::pipeline::{Pipeline, SharedWatchlist};
use kplane_collector::publish::Publisher;

struct Null;

impl Producer for Null {
    fn send(&self, _: Message) -> Result<(), BusError> {
        Ok(())
    }
    fn partitions(&self, _: &str) -> Result<u32, BusError> {
        Ok(8)
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let cfg = Config::default();
    let metrics = CollectorMetrics::default();
    let publisher = Publisher::new(
        Arc::new(Null),
        metrics.clone(),
        8,
        cfg.encoding,
        cfg.batch_size,
        cfg.linger,
        false,
        "loop".into(),
    );
    let mut p = Pipeline::new(&cfg, publisher, metrics, SharedWatchlist::default());
    let mut reports = fat_tree_reports(5000);
    let src = "10.255.0.9:5000".parse().unwrap();
    let mut next_seq = vec![0u32; 64];
    let mut stamp = |r: &mut Vec<u8>| {
        let node = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) as usize % 64;
        let seq = next_seq[node] & 0x3F_FFFF;
        next_seq[node] += 1;
        let w = (u32::from_be_bytes([r[0], r[1], r[2], r[3]]) & !0x3F_FFFF) | seq;
        r[..4].copy_from_slice(&w.to_be_bytes());
    };
    let mut now = 1_000_000_000u64;
    for r in reports.iter_mut() {
        stamp(r);
        now += 1_000;
        p.datagram(r, src, now, false);
    }
    let t = std::time::Instant::now();
    for i in 0..n {
        let k = reports.len();
        let r = &mut reports[i % k];
        stamp(r);
        now += 1_000;
        p.datagram(std::hint::black_box(r), src, now, false);
    }
    let el = t.elapsed();
    println!(
        "{n} reports, {:.1} ns/report, {:.2} M reports/s",
        el.as_nanos() as f64 / n as f64,
        n as f64 / el.as_secs_f64() / 1e6
    );
    p.finish();
}
