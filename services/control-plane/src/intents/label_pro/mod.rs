//! Pro's controller (int-label-distributed-labeling Algo. 3) in the service: each time the
//! processor's `int_label` windows advance, every known port is observed — stale when it
//! was not heard from for k telemetry intervals, or its labels were that far apart — and
//! [`Pro`] decides its S. An S above 0 is a `label-frequency` intent owned by
//! `int-label-pro` (`set_label_shift` on that port of that switch); a change deletes the
//! old intent and submits the new S; S back at 0 only deletes.

pub mod pro;

use std::collections::BTreeMap;
use std::time::Duration;

use kplane_runtime::Shutdown;
use serde::{Deserialize, Serialize};

use super::Intents;
use super::model::{IntentKind, IntentSpec, Origin};
use crate::label_ports::LabelPorts;
use kplane_runtime::auth::{Identity, Role};
use pro::{Pro, ProConfig};

/// The owner and actor of Pro's intents.
pub const OWNER: &str = "int-label-pro";

/// `[intent-api.intents.int-label-pro]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProControllerConfig {
    /// Off: ports keep the frequency their `int-label` intent gives them.
    pub enabled: bool,
    /// The telemetry interval (keep it equal to the collector's `int-label.interval`).
    #[serde(with = "humantime_serde")]
    pub telemetry_interval: Duration,
    /// A port not heard from for k telemetry intervals is stale: S + 1.
    pub k: u32,
    /// Fresh observations in a row before S − 1.
    pub relax: u32,
    /// The most S.
    pub max_shift: u8,
}

impl Default for ProControllerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            telemetry_interval: Duration::from_millis(100),
            k: 3,
            relax: 4,
            max_shift: 4,
        }
    }
}

impl ProControllerConfig {
    pub fn check(&self, problems: &mut Vec<String>) {
        let at = "intent-api.intents.int-label-pro";
        if self.telemetry_interval < Duration::from_millis(1) {
            problems.push(format!("{at}: telemetry-interval must be >= 1ms"));
        }
        if self.k == 0 || self.relax == 0 {
            problems.push(format!("{at}: k and relax must be >= 1"));
        }
        if self.max_shift > super::model::MAX_LABEL_SHIFT {
            problems.push(format!(
                "{at}: max-shift must be <= {}",
                super::model::MAX_LABEL_SHIFT
            ));
        }
    }

    fn stale_after_ns(&self) -> i64 {
        (self.telemetry_interval * self.k).as_nanos() as i64
    }
}

/// The intent giving (switch, port) its S.
fn spec(key: (u32, u32), shift: u8, why: String) -> IntentSpec {
    IntentSpec {
        kind: IntentKind::LabelFrequency {
            ports: vec![key.1],
            shift,
        },
        switches: Some(vec![key.0]),
        priority: 100,
        ttl: None,
        owner: OWNER.into(),
        reason: why,
        origin: Origin::Operator,
        anomaly: None,
    }
}

/// Runs until `shutdown` (returns at once when off).
pub async fn run(
    intents: Intents,
    ports: LabelPorts,
    cfg: ProControllerConfig,
    shutdown: Shutdown,
) {
    if !cfg.enabled {
        return;
    }
    let me = Identity {
        name: OWNER.into(),
        role: Role::Operator,
    };
    let mut pro = Pro::new(ProConfig {
        relax: cfg.relax,
        max_shift: cfg.max_shift,
    });
    // The intent carrying each raised port's S (what a previous run left included).
    let mut installed: BTreeMap<(u32, u32), String> = BTreeMap::new();
    for i in intents.list(None).await {
        if let (IntentKind::LabelFrequency { ports: p, shift }, Some(sw), false) =
            (&i.spec.kind, &i.spec.switches, i.state.ended())
            && i.spec.owner == OWNER
            && let ([port], [switch]) = (p.as_slice(), sw.as_slice())
        {
            pro.resume((*switch, *port), *shift);
            installed.insert((*switch, *port), i.id.clone());
        }
    }
    let stale_after = cfg.stale_after_ns();
    loop {
        tokio::select! {
            _ = ports.arrived() => {}
            _ = shutdown.wait() => return,
        }
        for o in ports.observations() {
            let key = o.key;
            let silent_ns = o.at_ns - o.last_received_ns;
            let stale = silent_ns > stale_after || o.gap_ns as i64 > stale_after;
            if let Some(shift) = pro.observe(key, stale) {
                let why = if stale {
                    format!(
                        "INT-label Pro: switch {} port {} not heard from for {} ms (k = {} telemetry intervals): S = {shift}",
                        key.0,
                        key.1,
                        silent_ns.max(o.gap_ns as i64) / 1_000_000,
                        cfg.k
                    )
                } else {
                    format!(
                        "INT-label Pro: switch {} port {} fresh for {} observations: S = {shift}",
                        key.0, key.1, cfg.relax
                    )
                };
                tracing::info!(switch = key.0, port = key.1, shift, stale, "INT-label Pro");
                // The old entry goes first: the port's `label_frequency` entry is
                // exact-match, one owner at a time (the switch runs at S = 0 for a reconcile
                // in between).
                if let Some(old) = installed.remove(&key) {
                    let _ = intents.delete(&old, &me).await;
                }
                if shift > 0 {
                    match intents.submit(spec(key, shift, why), &me).await {
                        Ok(v) => {
                            if let Some(id) = v["id"].as_str() {
                                installed.insert(key, id.to_string());
                            }
                        }
                        Err(e) => {
                            // The port is back at S = 0; the next observation decides again.
                            tracing::warn!(error = ?e, switch = key.0, port = key.1, "Pro's label-frequency intent refused");
                            pro.resume(key, 0);
                        }
                    }
                }
            }
            let f = pro.get(key).copied().unwrap_or_default();
            ports.set_frequency(key, f.shift, f.stale, installed.get(&key).cloned());
        }
    }
}
