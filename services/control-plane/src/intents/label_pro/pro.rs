//! INT-label Pro's controller (int-label-distributed-labeling Algo. 3): a port the collector
//! has not heard from for k telemetry intervals labels more often — its S goes up by one, so
//! its labelling interval becomes T / 2^S — and a port heard from again ages back: S goes
//! down by one after `relax` fresh observations in a row. One decision per observation; the
//! caller says when a port was stale (per telemetry interval in the experiments, per
//! processor window in the service) and writes the S it returns.

use std::collections::BTreeMap;

/// Pro's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProConfig {
    /// Fresh observations in a row before S goes down by one.
    pub relax: u32,
    /// The most S (the interval at most divided by 2^max_shift).
    pub max_shift: u8,
}

impl Default for ProConfig {
    fn default() -> Self {
        Self {
            relax: 4,
            max_shift: 4,
        }
    }
}

/// One port's frequency state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortFrequency {
    /// S: the port labels every T / 2^S.
    pub shift: u8,
    /// Fresh observations in a row since S last changed or the port was last stale.
    pub fresh: u32,
    /// Observations that found the port stale.
    pub stale: u64,
}

/// (switch, egress port) → frequency state.
#[derive(Clone, Debug, Default)]
pub struct Pro {
    cfg: ProConfig,
    ports: BTreeMap<(u32, u32), PortFrequency>,
}

impl Pro {
    pub fn new(cfg: ProConfig) -> Self {
        Self {
            cfg,
            ports: BTreeMap::new(),
        }
    }

    /// One observation of `port`; the new S when it changes.
    pub fn observe(&mut self, port: (u32, u32), stale: bool) -> Option<u8> {
        let cfg = self.cfg;
        let p = self.ports.entry(port).or_default();
        let next = if stale {
            p.stale += 1;
            p.fresh = 0;
            (p.shift + 1).min(cfg.max_shift)
        } else {
            p.fresh += 1;
            if p.fresh >= cfg.relax {
                p.fresh = 0;
                p.shift.saturating_sub(1)
            } else {
                p.shift
            }
        };
        (next != p.shift).then(|| {
            p.shift = next;
            next
        })
    }

    /// Takes up a port's S as a previous run left it on the switch.
    pub fn resume(&mut self, port: (u32, u32), shift: u8) {
        let p = self.ports.entry(port).or_default();
        p.shift = shift.min(self.cfg.max_shift);
        p.fresh = 0;
    }

    pub fn get(&self, port: (u32, u32)) -> Option<&PortFrequency> {
        self.ports.get(&port)
    }

    pub fn ports(&self) -> impl Iterator<Item = (&(u32, u32), &PortFrequency)> {
        self.ports.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_port_labels_more_often_up_to_the_most_s_and_relaxes_when_fresh() {
        let mut pro = Pro::new(ProConfig {
            relax: 2,
            max_shift: 2,
        });
        let p = (3, 1);
        assert_eq!(pro.observe(p, true), Some(1));
        assert_eq!(pro.observe(p, true), Some(2));
        assert_eq!(pro.observe(p, true), None, "at most max_shift");
        assert_eq!(
            pro.observe(p, false),
            None,
            "one fresh observation is not enough"
        );
        assert_eq!(
            pro.observe(p, true),
            None,
            "stale again: the count starts over"
        );
        assert_eq!(pro.observe(p, false), None);
        assert_eq!(
            pro.observe(p, false),
            Some(1),
            "relax fresh in a row: S − 1"
        );
        assert_eq!(pro.observe(p, false), None);
        assert_eq!(pro.observe(p, false), Some(0));
        assert_eq!(pro.observe(p, false), None, "S stays at 0");
        let s = pro.get(p).unwrap();
        assert_eq!((s.shift, s.stale), (0, 4));
        assert!(pro.get((9, 9)).is_none());
    }
}
