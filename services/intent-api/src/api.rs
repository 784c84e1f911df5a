//! The northbound HTTP API: flows, paths, switches, queues, links, events (and their live SSE
//! stream), read-only SQL. History comes from the analytics store through DataFusion; live
//! views from the result topics ([`crate::live`]). The state they share is [`crate::state`].

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use kplane_model::Metric;
use kplane_model::results::{Alert, AlertKind};
use kplane_store::query::parse_prefix;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Auth, Identity, Role, require};
use crate::error::ApiError;
use crate::rows::to_json;
use crate::state::{AppState, Range};
use kplane_model::incidents::EpisodeBook;
use kplane_store::rollup::Resolution;

/// Middleware: an answer within `query-timeout`, else 504 — whatever the route spends its time
/// on. Event streams never end, and `POST /v1/query` kills its worker at the same timeout.
async fn deadline(
    State(timeout): State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = req.uri().path();
    if path.ends_with("/stream") || path == "/v1/query" {
        return next.run(req).await;
    }
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::Timeout(format!(
            "the answer took longer than {timeout:?} (query-timeout); narrow the time range"
        ))
        .into_response(),
    }
}

/// The API router (every route behind its role), without the console.
pub fn router(state: AppState, auth: Auth) -> Router {
    let viewer = axum::middleware::from_fn_with_state((auth.clone(), Role::Viewer), require);
    let admin = axum::middleware::from_fn_with_state((auth.clone(), Role::Admin), require);
    let admin_routes = Router::new()
        .route("/v1/tokens", get(tokens))
        .route_layer(admin);
    Router::new()
        .route("/v1/flows", get(flows))
        .route("/v1/flows/{flow}/path", get(flow_path))
        .route("/v1/switches", get(switches))
        .route("/v1/switches/{id}/queues", get(switch_queues))
        .route("/v1/switches/{id}/changes", get(switch_changes))
        .route("/v1/links", get(links))
        .route("/v1/events", get(events))
        .route("/v1/events/stream", get(events_stream))
        .route("/v1/live", get(live))
        .route("/v1/query", post(query))
        .route_layer(viewer)
        .merge(admin_routes)
        .merge(crate::knowledge_api::router(auth.clone()))
        .merge(crate::incidents_api::router(auth.clone()))
        .merge(crate::int_label_api::router(auth.clone()))
        .with_state(state.clone())
        .merge(kplane_control_plane::router(
            state.intents.clone(),
            auth,
            state.limits.clone(),
            state.cfg.intent_rate,
        ))
        .fallback(|| async { ApiError::NotFound("no such route (see /openapi.json)".into()) })
        .route_layer(axum::middleware::from_fn_with_state(
            state.cfg.query_timeout,
            deadline,
        ))
}

/// `GET /v1/tokens` (admin): who holds a token, with which role — never the hashes.
async fn tokens(State(s): State<AppState>) -> Json<Value> {
    let t: Vec<Value> = s
        .cfg
        .http
        .tokens
        .iter()
        .map(|t| json!({ "name": t.name, "role": t.role.as_str() }))
        .collect();
    Json(json!({ "tokens": t, "no_auth": s.cfg.http.no_auth }))
}

// ---- parameters ----------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
pub struct FlowParams {
    #[serde(flatten)]
    pub range: Range,
    /// Source prefix, e.g. 10.0.0.0/8.
    pub src: Option<String>,
    pub dst: Option<String>,
    pub src_port: Option<String>,
    pub dst_port: Option<String>,
    pub protocol: Option<u8>,
    /// latency (default) | reports.
    pub sort: Option<String>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// `80` or `1000-2000`.
fn port_range(s: &str, what: &str) -> Result<(u16, u16), ApiError> {
    let bad = || ApiError::BadRequest(format!("{what}: {s:?} is not a port or a range a-b"));
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let (a, b): (u16, u16) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

fn prefix(s: &str, what: &str) -> Result<String, ApiError> {
    parse_prefix(s)
        .map(|_| s.to_string())
        .ok_or_else(|| ApiError::BadRequest(format!("{what}: {s:?} is not an address prefix")))
}

/// Deepest page a cursor reaches (a million flows in): beyond, narrow the range instead.
const MAX_CURSOR: usize = 1_000_000;

const FLOW_COLUMNS: &str = "ip_text(src_ip) AS src_ip, ip_text(dst_ip) AS dst_ip, src_port, \
                            dst_port, protocol";

// ---- handlers ------------------------------------------------------------------------------

/// `GET /v1/flows`.
async fn flows(
    State(s): State<AppState>,
    Query(p): Query<FlowParams>,
) -> Result<Json<Value>, ApiError> {
    let range = p.range.resolve("window_start")?;
    let (resolution, source) = (range.resolution, s.table("flows", &range).await?);
    let mut wheres = vec![range.sql];
    if let Some(v) = &p.src {
        wheres.push(format!("ip_in(src_ip, '{}')", prefix(v, "src")?));
    }
    if let Some(v) = &p.dst {
        wheres.push(format!("ip_in(dst_ip, '{}')", prefix(v, "dst")?));
    }
    for (name, v) in [("src_port", &p.src_port), ("dst_port", &p.dst_port)] {
        if let Some(v) = v {
            let (a, b) = port_range(v, name)?;
            wheres.push(format!("{name} BETWEEN {a} AND {b}"));
        }
    }
    if let Some(proto) = p.protocol {
        wheres.push(format!("protocol = {proto}"));
    }
    let order = match p.sort.as_deref().unwrap_or("latency") {
        "latency" => "latency_max_ns DESC",
        "reports" => "reports DESC",
        "bytes" => "bytes DESC NULLS LAST",
        other => {
            return Err(ApiError::BadRequest(format!(
                "sort: {other:?} is not one of latency, reports, bytes"
            )));
        }
    };
    let limit = p.limit.unwrap_or(100).clamp(1, 1_000);
    let offset: usize = match &p.cursor {
        Some(c) => c.parse().ok().filter(|o| *o <= MAX_CURSOR).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "cursor: {c:?} is not a cursor (a next_cursor of a previous answer)"
            ))
        })?,
        None => 0,
    };
    let sql = format!(
        "SELECT {FLOW_COLUMNS}, sum(reports) AS reports, sum(bytes) AS bytes, \
           max(e2e_latency_max_ns) AS latency_max_ns, \
           sum(e2e_latency_mean_ns * reports) / sum(reports) AS latency_mean_ns, \
           last_value(path ORDER BY window_start) AS path, \
           bool_or(coalesce(path_changed, false)) AS path_changed, \
           min(first_seen) AS first_seen, max(last_seen) AS last_seen \
         FROM {source} AS flows WHERE {} \
         GROUP BY src_ip, dst_ip, src_port, dst_port, protocol \
         ORDER BY {order}, src_ip, dst_ip, src_port, dst_port, protocol \
         LIMIT {} OFFSET {offset}",
        wheres.join(" AND "),
        limit + 1
    );
    let mut rows = s.rows(&sql).await?;
    let next = (rows.len() > limit).then(|| {
        rows.truncate(limit);
        (offset + limit).to_string()
    });
    Ok(Json(
        json!({ "flows": rows, "next_cursor": next, "resolution": resolution.as_str() }),
    ))
}

/// A flow in a path: `src,sport,dst,dport,proto`.
fn flow_where(flow: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::BadRequest(format!(
            "flow: {flow:?} is not src,src_port,dst,dst_port,protocol (e.g. 10.0.0.1,1000,10.0.1.1,80,6)"
        ))
    };
    let parts: Vec<&str> = flow.split(',').collect();
    let [src, sport, dst, dport, proto] = parts[..] else {
        return Err(bad());
    };
    let (src, dst): (std::net::IpAddr, std::net::IpAddr) = (
        src.parse().map_err(|_| bad())?,
        dst.parse().map_err(|_| bad())?,
    );
    let (sport, dport, proto): (u16, u16, u8) = (
        sport.parse().map_err(|_| bad())?,
        dport.parse().map_err(|_| bad())?,
        proto.parse().map_err(|_| bad())?,
    );
    Ok(format!(
        "ip_in(src_ip, '{src}') AND ip_in(dst_ip, '{dst}') AND src_port = {sport} \
         AND dst_port = {dport} AND protocol = {proto}"
    ))
}

/// `GET /v1/flows/{flow}/path`.
async fn flow_path(
    State(s): State<AppState>,
    Path(flow): Path<String>,
    Query(range): Query<Range>,
) -> Result<Json<Value>, ApiError> {
    let f = flow_where(&flow)?;
    let range = range.resolve("window_start")?;
    let (r, resolution) = (&range.sql, range.resolution);
    let source = s.table("flows", &range).await?;
    let windows = s
        .rows(&format!(
            "SELECT window_start, window_end, path, path_changed, reports, bytes, e2e_latency_mean_ns, \
               e2e_latency_max_ns FROM {source} AS flows WHERE {f} AND {r} ORDER BY window_start"
        ))
        .await?;
    if windows.is_empty() {
        return Err(ApiError::NotFound(format!(
            "no flow {flow} in that time range"
        )));
    }
    // Hop-latency percentiles do not roll up: per hop only at the windows' resolution.
    let hops = if resolution == Resolution::Windows {
        s.rows(&format!(
            "SELECT window_start, node_id, samples, p50_ns, p99_ns, max_ns FROM hop_latency \
             WHERE {f} AND {r} ORDER BY window_start, node_id"
        ))
        .await?
    } else {
        Vec::new()
    };
    // Per window: its hops in path order.
    let out: Vec<Value> = windows
        .into_iter()
        .map(|mut w| {
            let start = w["window_start"].clone();
            let path: Vec<u64> = w["path"]
                .as_array()
                .map(|p| p.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            let per_hop: Vec<Value> = path
                .iter()
                .filter_map(|n| {
                    hops.iter()
                        .find(|h| h["window_start"] == start && h["node_id"].as_u64() == Some(*n))
                        .cloned()
                })
                .map(|mut h| {
                    if let Some(o) = h.as_object_mut() {
                        o.remove("window_start");
                    }
                    h
                })
                .collect();
            w["hops"] = Value::Array(per_hop);
            w
        })
        .collect();
    Ok(Json(
        json!({ "flow": flow, "windows": out, "resolution": resolution.as_str() }),
    ))
}

/// A switch's queue (egress port, queue id) in one window, from the `queues` rows of every lane (each lane sees the
/// switch through its own flows): samples and maxima add up exactly, means are weighted by
/// samples, and the time above the threshold is the samples-weighted mean of the lanes'
/// estimates (each lane's is its share of samples above it × the window). The caller adds
/// `WHERE … GROUP BY window_start, …, node_id, egress_port, queue_id`.
fn queue_windows(queues: &str) -> String {
    format!(
        "SELECT window_start, max(window_end) AS window_end, node_id, egress_port, \
         queue_id, sum(samples) AS samples, sum(occupancy_mean * samples) AS occupancy_sum, \
         max(occupancy_max) AS occupancy_max, \
         CAST(sum(CAST(congested_ns AS DOUBLE) * samples) / sum(samples) AS BIGINT) AS congested_ns \
         FROM {queues} AS queues"
    )
}

/// `GET /v1/switches`.
async fn switches(
    State(s): State<AppState>,
    Query(range): Query<Range>,
) -> Result<Json<Value>, ApiError> {
    let range = range.resolve("window_start")?;
    let (r, resolution) = (&range.sql, range.resolution);
    let queues = queue_windows(&s.table("queues", &range).await?);
    let links = s.table("links", &range).await?;
    let rows = s
        .rows(&format!(
            "SELECT q.node_id, q.queues, q.occupancy_max, q.occupancy_mean, q.congested_ns, \
               l.ports, l.tx_utilization_max, l.tx_utilization_mean \
             FROM (SELECT node_id, \
                     count(DISTINCT COALESCE(CAST(egress_port AS BIGINT), 65536) * 256 + queue_id) \
                       AS queues, \
                     max(occupancy_max) AS occupancy_max, \
                     sum(occupancy_sum) / sum(samples) AS occupancy_mean, \
                     sum(congested_ns) AS congested_ns \
                   FROM ({queues} WHERE {r} GROUP BY window_start, node_id, egress_port, queue_id) \
                   GROUP BY node_id) q \
             LEFT JOIN (SELECT node_id, count(DISTINCT egress_port) AS ports, \
                     max(tx_utilization_max) AS tx_utilization_max, \
                     sum(tx_utilization_mean * samples) / sum(samples) AS tx_utilization_mean \
                   FROM {links} AS links WHERE {r} GROUP BY node_id) l ON q.node_id = l.node_id \
             ORDER BY q.node_id"
        ))
        .await?;
    Ok(Json(
        json!({ "switches": rows, "resolution": resolution.as_str() }),
    ))
}

/// The `{id}` of a `/v1/switches/{id}/…` route.
fn switch_id(id: &str) -> Result<u32, ApiError> {
    id.parse()
        .map_err(|_| ApiError::BadRequest(format!("switch id {id:?} is not a number")))
}

/// `GET /v1/switches/{id}/queues`.
async fn switch_queues(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(range): Query<Range>,
) -> Result<Json<Value>, ApiError> {
    let id = switch_id(&id)?;
    let range = range.resolve("window_start")?;
    let (r, resolution) = (&range.sql, range.resolution);
    let queues = queue_windows(&s.table("queues", &range).await?);
    let rows = s
        .rows(&format!(
            "SELECT window_start, window_end, egress_port, queue_id, samples, \
               occupancy_sum / samples AS occupancy_mean, occupancy_max, congested_ns \
             FROM ({queues} WHERE node_id = {id} AND {r} \
                   GROUP BY window_start, window_end, node_id, egress_port, queue_id) \
             ORDER BY window_start, egress_port, queue_id"
        ))
        .await?;
    if rows.is_empty() {
        return Err(ApiError::NotFound(format!(
            "no queue samples of switch {id} in that time range"
        )));
    }
    Ok(Json(
        json!({ "switch": id, "queues": rows, "resolution": resolution.as_str() }),
    ))
}

#[derive(Debug, Default, Deserialize)]
pub struct ChangeParams {
    #[serde(flatten)]
    pub range: Range,
    pub metric: Option<String>,
    pub limit: Option<usize>,
}

/// `GET /v1/switches/{id}/changes`: the switch's change log, newest first — one log whatever
/// the number of collectors that saw it (`switch_changes`).
async fn switch_changes(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(p): Query<ChangeParams>,
) -> Result<Json<Value>, ApiError> {
    let id = switch_id(&id)?;
    let mut w = p.range.sql("time")?;
    w += &format!(" AND node_id = {id}");
    if let Some(m) = &p.metric {
        let names = Metric::SWITCH_VIEWS.map(Metric::as_str);
        if !names.contains(&m.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "metric: {m:?} is none of {}",
                names.join(", ")
            )));
        }
        w += &format!(" AND metric = '{m}'");
    }
    let limit = p.limit.unwrap_or(1000).clamp(1, 10_000);
    let rows = s
        .rows(&format!(
            "SELECT time, kind, metric, queue_id, egress_port, value, previous, threshold, views \
             FROM switch_changes WHERE {w} ORDER BY time DESC LIMIT {limit}"
        ))
        .await?;
    Ok(Json(json!({ "switch": id, "changes": rows })))
}

/// `GET /v1/links`: per (node, egress port) its neighbour (the next node on paths through it)
/// and tx utilisation.
async fn links(
    State(s): State<AppState>,
    Query(range): Query<Range>,
) -> Result<Json<Value>, ApiError> {
    let range = range.resolve("window_start")?;
    let (r, resolution) = (&range.sql, range.resolution);
    let links = s.table("links", &range).await?;
    let rows = s
        .rows(&format!(
            "SELECT node_id, egress_port, next_node_id, sum(samples) AS samples, \
               sum(tx_utilization_mean * samples) / sum(samples) AS tx_utilization_mean, \
               max(tx_utilization_max) AS tx_utilization_max \
             FROM {links} AS links WHERE {r} GROUP BY node_id, egress_port, next_node_id \
             ORDER BY node_id, egress_port"
        ))
        .await?;
    Ok(Json(
        json!({ "links": rows, "resolution": resolution.as_str() }),
    ))
}

#[derive(Debug, Default, Deserialize)]
pub struct EventParams {
    #[serde(flatten)]
    pub range: Range,
    pub kind: Option<String>,
    pub limit: Option<usize>,
    /// `true`: the in-memory live feed instead of the store.
    pub live: Option<bool>,
    /// `true`: every immediate event (each crossing) instead of episodes.
    pub raw: Option<bool>,
}

/// Stored alerts folded into episodes at most (the oldest of a longer range are left out).
pub const EPISODE_ALERTS: usize = 50_000;

/// An `alerts` row of [`events`]' episode query as the processor's alert.
fn stored_alert(row: &Value) -> Option<Alert> {
    let kind = row["kind"].as_str()?;
    let u = |k: &str| row[k].as_u64();
    let nodes = |k: &str| -> Vec<u32> {
        row[k]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(|n| n.as_u64())
                    .map(|n| n as u32)
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(Alert {
        time_ns: row["time_ns"].as_i64()?,
        kind: AlertKind::ALL.into_iter().find(|a| a.as_str() == kind),
        partition: u("partition")? as u32,
        src_ip: row["src_ip"].as_str().and_then(|s| s.parse().ok()),
        dst_ip: row["dst_ip"].as_str().and_then(|s| s.parse().ok()),
        src_port: u("src_port").map(|v| v as u16),
        dst_port: u("dst_port").map(|v| v as u16),
        protocol: u("protocol").map(|v| v as u8),
        node_id: u("node_id").map(|v| v as u32),
        queue_id: u("queue_id").map(|v| v as u8),
        metric: row["metric"].as_str().map(str::to_string),
        value: u("value"),
        threshold: u("threshold"),
        path: nodes("path"),
        previous_path: nodes("previous_path"),
        ..Alert::default()
    })
}

/// `GET /v1/events`: episodes (default) or every immediate event (`raw=true`), from the
/// store or the live feed (`live=true`).
async fn events(
    State(s): State<AppState>,
    Query(p): Query<EventParams>,
) -> Result<Json<Value>, ApiError> {
    let limit = p.limit.unwrap_or(100).clamp(1, 10_000);
    if let Some(k) = &p.kind
        && !AlertKind::ALL.iter().any(|a| a.as_str() == k)
    {
        return Err(ApiError::BadRequest(format!(
            "kind: unknown event kind {k:?}"
        )));
    }
    let raw = p.raw == Some(true);
    let wanted = |kind: &str| p.kind.as_deref().is_none_or(|k| k == kind);
    if p.live == Some(true) {
        let rows: Vec<Value> = if raw {
            s.live
                .alerts()
                .iter()
                .rev()
                .filter(|a| wanted(a.kind.map_or("", |k| k.as_str())))
                .take(limit)
                .map(|a| serde_json::to_value(a.as_ref()).unwrap_or(Value::Null))
                .collect()
        } else {
            s.live
                .episodes()
                .iter()
                .filter(|e| wanted(e.kind))
                .take(limit)
                .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
                .collect()
        };
        return Ok(Json(json!({ "events": rows })));
    }
    let mut w = p.range.sql("time")?;
    if raw {
        if let Some(k) = &p.kind {
            w += &format!(" AND kind = '{k}'");
        }
        let rows = s
            .rows(&format!(
                "SELECT time, detected, kind, {FLOW_COLUMNS}, node_id, queue_id, metric, value, \
                   threshold, path, previous_path FROM alerts WHERE {w} ORDER BY time DESC LIMIT {limit}"
            ))
            .await?;
        return Ok(Json(json!({ "events": rows })));
    }
    // Episodes: the range's alerts in event-time order, grouped.
    let rows = s
        .rows(&format!(
            "SELECT CAST(time AS BIGINT) AS time_ns, partition, kind, {FLOW_COLUMNS}, node_id, \
               queue_id, metric, value, threshold, path, previous_path FROM alerts WHERE {w} \
             ORDER BY time, partition LIMIT {EPISODE_ALERTS}"
        ))
        .await?;
    // Folding tens of thousands of alerts is CPU work: off the async workers.
    let kind = p.kind.clone();
    let episodes = tokio::task::spawn_blocking(move || {
        let mut book = EpisodeBook::new(EPISODE_ALERTS);
        for a in rows.iter().filter_map(stored_alert) {
            book.apply(&a);
        }
        book.episodes()
            .iter()
            .filter(|e| kind.as_deref().is_none_or(|k| k == e.kind))
            .take(limit)
            .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
            .collect::<Vec<Value>>()
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(json!({ "events": episodes })))
}

/// `GET /v1/events/stream`: server-sent events — `alert` per immediate event, and `episode`
/// (`{"phase": "start"|"update"|"end", "episode": …}`) per change of an episode.
async fn events_stream(
    State(s): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    use tokio::sync::broadcast::error::RecvError;
    let alerts = s.live.subscribe();
    let episodes = s.live.subscribe_episodes();
    let stream = futures_util::stream::unfold(
        (alerts, episodes),
        |(mut alerts, mut episodes)| async move {
            loop {
                let event = tokio::select! {
                    a = alerts.recv() => match a {
                        Ok(a) => Event::default()
                            .event("alert")
                            .data(serde_json::to_string(a.as_ref()).unwrap_or_default()),
                        // A slow client missed some: go on with the newest.
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => return None,
                    },
                    e = episodes.recv() => match e {
                        Ok(news) => {
                            let (phase, episode) = news.as_ref();
                            Event::default().event("episode").data(
                                json!({ "phase": phase, "episode": episode }).to_string(),
                            )
                        }
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => return None,
                    },
                };
                return Some((Ok(event), (alerts, episodes)));
            }
        },
    );
    Sse::new(s.until_shutdown(stream)).keep_alive(KeepAlive::default())
}

/// `GET /v1/live`: the latest window of every table (all partitions), for the console.
async fn live(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    let mut out = serde_json::Map::new();
    for t in ["queues", "links", "flows", "hop_latency"] {
        let batches = s.live.latest(t);
        let rows = to_json(&batches)?;
        out.insert(t.to_string(), Value::Array(rows));
    }
    let (windows, alerts) = s.live.seen();
    out.insert("windows_seen".into(), windows.into());
    out.insert("alerts_seen".into(), alerts.into());
    Ok(Json(Value::Object(out)))
}

#[derive(Debug, Deserialize)]
pub struct QueryBody {
    pub sql: String,
}

/// `POST /v1/query`: `{"sql": "SELECT …"}` → `{"columns", "rows", "truncated"}`, run in a
/// query worker (crate::query_worker) within the caller's rate and concurrency limits.
async fn query(
    State(s): State<AppState>,
    Extension(who): Extension<Identity>,
    Json(body): Json<QueryBody>,
) -> Result<Json<Value>, ApiError> {
    s.limits.spend(&who, "queries", s.cfg.query_rate)?;
    let _running = s.limits.run_query(&who, s.cfg.query_concurrency)?;
    let answer = s
        .queries
        .run(&body.sql, s.cfg.query_max_rows, s.cfg.query_timeout)
        .await?;
    Ok(Json(answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::timestamp_ns;

    #[test]
    fn parameters_are_validated_before_they_reach_sql() {
        assert!(timestamp_ns("2026-11-21T13:00:00Z", "from").is_ok());
        assert!(timestamp_ns("2026'; DROP", "from").is_err());
        assert!(timestamp_ns("2026-13-45T00:00:00Z", "from").is_err());
        assert_eq!(port_range("1000-2000", "p").unwrap(), (1000, 2000));
        assert!(port_range("2000-1000", "p").is_err());
        assert!(prefix("10.0.0.0/8", "src").is_ok());
        assert!(prefix("10.0.0.0/8' OR 1=1", "src").is_err());
        assert!(flow_where("10.0.0.1,1000,10.0.1.1,80,6").is_ok());
        assert!(flow_where("10.0.0.1,1000,10.0.1.1,80").is_err());
    }
}
