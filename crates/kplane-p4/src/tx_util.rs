//! Egress tx utilisation as `p4/kplane_int.p4` measures it (the INT instruction's "egress port
//! tx utilisation"), so that the emulator computes the same numbers. BMv2 cannot divide at
//! run time, so time is cut into aligned windows of 2^7 µs and the link rate is a multiplier
//! the control plane writes ([`scale_q16`]): a packet leaving a port carries the utilisation
//! of the port's previous window, in per mille of the link rate, or 0 when the port sent
//! nothing in it.

/// Windows are 2^`WINDOW_US_LOG2` µs (128 µs) long.
pub const WINDOW_US_LOG2: u32 = 7;

/// Per mille of a `rate_bps` link per byte sent in one window, with 16 fractional bits:
/// ‰ = bytes × 8 × 1000 / (rate × 128 µs) = bytes × 6.25·10⁷ / rate.
pub fn scale_q16(rate_bps: u64) -> u32 {
    if rate_bps == 0 {
        return 0;
    }
    ((62_500_000u128 << 16) / u128::from(rate_bps)).min(u128::from(u32::MAX)) as u32
}

/// One egress port's window (the program's `tx_tick`, `tx_bytes` and `tx_util` registers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxWindow {
    tick: u64,
    bytes: u64,
    util: u32,
}

impl TxWindow {
    /// A packet of `bytes` leaves at `now_us`: the utilisation it carries.
    pub fn send(&mut self, now_us: u64, bytes: u64, scale_q16: u32) -> u32 {
        let tick = now_us >> WINDOW_US_LOG2;
        if tick != self.tick {
            self.util = if tick == self.tick + 1 {
                ((self.bytes * u64::from(scale_q16)) >> 16).min(1000) as u32
            } else {
                0
            };
            self.tick = tick;
            self.bytes = 0;
        }
        self.bytes += bytes;
        self.util
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_carries_its_previous_windows_utilisation() {
        let k = scale_q16(100_000_000);
        assert_eq!(k, 40_960, "0.625 ‰ per byte at 100 Mb/s");
        let mut w = TxWindow::default();
        // 1600 bytes in window 1 (128–255 µs): 1000 ‰ of 100 Mb/s is 1600 bytes.
        assert_eq!(w.send(130, 800, k), 0);
        assert_eq!(w.send(140, 800, k), 0);
        assert_eq!(w.send(260, 100, k), 1000);
        assert_eq!(w.send(300, 100, k), 1000, "same window, same value");
        assert_eq!(w.send(400, 100, k), 125, "200 bytes in the window before");
        assert_eq!(w.send(1000, 100, k), 0, "idle windows in between");
        assert_eq!(scale_q16(0), 0);
    }
}
