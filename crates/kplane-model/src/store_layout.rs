//! The store's layout, shared by every service that writes or reads it: Parquet files under
//! `<data-dir>/tables/<table>/date=YYYY-MM-DD/hour=HH/` (hive-style partitions, UTC).

use std::path::{Path, PathBuf};

/// Directory of every table.
pub fn tables_dir(root: &Path) -> PathBuf {
    root.join("tables")
}

/// The partition directory of `table` for a time (ns since the Unix epoch).
pub fn partition_dir(root: &Path, table: &str, ns: i64) -> PathBuf {
    let (date, hour) = date_hour(ns);
    tables_dir(root)
        .join(table)
        .join(format!("date={date}"))
        .join(format!("hour={hour}"))
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
