//! The seed papers' own telemetry formats. Where a paper names fields and widths but no byte
//! layout, the layout below is kplane's choice, documented in docs/wire-formats.md.

use kplane_model::{HopField, HopRecord, MAX_HOPS};

use crate::bytes::{Bytes, be16, be32, be64};
use crate::error::{ErrorKind, Result, WireError};
use crate::int::HopStack;
use crate::int::v05::MdHeaderV05;

// ---------------------------------------------------------------------------------------------
// KDN paper (kdn-architecture-int-onos §V-A): INT over UDP with an INT port.

/// KDN header right after the UDP header (whose destination port is the INT port):
/// `Original Dest Port(16) | O(1) Reserved(7) | INT len(8)`, INT len in words of the
/// INT metadata header + stack that follow. The INT header is the 2016 draft's 8-byte
/// header (same layout as INT v0.5), items 4 bytes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KdnHeader {
    pub original_destination_port: u16,
    /// O: the packet is a copy sent to the controller for analysis.
    pub to_controller: bool,
    pub int_length: u8,
}

/// A KDN INT block.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KdnInt<'a> {
    pub kdn: KdnHeader,
    pub md: MdHeaderV05,
    pub hops: HopStack<'a>,
}

impl KdnHeader {
    pub const LEN: usize = 4;

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.original_destination_port.to_be_bytes());
        out.push(u8::from(self.to_controller) << 7);
        out.push(self.int_length);
    }
}

impl<'a> KdnInt<'a> {
    pub fn parse(b: Bytes<'a>) -> Result<(Self, Bytes<'a>)> {
        let a = b.array::<4>("kdn_int", "original_destination_port")?;
        let kdn = KdnHeader {
            original_destination_port: be16(a, 0),
            to_controller: a[2] & 0x80 != 0,
            int_length: a[3],
        };
        let total = usize::from(kdn.int_length) * 4;
        if total < MdHeaderV05::LEN {
            return Err(WireError::new(
                "kdn_int",
                "int_length",
                b.offset() + 3,
                ErrorKind::BadLength {
                    value: kdn.int_length.into(),
                    expected: ">= 2 words (INT header)",
                },
            ));
        }
        let b = b.skip(KdnHeader::LEN, "kdn_int", "int_length")?;
        let md = MdHeaderV05::parse(b)?;
        let b = b.skip(MdHeaderV05::LEN, "kdn_int_md", "version")?;
        let (hops, rest) = md.stack(b, total - MdHeaderV05::LEN)?;
        Ok((Self { kdn, md, hops }, rest))
    }
}

// ---------------------------------------------------------------------------------------------
// GPINT (gpint-reliable-int-monitoring §III-B): probe packets identified by IPv4 DSCP.

/// What a GPINT probe is, by its DSCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ProbeKind {
    /// DSCP 0x17: a probe collecting measurements.
    Measurement,
    /// DSCP 0x19: recovery feedback from the next hop.
    Feedback,
    /// DSCP 0x21: failure notification (no feedback arrived in time).
    FailureNotification,
}

impl ProbeKind {
    pub const DSCP_MEASUREMENT: u8 = 0x17;
    pub const DSCP_FEEDBACK: u8 = 0x19;
    pub const DSCP_FAILURE: u8 = 0x21;

    pub fn from_dscp(dscp: u8) -> Option<Self> {
        match dscp {
            Self::DSCP_MEASUREMENT => Some(Self::Measurement),
            Self::DSCP_FEEDBACK => Some(Self::Feedback),
            Self::DSCP_FAILURE => Some(Self::FailureNotification),
            _ => None,
        }
    }

    pub fn dscp(self) -> u8 {
        match self {
            Self::Measurement => Self::DSCP_MEASUREMENT,
            Self::Feedback => Self::DSCP_FEEDBACK,
            Self::FailureNotification => Self::DSCP_FAILURE,
        }
    }
}

/// Source-routing header: `next port(8) | MEA range(16)` (3 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SrHeader {
    pub next_port: u8,
    pub measurement_range: u16,
}

/// Device-level header: `SID(8) | Q depth(8) | #MEA(16)` (4 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DlvHeader {
    pub switch_id: u8,
    pub queue_depth: u8,
    pub measurement_count: u16,
}

/// A GPINT probe after the IPv4 header:
/// `ReqID(15) T(1) | #SR(16) | SR × 3 B | #DLV(16) | DLV × 4 B | #MEA(16) | MEA × 4 B`.
/// Measurements are 32-bit counters; DLV i owns the next `#MEA_i` of them.
#[derive(Clone, Copy, Debug)]
pub struct GpintProbe<'a> {
    pub kind: ProbeKind,
    pub request_id: u16,
    /// 0 = rule-hit counters, 1 = per-port packet counters.
    pub request_type: u8,
    sr: Bytes<'a>,
    dlv: Bytes<'a>,
    mea: Bytes<'a>,
}

impl<'a> GpintProbe<'a> {
    const H: &'static str = "gpint_probe";

    pub fn parse(kind: ProbeKind, b: Bytes<'a>) -> Result<(Self, Bytes<'a>)> {
        let a = b.array::<4>(Self::H, "request_meta")?;
        let req = be16(a, 0);
        let n_sr = usize::from(be16(a, 2));
        let b = b.skip(4, Self::H, "sr_count")?;
        let (sr, b) = b.split(n_sr * 3, "gpint_sr_stack", "sr_headers")?;
        let n_dlv = usize::from(be16(b.array::<2>("gpint_dlv_stack", "dlv_count")?, 0));
        if n_dlv > MAX_HOPS {
            return Err(WireError::new(
                "gpint_dlv_stack",
                "dlv_count",
                b.offset(),
                ErrorKind::BadLength {
                    value: n_dlv,
                    expected: "at most 64 device-level headers",
                },
            ));
        }
        let b = b.skip(2, "gpint_dlv_stack", "dlv_count")?;
        let (dlv, b) = b.split(n_dlv * 4, "gpint_dlv_stack", "dlv_headers")?;
        let n_mea = usize::from(be16(b.array::<2>("gpint_mea_stack", "mea_count")?, 0));
        let b = b.skip(2, "gpint_mea_stack", "mea_count")?;
        let (mea, rest) = b.split(n_mea * 4, "gpint_mea_stack", "measurements")?;
        let owned: usize = dlv
            .data()
            .chunks_exact(4)
            .map(|d| usize::from(be16(d, 2)))
            .sum();
        if owned != n_mea {
            return Err(WireError::new(
                "gpint_mea_stack",
                "mea_count",
                mea.offset() - 2,
                ErrorKind::BadLength {
                    value: n_mea,
                    expected: "the sum of the DLV headers' #MEA",
                },
            ));
        }
        Ok((
            Self {
                kind,
                request_id: req >> 1,
                request_type: (req & 1) as u8,
                sr,
                dlv,
                mea,
            },
            rest,
        ))
    }

    pub fn source_route(&self) -> impl Iterator<Item = SrHeader> + '_ {
        self.sr.data().chunks_exact(3).map(|c| SrHeader {
            next_port: c[0],
            measurement_range: be16(c, 1),
        })
    }

    /// Newest first, as on the wire.
    pub fn devices(&self) -> impl DoubleEndedIterator<Item = DlvHeader> + '_ {
        self.dlv.data().chunks_exact(4).map(|c| DlvHeader {
            switch_id: c[0],
            queue_depth: c[1],
            measurement_count: be16(c, 2),
        })
    }

    pub fn measurements(&self) -> impl Iterator<Item = u32> + '_ {
        self.mea.data().chunks_exact(4).map(|c| be32(c, 0))
    }

    /// Devices as hops (node id, queue 0's occupancy), in the order the probe visited them
    /// (the stack is newest first).
    pub fn push_hops(&self, out: &mut Vec<HopRecord>) {
        for d in self.devices().rev() {
            let mut h = HopRecord::default();
            h.set(HopField::NodeId, d.switch_id.into());
            // A DLV carries one queue depth per switch: queue 0, so probes feed the same
            // per-queue analytics as INT.
            h.set(HopField::QueueId, 0);
            h.set(HopField::QueueOccupancy, d.queue_depth.into());
            out.push(h);
        }
    }

    /// Writes a probe body (after IPv4).
    pub fn write(
        request_id: u16,
        request_type: u8,
        route: &[SrHeader],
        devices: &[(DlvHeader, Vec<u32>)],
        out: &mut Vec<u8>,
    ) {
        out.extend_from_slice(&((request_id << 1) | u16::from(request_type & 1)).to_be_bytes());
        out.extend_from_slice(&(route.len() as u16).to_be_bytes());
        for s in route {
            out.push(s.next_port);
            out.extend_from_slice(&s.measurement_range.to_be_bytes());
        }
        out.extend_from_slice(&(devices.len() as u16).to_be_bytes());
        for (d, m) in devices {
            out.push(d.switch_id);
            out.push(d.queue_depth);
            out.extend_from_slice(&(m.len() as u16).to_be_bytes());
        }
        let n: usize = devices.iter().map(|(_, m)| m.len()).sum();
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for v in devices.iter().flat_map(|(_, m)| m) {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for GpintProbe<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("GpintProbe", 6)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("request_id", &self.request_id)?;
        st.serialize_field("request_type", &self.request_type)?;
        st.serialize_field("source_route", &self.source_route().collect::<Vec<_>>())?;
        st.serialize_field("devices", &self.devices().collect::<Vec<_>>())?;
        st.serialize_field("measurements", &self.measurements().collect::<Vec<_>>())?;
        st.end()
    }
}

// ---------------------------------------------------------------------------------------------
// INT-label (int-label-distributed-labeling §2, Fig. 4): an option after the IP header.

/// One 32-byte INT-label item:
/// `device id(32) | ingress port(16) egress port(16) | label time(64, ns) | hop latency(32, ns)
///  | queue depth(32) | egress tx utilisation(32) | reserved(32)`.
pub const LABEL_ITEM_LEN: usize = 32;

/// Where an INT-label option came from, which fixes its items' layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LabelLayout {
    /// The paper's Fig. 4, after the IP header (what kplane emits).
    #[default]
    Paper,
    /// The authors' published P4 program (`my_int.p4`): after the Ethernet addresses, EtherType
    /// 0x0701 (or a spent source route 0x0700 before it), `type(1) rsvd(7) | INT_num(8)`,
    /// then 32-byte items newest first: `sw_id(8) ingress port(8) egress port(8) rsvd(8) |
    /// ingress timestamp(48) | egress timestamp(48) | enq timestamp(32) | rsvd(8)
    /// enq_qdepth(24) | deq_timedelta(32) | rsvd(8) deq_qdepth(24)`, BMv2's times in µs. The
    /// header's comment says 28 B; its fields, and the authors' parser, are 32.
    Authors,
}

/// `NH(8) | INT_num(8)` then items, newest first. A specific (operator-selected) flow starts
/// with INT_num = MAX_hop, so at the sink INT_num > MAX_hop and items = INT_num − MAX_hop.
/// The authors' layout ([`LabelLayout::Authors`]) has no next header and flags a specific
/// flow in the option's first bit.
#[derive(Clone, Copy, Debug)]
pub struct IntLabel<'a> {
    /// Next header: the packet's original IP protocol (0 in the authors' layout: their
    /// probes carry no IP header).
    pub next_header: u8,
    pub int_num: u8,
    /// The flow was selected for specific-flow telemetry.
    pub specific_flow: bool,
    pub layout: LabelLayout,
    items: Bytes<'a>,
}

impl<'a> IntLabel<'a> {
    pub fn parse(b: Bytes<'a>, max_hop: u8) -> Result<(Self, Bytes<'a>)> {
        let a = b.array::<2>("int_label_option", "next_header")?;
        let (next_header, int_num) = (a[0], a[1]);
        let specific_flow = int_num > max_hop;
        let count = if specific_flow {
            int_num - max_hop
        } else {
            int_num
        };
        let b = b.skip(2, "int_label_option", "int_num")?;
        let (items, rest) = b.split(
            usize::from(count) * LABEL_ITEM_LEN,
            "int_label_option",
            "items",
        )?;
        Ok((
            Self {
                next_header,
                int_num,
                specific_flow,
                layout: LabelLayout::Paper,
                items,
            },
            rest,
        ))
    }

    /// The authors' layout after the Ethernet addresses and `ethertype`: a source route
    /// (0x0700: its 2-byte header, then 2-byte entries up to the one whose first bit marks it
    /// last, then the next type) is skipped; `None` when what follows is not the INT option.
    pub fn parse_authors(ethertype: u16, b: Bytes<'a>) -> Result<Option<(Self, Bytes<'a>)>> {
        use crate::layers::ethertype::{INT_LABEL, INT_LABEL_SOURCE_ROUTE};
        let (mut ethertype, mut b) = (ethertype, b);
        if ethertype == INT_LABEL_SOURCE_ROUTE {
            b = b.skip(2, "int_label_source_route", "header")?;
            loop {
                let entry = b.array::<2>("int_label_source_route", "entry")?;
                b = b.skip(2, "int_label_source_route", "entry")?;
                if entry[0] & 0x80 != 0 {
                    break;
                }
            }
            ethertype = u16::from_be_bytes(*b.array::<2>("int_label_source_route", "type")?);
            b = b.skip(2, "int_label_source_route", "type")?;
        }
        if ethertype != INT_LABEL {
            return Ok(None);
        }
        let a = b.array::<2>("int_label_option", "int_num")?;
        let b = b.skip(2, "int_label_option", "int_num")?;
        let (items, rest) = b.split(
            usize::from(a[1]) * LABEL_ITEM_LEN,
            "int_label_option",
            "items",
        )?;
        Ok(Some((
            Self {
                next_header: 0,
                int_num: a[1],
                specific_flow: a[0] & 0x80 != 0,
                layout: LabelLayout::Authors,
                items,
            },
            rest,
        )))
    }

    pub fn len(&self) -> usize {
        self.items.len() / LABEL_ITEM_LEN
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn item(&self, c: &[u8]) -> HopRecord {
        let mut h = HopRecord::default();
        if self.layout == LabelLayout::Authors {
            // BMv2's µs, as ns.
            let us48 =
                |at: usize| (u64::from(be16(c, at)) << 32 | u64::from(be32(c, at + 2))) * 1_000;
            h.set_raw(HopField::NodeId, c[0].into(), 8);
            h.set_raw(HopField::L1IngressPort, c[1].into(), 8);
            h.set_raw(HopField::L1EgressPort, c[2].into(), 8);
            h.set_raw(HopField::IngressTimestamp, us48(4), 64);
            h.set_raw(HopField::EgressTimestamp, us48(10), 64);
            h.set_raw(
                HopField::QueueOccupancy,
                (be32(c, 20) & 0x00FF_FFFF).into(),
                24,
            );
            h.set_raw(HopField::HopLatency, u64::from(be32(c, 24)) * 1_000, 64);
            return h;
        }
        h.set_raw(HopField::NodeId, be32(c, 0).into(), 32);
        h.set_raw(HopField::L1IngressPort, be16(c, 4).into(), 16);
        h.set_raw(HopField::L1EgressPort, be16(c, 6).into(), 16);
        h.set_raw(HopField::IngressTimestamp, be64(c, 8), 64);
        h.set_raw(HopField::HopLatency, be32(c, 16).into(), 32);
        h.set_raw(HopField::QueueOccupancy, be32(c, 20).into(), 32);
        h.set_raw(HopField::TxUtilization, be32(c, 24).into(), 32);
        h
    }

    /// Items in wire order (newest first).
    pub fn items(&self) -> impl DoubleEndedIterator<Item = HopRecord> + '_ {
        self.items
            .data()
            .chunks_exact(LABEL_ITEM_LEN)
            .map(|c| self.item(c))
    }

    /// Items in labelling order (first labelling device first).
    pub fn push_hops(&self, out: &mut Vec<HopRecord>) {
        out.extend(self.items().rev());
    }

    /// Writes the option and items (given in labelling order).
    pub fn write(next_header: u8, int_num: u8, hops: &[HopRecord], out: &mut Vec<u8>) {
        out.push(next_header);
        out.push(int_num);
        for h in hops.iter().rev() {
            let g = |f: HopField, ones: u64| h.get(f).unwrap_or(ones);
            out.extend_from_slice(&(g(HopField::NodeId, 0xFFFF_FFFF) as u32).to_be_bytes());
            out.extend_from_slice(&(g(HopField::L1IngressPort, 0xFFFF) as u16).to_be_bytes());
            out.extend_from_slice(&(g(HopField::L1EgressPort, 0xFFFF) as u16).to_be_bytes());
            out.extend_from_slice(&g(HopField::IngressTimestamp, u64::MAX).to_be_bytes());
            for f in [
                HopField::HopLatency,
                HopField::QueueOccupancy,
                HopField::TxUtilization,
            ] {
                out.extend_from_slice(&(g(f, 0xFFFF_FFFF) as u32).to_be_bytes());
            }
            out.extend_from_slice(&[0; 4]);
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for IntLabel<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("IntLabel", 5)?;
        st.serialize_field("layout", &self.layout)?;
        st.serialize_field("next_header", &self.next_header)?;
        st.serialize_field("int_num", &self.int_num)?;
        st.serialize_field("specific_flow", &self.specific_flow)?;
        st.serialize_field("hops", &self.items().rev().collect::<Vec<_>>())?;
        st.end()
    }
}
