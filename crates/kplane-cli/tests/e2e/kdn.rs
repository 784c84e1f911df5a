//! The KDN paper's INT-over-UDP (kdn-architecture-int-onos §V-A) on a BMv2 switch running
//! `p4/kplane_int.p4`, chosen by a `monitor` intent's `encapsulation: kdn` through the intent
//! API and its P4Runtime driver: the source inserts it (the UDP destination port becomes the
//! INT port, the original kept in the KDN header), a transit adds its items, the sink restores
//! the packet for the host and reports it (O = 1) to the collector; kplane's decoder reads
//! every stage, and the bytes added are the paper's bandwidth formula exactly. Skipped without
//! BMv2 or root unless `KPLANE_REQUIRE_P4=1` (CI).

use std::time::Duration;

use kplane_model::{HopField, ReportFlags, ReportRecord};
use kplane_testkit::bmv2;
use kplane_wire::build::{Encap, FlowSpec, IntSpec, PacketSpec, sample_hop};
use kplane_wire::int::IntVersion;
use kplane_wire::{DecodeOptions, Decoded, RecordMeta, Start};

use super::bmv2::{Rig, decode_report_frame, wait_for_forwarding};

/// The P4 program's `KDN_INT_PORT`.
const KDN_PORT: u16 = 19268;
/// The paper's three monitoring fields: switch id, hop latency, queue occupancy.
const BITMAP: u16 = 0xB000;
const MARK: &[u8] = b"kplane-kdn-mark!";

fn opts() -> DecodeOptions {
    DecodeOptions {
        kdn_port: Some(KDN_PORT),
        ..DecodeOptions::default()
    }
}

/// A UDP packet `src` → `dst`:5000 with the mark as data, carrying KDN INT-over-UDP with
/// `upstream` hops when there are any.
fn frame(src: &str, dst: &str, upstream: &[u32]) -> Vec<u8> {
    let flow = FlowSpec::udp(src.parse().unwrap(), dst.parse().unwrap(), 1000, 5000);
    let mut spec = PacketSpec::new(flow);
    // The paper's 80 bytes of data (a 126-byte packet with the FCS).
    spec.payload = MARK.to_vec();
    spec.payload.resize(80, 0);
    if !upstream.is_empty() {
        let hops = upstream.iter().map(|&n| sample_hop(n, 1_000, 3)).collect();
        spec = spec.with_int(
            IntSpec::new(IntVersion::V05, BITMAP, hops),
            Encap::Kdn {
                port: KDN_PORT,
                to_controller: false,
            },
        );
    }
    spec.build()
}

/// A frame as kplane's decoder reads it off a link: the record of its INT (None without).
fn on_the_wire(f: &[u8]) -> (Option<ReportRecord>, kplane_model::FlowKey) {
    let opts = opts();
    let Decoded::Packet(p) = kplane_wire::decode_frame(f, Start::Ethernet, &opts).unwrap() else {
        panic!("a packet")
    };
    let mut rec = ReportRecord::default();
    let int = p.fill_record(RecordMeta::default(), &mut rec);
    (int.then_some(rec), p.flow.expect("a flow"))
}

fn nodes(r: &ReportRecord) -> Vec<u64> {
    r.hops
        .iter()
        .map(|h| h.get(HopField::NodeId).unwrap_or(u64::MAX))
        .collect()
}

#[test]
fn kdn_int_over_udp_on_bmv2_is_inserted_extended_restored_and_reported() {
    if !bmv2::available() {
        return;
    }
    // Host 10.0.1.1 on port 1, host 10.0.2.1 on port 2 (this switch is their sink), the next
    // switch (10.0.3.0/24) on port 3, reports on port 4.
    let rig = Rig::start(
        "kdn",
        4,
        &[("10.0.1.1/32", 1), ("10.0.2.1/32", 2)],
        &[("10.0.1.1/32", 1), ("10.0.2.1/32", 2), ("10.0.3.0/24", 3)],
        "",
    );
    rig.apply(
        "kdn",
        &format!(
            "kind: monitor\nmatch: {{src: 10.0.1.1, protocol: udp}}\nencapsulation: kdn\ninstructions: {BITMAP:#06x}\n"
        ),
    );
    wait_for_forwarding(&rig.sw, Duration::from_secs(10));
    let keep: fn(&[u8]) -> bool = |f| f.windows(MARK.len()).any(|w| w == MARK);
    // Sends `frame` into switch port `port`; the frames that left port `out`.
    let through = |port: u32, out: u32, frame: Vec<u8>| -> Vec<Vec<u8>> {
        let cap = rig.capture(out, keep);
        rig.send(port, vec![frame; 2], Duration::from_millis(50));
        cap.join().unwrap()
    };
    let plain = frame("10.0.1.1", "10.0.3.1", &[]).len();
    let per_hop = 4 * BITMAP.count_ones() as usize;

    // Source: the host's packet leaves towards the next switch as KDN INT-over-UDP.
    let out = through(1, 3, frame("10.0.1.1", "10.0.3.1", &[]));
    assert!(!out.is_empty(), "the monitored packet left on port 3");
    for f in &out {
        assert_eq!(
            u16::from_be_bytes([f[36], f[37]]),
            KDN_PORT,
            "UDP dst = INT port"
        );
        // The paper's B = P × (12 + N × F × 4): its 12-byte header is KDN's 4 + v0.5's 8.
        assert_eq!(f.len() - plain, 12 + per_hop, "N = 1");
        let (rec, flow) = on_the_wire(f);
        let rec = rec.expect("KDN INT decoded");
        assert_eq!(
            flow.dst_port, 5000,
            "the original port, from the KDN header"
        );
        assert_eq!(nodes(&rec), [1], "the source's own items");
        assert!(!rec.envelope.flags.contains(ReportFlags::TO_CONTROLLER));
    }

    // Transit: a KDN packet from an upstream switch (two hops) gains this switch's items.
    let upstream = frame("10.0.9.9", "10.0.3.1", &[7, 8]);
    let out = through(2, 3, upstream);
    assert!(!out.is_empty(), "the transit packet left on port 3");
    for f in &out {
        assert_eq!(f.len() - plain, 12 + 3 * per_hop, "N = 3");
        let (rec, _) = on_the_wire(f);
        assert_eq!(nodes(&rec.expect("KDN INT")), [7, 8, 1], "path order");
    }
    // §VI-B's worked example on the measured sizes (FCS included): two flows share the third
    // switch's TX link equally, one monitored: the application loses the paper's 16 %.
    let (bare, monitored) = (plain + 4, out[0].len() + 4);
    assert_eq!((bare, monitored), (126, 174));
    let reduction = 1.0 - (2 * bare) as f64 / (bare + monitored) as f64;
    assert!((reduction - 0.16).abs() < 1e-9, "{reduction}");

    // Sink: the host gets its packet back (its port, no INT) and the collector a report
    // whose inner packet is the KDN packet with O = 1.
    let reports = rig.capture(4, keep);
    let restored = through(3, 2, frame("10.0.9.9", "10.0.2.1", &[7, 8]));
    let reports = reports.join().unwrap();
    assert!(!restored.is_empty(), "the host received its packet");
    for f in &restored {
        assert_eq!(
            f.len(),
            frame("10.0.9.9", "10.0.2.1", &[]).len(),
            "no INT left"
        );
        let (rec, flow) = on_the_wire(f);
        assert!(rec.is_none(), "no INT left");
        assert_eq!(flow.dst_port, 5000);
    }
    assert!(!reports.is_empty(), "the sink reported");
    for f in &reports {
        let rec = decode_report_frame(f, opts());
        assert_eq!(
            nodes(&rec),
            [7, 8, 1],
            "upstream items, then the sink's metadata"
        );
        assert_eq!(rec.flow.unwrap().dst_port, 5000);
        assert!(
            rec.envelope.flags.contains(ReportFlags::TO_CONTROLLER),
            "O = 1: {rec:?}"
        );
    }
}
