//! INT-label Fig. 6: the coverage rate and the INT bandwidth occupation vs the background
//! traffic rate, Base A and Base B, at the paper's default labelling interval of 50 ms.

use super::super::{Comparison, Ctx, Experiment, Plot, Summary, Table};
use super::{Setup, run};

pub struct Traffic;

/// Packets per second of 1 kB: 1 to 40 Mb/s (the paper's default ≈ 5 Mb/s is 625).
const SWEEP: [u64; 6] = [125, 250, 625, 1_250, 2_500, 5_000];
const FAST_SWEEP: [u64; 2] = [125, 2_500];

fn seconds(fast: bool) -> f64 {
    if fast { 2.0 } else { 10.0 }
}

impl Experiment for Traffic {
    fn name(&self) -> &'static str {
        "int-label-traffic"
    }
    fn about(&self) -> &'static str {
        "INT-label Fig. 6: coverage rate and INT bandwidth vs the background traffic rate (T = 50 ms)"
    }
    fn source(&self) -> &'static str {
        "INT-label (../shared/seeds/int-label-distributed-labeling.txt) §6.2"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "As `int-label-coverage` ({} s of virtual time per point, T = 50 ms, telemetry \
             interval 100 ms) with the background rate swept: servers 1 and 8 send 1 kB \
             packets at the given packets/s in all (`mbps` = the same in Mb/s).",
            seconds(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(
            &["algorithm", "packets_per_s"],
            &["mbps", "coverage", "bandwidth_pct"],
        );
        let sweep: &[u64] = if ctx.fast { &FAST_SWEEP } else { &SWEEP };
        for (name, algorithm) in [("base-a", 0), ("base-b", 1)] {
            for &pps in sweep {
                let o = run(
                    &Setup {
                        seconds: seconds(ctx.fast),
                        rate_pps: pps as f64,
                        algorithm,
                        ..Setup::default()
                    },
                    ctx.seed,
                )?;
                t.push(vec![
                    name.into(),
                    pps.into(),
                    (pps as f64 * 8e3 / 1e6).into(),
                    o.mean_coverage().into(),
                    (o.bandwidth_share * 100.0).into(),
                ]);
            }
        }
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        let base = Plot {
            suffix: "",
            title: "Coverage rate vs background traffic (Fig. 6)",
            x: "mbps",
            y: "coverage",
            series: &["algorithm"],
            filter: &[],
            x_label: "background traffic (Mb/s)",
            y_label: "coverage rate",
            log_x: true,
            log_y: false,
        };
        vec![
            base.clone(),
            Plot {
                suffix: "-bandwidth",
                title: "INT bandwidth occupation vs background traffic (Fig. 6)",
                y: "bandwidth_pct",
                y_label: "INT bytes / traffic bytes (%)",
                ..base
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let ends = |a: &str, c: &str| {
            let v = t.values(&[a], c);
            (
                v.first().copied().unwrap_or(f64::NAN),
                v.last().copied().unwrap_or(f64::NAN),
            )
        };
        let (ca0, ca1) = ends("base-a", "coverage");
        let (ba0, ba1) = ends("base-a", "bandwidth_pct");
        let (cb0, cb1) = ends("base-b", "coverage");
        vec![
            Comparison::new(
                "coverage as traffic grows (lowest → highest rate)",
                "rises to a turning point",
                format!("Base A {ca0:.3} → {ca1:.3}; Base B {cb0:.3} → {cb1:.3}"),
            ),
            Comparison::new(
                "INT bandwidth as traffic grows",
                "falls (fewer items per packet)",
                format!("Base A {ba0:.2} % → {ba1:.2} %"),
            ),
        ]
    }

    fn notes(&self) -> &'static str {
        "Coverage needs packets: a port that forwards no packet after its interval has passed \
         cannot be labelled, so coverage follows the traffic per port until every port sees \
         several packets per labelling interval; the option's bytes grow with the number of \
         labelled packets (about one per port per interval), the traffic's with the rate."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let mut problems = Vec::new();
        for a in ["base-a", "base-b"] {
            let col = |c: &str| t.values(&[a], c);
            let (cov, bw) = (col("coverage"), col("bandwidth_pct"));
            if cov.first() >= cov.last() {
                problems.push(format!("{a}: coverage did not rise with traffic: {cov:?}"));
            }
            if bw.first() <= bw.last() {
                problems.push(format!("{a}: INT bandwidth share did not fall: {bw:?}"));
            }
        }
        problems
    }
}
