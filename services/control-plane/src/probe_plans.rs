//! `GET /v1/probe-plans` (viewer): each active `probe-plan` intent's probes over the fabric
//! as the drivers report it now — switches and the links that are up — so a failed link or
//! switch changes the plan at the next request (gpint-reliable-int-monitoring §III;
//! docs/gpint.md). Per probe: its source switch, its source-routing stack (the next port at
//! each switch) and each switch's measurement range.
//!
//! `POST /v1/probe-plans/{intent}/status` (operator): what the monitor's latest session
//! found — links and switches unavailable, links its probes crossed (available), links
//! congested. An unavailable link or switch stays so until a probe crosses it again; the
//! plan leaves it out for `probe-recheck` (`[intent-api.intents]`, 30 s) after it was last
//! found, then plans it again to check it. Each newly unavailable one is answered with `reroute` recommendations for the host
//! prefixes whose shortest paths cross it (submitted under the recommendation policy and
//! verified like any intent); once a probe crosses it again, those reroutes are withdrawn.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::ControlError;
use crate::intents::compile::prefixes_through;
use crate::intents::model::{Avoid, IntentKind, IntentSpec, Origin, ProbeMeasure};
use crate::routes::Routes;
use kplane_runtime::auth::{Auth, Identity, Role, require};
use kplane_southbound::Topology;

/// The owner of the reroutes that answer the monitor's findings.
pub const OWNER: &str = "probe-monitor";

pub(crate) fn router(auth: Auth) -> Router<Routes> {
    let viewer = Router::new()
        .route("/v1/probe-plans", get(plans))
        .route_layer(axum::middleware::from_fn_with_state(
            (auth.clone(), Role::Viewer),
            require,
        ));
    let operator = Router::new()
        .route("/v1/probe-plans/{intent}/status", post(status))
        .route_layer(axum::middleware::from_fn_with_state(
            (auth, Role::Operator),
            require,
        ));
    viewer.merge(operator)
}

/// Where the monitor found a failure: `{"link": [a, b]}` or `{"switch": s}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unavailable {
    #[serde(default)]
    link: Option<[u32; 2]>,
    #[serde(default)]
    switch: Option<u32>,
}

impl Unavailable {
    /// The same link either way round.
    fn normal(self) -> Self {
        Self {
            link: self.link.map(|[a, b]| [a.min(b), a.max(b)]),
            switch: self.switch,
        }
    }
    /// What a reroute avoids.
    fn avoided(a: &Avoid) -> Self {
        Self {
            link: a.link,
            switch: a.switch,
        }
        .normal()
    }
    fn to_json(self) -> Value {
        match (self.link, self.switch) {
            (Some(l), _) => json!({ "link": l }),
            (_, s) => json!({ "switch": s }),
        }
    }
}

/// A link whose queue the probes found deep: `{"link": [a, b], "queue_depth": n}` (the queue
/// of a's port towards b).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Congested {
    link: [u32; 2],
    queue_depth: u32,
}

/// `POST /v1/probe-plans/{intent}/status`'s body: one session's findings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeStatus {
    /// The monitor's session number.
    #[serde(default)]
    session: u64,
    #[serde(default)]
    unavailable: Vec<Unavailable>,
    /// Links the session's probes crossed: found available again if they were not.
    #[serde(default)]
    available: Vec<Unavailable>,
    #[serde(default)]
    congested: Vec<Congested>,
}

/// What the monitor has found about one probe-plan intent's fabric.
#[derive(Clone, Debug, Default)]
pub(crate) struct Found {
    /// Unavailable links and switches, and when a session last found each.
    unavailable: BTreeMap<Unavailable, std::time::Instant>,
    /// The latest session's congested links.
    congested: Vec<Congested>,
}

impl Found {
    /// Those found within `recent` (all with `None`).
    fn unavailable(&self, recent: Option<std::time::Duration>) -> Vec<Unavailable> {
        self.unavailable
            .iter()
            .filter(|(_, at)| recent.is_none_or(|r| at.elapsed() < r))
            .map(|(u, _)| *u)
            .collect()
    }
}

/// Per probe-plan intent, what its monitor found.
pub(crate) type Findings = Arc<Mutex<BTreeMap<String, Found>>>;

async fn plans(State(s): State<Routes>) -> Json<Value> {
    let topo = s.intents.topology().await;
    let recheck = s.intents.cfg.probe_recheck;
    let findings = s.probe_findings.lock().await.clone();
    let plans: Vec<Value> = s
        .intents
        .list(None)
        .await
        .into_iter()
        .filter(|i| i.state.installed())
        .filter_map(|i| match &i.spec.kind {
            IntentKind::ProbePlan { planner, measure } => {
                let found = findings.get(&i.id).cloned().unwrap_or_default();
                let mut v = plan(
                    &without(&topo, &found.unavailable(Some(recheck))),
                    i.spec.switches.as_deref(),
                    planner,
                    *measure,
                );
                v["intent"] = json!(i.id);
                v["links"] = link_status(&topo, &found);
                Some(v)
            }
            _ => None,
        })
        .collect();
    Json(json!({ "plans": plans }))
}

/// `topo` with the links the monitor found unavailable, and every link of a switch it found
/// unavailable, down.
fn without(topo: &Topology, unavailable: &[Unavailable]) -> Topology {
    let mut t = topo.clone();
    for ((a, _), (b, _), up) in &mut t.links {
        let (a, b) = (*a, *b);
        if unavailable.iter().any(|u| {
            u.link
                .is_some_and(|[x, y]| (x, y) == (a, b) || (x, y) == (b, a))
                || u.switch.is_some_and(|s| s == a || s == b)
        }) {
            *up = false;
        }
    }
    t
}

/// Every link's status: `down` (its driver says so), `unavailable` (the monitor found it, or
/// one of its switches, unreachable), `congested` (the probes found its queue deep) or `up`.
fn link_status(topo: &Topology, found: &Found) -> Value {
    let probed = without(topo, &found.unavailable(None));
    topo.links
        .iter()
        .zip(&probed.links)
        .map(|(&((a, _), (b, _), up), &(_, _, still_up))| {
            let congested = found
                .congested
                .iter()
                .find(|c| c.link == [a, b] || c.link == [b, a]);
            let status = match (up, still_up, congested) {
                (false, _, _) => "down",
                (true, false, _) => "unavailable",
                (true, true, Some(_)) => "congested",
                (true, true, None) => "up",
            };
            let mut v = json!({ "link": [a, b], "status": status });
            if let Some(c) = congested {
                v["queue_depth"] = json!(c.queue_depth);
            }
            v
        })
        .collect()
}

async fn status(
    State(s): State<Routes>,
    Path(intent): Path<String>,
    axum::Extension(who): axum::Extension<Identity>,
    body: Result<Json<ProbeStatus>, JsonRejection>,
) -> Result<Json<Value>, ControlError> {
    let Json(found) = body.map_err(|e| ControlError::BadRequest(e.body_text()))?;
    let i = s.intents.get(&intent).await?;
    if !matches!(i.spec.kind, IntentKind::ProbePlan { .. }) {
        return Err(ControlError::BadRequest(format!(
            "{intent} is a {} intent, not a probe-plan",
            i.spec.kind.name()
        )));
    }
    let topo = s.intents.topology().await;
    let linked = |a: u32, b: u32| {
        topo.links
            .iter()
            .any(|&((x, _), (y, _), _)| (x, y) == (a, b) || (x, y) == (b, a))
    };
    for u in found.unavailable.iter().chain(&found.available) {
        match (u.link, u.switch) {
            (Some([a, b]), None) if linked(a, b) => {}
            (None, Some(sw)) if topo.switch(sw).is_some() => {}
            (Some([a, b]), None) => {
                return Err(ControlError::BadRequest(format!(
                    "unavailable: no link between switches {a} and {b}"
                )));
            }
            (None, Some(sw)) => {
                return Err(ControlError::BadRequest(format!(
                    "unavailable: {sw} is not a switch of the fabric"
                )));
            }
            _ => {
                return Err(ControlError::BadRequest(
                    "unavailable: each item is {\"link\": [a, b]} or {\"switch\": s}".into(),
                ));
            }
        }
    }
    if let Some(c) = found
        .congested
        .iter()
        .find(|c| !linked(c.link[0], c.link[1]))
    {
        return Err(ControlError::BadRequest(format!(
            "congested: no link between switches {} and {}",
            c.link[0], c.link[1]
        )));
    }
    let (before, now): (BTreeSet<Unavailable>, BTreeSet<Unavailable>) = {
        let mut g = s.probe_findings.lock().await;
        let f = g.entry(intent.clone()).or_default();
        let before = f.unavailable.keys().copied().collect();
        for u in &found.unavailable {
            f.unavailable.insert(u.normal(), std::time::Instant::now());
        }
        // A link crossed is up, and so are its switches.
        for a in found.available.iter().filter_map(|a| a.normal().link) {
            f.unavailable
                .retain(|u, _| u.link != Some(a) && u.switch.is_none_or(|s| !a.contains(&s)));
        }
        f.congested = found.congested.clone();
        (before, f.unavailable.keys().copied().collect())
    };
    let me = Identity {
        name: OWNER.into(),
        role: Role::Operator,
    };
    // The intents that stand, once: each reroute asked for differs from the others in its
    // prefix or what it avoids.
    let standing: Vec<_> = s
        .intents
        .list(None)
        .await
        .into_iter()
        .filter(|i| !i.state.ended())
        .collect();
    let mut recommended = Vec::new();
    for u in now.difference(&before) {
        for dst in prefixes_through(&topo, u.link, u.switch) {
            recommended.push(reroute(&s, &standing, &me, &dst, *u, found.session).await);
        }
    }
    // Back: the reroutes that avoided it are withdrawn.
    let back: BTreeSet<Unavailable> = before.difference(&now).copied().collect();
    let mut withdrawn = Vec::new();
    for i in &standing {
        if let IntentKind::Reroute { avoid, .. } = &i.spec.kind
            && i.spec.owner == OWNER
            && back.contains(&Unavailable::avoided(avoid))
            && s.intents.delete(&i.id, &who).await.is_ok()
        {
            withdrawn.push(json!(i.id));
        }
    }
    Ok(Json(json!({
        "intent": intent,
        "unavailable": now.iter().map(|u| u.to_json()).collect::<Vec<_>>(),
        "recommended": recommended,
        "withdrawn": withdrawn,
    })))
}

/// A `reroute` of `dst` around `u`, submitted as a recommendation (unless one stands): its id
/// and state, or why it was refused.
async fn reroute(
    s: &Routes,
    standing: &[crate::intents::store::Intent],
    me: &Identity,
    dst: &str,
    u: Unavailable,
    session: u64,
) -> Value {
    let kind = IntentKind::Reroute {
        dst: dst.to_string(),
        avoid: Avoid {
            switch: u.switch,
            link: u.link,
            links: Vec::new(),
        },
    };
    if let Some(i) = standing.iter().find(|i| i.spec.kind == kind) {
        return json!({ "dst": dst, "id": i.id, "state": i.state.as_str() });
    }
    let spec = IntentSpec {
        kind,
        switches: None,
        priority: 100,
        ttl: None,
        owner: OWNER.into(),
        reason: format!(
            "GPINT: {} unavailable in probe session {session}",
            match (u.link, u.switch) {
                (Some([a, b]), _) => format!("link {a}-{b}"),
                (_, sw) => format!("switch {}", sw.unwrap_or_default()),
            }
        ),
        origin: Origin::Recommendation,
        anomaly: None,
    };
    match s.intents.submit(spec, me).await {
        Ok(v) => json!({ "dst": dst, "id": v["id"], "state": v["state"] }),
        Err(e) => json!({ "dst": dst, "refused": e.to_string() }),
    }
}

/// `planner`'s paths over `topo`'s switches (those of `scope`, or all) and its links that
/// are up, with each probe's source route and measurement ranges.
pub fn plan(topo: &Topology, scope: Option<&[u32]>, planner: &str, measure: ProbeMeasure) -> Value {
    let mut ids: Vec<u32> = topo
        .switches
        .iter()
        .map(|s| s.id)
        .filter(|id| scope.is_none_or(|sc| sc.contains(id)))
        .collect();
    ids.sort_unstable();
    let index = |id: u32| ids.binary_search(&id).ok();
    // (a, b) → a's port towards b, over the links that are up.
    let mut port = std::collections::HashMap::new();
    let mut edges = Vec::new();
    for &((a, pa), (b, pb), up) in &topo.links {
        if let (true, Some(ia), Some(ib)) = (up, index(a), index(b)) {
            port.insert((a, b), pa);
            port.insert((b, a), pb);
            edges.push((ia, ib));
        }
    }
    let graph = kplane_probe::Graph::from_edges(ids.len(), &edges)
        .expect("edges name only the listed switches");
    let Some((_, planner_fn)) = kplane_probe::PLANNERS.iter().find(|(n, _)| *n == planner) else {
        return json!({ "planner": planner, "error": "no such planner" });
    };
    let paths = planner_fn(&graph).paths;
    let mut covered = vec![false; ids.len()];
    let probes: Vec<Value> = paths
        .iter()
        .map(|path| {
            let switches: Vec<u32> = path.iter().map(|&v| ids[v]).collect();
            for &v in path {
                covered[v] = true;
            }
            let sr: Vec<Value> = switches
                .windows(2)
                .map(|w| json!({ "switch": w[0], "next_port": port[&(w[0], w[1])] }))
                .collect();
            let mea: Vec<Value> = switches
                .iter()
                .map(|&s| match measure {
                    ProbeMeasure::RuleHits => json!([0, 1]),
                    ProbeMeasure::PortPackets => {
                        let ports = topo.ports(s);
                        json!([ports.first(), ports.last()])
                    }
                })
                .collect();
            json!({
                "source": switches.first(),
                "switches": switches,
                "sr": sr,
                "mea": mea,
            })
        })
        .collect();
    // Switches without an up link cannot be on a probe's path.
    let uncovered: Vec<u32> = ids
        .iter()
        .zip(&covered)
        .filter(|(_, c)| !**c)
        .map(|(id, _)| *id)
        .collect();
    json!({
        "planner": planner,
        "measure": measure,
        "switches": ids.len(),
        "links_up": edges.len(),
        "probes": probes,
        "uncovered": uncovered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplane_southbound::SwitchNode;

    /// A line 1 – 2 – 3 with a shortcut 1 – 3 and 4 hanging off 3; hosts 10.0.<s>.1 on 1, 3, 4.
    fn topo() -> Topology {
        let node = |id: u32, host: bool| SwitchNode {
            id,
            name: format!("s{id}"),
            hosts: if host {
                vec![(
                    u32::from(std::net::Ipv4Addr::new(10, 0, id as u8, 1)),
                    32,
                    9,
                )]
            } else {
                Vec::new()
            },
        };
        Topology {
            switches: vec![node(1, true), node(2, false), node(3, true), node(4, true)],
            links: vec![
                ((1, 1), (2, 1), true),
                ((2, 2), (3, 1), true),
                ((1, 2), (3, 2), true),
                ((3, 3), (4, 1), true),
            ],
        }
    }

    #[test]
    fn the_prefixes_a_failure_cuts_off_are_those_whose_shortest_paths_cross_it() {
        let t = topo();
        // 1 – 2 lies on no shortest path (1 – 3 is one hop); 2 – 3 does, towards 3 and 4
        // from 2.
        assert!(prefixes_through(&t, Some([1, 2]), None).contains(&"10.0.1.1/32".to_string()));
        assert_eq!(
            prefixes_through(&t, Some([2, 3]), None),
            ["10.0.3.1/32", "10.0.4.1/32"]
        );
        // Everything towards 4 goes through 3; towards 1 from 4 too.
        let via3 = prefixes_through(&t, None, Some(3));
        assert!(via3.contains(&"10.0.4.1/32".to_string()), "{via3:?}");
        assert!(via3.contains(&"10.0.1.1/32".to_string()), "{via3:?}");
        assert!(!via3.contains(&"10.0.3.1/32".to_string()), "{via3:?}");
    }

    #[test]
    fn unavailable_links_and_switches_leave_the_plan_and_congested_ones_are_named() {
        let t = topo();
        let found = Found {
            unavailable: [(
                Unavailable {
                    link: Some([2, 3]),
                    switch: None,
                },
                std::time::Instant::now(),
            )]
            .into(),
            congested: vec![Congested {
                link: [3, 4],
                queue_depth: 40,
            }],
        };
        let w = without(
            &t,
            &found.unavailable(Some(std::time::Duration::from_secs(30))),
        );
        assert_eq!(found.unavailable(Some(std::time::Duration::ZERO)), []);
        assert_eq!(w.links.iter().filter(|l| !l.2).count(), 1);
        let status = link_status(&t, &found);
        let of = |a: u32, b: u32| {
            status
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["link"] == json!([a, b]))
                .unwrap()
                .clone()
        };
        assert_eq!(of(2, 3)["status"], "unavailable");
        assert_eq!(of(3, 4)["status"], "congested");
        assert_eq!(of(3, 4)["queue_depth"], 40);
        assert_eq!(of(1, 2)["status"], "up");
        // A switch found unavailable takes its links with it.
        let sw = without(
            &t,
            &[Unavailable {
                link: None,
                switch: Some(3),
            }],
        );
        assert_eq!(sw.links.iter().filter(|l| !l.2).count(), 3);
        let plan = plan(&sw, None, "gpint-3", ProbeMeasure::RuleHits);
        assert_eq!(plan["links_up"], 1, "{plan}");
    }
}
