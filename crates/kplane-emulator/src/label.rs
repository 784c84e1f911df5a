//! INT-label (int-label-distributed-labeling §3): every egress port labels some of the
//! packets it forwards with its own state, so telemetry covers the network without probes.
//! A port's `label_config` entry (`set_labelling`) chooses the algorithm, its
//! `label_frequency` entry (`set_label_shift`) Pro's S:
//!
//! * **Base A** (Algo. 1): label when the time since the port's last labelling (its Reg1, LT)
//!   exceeds the interval T.
//! * **Base B** (Algo. 2): also label, with probability f(INT_num), a packet that already
//!   carries items, unless the port labelled within its rest time T1; f is F1 (1 once the
//!   packet carries an item), F2 (INT_num / (MAX_hop − 1)) or F3 (F2 × elapsed / T).
//! * **Pro** (Algo. 3's data-plane half): the port's Reg2, S, divides the interval: T / 2^S.
//!   The controller raises S for ports it has not heard from (`label-frequency` intents).
//!
//! A packet carries at most MAX_hop items; the last hop extracts them, exports them to the
//! collector and restores the packet. **Specific-flow telemetry** (§3.3): a flow selected at
//! its first switch (`int_watchlist` → `int_label_specific(max_hop)`) starts with INT_num =
//! MAX_hop, so every labelling port labels its packets (f ≥ 1) up to MAX_hop items; the
//! collector tells it by INT_num > MAX_hop.

use crate::hop::Hop;
use crate::tables::Rule;

/// The option's fixed part (NH, INT_num) and one item, bytes.
pub const HEADER_BYTES: u32 = 2;
pub const ITEM_BYTES: u32 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    BaseA,
    BaseB,
}

/// Base B's labelling probability as a function of the items a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    F1,
    F2,
    F3,
}

/// A port's `set_labelling(interval_ns, max_hop, algorithm, function, rest_ns)` and
/// `set_label_shift(shift)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    pub interval_ns: u64,
    pub max_hop: u8,
    pub algorithm: Algorithm,
    pub function: Function,
    /// T1: no probabilistic labelling this soon after the port's last labelling.
    pub rest_ns: u64,
    /// Pro's S: the interval is T / 2^S.
    pub shift: u8,
}

impl PortConfig {
    /// From the `label_config` entry's parameters (`algorithm` 0 Base A, 1 Base B; `function`
    /// 1–3, F2 when absent; `max_hop` 5 when absent) and the port's `label_frequency` entry.
    pub fn of(rule: &Rule, frequency: Option<&Rule>) -> Self {
        Self {
            interval_ns: rule.param("interval_ns"),
            max_hop: match rule.param("max_hop") {
                0 => 5,
                m => m.min(255) as u8,
            },
            algorithm: if rule.param("algorithm") == 1 {
                Algorithm::BaseB
            } else {
                Algorithm::BaseA
            },
            function: match rule.param("function") {
                1 => Function::F1,
                3 => Function::F3,
                _ => Function::F2,
            },
            rest_ns: rule.param("rest_ns"),
            shift: frequency.map_or(0, |f| f.param("shift").min(31) as u8),
        }
    }

    /// The interval in effect: T / 2^S.
    pub fn interval(&self) -> u64 {
        self.interval_ns >> self.shift
    }

    /// Base B's probability of labelling a packet with `int_num` items, `elapsed` ns after
    /// the port's last labelling.
    pub fn probability(&self, int_num: u8, elapsed: u64) -> f64 {
        let f2 = f64::from(int_num) / f64::from(self.max_hop.saturating_sub(1).max(1));
        match self.function {
            Function::F1 => f64::from(u8::from(int_num > 0)),
            Function::F2 => f2.min(1.0),
            Function::F3 => (f2 * elapsed as f64 / self.interval().max(1) as f64).min(1.0),
        }
    }

    /// Whether the port labels `label`'s packet at `now`, its last labelling at `last`
    /// (None: never); `draw` is a uniform draw in [0, 1), taken only when Base B's
    /// probability decides.
    pub fn labels(
        &self,
        last: Option<u64>,
        now: u64,
        label: &PacketLabel,
        draw: impl FnOnce() -> f64,
    ) -> bool {
        let items = label.items.len();
        if items >= usize::from(self.max_hop) {
            return false;
        }
        if label.offset > 0 {
            return true;
        }
        let Some(lt) = last else { return true };
        let elapsed = now.saturating_sub(lt);
        if elapsed > self.interval() {
            return true;
        }
        match self.algorithm {
            Algorithm::BaseA => false,
            Algorithm::BaseB => {
                elapsed > self.rest_ns && draw() < self.probability(label.int_num(), elapsed)
            }
        }
    }
}

/// The items a packet carries, in labelling order (each hop's `egress_ns` is its label time).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PacketLabel {
    pub items: Vec<Hop>,
    /// MAX_hop for a specific flow's packet (INT_num starts there), else 0.
    pub offset: u8,
}

impl PacketLabel {
    pub fn int_num(&self) -> u8 {
        self.items
            .len()
            .min(255)
            .saturating_add(usize::from(self.offset))
            .min(255) as u8
    }

    /// Bytes the option adds to the packet.
    pub fn bytes(&self) -> u32 {
        match self.items.len() as u32 {
            0 => 0,
            n => HEADER_BYTES + n * ITEM_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn carrying(items: usize) -> PacketLabel {
        PacketLabel {
            items: vec![Hop::default(); items],
            offset: 0,
        }
    }

    fn cfg(algorithm: Algorithm, function: Function) -> PortConfig {
        PortConfig {
            interval_ns: 100 * MS,
            max_hop: 5,
            algorithm,
            function,
            rest_ns: 0,
            shift: 0,
        }
    }

    #[test]
    fn base_a_labels_once_per_interval() {
        let c = cfg(Algorithm::BaseA, Function::F2);
        let never = || panic!("Base A draws nothing");
        assert!(
            c.labels(None, 0, &carrying(0), never),
            "a port that never labelled labels"
        );
        assert!(
            !c.labels(Some(0), 100 * MS, &carrying(2), never),
            "CT − LT = T is not > T"
        );
        assert!(c.labels(Some(0), 100 * MS + 1, &carrying(0), never));
        assert!(
            !c.labels(Some(0), 200 * MS, &carrying(5), never),
            "a full stack takes no item"
        );
    }

    #[test]
    fn base_b_adds_probabilistic_labels_to_packets_that_carry_items() {
        let c = cfg(Algorithm::BaseB, Function::F2);
        // F2 = INT_num / (MAX_hop − 1): 0, 0.25, 0.5, 0.75, 1.
        for (n, p) in [(0, 0.0), (1, 0.25), (2, 0.5), (3, 0.75), (4, 1.0)] {
            assert_eq!(c.probability(n, 0), p);
        }
        assert!(
            !c.labels(Some(0), 10 * MS, &carrying(0), || 0.0),
            "no items: the interval decides"
        );
        assert!(c.labels(Some(0), 10 * MS, &carrying(2), || 0.49));
        assert!(!c.labels(Some(0), 10 * MS, &carrying(2), || 0.5));
        // F1: certain once the packet carries an item; F3 scales F2 by elapsed / T.
        let f1 = cfg(Algorithm::BaseB, Function::F1);
        assert!(f1.labels(Some(0), 10 * MS, &carrying(1), || 0.999));
        let f3 = cfg(Algorithm::BaseB, Function::F3);
        assert_eq!(f3.probability(2, 50 * MS), 0.25);
        // The rest time T1 blocks probabilistic labelling right after a labelling.
        let rest = PortConfig {
            rest_ns: 20 * MS,
            ..c
        };
        assert!(!rest.labels(Some(0), 10 * MS, &carrying(4), || 0.0));
        assert!(rest.labels(Some(0), 30 * MS, &carrying(4), || 0.0));
    }

    #[test]
    fn pro_divides_the_interval_by_two_to_the_s() {
        let c = PortConfig {
            shift: 2,
            ..cfg(Algorithm::BaseA, Function::F2)
        };
        assert_eq!(c.interval(), 25 * MS);
        assert!(c.labels(Some(0), 25 * MS + 1, &carrying(0), || 1.0));
    }

    #[test]
    fn a_specific_flow_is_labelled_at_every_port_up_to_max_hop() {
        let c = cfg(Algorithm::BaseA, Function::F2);
        let mut l = PacketLabel {
            items: Vec::new(),
            offset: 5,
        };
        let never = || panic!("a specific flow draws nothing");
        assert!(
            c.labels(Some(0), MS, &l, never),
            "within T: labelled anyway"
        );
        assert_eq!(l.int_num(), 5, "INT_num starts at MAX_hop");
        l.items = vec![Hop::default(); 4];
        assert!(c.labels(Some(0), MS, &l, never));
        assert_eq!(l.int_num(), 9);
        l.items.push(Hop::default());
        assert!(!c.labels(Some(0), MS, &l, never), "MAX_hop items at most");
    }

    #[test]
    fn the_option_grows_by_an_item_per_label() {
        let mut l = PacketLabel::default();
        assert_eq!(l.bytes(), 0);
        l.items.push(Hop::default());
        l.items.push(Hop::default());
        assert_eq!((l.int_num(), l.bytes()), (2, 66));
    }
}
