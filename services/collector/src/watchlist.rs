//! The flow-match rule table (the KDN paper's watchlist): 5-tuple rules with IP prefixes,
//! port ranges, protocol and priority, each selecting one of the event-detection paper's
//! algorithms for the flows it matches. The highest priority wins; ties go to the rule listed
//! first. Loaded from `[[collector.watchlist]]`, replaceable at runtime (`PUT /v1/watchlist`).

use kplane_model::FlowKey;
pub use kplane_model::detection::{Algorithm, Measurement, PortRange, Prefix};
use kplane_model::detection::{FlowMatch, Protocol, check_rule};
use serde::{Deserialize, Serialize};

/// A `complex` rule's condition; the collector's bounds are 64-bit.
pub type Condition = kplane_model::detection::Condition<u64>;

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
    /// The flows it selects.
    pub fn flows(&self) -> FlowMatch {
        FlowMatch {
            src: self.src,
            dst: self.dst,
            protocol: self.protocol.map(Protocol),
            src_port: self.src_ports,
            dst_port: self.dst_ports,
        }
    }

    pub fn matches(&self, f: &FlowKey) -> bool {
        self.flows().matches(f)
    }

    /// Problems with this rule, prefixed with `at`.
    pub fn validate(&self, at: &str, problems: &mut Vec<String>) {
        check_rule(
            at,
            self.algorithm,
            self.weight,
            true,
            &self.when,
            usize::MAX,
            problems,
        );
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
