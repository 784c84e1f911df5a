//! Decodes the 5-hop TR v2.0 sample N times (for profilers: `valgrind --tool=callgrind`).
use kplane_wire::{Decoder, RecordMeta, samples};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let payload = samples::tr_v20_5hop_payload();
    let mut d = Decoder::new(samples::options());
    let mut hops = 0;
    let t = std::time::Instant::now();
    for _ in 0..n {
        d.decode_report(std::hint::black_box(&payload), RecordMeta::default(), |r| {
            hops += r.hops.len()
        });
    }
    let el = t.elapsed();
    println!(
        "{n} reports, {hops} hops, {:.1} ns/report, {:.2} M reports/s",
        el.as_nanos() as f64 / n as f64,
        n as f64 / el.as_secs_f64() / 1e6
    );
}
