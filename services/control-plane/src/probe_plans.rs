//! `GET /v1/probe-plans` (viewer): each active `probe-plan` intent's probes over the fabric
//! as the drivers report it now — switches and the links that are up — so a failed link or
//! switch changes the plan at the next request (gpint-reliable-int-monitoring §III;
//! docs/gpint.md). Per probe: its source switch, its source-routing stack (the next port at
//! each switch) and each switch's measurement range.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::intents::model::{IntentKind, ProbeMeasure};
use crate::routes::Routes;
use kplane_runtime::auth::{Auth, Role, require};
use kplane_southbound::Topology;

pub(crate) fn router(auth: Auth) -> Router<Routes> {
    Router::new()
        .route("/v1/probe-plans", get(plans))
        .route_layer(axum::middleware::from_fn_with_state(
            (auth, Role::Viewer),
            require,
        ))
}

async fn plans(State(s): State<Routes>) -> Json<Value> {
    let topo = s.intents.topology().await;
    let plans: Vec<Value> = s
        .intents
        .list(None)
        .await
        .into_iter()
        .filter(|i| i.state.installed())
        .filter_map(|i| match &i.spec.kind {
            IntentKind::ProbePlan { planner, measure } => {
                let mut v = plan(&topo, i.spec.switches.as_deref(), planner, *measure);
                v["intent"] = json!(i.id);
                Some(v)
            }
            _ => None,
        })
        .collect();
    Json(json!({ "plans": plans }))
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
