//! Where the store lives: a local directory, or a bucket (and prefix) of an S3-compatible
//! object store (`s3://bucket/prefix`). Everything that writes, lists, reads or removes
//! store files goes through [`Store`], by *key*: a path relative to the store's root with
//! `/` separators (`tables/flows/date=…/hour=…/<name>.parquet`).
//!
//! * Local: files are staged in `<root>/_staging/`, fsynced, renamed into place, and their
//!   directory fsynced ([`crate::writer`]).
//! * Object store: files are staged in the system's temporary directory and uploaded with
//!   one PUT each; an object appears whole or not at all, so the names' commit rule
//!   ([`crate::layout::superseded`]) holds unchanged. Credentials and endpoint come from the
//!   standard `AWS_*` environment variables (`docs/deploy.md`). Its HTTP traffic runs on one
//!   I/O runtime of the process's own, so the same [`Store`] is safe to use from synchronous
//!   threads and from any async runtime.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow_array::RecordBatch;
use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{ChunkReader, Length};

use crate::error::{Result, StoreError};

/// A store: cheap to clone, shared by the threads of a service.
#[derive(Clone, Debug)]
pub struct Store(Arc<Backend>);

#[derive(Debug)]
enum Backend {
    Local(PathBuf),
    Object(Bucket),
}

/// A bucket and prefix of an object store.
#[derive(Debug)]
struct Bucket {
    /// `s3://bucket`: what DataFusion registers the store under.
    bucket_url: String,
    /// The store's root in the bucket (no leading or trailing `/`; may be empty).
    prefix: String,
    objects: Arc<dyn ObjectStore>,
    /// Local directory files are written to before their upload.
    staging: PathBuf,
}

/// A store file listed: its key and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub bytes: u64,
}

impl Listed {
    /// The file's name (the key's last segment).
    pub fn name(&self) -> &str {
        crate::layout::dir_and_name(&self.key).1
    }

    /// The key's directory (everything before the last `/`).
    pub fn dir(&self) -> &str {
        crate::layout::dir_and_name(&self.key).0
    }
}

/// A file written and fsynced to local staging, not yet published.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
}

impl Staged {
    pub fn bytes(&self) -> Result<u64> {
        Ok(std::fs::metadata(&self.path)?.len())
    }
}

/// The process's runtime for object-store I/O: requests run here whichever thread or
/// runtime waits for them. Never dropped, so pooled connections stay valid.
fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kplane-store-io")
            .enable_all()
            .build()
            .expect("the store's I/O runtime starts")
    })
}

/// Runs `f` on the I/O runtime and waits for it (from a plain thread or inside another
/// runtime, as synchronous file I/O would).
fn wait<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> T {
    let handle = io_runtime().spawn(f);
    block_on(handle).expect("a store request does not panic")
}

/// Waits for a future on this thread, parking it in between (the work itself runs on the
/// I/O runtime).
fn block_on<F: Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Thread(std::thread::Thread);
    impl Wake for Thread {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Thread(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

impl Store {
    /// A store in a local directory.
    pub fn local(root: impl Into<PathBuf>) -> Self {
        Self(Arc::new(Backend::Local(root.into())))
    }

    /// The store at `location`: `s3://bucket[/prefix]` for an S3-compatible object store
    /// (configured by the `AWS_*` environment variables), anything else a local directory.
    pub fn open(location: &Path) -> Result<Self> {
        Self::open_with(location, &[])
    }

    /// [`Store::open`], with object-store settings (`aws_endpoint`, `aws_region`, …: the
    /// environment variables' names in lower case) over the environment's.
    pub fn open_with(location: &Path, options: &[(String, String)]) -> Result<Self> {
        let Some(url) = location.to_str().and_then(|s| s.strip_prefix("s3://")) else {
            return Ok(Self::local(location));
        };
        let (bucket, prefix) = url.split_once('/').unwrap_or((url, ""));
        if bucket.is_empty() {
            return Err(StoreError::Config(format!(
                "{}: no bucket (expected s3://bucket/prefix)",
                location.display()
            )));
        }
        let mut builder = object_store::aws::AmazonS3Builder::from_env();
        for (key, value) in options {
            let key = key
                .parse()
                .map_err(|e| StoreError::Config(format!("object store setting {key}: {e}")))?;
            builder = builder.with_config(key, value);
        }
        let objects = builder
            .with_bucket_name(bucket)
            .with_http_connector(object_store::client::SpawnedReqwestConnector::new(
                io_runtime().handle().clone(),
            ))
            .build()
            .map_err(|e| StoreError::Config(format!("{}: {e}", location.display())))?;
        Ok(Self(Arc::new(Backend::Object(Bucket {
            bucket_url: format!("s3://{bucket}"),
            prefix: prefix.trim_matches('/').to_string(),
            objects: Arc::new(objects),
            staging: std::env::temp_dir().join("kplane-staging"),
        }))))
    }

    /// Where it is, as given to [`Store::open`].
    pub fn location(&self) -> String {
        match &*self.0 {
            Backend::Local(root) => root.display().to_string(),
            Backend::Object(b) if b.prefix.is_empty() => b.bucket_url.clone(),
            Backend::Object(b) => format!("{}/{}", b.bucket_url, b.prefix),
        }
    }

    /// Its directory, for a local store.
    pub fn local_root(&self) -> Option<&Path> {
        match &*self.0 {
            Backend::Local(root) => Some(root),
            Backend::Object(_) => None,
        }
    }

    fn staging_dir(&self) -> PathBuf {
        match &*self.0 {
            Backend::Local(root) => root.join("_staging"),
            Backend::Object(b) => b.staging.clone(),
        }
    }

    /// `bytes` written and fsynced to a fresh staging file.
    pub fn stage_bytes(&self, bytes: &[u8]) -> Result<Staged> {
        let path = crate::writer::staging_path(&self.staging_dir(), "tmp")?;
        let mut file = File::create(&path)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(Staged { path })
    }

    /// `batches` written as one Parquet staging file (zstd) and fsynced; `None` without
    /// batches.
    pub fn stage_parquet(&self, batches: &[RecordBatch]) -> Result<Option<Staged>> {
        let Some(first) = batches.first() else {
            return Ok(None);
        };
        let path = crate::writer::staging_path(&self.staging_dir(), "parquet")?;
        let mut w = crate::writer::parquet_writer(File::create(&path)?, first.schema())?;
        for b in batches {
            w.write(b)?;
        }
        w.into_inner()?.sync_all()?;
        Ok(Some(Staged { path }))
    }

    /// A fresh staging file to write into, published later with [`Store::publish_all`].
    pub fn stage_file(&self, extension: &str) -> Result<(File, Staged)> {
        let path = crate::writer::staging_path(&self.staging_dir(), extension)?;
        Ok((File::create(&path)?, Staged { path }))
    }

    /// Publishes staged files under their keys: local files are renamed into place and each
    /// directory they went to is fsynced once; on an object store each is uploaded (one
    /// PUT) and its staging file removed.
    pub fn publish_all(&self, staged: Vec<(Staged, String)>) -> Result<()> {
        match &*self.0 {
            Backend::Local(root) => {
                let moves: Vec<(PathBuf, PathBuf)> = staged
                    .into_iter()
                    .map(|(s, key)| (s.path, root.join(key)))
                    .collect();
                Ok(crate::writer::publish_all(&moves)?)
            }
            Backend::Object(b) => {
                for (s, key) in staged {
                    let bytes = Bytes::from(std::fs::read(&s.path)?);
                    let (objects, at) = (b.objects.clone(), b.object_path(&key));
                    wait(async move { objects.put(&at, bytes.into()).await })?;
                    std::fs::remove_file(&s.path)?;
                }
                Ok(())
            }
        }
    }

    /// Writes `batches` as one Parquet file at `key`, atomically and durably; nothing
    /// without batches.
    pub fn write_parquet(&self, key: &str, batches: &[RecordBatch]) -> Result<()> {
        if let Some(staged) = self.stage_parquet(batches)? {
            self.publish_all(vec![(staged, key.to_string())])?;
        }
        Ok(())
    }

    /// Writes `bytes` at `key` unless something is there already; whether it wrote. Of
    /// writers racing, exactly one wins (a hard link locally, a conditional PUT on an object
    /// store).
    pub fn put_new(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        match &*self.0 {
            Backend::Local(root) => {
                let staged = self.stage_bytes(bytes)?;
                let path = root.join(key);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let linked = std::fs::hard_link(&staged.path, &path);
                std::fs::remove_file(&staged.path)?;
                match linked {
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(e.into()),
                    Ok(()) => {
                        sync_dir(path.parent().unwrap_or(root))?;
                        Ok(true)
                    }
                }
            }
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(key));
                let bytes = Bytes::copy_from_slice(bytes);
                let opts = PutOptions::from(PutMode::Create);
                match wait(async move { objects.put_opts(&at, bytes.into(), opts).await }) {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Appends a line to the log at `key` and makes it durable. An object store has no
    /// appends: there the object is replaced by the line, so the log holds its last line.
    pub fn append_line(&self, key: &str, line: &[u8]) -> Result<()> {
        match &*self.0 {
            Backend::Local(root) => {
                let path = root.join(key);
                let created = !path.exists();
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let mut log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)?;
                log.write_all(line)?;
                log.sync_data()?;
                if created {
                    sync_dir(path.parent().unwrap_or(root))?;
                }
                Ok(())
            }
            Backend::Object(_) => {
                let staged = self.stage_bytes(line)?;
                self.publish_all(vec![(staged, key.to_string())])
            }
        }
    }

    /// Cuts the file at `key` to its first `len` bytes (a torn last line of a log).
    pub fn truncate(&self, key: &str, len: u64) -> Result<()> {
        match &*self.0 {
            Backend::Local(root) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(root.join(key))?;
                file.set_len(len)?;
                Ok(file.sync_all()?)
            }
            Backend::Object(_) => {
                let mut bytes = self.get(key)?.unwrap_or_default();
                bytes.truncate(usize::try_from(len).unwrap_or(usize::MAX));
                let staged = self.stage_bytes(&bytes)?;
                self.publish_all(vec![(staged, key.to_string())])
            }
        }
    }

    /// The whole file at `key`; `None` when there is none.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match &*self.0 {
            Backend::Local(root) => match std::fs::read(root.join(key)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                r => Ok(Some(r?)),
            },
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(key));
                let got = wait(async move {
                    match objects.get(&at).await {
                        Ok(r) => r.bytes().await.map(Some),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(e),
                    }
                })?;
                Ok(got.map(|b| b.to_vec()))
            }
        }
    }

    /// Whether a file is at `key`.
    pub fn exists(&self, key: &str) -> Result<bool> {
        match &*self.0 {
            Backend::Local(root) => Ok(root.join(key).is_file()),
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(key));
                match wait(async move { objects.head(&at).await }) {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::NotFound { .. }) => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// A Parquet file's reader: streamed from a local file, or the object fetched whole.
    pub fn parquet(&self, key: &str) -> Result<ParquetRecordBatchReaderBuilder<Readable>> {
        let readable = match &*self.0 {
            Backend::Local(root) => Readable::File(File::open(root.join(key))?),
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(key));
                Readable::Bytes(wait(async move { objects.get(&at).await?.bytes().await })?)
            }
        };
        Ok(ParquetRecordBatchReaderBuilder::try_new(readable)?)
    }

    /// A whole Parquet file.
    pub fn read_parquet(&self, key: &str) -> Result<Vec<RecordBatch>> {
        Ok(self.parquet(key)?.build()?.collect::<Result<Vec<_>, _>>()?)
    }

    /// Every file under the directory `prefix` (recursively), in no particular order;
    /// nothing when there is none. Local staging files are not store files and are left
    /// out.
    pub fn list(&self, prefix: &str) -> Result<Vec<Listed>> {
        let prefix = prefix.trim_matches('/');
        match &*self.0 {
            Backend::Local(root) => {
                let mut out = Vec::new();
                list_local(root, prefix, &mut out)?;
                Ok(out)
            }
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(prefix));
                let listed =
                    wait(async move { objects.list(Some(&at)).try_collect::<Vec<_>>().await })?;
                Ok(listed
                    .into_iter()
                    .filter_map(|o| {
                        Some(Listed {
                            key: b.key_of(o.location.as_ref())?.to_string(),
                            bytes: o.size,
                        })
                    })
                    .collect())
            }
        }
    }

    /// The current Parquet files under `prefix` (recursively): those a merge has replaced
    /// are left out ([`crate::layout::superseded`], judged per directory).
    pub fn current_parquet(&self, prefix: &str) -> Result<Vec<Listed>> {
        let files: Vec<Listed> = self
            .list(prefix)?
            .into_iter()
            .filter(|f| f.name().ends_with(".parquet"))
            .collect();
        Ok(crate::layout::current(files, |f| &f.key))
    }

    /// Where another engine reads `table`: the URLs of its current Parquet files (a local
    /// store's as absolute paths, an object store's as `s3://bucket/key`), in key order. An
    /// engine reading these files, and no others, sees every row once, in the middle of a
    /// merge too. What `kplane files` prints.
    pub fn table_files(&self, table: &str) -> Result<Vec<String>> {
        self.current_parquet(&crate::layout::table_key(table))?
            .iter()
            .map(|f| self.url_of(&f.key))
            .collect()
    }

    /// The names of the directories directly under `prefix` (none when it does not exist).
    pub fn subdirs(&self, prefix: &str) -> Result<Vec<String>> {
        let prefix = prefix.trim_matches('/');
        match &*self.0 {
            Backend::Local(root) => {
                let entries = match std::fs::read_dir(root.join(prefix)) {
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
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(prefix));
                let listed = wait(async move { objects.list_with_delimiter(Some(&at)).await })?;
                Ok(listed
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(str::to_string))
                    .collect())
            }
        }
    }

    /// Removes the file at `key` (already gone is fine).
    pub fn delete(&self, key: &str) -> Result<()> {
        match &*self.0 {
            Backend::Local(root) => match std::fs::remove_file(root.join(key)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                r => Ok(r?),
            },
            Backend::Object(b) => {
                let (objects, at) = (b.objects.clone(), b.object_path(key));
                match wait(async move { objects.delete(&at).await }) {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Makes removals in the directory `prefix` durable (local), and removes it when it is
    /// empty. Object stores have no directories: nothing to do.
    pub fn settle_dir(&self, prefix: &str, remove_if_empty: bool) -> Result<()> {
        if let Backend::Local(root) = &*self.0 {
            let dir = root.join(prefix);
            if remove_if_empty && std::fs::remove_dir(&dir).is_ok() {
                return Ok(());
            }
            if dir.is_dir() {
                sync_dir(&dir)?;
            }
        }
        Ok(())
    }

    /// Where DataFusion reads the file at `key` (through the store view
    /// [`crate::query::use_store_view`] registers).
    pub fn url_of(&self, key: &str) -> Result<String> {
        match &*self.0 {
            Backend::Local(root) => Ok(root.canonicalize()?.join(key).display().to_string()),
            Backend::Object(b) => Ok(format!("{}/{}", b.bucket_url, b.object_path(key))),
        }
    }

    /// Where DataFusion lists the directory at `key` (ends in `/`; a local directory is
    /// created if missing, so that listing it finds nothing rather than failing).
    pub fn dir_url(&self, key: &str) -> Result<String> {
        if let Backend::Local(root) = &*self.0 {
            std::fs::create_dir_all(root.join(key))?;
        }
        Ok(format!("{}/", self.url_of(key)?))
    }

    /// The object store readers list and read through, and the URL it is registered under
    /// (`file://` for a local store).
    #[cfg(feature = "query")]
    pub(crate) fn objects(&self) -> (String, Arc<dyn ObjectStore>) {
        match &*self.0 {
            Backend::Local(_) => (
                "file://".to_string(),
                Arc::new(object_store::local::LocalFileSystem::new()),
            ),
            Backend::Object(b) => (b.bucket_url.clone(), b.objects.clone()),
        }
    }
}

impl Bucket {
    fn object_path(&self, key: &str) -> ObjectPath {
        let key = key.trim_matches('/');
        if self.prefix.is_empty() {
            ObjectPath::from(key)
        } else if key.is_empty() {
            ObjectPath::from(self.prefix.as_str())
        } else {
            ObjectPath::from(format!("{}/{key}", self.prefix))
        }
    }

    /// The key of an object's location (`None` outside the prefix).
    fn key_of<'a>(&self, location: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            return Some(location);
        }
        location
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix('/')
    }
}

fn list_local(root: &Path, prefix: &str, out: &mut Vec<Listed>) -> Result<()> {
    let dir = root.join(prefix);
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        r => r?,
    };
    for e in entries {
        let e = e?;
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let kind = e.file_type()?;
        if kind.is_dir() {
            if key != "_staging" {
                list_local(root, &key, out)?;
            }
        } else {
            // A file removed between the listing and here (a merge, another writer's
            // retention) is simply not listed.
            match e.metadata() {
                Ok(m) => out.push(Listed {
                    key,
                    bytes: m.len(),
                }),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
    Ok(())
}

/// fsyncs a directory: renames and removals in it survive a power cut.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A Parquet file's bytes: a local file, or an object fetched whole.
#[derive(Debug)]
pub enum Readable {
    File(File),
    Bytes(Bytes),
}

impl Length for Readable {
    fn len(&self) -> u64 {
        match self {
            Self::File(f) => f.len(),
            Self::Bytes(b) => Length::len(b),
        }
    }
}

impl ChunkReader for Readable {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            Self::File(f) => Box::new(f.get_read(start)?),
            Self::Bytes(b) => Box::new(b.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            Self::File(f) => f.get_bytes(start, length),
            Self::Bytes(b) => b.get_bytes(start, length),
        }
    }
}
