//! Decode throughput, in reports per second, for the inputs named in issue 2:
//! TR v2.0 + 5-hop INT-MD (bitmap 0xFF00), TR v0.5 switch-local, TR v1.0 + INT v1.0 6 hops,
//! INT-MD v2.1 over Geneve. Each iteration decodes one report all the way into the reused
//! normalised record (`ReportRecord`), the way the collector will. The first input is also
//! measured through the general parser alone, beside the fast path that normally takes it.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kplane_model::ReportRecord;
use kplane_wire::{Decoder, RecordMeta, Start, decode_frame, samples};

fn reports(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_to_record");
    g.throughput(Throughput::Elements(1));
    let cases = [
        ("tr_v2.0_int_md_5hop_0xff00", samples::tr_v20_5hop_payload()),
        // The same report with instruction sets that have no constant-bitmap decoder.
        (
            "tr_v2.0_int_md_5hop_0xfd80_generic_bitmap",
            samples::tr_v20_5hop_payload_with(0xFD80, 0x7D80),
        ),
        ("tr_v0.5_switch_local", samples::tr_v05_local_payload()),
        ("tr_v1.0_int_v1.0_6hop", samples::tr_v10_6hop_payload()),
    ];
    for (name, payload) in cases {
        let mut decoder = Decoder::new(samples::options());
        let meta = RecordMeta::default();
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut hops = 0;
                let o = decoder.decode_report(black_box(&payload), meta, |r| hops += r.hops.len());
                black_box((o, hops))
            })
        });
    }
    // The same first input through the general parser only: what the fast path saves.
    let payload = samples::tr_v20_5hop_payload();
    let mut general = Decoder::general_only(samples::options());
    g.bench_function("tr_v2.0_int_md_5hop_0xff00_general_parser", |b| {
        b.iter(|| {
            let mut hops = 0;
            let o = general.decode_report(black_box(&payload), RecordMeta::default(), |r| {
                hops += r.hops.len()
            });
            black_box((o, hops))
        })
    });
    let frame = samples::int_md_geneve();
    let opts = samples::options();
    let mut rec = ReportRecord::default();
    g.bench_function("int_md_v2.1_geneve_frame", |b| {
        b.iter(|| {
            let d = decode_frame(black_box(&frame), Start::Ethernet, &opts).ok();
            let n = d.map(|d| d.for_each_record(RecordMeta::default(), &mut rec, |_| {}));
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, reports);
criterion_main!(benches);
