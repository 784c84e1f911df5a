//! kplane's one pseudo-random generator: xorshift64*, small and deterministic by seed — the
//! emulator's traffic, synthetic benchmark input and randomized tests all draw from it. Not
//! for secrets (the flow-hash key comes from the OS, see [`crate::FlowHashKey::random`]).

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// In `lo..hi` (`lo` when the range is empty).
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    /// Uniform in [lo, hi).
    pub fn real(&mut self, lo: f64, hi: f64) -> f64 {
        lo + self.uniform() * (hi - lo)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    /// Log-normal with the given median and shape σ.
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (1.0 - self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_sequence_and_draws_stay_in_range() {
        let (mut a, mut b) = (Rng::new(5), Rng::new(5));
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(Rng::new(5).next_u64(), Rng::new(6).next_u64());
        for _ in 0..1000 {
            assert!(a.below(7) < 7);
            assert!((3..9).contains(&a.int(3, 9)));
            let r = a.real(1.5, 3.0);
            assert!((1.5..3.0).contains(&r));
            assert!((0.0..1.0).contains(&a.uniform()));
        }
    }
}
