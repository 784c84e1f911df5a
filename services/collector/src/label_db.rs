//! INT-label's telemetry database (int-label-distributed-labeling Algo. 4): the newest state
//! of every labelled (device, egress port), from the items the last hops export. Exports
//! arrive late, reordered or twice; an item replaces a port's state only when its labelling
//! time is newer, so the database holds the newest state whatever the order. The
//! **coverage rate** of a telemetry interval is the share of the ports that carried traffic in
//! it whose state was labelled within it.

use std::collections::HashMap;

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

/// (device id, egress port) → newest state.
#[derive(Debug, Default)]
pub struct LabelDb {
    ports: HashMap<(u32, u32), PortState>,
    /// Items older than (or as old as) the state already held: reordered or duplicated.
    pub stale: u64,
}

impl LabelDb {
    /// Applies an INT-label record's items; other records are ignored. Returns the items
    /// that updated a port.
    pub fn apply(&mut self, rec: &ReportRecord) -> usize {
        if rec.envelope.embedded != Some(ReportFormat::IntLabel)
            && rec.envelope.format != ReportFormat::IntLabel
        {
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
            match self.ports.get_mut(&(node, port)) {
                Some(s) if s.label_ns >= t => self.stale += 1,
                Some(s) => {
                    *s = state;
                    applied += 1;
                }
                None => {
                    self.ports.insert((node, port), state);
                    applied += 1;
                }
            }
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
        assert_eq!(a.apply(&newer), 2);
        assert_eq!(a.apply(&older), 1, "only (3, 1) is new");
        assert_eq!(a.apply(&newer), 0, "a duplicate changes nothing");
        assert_eq!(a.stale, 3);
        let mut b = LabelDb::default();
        b.apply(&older);
        b.apply(&newer);
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
        db.apply(&export(&[(1, 1, 150, 0), (2, 1, 50, 0)]));
        assert_eq!(db.coverage(&[(1, 1), (2, 1), (3, 1), (4, 1)], 100), 0.25);
        assert_eq!(db.coverage(&[(1, 1), (2, 1)], 0), 1.0);
        assert_eq!(db.coverage(&[], 100), 1.0);
        // Not an INT-label record: ignored.
        let mut other = export(&[(5, 1, 500, 0)]);
        other.envelope.embedded = None;
        assert_eq!(db.apply(&other), 0);
    }
}
