//! Topologies: nodes (switches and hosts) and links between their ports.
//!
//! Builders: k-ary fat-tree, leaf-spine, Watts–Strogatz small world, and a TOML file
//! (format in docs/emulator.md). Hosts get addresses 10.<a>.<b>.<c> derived from their index.

use crate::EmulatorError;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

/// Index of a node in [`Topology::nodes`].
pub type NodeIdx = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    Switch,
    Host,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    pub kind: NodeKind,
    pub name: String,
    /// INT node id (switches: 1..; hosts: 0).
    pub id: u32,
    /// Host address.
    pub ip: Option<IpAddr>,
    /// `ports[p]` = (link index, the peer node, the peer's port).
    pub ports: Vec<(usize, NodeIdx, u16)>,
}

/// A bidirectional link; each direction has its own egress queue at the sending port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Link {
    pub a: (NodeIdx, u16),
    pub b: (NodeIdx, u16),
    /// Propagation delay, ns.
    pub delay_ns: u64,
    /// Bits per second.
    pub rate_bps: u64,
    /// Probability a packet is lost on the wire.
    pub loss: f64,
}

/// Link defaults for the builders.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    pub delay_ns: u64,
    pub rate_bps: u64,
    pub loss: f64,
}

impl Default for LinkSpec {
    fn default() -> Self {
        Self {
            delay_ns: 1_000,
            rate_bps: 10_000_000_000,
            loss: 0.0,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Topology {
    pub name: String,
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
}

fn host_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        10,
        (i >> 16) as u8,
        (i >> 8) as u8,
        (i & 0xFF) as u8 + 1,
    ))
}

impl Topology {
    /// Adds a node (switches get the next node id, hosts the next 10.x.y.z address).
    pub fn add(&mut self, kind: NodeKind, name: String) -> NodeIdx {
        let id = match kind {
            NodeKind::Switch => self.switches().count() as u32 + 1,
            NodeKind::Host => 0,
        };
        let ip = (kind == NodeKind::Host).then(|| host_ip(self.hosts().count()));
        self.nodes.push(Node {
            kind,
            name,
            id,
            ip,
            ports: Vec::new(),
        });
        self.nodes.len() - 1
    }

    /// Connects two nodes on their next free ports.
    pub fn connect(&mut self, a: NodeIdx, b: NodeIdx, spec: LinkSpec) {
        let li = self.links.len();
        let pa = self.nodes[a].ports.len() as u16;
        let pb = self.nodes[b].ports.len() as u16;
        self.nodes[a].ports.push((li, b, pb));
        self.nodes[b].ports.push((li, a, pa));
        self.links.push(Link {
            a: (a, pa),
            b: (b, pb),
            delay_ns: spec.delay_ns,
            rate_bps: spec.rate_bps,
            loss: spec.loss,
        });
    }

    pub fn switches(&self) -> impl Iterator<Item = (NodeIdx, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Switch)
    }

    pub fn hosts(&self) -> impl Iterator<Item = (NodeIdx, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Host)
    }

    pub fn host_indices(&self) -> Vec<NodeIdx> {
        self.hosts().map(|(i, _)| i).collect()
    }

    /// The switch-to-switch links, switches numbered `0..` in node order: the fabric as a
    /// graph of switches (what probe paths are planned over).
    pub fn switch_links(&self) -> (usize, Vec<(usize, usize)>) {
        let mut index = vec![None; self.nodes.len()];
        for (i, (node, _)) in self.switches().enumerate() {
            index[node] = Some(i);
        }
        let links = self
            .links
            .iter()
            .filter_map(|l| Some((index[l.a.0]?, index[l.b.0]?)))
            .collect();
        (self.switches().count(), links)
    }

    /// The node with INT id `id` (switches).
    pub fn switch_by_id(&self, id: u32) -> Option<NodeIdx> {
        self.switches().find(|(_, n)| n.id == id).map(|(i, _)| i)
    }

    pub fn host_by_ip(&self, ip: IpAddr) -> Option<NodeIdx> {
        self.hosts().find(|(_, n)| n.ip == Some(ip)).map(|(i, _)| i)
    }

    /// k-ary fat-tree: (k/2)² core, k pods of k/2 aggregation and k/2 edge switches, k/2
    /// hosts per edge switch. k = 4: 20 switches, 16 hosts.
    pub fn fat_tree(k: usize, spec: LinkSpec) -> Result<Self, EmulatorError> {
        if k < 2 || !k.is_multiple_of(2) || k > 64 {
            return Err(EmulatorError::TopologyParameter(format!(
                "fat-tree k={k}: even, 2..=64"
            )));
        }
        let h = k / 2;
        let mut t = Topology {
            name: format!("fat-tree:{k}"),
            ..Topology::default()
        };
        let core: Vec<_> = (0..h * h)
            .map(|i| t.add(NodeKind::Switch, format!("core{i}")))
            .collect();
        for pod in 0..k {
            let aggs: Vec<_> = (0..h)
                .map(|a| t.add(NodeKind::Switch, format!("agg{pod}-{a}")))
                .collect();
            let edges: Vec<_> = (0..h)
                .map(|e| t.add(NodeKind::Switch, format!("edge{pod}-{e}")))
                .collect();
            for &e in &edges {
                for hh in 0..h {
                    let host = t.add(NodeKind::Host, format!("h{pod}-{e}-{hh}"));
                    t.connect(host, e, spec);
                }
            }
            for (a, &agg) in aggs.iter().enumerate() {
                for &e in &edges {
                    t.connect(e, agg, spec);
                }
                for c in 0..h {
                    t.connect(agg, core[a * h + c], spec);
                }
            }
        }
        Ok(t)
    }

    /// Leaf-spine: every leaf connects to every spine; `hosts` hosts per leaf.
    pub fn leaf_spine(spines: usize, leaves: usize, hosts: usize, spec: LinkSpec) -> Self {
        let mut t = Topology {
            name: format!("leaf-spine:{spines},{leaves},{hosts}"),
            ..Topology::default()
        };
        let sp: Vec<_> = (0..spines)
            .map(|i| t.add(NodeKind::Switch, format!("spine{i}")))
            .collect();
        for l in 0..leaves {
            let leaf = t.add(NodeKind::Switch, format!("leaf{l}"));
            for hh in 0..hosts {
                let host = t.add(NodeKind::Host, format!("h{l}-{hh}"));
                t.connect(host, leaf, spec);
            }
            for &s in &sp {
                t.connect(leaf, s, spec);
            }
        }
        t
    }

    /// Watts–Strogatz small world over `n` switches (ring lattice of degree `k`, each edge
    /// rewired with probability `p`), one host per switch. Deterministic for a `seed`.
    pub fn watts_strogatz(
        n: usize,
        k: usize,
        p: f64,
        seed: u64,
        spec: LinkSpec,
    ) -> Result<Self, EmulatorError> {
        if n < 3 || k < 2 || !k.is_multiple_of(2) || k >= n || !(0.0..=1.0).contains(&p) {
            return Err(EmulatorError::TopologyParameter(format!(
                "watts-strogatz n={n} k={k} p={p}: n >= 3, even k in 2..n, p in [0,1]"
            )));
        }
        let mut rng = kplane_model::rng::Rng::new(seed);
        let mut edges: Vec<(usize, usize)> = Vec::new();
        for i in 0..n {
            for j in 1..=k / 2 {
                edges.push((i, (i + j) % n));
            }
        }
        let has = |edges: &[(usize, usize)], a: usize, b: usize| {
            edges
                .iter()
                .any(|&(x, y)| (x == a && y == b) || (x == b && y == a))
        };
        for e in 0..edges.len() {
            if rng.uniform() < p {
                let a = edges[e].0;
                for _ in 0..n {
                    let b = rng.below(n as u64) as usize;
                    if b != a && !has(&edges, a, b) {
                        edges[e].1 = b;
                        break;
                    }
                }
            }
        }
        let mut t = Topology {
            name: format!("watts-strogatz:{n},{k},{p}"),
            ..Topology::default()
        };
        let sw: Vec<_> = (0..n)
            .map(|i| t.add(NodeKind::Switch, format!("s{i}")))
            .collect();
        for (i, &s) in sw.iter().enumerate() {
            let host = t.add(NodeKind::Host, format!("h{i}"));
            t.connect(host, s, spec);
        }
        for (a, b) in edges {
            t.connect(sw[a], sw[b], spec);
        }
        Ok(t)
    }

    /// Parses `fat-tree:4`, `leaf-spine:2,4,4`, `watts-strogatz:20,4,0.1[,seed]`, or a path to
    /// a topology file.
    pub fn parse(s: &str, spec: LinkSpec) -> Result<Self, EmulatorError> {
        let (kind, args) = s.split_once(':').unwrap_or((s, ""));
        let nums = |n: usize| -> Result<Vec<f64>, EmulatorError> {
            let v: Result<Vec<f64>, _> = args.split(',').map(|x| x.trim().parse::<f64>()).collect();
            match v {
                Ok(v) if v.len() >= n => Ok(v),
                _ => Err(EmulatorError::TopologyParameter(format!(
                    "{s}: needs {n} numbers"
                ))),
            }
        };
        match kind {
            "fat-tree" if args.is_empty() => Self::fat_tree(4, spec),
            "fat-tree" => Self::fat_tree(nums(1)?[0] as usize, spec),
            "leaf-spine" => {
                let v = nums(3)?;
                Ok(Self::leaf_spine(
                    v[0] as usize,
                    v[1] as usize,
                    v[2] as usize,
                    spec,
                ))
            }
            "watts-strogatz" => {
                let v = nums(3)?;
                let seed = v.get(3).map_or(1, |s| *s as u64);
                Self::watts_strogatz(v[0] as usize, v[1] as usize, v[2], seed, spec)
            }
            _ if s.ends_with(".toml") => Self::from_file(s, spec),
            _ => Err(EmulatorError::UnknownTopology(s.to_string())),
        }
    }

    /// A topology file (TOML):
    /// ```toml
    /// switches = ["s1", "s2", "s3"]
    /// hosts = ["h1", "h2"]
    /// links = [["h1", "s1"], ["s1", "s2"], ["s2", "s3"], ["s3", "h2"]]
    /// # optional per-link: [[link]] a = "s1" b = "s2" delay = "5us" rate-gbps = 40 loss = 0.001
    /// ```
    pub fn from_file(path: &str, spec: LinkSpec) -> Result<Self, EmulatorError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        struct File {
            switches: Vec<String>,
            hosts: Vec<String>,
            #[serde(default)]
            links: Vec<(String, String)>,
            #[serde(default)]
            link: Vec<LinkEntry>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        struct LinkEntry {
            a: String,
            b: String,
            #[serde(default, with = "humantime_serde")]
            delay: Option<std::time::Duration>,
            rate_gbps: Option<f64>,
            loss: Option<f64>,
        }
        let err = |reason: String| EmulatorError::TopologyFile {
            path: path.to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let f: File = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let mut t = Topology {
            name: path.to_string(),
            ..Topology::default()
        };
        let mut names = std::collections::HashMap::new();
        for s in &f.switches {
            names.insert(s.clone(), t.add(NodeKind::Switch, s.clone()));
        }
        for h in &f.hosts {
            names.insert(h.clone(), t.add(NodeKind::Host, h.clone()));
        }
        let find = |n: &str| {
            names
                .get(n)
                .copied()
                .ok_or_else(|| err(format!("unknown node {n:?}")))
        };
        for (a, b) in &f.links {
            t.connect(find(a)?, find(b)?, spec);
        }
        for l in &f.link {
            let s = LinkSpec {
                delay_ns: l.delay.map_or(spec.delay_ns, |d| d.as_nanos() as u64),
                rate_bps: l.rate_gbps.map_or(spec.rate_bps, |g| (g * 1e9) as u64),
                loss: l.loss.unwrap_or(spec.loss),
            };
            t.connect(find(&l.a)?, find(&l.b)?, s);
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fat_tree_4_has_20_switches_and_16_hosts() {
        let t = Topology::fat_tree(4, LinkSpec::default()).unwrap();
        assert_eq!(t.switches().count(), 20);
        assert_eq!(t.hosts().count(), 16);
        // Every switch has k = 4 ports; links: 16 host + 16 edge-agg + 16 agg-core.
        assert!(t.switches().all(|(_, n)| n.ports.len() == 4));
        assert_eq!(t.links.len(), 48);
    }

    #[test]
    fn parse_every_builder() {
        let s = LinkSpec::default();
        assert_eq!(
            Topology::parse("leaf-spine:2,4,3", s)
                .unwrap()
                .hosts()
                .count(),
            12
        );
        let ws = Topology::parse("watts-strogatz:20,4,0.2,7", s).unwrap();
        assert_eq!(ws.switches().count(), 20);
        assert!(Topology::parse("torus:3", s).is_err());
        assert!(Topology::parse("fat-tree:3", s).is_err());
    }

    #[test]
    fn topology_files() {
        let p = std::env::temp_dir().join(format!("kplane-topo-{}.toml", std::process::id()));
        std::fs::write(
            &p,
            "switches = [\"s1\", \"s2\"]\nhosts = [\"h1\", \"h2\"]\nlinks = [[\"h1\", \"s1\"], [\"s2\", \"h2\"]]\n[[link]]\na = \"s1\"\nb = \"s2\"\ndelay = \"5us\"\nloss = 0.01\n",
        )
        .unwrap();
        let t = Topology::parse(p.to_str().unwrap(), LinkSpec::default()).unwrap();
        assert_eq!(t.links.len(), 3);
        assert_eq!(t.links[2].delay_ns, 5_000);
        std::fs::remove_file(p).unwrap();
    }
}
