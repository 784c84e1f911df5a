//! Helpers shared by the tests that drive real processes.

use std::path::{Path, PathBuf};
use std::process::Command;

use kplane_testkit::free_port;

/// A tansu broker on a port of its own (`scripts/kafka-broker.sh`), stopped on drop: a test
/// whose consumers read from the earliest offset sees no other test's messages.
pub struct Broker {
    port: u16,
    pub addr: String,
}

impl Broker {
    pub fn start() -> Self {
        let port = free_port();
        let out = Command::new(root().join("scripts/kafka-broker.sh"))
            .arg("start")
            .env("KPLANE_KAFKA_PORT", port.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "broker: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            port,
            addr: format!("127.0.0.1:{port}"),
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/kafka-broker.sh"))
            .arg("stop")
            .env("KPLANE_KAFKA_PORT", self.port.to_string())
            .status();
    }
}

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The latest event time every one of `partitions` report lanes of the store at `data` has
/// emitted through (`None` while any lane has not committed).
pub fn written_through(data: &Path, partitions: u32) -> Option<i64> {
    (0..partitions)
        .map(|p| {
            let store = kplane_store::Store::local(data);
            kplane_stream_processor::store::lane_log(&store, &format!("reports-p{p}"))
                .ok()?
                .commits
                .last()
                .map(|c| c.checkpoint.emitted_until_ns)
        })
        .min()
        .flatten()
}
