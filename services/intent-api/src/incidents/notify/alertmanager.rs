//! Prometheus Alertmanager, through its v2 API (`POST /api/v2/alerts`): one alert per
//! incident, identified by its `incident_id` label (so Alertmanager deduplicates it), with
//! `endsAt` once it resolves. Open incidents are sent again every `resend`, as Prometheus
//! does, so that Alertmanager does not resolve them on its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::Sink;
use crate::incidents::News;
use crate::incidents::config::IncidentsConfig;

#[derive(Debug)]
struct Alertmanager {
    fabric: String,
    console: String,
    /// Open incidents' alerts, by incident id (what a refresh sends again).
    open: BTreeMap<String, Value>,
}

pub fn make(cfg: &IncidentsConfig) -> Box<dyn Sink> {
    Box::new(Alertmanager {
        fabric: cfg.fabric.clone(),
        console: cfg.console_url.trim_end_matches('/').to_string(),
        open: BTreeMap::new(),
    })
}

fn rfc3339(ns: i64) -> String {
    let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

impl Alertmanager {
    /// The alert of an incident's summary ([`crate::incidents::Incident::summary`]).
    fn alert(&self, i: &Value) -> Value {
        let id = i["id"].as_str().unwrap_or_default();
        let mut labels = json!({
            "alertname": "KplaneIncident",
            "incident_id": id,
            "severity": i["severity"],
            "kind": i["kind"],
            "root_kind": i["root"]["kind"],
            "root": i["root"]["entity"],
            "fabric": self.fabric,
        });
        if matches!(i["root"]["kind"].as_str(), Some("switch" | "link"))
            && let Some(switch) = i["root"]["entity"]
                .as_str()
                .and_then(|e| e.split(':').next())
        {
            labels["switch"] = switch.into();
        }
        let link = format!("{}/#incident={id}", self.console);
        let mut alert = json!({
            "labels": labels,
            "annotations": {
                "summary": i["summary"],
                "console": link,
            },
            "startsAt": rfc3339(i["start_ns"].as_i64().unwrap_or(0)),
            "generatorURL": link,
        });
        if let Some(end) = i["end_ns"].as_i64() {
            alert["endsAt"] = rfc3339(end).into();
        }
        alert
    }
}

impl Sink for Alertmanager {
    fn bodies(&mut self, news: &[Arc<News>]) -> Vec<(String, u64)> {
        // The latest news of each incident in the batch.
        let mut latest: BTreeMap<String, Value> = BTreeMap::new();
        for n in news {
            let id = n.incident["id"].as_str().unwrap_or_default().to_string();
            let alert = self.alert(&n.incident);
            if n.change.ends() {
                self.open.remove(&id);
            } else {
                self.open.insert(id.clone(), alert.clone());
            }
            latest.insert(id, alert);
        }
        let body = Value::Array(latest.into_values().collect()).to_string();
        vec![(body, news.len() as u64)]
    }

    fn refresh(&mut self) -> Option<String> {
        (!self.open.is_empty())
            .then(|| Value::Array(self.open.values().cloned().collect()).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::Change;

    #[test]
    fn an_incident_is_one_alert_labelled_for_routing_and_ended_when_it_resolves() {
        let mut am = Alertmanager {
            fabric: "lab".into(),
            console: "http://kplane:8080".into(),
            open: BTreeMap::new(),
        };
        let summary = json!({
            "id": "switch-1000000000-1c0d2e3f", "severity": "critical", "kind": "congestion",
            "root": {"kind": "switch", "entity": "5"}, "summary": "congestion at switch 5",
            "start_ns": 1_000_000_000i64, "end_ns": null,
        });
        let open = Arc::new(News {
            change: Change::Open,
            incident: Arc::new(summary.clone()),
        });
        let body: Value = serde_json::from_str(&am.bodies(&[open])[0].0).unwrap();
        let a = &body[0];
        assert_eq!(a["labels"]["incident_id"], "switch-1000000000-1c0d2e3f");
        assert_eq!(a["labels"]["switch"], "5");
        assert_eq!(a["labels"]["fabric"], "lab");
        assert_eq!(a["startsAt"], "1970-01-01T00:00:01.000Z");
        assert!(a.get("endsAt").is_none());
        assert_eq!(
            a["annotations"]["console"],
            "http://kplane:8080/#incident=switch-1000000000-1c0d2e3f"
        );
        assert!(am.refresh().is_some(), "an open incident is sent again");
        let mut ended = summary;
        ended["end_ns"] = 3_000_000_000i64.into();
        let resolve = Arc::new(News {
            change: Change::Resolve,
            incident: Arc::new(ended),
        });
        let body: Value = serde_json::from_str(&am.bodies(&[resolve])[0].0).unwrap();
        assert_eq!(body[0]["endsAt"], "1970-01-01T00:00:03.000Z");
        assert!(am.refresh().is_none());
    }
}
