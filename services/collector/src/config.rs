//! `[collector]` configuration. Every key is documented in docs/collector.md and
//! config/kplane.example.toml.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kplane_runtime::Validate;
use kplane_wire::{DecodeOptions, DscpMatch};
use serde::{Deserialize, Serialize};

use crate::detect::{EventConfig, StateConfig};
use crate::input::af_xdp::AfXdpConfig;
use crate::watchlist::{Rule, Watchlist};

/// How batches are encoded on the bus.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// One Arrow IPC stream (schema + one record batch) per message.
    #[default]
    Arrow,
    /// One JSON object per line.
    Json,
}

/// Where live reports are taken from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Input {
    /// UDP sockets on `listen` (recvmmsg).
    #[default]
    Udp,
    /// AF_XDP sockets on `af-xdp.interface` for the ports of `listen`; the UDP sockets stay
    /// open for what the XDP program passes to the kernel (fragments, IP options, frames
    /// over 3840 bytes).
    AfXdp,
}

/// pcap replay pace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Speed {
    /// Keep the capture's inter-packet gaps.
    Recorded,
    /// As fast as possible.
    #[default]
    Max,
}

/// `[collector.hot-sources]`: sources that would overload one partition are spread over all
/// of them by flow (see `partition.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct HotSourceConfig {
    /// A source with at least this share of a collector thread's records in a second is hot:
    /// its records are keyed by flow instead of by source. The default, 0.25, is twice the
    /// fair share of one of 8 partitions: only a source that would overload a partition is
    /// spread. 0 turns spreading off.
    pub share: f64,
    /// A hot source stays hot this long after its share was last above `share`, so its
    /// flows do not move back and forth.
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
}

impl Default for HotSourceConfig {
    fn default() -> Self {
        Self {
            share: 0.25,
            hold: Duration::from_secs(60),
        }
    }
}

/// `[collector.loss]`
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LossConfig {
    /// Reorder window in sequence numbers: a late report within it fills its gap.
    pub reorder_window: u64,
    /// A sequence further back than this is a counter reset (exporter restart).
    pub reset_distance: u64,
    /// Longest a gap may stay open before its reports are counted lost.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Distinct `node` label values on `kplane_collector_reports_lost_total`; the rest are
    /// counted under `node="other"`.
    pub node_label_limit: usize,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            reorder_window: 64,
            reset_distance: 65_536,
            max_wait: Duration::from_secs(1),
            node_label_limit: 64,
        }
    }
}

/// `[collector.int-label]`: INT-label's database (int-label-distributed-labeling Algo. 4)
/// and its coverage rate.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct IntLabelConfig {
    /// The telemetry interval: coverage is the share of known ports updated in each.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// A port is known (counts in coverage's denominator) for this long after its last
    /// update: reports carry no port counters, so "ports with traffic" is "ports heard from
    /// lately".
    #[serde(with = "humantime_serde")]
    pub known_for: Duration,
}

impl Default for IntLabelConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(100),
            known_for: Duration::from_secs(10),
        }
    }
}

/// `[collector.decode]`: how embedded INT is recognised inside reports' inner packets.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DecodeConfig {
    /// L4 destination ports announcing INT after TCP/UDP.
    pub int_ports: Vec<u16>,
    /// DSCP values announcing INT after TCP/UDP.
    pub int_dscp: Vec<u8>,
    /// The KDN paper's INT port; 0 disables.
    pub kdn_port: u16,
    pub geneve_class: u16,
    pub gre_protocol: u16,
    pub int_label_protocol: u8,
    pub int_label_max_hop: u8,
    pub gpint_protocol: u8,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        let d = DecodeOptions::default();
        Self {
            int_ports: d.int_l4_ports,
            int_dscp: d.int_dscp.iter().map(|m| m.value).collect(),
            kdn_port: 0,
            geneve_class: d.geneve_int_class,
            gre_protocol: d.gre_int_protocol,
            int_label_protocol: d.int_label_protocol,
            int_label_max_hop: d.int_label_max_hop,
            gpint_protocol: d.gpint_protocol,
        }
    }
}

impl DecodeConfig {
    pub fn options(&self) -> DecodeOptions {
        DecodeOptions {
            int_l4_ports: self.int_ports.clone(),
            int_dscp: self
                .int_dscp
                .iter()
                .map(|&value| DscpMatch { value, mask: 0x3F })
                .collect(),
            kdn_port: (self.kdn_port != 0).then_some(self.kdn_port),
            geneve_int_class: self.geneve_class,
            gre_int_protocol: self.gre_protocol,
            int_label_protocol: self.int_label_protocol,
            int_label_max_hop: self.int_label_max_hop,
            gpint_protocol: self.gpint_protocol,
            ..DecodeOptions::default()
        }
    }
}

/// `[collector]`
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Admin listener: /metrics, /healthz, /readyz, /v1/watchlist.
    pub admin: SocketAddr,
    /// The document's `[http]` section (tokens, limits) for the admin listener.
    #[serde(skip)]
    pub http: kplane_runtime::HttpConfig,
    /// UDP listeners for telemetry reports.
    pub listen: Vec<SocketAddr>,
    /// `udp` or `af-xdp`.
    pub input: Input,
    pub af_xdp: AfXdpConfig,
    /// SO_REUSEPORT sockets per listener, each with its own receive thread.
    pub sockets_per_listener: usize,
    /// SO_RCVBUF per socket, bytes.
    pub recv_buffer: usize,
    /// Datagrams per recvmmsg call.
    pub recv_batch: usize,
    /// After a receive that found fewer than `recv-batch` datagrams, the receive thread
    /// pauses this long so the next one finds a batch: one wake-up per batch instead of one
    /// per datagram under light and moderate load, at the cost of at most this much latency.
    /// 0 = no pause.
    #[serde(with = "humantime_serde")]
    pub recv_coalesce: Duration,
    /// Largest datagram kept; longer ones are truncated and counted.
    pub max_datagram: usize,
    /// Receive batches queued between the receive threads and the pipeline.
    pub queue_capacity: usize,
    /// Replay this capture instead of listening.
    pub pcap: Option<PathBuf>,
    /// pcap replay pace.
    pub speed: Speed,
    /// Bus partitions (records are hash-partitioned by source IP; hot sources by flow).
    pub partitions: u32,
    pub hot_sources: HotSourceConfig,
    /// Records per bus message.
    pub batch_size: usize,
    /// Longest a record waits in a partial batch.
    #[serde(with = "humantime_serde")]
    pub linger: Duration,
    pub encoding: Encoding,
    /// Also publish every decoded report on `int.reports`.
    pub publish_reports: bool,
    /// Embedded bus: unconsumed messages held per partition.
    pub bus_capacity: usize,
    pub events: EventConfig,
    /// Bounds of the detection state.
    pub state: StateConfig,
    pub loss: LossConfig,
    pub int_label: IntLabelConfig,
    pub decode: DecodeConfig,
    /// Flow-match rules selecting a per-flow event-detection algorithm.
    pub watchlist: Vec<Rule>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], 9101)),
            http: kplane_runtime::HttpConfig::default(),
            listen: vec![SocketAddr::from(([0, 0, 0, 0], 32766))],
            input: Input::Udp,
            af_xdp: AfXdpConfig::default(),
            sockets_per_listener: 1,
            recv_buffer: 8 << 20,
            recv_batch: 256,
            recv_coalesce: Duration::from_millis(1),
            max_datagram: 9216,
            queue_capacity: 256,
            pcap: None,
            speed: Speed::Max,
            partitions: 8,
            hot_sources: HotSourceConfig::default(),
            batch_size: 4096,
            linger: Duration::from_millis(50),
            encoding: Encoding::Arrow,
            publish_reports: false,
            bus_capacity: 1024,
            events: EventConfig::default(),
            state: StateConfig::default(),
            loss: LossConfig::default(),
            int_label: IntLabelConfig::default(),
            decode: DecodeConfig::default(),
            watchlist: Vec::new(),
        }
    }
}

impl Validate for Config {
    fn validate(&self, problems: &mut Vec<String>) {
        if self.input == Input::AfXdp && self.pcap.is_none() {
            self.af_xdp.validate(problems);
            if self.listen.iter().any(|a| a.port() == 0) {
                problems
                    .push("collector.listen: input = \"af-xdp\" needs fixed ports (not 0)".into());
            }
        }
        let mut need = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("collector.{what}"));
            }
        };
        need(
            !self.listen.is_empty() || self.pcap.is_some(),
            "listen must name at least one address (or give pcap)",
        );
        need(
            self.sockets_per_listener >= 1,
            "sockets-per-listener must be >= 1",
        );
        need(
            (1..=1024).contains(&self.recv_batch),
            "recv-batch must be in 1..=1024",
        );
        need(
            (64..=65_535).contains(&self.max_datagram),
            "max-datagram must be in 64..=65535",
        );
        need(self.queue_capacity >= 1, "queue-capacity must be >= 1");
        need(
            self.recv_coalesce <= Duration::from_millis(10),
            "recv-coalesce must be at most 10ms",
        );
        need(
            (1..=4096).contains(&self.partitions),
            "partitions must be in 1..=4096",
        );
        need(
            (0.0..=1.0).contains(&self.hot_sources.share),
            "hot-sources.share must be in 0..=1 (0: off)",
        );
        need(self.batch_size >= 1, "batch-size must be >= 1");
        need(self.bus_capacity >= 1, "bus-capacity must be >= 1");
        need(
            self.events.refresh.is_zero() || self.events.refresh >= Duration::from_secs(1),
            "events.refresh must be 0 (off) or at least 1s",
        );
        for (name, l) in [
            ("flows", self.state.flows),
            ("nodes", self.state.nodes),
            ("algorithms", self.state.algorithms),
        ] {
            if let Some(problem) = l.problem() {
                need(false, &format!("state.{name}: {problem}"));
            }
        }
        need(
            self.loss.reorder_window >= 1,
            "loss.reorder-window must be >= 1",
        );
        need(
            self.int_label.interval >= Duration::from_millis(1),
            "int-label.interval must be at least 1ms",
        );
        need(
            self.int_label.known_for >= self.int_label.interval,
            "int-label.known-for must be at least int-label.interval",
        );
        need(
            self.loss.reset_distance >= self.loss.reorder_window,
            "loss.reset-distance must be >= loss.reorder-window",
        );
        if let Some(p) = &self.pcap
            && !p.exists()
        {
            problems.push(format!("collector.pcap: {} does not exist", p.display()));
        }
        Watchlist::validate(&self.watchlist, problems);
    }
}

impl kplane_runtime::Listeners for Config {
    fn set_http(&mut self, http: kplane_runtime::HttpConfig) {
        self.http = http;
    }

    fn validate_listeners(&self, problems: &mut Vec<String>) {
        self.http
            .check_listener("collector.admin", self.admin, problems);
    }
}
