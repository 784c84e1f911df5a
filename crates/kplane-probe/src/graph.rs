//! An undirected simple graph of switches `0..n`, neighbours sorted (so every planner is
//! deterministic).

/// Adjacency lists, sorted and without duplicates or self-loops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Graph {
    adj: Vec<Vec<usize>>,
}

impl Graph {
    /// `n` nodes and `edges` (self-loops and repeats are dropped; nodes past `n` are an error).
    pub fn from_edges(n: usize, edges: &[(usize, usize)]) -> Result<Self, crate::ProbeError> {
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in edges {
            if a >= n || b >= n {
                return Err(crate::ProbeError::Graph(format!(
                    "edge ({a}, {b}) names a node past {n}"
                )));
            }
            if a != b {
                adj[a].push(b);
                adj[b].push(a);
            }
        }
        for l in &mut adj {
            l.sort_unstable();
            l.dedup();
        }
        Ok(Self { adj })
    }

    pub fn len(&self) -> usize {
        self.adj.len()
    }

    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    pub fn neighbours(&self, v: usize) -> &[usize] {
        &self.adj[v]
    }

    pub fn degree(&self, v: usize) -> usize {
        self.adj[v].len()
    }

    pub fn adjacent(&self, a: usize, b: usize) -> bool {
        self.adj[a].binary_search(&b).is_ok()
    }

    /// Every edge once, as (smaller, larger).
    pub fn edges(&self) -> Vec<(usize, usize)> {
        (0..self.len())
            .flat_map(|a| {
                self.adj[a]
                    .iter()
                    .filter(move |&&b| a < b)
                    .map(move |&b| (a, b))
            })
            .collect()
    }

    /// Breadth-first search from `from`: each reached switch's predecessor on a shortest
    /// path (`from` its own; `usize::MAX` where unreachable).
    pub fn parents(&self, from: usize) -> Vec<usize> {
        let mut prev = vec![usize::MAX; self.len()];
        let mut queue = std::collections::VecDeque::from([from]);
        prev[from] = from;
        while let Some(v) = queue.pop_front() {
            for &w in &self.adj[v] {
                if prev[w] == usize::MAX {
                    prev[w] = v;
                    queue.push_back(w);
                }
            }
        }
        prev
    }
}

/// The route from `to` back to the search's origin (both included), from
/// [`Graph::parents`]; `None` when unreachable.
pub fn route_back(parents: &[usize], to: usize) -> Option<Vec<usize>> {
    if parents[to] == usize::MAX {
        return None;
    }
    let mut route = vec![to];
    let mut at = to;
    while parents[at] != at {
        at = parents[at];
        route.push(at);
    }
    Some(route)
}
