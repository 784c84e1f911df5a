//! One view of each switch's queues and ports, whichever collectors saw them.
//!
//! A collector detects changes of a switch's metrics on the samples its own reports carry (the
//! threshold detector: a new key, or |v − last reported| > T). Reports that cross one switch
//! may reach several collectors, each with its own state for the switch. The collectors key
//! every switch-metric event by the switch, so all of a switch's events reach one `int.events`
//! partition; its events lane folds them into one state per (metric, switch, queue or port),
//! in the partition's order, and writes the outcome to the store's `switch_changes` table:
//!
//! A view is a collector's `new`, `change` or `refresh` event of a switch metric (one with a
//! switch and no flow: a watchlist algorithm's events are about flows and stay out).
//!
//! * a view older (collector receive time) than the newest the key has taken is **stale**:
//!   counted and left out, so a late batch cannot move a key back;
//! * `queue_occupancy`, `queue_congestion`, `link_utilization` (threshold events): the key's
//!   first view is `new`; a later view is a `change` when |v − merged| exceeds the view's
//!   threshold (the collector's T, carried in the event), else it is **absorbed** — the
//!   collectors agree within T, as one collector's consecutive samples do;
//! * `int_label_port`: a view is a `change` when its label time is newer than the key's
//!   newest (the label database's rule, INT-label Algo. 4), else absorbed (a label already
//!   seen through another collector).
//!
//! With one collector the table holds exactly its `new` and `change` events (its `refresh`
//! events re-send the value it already reported, which is absorbed). The state is bounded
//! like the detectors' per-switch state (`stream-processor.state.nodes`) and saved with them.

use arrow_array::builder::{
    StringBuilder, TimestampNanosecondBuilder, UInt8Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::ArrowError;
use kplane_model::id_table::{Evictions, IdTable, Limits};
use kplane_model::schema::col;
use kplane_model::{EventKind, FlowHashKey, Metric};
use std::sync::Arc;

use crate::frame::col_of;
use crate::snapshot::{Reader, Writer};

/// One row of `switch_changes`: a key's merged state moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchChange {
    /// The deciding view's collector receive time.
    pub time_ns: i64,
    /// `New` or `Change`.
    pub kind: EventKind,
    pub metric: Metric,
    pub node_id: u32,
    pub queue_id: Option<u8>,
    pub egress_port: Option<u32>,
    pub value: u64,
    /// The key's merged value before (none for `new`).
    pub previous: Option<u64>,
    pub threshold: Option<u64>,
    /// The collectors' views folded into this row: this one and those absorbed since the
    /// key's previous row.
    pub views: u32,
}

/// What became of the views, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewTally {
    pub new: u64,
    pub change: u64,
    pub absorbed: u64,
    pub stale: u64,
}

impl ViewTally {
    pub fn outcomes(&self) -> [(&'static str, u64); 4] {
        [
            ("new", self.new),
            ("change", self.change),
            ("absorbed", self.absorbed),
            ("stale", self.stale),
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeyState {
    value: u64,
    newest_ns: i64,
    /// Views absorbed since the key's last row.
    absorbed: u32,
}

/// The merged state of every switch key of one events lane.
#[derive(Debug)]
pub struct SwitchViews {
    keys: IdTable<KeyState>,
    key: FlowHashKey,
}

/// How a metric's views merge: by its threshold, or newest label wins (`int_label_port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    Threshold,
    NewestLabel,
}

/// A merged metric ([`Metric::SWITCH_VIEWS`]) and its rule.
fn rule(metric: &str) -> Option<(Metric, Rule)> {
    let m = Metric::SWITCH_VIEWS
        .into_iter()
        .find(|m| m.as_str() == metric)?;
    let rule = match m {
        Metric::IntLabelPort => Rule::NewestLabel,
        _ => Rule::Threshold,
    };
    Some((m, rule))
}

impl SwitchViews {
    /// `key` keys the (metric, switch, queue or port) ids.
    pub fn new(limits: Limits, key: FlowHashKey) -> Self {
        Self {
            keys: IdTable::new(limits),
            key,
        }
    }

    /// Folds one message's `events/v1` rows; rows of other metrics, other detectors or
    /// without a switch are not views and are passed over.
    pub fn apply(
        &mut self,
        events: &RecordBatch,
        out: &mut Vec<SwitchChange>,
        tally: &mut ViewTally,
    ) -> Result<(), ArrowError> {
        type U<T> = PrimitiveArray<T>;
        let time = col_of::<U<TimestampNanosecondType>>(events, col::RECEIVED)?;
        let kind = col_of::<StringArray>(events, col::KIND)?;
        let metric = col_of::<StringArray>(events, col::METRIC)?;
        let node = col_of::<U<UInt32Type>>(events, col::NODE_ID)?;
        let queue = col_of::<U<UInt8Type>>(events, col::QUEUE_ID)?;
        let port = col_of::<U<UInt32Type>>(events, col::EGRESS_PORT)?;
        let value = col_of::<U<UInt64Type>>(events, col::VALUE)?;
        // A watchlist algorithm's event on a switch metric is about a flow: not a view.
        let flow = events
            .column_by_name(col::SRC_IP)
            .ok_or_else(|| ArrowError::SchemaError("events: no src_ip column".into()))?;
        // Events of a collector from before the column: merged with threshold 0.
        let threshold = col_of::<U<UInt64Type>>(events, col::THRESHOLD).ok();
        for i in 0..events.num_rows() {
            let Some((m, merge)) = rule(metric.value(i)) else {
                continue;
            };
            let view = matches!(kind.value(i), "new" | "change" | "refresh");
            if !view || flow.is_valid(i) || node.is_null(i) || value.is_null(i) {
                continue;
            }
            // A port's metric is keyed by the port, a queue's by its port and queue id (INT's
            // queue id numbers the queues of one port).
            let on_port = matches!(m, Metric::LinkUtilization | Metric::IntLabelPort);
            let queue_id = (!on_port && queue.is_valid(i)).then(|| queue.value(i));
            let egress_port = port.is_valid(i).then(|| port.value(i));
            let (t, v, n) = (time.value(i), value.value(i), node.value(i));
            let th = threshold.and_then(|c| c.is_valid(i).then(|| c.value(i)));
            let id = self.key.hash_words(&[
                m as u64,
                u64::from(n),
                queue_id.map_or(1 << 40, u64::from),
                egress_port.map_or(1 << 40, u64::from),
            ]);
            let fresh = KeyState {
                value: v,
                newest_ns: t,
                absorbed: 0,
            };
            let (s, inserted) = self.keys.get_or_insert_with(id, seconds(t), || fresh, drop);
            let row = |kind, previous, views| SwitchChange {
                time_ns: t,
                kind,
                metric: m,
                node_id: n,
                queue_id,
                egress_port,
                value: v,
                previous,
                threshold: th,
                views,
            };
            if inserted {
                tally.new += 1;
                out.push(row(EventKind::New, None, 1));
                continue;
            }
            if t < s.newest_ns {
                tally.stale += 1;
                continue;
            }
            s.newest_ns = t;
            let moved = match merge {
                Rule::NewestLabel => v > s.value,
                Rule::Threshold => v.abs_diff(s.value) > th.unwrap_or(0),
            };
            if !moved {
                tally.absorbed += 1;
                s.absorbed = s.absorbed.saturating_add(1);
                continue;
            }
            tally.change += 1;
            out.push(row(EventKind::Change, Some(s.value), s.absorbed + 1));
            s.value = v;
            s.absorbed = 0;
        }
        Ok(())
    }

    /// The keys held.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    pub fn evictions(&self) -> Evictions {
        self.keys.evictions()
    }

    pub fn slot_bytes(&self) -> usize {
        self.keys.slot_bytes()
    }

    /// Appends the state to a lane's saved state.
    pub(crate) fn save(&self, w: &mut Writer) {
        w.u32(self.keys.len() as u32);
        for (id, seen, s) in self.keys.entries() {
            w.u64(id);
            w.u32(seen);
            w.u64(s.value);
            w.i64(s.newest_ns);
            w.u32(s.absorbed);
        }
    }

    /// Reads back what [`SwitchViews::save`] wrote (into a new table).
    pub(crate) fn restore(&mut self, r: &mut Reader<'_>) -> Result<(), String> {
        for _ in 0..r.u32("the switch-key count")? {
            let (id, seen) = (r.u64("a switch key")?, r.u32("a switch key")?);
            let state = KeyState {
                value: r.u64("a switch key")?,
                newest_ns: r.i64("a switch key")?,
                absorbed: r.u32("a switch key")?,
            };
            self.keys.restore(id, seen, state);
        }
        Ok(())
    }
}

fn seconds(t_ns: i64) -> u32 {
    (t_ns.max(0) / 1_000_000_000) as u32
}

/// Changes as an Arrow batch of the store's `switch_changes` schema.
pub fn changes_batch(changes: &[SwitchChange]) -> Result<RecordBatch, ArrowError> {
    let n = changes.len();
    let mut time = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut kind = StringBuilder::new();
    let mut metric = StringBuilder::new();
    let mut node = UInt32Builder::with_capacity(n);
    let mut queue = UInt8Builder::with_capacity(n);
    let mut port = UInt32Builder::with_capacity(n);
    let mut value = UInt64Builder::with_capacity(n);
    let mut previous = UInt64Builder::with_capacity(n);
    let mut threshold = UInt64Builder::with_capacity(n);
    let mut views = UInt32Builder::with_capacity(n);
    for c in changes {
        time.append_value(c.time_ns);
        kind.append_value(c.kind.as_str());
        metric.append_value(c.metric.as_str());
        node.append_value(c.node_id);
        queue.append_option(c.queue_id);
        port.append_option(c.egress_port);
        value.append_value(c.value);
        previous.append_option(c.previous);
        threshold.append_option(c.threshold);
        views.append_value(c.views);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(time.finish()),
        Arc::new(kind.finish()),
        Arc::new(metric.finish()),
        Arc::new(node.finish()),
        Arc::new(queue.finish()),
        Arc::new(port.finish()),
        Arc::new(value.finish()),
        Arc::new(previous.finish()),
        Arc::new(threshold.finish()),
        Arc::new(views.finish()),
    ];
    RecordBatch::try_new(kplane_store::tables::switch_changes_schema(), columns)
}

#[cfg(test)]
mod tests {
    use kplane_model::batch::EventBatchBuilder;
    use kplane_model::{Detector, EventRow, FlowKey};

    use super::*;

    const KEY: FlowHashKey = FlowHashKey([1, 2]);
    const OCC: Metric = Metric::QueueOccupancy;

    /// A collector's view: (ms, kind, metric, node, port or queue, value, threshold); a
    /// queue's as `port << 8 | queue id`, port 0 for none.
    type View = (i64, EventKind, Metric, u32, u32, u64, Option<u64>);

    fn batch(views: &[View]) -> RecordBatch {
        let mut b = EventBatchBuilder::new(views.len());
        for &(ms, kind, metric, node, id, value, threshold) in views {
            let on_port = matches!(metric, Metric::LinkUtilization | Metric::IntLabelPort);
            b.append(&EventRow {
                received_ns: (ms * 1_000_000) as u64,
                kind,
                metric,
                detector: Detector::Threshold,
                flow: None,
                node_id: Some(node),
                queue_id: (!on_port).then_some(id as u8),
                egress_port: if on_port {
                    Some(id)
                } else {
                    (id >> 8 != 0).then_some(id >> 8)
                },
                hw_id: None,
                value: Some(value),
                previous: None,
                threshold,
                path: &[],
                exporter: None,
            })
            .unwrap();
        }
        b.finish().unwrap()
    }

    fn views() -> SwitchViews {
        SwitchViews::new(crate::config::StateConfig::default().nodes, KEY)
    }

    /// A row as (kind, value, previous, views).
    type Row = (EventKind, u64, Option<u64>, u32);

    /// The rows `views` give, and the tally.
    fn fold(v: &mut SwitchViews, rows: &[View]) -> (Vec<Row>, ViewTally) {
        let (mut out, mut tally) = (Vec::new(), ViewTally::default());
        v.apply(&batch(rows), &mut out, &mut tally).unwrap();
        let rows = out
            .iter()
            .map(|c| (c.kind, c.value, c.previous, c.views))
            .collect();
        (rows, tally)
    }

    use EventKind::{Change, New, Refresh};

    #[test]
    fn one_collectors_views_give_its_own_new_and_change_events() {
        let mut v = views();
        // What one collector with T = 64 sends: new, a refresh of the reported value, a
        // change past T, a refresh of it.
        let (rows, tally) = fold(
            &mut v,
            &[
                (0, New, OCC, 7, 1, 10, Some(64)),
                (10_000, Refresh, OCC, 7, 1, 10, Some(64)),
                (10_500, Change, OCC, 7, 1, 200, Some(64)),
                (20_500, Refresh, OCC, 7, 1, 200, Some(64)),
            ],
        );
        assert_eq!(
            rows,
            [(New, 10, None, 1), (Change, 200, Some(10), 2)],
            "the refresh between is folded into the change"
        );
        assert_eq!((tally.new, tally.change, tally.absorbed), (1, 1, 2));
    }

    #[test]
    fn two_collectors_of_one_switch_share_one_state() {
        let mut v = views();
        let (rows, tally) = fold(
            &mut v,
            &[
                // A and B both see the queue at about 100: one key, one `new`.
                (0, New, OCC, 7, 1, 100, Some(64)),
                (5, New, OCC, 7, 1, 120, Some(64)),
                // The same rise seen by both: one change.
                (1_000, Change, OCC, 7, 1, 900, Some(64)),
                (1_003, Change, OCC, 7, 1, 880, Some(64)),
                // B's batch from before A's last view arrives late: it cannot move the key back.
                (999, Change, OCC, 7, 1, 100, Some(64)),
                // Another queue of the switch, and the same queue id on another switch.
                (1_100, New, OCC, 7, 2, 5, Some(64)),
                (1_100, New, OCC, 8, 1, 5, Some(64)),
            ],
        );
        assert_eq!(
            rows,
            [
                (New, 100, None, 1),
                (Change, 900, Some(100), 2),
                (New, 5, None, 1),
                (New, 5, None, 1),
            ]
        );
        assert_eq!(
            tally,
            ViewTally {
                new: 3,
                change: 1,
                absorbed: 2,
                stale: 1
            }
        );
        // Congestion has T = 0: any flip is a change; link utilisation keys by port.
        let (rows, _) = fold(
            &mut v,
            &[
                (2_000, New, Metric::QueueCongestion, 7, 1, 0, Some(0)),
                (2_001, Change, Metric::QueueCongestion, 7, 1, 1, Some(0)),
                (2_002, New, Metric::QueueCongestion, 7, 1, 1, Some(0)),
                (2_000, New, Metric::LinkUtilization, 7, 1, 50, Some(100)),
                (2_001, New, Metric::LinkUtilization, 7, 3, 400, Some(100)),
            ],
        );
        let kinds: Vec<_> = rows.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(
            kinds,
            [(New, 0), (Change, 1), (New, 50), (New, 400)],
            "the second collector's congested view agrees with the merged one"
        );
    }

    #[test]
    fn a_queue_is_its_ports_queue() {
        let mut v = views();
        let (port_1, port_2) = (1 << 8, 2 << 8);
        let (rows, _) = fold(
            &mut v,
            &[
                // Queue 0 of switch 7 out of port 1 and out of port 2: two keys.
                (0, New, OCC, 7, port_1, 10, Some(64)),
                (1, New, OCC, 7, port_2, 500, Some(64)),
                // Port 1's queue still at 10: port 2's 500 did not move it.
                (2, Refresh, OCC, 7, port_1, 12, Some(64)),
                (3, Change, OCC, 7, port_2, 20, Some(64)),
            ],
        );
        assert_eq!(
            rows,
            [
                (New, 10, None, 1),
                (New, 500, None, 1),
                (Change, 20, Some(500), 1)
            ]
        );
        let mut out = Vec::new();
        v.apply(
            &batch(&[(4, New, OCC, 7, 3 << 8, 1, Some(64))]),
            &mut out,
            &mut ViewTally::default(),
        )
        .unwrap();
        assert_eq!((out[0].egress_port, out[0].queue_id), (Some(3), Some(0)));
    }

    #[test]
    fn a_port_takes_the_newest_label_whichever_collector_saw_it() {
        let mut v = views();
        let label = Metric::IntLabelPort;
        let (rows, tally) = fold(
            &mut v,
            &[
                (0, New, label, 3, 2, 1_000, None),
                (1, New, label, 3, 2, 1_000, None),
                (2, Change, label, 3, 2, 1_100, None),
                (3, Change, label, 3, 2, 1_050, None),
            ],
        );
        assert_eq!(
            rows,
            [(New, 1_000, None, 1), (Change, 1_100, Some(1_000), 2)]
        );
        assert_eq!(tally.absorbed, 2, "a label seen twice and an older one");
    }

    #[test]
    fn flows_other_metrics_and_other_kinds_are_not_views() {
        let mut v = views();
        let mut b = EventBatchBuilder::new(3);
        let base = EventRow {
            received_ns: 1,
            kind: New,
            metric: OCC,
            detector: Detector::PerHop,
            flow: Some(FlowKey {
                src_ip: "10.0.0.1".parse().unwrap(),
                dst_ip: "10.0.0.2".parse().unwrap(),
                src_port: 1,
                dst_port: 2,
                protocol: 6,
            }),
            node_id: Some(7),
            queue_id: Some(1),
            egress_port: None,
            hw_id: None,
            value: Some(500),
            previous: None,
            threshold: Some(10),
            path: &[],
            exporter: None,
        };
        b.append(&base).unwrap();
        b.append(&EventRow {
            flow: None,
            metric: Metric::ReportLoss,
            kind: EventKind::Loss,
            ..base
        })
        .unwrap();
        b.append(&EventRow {
            flow: None,
            kind: EventKind::Report,
            ..base
        })
        .unwrap();
        let (mut out, mut tally) = (Vec::new(), ViewTally::default());
        v.apply(&b.finish().unwrap(), &mut out, &mut tally).unwrap();
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(tally, ViewTally::default());
    }

    #[test]
    fn the_state_saved_and_restored_decides_the_same() {
        let mut v = views();
        fold(
            &mut v,
            &[
                (0, New, OCC, 7, 1, 100, Some(64)),
                (1, Refresh, OCC, 7, 1, 120, Some(64)),
            ],
        );
        let mut w = Writer::default();
        v.save(&mut w);
        let mut again = views();
        let mut r = Reader(&w.0);
        again.restore(&mut r).unwrap();
        assert!(r.is_empty());
        let next: [View; 3] = [
            (2, Change, OCC, 7, 1, 500, Some(64)),
            (1, Change, OCC, 7, 1, 900, Some(64)),
            (3, Refresh, OCC, 7, 1, 530, Some(64)),
        ];
        let (rows, _) = fold(&mut again, &next);
        assert_eq!(rows, fold(&mut v, &next).0);
        assert_eq!(
            rows,
            [(Change, 500, Some(100), 2)],
            "the absorbed view is counted"
        );
    }

    #[test]
    fn the_rows_are_the_stores_switch_changes() {
        let mut v = views();
        let mut out = Vec::new();
        v.apply(
            &batch(&[(0, New, OCC, 7, 1, 100, Some(64))]),
            &mut out,
            &mut ViewTally::default(),
        )
        .unwrap();
        let b = changes_batch(&out).unwrap();
        assert_eq!(b.num_rows(), 1);
        assert_eq!(b.schema(), kplane_store::tables::switch_changes_schema());
    }
}
