//! GPINT (gpint-reliable-int-monitoring §III-A): Kernighan–Lin style partitioning into k
//! probe paths of about |V|/k switches that together visit every switch.
//!
//! * **Initial partitioning**: switches by degree (highest first, then by id); each of the k
//!   paths starts at the first switch not on one and grows at either end through the highest
//!   degree neighbour not on one, up to ⌈|V|/k⌉ switches.
//! * **Exchange** until nothing improves: (R1) a switch on no path joins the shortest path
//!   that can reach it from an end — directly (ii-a), or through switches already on other
//!   paths, which then are on both (ii-c, overlap); (R2) between two paths, an end switch of
//!   the longer one moves to the shorter one when they touch (ii-a), or the end segment of two
//!   switches (ii-b), whenever that narrows their lengths (sum of squares falls).
//!
//! The paper leaves the formal definition to its reference [21]; these rules are kplane's
//! reading of it (docs/gpint.md).

use super::Plan;
use crate::Graph;
use crate::graph::route_back;

/// GPINT-L's k: ⌊L·|V|/10⌋ paths (at least one).
pub fn paths_for(level: usize, switches: usize) -> usize {
    (level * switches / 10).max(1)
}

pub fn gpint(g: &Graph, k: usize) -> Plan {
    let n = g.len();
    let k = k.clamp(1, n.max(1));
    let target = n.div_ceil(k);
    let mut order: Vec<usize> = (0..n).filter(|&v| g.degree(v) > 0).collect();
    order.sort_by(|&a, &b| g.degree(b).cmp(&g.degree(a)).then(a.cmp(&b)));
    let mut on = vec![0u32; n];
    let mut paths: Vec<Vec<usize>> = Vec::new();
    for &start in &order {
        if paths.len() == k {
            break;
        }
        if on[start] > 0 {
            continue;
        }
        let mut p = std::collections::VecDeque::from([start]);
        on[start] += 1;
        while p.len() < target {
            let free = |v: usize| {
                g.neighbours(v)
                    .iter()
                    .copied()
                    .filter(|&w| on[w] == 0)
                    .max_by(|&a, &b| g.degree(a).cmp(&g.degree(b)).then(b.cmp(&a)))
            };
            let back = *p.back().unwrap_or(&start);
            let front = *p.front().unwrap_or(&start);
            if let Some(w) = free(back) {
                p.push_back(w);
                on[w] += 1;
            } else if let Some(w) = free(front) {
                p.push_front(w);
                on[w] += 1;
            } else {
                break;
            }
        }
        paths.push(p.into_iter().collect());
    }
    let mut changed = true;
    while changed {
        changed = cover(g, &order, &mut paths, &mut on) | balance(g, &mut paths);
    }
    Plan { paths }
}

/// R1: every switch on a path. Returns whether anything moved.
fn cover(g: &Graph, order: &[usize], paths: &mut [Vec<usize>], on: &mut [u32]) -> bool {
    let mut changed = false;
    for &x in order {
        if on[x] > 0 {
            continue;
        }
        // The shortest path whose end reaches x with the fewest switches in between: one
        // search from x gives every end's route (end first, x last).
        let parents = g.parents(x);
        let best = paths
            .iter()
            .enumerate()
            .flat_map(|(i, p)| [(i, true, p[p.len() - 1]), (i, false, p[0])])
            .filter_map(|(i, back, end)| route_back(&parents, end).map(|r| (i, back, r)))
            .min_by_key(|(i, back, r)| (r.len(), paths[*i].len(), *i, !*back));
        let Some((i, back, route)) = best else {
            continue;
        };
        for &v in &route[1..] {
            on[v] += 1;
        }
        let p = &mut paths[i];
        if back {
            p.extend_from_slice(&route[1..]);
        } else {
            for &v in &route[1..] {
                p.insert(0, v);
            }
        }
        changed = true;
    }
    changed
}

/// R2: moves an end switch (ii-a) or an end segment of two (ii-b) from a longer path to a
/// shorter one it touches, while that narrows them (the sum of squared lengths falls, so it
/// ends). Returns whether anything moved.
fn balance(g: &Graph, paths: &mut [Vec<usize>]) -> bool {
    let mut changed = false;
    let count = paths.len();
    for t in 0..count {
        for s in 0..count {
            if s == t {
                continue;
            }
            loop {
                let (lt, ls) = (paths[t].len(), paths[s].len());
                let moved = [2usize, 1]
                    .into_iter()
                    .filter(|&m| lt > m && lt > ls + m)
                    .find_map(|m| segment_move(g, &paths[t], &paths[s], m));
                let Some((from_back, to_back, m)) = moved else {
                    break;
                };
                // Outermost (t's end switch) first: it is the one that touches s.
                let seg: Vec<usize> = if from_back {
                    paths[t].split_off(lt - m).into_iter().rev().collect()
                } else {
                    paths[t].drain(..m).collect()
                };
                if to_back {
                    paths[s].extend(seg);
                } else {
                    for v in seg {
                        paths[s].insert(0, v);
                    }
                }
                changed = true;
            }
        }
    }
    changed
}

/// Whether t's end segment of `m` switches can join s: its outermost switch (t's end) must be
/// adjacent to an end of s, and the segment must not already be on s. (from t's back?, to s's
/// back?, m).
fn segment_move(g: &Graph, t: &[usize], s: &[usize], m: usize) -> Option<(bool, bool, usize)> {
    for from_back in [true, false] {
        let seg: Vec<usize> = if from_back {
            t[t.len() - m..].to_vec()
        } else {
            t[..m].to_vec()
        };
        let outer = if from_back { seg[m - 1] } else { seg[0] };
        if seg.iter().any(|v| s.contains(v)) {
            continue;
        }
        for to_back in [true, false] {
            let end = if to_back { s[s.len() - 1] } else { s[0] };
            if g.adjacent(end, outer) {
                return Some((from_back, to_back, m));
            }
        }
    }
    None
}
