//! INT v2.0 / v2.1: INT-MD (metadata header + stack) and INT-MX (header only), with the shims
//! for TCP/UDP, GRE and VXLAN-GPE and the Geneve option. Shim Length excludes the shim.

use super::{HopStack, IntVersion};
use crate::bytes::{Bytes, be16};
use crate::error::{ErrorKind, Result, WireError};

/// Shim / option header type: 1 = INT-MD, 2 = destination, 3 = INT-MX.
pub const TYPE_MD: u8 = 1;
pub const TYPE_DESTINATION: u8 = 2;
pub const TYPE_MX: u8 = 3;

/// TCP/UDP shim `Type(4) NPT(2) R R | Length(8) | 16 bits per NPT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ShimV2 {
    pub int_type: u8,
    /// Next-protocol type: 0 = flagged by DSCP/probe, 1 = original UDP payload follows,
    /// 2 = original L4 header follows.
    pub npt: u8,
    /// Words of metadata header + stack (shim not counted).
    pub length: u8,
    /// NPT 0: the original DSCP.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dscp: Option<u8>,
    /// NPT 1: the original UDP destination port.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub original_destination_port: Option<u16>,
    /// NPT 2: the original IP protocol.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub original_protocol: Option<u8>,
}

impl ShimV2 {
    pub const LEN: usize = 4;
    const H: &'static str = "int_v2_shim";

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<4>(Self::H, "type")?;
        let npt = (a[0] >> 2) & 3;
        if npt == 3 {
            return Err(WireError::new(
                Self::H,
                "npt",
                b.offset(),
                ErrorKind::Unsupported { value: 3 },
            ));
        }
        Ok(Self {
            int_type: a[0] >> 4,
            npt,
            length: a[1],
            dscp: (npt == 0).then_some(a[3] >> 2),
            original_destination_port: (npt == 1).then_some(be16(a, 2)),
            original_protocol: (npt == 2).then_some(a[3]),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.int_type << 4) | ((self.npt & 3) << 2));
        out.push(self.length);
        let tail = match self.npt {
            0 => u16::from(self.dscp.unwrap_or(0) << 2),
            1 => self.original_destination_port.unwrap_or(0),
            _ => u16::from(self.original_protocol.unwrap_or(0)),
        };
        out.extend_from_slice(&tail.to_be_bytes());
    }
}

/// GRE shim `Type(4) G(1) Rsvd(3) | Length(8) | Next Protocol (EtherType, 16)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GreShimV2 {
    pub int_type: u8,
    /// The INT source inserted the GRE header.
    pub gre_inserted: bool,
    pub length: u8,
    pub next_protocol: u16,
}

impl GreShimV2 {
    pub const LEN: usize = 4;

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<4>("int_v2_gre_shim", "type")?;
        Ok(Self {
            int_type: a[0] >> 4,
            gre_inserted: a[0] & 0x08 != 0,
            length: a[1],
            next_protocol: be16(a, 2),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.int_type << 4) | (u8::from(self.gre_inserted) << 3));
        out.push(self.length);
        out.extend_from_slice(&self.next_protocol.to_be_bytes());
    }
}

/// VXLAN-GPE shim `Type(4) Rsvd(4) | Length(8) | G(1) Reserved(7) | Next Protocol(8)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GpeShimV2 {
    pub int_type: u8,
    pub length: u8,
    /// The original packet used plain VXLAN.
    pub was_vxlan: bool,
    pub next_protocol: u8,
}

impl GpeShimV2 {
    pub const LEN: usize = 4;

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<4>("int_v2_gpe_shim", "type")?;
        Ok(Self {
            int_type: a[0] >> 4,
            length: a[1],
            was_vxlan: a[2] & 0x80 != 0,
            next_protocol: a[3],
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[
            self.int_type << 4,
            self.length,
            u8::from(self.was_vxlan) << 7,
            self.next_protocol,
        ]);
    }
}

/// INT-MD metadata header (12 B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MdHeaderV2 {
    pub version: u8,
    pub discard: bool,
    pub max_hop_exceeded: bool,
    pub mtu_exceeded: bool,
    pub hop_ml: u8,
    pub remaining_hop_count: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub instruction_bitmap: u16,
    pub domain_specific_id: u16,
    pub ds_instruction: u16,
    pub ds_flags: u16,
}

impl MdHeaderV2 {
    pub const LEN: usize = 12;
    const H: &'static str = "int_md_header";

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<12>(Self::H, "version")?;
        let h = Self {
            version: a[0] >> 4,
            discard: a[0] & 0x08 != 0,
            max_hop_exceeded: a[0] & 0x04 != 0,
            mtu_exceeded: a[0] & 0x02 != 0,
            hop_ml: a[2] & 0x1F,
            remaining_hop_count: a[3],
            instruction_bitmap: be16(a, 4),
            domain_specific_id: be16(a, 6),
            ds_instruction: be16(a, 8),
            ds_flags: be16(a, 10),
        };
        if h.version != 2 {
            return Err(WireError::new(
                Self::H,
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: h.version },
            ));
        }
        Ok(h)
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(
            (self.version << 4)
                | (u8::from(self.discard) << 3)
                | (u8::from(self.max_hop_exceeded) << 2)
                | (u8::from(self.mtu_exceeded) << 1),
        );
        out.push(0);
        out.push(self.hop_ml & 0x1F);
        out.push(self.remaining_hop_count);
        for v in [
            self.instruction_bitmap,
            self.domain_specific_id,
            self.ds_instruction,
            self.ds_flags,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// INT-MX header (12 B): instructions for every node to report in its own Telemetry Report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MxHeaderV2 {
    pub version: u8,
    pub discard: bool,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub instruction_bitmap: u16,
    pub domain_specific_id: u16,
    pub ds_instruction: u16,
    pub ds_flags: u16,
}

impl MxHeaderV2 {
    pub const LEN: usize = 12;
    const H: &'static str = "int_mx_header";

    #[inline]
    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<12>(Self::H, "version")?;
        let h = Self {
            version: a[0] >> 4,
            discard: a[0] & 0x08 != 0,
            instruction_bitmap: be16(a, 4),
            domain_specific_id: be16(a, 6),
            ds_instruction: be16(a, 8),
            ds_flags: be16(a, 10),
        };
        if h.version != 2 {
            return Err(WireError::new(
                Self::H,
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: h.version },
            ));
        }
        Ok(h)
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.version << 4) | (u8::from(self.discard) << 3));
        out.extend_from_slice(&[0, 0, 0]);
        for v in [
            self.instruction_bitmap,
            self.domain_specific_id,
            self.ds_instruction,
            self.ds_flags,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// The body an INT v2 shim or Geneve option announces: MD header + stack, or MX header.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum IntV2Body<'a> {
    Md {
        header: MdHeaderV2,
        hops: HopStack<'a>,
    },
    Mx {
        header: MxHeaderV2,
        /// Bytes of source-inserted domain-specific metadata.
        ds_metadata_len: usize,
    },
}

impl<'a> IntV2Body<'a> {
    /// Parses `length_words` × 4 bytes of body for header `int_type`; returns what follows.
    #[inline]
    pub fn parse(int_type: u8, length_words: usize, b: Bytes<'a>) -> Result<(Self, Bytes<'a>)> {
        let (body, rest) = b.split(length_words * 4, "int_v2_shim", "length")?;
        let parsed = match int_type {
            TYPE_MD | TYPE_DESTINATION => {
                let header = MdHeaderV2::parse(body)?;
                let data = body.skip(MdHeaderV2::LEN, "int_md_header", "version")?;
                let hops = HopStack::new(
                    IntVersion::V2,
                    header.instruction_bitmap,
                    usize::from(header.hop_ml) * 4,
                    data,
                )?;
                Self::Md { header, hops }
            }
            TYPE_MX => {
                let header = MxHeaderV2::parse(body)?;
                Self::Mx {
                    header,
                    ds_metadata_len: body.len() - MxHeaderV2::LEN,
                }
            }
            other => {
                return Err(WireError::new(
                    "int_v2_shim",
                    "type",
                    b.offset(),
                    ErrorKind::Unsupported {
                        value: other.into(),
                    },
                ));
            }
        };
        Ok((parsed, rest))
    }

    pub fn hops(&self) -> Option<&HopStack<'a>> {
        match self {
            Self::Md { hops, .. } => Some(hops),
            Self::Mx { .. } => None,
        }
    }

    pub fn instruction_bitmap(&self) -> u16 {
        match self {
            Self::Md { header, .. } => header.instruction_bitmap,
            Self::Mx { header, .. } => header.instruction_bitmap,
        }
    }
}
