//! Answers as rows: a query planned again while compaction removed a file it listed, and
//! Arrow batches as JSON objects (the fixed routes and the query workers).

use std::time::Duration;

use arrow_array::RecordBatch;
use kplane_store::query::is_compacted_away;
use serde_json::Value;

use crate::error::ApiError;

/// Runs `query` (plan and collect) again while it fails on a file the processor's compaction
/// removed after the plan listed it: planning again lists the store afresh. Compaction
/// deletes the merged files one by one, so the next listing waits a moment.
pub async fn replanned_while_compacted<T, E, F, Fut>(mut query: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut retries = 0;
    loop {
        match query().await {
            Err(e) if retries < 10 && is_compacted_away(&e.to_string()) => {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            done => return done,
        }
    }
}

/// Rows as JSON objects.
pub fn to_json(batches: &[RecordBatch]) -> Result<Vec<Value>, ApiError> {
    let mut buf = Vec::new();
    {
        let mut w = datafusion::arrow::json::ArrayWriter::new(&mut buf);
        for b in batches {
            w.write(b)?;
        }
        w.finish()?;
    }
    if buf.is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_slice(&buf) {
        Ok(Value::Array(rows)) => Ok(rows),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ApiError::Internal(e.to_string())),
    }
}
