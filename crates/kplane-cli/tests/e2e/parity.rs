//! The P4 program against the emulator, packet for packet: the same packets go through a BMv2
//! switch running `p4/kplane_int.p4` and through the emulator's sink
//! (`kplane_emulator::detect`, `kplane_emulator::report`: the code `kplane emulate` runs), and
//! their detection decisions, their reports (decoded field by field by kplane's decoder) and
//! the tx utilisation the switch stamps (`kplane_p4::tx_util`) must agree. Rules come from
//! `tune` intents through the intent API and its P4Runtime driver. Skipped without BMv2 or
//! root unless `KPLANE_REQUIRE_P4=1` (CI).

use std::time::Duration;

use kplane_emulator::detect::{Detection, Rule};
use kplane_emulator::report::{Hop, PacketInfo, ReportVersion, sink_report};
use kplane_emulator::tables::Rule as TableRule;
use kplane_model::{HopField, ReportRecord};
use kplane_testkit::bmv2;
use kplane_wire::build::{Encap, FlowSpec, IntSpec, PacketSpec};
use kplane_wire::int::IntVersion;
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

use kplane_p4::EntrySpec;

use super::bmv2::{Rig, decode_report_frame, wait_for_forwarding, wait_for_state};

/// Node id, L1 ports, hop latency, queue occupancy, tx utilisation: 5 words a hop.
const BITMAP: u16 = 0xF100;
/// Everything v2.x defines up to tx utilisation (both timestamps, L2 ports): 11 words a hop.
const FULL_BITMAP: u16 = 0xFF00;
const MARK: &[u8] = b"kplane-parity";

/// An upstream hop as a switch before this one pushed it.
fn hop(node: u32, latency_ns: u32, queue: u32, tx: u32) -> Hop {
    Hop {
        node,
        in_port: 3,
        out_port: 4,
        latency_ns,
        queue_occupancy: queue,
        tx_utilization: tx,
        ingress_ns: 1_000 * u64::from(node),
        egress_ns: 1_000 * u64::from(node) + u64::from(latency_ns),
        ..Default::default()
    }
}

/// One flow's rule (a `tune` intent's detection) and its packets' upstream stacks.
struct Phase {
    dst_port: u16,
    bitmap: u16,
    detection: &'static str,
    packets: Vec<Vec<Hop>>,
}

fn phases() -> Vec<Phase> {
    let q = |a: u32, b: u32| vec![hop(7, 1_000, a, 0), hop(8, 1_000, b, 0)];
    let tx = |a: u32, b: u32| vec![hop(7, 1_000, 0, a), hop(8, 1_000, 0, b)];
    let lit = |lat: u32, queue: u32, tx: u32| vec![hop(7, lat, queue, tx), hop(8, 1_000, 2, 100)];
    vec![
        // Per hop: hop 7 moving, then a node the sink never saw (only upstream) is reported.
        Phase {
            dst_port: 5001,
            bitmap: BITMAP,
            detection: "{algorithm: per-hop, measurement: queue-occupancy, threshold: 5}",
            packets: vec![
                q(0, 0),
                q(3, 2),
                q(10, 2),
                vec![hop(9, 1_000, 0, 0), hop(8, 1_000, 2, 0)],
                vec![hop(9, 1_000, 1, 0), hop(8, 1_000, 2, 0)],
            ],
        },
        // Per flow: the sum over the hops.
        Phase {
            dst_port: 5002,
            bitmap: BITMAP,
            detection: "{algorithm: per-flow, measurement: queue-occupancy, threshold: 10}",
            packets: vec![q(5, 5), q(9, 9), q(20, 5), q(20, 5)],
        },
        // EWMA of the sum, w = 1/4.
        Phase {
            dst_port: 5003,
            bitmap: BITMAP,
            detection: "{algorithm: ewma, measurement: queue-occupancy, threshold: 4, weight: 0.25}",
            packets: vec![q(5, 5), q(15, 15), q(15, 15), q(15, 15), q(15, 15), q(0, 0)],
        },
        // Complex, four literals over the largest values.
        Phase {
            dst_port: 5004,
            bitmap: BITMAP,
            detection: "{algorithm: complex, when: [{measurement: queue-occupancy, above: 8}, \
                        {measurement: tx-utilization, below: 500}, \
                        {measurement: hop-latency, above: 50000000}, \
                        {measurement: queue-occupancy, rises-by: 3}]}",
            packets: vec![
                lit(100_000_000, 9, 100),
                lit(100_000_000, 9, 100),
                lit(100_000_000, 20, 100),
                lit(100_000_000, 30, 600),
                lit(1_000, 40, 100),
            ],
        },
        // Per flow on tx utilisation, with timestamps and L2 ports moving its place in a hop.
        Phase {
            dst_port: 5005,
            bitmap: FULL_BITMAP,
            detection: "{algorithm: per-flow, measurement: tx-utilization, threshold: 50}",
            packets: vec![tx(100, 200), tx(120, 200), tx(100, 100)],
        },
    ]
}

/// A UDP packet 10.0.1.1 → `dst`:`dst_port` arriving with `upstream` hops of INT-MD v2, its
/// data the mark and `index`.
fn frame(dst: &str, dst_port: u16, bitmap: u16, index: u8, upstream: &[Hop]) -> Vec<u8> {
    let flow = FlowSpec::udp(
        "10.0.1.1".parse().unwrap(),
        dst.parse().unwrap(),
        1000,
        dst_port,
    );
    let mut spec = PacketSpec::new(flow);
    // Whole words: a report carries the packet cut to whole words.
    spec.payload = [MARK, &[index], &[0, 0]].concat();
    spec.with_int(
        IntSpec::new(
            IntVersion::V2,
            bitmap,
            upstream.iter().map(Hop::record).collect(),
        ),
        Encap::Dscp { dscp: 0x17 },
    )
    .build()
}

/// The packet index a frame carries after the mark.
fn index(f: &[u8]) -> Option<u8> {
    let at = f.windows(MARK.len()).position(|w| w == MARK)?;
    f.get(at + MARK.len()).copied()
}

/// A Telemetry Report (the UDP payload, as the emulator builds it) decoded by kplane's
/// decoder.
fn decode(report: &[u8]) -> ReportRecord {
    let mut out = None;
    Decoder::new(DecodeOptions::default())
        .decode_report(report, RecordMeta::default(), |r| out = Some(r.clone()));
    out.expect("the report decodes")
}

/// The sink's own hop as its report gives it.
fn own_hop(r: &ReportRecord) -> Hop {
    let me = r.hops.last().expect("the sink's hop");
    let f = |k: HopField| me.get(k).unwrap_or(0);
    Hop {
        node: r.envelope.node_id.unwrap_or(0),
        in_port: f(HopField::L1IngressPort) as u16,
        out_port: f(HopField::L1EgressPort) as u16,
        latency_ns: f(HopField::HopLatency) as u32,
        queue_id: f(HopField::QueueId) as u8,
        queue_occupancy: f(HopField::QueueOccupancy) as u32,
        ingress_ns: f(HopField::IngressTimestamp),
        egress_ns: f(HopField::EgressTimestamp),
        tx_utilization: f(HopField::TxUtilization) as u32,
    }
}

#[test]
fn bmv2_and_the_emulator_decide_and_report_the_same_packets_alike() {
    if !bmv2::available() {
        return;
    }
    // Port 1 from an upstream switch, host 10.0.2.1 on port 2 (this switch is its sink), the
    // next switch on port 3, reports on port 4.
    let rig = Rig::start(
        "par",
        4,
        &[("10.0.2.1/32", 2)],
        &[("10.0.2.1/32", 2), ("10.0.3.0/24", 3)],
        "",
    );
    let phases = phases();
    // Each phase's rule as the intent compiled it (what the driver wrote to the switch).
    let rules: Vec<Rule> = phases
        .iter()
        .map(|p| {
            let id = rig.apply(
                &format!("tune{}", p.dst_port),
                &format!(
                    "kind: tune\nmatch: {{dst: 10.0.2.1, protocol: udp, dst-port: {}}}\ndetection: {}\n",
                    p.dst_port, p.detection
                ),
            );
            let v = wait_for_state(rig.api_addr, &id, "active");
            let entry: EntrySpec = serde_json::from_value(v["entries"][0].clone()).unwrap();
            assert_eq!(entry.table, "int_sink_detection", "{v}");
            Rule::of(&TableRule::new(&entry).unwrap())
        })
        .collect();
    wait_for_forwarding(&rig.sw, Duration::from_secs(10));

    // Every packet, 40 ms apart (idle queues, idle windows), into port 1; reports on port 4.
    let sent: Vec<(usize, &Phase, Vec<Hop>, Vec<u8>)> = phases
        .iter()
        .enumerate()
        .flat_map(|(n, p)| p.packets.iter().map(move |h| (n, p, h.clone())))
        .enumerate()
        .map(|(i, (n, p, h))| {
            let f = frame("10.0.2.1", p.dst_port, p.bitmap, i as u8, &h);
            (n, p, h, f)
        })
        .collect();
    // Which packets the switch reports is what is compared, so the capture cannot stop at a
    // count: it lasts the sending and 6 s more (a switch on a loaded machine can lag seconds).
    let gap = Duration::from_millis(40);
    let wait = gap * sent.len() as u32 + Duration::from_secs(6);
    let reports = rig.capture_up_to(4, sent.len(), wait, |f| index(f).is_some());
    let frames = sent.iter().map(|(_, _, _, f)| f.clone()).collect();
    rig.send(1, frames, gap);
    let mut by_index = std::collections::BTreeMap::new();
    for f in reports.join().unwrap() {
        let r = decode_report_frame(&f, DecodeOptions::default());
        by_index.insert(index(&f).unwrap() as usize, r);
    }

    // The emulator's sink on the same packets: one detection state for the switch, the rule
    // each tune intent compiled to, the sink's own hop as the switch measured it (idle: no
    // queue, no utilisation, when it did not report).
    let mut emulator = Detection::default();
    let (mut bmv2_said, mut emulator_said) = (Vec::new(), Vec::new());
    for (i, (phase, p, upstream, f)) in sent.iter().enumerate() {
        let report = by_index.get(&i);
        let own = report.map_or(
            Hop {
                node: 1,
                ..Default::default()
            },
            own_hop,
        );
        let flow = u64::from(p.dst_port);
        emulator_said.push(emulator.decide(&rules[*phase], flow, p.bitmap, upstream, &own));
        bmv2_said.push(report.is_some());
        if let Some(r) = report {
            // Field by field: the emulator's report of the same packet, sink hop and sequence.
            let info = PacketInfo {
                src: "10.0.1.1".parse().unwrap(),
                dst: "10.0.2.1".parse().unwrap(),
                protocol: 17,
                src_port: 1000,
                dst_port: p.dst_port,
                bytes: (f.len() - 14) as u32,
            };
            let seq = r.envelope.sequence.unwrap();
            let report = sink_report(
                ReportVersion::V20,
                p.bitmap,
                0,
                seq,
                &own,
                upstream,
                &info,
                false,
            );
            let emulated = decode(&report);
            assert_eq!(
                *r, emulated,
                "packet {i}: BMv2's report, then the emulator's"
            );
        }
    }
    let phase_of = |v: &[bool]| -> Vec<Vec<bool>> {
        let mut at = 0;
        phases
            .iter()
            .map(|p| {
                let part = v[at..at + p.packets.len()].to_vec();
                at += p.packets.len();
                part
            })
            .collect()
    };
    assert_eq!(
        phase_of(&bmv2_said),
        phase_of(&emulator_said),
        "reported or not, per phase: BMv2, then the emulator"
    );
    // The rules decide something: the first packet of each is reported, others are not, and a
    // node only upstream of the sink is caught by per-hop detection.
    assert_eq!(phase_of(&bmv2_said)[0], [true, false, true, true, false]);
    assert!(bmv2_said.iter().any(|r| !r) && bmv2_said.iter().filter(|r| **r).count() >= 8);
}

#[test]
fn bmv2_stamps_the_tx_utilisation_the_emulator_computes() {
    if !bmv2::available() {
        return;
    }
    let rig = Rig::start(
        "tx",
        4,
        &[("10.0.2.1/32", 2)],
        &[("10.0.2.1/32", 2), ("10.0.3.0/24", 3)],
        "",
    );
    wait_for_forwarding(&rig.sw, Duration::from_secs(10));
    // A burst through the switch as a transit (port 1 → the next switch on port 3): each
    // packet carries the switch's hop, its egress time and tx utilisation on top.
    let frames: Vec<Vec<u8>> = (0..40u8)
        .map(|i| frame("10.0.3.1", 5000, FULL_BITMAP, i, &[hop(7, 1_000, 0, 0)]))
        .collect();
    let out = rig.capture_up_to(3, frames.len(), Duration::from_secs(15), |f| {
        index(f).is_some()
    });
    rig.send(1, frames.clone(), Duration::from_micros(40));
    let opts = DecodeOptions::default();
    let mut window = kplane_p4::tx_util::TxWindow::default();
    let scale = kplane_p4::tx_util::scale_q16(100_000_000);
    let mut by_index = std::collections::BTreeMap::new();
    for f in out.join().unwrap() {
        by_index.insert(usize::from(index(&f).unwrap()), f);
    }
    // Compared in order up to the first packet that did not leave: past it, whether the switch
    // counted that packet is unknown (a loaded machine can lose a frame of the burst on the
    // way in or out), and so is its window.
    let mut left_at = Vec::new();
    for (i, f) in (0..frames.len()).map_while(|i| Some((i, by_index.get(&i)?))) {
        let d = kplane_wire::decode_frame(f, kplane_wire::Start::Ethernet, &opts).unwrap();
        let kplane_wire::Decoded::Packet(pkt) = d else {
            panic!("an INT packet")
        };
        let mut rec = ReportRecord::default();
        assert!(
            pkt.fill_record(RecordMeta::default(), &mut rec),
            "INT on the packet"
        );
        let me = rec.hops.last().expect("this switch's hop");
        let egress_us = me.get(HopField::EgressTimestamp).unwrap() / 1000;
        let util = me.get(HopField::TxUtilization).unwrap();
        // The switch counts the frame as it arrived.
        let want = window.send(egress_us, frames[i].len() as u64, scale);
        left_at.push(egress_us);
        assert_eq!(util, u64::from(want), "packet {i} at {egress_us} µs");
    }
    assert!(
        left_at.len() >= frames.len() - 4,
        "{} of {} packets compared; these left: {:?}",
        left_at.len(),
        frames.len(),
        by_index.keys().collect::<Vec<_>>()
    );
    // A packet carries a non-zero utilisation (compared above like any other) only when the
    // one before it left in the previous 128 µs window, which takes a switch that sends a
    // packet in under 256 µs. BMv2 on a slow machine does not (one every 300–450 µs on a
    // 2-vCPU VM): there every stamp and the model are 0, and only the idle-window rule is
    // compared.
    let tick = |us: &u64| us >> kplane_p4::tx_util::WINDOW_US_LOG2;
    if !left_at.windows(2).any(|w| tick(&w[1]) == tick(&w[0]) + 1) {
        eprintln!(
            "BMv2 sent no two packets in adjacent windows (left at {left_at:?} µs): \
             only utilisation 0 after idle windows was compared"
        );
    }
}
