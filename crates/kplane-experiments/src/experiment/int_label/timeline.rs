//! INT-label Fig. 11: the network-wide coverage rate over time, telemetry interval by
//! telemetry interval, for Base A at several labelling intervals.

use super::super::{Comparison, Ctx, Experiment, Plot, Summary, Table};
use super::{MS, Setup, run};

pub struct Timeline;

const INTERVALS: [u64; 3] = [20, 50, 80];

fn seconds(fast: bool) -> f64 {
    if fast { 1.5 } else { 5.0 }
}

impl Experiment for Timeline {
    fn name(&self) -> &'static str {
        "int-label-timeline"
    }
    fn about(&self) -> &'static str {
        "INT-label Fig. 11: coverage rate over time for labelling intervals of 20, 50 and 80 ms (Base A)"
    }
    fn source(&self) -> &'static str {
        "INT-label (../shared/seeds/int-label-distributed-labeling.txt) §6.2"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "As `int-label-coverage` (Base A, 625 packets/s, telemetry interval 100 ms) for {} \
             s of virtual time: the coverage rate of every telemetry interval after the first, \
             at each labelling interval T.",
            seconds(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(&["interval_ms", "t_ms"], &["coverage"]);
        for ms in INTERVALS {
            let o = run(
                &Setup {
                    seconds: seconds(ctx.fast),
                    interval_ns: ms * MS,
                    ..Setup::default()
                },
                ctx.seed,
            )?;
            for (i, c) in o.coverage.iter().enumerate() {
                // Coverage of the interval ending at (i + 2) × 100 ms (the first is skipped).
                t.push(vec![ms.into(), ((i as u64 + 2) * 100).into(), (*c).into()]);
            }
        }
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        vec![Plot {
            suffix: "",
            title: "Coverage rate over time, Base A (Fig. 11)",
            x: "t_ms",
            y: "coverage",
            series: &["interval_ms"],
            filter: &[],
            x_label: "time (ms)",
            y_label: "coverage rate",
            log_x: false,
            log_y: false,
        }]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let stats = |ms: &str| {
            let v = s.means.values(&[ms], "coverage");
            let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
            let min = v.iter().copied().fold(1.0, f64::min);
            (mean, min)
        };
        let ((m20, lo20), (m80, lo80)) = (stats("20"), stats("80"));
        vec![Comparison::new(
            "T = 20 ms vs T = 80 ms: mean (lowest) coverage",
            "20 ms: always 100 %; longer T: more jitter",
            format!(
                "20 ms: {:.1} % ({:.1} %); 80 ms: {:.1} % ({:.1} %)",
                m20 * 100.0,
                lo20 * 100.0,
                m80 * 100.0,
                lo80 * 100.0
            ),
        )]
    }

    fn notes(&self) -> &'static str {
        "The paper's jitter comes from labelled packets queuing on congested BMv2 links past \
         the interval's deadline; in the emulator (10 Gb/s links, light traffic) it comes from \
         ports whose next packet after the interval arrives late or not at all."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let mean = |ms: &str| {
            let v = s.means.values(&[ms], "coverage");
            v.iter().sum::<f64>() / v.len().max(1) as f64
        };
        let (a, b, c) = (mean("20"), mean("50"), mean("80"));
        if a >= b && b >= c && a > c {
            Vec::new()
        } else {
            vec![format!(
                "coverage did not fall as T grew: 20 ms {a:.3}, 50 ms {b:.3}, 80 ms {c:.3}"
            )]
        }
    }
}
