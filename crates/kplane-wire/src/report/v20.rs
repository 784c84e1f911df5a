//! Telemetry Report v2.0: a group header and one or more individual reports, walked by
//! Report Length (0xFF: to the end of the payload).

use kplane_model::{HopField, HopRecord};

use crate::bytes::{Bytes, be16, be32};
use crate::error::{ErrorKind, Result, WireError};
use crate::int::{IntVersion, baseline_len, decode_report_metadata};
use crate::opts::DecodeOptions;
use crate::packet::{Packet, Start};

pub const REP_TYPE_INNER_ONLY: u8 = 0;
pub const REP_TYPE_INT: u8 = 1;
pub const REP_TYPE_IOAM: u8 = 2;

pub const IN_TYPE_NONE: u8 = 0;
pub const IN_TYPE_TLV: u8 = 1;
pub const IN_TYPE_DS_EXTENSION: u8 = 2;
pub const IN_TYPE_ETHERNET: u8 = 3;
pub const IN_TYPE_IPV4: u8 = 4;
pub const IN_TYPE_IPV6: u8 = 5;

/// RepMdBits bit 15: Queue ID + Drop Reason + padding.
pub const REP_MD_DROP: u16 = 0x0001;

/// `Ver(4) | hw_id(6) | Sequence(22) | Node ID(32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GroupHeader {
    pub version: u8,
    pub hw_id: u8,
    pub sequence: u32,
    pub node_id: u32,
}

impl GroupHeader {
    pub const LEN: usize = 8;

    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<8>("tr_v2.0_group", "version")?;
        Ok(Self {
            version: a[0] >> 4,
            hw_id: ((a[0] & 0x0F) << 2) | (a[1] >> 6),
            sequence: be32(a, 0) & 0x3F_FFFF,
            node_id: be32(a, 4),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        let w = (u32::from(self.version) << 28)
            | (u32::from(self.hw_id & 0x3F) << 22)
            | (self.sequence & 0x3F_FFFF);
        out.extend_from_slice(&w.to_be_bytes());
        out.extend_from_slice(&self.node_id.to_be_bytes());
    }
}

/// `RepType(4) InType(4) | Report Length(8) | MD Length(8) | D Q F I Rsvd(4)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IndividualHeader {
    pub rep_type: u8,
    pub in_type: u8,
    pub report_length: u8,
    pub md_length: u8,
    pub dropped: bool,
    pub congested_queue: bool,
    pub tracked_flow: bool,
    pub intermediate: bool,
}

impl IndividualHeader {
    pub const LEN: usize = 4;

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.rep_type << 4) | (self.in_type & 0x0F));
        out.push(self.report_length);
        out.push(self.md_length);
        out.push(
            (u8::from(self.dropped) << 7)
                | (u8::from(self.congested_queue) << 6)
                | (u8::from(self.tracked_flow) << 5)
                | (u8::from(self.intermediate) << 4),
        );
    }
}

/// Main contents of a RepType 1 (INT) report: this node's own metadata, decoded on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntMainContents<'a> {
    pub rep_md_bits: u16,
    pub domain_specific_id: u16,
    pub ds_md_bits: u16,
    pub ds_md_status: u16,
    /// Baseline metadata (and the drop word), without the domain-specific part.
    metadata: Bytes<'a>,
    /// Bytes of domain-specific metadata skipped.
    pub ds_metadata_len: usize,
}

impl<'a> IntMainContents<'a> {
    pub const FIXED_LEN: usize = 8;

    #[inline]
    fn parse(b: Bytes<'a>, md_len: usize) -> Result<Self> {
        let a = b.array::<8>("tr_v2.0_int_main", "rep_md_bits")?;
        let rep_md_bits = be16(a, 0);
        let (md, _) = b.skip(8, "tr_v2.0_int_main", "ds_md_status")?.split(
            md_len,
            "tr_v2.0_int_main",
            "metadata",
        )?;
        let len = Self::baseline_and_drop_len(rep_md_bits);
        if len > md_len {
            return Err(WireError::new(
                "tr_v2.0_individual",
                "md_length",
                b.offset(),
                ErrorKind::BadLength {
                    value: md_len / 4,
                    expected: "words covering RepMdBits",
                },
            ));
        }
        Ok(Self {
            rep_md_bits,
            domain_specific_id: be16(a, 2),
            ds_md_bits: be16(a, 4),
            ds_md_status: be16(a, 6),
            metadata: md.prefix(len),
            ds_metadata_len: md_len - len,
        })
    }

    /// Bit 0 is reserved (the node id is in the group header); bit 15 is the drop word.
    fn baseline(rep_md_bits: u16) -> u16 {
        rep_md_bits & 0x7FFE
    }

    fn baseline_and_drop_len(rep_md_bits: u16) -> usize {
        baseline_len(IntVersion::V2, Self::baseline(rep_md_bits))
            + if rep_md_bits & REP_MD_DROP != 0 { 4 } else { 0 }
    }

    /// The reporting node's metadata (node id not included: it is in the group header).
    #[inline]
    pub fn metadata(&self) -> HopRecord {
        reporting_hop(self.rep_md_bits, self.metadata.data())
    }
}

/// The reporting node's metadata from its RepMdBits and baseline (+ drop word) bytes.
#[inline(always)]
pub(crate) fn reporting_hop(rep_md_bits: u16, md: &[u8]) -> HopRecord {
    let baseline = IntMainContents::baseline(rep_md_bits);
    let mut hop = decode_report_metadata(baseline, md);
    if rep_md_bits & REP_MD_DROP != 0 {
        let at = baseline_len(IntVersion::V2, baseline);
        if let Some(w) = md.get(at..at + 2) {
            hop.set_raw(HopField::QueueId, w[0].into(), 8);
            hop.set_raw(HopField::DropReason, w[1].into(), 8);
        }
    }
    hop
}

#[cfg(feature = "serde")]
impl serde::Serialize for IntMainContents<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("IntMainContents", 6)?;
        st.serialize_field("rep_md_bits", &format_args!("{:#06x}", self.rep_md_bits))?;
        st.serialize_field("domain_specific_id", &self.domain_specific_id)?;
        st.serialize_field("ds_md_bits", &self.ds_md_bits)?;
        st.serialize_field("ds_md_status", &self.ds_md_status)?;
        st.serialize_field("metadata", &self.metadata())?;
        st.serialize_field("ds_metadata_len", &self.ds_metadata_len)?;
        st.end()
    }
}

/// `TLVType(4) Rsvd(4) | TLVLength(8) | Template(16)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TlvHeader {
    pub tlv_type: u8,
    pub length: u8,
    pub template: u16,
}

/// What an individual report carries after its main contents.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum InnerContents<'a> {
    None,
    Packet(Packet<'a>),
    Tlv {
        tlv: TlvHeader,
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        packet: Option<Packet<'a>>,
    },
    /// Domain-specific extension data, skipped.
    DomainSpecific {
        len: usize,
    },
}

impl<'a> InnerContents<'a> {
    pub fn packet(&self) -> Option<&Packet<'a>> {
        match self {
            Self::Packet(p) => Some(p),
            Self::Tlv { packet, .. } => packet.as_ref(),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IndividualReport<'a> {
    pub header: IndividualHeader,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub main: Option<IntMainContents<'a>>,
    pub inner: InnerContents<'a>,
}

/// A v2.0 report: the group header plus the undecoded individual reports, walked lazily.
#[derive(Clone, Copy, Debug)]
pub struct ReportV20<'a> {
    pub group: GroupHeader,
    body: Bytes<'a>,
    opts: &'a DecodeOptions,
}

impl<'a> ReportV20<'a> {
    #[inline]
    pub fn parse(b: Bytes<'a>, opts: &'a DecodeOptions) -> Result<Self> {
        let group = GroupHeader::parse(b)?;
        let body = b.skip(GroupHeader::LEN, "tr_v2.0_group", "node_id")?;
        if body.is_empty() {
            return Err(WireError::new(
                "tr_v2.0_individual",
                "rep_type",
                body.offset(),
                ErrorKind::Truncated {
                    needed: IndividualHeader::LEN,
                    available: 0,
                },
            ));
        }
        Ok(Self { group, body, opts })
    }

    /// Visits each individual report in place (no copy of the view): the hot path. Stops at
    /// the first error, which it returns.
    #[inline]
    pub fn for_each_report(&self, mut visit: impl FnMut(&IndividualReport<'a>)) -> Result<()> {
        let mut rest = self.body;
        while !rest.is_empty() {
            let (report, next) = parse_individual(rest, self.opts)?;
            visit(&report);
            rest = next;
        }
        Ok(())
    }

    /// The individual reports; an error ends the walk (lengths after it can't be trusted).
    pub fn reports(&self) -> Reports<'a> {
        Reports {
            rest: self.body,
            opts: self.opts,
            failed: false,
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for ReportV20<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ReportV20", 2)?;
        st.serialize_field("group", &self.group)?;
        let reports: Vec<_> = self.reports().filter_map(Result::ok).collect();
        st.serialize_field("reports", &reports)?;
        st.end()
    }
}

#[derive(Clone, Debug)]
pub struct Reports<'a> {
    rest: Bytes<'a>,
    opts: &'a DecodeOptions,
    failed: bool,
}

impl<'a> Iterator for Reports<'a> {
    type Item = Result<IndividualReport<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let r = parse_individual(self.rest, self.opts);
        match r {
            Ok((report, rest)) => {
                self.rest = rest;
                Some(Ok(report))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[inline]
fn parse_individual<'a>(
    b: Bytes<'a>,
    opts: &DecodeOptions,
) -> Result<(IndividualReport<'a>, Bytes<'a>)> {
    const H: &str = "tr_v2.0_individual";
    let a = b.array::<4>(H, "rep_type")?;
    let header = IndividualHeader {
        rep_type: a[0] >> 4,
        in_type: a[0] & 0x0F,
        report_length: a[1],
        md_length: a[2],
        dropped: a[3] & 0x80 != 0,
        congested_queue: a[3] & 0x40 != 0,
        tracked_flow: a[3] & 0x20 != 0,
        intermediate: a[3] & 0x10 != 0,
    };
    let after = b.skip(IndividualHeader::LEN, H, "flags")?;
    let (contents, rest) = if header.report_length == 0xFF {
        (after, Bytes::at(&[], after.offset() + after.len()))
    } else {
        after.split(usize::from(header.report_length) * 4, H, "report_length")?
    };
    let md_len = usize::from(header.md_length) * 4;
    let (main, inner_bytes) = match header.rep_type {
        REP_TYPE_INNER_ONLY => (None, contents),
        REP_TYPE_INT => {
            let main_len = IntMainContents::FIXED_LEN + md_len;
            if main_len > contents.len() {
                return Err(WireError::new(
                    H,
                    "md_length",
                    b.offset() + 2,
                    ErrorKind::BadLength {
                        value: header.md_length.into(),
                        expected: "MD Length within Report Length",
                    },
                ));
            }
            let main = IntMainContents::parse(contents, md_len)?;
            (Some(main), contents.skip(main_len, H, "main_contents")?)
        }
        other => {
            return Err(WireError::new(
                H,
                "rep_type",
                b.offset(),
                ErrorKind::Unsupported {
                    value: other.into(),
                },
            ));
        }
    };
    let inner = match header.in_type {
        IN_TYPE_NONE => InnerContents::None,
        IN_TYPE_DS_EXTENSION => InnerContents::DomainSpecific {
            len: inner_bytes.len(),
        },
        IN_TYPE_ETHERNET => {
            InnerContents::Packet(Packet::parse(inner_bytes, Start::Ethernet, opts)?)
        }
        IN_TYPE_IPV4 => InnerContents::Packet(Packet::parse(inner_bytes, Start::Ipv4, opts)?),
        IN_TYPE_IPV6 => InnerContents::Packet(Packet::parse(inner_bytes, Start::Ipv6, opts)?),
        IN_TYPE_TLV => {
            let t = inner_bytes.array::<4>("tr_v2.0_tlv", "tlv_type")?;
            let tlv = TlvHeader {
                tlv_type: t[0] >> 4,
                length: t[1],
                template: be16(t, 2),
            };
            let (data, _) = inner_bytes.skip(4, "tr_v2.0_tlv", "template")?.split(
                usize::from(tlv.length) * 4,
                "tr_v2.0_tlv",
                "tlv_length",
            )?;
            let start = match tlv.tlv_type {
                1 => Some(Start::Ethernet),
                2 => Some(Start::Ipv4),
                3 => Some(Start::Ipv6),
                _ => None,
            };
            let packet = start.map(|s| Packet::parse(data, s, opts)).transpose()?;
            InnerContents::Tlv { tlv, packet }
        }
        other => {
            return Err(WireError::new(
                H,
                "in_type",
                b.offset(),
                ErrorKind::Unsupported {
                    value: other.into(),
                },
            ));
        }
    };
    Ok((
        IndividualReport {
            header,
            main,
            inner,
        },
        rest,
    ))
}
