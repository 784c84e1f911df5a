//! The one detection vocabulary (event-detection paper §III-C): which flows a rule selects
//! ([`FlowMatch`]), which algorithm decides ([`Algorithm`]), on which per-hop value
//! ([`Measurement`]), and the conditions of `complex` ([`Condition`]). The collector's
//! watchlist, the intents, the emulator's sink and the P4 program's `int_sink_detection`
//! table all speak it; a new algorithm is a variant here, its implementation in the collector
//! and the emulator, and its action in `p4/kplane_int.p4`.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use crate::ParseError;
use crate::{FlowKey, HopField, ip_to_16};

/// An IP prefix, `10.0.0.0/8` or `2001:db8::/32` (a bare address is a host prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    /// The network, masked.
    pub addr: IpAddr,
    /// Its length in the address's own family (0–32 or 0–128).
    pub len: u8,
}

impl Prefix {
    /// Its length over the 16-byte (IPv4-mapped) form.
    fn bits(&self) -> u32 {
        u32::from(self.len) + if self.addr.is_ipv4() { 96 } else { 0 }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let mask = match self.bits() {
            0 => 0,
            b => u128::MAX << (128 - b),
        };
        let a = u128::from_be_bytes(ip_to_16(ip));
        let p = u128::from_be_bytes(ip_to_16(self.addr));
        a & mask == p & mask
    }

    /// The IPv4 network and length (switch tables match IPv4); `None` for IPv6.
    pub fn ipv4(&self) -> Option<(u32, u32)> {
        match self.addr {
            IpAddr::V4(a) => Some((u32::from(a), u32::from(self.len))),
            IpAddr::V6(_) => None,
        }
    }
}

impl FromStr for Prefix {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = |why: &str| ParseError(format!("{s:?}: {why}"));
        let (ip, len) = match s.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (s, None),
        };
        let ip: IpAddr = ip
            .trim()
            .parse()
            .map_err(|_| bad("not an IP address or prefix (e.g. 10.0.1.0/24)"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len: u8 = match len {
            Some(l) => l.trim().parse().map_err(|_| bad("bad prefix length"))?,
            None => max,
        };
        if len > max {
            return Err(bad(&format!("prefix length above {max}")));
        }
        let addr = match ip {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask(len, 32) as u32).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask(len, 128)).into()),
        };
        Ok(Self { addr, len })
    }
}

/// The low `width` bits of a mask with its top `len` bits set.
fn mask(len: u8, width: u32) -> u128 {
    let all = u128::MAX >> (128 - width);
    match len {
        0 => 0,
        l => all & !(all >> l),
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// An IPv4 prefix (or address) as (network, length), what switch tables and the topology's
/// hosts hold; `None` for anything else, IPv6 included.
pub fn ipv4_prefix(s: &str) -> Option<(u32, u32)> {
    s.parse::<Prefix>().ok()?.ipv4()
}

/// An inclusive port range, `443` or `1024-65535`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl FromStr for PortRange {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = |why: &str| ParseError(format!("{s:?}: {why}"));
        let parse = |x: &str| {
            x.trim()
                .parse::<u16>()
                .map_err(|_| bad("not a port or a range lo-hi (e.g. 80 or 1000-2000)"))
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => (parse(s)?, parse(s)?),
        };
        if lo > hi {
            return Err(bad("empty range"));
        }
        Ok(Self { lo, hi })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// An IP protocol: `tcp`, `udp`, `icmp` or a number 0–255.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Protocol(pub u8);

impl FromStr for Protocol {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tcp" => Ok(Self(6)),
            "udp" => Ok(Self(17)),
            "icmp" => Ok(Self(1)),
            n => n
                .parse()
                .map(Self)
                .map_err(|_| ParseError(format!("{s:?}: not tcp, udp, icmp or a number 0-255"))),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

macro_rules! serde_via_str {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_via_str!(Prefix);
serde_via_str!(PortRange);

/// A 5-tuple match: prefixes (IPv4 or IPv6), a protocol and port ranges; a missing part
/// matches anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowMatch {
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub protocol: Option<Protocol>,
    pub src_port: Option<PortRange>,
    pub dst_port: Option<PortRange>,
}

impl FlowMatch {
    pub fn matches(&self, f: &FlowKey) -> bool {
        self.src.is_none_or(|p| p.contains(f.src_ip))
            && self.dst.is_none_or(|p| p.contains(f.dst_ip))
            && self.protocol.is_none_or(|p| p.0 == f.protocol)
            && self.src_port.is_none_or(|r| r.contains(f.src_port))
            && self.dst_port.is_none_or(|r| r.contains(f.dst_port))
    }
}

/// The event-detection paper's algorithms, as the collector runs them on reports and the
/// switches' sinks on packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// Per switch: |value − last value of that switch| > threshold.
    PerHop,
    /// Per flow: |Σ hops − last Σ| > threshold.
    PerFlow,
    /// Per flow: EWMA of Σ hops (weight of the new value); |EWMA − last reported| > threshold.
    Ewma,
    /// Per flow: a conjunction of conditions (`when`) over the hops' largest values; every
    /// report for which they all hold is an event (the paper's `complex_detection`).
    Complex,
    /// Every report is an event.
    Noop,
}

impl Algorithm {
    pub const ALL: [Algorithm; 5] = [
        Self::PerHop,
        Self::PerFlow,
        Self::Ewma,
        Self::Complex,
        Self::Noop,
    ];

    /// The P4 program's `int_sink_detection` action.
    pub const fn action(self) -> &'static str {
        match self {
            Self::PerHop => "detect_per_hop",
            Self::PerFlow => "detect_per_flow",
            Self::Ewma => "detect_ewma",
            Self::Complex => "detect_complex",
            Self::Noop => "detect_noop",
        }
    }

    /// The algorithm of a `int_sink_detection` action (an unknown action reports every
    /// packet, as `detect_noop`).
    pub fn from_action(action: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|a| a.action() == action)
            .unwrap_or(Self::Noop)
    }
}

/// The per-hop value a rule watches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measurement {
    #[default]
    HopLatency,
    QueueOccupancy,
    TxUtilization,
    /// The queue's congestion flag (INT v2.0's "queue congestion status"): the collector
    /// only; the P4 program has no code for it.
    QueueCongestion,
}

impl Measurement {
    pub const ALL: [Measurement; 4] = [
        Self::HopLatency,
        Self::QueueOccupancy,
        Self::TxUtilization,
        Self::QueueCongestion,
    ];

    /// The hop field it reads.
    pub const fn hop_field(self) -> HopField {
        match self {
            Self::HopLatency => HopField::HopLatency,
            Self::QueueOccupancy => HopField::QueueOccupancy,
            Self::TxUtilization => HopField::TxUtilization,
            Self::QueueCongestion => HopField::QueueCongestion,
        }
    }

    /// The code the P4 program's detection actions take; `None` where the switches cannot
    /// measure it.
    pub const fn p4_code(self) -> Option<u64> {
        match self {
            Self::HopLatency => Some(0),
            Self::QueueOccupancy => Some(1),
            Self::TxUtilization => Some(2),
            Self::QueueCongestion => None,
        }
    }

    /// The measurement of a P4 code (an unknown code reads hop latency, as the program does).
    pub fn from_p4_code(code: u64) -> Self {
        Self::ALL
            .into_iter()
            .find(|m| m.p4_code() == Some(code))
            .unwrap_or(Self::HopLatency)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::HopLatency => "hop-latency",
            Self::QueueOccupancy => "queue-occupancy",
            Self::TxUtilization => "tx-utilization",
            Self::QueueCongestion => "queue-congestion",
        }
    }
}

/// How many conditions a switch's `complex` rule holds (`detect_complex`'s literals); the
/// collector's rules take any number.
pub const SWITCH_CONDITIONS: usize = 4;

/// The names of each literal's parameters in `detect_complex`: `(measurement, op,
/// threshold)` for the first, `(measurement1, op1, threshold1)` for the second, and so on.
pub const LITERAL_PARAMS: [[&str; 3]; SWITCH_CONDITIONS] = [
    ["measurement", "op", "threshold"],
    ["measurement1", "op1", "threshold1"],
    ["measurement2", "op2", "threshold2"],
    ["measurement3", "op3", "threshold3"],
];

/// How a condition compares: the P4 program's `op` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Above = 1,
    Below = 2,
    RisesBy = 3,
}

/// One condition of `complex` detection on the largest value of `measurement` over a
/// report's hops: above a bound, below it, or risen by more than it since the flow's
/// previous report (exactly one of the three once validated). `T` is the bound's width: the
/// collector's are 64-bit, the switches' 32-bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Condition<T> {
    #[serde(default)]
    pub measurement: Measurement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rises_by: Option<T>,
}

impl<T: Copy + Into<u64>> Condition<T> {
    /// Whether the condition holds for `largest`, the measurement's largest value over the
    /// hops, and `previous`, the flow's value at its previous report. A condition without a
    /// bound holds (the switch's empty literal).
    pub fn holds(&self, largest: u64, previous: u64) -> bool {
        self.above.is_none_or(|a| largest > a.into())
            && self.below.is_none_or(|b| largest < b.into())
            && self
                .rises_by
                .is_none_or(|r| largest.saturating_sub(previous) > r.into())
    }

    /// How many bounds it gives (a valid condition gives one).
    pub fn bounds(&self) -> usize {
        [self.above, self.below, self.rises_by]
            .iter()
            .filter(|b| b.is_some())
            .count()
    }

    /// The P4 program's literal `(measurement, op, bound)` (op 1 above, 2 below, 3 rises by;
    /// `(0, 0, 0)` without a bound). A measurement without a P4 code reads as 0: intents
    /// refuse it before they compile.
    pub fn literal(&self) -> (u64, u64, u64) {
        let m = self.measurement.p4_code().unwrap_or(0);
        match (self.above, self.below, self.rises_by) {
            (Some(a), _, _) => (m, Op::Above as u64, a.into()),
            (None, Some(b), _) => (m, Op::Below as u64, b.into()),
            (None, None, Some(r)) => (m, Op::RisesBy as u64, r.into()),
            (None, None, None) => (0, 0, 0),
        }
    }
}

impl Condition<u64> {
    /// A switch entry's literal `(measurement, op, bound)` read back (op 0: no condition).
    pub fn from_literal(measurement: u64, op: u64, bound: u64) -> Self {
        let bound_if = |want: Op| (op == want as u64).then_some(bound);
        Self {
            measurement: Measurement::from_p4_code(measurement),
            above: bound_if(Op::Above),
            below: bound_if(Op::Below),
            rises_by: bound_if(Op::RisesBy),
        }
    }
}

/// The problems of a rule's algorithm, weight and conditions, each prefixed with `at`:
/// `ewma` needs a weight in (0, 1] (`weight_required`: the collector's rules; a switch entry
/// defaults it), only `ewma` takes one; `complex` needs conditions (at most `max_conditions`),
/// each with exactly one bound, and only `complex` takes them.
pub fn check_rule<T: Copy + Into<u64>>(
    at: &str,
    algorithm: Algorithm,
    weight: Option<f64>,
    weight_required: bool,
    when: &[Condition<T>],
    max_conditions: usize,
    problems: &mut Vec<String>,
) {
    match (algorithm, weight) {
        (Algorithm::Ewma, None) if weight_required => {
            problems.push(format!("{at}.weight: ewma needs a weight"))
        }
        (Algorithm::Ewma, Some(w)) if !(w > 0.0 && w <= 1.0) => {
            problems.push(format!("{at}.weight: {w} is not in (0, 1]"))
        }
        (Algorithm::Ewma, _) | (_, None) => {}
        (_, Some(_)) => problems.push(format!(
            "{at}.weight: only the ewma algorithm takes a weight"
        )),
    }
    match algorithm {
        Algorithm::Complex if when.is_empty() || when.len() > max_conditions => {
            problems.push(format!(
                "{at}.when: complex takes 1 to {max_conditions} conditions, not {}",
                when.len()
            ))
        }
        Algorithm::Complex => {
            for (i, c) in when.iter().enumerate() {
                if c.bounds() != 1 {
                    problems.push(format!(
                        "{at}.when[{i}]: give exactly one of above, below and rises-by"
                    ));
                }
            }
        }
        _ if !when.is_empty() => problems.push(format!(
            "{at}.when: only the complex algorithm takes conditions"
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str, dst: &str, sp: u16, dp: u16, proto: u8) -> FlowKey {
        FlowKey {
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            src_port: sp,
            dst_port: dp,
            protocol: proto,
        }
    }

    #[test]
    fn prefixes_of_both_families_match_and_print_as_given() {
        let p: Prefix = "10.1.2.3/16".parse().unwrap();
        assert_eq!(p.to_string(), "10.1.0.0/16", "masked");
        assert!(p.contains("10.1.200.3".parse().unwrap()));
        assert!(!p.contains("10.2.0.1".parse().unwrap()));
        assert!(!p.contains("2001:db8::1".parse().unwrap()));
        assert_eq!(p.ipv4(), Some((0x0a01_0000, 16)));
        let p6: Prefix = "2001:db8::/33".parse().unwrap();
        assert!(p6.contains("2001:db8:7fff::1".parse().unwrap()));
        assert!(!p6.contains("2001:db8:8000::1".parse().unwrap()));
        assert_eq!(p6.ipv4(), None);
        let all6: Prefix = "::/0".parse().unwrap();
        assert_eq!(all6.to_string(), "::/0");
        assert!(all6.contains("10.0.0.1".parse().unwrap()), "every address");
        let host: Prefix = "10.0.0.9".parse().unwrap();
        assert_eq!(host.to_string(), "10.0.0.9/32");
        for bad in ["10.0.0.0/33", "10.0.0.300", "nonsense", "::1/129"] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_and_protocols_parse_by_name_and_number() {
        assert_eq!(
            "1000-2000".parse::<PortRange>().unwrap().to_string(),
            "1000-2000"
        );
        assert!("90-80".parse::<PortRange>().is_err());
        assert_eq!("udp".parse::<Protocol>().unwrap(), Protocol(17));
        assert_eq!("TCP".parse::<Protocol>().unwrap(), Protocol(6));
        assert_eq!("47".parse::<Protocol>().unwrap(), Protocol(47));
        assert!("tcpp".parse::<Protocol>().is_err());
    }

    #[test]
    fn a_flow_match_selects_by_every_part() {
        let m = FlowMatch {
            src: Some("10.0.0.0/8".parse().unwrap()),
            protocol: Some(Protocol(17)),
            dst_port: Some("53".parse().unwrap()),
            ..FlowMatch::default()
        };
        assert!(m.matches(&flow("10.1.2.3", "1.1.1.1", 9, 53, 17)));
        assert!(!m.matches(&flow("11.1.2.3", "1.1.1.1", 9, 53, 17)));
        assert!(!m.matches(&flow("10.1.2.3", "1.1.1.1", 9, 54, 17)));
        assert!(!m.matches(&flow("10.1.2.3", "1.1.1.1", 9, 53, 6)));
        assert!(FlowMatch::default().matches(&flow("2001:db8::1", "::1", 1, 2, 3)));
    }

    #[test]
    fn actions_codes_and_literals_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_action(a.action()), a);
        }
        for m in Measurement::ALL {
            if let Some(c) = m.p4_code() {
                assert_eq!(Measurement::from_p4_code(c), m);
            }
        }
        let c = Condition::<u32> {
            measurement: Measurement::QueueOccupancy,
            rises_by: Some(100),
            above: None,
            below: None,
        };
        let (m, op, bound) = c.literal();
        let back = Condition::from_literal(m, op, bound);
        assert_eq!(
            (back.measurement, back.rises_by),
            (Measurement::QueueOccupancy, Some(100))
        );
        assert!(back.holds(250, 100) && !back.holds(150, 100));
        assert!(
            Condition::from_literal(0, 0, 0).holds(0, 0),
            "no literal holds"
        );
    }

    #[test]
    fn rule_problems_name_their_fields() {
        let when = |above, below| {
            vec![Condition::<u64> {
                measurement: Measurement::HopLatency,
                above,
                below,
                rises_by: None,
            }]
        };
        let problems = |a, w, c: &[Condition<u64>]| {
            let mut p = Vec::new();
            check_rule("r", a, w, true, c, 2, &mut p);
            p
        };
        assert!(problems(Algorithm::Ewma, None, &[])[0].starts_with("r.weight"));
        assert!(problems(Algorithm::Ewma, Some(1.5), &[])[0].starts_with("r.weight"));
        assert!(problems(Algorithm::Noop, Some(0.5), &[])[0].starts_with("r.weight"));
        assert!(problems(Algorithm::Complex, None, &[])[0].starts_with("r.when"));
        assert!(
            problems(Algorithm::Complex, None, &when(Some(1), Some(5)))[0].starts_with("r.when[0]")
        );
        assert!(problems(Algorithm::PerFlow, None, &when(Some(1), None))[0].starts_with("r.when"));
        assert!(problems(Algorithm::Complex, None, &when(Some(1), None)).is_empty());
        assert!(problems(Algorithm::Ewma, Some(0.25), &[]).is_empty());
    }
}
