//! History from the stream processor's Parquet store (`<store-dir>/tables/<table>/…`): the
//! windows the models train on at a cold start.

use std::collections::BTreeMap;

use kplane_store::Store;
use kplane_store::layout::table_key;

use crate::features::{Window, window_end};

/// The tables the models read.
pub const TABLES: [&str; 3] = ["flows", "queues", "links"];

/// The last `keep` windows of the store, oldest first; unreadable files are skipped and
/// counted in the second value.
pub fn windows(store: &Store, keep: usize) -> (Vec<Window>, usize) {
    let mut by_end: BTreeMap<i64, Window> = BTreeMap::new();
    let mut unreadable = 0;
    for table in TABLES {
        // An unlistable table is read as empty (and counted).
        let mut files = store
            .current_parquet(&table_key(table))
            .unwrap_or_else(|e| {
                tracing::warn!(table, error = %e, "store history unreadable");
                unreadable += 1;
                Vec::new()
            });
        // In key order (listings come in any order): the same store gives the same samples
        // in the same order, so the same models.
        files.sort_by(|a, b| a.key.cmp(&b.key));
        for f in files {
            let reader = store
                .parquet(&f.key)
                .and_then(|b| Ok(b.build()?))
                .map_err(|e| e.to_string());
            let Ok(reader) = reader else {
                unreadable += 1;
                continue;
            };
            for batch in reader {
                let Ok(batch) = batch else {
                    unreadable += 1;
                    break;
                };
                // A file may hold several windows (compaction): split by window end.
                for b in split_by_end(&batch) {
                    if let Some(end) = window_end(&b) {
                        by_end
                            .entry(end)
                            .or_insert_with(|| Window::new(end))
                            .add(table, &b);
                    }
                }
            }
        }
    }
    let skip = by_end.len().saturating_sub(keep);
    (by_end.into_values().skip(skip).collect(), unreadable)
}

fn split_by_end(b: &arrow_array::RecordBatch) -> Vec<arrow_array::RecordBatch> {
    let ends = crate::features::f64s(b, "window_end");
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=ends.len() {
        if i == ends.len() || ends[i] != ends[start] {
            out.push(b.slice(start, i - start));
            start = i;
        }
    }
    out
}

/// Moves `later` — another store's windows, oldest first — in time to follow `history`, as
/// `kplane eval replay` scores one store after training on another. Windows that already go on
/// from the history (the first is the window after its last) stay where they are. Others
/// (another run, whose clock started again; another week) are placed after a gap the forecasts
/// forget their series across: the last values, the long flows and a periodic job's phase of
/// the history belong to other traffic, and `later`'s own values start the series again. The
/// entities' habits carry over: they count windows, not time.
pub fn follow(history: &[Window], later: &mut [Window], window_ns: i64) {
    let (Some(last), Some(first)) = (history.last(), later.first()) else {
        return;
    };
    if first.end_ns == last.end_ns + window_ns {
        return;
    }
    let shift = last.end_ns + (crate::forecast::FORGET_AFTER + 1) * window_ns - first.end_ns;
    for w in later {
        w.shift(shift);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn ends(ws: &[Window]) -> Vec<i64> {
        ws.iter().map(|w| w.end_ns / S).collect()
    }

    fn windows_ending(ends: &[i64]) -> Vec<Window> {
        ends.iter().map(|e| Window::new(e * S)).collect()
    }

    #[test]
    fn another_runs_windows_follow_the_history_after_a_gap_the_forecasts_forget_across() {
        let history = windows_ending(&[10, 11, 12]);
        // Another run: its clock started again.
        let mut later = windows_ending(&[1, 2, 4]);
        follow(&history, &mut later, S);
        let gap = crate::forecast::FORGET_AFTER + 1;
        assert_eq!(ends(&later), [12 + gap, 13 + gap, 15 + gap]);
        // The windows after the history's last go on from it.
        let mut next = windows_ending(&[13, 14]);
        follow(&history, &mut next, S);
        assert_eq!(ends(&next), [13, 14]);
    }
}
