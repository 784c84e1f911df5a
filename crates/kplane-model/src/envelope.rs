use std::net::SocketAddr;

use serde::Serialize;

/// Which wire format a record was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReportFormat {
    /// Telemetry Report v0.5 (12-byte fixed header).
    #[serde(rename = "telemetry-report-v0.5")]
    TelemetryReportV05,
    /// Telemetry Report v1.0 (16-byte header with RepMdBits).
    #[serde(rename = "telemetry-report-v1.0")]
    TelemetryReportV10,
    /// Telemetry Report v2.0 (group header + individual reports).
    #[serde(rename = "telemetry-report-v2.0")]
    TelemetryReportV20,
    /// Embedded INT v0.5 (shim + MD header + stack + tail).
    #[serde(rename = "int-v0.5")]
    IntV05,
    /// Embedded INT v1.0 hop-by-hop.
    #[serde(rename = "int-v1.0")]
    IntV10,
    /// Embedded INT v2.0/v2.1 INT-MD.
    #[serde(rename = "int-md-v2")]
    IntMdV2,
    /// Embedded INT v2.0/v2.1 INT-MX (no stack).
    #[serde(rename = "int-mx-v2")]
    IntMxV2,
    /// The KDN paper's INT-over-UDP variant.
    #[serde(rename = "kdn-udp-int")]
    KdnUdpInt,
    /// A GPINT probe.
    #[serde(rename = "gpint-probe")]
    GpintProbe,
    /// An INT-label option.
    #[serde(rename = "int-label")]
    IntLabel,
    /// Nothing decoded yet.
    #[default]
    #[serde(rename = "unknown")]
    Unknown,
}

impl ReportFormat {
    /// Stable name, used in JSON, Arrow and as a bounded metric label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::TelemetryReportV05 => "telemetry-report-v0.5",
            Self::TelemetryReportV10 => "telemetry-report-v1.0",
            Self::TelemetryReportV20 => "telemetry-report-v2.0",
            Self::IntV05 => "int-v0.5",
            Self::IntV10 => "int-v1.0",
            Self::IntMdV2 => "int-md-v2",
            Self::IntMxV2 => "int-mx-v2",
            Self::KdnUdpInt => "kdn-udp-int",
            Self::GpintProbe => "gpint-probe",
            Self::IntLabel => "int-label",
            Self::Unknown => "unknown",
        }
    }

    /// Every format, for metric pre-registration and docs.
    pub const ALL: [ReportFormat; 10] = [
        Self::TelemetryReportV05,
        Self::TelemetryReportV10,
        Self::TelemetryReportV20,
        Self::IntV05,
        Self::IntV10,
        Self::IntMdV2,
        Self::IntMxV2,
        Self::KdnUdpInt,
        Self::GpintProbe,
        Self::IntLabel,
    ];
}

/// Report flags, normalised across versions (bit values are kplane's own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ReportFlags(pub u8);

impl ReportFlags {
    /// D: the packet was dropped.
    pub const DROPPED: u8 = 0x1;
    /// Q: associated with a congested queue.
    pub const CONGESTED: u8 = 0x2;
    /// F: associated with a tracked flow.
    pub const TRACKED: u8 = 0x4;
    /// I: intermediate report (INT-MD transit, v2.0).
    pub const INTERMEDIATE: u8 = 0x8;
    /// O: KDN packet sent to the controller for analysis.
    pub const TO_CONTROLLER: u8 = 0x10;
    /// INT-label: a specific (operator-selected) flow.
    pub const SPECIFIC_FLOW: u8 = 0x20;

    pub const fn contains(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    pub fn set(&mut self, bit: u8, on: bool) {
        if on {
            self.0 |= bit;
        } else {
            self.0 &= !bit;
        }
    }
}

/// Where a record came from and what the reporting device said about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportEnvelope {
    /// The outermost telemetry format (a report version, or the embedded INT seen on a link).
    pub format: ReportFormat,
    /// The INT format embedded in the report's inner packet, if any.
    pub embedded: Option<ReportFormat>,
    /// Hardware id of the reporting pipeline (6 bits).
    pub hw_id: u8,
    /// Switch id / node id of the reporting device.
    pub node_id: Option<u32>,
    /// Report sequence number (32 bits in v0.5/v1.0, 22 bits in v2.0).
    pub sequence: Option<u32>,
    pub flags: ReportFlags,
    /// Drop reason code, when the report describes a drop.
    pub drop_reason: Option<u8>,
    /// Ingress timestamp of the report (ns, device-local).
    pub timestamp_ns: Option<u64>,
    /// Length of the monitored packet in bytes, as its IP header declares it (IPv4 total
    /// length, IPv6 payload length + 40) — also when the report carries a truncated copy.
    pub packet_length: Option<u32>,
    /// Address the report came from (UDP source), if known.
    pub exporter: Option<SocketAddr>,
    /// Receive time at the collector, ns since the Unix epoch.
    pub received_ns: u64,
}
