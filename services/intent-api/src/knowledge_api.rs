//! The knowledge routes (viewer): anomaly episodes with their explanation and the intents
//! recommended for them, forecasts beside what happened, and the model registry
//! (docs/knowledge.md, docs/api.md).

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use kplane_model::results::{Anomaly, AnomalyType, EntityKind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Auth, Role, require};
use crate::error::ApiError;
use crate::findings::AnomalyFilter;
use crate::state::AppState;

pub fn router(auth: Auth) -> Router<AppState> {
    Router::new()
        .route("/v1/anomalies", get(anomalies))
        .route("/v1/anomalies/stream", get(anomalies_stream))
        .route("/v1/anomalies/{id}", get(anomaly))
        .route("/v1/forecasts", get(forecasts))
        .route("/v1/models", get(models))
        .route_layer(axum::middleware::from_fn_with_state(
            (auth, Role::Viewer),
            require,
        ))
}

#[derive(Debug, Default, Deserialize)]
pub struct AnomalyParams {
    #[serde(rename = "type")]
    pub anomaly_type: Option<String>,
    pub entity_kind: Option<String>,
    pub entity: Option<String>,
    /// `open` or `closed`.
    pub state: Option<String>,
    /// Episodes open within this duration back from now (e.g. `1h`).
    pub since: Option<String>,
    pub limit: Option<usize>,
}

fn filter(p: &AnomalyParams) -> Result<AnomalyFilter<'_>, ApiError> {
    if let Some(t) = &p.anomaly_type
        && AnomalyType::parse(t).is_none()
    {
        let known: Vec<&str> = AnomalyType::ALL.iter().map(|t| t.as_str()).collect();
        return Err(ApiError::BadRequest(format!(
            "type: unknown anomaly type {t:?} (one of {})",
            known.join(", ")
        )));
    }
    if let Some(k) = &p.entity_kind
        && !EntityKind::ALL.iter().any(|e| e.as_str() == k)
    {
        return Err(ApiError::BadRequest(format!(
            "entity_kind: unknown entity kind {k:?}"
        )));
    }
    let open = match p.state.as_deref() {
        None => None,
        Some("open") => Some(true),
        Some("closed") => Some(false),
        Some(s) => {
            return Err(ApiError::BadRequest(format!(
                "state: {s:?} is not open or closed"
            )));
        }
    };
    let since_ns = match &p.since {
        None => None,
        Some(s) => {
            let d = humantime::parse_duration(s)
                .map_err(|e| ApiError::BadRequest(format!("since: {s:?}: {e} (e.g. 1h)")))?;
            Some(kplane_model::unix_time_ns() as i64 - d.as_nanos() as i64)
        }
    };
    Ok(AnomalyFilter {
        anomaly_type: p.anomaly_type.as_deref(),
        entity_kind: p.entity_kind.as_deref(),
        entity: p.entity.as_deref(),
        open,
        since_ns,
    })
}

/// One line of the list: the explanation's summary and top features, not the blast radius.
fn summary(a: &Anomaly) -> Value {
    json!({
        "id": a.id,
        "entity_kind": a.entity_kind,
        "entity": a.entity,
        "type": a.anomaly_type,
        "confidence": a.confidence,
        "score": a.score,
        "threshold": a.threshold,
        "start_ns": a.start_ns,
        "end_ns": a.end_ns,
        "last_ns": a.last_ns,
        "windows": a.windows,
        "phase": a.phase,
        "settled": a.settled,
        "summary": a.explanation.summary,
        "features": a.explanation.features.iter().take(3).collect::<Vec<_>>(),
        "flows_affected": a.explanation.blast_radius.flows_total,
        "recommendations": a.recommendations.len(),
    })
}

/// `GET /v1/anomalies/stream`: the matching episodes' records as server-sent events.
async fn anomalies_stream(
    State(s): State<AppState>,
    Query(p): Query<AnomalyParams>,
) -> Result<Response, ApiError> {
    filter(&p)?;
    Ok(stream(s, p).into_response())
}

/// `GET /v1/anomalies`: episodes, most recently started first.
async fn anomalies(
    State(s): State<AppState>,
    Query(p): Query<AnomalyParams>,
) -> Result<Response, ApiError> {
    filter(&p)?;
    let limit = p.limit.unwrap_or(100).clamp(1, 10_000);
    let rows: Vec<Value> = s
        .live
        .findings
        .anomalies(&filter(&p)?, limit)
        .iter()
        .map(|a| summary(a))
        .collect();
    let (seen, _, undecodable) = s.live.findings.seen();
    Ok(
        Json(json!({ "anomalies": rows, "seen": seen, "undecodable": undecodable }))
            .into_response(),
    )
}

/// Every record of matching episodes as it arrives: `event: anomaly`, data the full record.
fn stream(
    s: AppState,
    p: AnomalyParams,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let rx = s.live.findings.subscribe();
    let until = s.clone();
    let stream = futures_util::stream::unfold((rx, p), |(mut rx, p)| async move {
        loop {
            match rx.recv().await {
                Ok(a) => {
                    // Checked by the handler: the filter parses.
                    if !filter(&p).is_ok_and(|f| f.matches(&a)) {
                        continue;
                    }
                    let data = serde_json::to_string(a.as_ref()).unwrap_or_default();
                    return Some((Ok(Event::default().event("anomaly").data(data)), (rx, p)));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(until.until_shutdown(stream)).keep_alive(KeepAlive::default())
}

/// `GET /v1/anomalies/{id}`: the whole record (explanation, blast radius, recommendations)
/// and the intents submitted for it.
async fn anomaly(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a: Arc<Anomaly> = s
        .live
        .findings
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("no anomaly {id}")))?;
    let intents: Vec<Value> = s
        .intents
        .for_anomaly(&id)
        .await
        .into_iter()
        .map(|i| json!({ "id": i.id, "kind": i.spec.kind.name(), "state": i.state.as_str() }))
        .collect();
    let mut v = serde_json::to_value(a.as_ref()).map_err(|e| ApiError::Internal(e.to_string()))?;
    v["intents"] = Value::Array(intents);
    Ok(Json(v))
}

#[derive(Debug, Default, Deserialize)]
pub struct ForecastParams {
    /// `link_utilization` or `destination_bytes`.
    pub series: Option<String>,
    pub entity: Option<String>,
    /// Windows of history per entity, 1..600 (default 60).
    pub windows: Option<usize>,
}

/// `GET /v1/forecasts`: per series and entity, each window's forecast beside what happened
/// (`actual`, once the window is over) and the baselines.
async fn forecasts(
    State(s): State<AppState>,
    Query(p): Query<ForecastParams>,
) -> Result<Json<Value>, ApiError> {
    const SERIES: [&str; 2] = ["link_utilization", "destination_bytes"];
    if let Some(x) = &p.series
        && !SERIES.contains(&x.as_str())
    {
        return Err(ApiError::BadRequest(format!(
            "series: {x:?} is not link_utilization or destination_bytes"
        )));
    }
    let windows = p
        .windows
        .unwrap_or(60)
        .clamp(1, crate::findings::FORECAST_HISTORY);
    let rows: Vec<Value> = s
        .live
        .findings
        .forecasts(p.series.as_deref(), p.entity.as_deref(), windows)
        .into_iter()
        .map(|(series, entity, h)| {
            // What window T turned out to be is the last value the next forecast saw.
            let actual = |t: i64| {
                h.iter()
                    .find(|f| f.observed_end_ns == t)
                    .map(|f| f.last_value)
            };
            let points: Vec<Value> = h
                .iter()
                .map(|f| {
                    json!({
                        "window_end_ns": f.window_end_ns,
                        "predicted": f.predicted,
                        "last_value": f.last_value,
                        "ewma": f.ewma,
                        "actual": actual(f.window_end_ns),
                        "model_version": f.model_version,
                    })
                })
                .collect();
            json!({ "series": series, "entity": entity, "points": points })
        })
        .collect();
    Ok(Json(json!({ "forecasts": rows })))
}

#[derive(Debug, Default, Deserialize)]
pub struct ModelParams {
    /// `true`: with each model's fitted parameters.
    pub detail: Option<bool>,
}

/// `GET /v1/models`: the knowledge service's model registry (`<knowledge-dir>/models.json`).
async fn models(
    State(s): State<AppState>,
    Query(p): Query<ModelParams>,
) -> Result<Json<Value>, ApiError> {
    let path = s.cfg.knowledge_dir.join("models.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Json(json!({
                "status": "learning",
                "message": format!("no model registry in {} yet: the knowledge service has not trained (or is not running)", s.cfg.knowledge_dir.display()),
                "version": 0,
                "models": [],
            })));
        }
        Err(e) => return Err(ApiError::Internal(format!("{}: {e}", path.display()))),
    };
    let mut v: Value = serde_json::from_str(&text)
        .map_err(|e| ApiError::Internal(format!("{}: {e}", path.display())))?;
    if p.detail != Some(true)
        && let Some(models) = v["models"].as_array_mut()
    {
        for m in models {
            if let Some(o) = m.as_object_mut() {
                o.remove("fitted");
            }
        }
    }
    Ok(Json(v))
}
