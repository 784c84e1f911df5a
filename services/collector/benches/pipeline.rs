//! From memory: datagram → decode → loss accounting → event detection → Arrow batch, one
//! core, on 5000 flows' 5-hop TR v2.0 reports (bitmap 0xFF00) with steady values (the common
//! case: few events). Reports/s.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kplane_bus::{BusError, Message, Producer};
use kplane_collector::Config;
use kplane_collector::bench::{Rng, fat_tree_path};
use kplane_collector::metrics::CollectorMetrics;
use kplane_collector::pipeline::{Pipeline, SharedWatchlist};
use kplane_collector::publish::Publisher;
use kplane_wire::build::{Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, sample_hop};
use kplane_wire::int::IntVersion;
use kplane_wire::report::v20::GroupHeader;

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

fn reports(flows: u32) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(7);
    (0..flows)
        .map(|i| {
            let (s, d) = (rng.below(16) as u32, rng.below(16) as u32);
            let d = if d / 4 == s / 4 { (d + 4) % 16 } else { d };
            let path = fat_tree_path(s, d, rng.next_u64());
            let hops = path
                .iter()
                .map(|&(sw, _)| sample_hop(sw, 5_000, 100))
                .collect();
            let src = std::net::Ipv4Addr::from(0x0A00_0000 + i);
            let flow = FlowSpec::udp(
                src.into(),
                std::net::Ipv4Addr::new(10, 255, 0, 1).into(),
                1000,
                80,
            );
            let inner = PacketSpec {
                ethernet: false,
                ..PacketSpec::new(flow).with_int(
                    IntSpec::new(IntVersion::V2, 0xFF00, hops),
                    Encap::UdpPort { port: 0x4568 },
                )
            }
            .build();
            kplane_wire::build::report_v20(
                GroupHeader {
                    node_id: path[4].0,
                    sequence: i,
                    ..GroupHeader::default()
                },
                &[IndividualSpec::int(
                    0x7C00,
                    sample_hop(path[4].0, 5_000, 100),
                    4,
                    inner,
                )],
            )
        })
        .collect()
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
    let reports = reports(5000);
    let src = "10.255.0.9:5000".parse().unwrap();
    // Warm up: every key exists, as in steady state.
    for (i, r) in reports.iter().enumerate() {
        p.datagram(r, src, 1_000_000_000 + i as u64, false);
    }
    let mut g = c.benchmark_group("collector_pipeline");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    let mut now = 2_000_000_000u64;
    g.bench_function("tr_v2.0_5hop_0xff00_steady", |b| {
        b.iter(|| {
            let r = &reports[i % reports.len()];
            i += 1;
            now += 1_000;
            p.datagram(black_box(r), src, now, false);
        })
    });
    g.finish();
    p.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
