//! # kplane-store
//!
//! The analytics store every service writes and reads: Parquet files under
//! `tables/<table>/date=YYYY-MM-DD/hour=HH/` (hive-style partitions, UTC) of a local
//! directory or of a bucket on an S3-compatible object store, readable by any Parquet engine.
//!
//! * [`Store`]: where the store lives, and every write, listing, read and removal.
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

mod backend;
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

pub use backend::{Listed, Readable, Staged, Store};
pub use error::{Result, StoreError};

/// An S3-compatible server for the store's own tests ([`kplane_testkit::s3`]).
#[cfg(test)]
mod s3_test {
    pub struct Server(kplane_testkit::s3::S3);

    impl Server {
        pub fn start() -> Option<Self> {
            kplane_testkit::s3::S3::start().map(Self)
        }

        /// A store in a fresh bucket.
        pub fn store(&self, bucket: &str) -> crate::Store {
            let location = self.0.bucket(bucket);
            crate::Store::open_with(std::path::Path::new(&location), &self.0.options())
                .expect("a store on moto")
        }
    }
}
