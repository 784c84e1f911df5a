//! # kplane-pcap
//!
//! Reads pcap and pcapng captures (told apart by their magic number) as a stream of frames
//! with nanosecond timestamps, and writes pcap / pcapng files (for the sample captures and
//! tests). pcapng interface timestamp resolutions (`if_tsresol`) are honoured.

mod error;
pub use error::CaptureError;

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};

/// Link type: Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type: raw IP (v4 or v6 by the first nibble).
pub const LINKTYPE_RAW: u32 = 101;
pub const LINKTYPE_IPV4: u32 = 228;
pub const LINKTYPE_IPV6: u32 = 229;

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Link type (tcpdump.org LINKTYPE_*).
    pub linktype: u32,
    /// Length on the wire (may exceed `data.len()` when the capture was truncated).
    pub orig_len: u32,
    pub data: Cow<'a, [u8]>,
}

enum Inner {
    Pcap(PcapReader<BufReader<File>>, u32),
    /// The reader and, per interface, its link type and timestamp unit.
    PcapNg(PcapNgReader<BufReader<File>>, Vec<(u32, TsUnit)>, Vec<u8>),
}

/// How to turn an interface's raw timestamp count into ns.
#[derive(Clone, Copy, Debug)]
enum TsUnit {
    /// Multiply by this many ns (decimal resolutions up to 1 ns).
    Mul(u64),
    /// Divide by this (finer than 1 ns).
    Div(u64),
    /// Binary resolution 2^-n s.
    Pow2(u32),
}

impl TsUnit {
    fn of(iface: &InterfaceDescriptionBlock<'_>) -> Self {
        let resol = iface.options.iter().find_map(|o| match o {
            InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
            _ => None,
        });
        match resol.unwrap_or(6) {
            r if r & 0x80 != 0 => Self::Pow2(u32::from(r & 0x7F)),
            r if r <= 9 => Self::Mul(10u64.pow(9 - u32::from(r))),
            r => Self::Div(10u64.saturating_pow(u32::from(r) - 9)),
        }
    }

    fn to_ns(self, raw: u64) -> u64 {
        match self {
            Self::Mul(m) => raw.saturating_mul(m),
            Self::Div(d) => raw / d.max(1),
            Self::Pow2(n) => ((u128::from(raw) * 1_000_000_000) >> n.min(127)) as u64,
        }
    }
}

/// A capture file being read.
pub struct CaptureReader {
    path: String,
    inner: Inner,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("path", &self.path)
            .finish()
    }
}

const PCAP_MAGICS: [u32; 4] = [0xA1B2C3D4, 0xD4C3B2A1, 0xA1B23C4D, 0x4D3CB2A1];
const PCAPNG_MAGIC: u32 = 0x0A0D0D0A;

impl CaptureReader {
    /// Opens a pcap or pcapng file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let path_str = path.as_ref().display().to_string();
        let open_err = |source| CaptureError::Open {
            path: path_str.clone(),
            source,
        };
        let mut file = File::open(path.as_ref()).map_err(open_err)?;
        let mut magic = [0u8; 4];
        let n = file.read(&mut magic).map_err(open_err)?;
        file.seek(SeekFrom::Start(0)).map_err(open_err)?;
        let magic = u32::from_be_bytes(magic);
        let fmt_err = |source| CaptureError::Format {
            path: path_str.clone(),
            source,
        };
        let reader = BufReader::new(file);
        let inner = if n == 4 && PCAP_MAGICS.contains(&magic) {
            let r = PcapReader::new(reader).map_err(fmt_err)?;
            let link = u32::from(r.header().datalink);
            Inner::Pcap(r, link)
        } else if n == 4 && magic == PCAPNG_MAGIC {
            Inner::PcapNg(
                PcapNgReader::new(reader).map_err(fmt_err)?,
                Vec::new(),
                Vec::new(),
            )
        } else {
            return Err(CaptureError::NotACapture {
                path: path_str,
                magic,
            });
        };
        Ok(Self {
            path: path_str,
            inner,
        })
    }

    /// The next frame; `None` at the end. A corrupt record is an error (the file is not
    /// resynchronised past it).
    pub fn next_frame(&mut self) -> Option<Result<Frame<'_>, CaptureError>> {
        let path = &self.path;
        let fmt_err = |source| CaptureError::Format {
            path: path.clone(),
            source,
        };
        match &mut self.inner {
            Inner::Pcap(r, link) => {
                let link = *link;
                r.next_packet().map(|p| {
                    p.map(|p| Frame {
                        ts_ns: p.timestamp.as_nanos() as u64,
                        linktype: link,
                        orig_len: p.orig_len,
                        data: p.data,
                    })
                    .map_err(fmt_err)
                })
            }
            Inner::PcapNg(r, ifaces, buf) => {
                // Copy the packet into `buf` so no borrow of the reader outlives the loop.
                let (ts_ns, linktype, orig_len) = loop {
                    let block = match r.next_block()? {
                        Ok(b) => b,
                        Err(e) => return Some(Err(fmt_err(e))),
                    };
                    match block {
                        // Interface blocks set the link type and units of later packets.
                        Block::InterfaceDescription(i) => {
                            ifaces.push((u32::from(i.linktype), TsUnit::of(&i)));
                        }
                        Block::SectionHeader(_) => ifaces.clear(),
                        Block::EnhancedPacket(p) => {
                            let (linktype, unit) = ifaces
                                .get(p.interface_id as usize)
                                .copied()
                                .unwrap_or((LINKTYPE_ETHERNET, TsUnit::Mul(1000)));
                            buf.clear();
                            buf.extend_from_slice(&p.data);
                            let ts = unit.to_ns(p.timestamp.as_nanos() as u64);
                            break (ts, linktype, p.original_len);
                        }
                        Block::SimplePacket(p) => {
                            buf.clear();
                            buf.extend_from_slice(&p.data);
                            let linktype = ifaces.first().map_or(LINKTYPE_ETHERNET, |i| i.0);
                            break (0, linktype, p.original_len);
                        }
                        _ => {}
                    }
                };
                Some(Ok(Frame {
                    ts_ns,
                    linktype,
                    orig_len,
                    data: Cow::Borrowed(buf.as_slice()),
                }))
            }
        }
    }
}

/// Which file format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
}

enum Writer {
    Pcap(PcapWriter<BufWriter<File>>),
    PcapNg(PcapNgWriter<BufWriter<File>>),
}

/// Writes a capture with one link type and nanosecond timestamps.
pub struct CaptureWriter {
    inner: Writer,
}

impl std::fmt::Debug for CaptureWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter").finish_non_exhaustive()
    }
}

fn werr(e: impl std::fmt::Display) -> CaptureError {
    CaptureError::Write(e.to_string())
}

impl CaptureWriter {
    pub fn create(
        path: impl AsRef<Path>,
        format: CaptureFormat,
        linktype: u32,
    ) -> Result<Self, CaptureError> {
        let file =
            BufWriter::new(
                File::create(path.as_ref()).map_err(|source| CaptureError::Open {
                    path: path.as_ref().display().to_string(),
                    source,
                })?,
            );
        let inner = match format {
            CaptureFormat::Pcap => {
                let header = PcapHeader {
                    datalink: DataLink::from(linktype),
                    ts_resolution: pcap_file::TsResolution::NanoSecond,
                    ..PcapHeader::default()
                };
                Writer::Pcap(PcapWriter::with_header(file, header).map_err(werr)?)
            }
            CaptureFormat::PcapNg => {
                let mut w = PcapNgWriter::new(file).map_err(werr)?;
                let iface = InterfaceDescriptionBlock {
                    linktype: DataLink::from(linktype),
                    snaplen: 0,
                    options: vec![InterfaceDescriptionOption::IfTsResol(9)],
                };
                w.write_pcapng_block(iface).map_err(werr)?;
                Writer::PcapNg(w)
            }
        };
        Ok(Self { inner })
    }

    pub fn write(&mut self, ts_ns: u64, data: &[u8]) -> Result<(), CaptureError> {
        let ts = Duration::from_nanos(ts_ns);
        match &mut self.inner {
            Writer::Pcap(w) => w
                .write_packet(&PcapPacket::new(ts, data.len() as u32, data))
                .map(drop)
                .map_err(werr),
            Writer::PcapNg(w) => w
                .write_pcapng_block(EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: ts,
                    original_len: data.len() as u32,
                    data: Cow::Borrowed(data),
                    options: vec![],
                })
                .map(drop)
                .map_err(werr),
        }
    }

    /// Flushes the file.
    pub fn finish(self) -> Result<(), CaptureError> {
        match self.inner {
            Writer::Pcap(w) => w.into_writer().flush().map_err(werr),
            Writer::PcapNg(w) => w.into_inner().flush().map_err(werr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(format: CaptureFormat) {
        let dir =
            std::env::temp_dir().join(format!("kplane-pcap-{format:?}-{}", std::process::id()));
        let mut w = CaptureWriter::create(&dir, format, LINKTYPE_ETHERNET).unwrap();
        w.write(1_700_000_000_123_456_789, b"first").unwrap();
        w.write(1_700_000_001_000_000_001, b"second").unwrap();
        w.finish().unwrap();
        let mut r = CaptureReader::open(&dir).unwrap();
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(
            (f.ts_ns, f.linktype, &*f.data),
            (1_700_000_000_123_456_789, 1, &b"first"[..])
        );
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(
            (f.ts_ns, &*f.data),
            (1_700_000_001_000_000_001, &b"second"[..])
        );
        assert!(r.next_frame().is_none());
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn pcap_round_trips_with_ns_timestamps() {
        round_trip(CaptureFormat::Pcap);
    }

    #[test]
    fn pcapng_round_trips_with_ns_timestamps() {
        round_trip(CaptureFormat::PcapNg);
    }

    #[test]
    fn pcapng_default_resolution_is_microseconds() {
        assert_eq!(TsUnit::Mul(1000).to_ns(5), 5000);
        assert_eq!(TsUnit::Pow2(10).to_ns(1024), 1_000_000_000);
    }

    #[test]
    fn not_a_capture_is_a_clear_error() {
        let p = std::env::temp_dir().join(format!("kplane-notpcap-{}", std::process::id()));
        std::fs::write(&p, b"hello world").unwrap();
        let e = CaptureReader::open(&p).unwrap_err();
        assert!(e.to_string().contains("not a pcap or pcapng"), "{e}");
        std::fs::remove_file(&p).unwrap();
        assert!(matches!(
            CaptureReader::open("/nonexistent/x.pcap"),
            Err(CaptureError::Open { .. })
        ));
    }
}
