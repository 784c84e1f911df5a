//! Verification: every intent declares the effect fresh telemetry must show after it is
//! applied (the stream processor's `flows` windows, read from the live views); the engine
//! rolls it back when the effect has not shown by the deadline.
//!
//! Fresh telemetry is what was reported after the entries were written: a window counts once
//! it ends more than [`GRACE_MS`] after the write, and within it only flows last seen after
//! that moment can violate the effect. The window the write fell in is used, not wasted: a
//! blocked flow whose last report came before the block is history, not a violation.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int64Type, TimestampNanosecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};

use kplane_model::FlowKey;
use kplane_model::detection;

use super::model::{FlowMatch, IntentKind, in_prefix};
use crate::telemetry::Telemetry;

/// Packets in flight when an entry is written, and switch clocks a little behind the API's:
/// reports up to this long after the write are not yet its effect.
pub const GRACE_MS: u64 = 100;

/// One flow of one window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowObs {
    pub window_start_ms: u64,
    pub window_end_ms: u64,
    /// The flow's last report in the window (event time).
    pub last_seen_ms: u64,
    pub src: u32,
    pub dst: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
    pub path: Vec<u32>,
    /// Bytes its reports carried in the window.
    pub bytes: u64,
}

fn v4(b: &[u8]) -> Option<u32> {
    // Addresses are stored IPv4-mapped (::ffff:a.b.c.d).
    (b.len() == 16 && b[..10].iter().all(|x| *x == 0) && b[10] == 0xff && b[11] == 0xff)
        .then(|| u32::from_be_bytes([b[12], b[13], b[14], b[15]]))
}

fn rows(b: &RecordBatch, out: &mut Vec<FlowObs>) -> Option<()> {
    let start = b
        .column_by_name("window_start")?
        .as_primitive_opt::<TimestampNanosecondType>()?;
    let src = b.column_by_name("src_ip")?.as_fixed_size_binary_opt()?;
    let dst = b.column_by_name("dst_ip")?.as_fixed_size_binary_opt()?;
    let sp = b
        .column_by_name("src_port")?
        .as_primitive_opt::<UInt16Type>()?;
    let dp = b
        .column_by_name("dst_port")?
        .as_primitive_opt::<UInt16Type>()?;
    let pr = b
        .column_by_name("protocol")?
        .as_primitive_opt::<UInt8Type>()?;
    let path = b.column_by_name("path")?.as_list_opt::<i32>()?;
    let end = b
        .column_by_name("window_end")?
        .as_primitive_opt::<TimestampNanosecondType>()?;
    let last = b
        .column_by_name("last_seen")?
        .as_primitive_opt::<TimestampNanosecondType>()?;
    let bytes = b.column_by_name("bytes")?;
    let bytes = |i: usize| {
        bytes
            .as_primitive_opt::<UInt64Type>()
            .map(|a| a.value(i))
            .or_else(|| {
                bytes
                    .as_primitive_opt::<Int64Type>()
                    .map(|a| a.value(i).max(0) as u64)
            })
            .unwrap_or(0)
    };
    let ms = |ns: i64| (ns / 1_000_000).max(0) as u64;
    for i in 0..b.num_rows() {
        let (Some(s), Some(d)) = (v4(src.value(i)), v4(dst.value(i))) else {
            continue;
        };
        let hops = path.value(i);
        let hops = hops.as_primitive_opt::<UInt32Type>()?;
        out.push(FlowObs {
            window_start_ms: ms(start.value(i)),
            window_end_ms: ms(end.value(i)),
            last_seen_ms: ms(last.value(i)),
            src: s,
            dst: d,
            src_port: sp.value(i),
            dst_port: dp.value(i),
            protocol: pr.value(i),
            path: hops.iter().flatten().collect(),
            bytes: bytes(i),
        });
    }
    Some(())
}

/// The flows of the latest window of every partition.
pub fn observe(telemetry: &dyn Telemetry) -> Vec<FlowObs> {
    let mut out = Vec::new();
    for b in telemetry.latest_flows() {
        if rows(&b, &mut out).is_none() {
            tracing::debug!("flows window without the expected columns");
        }
    }
    out
}

/// The effect an intent of this kind must show, in words (shown with the intent).
pub fn expected_effect(kind: &IntentKind) -> String {
    match kind {
        IntentKind::Block { .. } => {
            "fresh windows show no flow of the blocked set reaching a sink".into()
        }
        IntentKind::Reroute { dst, avoid } => format!(
            "fresh windows show the flows towards {dst} on paths avoiding {}",
            avoid
        ),
        IntentKind::Monitor { .. } => {
            "matching flows report (INT from their first switch) in fresh windows".into()
        }
        IntentKind::Tune { .. } => "the detection entries read back from every sink".into(),
        IntentKind::IntLabel { .. } | IntentKind::LabelFrequency { .. } => {
            "the labelling entries read back from every switch".into()
        }
        IntentKind::ProbePlan { .. } => {
            "a probe plan over the topology's switches (GET /v1/probe-plans)".into()
        }
    }
}

/// What verification concluded so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Wait,
    Pass(String),
    Fail(String),
}

/// What one intent's verification has seen: fresh windows, and per window the flows that
/// match its set and those that violate its effect.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    windows: BTreeMap<u64, Window>,
}

/// One fresh window as one intent sees it.
#[derive(Clone, Debug, Default)]
struct Window {
    flows: usize,
    /// Flows in the intent's set.
    matching: usize,
    /// Flows outside a block's set reported after the write: the fabric still carries what
    /// the block did not target (a block that silences everything is no success).
    others_live: usize,
    /// Descriptions of the flows that violate the effect.
    violations: Vec<String>,
}

fn show(f: &FlowObs) -> String {
    let ip = |a: u32| std::net::Ipv4Addr::from(a).to_string();
    format!(
        "{}:{} → {}:{} proto {} via {:?}",
        ip(f.src),
        f.src_port,
        ip(f.dst),
        f.dst_port,
        f.protocol,
        f.path
    )
}

fn in_flows(m: &detection::FlowMatch, f: &FlowObs) -> bool {
    m.matches(&FlowKey {
        src_ip: Ipv4Addr::from(f.src).into(),
        dst_ip: Ipv4Addr::from(f.dst).into(),
        src_port: f.src_port,
        dst_port: f.dst_port,
        protocol: f.protocol,
    })
}

/// The intent's flow match, parsed once for all the flows it is matched against (a checked
/// intent's match parses; one that does not matches nothing).
fn typed(flows: &FlowMatch) -> Option<detection::FlowMatch> {
    flows.parse("match").ok()
}

impl Tracker {
    /// Adds observations of windows that ended after `applied_ms` + [`GRACE_MS`].
    pub fn observe(&mut self, kind: &IntentKind, applied_ms: u64, obs: &[FlowObs]) {
        let after = applied_ms + GRACE_MS;
        let flows = match kind {
            IntentKind::Block { flows } | IntentKind::Monitor { flows, .. } => typed(flows),
            _ => None,
        };
        let selected = |f: &FlowObs| flows.as_ref().is_some_and(|m| in_flows(m, f));
        let mut fresh: BTreeMap<u64, Window> = BTreeMap::new();
        for f in obs.iter().filter(|f| f.window_end_ms > after) {
            let w = fresh.entry(f.window_start_ms).or_default();
            w.flows += 1;
            if f.last_seen_ms <= after {
                continue;
            }
            match kind {
                IntentKind::Block { .. } if selected(f) => {
                    w.matching += 1;
                    w.violations
                        .push(format!("{} still reaches its sink", show(f)));
                }
                IntentKind::Block { .. } => w.others_live += 1,
                IntentKind::Reroute { dst, avoid } if in_prefix(dst, f.dst) => {
                    w.matching += 1;
                    if avoid.crossed_by(&f.path) {
                        w.violations.push(format!("{} crosses {}", show(f), avoid));
                    }
                }
                IntentKind::Monitor { .. } if selected(f) => w.matching += 1,
                _ => {}
            }
        }
        // A window's latest sample holds all its partitions seen so far: keep the largest.
        for (start, w) in fresh {
            let slot = self.windows.entry(start).or_default();
            if w.flows >= slot.flows {
                *slot = w;
            }
        }
    }

    /// The verdict now; `deadline_passed` turns waiting into a verdict.
    pub fn verdict(&self, kind: &IntentKind, deadline_passed: bool) -> Verdict {
        let fresh = self.windows.len();
        let matching: usize = self.windows.values().map(|w| w.matching).sum();
        let last_violation = self
            .windows
            .values()
            .rev()
            .find(|w| !w.violations.is_empty());
        let is_block = matches!(kind, IntentKind::Block { .. });
        let clean_last = self
            .windows
            .iter()
            .next_back()
            .filter(|(_, w)| w.flows > 0 && w.violations.is_empty());
        match kind {
            IntentKind::Tune { .. } => Verdict::Pass("entries read back from every sink".into()),
            IntentKind::IntLabel { .. } | IntentKind::LabelFrequency { .. } => {
                Verdict::Pass("entries read back from every switch".into())
            }
            IntentKind::ProbePlan { .. } => {
                Verdict::Pass("no table entries: the plan follows the topology".into())
            }
            IntentKind::Block { .. } | IntentKind::Reroute { .. } => {
                let silent = !self.windows.values().any(|w| w.others_live > 0);
                match (clean_last, last_violation) {
                    (Some((start, w)), _)
                        if (is_block && !silent)
                            || (!is_block && (w.matching > 0 || deadline_passed)) =>
                    {
                        Verdict::Pass(format!(
                            "window at {start} ms: {} flows, {} towards the intent's set, none violating ({fresh} fresh windows)",
                            w.flows, w.matching
                        ))
                    }
                    _ if !deadline_passed => Verdict::Wait,
                    (_, Some(w)) => Verdict::Fail(format!(
                        "after the deadline: {}{}",
                        w.violations.first().cloned().unwrap_or_default(),
                        if w.violations.len() > 1 {
                            format!(" (and {} more)", w.violations.len() - 1)
                        } else {
                            String::new()
                        }
                    )),
                    (Some(_), None) if is_block => Verdict::Fail(
                        "the fabric went silent: no traffic outside the block's set was reported \
                         after it was applied, so its effect cannot be told from a blackhole"
                            .into(),
                    ),
                    _ => Verdict::Fail(
                        "no fresh telemetry before the deadline to verify against".into(),
                    ),
                }
            }
            IntentKind::Monitor { .. } => {
                if matching > 0 {
                    Verdict::Pass(format!(
                        "{matching} matching flow reports in {fresh} fresh windows"
                    ))
                } else if !deadline_passed {
                    Verdict::Wait
                } else if fresh > 0 {
                    Verdict::Pass(format!(
                        "no matching traffic in {fresh} fresh windows: nothing to report yet (kept)"
                    ))
                } else {
                    Verdict::Fail("no fresh telemetry before the deadline to verify against".into())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flow seen until the end of the 1 s window starting at `start`.
    fn flow(start: u64, src: &str, dst: &str, path: &[u32]) -> FlowObs {
        let ip = |s: &str| u32::from(s.parse::<std::net::Ipv4Addr>().unwrap());
        FlowObs {
            window_start_ms: start,
            window_end_ms: start + 1_000,
            last_seen_ms: start + 999,
            src: ip(src),
            dst: ip(dst),
            src_port: 1000,
            dst_port: 53,
            protocol: 17,
            path: path.to_vec(),
            bytes: 1_000,
        }
    }

    #[test]
    fn a_block_passes_on_a_clean_fresh_window_and_fails_while_its_flows_arrive() {
        let kind: IntentKind =
            serde_json::from_str(r#"{"kind":"block","match":{"src":"10.0.0.2"}}"#).unwrap();
        let mut t = Tracker::default();
        // Before the intent: ignored.
        t.observe(&kind, 1_000, &[flow(0, "10.0.0.2", "10.0.0.1", &[1, 2])]);
        assert_eq!(t.verdict(&kind, false), Verdict::Wait);
        t.observe(
            &kind,
            1_000,
            &[flow(1_000, "10.0.0.2", "10.0.0.1", &[1, 2])],
        );
        assert_eq!(t.verdict(&kind, false), Verdict::Wait);
        assert!(matches!(t.verdict(&kind, true), Verdict::Fail(e) if e.contains("10.0.0.2:1000")));
        t.observe(
            &kind,
            1_000,
            &[flow(2_000, "10.0.0.3", "10.0.0.1", &[1, 2])],
        );
        assert!(matches!(t.verdict(&kind, false), Verdict::Pass(_)));
    }

    #[test]
    fn a_block_that_silences_the_fabric_is_no_success() {
        let kind: IntentKind = serde_json::from_str(r#"{"kind":"block","match":{}}"#).unwrap();
        let mut t = Tracker::default();
        // Only flows last seen before the write: history, and nothing after.
        let stale = FlowObs {
            last_seen_ms: 1_050,
            ..flow(1_000, "10.0.0.3", "10.0.0.1", &[1, 2])
        };
        t.observe(&kind, 1_500, &[stale]);
        assert_eq!(t.verdict(&kind, false), Verdict::Wait);
        assert!(matches!(t.verdict(&kind, true), Verdict::Fail(e) if e.contains("silent")));
        // A narrow block while other traffic flows passes.
        let narrow: IntentKind =
            serde_json::from_str(r#"{"kind":"block","match":{"src":"10.0.0.2"}}"#).unwrap();
        let mut t = Tracker::default();
        t.observe(&narrow, 0, &[flow(1_000, "10.0.0.3", "10.0.0.1", &[1, 2])]);
        assert!(matches!(t.verdict(&narrow, false), Verdict::Pass(_)));
    }

    #[test]
    fn a_reroute_checks_paths_towards_its_prefix() {
        let kind: IntentKind = serde_json::from_str(
            r#"{"kind":"reroute","dst":"10.0.0.1/32","avoid":{"link":[2,3]}}"#,
        )
        .unwrap();
        let mut t = Tracker::default();
        t.observe(
            &kind,
            0,
            &[flow(1_000, "10.0.0.9", "10.0.0.1", &[1, 3, 2, 5])],
        );
        assert_eq!(t.verdict(&kind, false), Verdict::Wait);
        assert!(matches!(t.verdict(&kind, true), Verdict::Fail(e) if e.contains("link 2-3")));
        t.observe(&kind, 0, &[flow(2_000, "10.0.0.9", "10.0.0.1", &[1, 4, 5])]);
        assert!(matches!(t.verdict(&kind, false), Verdict::Pass(_)));
    }

    #[test]
    fn the_window_a_block_was_written_in_counts_by_when_its_flows_were_last_seen() {
        let kind: IntentKind =
            serde_json::from_str(r#"{"kind":"block","match":{"src":"10.0.0.2"}}"#).unwrap();
        // Written at 1 500 ms, inside the window [1 000, 2 000).
        let before = FlowObs {
            last_seen_ms: 1_450,
            ..flow(1_000, "10.0.0.2", "10.0.0.1", &[1, 2])
        };
        let mut t = Tracker::default();
        t.observe(
            &kind,
            1_500,
            &[before.clone(), flow(1_000, "10.0.0.3", "10.0.0.1", &[1, 2])],
        );
        assert!(
            matches!(t.verdict(&kind, false), Verdict::Pass(e) if e.contains("none violating"))
        );
        // Still reported after the write (and its grace): a violation, in the same window.
        let after = FlowObs {
            last_seen_ms: 1_500 + GRACE_MS + 1,
            ..before
        };
        let mut t = Tracker::default();
        t.observe(&kind, 1_500, &[after]);
        assert!(matches!(t.verdict(&kind, true), Verdict::Fail(e) if e.contains("still reaches")));
        // A window that ended within the grace is not fresh at all.
        let mut t = Tracker::default();
        t.observe(
            &kind,
            1_950,
            &[flow(1_000, "10.0.0.3", "10.0.0.1", &[1, 2])],
        );
        assert_eq!(t.verdict(&kind, false), Verdict::Wait);
    }
}
