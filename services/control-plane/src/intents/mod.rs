//! [`Intents`]: the handle the routes and controllers use — submit, approve, delete, the
//! policy, the audit log — over the persisted intents, their compiled entries and the switch
//! drivers; [`engine`] runs the reconcile loop, and the controllers (backpressure, the
//! knowledge service's recommendations, INT-label Pro, traffic engineering) submit intents
//! through it.

pub(crate) mod backpressure;
pub(crate) mod compile;
pub(crate) mod config;
pub(crate) mod engine;
pub mod label_pro;
pub mod model;
pub(crate) mod recommendations;
pub(crate) mod safety;
pub mod store;
pub(crate) mod traffic_engineering;
pub(crate) mod verify;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kplane_p4::{Entry, EntryKey};
use serde_json::{Value, json};
use tokio::sync::{Mutex, Notify};

use self::compile::{Entries, Index, compile};
use self::model::{IntentKind, IntentSpec, Origin};
use self::store::{AuditRecord, Intent, Policy, Snapshot, State, Store, now_ms};
use crate::error::ControlError;
use crate::telemetry::Telemetry;
use kplane_runtime::auth::{Identity, Role};
use kplane_southbound::{SwitchDriver, Topology};

pub use self::config::IntentsConfig;

/// Per switch: reachability and what kplane installed there.
#[derive(Debug, Default)]
pub(crate) struct SwitchState {
    pub status: String,
    pub epoch: Option<u64>,
    /// Entries kplane wrote and believes are there.
    pub managed: BTreeMap<EntryKey, Entry>,
    pub failures: u32,
    pub retry_at_ms: u64,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub store: Store,
    pub snap: Snapshot,
    pub topo: Topology,
    /// Switch → index into the drivers.
    pub route: HashMap<u32, usize>,
    pub compiled: HashMap<String, Entries>,
    pub index: Index,
    pub switches: BTreeMap<u32, SwitchState>,
    pub trackers: HashMap<String, verify::Tracker>,
}

impl Inner {
    pub(crate) fn audit(
        &self,
        actor: &str,
        action: &str,
        intent: &str,
        result: &str,
        detail: String,
    ) {
        let r = AuditRecord {
            time_ms: now_ms(),
            actor: actor.to_string(),
            action: action.to_string(),
            intent: intent.to_string(),
            result: result.to_string(),
            detail,
        };
        if let Err(e) = self.store.audit(&r) {
            tracing::error!(error = %e, "cannot append to the audit log");
        }
        tracing::info!(actor, action, intent, result, "intent audit");
    }

    pub(crate) fn save(&self) {
        if let Err(e) = self.store.save(&self.snap) {
            tracing::error!(error = %e, "cannot persist the intents");
        }
    }

    /// The index of every intent that holds or reserves entries.
    pub(crate) fn rebuild_index(&mut self) {
        let mut index = Index::default();
        for i in &self.snap.intents {
            if (i.state.installed() || i.state == State::PendingApproval)
                && let Some(e) = self.compiled.get(&i.id)
            {
                index.add(&i.id, e);
            }
        }
        self.index = index;
    }

    fn intent_mut(&mut self, id: &str) -> Result<&mut Intent, ControlError> {
        self.snap
            .intents
            .iter_mut()
            .find(|i| i.id == id)
            .ok_or_else(|| ControlError::NotFound(format!("no intent {id}")))
    }

    /// Whether `spec` submitted by `who` is applied at once rather than waiting for an admin:
    /// operators' intents and the policy's kinds are, unless wide (`blast_radius`), which an
    /// admin's own submission approves.
    fn applied_at_once(&self, spec: &IntentSpec, blast_radius: &[String], who: &Identity) -> bool {
        if blast_radius.is_empty() {
            spec.origin == Origin::Operator
                || self
                    .snap
                    .policy
                    .auto_apply
                    .iter()
                    .any(|k| k == spec.kind.name())
        } else {
            who.role == Role::Admin
        }
    }

    /// Compiles and checks `spec` as intent `id`; the entries, or why not.
    fn prepare(&self, id: &str, spec: &IntentSpec) -> Result<Entries, ControlError> {
        let problems = spec.check();
        if !problems.is_empty() {
            return Err(ControlError::Unprocessable(problems.join("; ")));
        }
        if self.topo.switches.is_empty() {
            return Err(ControlError::Unavailable(
                "no switch known yet: no driver configured ([[intent-api.intents.drivers]]) or none reachable"
                    .into(),
            ));
        }
        let info = kplane_p4::kplane();
        let entries = compile(info, spec, &self.topo)?;
        for (s, _) in &entries {
            if !self.route.contains_key(s) {
                return Err(ControlError::Unprocessable(format!(
                    "switches: no driver serves switch {s}"
                )));
            }
        }
        self.index.check(info, id, &entries)?;
        if let IntentKind::Reroute { dst, .. } = &spec.kind {
            self.index
                .check_loops(info, id, &entries, &self.topo, dst)?;
        }
        Ok(entries)
    }
}

/// The controllers that submit intents themselves: what they own, only they or an admin
/// delete.
pub const CONTROLLERS: [&str; 4] = [
    backpressure::OWNER,
    recommendations::ACTOR,
    label_pro::OWNER,
    traffic_engineering::OWNER,
];

/// The intents and the drivers that carry them out; cheap to clone.
#[derive(Clone)]
pub struct Intents {
    pub(crate) inner: Arc<Mutex<Inner>>,
    pub(crate) drivers: Arc<Vec<Box<dyn SwitchDriver>>>,
    pub(crate) wake: Arc<Notify>,
    pub(crate) cfg: Arc<IntentsConfig>,
    pub(crate) telemetry: Arc<dyn Telemetry>,
}

impl std::fmt::Debug for Intents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intents").finish_non_exhaustive()
    }
}

fn entry_json(e: &Entry) -> Value {
    serde_json::to_value(e.spec(kplane_p4::kplane())).unwrap_or(Value::Null)
}

impl Intents {
    /// Loads the persisted intents from `cfg.state_dir` and builds the drivers.
    pub fn open(cfg: IntentsConfig, telemetry: Arc<dyn Telemetry>) -> std::io::Result<Self> {
        let (store, snap) = Store::open(&cfg.state_dir)?;
        let drivers: Vec<Box<dyn SwitchDriver>> = cfg.drivers.iter().map(|d| d.build()).collect();
        let mut compiled = HashMap::new();
        let info = kplane_p4::kplane();
        for i in &snap.intents {
            if i.state.ended() {
                continue;
            }
            // The compiled entries persist with the intent: re-type them (a P4Info change
            // that no longer fits them is reported, and the intent waits).
            let entries: Result<Entries, _> = i
                .entries
                .iter()
                .map(|s| Entry::new(info, s).map(|e| (s.switch.unwrap_or(0), e)))
                .collect();
            match entries {
                Ok(e) => {
                    compiled.insert(i.id.clone(), e);
                }
                Err(e) => {
                    tracing::error!(intent = %i.id, error = %e, "stored intent no longer fits the P4Info")
                }
            }
        }
        let mut inner = Inner {
            store,
            snap,
            topo: Topology::default(),
            route: HashMap::new(),
            compiled,
            index: Index::default(),
            switches: BTreeMap::new(),
            trackers: HashMap::new(),
        };
        inner.rebuild_index();
        Ok(Self {
            inner: Arc::new(Mutex::new(inner)),
            drivers: Arc::new(drivers),
            wake: Arc::new(Notify::new()),
            cfg: Arc::new(cfg),
            telemetry,
        })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &IntentsConfig {
        &self.cfg
    }

    /// `POST /v1/intents`.
    pub async fn submit(
        &self,
        mut spec: IntentSpec,
        who: &Identity,
    ) -> Result<Value, ControlError> {
        if spec.owner.is_empty() {
            spec.owner = who.name.clone();
        }
        let mut g = self.inner.lock().await;
        let id = format!("i-{:06}", g.snap.next_id + 1);
        let entries = match g.prepare(&id, &spec) {
            Ok(e) => e,
            Err(e) => {
                let detail = e.refusal().unwrap_or_default().to_string();
                g.audit(
                    &who.name,
                    "submit",
                    "",
                    "refused",
                    format!("{}: {detail}", spec.kind.name()),
                );
                return Err(e);
            }
        };
        let blast_radius = match self.bounds(&g, &spec, who) {
            Ok(b) => b,
            Err(e) => {
                let detail = format!("{}: {e:?}", spec.kind.name());
                g.audit(&who.name, "submit", "", "refused", detail);
                return Err(e);
            }
        };
        g.snap.next_id += 1;
        // A wide intent waits for an admin (an admin's own submission is its approval).
        let auto = g.applied_at_once(&spec, &blast_radius, who);
        let now = now_ms();
        let info = kplane_p4::kplane();
        let intent = Intent {
            id: id.clone(),
            state: if auto {
                State::Applying
            } else {
                State::PendingApproval
            },
            created_ms: now,
            updated_ms: now,
            // Bounded by max-ttl: no wrap.
            expires_ms: spec
                .ttl
                .map(|t| now.saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))),
            applied_ms: None,
            submitted_by: who.name.clone(),
            approved_by: (auto && !blast_radius.is_empty()).then(|| who.name.clone()),
            blast_radius,
            entries: entries.iter().map(|(_, e)| e.spec(info)).collect(),
            switches: entries
                .iter()
                .map(|(s, _)| (*s, "pending".to_string()))
                .collect(),
            expected_effect: verify::expected_effect(&spec.kind),
            evidence: Vec::new(),
            spec,
        };
        let detail = format!(
            "{} ({} entries on {} switches){}",
            intent.spec.kind.name(),
            intent.entries.len(),
            intent.switches.len(),
            if intent.spec.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", intent.spec.reason)
            }
        );
        g.audit(&who.name, "submit", &id, intent.state.as_str(), detail);
        g.compiled.insert(id.clone(), entries);
        g.snap.intents.push(intent.clone());
        g.rebuild_index();
        g.save();
        drop(g);
        self.wake.notify_one();
        Ok(serde_json::to_value(&intent).unwrap_or(Value::Null))
    }

    /// The safety rules' verdict on `spec` ([`safety`]): why it is wide (it then waits for an
    /// admin), or why it is refused (a TTL past its bound).
    fn bounds(
        &self,
        g: &Inner,
        spec: &IntentSpec,
        who: &Identity,
    ) -> Result<Vec<String>, ControlError> {
        let s = &self.cfg.safety;
        if let Some(t) = spec.ttl
            && t > s.max_ttl
        {
            return Err(ControlError::Unprocessable(format!(
                "ttl: {} is longer than max-ttl ({})",
                humantime::format_duration(t),
                humantime::format_duration(s.max_ttl)
            )));
        }
        let wide = s.wide(spec, &g.topo);
        if !wide.is_empty() && spec.ttl.is_none_or(|t| t > s.wide_max_ttl) {
            return Err(ControlError::Unprocessable(format!(
                "ttl: this {} covers a wide share of the fabric ({}), so it needs a ttl of at most {}{}",
                spec.kind.name(),
                wide.join("; "),
                humantime::format_duration(s.wide_max_ttl),
                if who.role == Role::Admin {
                    ""
                } else {
                    ", and it will wait for an admin's approval"
                }
            )));
        }
        Ok(wide)
    }

    /// `POST /v1/intents/dry-run`: the per-switch diff `spec` would make, or why not.
    pub async fn dry_run(&self, spec: IntentSpec, who: &Identity) -> Result<Value, ControlError> {
        let g = self.inner.lock().await;
        let entries = g.prepare("dry-run", &spec)?;
        let blast_radius = self.bounds(&g, &spec, who)?;
        let mut diff: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
        for (s, e) in &entries {
            diff.entry(*s)
                .or_default()
                .push(json!({ "op": "insert", "entry": entry_json(e) }));
        }
        Ok(json!({
            "valid": true,
            "entries": entries.len(),
            "switches": diff,
            "expected_effect": verify::expected_effect(&spec.kind),
            "blast_radius": blast_radius,
            "would_be": if g.applied_at_once(&spec, &blast_radius, who) {
                "applying"
            } else {
                "pending-approval"
            },
        }))
    }

    pub async fn list(&self, state: Option<&str>) -> Vec<Intent> {
        let g = self.inner.lock().await;
        g.snap
            .intents
            .iter()
            .filter(|i| state.is_none_or(|s| i.state.as_str() == s))
            .cloned()
            .collect()
    }

    /// The intents submitted for anomaly `id` (its recommendations).
    pub async fn for_anomaly(&self, id: &str) -> Vec<Intent> {
        let g = self.inner.lock().await;
        g.snap
            .intents
            .iter()
            .filter(|i| i.spec.anomaly.as_deref() == Some(id))
            .cloned()
            .collect()
    }

    /// Records in the audit log a request refused before it became an intent.
    pub async fn refuse(&self, actor: &str, detail: &str) {
        self.inner
            .lock()
            .await
            .audit(actor, "submit", "", "refused", detail.to_string());
    }

    pub async fn get(&self, id: &str) -> Result<Intent, ControlError> {
        let mut g = self.inner.lock().await;
        g.intent_mut(id).map(|i| i.clone())
    }

    /// `DELETE /v1/intents/{id}`: its entries are removed from the switches.
    /// Intents an admin approved, or that a controller submitted, are deleted only by an admin
    /// (or by the controller itself).
    pub async fn delete(&self, id: &str, who: &Identity) -> Result<Intent, ControlError> {
        let mut g = self.inner.lock().await;
        let i = g.intent_mut(id)?;
        let guarded = if let Some(a) = &i.approved_by {
            Some(format!("an admin ({a}) approved it"))
        } else if CONTROLLERS.contains(&i.submitted_by.as_str()) && who.name != i.submitted_by {
            Some(format!("the {} controller owns it", i.submitted_by))
        } else {
            None
        };
        if let Some(why) = guarded
            && who.role < Role::Admin
        {
            return Err(ControlError::Forbidden(format!(
                "intent {id}: {why}; only an admin may delete it"
            )));
        }
        if i.state.ended() {
            return Err(ControlError::Conflict(format!(
                "intent {id} is already {}",
                i.state.as_str()
            )));
        }
        i.state = State::Deleted;
        i.updated_ms = now_ms();
        let out = i.clone();
        g.audit(&who.name, "delete", id, "deleted", String::new());
        g.rebuild_index();
        g.save();
        drop(g);
        self.wake.notify_one();
        Ok(out)
    }

    /// A controller's judgement that an applied intent did not have its effect (traffic
    /// engineering: the link is still hot): rolled back like a failed verification, `why`
    /// as its evidence.
    pub async fn roll_back(&self, id: &str, actor: &str, why: &str) -> Result<(), ControlError> {
        let mut g = self.inner.lock().await;
        let i = g.intent_mut(id)?;
        if i.state.ended() {
            return Err(ControlError::Conflict(format!(
                "intent {id} is already {}",
                i.state.as_str()
            )));
        }
        i.state = State::RolledBack;
        i.updated_ms = now_ms();
        i.evidence.push(why.to_string());
        g.audit(actor, "verify", id, "rolled-back", why.to_string());
        g.rebuild_index();
        g.save();
        drop(g);
        self.wake.notify_one();
        Ok(())
    }

    /// `POST /v1/intents/{id}/approve` (admin): a pending recommendation is applied.
    pub async fn approve(&self, id: &str, who: &Identity) -> Result<Intent, ControlError> {
        let mut g = self.inner.lock().await;
        let spec = {
            let i = g.intent_mut(id)?;
            if i.state != State::PendingApproval {
                return Err(ControlError::Conflict(format!(
                    "intent {id} is {}, not pending-approval",
                    i.state.as_str()
                )));
            }
            i.spec.clone()
        };
        // The fabric may have changed since it was submitted: compile and check again.
        let entries = g.prepare(id, &spec)?;
        let info = kplane_p4::kplane();
        let i = g.intent_mut(id)?;
        i.state = State::Applying;
        i.approved_by = Some(who.name.clone());
        i.updated_ms = now_ms();
        i.entries = entries.iter().map(|(_, e)| e.spec(info)).collect();
        i.switches = entries
            .iter()
            .map(|(s, _)| (*s, "pending".to_string()))
            .collect();
        let out = i.clone();
        g.compiled.insert(id.to_string(), entries);
        g.audit(&who.name, "approve", id, "applying", String::new());
        g.rebuild_index();
        g.save();
        drop(g);
        self.wake.notify_one();
        Ok(out)
    }

    pub async fn policy(&self) -> Policy {
        self.inner.lock().await.snap.policy.clone()
    }

    /// `PUT /v1/intents/policy` (admin).
    pub async fn set_policy(&self, p: Policy, who: &Identity) -> Result<Policy, ControlError> {
        for k in &p.auto_apply {
            if !["monitor", "block", "reroute", "tune"].contains(&k.as_str()) {
                return Err(ControlError::Unprocessable(format!(
                    "auto-apply: {k:?} is not monitor, block, reroute or tune"
                )));
            }
        }
        let mut g = self.inner.lock().await;
        g.snap.policy = p.clone();
        g.audit(
            &who.name,
            "set-policy",
            "",
            "ok",
            format!("auto-apply {:?}", p.auto_apply),
        );
        g.save();
        Ok(p)
    }

    /// `GET /v1/audit`: newest first.
    pub async fn audit_log(
        &self,
        intent: Option<&str>,
        actor: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, ControlError> {
        let g = self.inner.lock().await;
        g.store
            .audit_log(limit, |r| {
                intent.is_none_or(|i| r.intent == i) && actor.is_none_or(|a| r.actor == a)
            })
            .map_err(|e| ControlError::Internal(e.to_string()))
    }

    /// The fabric as the drivers last reported it.
    pub async fn topology(&self) -> Topology {
        self.inner.lock().await.topo.clone()
    }

    /// `GET /v1/intents/switches`: per switch its driver, reachability and entries.
    pub async fn switches(&self) -> Value {
        let g = self.inner.lock().await;
        let rows: Vec<Value> = g
            .topo
            .switches
            .iter()
            .map(|s| {
                let st = g.switches.get(&s.id);
                json!({
                    "switch": s.id,
                    "name": s.name,
                    "driver": g.route.get(&s.id).map(|d| self.drivers[*d].kind()),
                    "status": st.map_or("unknown", |x| x.status.as_str()),
                    "entries": st.map_or(0, |x| x.managed.len()),
                    "epoch": st.and_then(|x| x.epoch),
                })
            })
            .collect();
        json!({ "switches": rows })
    }
}
