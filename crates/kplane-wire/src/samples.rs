//! Sample packets of every format and variant, built with [`crate::build`]: the golden test
//! vectors, the benchmark inputs, and the sample capture `kplane` ships (`samples/`).

use std::net::IpAddr;

use kplane_model::{HopField, HopRecord};

use crate::DecodeOptions;
use crate::build::{
    self, Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, report_v05, report_v10, report_v20,
    sample_hop, udp_frame,
};
use crate::int::IntVersion;
use crate::papers::{DlvHeader, GpintProbe, ProbeKind, SrHeader};
use crate::report::v05::{DropHeaderV05, FixedHeaderV05, LocalHeaderV05};
use crate::report::v10::ReportHeaderV10;
use crate::report::v20::{GroupHeader, IndividualHeader};

/// Parses a literal address (samples only use valid ones).
pub fn ip(s: &str) -> IpAddr {
    s.parse()
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
}

/// `n` sample hops with node ids 1..=n.
pub fn hops(n: u32) -> Vec<HopRecord> {
    (1..=n).map(|i| sample_hop(i, 100 * i, 10 * i)).collect()
}

/// Options the samples decode with: defaults plus the KDN INT port 5001.
pub fn options() -> DecodeOptions {
    DecodeOptions {
        kdn_port: Some(5001),
        ..DecodeOptions::default()
    }
}

fn udp_flow() -> FlowSpec {
    FlowSpec::udp(ip("10.0.1.1"), ip("10.0.2.2"), 40000, 9000)
}

fn tcp_flow() -> FlowSpec {
    FlowSpec::tcp(ip("10.0.1.1"), ip("10.0.2.2"), 40001, 443)
}

/// Strips the Ethernet header (for reports whose inner type is IPv4/IPv6).
fn ip_only(spec: PacketSpec) -> Vec<u8> {
    PacketSpec {
        ethernet: false,
        ..spec
    }
    .build()
}

fn to_collector(report: &[u8]) -> Vec<u8> {
    udp_frame(ip("10.255.0.1"), ip("10.255.0.100"), 50000, 32766, report)
}

/// The sink's own metadata (RepMdBits: L1 ports, hop latency, queue, timestamps).
pub fn sink_md() -> HopRecord {
    sample_hop(6, 700, 70)
}

/// TR v2.0 with an embedded 5-hop INT-MD stack (the benchmark's report).
pub fn tr_v20_5hop_payload() -> Vec<u8> {
    tr_v20_5hop_payload_with(0xFF00, 0x7C00)
}

/// The benchmark's report with instruction bitmap `bitmap` and RepMdBits `rep_md_bits`
/// (e.g. to measure instruction sets without a constant-bitmap decoder).
pub fn tr_v20_5hop_payload_with(bitmap: u16, rep_md_bits: u16) -> Vec<u8> {
    let packet = PacketSpec::new(udp_flow()).with_int(
        IntSpec::new(IntVersion::V2, bitmap, hops(5)),
        Encap::UdpPort { port: 0x4568 },
    );
    report_v20(
        GroupHeader {
            hw_id: 2,
            sequence: 77,
            node_id: 6,
            ..GroupHeader::default()
        },
        &[IndividualSpec::int(
            rep_md_bits,
            sink_md(),
            4,
            ip_only(packet),
        )],
    )
}

/// TR v0.5 switch-local report with an embedded INT v0.5 (3 hops) inner frame.
pub fn tr_v05_local_payload() -> Vec<u8> {
    let inner = PacketSpec::new(udp_flow())
        .with_int(
            IntSpec::new(IntVersion::V05, 0xCC00, hops(3)),
            Encap::Dscp { dscp: 0x17 },
        )
        .build();
    report_v05(
        FixedHeaderV05 {
            tracked_flow: true,
            hw_id: 1,
            sequence: 1000,
            ingress_timestamp: 5000,
            ..FixedHeaderV05::default()
        },
        None,
        Some(LocalHeaderV05 {
            switch_id: 3,
            ingress_port: 1,
            egress_port: 2,
            queue_id: 0,
            queue_occupancy: 30,
            egress_timestamp: 5300,
        }),
        &inner,
    )
}

/// TR v1.0 with every RepMdBits word and an inner INT v1.0 6-hop TCP packet.
pub fn tr_v10_6hop_payload() -> Vec<u8> {
    let inner = PacketSpec::new(tcp_flow())
        .with_int(
            IntSpec::new(IntVersion::V10, 0xFF00, hops(6)),
            Encap::Dscp { dscp: 0x17 },
        )
        .build();
    let mut md = sample_hop(6, 600, 60);
    md.set(HopField::DropReason, 0xFF);
    report_v10(
        ReportHeaderV10 {
            rep_md_bits: 0x3F,
            tracked_flow: true,
            hw_id: 3,
            switch_id: 6,
            sequence: 42,
            ingress_timestamp: 123_456,
            ..ReportHeaderV10::default()
        },
        &md,
        &inner,
    )
}

/// INT-MD v2.1 over Geneve, 2 hops at bitmap 0xFF00.
pub fn int_md_geneve() -> Vec<u8> {
    PacketSpec::new(tcp_flow())
        .with_int(
            // A Geneve option holds at most 124 bytes: two hops at bitmap 0xFF00.
            IntSpec::new(IntVersion::V2, 0xFF00, hops(2)),
            Encap::Geneve { class: 0x0103 },
        )
        .build()
}

/// Every sample: (name, Ethernet frame). Reports are sent to UDP port 32766.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    v.push((
        "tr-v0.5-local-int-v0.5",
        to_collector(&tr_v05_local_payload()),
    ));
    let plain = PacketSpec::new(udp_flow()).build();
    v.push((
        "tr-v0.5-drop",
        to_collector(&report_v05(
            FixedHeaderV05 {
                dropped: true,
                hw_id: 1,
                sequence: 9,
                ingress_timestamp: 1,
                ..FixedHeaderV05::default()
            },
            Some(DropHeaderV05 {
                switch_id: 4,
                ingress_port: 3,
                egress_port: 4,
                queue_id: 2,
                drop_reason: 71,
            }),
            None,
            &plain,
        )),
    ));
    v.push((
        "tr-v1.0-int-v1.0-6hop",
        to_collector(&tr_v10_6hop_payload()),
    ));
    v.push(("tr-v2.0-int-md-5hop", to_collector(&tr_v20_5hop_payload())));
    // Two individual reports, the second with Report Length 0xFF and an Ethernet inner.
    let mut second = IndividualSpec::int(0x1001, sample_hop(6, 0, 99), 3, plain.clone());
    second.header.dropped = true;
    second.to_end = true;
    if let Some(m) = second.main.as_mut() {
        m.metadata.set(HopField::DropReason, 29);
    }
    let mut first = IndividualSpec::int(0x2000, sample_hop(6, 250, 0), 0, Vec::new());
    first.header.congested_queue = true;
    if let Some(main) = first.main.as_mut() {
        main.ds_words = 2;
    } // two domain-specific words to skip
    v.push((
        "tr-v2.0-two-reports-to-end",
        to_collector(&report_v20(
            GroupHeader {
                hw_id: 1,
                sequence: 0x3F_FFFF,
                node_id: 6,
                ..GroupHeader::default()
            },
            &[first, second],
        )),
    ));
    // Inner Only with a TLV-wrapped IPv4 packet.
    let inner_ip = ip_only(PacketSpec::new(udp_flow()));
    let mut tlv = vec![0x20, (inner_ip.len().div_ceil(4)) as u8, 0, 0];
    tlv.extend_from_slice(&inner_ip);
    tlv.resize(4 + inner_ip.len().div_ceil(4) * 4, 0);
    v.push((
        "tr-v2.0-inner-only-tlv",
        to_collector(&report_v20(
            GroupHeader {
                node_id: 2,
                ..GroupHeader::default()
            },
            &[IndividualSpec {
                header: IndividualHeader {
                    rep_type: 0,
                    in_type: 1,
                    ..IndividualHeader::default()
                },
                main: None,
                inner: tlv,
                to_end: false,
            }],
        )),
    ));
    // INT-MX: each node reports its own metadata, no inner packet.
    v.push((
        "tr-v2.0-int-mx-postcard",
        to_collector(&report_v20(
            GroupHeader {
                node_id: 11,
                sequence: 3,
                ..GroupHeader::default()
            },
            &[IndividualSpec::int(
                0x7F80,
                sample_hop(11, 321, 12),
                0,
                Vec::new(),
            )],
        )),
    ));
    v.push(("int-v2.1-md-geneve", int_md_geneve()));
    v.push((
        "int-v2-md-vxlan-gpe",
        PacketSpec::new(udp_flow())
            .with_int(
                IntSpec::new(IntVersion::V2, 0xB000, hops(3)),
                Encap::VxlanGpe {
                    next_protocol: 0x82,
                },
            )
            .build(),
    ));
    v.push((
        "int-v2-md-gre",
        PacketSpec::new(tcp_flow())
            .with_int(
                IntSpec::new(IntVersion::V2, 0xF000, hops(2)),
                Encap::Gre { protocol: 0x4569 },
            )
            .build(),
    ));
    v.push((
        "int-v1.0-vxlan-gpe",
        PacketSpec::new(udp_flow())
            .with_int(
                IntSpec::new(IntVersion::V10, 0xFE00, hops(3)),
                Encap::VxlanGpe {
                    next_protocol: 0x08,
                },
            )
            .build(),
    ));
    v.push((
        "int-v2-md-udp-new-l4-tcp",
        PacketSpec::new(tcp_flow())
            .with_int(
                IntSpec::new(IntVersion::V2, 0x9000, hops(2)),
                Encap::UdpPortNewL4 { port: 0x4568 },
            )
            .build(),
    ));
    let mut qinq = PacketSpec::new(tcp_flow()).with_int(
        IntSpec::new(IntVersion::V05, 0xFF00, hops(3)),
        Encap::Dscp { dscp: 0x20 },
    );
    qinq.vlans = vec![100, 200];
    v.push(("int-v0.5-tcp-dscp-qinq", qinq.build()));
    v.push((
        "int-v2-md-ipv6-udp-dscp",
        PacketSpec::new(FlowSpec::udp(
            ip("2001:db8::1"),
            ip("2001:db8::2"),
            5000,
            6000,
        ))
        .with_int(
            IntSpec::new(IntVersion::V2, 0x8000 | 0x2000 | 0x0080, hops(3)),
            Encap::Dscp { dscp: 0x17 },
        )
        .build(),
    ));
    let mut mx = IntSpec::new(IntVersion::V2, 0xFC00, Vec::new());
    mx.mx = true;
    v.push((
        "int-v2-mx-udp-port",
        PacketSpec::new(udp_flow())
            .with_int(mx, Encap::UdpPort { port: 0x4568 })
            .build(),
    ));
    // All-ones values are "unavailable"; checksum complement after domain-specific words.
    let mut unavailable = hops(2);
    unavailable[0].set_unavailable(HopField::HopLatency);
    unavailable[1].set_unavailable(HopField::QueueOccupancy);
    unavailable[1].set(HopField::ChecksumComplement, 0xBEEF);
    let mut spec = IntSpec::new(IntVersion::V2, 0xB001, unavailable);
    spec.ds_words_per_hop = 1;
    v.push((
        "int-v2-md-unavailable-checksum",
        PacketSpec::new(udp_flow())
            .with_int(spec, Encap::UdpPort { port: 0x4568 })
            .build(),
    ));
    v.push((
        "kdn-udp-int",
        PacketSpec::new(udp_flow())
            .with_int(
                IntSpec::new(IntVersion::V05, 0xF100, hops(3)),
                Encap::Kdn {
                    port: 5001,
                    to_controller: true,
                },
            )
            .build(),
    ));
    for (name, kind) in [
        ("gpint-measurement", ProbeKind::Measurement),
        ("gpint-failure-notification", ProbeKind::FailureNotification),
    ] {
        let mut body = Vec::new();
        GpintProbe::write(
            12,
            1,
            &[SrHeader {
                next_port: 3,
                measurement_range: 4,
            }],
            &[
                (
                    DlvHeader {
                        switch_id: 1,
                        queue_depth: 5,
                        measurement_count: 2,
                    },
                    vec![100, 200],
                ),
                (
                    DlvHeader {
                        switch_id: 2,
                        queue_depth: 9,
                        measurement_count: 1,
                    },
                    vec![300],
                ),
            ],
            &mut body,
        );
        let packet = build::ip_packet(ip("10.9.0.1"), ip("10.9.0.2"), 254, kind.dscp(), &body);
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&packet);
        v.push((name, frame));
    }
    v.push((
        "int-label-specific-flow",
        PacketSpec::new(tcp_flow())
            .with_int(
                IntSpec::new(IntVersion::V2, 0, hops(3)),
                Encap::IntLabel {
                    protocol: 253,
                    int_num_offset: 5,
                },
            )
            .build(),
    ));
    v.push(("int-label-authors", int_label_authors()));
    v
}

/// A packet as the INT-label authors' program (`my_int.p4`) leaves its second switch: the
/// source route still holds its last entry (EtherType 0x0700), then the INT option with two
/// 32-byte items, newest (switch 2) first, and the probe's data.
pub fn int_label_authors() -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 2, 1, 0, 0, 0, 1, 1, 1, 0x07, 0x00];
    // Source route header, its last entry (port 3), then the INT option's type.
    f.extend_from_slice(&[0x00, 0x00, 0x80, 0x03, 0x07, 0x01]);
    // INT option: a probe (type 0), two items.
    f.extend_from_slice(&[0x00, 2]);
    for (sw, ingress, egress, at_us, depth, delta_us) in [
        (2u8, 1u8, 3u8, 1_000_250u64, 7u32, 40u32),
        (1, 1, 2, 1_000_100, 3, 25),
    ] {
        f.extend_from_slice(&[sw, ingress, egress, 0]);
        f.extend_from_slice(&at_us.to_be_bytes()[2..]);
        f.extend_from_slice(&(at_us + u64::from(delta_us)).to_be_bytes()[2..]);
        f.extend_from_slice(&(at_us as u32).to_be_bytes());
        f.extend_from_slice(&depth.to_be_bytes());
        f.extend_from_slice(&delta_us.to_be_bytes());
        f.extend_from_slice(&depth.to_be_bytes());
    }
    f.extend_from_slice(&[0x77; 16]);
    f
}
