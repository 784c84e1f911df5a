//! Window results on disk: per partition, `partition-<n>.jsonl`, one line per commit holding
//! the closed windows *and* the checkpoint, written and fsynced in one `write` — a torn last
//! line (a crash mid-write) is ignored by readers and by recovery alike.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::windows::{Checkpoint, WindowCount};

/// One line of a partition file.
#[derive(Debug, Deserialize, Serialize)]
pub struct Commit {
    pub partition: u32,
    /// When the line was written (ns since the Unix epoch).
    #[serde(default)]
    pub written_ns: i64,
    pub windows: Vec<WindowCount>,
    pub checkpoint: Checkpoint,
}

pub fn partition_path(dir: &Path, partition: u32) -> PathBuf {
    dir.join(format!("partition-{partition}.jsonl"))
}

/// Every complete commit in `dir`'s partition files (what a reader of the results sees).
pub fn read_all(dir: &Path) -> std::io::Result<Vec<Commit>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            out.extend(read_commits(&path)?);
        }
    }
    Ok(out)
}

fn read_commits(path: &Path) -> std::io::Result<Vec<Commit>> {
    Ok(parse_commits(&read_or_empty(path)?))
}

/// The file's bytes; nothing if it does not exist yet.
fn read_or_empty(path: &Path) -> std::io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        r => r,
    }
}

fn parse_commits(text: &[u8]) -> Vec<Commit> {
    text.split(|&b| b == b'\n')
        // A line that does not parse can only be the torn last one.
        .filter_map(|line| serde_json::from_slice::<Commit>(line).ok())
        .collect()
}

/// Appends commits for one partition.
#[derive(Debug)]
pub struct PartitionStore {
    partition: u32,
    file: File,
}

impl PartitionStore {
    /// Opens the partition's file and returns it with the last durable checkpoint.
    pub fn open(dir: &Path, partition: u32) -> std::io::Result<(Self, Checkpoint)> {
        let path = partition_path(dir, partition);
        let text = read_or_empty(&path)?;
        let checkpoint = parse_commits(&text)
            .last()
            .map(|c| c.checkpoint)
            .unwrap_or_default();
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        // Terminate a torn last line so the next commit starts on a line of its own.
        if text.last().is_some_and(|&b| b != b'\n') {
            file.write_all(b"\n")?;
        }
        Ok((Self { partition, file }, checkpoint))
    }

    /// Writes closed windows and the checkpoint as one line, durably.
    pub fn commit(
        &mut self,
        windows: Vec<WindowCount>,
        checkpoint: Checkpoint,
    ) -> std::io::Result<()> {
        let written_ns = kplane_model::unix_time_ns() as i64;
        let mut line = serde_json::to_vec(&Commit {
            partition: self.partition,
            written_ns,
            windows,
            checkpoint,
        })
        .map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_ignored_and_the_last_checkpoint_restored() {
        let dir = std::env::temp_dir().join(format!("kplane-sp-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (mut s, cp) = PartitionStore::open(&dir, 3).unwrap();
        assert_eq!(cp, Checkpoint::default());
        let cp1 = Checkpoint {
            through_offset: 9,
            read_until: 12,
            emitted_until_ns: 5,
        };
        s.commit(Vec::new(), cp1).unwrap();
        drop(s);
        let mut f = OpenOptions::new()
            .append(true)
            .open(partition_path(&dir, 3))
            .unwrap();
        f.write_all(b"{\"partition\":3,\"windows\":[{\"sta")
            .unwrap();
        let (mut s, cp) = PartitionStore::open(&dir, 3).unwrap();
        assert_eq!(cp, cp1);
        s.commit(
            Vec::new(),
            Checkpoint {
                through_offset: 20,
                ..cp1
            },
        )
        .unwrap();
        let all = read_all(&dir).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].checkpoint.through_offset, 20);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
