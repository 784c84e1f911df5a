//! Intents → table entries of `p4/kplane_int.p4`, typed by p4c's P4Info, per switch; and the
//! checks that refuse an intent with an explanation naming the other intent: overlapping
//! matches with different actions at one priority, an entry another intent owns, a table
//! that would overflow, a reroute that would loop or black-hole traffic.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use kplane_model::detection::{self, Protocol};

use crate::error::ControlError;
use kplane_p4::{Entry, EntrySpec, P4Info};

use super::model::{
    Algorithm, Avoid, Detection, Encapsulation, FlowMatch, IntentKind, IntentSpec, ipv4_prefix,
};
use kplane_southbound::Topology;

/// An intent's entries: (switch, entry).
pub type Entries = Vec<(u32, Entry)>;

/// Compiles `spec` against the fabric. The error (422) names the field or the switch at
/// fault.
pub fn compile(info: &P4Info, spec: &IntentSpec, topo: &Topology) -> Result<Entries, ControlError> {
    entries_of(info, spec, topo).map_err(ControlError::Unprocessable)
}

fn entries_of(info: &P4Info, spec: &IntentSpec, topo: &Topology) -> Result<Entries, String> {
    let problems = spec.check();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let scope = |default: Vec<u32>| -> Result<Vec<u32>, String> {
        match &spec.switches {
            Some(list) => {
                for s in list {
                    if topo.switch(*s).is_none() {
                        return Err(format!(
                            "switches: {s} is not a switch of the fabric (known: {})",
                            known(topo)
                        ));
                    }
                }
                Ok(list.clone())
            }
            None if default.is_empty() => {
                Err("switches: the fabric has no edge switch to derive the scope from".into())
            }
            None => Ok(default),
        }
    };
    let mut specs: Vec<(u32, EntrySpec)> = Vec::new();
    let ranked = |table: &str, action: &str, flows: &FlowMatch, params: &[(&str, u64)]| EntrySpec {
        switch: None,
        table: table.into(),
        priority: spec.priority,
        matches: flow_keys(flows),
        action: action.into(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    match &spec.kind {
        IntentKind::Monitor {
            flows,
            instructions,
            max_hops,
            int_label,
            encapsulation,
            detection,
        } => {
            let source = match encapsulation {
                Encapsulation::IntMd => "int_source",
                Encapsulation::Kdn => "int_source_kdn",
            };
            for s in scope(topo.edge())? {
                let watch = if *int_label {
                    ranked(
                        "int_watchlist",
                        "int_label_specific",
                        flows,
                        &[("max_hop", u64::from(*max_hops))],
                    )
                } else {
                    ranked(
                        "int_watchlist",
                        source,
                        flows,
                        &[
                            ("instruction_bitmap", u64::from(*instructions)),
                            ("max_hop", u64::from(*max_hops)),
                        ],
                    )
                };
                specs.push((s, watch));
                if let Some(d) = detection {
                    specs.push((s, detection_entry(spec, flows, d)));
                }
            }
        }
        IntentKind::Block { flows } => {
            for s in scope(topo.edge())? {
                specs.push((s, ranked("drop_acl", "acl_drop", flows, &[])));
            }
        }
        IntentKind::Tune { flows, detection } => {
            for s in scope(topo.edge())? {
                specs.push((s, detection_entry(spec, flows, detection)));
            }
        }
        IntentKind::IntLabel {
            ports,
            interval,
            algorithm,
            function,
            max_hops,
            rest,
        } => {
            let params = [
                ("interval_ns", interval.as_nanos() as u64),
                ("max_hop", u64::from(*max_hops)),
                ("algorithm", algorithm.code()),
                ("function", function.code()),
                ("rest_ns", rest.as_nanos() as u64),
            ];
            for s in scope(topo.switches.iter().map(|n| n.id).collect())? {
                for port in ports.clone().unwrap_or_else(|| topo.ports(s)) {
                    specs.push((
                        s,
                        port_entry("label_config", "set_labelling", port, &params),
                    ));
                }
            }
        }
        IntentKind::LabelFrequency { ports, shift } => {
            let params = [("shift", u64::from(*shift))];
            for s in scope(topo.switches.iter().map(|n| n.id).collect())? {
                for &port in ports {
                    specs.push((
                        s,
                        port_entry("label_frequency", "set_label_shift", port, &params),
                    ));
                }
            }
        }
        // A plan, not entries: the switches' scope is checked, nothing is written.
        IntentKind::ProbePlan { .. } => {
            scope(topo.switches.iter().map(|n| n.id).collect())?;
        }
        IntentKind::Reroute { dst, avoid } => {
            let ports = reroute_ports(topo, dst, avoid)?;
            let only = spec
                .switches
                .as_ref()
                .map(|l| l.iter().copied().collect::<BTreeSet<_>>());
            for (s, port) in ports {
                if only.as_ref().is_none_or(|o| o.contains(&s)) {
                    specs.push((
                        s,
                        EntrySpec {
                            switch: None,
                            table: "ipv4_forward".into(),
                            priority: 0,
                            matches: [("dst_addr".to_string(), dst.clone())].into(),
                            action: "set_egress".into(),
                            params: [("port".to_string(), u64::from(port))].into(),
                        },
                    ));
                }
            }
        }
    }
    specs
        .into_iter()
        .map(|(s, e)| {
            Entry::new(info, &e)
                .map(|mut e| {
                    e.switch = Some(s);
                    (s, e)
                })
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// An entry of a table keyed by the egress port (exact, no priority).
fn port_entry(table: &str, action: &str, port: u32, params: &[(&str, u64)]) -> EntrySpec {
    EntrySpec {
        switch: None,
        table: table.into(),
        priority: 0,
        matches: [("egress_port".to_string(), port.to_string())].into(),
        action: action.into(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn known(topo: &Topology) -> String {
    let ids: Vec<String> = topo.switches.iter().map(|s| s.id.to_string()).collect();
    ids.join(", ")
}

fn flow_keys(f: &FlowMatch) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(v) = &f.src {
        m.insert("src_addr".into(), v.clone());
    }
    if let Some(v) = &f.dst {
        m.insert("dst_addr".into(), v.clone());
    }
    if let Some(p) = f
        .protocol
        .as_deref()
        .and_then(|p| p.parse::<Protocol>().ok())
    {
        m.insert("protocol".into(), p.to_string());
    }
    if let Some(v) = &f.src_port {
        m.insert("src_port".into(), v.clone());
    }
    if let Some(v) = &f.dst_port {
        m.insert("dst_port".into(), v.clone());
    }
    m
}

fn detection_entry(spec: &IntentSpec, flows: &FlowMatch, d: &Detection) -> EntrySpec {
    // The checked measurement has a P4 code.
    let measurement = d.measurement.p4_code().unwrap_or(0);
    let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
    };
    let params: Vec<(String, u64)> = match d.algorithm {
        Algorithm::Noop => vec![],
        Algorithm::PerHop | Algorithm::PerFlow => named(&[
            ("measurement", measurement),
            ("threshold", d.threshold.into()),
        ]),
        Algorithm::Ewma => named(&[
            ("measurement", measurement),
            ("threshold", d.threshold.into()),
            ("weight_q8", d.weight_q8()),
        ]),
        Algorithm::Complex => detection::LITERAL_PARAMS
            .iter()
            .enumerate()
            .flat_map(|(i, [pm, pop, pt])| {
                let (m, op, t) = d.when.get(i).map(|c| c.literal()).unwrap_or_default();
                named(&[(pm, m), (pop, op), (pt, t)])
            })
            .collect(),
    };
    let action = d.algorithm.action();
    EntrySpec {
        switch: None,
        table: "int_sink_detection".into(),
        priority: spec.priority,
        matches: flow_keys(flows),
        action: action.into(),
        params: params.into_iter().collect(),
    }
}

/// Switch → (neighbour, port) over links that are up, without what `skip` avoids.
fn adjacency(topo: &Topology, skip: &Avoid) -> HashMap<u32, Vec<(u32, u32)>> {
    let mut adj: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    for &((a, pa), (b, pb), up) in &topo.links {
        let skipped = skip.switch.is_some_and(|n| n == a || n == b)
            || skip
                .all_links()
                .any(|[x, y]| (x, y) == (a, b) || (x, y) == (b, a));
        if up && !skipped {
            adj.entry(a).or_default().push((b, pa));
            adj.entry(b).or_default().push((a, pb));
        }
    }
    for v in adj.values_mut() {
        v.sort_by_key(|(_, p)| *p);
    }
    adj
}

/// Hop distance of every switch to `dst`.
fn distances(adj: &HashMap<u32, Vec<(u32, u32)>>, dst: u32) -> HashMap<u32, u32> {
    let mut d = HashMap::from([(dst, 0)]);
    let mut q = VecDeque::from([dst]);
    while let Some(n) = q.pop_front() {
        for (m, _) in adj.get(&n).into_iter().flatten() {
            if !d.contains_key(m) {
                d.insert(*m, d[&n] + 1);
                q.push_back(*m);
            }
        }
    }
    d
}

/// The switch the hosts of `dst` sit behind.
fn destination(topo: &Topology, dst: &str) -> Result<u32, String> {
    let (net, len) = ipv4_prefix(dst).ok_or_else(|| format!("dst: {dst:?} is not a prefix"))?;
    let mask = |l: u32| if l == 0 { 0 } else { u32::MAX << (32 - l) };
    let behind: BTreeSet<u32> = topo
        .switches
        .iter()
        .filter(|s| {
            s.hosts.iter().any(|&(hnet, hlen, _)| {
                let l = len.min(hlen);
                hnet & mask(l) == net & mask(l)
            })
        })
        .map(|s| s.id)
        .collect();
    match behind.len() {
        1 => Ok(*behind.iter().next().unwrap_or(&0)),
        0 => Err(format!("dst: no host of the fabric is in {dst}")),
        n => Err(format!(
            "dst: {dst} spans hosts behind {n} switches ({behind:?}); give a prefix behind one switch"
        )),
    }
}

/// The fabric's host prefixes (`a.b.c.d/len`) whose shortest paths from some switch cross
/// the link `[a, b]` or pass through switch `via` (not the one the prefix is behind): what a
/// failure there cuts off until it is routed around.
pub(crate) fn prefixes_through(
    topo: &Topology,
    link: Option<[u32; 2]>,
    via: Option<u32>,
) -> Vec<String> {
    let adj = adjacency(topo, &Avoid::default());
    let mut out = Vec::new();
    for s in &topo.switches {
        let dist = distances(&adj, s.id);
        let crosses = match (link, via) {
            (Some([a, b]), _) => match (dist.get(&a), dist.get(&b)) {
                (Some(da), Some(db)) => da.abs_diff(*db) == 1,
                _ => false,
            },
            // A switch on some shortest path: a neighbour one step nearer, and a switch
            // beyond it that goes through it.
            (None, Some(v)) => {
                v != s.id
                    && dist.get(&v).is_some_and(|dv| {
                        adj.iter().any(|(m, peers)| {
                            dist.get(m) == Some(&(dv + 1)) && peers.iter().any(|(p, _)| *p == v)
                        })
                    })
            }
            (None, None) => false,
        };
        if crosses {
            out.extend(
                s.hosts
                    .iter()
                    .map(|&(net, len, _)| format!("{}/{len}", std::net::Ipv4Addr::from(net))),
            );
        }
    }
    out
}

/// Per switch, the port towards `dst` on a shortest path that avoids what `avoid` names.
fn reroute_ports(topo: &Topology, dst: &str, avoid: &Avoid) -> Result<Vec<(u32, u32)>, String> {
    let target = destination(topo, dst)?;
    if let Some(n) = avoid.switch {
        if topo.switch(n).is_none() {
            return Err(format!(
                "avoid.switch: {n} is not a switch of the fabric (known: {})",
                known(topo)
            ));
        }
        if n == target {
            return Err(format!(
                "black hole: switch {n} is where {dst} is attached; avoiding it leaves no path"
            ));
        }
    }
    if let Some([a, b]) = avoid.all_links().find(|&[a, b]| {
        !topo
            .links
            .iter()
            .any(|&((x, _), (y, _), _)| (x, y) == (a, b) || (x, y) == (b, a))
    }) {
        return Err(format!(
            "avoid: there is no link between switches {a} and {b}"
        ));
    }
    let all = distances(&adjacency(topo, &Avoid::default()), target);
    let adj = adjacency(topo, avoid);
    let dist = distances(&adj, target);
    let mut out = Vec::new();
    for s in &topo.switches {
        if Some(s.id) == avoid.switch || s.id == target {
            continue;
        }
        match dist.get(&s.id) {
            Some(d) => {
                let port = adj[&s.id]
                    .iter()
                    .find(|(m, _)| dist.get(m) == Some(&(d - 1)))
                    .map(|(_, p)| *p);
                if let Some(p) = port {
                    out.push((s.id, p));
                }
            }
            None if all.contains_key(&s.id) => {
                return Err(format!(
                    "black hole: switch {} would have no path to {dst} without {avoid}",
                    s.id
                ));
            }
            None => {}
        }
    }
    Ok(out)
}

/// The switches a packet entering at switch `from` crosses towards `dst` once a reroute
/// around `avoid` is in place (`from` first, `dst`'s switch last): where the reroute puts
/// the flows it moves.
pub(crate) fn reroute_path(
    topo: &Topology,
    dst: &str,
    avoid: &Avoid,
    from: u32,
) -> Result<Vec<u32>, String> {
    let target = destination(topo, dst)?;
    let ports: HashMap<u32, u32> = reroute_ports(topo, dst, avoid)?.into_iter().collect();
    let mut path = vec![from];
    let mut at = from;
    while at != target && path.len() <= topo.switches.len() {
        let port = *ports
            .get(&at)
            .ok_or_else(|| format!("switch {at} has no path to {dst} around {avoid}"))?;
        at = topo
            .peer(at, port)
            .ok_or_else(|| format!("switch {at} port {port} leads to no switch"))?;
        path.push(at);
    }
    Ok(path)
}

/// Who owns what on which switch: the entries of accepted intents, for conflict checks.
#[derive(Debug, Default, Clone)]
pub struct Index {
    slots: HashMap<(u32, usize), Vec<(String, Entry)>>,
}

impl Index {
    pub fn add(&mut self, id: &str, entries: &Entries) {
        for (s, e) in entries {
            self.slots
                .entry((*s, e.key.table))
                .or_default()
                .push((id.to_string(), e.clone()));
        }
    }

    /// Refuses `entries` (of intent `id`) when they clash with another intent's or would not
    /// fit (409); the message names the other intent, the switch and the table.
    pub fn check(&self, info: &P4Info, id: &str, entries: &Entries) -> Result<(), ControlError> {
        self.clashes(info, id, entries)
            .map_err(ControlError::Conflict)
    }

    fn clashes(&self, info: &P4Info, id: &str, entries: &Entries) -> Result<(), String> {
        let mut adding: HashMap<(u32, usize), usize> = HashMap::new();
        for (s, e) in entries {
            let table = &info.tables[e.key.table];
            let slot = self.slots.get(&(*s, e.key.table));
            for (other, o) in slot.into_iter().flatten() {
                if other == id {
                    continue;
                }
                if o.key == e.key {
                    return Err(format!(
                        "conflict with intent {other}: it already owns this {} entry on switch {s} (same match and priority)",
                        table.name
                    ));
                }
                let same_action = o.action == e.action && o.params == e.params;
                if o.key.priority == e.key.priority
                    && table.needs_priority()
                    && !same_action
                    && o.overlaps(info, e)
                {
                    return Err(format!(
                        "conflict with intent {other}: overlapping {} matches on switch {s} at priority {} with a different action ({} vs {}); give one a different priority",
                        table.name,
                        e.key.priority,
                        info.actions[e.action].name,
                        info.actions[o.action].name
                    ));
                }
            }
            *adding.entry((*s, e.key.table)).or_default() += 1;
        }
        for ((s, t), n) in adding {
            let have = self
                .slots
                .get(&(s, t))
                .map_or(0, |v| v.iter().filter(|(o, _)| o != id).count());
            let size = info.tables[t].size;
            if size > 0 && (have + n) as u64 > size {
                return Err(format!(
                    "table {} on switch {s} would hold {} entries; it holds {size}",
                    info.tables[t].name,
                    have + n
                ));
            }
        }
        Ok(())
    }

    /// Refuses reroute entries that, with the other intents' forwarding entries, would send
    /// traffic towards `dst` around a loop (409).
    pub fn check_loops(
        &self,
        info: &P4Info,
        id: &str,
        entries: &Entries,
        topo: &Topology,
        dst: &str,
    ) -> Result<(), ControlError> {
        self.loops(info, id, entries, topo, dst)
            .map_err(ControlError::Conflict)
    }

    fn loops(
        &self,
        info: &P4Info,
        id: &str,
        entries: &Entries,
        topo: &Topology,
        dst: &str,
    ) -> Result<(), String> {
        let Ok(target) = destination(topo, dst) else {
            return Ok(());
        };
        let Some((addr, _)) = ipv4_prefix(dst) else {
            return Ok(());
        };
        let Ok((fwd, _)) = info.table("ipv4_forward") else {
            return Ok(());
        };
        let adj = adjacency(topo, &Avoid::default());
        let dist = distances(&adj, target);
        let peer = |s: u32, port: u32| {
            adj.get(&s)
                .and_then(|v| v.iter().find(|(_, p)| *p == port))
                .map(|(m, _)| *m)
        };
        // The winning forwarding entry at a switch: longest prefix among every intent's.
        let next = |s: u32| -> Option<(u32, String)> {
            let mine = entries
                .iter()
                .filter(|(x, _)| *x == s)
                .map(|(_, e)| (id.to_string(), e));
            let theirs = self
                .slots
                .get(&(s, fwd))
                .into_iter()
                .flatten()
                .filter(|(o, _)| o != id)
                .map(|(o, e)| (o.clone(), e));
            mine.chain(theirs)
                .filter(|(_, e)| e.matches(info, &[u64::from(addr)]))
                .max_by_key(|(_, e)| e.specificity(info))
                .and_then(|(o, e)| peer(s, e.param(info, "port") as u32).map(|m| (m, o)))
        };
        for start in topo.switches.iter().map(|s| s.id) {
            let (mut at, mut seen, mut owners) = (start, BTreeSet::new(), BTreeSet::new());
            let mut looped = false;
            while at != target {
                if !seen.insert(at) {
                    looped = true;
                    break;
                }
                let step = match next(at) {
                    Some((m, o)) => {
                        owners.insert(o);
                        Some(m)
                    }
                    // ECMP: a neighbour one hop closer.
                    None => adj.get(&at).and_then(|v| {
                        v.iter()
                            .find(|(m, _)| {
                                dist.get(m)
                                    .is_some_and(|d| Some(d + 1) == dist.get(&at).copied())
                            })
                            .map(|(m, _)| *m)
                    }),
                };
                match step {
                    Some(m) => at = m,
                    None => break,
                }
            }
            if looped {
                owners.remove(id);
                return Err(format!(
                    "loop: traffic towards {dst} from switch {start} would cycle through {seen:?}{}",
                    if owners.is_empty() {
                        String::new()
                    } else {
                        format!(" with the forwarding of intent(s) {owners:?}")
                    }
                ));
            }
        }
        Ok(())
    }
}
