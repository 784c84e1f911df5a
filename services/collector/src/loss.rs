//! Report loss accounting per (node, hw_id) sequence stream.
//!
//! Sequence numbers are unwrapped (22 bits in Telemetry Report v2.0, 32 before). A gap opens
//! "missing" ranges; a late report inside the reorder window fills its slot. A missing
//! sequence becomes *lost* — counted once, monotonically — when it falls more than
//! `window` sequences behind the newest, when it has been missing for longer than
//! `max_wait`, or when the tracker is flushed (shutdown). A report further back than the
//! window but within `reset_distance` is *too late* (it was already counted lost; counted
//! separately so the two can be reconciled). A jump back by more than `reset_distance` is a
//! counter reset (exporter restart): the stream restarts there.

use std::collections::VecDeque;

use kplane_model::id_table::{Evictions, Limits};

use crate::by_node::ByNode;

/// What one report did to its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqOutcome {
    /// First report of the stream.
    First,
    /// The next expected sequence.
    InOrder,
    /// Jumped ahead, leaving `missing` sequences missing (not yet lost).
    Gap { missing: u64 },
    /// Filled a missing slot.
    Late,
    /// Already seen.
    Duplicate,
    /// Older than the reorder window: it had been counted lost already.
    TooLate,
    /// The counter went back: the stream restarted.
    Reset,
}

/// Losses that became definitive, to count and to publish as `report_loss` events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lost {
    pub node_id: u32,
    pub hw_id: u8,
    pub count: u64,
}

#[derive(Debug)]
struct Stream {
    node_id: u32,
    hw_id: u8,
    modulus: u64,
    /// Newest sequence, unwrapped.
    highest: u64,
    /// Missing ranges [start, end] (unwrapped), oldest first, with when they opened (ns).
    missing: VecDeque<(u64, u64, u64)>,
}

/// Totals for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossCounters {
    pub lost: u64,
    pub late: u64,
    pub too_late: u64,
    pub duplicates: u64,
    pub resets: u64,
}

/// Streams by (node, hw_id): per node, indexed by hw_id — indexed loads on the per-report
/// path instead of a hash probe.
#[derive(Debug)]
struct StreamTable {
    nodes: ByNode<Vec<Option<Stream>>>,
    len: usize,
}

/// Streams of a node's slots that hold one.
fn streams_in(slots: &[Option<Stream>]) -> usize {
    slots.iter().filter(|s| s.is_some()).count()
}

impl StreamTable {
    #[inline]
    fn get_mut(&mut self, node: u32, hw_id: u8, now_s: u32) -> Option<&mut Stream> {
        let len = &mut self.len;
        self.nodes
            .get_mut(node, now_s, |gone| *len -= streams_in(&gone))?
            .get_mut(usize::from(hw_id))?
            .as_mut()
    }

    fn insert(&mut self, node: u32, hw_id: u8, now_s: u32, stream: Stream) {
        let len = &mut self.len;
        let streams = self
            .nodes
            .get_or_default(node, now_s, |gone| *len -= streams_in(&gone));
        let h = usize::from(hw_id);
        if h >= streams.len() {
            streams.resize_with(h + 1, || None);
        }
        if streams[h].replace(stream).is_none() {
            *len += 1;
        }
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.nodes
            .values_mut()
            .flat_map(|streams| streams.iter_mut().filter_map(Option::as_mut))
    }
}

#[derive(Debug)]
pub struct LossTracker {
    window: u64,
    reset_distance: u64,
    max_wait_ns: u64,
    streams: StreamTable,
    pub counters: LossCounters,
}

impl LossTracker {
    /// `window`: reorder window in sequences; `reset_distance`: a jump back further than
    /// this is a restart; `max_wait_ns`: longest a gap may stay open.
    pub fn new(window: u64, reset_distance: u64, max_wait_ns: u64, nodes: Limits) -> Self {
        Self {
            window: window.max(1),
            reset_distance: reset_distance.max(window),
            max_wait_ns,
            streams: StreamTable {
                nodes: ByNode::new(nodes),
                len: 0,
            },
            counters: LossCounters::default(),
        }
    }

    pub fn streams(&self) -> usize {
        self.streams.len
    }

    /// Nodes with ids from [`ByNode::DIRECT`] up in the stream table.
    pub fn nodes(&self) -> usize {
        self.streams.nodes.other_len()
    }

    /// Nodes with ids from [`ByNode::DIRECT`] up evicted from the stream table.
    pub fn evictions(&self) -> Evictions {
        self.streams.nodes.evictions()
    }

    /// Records `seq` (of `bits` width) for (node, hw_id) at `now_ns`; definitive losses are
    /// passed to `lost`.
    #[inline]
    pub fn observe(
        &mut self,
        node_id: u32,
        hw_id: u8,
        seq: u32,
        bits: u32,
        now_ns: u64,
        mut lost: impl FnMut(Lost),
    ) -> SeqOutcome {
        let modulus = 1u64 << bits.min(32);
        let seq = u64::from(seq) & (modulus - 1);
        let (window, reset_distance, max_wait) =
            (self.window, self.reset_distance, self.max_wait_ns);
        let counters = &mut self.counters;
        let now_s = (now_ns / 1_000_000_000) as u32;
        let Some(s) = self.streams.get_mut(node_id, hw_id, now_s) else {
            self.streams.insert(
                node_id,
                hw_id,
                now_s,
                Stream {
                    node_id,
                    hw_id,
                    modulus,
                    highest: seq,
                    missing: VecDeque::new(),
                },
            );
            return SeqOutcome::First;
        };
        // Signed distance from the newest, modulo the sequence space.
        // The modulus is a power of two: masks, not divides, on the per-report path.
        let mask = s.modulus - 1;
        let raw = (seq + s.modulus - (s.highest & mask)) & mask;
        let delta = if raw > s.modulus / 2 {
            raw as i64 - s.modulus as i64
        } else {
            raw as i64
        };
        let outcome = if delta > 0 {
            let delta = delta as u64;
            let next = s.highest + 1;
            s.highest += delta;
            if delta > 1 {
                s.missing.push_back((next, s.highest - 1, now_ns));
                SeqOutcome::Gap { missing: delta - 1 }
            } else {
                SeqOutcome::InOrder
            }
        } else if delta == 0 {
            counters.duplicates += 1;
            SeqOutcome::Duplicate
        } else if (-delta) as u64 <= window {
            let x = s.highest - (-delta) as u64;
            match s.missing.iter().position(|&(a, b, _)| a <= x && x <= b) {
                Some(i) => {
                    let (a, b, t) = s.missing[i];
                    match (a == x, b == x) {
                        (true, true) => {
                            s.missing.remove(i);
                        }
                        (true, false) => s.missing[i].0 = x + 1,
                        (false, true) => s.missing[i].1 = x - 1,
                        (false, false) => {
                            s.missing[i].1 = x - 1;
                            s.missing.insert(i + 1, (x + 1, b, t));
                        }
                    }
                    counters.late += 1;
                    SeqOutcome::Late
                }
                None => {
                    counters.duplicates += 1;
                    SeqOutcome::Duplicate
                }
            }
        } else if (-delta) as u64 <= reset_distance {
            counters.too_late += 1;
            SeqOutcome::TooLate
        } else {
            // Far behind: the exporter restarted its counter. What was missing is lost.
            let pending: u64 = s.missing.iter().map(|&(a, b, _)| b - a + 1).sum();
            if pending > 0 {
                counters.lost += pending;
                lost(Lost {
                    node_id,
                    hw_id,
                    count: pending,
                });
            }
            s.missing.clear();
            s.highest = seq;
            counters.resets += 1;
            return SeqOutcome::Reset;
        };
        // Expire what left the window or waited too long.
        let mut expired = 0;
        while let Some(&(a, b, t)) = s.missing.front() {
            let too_old = s.highest.saturating_sub(b) > window;
            let too_long = now_ns.saturating_sub(t) > max_wait;
            if !(too_old || too_long) {
                break;
            }
            expired += b - a + 1;
            s.missing.pop_front();
        }
        if expired > 0 {
            counters.lost += expired;
            lost(Lost {
                node_id,
                hw_id,
                count: expired,
            });
        }
        outcome
    }

    /// Counts everything still missing as lost (time-based expiry at `now_ns`, or all when
    /// `all`), e.g. on a timer and at shutdown.
    pub fn flush(&mut self, now_ns: u64, all: bool, mut lost: impl FnMut(Lost)) {
        for s in self.streams.iter_mut() {
            let mut count = 0;
            s.missing.retain(|&(a, b, t)| {
                let expire = all || now_ns.saturating_sub(t) > self.max_wait_ns;
                if expire {
                    count += b - a + 1;
                }
                !expire
            });
            if count > 0 {
                self.counters.lost += count;
                lost(Lost {
                    node_id: s.node_id,
                    hw_id: s.hw_id,
                    count,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: Limits = Limits {
        idle: std::time::Duration::from_secs(600),
        max: 1024,
    };

    fn run(t: &mut LossTracker, seqs: &[u32], bits: u32) -> (Vec<SeqOutcome>, u64) {
        let mut lost = 0;
        let out = seqs
            .iter()
            .map(|&s| t.observe(1, 0, s, bits, 0, |l| lost += l.count))
            .collect();
        (out, lost)
    }

    #[test]
    fn the_issues_example_loses_eleven() {
        let mut t = LossTracker::new(1024, 1 << 20, u64::MAX, NODES);
        let (_, early) = run(&mut t, &[1, 2, 4, 6, 9, 11, 12, 15, 16, 20, 22], 32);
        assert_eq!(early, 0, "still inside the reorder window");
        let mut lost = 0;
        t.flush(0, true, |l| lost += l.count);
        assert_eq!(lost, 11);
        assert_eq!(t.counters.lost, 11);
    }

    #[test]
    fn late_reports_fill_their_gap_and_duplicates_are_tolerated() {
        let mut t = LossTracker::new(1024, 1 << 20, u64::MAX, NODES);
        let (out, _) = run(&mut t, &[1, 5, 3, 3, 2, 4, 5, 6], 32);
        assert_eq!(out[1], SeqOutcome::Gap { missing: 3 });
        assert_eq!(out[2], SeqOutcome::Late);
        assert_eq!(out[3], SeqOutcome::Duplicate);
        let mut lost = 0;
        t.flush(0, true, |l| lost += l.count);
        assert_eq!(lost, 0);
        assert_eq!((t.counters.late, t.counters.duplicates), (3, 2));
    }

    #[test]
    fn gaps_older_than_the_window_become_lost() {
        let mut t = LossTracker::new(4, 100, u64::MAX, NODES);
        let (_, lost) = run(&mut t, &[1, 3, 4, 5, 6, 7, 8], 32);
        assert_eq!(lost, 1, "seq 2 fell out of a 4-wide window");
        let (out, _) = run(&mut t, &[2], 32);
        assert_eq!(out[0], SeqOutcome::TooLate, "already counted lost");
        assert_eq!((t.counters.lost, t.counters.too_late), (1, 1));
    }

    #[test]
    fn gaps_waiting_too_long_become_lost() {
        let mut t = LossTracker::new(1024, 1 << 20, 1_000, NODES);
        t.observe(1, 0, 1, 32, 0, |_| {});
        t.observe(1, 0, 5, 32, 10, |_| {});
        let mut lost = 0;
        t.observe(1, 0, 6, 32, 2_000, |l| lost += l.count);
        assert_eq!(lost, 3);
    }

    #[test]
    fn twenty_two_bit_sequences_wrap() {
        let mut t = LossTracker::new(1024, 1 << 20, u64::MAX, NODES);
        let top = (1 << 22) - 2;
        let (out, _) = run(&mut t, &[top, top + 1, 0, 2], 22);
        assert_eq!(out[2], SeqOutcome::InOrder, "wraps to 0");
        assert_eq!(out[3], SeqOutcome::Gap { missing: 1 });
    }

    #[test]
    fn counter_resets_restart_the_stream() {
        let mut t = LossTracker::new(16, 100, u64::MAX, NODES);
        let (out, lost) = run(&mut t, &[1000, 1002, 1, 2, 3], 32);
        assert_eq!(out[2], SeqOutcome::Reset);
        assert_eq!(lost, 1, "the gap before the reset is lost");
        assert_eq!(out[3], SeqOutcome::InOrder);
        assert_eq!(t.counters.resets, 1);
    }
}
