//! The flow-match rule table (the KDN paper's watchlist): 5-tuple rules with IP prefixes,
//! port ranges, protocol and priority, each selecting one of the event-detection paper's
//! algorithms for the flows it matches. The highest priority wins; ties go to the rule listed
//! first. Loaded from `[[collector.watchlist]]`, replaceable at runtime (`PUT /v1/watchlist`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use kplane_model::{FlowKey, ip_to_16};
use serde::{Deserialize, Serialize};

/// An IP prefix, `10.0.0.0/8` or `2001:db8::/32` (a bare address is a host prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    addr: [u8; 16],
    /// Prefix length over the 16-byte (IPv4-mapped) form.
    bits: u8,
    display: (IpAddr, u8),
}

impl Prefix {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let a = u128::from_be_bytes(ip_to_16(ip));
        let p = u128::from_be_bytes(self.addr);
        let mask = if self.bits == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.bits))
        };
        a & mask == p & mask
    }
}

impl FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (ip, len) = match s.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (s, None),
        };
        let ip: IpAddr = ip.parse().map_err(|e| format!("{s:?}: {e}"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len: u8 = match len {
            Some(l) => l.parse().map_err(|_| format!("{s:?}: bad prefix length"))?,
            None => max,
        };
        if len > max {
            return Err(format!("{s:?}: prefix length above {max}"));
        }
        let bits = if ip.is_ipv4() { len + 96 } else { len };
        Ok(Self {
            addr: ip_to_16(ip),
            bits,
            display: (ip, len),
        })
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.display.0, self.display.1)
    }
}

/// An inclusive port range, `443` or `1024-65535`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |x: &str| {
            x.trim()
                .parse::<u16>()
                .map_err(|_| format!("{s:?}: not a port or range"))
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => (parse(s)?, parse(s)?),
        };
        if lo > hi {
            return Err(format!("{s:?}: empty range"));
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

/// The event-detection paper's algorithms (§III-C).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
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

/// The per-hop metadata a rule watches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measurement {
    #[default]
    HopLatency,
    QueueOccupancy,
    TxUtilization,
    QueueCongestion,
}

/// One condition of a `complex` rule on the largest value of `measurement` over the report's
/// hops: above a bound, below it, or risen by more than it since the flow's previous report
/// (exactly one of the three).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Condition {
    #[serde(default)]
    pub measurement: Measurement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rises_by: Option<u64>,
}

impl Condition {
    /// Whether the condition holds for `largest`, the measurement's largest value over the
    /// hops, and `previous`, the flow's value at its previous report.
    pub fn holds(&self, largest: u64, previous: u64) -> bool {
        self.above.is_none_or(|a| largest > a)
            && self.below.is_none_or(|b| largest < b)
            && self
                .rises_by
                .is_none_or(|r| largest.saturating_sub(previous) > r)
    }

    fn bounds(&self) -> usize {
        [self.above, self.below, self.rises_by]
            .iter()
            .filter(|b| b.is_some())
            .count()
    }
}

/// One watchlist entry.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Rule {
    /// A label for logs and the API.
    #[serde(default)]
    pub name: String,
    /// Higher wins.
    #[serde(default)]
    pub priority: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_ports: Option<PortRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_ports: Option<PortRange>,
    pub algorithm: Algorithm,
    #[serde(default)]
    pub measurement: Measurement,
    /// Change that makes an event, in the measurement's unit.
    #[serde(default)]
    pub threshold: u64,
    /// EWMA weight of a new value, in (0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// `complex`: the conditions that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<Condition>,
}

impl Rule {
    pub fn matches(&self, f: &FlowKey) -> bool {
        self.src.is_none_or(|p| p.contains(f.src_ip))
            && self.dst.is_none_or(|p| p.contains(f.dst_ip))
            && self.protocol.is_none_or(|p| p == f.protocol)
            && self.src_ports.is_none_or(|r| r.contains(f.src_port))
            && self.dst_ports.is_none_or(|r| r.contains(f.dst_port))
    }

    /// Problems with this rule, prefixed with `at`.
    pub fn validate(&self, at: &str, problems: &mut Vec<String>) {
        match (self.algorithm, self.weight) {
            (Algorithm::Ewma, None) => problems.push(format!("{at}: ewma needs a weight")),
            (Algorithm::Ewma, Some(w)) if !(w > 0.0 && w <= 1.0) => {
                problems.push(format!("{at}: weight {w} is not in (0, 1]"))
            }
            (
                Algorithm::PerHop | Algorithm::PerFlow | Algorithm::Complex | Algorithm::Noop,
                Some(_),
            ) => problems.push(format!("{at}: weight only applies to ewma")),
            _ => {}
        }
        match self.algorithm {
            Algorithm::Complex if self.when.is_empty() => {
                problems.push(format!("{at}: complex needs conditions (`when`)"))
            }
            Algorithm::Complex => {
                for (i, c) in self.when.iter().enumerate() {
                    if c.bounds() != 1 {
                        problems.push(format!(
                            "{at}.when[{i}]: give exactly one of `above`, `below` and `rises-by`"
                        ));
                    }
                }
            }
            _ if !self.when.is_empty() => {
                problems.push(format!("{at}: conditions (`when`) only apply to complex"))
            }
            _ => {}
        }
    }
}

/// The rule table, highest priority first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Watchlist {
    rules: Vec<(usize, Rule)>,
}

impl Watchlist {
    pub fn new(rules: Vec<Rule>) -> Self {
        let mut rules: Vec<_> = rules.into_iter().enumerate().collect();
        rules.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(&b.0)));
        Self { rules }
    }

    /// The winning rule for a flow, with its index in the table as given.
    pub fn lookup(&self, f: &FlowKey) -> Option<(usize, &Rule)> {
        self.rules
            .iter()
            .find(|(_, r)| r.matches(f))
            .map(|(i, r)| (*i, r))
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules in the order they were given.
    pub fn rules(&self) -> Vec<Rule> {
        let mut v: Vec<_> = self.rules.clone();
        v.sort_by_key(|(i, _)| *i);
        v.into_iter().map(|(_, r)| r).collect()
    }

    pub fn validate(rules: &[Rule], problems: &mut Vec<String>) {
        for (i, r) in rules.iter().enumerate() {
            r.validate(&format!("collector.watchlist[{i}]"), problems);
        }
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

    fn rule(json: &str) -> Rule {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn prefixes_ports_protocol_and_priority() {
        let wl = Watchlist::new(vec![
            rule(
                r#"{"name":"web","priority":10,"dst-ports":"80-443","protocol":6,"algorithm":"per-hop","threshold":100}"#,
            ),
            rule(r#"{"name":"lab","priority":20,"src":"10.1.0.0/16","algorithm":"noop"}"#),
            rule(r#"{"name":"v6","src":"2001:db8::/32","algorithm":"ewma","weight":0.5}"#),
        ]);
        let f = flow("10.1.2.3", "10.9.9.9", 5000, 443, 6);
        assert_eq!(wl.lookup(&f).unwrap().1.name, "lab", "higher priority wins");
        let f = flow("10.2.2.3", "10.9.9.9", 5000, 443, 6);
        assert_eq!(wl.lookup(&f).unwrap().1.name, "web");
        assert!(
            wl.lookup(&flow("10.2.2.3", "10.9.9.9", 5000, 8080, 6))
                .is_none()
        );
        assert!(
            wl.lookup(&flow("10.2.2.3", "10.9.9.9", 5000, 443, 17))
                .is_none()
        );
        let f = flow("2001:db8::1", "2001:db8::2", 1, 2, 17);
        assert_eq!(wl.lookup(&f).unwrap().1.name, "v6");
        assert_eq!(wl.rules()[0].name, "web", "given order kept");
    }

    #[test]
    fn bad_rules_are_reported() {
        let mut p = Vec::new();
        Watchlist::validate(
            &[
                rule(r#"{"algorithm":"ewma"}"#),
                rule(r#"{"algorithm":"ewma","weight":1.5}"#),
                rule(r#"{"algorithm":"noop","weight":0.5}"#),
                rule(r#"{"algorithm":"complex"}"#),
                rule(r#"{"algorithm":"complex","when":[{"above":1,"below":5}]}"#),
                rule(r#"{"algorithm":"per-flow","when":[{"above":1}]}"#),
            ],
            &mut p,
        );
        assert_eq!(p.len(), 6, "{p:?}");
        let mut p = Vec::new();
        rule(r#"{"algorithm":"complex","when":[{"measurement":"hop-latency","above":10},{"measurement":"queue-occupancy","rises-by":100}]}"#)
            .validate("ok", &mut p);
        assert!(p.is_empty(), "{p:?}");
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("90-80".parse::<PortRange>().is_err());
        assert!(serde_json::from_str::<Rule>(r#"{"algorithm":"sometimes"}"#).is_err());
        assert_eq!(
            "10.0.0.0/8".parse::<Prefix>().unwrap().to_string(),
            "10.0.0.0/8"
        );
    }
}
