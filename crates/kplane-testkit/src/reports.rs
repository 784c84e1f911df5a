//! Telemetry reports tests send: built by kplane-wire's builders.

use kplane_model::HopRecord;
use kplane_wire::build::{Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, sample_hop};
use kplane_wire::int::IntVersion;
use kplane_wire::report::v20::GroupHeader;

/// A TR v2.0 report from `node` with sequence `seq` for a flow from `src` to 10.9.9.9:80, 3
/// hops with hop latency `lat` each.
pub fn report(node: u32, seq: u32, src: &str, lat: u32) -> Vec<u8> {
    flow_report(node, seq, src, 4000, lat)
}

/// [`report`] of the flow from `src`:`src_port`.
pub fn flow_report(node: u32, seq: u32, src: &str, src_port: u16, lat: u32) -> Vec<u8> {
    let hops: Vec<HopRecord> = (1..=3).map(|n| sample_hop(n, lat, 10)).collect();
    let flow = FlowSpec::udp(
        src.parse().unwrap(),
        "10.9.9.9".parse().unwrap(),
        src_port,
        80,
    );
    let inner = PacketSpec {
        ethernet: false,
        ..PacketSpec::new(flow).with_int(
            IntSpec::new(IntVersion::V2, 0xF000, hops),
            Encap::UdpPort { port: 0x4568 },
        )
    }
    .build();
    kplane_wire::build::report_v20(
        GroupHeader {
            hw_id: 1,
            sequence: seq,
            node_id: node,
            ..GroupHeader::default()
        },
        &[IndividualSpec::int(
            0x1000,
            sample_hop(node, 0, 10),
            4,
            inner,
        )],
    )
}
