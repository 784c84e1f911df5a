//! # kplane-store
//!
//! The analytics store every service writes and reads: Parquet files under
//! `<data-dir>/tables/<table>/date=YYYY-MM-DD/hour=HH/` (hive-style partitions, UTC), readable
//! by any Parquet engine.
//!
//! * [`layout`]: where files go and what their names say.
//! * [`writer`]: the one durable writer (staging, fsync, rename, fsync of the directory).
//! * [`compaction`]: tiered merges that readers never see twice.
//! * [`retention`]: how long each table's hour partitions are kept.
//! * [`rollup`] (feature `query`): complete hours summed into 1-minute and 1-hour windows.
//! * [`tables`]: every table's schema, the contract between writers and readers.
//! * [`query`] (feature `query`): a DataFusion context over the store with kplane's SQL
//!   functions (`ip_text`, `ip_in`, `distribution`, `any_value`).
//!
//! The stream processor keeps its checkpoint logic (which windows a lane has committed) on
//! top of this crate; see `docs/stream-processor.md`.

pub mod compaction;
mod error;
pub mod layout;
#[cfg(feature = "query")]
pub mod query;
pub mod retention;
#[cfg(feature = "query")]
pub mod rollup;
pub mod tables;
pub mod writer;

pub use error::{Result, StoreError};
