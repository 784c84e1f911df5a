//! INT-label Figs. 9–10: the coverage rate and the INT bandwidth occupation vs the labelling
//! interval, at the paper's telemetry interval of 100 ms, Base A and Base B.

use super::super::{Comparison, Ctx, Experiment, Plot, Summary, Table};
use super::{MS, Setup, run};

pub struct Coverage;

const SWEEP: [u64; 8] = [20, 40, 50, 60, 80, 100, 150, 200];
const FAST_SWEEP: [u64; 3] = [20, 60, 200];
/// Background packets/s: the paper's 625 (its traffic's turning point) and our traffic's
/// turning point (`int-label-traffic`), where every port sees packets in every interval.
const RATES: [u64; 2] = [625, 2_500];

fn seconds(fast: bool) -> f64 {
    if fast { 2.0 } else { 20.0 }
}

impl Experiment for Coverage {
    fn name(&self) -> &'static str {
        "int-label-coverage"
    }
    fn about(&self) -> &'static str {
        "INT-label Figs. 9–10: coverage rate and INT bandwidth vs labelling interval (telemetry interval 100 ms)"
    }
    fn source(&self) -> &'static str {
        "INT-label (../shared/seeds/int-label-distributed-labeling.txt) §6.2"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "The paper's prototype in the emulator (as `int-label-packets`) for {} s of \
             virtual time; every 100 ms (the telemetry interval) the reports the last hops \
             exported so far are decoded by the collector's decoder into its Algorithm 4 \
             database, and the coverage rate of the interval is the share of the ports that \
             forwarded a packet in it (the emulator's ground truth) whose newest item was \
             labelled in it. `coverage` is the mean over the run's intervals after the first; \
             `bandwidth_pct` = INT option bytes / traffic bytes over the switches' links.",
            seconds(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(
            &["rate_pps", "algorithm", "interval_ms"],
            &[
                "telemetry_over_labelling",
                "coverage",
                "min_coverage",
                "bandwidth_pct",
            ],
        );
        let sweep: &[u64] = if ctx.fast { &FAST_SWEEP } else { &SWEEP };
        let rates: &[u64] = if ctx.fast { &RATES[..1] } else { &RATES };
        for &rate in rates {
            for (name, algorithm) in [("base-a", 0), ("base-b", 1)] {
                for &ms in sweep {
                    let o = run(
                        &Setup {
                            seconds: seconds(ctx.fast),
                            interval_ns: ms * MS,
                            algorithm,
                            rate_pps: rate as f64,
                            ..Setup::default()
                        },
                        ctx.seed,
                    )?;
                    t.push(vec![
                        rate.into(),
                        name.into(),
                        ms.into(),
                        (100.0 / ms as f64).into(),
                        o.mean_coverage().into(),
                        o.coverage.iter().copied().fold(1.0, f64::min).into(),
                        (o.bandwidth_share * 100.0).into(),
                    ]);
                }
            }
        }
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        let base = Plot {
            suffix: "",
            title: "Coverage rate vs telemetry interval / labelling interval (Fig. 9)",
            x: "telemetry_over_labelling",
            y: "coverage",
            series: &["rate_pps", "algorithm"],
            filter: &[],
            x_label: "telemetry interval / labelling interval",
            y_label: "coverage rate",
            log_x: false,
            log_y: false,
        };
        vec![
            base.clone(),
            Plot {
                suffix: "-bandwidth",
                title: "INT bandwidth occupation vs labelling interval (Fig. 10)",
                x: "interval_ms",
                y: "bandwidth_pct",
                x_label: "labelling interval T (ms)",
                y_label: "INT bytes / traffic bytes (%)",
                ..base
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let at = |rate: &str, a: &str, ms: &str, c: &str| t.value(&[rate, a, ms], c);
        let mut rows = vec![
            Comparison::new(
                "coverage at telemetry / labelling interval ≈ 1.6 (T = 60 ms), 625 packets/s",
                "> 0.98 (Base A and B)",
                format!(
                    "Base A {:.3}, Base B {:.3}",
                    at("625", "base-a", "60", "coverage"),
                    at("625", "base-b", "60", "coverage")
                ),
            ),
            Comparison::new(
                "coverage at 20 labels/s (T = 50 ms), resolution 10/s, 625 packets/s",
                "99.72 %",
                format!(
                    "Base A {:.2} %, Base B {:.2} %",
                    at("625", "base-a", "50", "coverage") * 100.0,
                    at("625", "base-b", "50", "coverage") * 100.0
                ),
            ),
            Comparison::new(
                "bandwidth: Base B vs Base A",
                "B higher (redundant labels)",
                format!(
                    "at T = 60 ms: A {:.3} %, B {:.3} %",
                    at("625", "base-a", "60", "bandwidth_pct"),
                    at("625", "base-b", "60", "bandwidth_pct")
                ),
            ),
        ];
        if t.values(&["2500", "base-a"], "coverage").is_empty() {
            return rows;
        }
        rows.push(Comparison::new(
            "the same at our traffic's turning point (2,500 packets/s): T = 60 ms; T = 50 ms",
            "> 0.98; 99.72 %",
            format!(
                "Base A {:.3}, Base B {:.3}; Base A {:.2} %, Base B {:.2} %",
                at("2500", "base-a", "60", "coverage"),
                at("2500", "base-b", "60", "coverage"),
                at("2500", "base-a", "50", "coverage") * 100.0,
                at("2500", "base-b", "50", "coverage") * 100.0
            ),
        ));
        rows
    }

    fn notes(&self) -> &'static str {
        "Ports count as covered when an item labelled within the interval reached the database \
         by the interval's end; the paper's BMv2 prototype also loses time to software \
         switching, which the emulator does not (its links are 10 Gb/s, 1 µs). Why below the \
         paper's > 0.98 at 625 packets/s: coverage needs packets, and at that rate many of our \
         ports forward too few per interval; the paper chose its rate at its own traffic's \
         turning point, ours lies near 2,500 packets/s (`int-label-traffic`), and there both \
         bases are above the paper's figures (the 2500 rows)."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let mut problems = Vec::new();
        for (r, a) in RATES
            .iter()
            .flat_map(|r| ["base-a", "base-b"].map(|a| (r.to_string(), a)))
        {
            let col = |c: &str| t.values(&[r.as_str(), a], c);
            if col("coverage").is_empty() {
                continue;
            }
            let (cov, bw) = (col("coverage"), col("bandwidth_pct"));
            if cov.first() <= cov.last() {
                problems.push(format!(
                    "{a} at {r} packets/s: coverage did not fall with a longer T: {cov:?}"
                ));
            }
            if cov.windows(2).any(|w| w[1] > w[0] + 0.02) {
                problems.push(format!(
                    "{a} at {r} packets/s: coverage rose with T: {cov:?}"
                ));
            }
            if bw.windows(2).any(|w| w[1] > w[0]) {
                problems.push(format!(
                    "{a} at {r} packets/s: INT bandwidth rose with T: {bw:?}"
                ));
            }
        }
        problems
    }
}
