//! GPINT's evaluation (gpint-reliable-int-monitoring §V) in virtual time: the monitoring
//! module of `kplane_probe::monitor` against the emulator's probe data plane
//! (`kplane_emulator::probe`) on Watts–Strogatz graphs with 60 hosts' background traffic.

pub mod congestion;
pub mod degradation;
pub mod recovery;

use kplane_emulator::probe::{DSCP_MEASUREMENT, Delivery, Fabric, FabricConfig, Probe};
use kplane_emulator::topology::{LinkSpec, Topology};
use kplane_model::rng::Rng;
use kplane_probe::monitor::{Heard, Monitor, MonitorConfig, ProbeNet, RecoveryConfig, Session};
use kplane_probe::{Graph, PLANNERS};

/// The paper's hosts, probe budget and queue (§V-A).
pub const HOSTS: usize = 60;
pub const QUEUE: f64 = 1_000.0;
/// A switch's packet processor. The paper's BMv2 switches in Mininet ran at 85–92 % of
/// their processing under 10 k packets/s and past 100 % (dropping) under 14 k; kplane's
/// serve 12 k/s: the busiest switch at 83 % under the low load, 117 % under the high.
pub const CAPACITY_PPS: f64 = 12_000.0;
/// The paper's low and high background load: packets per second reaching the busiest switch
/// (the others receive what 60 hosts' flows bring them, less).
pub const LOW_PPS: f64 = 10_000.0;
pub const HIGH_PPS: f64 = 14_000.0;

/// Switches of the emulator's Watts–Strogatz generator (degree 4, rewiring 0.2).
pub fn graph(n: usize, seed: u64) -> anyhow::Result<Graph> {
    let t = Topology::watts_strogatz(n, 4, 0.2, seed, LinkSpec::default())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (switches, links) = t.switch_links();
    Graph::from_edges(switches, &links).map_err(|e| anyhow::anyhow!(e))
}

/// Background packets per second reaching each switch: 60 hosts on random switches, each
/// sending to another at one rate over a shortest path; a flow's packets reaching its i-th
/// switch have crossed i − 1 links that each lost `pdp` of them. Scaled so that without
/// loss the busiest switch receives `load_pps` (the paper's load on its switches).
pub fn arrivals(g: &Graph, load_pps: f64, pdp: f64, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed ^ 0xB4C6);
    let n = g.len();
    let at: Vec<usize> = (0..HOSTS).map(|_| rng.below(n as u64) as usize).collect();
    let (mut lossless, mut lossy) = (vec![0.0; n], vec![0.0; n]);
    for h in 0..HOSTS {
        let mut d = rng.below(HOSTS as u64 - 1) as usize;
        if d >= h {
            d += 1;
        }
        let parents = g.parents(at[d]);
        // From the source's switch back towards the destination's: the flow's route.
        let Some(route) = kplane_probe::graph::route_back(&parents, at[h]) else {
            continue;
        };
        for (i, &s) in route.iter().enumerate() {
            lossless[s] += 1.0;
            lossy[s] += (1.0 - pdp).powi(i as i32);
        }
    }
    let busiest = lossless.iter().copied().fold(0.0, f64::max);
    lossy
        .iter()
        .map(|v| v * load_pps / busiest.max(1e-9))
        .collect()
}

/// The emulator's probe data plane as the monitor's network.
pub struct Net(pub Fabric);

impl ProbeNet for Net {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn send_probe(&mut self, request: u16, route: &[usize], start: usize) {
        self.0.send_probe(Probe {
            request,
            route: route.to_vec(),
            pos: start,
            dlv: Vec::new(),
            mea: Vec::new(),
        });
    }
    fn send_snmp(&mut self, request: u16, switch: usize) {
        self.0.send_snmp(request, switch);
    }
    fn next(&mut self, until_ns: u64) -> Option<Heard> {
        self.0.next(until_ns).map(|d| match d {
            Delivery::Probe { dscp, probe } => {
                let measured = probe.dlv.iter().map(|d| d.switch).collect();
                if dscp == DSCP_MEASUREMENT {
                    Heard::Complete {
                        request: probe.request,
                        measured,
                    }
                } else {
                    Heard::Failure {
                        request: probe.request,
                        index: probe.pos,
                        measured,
                    }
                }
            }
            Delivery::Feedback { request, .. } => Heard::Feedback { request },
            Delivery::Snmp {
                request, switch, ..
            } => Heard::Snmp { request, switch },
        })
    }
}

/// One point of an evaluation.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub switches: usize,
    pub load_pps: f64,
    pub pdp: f64,
    /// Algorithms 1–2 and SQR in the switches (`None`: neither).
    pub recovery: Option<RecoveryConfig>,
    /// Measurement sessions (the paper: the same loop 10 times).
    pub sessions: usize,
}

/// What the sessions of one scenario showed.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Mean over the complete sessions (NaN when none was).
    pub latency_s: f64,
    pub failed_pct: f64,
    /// Probes (SNMP: requests and responses) lost in the network, of those sent.
    pub probe_loss_pct: f64,
    /// Probes sent per session: the plan's and the recovery's.
    pub probes: f64,
    /// 100·|P_R| / |P|: recovery probes over the plan's.
    pub recovery_pct: f64,
    /// The longest first send → done of a path that needed recovery (s).
    pub longest_recovery_s: f64,
}

/// A series of a sweep: (its name, the approach it runs, its recovery).
pub type Variant = (&'static str, &'static str, Option<RecoveryConfig>);

/// Every (load, variant, size) point under the low and the high load without link loss:
/// its key cells, then `values` of its [`Outcome`].
pub fn size_sweep(
    t: &mut super::Table,
    ctx: &super::Ctx,
    sizes: &[usize],
    variants: &[Variant],
    values: impl Fn(&Outcome) -> Vec<super::table::Cell>,
) -> anyhow::Result<()> {
    for (load, pps) in [("low", LOW_PPS), ("high", HIGH_PPS)] {
        for (name, approach, recovery) in variants {
            for &n in sizes {
                let sc = Scenario {
                    switches: n,
                    load_pps: pps,
                    pdp: 0.0,
                    recovery: recovery.clone(),
                    sessions: congestion::sessions(ctx.fast),
                };
                let o = measure(approach, &sc, ctx.seed)?;
                let mut row = vec![load.into(), (*name).into(), (n as f64).into()];
                row.extend(values(&o));
                t.push(row);
            }
        }
    }
    Ok(())
}

/// A size sweep's `col` for (`load`, `variant`) at its largest network (NaN if absent).
pub fn at_largest(t: &super::Table, load: &str, variant: &str, col: &str) -> f64 {
    t.values(&[load, variant], col)
        .last()
        .copied()
        .unwrap_or(f64::NAN)
}

/// A size sweep's largest finite `col` for (`load`, `variant`) over the sizes (0 if none).
pub fn worst(t: &super::Table, load: &str, variant: &str, col: &str) -> f64 {
    t.values(&[load, variant], col)
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// `approach` (a planner of `kplane_probe::PLANNERS` or `snmp`) over `sc`, seed `seed`.
pub fn measure(approach: &str, sc: &Scenario, seed: u64) -> anyhow::Result<Outcome> {
    let g = graph(sc.switches, seed)?;
    let arrivals = arrivals(&g, sc.load_pps, sc.pdp, seed);
    let adj: Vec<Vec<usize>> = (0..g.len()).map(|v| g.neighbours(v).to_vec()).collect();
    let cfg = FabricConfig {
        capacity_pps: CAPACITY_PPS,
        queue: QUEUE,
        link_loss: sc.pdp,
        recovery: sc.recovery.is_some(),
        hold_ns: sc.recovery.as_ref().map_or(0, |r| r.feedback_timeout_ns),
        ..FabricConfig::default()
    };
    let mut net = Net(Fabric::new(cfg, adj, &arrivals, seed, 0));
    let plan = match approach {
        "snmp" => None,
        name => {
            let (_, planner) = PLANNERS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| anyhow::anyhow!("no planner {name}"))?;
            Some(planner(&g))
        }
    };
    let mut monitor = Monitor::new(MonitorConfig {
        recovery: sc.recovery.clone(),
        ..MonitorConfig::default()
    });
    let mut sessions: Vec<Session> = Vec::new();
    let (mut sent, mut lost) = (0u64, 0u64);
    for _ in 0..sc.sessions {
        let before = net.0.stats.clone();
        let s = match &plan {
            Some(plan) => monitor.collect(&mut net, plan),
            None => monitor.poll(&mut net, g.len()),
        };
        // What is still on its way (late probes, held clones) belongs to this session; then
        // a second between sessions.
        net.0.run_out(1_000_000_000);
        let gap = net.0.now() + 1_000_000_000;
        let _ = net.next(gap);
        let st = &net.0.stats;
        sent += s.probes + s.recovery_probes;
        lost += match plan {
            Some(_) => {
                (st.probes_dropped_queue + st.probes_dropped_link)
                    - (before.probes_dropped_queue + before.probes_dropped_link)
            }
            None => st.snmp_dropped - before.snmp_dropped,
        };
        sessions.push(s);
    }
    let n = sessions.len().max(1) as f64;
    let complete: Vec<&Session> = sessions.iter().filter(|s| s.complete).collect();
    let initial: u64 = sessions.iter().map(|s| s.probes).sum();
    let recovery: u64 = sessions.iter().map(|s| s.recovery_probes).sum();
    Ok(Outcome {
        latency_s: if complete.is_empty() {
            f64::NAN
        } else {
            complete.iter().map(|s| s.latency_ns as f64).sum::<f64>() / complete.len() as f64 / 1e9
        },
        failed_pct: 100.0 * (n - complete.len() as f64) / n,
        probe_loss_pct: 100.0 * lost as f64 / sent.max(1) as f64,
        probes: (initial + recovery) as f64 / n,
        recovery_pct: 100.0 * recovery as f64 / initial.max(1) as f64,
        longest_recovery_s: sessions
            .iter()
            .map(|s| s.longest_recovery_ns)
            .max()
            .unwrap_or(0) as f64
            / 1e9,
    })
}

#[cfg(test)]
mod tests {
    //! SQR against scripted losses: the emulator's probe data plane with no background and
    //! lossless links but for the probes a test drops, and the monitor's Algorithms 1–2.

    use super::*;
    use kplane_probe::Plan;
    use kplane_probe::monitor::Unavailable;

    /// A 3×3 grid's switches, two paths covering them.
    fn grid() -> (Vec<Vec<usize>>, Plan) {
        let g = Graph::from_edges(
            9,
            &[
                (0, 1),
                (1, 2),
                (3, 4),
                (4, 5),
                (6, 7),
                (7, 8),
                (0, 3),
                (3, 6),
                (1, 4),
                (4, 7),
                (2, 5),
                (5, 8),
            ],
        )
        .unwrap();
        let adj = (0..9).map(|v| g.neighbours(v).to_vec()).collect();
        let plan = Plan {
            paths: vec![vec![0, 1, 2, 5, 4], vec![3, 6, 7, 8]],
        };
        (adj, plan)
    }

    fn net(recovery: bool) -> (Net, Plan) {
        let (adj, plan) = grid();
        let cfg = FabricConfig {
            recovery,
            hold_ns: RecoveryConfig::paper().feedback_timeout_ns,
            ..FabricConfig::default()
        };
        (Net(Fabric::new(cfg, adj, &[0.0; 9], 1, 0)), plan)
    }

    fn recovering() -> MonitorConfig {
        MonitorConfig {
            recovery: Some(RecoveryConfig::paper()),
            ..MonitorConfig::default()
        }
    }

    #[test]
    fn without_losses_each_path_takes_one_probe() {
        let (mut net, plan) = net(true);
        let s = Monitor::new(recovering()).collect(&mut net, &plan);
        assert!(s.complete, "{s:?}");
        assert_eq!((s.probes, s.recovery_probes), (2, 0));
        // Once the last feedbacks are in, every clone (one per hop: 4 + 3) was discarded.
        net.0.run_out(1_000_000_000);
        assert_eq!(net.0.stats.clones_discarded, 4 + 3);
        assert_eq!(net.0.stats.failure_notices, 0);
    }

    #[test]
    fn every_lost_probe_is_recovered_once_from_where_it_was_lost() {
        let (mut net, plan) = net(true);
        // One loss mid-path on each path.
        net.0.script_loss(2, 5, 1);
        net.0.script_loss(6, 7, 1);
        let s = Monitor::new(recovering()).collect(&mut net, &plan);
        assert!(s.complete, "{s:?}");
        assert_eq!(s.recovery_probes, 2, "{s:?}");
        assert_eq!(s.recovered_paths, 2);
        assert_eq!(net.0.stats.failure_notices, 2);
        assert_eq!(s.unavailable.len(), 2, "{:?}", s.unavailable);
        assert!(s.unavailable.contains(&Unavailable::Link(2, 5)));
        assert!(s.unavailable.contains(&Unavailable::Link(6, 7)));
        // Recovered from the switch after the loss, within about t_f of it.
        assert!(s.latency_ns < 2 * 1_500_000_000, "{s:?}");
    }

    #[test]
    fn a_recovery_probe_lost_again_is_recovered_again_and_never_twice() {
        let (mut net, plan) = net(true);
        let mut monitor = Monitor::new(recovering());
        // The probe lost on 2 → 5, then its recovery probe (which starts at 5) on 5 → 4.
        net.0.script_loss(2, 5, 1);
        net.0.script_loss(5, 4, 1);
        let s = monitor.collect(&mut net, &plan);
        assert!(s.complete, "{s:?}");
        assert_eq!(s.recovery_probes, 2, "{s:?}");
        assert_eq!(s.recovered_paths, 1);
        // The switches remember the requests they saw: the next session's probes are new to
        // them (no loop passes), and with the scripted losses spent it needs no recovery.
        let next = monitor.collect(&mut net, &plan);
        assert!(next.complete);
        assert_eq!(next.recovery_probes, 0, "{next:?}");
        assert_eq!(net.0.stats.loop_passes, 0);
    }

    #[test]
    fn a_loss_after_the_first_switch_resumes_at_the_second_sooner_when_fine_tuned() {
        let latency = |rc: RecoveryConfig| {
            let (mut net, plan) = net(true);
            let hold = rc.feedback_timeout_ns;
            net.0 = Fabric::new(
                FabricConfig {
                    recovery: true,
                    hold_ns: hold,
                    ..FabricConfig::default()
                },
                grid().0,
                &[0.0; 9],
                1,
                0,
            );
            net.0.script_loss(3, 6, 1);
            let cfg = MonitorConfig {
                recovery: Some(rc),
                ..MonitorConfig::default()
            };
            let s = Monitor::new(cfg).collect(&mut net, &plan);
            assert!(s.complete, "{s:?}");
            assert_eq!(s.recovery_probes, 1);
            s.latency_ns
        };
        let (paper, tuned) = (
            latency(RecoveryConfig::paper()),
            latency(RecoveryConfig::fine_tuned()),
        );
        assert!(
            paper > 1_500_000_000 && tuned < 600_000_000,
            "{paper} {tuned}"
        );
    }

    #[test]
    fn without_recovery_a_lost_probe_fails_the_session() {
        let (mut net, plan) = net(false);
        net.0.script_loss(2, 5, 1);
        let s = Monitor::new(MonitorConfig::default()).collect(&mut net, &plan);
        assert!(!s.complete);
        assert_eq!((s.probes, s.recovery_probes), (2, 0));
        assert_eq!(net.0.stats.probes_dropped_link, 1);
    }

    #[test]
    fn snmp_polls_every_switch_and_repeats_what_is_lost() {
        let (mut net, _) = net(false);
        let s = Monitor::new(MonitorConfig::default()).poll(&mut net, 9);
        assert!(s.complete);
        assert_eq!(s.probes, 9);
        // 12 in flight, 5 ms of agent each, 1 ms each way.
        assert!(s.latency_ns >= 7_000_000, "{s:?}");
    }

    #[test]
    fn hubs_carry_more_background_and_loss_unloads_the_far_switches() {
        let g = graph(40, 3).unwrap();
        let clean = arrivals(&g, 10_000.0, 0.0, 3);
        let mean = clean.iter().sum::<f64>() / clean.len() as f64;
        let busiest = clean.iter().cloned().fold(0.0, f64::max);
        assert!((busiest - 10_000.0).abs() < 1e-6);
        assert!(busiest > 1.5 * mean, "{mean}");
        let lossy = arrivals(&g, 10_000.0, 0.2, 3);
        assert!(lossy.iter().zip(&clean).all(|(l, c)| l <= c));
        assert!(lossy.iter().sum::<f64>() < 0.9 * clean.iter().sum::<f64>());
    }
}
