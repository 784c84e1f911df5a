//! Telemetry Reports the emulated sinks (or every switch, in INT-MX mode) send: built with the
//! wire library's builders, so they are exactly what a real switch running `p4/` sends.

use std::net::IpAddr;

pub use crate::hop::Hop;
use kplane_model::{HopField, HopRecord};
use kplane_wire::build::{
    Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, report_v05, report_v10, report_v20,
};
use kplane_wire::int::IntVersion;
use kplane_wire::report::v05::{FixedHeaderV05, LocalHeaderV05};
use kplane_wire::report::v10::ReportHeaderV10;
use kplane_wire::report::v20::GroupHeader;
use serde::{Deserialize, Serialize};

/// Which Telemetry Report version sinks send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum ReportVersion {
    #[serde(rename = "0.5")]
    V05,
    #[serde(rename = "1.0")]
    V10,
    #[default]
    #[serde(rename = "2.0")]
    V20,
}

impl std::str::FromStr for ReportVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "0.5" | "v0.5" => Ok(Self::V05),
            "1.0" | "v1.0" => Ok(Self::V10),
            "2.0" | "v2.0" => Ok(Self::V20),
            _ => Err(format!("report version {s:?}: 0.5, 1.0 or 2.0")),
        }
    }
}

/// The user packet a report describes.
#[derive(Clone, Copy, Debug)]
pub struct PacketInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// The packet's size on the wire (IP length), declared in the reports' truncated copy.
    pub bytes: u32,
}

impl PacketInfo {
    fn flow(&self) -> FlowSpec {
        let f = FlowSpec::udp(self.src, self.dst, self.src_port, self.dst_port);
        FlowSpec {
            protocol: self.protocol,
            ..f
        }
    }
}

/// DSCP marking INT in the emulated packets.
pub const INT_DSCP: u8 = 0x17;

/// RepMdBits (v2.0) of the sink's own metadata: L1 ports, hop latency, queue, both
/// timestamps, tx utilisation.
pub const SINK_REP_MD: u16 = 0x7D00;

/// A sink's INT-MD report: `upstream` hops in path order (the sink itself excluded). With
/// `intermediate`, a transit's report of a stack that reached its maximum hop count (v2.0 I
/// flag).
#[allow(clippy::too_many_arguments)]
pub fn sink_report(
    version: ReportVersion,
    bitmap: u16,
    hw_id: u8,
    sequence: u32,
    sink: &Hop,
    upstream: &[Hop],
    pkt: &PacketInfo,
    intermediate: bool,
) -> Vec<u8> {
    let hops: Vec<HopRecord> = upstream.iter().map(Hop::record).collect();
    let iv = match version {
        ReportVersion::V05 => IntVersion::V05,
        ReportVersion::V10 => IntVersion::V10,
        ReportVersion::V20 => IntVersion::V2,
    };
    let inner = PacketSpec {
        ethernet: version == ReportVersion::V05,
        payload: Vec::new(),
        ip_length: Some(pkt.bytes.min(u32::from(u16::MAX)) as u16),
        ..PacketSpec::new(pkt.flow()).with_int(
            IntSpec::new(iv, bitmap, hops),
            Encap::Dscp { dscp: INT_DSCP },
        )
    }
    .build();
    let me = sink.record();
    match version {
        ReportVersion::V20 => {
            let mut ind = IndividualSpec::int(SINK_REP_MD, me, 4, inner);
            ind.header.tracked_flow = true;
            ind.header.intermediate = intermediate;
            report_v20(
                GroupHeader {
                    hw_id,
                    sequence,
                    node_id: sink.node,
                    ..GroupHeader::default()
                },
                &[ind],
            )
        }
        ReportVersion::V10 => report_v10(
            ReportHeaderV10 {
                next_proto: 1,
                rep_md_bits: 0x3D, // ports, latency, queue, egress ts, tx util
                tracked_flow: true,
                hw_id,
                switch_id: sink.node,
                sequence,
                ingress_timestamp: sink.ingress_ns as u32,
                ..ReportHeaderV10::default()
            },
            &me,
            &inner,
        ),
        ReportVersion::V05 => report_v05(
            FixedHeaderV05 {
                tracked_flow: true,
                hw_id,
                sequence,
                ingress_timestamp: sink.ingress_ns as u32,
                ..FixedHeaderV05::default()
            },
            None,
            Some(LocalHeaderV05 {
                switch_id: sink.node,
                ingress_port: sink.in_port,
                egress_port: sink.out_port,
                queue_id: sink.queue_id,
                queue_occupancy: sink.queue_occupancy.min(0xFF_FFFE),
                egress_timestamp: sink.egress_ns as u32,
            }),
            &inner,
        ),
    }
}

/// IP protocol of the INT-label option (the collector's `decode.int-label-protocol`).
pub const INT_LABEL_PROTOCOL: u8 = 253;

/// An INT-label export from the last hop `node`: a TR v2.0 report whose inner packet carries
/// the option with the label's items (labelling order; each item's label time is its
/// `egress_ns`), INT_num from MAX_hop for a specific flow.
pub fn label_report(
    hw_id: u8,
    sequence: u32,
    node: u32,
    label: &crate::label::PacketLabel,
    pkt: &PacketInfo,
) -> Vec<u8> {
    let hops: Vec<HopRecord> = label
        .items
        .iter()
        .map(|h| {
            let mut r = h.record();
            r.set(HopField::IngressTimestamp, h.egress_ns);
            r
        })
        .collect();
    let inner = PacketSpec {
        ethernet: false,
        payload: Vec::new(),
        ip_length: Some(pkt.bytes.min(u32::from(u16::MAX)) as u16),
        ..PacketSpec::new(pkt.flow()).with_int(
            IntSpec::new(IntVersion::V2, 0, hops),
            Encap::IntLabel {
                protocol: INT_LABEL_PROTOCOL,
                int_num_offset: label.offset,
            },
        )
    }
    .build();
    report_v20(
        GroupHeader {
            hw_id,
            sequence,
            node_id: node,
            ..GroupHeader::default()
        },
        &[IndividualSpec::int(0, HopRecord::default(), 4, inner)],
    )
}

/// An INT-MX postcard: one switch's own metadata about one packet (TR v2.0, RepType INT,
/// inner = the packet's headers).
pub fn postcard(
    hw_id: u8,
    sequence: u32,
    hop: &Hop,
    pkt: &PacketInfo,
    intermediate: bool,
) -> Vec<u8> {
    let inner = PacketSpec {
        ethernet: false,
        payload: Vec::new(),
        ip_length: Some(pkt.bytes.min(u32::from(u16::MAX)) as u16),
        ..PacketSpec::new(pkt.flow())
    }
    .build();
    report_v20(
        GroupHeader {
            hw_id,
            sequence,
            node_id: hop.node,
            ..GroupHeader::default()
        },
        &[{
            let mut ind = IndividualSpec::int(SINK_REP_MD, hop.record(), 4, inner);
            ind.header.intermediate = intermediate;
            ind
        }],
    )
}
