//! Incidents against the ground truth: a run's alerts and anomalies go through the same
//! correlation as the API's ([`kplane_model::incidents`]), in event-time order, and each
//! incident is matched to the injected faults it is about.
//!
//! An incident is about a fault when they overlap in time (the fault's span, one window
//! before it, the hold and three windows after) and the incident's root or one of its flows
//! touches the fault: its root is one of the fault's addresses (victim, sources, scanner,
//! burst target), a switch of the fault (a burst's queue, either end of a failed link) or
//! one of its links; or one of its member flows goes to or from one of its addresses.
//! Precision: incidents about some fault over all incidents. Recall: faults with at least one
//! incident over all faults. Per fault: incidents about each detected fault (1 is the aim).

use std::collections::BTreeSet;
use std::time::Duration;

use kplane_model::incidents::{EpisodeBook, Incident, IncidentBook, RootKind};
use kplane_model::results::EntityKind;

use super::knowledge::Fault;
use super::pipeline::Outcome;

/// The API's default hold (`intent-api.incidents.hold`).
pub(super) const HOLD: Duration = Duration::from_secs(10);

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct IncidentScore {
    pub(super) faults: u64,
    pub(super) detected: u64,
    pub(super) incidents: u64,
    /// Incidents about some fault.
    pub(super) about_a_fault: u64,
    /// Incidents about the detected faults, summed over them.
    pub(super) per_detected: u64,
    /// Incidents of the runs with nothing injected, and their virtual seconds.
    pub(super) clean_incidents: u64,
    pub(super) clean_seconds: f64,
}

impl IncidentScore {
    pub(super) fn precision(&self) -> Option<f64> {
        (self.incidents > 0).then(|| self.about_a_fault as f64 / self.incidents as f64)
    }
    pub(super) fn recall(&self) -> Option<f64> {
        (self.faults > 0).then(|| self.detected as f64 / self.faults as f64)
    }
    pub(super) fn per_fault(&self) -> Option<f64> {
        (self.detected > 0).then(|| self.per_detected as f64 / self.detected as f64)
    }
}

/// The run's incidents, as the API would have made them.
fn correlate(o: &Outcome) -> IncidentBook {
    let mut episodes = EpisodeBook::new(usize::MAX >> 1);
    let mut book = IncidentBook::new(usize::MAX >> 1, HOLD);
    // Alerts and anomaly records merged in event-time order.
    let mut alerts: Vec<_> = o.alerts.iter().collect();
    alerts.sort_by_key(|a| a.time_ns);
    let mut anomalies: Vec<_> = o.anomalies.iter().collect();
    anomalies.sort_by_key(|a| a.last_ns);
    let (mut alerts, mut anomalies) = (
        alerts.into_iter().peekable(),
        anomalies.into_iter().peekable(),
    );
    loop {
        let alert_first = match (alerts.peek(), anomalies.peek()) {
            (None, None) => break,
            (Some(a), Some(b)) => a.time_ns <= b.last_ns,
            (a, _) => a.is_some(),
        };
        if alert_first {
            if let Some((_, e)) = alerts.next().and_then(|a| episodes.apply(a)) {
                book.episode(&e);
            }
        } else if let Some(a) = anomalies.next() {
            book.anomaly(a);
        }
    }
    book.advance(i64::MAX);
    book
}

/// The addresses, switches and links a fault touches.
struct Touches {
    addresses: BTreeSet<String>,
    switches: BTreeSet<String>,
    links: BTreeSet<String>,
}

fn touches(f: &Fault) -> Touches {
    let mut t = Touches {
        addresses: BTreeSet::new(),
        switches: BTreeSet::new(),
        links: BTreeSet::new(),
    };
    for (kind, e) in &f.primary {
        match kind {
            EntityKind::Source | EntityKind::Destination => {
                t.addresses.insert(e.clone());
            }
            EntityKind::Queue => {
                t.switches.insert(e.trim_end_matches('/').to_string());
            }
            EntityKind::Link => {
                t.links.insert(e.clone());
                if let Some((node, _)) = e.split_once(':') {
                    t.switches.insert(node.to_string());
                }
            }
            EntityKind::Flow => {}
        }
    }
    t
}

/// `10.0.0.1:5000>10.0.1.1:80/17` → its two addresses.
fn endpoints(flow: &str) -> Option<(&str, &str)> {
    let (src, dst) = flow.split_once('>')?;
    Some((src.rsplit_once(':')?.0, dst.rsplit_once(':')?.0))
}

fn is_about(i: &Incident, f: &Fault, t: &Touches, window_ns: i64) -> bool {
    let hold = HOLD.as_nanos() as i64;
    let end = i.end_ns.unwrap_or(i.last_ns);
    if i.start_ns > f.end_ns + hold + 3 * window_ns || end < f.start_ns - window_ns {
        return false;
    }
    let root = &i.root.entity;
    let by_root = match i.root.kind {
        RootKind::Destination | RootKind::Source => t.addresses.contains(root),
        RootKind::Switch => t.switches.contains(root),
        RootKind::Link => t.links.contains(root),
        RootKind::Flow => false,
    };
    by_root
        || i.members().any(|m| {
            m.flow
                .as_deref()
                .and_then(endpoints)
                .is_some_and(|(s, d)| t.addresses.contains(s) || t.addresses.contains(d))
        })
}

/// Scores one run's incidents against its faults; returns each incident's summary with the
/// faults it is about (`about`: indices into `faults`), for `incidents.jsonl`.
pub(super) fn score_run(
    o: &Outcome,
    faults: &[Fault],
    clean: bool,
    window_ns: i64,
    into: &mut IncidentScore,
) -> Vec<serde_json::Value> {
    let book = correlate(o);
    let all = book.list(|_| true, usize::MAX);
    let touched: Vec<Touches> = faults.iter().map(touches).collect();
    into.faults += faults.len() as u64;
    into.incidents += all.len() as u64;
    let mut summaries = Vec::with_capacity(all.len());
    for i in &all {
        let about: Vec<usize> = (0..faults.len())
            .filter(|&k| is_about(i, &faults[k], &touched[k], window_ns))
            .collect();
        if !about.is_empty() {
            into.about_a_fault += 1;
        }
        let mut v = i.summary();
        v["about"] = serde_json::json!(about);
        summaries.push(v);
    }
    for (f, t) in faults.iter().zip(&touched) {
        let n = all.iter().filter(|i| is_about(i, f, t, window_ns)).count() as u64;
        if n > 0 {
            into.detected += 1;
            into.per_detected += n;
        }
    }
    if clean {
        into.clean_incidents += all.len() as u64;
        into.clean_seconds += o.virtual_seconds;
    }
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_names_its_two_addresses() {
        assert_eq!(
            endpoints("10.0.0.1:5000>10.0.1.1:80/17"),
            Some(("10.0.0.1", "10.0.1.1"))
        );
        assert_eq!(endpoints("nonsense"), None);
    }
}
