//! Tumbling event-time windows of one bus partition, and the checkpoint that makes their
//! results exactly-once across restarts and rebalances.
//!
//! A window `[start, start + window)` counts the partition's events per (metric, kind). It
//! closes when the partition's event time passes its end by `lateness` (the watermark), or
//! when the partition has been idle for `idle-close`. Closed windows are written together with
//! a [`Checkpoint`] in one record; the bus offset committed is the checkpoint's
//! `through_offset`, so every message after it is read again after a crash — and the
//! checkpoint says which of its rows are already in written windows.

use std::collections::BTreeMap;

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

/// One closed window's count for one (metric, kind).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct WindowCount {
    pub start_ns: i64,
    pub end_ns: i64,
    pub metric: String,
    pub kind: String,
    pub count: u64,
}

#[derive(Debug, Default)]
struct Open {
    first_offset: i64,
    /// Per (metric, kind). The pairs are few (metrics × kinds), so a short vector searched
    /// in place beats a map and allocates only for a pair's first row.
    counts: Vec<((String, String), u64)>,
}

/// What happened to one message's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offered {
    pub added: u64,
    /// Rows for windows already closed: counted as late, not added.
    pub late: u64,
    /// Rows already in written windows (read again after a restart): dropped.
    pub replayed: u64,
}

#[derive(Debug)]
pub struct PartitionWindows {
    window_ns: i64,
    lateness_ns: i64,
    open: BTreeMap<i64, Open>,
    max_event_ns: i64,
    last_offset: i64,
    checkpoint: Checkpoint,
}

impl PartitionWindows {
    pub fn new(window_ns: i64, lateness_ns: i64, restored: Checkpoint) -> Self {
        Self {
            window_ns: window_ns.max(1),
            lateness_ns,
            open: BTreeMap::new(),
            max_event_ns: i64::MIN,
            last_offset: restored.through_offset,
            checkpoint: restored,
        }
    }

    pub fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    /// Adds one message's rows (`(event time ns, metric, kind)`).
    pub fn offer<'a>(
        &mut self,
        offset: i64,
        rows: impl IntoIterator<Item = (i64, &'a str, &'a str)>,
    ) -> Offered {
        let mut out = Offered::default();
        if offset <= self.checkpoint.through_offset {
            out.replayed = rows.into_iter().count() as u64;
            return out;
        }
        for (t, metric, kind) in rows {
            let start = t.div_euclid(self.window_ns) * self.window_ns;
            if start.saturating_add(self.window_ns) <= self.checkpoint.emitted_until_ns {
                if offset <= self.checkpoint.read_until {
                    out.replayed += 1;
                } else {
                    out.late += 1;
                }
                continue;
            }
            let w = self.open.entry(start).or_insert_with(|| Open {
                first_offset: offset,
                counts: Vec::new(),
            });
            w.first_offset = w.first_offset.min(offset);
            match w
                .counts
                .iter_mut()
                .find(|((m, k), _)| m == metric && k == kind)
            {
                Some((_, n)) => *n += 1,
                None => w.counts.push(((metric.to_string(), kind.to_string()), 1)),
            }
            self.max_event_ns = self.max_event_ns.max(t);
            out.added += 1;
        }
        self.last_offset = self.last_offset.max(offset);
        out
    }

    /// Closes the windows the watermark has passed (all of them with `all`); returns their
    /// counts and the new checkpoint, or `None` when nothing closed and nothing was read.
    pub fn close(&mut self, all: bool) -> Option<(Vec<WindowCount>, Checkpoint)> {
        let watermark = if all {
            i64::MAX
        } else {
            self.max_event_ns.saturating_sub(self.lateness_ns)
        };
        let mut closed = Vec::new();
        while let Some((&start, _)) = self.open.first_key_value() {
            let end = start.saturating_add(self.window_ns);
            if end > watermark {
                break;
            }
            let Some(mut w) = self.open.remove(&start) else {
                break;
            };
            // Written in (metric, kind) order.
            w.counts.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for ((metric, kind), count) in w.counts {
                closed.push(WindowCount {
                    start_ns: start,
                    end_ns: end,
                    metric,
                    kind,
                    count,
                });
            }
            self.checkpoint.emitted_until_ns = self.checkpoint.emitted_until_ns.max(end);
        }
        let through = self
            .open
            .values()
            .map(|w| w.first_offset - 1)
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

    /// Open windows (for metrics).
    pub fn open_windows(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn total(ws: &[WindowCount]) -> u64 {
        ws.iter().map(|w| w.count).sum()
    }

    #[test]
    fn windows_close_on_the_watermark_and_late_rows_are_counted() {
        let mut p = PartitionWindows::new(S, S / 2, Checkpoint::default());
        assert_eq!(
            p.offer(0, [(100, "m", "new"), (S - 1, "m", "new")]).added,
            2
        );
        assert_eq!(
            p.close(false),
            None,
            "nothing to close, nothing read past the checkpoint"
        );
        // Event time 1.6 s: watermark 1.1 s passes the end of [0, 1 s).
        p.offer(1, [(S + 6 * S / 10, "m", "change")]);
        let (closed, cp) = p.close(false).unwrap();
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].start_ns, closed[0].count), (0, 2));
        assert_eq!(cp.through_offset, 0, "offset 1 still feeds an open window");
        assert_eq!(cp.emitted_until_ns, S);
        let o = p.offer(2, [(5, "m", "new")]);
        assert_eq!((o.added, o.late), (0, 1));
    }

    #[test]
    fn a_restart_from_the_checkpoint_counts_nothing_twice_and_loses_nothing() {
        // 20 messages of 3 rows over 4 windows; "crash" after the checkpoint of message 11.
        let rows = |i: i64| {
            let t = i * S / 5;
            [(t, "m", "new"), (t + 1, "m", "new"), (t + 2, "m", "change")]
        };
        let mut first = PartitionWindows::new(S, 0, Checkpoint::default());
        let mut written = Vec::new();
        let mut cp = Checkpoint::default();
        for i in 0..=11 {
            first.offer(i, rows(i));
            if let Some((w, c)) = first.close(false) {
                written.extend(w);
                cp = c;
            }
        }
        // Messages 12..15 read but never checkpointed: lost with the process.
        for i in 12..=15 {
            first.offer(i, rows(i));
        }
        let mut second = PartitionWindows::new(S, 0, cp);
        for i in (cp.through_offset + 1)..20 {
            let o = second.offer(i, rows(i));
            assert_eq!(o.late, 0, "a replay is not late");
        }
        written.extend(second.close(true).unwrap().0);
        assert_eq!(total(&written), 60, "every row exactly once");
        let mut starts: Vec<i64> = written.iter().map(|w| w.start_ns).collect();
        starts.dedup();
        assert_eq!(starts, vec![0, S, 2 * S, 3 * S]);
    }
}
