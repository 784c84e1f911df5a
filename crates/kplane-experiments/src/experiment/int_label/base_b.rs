//! INT-label Figs. 17–19: how Base B gathers items — packets by the items they carry (Base A
//! vs Base B), the rest time T1, and the probability function F1 / F2 / F3.

use super::super::{Comparison, Ctx, Experiment, Plot, Summary, Table};
use super::{MS, Setup, run};

pub struct BaseB;

/// The paper counts 10,000 packets: 16 s at 625 packets/s.
fn seconds(fast: bool) -> f64 {
    if fast { 2.0 } else { 16.0 }
}

const INTERVAL_MS: u64 = 100;
const REST: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
const FAST_REST: [f64; 2] = [0.0, 1.0];

impl Experiment for BaseB {
    fn name(&self) -> &'static str {
        "int-label-base-b"
    }
    fn about(&self) -> &'static str {
        "INT-label Figs. 17–19: packets by labelling times (Base A vs B), Base B's rest time T1 and probability function"
    }
    fn source(&self) -> &'static str {
        "INT-label (../shared/seeds/int-label-distributed-labeling.txt) §6.4"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "As `int-label-packets` ({} s of virtual time, ≈ 10,000 packets at 625 packets/s), \
             T = {INTERVAL_MS} ms. **items** (Fig. 17): exported packets by the items they \
             carried (`x`), Base A and Base B (F1). **rest** (Fig. 18): Base B (F1) with the \
             rest time T1 = x·T. **function** (Fig. 19): Base B with F1, F2, F3 (`x` = 1, 2, \
             3), T1 = 0. `labelled_packets`: exported packets; `labels`: labelling times.",
            seconds(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(&["sweep", "setting", "x"], &["labelled_packets", "labels"]);
        let setup = |algorithm: u64, function: u64, rest: f64| Setup {
            seconds: seconds(ctx.fast),
            interval_ns: INTERVAL_MS * MS,
            algorithm,
            function,
            rest_ns: (rest * (INTERVAL_MS * MS) as f64) as u64,
            ..Setup::default()
        };
        for (name, algorithm) in [("base-a", 0), ("base-b", 1)] {
            let o = run(&setup(algorithm, 1, 0.0), ctx.seed)?;
            for items in 1..=5u64 {
                let n = o.items_per_packet[items as usize];
                t.push(vec![
                    "items".into(),
                    name.into(),
                    items.into(),
                    n.into(),
                    (n * items).into(),
                ]);
            }
        }
        let rest: &[f64] = if ctx.fast { &FAST_REST } else { &REST };
        for &r in rest {
            let o = run(&setup(1, 1, r), ctx.seed)?;
            t.push(vec![
                "rest".into(),
                "base-b".into(),
                r.into(),
                o.labelled_packets.into(),
                o.labels.into(),
            ]);
        }
        for (name, f) in [("f1", 1), ("f2", 2), ("f3", 3)] {
            let o = run(&setup(1, f, 0.0), ctx.seed)?;
            t.push(vec![
                "function".into(),
                name.into(),
                f.into(),
                o.labelled_packets.into(),
                o.labels.into(),
            ]);
        }
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        let items = Plot {
            suffix: "-items",
            title: "Packets by labelling times (Fig. 17)",
            x: "x",
            y: "labelled_packets",
            series: &["setting"],
            filter: &[("sweep", "items")],
            x_label: "items a packet carried",
            y_label: "packets",
            log_x: false,
            log_y: false,
        };
        vec![
            items.clone(),
            Plot {
                suffix: "-rest",
                title: "Base B: labelled packets vs rest time (Fig. 18)",
                filter: &[("sweep", "rest")],
                x_label: "T1 / T",
                y_label: "labelled packets",
                ..items.clone()
            },
            Plot {
                suffix: "-rest-labels",
                title: "Base B: labelling times vs rest time (Fig. 18)",
                y: "labels",
                filter: &[("sweep", "rest")],
                x_label: "T1 / T",
                y_label: "labelling times",
                ..items.clone()
            },
            Plot {
                suffix: "-function",
                title: "Base B: labelled packets by probability function (Fig. 19; x: F1, F2, F3)",
                filter: &[("sweep", "function")],
                x_label: "function (1: F1, 2: F2, 3: F3)",
                y_label: "labelled packets",
                ..items
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let items = |a: &str| t.values(&["items", a], "labelled_packets");
        let share = |v: &[f64], from: usize| {
            v[from..].iter().sum::<f64>() / v.iter().sum::<f64>().max(1.0) * 100.0
        };
        let (a, b) = (items("base-a"), items("base-b"));
        let rest = |c: &str| t.values(&["rest", "base-b"], c);
        let function = |f: &str, c: &str| t.value(&["function", f], c);
        vec![
            Comparison::new(
                "packets with 4–5 items, Base A vs Base B (Fig. 17)",
                "few vs many (5 items second only to 1 in Base B)",
                format!("{:.1} % vs {:.1} %", share(&a, 3), share(&b, 3)),
            ),
            Comparison::new(
                "rest time 0 → T: labelling times, labelled packets (Fig. 18)",
                "fall, rise",
                format!(
                    "{:.0} → {:.0}, {:.0} → {:.0}",
                    rest("labels").first().copied().unwrap_or(f64::NAN),
                    rest("labels").last().copied().unwrap_or(f64::NAN),
                    rest("labelled_packets")
                        .first()
                        .copied()
                        .unwrap_or(f64::NAN),
                    rest("labelled_packets").last().copied().unwrap_or(f64::NAN)
                ),
            ),
            Comparison::new(
                "labelled packets F1 / F2 / F3 (Fig. 19)",
                "F1 fewest, then F2, F3",
                format!(
                    "{:.0} / {:.0} / {:.0}",
                    function("f1", "labelled_packets"),
                    function("f2", "labelled_packets"),
                    function("f3", "labelled_packets")
                ),
            ),
        ]
    }

    fn notes(&self) -> &'static str {
        "In the emulator Base A's exported packets carry 2 items most often, the paper's 1: \
         ECMP spreads the 625 packets/s over every port, so a port sees few packets per \
         labelling interval and the first packet after T at one port is often the first \
         after T at the next one too; the paper's prototype routes over fixed paths that \
         concentrate the traffic on fewer ports. Base B's shift towards 4–5 items, the rest \
         time's trade-off (fewer labels, more exported packets) and F1 < F2 < F3 in \
         exported packets are the paper's."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let mut problems = Vec::new();
        let items = |a: &str| t.values(&["items", a], "labelled_packets");
        let (a, b) = (items("base-a"), items("base-b"));
        let many = |v: &[f64]| v[3..].iter().sum::<f64>() / v.iter().sum::<f64>().max(1.0);
        if many(&b) <= many(&a) {
            problems.push(format!(
                "Base B did not gather more items per packet: {b:?} vs Base A {a:?}"
            ));
        }
        let labels = t.values(&["rest", "base-b"], "labels");
        let packets = t.values(&["rest", "base-b"], "labelled_packets");
        if labels.last() >= labels.first() || packets.last() <= packets.first() {
            problems.push(format!(
                "a longer rest time should mean fewer labels and more labelled packets: {labels:?}, {packets:?}"
            ));
        }
        let f = |n: &str| t.value(&["function", n], "labelled_packets");
        if f("f1") > f("f3") {
            problems.push(format!(
                "F1 exported more packets than F3: {} vs {}",
                f("f1"),
                f("f3")
            ));
        }
        problems
    }
}
