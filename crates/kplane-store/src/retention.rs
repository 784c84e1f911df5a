//! Retention: how long each table's hour partitions are kept, judged on event time (the
//! writer's emitted windows, so a replay or a virtual-time run expires like a live one).
//! Each writer removes only its own files, like compaction: several processors share a store
//! and none deletes another's rows. An hour partition goes once its hour ended `keep` before
//! the writer's emitted time; emptied hour and date directories go with it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::backend::Store;
use crate::error::Result;
use crate::layout::{FileKind, date_start, table_key};

/// Per table, how long its partitions are kept; tables not named are kept for ever.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub keep: BTreeMap<String, Duration>,
}

impl Retention {
    /// Removes `writer`'s files in the partitions of every table with a retention whose hour
    /// ended `keep` before `now_ns`; returns how many files went.
    pub fn sweep(&self, store: &Store, writer: &str, now_ns: i64) -> Result<u64> {
        let mut removed = 0;
        for (table, keep) in &self.keep {
            let keep_ns = i64::try_from(keep.as_nanos()).unwrap_or(i64::MAX);
            removed += sweep_table(store, table, writer, now_ns.saturating_sub(keep_ns))?;
        }
        Ok(removed)
    }
}

/// Removes `writer`'s files in `table`'s hour partitions that ended by `before_ns`.
fn sweep_table(store: &Store, table: &str, writer: &str, before_ns: i64) -> Result<u64> {
    let dir = table_key(table);
    let mut removed = 0;
    for date in store.subdirs(&dir)? {
        let Some(day) = date_start(&date) else {
            continue;
        };
        let date_dir = format!("{dir}/{date}");
        for hour in store.subdirs(&date_dir)? {
            let Some(h) = hour
                .strip_prefix("hour=")
                .and_then(|h| h.parse::<i64>().ok())
            else {
                continue;
            };
            if day + (h + 1) * 3_600_000_000_000 > before_ns {
                continue;
            }
            let hour_dir = format!("{date_dir}/{hour}");
            for f in store.list(&hour_dir)? {
                if FileKind::parse(f.name()).is_some_and(|(w, _)| w == writer) {
                    store.delete(&f.key)?;
                    removed += 1;
                }
            }
            // Another writer's files keep it; that writer removes them.
            store.settle_dir(&hour_dir, true)?;
        }
        store.settle_dir(&date_dir, true)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::partition_key;

    const H: i64 = 3_600_000_000_000;

    #[test]
    fn a_writer_removes_its_own_files_in_expired_hours_only() {
        let root = std::env::temp_dir().join(format!("kplane-retention-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::local(&root);
        let partition_dir = |table: &str, ns: i64| root.join(partition_key(table, ns));
        let put = |table: &str, ns: i64, name: &str| {
            let dir = partition_dir(table, ns);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), b"x").unwrap();
        };
        // Hours 0, 1 and 2 of day 1 of `flows`, and hour 0 of `alerts` (no retention).
        let day = 86_400 * 1_000_000_000;
        put("flows", day, "p0-w1.parquet");
        put("flows", day, "p1-w1.parquet");
        put("flows", day + H, "p0-w2.parquet");
        put("flows", day + 2 * H, "p0-w3.parquet");
        put("alerts", day, "p0-a0.parquet");
        let r = Retention {
            keep: [("flows".to_string(), Duration::from_secs(3_600))].into(),
        };
        // At 3:30 with an hour kept: hours 0 and 1 ended 2.5 h and 1.5 h ago and go; hour 2
        // ended 0.5 h ago and stays.
        assert_eq!(r.sweep(&store, "p0", day + 3 * H + H / 2).unwrap(), 2);
        let left = |table: &str, ns: i64| {
            let mut v: Vec<String> = std::fs::read_dir(partition_dir(table, ns))
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().into_string().unwrap())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        assert_eq!(
            left("flows", day),
            ["p1-w1.parquet"],
            "another writer's stays"
        );
        assert!(!partition_dir("flows", day + H).exists(), "emptied");
        assert_eq!(left("flows", day + 2 * H), ["p0-w3.parquet"]);
        assert_eq!(left("alerts", day), ["p0-a0.parquet"], "no retention");
        // The other writer's sweep empties the hour and the day goes with its last hour.
        assert_eq!(r.sweep(&store, "p1", day + 3 * H + H / 2).unwrap(), 1);
        assert!(!partition_dir("flows", day).exists());
        assert_eq!(r.sweep(&store, "p0", day + 4 * H).unwrap(), 1);
        assert!(
            !root
                .join(table_key("flows"))
                .join("date=1970-01-02")
                .exists()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
