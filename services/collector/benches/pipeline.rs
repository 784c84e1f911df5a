//! From memory: datagram → decode → loss accounting → event detection → Arrow batch, one
//! core, on 5000 flows' 5-hop TR v2.0 reports (bitmap 0xFF00) with steady values (the common
//! case: few events; every exporter's sequence numbers in order, as a switch sends them).
//! Reports/s.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kplane_bus::{BusError, Message, Producer};
use kplane_collector::Config;
use kplane_collector::bench::fat_tree_reports;
use kplane_collector::metrics::CollectorMetrics;
use kplane_collector::pipeline::{Pipeline, SharedWatchlist};
use kplane_collector::publish::Publisher;

/// Accepts and forgets: measures the collector, not a bus.
struct Null;

impl Producer for Null {
    fn send(&self, _: Message) -> Result<(), BusError> {
        Ok(())
    }
    fn partitions(&self, _: &str) -> Result<u32, BusError> {
        Ok(8)
    }
}

fn pipeline(c: &mut Criterion) {
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
        "bench".into(),
    );
    let mut p = Pipeline::new(&cfg, publisher, metrics, SharedWatchlist::default());
    let mut reports = fat_tree_reports(5000);
    let src = "10.255.0.9:5000".parse().unwrap();
    // Each exporter numbers its reports 0, 1, 2, … as a switch does: the replayed reports
    // get their sink's next sequence number written into the group header (22 bits).
    let mut next_seq = vec![0u32; 64];
    let mut stamp = move |r: &mut Vec<u8>| {
        let node = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) as usize % 64;
        let seq = next_seq[node] & 0x3F_FFFF;
        next_seq[node] += 1;
        let w = (u32::from_be_bytes([r[0], r[1], r[2], r[3]]) & !0x3F_FFFF) | seq;
        r[..4].copy_from_slice(&w.to_be_bytes());
    };
    // Warm up: every key exists, as in steady state.
    for (i, r) in reports.iter_mut().enumerate() {
        stamp(r);
        p.datagram(r, src, 1_000_000_000 + i as u64, false);
    }
    let mut g = c.benchmark_group("collector_pipeline");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    let mut now = 2_000_000_000u64;
    g.bench_function("tr_v2.0_5hop_0xff00_steady", |b| {
        b.iter(|| {
            let n = reports.len();
            let r = &mut reports[i % n];
            i += 1;
            now += 1_000;
            stamp(r);
            p.datagram(black_box(r), src, now, false);
        })
    });
    g.finish();
    p.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
