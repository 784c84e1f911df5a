//! Incidents against the ground truth: a run's alerts and anomalies go through the same
//! correlation as the API's ([`kplane_model::incidents`]), in event-time order, and each
//! incident is matched to the injected faults it is about.
//!
//! An incident is about a fault when they overlap in time (the fault's span, one window
//! before it, the hold and three windows after) and the incident's root or one of its flows
//! touches the fault: its root is one of the fault's addresses (victim, sources, scanner,
//! burst target), a switch of the fault (a burst's queue, either end of a failed link) or
//! one of its links; one of its member flows goes to or from one of its addresses; or one of
//! its member anomalies is right for it (the fault's type on one of its entities: a cut link
//! and a link it left with nothing to carry fall silent in one window, and their one incident
//! may be rooted at either).
//! Each incident is counted for one of the faults it is about ([`counted_for`]), so an
//! incident that overlaps two faults of a `mixed` run is not counted twice.
//! Precision: incidents about some fault over all incidents. Recall: faults with at least one
//! incident counted for them over all faults. Per fault: incidents counted for each detected
//! fault (1 is the aim).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use kplane_model::incidents::{EpisodeBook, Incident, IncidentBook, RootKind};
use kplane_model::results::{Anomaly, EntityKind};

use super::knowledge::{Csv, Fault, fmt};
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
    pub(super) fn add(&mut self, o: &Self) {
        self.faults += o.faults;
        self.detected += o.detected;
        self.incidents += o.incidents;
        self.about_a_fault += o.about_a_fault;
        self.per_detected += o.per_detected;
        self.clean_incidents += o.clean_incidents;
        self.clean_seconds += o.clean_seconds;
    }
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

/// The report's incidents paragraph, and its rows in `csv` (`family`, `table`).
pub(super) fn report(inc: &IncidentScore, family: &str, table: &str, csv: &mut Csv) -> String {
    for (m, v) in [
        ("incident_recall", inc.recall()),
        ("incident_precision", inc.precision()),
        ("incidents_per_fault", inc.per_fault()),
    ] {
        if let Some(v) = v {
            csv.row(family, table, m, "all", v);
        }
    }
    format!(
        "\nIncidents (docs/incidents.md: alerts and anomalies correlated by root, hold {} s) against \
         the injected faults: {} faults, {} with an incident → recall {}; {} incidents, {} about a \
         fault → precision {}; {} incidents per detected fault, each incident counted for one (1 is \
         the aim); on runs with nothing harmful injected {} incidents in {:.0} s.\n",
        HOLD.as_secs(),
        inc.faults,
        inc.detected,
        fmt(inc.recall()),
        inc.incidents,
        inc.about_a_fault,
        fmt(inc.precision()),
        fmt(inc.per_fault()),
        inc.clean_incidents,
        inc.clean_seconds
    )
}

/// The run's incidents, as the API would have made them from its alerts and `anomalies`.
fn correlate(o: &Outcome, anomalies: &[Anomaly]) -> IncidentBook {
    let mut episodes = EpisodeBook::new(usize::MAX >> 1);
    let mut book = IncidentBook::new(usize::MAX >> 1, HOLD);
    // Alerts and anomaly records merged in event-time order.
    let mut alerts: Vec<_> = o.alerts.iter().collect();
    alerts.sort_by_key(|a| a.time_ns);
    let mut anomalies: Vec<_> = anomalies.iter().collect();
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
                // `5:2/`: any queue of switch 5's port 2.
                let node = e.split([':', '/']).next().unwrap_or_default();
                t.switches.insert(node.to_string());
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

fn is_about(
    i: &Incident,
    f: &Fault,
    t: &Touches,
    window_ns: i64,
    anomalies: &HashMap<&str, &Anomaly>,
) -> bool {
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
                || anomalies
                    .get(m.id.as_str())
                    .is_some_and(|a| a.anomaly_type == f.kind && f.is_primary(a))
        })
}

/// Of the faults an incident is about, the one it is counted for: the one under way when it
/// started (from a window before the fault's start to its end), else the latest started
/// before it. An incident of a `mixed` run that overlaps a DDoS's aftermath and the scan
/// after it is the scan's when it started with the scan.
fn counted_for(start_ns: i64, faults: &[Fault], about: &[usize], window_ns: i64) -> Option<usize> {
    let under_way = |f: &Fault| f.start_ns - window_ns <= start_ns && start_ns <= f.end_ns;
    about.iter().copied().max_by_key(|&k| {
        let f = &faults[k];
        (under_way(f), f.start_ns <= start_ns, f.start_ns)
    })
}

/// Scores one run's incidents (from its alerts and `anomalies`) against its harmful faults;
/// returns each incident's summary with the faults it is about (`about`: indices into
/// `faults`) and the one it is counted for (`counted_for`), for `incidents.jsonl`, and for
/// each member anomaly the fault its incident was counted for.
pub(super) fn score_run(
    o: &Outcome,
    anomalies: &[Anomaly],
    faults: &[Fault],
    window_ns: i64,
    into: &mut IncidentScore,
) -> (Vec<serde_json::Value>, HashMap<String, usize>) {
    let clean = !faults.iter().any(Fault::injected);
    let book = correlate(o, anomalies);
    let all = book.list(|_| true, usize::MAX);
    let by_id: HashMap<&str, &Anomaly> = anomalies.iter().map(|a| (a.id.as_str(), a)).collect();
    let touched: Vec<Touches> = faults.iter().map(touches).collect();
    into.faults += faults.iter().filter(|f| f.injected()).count() as u64;
    into.incidents += all.len() as u64;
    let mut per_fault = vec![0u64; faults.len()];
    let mut summaries = Vec::with_capacity(all.len());
    let mut incident_of = HashMap::new();
    for i in &all {
        let about: Vec<usize> = (0..faults.len())
            .filter(|&k| {
                faults[k].injected() && is_about(i, &faults[k], &touched[k], window_ns, &by_id)
            })
            .collect();
        let counted = counted_for(i.start_ns, faults, &about, window_ns);
        if let Some(k) = counted {
            into.about_a_fault += 1;
            per_fault[k] += 1;
            for m in i.members().filter(|m| m.source == "anomaly") {
                incident_of.insert(m.id.clone(), k);
            }
        }
        let mut v = i.summary();
        v["about"] = serde_json::json!(about);
        v["counted_for"] = serde_json::json!(counted);
        summaries.push(v);
    }
    for n in per_fault.into_iter().filter(|n| *n > 0) {
        into.detected += 1;
        into.per_detected += n;
    }
    if clean {
        into.clean_incidents += all.len() as u64;
        into.clean_seconds += o.scored_seconds();
    }
    (summaries, incident_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incident_is_counted_for_the_fault_under_way_when_it_started() {
        use kplane_model::results::AnomalyType;
        const S: i64 = 1_000_000_000;
        let fault = |kind, start, end| Fault {
            kind,
            origin: crate::eval::knowledge::Origin::Injected,
            start_ns: start * S,
            end_ns: end * S,
            primary: Vec::new(),
        };
        let faults = [
            fault(AnomalyType::Ddos, 14, 20),
            fault(AnomalyType::PortScan, 22, 23),
        ];
        // Within the DDoS's aftermath, but started with the scan.
        assert_eq!(counted_for(22 * S, &faults, &[0, 1], S), Some(1));
        assert_eq!(counted_for(15 * S, &faults, &[0, 1], S), Some(0));
        // Between them: the latest started before it.
        assert_eq!(
            counted_for(21 * S + S / 2, &faults, &[0, 1], S / 10),
            Some(0)
        );
        assert_eq!(counted_for(15 * S, &faults, &[], S), None);
    }

    #[test]
    fn an_incident_holding_the_faults_own_anomaly_is_about_it_whatever_its_root() {
        use crate::eval::score::fixtures::{anomaly, fault, outcome};
        use kplane_model::results::AnomalyType;
        // Aggregation 101 - core 201 is cut; 103's link to 201, left with nothing to carry,
        // falls silent in the same window and, raised after it, becomes the incident's root.
        let cut = || {
            [fault(
                AnomalyType::LinkFailure,
                false,
                vec![(EntityKind::Link, "101:3"), (EntityKind::Link, "201:1")],
            )]
        };
        let link = |entity: &str, reverse: &str| {
            let mut a = anomaly(EntityKind::Link, entity, AnomalyType::LinkFailure);
            a.explanation.blast_radius.reverse_link = Some(reverse.into());
            a
        };
        let anomalies = [
            link("101:3", "201:1"),
            link("103:3", "201:2"),
            link("201:2", "103:3"),
            link("201:1", "101:3"),
        ];
        let mut score = IncidentScore::default();
        let (summaries, incident_of) = score_run(&outcome(), &anomalies, &cut(), 1_000, &mut score);
        assert_eq!(summaries.len(), 1, "{summaries:?}");
        assert_eq!(summaries[0]["root"]["entity"], "103:3");
        assert_eq!(summaries[0]["about"], serde_json::json!([0]));
        assert_eq!(incident_of.get("link:103:3:1"), Some(&0));
        assert_eq!((score.detected, score.about_a_fault), (1, 1));
        // Typed otherwise, the fault's own link does not make the incident about it.
        let mut unknown = anomalies.clone();
        for a in &mut unknown {
            a.anomaly_type = AnomalyType::Unknown;
        }
        let (summaries, _) = score_run(&outcome(), &unknown, &cut(), 1_000, &mut score);
        assert_eq!(summaries[0]["about"], serde_json::json!([]));
    }

    #[test]
    fn a_flow_names_its_two_addresses() {
        assert_eq!(
            endpoints("10.0.0.1:5000>10.0.1.1:80/17"),
            Some(("10.0.0.1", "10.0.1.1"))
        );
        assert_eq!(endpoints("nonsense"), None);
    }
}
