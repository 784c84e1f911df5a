//! The record fast path for the report shape fabrics send most: a Telemetry Report v2.0 with
//! one INT individual report whose inner packet (untagged Ethernet, IPv4 without options, or
//! IPv6 without extension headers) carries INT-MD v2.x after its UDP or TCP header, flagged
//! by DSCP or by an INT L4 port.
//!
//! It reads fixed offsets straight into the record instead of building header views. Anything
//! else — tunnels, VLAN tags, IP options, NPT 2, INT-MX, several individual reports, and every
//! input the general parser would reject — makes it decline before anything is emitted, and
//! the general parser decides. Both therefore always produce the same records and errors; the
//! `fast_path` property test holds them to it on generated and corrupted reports.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use kplane_model::{
    FlowKey, HopField, MAX_HOPS, ReportEnvelope, ReportFlags, ReportFormat, ReportRecord,
};

use crate::int::{IntVersion, baseline_len, exact_hops, push_hops};
use crate::layers::{ethertype, ipproto};
use crate::meta::RecordMeta;
use crate::opts::DecodeOptions;
use crate::report::v20::{
    IN_TYPE_ETHERNET, IN_TYPE_IPV4, IN_TYPE_IPV6, REP_TYPE_INT, reporting_hop,
};

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Decodes `payload` (a v2.0 report: the caller checked the version nibble) into `rec`.
/// False: not this shape, or not valid — `rec` is then left for the general parser to reset.
#[inline]
pub(crate) fn v20_record(
    payload: &[u8],
    opts: &DecodeOptions,
    meta: RecordMeta,
    rec: &mut ReportRecord,
    on_flow: &mut impl FnMut(&FlowKey),
) -> bool {
    let Some(h) = payload.first_chunk::<12>() else {
        return false;
    };
    if h[8] >> 4 != REP_TYPE_INT {
        return false;
    }
    let contents = &payload[12..];
    // One individual report, exactly covering the rest (or running to the end).
    if h[9] != 0xFF && usize::from(h[9]) * 4 != contents.len() {
        return false;
    }
    let md_len = usize::from(h[10]) * 4;
    let Some((main, inner)) = contents.split_at_checked(8 + md_len) else {
        return false;
    };
    let rep_md_bits = be16(main, 0);
    let md = &main[8..];
    let need = baseline_len(IntVersion::V2, rep_md_bits & 0x7FFE)
        + if rep_md_bits & crate::report::v20::REP_MD_DROP != 0 {
            4
        } else {
            0
        };
    if need > md_len {
        return false;
    }

    rec.hops.clear();
    let Some(packet_length) = inner_int(h[8] & 0x0F, inner, opts, rec, on_flow) else {
        return false;
    };
    let node_id = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let mut hop = reporting_hop(rep_md_bits, &md[..need]);
    hop.set(HopField::NodeId, node_id.into());
    // The D, Q, F, I bits (the high nibble) as record flags, by table: the nibble reversed.
    const FLAGS: [u8; 16] = {
        let mut t = [0u8; 16];
        let mut n = 0;
        const fn bit(n: usize, mask: usize, flag: u8) -> u8 {
            if n & mask != 0 { flag } else { 0 }
        }
        while n < 16 {
            t[n] = bit(n, 0x8, ReportFlags::DROPPED)
                | bit(n, 0x4, ReportFlags::CONGESTED)
                | bit(n, 0x2, ReportFlags::TRACKED)
                | bit(n, 0x1, ReportFlags::INTERMEDIATE);
            n += 1;
        }
        t
    };
    // Written whole: every field once (the record is store-bound).
    rec.envelope = ReportEnvelope {
        format: ReportFormat::TelemetryReportV20,
        embedded: Some(ReportFormat::IntMdV2),
        hw_id: ((h[0] & 0x0F) << 2) | (h[1] >> 6),
        node_id: Some(node_id),
        sequence: Some(u32::from_be_bytes([h[0], h[1], h[2], h[3]]) & 0x3F_FFFF),
        flags: ReportFlags(FLAGS[usize::from(h[11] >> 4)]),
        drop_reason: hop.get(HopField::DropReason).map(|v| v as u8),
        timestamp_ns: hop.get(HopField::IngressTimestamp),
        packet_length: Some(packet_length),
        exporter: meta.exporter,
        received_ns: meta.received_ns,
    };
    match rec.hops.last_mut() {
        Some(last) if last.node_id() == Some(node_id) => last.merge_missing(&hop),
        _ => rec.hops.push(hop),
    }
    true
}

/// The inner packet of `in_type`: fills the flow and the INT-MD stack's hops, returns the
/// packet's IP length. `None` for any other shape.
#[inline(always)]
fn inner_int(
    in_type: u8,
    b: &[u8],
    opts: &DecodeOptions,
    rec: &mut ReportRecord,
    on_flow: &mut impl FnMut(&FlowKey),
) -> Option<u32> {
    let (ether, b) = match in_type {
        IN_TYPE_IPV4 => (ethertype::IPV4, b),
        IN_TYPE_IPV6 => (ethertype::IPV6, b),
        IN_TYPE_ETHERNET => match b.first_chunk::<14>() {
            Some(e) => (be16(e, 12), &b[14..]),
            None => return None,
        },
        _ => return None,
    };
    let (src, dst, dscp, protocol, length, l4) = match ether {
        ethertype::IPV4 => {
            let a = b.first_chunk::<20>()?;
            // Version 4 without options, not a fragment.
            if a[0] != 0x45 || be16(a, 6) & 0x1FFF != 0 {
                return None;
            }
            let total = usize::from(be16(a, 2));
            let payload = &b[20..];
            let payload = if total >= 20 {
                &payload[..(total - 20).min(payload.len())]
            } else {
                payload
            };
            let src = Ipv4Addr::new(a[12], a[13], a[14], a[15]);
            let dst = Ipv4Addr::new(a[16], a[17], a[18], a[19]);
            let length = total as u32;
            (
                IpAddr::V4(src),
                IpAddr::V4(dst),
                a[1] >> 2,
                a[9],
                length,
                payload,
            )
        }
        ethertype::IPV6 => {
            let a = b.first_chunk::<40>()?;
            // Extension headers (hop-by-hop, routing, fragment, destination) take the
            // general path.
            if a[0] >> 4 != 6 || matches!(a[6], 0 | 43 | 44 | 60) {
                return None;
            }
            let payload_length = be16(a, 4);
            let payload = &b[40..];
            let payload = &payload[..usize::from(payload_length).min(payload.len())];
            let dscp = (((a[0] & 0x0F) << 4) | (a[1] >> 4)) >> 2;
            let src: [u8; 16] = a[8..24].try_into().unwrap_or_default();
            let dst: [u8; 16] = a[24..40].try_into().unwrap_or_default();
            let length = u32::from(payload_length) + 40;
            let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
            (
                IpAddr::V6(src),
                IpAddr::V6(dst),
                dscp,
                a[6],
                length,
                payload,
            )
        }
        _ => return None,
    };
    // The papers' formats and tunnels have their own walkers.
    if protocol == opts.int_label_protocol || protocol == opts.gpint_protocol {
        return None;
    }
    let (src_port, dst_port, int) = match protocol {
        ipproto::UDP => {
            let u = l4.first_chunk::<8>()?;
            let (sp, dp, len) = (be16(u, 0), be16(u, 2), usize::from(be16(u, 4)));
            if len < 8
                || dp == opts.vxlan_gpe_port
                || dp == opts.geneve_port
                || dp == opts.vxlan_port
                || opts.kdn_port == Some(dp)
            {
                return None;
            }
            let rest = &l4[8..];
            (sp, dp, &rest[..(len - 8).min(rest.len())])
        }
        ipproto::TCP => {
            let t = l4.first_chunk::<20>()?;
            let rest = l4.get(usize::from(t[12] >> 4) * 4..)?;
            if t[12] >> 4 < 5 {
                return None;
            }
            (be16(t, 0), be16(t, 2), rest)
        }
        _ => return None,
    };
    // The first port inline (a deployment has one or two); `contains` on `u16` is a call.
    let int_port =
        opts.int_l4_ports.first() == Some(&dst_port) || opts.int_l4_ports.contains(&dst_port);
    if !int_port && !opts.dscp_marks_int(dscp) {
        return None;
    }
    // Shim (4) + INT-MD metadata header (12).
    let s = int.first_chunk::<16>()?;
    let (int_type, npt) = (s[0] >> 4, (s[0] >> 2) & 3);
    let md_version = s[4] >> 4;
    if md_version != 2 || npt > 1 || !matches!(int_type, 1 | 2) {
        return None;
    }
    let body = int.get(4..4 + usize::from(s[1]) * 4)?;
    if body.len() < 12 {
        return None;
    }
    let stack = &body[12..];
    let bitmap = be16(s, 8);
    let stride = usize::from(s[6] & 0x1F) * 4;
    if stride == 0 {
        if !stack.is_empty() {
            return None;
        }
    } else {
        let need = baseline_len(IntVersion::V2, bitmap) + usize::from(bitmap & 1) * 4;
        if need > stride || exact_hops(stack.len(), stride).is_none_or(|n| n > MAX_HOPS) {
            return None;
        }
    }
    let flow = rec.flow.insert(FlowKey {
        src_ip: src,
        dst_ip: dst,
        src_port,
        // NPT 1: the shim keeps the original UDP destination port.
        dst_port: if npt == 1 { be16(s, 2) } else { dst_port },
        protocol,
    });
    // A hint (nothing below declines): the caller can start loading the flow's state while
    // the hops are decoded.
    on_flow(flow);
    push_hops(IntVersion::V2, bitmap, stride, stack, &mut rec.hops);
    Some(length)
}
