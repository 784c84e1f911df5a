//! The v2.0 record fast path against the general parser: on generated reports of every
//! shape (the fast path's own and all it must decline), and on those reports corrupted and
//! truncated, both give the same records and the same outcome.

mod common;

use kplane_model::{FlowKey, HopField, HopRecord, ReportRecord};
use kplane_wire::build::{Encap, FlowSpec, IndividualSpec, IntSpec, PacketSpec, report_v20};
use kplane_wire::int::IntVersion;
use kplane_wire::report::v20::GroupHeader;
use kplane_wire::{DecodeOptions, DecodeOutcome, Decoder, RecordMeta, RecordSink};
use proptest::prelude::*;

fn meta() -> RecordMeta {
    RecordMeta {
        exporter: Some("10.0.0.9:5000".parse().unwrap()),
        received_ns: 42,
    }
}

fn decode(d: &mut Decoder, payload: &[u8]) -> (Vec<ReportRecord>, DecodeOutcome) {
    let mut out = Vec::new();
    let o = d.decode_report(payload, meta(), |r| out.push(r.clone()));
    (out, o)
}

fn hop() -> impl Strategy<Value = HopRecord> {
    (
        proptest::collection::vec(any::<u64>(), HopField::COUNT),
        any::<u16>(),
    )
        .prop_map(|(vals, unavailable)| {
            let mut h = HopRecord::default();
            for (i, f) in HopField::ALL.iter().enumerate() {
                if unavailable & (1 << i) != 0 && i % 4 == 0 {
                    h.set_unavailable(*f);
                } else {
                    h.set(*f, vals[i] % f.ones());
                }
            }
            h
        })
}

fn encap() -> impl Strategy<Value = Encap> {
    proptest::sample::select(vec![
        Encap::Dscp { dscp: 0x17 },
        Encap::Dscp { dscp: 0x20 },
        Encap::UdpPort { port: 0x4568 },
        Encap::UdpPortNewL4 { port: 0x4568 },
        Encap::Gre { protocol: 0x4569 },
        Encap::VxlanGpe {
            next_protocol: 0x82,
        },
        Encap::Geneve { class: 0x0103 },
        Encap::Kdn {
            port: 5001,
            to_controller: true,
        },
    ])
}

/// Bitmaps: the specialised ones and any other.
fn bitmap() -> impl Strategy<Value = u16> {
    prop_oneof![
        proptest::sample::select(vec![0xFF00u16, 0xFC00, 0xF000, 0xCC00, 0x8000, 0xFF01]),
        any::<u16>().prop_map(|b| b & 0xFF81),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    payload: Vec<u8>,
}

fn packet() -> impl Strategy<Value = (Vec<u8>, u8)> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0usize..3,
        (any::<u16>(), any::<u16>()),
        bitmap(),
        proptest::collection::vec(hop(), 0..7),
        encap(),
        proptest::option::of(0u16..3000),
    )
        .prop_map(
            |(v6, tcp, ethernet, vlans, (sp, dp), bitmap, hops, encap, ip_length)| {
                let (s, d) = if v6 {
                    (common::ip("2001:db8::a"), common::ip("2001:db8::b"))
                } else {
                    (common::ip("10.1.1.1"), common::ip("10.2.2.2"))
                };
                let flow = match (tcp, encap) {
                    (_, Encap::UdpPort { .. } | Encap::Kdn { .. }) | (false, _) => {
                        FlowSpec::udp(s, d, sp, dp)
                    }
                    (true, _) => FlowSpec::tcp(s, d, sp, dp),
                };
                let version = if matches!(encap, Encap::Kdn { .. }) {
                    IntVersion::V05
                } else {
                    IntVersion::V2
                };
                let bitmap = if version == IntVersion::V05 {
                    bitmap & 0xFF00
                } else {
                    bitmap
                };
                let mut spec =
                    PacketSpec::new(flow).with_int(IntSpec::new(version, bitmap, hops), encap);
                spec.ethernet = ethernet;
                spec.vlans = (0..vlans as u16).map(|v| 100 + v).collect();
                spec.ip_length = ip_length;
                let in_type = match (ethernet, v6) {
                    (true, _) => 3,
                    (false, false) => 4,
                    (false, true) => 5,
                };
                (spec.build(), in_type)
            },
        )
        .prop_filter("Geneve and KDN lengths are bounded", |(p, _)| p.len() < 900)
}

fn individual() -> impl Strategy<Value = IndividualSpec> {
    (
        packet(),
        any::<u16>(),
        hop(),
        0usize..3,
        any::<u8>(),
        0u8..8,
    )
        .prop_map(|((inner, in_type), rep_md, md, ds, flags, other_type)| {
            // Mostly the right inner type; sometimes TLV, none, or a mismatch.
            let in_type = if other_type < 6 {
                in_type
            } else {
                other_type - 6 + 4
            };
            let mut ind = IndividualSpec::int(rep_md & 0x7F81, md, in_type, inner);
            ind.main.as_mut().unwrap().ds_words = ds;
            ind.header.dropped = flags & 1 != 0;
            ind.header.congested_queue = flags & 2 != 0;
            ind.header.tracked_flow = flags & 4 != 0;
            ind.header.intermediate = flags & 8 != 0;
            if flags & 0x30 == 0x30 {
                // Inner-only: no main contents.
                ind.header.rep_type = 0;
                ind.main = None;
            }
            ind.to_end = flags & 0x40 != 0;
            ind
        })
}

fn report() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(individual(), 1..3),
        0u8..64,
        0u32..0x40_0000,
        any::<u32>(),
    )
        .prop_map(|(mut inds, hw_id, sequence, node_id)| {
            let last = inds.len() - 1;
            for (i, ind) in inds.iter_mut().enumerate() {
                ind.to_end &= i == last;
            }
            let group = GroupHeader {
                hw_id,
                sequence,
                node_id,
                ..GroupHeader::default()
            };
            Case {
                payload: report_v20(group, &inds),
            }
        })
}

fn options() -> impl Strategy<Value = DecodeOptions> {
    proptest::sample::select(vec![
        DecodeOptions::default(),
        common::options(),
        // A deployment that flags INT by port only.
        DecodeOptions {
            int_dscp: Vec::new(),
            ..common::options()
        },
    ])
}

/// What a [`RecordSink`] hears, in order.
#[derive(Default)]
struct Heard {
    flows: Vec<(usize, FlowKey)>,
    records: Vec<ReportRecord>,
}

impl RecordSink for Heard {
    fn flow(&mut self, flow: &FlowKey) {
        self.flows.push((self.records.len(), *flow));
    }
    fn record(&mut self, rec: &ReportRecord) {
        self.records.push(rec.clone());
    }
}

fn same(opts: &DecodeOptions, payload: &[u8]) -> Result<(), TestCaseError> {
    let fast = decode(&mut Decoder::new(opts.clone()), payload);
    let general = decode(&mut Decoder::general_only(opts.clone()), payload);
    prop_assert_eq!(&fast, &general);
    // Through a sink: the same records, and each flow hint is the very next record's flow.
    let mut heard = Heard::default();
    let outcome = Decoder::new(opts.clone()).decode_report_to(payload, meta(), &mut heard);
    prop_assert_eq!((&heard.records, &outcome), (&fast.0, &fast.1));
    let mut last = None;
    for &(at, flow) in &heard.flows {
        prop_assert!(last.is_none_or(|l| l < at), "two hints before one record");
        prop_assert_eq!(heard.records.get(at).and_then(|r| r.flow), Some(flow));
        last = Some(at);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_path_equals_general_parser(case in report(), opts in options()) {
        same(&opts, &case.payload)?;
    }

    #[test]
    fn fast_path_equals_general_parser_on_corruption(
        case in report(),
        opts in options(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut p = case.payload.clone();
        for (at, x) in flips {
            let i = at.index(p.len());
            p[i] ^= x.max(1);
        }
        if truncate {
            p.truncate(cut.index(p.len() + 1));
        }
        same(&opts, &p)?;
    }
}

#[test]
fn the_common_shapes_take_the_fast_path_and_match() {
    let opts = common::options();
    let v4 = common::ip("10.1.1.1");
    let v6 = common::ip("2001:db8::1");
    let hops = common::hops(5);
    let md = kplane_wire::samples::sink_md();
    let mut shapes = vec![("benchmark sample", common::tr_v20_5hop_payload())];
    for (name, flow, ethernet, encap, to_end) in [
        (
            "ipv4 udp port",
            FlowSpec::udp(v4, v4, 1, 2),
            false,
            Encap::UdpPort { port: 0x4568 },
            false,
        ),
        (
            "ipv6 udp dscp",
            FlowSpec::udp(v6, v6, 1, 2),
            false,
            Encap::Dscp { dscp: 0x17 },
            true,
        ),
        (
            "ethernet tcp dscp",
            FlowSpec::tcp(v4, v4, 1, 2),
            true,
            Encap::Dscp { dscp: 0x20 },
            false,
        ),
        (
            "ethernet ipv6 tcp",
            FlowSpec::tcp(v6, v6, 1, 2),
            true,
            Encap::Dscp { dscp: 0x17 },
            false,
        ),
    ] {
        let mut spec = PacketSpec::new(flow)
            .with_int(IntSpec::new(IntVersion::V2, 0xFD00, hops.clone()), encap);
        spec.ethernet = ethernet;
        let in_type = match (ethernet, flow.src.is_ipv6()) {
            (true, _) => 3,
            (false, false) => 4,
            (false, true) => 5,
        };
        let mut ind = IndividualSpec::int(0x7F81, md, in_type, spec.build());
        ind.to_end = to_end;
        shapes.push((
            name,
            report_v20(
                GroupHeader {
                    node_id: 6,
                    ..GroupHeader::default()
                },
                &[ind],
            ),
        ));
    }
    for (name, payload) in shapes {
        let mut d = Decoder::new(opts.clone());
        let fast = decode(&mut d, &payload);
        assert_eq!(d.fast_path_records(), 1, "{name}: fast path declined");
        assert_eq!(fast.1.records, 1, "{name}");
        assert_eq!(fast.0[0].hops.len(), 6, "{name}");
        let mut g = Decoder::general_only(opts.clone());
        assert_eq!(fast, decode(&mut g, &payload), "{name}");
        assert_eq!(g.fast_path_records(), 0);
    }
}

#[test]
fn other_shapes_take_the_general_parser() {
    let opts = common::options();
    let v4 = common::ip("10.1.1.1");
    for (name, vlans, encap) in [
        ("vlan", vec![7], Encap::Dscp { dscp: 0x17 }),
        ("geneve", vec![], Encap::Geneve { class: 0x0103 }),
        ("npt 2", vec![], Encap::UdpPortNewL4 { port: 0x4568 }),
    ] {
        let mut spec = PacketSpec::new(FlowSpec::tcp(v4, v4, 1, 2))
            .with_int(IntSpec::new(IntVersion::V2, 0xFF00, common::hops(2)), encap);
        spec.vlans = vlans;
        let ind = IndividualSpec::int(0x7C00, kplane_wire::samples::sink_md(), 3, spec.build());
        let payload = report_v20(GroupHeader::default(), &[ind]);
        let mut d = Decoder::new(opts.clone());
        let got = decode(&mut d, &payload);
        assert_eq!(d.fast_path_records(), 0, "{name}");
        assert_eq!(got.1.records, 1, "{name}: {:?}", got.1.error);
        assert_eq!(got.0[0].hops.len(), 3, "{name}");
    }
}
