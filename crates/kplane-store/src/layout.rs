//! The store's layout, shared by every service that writes or reads it: Parquet files under
//! `tables/<table>/date=YYYY-MM-DD/hour=HH/` of the store's root (hive-style partitions,
//! UTC). Places are keys of a [`crate::Store`]: paths relative to its root, `/`-separated.

/// The key of a table's directory.
pub fn table_key(table: &str) -> String {
    format!("tables/{table}")
}

/// The key of `table`'s partition directory for a time (ns since the Unix epoch).
pub fn partition_key(table: &str, ns: i64) -> String {
    let (date, hour) = date_hour(ns);
    format!("tables/{table}/date={date}/hour={hour}")
}

/// `(date, hour)` of a time in UTC: `("2026-11-21", "13")`.
pub fn date_hour(ns: i64) -> (String, String) {
    let secs = ns.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let hour = secs.rem_euclid(86_400) / 3_600;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (format!("{y:04}-{m:02}-{d:02}"), format!("{hour:02}"))
}

/// A SQL filter on the `date` partition column keeping the partitions that can hold rows of
/// `[from, to)` (ns; `to` `None`: until now), so that a query lists and opens only those. A
/// day early at the start: an alerts file sits in the partition of its earliest alert, which
/// may be the day before.
pub fn date_filter(from: i64, to: Option<i64>) -> String {
    const DAY: i64 = 86_400_000_000_000;
    let (first, _) = date_hour(from.saturating_sub(DAY));
    match to {
        Some(t) => format!("date >= '{first}' AND date <= '{}'", date_hour(t).0),
        None => format!("date >= '{first}'"),
    }
}

/// The start (ns, UTC) of a `date=YYYY-MM-DD` directory's day.
pub fn date_start(name: &str) -> Option<i64> {
    let mut parts = name.strip_prefix("date=")?.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days since 1970-01-01 of a civil date (H. Hinnant's algorithm; the inverse of
    // `date_hour`).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400_000_000_000)
}

/// What a stored file's name says. Every writer names its files `<writer>-<kind>.parquet`
/// (`<writer>` is a processor lane such as `reports-p3`; nothing else in a name has a `-`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// One commit's windows: `w<end of its first window>`.
    Window { first_end: i64 },
    /// Merged windows: `c<first end>_<last end>.l<level>` (`level` counts merges: a merge of
    /// level-`n` files is level `n + 1`).
    Compacted {
        first_end: i64,
        last_end: i64,
        level: u32,
    },
    /// Immediate rows (alerts, switch changes) of messages from an offset on: `a<offset>`.
    Immediate { first_offset: i64 },
    /// One hour of a writer's windows summed into coarser ones (`crate::rollup`):
    /// `r<start of the hour>`.
    Rollup { hour_start: i64 },
}

impl FileKind {
    /// The file name of this kind for `writer`.
    pub fn file_name(&self, writer: &str) -> String {
        match *self {
            Self::Window { first_end } => format!("{writer}-w{first_end}.parquet"),
            Self::Compacted {
                first_end,
                last_end,
                level,
            } => format!("{writer}-c{first_end}_{last_end}.l{level}.parquet"),
            Self::Immediate { first_offset } => format!("{writer}-a{first_offset}.parquet"),
            Self::Rollup { hour_start } => format!("{writer}-r{hour_start}.parquet"),
        }
    }

    /// `(writer, kind)` of a store file name; `None` for names the store does not write.
    pub fn parse(name: &str) -> Option<(&str, Self)> {
        let stem = name.strip_suffix(".parquet")?;
        let (writer, rest) = stem.rsplit_once('-')?;
        let kind = if let Some(w) = rest.strip_prefix('w') {
            Self::Window {
                first_end: w.parse().ok()?,
            }
        } else if let Some(c) = rest.strip_prefix('c') {
            let (range, level) = c.split_once(".l")?;
            let (a, b) = range.split_once('_')?;
            Self::Compacted {
                first_end: a.parse().ok()?,
                last_end: b.parse().ok()?,
                level: level.parse().ok()?,
            }
        } else if let Some(r) = rest.strip_prefix('r') {
            Self::Rollup {
                hour_start: r.parse().ok()?,
            }
        } else {
            Self::Immediate {
                first_offset: rest.strip_prefix('a')?.parse().ok()?,
            }
        };
        Some((writer, kind))
    }
}

/// Which files of one directory a merge has replaced, in the order given: a window file
/// whose first end lies in a compacted file's range of the same writer, and a compacted file
/// inside a larger compacted range of the same writer. A merge publishes its file and deletes
/// the sources a grace period later, so readers that leave these out see every row exactly
/// once, even in the middle of a merge; the writer also deletes them when it recovers.
pub fn superseded(names: &[&str]) -> Vec<bool> {
    let parsed: Vec<Option<(&str, FileKind)>> = names.iter().map(|n| FileKind::parse(n)).collect();
    let merged: Vec<(&str, i64, i64)> = parsed
        .iter()
        .filter_map(|p| match *p {
            Some((
                w,
                FileKind::Compacted {
                    first_end,
                    last_end,
                    ..
                },
            )) => Some((w, first_end, last_end)),
            _ => None,
        })
        .collect();
    parsed
        .iter()
        .map(|p| match *p {
            Some((w, FileKind::Window { first_end })) => merged
                .iter()
                .any(|&(mw, a, b)| mw == w && a <= first_end && first_end <= b),
            Some((
                w,
                FileKind::Compacted {
                    first_end,
                    last_end,
                    ..
                },
            )) => merged.iter().any(|&(mw, a, b)| {
                mw == w && a <= first_end && last_end <= b && (a, b) != (first_end, last_end)
            }),
            _ => false,
        })
        .collect()
}

/// The current files among `files` (in any directories; `key` gives a file's key, `dir/name`),
/// sorted by directory and name: [`superseded`] judged per directory.
pub fn current<T>(mut files: Vec<T>, key: impl Fn(&T) -> &str) -> Vec<T> {
    files.sort_by(|a, b| dir_and_name(key(a)).cmp(&dir_and_name(key(b))));
    let mut replaced = Vec::with_capacity(files.len());
    for group in files.chunk_by(|a, b| dir_and_name(key(a)).0 == dir_and_name(key(b)).0) {
        let names: Vec<&str> = group.iter().map(|f| dir_and_name(key(f)).1).collect();
        replaced.extend(superseded(&names));
    }
    let mut replaced = replaced.into_iter();
    files.retain(|_| !replaced.next().unwrap_or(false));
    files
}

/// A key's directory (empty at the root) and file name.
pub(crate) fn dir_and_name(key: &str) -> (&str, &str) {
    key.rsplit_once('/').unwrap_or(("", key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_files_are_judged_per_directory() {
        let keys = vec![
            "t/hour=02/p0-w10.parquet",
            "t/hour=01/p0-w10.parquet",
            "t/hour=01/p0-c10_20.l1.parquet",
            "t/hour=01/p0-w20.parquet",
            "t/hour=01/p1-w10.parquet",
            "t/hour=01/p0-w30.parquet",
        ];
        // The merge in hour 01 replaces nothing in hour 02, nor lane p1's file.
        assert_eq!(
            current(keys, |k| k),
            [
                "t/hour=01/p0-c10_20.l1.parquet",
                "t/hour=01/p0-w30.parquet",
                "t/hour=01/p1-w10.parquet",
                "t/hour=02/p0-w10.parquet",
            ]
        );
    }

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
    fn dates_are_utc_civil_dates() {
        assert_eq!(date_hour(0), ("1970-01-01".into(), "00".into()));
        // 2026-11-21T13:20:42Z
        assert_eq!(
            date_hour(1_795_267_242_000_000_000),
            ("2026-11-21".into(), "13".into())
        );
        assert_eq!(
            date_hour(951_782_400_000_000_000),
            ("2000-02-29".into(), "00".into())
        );
    }

    #[test]
    fn a_date_filter_keeps_the_days_a_range_can_be_in_and_the_day_before() {
        // 2026-11-30T10:00:00Z to 2026-12-02T00:00:00Z.
        let (from, to) = (1_796_032_800_000_000_000, 1_796_169_600_000_000_000);
        assert_eq!(
            date_filter(from, Some(to)),
            "date >= '2026-11-29' AND date <= '2026-12-02'"
        );
        assert_eq!(date_filter(from, None), "date >= '2026-11-29'");
    }

    #[test]
    fn file_names_round_trip() {
        for kind in [
            FileKind::Window { first_end: 30 },
            FileKind::Compacted {
                first_end: 10,
                last_end: 50,
                level: 2,
            },
            FileKind::Immediate { first_offset: 7 },
            FileKind::Rollup {
                hour_start: 3_600_000_000_000,
            },
        ] {
            let name = kind.file_name("reports-p3");
            assert_eq!(FileKind::parse(&name), Some(("reports-p3", kind)), "{name}");
        }
        assert_eq!(FileKind::parse("notes.txt"), None);
        assert_eq!(FileKind::parse("reports-p3-x1.parquet"), None);
    }

    #[test]
    fn a_merge_in_progress_is_seen_once() {
        let names = [
            "reports-p0-w10.parquet",
            "reports-p0-w20.parquet",
            "reports-p0-c10_20.l1.parquet",
            "reports-p0-w30.parquet",
            // Another writer's files with the same ends are not covered.
            "reports-p1-w10.parquet",
            // A level-2 merge of the level-1 file published before its sources are deleted.
            "reports-p0-c10_30.l2.parquet",
            "reports-p0-a5.parquet",
            "anomalies-x.parquet",
        ];
        assert_eq!(
            superseded(&names),
            [true, true, true, true, false, false, false, false]
        );
    }
}
