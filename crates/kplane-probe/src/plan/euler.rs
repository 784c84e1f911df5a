//! The Euler / INT-Path baseline (INT-Path, INFOCOM 2019): every link once. In each connected
//! part the odd-degree switches are paired by virtual links, making it Eulerian; Hierholzer's
//! algorithm walks the circuit, and cutting it at the virtual links leaves trails — one per
//! pair of odd switches (one circuit when there is none).

use super::Plan;
use crate::Graph;

pub fn euler(g: &Graph) -> Plan {
    let n = g.len();
    // Multigraph edges: real ones, then virtual ones (index ≥ real).
    let mut edges: Vec<(usize, usize)> = g.edges();
    let real = edges.len();
    let mut part = vec![usize::MAX; n];
    let mut parts: Vec<Vec<usize>> = Vec::new();
    for s in 0..n {
        if part[s] != usize::MAX || g.degree(s) == 0 {
            continue;
        }
        let mut members = vec![s];
        part[s] = parts.len();
        let mut i = 0;
        while i < members.len() {
            for &w in g.neighbours(members[i]) {
                if part[w] == usize::MAX {
                    part[w] = parts.len();
                    members.push(w);
                }
            }
            i += 1;
        }
        members.sort_unstable();
        parts.push(members);
    }
    for members in &parts {
        let odd: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&v| g.degree(v) % 2 == 1)
            .collect();
        for pair in odd.chunks(2) {
            edges.push((pair[0], pair[1]));
        }
    }
    let mut incident: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &(a, b)) in edges.iter().enumerate() {
        incident[a].push(i);
        incident[b].push(i);
    }
    let mut used = vec![false; edges.len()];
    let mut next = vec![0usize; n];
    let mut paths = Vec::new();
    for members in &parts {
        // Hierholzer: the circuit as a sequence of (switch, edge taken to reach it).
        let start = members[0];
        let mut stack: Vec<(usize, Option<usize>)> = vec![(start, None)];
        let mut circuit: Vec<(usize, Option<usize>)> = Vec::new();
        while let Some(&top) = stack.last() {
            let v = top.0;
            while next[v] < incident[v].len() && used[incident[v][next[v]]] {
                next[v] += 1;
            }
            if next[v] == incident[v].len() {
                stack.pop();
                circuit.push(top);
            } else {
                let e = incident[v][next[v]];
                used[e] = true;
                let (a, b) = edges[e];
                stack.push((if a == v { b } else { a }, Some(e)));
            }
        }
        circuit.reverse();
        // Cut at the virtual links; a circuit with none is one closed trail.
        let cut: Vec<usize> = (1..circuit.len())
            .filter(|&i| circuit[i].1.is_some_and(|e| e >= real))
            .collect();
        if cut.is_empty() {
            paths.push(circuit.iter().map(|c| c.0).collect());
            continue;
        }
        // Rotate so the walk starts right after a cut, then split at every cut.
        let first = cut[0];
        let rotated: Vec<(usize, Option<usize>)> = circuit[first..]
            .iter()
            .chain(circuit[1..first].iter())
            .chain(std::iter::once(&circuit[first]))
            .copied()
            .collect();
        let mut current: Vec<usize> = vec![rotated[0].0];
        for &(v, e) in &rotated[1..] {
            if e.is_some_and(|e| e >= real) {
                paths.push(std::mem::take(&mut current));
                current.push(v);
            } else {
                current.push(v);
            }
        }
        if current.len() > 1 {
            paths.push(current);
        }
    }
    Plan { paths }
}
