//! INT-label Figs. 7–8: packets carrying INT data and labelling times vs the labelling
//! interval, Base A vs Base B.

use super::super::{Comparison, Ctx, Experiment, Plot, Summary, Table};
use super::{MS, Setup, run};

pub struct Packets;

const SWEEP: [u64; 5] = [10, 20, 50, 100, 200];
const FAST_SWEEP: [u64; 2] = [20, 100];
/// The paper's background rate, and denser ones: how much Base B's redundant labels cost
/// depends on how many packets a port sees per interval.
const RATES: [u64; 3] = [625, 2_500, 10_000];

/// The paper generates 10,000 packets: 16 s at 625 packets/s.
fn seconds(fast: bool) -> f64 {
    if fast { 2.0 } else { 16.0 }
}

impl Experiment for Packets {
    fn name(&self) -> &'static str {
        "int-label-packets"
    }
    fn about(&self) -> &'static str {
        "INT-label Figs. 7–8: labelled packets and labelling times vs the labelling interval, Base A vs Base B"
    }
    fn source(&self) -> &'static str {
        "INT-label (../shared/seeds/int-label-distributed-labeling.txt) §6.2"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "The paper's prototype in the emulator: 4 spine, 4 leaf and 4 ToR switches, 8 \
             servers; servers 1 and 8 send 1 kB packets to random others at 625 packets/s \
             (≈ 5 Mb/s; also 2,500 and 10,000, `rate_pps`) for {} s of virtual time; every egress port runs `set_labelling` \
             (MAX_hop 5; Base B with the paper's default f = F1) with the interval T swept. \
             `labelled_packets`: packets whose items the last hop exported; `labels`: \
             labelling times in the data plane. Base A and B see the same traffic (Base B's \
             draws come from a generator of their own).",
            seconds(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(
            &["rate_pps", "algorithm", "interval_ms"],
            &[
                "packets",
                "labelled_packets",
                "labels",
                "items_per_labelled_packet",
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
                            rate_pps: rate as f64,
                            interval_ns: ms * MS,
                            algorithm,
                            ..Setup::default()
                        },
                        ctx.seed,
                    )?;
                    t.push(vec![
                        rate.into(),
                        name.into(),
                        ms.into(),
                        o.packets_sent.into(),
                        o.labelled_packets.into(),
                        o.labels.into(),
                        (o.labels as f64 / o.labelled_packets.max(1) as f64).into(),
                    ]);
                }
            }
        }
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        let base = Plot {
            suffix: "",
            title: "Packets carrying INT data vs labelling interval (Fig. 7)",
            x: "interval_ms",
            y: "labelled_packets",
            series: &["algorithm"],
            filter: &[("rate_pps", "625")],
            x_label: "labelling interval T (ms)",
            y_label: "labelled packets",
            log_x: true,
            log_y: false,
        };
        vec![
            base.clone(),
            Plot {
                suffix: "-labels",
                title: "Labelling times vs labelling interval (Fig. 8)",
                y: "labels",
                y_label: "labelling times",
                ..base
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let at = |r: &str, a: &str, ms: &str, c: &str| t.value(&[r, a, ms], c);
        let ms = if t.rows.iter().any(|r| r[2].text() == "100") {
            "100"
        } else {
            "20"
        };
        let change =
            |r: &str, c: &str| (at(r, "base-b", ms, c) / at(r, "base-a", ms, c) - 1.0) * 100.0;
        let rates: Vec<String> = RATES
            .iter()
            .map(|r| r.to_string())
            .filter(|r| t.rows.iter().any(|row| row[0].text() == *r))
            .collect();
        vec![
            Comparison::new(
                format!("labelled packets, Base B vs Base A at T = {ms} ms"),
                "−35.2 % (T = 100 ms)",
                format!(
                    "{:+.1} % ({:.0} vs {:.0})",
                    change("625", "labelled_packets"),
                    at("625", "base-b", ms, "labelled_packets"),
                    at("625", "base-a", ms, "labelled_packets")
                ),
            ),
            Comparison::new(
                format!("labelling times, Base B vs Base A at T = {ms} ms, by background rate"),
                "a few more (Fig. 8, 625 packets/s)",
                rates
                    .iter()
                    .map(|r| format!("{:+.1} % at {r}/s", change(r, "labels")))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ]
    }

    fn notes(&self) -> &'static str {
        "The paper's prototype runs BMv2 switches in Mininet with pre-installed routes that \
         leave some ports without traffic; the emulator routes by ECMP over shortest paths, so \
         more ports carry traffic and each carries less of it.\n\n\
         **Fig. 8: why Base B labels so much more here.** The labels are the labelled \
         packets times the items each carries: at T = 100 ms Base B labels 29 % fewer packets \
         and each carries 3.6 items against Base A's 1.5 (with F1 a packet labelled once is \
         labelled at every later hop, so it carries the hops left on its path), hence \
         0.71 × 2.4 ≈ 1.7 times the labels. The paper's own Figs. 7 and 17 imply the same \
         arithmetic (Base B 35 % fewer packets, most of them carrying 5 items where Base A's \
         carry 1), which is more than \"a few\" more labels; its Fig. 8 gives no number to \
         set beside it. A sparse background is not the cause: the `rate_pps` rows keep the \
         excess at +72 %, +82 % and +80 % from 625 to 10,000 packets/s, because a port late \
         on many paths receives propagated labels from every port upstream of it, several \
         per interval, while its own interval label is one. What differs from the paper is \
         Base A's 1.5 items per packet (ECMP, see `int-label-base-b`), which makes our ratio \
         of items lower, not higher."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let mut problems = Vec::new();
        for r in RATES.map(|r| r.to_string()) {
            let col = |a: &str, c: &str| t.values(&[&r, a], c);
            let (a, b) = (
                col("base-a", "labelled_packets"),
                col("base-b", "labelled_packets"),
            );
            if a.windows(2).any(|w| w[1] > w[0]) {
                problems.push(format!(
                    "{r}/s: Base A labelled more packets at a longer T: {a:?}"
                ));
            }
            if a.iter().zip(&b).any(|(a, b)| b > a) {
                problems.push(format!(
                    "{r}/s: Base B labelled more packets than Base A: {b:?} vs {a:?}"
                ));
            }
        }
        problems
    }
}
