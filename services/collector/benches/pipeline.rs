//! From memory: datagram → decode → loss accounting → event detection → Arrow batch, one
//! core, on 5000 flows' 5-hop TR v2.0 reports (bitmap 0xFF00) with steady values (the common
//! case: few events; every exporter's sequence numbers in order, as a switch sends them).
//! Reports/s. The fixture: `kplane_collector::bench::PipelineFixture`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kplane_collector::bench::PipelineFixture;

fn pipeline(c: &mut Criterion) {
    let mut f = PipelineFixture::new(5000);
    let mut g = c.benchmark_group("collector_pipeline");
    g.throughput(Throughput::Elements(1));
    g.bench_function("tr_v2.0_5hop_0xff00_steady", |b| b.iter(|| f.step()));
    g.finish();
    f.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
