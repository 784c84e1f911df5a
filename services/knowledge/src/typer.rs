//! Anomaly typing by definition, with a measured confidence.
//!
//! A type is a statement about how an entity-window differs from the entity's own usual
//! (the `vs_usual_…` features: natural-log ratios for counts), or about a share or a silence —
//! never about its absolute size, so a definition means the same on a 100 Mb/s fat tree and a
//! 10 Gb/s leaf-spine, with 16 hosts or 64 (docs/knowledge.md, "Anomaly types"):
//!
//! * **port scan**: a destination reached on at least 4× its usual ports; a source that opens
//!   at least 4× its usual flows towards 4× its usual ports or destinations, flows that carry
//!   little (a probe is a packet or two; a transfer to many hosts is not a scan) and are not
//!   mostly too young to tell (begun in the window's last quarter: a transfer's first
//!   milliseconds carry as little as probes — such a window is `unknown`, and the episode
//!   takes its type from the next one);
//! * **DDoS**: a destination with two of three signs — at least 1.5× its usual packets, from
//!   4× its usual sources, in packets a fifth smaller than its usual (a flood that replaces
//!   part of the victim's traffic changes where it comes from more than how much: the last
//!   two, whatever its volume), or 4× its usual flows in packets a fifth smaller (spoofed
//!   packets each open a flow), and not in packets a quarter larger (an incast's answers); a
//!   source sending 1.5× its usual packets, a fifth smaller, to fewer than 2× its usual
//!   destinations (one of the attackers);
//! * neither at an address most of whose reports are in flows answered by their reverse, and
//!   whose traffic the other way grew to twice its usual and by 4× the
//!   bytes this way grew by: what it gets is the return half of its own sending (its copies'
//!   acknowledgements, to as many of its ports as it sends from; the requests it answers);
//!   nor a port scan at a source whose answered flows carry 4× more one way than the other
//!   (a server answering a crowd at its clients' many ports: a probe and its answer are alike
//!   in size), or whose packets grew a quarter larger than its usual (probes are small: it is
//!   sending data, answers or copies, to those ports);
//! * **congestion**: a queue with at least a tenth more of its samples over the congestion
//!   threshold than usual (occupancy, not report counts), or whose peak occupancy burst to 4×
//!   its usual peak and [`BURST_PACKETS`] over it (a microburst: an incast's tens of
//!   milliseconds fill a port's queue without holding it over the threshold for long); a
//!   destination, not flooded, whose
//!   flows met 4× their usual queueing on the way to it (their transit: an incast converging
//!   on it, hop latency, not report counts) and are not mostly too young to tell (a flood's
//!   first milliseconds queue too, before its packets are counted: such a window is
//!   `unknown`, and the episode takes its type from the next one);
//! * **link failure**: a switch-to-switch link whose silence is surprising (≥ 5 nats over the
//!   routes it carries, see
//!   [`crate::baseline`]), or whose opposite direction's is while its own samples fell 4×;
//! * anything else raised is `unknown`, for every kind, and nothing is recommended for it.
//!
//! The labelled anomalies (`types.json`) do not choose the types; they measure them. A type's
//! confidence for an entity kind is its precision on the labelled set, smoothed —
//! (right + 1) / (said + 2), 0.5 with no labels — and a type whose confidence is below
//! [`MIN_CONFIDENCE`] is not said: the answer is `unknown`. In `kplane eval knowledge` the
//! labelled set comes from other fabric families than the one scored, so the confidence is a
//! probability measured on data the scored family never contributed to.

use std::collections::BTreeMap;

use kplane_model::results::{AnomalyType, EntityKind};
use serde::{Deserialize, Serialize};

use crate::features::{MODELLED, names};

/// The types a definition can give.
pub const DEFINED: [AnomalyType; 5] = [
    AnomalyType::Ddos,
    AnomalyType::PortScan,
    AnomalyType::Congestion,
    AnomalyType::LinkFailure,
    AnomalyType::Unknown,
];

/// Below this confidence a type is not said (`unknown`).
pub const MIN_CONFIDENCE: f64 = 0.5;

/// Half again the usual (a natural-log ratio): the smallest flood the evaluation injects is
/// half the victim's usual on top of it.
const HALF_AGAIN: f64 = 0.405;
/// Twice the usual.
const TWICE: f64 = std::f64::consts::LN_2;
/// Four times the usual.
const FOURFOLD: f64 = 2.0 * std::f64::consts::LN_2;
/// Packets a fifth smaller than usual: ln 0.8.
const SMALLER_PACKETS: f64 = -0.223;
/// Packets a quarter larger than usual: ln 1.25, the mirror of [`SMALLER_PACKETS`].
const LARGER_PACKETS: f64 = -SMALLER_PACKETS;
/// A tenth more of a queue's samples over the congestion threshold than usual.
const MORE_CONGESTED: f64 = 0.1;
/// Packets a queue's peak must rise over its usual peak to be a burst: four times the
/// occupancy the models scale a queue by, so a packet or two meeting in an empty queue is not
/// one in any fabric; an incast into a port fills it by tens to hundreds.
const BURST_PACKETS: f64 = 4.0 * crate::model::OCCUPANCY_FLOOR;
/// The most an address receives back for what it sends, as a share of it: a TCP receiver's
/// acknowledgements are 2–4 % of the bytes they acknowledge, an HTTPS request 1–4 % of its
/// answer. Packets an address gets beyond its usual are the return half of its own sending
/// when its sending grew by at least this many times their bytes.
const RETURN_SHARE: f64 = 0.25;
/// A link's silence this surprising (nats) is a failure: e^-5 ≈ 0.7 % by chance.
const SURPRISING_SILENCE: f64 = 5.0;
/// Reports each flow a scan adds carries at most: a probe is a packet or two (with a retry).
/// The labelled scanners' added flows carried 8 at most; heavy hitters' and transfers' 100 and
/// more.
const PROBE_REPORTS: f64 = 16.0;
/// The share of a source's flows begun in the window's last quarter above which their volume
/// says nothing yet (a scan running through the window has a quarter of its probes there).
const MOSTLY_LATE: f64 = 0.5;

/// One labelled anomalous entity-window: its features by name (the raw values of the
/// anomaly's explanation) and the type the ground truth gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Labelled {
    pub kind: EntityKind,
    pub features: BTreeMap<String, f64>,
    #[serde(rename = "type")]
    pub label: AnomalyType,
}

/// The type an entity-window of `kind` is by definition; `f` gives a feature by name (0 when
/// absent).
pub fn define(kind: EntityKind, f: impl Fn(&str) -> f64) -> AnomalyType {
    match kind {
        EntityKind::Destination => {
            // The return half of its own sending — its peers' acknowledgements, small, many,
            // to as many of its ports as it sends from — is no attack on it.
            let attacked = !returning(&f);
            if attacked && f("vs_usual_log_dst_ports") >= FOURFOLD {
                AnomalyType::PortScan
            } else if attacked && !flood_signs(&f).is_empty() {
                AnomalyType::Ddos
            } else if f("late_flow_share") >= MOSTLY_LATE {
                // A flood's first moments: its packets queue, and its young flows have carried
                // one report each, so "not flooded" cannot be told yet — the next window tells.
                AnomalyType::Unknown
            } else if f("vs_usual_log_transit_us") >= FOURFOLD {
                AnomalyType::Congestion
            } else {
                AnomalyType::Unknown
            }
        }
        EntityKind::Source => {
            if f("vs_usual_log_flows") >= FOURFOLD
                && (f("vs_usual_log_dst_ports") >= FOURFOLD
                    || f("vs_usual_log_destinations") >= FOURFOLD)
                && added_per_added_flow("log_reports", &f) <= PROBE_REPORTS
                && f("late_flow_share") < MOSTLY_LATE
                && !exchanging(&f)
                // Probes are small: a source whose packets grew a quarter larger than its
                // usual is sending data (answers, copies), however many ports it reaches.
                && !larger_packets(&f)
            {
                AnomalyType::PortScan
            } else if f("vs_usual_log_reports") >= HALF_AGAIN
                && smaller_packets(&f)
                && !returning(&f)
                && f("vs_usual_log_destinations") < TWICE
                // A flood aims at a service: a source reaching 4× its usual ports is probing
                // (a scan too young to type, above), never flooding.
                && f("vs_usual_log_dst_ports") < FOURFOLD
            {
                AnomalyType::Ddos
            } else {
                AnomalyType::Unknown
            }
        }
        EntityKind::Queue if f("vs_usual_congested_fraction") >= MORE_CONGESTED || burst(&f) => {
            AnomalyType::Congestion
        }
        EntityKind::Link
            if f("silence_surprise") >= SURPRISING_SILENCE
                || (f("reverse_silence_surprise") >= SURPRISING_SILENCE
                    && f("vs_usual_log_samples") <= -FOURFOLD) =>
        {
            AnomalyType::LinkFailure
        }
        _ => AnomalyType::Unknown,
    }
}

/// A way an address's window fits an attack's definition. Clean windows fit some ways far
/// more often than others — a sparse host's mice swing its packets up and their sizes down by
/// chance, while none brings it 4× its usual sources — so each way's bar is calibrated on its
/// own ([`crate::model`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// A port scan, at either end.
    Scan,
    /// A source's flood.
    Flood,
    /// A destination's flood: more packets, from many new sources.
    FloodMorePacketsNewSources,
    /// A destination's flood: more packets, smaller.
    FloodMorePacketsSmaller,
    /// A destination's flood: from many new sources, in smaller packets (one that replaces
    /// part of the victim's traffic).
    FloodNewSourcesSmaller,
    /// A destination's flood: many more flows, in smaller packets (spoofed packets, each a
    /// flow of its own, replacing part of the victim's traffic from few sources).
    FloodMoreFlowsSmaller,
}

impl Fit {
    /// The ways a window of `kind` can fit.
    pub fn of(kind: EntityKind) -> &'static [Fit] {
        match kind {
            EntityKind::Destination => &[
                Fit::Scan,
                Fit::FloodMorePacketsNewSources,
                Fit::FloodMorePacketsSmaller,
                Fit::FloodNewSourcesSmaller,
                Fit::FloodMoreFlowsSmaller,
            ],
            EntityKind::Source => &[Fit::Scan, Fit::Flood],
            _ => &[],
        }
    }
}

/// The ways an entity-window (its features in [`names`] order) fits an attack's definition:
/// none unless it is a DDoS or a port scan by definition.
pub(crate) fn fits(kind: EntityKind, x: &[f64]) -> Vec<Fit> {
    match (define_vector(kind, x), kind) {
        (AnomalyType::PortScan, _) => vec![Fit::Scan],
        (AnomalyType::Ddos, EntityKind::Destination) => flood_signs(&|n| feature(kind, x, n)),
        (AnomalyType::Ddos, _) => vec![Fit::Flood],
        _ => Vec::new(),
    }
}

/// A destination's flood signs — more packets, many new sources, smaller packets — as the
/// pairs of them that hold: two signs make a flood; and many more flows in smaller packets,
/// which a flood whose packets each open a flow brings even when it replaces part of the
/// victim's traffic from few sources. Many more flows is no sign with the others: a crowd of
/// clients brings more flows, from new sources, with more packets. None holds for packets a
/// quarter larger than the victim's usual: what brings more and larger packets from many new
/// senders converges on it (an incast's answers, a shuffle); an amplification flood, which
/// arrives the same way, is typed by its queueing (congestion) or not at all, and never
/// blocked.
fn flood_signs(f: &impl Fn(&str) -> f64) -> Vec<Fit> {
    if larger_packets(f) {
        return Vec::new();
    }
    let more = f("vs_usual_log_reports") >= HALF_AGAIN;
    let sources = many_new_sources(f);
    let smaller = smaller_packets(f);
    let flows = f("vs_usual_log_flows") >= FOURFOLD;
    [
        (more && sources, Fit::FloodMorePacketsNewSources),
        (more && smaller, Fit::FloodMorePacketsSmaller),
        (sources && smaller, Fit::FloodNewSourcesSmaller),
        (flows && smaller, Fit::FloodMoreFlowsSmaller),
    ]
    .into_iter()
    .filter_map(|(holds, fit)| holds.then_some(fit))
    .collect()
}

/// Whether a queue's peak occupancy burst to 4× its usual peak (both counted from one, so an
/// empty queue's usual is one) and [`BURST_PACKETS`] over it.
fn burst(f: &impl Fn(&str) -> f64) -> bool {
    let (peak, over) = (f("occupancy_max"), f("vs_usual_occupancy_max"));
    let usual = (peak - over).max(0.0);
    over >= BURST_PACKETS && peak.ln_1p() - usual.ln_1p() >= FOURFOLD
}

/// The queue window `usual` (features in [`names`] order) with its peak [`BURST_PACKETS`] over
/// its usual: the least queueing the definitions call a burst, which a queue must be as far
/// from normal as to be raised ([`crate::model`]).
pub(crate) fn least_burst(usual: &[f64]) -> Vec<f64> {
    let names = names(EntityKind::Queue);
    let mut x = usual.to_vec();
    for (v, name) in x.iter_mut().zip(names) {
        if name.ends_with("occupancy_max") {
            *v += BURST_PACKETS;
        }
    }
    x
}

/// How much of `feature` (a count, as `ln(1 + x)`) the window has beyond the entity's usual.
fn added(feature: &str, f: &impl Fn(&str) -> f64) -> f64 {
    f(feature).exp() - (f(feature) - f(&format!("vs_usual_{feature}"))).exp()
}

/// How much of `feature` each flow the entity has beyond its usual added: the window's count
/// less the usual, over the flows less the usual.
fn added_per_added_flow(feature: &str, f: &impl Fn(&str) -> f64) -> f64 {
    added(feature, f) / added("log_flows", f).max(f64::MIN_POSITIVE)
}

/// Whether an address is in exchanges: most of its reports are in flows answered by their
/// reverse, and its traffic the other way grew to at least twice its usual.
fn in_exchanges(f: &impl Fn(&str) -> f64) -> bool {
    f("answered_share") >= 0.5 && f("vs_usual_log_bytes_other_way") >= TWICE
}

/// Whether what an address's window carries beyond its usual is the return half of its own
/// traffic the other way: it is [in exchanges](in_exchanges), and its traffic the other way
/// grew by at least 1 / [`RETURN_SHARE`] times the bytes this way grew by — a host copying out
/// being acknowledged, a server answering a crowd's requests. Not a flood at either end,
/// however small and many those packets are; a victim does not answer a flood's flows with
/// more than they bring, so its own sending swinging up by chance does not excuse it.
fn returning(f: &impl Fn(&str) -> f64) -> bool {
    in_exchanges(f) && outweighs(added("log_bytes_other_way", f), added("log_bytes", f))
}

/// Whether added bytes `more` are at least 1 / [`RETURN_SHARE`] times added bytes `less`
/// (bytes that fell count as none).
fn outweighs(more: f64, less: f64) -> bool {
    RETURN_SHARE * more >= less.max(0.0)
}

/// Whether an address's added traffic is exchanges, not probes: it is [in
/// exchanges](in_exchanges), and its added bytes one way are at least 1 / [`RETURN_SHARE`]
/// times those the other way — a server answering a crowd of clients at their many ports (its
/// sending the larger), a client fetching from many servers (the [return half](returning)). A
/// probe and its answer (a SYN and its SYN-ACK or RST) are alike in size.
fn exchanging(f: &impl Fn(&str) -> f64) -> bool {
    let (sent, received) = (added("log_bytes", f), added("log_bytes_other_way", f));
    in_exchanges(f) && (outweighs(received, sent) || outweighs(sent, received))
}

/// Whether a destination's window (its features in [`names`] order) is reached from 4× its
/// usual sources: a flood from many new sources (spoofed, a botnet) is answered by blocking its
/// kind of traffic, not its heaviest sources — those are the victim's own clients.
pub(crate) fn from_many_new_sources(kind: EntityKind, x: &[f64]) -> bool {
    kind == EntityKind::Destination && many_new_sources(&|n| feature(kind, x, n))
}

/// How the entity's packets compare in size with its usual ones (a natural-log ratio).
fn vs_usual_packet_size(f: &impl Fn(&str) -> f64) -> f64 {
    f("vs_usual_log_bytes") - f("vs_usual_log_reports")
}

/// Packets a fifth smaller than the entity's usual.
fn smaller_packets(f: &impl Fn(&str) -> f64) -> bool {
    vs_usual_packet_size(f) <= SMALLER_PACKETS
}

/// Packets a quarter larger than the entity's usual.
fn larger_packets(f: &impl Fn(&str) -> f64) -> bool {
    vs_usual_packet_size(f) >= LARGER_PACKETS
}

/// A destination reached from 4× its usual sources.
fn many_new_sources(f: &impl Fn(&str) -> f64) -> bool {
    f("vs_usual_log_sources") >= FOURFOLD
}

/// A feature of a vector in [`names`] order by name (0 when absent).
pub(crate) fn feature(kind: EntityKind, x: &[f64], name: &str) -> f64 {
    let names = names(kind);
    names
        .iter()
        .position(|m| *m == name)
        .and_then(|i| x.get(i))
        .copied()
        .unwrap_or(0.0)
}

/// The type of a sample's feature vector (in [`names`] order) by definition.
pub(crate) fn define_vector(kind: EntityKind, x: &[f64]) -> AnomalyType {
    define(kind, |n| feature(kind, x, n))
}

/// How often a definition was right on the labelled set, per entity kind and type.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Labelled rows the definition gave this type.
    pub said: usize,
    /// Of those, labelled it.
    pub right: usize,
    /// Labelled rows of this type (for the recall).
    pub labelled: usize,
}

impl Tally {
    /// The smoothed precision: a calibrated probability that the type is right.
    pub fn confidence(&self) -> f64 {
        (self.right as f64 + 1.0) / (self.said as f64 + 2.0)
    }
}

#[derive(Debug, Default)]
pub struct Typer {
    tallies: BTreeMap<(EntityKind, AnomalyType), Tally>,
    pub samples: usize,
}

impl Typer {
    /// The definitions, measured on `labelled` (none: every confidence is 0.5).
    pub fn measured(labelled: &[Labelled]) -> Self {
        let mut tallies: BTreeMap<(EntityKind, AnomalyType), Tally> = BTreeMap::new();
        for l in labelled {
            let said = define(l.kind, |n| l.features.get(n).copied().unwrap_or(0.0));
            let t = tallies.entry((l.kind, said)).or_default();
            t.said += 1;
            t.right += usize::from(said == l.label);
            tallies.entry((l.kind, l.label)).or_default().labelled += 1;
        }
        Self {
            tallies,
            samples: labelled.len(),
        }
    }

    /// Per kind and type, how the definitions did on the labelled set.
    pub fn tallies(&self) -> &BTreeMap<(EntityKind, AnomalyType), Tally> {
        &self.tallies
    }

    /// Per type over every kind, the definitions' precision on the labelled set.
    pub fn precision(&self) -> Vec<(AnomalyType, f64)> {
        DEFINED
            .iter()
            .filter_map(|t| {
                let (said, right) = MODELLED
                    .iter()
                    .filter_map(|k| self.tallies.get(&(*k, *t)))
                    .fold((0, 0), |(s, r), x| (s + x.said, r + x.right));
                (said > 0).then(|| (*t, right as f64 / said as f64))
            })
            .collect()
    }

    fn confidence(&self, kind: EntityKind, t: AnomalyType) -> f64 {
        self.tallies
            .get(&(kind, t))
            .copied()
            .unwrap_or_default()
            .confidence()
    }

    /// The type of an anomalous entity-window (its features in [`names`] order) and its
    /// confidence; `unknown` when no definition holds or the one that holds is below
    /// [`MIN_CONFIDENCE`] for this kind.
    pub fn classify(&self, kind: EntityKind, x: &[f64]) -> (AnomalyType, f64) {
        let t = define_vector(kind, x);
        match self.confidence(kind, t) {
            p if t == AnomalyType::Unknown || p >= MIN_CONFIDENCE => (t, p),
            _ => (
                AnomalyType::Unknown,
                self.confidence(kind, AnomalyType::Unknown),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: EntityKind, features: &[(&str, f64)], label: AnomalyType) -> Labelled {
        Labelled {
            kind,
            features: features.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            label,
        }
    }

    fn vector(kind: EntityKind, features: &[(&str, f64)]) -> Vec<f64> {
        names(kind)
            .iter()
            .map(|n| {
                features
                    .iter()
                    .find(|(m, _)| m == n)
                    .map_or(0.0, |(_, v)| *v)
            })
            .collect()
    }

    #[test]
    fn each_type_is_a_change_from_the_entitys_usual_not_a_size() {
        use AnomalyType::*;
        use EntityKind::*;
        type Case<'a> = (EntityKind, &'a [(&'a str, f64)], AnomalyType);
        let cases: [Case; 36] = [
            // A host copying out at 7 e-folds its usual bytes, acknowledged by its peers: 4
            // e-folds its usual packets in, a fifth their usual size (the independent
            // generator's backup, seed 521), and on 4× its usual ports (to the ports it copies
            // from: seed 522); a peer sending those acknowledgements. Neither is a flood nor a
            // scan. A flood on a host whose own sending only doubled still is.
            (
                Destination,
                &[
                    ("log_bytes", 16.4),
                    ("vs_usual_log_reports", 4.2),
                    ("vs_usual_log_bytes", 2.6),
                    ("log_bytes_other_way", 20.2),
                    ("vs_usual_log_bytes_other_way", 6.2),
                    ("answered_share", 0.95),
                ],
                Unknown,
            ),
            (
                Destination,
                &[
                    ("log_bytes", 14.4),
                    ("vs_usual_log_reports", 6.2),
                    ("vs_usual_log_bytes", 4.9),
                    ("vs_usual_log_dst_ports", 1.5),
                    ("log_bytes_other_way", 17.1),
                    ("vs_usual_log_bytes_other_way", 7.6),
                    ("answered_share", 0.9),
                ],
                Unknown,
            ),
            (
                Source,
                &[
                    ("log_bytes", 14.0),
                    ("vs_usual_log_reports", 3.0),
                    ("vs_usual_log_bytes", 1.0),
                    ("log_bytes_other_way", 19.0),
                    ("vs_usual_log_bytes_other_way", 4.0),
                    ("answered_share", 1.0),
                ],
                Unknown,
            ),
            (
                Destination,
                &[
                    ("log_bytes", 15.0),
                    ("vs_usual_log_reports", 2.8),
                    ("vs_usual_log_bytes", 2.2),
                    ("log_bytes_other_way", 15.0),
                    ("vs_usual_log_bytes_other_way", 0.8),
                    ("answered_share", 0.6),
                ],
                Ddos,
            ),
            // Spoofed sources replacing half of a host's traffic while it happens to send 8×
            // its usual (the deployed test's weak flood, one window): what it gets is not the
            // reverse of what it sends, so it is a flood all the same.
            (
                Destination,
                &[
                    ("log_bytes", 10.3),
                    ("vs_usual_log_reports", 1.2),
                    ("vs_usual_log_bytes", -0.5),
                    ("vs_usual_log_sources", 2.8),
                    ("log_bytes_other_way", 12.4),
                    ("vs_usual_log_bytes_other_way", 2.1),
                    ("answered_share", 0.1),
                ],
                Ddos,
            ),
            // A flood of small packets from the usual sources, and one from spoofed sources.
            (
                Destination,
                &[("vs_usual_log_reports", 2.8), ("vs_usual_log_bytes", 2.2)],
                Ddos,
            ),
            (
                Destination,
                &[
                    ("vs_usual_log_reports", 1.8),
                    ("vs_usual_log_bytes", 1.7),
                    ("vs_usual_log_sources", 3.5),
                ],
                Ddos,
            ),
            // Spoofed sources replacing half of the victim's traffic: no more packets, but
            // from 5× its usual sources, a third the size.
            (
                Destination,
                &[
                    ("vs_usual_log_reports", -0.1),
                    ("vs_usual_log_bytes", -1.2),
                    ("vs_usual_log_sources", 1.6),
                ],
                Ddos,
            ),
            // Many new clients of the usual packets (a flash crowd's), and many fewer packets
            // a third the size from the usual sources (a transfer ended): neither is a flood.
            (
                Destination,
                &[
                    ("vs_usual_log_reports", 0.2),
                    ("vs_usual_log_bytes", 0.2),
                    ("vs_usual_log_sources", 2.0),
                ],
                Unknown,
            ),
            (
                Destination,
                &[("vs_usual_log_reports", -0.3), ("vs_usual_log_bytes", -1.4)],
                Unknown,
            ),
            // A flash crowd: more packets of the usual size from the usual sources.
            (
                Destination,
                &[("vs_usual_log_reports", 2.2), ("vs_usual_log_bytes", 2.2)],
                Unknown,
            ),
            // An incast: a few more senders of the usual packets, and 8× the usual queueing
            // on the way (a flood queues its victim too, and stays a flood).
            (
                Destination,
                &[
                    ("vs_usual_log_reports", 1.2),
                    ("vs_usual_log_bytes", 1.2),
                    ("vs_usual_log_sources", 0.4),
                    ("vs_usual_log_transit_us", 2.1),
                ],
                Congestion,
            ),
            (
                Destination,
                &[
                    ("vs_usual_log_reports", 2.8),
                    ("vs_usual_log_bytes", 2.2),
                    ("vs_usual_log_transit_us", 2.1),
                ],
                Ddos,
            ),
            // An incast from 8 senders (the independent generator's, seed 392): 287× the
            // usual packets from 4.2× the usual sources, but 2.9× larger and queued 300×: the
            // answers the host asked for, not a flood.
            (
                Destination,
                &[
                    ("vs_usual_log_reports", 5.66),
                    ("vs_usual_log_bytes", 6.71),
                    ("vs_usual_log_sources", 1.42),
                    ("vs_usual_log_transit_us", 5.73),
                ],
                Congestion,
            ),
            // A flood begun 0.1 s before the window's end (the BMv2 lab's, 1 s windows): 37
            // young flows of one small packet each, queued 10× the usual; no background to the
            // victim yet. Fewer reports than usual, but 11× the flows in packets a sixth of
            // the usual size: a flood already, and no congestion.
            (
                Destination,
                &[
                    ("vs_usual_log_flows", 2.4),
                    ("vs_usual_log_reports", -0.2),
                    ("vs_usual_log_bytes", -1.9),
                    ("vs_usual_log_sources", 0.3),
                    ("vs_usual_log_transit_us", 2.3),
                    ("late_flow_share", 1.0),
                ],
                Ddos,
            ),
            // The same young flows in packets of the usual size: not yet a flood, but no
            // congestion either.
            (
                Destination,
                &[
                    ("vs_usual_log_flows", 2.4),
                    ("vs_usual_log_reports", -0.2),
                    ("vs_usual_log_bytes", -0.2),
                    ("vs_usual_log_sources", 0.3),
                    ("vs_usual_log_transit_us", 2.3),
                    ("late_flow_share", 1.0),
                ],
                Unknown,
            ),
            (
                Destination,
                &[("vs_usual_log_dst_ports", 2.7), ("vs_usual_log_flows", 0.7)],
                PortScan,
            ),
            (
                Source,
                &[("vs_usual_log_flows", 2.2), ("vs_usual_log_dst_ports", 2.7)],
                PortScan,
            ),
            (
                Source,
                &[("vs_usual_log_reports", 2.0), ("vs_usual_log_bytes", 1.4)],
                Ddos,
            ),
            // A transfer to every host: 10× its usual flows towards 10× its usual
            // destinations (as a horizontal scan), but each new flow carried 100 reports.
            (
                Source,
                &[
                    ("log_flows", 74.0f64.ln_1p()),
                    ("vs_usual_log_flows", 10.0f64.ln()),
                    ("log_reports", 7000.0f64.ln_1p()),
                    ("vs_usual_log_reports", 10.0f64.ln()),
                    ("vs_usual_log_destinations", 10.0f64.ln()),
                ],
                Unknown,
            ),
            // The same new flows carrying a probe each: a scan.
            (
                Source,
                &[
                    ("log_flows", 74.0f64.ln_1p()),
                    ("vs_usual_log_flows", 10.0f64.ln()),
                    ("log_reports", 767.0f64.ln_1p()),
                    ("vs_usual_log_reports", (767.0f64 / 700.0).ln()),
                    ("vs_usual_log_destinations", 10.0f64.ln()),
                ],
                PortScan,
            ),
            // A server answering a flash crowd (`indep-3tier`, seed 572): 5.5× its usual flows
            // to 4× its usual destinations at 6× their ports, 12 reports each, nearly every one
            // answered; it received 4.9× its usual bytes and sent 8× as many more: answers, not
            // probes.
            (
                Source,
                &[
                    ("log_flows", 3.04),
                    ("vs_usual_log_flows", 1.70),
                    ("vs_usual_log_dst_ports", 1.82),
                    ("vs_usual_log_destinations", 1.40),
                    ("log_reports", 5.38),
                    ("vs_usual_log_reports", 2.01),
                    ("log_bytes", 12.78),
                    ("vs_usual_log_bytes", 2.74),
                    ("log_bytes_other_way", 10.89),
                    ("vs_usual_log_bytes_other_way", 1.58),
                    ("answered_share", 0.94),
                ],
                Unknown,
            ),
            // A server answering a flash crowd (independent generator at 10 Gb/s, seed 803):
            // 7× its usual flows to 24× their ports, 90 % answered, its added bytes only 1.6×
            // those it received (requests of a few kB) — but its packets 1.6× their usual
            // size: answers, not probes.
            (
                Source,
                &[
                    ("log_flows", 5.27),
                    ("vs_usual_log_flows", 1.95),
                    ("log_dst_ports", 5.19),
                    ("vs_usual_log_dst_ports", 3.17),
                    ("vs_usual_log_destinations", 0.61),
                    ("log_reports", 7.96),
                    ("vs_usual_log_reports", 2.49),
                    ("log_bytes", 15.34),
                    ("vs_usual_log_bytes", 2.97),
                    ("log_bytes_other_way", 14.98),
                    ("vs_usual_log_bytes_other_way", 2.11),
                    ("answered_share", 0.90),
                    ("late_flow_share", 0.28),
                ],
                Unknown,
            ),
            // A scan its targets answer, each probe with a packet alike in size (the
            // independent generator's): answered, but no larger one way than the other.
            (
                Source,
                &[
                    ("log_flows", 3.04),
                    ("vs_usual_log_flows", 1.70),
                    ("vs_usual_log_dst_ports", 1.82),
                    ("log_reports", 5.38),
                    ("vs_usual_log_reports", 2.01),
                    ("log_bytes", 11.5),
                    ("vs_usual_log_bytes", 1.0),
                    ("log_bytes_other_way", 11.4),
                    ("vs_usual_log_bytes_other_way", 1.0),
                    ("answered_share", 0.99),
                ],
                PortScan,
            ),
            // The same, but 70 of its 74 flows began in the window's last quarter: probes or a
            // transfer's first milliseconds, the next window tells.
            (
                Source,
                &[
                    ("log_flows", 74.0f64.ln_1p()),
                    ("vs_usual_log_flows", 10.0f64.ln()),
                    ("log_reports", 767.0f64.ln_1p()),
                    ("vs_usual_log_reports", (767.0f64 / 700.0).ln()),
                    ("vs_usual_log_destinations", 10.0f64.ln()),
                    ("late_flow_share", 70.0 / 74.0),
                ],
                Unknown,
            ),
            // A vertical scan begun in the window's last quarter: 1441 probes to one host,
            // many more small packets than usual, every flow late. Not a flood from it.
            (
                Source,
                &[
                    ("vs_usual_log_flows", 1441.0f64.ln()),
                    ("vs_usual_log_dst_ports", 1441.0f64.ln()),
                    ("vs_usual_log_destinations", 0.0),
                    ("vs_usual_log_reports", 1441.0f64.ln()),
                    ("vs_usual_log_bytes", 100.0f64.ln()),
                    ("late_flow_share", 1.0),
                ],
                Unknown,
            ),
            // A flood from it: many more small packets to its usual destination and port.
            (
                Source,
                &[
                    ("vs_usual_log_flows", 0.2),
                    ("vs_usual_log_dst_ports", 0.0),
                    ("vs_usual_log_destinations", 0.0),
                    ("vs_usual_log_reports", 3.0),
                    ("vs_usual_log_bytes", 1.5),
                ],
                Ddos,
            ),
            // A heavy hitter: much more of the usual packets, to many destinations.
            (
                Source,
                &[
                    ("vs_usual_log_reports", 3.6),
                    ("vs_usual_log_bytes", 3.6),
                    ("vs_usual_log_destinations", 0.8),
                ],
                Unknown,
            ),
            (
                Queue,
                &[
                    ("congested_fraction", 0.9),
                    ("vs_usual_congested_fraction", 0.9),
                ],
                Congestion,
            ),
            // More reports through a queue whose occupancy did not rise.
            (
                Queue,
                &[
                    ("vs_usual_log_samples", 2.9),
                    ("vs_usual_congested_fraction", 0.03),
                ],
                Unknown,
            ),
            // An incast's burst into an empty port: 82 packets at its peak, its mean and its
            // congested share hardly moved (the independent generator's, seed 231).
            (
                Queue,
                &[
                    ("occupancy_max", 82.0),
                    ("vs_usual_occupancy_max", 82.0),
                    ("occupancy_mean", 0.2),
                    ("vs_usual_occupancy_mean", 0.2),
                    ("congested_fraction", 0.003),
                    ("vs_usual_congested_fraction", 0.003),
                ],
                Congestion,
            ),
            // Two packets meeting in an empty queue, with many more reports through it.
            (
                Queue,
                &[
                    ("occupancy_max", 2.0),
                    ("vs_usual_occupancy_max", 2.0),
                    ("vs_usual_log_samples", 2.5),
                ],
                Unknown,
            ),
            // A busy queue peaking at 3× its usual peak of 40: its own variation, not a burst.
            (
                Queue,
                &[
                    ("occupancy_max", 122.0),
                    ("vs_usual_occupancy_max", 82.0),
                    ("vs_usual_congested_fraction", 0.05),
                ],
                Unknown,
            ),
            (
                Link,
                &[("silence_surprise", 30.0), ("vs_usual_log_samples", -7.0)],
                LinkFailure,
            ),
            (
                Link,
                &[
                    ("reverse_silence_surprise", 50.0),
                    ("vs_usual_log_samples", -7.3),
                ],
                LinkFailure,
            ),
            // A link missing from a window before its silence could be judged.
            (Link, &[], Unknown),
        ];
        let t = Typer::measured(&[]);
        for (kind, f, want) in cases {
            assert_eq!(t.classify(kind, &vector(kind, f)).0, want, "{kind:?} {f:?}");
        }
    }

    #[test]
    fn confidence_is_the_measured_precision_and_an_unreliable_type_is_not_said() {
        let ddos = [("vs_usual_log_reports", 3.0), ("vs_usual_log_bytes", 2.0)];
        let mut labelled = Vec::new();
        // Destinations: the definition right 9 times of 10.
        for i in 0..10 {
            let label = if i == 0 {
                AnomalyType::Unknown
            } else {
                AnomalyType::Ddos
            };
            labelled.push(row(EntityKind::Destination, &ddos, label));
        }
        // Sources: the same definition right 1 time of 6.
        let source = [("vs_usual_log_reports", 3.0), ("vs_usual_log_bytes", 2.0)];
        for i in 0..6 {
            let label = if i == 0 {
                AnomalyType::Ddos
            } else {
                AnomalyType::Unknown
            };
            labelled.push(row(EntityKind::Source, &source, label));
        }
        let t = Typer::measured(&labelled);
        let (ty, p) = t.classify(
            EntityKind::Destination,
            &vector(EntityKind::Destination, &ddos),
        );
        assert_eq!(ty, AnomalyType::Ddos);
        assert!((p - 10.0 / 12.0).abs() < 1e-9, "{p}");
        // 2 / 8 < 0.5: not said; unknown, never measured for sources, is 0.5.
        let (ty, p) = t.classify(EntityKind::Source, &vector(EntityKind::Source, &source));
        assert_eq!(ty, AnomalyType::Unknown);
        assert!((p - 0.5).abs() < 1e-9, "{p}");
        let d = t.tallies()[&(EntityKind::Destination, AnomalyType::Ddos)];
        assert_eq!((d.said, d.right, d.labelled), (10, 9, 9));
        // Without labels every type is said, at 0.5.
        let (ty, p) =
            Typer::measured(&[]).classify(EntityKind::Source, &vector(EntityKind::Source, &source));
        assert_eq!((ty, p), (AnomalyType::Ddos, 0.5));
    }

    #[test]
    fn a_window_fits_a_definition_each_way_its_signs_hold_and_only_when_it_is_that_type() {
        use Fit::*;
        let d = EntityKind::Destination;
        // An entity kind, its window's deviations and the ways it fits.
        type Case = (EntityKind, &'static [(&'static str, f64)], &'static [Fit]);
        let cases: &[Case] = &[
            // More packets, from 8× the usual sources, a third smaller: all three pairs.
            (
                d,
                &[
                    ("vs_usual_log_reports", 1.0),
                    ("vs_usual_log_bytes", 0.6),
                    ("vs_usual_log_sources", 2.1),
                ],
                &[
                    FloodMorePacketsNewSources,
                    FloodMorePacketsSmaller,
                    FloodNewSourcesSmaller,
                ],
            ),
            // Half of the traffic replaced: no more packets, from new sources, smaller.
            (
                d,
                &[("vs_usual_log_bytes", -0.5), ("vs_usual_log_sources", 2.1)],
                &[FloodNewSourcesSmaller],
            ),
            // From 3× the sources, each packet a flow: 6× the flows, smaller.
            (
                d,
                &[
                    ("vs_usual_log_bytes", -0.5),
                    ("vs_usual_log_sources", 1.1),
                    ("vs_usual_log_flows", 1.8),
                ],
                &[FloodMoreFlowsSmaller],
            ),
            // A crowd: more flows from new sources with more packets, not smaller.
            (
                d,
                &[
                    ("vs_usual_log_reports", 1.0),
                    ("vs_usual_log_bytes", 1.0),
                    ("vs_usual_log_sources", 1.1),
                    ("vs_usual_log_flows", 1.8),
                ],
                &[],
            ),
            // One sign is no flood.
            (d, &[("vs_usual_log_sources", 2.1)], &[]),
            (d, &[("vs_usual_log_dst_ports", 3.0)], &[Scan]),
            (
                EntityKind::Source,
                &[("vs_usual_log_reports", 1.0), ("vs_usual_log_bytes", 0.6)],
                &[Flood],
            ),
            // Congestion at a queue is no attack.
            (
                EntityKind::Queue,
                &[("vs_usual_congested_fraction", 0.5)],
                &[],
            ),
        ];
        for (kind, f, want) in cases {
            let x = vector(*kind, f);
            let fits = fits(*kind, &x);
            assert_eq!(fits, *want, "{kind:?} {f:?}");
            assert!(fits.iter().all(|fit| Fit::of(*kind).contains(fit)));
            let attack = matches!(
                define_vector(*kind, &x),
                AnomalyType::Ddos | AnomalyType::PortScan
            );
            assert_eq!(attack, !fits.is_empty(), "{kind:?} {f:?}");
        }
    }
}
