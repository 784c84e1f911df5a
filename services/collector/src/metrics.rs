//! The collector's self-metrics, names in one place (`kplane_collector_*`). Hot paths count
//! into plain integers and add them here once per receive batch.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use kplane_runtime::metrics::StateMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FormatLabel {
    pub format: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    pub node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    pub stage: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct XskLabels {
    pub interface: String,
    pub queue: u32,
    pub mode: &'static str,
    pub attach: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicPartition {
    pub topic: &'static str,
    pub partition: String,
}

/// Every collector metric.
#[derive(Clone, Debug)]
pub struct CollectorMetrics {
    pub datagrams: Counter,
    pub received_bytes: Counter,
    pub af_xdp_frames: Counter,
    pub af_xdp_sockets: Family<XskLabels, Gauge>,
    pub truncated: Counter,
    pub reports_decoded: Family<FormatLabel, Counter>,
    pub malformed: Family<ReasonLabel, Counter>,
    pub events: Family<EventLabels, Counter>,
    pub reports_lost: Family<NodeLabel, Counter>,
    pub reports_late: Counter,
    pub reports_too_late: Counter,
    pub reports_duplicate: Counter,
    pub sequence_resets: Counter,
    pub dropped: Family<DropLabels, Counter>,
    pub batch_records: Histogram,
    pub heartbeats: Counter,
    pub publish_seconds: Histogram,
    pub partition_records: Family<TopicPartition, Counter>,
    pub metric_keys: Gauge,
    pub hot_sources: Gauge,
    pub hot_source_records: Counter,
    pub sequence_streams: Gauge,
    pub int_label_exports: Counter,
    pub int_label_bytes: Counter,
    pub int_label_items: Family<ResultLabel, Counter>,
    pub int_label_intervals: Counter,
    pub int_label_port_intervals: Family<StateLabel, Counter>,
    pub int_label_coverage: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub int_label_ports_known: Gauge,
    pub state: StateMetrics,
}

impl Default for CollectorMetrics {
    fn default() -> Self {
        Self {
            datagrams: Counter::default(),
            received_bytes: Counter::default(),
            af_xdp_frames: Counter::default(),
            af_xdp_sockets: Family::default(),
            truncated: Counter::default(),
            reports_decoded: Family::default(),
            malformed: Family::default(),
            events: Family::default(),
            reports_lost: Family::default(),
            reports_late: Counter::default(),
            reports_too_late: Counter::default(),
            reports_duplicate: Counter::default(),
            sequence_resets: Counter::default(),
            dropped: Family::default(),
            batch_records: Histogram::new(exponential_buckets(1.0, 4.0, 9)),
            heartbeats: Counter::default(),
            publish_seconds: Histogram::new(exponential_buckets(1e-6, 4.0, 12)),
            partition_records: Family::default(),
            metric_keys: Gauge::default(),
            hot_sources: Gauge::default(),
            hot_source_records: Counter::default(),
            sequence_streams: Gauge::default(),
            int_label_exports: Counter::default(),
            int_label_bytes: Counter::default(),
            int_label_items: Family::default(),
            int_label_intervals: Counter::default(),
            int_label_port_intervals: Family::default(),
            int_label_coverage: Gauge::default(),
            int_label_ports_known: Gauge::default(),
            state: StateMetrics::default(),
        }
    }
}

impl CollectorMetrics {
    /// Registers everything under `kplane_collector_`.
    pub fn register(&self, root: &mut Registry) {
        let r = root.sub_registry_with_prefix("collector");
        r.register(
            "datagrams_received",
            "UDP datagrams (or pcap frames) received",
            self.datagrams.clone(),
        );
        r.register(
            "received_bytes",
            "Bytes received",
            self.received_bytes.clone(),
        );
        r.register(
            "af_xdp_frames",
            "Frames taken off AF_XDP receive rings (input = af-xdp)",
            self.af_xdp_frames.clone(),
        );
        r.register(
            "af_xdp_sockets",
            "AF_XDP sockets open, by interface, queue, copy mode and XDP attach mode",
            self.af_xdp_sockets.clone(),
        );
        r.register(
            "datagrams_truncated",
            "Datagrams longer than max-datagram (truncated, counted malformed)",
            self.truncated.clone(),
        );
        r.register(
            "reports_decoded",
            "Reports decoded, by format",
            self.reports_decoded.clone(),
        );
        // The series a dashboard reads from the start (0, not "no data"): every malformed
        // reason, and the drops any UDP collector can have.
        for reason in kplane_wire::WireError::REASONS {
            let _ = self.malformed.get_or_create(&ReasonLabel { reason });
        }
        for (stage, reason) in [
            ("socket", "rcvbuf_overflow"),
            ("queue", "full"),
            ("decode", "not_a_report"),
        ] {
            let _ = self.dropped.get_or_create(&DropLabels { stage, reason });
        }
        r.register(
            "malformed",
            "Datagrams that did not decode, by reason",
            self.malformed.clone(),
        );
        r.register("events", "Events detected, by kind", self.events.clone());
        r.register(
            "reports_lost",
            "Reports lost (sequence gaps), by reporting node (bounded)",
            self.reports_lost.clone(),
        );
        r.register(
            "reports_late",
            "Reports that arrived late and filled their gap",
            self.reports_late.clone(),
        );
        r.register(
            "reports_too_late",
            "Reports older than the reorder window (already counted lost)",
            self.reports_too_late.clone(),
        );
        r.register(
            "reports_duplicate",
            "Duplicate report sequence numbers",
            self.reports_duplicate.clone(),
        );
        r.register(
            "sequence_resets",
            "Report sequence counter resets (exporter restarts)",
            self.sequence_resets.clone(),
        );
        r.register(
            "dropped",
            "Items dropped, by stage and reason",
            self.dropped.clone(),
        );
        r.register(
            "batch_records",
            "Records per published batch",
            self.batch_records.clone(),
        );
        r.register(
            "heartbeats",
            "Empty messages that tell a quiet partition's consumers how far the collector got",
            self.heartbeats.clone(),
        );
        r.register(
            "publish_seconds",
            "Time to hand one batch to the bus",
            self.publish_seconds.clone(),
        );
        r.register(
            "partition_records",
            "Records published, by topic and partition",
            self.partition_records.clone(),
        );
        r.register(
            "metric_keys",
            "Metric keys tracked by event detection",
            self.metric_keys.clone(),
        );
        r.register(
            "hot_sources",
            "Sources whose records are keyed by flow (spread over every partition), all pipelines",
            self.hot_sources.clone(),
        );
        r.register(
            "hot_source_records",
            "Records of hot sources, keyed by flow instead of by source",
            self.hot_source_records.clone(),
        );
        r.register(
            "sequence_streams",
            "Report sequence streams tracked (node, hw_id)",
            self.sequence_streams.clone(),
        );
        r.register(
            "int_label_exports",
            "INT-label exports received (packets whose items a last hop exported)",
            self.int_label_exports.clone(),
        );
        r.register(
            "int_label_bytes",
            "Bytes of the INT-label options exported (2 + 32 per item): INT-label's bandwidth at the last hops",
            self.int_label_bytes.clone(),
        );
        r.register(
            "int_label_items",
            "INT-label items by result: applied (newer than the port's state) or stale (reordered or duplicated)",
            self.int_label_items.clone(),
        );
        r.register(
            "int_label_intervals",
            "INT-label telemetry intervals closed",
            self.int_label_intervals.clone(),
        );
        r.register(
            "int_label_port_intervals",
            "Ports summed over closed telemetry intervals: updated in the interval, or known (heard from within known-for); rate(updated) / rate(known) is the mean coverage rate",
            self.int_label_port_intervals.clone(),
        );
        r.register(
            "int_label_coverage_ratio",
            "INT-label coverage rate of the last closed telemetry interval: ports updated / ports known",
            self.int_label_coverage.clone(),
        );
        r.register(
            "int_label_ports_known",
            "Ports heard from within int-label.known-for",
            self.int_label_ports_known.clone(),
        );
        self.state.register(r);
    }

    pub fn drop(&self, stage: &'static str, reason: &'static str, n: u64) {
        if n > 0 {
            self.dropped
                .get_or_create(&DropLabels { stage, reason })
                .inc_by(n);
        }
    }
}
