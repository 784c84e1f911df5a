//! Helpers shared by the tests that drive real processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kplane_testkit::{ChildGuard, free_port, wait_ready};

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

/// `kplane <args>` as docker-compose.yml runs it: on Kafka at `brokers`, whose topics
/// `kplane topics create` made beforehand (compose's `kafka-init`; the services only check
/// them), without API auth, logging warnings only.
pub fn compose_kplane(args: &[&str], brokers: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kplane"));
    c.args(args)
        .stdout(Stdio::null())
        .env("RUST_LOG", "warn")
        .env("KPLANE__BUS__KIND", "kafka")
        .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", brokers)
        .env("KPLANE__BUS__KAFKA__CREATE_TOPICS", "false")
        .env("KPLANE__HTTP__NO_AUTH", "true");
    c
}

/// Starts a service with its admin listener on a free port (as compose's `--admin
/// 0.0.0.0:91xx`) and waits until it is ready; the child and its admin port.
pub fn start_service(mut c: Command) -> (ChildGuard, u16) {
    let admin = free_port();
    c.args(["--admin", &format!("127.0.0.1:{admin}")]);
    let child = ChildGuard::from(c.spawn().unwrap());
    wait_ready(admin, Duration::from_secs(60));
    (child, admin)
}

/// Configures `kplane intent-api` (`c`) as compose does: listening on `api`, reading the store
/// at `store` (a directory or an `s3://` URL), its knowledge and intents state under `data`.
pub fn configure_api(
    c: &mut Command,
    api: std::net::SocketAddr,
    store: impl AsRef<std::ffi::OsStr>,
    data: &Path,
) {
    c.env("KPLANE__INTENT_API__LISTEN", api.to_string())
        .env("KPLANE__INTENT_API__STORE_DIR", store)
        .env("KPLANE__INTENT_API__KNOWLEDGE_DIR", data.join("knowledge"))
        .env(
            "KPLANE__INTENT_API__INTENTS__STATE_DIR",
            data.join("intents"),
        );
}

/// The `kplane` arguments of compose's demo data plane: the emulator in real time, every
/// scenario, for 10 minutes, reporting to the collector on UDP port `udp`.
pub fn demo_emulator_args(udp: u16) -> Vec<String> {
    let collector = format!("127.0.0.1:{udp}");
    [
        "emulate",
        "--realtime",
        "--duration",
        "10m",
        "--scenario",
        "all",
        "--collector",
    ]
    .into_iter()
    .map(str::to_string)
    .chain([collector])
    .collect()
}
