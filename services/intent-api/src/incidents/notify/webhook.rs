//! A generic webhook: every incident change POSTed as
//! `{"change": "open"|"update"|"resolve", "incident": <summary>}`.

use std::sync::Arc;

use serde_json::json;

use super::Sink;
use crate::incidents::News;
use crate::incidents::config::IncidentsConfig;

#[derive(Debug)]
struct Webhook;

pub fn make(_: &IncidentsConfig) -> Box<dyn Sink> {
    Box::new(Webhook)
}

impl Sink for Webhook {
    fn bodies(&mut self, news: &[Arc<News>]) -> Vec<(String, u64)> {
        news.iter()
            .map(|n| {
                let body = json!({ "change": n.change, "incident": n.incident.as_ref() });
                (body.to_string(), 1)
            })
            .collect()
    }
}
