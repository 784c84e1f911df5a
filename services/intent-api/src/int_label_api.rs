//! The INT-label routes (viewer): per-port state with Pro's frequency, and the coverage
//! rate per window from the store (docs/int-label.md, docs/api.md).

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::auth::{Auth, Role, require};
use crate::error::ApiError;
use crate::state::{AppState, Range};

pub fn router(auth: Auth) -> Router<AppState> {
    Router::new()
        .route("/v1/int-label/ports", get(ports))
        .route("/v1/int-label/coverage", get(coverage))
        .route_layer(axum::middleware::from_fn_with_state(
            (auth, Role::Viewer),
            require,
        ))
}

/// `GET /v1/int-label/ports`: every port the processor's `int_label` windows told of, with
/// Pro's S and the intent carrying it.
async fn ports(State(s): State<AppState>) -> Json<Value> {
    let (through, ports) = s.live.int_label.snapshot();
    let pro = &s.intents.config().int_label_pro;
    Json(json!({
        "through_ns": through,
        "pro": {
            "enabled": pro.enabled,
            "stale_after_ms": (pro.telemetry_interval * pro.k).as_millis() as u64,
            "relax": pro.relax,
            "max_shift": pro.max_shift,
        },
        "ports": ports,
    }))
}

/// `GET /v1/int-label/coverage`: per window, the telemetry intervals in which ports were
/// updated over those the range's ports could have been (every port heard from in the
/// range, every interval of the window; a port's labels straddling the window's edge count
/// at most the window's intervals): the mean coverage rate of the window's intervals;
/// and the exports and option bytes the last hops sent in it.
async fn coverage(
    State(s): State<AppState>,
    Query(range): Query<Range>,
) -> Result<Json<Value>, ApiError> {
    let r = range.sql("window_start")?;
    let rows = s
        .rows(&format!(
            "WITH known AS (SELECT count(DISTINCT CAST(node_id AS BIGINT) * 65536 + egress_port) \
               AS ports FROM int_label WHERE {r}), \
             w AS (SELECT window_start, \
               sum(least(intervals_updated, \
                 (CAST(window_end AS BIGINT) - CAST(window_start AS BIGINT)) / interval_ns)) \
                 AS port_intervals, \
               sum(updates) AS updates, count(*) AS ports_updated, \
               (CAST(window_end AS BIGINT) - CAST(window_start AS BIGINT)) / max(interval_ns) \
                 AS intervals \
               FROM int_label WHERE {r} GROUP BY window_start, window_end), \
             e AS (SELECT window_start, sum(exports) AS exports, sum(bytes) AS bytes \
               FROM int_label_exports WHERE {r} GROUP BY window_start) \
             SELECT w.window_start, w.ports_updated, known.ports AS ports_known, w.updates, \
               w.port_intervals, e.exports, e.bytes AS label_bytes, w.intervals, \
               CAST(w.port_intervals AS DOUBLE) / (known.ports * w.intervals) AS coverage \
             FROM w CROSS JOIN known LEFT JOIN e ON w.window_start = e.window_start \
             ORDER BY w.window_start"
        ))
        .await?;
    Ok(Json(json!({ "coverage": rows })))
}
