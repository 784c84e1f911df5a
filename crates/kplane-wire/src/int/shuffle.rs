//! INT v2.x hops of instruction bitmap 0xFF00 — every baseline field, the set fabrics deploy
//! for full visibility — decoded by byte shuffle: the 44 wire bytes of a hop become the
//! record's storage words with three loads and five `pshufb`, where the field-by-field decoder
//! spends about sixty instructions. x86-64 with SSSE3 only, checked at run time; everything
//! else takes the field-by-field decoder, and a test holds the two to the same records.

use kplane_model::HopRecord;

/// Wire bytes of one 0xFF00 hop: node id 0, L1 ports 4, hop latency 8, queue id/occupancy
/// 12, ingress timestamp 16, egress timestamp 24, L2 ports 32, tx utilisation 40.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const FF00_LEN: usize = 44;

/// Appends the hops of `stack` in path order (it is newest first), as the field-by-field
/// decoder would; `present` is the bitmap's presence mask. False when this CPU cannot
/// (nothing appended).
#[inline]
pub(crate) fn push_ff00(
    present: u16,
    stride: usize,
    stack: &[u8],
    out: &mut Vec<HopRecord>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if stride >= FF00_LEN && std::arch::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3, checked on the line above.
        unsafe { x86::push_ff00(present, stride, stack, out) };
        return true;
    }
    let _ = (present, stride, stack, out);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{__m128i, _mm_or_si128, _mm_setr_epi8, _mm_shuffle_epi8};

    use kplane_model::HopRecord;

    use super::FF00_LEN;

    /// Zero in a shuffle mask: the output byte is 0.
    const Z: i8 = -128;

    fn load(bytes: &[u8; 16]) -> __m128i {
        // SAFETY: `__m128i` is 16 plain bytes, any bit pattern valid.
        unsafe { std::mem::transmute::<[u8; 16], __m128i>(*bytes) }
    }

    fn words(v: __m128i) -> [u64; 2] {
        // SAFETY: as in `load`.
        unsafe { std::mem::transmute::<__m128i, [u64; 2]>(v) }
    }

    /// One hop. `a` = bytes 0..16, `b` = 16..32, `c` = 28..44 (the last 16: no read past
    /// the hop). Each output is four little-endian u32 fields in record order, or the two
    /// timestamps.
    #[target_feature(enable = "ssse3")]
    fn hop(present: u16, hop: &[u8; FF00_LEN]) -> HopRecord {
        let (a, b, c) = (
            load(hop[0..16].try_into().expect("16 bytes")),
            load(hop[16..32].try_into().expect("16 bytes")),
            load(hop[28..44].try_into().expect("16 bytes")),
        );
        // Node id, L1 ingress port, L1 egress port, hop latency.
        let f0_3 = _mm_shuffle_epi8(
            a,
            _mm_setr_epi8(3, 2, 1, 0, 5, 4, Z, Z, 7, 6, Z, Z, 11, 10, 9, 8),
        );
        // Queue id, queue occupancy (from `a`); L2 ingress, L2 egress port (from `c`).
        let f4_7 = _mm_or_si128(
            _mm_shuffle_epi8(
                a,
                _mm_setr_epi8(12, Z, Z, Z, 15, 14, 13, Z, Z, Z, Z, Z, Z, Z, Z, Z),
            ),
            _mm_shuffle_epi8(
                c,
                _mm_setr_epi8(Z, Z, Z, Z, Z, Z, Z, Z, 7, 6, 5, 4, 11, 10, 9, 8),
            ),
        );
        // Tx utilisation; buffer id, buffer occupancy, congestion absent.
        let f8_11 = _mm_shuffle_epi8(
            c,
            _mm_setr_epi8(15, 14, 13, 12, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z),
        );
        // Ingress and egress timestamps, 64 bits each.
        let wide = _mm_shuffle_epi8(
            b,
            _mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8),
        );
        let ([w0, w1], [w2, w3], [w4, w5]) = (words(f0_3), words(f4_7), words(f8_11));
        HopRecord::from_words(present, [w0, w1, w2, w3, w4, w5, 0], words(wide))
    }

    /// See [`super::push_ff00`]; the caller checked SSSE3 and `stride >= FF00_LEN`.
    #[target_feature(enable = "ssse3")]
    pub(super) fn push_ff00(present: u16, stride: usize, stack: &[u8], out: &mut Vec<HopRecord>) {
        // Whole hops only, newest first on the wire: walk from the end. An exact-size
        // iterator: one capacity check, not one per hop.
        out.extend(stack.chunks_exact(stride).rev().map(|h| {
            let h = h.first_chunk::<FF00_LEN>().expect("stride >= FF00_LEN");
            hop(present, h)
        }));
    }
}

#[cfg(test)]
mod tests {
    use kplane_model::HopRecord;

    use super::*;
    use crate::int::{IntVersion, decode_hop};

    /// Hops of 0xFF00 with random bytes (so every field, all-ones "unavailable" included,
    /// at every value width), strides with trailing metadata words, partial trailing hops.
    #[test]
    fn shuffled_hops_equal_field_by_field_hops() {
        let mut rng = kplane_model::rng::Rng::new(1);
        let mut byte = || {
            let x = rng.next_u64();
            // One byte in four all-ones, so whole fields are often "unavailable".
            if x & 3 == 0 { 0xFF } else { (x >> 8) as u8 }
        };
        let present = crate::int::hop::present_mask::<2>(0xFF00);
        for stride in [FF00_LEN, FF00_LEN + 4, FF00_LEN + 8] {
            for hops in 0..7 {
                for tail in [0, 5] {
                    let stack: Vec<u8> = (0..hops * stride + tail).map(|_| byte()).collect();
                    let expected: Vec<HopRecord> = stack
                        .chunks_exact(stride)
                        .rev()
                        .map(|h| decode_hop(IntVersion::V2, 0xFF00, h))
                        .collect();
                    let mut got = Vec::new();
                    if !push_ff00(present, stride, &stack, &mut got) {
                        // No SSSE3 on this CPU: nothing to compare.
                        assert!(got.is_empty());
                        return;
                    }
                    assert_eq!(got, expected, "stride {stride}, {hops} hops, tail {tail}");
                }
            }
        }
    }
}
