//! Top-level decoding of a captured frame: a Telemetry Report sent to a collector, or a
//! packet carrying INT as seen on a link.

use crate::bytes::Bytes;
use crate::error::Result;
use crate::opts::DecodeOptions;
use crate::packet::{L4, Packet, Start, Telemetry};
use crate::report::TelemetryReport;

// Views are Copy and short-lived; boxing the larger variant would cost an allocation per frame.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Decoded<'a> {
    /// A Telemetry Report; `outer` are the headers it was sent in.
    Report {
        outer: Packet<'a>,
        report: TelemetryReport<'a>,
    },
    /// A packet; `telemetry` says whether it carries any.
    Packet(Packet<'a>),
}

impl Decoded<'_> {
    /// Whether anything telemetric was found.
    pub fn has_telemetry(&self) -> bool {
        match self {
            Self::Report { .. } => true,
            Self::Packet(p) => !matches!(p.telemetry, Telemetry::None),
        }
    }
}

/// Decodes a frame starting at `start` (Ethernet for most captures).
pub fn decode_frame<'a>(
    data: &'a [u8],
    start: Start,
    opts: &'a DecodeOptions,
) -> Result<Decoded<'a>> {
    let outer = Packet::parse(Bytes::new(data), start, opts)?;
    let (Some(payload), Some(L4::Udp(udp))) = (outer.udp_payload, outer.l4) else {
        return Ok(Decoded::Packet(outer));
    };
    if opts.is_report_port(udp.dst_port) {
        let report = TelemetryReport::parse_bytes(payload, opts)?;
        return Ok(Decoded::Report { outer, report });
    }
    if opts.report_ports.is_empty() {
        // Auto-detection on any other port: a report only if it decodes cleanly and makes sense.
        if let Ok(report) = TelemetryReport::parse_bytes(payload, opts)
            && plausible(&report)
        {
            return Ok(Decoded::Report { outer, report });
        }
    }
    Ok(Decoded::Packet(outer))
}

fn plausible(report: &TelemetryReport<'_>) -> bool {
    match report {
        TelemetryReport::V05(r) => r.inner.ip.is_some(),
        TelemetryReport::V10(r) => r.inner.ip.is_some(),
        TelemetryReport::V20(r) => {
            let mut n = 0;
            for item in r.reports() {
                if item.is_err() {
                    return false;
                }
                n += 1;
            }
            n > 0
        }
    }
}
