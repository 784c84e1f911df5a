//! GPINT Figs. 9–11: probe loss, collection latency and failed sessions under low and high
//! background load as the network grows, without data recovery.

use super::super::{Comparison, Ctx, Experiment, Plot, Summary, Table};
use super::{Variant, at_largest, size_sweep, worst};

pub struct Congestion;

pub const APPROACHES: [&str; 5] = ["gpint-2", "gpint-3", "gpint-5", "euler", "snmp"];
const SIZES: [usize; 5] = [20, 40, 60, 80, 100];
const FAST_SIZES: [usize; 2] = [20, 40];

pub fn sessions(fast: bool) -> usize {
    if fast { 2 } else { 10 }
}

impl Experiment for Congestion {
    fn name(&self) -> &'static str {
        "gpint-congestion"
    }
    fn about(&self) -> &'static str {
        "GPINT Figs. 9–11: probe loss, collection latency and failed sessions vs network size under low/high load, no recovery"
    }
    fn source(&self) -> &'static str {
        "GPINT (../shared/seeds/gpint-reliable-int-monitoring.txt) §V-B1, §V-B2"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "Watts–Strogatz graphs (degree 4, rewiring 0.2) of {:?} switches, 60 hosts on \
             random switches each sending to another over a shortest path; the background \
             reaching a switch is what those flows bring, scaled so the busiest switch \
             receives 10 k (low) or 14 k (high) packets/s; each switch serves 12 k packets/s \
             from a queue of 1000 (`kplane_emulator::probe`), so under the high load the \
             busiest switches drop and delay what reaches them. {} measurement sessions per run; the \
             orchestrator keeps 12 probes (SNMP: requests) in flight. GPINT-2/3/5 and Euler \
             probe the plan's paths (`kplane_probe::PLANNERS`); SNMP polls every switch (its \
             agent takes 5 ms a request). No recovery: a session fails when one probe is \
             lost. **latency_s**: first probe sent → last received, over complete sessions; \
             **failed_pct**: sessions with a lost probe; **probe_loss_pct**: probes lost of \
             those sent.",
            if fast { &FAST_SIZES[..] } else { &SIZES[..] },
            sessions(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(
            &["load", "approach", "switches"],
            &["latency_s", "failed_pct", "probe_loss_pct", "probes"],
        );
        let sizes: &[usize] = if ctx.fast { &FAST_SIZES } else { &SIZES };
        let variants: Vec<Variant> = APPROACHES.iter().map(|a| (*a, *a, None)).collect();
        size_sweep(&mut t, ctx, sizes, &variants, |o| {
            vec![
                o.latency_s.into(),
                o.failed_pct.into(),
                o.probe_loss_pct.into(),
                o.probes.into(),
            ]
        })?;
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        let base = Plot {
            suffix: "-latency-low",
            title: "Collection latency under low load (Fig. 10a)",
            x: "switches",
            y: "latency_s",
            series: &["approach"],
            filter: &[("load", "low")],
            x_label: "switches",
            y_label: "latency (s)",
            log_x: false,
            log_y: false,
        };
        vec![
            base.clone(),
            Plot {
                suffix: "-latency-high",
                title: "Collection latency under high load (Fig. 11a)",
                filter: &[("load", "high")],
                ..base.clone()
            },
            Plot {
                suffix: "-failed-high",
                title: "Failed sessions under high load (Fig. 11b)",
                y: "failed_pct",
                filter: &[("load", "high")],
                y_label: "failed sessions (%)",
                ..base.clone()
            },
            Plot {
                suffix: "-loss-high",
                title: "Probes lost under high load (Fig. 9b)",
                y: "probe_loss_pct",
                filter: &[("load", "high")],
                y_label: "probes lost (%)",
                ..base
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let worst = |load: &str, a: &str, col: &str| worst(t, load, a, col);
        let last = |load: &str, a: &str, col: &str| at_largest(t, load, a, col);
        let gpint_loss = ["gpint-2", "gpint-3", "gpint-5"]
            .map(|a| worst("high", a, "probe_loss_pct"))
            .into_iter()
            .fold(0.0, f64::max);
        vec![
            Comparison::new(
                "probes lost under high load (Fig. 9b)",
                "Euler up to 15 %, GPINT ≤ 5 %",
                format!(
                    "Euler up to {:.1} %, GPINT up to {gpint_loss:.1} %",
                    worst("high", "euler", "probe_loss_pct")
                ),
            ),
            Comparison::new(
                "latency at the largest network, low load (Fig. 10a)",
                "GPINT least, Euler far longer, SNMP growing with size",
                format!(
                    "GPINT-3 {:.3} s, Euler {:.3} s, SNMP {:.3} s",
                    last("low", "gpint-3", "latency_s"),
                    last("low", "euler", "latency_s"),
                    last("low", "snmp", "latency_s")
                ),
            ),
            Comparison::new(
                "failed sessions at the largest network, high load (Fig. 11b)",
                "Euler most (sessions rarely complete), GPINT under 40 %",
                format!(
                    "Euler {:.0} %, GPINT-3 {:.0} %, GPINT-5 {:.0} %",
                    last("high", "euler", "failed_pct"),
                    last("high", "gpint-3", "failed_pct"),
                    last("high", "gpint-5", "failed_pct")
                ),
            ),
        ]
    }

    fn notes(&self) -> &'static str {
        "The paper's switches are BMv2 processes sharing one 6-core server, so every switch it \
         adds takes processing from the others and losses grow with the network; kplane's \
         switches each have a fixed capacity, and the load is pinned at the busiest switch \
         while 60 hosts' flows spread over more switches, so a probe crosses fewer overloaded \
         switches as the network grows and its loss falls with size — the ordering holds \
         (Euler loses most and fails most sessions, GPINT-5's short paths least), the trend \
         with size does not. Latencies are far shorter than the paper's (no per-hop software \
         forwarding): compare orderings, not seconds."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let mut problems = Vec::new();
        let last = |load: &str, a: &str, col: &str| at_largest(t, load, a, col);
        let euler_loses_more =
            last("high", "euler", "probe_loss_pct") > last("high", "gpint-3", "probe_loss_pct");
        if !euler_loses_more {
            problems.push("Euler did not lose more probes than GPINT-3 under high load".into());
        }
        let euler_slower = last("low", "euler", "latency_s") > last("low", "gpint-3", "latency_s");
        if !euler_slower {
            problems.push("Euler's collection was not slower than GPINT-3's".into());
        }
        let snmp = t.values(&["low", "snmp"], "latency_s");
        if snmp.first() >= snmp.last() {
            problems.push(format!("SNMP's latency did not grow with size: {snmp:?}"));
        }
        problems
    }
}
