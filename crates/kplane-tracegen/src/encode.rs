//! The bytes a sink sends for one packet: a Telemetry Report v2.0 (group header, one
//! individual INT report with the sink's own metadata) whose inner contents are the packet as
//! it reached the sink, IPv4 with INT-MD v2.1 after a new UDP header (NPT 2). Written from the
//! specifications (FORMATS.md §3.1–3.3, §6.1, §6.5), independently of kplane's encoders.

/// UDP destination port announcing INT after a new UDP header (NPT 2).
pub const INT_UDP_PORT: u16 = 0x4568;
/// Instruction bitmap of the stack: node id, L1 ports, hop latency, queue, ingress and egress
/// timestamps, tx utilisation (bits 0–5 and 7).
pub const INSTRUCTIONS: u16 = 0xFD00;
/// Words per hop for [`INSTRUCTIONS`]: 4 + 4 + 4 + 4 + 8 + 8 + 4 bytes.
const HOP_WORDS: u8 = 9;
/// The sink's own metadata in the report: the same less the node id (in the group header).
const REP_MD_BITS: u16 = INSTRUCTIONS & 0x7FFF;
const REP_MD_WORDS: u8 = HOP_WORDS - 1;

/// One switch's metadata for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HopMeta {
    pub node_id: u32,
    pub ingress_port: u16,
    pub egress_port: u16,
    pub hop_latency_ns: u32,
    pub queue_id: u8,
    /// Packets in the egress queue (24 bits).
    pub queue_occupancy: u32,
    pub ingress_ts_ns: u64,
    pub egress_ts_ns: u64,
    /// Egress port utilisation, per mille of the link rate.
    pub tx_utilization: u32,
}

/// The packet a report is about, as its source sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    /// 6 (TCP) or 17 (UDP).
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// Its IPv4 total length before INT was added.
    pub length: u16,
    /// TCP flags (a scan's SYN); ignored for UDP.
    pub tcp_flags: u8,
}

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}

/// The per-hop fields of [`INSTRUCTIONS`] after the node id, in bit order.
fn put_fields(b: &mut Vec<u8>, h: &HopMeta) {
    put16(b, h.ingress_port);
    put16(b, h.egress_port);
    put32(b, h.hop_latency_ns);
    put32(
        b,
        (u32::from(h.queue_id) << 24) | (h.queue_occupancy & 0x00FF_FFFF),
    );
    b.extend_from_slice(&h.ingress_ts_ns.to_be_bytes());
    b.extend_from_slice(&h.egress_ts_ns.to_be_bytes());
    put32(b, h.tx_utilization);
}

/// RFC 791 header checksum.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// The packet as it reached the sink: IPv4, a new UDP header to [`INT_UDP_PORT`], the INT
/// shim and metadata header, the `upstream` hops' metadata (in path order; the stack holds
/// them newest first), then the original L4 header; padded to whole words.
fn inner(p: &Packet, upstream: &[HopMeta], remaining_hops: u8) -> Vec<u8> {
    let stack_words = usize::from(HOP_WORDS) * upstream.len();
    let int_bytes = 4 + 12 + 4 * stack_words;
    let l4 = if p.protocol == 6 { 20 } else { 8 };
    let ip_total = usize::from(p.length) + 8 + int_bytes;
    let mut b = Vec::with_capacity(20 + 8 + int_bytes + l4 + 3);
    // IPv4 (protocol UDP: the new header INT rides on).
    b.extend_from_slice(&[0x45, 0x00]);
    put16(&mut b, ip_total.min(0xFFFF) as u16);
    b.extend_from_slice(&[0, 0, 0x40, 0x00, 64, 17, 0, 0]);
    b.extend_from_slice(&p.src);
    b.extend_from_slice(&p.dst);
    let sum = ipv4_checksum(&b[..20]);
    b[10..12].copy_from_slice(&sum.to_be_bytes());
    // The new UDP header: its length covers INT and the original L4 segment.
    put16(&mut b, p.src_port);
    put16(&mut b, INT_UDP_PORT);
    put16(&mut b, (ip_total - 20).min(0xFFFF) as u16);
    put16(&mut b, 0);
    // Shim: INT-MD (type 1), NPT 2, length in words excluding the shim, original protocol.
    b.push((1 << 4) | (2 << 2));
    b.push((3 + stack_words) as u8);
    b.push(0);
    b.push(p.protocol);
    // Metadata header: version 2, hop ML, remaining hop count, bitmap, default domain.
    b.extend_from_slice(&[0x20, 0x00, HOP_WORDS & 0x1F, remaining_hops]);
    put16(&mut b, INSTRUCTIONS);
    b.extend_from_slice(&[0; 6]);
    for h in upstream.iter().rev() {
        put32(&mut b, h.node_id);
        put_fields(&mut b, h);
    }
    // The original L4 header.
    put16(&mut b, p.src_port);
    put16(&mut b, p.dst_port);
    if p.protocol == 6 {
        b.extend_from_slice(&[
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0x50,
            p.tcp_flags,
            0xFF,
            0xFF,
            0,
            0,
            0,
            0,
        ]);
    } else {
        put16(&mut b, p.length.saturating_sub(20));
        put16(&mut b, 0);
    }
    while b.len() % 4 != 0 {
        b.push(0);
    }
    b
}

/// The UDP payload of the report `sink` sends about `p`, which crossed `upstream` first.
pub fn sink_report(
    seq: u32,
    sink: &HopMeta,
    upstream: &[HopMeta],
    p: &Packet,
    remaining_hops: u8,
) -> Vec<u8> {
    let inner = inner(p, upstream, remaining_hops);
    let mut b = Vec::with_capacity(8 + 12 + 4 * usize::from(REP_MD_WORDS) + inner.len());
    // Group header: version 2, hw_id 0, 22-bit sequence number, node id.
    let seq = seq & 0x003F_FFFF;
    put32(&mut b, (2 << 28) | seq);
    put32(&mut b, sink.node_id);
    // Individual report: RepType 1 (INT), InType 4 (IPv4); lengths in words; no flags.
    let words = 2 + usize::from(REP_MD_WORDS) + inner.len() / 4;
    b.push((1 << 4) | 4);
    b.push(words.min(0xFF) as u8);
    b.push(REP_MD_WORDS);
    b.push(0);
    put16(&mut b, REP_MD_BITS);
    b.extend_from_slice(&[0; 6]);
    put_fields(&mut b, sink);
    b.extend_from_slice(&inner);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(node_id: u32) -> HopMeta {
        HopMeta {
            node_id,
            ingress_port: 1,
            egress_port: 2,
            hop_latency_ns: 700,
            queue_id: 2,
            queue_occupancy: 3,
            ingress_ts_ns: 1_000,
            egress_ts_ns: 1_700,
            tx_utilization: 250,
        }
    }

    #[test]
    fn a_report_has_the_specified_headers_and_lengths() {
        let p = Packet {
            src: [172, 16, 1, 10],
            dst: [172, 16, 2, 11],
            protocol: 6,
            src_port: 40_000,
            dst_port: 443,
            length: 1_500,
            tcp_flags: 0x10,
        };
        let b = sink_report(5, &hop(7), &[hop(1), hop(101)], &p, 6);
        // Group header: version 2, sequence 5, node 7.
        assert_eq!(&b[..8], &[0x20, 0, 0, 5, 0, 0, 0, 7]);
        // Individual report: INT / IPv4, MD length 8 words, RepMdBits 0x7D00.
        assert_eq!(b[8], 0x14);
        assert_eq!(b[10], 8);
        assert_eq!(&b[12..14], &[0x7D, 0x00]);
        assert_eq!(usize::from(b[9]) * 4 + 4, b.len() - 8);
        // The inner IPv4 header: UDP, checksum valid, length with INT added.
        let ip = &b[20 + 32..];
        assert_eq!(ip[9], 17);
        assert_eq!(ipv4_checksum(&ip[..20]), 0);
        let int = 4 + 12 + 2 * 36;
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, 1_500 + 8 + int);
        // New UDP to the INT port; shim: MD, NPT 2, 3 + 18 words, TCP inside.
        assert_eq!(&ip[22..24], &INT_UDP_PORT.to_be_bytes());
        assert_eq!(&ip[28..32], &[0x18, 21, 0, 6]);
        // Metadata header and the stack newest first.
        assert_eq!(&ip[32..36], &[0x20, 0, 9, 6]);
        assert_eq!(&ip[36..38], &[0xFD, 0x00]);
        assert_eq!(&ip[44..48], &101u32.to_be_bytes());
        assert_eq!(&ip[80..84], &1u32.to_be_bytes());
        // Then the original TCP header.
        let tcp = &ip[44 + 72..];
        assert_eq!(&tcp[..4], &[0x9C, 0x40, 0x01, 0xBB]);
        assert_eq!(b.len() % 4, 0);
    }
}
