//! Probe path planners: each turns the fabric's graph into walks (consecutive switches
//! adjacent) that together visit every switch. One module per planner, registered in
//! [`PLANNERS`].

mod euler;
mod gpint;

pub use euler::euler;
pub use gpint::{gpint, paths_for};

use crate::Graph;

/// Probe paths: each a walk over adjacent switches (a switch may appear in several).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub paths: Vec<Vec<usize>>,
}

impl Plan {
    /// Whether every path is a walk of `g` and every switch with a link is on one (R1).
    pub fn problems(&self, g: &Graph) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen = vec![false; g.len()];
        for (i, p) in self.paths.iter().enumerate() {
            if p.is_empty() {
                out.push(format!("path {i} is empty"));
            }
            for w in p.windows(2) {
                if !g.adjacent(w[0], w[1]) {
                    out.push(format!("path {i}: {} and {} are not adjacent", w[0], w[1]));
                }
            }
            for &v in p {
                seen[v] = true;
            }
        }
        for (v, seen) in seen.iter().enumerate() {
            if !seen && g.degree(v) > 0 {
                out.push(format!("switch {v} is on no path"));
            }
        }
        out
    }

    /// Switches per path, longest first.
    pub fn lengths(&self) -> Vec<usize> {
        let mut l: Vec<usize> = self.paths.iter().map(Vec::len).collect();
        l.sort_unstable_by(|a, b| b.cmp(a));
        l
    }

    /// Switch visits beyond one per switch (overlaps).
    pub fn overlaps(&self) -> usize {
        let visits: usize = self.paths.iter().map(Vec::len).sum();
        let mut distinct: Vec<usize> = self.paths.iter().flatten().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        visits - distinct.len()
    }
}

/// A planner: the fabric's graph → probe paths.
pub type Planner = fn(&Graph) -> Plan;

/// A planner by name: `gpint-2`, `gpint-3`, `gpint-5` (k = ⌊level·|V|/10⌋ paths) and `euler`
/// (INT-Path's Euler trails).
pub const PLANNERS: &[(&str, Planner)] = &[
    ("gpint-2", |g| gpint(g, paths_for(2, g.len()))),
    ("gpint-3", |g| gpint(g, paths_for(3, g.len()))),
    ("gpint-5", |g| gpint(g, paths_for(5, g.len()))),
    ("euler", euler),
];
