//! The intent routes: submit, dry-run, list, show, delete, approve, the policy, the switches'
//! status and the audit log (docs/intents.md, docs/api.md).

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use kplane_runtime::auth::{Auth, Identity, Role, require};
use kplane_runtime::limits::Limits;

use crate::error::ControlError;
use crate::intents::Intents;
use crate::intents::model::IntentSpec;
use crate::intents::store::Policy;

/// What the routes share.
#[derive(Clone, Debug)]
pub(crate) struct Routes {
    pub intents: Intents,
    pub limits: Limits,
    /// Intent changes (submit, dry-run, delete, approve) one token may make per minute.
    pub intent_rate: u32,
    /// What the probe monitor found last, per probe-plan intent.
    pub probe_findings: crate::probe_plans::Findings,
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ControlError> {
    b.map(|Json(v)| v)
        .map_err(|e| ControlError::BadRequest(e.body_text()))
}

/// The intent routes, each behind its role.
pub(crate) fn router(auth: Auth) -> Router<Routes> {
    let role = |r| axum::middleware::from_fn_with_state((auth.clone(), r), require);
    let viewer = Router::new()
        .route("/v1/intents", get(list))
        .route("/v1/intents/switches", get(switches))
        .route("/v1/intents/policy", get(policy))
        .route("/v1/intents/{id}", get(show))
        .route("/v1/audit", get(audit))
        .route_layer(role(Role::Viewer));
    let operator = Router::new()
        .route("/v1/intents", post(submit))
        .route("/v1/intents/dry-run", post(dry_run))
        .route("/v1/intents/{id}", axum::routing::delete(delete))
        .route_layer(role(Role::Operator));
    let admin = Router::new()
        .route("/v1/intents/{id}/approve", post(approve))
        .route("/v1/intents/policy", axum::routing::put(set_policy))
        .route_layer(role(Role::Admin));
    viewer.merge(operator).merge(admin)
}

#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    pub state: Option<String>,
}

async fn list(
    State(s): State<Routes>,
    Query(p): Query<ListParams>,
) -> Result<Json<Value>, ControlError> {
    const STATES: [&str; 8] = [
        "pending-approval",
        "applying",
        "verifying",
        "active",
        "failed",
        "rolled-back",
        "expired",
        "deleted",
    ];
    if let Some(st) = &p.state
        && !STATES.contains(&st.as_str())
    {
        return Err(ControlError::BadRequest(format!(
            "state: {st:?} is not one of {}",
            STATES.join(", ")
        )));
    }
    let intents = s.intents.list(p.state.as_deref()).await;
    Ok(Json(json!({ "intents": intents })))
}

async fn show(
    State(s): State<Routes>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ControlError> {
    let i = s.intents.get(&id).await?;
    Ok(Json(serde_json::to_value(i).unwrap_or(Value::Null)))
}

async fn submit(
    State(s): State<Routes>,
    Extension(who): Extension<Identity>,
    b: Result<Json<IntentSpec>, JsonRejection>,
) -> Result<(axum::http::StatusCode, Json<Value>), ControlError> {
    s.limits.spend(&who, "intent changes", s.intent_rate)?;
    let spec = body(b)?;
    let v = s.intents.submit(spec, &who).await?;
    Ok((axum::http::StatusCode::CREATED, Json(v)))
}

async fn dry_run(
    State(s): State<Routes>,
    Extension(who): Extension<Identity>,
    b: Result<Json<IntentSpec>, JsonRejection>,
) -> Result<Json<Value>, ControlError> {
    s.limits.spend(&who, "intent changes", s.intent_rate)?;
    Ok(Json(s.intents.dry_run(body(b)?, &who).await?))
}

async fn delete(
    State(s): State<Routes>,
    Extension(who): Extension<Identity>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ControlError> {
    s.limits.spend(&who, "intent changes", s.intent_rate)?;
    let i = s.intents.delete(&id, &who).await?;
    Ok(Json(serde_json::to_value(i).unwrap_or(Value::Null)))
}

async fn approve(
    State(s): State<Routes>,
    Extension(who): Extension<Identity>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ControlError> {
    s.limits.spend(&who, "intent changes", s.intent_rate)?;
    let i = s.intents.approve(&id, &who).await?;
    Ok(Json(serde_json::to_value(i).unwrap_or(Value::Null)))
}

async fn policy(State(s): State<Routes>) -> Json<Policy> {
    Json(s.intents.policy().await)
}

async fn set_policy(
    State(s): State<Routes>,
    Extension(who): Extension<Identity>,
    b: Result<Json<Policy>, JsonRejection>,
) -> Result<Json<Policy>, ControlError> {
    Ok(Json(s.intents.set_policy(body(b)?, &who).await?))
}

async fn switches(State(s): State<Routes>) -> Json<Value> {
    Json(s.intents.switches().await)
}

#[derive(Debug, Default, Deserialize)]
pub struct AuditParams {
    pub intent: Option<String>,
    pub actor: Option<String>,
    pub limit: Option<usize>,
}

async fn audit(
    State(s): State<Routes>,
    Query(p): Query<AuditParams>,
) -> Result<Json<Value>, ControlError> {
    let limit = p.limit.unwrap_or(100).clamp(1, 10_000);
    let records = s
        .intents
        .audit_log(p.intent.as_deref(), p.actor.as_deref(), limit)
        .await?;
    Ok(Json(json!({ "audit": records })))
}
