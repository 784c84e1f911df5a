//! Programmable event detection §III (`complex_detection`): a conjunction such as "hop latency
//! above L and queue occupancy above Q" decides which packets are reported — in the emulated
//! sinks (the P4 program's `detect_complex`), and the same rule in the collector's watchlist
//! over unfiltered reports — swept over Q.

use kplane_collector::detect::{Detection, EventConfig, StateConfig};
use kplane_collector::watchlist::{Condition, Measurement, Rule, Watchlist};
use kplane_emulator::run::{RunConfig, build};
use kplane_model::Detector;
use kplane_model::detection::LITERAL_PARAMS;
use kplane_p4::EntrySpec;
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

use super::{Comparison, Ctx, Experiment, Plot, Summary, Table};

pub struct Complex;

/// The latency literal's bound (ns): about 8 queued 1,500-byte packets at 10 Gb/s.
const LATENCY_NS: u64 = 10_000;
const SWEEP: [u64; 6] = [1, 2, 5, 10, 20, 40];
const FAST_SWEEP: [u64; 3] = [1, 10, 40];
const PROFILES: [&str; 2] = ["cache", "hadoop"];
/// Background Poisson flows per second (the emulator's default mix): most packets see empty
/// queues, as in a real fabric.
const BACKGROUND: f64 = 1_000.0;

/// The two expressions swept: a level (the queue above Q) and the paper's example, a build-up
/// (hop latency above L and the queue risen by more than Q since the flow's previous packet).
const EXPRESSIONS: [(&str, bool); 2] = [("queue>Q", true), ("latency>L and queue rose>Q", false)];

fn seconds(fast: bool) -> f64 {
    if fast { 0.05 } else { 0.5 }
}

/// An emulated run of `profile`'s microbursts with `entry` in every sink: its reports (as
/// sent) and INT packets at the sinks, and the bursts as (queue's switch, start, end) ns.
struct Run {
    reports: Vec<Vec<u8>>,
    int_packets: u64,
    bursts: Vec<(u32, u64, u64)>,
}

fn emulate(profile: &str, entry: Option<EntrySpec>, ctx: &Ctx) -> anyhow::Result<Run> {
    let mut cfg = RunConfig {
        duration: std::time::Duration::from_secs_f64(seconds(ctx.fast)),
        flows_per_second: BACKGROUND,
        scenario: format!("microburst-{profile}:start=0,end=1"),
        entries: entry.into_iter().collect(),
        ..RunConfig::default()
    };
    cfg.sim.seed = ctx.seed;
    let mut sim = build(&cfg)?;
    sim.run_until(cfg.duration.as_nanos() as u64);
    let bursts = sim
        .truth
        .events
        .iter()
        .filter(|e| e["kind"] == "microburst")
        .filter_map(|e| {
            Some((
                e["queue"]["node"].as_u64()? as u32,
                e["t_ns"].as_u64()?,
                e["end_ns"].as_u64()?,
            ))
        })
        .collect();
    Ok(Run {
        reports: sim.take_reports().into_iter().map(|r| r.bytes).collect(),
        int_packets: sim.stats.reports + sim.stats.reports_suppressed,
        bursts,
    })
}

/// `detect_complex` on every switch: queue occupancy above `q` (`level`), or hop latency
/// above `LATENCY_NS` and queue occupancy risen by more than `q`.
fn entry(q: u64, level: bool) -> EntrySpec {
    let (m, op, t) = if level { (0, 0, 0) } else { (0, 1, LATENCY_NS) };
    let op1 = if level { 1 } else { 3 };
    EntrySpec {
        switch: None,
        table: "int_sink_detection".into(),
        priority: 1,
        matches: Default::default(),
        action: "detect_complex".into(),
        params: LITERAL_PARAMS
            .iter()
            .zip(
                [[m, op, t], [1, op1, q]]
                    .into_iter()
                    .chain(std::iter::repeat([0; 3])),
            )
            .flat_map(|(names, values)| names.iter().map(|n| n.to_string()).zip(values))
            .collect(),
    }
}

/// The same expression as a collector watchlist rule.
fn rule(q: u64, level: bool) -> Rule {
    let mut when = vec![Condition {
        measurement: Measurement::QueueOccupancy,
        above: level.then_some(q),
        below: None,
        rises_by: (!level).then_some(q),
    }];
    if !level {
        when.insert(
            0,
            Condition {
                measurement: Measurement::HopLatency,
                above: Some(LATENCY_NS),
                below: None,
                rises_by: None,
            },
        );
    }
    serde_json::from_value(serde_json::json!({"algorithm": "complex"}))
        .map(|r: Rule| Rule { when, ..r })
        .expect("a complex rule")
}

/// Decodes reports as the collector does: (sink node, timestamp) of each, and the events the
/// collector's `complex` rule raises over them.
fn collector_side(reports: &[Vec<u8>], rule: Option<Rule>) -> (Vec<(u32, u64)>, u64) {
    let mut dec = Decoder::new(DecodeOptions::default());
    let mut det = Detection::new(EventConfig::default(), &StateConfig::default());
    let wl = Watchlist::new(rule.into_iter().collect());
    let mut seen = Vec::new();
    let mut events = 0;
    for r in reports {
        dec.decode_report(r, RecordMeta::default(), |rec| {
            let t = rec.envelope.timestamp_ns.unwrap_or(0);
            seen.push((rec.envelope.node_id.unwrap_or(0), t));
            let mut rec = rec.clone();
            rec.envelope.received_ns = t;
            det.process(&rec, &wl, |e| {
                events += u64::from(e.detector == Detector::Complex);
            });
        });
    }
    (seen, events)
}

/// Bursts with at least one report from their queue's switch while they last (+100 µs).
fn caught(bursts: &[(u32, u64, u64)], reports: &[(u32, u64)]) -> usize {
    bursts
        .iter()
        .filter(|(node, start, end)| {
            reports
                .iter()
                .any(|(n, t)| n == node && (*start..=end + 100_000).contains(t))
        })
        .count()
}

impl Experiment for Complex {
    fn name(&self) -> &'static str {
        "complex-detection"
    }
    fn about(&self) -> &'static str {
        "complex_detection: \"hop latency > L and queue risen by > Q\" and \"queue > Q\" in the sinks and the collector, swept over Q"
    }
    fn source(&self) -> &'static str {
        "Programmable INT event detection (../shared/seeds/programmable-int-event-detection-afxdp-kafka.txt) §III"
    }
    fn setup(&self, fast: bool) -> String {
        format!(
            "The emulator (fat-tree k = 4, {BACKGROUND} background Poisson flows/s) runs {} s \
             of virtual time with the cache or hadoop microburst profile. Every sink runs \
             `detect_complex` with one of two expressions: `queue>Q` (queue occupancy above Q \
             packets) or the paper's example `latency>L and queue rose>Q` (hop latency above \
             {LATENCY_NS} ns and queue occupancy risen by more than Q packets since the flow's \
             previous packet, held in a register per flow); a packet is reported when its \
             expression holds. `gain` = INT packets at the sinks / reports; `bursts_caught` \
             counts ground-truth bursts with a report from their queue's switch while they \
             lasted. The same expression as a collector watchlist rule (`algorithm = \
             \"complex\"`) runs over the unfiltered reports of the same run: \
             `collector_events` must equal the sinks' `reports`.",
            seconds(fast)
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let mut t = Table::new(
            &["profile", "expression", "q"],
            &[
                "int_packets",
                "reports",
                "gain",
                "bursts",
                "bursts_caught",
                "collector_events",
            ],
        );
        let sweep: &[u64] = if ctx.fast { &FAST_SWEEP } else { &SWEEP };
        for profile in PROFILES {
            let all = emulate(profile, None, ctx)?;
            for (expression, level) in EXPRESSIONS {
                for &q in sweep {
                    let run = emulate(profile, Some(entry(q, level)), ctx)?;
                    let (sent, _) = collector_side(&run.reports, None);
                    let (_, events) = collector_side(&all.reports, Some(rule(q, level)));
                    t.push(vec![
                        profile.into(),
                        expression.into(),
                        q.into(),
                        run.int_packets.into(),
                        (run.reports.len() as u64).into(),
                        (run.int_packets as f64 / run.reports.len().max(1) as f64).into(),
                        run.bursts.len().into(),
                        caught(&run.bursts, &sent).into(),
                        events.into(),
                    ]);
                }
            }
        }
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        let base = Plot {
            suffix: "-reports",
            title: "Reports vs queue bound Q, complex detection (hadoop)",
            x: "q",
            y: "reports",
            series: &["expression"],
            filter: &[("profile", "hadoop")],
            x_label: "queue-occupancy bound Q (packets)",
            y_label: "reports to the collector",
            log_x: false,
            log_y: true,
        };
        vec![
            base.clone(),
            Plot {
                suffix: "-caught",
                title: "Bursts caught vs queue bound Q, complex detection (hadoop)",
                y: "bursts_caught",
                y_label: "bursts with a report",
                log_y: false,
                ..base
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let get = |p: &str, e: &str, q: &str, c: &str| t.value(&[p, e, q], c);
        vec![
            Comparison::new(
                "complex_detection evaluated",
                "left for future work (§III: \"we will only look at the fast_detection\")",
                format!(
                    "hadoop, Q = 10: build-up {:.0} reports (gain {:.1}×, {:.0} of {:.0} bursts \
                     caught); level {:.0} reports (gain {:.1}×, {:.0} caught)",
                    get("hadoop", EXPRESSIONS[1].0, "10", "reports"),
                    get("hadoop", EXPRESSIONS[1].0, "10", "gain"),
                    get("hadoop", EXPRESSIONS[1].0, "10", "bursts_caught"),
                    get("hadoop", EXPRESSIONS[1].0, "10", "bursts"),
                    get("hadoop", EXPRESSIONS[0].0, "10", "reports"),
                    get("hadoop", EXPRESSIONS[0].0, "10", "gain"),
                    get("hadoop", EXPRESSIONS[0].0, "10", "bursts_caught"),
                ),
            ),
            Comparison::new(
                "switch and collector agree",
                "—",
                "collector_events = reports at every point (checked)",
            ),
        ]
    }

    fn notes(&self) -> &'static str {
        "The paper defines complex_detection (FastReact-style expressions in registers) but \
         evaluates only fast_detection; these are kplane's own figures. A switch entry holds a \
         conjunction of two literals, each `above`, `below` or `rises-by` (risen by more than \
         the bound since the flow's previous packet: the paper's \"queue build-up\", whose \
         previous value is held in a register per flow); P4Runtime writes tables, so the \
         expression is the entry's parameters. The collector's rule takes any number of \
         conditions. In the emulator and the collector a literal reads the largest value over the \
         report's hops; the P4 program reads the sink's own hop (it cannot loop over the \
         opaque upstream stack)."
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let (rep, ev) = (t.col("reports"), t.col("collector_events"));
        let mut problems = Vec::new();
        for r in &t.rows {
            if r[rep].num() != r[ev].num() {
                problems.push(format!(
                    "{} {} Q={}: the sinks sent {} reports, the collector raised {} events",
                    r[0].text(),
                    r[1].text(),
                    r[2].text(),
                    r[rep].text(),
                    r[ev].text()
                ));
            }
        }
        for p in PROFILES {
            for (e, _) in EXPRESSIONS {
                for c in ["reports", "bursts_caught"] {
                    let v = t.values(&[p, e], c);
                    if v.windows(2).any(|w| w[1] > w[0]) {
                        problems.push(format!("{p} {e}: {c} rose with Q: {v:?}"));
                    }
                }
            }
        }
        problems
    }
}
