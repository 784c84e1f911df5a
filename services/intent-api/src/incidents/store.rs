//! Resolved incidents into the store's `incidents` table
//! ([`kplane_model::incidents::table`]): buffered, written every few seconds and at shutdown
//! by the store's one writer (staged, fsynced, published whole), one file per flush and hour.

use kplane_model::incidents::table::{INCIDENTS, incidents_batch};
use kplane_store::Store;
use kplane_store::layout::partition_key;
use serde_json::Value;

/// Incidents kept for a store that keeps failing (the oldest are dropped, and counted).
pub const MAX_BUFFERED: usize = 10_000;

#[derive(Debug)]
pub struct IncidentStore {
    store: Store,
    rows: Vec<Value>,
    sequence: u64,
}

impl IncidentStore {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            rows: Vec::new(),
            sequence: 0,
        }
    }

    /// Buffers a resolved incident ([`kplane_model::incidents::Incident::detail`]); how many
    /// older ones were dropped to make room.
    pub fn add(&mut self, detail: Value) -> usize {
        self.rows.push(detail);
        let over = self.rows.len().saturating_sub(MAX_BUFFERED);
        self.rows.drain(..over);
        over
    }

    /// Writes what is buffered, one file per hour of the incidents' starts; on an error the
    /// rows stay buffered and are tried again.
    pub fn flush(&mut self) -> std::io::Result<usize> {
        const HOUR_NS: i64 = 3_600_000_000_000;
        let start = |r: &Value| r["start_ns"].as_i64().unwrap_or(0);
        self.rows.sort_by_key(start);
        let mut written = 0;
        while written < self.rows.len() {
            let first = start(&self.rows[written]);
            let n = self.rows[written..]
                .iter()
                .take_while(|r| start(r).div_euclid(HOUR_NS) == first.div_euclid(HOUR_NS))
                .count();
            let batch =
                incidents_batch(&self.rows[written..written + n]).map_err(std::io::Error::other)?;
            self.sequence += 1;
            let name = format!(
                "api-{first}-{}-{}.parquet",
                std::process::id(),
                self.sequence
            );
            let key = format!("{}/{name}", partition_key(INCIDENTS, first));
            if let Err(e) = self.store.write_parquet(&key, &[batch]) {
                self.rows.drain(..written);
                return Err(std::io::Error::other(e));
            }
            written += n;
        }
        self.rows.clear();
        Ok(written)
    }
}
