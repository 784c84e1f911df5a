//! INT v0.5 over TCP/UDP: shim (4 B), metadata header (8 B), stack, tail (4 B).
//! The same 8-byte metadata header is used by the KDN paper's INT-over-UDP variant.

use super::{HopStack, IntVersion};
use crate::bytes::{Bytes, be16};
use crate::error::{ErrorKind, Result, WireError};

/// `Type(8) | Reserved(8) | Length(8) | Reserved(8)`; Length counts shim + header + stack + tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ShimV05 {
    pub int_type: u8,
    pub length: u8,
}

impl ShimV05 {
    pub const LEN: usize = 4;
    const H: &'static str = "int_v0.5_shim";

    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<4>(Self::H, "type")?;
        Ok(Self {
            int_type: a[0],
            length: a[2],
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.int_type, 0, self.length, 0]);
    }
}

/// `Ver(4) Rep(2) C E | R(3) InsCnt(5) | MaxHopCnt | TotalHopCnt | Bitmap(16) | Reserved(16)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MdHeaderV05 {
    pub version: u8,
    pub rep: u8,
    pub copy: bool,
    pub max_hop_exceeded: bool,
    pub instruction_count: u8,
    pub max_hop_count: u8,
    pub total_hop_count: u8,
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::hex16"))]
    pub instruction_bitmap: u16,
}

impl MdHeaderV05 {
    pub const LEN: usize = 8;
    const H: &'static str = "int_v0.5_md";

    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<8>(Self::H, "version")?;
        Ok(Self {
            version: a[0] >> 4,
            rep: (a[0] >> 2) & 3,
            copy: a[0] & 2 != 0,
            max_hop_exceeded: a[0] & 1 != 0,
            instruction_count: a[1] & 0x1F,
            max_hop_count: a[2],
            total_hop_count: a[3],
            instruction_bitmap: be16(a, 4),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(
            (self.version << 4)
                | ((self.rep & 3) << 2)
                | (u8::from(self.copy) << 1)
                | u8::from(self.max_hop_exceeded),
        );
        out.push(self.instruction_count & 0x1F);
        out.push(self.max_hop_count);
        out.push(self.total_hop_count);
        out.extend_from_slice(&self.instruction_bitmap.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }

    /// The stack that follows, `stack_len` bytes long (from the enclosing length field).
    pub fn stack<'a>(&self, b: Bytes<'a>, stack_len: usize) -> Result<(HopStack<'a>, Bytes<'a>)> {
        let (data, rest) = b.split(stack_len, HopStack::HEADER, "metadata")?;
        let stride = usize::from(self.instruction_count) * 4;
        let expected = stride * usize::from(self.total_hop_count);
        if expected != stack_len {
            return Err(WireError::new(
                Self::H,
                "total_hop_count",
                b.offset(),
                ErrorKind::BadLength {
                    value: stack_len,
                    expected: "InsCnt x 4 x TotalHopCnt bytes of stack",
                },
            ));
        }
        Ok((
            HopStack::new(IntVersion::V05, self.instruction_bitmap, stride, data)?,
            rest,
        ))
    }
}

/// `Proto(8) | Destination Port(16) | DSCP(8)`: the packet's original values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TailV05 {
    pub protocol: u8,
    pub destination_port: u16,
    pub dscp: u8,
}

impl TailV05 {
    pub const LEN: usize = 4;

    pub fn parse(b: Bytes<'_>) -> Result<Self> {
        let a = b.array::<4>("int_v0.5_tail", "protocol")?;
        Ok(Self {
            protocol: a[0],
            destination_port: be16(a, 1),
            dscp: a[3],
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.protocol);
        out.extend_from_slice(&self.destination_port.to_be_bytes());
        out.push(self.dscp);
    }
}

/// A whole v0.5 INT block after the L4 header.
#[derive(Clone, Copy, Debug)]
pub struct IntV05<'a> {
    pub shim: ShimV05,
    pub md: MdHeaderV05,
    pub stack: HopStack<'a>,
    pub tail: TailV05,
}

impl<'a> IntV05<'a> {
    pub fn parse(b: Bytes<'a>) -> Result<(Self, Bytes<'a>)> {
        let shim = ShimV05::parse(b)?;
        let total = usize::from(shim.length) * 4;
        let fixed = ShimV05::LEN + MdHeaderV05::LEN + TailV05::LEN;
        if total < fixed {
            return Err(WireError::new(
                "int_v0.5_shim",
                "length",
                b.offset() + 2,
                ErrorKind::BadLength {
                    value: shim.length.into(),
                    expected: ">= 4 words (shim + header + tail)",
                },
            ));
        }
        let b = b.skip(ShimV05::LEN, "int_v0.5_shim", "type")?;
        let md = MdHeaderV05::parse(b)?;
        if md.version != 0 {
            return Err(WireError::new(
                "int_v0.5_md",
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: md.version },
            ));
        }
        let b = b.skip(MdHeaderV05::LEN, "int_v0.5_md", "version")?;
        let (stack, rest) = md.stack(b, total - fixed)?;
        let tail = TailV05::parse(rest)?;
        let rest = rest.skip(TailV05::LEN, "int_v0.5_tail", "protocol")?;
        Ok((
            Self {
                shim,
                md,
                stack,
                tail,
            },
            rest,
        ))
    }
}
