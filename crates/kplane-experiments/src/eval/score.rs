//! Scoring that can fail: what `kplane eval knowledge` counts as right, per anomaly and per
//! fault, and the totals a table is printed from.
//!
//! * An anomaly is **right** when its entity is one the fault is about and its type is the
//!   fault's; **collateral** (also right) when it is part of the incident counted for a
//!   harmful fault it overlaps, is not on an entity that fault is about, and is not typed as
//!   an attack (which would block a bystander); **wrong** otherwise — `unknown` included, and
//!   everything raised about benign traffic (a flash crowd, a heavy hitter).
//! * Congestion that happened with nothing harmful injected (the emulator's own queues, see
//!   [`Origin::Observed`]) is a fault too: a queue raised as congestion while it was congested
//!   is right, not a false alarm, and so is the host that queue leads to, if it leads to one. Those faults are counted apart: the recall, delays and
//!   false alarms of the tables are the injected faults'.
//! * A fault is **detected** when an anomaly of its type was raised on an entity it is about.

use std::collections::{BTreeMap, HashMap};

use kplane_model::results::{Anomaly, AnomalyPhase, AnomalyType};

use super::knowledge::{Fault, Origin, nothing_injected};
use super::pipeline::Outcome;

/// Seconds after a harmful fault's end in which anything newly raised counts as raised by
/// the return to normal.
pub(super) const AFTER_ATTACK_NS: i64 = 60_000_000_000;

/// The types scored.
pub(super) const SCORED: [AnomalyType; 4] = [
    AnomalyType::Ddos,
    AnomalyType::PortScan,
    AnomalyType::Congestion,
    AnomalyType::LinkFailure,
];

fn is_attack(t: AnomalyType) -> bool {
    matches!(t, AnomalyType::Ddos | AnomalyType::PortScan)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Right,
    Collateral,
    Wrong,
}

/// What an anomaly is worth against the run's faults; `incident_of` maps an anomaly id to the
/// fault its incident was counted for.
pub(super) fn verdict(
    a: &Anomaly,
    faults: &[Fault],
    window_ns: i64,
    incident_of: &HashMap<String, usize>,
) -> Verdict {
    let harmful = |f: &&Fault| f.harmful() && f.overlaps(a, window_ns);
    let about: Vec<&Fault> = faults
        .iter()
        .filter(harmful)
        .filter(|f| f.is_primary(a))
        .collect();
    if about.iter().any(|f| f.kind == a.anomaly_type) {
        return Verdict::Right;
    }
    if !about.is_empty() || is_attack(a.anomaly_type) {
        return Verdict::Wrong;
    }
    match incident_of.get(&a.id).map(|&k| &faults[k]) {
        Some(f) if harmful(&f) => Verdict::Collateral,
        _ => Verdict::Wrong,
    }
}

/// An anomaly raised, as what the same traffic would raise again: its entity and its first
/// window.
pub(super) type Raised = (kplane_model::results::EntityKind, String, i64);

pub(super) fn key(a: &Anomaly) -> Raised {
    (a.entity_kind, a.entity.clone(), a.start_ns)
}

/// Learnt anomalies as they were raised: each episode's start, and the update that typed it
/// if its start was untyped (facts from alerts are not scored here).
pub(super) fn raised(anomalies: &[Anomaly]) -> impl Iterator<Item = &Anomaly> {
    let mut typed_at_start = std::collections::HashSet::new();
    anomalies.iter().filter(move |a| {
        let learnt = !matches!(
            a.anomaly_type,
            AnomalyType::RoutingLoop | AnomalyType::BlackHole
        );
        match a.phase {
            AnomalyPhase::Start => {
                if a.anomaly_type != AnomalyType::Unknown {
                    typed_at_start.insert(a.id.as_str());
                }
                learnt
            }
            AnomalyPhase::Update => {
                learnt
                    && a.anomaly_type != AnomalyType::Unknown
                    && typed_at_start.insert(a.id.as_str())
            }
            AnomalyPhase::End => false,
        }
    })
}

/// Per type: (raised as it, of them right or collateral, the sum of their confidences,
/// injected, detected, delays in windows).
#[derive(Clone, Debug, Default)]
pub(super) struct TypeScore {
    pub(super) raised: u64,
    pub(super) confidence: f64,
    pub(super) right: u64,
    pub(super) injected: u64,
    pub(super) detected: u64,
    pub(super) delays: Vec<f64>,
}

impl TypeScore {
    pub(super) fn precision(&self) -> Option<f64> {
        (self.raised > 0).then(|| self.right as f64 / self.raised as f64)
    }
    pub(super) fn recall(&self) -> Option<f64> {
        (self.injected > 0).then(|| self.detected as f64 / self.injected as f64)
    }
    pub(super) fn f1(&self) -> Option<f64> {
        match (self.precision(), self.recall()) {
            (Some(p), Some(r)) if p + r > 0.0 => Some(2.0 * p * r / (p + r)),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        }
    }
    /// The mean confidence the service gave it: calibrated when it matches the precision.
    pub(super) fn confidence(&self) -> Option<f64> {
        (self.raised > 0).then(|| self.confidence / self.raised as f64)
    }
    pub(super) fn delay(&self) -> Option<f64> {
        (!self.delays.is_empty())
            .then(|| self.delays.iter().sum::<f64>() / self.delays.len() as f64)
    }
    fn add(&mut self, o: &Self) {
        self.raised += o.raised;
        self.confidence += o.confidence;
        self.right += o.right;
        self.injected += o.injected;
        self.detected += o.detected;
        self.delays.extend_from_slice(&o.delays);
    }
}

/// One table's counts: a family's runs, or all of them.
#[derive(Clone, Debug, Default)]
pub(super) struct Detection {
    pub(super) types: BTreeMap<AnomalyType, TypeScore>,
    /// Wrong anomalies raised while no harmful fault was under way, and the virtual seconds.
    pub(super) false_alarms: u64,
    pub(super) seconds: f64,
    /// The same on the runs with nothing injected at all (clean).
    pub(super) clean_false_alarms: u64,
    pub(super) clean_seconds: f64,
    /// Anomalies newly raised after a harmful fault ended (within [`AFTER_ATTACK_NS`] and the
    /// run), and the seconds of aftermath the runs held.
    pub(super) after_attack: u64,
    pub(super) after_seconds: f64,
    /// Of `after_attack`, those the same seed's clean run raised too, on the same entity in
    /// the same window: the run's background, not the attack's end.
    pub(super) after_attack_background: u64,
    /// Raised about benign traffic: typed as an attack, and of those with a block recommended.
    pub(super) benign_attacks: u64,
    pub(super) benign_blocked: u64,
    pub(super) benign_faults: u64,
    /// Congestion that happened with nothing harmful injected: its episodes, those of them
    /// raised as congestion on their queue or host, and the anomalies right only for it (wrong, and
    /// false alarms, had the truth been only what was injected).
    pub(super) observed: u64,
    pub(super) observed_raised: u64,
    pub(super) observed_right: u64,
}

impl Detection {
    /// Of everything raised (`unknown` included), the share right or collateral.
    pub(super) fn precision_all(&self) -> Option<f64> {
        let (raised, right) = self
            .types
            .values()
            .fold((0, 0), |(n, r), s| (n + s.raised, r + s.right));
        (raised > 0).then(|| right as f64 / raised as f64)
    }

    pub(super) fn add(&mut self, o: &Self) {
        for (t, s) in &o.types {
            self.types.entry(*t).or_default().add(s);
        }
        self.false_alarms += o.false_alarms;
        self.seconds += o.seconds;
        self.clean_false_alarms += o.clean_false_alarms;
        self.clean_seconds += o.clean_seconds;
        self.after_attack += o.after_attack;
        self.after_seconds += o.after_seconds;
        self.after_attack_background += o.after_attack_background;
        self.benign_attacks += o.benign_attacks;
        self.benign_blocked += o.benign_blocked;
        self.benign_faults += o.benign_faults;
        self.observed += o.observed;
        self.observed_raised += o.observed_raised;
        self.observed_right += o.observed_right;
    }

    /// Scores one run's `anomalies` (as raised, or re-typed) against its `faults`; returns
    /// those raised after an attack ended, for the caller to pair with a clean run.
    pub(super) fn score(
        &mut self,
        o: &Outcome,
        anomalies: &[Anomaly],
        faults: &[Fault],
        window_ns: i64,
        incident_of: &HashMap<String, usize>,
    ) -> Vec<Raised> {
        let clean = nothing_injected(faults);
        let mut aftermath = Vec::new();
        let run_end = (o.virtual_seconds * 1e9) as i64;
        for a in raised(anomalies) {
            let v = verdict(a, faults, window_ns, incident_of);
            let s = self.types.entry(a.anomaly_type).or_default();
            s.raised += 1;
            s.confidence += a.confidence;
            if v != Verdict::Wrong {
                s.right += 1;
            }
            let under_way = faults
                .iter()
                .any(|f| f.injected() && f.overlaps(a, window_ns));
            if v != Verdict::Wrong && !under_way {
                self.observed_right += 1;
            }
            if v == Verdict::Wrong && !under_way {
                self.false_alarms += 1;
                if clean {
                    self.clean_false_alarms += 1;
                }
            }
            let after = faults.iter().any(|f| {
                f.injected()
                    && a.start_ns > f.end_ns + window_ns
                    && a.start_ns <= f.end_ns + AFTER_ATTACK_NS
            });
            if after && !under_way && v == Verdict::Wrong {
                self.after_attack += 1;
                aftermath.push(key(a));
            }
            if is_attack(a.anomaly_type)
                && faults.iter().any(|f| {
                    f.origin == Origin::Benign && f.overlaps(a, window_ns) && f.is_primary(a)
                })
            {
                self.benign_attacks += 1;
                if !a.recommendations.is_empty() {
                    self.benign_blocked += 1;
                }
            }
        }
        for f in faults {
            let first = raised(anomalies)
                .filter(|a| a.anomaly_type == f.kind && f.is_primary(a) && f.overlaps(a, window_ns))
                .map(|a| a.last_ns)
                .min();
            match f.origin {
                Origin::Injected => {}
                Origin::Benign => {
                    self.benign_faults += 1;
                    continue;
                }
                Origin::Observed => {
                    self.observed += 1;
                    self.observed_raised += u64::from(first.is_some());
                    continue;
                }
            }
            self.after_seconds += ((run_end - f.end_ns).clamp(0, AFTER_ATTACK_NS)) as f64 / 1e9;
            let s = self.types.entry(f.kind).or_default();
            s.injected += 1;
            if let Some(at) = first {
                s.detected += 1;
                s.delays
                    .push(((at - f.start_ns) as f64 / window_ns as f64).max(0.0));
            }
        }
        self.seconds += o.scored_seconds();
        if clean {
            self.clean_seconds += o.scored_seconds();
        }
        aftermath
    }
}

/// An anomaly's features by name, as its explanation gives their raw values (what the
/// definitions read, see `kplane_knowledge::typer`).
pub(super) fn features_of(a: &Anomaly) -> std::collections::BTreeMap<String, f64> {
    a.explanation
        .features
        .iter()
        .map(|f| (f.name.clone(), f.value))
        .collect()
}

#[cfg(test)]
/// Anomalies and faults for the evaluation's tests.
pub(super) mod fixtures {
    use super::*;
    use kplane_model::results::EntityKind;

    pub(in crate::eval) fn anomaly(kind: EntityKind, entity: &str, ty: AnomalyType) -> Anomaly {
        Anomaly {
            id: format!("{}:{entity}:1", kind.as_str()),
            entity_kind: kind,
            entity: entity.into(),
            anomaly_type: ty,
            confidence: 1.0,
            score: 10.0,
            threshold: 1.0,
            start_ns: 1_000,
            end_ns: None,
            last_ns: 2_000,
            windows: 1,
            detected_ns: 0,
            phase: AnomalyPhase::Start,
            model_version: 1,
            explanation: Default::default(),
            recommendations: Vec::new(),
            settled: false,
        }
    }

    /// A run of 40 s with nothing in it yet.
    pub(in crate::eval) fn outcome() -> Outcome {
        Outcome {
            events: Vec::new(),
            topology: None,
            congested: Vec::new(),
            alerts: Vec::new(),
            anomalies: Vec::new(),
            forecasts: Vec::new(),
            virtual_seconds: 40.0,
            scored_from_ns: 0,
            reports_sent: 1,
            reports_lost: 0,
            rows_late: 0,
        }
    }

    pub(in crate::eval) fn fault(
        kind: AnomalyType,
        benign: bool,
        primary: Vec<(EntityKind, &str)>,
    ) -> Fault {
        Fault {
            kind,
            origin: if benign {
                Origin::Benign
            } else {
                Origin::Injected
            },
            start_ns: 0,
            end_ns: 5_000,
            primary: primary
                .into_iter()
                .map(|(k, e)| (k, e.to_string()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{anomaly, fault, outcome};
    use super::*;
    use kplane_model::results::EntityKind;

    /// An episode that ended in the warm-up is not scored; one still raised after it is, whole;
    /// false alarms are counted per scored second.
    #[test]
    fn what_ended_in_the_warm_up_is_not_scored_and_rates_are_per_scored_second() {
        let s = 1_000_000_000;
        let record = |id: &str, phase, start: i64, last: i64| Anomaly {
            id: id.into(),
            phase,
            start_ns: start * s,
            last_ns: last * s,
            ..anomaly(EntityKind::Link, id, AnomalyType::Unknown)
        };
        let mut o = outcome();
        o.virtual_seconds = 60.0;
        o.anomalies = vec![
            record("1:1", AnomalyPhase::Start, 12, 13),
            record("1:1", AnomalyPhase::End, 12, 15),
            record("2:1", AnomalyPhase::Start, 18, 19),
            record("2:1", AnomalyPhase::Update, 18, 25),
            record("3:1", AnomalyPhase::Start, 30, 31),
        ];
        let o = o.after_warm_up(20 * s);
        let kept: Vec<_> = o.anomalies.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(kept, ["2:1", "2:1", "3:1"]);
        let mut d = Detection::default();
        d.score(&o, &o.anomalies, &[], s, &HashMap::new());
        assert_eq!((d.clean_false_alarms, d.clean_seconds), (2, 40.0));
    }

    #[test]
    fn only_the_faults_type_on_its_entities_or_its_incidents_collateral_is_right() {
        let faults = [
            fault(
                AnomalyType::Ddos,
                false,
                vec![
                    (EntityKind::Destination, "10.0.0.1"),
                    (EntityKind::Source, "10.0.0.9"),
                ],
            ),
            fault(
                AnomalyType::Unknown,
                true,
                vec![(EntityKind::Destination, "10.0.0.5")],
            ),
        ];
        let queue = anomaly(EntityKind::Queue, "5:2/0", AnomalyType::Congestion);
        let mut incidents = HashMap::new();
        let judge = |a: &Anomaly, i: &HashMap<String, usize>| verdict(a, &faults, 1_000, i);
        // The victim typed as the fault is right; typed congestion it is wrong.
        let victim = anomaly(EntityKind::Destination, "10.0.0.1", AnomalyType::Ddos);
        assert_eq!(judge(&victim, &incidents), Verdict::Right);
        let congested = anomaly(EntityKind::Destination, "10.0.0.1", AnomalyType::Congestion);
        assert_eq!(judge(&congested, &incidents), Verdict::Wrong);
        // A queue on the path: right only inside the DDoS's incident.
        assert_eq!(judge(&queue, &incidents), Verdict::Wrong);
        incidents.insert(queue.id.clone(), 0);
        assert_eq!(judge(&queue, &incidents), Verdict::Collateral);
        // A bystander typed as an attack is wrong even inside the incident (it would be blocked).
        let bystander = anomaly(EntityKind::Source, "10.0.0.3", AnomalyType::Ddos);
        incidents.insert(bystander.id.clone(), 0);
        assert_eq!(judge(&bystander, &incidents), Verdict::Wrong);
        // `unknown` on the victim is wrong; anything about benign traffic is wrong.
        let unknown = anomaly(EntityKind::Destination, "10.0.0.1", AnomalyType::Unknown);
        assert_eq!(judge(&unknown, &incidents), Verdict::Wrong);
        let crowd = anomaly(EntityKind::Destination, "10.0.0.5", AnomalyType::Unknown);
        incidents.insert(crowd.id.clone(), 1);
        assert_eq!(judge(&crowd, &incidents), Verdict::Wrong);
    }

    #[test]
    fn a_queue_raised_while_it_was_congested_is_right_and_counted_apart_from_what_was_injected() {
        let observed = Fault {
            origin: Origin::Observed,
            ..fault(
                AnomalyType::Congestion,
                false,
                vec![(EntityKind::Queue, "5:2/")],
            )
        };
        let faults = [observed];
        let run = outcome();
        let queue = anomaly(EntityKind::Queue, "5:2/0", AnomalyType::Congestion);
        // Another port's queue of the switch, and a link raised meanwhile, are still false
        // alarms.
        let neighbour = anomaly(EntityKind::Queue, "5:20/0", AnomalyType::Congestion);
        let link = anomaly(EntityKind::Link, "5:2", AnomalyType::Unknown);
        let none = HashMap::new();
        assert_eq!(verdict(&queue, &faults, 1_000, &none), Verdict::Right);
        assert_eq!(verdict(&neighbour, &faults, 1_000, &none), Verdict::Wrong);
        let mut d = Detection::default();
        let raised = [queue, neighbour, link];
        d.score(&run, &raised, &faults, 1_000, &none);
        assert_eq!((d.observed, d.observed_raised, d.observed_right), (1, 1, 1));
        assert_eq!(
            (d.false_alarms, d.clean_false_alarms),
            (2, 2),
            "a clean run"
        );
        let congestion = &d.types[&AnomalyType::Congestion];
        assert_eq!((congestion.raised, congestion.right), (2, 1));
        assert_eq!(
            (congestion.injected, congestion.detected),
            (0, 0),
            "not in the recall of what was injected"
        );
        // Missed, it is counted, not detected.
        let mut missed = Detection::default();
        missed.score(&run, &[], &faults, 1_000, &none);
        assert_eq!((missed.observed, missed.observed_raised), (1, 0));
    }

    #[test]
    fn what_is_raised_after_an_attack_ended_is_kept_to_be_paired_with_a_clean_run() {
        let ddos = fault(
            AnomalyType::Ddos,
            false,
            vec![(EntityKind::Destination, "10.0.0.1")],
        );
        let run = outcome();
        // The DDoS ended at 5 µs; a link raised 10 windows of 1 µs later.
        let mut link = anomaly(EntityKind::Link, "6:2", AnomalyType::Unknown);
        (link.start_ns, link.last_ns) = (15_000, 16_000);
        let mut d = Detection::default();
        let aftermath = d.score(&run, &[link], &[ddos], 1_000, &HashMap::new());
        assert_eq!(d.after_attack, 1);
        assert_eq!(aftermath, [(EntityKind::Link, "6:2".to_string(), 15_000)]);
    }

    #[test]
    fn precision_recall_and_f1() {
        let s = TypeScore {
            raised: 4,
            confidence: 3.0,
            right: 3,
            injected: 2,
            detected: 2,
            delays: vec![1.0],
        };
        assert_eq!(s.precision(), Some(0.75));
        assert_eq!(s.recall(), Some(1.0));
        assert!((s.f1().unwrap() - 6.0 / 7.0).abs() < 1e-9);
        assert_eq!(TypeScore::default().f1(), None);
        assert_eq!(s.confidence(), Some(0.75));
    }
}
