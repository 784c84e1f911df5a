//! A three-tier fabric: `three-tier:E,A,C,H` — E edge switches with H hosts each, A
//! aggregation switches in pods of two (each pod's edges connect to both), C core switches
//! (aggregation switch j of every pod connects to the cores c with c mod 2 = j). Node ids:
//! edges 1…E, aggregation 101…, core 201…; hosts 172.16.<edge>.<10 + i>. Ports count from 1:
//! an edge's hosts first, then its uplinks.

use std::collections::{HashMap, HashSet};

use crate::TracegenError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    Edge,
    Aggregation,
    Core,
}

#[derive(Clone, Debug)]
pub struct Switch {
    pub id: u32,
    pub tier: Tier,
    /// The pod (edges and aggregation switches).
    pub pod: usize,
}

#[derive(Clone, Debug)]
pub struct Host {
    pub ip: [u8; 4],
    /// Its edge switch (index into `switches`) and the port facing it there.
    pub edge: usize,
    pub port: u16,
}

/// One switch on a packet's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub switch: usize,
    pub ingress: u16,
    pub egress: u16,
}

#[derive(Clone, Debug)]
pub struct Fabric {
    pub name: String,
    pub switches: Vec<Switch>,
    pub hosts: Vec<Host>,
    /// Switch-to-switch links as (a, b), a < b.
    pub links: Vec<(usize, usize)>,
    /// (switch, neighbour switch) → the switch's port facing it.
    port: HashMap<(usize, usize), u16>,
    aggs_of_pod: Vec<Vec<usize>>,
    cores: Vec<usize>,
}

impl Fabric {
    /// `three-tier:E,A,C,H` (`three-tier` alone: 8 edges, 8 aggregation, 4 core, 8 hosts each).
    pub fn parse(spec: &str) -> Result<Self, TracegenError> {
        let bad = |why: &str| TracegenError::Fabric(spec.to_string(), why.to_string());
        let args = match spec.split_once(':') {
            None if spec == "three-tier" => "8,8,4,8",
            Some(("three-tier", a)) => a,
            _ => {
                return Err(bad(
                    "expected three-tier:EDGES,AGGREGATION,CORE,HOSTS_PER_EDGE",
                ));
            }
        };
        let n: Vec<usize> = args
            .split(',')
            .map(|x| x.trim().parse().map_err(|_| bad("not a number")))
            .collect::<Result<_, _>>()?;
        let [e, a, c, h] = n[..] else {
            return Err(bad("four numbers"));
        };
        if a < 2 || a % 2 != 0 || e % (a / 2) != 0 || c < 2 || c % 2 != 0 || h == 0 || e == 0 {
            return Err(bad(
                "aggregation switches come in pods of two, edges split evenly over the pods, an even number of cores, at least one host",
            ));
        }
        if e > 250 || h > 240 || a > 99 || c > 99 {
            return Err(bad("too large"));
        }
        Ok(Self::build(spec, e, a, c, h))
    }

    fn build(name: &str, e: usize, a: usize, c: usize, h: usize) -> Self {
        let pods = a / 2;
        let mut switches = Vec::new();
        for i in 0..e {
            switches.push(Switch {
                id: 1 + i as u32,
                tier: Tier::Edge,
                pod: i / (e / pods),
            });
        }
        for i in 0..a {
            switches.push(Switch {
                id: 101 + i as u32,
                tier: Tier::Aggregation,
                pod: i / 2,
            });
        }
        for i in 0..c {
            switches.push(Switch {
                id: 201 + i as u32,
                tier: Tier::Core,
                pod: 0,
            });
        }
        let edges_of_pod: Vec<Vec<usize>> = (0..pods)
            .map(|p| (0..e).filter(|i| switches[*i].pod == p).collect())
            .collect();
        let aggs_of_pod: Vec<Vec<usize>> =
            (0..pods).map(|p| vec![e + 2 * p, e + 2 * p + 1]).collect();
        let cores: Vec<usize> = (e + a..e + a + c).collect();
        let hosts: Vec<Host> = (0..e * h)
            .map(|i| Host {
                ip: [172, 16, (i / h + 1) as u8, (10 + i % h) as u8],
                edge: i / h,
                port: (1 + i % h) as u16,
            })
            .collect();
        // Ports after the hosts' (edges) in the order links are added.
        let mut next_port: Vec<u16> = switches
            .iter()
            .map(|s| {
                if s.tier == Tier::Edge {
                    h as u16 + 1
                } else {
                    1
                }
            })
            .collect();
        let mut port = HashMap::new();
        let mut links = Vec::new();
        let mut connect = |x: usize, y: usize| {
            port.insert((x, y), next_port[x]);
            next_port[x] += 1;
            port.insert((y, x), next_port[y]);
            next_port[y] += 1;
            links.push((x.min(y), x.max(y)));
        };
        for p in 0..pods {
            for &edge in &edges_of_pod[p] {
                for &agg in &aggs_of_pod[p] {
                    connect(edge, agg);
                }
            }
            for (j, &agg) in aggs_of_pod[p].iter().enumerate() {
                for &core in cores.iter().skip(j).step_by(2) {
                    connect(agg, core);
                }
            }
        }
        Self {
            name: name.to_string(),
            switches,
            hosts,
            links,
            port,
            aggs_of_pod,
            cores,
        }
    }

    /// The port of `a` facing `b` (neighbours only).
    pub fn port(&self, a: usize, b: usize) -> Option<u16> {
        self.port.get(&(a, b)).copied()
    }

    /// The switches a packet from host `src` to host `dst` crosses, chosen among the equal-cost
    /// paths by `hash` and avoiding links in `down` (as (a, b), a < b); `None` when every path
    /// is cut.
    pub fn path(
        &self,
        src: usize,
        dst: usize,
        hash: u64,
        down: &HashSet<(usize, usize)>,
    ) -> Option<Vec<Hop>> {
        let (s, d) = (&self.hosts[src], &self.hosts[dst]);
        let up = |x: usize, y: usize| !down.contains(&(x.min(y), x.max(y)));
        let mut chain: Vec<usize> = vec![s.edge];
        if s.edge != d.edge {
            let (ps, pd) = (self.switches[s.edge].pod, self.switches[d.edge].pod);
            let mut choices: Vec<Vec<usize>> = Vec::new();
            for &a1 in &self.aggs_of_pod[ps] {
                if !up(s.edge, a1) {
                    continue;
                }
                if ps == pd {
                    if up(a1, d.edge) {
                        choices.push(vec![a1]);
                    }
                    continue;
                }
                for &core in self.cores.iter().filter(|c| self.port(a1, **c).is_some()) {
                    let Some(&a2) = self.aggs_of_pod[pd]
                        .iter()
                        .find(|a2| self.port(core, **a2).is_some())
                    else {
                        continue;
                    };
                    if up(a1, core) && up(core, a2) && up(a2, d.edge) {
                        choices.push(vec![a1, core, a2]);
                    }
                }
            }
            if choices.is_empty() {
                return None;
            }
            chain.extend(choices.swap_remove((hash % choices.len() as u64) as usize));
            chain.push(d.edge);
        }
        let hops = chain
            .iter()
            .enumerate()
            .map(|(i, &sw)| Hop {
                switch: sw,
                ingress: if i == 0 {
                    s.port
                } else {
                    self.port(sw, chain[i - 1]).unwrap_or(0)
                },
                egress: if i + 1 == chain.len() {
                    d.port
                } else {
                    self.port(sw, chain[i + 1]).unwrap_or(0)
                },
            })
            .collect();
        Some(hops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_fabric_has_the_issue_shape_and_paths_avoid_failed_links() {
        let f = Fabric::parse("three-tier").unwrap();
        assert_eq!(f.switches.len(), 20);
        assert_eq!(f.hosts.len(), 64);
        assert_eq!(f.aggs_of_pod.len(), 4);
        // 8 edges × 2 uplinks + 8 aggregation × 2 core links.
        assert_eq!(f.links.len(), 32);
        let none = HashSet::new();
        // Same edge: one hop; same pod: three; across pods: five.
        assert_eq!(f.path(0, 1, 0, &none).unwrap().len(), 1);
        assert_eq!(f.path(0, 8, 0, &none).unwrap().len(), 3);
        let far = f.path(0, 63, 0, &none).unwrap();
        assert_eq!(far.len(), 5);
        assert_eq!(far[0].ingress, f.hosts[0].port);
        assert_eq!(far[4].egress, f.hosts[63].port);
        // Every hash's path avoids a cut link; cut both uplinks and nothing leaves the edge.
        let (a, b) = (far[0].switch, far[1].switch);
        let down: HashSet<_> = [(a.min(b), a.max(b))].into();
        for hash in 0..16 {
            let p = f.path(0, 63, hash, &down).unwrap();
            assert_ne!(p[1].switch, b);
        }
        let mut both = HashSet::new();
        for agg in &f.aggs_of_pod[0] {
            // Edge 0 is index 0, below every aggregation switch.
            both.insert((0, *agg));
        }
        assert!(f.path(0, 63, 0, &both).is_none());
        assert!(Fabric::parse("three-tier:3,3,4,8").is_err());
        assert!(Fabric::parse("fat-tree:4").is_err());
    }
}
