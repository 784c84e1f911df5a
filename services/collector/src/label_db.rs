//! INT-label's telemetry database (int-label-distributed-labeling Algo. 4): the newest state
//! of every labelled (device, egress port), from the items the last hops export. Exports
//! arrive late, reordered or twice; an item replaces a port's state only when its labelling
//! time is newer, so the database holds the newest state whatever the order. The
//! **coverage rate** of a telemetry interval is the share of the ports that carried traffic in
//! it whose state was labelled within it ([`LabelDb::coverage`], with the emulator's ground
//! truth); the collector, which sees no port counters, counts a port as carrying traffic while
//! it has been heard from lately ([`Coverage`], on its own clock).

use std::collections::{HashMap, HashSet};

use kplane_model::{HopField, ReportFormat, ReportRecord};

/// A port's newest labelled state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortState {
    /// When the port labelled it (the item's label time), ns.
    pub label_ns: u64,
    pub hop_latency: Option<u64>,
    pub queue_occupancy: Option<u64>,
    pub tx_utilization: Option<u64>,
}

/// An item that updated a port: its label time and the one it replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    pub node: u32,
    pub port: u32,
    pub label_ns: u64,
    pub previous_ns: Option<u64>,
}

/// (device id, egress port) → newest state.
#[derive(Debug, Default)]
pub struct LabelDb {
    ports: HashMap<(u32, u32), PortState>,
    /// Items older than (or as old as) the state already held: reordered or duplicated.
    pub stale: u64,
}

/// Whether the record is an INT-label export.
pub fn is_label_export(rec: &ReportRecord) -> bool {
    rec.envelope.embedded == Some(ReportFormat::IntLabel)
        || rec.envelope.format == ReportFormat::IntLabel
}

impl LabelDb {
    /// Applies an INT-label record's items (other records are ignored), calling `updated` for
    /// each that replaced a port's state. Returns how many did.
    pub fn apply(&mut self, rec: &ReportRecord, mut updated: impl FnMut(Update)) -> usize {
        if !is_label_export(rec) {
            return 0;
        }
        let mut applied = 0;
        for h in &rec.hops {
            let (Some(node), Some(port), Some(t)) = (
                h.node_id(),
                h.egress_port(),
                h.get(HopField::IngressTimestamp),
            ) else {
                continue;
            };
            let state = PortState {
                label_ns: t,
                hop_latency: h.get(HopField::HopLatency),
                queue_occupancy: h.get(HopField::QueueOccupancy),
                tx_utilization: h.get(HopField::TxUtilization),
            };
            let previous_ns = match self.ports.get_mut(&(node, port)) {
                Some(s) if s.label_ns >= t => {
                    self.stale += 1;
                    continue;
                }
                Some(s) => Some(std::mem::replace(s, state).label_ns),
                None => {
                    self.ports.insert((node, port), state);
                    None
                }
            };
            applied += 1;
            updated(Update {
                node,
                port,
                label_ns: t,
                previous_ns,
            });
        }
        applied
    }

    pub fn get(&self, node: u32, port: u32) -> Option<&PortState> {
        self.ports.get(&(node, port))
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// The share of `active` ports whose newest state was labelled at or after `since` (1
    /// when no port was active).
    pub fn coverage(&self, active: &[(u32, u32)], since: u64) -> f64 {
        if active.is_empty() {
            return 1.0;
        }
        let fresh = active
            .iter()
            .filter(|p| self.ports.get(p).is_some_and(|s| s.label_ns >= since))
            .count();
        fresh as f64 / active.len() as f64
    }
}

/// One closed telemetry interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalCoverage {
    pub start_ns: u64,
    /// Ports updated in it.
    pub updated: usize,
    /// Ports heard from within `known-for` of its end (the updated ones among them).
    pub known: usize,
}

impl IntervalCoverage {
    /// updated / known (1 when no port is known).
    pub fn ratio(&self) -> f64 {
        if self.known == 0 {
            1.0
        } else {
            self.updated as f64 / self.known as f64
        }
    }
}

/// The coverage rate per telemetry interval on the collector's clock (when updates arrive):
/// the switches' clocks label the items, but they need not agree with each other.
#[derive(Debug)]
pub struct Coverage {
    interval_ns: u64,
    known_for_ns: u64,
    /// (device, port) → when its newest update arrived.
    heard: HashMap<(u32, u32), u64>,
    /// The interval being filled (its index) and the ports updated in it.
    current: Option<(u64, HashSet<(u32, u32)>)>,
}

impl Coverage {
    pub fn new(interval_ns: u64, known_for_ns: u64) -> Self {
        Self {
            interval_ns: interval_ns.max(1),
            known_for_ns,
            heard: HashMap::new(),
            current: None,
        }
    }

    /// A port updated at `now` (receive time); first closes the intervals `now` is past.
    pub fn updated(&mut self, port: (u32, u32), now: u64, closed: impl FnMut(IntervalCoverage)) {
        self.tick(now, closed);
        self.heard.insert(port, now);
        let index = now / self.interval_ns;
        self.current
            .get_or_insert_with(|| (index, HashSet::new()))
            .1
            .insert(port);
    }

    /// Closes every interval that ended by `now`, oldest first (empty ones count: known
    /// ports that nothing updated).
    pub fn tick(&mut self, now: u64, mut closed: impl FnMut(IntervalCoverage)) {
        let index = now / self.interval_ns;
        let Some((first, _)) = self.current else {
            return;
        };
        if index <= first {
            return;
        }
        let (_, updated) = self.current.take().unwrap_or_default();
        // Past the first, at most `known-for` of empty intervals matter: then nobody is known.
        let last_relevant = first + self.known_for_ns / self.interval_ns + 1;
        for i in first..index.min(last_relevant + 1) {
            let end = (i + 1) * self.interval_ns;
            let since = end.saturating_sub(self.known_for_ns);
            let known = self
                .heard
                .values()
                .filter(|t| **t >= since && **t < end)
                .count();
            closed(IntervalCoverage {
                start_ns: i * self.interval_ns,
                updated: if i == first { updated.len() } else { 0 },
                known,
            });
        }
        let forget = now.saturating_sub(self.known_for_ns);
        self.heard.retain(|_, t| *t >= forget);
        self.current = Some((index, HashSet::new()));
    }

    /// Ports heard from within `known-for`.
    pub fn known(&self) -> usize {
        self.heard.len()
    }
}

#[cfg(test)]
mod tests {
    use kplane_model::{HopRecord, ReportEnvelope};

    use super::*;

    fn export(items: &[(u32, u32, u64, u64)]) -> ReportRecord {
        ReportRecord {
            envelope: ReportEnvelope {
                embedded: Some(ReportFormat::IntLabel),
                ..ReportEnvelope::default()
            },
            flow: None,
            hops: items
                .iter()
                .map(|&(node, port, t, latency)| {
                    let mut h = HopRecord::default();
                    h.set(HopField::NodeId, node.into());
                    h.set(HopField::L1EgressPort, port.into());
                    h.set(HopField::IngressTimestamp, t);
                    h.set(HopField::HopLatency, latency);
                    h
                })
                .collect(),
        }
    }

    #[test]
    fn the_newest_label_wins_whatever_the_order() {
        let newer = export(&[(1, 2, 200, 7), (2, 1, 210, 8)]);
        let older = export(&[(1, 2, 100, 5), (3, 1, 90, 9)]);
        let mut a = LabelDb::default();
        let mut updates = Vec::new();
        assert_eq!(a.apply(&newer, |u| updates.push(u)), 2);
        assert_eq!(
            a.apply(&older, |u| updates.push(u)),
            1,
            "only (3, 1) is new"
        );
        assert_eq!(
            a.apply(&newer, |u| updates.push(u)),
            0,
            "a duplicate changes nothing"
        );
        assert_eq!(
            updates[2],
            Update {
                node: 3,
                port: 1,
                label_ns: 90,
                previous_ns: None
            }
        );
        assert_eq!(a.stale, 3);
        let mut b = LabelDb::default();
        b.apply(&older, |_| {});
        let mut replaced = Vec::new();
        b.apply(&newer, |u| replaced.push((u.node, u.port, u.previous_ns)));
        assert_eq!(replaced, [(1, 2, Some(100)), (2, 1, None)]);
        for (n, p) in [(1, 2), (2, 1), (3, 1)] {
            assert_eq!(
                a.get(n, p),
                b.get(n, p),
                "({n}, {p}) the same in either order"
            );
        }
        assert_eq!(a.get(1, 2).unwrap().hop_latency, Some(7));
    }

    #[test]
    fn coverage_counts_active_ports_labelled_in_the_interval() {
        let mut db = LabelDb::default();
        db.apply(&export(&[(1, 1, 150, 0), (2, 1, 50, 0)]), |_| {});
        assert_eq!(db.coverage(&[(1, 1), (2, 1), (3, 1), (4, 1)], 100), 0.25);
        assert_eq!(db.coverage(&[(1, 1), (2, 1)], 0), 1.0);
        assert_eq!(db.coverage(&[], 100), 1.0);
        // Not an INT-label record: ignored.
        let mut other = export(&[(5, 1, 500, 0)]);
        other.envelope.embedded = None;
        assert_eq!(db.apply(&other, |_| {}), 0);
    }

    #[test]
    fn coverage_per_interval_counts_updated_ports_over_ports_heard_lately() {
        // 100 ns intervals, ports known for 300 ns after their last update.
        let mut c = Coverage::new(100, 300);
        let mut closed = Vec::new();
        for (port, t) in [((1, 1), 10), ((1, 2), 20), ((2, 1), 30), ((1, 1), 150)] {
            c.updated(port, t, |i| closed.push(i));
        }
        assert_eq!(
            closed,
            [IntervalCoverage {
                start_ns: 0,
                updated: 3,
                known: 3
            }]
        );
        // Nothing until 420: interval 1 had one of three, then empty ones while the others
        // are still known, then nothing known any more.
        c.tick(420, |i| closed.push(i));
        let got: Vec<_> = closed[1..]
            .iter()
            .map(|i| (i.start_ns, i.updated, i.known))
            .collect();
        assert_eq!(got, [(100, 1, 3), (200, 0, 3), (300, 0, 1)]);
        assert_eq!(closed[1].ratio(), 1.0 / 3.0);
        assert_eq!(c.known(), 1, "only (1, 1) was heard within 300 ns of 420");
    }
}
