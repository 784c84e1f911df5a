//! Helpers shared by the processor tests that drive real processes.

use std::path::Path;

/// The latest event time every one of `partitions` report lanes of the store at `data` has
/// emitted through (`None` while any lane has not committed).
pub fn written_through(data: &Path, partitions: u32) -> Option<i64> {
    (0..partitions)
        .map(|p| {
            let log = data.join(format!("checkpoints/reports-p{p}.jsonl"));
            kplane_stream_processor::store::read_commits(&log)
                .ok()?
                .commits
                .last()
                .map(|c| c.checkpoint.emitted_until_ns)
        })
        .min()
        .flatten()
}
