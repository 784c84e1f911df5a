//! The control channel: table entries and failures at runtime, over HTTP on a local address,
//! typed by the P4 schema. The intent API's switch driver talks to it as it would to
//! P4Runtime on a real switch. Routes in docs/emulator.md.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::sim::{Action, Sim};
use crate::tables::{EntrySpec, SCHEMA_JSON};

type Shared = Arc<Mutex<Sim>>;

fn err(status: StatusCode, msg: impl Into<String>) -> (StatusCode, Json<Value>) {
    (status, Json(json!({ "error": msg.into() })))
}

async fn schema() -> (StatusCode, [(&'static str, &'static str); 1], &'static str) {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        SCHEMA_JSON,
    )
}

async fn topology(State(s): State<Shared>) -> Json<Value> {
    let s = s.lock().unwrap_or_else(PoisonError::into_inner);
    let nodes: Vec<Value> = s
        .topo
        .nodes
        .iter()
        .map(|n| json!({"name": n.name, "kind": n.kind, "id": n.id, "ip": n.ip, "ports": n.ports.len()}))
        .collect();
    let links: Vec<Value> = s
        .topo
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            json!({
                "index": i,
                "a": {"node": s.topo.nodes[l.a.0].name, "id": s.topo.nodes[l.a.0].id, "port": l.a.1},
                "b": {"node": s.topo.nodes[l.b.0].name, "id": s.topo.nodes[l.b.0].id, "port": l.b.1},
                "up": s.link_up[i],
                "rate_bps": l.rate_bps,
                "delay_ns": l.delay_ns,
            })
        })
        .collect();
    Json(json!({"name": s.topo.name, "nodes": nodes, "links": links}))
}

async fn entries(State(s): State<Shared>, Path(table): Path<String>) -> (StatusCode, Json<Value>) {
    let s = s.lock().unwrap_or_else(PoisonError::into_inner);
    let v: Vec<&EntrySpec> = s.tables.entries(&table).iter().map(|e| &e.spec).collect();
    (
        StatusCode::OK,
        Json(json!({ "table": table, "entries": v })),
    )
}

async fn insert(
    State(s): State<Shared>,
    Path(table): Path<String>,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> (StatusCode, Json<Value>) {
    let Ok(Json(mut v)) = body else {
        return err(StatusCode::BAD_REQUEST, "body must be a JSON table entry");
    };
    if let Some(o) = v.as_object_mut() {
        o.insert("table".into(), Value::String(table));
    }
    let spec: EntrySpec = match serde_json::from_value(v) {
        Ok(s) => s,
        Err(e) => return err(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
    match s.insert(spec) {
        Ok(()) => (
            StatusCode::CREATED,
            Json(json!({ "inserted": true, "at_ns": s.now() })),
        ),
        Err(e) => err(StatusCode::BAD_REQUEST, e),
    }
}

async fn clear(State(s): State<Shared>, Path(table): Path<String>) -> Json<Value> {
    let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
    let removed = s.tables.clear(&table);
    Json(json!({ "removed": removed }))
}

async fn link(
    State(s): State<Shared>,
    Path((index, state)): Path<(usize, String)>,
) -> (StatusCode, Json<Value>) {
    let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
    if index >= s.topo.links.len() {
        return err(StatusCode::NOT_FOUND, format!("no link {index}"));
    }
    let action = match state.as_str() {
        "down" => Action::LinkDown(index),
        "up" => Action::LinkUp(index),
        _ => return err(StatusCode::BAD_REQUEST, "state is down or up"),
    };
    let now = s.now();
    s.schedule(now, action);
    s.note(json!({"kind": format!("link_{state}"), "link_index": index, "source": "control"}));
    (
        StatusCode::OK,
        Json(json!({ "link": index, "state": state })),
    )
}

async fn switch(
    State(s): State<Shared>,
    Path((id, state)): Path<(u32, String)>,
) -> (StatusCode, Json<Value>) {
    let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(n) = s.topo.switch_by_id(id) else {
        return err(StatusCode::NOT_FOUND, format!("no switch {id}"));
    };
    let action = match state.as_str() {
        "down" => Action::NodeDown(n),
        "up" => Action::NodeUp(n),
        _ => return err(StatusCode::BAD_REQUEST, "state is down or up"),
    };
    let now = s.now();
    s.schedule(now, action);
    s.note(json!({"kind": format!("switch_{state}"), "switch": id, "source": "control"}));
    (
        StatusCode::OK,
        Json(json!({ "switch": id, "state": state })),
    )
}

async fn stats(State(s): State<Shared>) -> Json<Value> {
    let s = s.lock().unwrap_or_else(PoisonError::into_inner);
    Json(json!({ "now_ns": s.now(), "stats": s.stats }))
}

/// The control router.
pub fn router(sim: Shared) -> Router {
    Router::new()
        .route("/v1/schema", get(schema))
        .route("/v1/topology", get(topology))
        .route("/v1/stats", get(stats))
        .route(
            "/v1/tables/{table}",
            get(entries).post(insert).delete(clear),
        )
        .route("/v1/links/{index}/{state}", post(link))
        .route("/v1/switches/{id}/{state}", post(switch))
        .with_state(sim)
}
