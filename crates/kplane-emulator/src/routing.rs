//! Shortest-path routing with ECMP: per (switch, destination host), the egress ports that lead
//! one hop closer. Recomputed when links or nodes fail or recover.

use std::collections::VecDeque;

use crate::topology::{NodeIdx, NodeKind, Topology};

#[derive(Clone, Debug, Default)]
pub struct Routes {
    /// `slot[host node]` = index into `next[*]`.
    slot: Vec<Option<usize>>,
    /// `next[node][slot]` = equal-cost egress ports.
    next: Vec<Vec<Vec<u16>>>,
}

impl Routes {
    /// Routes over the links and nodes that are up.
    pub fn compute(t: &Topology, link_up: &[bool], node_up: &[bool]) -> Self {
        let hosts = t.host_indices();
        let mut slot = vec![None; t.nodes.len()];
        for (i, &h) in hosts.iter().enumerate() {
            slot[h] = Some(i);
        }
        let mut next = vec![vec![Vec::new(); hosts.len()]; t.nodes.len()];
        let mut dist = vec![u32::MAX; t.nodes.len()];
        let mut queue = VecDeque::new();
        for (si, &h) in hosts.iter().enumerate() {
            dist.fill(u32::MAX);
            dist[h] = 0;
            queue.clear();
            queue.push_back(h);
            while let Some(n) = queue.pop_front() {
                // Hosts do not forward: only the destination itself starts the search.
                if n != h && t.nodes[n].kind == NodeKind::Host {
                    continue;
                }
                for &(li, peer, _) in &t.nodes[n].ports {
                    if link_up[li] && node_up[peer] && dist[peer] == u32::MAX {
                        dist[peer] = dist[n] + 1;
                        queue.push_back(peer);
                    }
                }
            }
            for (n, node) in t.nodes.iter().enumerate() {
                if node.kind != NodeKind::Switch || dist[n] == u32::MAX || !node_up[n] {
                    continue;
                }
                next[n][si] = node
                    .ports
                    .iter()
                    .enumerate()
                    .filter(|(_, (li, peer, _))| {
                        link_up[*li] && node_up[*peer] && dist[*peer] + 1 == dist[n]
                    })
                    .map(|(p, _)| p as u16)
                    .collect();
            }
        }
        Self { slot, next }
    }

    /// Equal-cost egress ports from `node` towards host `dst` (empty: unreachable).
    pub fn next_ports(&self, node: NodeIdx, dst: NodeIdx) -> &[u16] {
        match self.slot.get(dst).copied().flatten() {
            Some(s) => &self.next[node][s],
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::LinkSpec;

    #[test]
    fn fat_tree_has_ecmp_and_survives_a_failure() {
        let t = Topology::fat_tree(4, LinkSpec::default()).unwrap();
        let mut up = vec![true; t.links.len()];
        let nodes = vec![true; t.nodes.len()];
        let r = Routes::compute(&t, &up, &nodes);
        let hosts = t.host_indices();
        let (src_edge, dst) = (t.nodes[hosts[0]].ports[0].1, hosts[15]);
        // An edge switch reaches another pod through either aggregation switch.
        assert_eq!(r.next_ports(src_edge, dst).len(), 2);
        // Its own hosts: one port.
        assert_eq!(r.next_ports(src_edge, hosts[1]).len(), 1);
        let p = r.next_ports(src_edge, dst)[0] as usize;
        up[t.nodes[src_edge].ports[p].0] = false;
        let r2 = Routes::compute(&t, &up, &nodes);
        assert_eq!(r2.next_ports(src_edge, dst).len(), 1, "one uplink left");
        assert_ne!(r2.next_ports(src_edge, dst)[0] as usize, p);
    }
}
