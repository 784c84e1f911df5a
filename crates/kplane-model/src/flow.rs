use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

/// The 5-tuple of the monitored (user) flow, after undoing INT's own changes to the packet:
/// original L4 destination port from an INT shim or tail, original IP protocol from an
/// INT-label option, the inner headers of a tunnel rather than its outer ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FlowKey {
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
}

impl Default for FlowKey {
    fn default() -> Self {
        Self {
            src_ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst_ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            src_port: 0,
            dst_port: 0,
            protocol: 0,
        }
    }
}

/// An address as the 16 bytes stored in Arrow (`FixedSizeBinary(16)`): IPv6 as is, IPv4 as an
/// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), so one column holds both families.
pub fn ip_to_16(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Inverse of [`ip_to_16`]: mapped addresses come back as IPv4.
pub fn ip_from_16(bytes: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(bytes);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_maps_and_returns() {
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let b = ip_to_16(ip);
        assert_eq!(&b[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(ip_from_16(b), ip);
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(ip_from_16(ip_to_16(v6)), v6);
    }
}
