//! The UDP datagram inside an Ethernet frame the steering program redirected: its source and
//! its payload. The program only redirects untagged IPv4 (no options, not fragmented) and
//! IPv6 frames carrying UDP, so this parses exactly those shapes.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// A datagram found in a frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Datagram {
    pub source: SocketAddr,
    /// Payload offset and length inside the frame.
    pub payload: std::ops::Range<usize>,
    /// The UDP length says more bytes than the frame holds.
    pub truncated: bool,
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// Parses `frame`; `None` when it is not a UDP datagram of a shape the program redirects.
pub fn datagram(frame: &[u8]) -> Option<Datagram> {
    let (source_ip, udp) = match be16(frame.get(..14)?, 12) {
        0x0800 => {
            let ip = frame.get(14..34)?;
            let src: [u8; 4] = ip[12..16].try_into().ok()?;
            (Ipv4Addr::from(src).into(), 34)
        }
        0x86dd => {
            let ip = frame.get(14..54)?;
            let src: [u8; 16] = ip[8..24].try_into().ok()?;
            (Ipv6Addr::from(src).into(), 54)
        }
        _ => return None,
    };
    let h = frame.get(udp..udp + 8)?;
    let (port, len) = (be16(h, 0), usize::from(be16(h, 4)));
    let start = udp + 8;
    let want = len.checked_sub(8)?;
    let have = frame.len() - start;
    Some(Datagram {
        source: SocketAddr::new(source_ip, port),
        payload: start..start + want.min(have),
        truncated: want > have,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_frame(payload: &[u8], udp_len: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 1, 2, 3, 10, 0, 0, 1]);
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&32766u16.to_be_bytes());
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn finds_the_payload_and_source_of_an_ipv4_datagram() {
        let f = ipv4_frame(b"report", 14);
        let d = datagram(&f).unwrap();
        assert_eq!(d.source, "10.1.2.3:40000".parse().unwrap());
        assert_eq!(&f[d.payload.clone()], b"report");
        assert!(!d.truncated);
    }

    #[test]
    fn ethernet_padding_is_not_payload_and_a_short_frame_is_truncated() {
        let mut f = ipv4_frame(b"ab", 10);
        f.extend_from_slice(&[0; 20]); // padding to the 60-byte minimum
        let d = datagram(&f).unwrap();
        assert_eq!(&f[d.payload.clone()], b"ab");
        let f = ipv4_frame(b"ab", 100);
        let d = datagram(&f).unwrap();
        assert!(d.truncated);
        assert_eq!(&f[d.payload], b"ab");
    }

    #[test]
    fn ipv6_and_garbage() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd]);
        let mut ip = [0u8; 40];
        ip[6] = 17;
        ip[8..24].copy_from_slice(&"fd00::7".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x13, 0x88, 0x7f, 0xfe, 0, 11, 0, 0, b'x', b'y', b'z']);
        let d = datagram(&f).unwrap();
        assert_eq!(d.source, "[fd00::7]:5000".parse().unwrap());
        assert_eq!(&f[d.payload], b"xyz");
        assert_eq!(datagram(&f[..20]), None);
        assert_eq!(datagram(&[0u8; 64]), None);
    }
}
