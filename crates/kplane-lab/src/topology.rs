//! The lab's fabric: switches, the links between their ports, the hosts behind them, and the
//! forwarding that follows from it (shortest paths; among equally short next hops, one per
//! destination host, so a leaf's uplinks share the destinations).
//!
//! A topology file (TOML) gives any fabric:
//! ```toml
//! switches = [1, 2, 3]
//! links = [{ a = [1, 3], b = [3, 1] }, { a = [2, 3], b = [3, 2] }]   # [switch, port]
//! hosts = [{ switch = 1, port = 1, ip = "10.0.1.1" }, { switch = 2, port = 1, ip = "10.0.2.1" }]
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::{LabError, Result};

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// INT node ids (1–250): also the switches' P4Runtime device ids.
    pub switches: Vec<u32>,
    pub links: Vec<Link>,
    pub hosts: Vec<Host>,
}

/// Two switch ports, `[switch, port]` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub a: (u32, u32),
    pub b: (u32, u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub switch: u32,
    pub port: u32,
    pub ip: Ipv4Addr,
}

/// The highest node id: INT node ids index 8-bit state in the P4 program.
const MAX_SWITCH: u32 = 250;
/// Ports are 9 bits; the report port is one above a switch's highest.
const MAX_PORT: u32 = 500;

impl Topology {
    /// `spines` spines fully meshed with `leaves` leaves, `hosts` hosts per leaf. Leaves are
    /// switches 1..=L (hosts on ports 1..=H, spine j on port H + j), spines L+1..=L+S (leaf i
    /// on port i); host k of leaf i is 10.0.i.k.
    pub fn leaf_spine(spines: u32, leaves: u32, hosts: u32) -> Result<Self> {
        if spines == 0 || leaves == 0 || hosts == 0 || leaves > 200 || hosts > 200 {
            return Err(LabError::Topology(format!(
                "leaf-spine:{spines},{leaves},{hosts}: need 1+ spines, 1–200 leaves, 1–200 hosts per leaf"
            )));
        }
        let mut links = Vec::new();
        for leaf in 1..=leaves {
            for j in 1..=spines {
                links.push(Link {
                    a: (leaf, hosts + j),
                    b: (leaves + j, leaf),
                });
            }
        }
        let t = Self {
            switches: (1..=leaves + spines).collect(),
            links,
            hosts: (1..=leaves)
                .flat_map(|leaf| {
                    (1..=hosts).map(move |k| Host {
                        switch: leaf,
                        port: k,
                        ip: Ipv4Addr::new(10, 0, leaf as u8, k as u8),
                    })
                })
                .collect(),
        };
        t.check()?;
        Ok(t)
    }

    /// `leaf-spine:S,L,H` (or `leaf-spine:S,L`, two hosts per leaf).
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = || {
            LabError::Topology(format!(
                "{spec:?}: expected leaf-spine:SPINES,LEAVES[,HOSTS] (or --topology-file)"
            ))
        };
        let args = spec.strip_prefix("leaf-spine:").ok_or_else(bad)?;
        let n: Vec<u32> = args
            .split(',')
            .map(|x| x.trim().parse().map_err(|_| bad()))
            .collect::<Result<_>>()?;
        match n[..] {
            [s, l] => Self::leaf_spine(s, l, 2),
            [s, l, h] => Self::leaf_spine(s, l, h),
            _ => Err(bad()),
        }
    }

    /// A topology file (TOML, see the module docs), checked.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(LabError::io(format!("reading {}", path.display())))?;
        let t: Self = toml::from_str(&text)
            .map_err(|e| LabError::Topology(format!("{}: {e}", path.display())))?;
        t.check()?;
        Ok(t)
    }

    /// Every port used once, on known switches; ids and ports in range; hosts unique and
    /// outside 10.99.0.0/16 (the report subnets).
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(LabError::Topology(m));
        let known: BTreeSet<u32> = self.switches.iter().copied().collect();
        if known.len() != self.switches.len() || known.is_empty() {
            return bad("switch ids must be unique, and at least one".into());
        }
        if let Some(s) = known.iter().find(|s| **s == 0 || **s > MAX_SWITCH) {
            return bad(format!("switch id {s} is outside 1–{MAX_SWITCH}"));
        }
        let mut used = BTreeSet::new();
        let ends = self
            .links
            .iter()
            .flat_map(|l| [l.a, l.b])
            .chain(self.hosts.iter().map(|h| (h.switch, h.port)));
        for (s, p) in ends {
            if !known.contains(&s) {
                return bad(format!("switch {s} is not in `switches`"));
            }
            if p == 0 || p >= MAX_PORT {
                return bad(format!("switch {s} port {p} is outside 1–{}", MAX_PORT - 1));
            }
            if !used.insert((s, p)) {
                return bad(format!("switch {s} port {p} is used twice"));
            }
        }
        let mut ips = BTreeSet::new();
        for h in &self.hosts {
            if !ips.insert(h.ip) {
                return bad(format!("host {} appears twice", h.ip));
            }
            if h.ip.octets()[..2] == [10, 99] {
                return bad(format!(
                    "host {}: 10.99.0.0/16 carries the switches' reports",
                    h.ip
                ));
            }
        }
        Ok(())
    }

    /// The port a switch's reports leave on: one above its highest.
    pub fn report_port(&self, switch: u32) -> u32 {
        self.links
            .iter()
            .flat_map(|l| [l.a, l.b])
            .chain(self.hosts.iter().map(|h| (h.switch, h.port)))
            .filter(|(s, _)| *s == switch)
            .map(|(_, p)| p)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// Switches that have hosts: INT sources and sinks, each with a report port.
    pub fn edge(&self) -> Vec<u32> {
        let e: BTreeSet<u32> = self.hosts.iter().map(|h| h.switch).collect();
        e.into_iter().collect()
    }

    /// `switch → [(neighbour, my port, its port)]`.
    fn neighbours(&self) -> BTreeMap<u32, Vec<(u32, u32, u32)>> {
        let mut n: BTreeMap<u32, Vec<(u32, u32, u32)>> = BTreeMap::new();
        for l in &self.links {
            n.entry(l.a.0).or_default().push((l.b.0, l.a.1, l.b.1));
            n.entry(l.b.0).or_default().push((l.a.0, l.b.1, l.a.1));
        }
        n
    }

    /// Each switch's forwarding: `(host, port)` for every host it can reach, along shortest
    /// paths (among equally short next hops, the host's address picks one).
    pub fn routes(&self) -> BTreeMap<u32, Vec<(Ipv4Addr, u32)>> {
        let neighbours = self.neighbours();
        let mut out: BTreeMap<u32, Vec<(Ipv4Addr, u32)>> = BTreeMap::new();
        for h in &self.hosts {
            // Distances to the host's switch.
            let mut dist = BTreeMap::from([(h.switch, 0u32)]);
            let mut queue = VecDeque::from([h.switch]);
            while let Some(x) = queue.pop_front() {
                for (y, _, _) in neighbours.get(&x).into_iter().flatten() {
                    if !dist.contains_key(y) {
                        dist.insert(*y, dist[&x] + 1);
                        queue.push_back(*y);
                    }
                }
            }
            for (&s, &d) in &dist {
                let port = if s == h.switch {
                    h.port
                } else {
                    let closer: Vec<u32> = neighbours[&s]
                        .iter()
                        .filter(|(y, _, _)| dist.get(y) == Some(&(d - 1)))
                        .map(|(_, p, _)| *p)
                        .collect();
                    closer[u32::from(h.ip) as usize % closer.len()]
                };
                out.entry(s).or_default().push((h.ip, port));
            }
        }
        out
    }

    /// Links of `switch` as `(my port, peer, peer port)`.
    pub fn links_of(&self, switch: u32) -> Vec<(u32, u32, u32)> {
        self.neighbours()
            .remove(&switch)
            .unwrap_or_default()
            .into_iter()
            .map(|(peer, mine, theirs)| (mine, peer, theirs))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_spine_routes_every_host_from_every_switch_over_shortest_paths() {
        let t = Topology::leaf_spine(2, 4, 2).unwrap();
        assert_eq!(t.switches, (1..=6).collect::<Vec<_>>());
        assert_eq!(t.hosts.len(), 8);
        assert_eq!(t.edge(), vec![1, 2, 3, 4]);
        // Leaf ports: hosts 1–2, spines 3–4, reports 5; spine ports: leaves 1–4, reports 5.
        assert_eq!(t.report_port(1), 5);
        assert_eq!(t.report_port(5), 5);
        let routes = t.routes();
        for s in &t.switches {
            assert_eq!(routes[s].len(), 8, "switch {s} reaches every host");
        }
        let port = |s: u32, ip: &str| {
            routes[&s]
                .iter()
                .find(|(h, _)| *h == ip.parse::<Ipv4Addr>().unwrap())
                .unwrap()
                .1
        };
        assert_eq!(port(1, "10.0.1.2"), 2, "a local host: its port");
        assert_eq!(port(5, "10.0.3.1"), 3, "a spine: the leaf's port");
        assert!(
            [3, 4].contains(&port(1, "10.0.3.1")),
            "a remote host: an uplink"
        );
        // The uplinks share the destinations.
        let uplinks: BTreeSet<u32> = routes[&1]
            .iter()
            .filter(|(h, _)| h.octets()[2] != 1)
            .map(|(_, p)| *p)
            .collect();
        assert_eq!(uplinks, BTreeSet::from([3, 4]));
    }

    #[test]
    fn a_topology_file_is_checked() {
        let dir = std::env::temp_dir().join(format!("kplane-lab-topo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(
            &good,
            "switches = [1, 2]\nlinks = [{ a = [1, 2], b = [2, 2] }]\n\
             hosts = [{ switch = 1, port = 1, ip = \"10.0.1.1\" }, { switch = 2, port = 1, ip = \"10.0.2.1\" }]\n",
        )
        .unwrap();
        let t = Topology::from_file(&good).unwrap();
        assert_eq!(t.routes()[&1].len(), 2);
        let twice = dir.join("twice.toml");
        std::fs::write(
            &twice,
            "switches = [1, 2]\nlinks = [{ a = [1, 1], b = [2, 2] }]\n\
             hosts = [{ switch = 1, port = 1, ip = \"10.0.1.1\" }]\n",
        )
        .unwrap();
        let e = Topology::from_file(&twice).unwrap_err().to_string();
        assert!(e.contains("switch 1 port 1 is used twice"), "{e}");
        let e = Topology::parse("fat-tree:4").unwrap_err().to_string();
        assert!(e.contains("leaf-spine"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
