//! The worked examples of the Telemetry Report v2.0 spec ("Examples of Telemetry Reports",
//! p4lang/p4-applications 42cbfa4; FORMATS.md §3.5) and the v0.5 examples of §1.1, written
//! out by hand so they check the decoder independently of kplane's own builders.

use std::net::IpAddr;

use kplane_model::{HopField, ReportFlags, ReportFormat, ReportRecord};
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

fn hex(s: &str) -> Vec<u8> {
    let clean: String = s
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<String>()
        .split_whitespace()
        .collect();
    hex::decode(clean).expect("valid hex")
}

fn records(payload: &[u8]) -> Vec<ReportRecord> {
    let mut d = Decoder::new(DecodeOptions::default());
    let mut out = Vec::new();
    let outcome = d.decode_report(payload, RecordMeta::default(), |r| out.push(r.clone()));
    assert_eq!(outcome.error, None, "decode error");
    out
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const GROUP: &str = "20 40 00 05  00 00 00 03"; // v2, hw_id 1, seq 5, node 3

#[test]
fn baseline_metadata_and_truncated_ipv4() {
    let payload = hex(&format!(
        "{GROUP}
         14 0E 02 20                      # INT, IPv4, RepLen 14, MDLen 2, F
         50 00 00 00 00 00 00 00          # RepMdBits 0x5000: L1 ports, queue
         00 01 00 02                      # ingress 1, egress 2
         05 00 01 F4                      # queue 5, occupancy 500
         45 00 00 3C 00 00 40 00 40 06 00 00 0A 00 00 01 0A 00 00 02   # IPv4 (truncated)
         04 D2 00 50 00 00 00 01 00 00 00 00 50 18 02 00 00 00 00 00   # TCP 1234 -> 80"
    ));
    let recs = records(&payload);
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r.envelope.format, ReportFormat::TelemetryReportV20);
    assert_eq!(r.envelope.hw_id, 1);
    assert_eq!(r.envelope.sequence, Some(5));
    assert_eq!(r.envelope.node_id, Some(3));
    assert!(r.envelope.flags.contains(ReportFlags::TRACKED));
    assert_eq!(r.envelope.embedded, None);
    let f = r.flow.unwrap();
    assert_eq!((f.src_ip, f.dst_ip), (ip("10.0.0.1"), ip("10.0.0.2")));
    assert_eq!((f.src_port, f.dst_port, f.protocol), (1234, 80, 6));
    assert_eq!(r.hops.len(), 1);
    let h = &r.hops[0];
    assert_eq!(h.node_id(), Some(3));
    assert_eq!(h.get(HopField::L1IngressPort), Some(1));
    assert_eq!(h.get(HopField::L1EgressPort), Some(2));
    assert_eq!(h.queue_id(), Some(5));
    assert_eq!(h.queue_occupancy(), Some(500));
    assert!(!h.is_present(HopField::HopLatency));
}

#[test]
fn embedded_int_md_in_a_tcp_packet() {
    let payload = hex(&format!(
        "{GROUP}
         14 17 01 20                      # INT, IPv4, RepLen 23, MDLen 1, F
         10 00 00 00 00 00 00 00          # RepMdBits 0x1000: queue
         00 00 00 64                      # switch 3: queue 0, occupancy 100
         45 00 00 50 00 00 40 00 40 11 00 00 0A 00 00 01 0A 00 00 02   # IPv4, UDP
         12 34 45 68 00 3C 00 00          # UDP -> INT port 0x4568
         18 07 00 06                      # shim: MD, NPT 2, Len 7, proto TCP
         20 00 02 06 90 00 00 00 00 00 00 00   # MD hdr: HopML 2, RHC 6, bitmap 0x9000
         00 00 00 02 00 00 00 C8          # node 2, queue 0 occupancy 200
         00 00 00 01 00 00 01 2C          # node 1, queue 0 occupancy 300
         04 D2 00 50 00 00 00 01 00 00 00 00 50 18 02 00 00 00 00 00   # original TCP"
    ));
    let recs = records(&payload);
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r.envelope.embedded, Some(ReportFormat::IntMdV2));
    let f = r.flow.unwrap();
    assert_eq!(
        (f.src_port, f.dst_port, f.protocol),
        (1234, 80, 6),
        "flow restored"
    );
    let path: Vec<_> = r.path().collect();
    assert_eq!(
        path,
        vec![Some(1), Some(2), Some(3)],
        "source first, sink last"
    );
    let occ: Vec<_> = r.hops.iter().map(|h| h.queue_occupancy()).collect();
    assert_eq!(occ, vec![Some(300), Some(200), Some(100)]);
}

#[test]
fn embedded_int_md_over_udp_in_a_vxlan_packet() {
    // The summary's lengths (RepLen 33, "3 hops") do not add up with shim Length 7 and
    // Hop ML 2; we keep the header bytes and give the stack the 2 hops Length 7 announces.
    let payload = hex(&format!(
        "{GROUP}
         04 1F 00 20                      # Inner Only, IPv4, RepLen 31, F
         45 00 00 7A 00 00 40 00 40 11 00 00 C0 A8 01 01 C0 A8 02 02   # 192.168.1.1 -> 2.2
         DD D5 45 68 00 66 00 00          # UDP 56789 -> INT port, csum 0
         14 07 12 B5                      # shim: MD, NPT 1, Len 7, original dport 4789
         20 00 02 05 C0 00 00 00 00 00 00 00   # MD hdr: HopML 2, RHC 5, bitmap 0xC000
         00 00 00 02 00 03 00 04          # node 2, L1 in 3 out 4
         00 00 00 01 00 01 00 02          # node 1, L1 in 1 out 2
         08 00 00 00 00 00 2A 00          # VXLAN VNI 42
         02 00 00 00 00 02 02 00 00 00 00 01 08 00      # inner Ethernet
         45 00 00 28 00 00 40 00 40 06 00 00 0A 0A 01 01 0A 0A 02 02   # 10.10.1.1 -> 10.10.2.2
         30 39 01 BB 00 00 00 01 00 00 00 00 50 18 02 00 00 00 00 00   # TCP
         00 00                            # pad to a word"
    ));
    let recs = records(&payload);
    let r = &recs[0];
    assert!(r.envelope.flags.contains(ReportFlags::TRACKED));
    assert_eq!(r.envelope.embedded, Some(ReportFormat::IntMdV2));
    let f = r.flow.unwrap();
    assert_eq!(f.src_ip, ip("192.168.1.1"));
    assert_eq!((f.src_port, f.dst_port, f.protocol), (56789, 4789, 17));
    let path: Vec<_> = r.path().collect();
    assert_eq!(
        path,
        vec![Some(1), Some(2)],
        "Inner Only adds no reporting hop"
    );
    assert_eq!(r.hops[1].get(HopField::L1EgressPort), Some(4));
}

#[test]
fn v05_switch_local_and_drop_reports() {
    let inner = "02 00 00 00 00 02 02 00 00 00 00 01 08 00
                 45 00 00 1C 00 00 40 00 40 11 00 00 0A 00 00 01 0A 00 00 02
                 30 39 00 35 00 08 00 00";
    let local = hex(&format!(
        "02 20 00 01  00 00 00 07  00 00 03 E8   # local report, F, hw_id 1, seq 7, ig_ts 1000
         00 00 00 09 00 01 00 02 03 00 00 10 00 00 04 B0   # switch 9, q3 occ 16, eg_ts 1200
         {inner}"
    ));
    let r = &records(&local)[0];
    assert_eq!(r.envelope.format, ReportFormat::TelemetryReportV05);
    assert_eq!(
        (r.envelope.hw_id, r.envelope.sequence, r.envelope.node_id),
        (1, Some(7), Some(9))
    );
    let h = &r.hops[0];
    assert_eq!(h.hop_latency_ns(), Some(200), "egress_ts - ingress_ts");
    assert_eq!((h.queue_id(), h.queue_occupancy()), (Some(3), Some(16)));
    assert_eq!(r.flow.unwrap().dst_port, 53);

    let drop = hex(&format!(
        "01 80 00 00  00 00 00 08  00 00 03 E8   # drop report, D
         00 00 00 09 00 01 00 02 03 50 00 00   # switch 9, q3, reason 80 (ACL deny)
         {inner}"
    ));
    let r = &records(&drop)[0];
    assert!(r.envelope.flags.contains(ReportFlags::DROPPED));
    assert_eq!(r.envelope.drop_reason, Some(80));
}
