//! The blast-radius rule (`[intent-api.intents.safety]`): a block or reroute whose match
//! covers a wide share of the fabric waits for an admin and must expire soon; every TTL is
//! bounded. See docs/intents.md, "Safety".

use std::time::Duration;

use serde::{Deserialize, Serialize};

use kplane_model::detection::PortRange;

use super::model::{FlowMatch, IntentKind, IntentSpec, in_prefix, ipv4_prefix};
use kplane_southbound::Topology;

/// `[intent-api.intents.safety]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SafetyConfig {
    /// A source or destination prefix shorter than this is wide (`/16`: 65,536 addresses).
    pub min_prefix: u32,
    /// A port range spanning more ports than this is wide.
    pub max_port_span: u32,
    /// A match covering more than this share of the fabric's (source, destination) host
    /// pairs is wide (from the hosts the drivers report).
    pub max_host_share: f64,
    /// The longest TTL of any intent.
    #[serde(with = "humantime_serde")]
    pub max_ttl: Duration,
    /// A wide intent needs a TTL, at most this long.
    #[serde(with = "humantime_serde")]
    pub wide_max_ttl: Duration,
}

impl Default for SafetyConfig {
    fn default() -> Self {
        Self {
            min_prefix: 16,
            max_port_span: 1_024,
            max_host_share: 0.25,
            max_ttl: Duration::from_secs(30 * 86_400),
            wide_max_ttl: Duration::from_secs(3_600),
        }
    }
}

impl SafetyConfig {
    pub fn check(&self, problems: &mut Vec<String>) {
        let mut need = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("intent-api.intents.safety: {what}"));
            }
        };
        need(self.min_prefix <= 32, "min-prefix must be 0-32");
        need(
            (0.0..=1.0).contains(&self.max_host_share),
            "max-host-share must be 0-1",
        );
        need(
            self.wide_max_ttl >= Duration::from_secs(1) && self.wide_max_ttl <= self.max_ttl,
            "wide-max-ttl must be 1s to max-ttl",
        );
    }

    /// Why `spec` is wide (empty: it is not). Only blocks and reroutes can be.
    pub fn wide(&self, spec: &IntentSpec, topo: &Topology) -> Vec<String> {
        match &spec.kind {
            IntentKind::Block { flows } => self.wide_match(flows, topo),
            IntentKind::Reroute { dst, .. } => {
                let mut why = Vec::new();
                self.prefix(dst, "dst", &mut why);
                let share = host_share(topo, |h| in_prefix(dst, h));
                if share > self.max_host_share && !single_host(Some(dst)) {
                    why.push(format!(
                        "dst covers {:.0} % of the fabric's hosts",
                        share * 100.0
                    ));
                }
                why
            }
            _ => Vec::new(),
        }
    }

    fn prefix(&self, p: &str, field: &str, why: &mut Vec<String>) {
        if let Some((_, len)) = ipv4_prefix(p)
            && len < self.min_prefix
        {
            why.push(format!("{field} {p} is shorter than /{}", self.min_prefix));
        }
    }

    fn wide_match(&self, m: &FlowMatch, topo: &Topology) -> Vec<String> {
        let mut why = Vec::new();
        for (field, p) in [("src", &m.src), ("dst", &m.dst)] {
            if let Some(p) = p {
                self.prefix(p, field, &mut why);
            }
        }
        for (field, r) in [("src-port", &m.src_port), ("dst-port", &m.dst_port)] {
            if let Some(r) = r.as_deref().and_then(|r| r.parse::<PortRange>().ok()) {
                let span = u32::from(r.hi - r.lo) + 1;
                if span > self.max_port_span {
                    why.push(format!(
                        "{field} spans {span} ports (more than {})",
                        self.max_port_span
                    ));
                }
            }
        }
        if m.src.is_none() && m.dst.is_none() {
            why.push(if m.src_port.is_none() && m.dst_port.is_none() {
                if m.protocol.is_some() {
                    "a protocol-only match: every host's traffic of that protocol".to_string()
                } else {
                    "an empty match: all traffic".to_string()
                }
            } else {
                "no src or dst: every host's traffic on those ports".to_string()
            });
        }
        let side = |p: &Option<String>| {
            p.as_deref()
                .map_or(1.0, |p| host_share(topo, |h| in_prefix(p, h)))
        };
        let share = side(&m.src) * side(&m.dst);
        if share > self.max_host_share
            && (m.src.is_some() || m.dst.is_some())
            && !single_host(m.src.as_deref())
            && !single_host(m.dst.as_deref())
        {
            why.push(format!(
                "covers {:.0} % of the fabric's host pairs",
                share * 100.0
            ));
        }
        why
    }
}

/// Whether `prefix` names one host (a `/32`): narrow whatever the fabric's size (on a two-host
/// rig it is half the pairs, and still only that host's traffic).
fn single_host(prefix: Option<&str>) -> bool {
    prefix
        .and_then(ipv4_prefix)
        .is_some_and(|(_, len)| len == 32)
}

/// The share of the topology's hosts (single addresses) for which `inside` holds; 0 when no
/// host is known.
fn host_share(topo: &Topology, inside: impl Fn(u32) -> bool) -> f64 {
    let hosts: Vec<u32> = topo
        .switches
        .iter()
        .flat_map(|s| s.hosts.iter())
        .filter(|(_, len, _)| *len == 32)
        .map(|(addr, _, _)| *addr)
        .collect();
    if hosts.is_empty() {
        return 0.0;
    }
    hosts.iter().filter(|h| inside(**h)).count() as f64 / hosts.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplane_southbound::SwitchNode;

    fn spec(json: &str) -> IntentSpec {
        serde_json::from_str(json).unwrap()
    }

    /// 16 hosts 10.0.0.1–10.0.0.16 behind two switches.
    fn topo() -> Topology {
        let hosts = |from: u32| {
            (from..from + 8)
                .map(|i| (u32::from(std::net::Ipv4Addr::new(10, 0, 0, i as u8)), 32, i))
                .collect()
        };
        Topology {
            switches: vec![
                SwitchNode {
                    id: 1,
                    name: "edge1".into(),
                    hosts: hosts(1),
                },
                SwitchNode {
                    id: 2,
                    name: "edge2".into(),
                    hosts: hosts(9),
                },
            ],
            links: Vec::new(),
        }
    }

    #[test]
    fn wide_blocks_and_reroutes_are_named_narrow_ones_pass() {
        let s = SafetyConfig::default();
        let t = topo();
        for (json, reason) in [
            (
                r#"{"kind":"block","match":{"src":"0.0.0.0/0"}}"#,
                "shorter than /16",
            ),
            (
                r#"{"kind":"block","match":{"protocol":"tcp"}}"#,
                "protocol-only",
            ),
            (r#"{"kind":"block","match":{}}"#, "empty match"),
            (
                r#"{"kind":"block","match":{"dst-port":"1-20000","dst":"10.0.0.1"}}"#,
                "spans 20000 ports",
            ),
            (
                r#"{"kind":"block","match":{"dst-port":80}}"#,
                "no src or dst",
            ),
            (
                r#"{"kind":"block","match":{"src":"10.0.0.0/24"}}"#,
                "host pairs",
            ),
            (
                r#"{"kind":"reroute","dst":"10.0.0.0/8","avoid":{"switch":3}}"#,
                "shorter than /16",
            ),
            (
                r#"{"kind":"reroute","dst":"10.0.0.0/24","avoid":{"switch":3}}"#,
                "fabric's hosts",
            ),
        ] {
            let why = s.wide(&spec(json), &t);
            assert!(why.iter().any(|w| w.contains(reason)), "{json}: {why:?}");
        }
        for json in [
            r#"{"kind":"block","match":{"src":"10.0.0.2"}}"#,
            r#"{"kind":"block","match":{"src":"10.0.0.0/24","dst":"10.0.0.2/32"}}"#,
            r#"{"kind":"block","match":{"src":"10.0.0.1","dst-port":"1000-2000"}}"#,
            r#"{"kind":"reroute","dst":"10.0.0.1/32","avoid":{"switch":3}}"#,
            r#"{"kind":"monitor","match":{}}"#,
            // One host of a tiny fabric: half its pairs, still one host.
            r#"{"kind":"block","match":{"src":"10.0.0.1","dst-port":"5000"}}"#,
        ] {
            assert!(s.wide(&spec(json), &t).is_empty(), "{json}");
        }
    }
}
