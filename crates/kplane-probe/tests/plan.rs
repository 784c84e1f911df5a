//! The planners against hand-checked small graphs, and their properties on Watts–Strogatz
//! graphs like the paper's (every switch visited, walks over real links, k paths of balanced
//! length for GPINT, every link exactly once for Euler, the same plan for the same graph).

use kplane_emulator::topology::{LinkSpec, Topology};
use kplane_probe::plan::{euler, gpint};
use kplane_probe::{Graph, PLANNERS};

fn graph(n: usize, edges: &[(usize, usize)]) -> Graph {
    Graph::from_edges(n, edges).unwrap()
}

/// The switch-to-switch links of the emulator's Watts–Strogatz topology.
fn watts_strogatz(n: usize, seed: u64) -> Graph {
    let t = Topology::watts_strogatz(n, 4, 0.1, seed, LinkSpec::default()).unwrap();
    let (switches, links) = t.switch_links();
    graph(switches, &links)
}

#[test]
fn a_line_is_one_path_for_gpint_and_one_trail_for_euler() {
    let g = graph(5, &[(0, 1), (1, 2), (2, 3), (3, 4)]);
    let p = gpint(&g, 1);
    assert!(p.problems(&g).is_empty(), "{:?}", p.problems(&g));
    assert_eq!(p.lengths(), [5]);
    assert_eq!(p.overlaps(), 0);
    let e = euler(&g);
    assert_eq!(e.paths.len(), 1, "{e:?}");
    assert_eq!(e.lengths(), [5]);
}

#[test]
fn a_star_needs_the_centre_twice() {
    // Centre 0, leaves 1-4: two paths of three (leaf, centre, leaf) cover it only by
    // visiting the centre twice (ii-c); Euler pairs the four odd leaves: two trails.
    let g = graph(5, &[(0, 1), (0, 2), (0, 3), (0, 4)]);
    let p = gpint(&g, 2);
    assert!(p.problems(&g).is_empty(), "{:?}", p.problems(&g));
    assert_eq!(p.paths.len(), 2);
    assert!(p.overlaps() >= 1, "{p:?}");
    let e = euler(&g);
    assert_eq!(e.paths.len(), 2, "{e:?}");
    assert!(e.problems(&g).is_empty());
}

#[test]
fn gpint_balances_two_paths_on_a_ring() {
    // A ring of 10: two paths of 5.
    let edges: Vec<(usize, usize)> = (0..10).map(|i| (i, (i + 1) % 10)).collect();
    let g = graph(10, &edges);
    let p = gpint(&g, 2);
    assert!(p.problems(&g).is_empty(), "{:?}", p.problems(&g));
    assert_eq!(p.lengths(), [5, 5], "{p:?}");
    // Euler: a ring has no odd switch: one closed trail over its 10 links.
    let e = euler(&g);
    assert_eq!(e.paths.len(), 1);
    assert_eq!(e.paths[0].len(), 11);
    assert_eq!(e.paths[0].first(), e.paths[0].last());
}

#[test]
fn on_small_worlds_every_switch_is_visited_over_real_links_and_lengths_balance() {
    for (n, seed) in [(20, 1), (60, 2), (60, 3), (100, 4)] {
        let g = watts_strogatz(n, seed);
        for (name, plan) in PLANNERS {
            let p = plan(&g);
            assert!(
                p.problems(&g).is_empty(),
                "{name} n={n}: {:?}",
                p.problems(&g)
            );
            assert_eq!(plan(&g), p, "{name}: the same plan for the same graph");
        }
        for level in [2, 3, 5] {
            let k = gpint(&g, kplane_probe::plan::paths_for(level, n));
            assert_eq!(k.paths.len(), level * n / 10, "GPINT-{level} n={n}");
            let l = k.lengths();
            let (longest, shortest) = (l[0], l[l.len() - 1]);
            assert!(
                longest <= 2 * n.div_ceil(l.len()) + 2 && shortest >= 1,
                "GPINT-{level} n={n}: lengths {l:?}"
            );
        }
        // Euler: every link exactly once.
        let e = euler(&g);
        let mut used: Vec<(usize, usize)> = e
            .paths
            .iter()
            .flat_map(|p| p.windows(2).map(|w| (w[0].min(w[1]), w[0].max(w[1]))))
            .collect();
        used.sort_unstable();
        assert_eq!(used, g.edges(), "n={n}");
    }
}
