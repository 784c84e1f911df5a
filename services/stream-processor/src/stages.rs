//! Where a processor's time goes: cumulative wall time per stage, per message and per window
//! (not per record: two clock reads per batch cost nothing measurable). `kplane bench
//! processor` prints it.

use std::fmt;
use std::time::{Duration, Instant};

use crate::analytics::Table;

/// Cumulative time per stage.
#[derive(Clone, Debug, Default)]
pub struct StageTimes {
    /// Reshaping bus batches into the `reports` / `hops` / `events` tables.
    pub frame: Duration,
    /// The immediate-event detectors.
    pub detect: Duration,
    /// Assigning rows to panes, and closing windows.
    pub panes: Duration,
    /// Each window query, in [`Table::ALL`] order.
    pub queries: [Duration; Table::ALL.len()],
    /// Writing Parquet files and the checkpoint.
    pub store: Duration,
}

impl StageTimes {
    /// Adds the time since `started` to `stage` and returns now (the next stage's start).
    pub fn lap(stage: &mut Duration, started: Instant) -> Instant {
        let now = Instant::now();
        *stage += now - started;
        now
    }
}

impl fmt::Display for StageTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |d: Duration| d.as_secs_f64();
        write!(
            f,
            "frame {:.2} s, detectors {:.2} s, panes {:.2} s, store {:.2} s; queries:",
            s(self.frame),
            s(self.detect),
            s(self.panes),
            s(self.store)
        )?;
        for t in Table::ALL {
            let d = self.queries[t as usize];
            if !d.is_zero() {
                write!(f, " {} {:.2} s", t.name(), s(d))?;
            }
        }
        Ok(())
    }
}
