//! The incident routes (viewer): the list, one incident with its evidence, and the stream of
//! their changes (docs/incidents.md, docs/api.md).

use std::convert::Infallible;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Auth, Role, require};
use crate::error::ApiError;
use crate::incidents::{Incident, RootKind};
use crate::state::AppState;

pub fn router(auth: Auth) -> Router<AppState> {
    Router::new()
        .route("/v1/incidents", get(incidents))
        .route("/v1/incidents/stream", get(incidents_stream))
        .route("/v1/incidents/{id}", get(incident))
        .route_layer(axum::middleware::from_fn_with_state(
            (auth, Role::Viewer),
            require,
        ))
}

#[derive(Debug, Default, Deserialize)]
pub struct IncidentParams {
    /// `open` or `resolved`.
    pub state: Option<String>,
    /// `congestion`, `black_hole`, `ddos`, …
    pub kind: Option<String>,
    pub root_kind: Option<String>,
    /// At least this severe: `info`, `warning` or `critical`.
    pub severity: Option<String>,
    pub limit: Option<usize>,
}

/// The filter `p` asks for, or why it is wrong.
fn filter(p: &IncidentParams) -> Result<impl Fn(&Incident) -> bool + '_, ApiError> {
    let open = match p.state.as_deref() {
        None => None,
        Some("open") => Some(true),
        Some("resolved") => Some(false),
        Some(s) => {
            return Err(ApiError::BadRequest(format!(
                "state: {s:?} is not open or resolved"
            )));
        }
    };
    if let Some(k) = &p.root_kind
        && !RootKind::ALL.iter().any(|r| r.as_str() == k)
    {
        let known: Vec<&str> = RootKind::ALL.iter().map(|r| r.as_str()).collect();
        return Err(ApiError::BadRequest(format!(
            "root_kind: {k:?} is not one of {}",
            known.join(", ")
        )));
    }
    const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];
    let floor = match p.severity.as_deref() {
        None => 0,
        Some(s) => SEVERITIES.iter().position(|x| *x == s).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "severity: {s:?} is not one of info, warning, critical"
            ))
        })?,
    };
    Ok(move |i: &Incident| {
        open.is_none_or(|o| i.is_open() == o)
            && p.kind.as_deref().is_none_or(|k| i.kind == k)
            && p.root_kind
                .as_deref()
                .is_none_or(|k| i.root.kind.as_str() == k)
            && SEVERITIES
                .iter()
                .position(|x| *x == i.severity)
                .unwrap_or(0)
                >= floor
    })
}

/// `GET /v1/incidents`: most recently started first, with how many are open.
async fn incidents(
    State(s): State<AppState>,
    Query(p): Query<IncidentParams>,
) -> Result<Json<Value>, ApiError> {
    let keep = filter(&p)?;
    let limit = p.limit.unwrap_or(100).clamp(1, 10_000);
    let (rows, open, counts) = s.live.incidents.read(|b| {
        let rows: Vec<Value> = b.list(&keep, limit).iter().map(|i| i.summary()).collect();
        (rows, b.open_count(), b.counts)
    });
    Ok(Json(json!({
        "incidents": rows,
        "open": open,
        "opened": counts.opened,
        "resolved": counts.resolved,
        "breaches": counts.breaches,
    })))
}

/// `GET /v1/incidents/{id}`: the incident with every member kept, its top flows, paths and
/// timeline; anomaly members come with the knowledge service's explanation and recommended
/// intents.
async fn incident(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let mut detail = s
        .live
        .incidents
        .read(|b| b.get(&id).map(Incident::detail))
        .ok_or_else(|| ApiError::NotFound(format!("no incident {id:?} (it may have aged out)")))?;
    if let Some(members) = detail["member_list"].as_array_mut() {
        for m in members.iter_mut().filter(|m| m["source"] == "anomaly") {
            if let Some(a) = m["id"].as_str().and_then(|id| s.live.findings.get(id)) {
                m["explanation"] = json!(a.explanation);
                m["recommendations"] = json!(a.recommendations);
            }
        }
    }
    Ok(Json(detail))
}

/// `GET /v1/incidents/stream`: an `incident` event (`{"change": "open"|"update"|"resolve",
/// "incident": …}`) per change.
async fn incidents_stream(
    State(s): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    use tokio::sync::broadcast::error::RecvError;
    let rx = s.live.incidents.subscribe();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(n) => {
                    let data = json!({ "change": n.change, "incident": n.incident.as_ref() });
                    let event = Event::default().event("incident").data(data.to_string());
                    return Some((Ok(event), rx));
                }
                // A slow client missed some: go on with the newest.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(s.until_shutdown(stream)).keep_alive(KeepAlive::default())
}
