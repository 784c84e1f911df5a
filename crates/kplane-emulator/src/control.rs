//! The control channel: table entries and failures at runtime, over HTTP on a local address,
//! typed by p4c's P4Info. The intent API's `emulator` switch driver talks to it as its
//! `p4runtime` driver talks to a real switch: write batches keyed by (switch, table, match,
//! priority), reads, and a boot id that changes when the emulator restarts (as a switch
//! that lost its tables). Routes in docs/emulator.md.

use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use kplane_p4::{EntrySpec, KPLANE_P4INFO_JSON};
use serde::Deserialize;

use crate::sim::{Action, Sim};
use crate::tables::Update;

/// Changes with every start of the process: a driver that sees it change knows the tables
/// it wrote are gone.
static BOOT_ID: LazyLock<u64> = LazyLock::new(|| {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ u64::from(std::process::id()).rotate_left(40)
});

/// The emulator the control channel reads and writes.
pub type Shared = Arc<Mutex<Sim>>;

fn err(status: StatusCode, msg: impl Into<String>) -> (StatusCode, Json<Value>) {
    (status, Json(json!({ "error": msg.into() })))
}

async fn schema() -> (StatusCode, [(&'static str, &'static str); 1], &'static str) {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        KPLANE_P4INFO_JSON,
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
        Err(e) => err(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// `GET /v1/tables`: every entry of every table.
async fn all_entries(State(s): State<Shared>) -> Json<Value> {
    let s = s.lock().unwrap_or_else(PoisonError::into_inner);
    let v: Vec<&EntrySpec> = s.tables.all().map(|e| &e.spec).collect();
    Json(json!({ "boot_id": *BOOT_ID, "entries": v }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteBody {
    updates: Vec<Update>,
}

/// `POST /v1/write`: a batch of inserts, modifies and deletes, all or nothing.
async fn write(
    State(s): State<Shared>,
    body: Result<Json<WriteBody>, axum::extract::rejection::JsonRejection>,
) -> (StatusCode, Json<Value>) {
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) => return err(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
    match s.write(&body.updates) {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({ "written": body.updates.len(), "at_ns": s.now() })),
        ),
        Err((index, e)) => (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": e.to_string(), "index": index })),
        ),
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
    Json(json!({ "now_ns": s.now(), "boot_id": *BOOT_ID, "stats": s.stats }))
}

/// What the scenario injected so far (the ground truth's events, without the queue series):
/// times are virtual (`t_ns`); reports carry `clock_base_ns` + virtual time.
async fn truth(State(s): State<Shared>) -> Json<Value> {
    let s = s.lock().unwrap_or_else(PoisonError::into_inner);
    Json(json!({
        "clock_base_ns": s.cfg.clock_base_ns,
        "now_ns": s.now(),
        "events": s.truth.events,
    }))
}

/// The control router.
pub fn router(sim: Shared) -> Router {
    Router::new()
        .route("/v1/schema", get(schema))
        .route("/v1/topology", get(topology))
        .route("/v1/stats", get(stats))
        .route("/v1/truth", get(truth))
        .route("/v1/tables", get(all_entries))
        .route("/v1/write", post(write))
        .route(
            "/v1/tables/{table}",
            get(entries).post(insert).delete(clear),
        )
        .route("/v1/links/{index}/{state}", post(link))
        .route("/v1/switches/{id}/{state}", post(switch))
        .with_state(sim)
}
