use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;

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

/// The secret key of flow hashes: the 64-bit identity flow state is found by.
///
/// Flow hashes are SipHash-1-3 under this key, a pseudo-random function: without the key a
/// tenant choosing addresses and ports cannot make two flows share a hash (an unkeyed mix,
/// even seeded, lets differences cancel through it whatever the seed). Each process draws
/// its own ([`FlowHashKey::random`]); a processor that checkpoints per-flow state keeps its
/// key beside the checkpoint so the restored state is found again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct FlowHashKey(pub [u64; 2]);

impl FlowHashKey {
    /// A key from the operating system's randomness (through std's per-process `RandomState`
    /// seeds, which it draws from the OS).
    pub fn random() -> Self {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        Self([state.hash_one(0u8), state.hash_one(1u8)])
    }

    /// The hash of a flow.
    #[inline]
    pub fn hash(&self, f: &FlowKey) -> u64 {
        self.hash_16(
            ip_to_16(f.src_ip),
            ip_to_16(f.dst_ip),
            f.src_port,
            f.dst_port,
            f.protocol,
        )
    }

    /// The keyed hash of a few words (other wire-chosen ids, such as node ids).
    #[inline]
    pub fn hash_words(&self, words: &[u64]) -> u64 {
        use std::hash::Hasher;
        let mut h = SipHasher13::new_with_keys(self.0[0], self.0[1]);
        for w in words {
            h.write_u64(*w);
        }
        h.finish()
    }

    /// The hash of a flow whose addresses are in their 16-byte form ([`ip_to_16`]), as the
    /// Arrow columns hold them: the same value [`FlowKey`]'s [`FlowHashKey::hash`] gives.
    #[inline]
    pub fn hash_16(
        &self,
        src: [u8; 16],
        dst: [u8; 16],
        src_port: u16,
        dst_port: u16,
        protocol: u8,
    ) -> u64 {
        let mut block = [0u8; 37];
        block[..16].copy_from_slice(&src);
        block[16..32].copy_from_slice(&dst);
        block[32..34].copy_from_slice(&src_port.to_be_bytes());
        block[34..36].copy_from_slice(&dst_port.to_be_bytes());
        block[36] = protocol;
        SipHasher13::new_with_keys(self.0[0], self.0[1]).hash(&block)
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

    #[test]
    fn flow_hashes_depend_on_the_key_and_agree_across_forms() {
        let f = FlowKey {
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "2001:db8::2".parse().unwrap(),
            src_port: 4242,
            dst_port: 80,
            protocol: 6,
        };
        let (a, b) = (FlowHashKey([1, 2]), FlowHashKey([1, 3]));
        assert_eq!(a.hash(&f), a.hash(&f));
        assert_ne!(a.hash(&f), b.hash(&f));
        assert_eq!(
            a.hash(&f),
            a.hash_16(ip_to_16(f.src_ip), ip_to_16(f.dst_ip), 4242, 80, 6)
        );
        let other = FlowKey {
            src_port: 4243,
            ..f
        };
        assert_ne!(a.hash(&f), a.hash(&other));
        assert_ne!(FlowHashKey::random(), FlowHashKey::random());
    }
}
