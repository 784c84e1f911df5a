//! Which partition a record goes to: Kafka's default partitioner, so any Kafka client that
//! keys messages by the same bytes lands on the same partition.
//!
//! `partition = (murmur2(key) & 0x7fffffff) % partitions`, where `murmur2` is Kafka's
//! (`org.apache.kafka.common.utils.Utils.murmur2`, seed 0x9747b28c) and `key` is the flow's
//! **source IP as 16 bytes** (IPv4 as IPv4-mapped IPv6, `::ffff:a.b.c.d`). Records without a
//! flow use the exporter's address. So every record of one source lands in one partition.

use std::net::IpAddr;

use kplane_model::ip_to_16;

/// Kafka's murmur2 (32-bit).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if tail.len() >= 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (≥ 1).
pub fn partition_of_key(key: &[u8], partitions: u32) -> u32 {
    ((murmur2(key) as u32) & 0x7fff_ffff) % partitions.max(1)
}

/// The partition of a source address.
pub fn partition_of(source: IpAddr, partitions: u32) -> u32 {
    partition_of_key(&ip_to_16(source), partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own test vectors (UtilsTest.testMurmur2).
    #[test]
    fn matches_kafka() {
        let cases: [(&str, i32); 6] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (s, want) in cases {
            assert_eq!(murmur2(s.as_bytes()), want, "{s}");
        }
    }

    #[test]
    fn one_source_one_partition_and_spread() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(partition_of(a, 8), partition_of(a, 8));
        let mut seen = [0u32; 8];
        for i in 0..1000u32 {
            let ip = IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            seen[partition_of(ip, 8) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 60), "{seen:?}");
        assert_eq!(partition_of(a, 1), 0);
    }
}
