//! INT v1.0 hop-by-hop: shim for TCP/UDP or VXLAN-GPE (4 B, Length includes the shim), the
//! 8-byte metadata header, then the stack. No tail.

use super::{HopStack, IntVersion};
use crate::bytes::{Bytes, be16};
use crate::error::{ErrorKind, Result, WireError};

/// v1.0 shim. Byte 3 is `DSCP(6) R(2)` over TCP/UDP and the next protocol over VXLAN-GPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ShimV10 {
    /// 1 = hop-by-hop, 2 = destination.
    pub int_type: u8,
    /// Words of shim + metadata header + stack.
    pub length: u8,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dscp: Option<u8>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub next_protocol: Option<u8>,
}

impl ShimV10 {
    pub const LEN: usize = 4;
    const H: &'static str = "int_v1.0_shim";

    pub fn parse(b: Bytes<'_>, over_gpe: bool) -> Result<Self> {
        let a = b.array::<4>(Self::H, "type")?;
        Ok(Self {
            int_type: a[0],
            length: a[2],
            dscp: (!over_gpe).then_some(a[3] >> 2),
            next_protocol: over_gpe.then_some(a[3]),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        let b3 = match (self.next_protocol, self.dscp) {
            (Some(np), _) => np,
            (None, Some(d)) => d << 2,
            (None, None) => 0,
        };
        out.extend_from_slice(&[self.int_type, 0, self.length, b3]);
    }
}

/// `Ver Rep C E | M Reserved | Hop ML | RemainingHopCnt | Bitmap(16) | Reserved(16)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MdHeaderV10 {
    pub version: u8,
    pub rep: u8,
    pub copy: bool,
    pub max_hop_exceeded: bool,
    pub mtu_exceeded: bool,
    pub hop_ml: u8,
    pub remaining_hop_count: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub instruction_bitmap: u16,
}

impl MdHeaderV10 {
    pub const LEN: usize = 8;
    const H: &'static str = "int_v1.0_md";

    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<8>(Self::H, "version")?;
        let h = Self {
            version: a[0] >> 4,
            rep: (a[0] >> 2) & 3,
            copy: a[0] & 2 != 0,
            max_hop_exceeded: a[0] & 1 != 0,
            mtu_exceeded: a[1] & 0x80 != 0,
            hop_ml: a[2] & 0x1F,
            remaining_hop_count: a[3],
            instruction_bitmap: be16(a, 4),
        };
        if h.version != 1 {
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
                | ((self.rep & 3) << 2)
                | (u8::from(self.copy) << 1)
                | u8::from(self.max_hop_exceeded),
        );
        out.push(u8::from(self.mtu_exceeded) << 7);
        out.push(self.hop_ml & 0x1F);
        out.push(self.remaining_hop_count);
        out.extend_from_slice(&self.instruction_bitmap.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
}

/// A whole v1.0 INT block.
#[derive(Clone, Copy, Debug)]
pub struct IntV10<'a> {
    pub shim: ShimV10,
    pub md: MdHeaderV10,
    pub stack: HopStack<'a>,
}

impl<'a> IntV10<'a> {
    pub fn parse(b: Bytes<'a>, over_gpe: bool) -> Result<(Self, Bytes<'a>)> {
        let shim = ShimV10::parse(b, over_gpe)?;
        let total = usize::from(shim.length) * 4;
        if total < ShimV10::LEN + MdHeaderV10::LEN {
            return Err(WireError::new(
                "int_v1.0_shim",
                "length",
                b.offset() + 2,
                ErrorKind::BadLength {
                    value: shim.length.into(),
                    expected: ">= 3 words (shim + header)",
                },
            ));
        }
        let b = b.skip(ShimV10::LEN, "int_v1.0_shim", "type")?;
        let md = MdHeaderV10::parse(b)?;
        let b = b.skip(MdHeaderV10::LEN, "int_v1.0_md", "version")?;
        let (data, rest) = b.split(total - 12, HopStack::HEADER, "metadata")?;
        let stack = HopStack::new(
            IntVersion::V10,
            md.instruction_bitmap,
            usize::from(md.hop_ml) * 4,
            data,
        )?;
        Ok((Self { shim, md, stack }, rest))
    }
}
