//! Event rows: what the collector's event detection emits (INTCollector §III-C/D metrics, the
//! event-detection paper's per-flow algorithms, report-loss accounting).

use std::net::SocketAddr;

use serde::Serialize;

use crate::FlowKey;

/// The measurement of a metric key (INTCollector Table I, plus report loss).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Metric {
    /// ids: 5-tuple; value: hash of the node path (the path itself is in `path`).
    FlowPath = 0,
    /// ids: 5-tuple; value: end-to-end latency, the sum of hop latencies (ns).
    FlowLatency,
    /// ids: 5-tuple + switch; value: hop latency (ns).
    FlowHopLatency,
    /// ids: switch + queue; value: queue occupancy.
    QueueOccupancy,
    /// ids: switch + queue; value: queue congestion status.
    QueueCongestion,
    /// ids: switch + egress port; value: egress port tx utilisation.
    LinkUtilization,
    /// ids: reporting node + hw_id; value: reports lost in this gap.
    ReportLoss,
    /// ids: switch + egress port; value: the label time (ns, the switch's clock) of an
    /// INT-label item newer than the port's state; previous: the one it replaced.
    IntLabelPort,
    /// ids: the exporting (last-hop) switch; value: the bytes of the INT-label option it
    /// exported (2 + 32 per item).
    IntLabelExport,
}

impl Metric {
    /// Whether the metric is a switch's (a queue's or a port's), not a flow's or an
    /// exporter's: such events are partitioned by the switch.
    pub fn of_switch(self) -> bool {
        matches!(
            self,
            Self::QueueOccupancy
                | Self::QueueCongestion
                | Self::LinkUtilization
                | Self::IntLabelPort
                | Self::IntLabelExport
        )
    }

    /// A switch's metrics the stream processor merges across collectors into one change log
    /// per queue or port (the store's `switch_changes`).
    pub const SWITCH_VIEWS: [Metric; 4] = [
        Self::QueueOccupancy,
        Self::QueueCongestion,
        Self::LinkUtilization,
        Self::IntLabelPort,
    ];

    pub const ALL: [Metric; 9] = [
        Self::FlowPath,
        Self::FlowLatency,
        Self::FlowHopLatency,
        Self::QueueOccupancy,
        Self::QueueCongestion,
        Self::LinkUtilization,
        Self::ReportLoss,
        Self::IntLabelPort,
        Self::IntLabelExport,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FlowPath => "flow_path",
            Self::FlowLatency => "flow_latency",
            Self::FlowHopLatency => "flow_hop_latency",
            Self::QueueOccupancy => "queue_occupancy",
            Self::QueueCongestion => "queue_congestion",
            Self::LinkUtilization => "link_utilization",
            Self::ReportLoss => "report_loss",
            Self::IntLabelPort => "int_label_port",
            Self::IntLabelExport => "int_label_export",
        }
    }
}

/// Why an event row was emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A metric key never seen before.
    New,
    /// |new − last| exceeded the threshold.
    Change,
    /// Periodic re-send of a live value (no change).
    Refresh,
    /// A report its watchlist rule selects: every one (`noop`), or those meeting a `complex`
    /// rule's conditions.
    Report,
    /// Reports missing in a sequence (value = how many).
    Loss,
    /// A report sequence counter went back: the exporter restarted.
    Reset,
}

impl EventKind {
    pub const ALL: [EventKind; 6] = [
        Self::New,
        Self::Change,
        Self::Refresh,
        Self::Report,
        Self::Loss,
        Self::Reset,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Change => "change",
            Self::Refresh => "refresh",
            Self::Report => "report",
            Self::Loss => "loss",
            Self::Reset => "reset",
        }
    }
}

/// Which algorithm decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    /// INTCollector: new key or |Δ| > T(m), with periodic refresh.
    Threshold,
    /// Event-detection paper: per-hop change against the last value per switch.
    PerHop,
    /// Event-detection paper: change of the per-flow sum over hops.
    PerFlow,
    /// Event-detection paper: exponentially weighted moving average of the per-flow sum.
    Ewma,
    /// Event-detection paper: a report met a conjunction of conditions.
    Complex,
    /// Event-detection paper: every report.
    Noop,
    /// Sequence-number accounting.
    Sequence,
    /// INT-label's database (int-label-distributed-labeling Algo. 4): newest label wins.
    IntLabel,
}

impl From<crate::detection::Algorithm> for Detector {
    fn from(a: crate::detection::Algorithm) -> Self {
        use crate::detection::Algorithm as A;
        match a {
            A::PerHop => Self::PerHop,
            A::PerFlow => Self::PerFlow,
            A::Ewma => Self::Ewma,
            A::Complex => Self::Complex,
            A::Noop => Self::Noop,
        }
    }
}

impl Detector {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Threshold => "threshold",
            Self::PerHop => "per_hop",
            Self::PerFlow => "per_flow",
            Self::Ewma => "ewma",
            Self::Complex => "complex",
            Self::Noop => "noop",
            Self::Sequence => "sequence",
            Self::IntLabel => "int_label",
        }
    }
}

/// One event, borrowed for as long as it takes to append it to a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EventRow<'a> {
    /// Receive time of the report that raised it, ns since the Unix epoch.
    pub received_ns: u64,
    pub kind: EventKind,
    pub metric: Metric,
    pub detector: Detector,
    pub flow: Option<FlowKey>,
    /// The switch the metric is about (hop, queue, link, or the reporting node for loss).
    pub node_id: Option<u32>,
    pub queue_id: Option<u8>,
    pub egress_port: Option<u32>,
    pub hw_id: Option<u8>,
    pub value: Option<u64>,
    pub previous: Option<u64>,
    /// The threshold the event was decided with (threshold detector: T(m) of its metric), so
    /// that a consumer merging several collectors' events applies the same rule.
    pub threshold: Option<u64>,
    /// The node path, for `flow_path` events.
    pub path: &'a [u32],
    pub exporter: Option<SocketAddr>,
}
