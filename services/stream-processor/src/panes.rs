//! Event-time windows of one bus partition, and the checkpoint that makes their results
//! exactly-once across restarts and rebalances.
//!
//! Rows are kept in panes of `slide` length; a window `[end − window, end)` is the union of
//! its `window / slide` panes, so tumbling windows (`slide = window`) have one pane each and
//! sliding windows share panes. A window is emitted once the partition's event time passes
//! its end by `lateness` (the watermark), or when the partition has been idle for
//! `idle-close`. Results are written together with a [`Checkpoint`]; the bus offset committed
//! is the checkpoint's `through_offset`, so every message after it is read again after a crash
//! — and the checkpoint says which of its rows are already in written windows.

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::ArrowError;
use serde::{Deserialize, Serialize};

/// What a partition's written results already contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Checkpoint {
    /// Every message up to this offset is fully accounted for in written windows.
    pub through_offset: i64,
    /// The last offset read when the checkpoint was taken: rows of messages in
    /// `(through_offset, read_until]` for windows ending at or before `emitted_until_ns` are
    /// already counted (a replay), not late.
    pub read_until: i64,
    /// End of the latest written window (ns since the Unix epoch).
    pub emitted_until_ns: i64,
}

impl Default for Checkpoint {
    fn default() -> Self {
        Self {
            through_offset: -1,
            read_until: -1,
            emitted_until_ns: i64::MIN,
        }
    }
}

/// What happened to one message's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offered {
    pub added: u64,
    /// Rows that miss a window already emitted: counted as late (and still added to the
    /// later windows of a sliding window they belong to).
    pub late: u64,
    /// Rows already in written windows (read again after a restart): dropped.
    pub replayed: u64,
}

impl Offered {
    pub fn merge(&mut self, o: Offered) {
        self.added += o.added;
        self.late += o.late;
        self.replayed += o.replayed;
    }
}

/// A window ready for analytics: per input table, every row whose event time is in
/// `[start_ns, end_ns)`.
#[derive(Debug)]
pub struct ClosedWindow {
    pub start_ns: i64,
    pub end_ns: i64,
    pub tables: Vec<Vec<RecordBatch>>,
}

impl ClosedWindow {
    /// Rows of the first (primary) table.
    pub fn rows(&self) -> usize {
        self.tables
            .first()
            .map_or(0, |t| t.iter().map(RecordBatch::num_rows).sum())
    }
}

#[derive(Debug)]
struct Pane {
    first_offset: i64,
    tables: Vec<Vec<RecordBatch>>,
}

#[derive(Debug)]
pub struct Panes {
    window_ns: i64,
    slide_ns: i64,
    lateness_ns: i64,
    panes: BTreeMap<i64, Pane>,
    max_event_ns: i64,
    last_offset: i64,
    checkpoint: Checkpoint,
}

/// Where a row goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Add,
    AddLate,
    Late,
    Replayed,
}

impl Panes {
    /// `slide_ns` must divide `window_ns` (the config validates it).
    pub fn new(window_ns: i64, slide_ns: i64, lateness_ns: i64, restored: Checkpoint) -> Self {
        let window_ns = window_ns.max(1);
        Self {
            window_ns,
            slide_ns: slide_ns.clamp(1, window_ns),
            lateness_ns,
            panes: BTreeMap::new(),
            max_event_ns: i64::MIN,
            last_offset: restored.through_offset,
            checkpoint: restored,
        }
    }

    pub fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn pane_of(&self, t: i64) -> i64 {
        t.div_euclid(self.slide_ns) * self.slide_ns
    }

    fn fate(&self, offset: i64, pane: i64) -> Fate {
        let emitted = self.checkpoint.emitted_until_ns;
        let replay = offset <= self.checkpoint.read_until;
        if pane.saturating_add(self.window_ns) <= emitted {
            // Every window of the row is written.
            if replay { Fate::Replayed } else { Fate::Late }
        } else if pane.saturating_add(self.slide_ns) <= emitted {
            // Its first windows are written, later (sliding) ones are not: a replay rebuilds
            // the pane for them; a new row is late for the written ones.
            if replay { Fate::Add } else { Fate::AddLate }
        } else {
            Fate::Add
        }
    }

    /// Adds one message's rows. `tables[k]` is a batch of input table `k` with the event time
    /// of each of its rows; the first table is the primary one (counted in [`Offered`]).
    pub fn offer(
        &mut self,
        offset: i64,
        tables: &[(&RecordBatch, &[i64])],
    ) -> Result<Offered, ArrowError> {
        let mut out = Offered::default();
        let primary_rows = tables.first().map_or(0, |(b, _)| b.num_rows() as u64);
        if offset <= self.checkpoint.through_offset {
            out.replayed = primary_rows;
            return Ok(out);
        }
        self.last_offset = self.last_offset.max(offset);
        for (k, (batch, event_ns)) in tables.iter().enumerate() {
            for (pane, part, max_t) in self.split(batch, event_ns)? {
                let n = part.num_rows() as u64;
                let fate = self.fate(offset, pane);
                if k == 0 {
                    match fate {
                        Fate::Replayed => out.replayed += n,
                        Fate::Late | Fate::AddLate => out.late += n,
                        Fate::Add => out.added += n,
                    }
                }
                if matches!(fate, Fate::Replayed | Fate::Late) {
                    continue;
                }
                self.max_event_ns = self.max_event_ns.max(max_t);
                let width = tables.len();
                let p = self.panes.entry(pane).or_insert_with(|| Pane {
                    first_offset: offset,
                    tables: vec![Vec::new(); width],
                });
                p.first_offset = p.first_offset.min(offset);
                if let Some(t) = p.tables.get_mut(k) {
                    t.push(part);
                }
            }
        }
        Ok(out)
    }

    /// `batch` split by pane: (pane start, its rows, their latest event time).
    fn split(
        &self,
        batch: &RecordBatch,
        event_ns: &[i64],
    ) -> Result<Vec<(i64, RecordBatch, i64)>, ArrowError> {
        let Some(&first) = event_ns.first() else {
            return Ok(Vec::new());
        };
        let first_pane = self.pane_of(first);
        // The usual case, a batch within one pane: range checks (a division per row cost
        // 4 % of `kplane bench processor`).
        let (lo, hi) = (first_pane, first_pane.saturating_add(self.slide_ns));
        let (min_t, max_t) = event_ns
            .iter()
            .fold((first, first), |(a, z), &t| (a.min(t), z.max(t)));
        if min_t >= lo && max_t < hi {
            return Ok(vec![(first_pane, batch.clone(), max_t)]);
        }
        let mut groups: BTreeMap<i64, (Vec<bool>, i64)> = BTreeMap::new();
        for (i, &t) in event_ns.iter().enumerate() {
            let g = groups
                .entry(self.pane_of(t))
                .or_insert_with(|| (vec![false; event_ns.len()], t));
            g.0[i] = true;
            g.1 = g.1.max(t);
        }
        groups
            .into_iter()
            .map(|(pane, (mask, max_t))| {
                let part =
                    arrow_select::filter::filter_record_batch(batch, &BooleanArray::from(mask))?;
                Ok((pane, part, max_t))
            })
            .collect()
    }

    /// The producer has published every row up to event time `t` (a heartbeat): the watermark
    /// moves on as if a row of that time had arrived.
    pub fn advance(&mut self, t: i64) {
        self.max_event_ns = self.max_event_ns.max(t);
    }

    /// The end of the latest window the watermark has passed (every window up to there is
    /// emitted once `close` has run); `None` before any row or heartbeat.
    pub fn watermark_window_end(&self) -> Option<i64> {
        (self.max_event_ns != i64::MIN).then(|| {
            let mark = self.max_event_ns.saturating_sub(self.lateness_ns);
            mark - mark.rem_euclid(self.slide_ns)
        })
    }

    /// Emits the windows the watermark has passed (all of them with `all`) with the new
    /// checkpoint, or `None` when nothing closed and nothing new was read.
    pub fn close(&mut self, all: bool) -> Option<(Vec<ClosedWindow>, Checkpoint)> {
        let watermark = if all {
            i64::MAX
        } else {
            self.max_event_ns.saturating_sub(self.lateness_ns)
        };
        let emitted = self.checkpoint.emitted_until_ns;
        // Ends of the windows that contain a held pane, not yet emitted, passed by the mark.
        let mut ends = BTreeSet::new();
        for &p in self.panes.keys() {
            let mut end = p.saturating_add(self.slide_ns);
            while end <= p.saturating_add(self.window_ns) {
                if end > emitted && end <= watermark {
                    ends.insert(end);
                }
                end = end.saturating_add(self.slide_ns);
            }
        }
        let mut closed = Vec::with_capacity(ends.len());
        for end in ends {
            let start = end - self.window_ns;
            let mut tables: Vec<Vec<RecordBatch>> = Vec::new();
            for (_, p) in self.panes.range(start..end) {
                tables.resize(tables.len().max(p.tables.len()), Vec::new());
                for (k, t) in p.tables.iter().enumerate() {
                    tables[k].extend(t.iter().cloned());
                }
            }
            closed.push(ClosedWindow {
                start_ns: start,
                end_ns: end,
                tables,
            });
            self.checkpoint.emitted_until_ns = self.checkpoint.emitted_until_ns.max(end);
        }
        // Panes no later window needs.
        let emitted = self.checkpoint.emitted_until_ns;
        let window = self.window_ns;
        self.panes
            .retain(|&p, _| p.saturating_add(window) > emitted);
        let through = self
            .panes
            .values()
            .map(|p| p.first_offset - 1)
            .min()
            .unwrap_or(self.last_offset)
            .max(self.checkpoint.through_offset);
        if closed.is_empty() && through == self.checkpoint.through_offset {
            return None;
        }
        self.checkpoint.through_offset = through;
        self.checkpoint.read_until = self.last_offset;
        Some((closed, self.checkpoint))
    }

    /// Panes held (for metrics).
    pub fn held_panes(&self) -> usize {
        self.panes.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int64Array};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    const S: i64 = 1_000_000_000;

    fn batch(ts: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ts.to_vec()))]).unwrap()
    }

    fn offer(p: &mut Panes, offset: i64, ts: &[i64]) -> Offered {
        p.offer(offset, &[(&batch(ts), ts)]).unwrap()
    }

    fn times(w: &ClosedWindow) -> Vec<i64> {
        let mut v: Vec<i64> = w.tables[0]
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
            })
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn windows_close_on_the_watermark_and_late_rows_are_counted() {
        let mut p = Panes::new(S, S, S / 2, Checkpoint::default());
        assert_eq!(offer(&mut p, 0, &[100, S - 1]).added, 2);
        assert!(p.close(false).is_none(), "nothing to close yet");
        // Event time 1.6 s: watermark 1.1 s passes the end of [0, 1 s).
        offer(&mut p, 1, &[S + 6 * S / 10]);
        let (closed, cp) = p.close(false).unwrap();
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].start_ns, closed[0].rows()), (0, 2));
        assert_eq!(cp.through_offset, 0, "offset 1 still feeds an open window");
        assert_eq!(cp.emitted_until_ns, S);
        let o = offer(&mut p, 2, &[5]);
        assert_eq!((o.added, o.late), (0, 1));
    }

    #[test]
    fn a_message_spanning_panes_is_split() {
        let mut p = Panes::new(S, S, 0, Checkpoint::default());
        offer(&mut p, 0, &[1, S + 1, 2, 2 * S + 5]);
        let (closed, _) = p.close(true).unwrap();
        let got: Vec<_> = closed.iter().map(|w| (w.start_ns, times(w))).collect();
        assert_eq!(
            got,
            vec![(0, vec![1, 2]), (S, vec![S + 1]), (2 * S, vec![2 * S + 5])]
        );
    }

    #[test]
    fn sliding_windows_share_panes() {
        // 2 s windows every 1 s.
        let mut p = Panes::new(2 * S, S, 0, Checkpoint::default());
        offer(&mut p, 0, &[10, S + 10, 2 * S + 10]);
        let (closed, _) = p.close(true).unwrap();
        let got: Vec<_> = closed.iter().map(|w| (w.start_ns, times(w))).collect();
        assert_eq!(
            got,
            vec![
                (-S, vec![10]),
                (0, vec![10, S + 10]),
                (S, vec![S + 10, 2 * S + 10]),
                (2 * S, vec![2 * S + 10]),
            ]
        );
    }

    #[test]
    fn a_restart_from_the_checkpoint_counts_nothing_twice_and_loses_nothing() {
        for (window, slide) in [(S, S), (2 * S, S)] {
            // 20 messages of 3 rows over 4 s; "crash" after the checkpoint of message 11.
            let rows = |i: i64| {
                let t = i * S / 5;
                [t, t + 1, t + 2]
            };
            let mut first = Panes::new(window, slide, 0, Checkpoint::default());
            let mut written: Vec<(i64, usize)> = Vec::new();
            let mut cp = Checkpoint::default();
            for i in 0..=11 {
                offer(&mut first, i, &rows(i));
                if let Some((w, c)) = first.close(false) {
                    written.extend(w.iter().map(|w| (w.start_ns, w.rows())));
                    cp = c;
                }
            }
            // Messages 12..15 read but never checkpointed: lost with the process.
            for i in 12..=15 {
                offer(&mut first, i, &rows(i));
            }
            let mut second = Panes::new(window, slide, 0, cp);
            for i in (cp.through_offset + 1)..20 {
                assert_eq!(
                    offer(&mut second, i, &rows(i)).late,
                    0,
                    "a replay is not late"
                );
            }
            written.extend(
                second
                    .close(true)
                    .unwrap()
                    .0
                    .iter()
                    .map(|w| (w.start_ns, w.rows())),
            );
            // Against one uninterrupted run.
            let mut once = Panes::new(window, slide, 0, Checkpoint::default());
            for i in 0..20 {
                offer(&mut once, i, &rows(i));
            }
            let expected: Vec<(i64, usize)> = once
                .close(true)
                .unwrap()
                .0
                .iter()
                .map(|w| (w.start_ns, w.rows()))
                .collect();
            assert_eq!(written, expected, "window {window} slide {slide}");
        }
    }
}
