//! The knowledge service's recommendations become intents: every new anomaly's recommended
//! intent documents (`int.anomalies`) are submitted with `origin: recommendation`, so the
//! policy decides whether they apply at once or wait for an admin, and verification rolls
//! back those whose effect does not show. This closes the loop telemetry → knowledge →
//! intent → P4 entries → verified effect.

use std::sync::Arc;
use std::time::Duration;

use kplane_model::results::{Anomaly, AnomalyPhase};
use kplane_runtime::Shutdown;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::Intents;
use super::model::{IntentKind, IntentSpec, Origin};
use super::store::State;
use kplane_runtime::auth::{Identity, Role};

/// The actor the audit log names for these intents.
pub const ACTOR: &str = "knowledge";

/// The intent specs `a` recommends, or why one is unusable. Whatever the document says, its
/// origin is `recommendation` and it names the anomaly.
pub fn specs(a: &Anomaly) -> Vec<Result<IntentSpec, String>> {
    a.recommendations
        .iter()
        .map(|doc| {
            let mut spec: IntentSpec =
                serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
            spec.origin = Origin::Recommendation;
            spec.anomaly = Some(a.id.clone());
            if spec.owner.is_empty() {
                spec.owner = ACTOR.into();
            }
            Ok(spec)
        })
        .collect()
}

/// Submits the recommendations of anomalies as they are raised, until `shutdown`. Records
/// older than `max_age` (a replay after a restart) are not acted on; a recommendation already
/// submitted for the same anomaly is not submitted again.
/// Subscribes before the caller spawns it, so nothing raised in between is missed.
pub fn run(
    intents: Intents,
    telemetry: &dyn crate::telemetry::Telemetry,
    max_age: Duration,
    shutdown: Shutdown,
) -> impl Future<Output = ()> + use<> {
    follow(intents, telemetry.anomalies(), max_age, shutdown)
}

async fn follow(
    intents: Intents,
    mut rx: broadcast::Receiver<Arc<Anomaly>>,
    max_age: Duration,
    shutdown: Shutdown,
) {
    let me = Identity {
        name: ACTOR.into(),
        role: Role::Operator,
    };
    loop {
        let a = tokio::select! {
            r = rx.recv() => match r {
                Ok(a) => a,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "anomalies arrived faster than recommendations were submitted; some were skipped");
                    continue;
                }
                Err(RecvError::Closed) => return,
            },
            () = shutdown.wait() => return,
        };
        if a.phase == AnomalyPhase::End || a.recommendations.is_empty() {
            continue;
        }
        // Fresh: raised recently, or an update of a window that just ended (a long attack's
        // later attackers).
        let age_ns = kplane_model::unix_time_ns() as i64 - a.detected_ns.max(a.last_ns);
        if age_ns > max_age.as_nanos() as i64 {
            continue;
        }
        let done = intents.for_anomaly(&a.id).await;
        // What another intent already asks for (an attacker blocked through its own anomaly)
        // is not asked for again.
        let standing: Vec<IntentKind> = intents
            .list(None)
            .await
            .into_iter()
            .filter(|i| {
                matches!(
                    i.state,
                    State::PendingApproval | State::Applying | State::Verifying | State::Active
                )
            })
            .map(|i| i.spec.kind)
            .collect();
        for spec in specs(&a) {
            let spec = match spec {
                Ok(s) => s,
                Err(e) => {
                    intents
                        .refuse(ACTOR, &format!("anomaly {}: recommendation: {e}", a.id))
                        .await;
                    continue;
                }
            };
            if done.iter().any(|i| i.spec.kind == spec.kind) || standing.contains(&spec.kind) {
                continue;
            }
            match intents.submit(spec, &me).await {
                Ok(i) => tracing::info!(
                    anomaly = %a.id,
                    intent = %i["id"].as_str().unwrap_or_default(),
                    state = %i["state"].as_str().unwrap_or_default(),
                    "recommendation submitted"
                ),
                // Refused (a conflict, no switch serves it): the audit log says why.
                Err(e) => tracing::warn!(anomaly = %a.id, error = ?e, "recommendation refused"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kplane_model::results::{AnomalyType, EntityKind, Explanation};
    use serde_json::json;

    use super::*;
    use crate::intents::model::IntentKind;

    #[test]
    fn recommendations_are_recommendations_of_their_anomaly_whatever_they_say() {
        let a = Anomaly {
            id: "destination:10.0.0.2:1".into(),
            entity_kind: EntityKind::Destination,
            entity: "10.0.0.2".into(),
            anomaly_type: AnomalyType::Ddos,
            confidence: 1.0,
            score: 9.0,
            threshold: 3.0,
            start_ns: 1,
            end_ns: None,
            last_ns: 1,
            windows: 1,
            detected_ns: 1,
            phase: AnomalyPhase::Start,
            model_version: 1,
            explanation: Explanation::default(),
            recommendations: vec![
                json!({"kind": "block", "match": {"src": "10.0.1.5/32", "dst": "10.0.0.2/32"},
                       "origin": "operator", "reason": "DDoS"}),
                json!({"kind": "block"}),
            ],
            settled: false,
        };
        let s = specs(&a);
        let first = s[0].as_ref().unwrap();
        assert_eq!(first.origin, Origin::Recommendation);
        assert_eq!(first.anomaly.as_deref(), Some("destination:10.0.0.2:1"));
        assert_eq!(first.owner, ACTOR);
        assert!(matches!(first.kind, IntentKind::Block { .. }));
        assert!(s[1].as_ref().unwrap_err().contains("match"));
    }
}
