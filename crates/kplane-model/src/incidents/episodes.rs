//! Alert episodes: the stream processor's immediate events grouped per (entity, metric) into
//! one episode with a start, an end, a peak and a count of crossings, instead of one row per
//! crossing.
//!
//! * `threshold` opens an episode for its (metric, switch, port, queue, flow) or, while one is
//!   open, counts a crossing and raises the peak; `threshold_cleared` ends it. Several lanes
//!   (bus partitions) can see one switch's queue: an episode ends when every lane that raised
//!   it has cleared it.
//! * `report_loss_burst` / `report_loss_burst_cleared` per reporting switch, and
//!   `black_hole` / `black_hole_cleared` per flow, the same way.
//! * `path_change` and `loop` are episodes of one event (start = end).
//!
//! Severity: `critical` for black holes, loops, and breaches whose peak reached twice the
//! threshold; `warning` for other breaches and loss bursts; `info` for path changes.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;

use crate::results::{Alert, AlertKind};
use serde::Serialize;

/// What an episode is about: every identifying field of its alerts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Subject {
    pub metric: Option<String>,
    pub node_id: Option<u32>,
    pub queue_id: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_port: Option<u32>,
    pub src_ip: Option<IpAddr>,
    pub dst_ip: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub protocol: Option<u8>,
}

impl Subject {
    fn of(a: &Alert) -> Self {
        Self {
            metric: a.metric.clone(),
            node_id: a.node_id,
            queue_id: a.queue_id,
            egress_port: a.egress_port,
            src_ip: a.src_ip,
            dst_ip: a.dst_ip,
            src_port: a.src_port,
            dst_port: a.dst_port,
            protocol: a.protocol,
        }
    }
}

/// One episode, as the API serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Episode {
    /// `<kind>:<start ns>:<subject hash>`: stable across its updates.
    pub id: String,
    /// What raised it: `threshold`, `report_loss_burst`, `black_hole`, `path_change`, `loop`.
    pub kind: &'static str,
    pub severity: &'static str,
    #[serde(flatten)]
    pub subject: Subject,
    /// Event time of the first alert (ns since the Unix epoch).
    pub start_ns: i64,
    /// Event time of the latest alert.
    pub last_ns: i64,
    /// When it ended; `None` while it lasts.
    pub end_ns: Option<i64>,
    /// The largest value seen (latency, occupancy, reports lost).
    pub peak: Option<u64>,
    pub threshold: Option<u64>,
    /// Crossings above the threshold (1 for one-event episodes).
    pub crossings: u64,
    /// The path of its latest alert that had one.
    pub path: Vec<u32>,
    /// A path change's path before it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub previous_path: Vec<u32>,
    #[serde(skip)]
    lanes: BTreeSet<u32>,
}

/// An episode's news: started, updated (a crossing, a higher peak), ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Start,
    Update,
    End,
}

/// The kind an alert opens or updates, and whether it ends one.
fn family(kind: AlertKind) -> (&'static str, bool) {
    match kind {
        AlertKind::Threshold => ("threshold", false),
        AlertKind::ThresholdCleared => ("threshold", true),
        AlertKind::ReportLossBurst => ("report_loss_burst", false),
        AlertKind::ReportLossBurstCleared => ("report_loss_burst", true),
        AlertKind::BlackHole => ("black_hole", false),
        AlertKind::BlackHoleCleared => ("black_hole", true),
        AlertKind::PathChange => ("path_change", false),
        AlertKind::Loop => ("loop", false),
    }
}

fn severity(kind: &str, peak: Option<u64>, threshold: Option<u64>) -> &'static str {
    match kind {
        "black_hole" | "loop" => "critical",
        "path_change" => "info",
        "threshold" if peak.zip(threshold).is_some_and(|(p, t)| p >= 2 * t.max(1)) => "critical",
        _ => "warning",
    }
}

/// Groups alerts into episodes; keeps the open ones and the latest `keep` ended ones.
#[derive(Debug)]
pub struct EpisodeBook {
    open: HashMap<(&'static str, Subject), Episode>,
    ended: VecDeque<Episode>,
    keep: usize,
}

impl EpisodeBook {
    pub fn new(keep: usize) -> Self {
        Self {
            open: HashMap::new(),
            ended: VecDeque::new(),
            keep: keep.max(1),
        }
    }

    /// Applies one alert; returns the episode it started, updated or ended. A clear of an
    /// episode not open here (it started before what was read) changes nothing.
    pub fn apply(&mut self, a: &Alert) -> Option<(Phase, Episode)> {
        let (kind, clears) = family(a.kind?);
        let key = (kind, Subject::of(a));
        if clears {
            let e = self.open.get_mut(&key)?;
            e.lanes.remove(&a.partition);
            e.last_ns = e.last_ns.max(a.time_ns);
            e.peak = e.peak.max(a.value);
            if !e.lanes.is_empty() {
                return Some((Phase::Update, e.clone()));
            }
            let mut e = self.open.remove(&key)?;
            e.end_ns = Some(a.time_ns);
            e.severity = severity(e.kind, e.peak, e.threshold);
            self.remember(e.clone());
            return Some((Phase::End, e));
        }
        if let Some(e) = self.open.get_mut(&key) {
            e.lanes.insert(a.partition);
            e.crossings += 1;
            e.last_ns = e.last_ns.max(a.time_ns);
            e.peak = e.peak.max(a.value);
            if !a.path.is_empty() {
                e.path.clone_from(&a.path);
            }
            e.severity = severity(e.kind, e.peak, e.threshold);
            return Some((Phase::Update, e.clone()));
        }
        let mut e = Episode {
            id: String::new(),
            kind,
            severity: severity(kind, a.value, a.threshold),
            subject: key.1.clone(),
            start_ns: a.time_ns,
            last_ns: a.time_ns,
            end_ns: None,
            peak: a.value,
            threshold: a.threshold,
            crossings: 1,
            path: a.path.clone(),
            previous_path: a.previous_path.clone(),
            lanes: BTreeSet::from([a.partition]),
        };
        e.id = format!("{kind}:{}:{:016x}", a.time_ns, subject_hash(&e.subject));
        if matches!(kind, "path_change" | "loop") {
            // One event: it starts and ends at once.
            e.end_ns = Some(a.time_ns);
            self.remember(e.clone());
            return Some((Phase::Start, e));
        }
        self.open.insert(key, e.clone());
        Some((Phase::Start, e))
    }

    fn remember(&mut self, e: Episode) {
        if self.ended.len() == self.keep {
            self.ended.pop_front();
        }
        self.ended.push_back(e);
    }

    /// Every episode known, newest start first.
    pub fn episodes(&self) -> Vec<Episode> {
        let mut all: Vec<Episode> = self
            .open
            .values()
            .chain(self.ended.iter())
            .cloned()
            .collect();
        all.sort_by(|a, b| b.start_ns.cmp(&a.start_ns).then_with(|| a.id.cmp(&b.id)));
        all
    }
}

/// A stable hash of a subject (FNV-1a over its debug form: the id only needs to be unique
/// among episodes that start at the same nanosecond).
fn subject_hash(s: &Subject) -> u64 {
    format!("{s:?}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(kind: AlertKind, t: i64, partition: u32, value: u64) -> Alert {
        Alert {
            time_ns: t,
            kind: Some(kind),
            partition,
            node_id: Some(3),
            queue_id: Some(0),
            metric: Some("queue_occupancy".into()),
            value: Some(value),
            threshold: Some(64),
            ..Alert::default()
        }
    }

    #[test]
    fn crossings_of_one_queue_are_one_episode_with_its_peak() {
        use AlertKind::*;
        let mut book = EpisodeBook::new(10);
        let phases: Vec<Phase> = [
            queue(Threshold, 10, 0, 65),
            queue(Threshold, 20, 0, 90),
            queue(Threshold, 30, 0, 70),
            queue(ThresholdCleared, 40, 0, 90),
        ]
        .iter()
        .map(|a| book.apply(a).unwrap().0)
        .collect();
        assert_eq!(
            phases,
            [Phase::Start, Phase::Update, Phase::Update, Phase::End]
        );
        let all = book.episodes();
        assert_eq!(all.len(), 1);
        let e = &all[0];
        assert_eq!(
            (e.start_ns, e.end_ns, e.peak, e.crossings, e.severity),
            (10, Some(40), Some(90), 3, "warning")
        );
        // A new breach of the same queue is a new episode; a peak of twice the threshold is
        // critical.
        book.apply(&queue(Threshold, 50, 0, 130));
        let e = &book.episodes()[0];
        assert_eq!((e.start_ns, e.end_ns, e.severity), (50, None, "critical"));
    }

    #[test]
    fn an_episode_seen_by_several_lanes_ends_when_all_have_cleared() {
        use AlertKind::*;
        let mut book = EpisodeBook::new(10);
        book.apply(&queue(Threshold, 10, 0, 70));
        assert_eq!(
            book.apply(&queue(Threshold, 11, 5, 80)).unwrap().0,
            Phase::Update
        );
        assert_eq!(
            book.apply(&queue(ThresholdCleared, 20, 0, 70)).unwrap().0,
            Phase::Update
        );
        let (phase, e) = book.apply(&queue(ThresholdCleared, 25, 5, 80)).unwrap();
        assert_eq!(
            (phase, e.end_ns, e.peak, e.crossings),
            (Phase::End, Some(25), Some(80), 2)
        );
        // A clear without its start (read from mid-episode) changes nothing.
        assert!(book.apply(&queue(ThresholdCleared, 30, 0, 70)).is_none());
    }

    #[test]
    fn path_changes_are_episodes_of_one_event() {
        let mut book = EpisodeBook::new(10);
        let a = Alert {
            time_ns: 5,
            kind: Some(AlertKind::PathChange),
            path: vec![1, 4, 3],
            ..Alert::default()
        };
        let (phase, e) = book.apply(&a).unwrap();
        assert_eq!(
            (phase, e.end_ns, e.severity),
            (Phase::Start, Some(5), "info")
        );
    }
}
