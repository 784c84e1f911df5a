//! Retention: how long each table's hour partitions are kept, judged on event time (the
//! writer's emitted windows, so a replay or a virtual-time run expires like a live one).
//! Each writer removes only its own files, like compaction: several processors share a store
//! and none deletes another's rows. An hour partition goes once its hour ended `keep` before
//! the writer's emitted time; emptied hour and date directories go with it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::error::Result;
use crate::layout::{FileKind, tables_dir};

/// Per table, how long its partitions are kept; tables not named are kept for ever.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub keep: BTreeMap<String, Duration>,
}

impl Retention {
    /// Removes `writer`'s files in the partitions of every table with a retention whose hour
    /// ended `keep` before `now_ns`; returns how many files went.
    pub fn sweep(&self, root: &Path, writer: &str, now_ns: i64) -> Result<u64> {
        let mut removed = 0;
        for (table, keep) in &self.keep {
            let keep_ns = i64::try_from(keep.as_nanos()).unwrap_or(i64::MAX);
            removed += sweep_table(root, table, writer, now_ns.saturating_sub(keep_ns))?;
        }
        Ok(removed)
    }
}

/// Removes `writer`'s files in `table`'s hour partitions that ended by `before_ns`.
fn sweep_table(root: &Path, table: &str, writer: &str, before_ns: i64) -> Result<u64> {
    let dir = tables_dir(root).join(table);
    let mut removed = 0;
    for date in subdirs(&dir)? {
        let Some(day) = date_start(&date) else {
            continue;
        };
        let date_dir = dir.join(&date);
        for hour in subdirs(&date_dir)? {
            let Some(h) = hour
                .strip_prefix("hour=")
                .and_then(|h| h.parse::<i64>().ok())
            else {
                continue;
            };
            if day + (h + 1) * 3_600_000_000_000 > before_ns {
                continue;
            }
            let hour_dir = date_dir.join(&hour);
            for e in std::fs::read_dir(&hour_dir)? {
                let e = e?;
                let name = e.file_name();
                let mine = name
                    .to_str()
                    .and_then(FileKind::parse)
                    .is_some_and(|(w, _)| w == writer);
                if mine {
                    std::fs::remove_file(e.path())?;
                    removed += 1;
                }
            }
            // Another writer's files keep it; that writer removes them.
            let _ = std::fs::remove_dir(&hour_dir);
        }
        let _ = std::fs::remove_dir(&date_dir);
    }
    Ok(removed)
}

/// The names of `dir`'s subdirectories (none when it does not exist).
fn subdirs(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        r => r?,
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e?;
        if e.file_type()?.is_dir()
            && let Some(name) = e.file_name().to_str()
        {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// The start (ns, UTC) of a `date=YYYY-MM-DD` directory's day.
fn date_start(name: &str) -> Option<i64> {
    let mut parts = name.strip_prefix("date=")?.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days since 1970-01-01 of a civil date (H. Hinnant's algorithm; the inverse of
    // `layout::date_hour`).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{date_hour, partition_dir};

    const H: i64 = 3_600_000_000_000;

    #[test]
    fn a_date_directory_starts_where_date_hour_says() {
        for ns in [
            0,
            1_795_821_225_416_765_525,
            951_782_400 * 1_000_000_000 + 5,
        ] {
            let (date, hour) = date_hour(ns);
            let start = date_start(&format!("date={date}")).unwrap();
            let h: i64 = hour.parse().unwrap();
            assert!(
                start + h * H <= ns && ns < start + (h + 1) * H,
                "{date} {hour}"
            );
        }
        assert_eq!(date_start("date=2026-13-01"), None);
        assert_eq!(date_start("nonsense"), None);
    }

    #[test]
    fn a_writer_removes_its_own_files_in_expired_hours_only() {
        let root = std::env::temp_dir().join(format!("kplane-retention-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let put = |table: &str, ns: i64, name: &str| {
            let dir = partition_dir(&root, table, ns);
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
        assert_eq!(r.sweep(&root, "p0", day + 3 * H + H / 2).unwrap(), 2);
        let left = |table: &str, ns: i64| {
            let mut v: Vec<String> = std::fs::read_dir(partition_dir(&root, table, ns))
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
        assert!(!partition_dir(&root, "flows", day + H).exists(), "emptied");
        assert_eq!(left("flows", day + 2 * H), ["p0-w3.parquet"]);
        assert_eq!(left("alerts", day), ["p0-a0.parquet"], "no retention");
        // The other writer's sweep empties the hour and the day goes with its last hour.
        assert_eq!(r.sweep(&root, "p1", day + 3 * H + H / 2).unwrap(), 1);
        assert!(!partition_dir(&root, "flows", day).exists());
        assert_eq!(r.sweep(&root, "p0", day + 4 * H).unwrap(), 1);
        assert!(
            !tables_dir(&root)
                .join("flows")
                .join("date=1970-01-02")
                .exists()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
