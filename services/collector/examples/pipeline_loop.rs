//! The collector pipeline benchmark's fixture run N times (for profilers:
//! `valgrind --tool=callgrind`); prints ns per report.
use kplane_collector::bench::PipelineFixture;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let mut f = PipelineFixture::new(
        std::env::var("FLOWS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5000),
    );
    let t = std::time::Instant::now();
    for _ in 0..n {
        f.step();
    }
    let el = t.elapsed();
    println!(
        "{n} reports, {:.1} ns/report, {:.2} M reports/s",
        el.as_nanos() as f64 / n as f64,
        n as f64 / el.as_secs_f64() / 1e6
    );
    f.finish();
}
