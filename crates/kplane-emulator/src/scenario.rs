//! Scripted scenarios: what is injected when, with its ground truth.

use crate::EmulatorError;
use serde_json::json;

use crate::sim::{Action, Sim};
use crate::topology::{NodeIdx, NodeKind};
use crate::traffic::{BurstProfile, Microbursts, WEB};
use kplane_p4::EntrySpec;

/// Every scenario name.
pub const SCENARIOS: &[&str] = &[
    "none",
    "microburst",
    "microburst-cache",
    "microburst-hadoop",
    "ddos",
    "port-scan",
    "link-failure",
    "routing-loop",
    "black-hole",
    "link-loss",
    "heavy-hitter",
    "flash-crowd",
    "elephants",
    "all",
    "live",
];

/// `live` (what `kplane up` runs): recurring microbursts, and a link that fails every
/// `LIVE_CYCLE` for `LIVE_DOWN` (first at `LIVE_CYCLE`), for the first day at most.
pub const LIVE_CYCLE_NS: u64 = 180_000_000_000;
pub const LIVE_DOWN_NS: u64 = 60_000_000_000;

fn entry(
    switch: u32,
    table: &str,
    action: &str,
    matches: &[(&str, String)],
    params: &[(&str, u64)],
) -> EntrySpec {
    let ranked = crate::tables::p4info()
        .table(table)
        .is_ok_and(|(_, t)| t.needs_priority());
    EntrySpec {
        switch: Some(switch),
        table: table.into(),
        priority: if ranked { 100 } else { 0 },
        matches: matches
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        action: action.into(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

/// `<host ip>/32`, the match of a rule aimed at one host.
fn host_prefix(sim: &Sim, host: NodeIdx) -> String {
    let ip = sim.topo.nodes[host].ip.map(|i| i.to_string());
    format!("{}/32", ip.unwrap_or_default())
}

/// The victim of the attack scenarios: the first host.
fn victim(sim: &Sim) -> NodeIdx {
    sim.topo.host_indices().first().copied().unwrap_or(0)
}

/// A scenario's parameters: `name:key=value,key=value` (docs/emulator.md lists them per
/// scenario). Every key given must be one the scenario reads.
#[derive(Debug, Default)]
struct Params {
    given: Vec<(String, f64)>,
    read: std::cell::RefCell<Vec<&'static str>>,
}

impl Params {
    fn parse(s: &str) -> Result<Self, EmulatorError> {
        let mut given = Vec::new();
        for kv in s.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                EmulatorError::Scenario(format!("parameter {kv:?}: not key=value"))
            })?;
            let v: f64 = v.parse().map_err(|_| {
                EmulatorError::Scenario(format!("parameter {k}: {v:?} is not a number"))
            })?;
            given.push((k.to_string(), v));
        }
        Ok(Self {
            given,
            read: Default::default(),
        })
    }

    /// `key`'s value, or `default`.
    fn get(&self, key: &'static str, default: f64) -> f64 {
        self.read.borrow_mut().push(key);
        self.given
            .iter()
            .find(|(k, _)| k == key)
            .map_or(default, |(_, v)| *v)
    }

    /// A host by its index in the host list (wrapping), or `default`.
    fn host(&self, sim: &Sim, key: &'static str, default: usize) -> NodeIdx {
        let hosts = sim.topo.host_indices();
        let i = self.get(key, default as f64).max(0.0) as usize;
        hosts.get(i % hosts.len().max(1)).copied().unwrap_or(0)
    }

    fn check_all_read(&self, scenario: &str) -> Result<(), EmulatorError> {
        let read = self.read.borrow();
        match self.given.iter().find(|(k, _)| !read.contains(&k.as_str())) {
            Some((k, _)) => Err(EmulatorError::Scenario(format!(
                "{scenario}: no parameter {k:?} (it reads {})",
                read.join(", ")
            ))),
            None => Ok(()),
        }
    }
}

/// Every host but `h`, in host-list order.
fn others(sim: &Sim, h: NodeIdx) -> Vec<NodeIdx> {
    sim.topo
        .host_indices()
        .into_iter()
        .filter(|x| *x != h)
        .collect()
}

/// The rate of a host's access link, bits/s.
fn link_rate(sim: &Sim, h: NodeIdx) -> u64 {
    sim.topo.links[sim.topo.nodes[h].ports[0].0].rate_bps
}

/// The gap between packets of `bytes` when `senders` offer `offered` bits/s together.
fn gap_ns(offered: f64, senders: usize, bytes: u64) -> u64 {
    let per = (offered as u64 / senders.max(1) as u64).max(1);
    bytes * 8 * 1_000_000_000 / per
}

/// A switch-to-switch link at `at` (0..1) along the list of them.
fn inner_link(sim: &Sim, at: f64) -> Option<usize> {
    let inner: Vec<usize> = sim
        .topo
        .links
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            sim.topo.nodes[l.a.0].kind == NodeKind::Switch
                && sim.topo.nodes[l.b.0].kind == NodeKind::Switch
        })
        .map(|(i, _)| i)
        .collect();
    inner.get((inner.len() as f64 * at) as usize).copied()
}

/// Installs `spec` on `sim` for a run of `duration` ns: `name`, `name:key=value,…`, or several
/// joined by `+` (`ddos:start=0.2+link-failure:start=0.6`).
pub fn apply(sim: &mut Sim, spec: &str, duration: u64) -> Result<(), EmulatorError> {
    for one in spec.split('+') {
        let (name, params) = one.split_once(':').unwrap_or((one, ""));
        let p = Params::parse(params)?;
        install(sim, name, &p, duration)?;
        p.check_all_read(name)?;
    }
    Ok(())
}

fn install(sim: &mut Sim, name: &str, p: &Params, duration: u64) -> Result<(), EmulatorError> {
    let at = |f: f64| (duration as f64 * f) as u64;
    match name {
        "none" => {}
        "microburst" | "microburst-web" | "microburst-cache" | "microburst-hadoop" => {
            let profile = name
                .strip_prefix("microburst-")
                .and_then(BurstProfile::by_name)
                .unwrap_or(WEB);
            let hosts = sim.topo.host_indices().len();
            let target = p.host(sim, "target", hosts.saturating_sub(1));
            sim.add_generator(
                at(p.get("start", 0.1)),
                Box::new(Microbursts {
                    profile,
                    target,
                    packet_bytes: 1_500,
                    stop_ns: at(p.get("end", 0.9)),
                }),
            );
        }
        "ddos" => {
            let v = p.host(sim, "victim", 0);
            let mut hosts = others(sim, v);
            let attackers = p.get("attackers", hosts.len() as f64).max(1.0) as usize;
            // The attackers furthest down the host list, so a changed victim keeps them apart.
            hosts = hosts.split_off(hosts.len().saturating_sub(attackers));
            let start = at(p.get("start", 0.4));
            let end = start + at(p.get("duration", 0.2));
            // Together the sources offer `rate` times the victim's link rate (default twice).
            let offered = link_rate(sim, v) as f64 * p.get("rate", 2.0);
            let gap = gap_ns(offered, hosts.len(), 512);
            let packets = (end - start) / gap.max(1);
            for (i, &h) in hosts.iter().enumerate() {
                let f = sim.flow(h, v, 17, (20_000 + i as u16, 53), packets, 512, gap);
                sim.schedule(start, Action::StartFlow(Box::new(f)));
            }
            let names: Vec<_> = hosts.iter().map(|h| sim.topo.nodes[*h].ip).collect();
            sim.schedule(start, Action::Truth(json!({"kind": "ddos_start", "victim": sim.topo.nodes[v].ip, "sources": names, "end_ns": end})));
            sim.schedule(
                end,
                Action::Truth(json!({"kind": "ddos_end", "victim": sim.topo.nodes[v].ip})),
            );
        }
        "port-scan" => {
            // Vertical (`ports` ports of one host) or, with `hosts`, horizontal: the same
            // ports on each of `hosts` hosts from the victim on (the scanner skipped).
            let hosts = sim.topo.host_indices();
            let scanner = p.host(sim, "scanner", hosts.len().saturating_sub(1));
            let first = p.get("victim", 0.0).max(0.0) as usize;
            let count = p.get("hosts", 1.0).clamp(1.0, hosts.len() as f64) as usize;
            let victims: Vec<NodeIdx> = (0..hosts.len())
                .map(|i| hosts[(first + i) % hosts.len()])
                .filter(|h| *h != scanner)
                .take(count)
                .collect();
            let start = at(p.get("start", 0.3));
            let ports = p.get("ports", 1024.0).clamp(1.0, 65_535.0) as u16;
            // One probe every `gap` ns (default 10 µs).
            let gap = (p.get("gap-us", 10.0) * 1_000.0).max(1.0) as u64;
            let mut t = start;
            for &v in &victims {
                for port in 1..=ports {
                    t += gap;
                    let f = sim.flow(scanner, v, 6, (55_555, port), 1, 64, 0);
                    sim.schedule(t, Action::StartFlow(Box::new(f)));
                }
            }
            let ips: Vec<_> = victims.iter().map(|v| sim.topo.nodes[*v].ip).collect();
            sim.schedule(start, Action::Truth(json!({"kind": "port_scan", "scanner": sim.topo.nodes[scanner].ip, "victim": ips.first(), "victims": ips, "ports": [1, ports], "end_ns": t})));
        }
        "link-failure" => {
            let l = inner_link(sim, p.get("link", 0.5).clamp(0.0, 0.999))
                .ok_or_else(|| EmulatorError::Scenario("no switch-to-switch link".into()))?;
            let link = &sim.topo.links[l];
            let (a, b) = (sim.topo.nodes[link.a.0].id, sim.topo.nodes[link.b.0].id);
            let start = at(p.get("start", 1.0 / 3.0));
            let end = start + at(p.get("duration", 1.0 / 3.0));
            sim.schedule(start, Action::LinkDown(l));
            sim.schedule(
                start,
                Action::Truth(json!({"kind": "link_down", "link": [a, b], "end_ns": end})),
            );
            sim.schedule(end, Action::LinkUp(l));
            sim.schedule(
                end,
                Action::Truth(json!({"kind": "link_up", "link": [a, b]})),
            );
        }
        "link-loss" => {
            let l = inner_link(sim, p.get("link", 0.5).clamp(0.0, 0.999))
                .ok_or_else(|| EmulatorError::Scenario("no switch-to-switch link".into()))?;
            let loss = p.get("loss", 0.6).clamp(0.0, 1.0);
            let link = &sim.topo.links[l];
            let (a, b) = (sim.topo.nodes[link.a.0].id, sim.topo.nodes[link.b.0].id);
            let before = link.loss;
            let start = at(p.get("start", 1.0 / 3.0));
            let end = start + at(p.get("duration", 1.0 / 3.0));
            sim.schedule(start, Action::LinkLoss(l, loss));
            sim.schedule(
                start,
                Action::Truth(
                    json!({"kind": "link_loss", "link": [a, b], "loss": loss, "end_ns": end}),
                ),
            );
            sim.schedule(end, Action::LinkLoss(l, before));
            sim.schedule(
                end,
                Action::Truth(json!({"kind": "link_loss_end", "link": [a, b]})),
            );
        }
        "routing-loop" => {
            // Between the looping flow's edge switch and its first uplink neighbour, so the
            // flow always meets it (and it stays apart from the link-failure scenario's link).
            let v = victim(sim);
            let hosts = sim.topo.host_indices();
            let src = hosts[hosts.len() / 4];
            let edge = sim.topo.nodes[src].ports[0].1;
            let (link, up, up_port) = sim.topo.nodes[edge]
                .ports
                .iter()
                .find(|(_, peer, _)| sim.topo.nodes[*peer].kind == NodeKind::Switch)
                .copied()
                .ok_or_else(|| {
                    EmulatorError::Scenario("the source's edge switch has no uplink".into())
                })?;
            let edge_port = sim.topo.nodes[edge]
                .ports
                .iter()
                .position(|p| p.0 == link)
                .unwrap_or(0) as u64;
            let (a, b) = (sim.topo.nodes[edge].id, sim.topo.nodes[up].id);
            let dst = host_prefix(sim, v);
            let (start, end) = (at(0.5), at(0.6));
            for e in [
                entry(
                    a,
                    "ipv4_forward",
                    "set_egress",
                    &[("dst_addr", dst.clone())],
                    &[("port", edge_port)],
                ),
                entry(
                    b,
                    "ipv4_forward",
                    "set_egress",
                    &[("dst_addr", dst.clone())],
                    &[("port", up_port.into())],
                ),
            ] {
                sim.schedule(start, Action::Insert(e.clone()));
                sim.schedule(end, Action::Remove(e));
            }
            let f = sim.flow(
                src,
                v,
                17,
                (30_000, 9_000),
                (end - start) / 100_000,
                1_000,
                100_000,
            );
            sim.schedule(start, Action::StartFlow(Box::new(f)));
            sim.schedule(start, Action::Truth(json!({"kind": "routing_loop_start", "switches": [a, b], "dst": dst, "end_ns": end})));
            sim.schedule(
                end,
                Action::Truth(json!({"kind": "routing_loop_end", "switches": [a, b]})),
            );
        }
        "black-hole" => {
            let v = victim(sim);
            let edge = sim.topo.nodes[v].ports[0].1;
            let id = sim.topo.nodes[edge].id;
            let dst = host_prefix(sim, v);
            let (start, end) = (at(0.7), at(0.8));
            let acl = entry(
                id,
                "drop_acl",
                "acl_drop",
                &[("dst_addr", dst.clone())],
                &[],
            );
            sim.schedule(start, Action::Insert(acl.clone()));
            sim.schedule(end, Action::Remove(acl));
            sim.schedule(
                start,
                Action::Truth(
                    json!({"kind": "black_hole_start", "switch": id, "dst": dst, "end_ns": end}),
                ),
            );
            sim.schedule(
                end,
                Action::Truth(json!({"kind": "black_hole_end", "switch": id})),
            );
        }
        "flash-crowd" => {
            // Many real clients fetching from one host at once (a release, a failover): TCP
            // to port 443 in full-size packets, each client a few flows one after another,
            // together `rate` times the target's link rate. Not an attack: what must not be
            // typed as one or blocked.
            let target = p.host(sim, "target", 0);
            let mut clients = others(sim, target);
            let n = p.get("clients", clients.len() as f64).max(1.0) as usize;
            clients.truncate(n);
            let start = at(p.get("start", 0.4));
            let end = start + at(p.get("duration", 0.2));
            let offered = link_rate(sim, target) as f64 * p.get("rate", 1.0);
            let gap = gap_ns(offered, clients.len(), 1_000);
            // Four flows per client, back to back over the span.
            let span = (end - start) / 4;
            for (i, &c) in clients.iter().enumerate() {
                for k in 0..4u64 {
                    let port = 45_000 + (i * 4) as u16 + k as u16;
                    let f = sim.flow(c, target, 6, (port, 443), span / gap.max(1), 1_000, gap);
                    sim.schedule(start + k * span, Action::StartFlow(Box::new(f)));
                }
            }
            let ips: Vec<_> = clients.iter().map(|h| sim.topo.nodes[*h].ip).collect();
            sim.schedule(start, Action::Truth(json!({"kind": "flash_crowd", "target": sim.topo.nodes[target].ip, "clients": ips, "end_ns": end})));
        }
        "heavy-hitter" => {
            // One host sends `flows` long flows to the other hosts in turn, together `rate`
            // times its link rate: a skewed workload (one source, much of the traffic).
            let h = p.host(sim, "source", 0);
            let to = others(sim, h);
            let flows = p.get("flows", 64.0).max(1.0) as usize;
            let start = at(p.get("start", 0.0));
            let end = at(p.get("end", 1.0)).max(start + 1);
            let gap = gap_ns(link_rate(sim, h) as f64 * p.get("rate", 0.5), flows, 1_000);
            let packets = (end - start) / gap.max(1);
            for i in 0..flows {
                let dst = to[i % to.len().max(1)];
                let f = sim.flow(h, dst, 6, (40_000 + i as u16, 443), packets, 1_000, gap);
                sim.schedule(start, Action::StartFlow(Box::new(f)));
            }
            sim.schedule(start, Action::Truth(json!({"kind": "heavy_hitter_start", "source": sim.topo.nodes[h].ip, "flows": flows, "end_ns": end})));
        }
        "elephants" => {
            // Long flows from the first hosts to the last ones (across the fabric), each
            // growing from `from` to `to` times its source's link rate between `start` and
            // `end`, swung by a sine of `period` seconds and depth `swing`: load that grows
            // and recurs, where hashing puts some of them on one link and leaves others idle.
            // Each second is a burst of its own rate on the flow's 5-tuple (one path).
            let hosts = sim.topo.host_indices();
            let n = (p.get("flows", 4.0).max(1.0) as usize).min(hosts.len() / 2);
            let (start, end) = (at(p.get("start", 0.1)), at(p.get("end", 1.0)));
            let (from, to) = (p.get("from", 0.1), p.get("to", 0.6));
            let (period, swing) = (p.get("period", 60.0).max(1.0), p.get("swing", 0.3));
            // Source ports from the seed: which flows share a link differs between runs.
            let base = 30_000 + (sim.cfg.seed % 1_000) as u16 * 8;
            const SECOND: u64 = 1_000_000_000;
            for i in 0..n {
                let (src, dst) = (hosts[i], hosts[hosts.len() - n + i]);
                let rate = link_rate(sim, src) as f64;
                let mut t = start;
                while t < end {
                    let progress = (t - start) as f64 / (end - start).max(1) as f64;
                    let phase = 2.0 * std::f64::consts::PI * (t as f64 / 1e9) / period;
                    let share = (from + (to - from) * progress) * (1.0 + swing * phase.sin());
                    let gap = gap_ns(rate * share.max(0.001), 1, 1_000);
                    let span = SECOND.min(end - t);
                    let f = sim.flow(
                        src,
                        dst,
                        6,
                        (base + i as u16, 5001),
                        span / gap.max(1),
                        1_000,
                        gap,
                    );
                    sim.schedule(t, Action::StartFlow(Box::new(f)));
                    t += SECOND;
                }
            }
            let pairs: Vec<_> = (0..n)
                .map(|i| {
                    json!([
                        sim.topo.nodes[hosts[i]].ip,
                        sim.topo.nodes[hosts[hosts.len() - n + i]].ip
                    ])
                })
                .collect();
            sim.schedule(
                start,
                Action::Truth(json!({"kind": "elephants", "pairs": pairs, "end_ns": end})),
            );
        }
        "live" => {
            let target = *sim
                .topo
                .host_indices()
                .last()
                .ok_or_else(|| EmulatorError::Scenario("no hosts".into()))?;
            sim.add_generator(
                5_000_000_000,
                Box::new(Microbursts {
                    profile: WEB,
                    target,
                    packet_bytes: 1_500,
                    stop_ns: duration,
                }),
            );
            let l = inner_link(sim, 0.5)
                .ok_or_else(|| EmulatorError::Scenario("no switch-to-switch link".into()))?;
            let link = &sim.topo.links[l];
            let (a, b) = (sim.topo.nodes[link.a.0].id, sim.topo.nodes[link.b.0].id);
            let horizon = duration.min(86_400_000_000_000);
            let mut t = LIVE_CYCLE_NS;
            while t + LIVE_DOWN_NS < horizon {
                sim.schedule(t, Action::LinkDown(l));
                sim.schedule(
                    t,
                    Action::Truth(json!({"kind": "link_down", "link": [a, b]})),
                );
                sim.schedule(t + LIVE_DOWN_NS, Action::LinkUp(l));
                sim.schedule(
                    t + LIVE_DOWN_NS,
                    Action::Truth(json!({"kind": "link_up", "link": [a, b]})),
                );
                t += LIVE_CYCLE_NS;
            }
        }
        "all" => {
            for s in [
                "microburst",
                "ddos",
                "port-scan",
                "link-failure",
                "routing-loop",
                "black-hole",
            ] {
                install(sim, s, &Params::default(), duration)?;
            }
        }
        other => {
            return Err(EmulatorError::Scenario(format!(
                "unknown scenario {other:?} (one of {})",
                SCENARIOS.join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimConfig;
    use crate::topology::{LinkSpec, Topology};

    fn sim() -> Sim {
        Sim::new(
            Topology::parse("fat-tree:4", LinkSpec::default()).unwrap(),
            SimConfig::default(),
        )
    }

    fn truth(s: &mut Sim, kind: &str) -> serde_json::Value {
        s.run_until(1_000);
        s.truth
            .events
            .iter()
            .find(|e| e["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in the ground truth"))
    }

    #[test]
    fn parameters_change_who_is_attacked_by_whom_and_when() {
        let mut s = sim();
        apply(
            &mut s,
            "ddos:victim=5,attackers=3,start=0.5,duration=0.1",
            1_000,
        )
        .unwrap();
        let t = truth(&mut s, "ddos_start");
        let hosts = s.topo.host_indices();
        assert_eq!(t["victim"], json!(s.topo.nodes[hosts[5]].ip));
        assert_eq!(t["sources"].as_array().unwrap().len(), 3);
        assert_eq!(t["end_ns"], 600);
        let mut d = sim();
        apply(&mut d, "ddos", 1_000).unwrap();
        assert_eq!(
            truth(&mut d, "ddos_start")["victim"],
            json!(s.topo.nodes[hosts[0]].ip)
        );
    }

    #[test]
    fn unknown_or_malformed_parameters_are_refused_by_name() {
        let e = apply(&mut sim(), "ddos:victum=2", 1_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("victum") && e.contains("victim"), "{e}");
        let e = apply(&mut sim(), "port-scan:ports=many", 1_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ports"), "{e}");
        let e = apply(&mut sim(), "link-failure:5", 1_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key=value"), "{e}");
        let mut s = sim();
        apply(
            &mut s,
            "ddos:start=0.1,duration=0.1+port-scan:start=0.5",
            1_000,
        )
        .unwrap();
        truth(&mut s, "ddos_start");
        truth(&mut s, "port_scan");
    }

    #[test]
    fn a_horizontal_scan_probes_several_hosts_and_a_flash_crowd_names_its_clients() {
        let mut s = sim();
        apply(
            &mut s,
            "port-scan:victim=2,scanner=3,hosts=4,ports=5,gap-us=1,start=0",
            1_000_000,
        )
        .unwrap();
        let t = truth(&mut s, "port_scan");
        let hosts = s.topo.host_indices();
        let ip = |i: usize| json!(s.topo.nodes[hosts[i]].ip);
        // Four hosts from the victim on, the scanner skipped; 20 probes 1 µs apart.
        assert_eq!(t["victims"], json!([ip(2), ip(4), ip(5), ip(6)]));
        assert_eq!(t["victim"], ip(2));
        assert_eq!(t["end_ns"], 20_000);

        let mut c = sim();
        apply(&mut c, "flash-crowd:target=1,clients=5,start=0", 1_000_000).unwrap();
        let t = truth(&mut c, "flash_crowd");
        assert_eq!(t["target"], ip(1));
        assert_eq!(t["clients"].as_array().unwrap().len(), 5);
        assert!(!t["clients"].as_array().unwrap().contains(&ip(1)));
    }
}
