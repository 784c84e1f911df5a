//! What readers of the store see: its files (local or in a bucket), less those a merge has
//! replaced ([`crate::layout::current`]). Compaction publishes a merged file and deletes the
//! sources later; with this view a query listing the directory in between reads each row
//! once. Registered for the store's URL (`file://`, `s3://bucket`) in every context
//! [`crate::query::register_store`] builds.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};

/// The store's files as its readers see them.
#[derive(Debug)]
pub struct StoreView {
    files: Arc<dyn ObjectStore>,
}

impl StoreView {
    pub fn new(files: Arc<dyn ObjectStore>) -> Self {
        Self { files }
    }
}

impl fmt::Display for StoreView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreView({})", self.files)
    }
}

/// `objects` less those a merge in the same directory has replaced.
fn current(objects: Vec<ObjectMeta>) -> Vec<ObjectMeta> {
    crate::layout::current(objects, |o| o.location.as_ref())
}

#[async_trait]
impl ObjectStore for StoreView {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.files.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.files.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.files.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<bytes::Bytes>> {
        self.files.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.files.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        // A directory's names are judged together, so the listing is collected first.
        let listing = self.files.list(prefix);
        stream::once(async move { listing.try_collect::<Vec<_>>().await })
            .map_ok(|objects| stream::iter(current(objects).into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let mut result = self.files.list_with_delimiter(prefix).await?;
        result.objects = current(result.objects);
        Ok(result)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.files.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(path),
            last_modified: Default::default(),
            size: 1,
            e_tag: None,
            version: None,
        }
    }

    #[test]
    fn each_directory_is_judged_on_its_own() {
        let listed = vec![
            meta("t/hour=01/reports-p0-w10.parquet"),
            meta("t/hour=02/reports-p0-w10.parquet"),
            meta("t/hour=01/reports-p0-c10_20.l1.parquet"),
            meta("t/hour=01/reports-p0-w30.parquet"),
        ];
        let kept: Vec<String> = current(listed)
            .iter()
            .map(|o| o.location.to_string())
            .collect();
        assert_eq!(
            kept,
            [
                "t/hour=01/reports-p0-c10_20.l1.parquet",
                "t/hour=01/reports-p0-w30.parquet",
                "t/hour=02/reports-p0-w10.parquet",
            ]
        );
    }
}
