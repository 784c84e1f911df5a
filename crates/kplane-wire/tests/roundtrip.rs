//! Property tests: whatever the builders write, the decoders read back exactly.

mod common;

use kplane_model::{HopField, HopRecord, ReportRecord};
use kplane_wire::build::{
    Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, report_v05, report_v10, report_v20,
};
use kplane_wire::int::{IntVersion, baseline_len};
use kplane_wire::papers::{DlvHeader, GpintProbe, ProbeKind, SrHeader};
use kplane_wire::report::v05::{FixedHeaderV05, LocalHeaderV05};
use kplane_wire::report::v10::ReportHeaderV10;
use kplane_wire::report::v20::GroupHeader;
use kplane_wire::{Bytes, Decoder, RecordMeta, Start, decode_frame};
use proptest::prelude::*;

/// Record fields an instruction bit covers, per version.
fn covered(version: IntVersion, bit: u32) -> &'static [HopField] {
    use HopField::*;
    match (bit, version) {
        (0, _) => &[NodeId],
        (1, _) => &[L1IngressPort, L1EgressPort],
        (2, _) => &[HopLatency],
        (3, _) => &[QueueId, QueueOccupancy],
        (4, _) => &[IngressTimestamp],
        (5, _) => &[EgressTimestamp],
        (6, IntVersion::V05) => &[QueueId, QueueCongestion],
        (6, _) => &[L2IngressPort, L2EgressPort],
        (7, _) => &[TxUtilization],
        (8, IntVersion::V2) => &[BufferId, BufferOccupancy],
        (15, IntVersion::V10 | IntVersion::V2) => &[ChecksumComplement],
        _ => &[],
    }
}

fn width(version: IntVersion, f: HopField) -> u32 {
    match f {
        HopField::IngressTimestamp | HopField::EgressTimestamp if version != IntVersion::V2 => 32,
        _ => f.max_bits(),
    }
}

/// A hop with every field set to a value below all-ones, some marked unavailable.
fn hop(version: IntVersion) -> impl Strategy<Value = HopRecord> {
    (
        proptest::collection::vec(any::<u64>(), HopField::COUNT),
        any::<u16>(),
    )
        .prop_map(move |(vals, unavailable)| {
            let mut h = HopRecord::default();
            for (i, f) in HopField::ALL.iter().enumerate() {
                let w = width(version, *f);
                let max = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
                if unavailable & (1 << i) != 0 && i % 3 == 0 {
                    h.set_unavailable(*f);
                } else {
                    h.set(*f, vals[i] % max);
                }
            }
            h
        })
}

/// What decoding should return for `h` under `bitmap`: covered fields only.
fn expected(version: IntVersion, bitmap: u16, h: &HopRecord) -> HopRecord {
    let mut e = HopRecord::default();
    for bit in 0..16 {
        if bitmap & (0x8000 >> bit) == 0 {
            continue;
        }
        for f in covered(version, bit) {
            match h.get(*f) {
                Some(v) => e.set(*f, v),
                None => e.set_unavailable(*f),
            }
        }
    }
    e
}

fn valid_bitmap(version: IntVersion) -> impl Strategy<Value = u16> {
    let mask = match version {
        IntVersion::V05 => 0xFF00,
        IntVersion::V10 => 0xFF01,
        IntVersion::V2 => 0xFF81,
    };
    any::<u16>().prop_map(move |b| b & mask)
}

fn encap(version: IntVersion) -> impl Strategy<Value = Encap> {
    let all: Vec<Encap> = match version {
        IntVersion::V05 => vec![
            Encap::Dscp { dscp: 0x17 },
            Encap::UdpPort { port: 0x4568 },
            Encap::Kdn {
                port: 5001,
                to_controller: false,
            },
        ],
        IntVersion::V10 => vec![
            Encap::Dscp { dscp: 0x20 },
            Encap::UdpPort { port: 0x4568 },
            Encap::VxlanGpe {
                next_protocol: 0x08,
            },
        ],
        IntVersion::V2 => vec![
            Encap::Dscp { dscp: 0x17 },
            Encap::UdpPort { port: 0x4568 },
            Encap::UdpPortNewL4 { port: 0x4568 },
            Encap::Gre { protocol: 0x4569 },
            Encap::VxlanGpe {
                next_protocol: 0x82,
            },
            Encap::Geneve { class: 0x0103 },
        ],
    };
    proptest::sample::select(all)
}

fn flow() -> impl Strategy<Value = FlowSpec> {
    (any::<bool>(), any::<bool>(), any::<u16>(), any::<u16>()).prop_map(|(v6, tcp, sp, dp)| {
        let (s, d) = if v6 {
            (common::ip("2001:db8::a"), common::ip("2001:db8::b"))
        } else {
            (common::ip("10.1.1.1"), common::ip("10.2.2.2"))
        };
        let dp = if dp == 0x4568 { 80 } else { dp };
        if tcp {
            FlowSpec::tcp(s, d, sp, dp)
        } else {
            FlowSpec::udp(s, d, sp, dp)
        }
    })
}

fn case(version: IntVersion) -> impl Strategy<Value = (FlowSpec, IntSpec, Encap)> {
    (
        flow(),
        valid_bitmap(version),
        proptest::collection::vec(hop(version), 0..7),
        encap(version),
    )
        .prop_map(move |(f, bitmap, hops, e)| {
            let f = match e {
                // These carry the original UDP payload / port after INT: a UDP flow.
                Encap::UdpPort { .. } | Encap::Kdn { .. } => {
                    FlowSpec::udp(f.src, f.dst, f.src_port, f.dst_port)
                }
                _ => f,
            };
            (f, IntSpec::new(version, bitmap, hops), e)
        })
        .prop_filter("Geneve option holds at most 124 bytes", |(_, spec, e)| {
            !matches!(e, Encap::Geneve { .. }) || 12 + spec.stride() * spec.hops.len() <= 124
        })
        .prop_filter(
            "KDN and v0.5 stacks are bounded by 8-bit lengths",
            |(_, spec, _)| spec.stride() * spec.hops.len() < 900,
        )
}

/// INT v1.0 over a UDP port has no field for the original destination port.
fn expected_dst_port(f: &FlowSpec, version: IntVersion, e: Encap) -> u16 {
    match (version, e) {
        (IntVersion::V10, Encap::UdpPort { port }) => port,
        _ => f.dst_port,
    }
}

fn decode_one(frame: &[u8]) -> ReportRecord {
    let opts = common::options();
    let decoded = decode_frame(frame, Start::Ethernet, &opts).expect("decodes");
    let mut rec = ReportRecord::default();
    let mut out = None;
    let o = decoded.for_each_record(RecordMeta::default(), &mut rec, |r| out = Some(r.clone()));
    assert_eq!(o.error, None);
    out.expect("one record")
}

fn check_int(f: FlowSpec, mut spec: IntSpec, e: Encap) -> Result<(), TestCaseError> {
    if spec.stride() == 0 {
        spec.hops.clear(); // zero-length hops are not observable on the wire
    }
    let frame = PacketSpec::new(f).with_int(spec.clone(), e).build();
    let rec = decode_one(&frame);
    let want: Vec<_> = spec
        .hops
        .iter()
        .map(|h| expected(spec.version, spec.bitmap, h))
        .collect();
    prop_assert_eq!(&rec.hops, &want);
    let key = rec.flow.expect("flow");
    prop_assert_eq!(
        (
            key.src_ip,
            key.dst_ip,
            key.protocol,
            key.src_port,
            key.dst_port
        ),
        (
            f.src,
            f.dst,
            f.protocol,
            f.src_port,
            expected_dst_port(&f, spec.version, e)
        )
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn int_v05_round_trips((f, spec, e) in case(IntVersion::V05)) {
        check_int(f, spec, e)?;
    }

    #[test]
    fn int_v10_round_trips((f, spec, e) in case(IntVersion::V10)) {
        check_int(f, spec, e)?;
    }

    #[test]
    fn int_v2_round_trips((f, spec, e) in case(IntVersion::V2), ds in 0usize..3) {
        let mut spec = spec;
        spec.ds_words_per_hop = ds;
        prop_assume!(!matches!(e, Encap::Geneve { .. }) || 12 + spec.stride() * spec.hops.len() <= 124);
        check_int(f, spec, e)?;
    }

    #[test]
    fn int_label_round_trips(hops in proptest::collection::vec(hop(IntVersion::V2), 0..5), specific in any::<bool>()) {
        let f = FlowSpec::tcp(common::ip("10.3.3.3"), common::ip("10.4.4.4"), 1000, 2000);
        let spec = IntSpec::new(IntVersion::V2, 0, hops.clone());
        let e = Encap::IntLabel { protocol: 253, int_num_offset: if specific && !hops.is_empty() { 5 } else { 0 } };
        // (A specific flow's INT_num starts at MAX_hop and grows with the first label.)
        let rec = decode_one(&PacketSpec::new(f).with_int(spec, e).build());
        prop_assert_eq!(rec.hops.len(), hops.len());
        for (got, h) in rec.hops.iter().zip(&hops) {
            prop_assert_eq!(got.node_id(), h.node_id());
            prop_assert_eq!(got.hop_latency_ns(), h.hop_latency_ns());
            prop_assert_eq!(got.get(HopField::IngressTimestamp), h.get(HopField::IngressTimestamp));
        }
        prop_assert_eq!(rec.envelope.flags.contains(kplane_model::ReportFlags::SPECIFIC_FLOW), specific && !hops.is_empty());
    }

    #[test]
    fn report_v20_round_trips(
        rep_md in any::<u16>(),
        md in hop(IntVersion::V2),
        hw_id in 0u8..64,
        seq in 0u32..0x40_0000,
        node in any::<u32>(),
        ds in 0usize..3,
    ) {
        let rep_md = rep_md & 0x7F81; // bits 1-8 and 15 carry data
        let mut ind = IndividualSpec::int(rep_md, md, 0, Vec::new());
        ind.main.as_mut().unwrap().ds_words = ds;
        let payload = report_v20(GroupHeader { hw_id, sequence: seq, node_id: node, ..GroupHeader::default() }, &[ind]);
        let mut d = Decoder::default();
        let mut got = Vec::new();
        let o = d.decode_report(&payload, RecordMeta::default(), |r| got.push(r.clone()));
        prop_assert_eq!(o.error, None);
        let r = &got[0];
        prop_assert_eq!((r.envelope.hw_id, r.envelope.sequence, r.envelope.node_id), (hw_id, Some(seq), Some(node)));
        let mut want = expected(IntVersion::V2, rep_md & 0x7FFE, &md);
        if rep_md & 1 != 0 {
            match md.get(HopField::QueueId) { Some(v) => want.set(HopField::QueueId, v), None => want.set_unavailable(HopField::QueueId) }
            match md.get(HopField::DropReason) { Some(v) => want.set(HopField::DropReason, v), None => want.set_unavailable(HopField::DropReason) }
        }
        want.set(HopField::NodeId, node.into());
        prop_assert_eq!(&r.hops, &vec![want]);
        prop_assert_eq!(baseline_len(IntVersion::V2, rep_md & 0x7FFE) % 4, 0);
    }

    #[test]
    fn report_v10_round_trips(bits in 0u8..64, md in hop(IntVersion::V10), switch in any::<u32>(), seq in any::<u32>()) {
        let inner = PacketSpec::new(FlowSpec::udp(common::ip("10.0.0.1"), common::ip("10.0.0.2"), 1, 2)).build();
        let payload = report_v10(ReportHeaderV10 { rep_md_bits: bits, switch_id: switch, sequence: seq, ..ReportHeaderV10::default() }, &md, &inner);
        let mut d = Decoder::default();
        let mut got = Vec::new();
        let o = d.decode_report(&payload, RecordMeta::default(), |r| got.push(r.clone()));
        prop_assert_eq!(o.error, None);
        let h = &got[0].hops[0];
        prop_assert_eq!(h.node_id(), Some(switch));
        prop_assert_eq!(got[0].envelope.sequence, Some(seq));
        if bits & 0x10 != 0 { prop_assert_eq!(h.hop_latency_ns(), md.hop_latency_ns()); }
        if bits & 0x01 != 0 { prop_assert_eq!(h.tx_utilization(), md.tx_utilization()); }
        if bits & 0x20 != 0 { prop_assert_eq!(h.egress_port(), md.egress_port()); }
    }

    #[test]
    fn report_v05_round_trips(seq in any::<u32>(), ig in any::<u32>(), eg in any::<u32>(), occ in 0u32..0xFF_FFFF, hw in 0u8..64) {
        let inner = PacketSpec::new(FlowSpec::udp(common::ip("10.0.0.1"), common::ip("10.0.0.2"), 1, 2)).build();
        let payload = report_v05(
            FixedHeaderV05 { hw_id: hw, sequence: seq, ingress_timestamp: ig, ..FixedHeaderV05::default() },
            None,
            Some(LocalHeaderV05 { switch_id: 5, queue_occupancy: occ, egress_timestamp: eg, ..LocalHeaderV05::default() }),
            &inner,
        );
        let mut d = Decoder::default();
        let mut got = Vec::new();
        let o = d.decode_report(&payload, RecordMeta::default(), |r| got.push(r.clone()));
        prop_assert_eq!(o.error, None);
        prop_assert_eq!((got[0].envelope.sequence, got[0].envelope.hw_id), (Some(seq), hw));
        prop_assert_eq!(got[0].hops[0].hop_latency_ns(), Some(eg.wrapping_sub(ig)));
        prop_assert_eq!(got[0].hops[0].queue_occupancy(), Some(occ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn int_mx_round_trips(f in flow(), bitmap in valid_bitmap(IntVersion::V2), e in encap(IntVersion::V2)) {
        let f = match e {
            Encap::UdpPort { .. } => FlowSpec::udp(f.src, f.dst, f.src_port, f.dst_port),
            _ => f,
        };
        let mut spec = IntSpec::new(IntVersion::V2, bitmap, Vec::new());
        spec.mx = true;
        let rec = decode_one(&PacketSpec::new(f).with_int(spec, e).build());
        prop_assert_eq!(rec.envelope.format, kplane_model::ReportFormat::IntMxV2);
        prop_assert!(rec.hops.is_empty());
        let key = rec.flow.expect("flow");
        prop_assert_eq!((key.src_ip, key.dst_ip, key.dst_port), (f.src, f.dst, f.dst_port));
    }

    #[test]
    fn gpint_probe_round_trips(
        request_id in 0u16..0x8000,
        request_type in 0u8..2,
        route in proptest::collection::vec((any::<u8>(), any::<u16>()), 0..6),
        devices in proptest::collection::vec((any::<u8>(), any::<u8>(), proptest::collection::vec(any::<u32>(), 0..4)), 0..6),
        kind in proptest::sample::select(vec![ProbeKind::Measurement, ProbeKind::Feedback, ProbeKind::FailureNotification]),
    ) {
        let route: Vec<_> = route.into_iter().map(|(p, r)| SrHeader { next_port: p, measurement_range: r }).collect();
        let devices: Vec<_> = devices
            .into_iter()
            .map(|(sid, q, m)| (DlvHeader { switch_id: sid, queue_depth: q, measurement_count: m.len() as u16 }, m))
            .collect();
        let mut body = Vec::new();
        GpintProbe::write(request_id, request_type, &route, &devices, &mut body);
        let ip = kplane_wire::build::ip_packet(common::ip("10.9.0.1"), common::ip("10.9.0.2"), 254, kind.dscp(), &body);
        let (probe, rest) = GpintProbe::parse(kind, Bytes::new(&ip[20..])).expect("decodes");
        prop_assert!(rest.is_empty());
        prop_assert_eq!((probe.kind, probe.request_id, probe.request_type), (kind, request_id, request_type));
        prop_assert_eq!(probe.source_route().collect::<Vec<_>>(), route);
        prop_assert_eq!(probe.devices().collect::<Vec<_>>(), devices.iter().map(|d| d.0).collect::<Vec<_>>());
        prop_assert_eq!(probe.measurements().collect::<Vec<_>>(), devices.iter().flat_map(|d| d.1.clone()).collect::<Vec<_>>());
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&ip);
        let rec = decode_one(&frame);
        // The stack is newest first; the record's path is in visiting order.
        prop_assert_eq!(rec.path().collect::<Vec<_>>(), devices.iter().rev().map(|d| Some(u32::from(d.0.switch_id))).collect::<Vec<_>>());
    }
}
