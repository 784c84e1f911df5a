//! The reconcile loop. Every `reconcile-interval` (and at once after a change) it expires
//! intents past their TTL, reads every switch back, writes the difference between what the
//! installed intents want and what the switch holds (inserts, modifies, and deletes of
//! entries kplane wrote that no intent wants any more), and moves intents along:
//! applying → verifying (written on every switch) → active (effect seen) or rolled back.
//!
//! A switch that cannot be reached keeps its intents `applying`, retried with back-off; a
//! switch that refuses an intent's entries fails that intent, and the next pass removes the
//! entries the other switches took. A restarted switch (new epoch) or drift (an entry gone
//! or changed behind kplane's back) is re-pushed and recorded in the audit log.
//!
//! A switch that holds nothing of kplane's is still visited every pass, and provisioned
//! ([`kplane_southbound::SwitchDriver::provision`]): a P4Runtime switch gets its pipeline and
//! configured entries at start and after a restart, without waiting for an intent.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kplane_p4::{Entry, EntryKey};
use kplane_runtime::Shutdown;

use super::store::{State, now_ms};
use super::verify::{self, Tracker, Verdict};
use super::{Intents, SwitchState};
use kplane_southbound::{DriverError, Topology, UpdateKind};

/// Runs until `shutdown`.
pub async fn run(intents: Intents, shutdown: Shutdown) {
    let mut topo_at: Option<Instant> = None;
    loop {
        let empty = intents.inner.lock().await.topo.switches.is_empty();
        if empty || topo_at.is_none_or(|t| t.elapsed() >= intents.cfg.topology_refresh) {
            refresh_topology(&intents).await;
            topo_at = Some(Instant::now());
        }
        reconcile(&intents).await;
        // An intent being verified is checked as soon as fresh flows arrive.
        let verifying = intents
            .inner
            .lock()
            .await
            .snap
            .intents
            .iter()
            .any(|i| i.state == State::Verifying);
        tokio::select! {
            _ = tokio::time::sleep(intents.cfg.reconcile_interval) => {}
            _ = intents.wake.notified() => {}
            () = intents.telemetry.flows_arrived(), if verifying => {}
            _ = shutdown.wait() => break,
        }
    }
}

/// Asks every driver for its switches and links.
pub async fn refresh_topology(intents: &Intents) {
    let mut topo = Topology::default();
    let mut route = HashMap::new();
    for (i, d) in intents.drivers.iter().enumerate() {
        match d.topology().await {
            Ok(t) => {
                for s in &t.switches {
                    route.insert(s.id, i);
                }
                topo.switches.extend(t.switches);
                topo.links.extend(t.links);
            }
            Err(e) => tracing::warn!(driver = d.kind(), error = %e, "topology unavailable"),
        }
    }
    let mut g = intents.inner.lock().await;
    if !topo.switches.is_empty() || g.topo.switches.is_empty() {
        g.topo = topo;
        g.route = route;
    }
}

struct Job {
    switch: u32,
    driver: usize,
    desired: BTreeMap<EntryKey, (Entry, String)>,
    managed: BTreeMap<EntryKey, Entry>,
    epoch: Option<u64>,
}

struct Outcome {
    switch: u32,
    epoch: Option<u64>,
    restarted: bool,
    drift: Vec<String>,
    /// (kind, owner intent) per written update.
    written: Vec<(UpdateKind, Option<String>)>,
    error: Option<DriverError>,
    desired: BTreeMap<EntryKey, Entry>,
}

/// One pass: expiry, read back and write the difference, lifecycle.
pub async fn reconcile(intents: &Intents) {
    let now = now_ms();
    let jobs = plan(intents, now).await;
    let mut outcomes = Vec::with_capacity(jobs.len());
    for job in jobs {
        outcomes.push(execute(intents, job).await);
    }
    settle(intents, outcomes, now).await;
}

async fn plan(intents: &Intents, now: u64) -> Vec<Job> {
    let mut g = intents.inner.lock().await;
    let mut expired = false;
    for i in g.snap.intents.iter_mut() {
        if (i.state.installed() || i.state == State::PendingApproval)
            && i.expires_ms.is_some_and(|t| t <= now)
        {
            i.state = State::Expired;
            i.updated_ms = now;
            expired = true;
        }
    }
    if expired {
        let ids: Vec<String> = g
            .snap
            .intents
            .iter()
            .filter(|i| i.state == State::Expired && i.updated_ms == now)
            .map(|i| i.id.clone())
            .collect();
        for id in ids {
            g.audit("kplane", "expire", &id, "expired", "its ttl passed".into());
        }
        g.rebuild_index();
        g.save();
    }
    let mut desired: BTreeMap<u32, BTreeMap<EntryKey, (Entry, String)>> = BTreeMap::new();
    for i in g.snap.intents.iter().filter(|i| i.state.installed()) {
        for (s, e) in g.compiled.get(&i.id).into_iter().flatten() {
            desired
                .entry(*s)
                .or_default()
                .insert(e.key.clone(), (e.clone(), i.id.clone()));
        }
    }
    // Every switch the drivers serve, intents or not: those without entries are provisioned.
    let mut switches: Vec<u32> = g.route.keys().copied().collect();
    switches.extend(desired.keys().copied());
    switches.extend(
        g.switches
            .iter()
            .filter(|(_, st)| !st.managed.is_empty())
            .map(|(s, _)| *s),
    );
    switches.sort_unstable();
    switches.dedup();
    switches
        .into_iter()
        .filter_map(|s| {
            let st = g.switches.get(&s);
            if st.is_some_and(|st| st.retry_at_ms > now) {
                return None;
            }
            Some(Job {
                switch: s,
                driver: *g.route.get(&s)?,
                desired: desired.remove(&s).unwrap_or_default(),
                managed: st.map(|st| st.managed.clone()).unwrap_or_default(),
                epoch: st.and_then(|st| st.epoch),
            })
        })
        .collect()
}

impl Outcome {
    /// The switch's epoch now (when its driver says): a new one after a known one is a
    /// restart.
    fn observe_epoch(&mut self, before: Option<u64>, now: Option<u64>) {
        if let Some(now) = now {
            self.restarted = before.is_some_and(|b| b != now);
            self.epoch = Some(now);
        }
    }
}

async fn execute(intents: &Intents, job: Job) -> Outcome {
    let driver = &intents.drivers[job.driver];
    let info = kplane_p4::kplane();
    let mut out = Outcome {
        switch: job.switch,
        epoch: job.epoch,
        restarted: false,
        drift: Vec::new(),
        written: Vec::new(),
        error: None,
        desired: job
            .desired
            .iter()
            .map(|(k, (e, _))| (k.clone(), e.clone()))
            .collect(),
    };
    if job.desired.is_empty() && job.managed.is_empty() {
        // Nothing of ours on it: only make sure it is ready (pipeline, configured entries).
        match driver.provision(job.switch).await {
            Ok(epoch) => out.observe_epoch(job.epoch, epoch),
            Err(e) => out.error = Some(e),
        }
        return out;
    }
    let read = match driver.read(job.switch).await {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    out.observe_epoch(job.epoch, Some(read.epoch));
    let present: HashMap<&EntryKey, &Entry> = read.entries.iter().map(|e| (&e.key, e)).collect();
    let mut updates = Vec::new();
    for (k, (e, id)) in &job.desired {
        let kind = match present.get(k) {
            None => UpdateKind::Insert,
            Some(p) if p.action != e.action || p.params != e.params => UpdateKind::Modify,
            Some(_) => continue,
        };
        if !out.restarted
            && job
                .managed
                .get(k)
                .is_some_and(|m| m.action == e.action && m.params == e.params)
        {
            let what = if kind == UpdateKind::Insert {
                "missing"
            } else {
                "changed"
            };
            out.drift.push(format!(
                "{} entry of {id} {what}",
                info.tables[k.table].name
            ));
        }
        updates.push((kind, e.clone()));
        out.written.push((kind, Some(id.clone())));
    }
    for (k, e) in &job.managed {
        if !job.desired.contains_key(k) && present.contains_key(k) {
            updates.push((UpdateKind::Delete, e.clone()));
            out.written.push((UpdateKind::Delete, None));
        }
    }
    if !updates.is_empty()
        && let Err(e) = driver.write(job.switch, updates).await
    {
        out.error = Some(e);
    }
    out
}

async fn settle(intents: &Intents, outcomes: Vec<Outcome>, now: u64) {
    let mut g = intents.inner.lock().await;
    let mut changed = false;
    let mut ended = false;
    for o in outcomes {
        let st = g
            .switches
            .entry(o.switch)
            .or_insert_with(SwitchState::default);
        let mut failed_owners: Vec<(String, String)> = Vec::new();
        let mut intent_status: Option<String> = Some("installed".into());
        match &o.error {
            None => {
                st.status = "ok".into();
                st.failures = 0;
                st.retry_at_ms = 0;
                st.epoch = o.epoch;
                st.managed = o.desired.clone();
            }
            // Unreachable, or a read that failed: the switch, not an intent, is at fault.
            Some(e) if e.retryable || o.written.is_empty() => {
                tracing::warn!(switch = o.switch, error = %e, "switch not reconciled; retrying");
                st.failures = st.failures.saturating_add(1);
                let backoff = intents
                    .cfg
                    .reconcile_interval
                    .saturating_mul(1 << st.failures.min(10))
                    .min(intents.cfg.max_backoff);
                st.retry_at_ms = now + backoff.as_millis() as u64;
                st.status = format!(
                    "unreachable: {e} (retry in {})",
                    humantime::format_duration(Duration::from_millis(backoff.as_millis() as u64))
                );
                intent_status = Some(format!("unreachable: {e}"));
            }
            Some(e) => {
                tracing::warn!(switch = o.switch, error = %e, "switch refused updates");
                st.status = format!("refused: {e}");
                st.epoch = o.epoch;
                // What the switch holds is read back next pass; until then assume the worst.
                for (k, v) in &o.desired {
                    st.managed.insert(k.clone(), v.clone());
                }
                let mut owners: Vec<String> = e
                    .failed
                    .iter()
                    .filter_map(|i| o.written.get(*i).and_then(|w| w.1.clone()))
                    .collect();
                if owners.is_empty() {
                    owners = o.written.iter().filter_map(|w| w.1.clone()).collect();
                }
                owners.sort();
                owners.dedup();
                failed_owners = owners.into_iter().map(|id| (id, e.to_string())).collect();
                intent_status = None;
            }
        }
        let s = o.switch;
        if o.restarted {
            let n = o
                .written
                .iter()
                .filter(|w| w.0 == UpdateKind::Insert)
                .count();
            g.audit(
                "kplane",
                "reconcile",
                "",
                "switch-restarted",
                format!("switch {s}: new epoch, {n} entries re-pushed"),
            );
        }
        if !o.drift.is_empty() {
            g.audit(
                "kplane",
                "reconcile",
                "",
                "drift",
                format!("switch {s}: {} (re-pushed)", o.drift.join("; ")),
            );
        }
        for i in g.snap.intents.iter_mut() {
            if let Some((_, msg)) = failed_owners.iter().find(|(id, _)| *id == i.id) {
                i.state = State::Failed;
                i.updated_ms = now;
                i.switches.insert(s, format!("refused: {msg}"));
                i.evidence
                    .push(format!("switch {s} refused its entries: {msg}"));
                changed = true;
                ended = true;
            } else if i.state.installed()
                && let Some(status) = &intent_status
                && let Some(slot) = i.switches.get_mut(&s)
                && slot != status
            {
                *slot = status.clone();
                changed = true;
            }
        }
        for (id, msg) in failed_owners {
            g.audit(
                "kplane",
                "apply",
                &id,
                "failed",
                format!("switch {s}: {msg}; removing it from the switches that took it"),
            );
        }
    }
    // Lifecycle.
    let obs = verify::observe(&*intents.telemetry);
    let deadline = intents.cfg.verify_deadline.as_millis() as u64;
    let mut records = Vec::new();
    let mut trackers = std::mem::take(&mut g.trackers);
    for i in g.snap.intents.iter_mut() {
        match i.state {
            // Written on every switch it has entries for; an intent without entries (a probe
            // plan) has nothing to write.
            State::Applying
                if (!i.switches.is_empty() || i.entries.is_empty())
                    && i.switches.values().all(|v| v == "installed") =>
            {
                i.applied_ms = Some(now);
                i.updated_ms = now;
                changed = true;
                if intents.cfg.verify {
                    i.state = State::Verifying;
                    trackers.insert(i.id.clone(), Tracker::default());
                    records.push((
                        i.id.clone(),
                        "applied",
                        "verifying".to_string(),
                        format!("written on {} switches", i.switches.len()),
                    ));
                } else {
                    i.state = State::Active;
                    i.evidence
                        .push("verification is off (intents.verify = false)".into());
                    records.push((
                        i.id.clone(),
                        "applied",
                        "active".to_string(),
                        "verification off".into(),
                    ));
                }
            }
            State::Verifying => {
                let applied = i.applied_ms.unwrap_or(now);
                let t = trackers.entry(i.id.clone()).or_default();
                t.observe(&i.spec.kind, applied, &obs);
                match t.verdict(&i.spec.kind, now >= applied + deadline) {
                    Verdict::Wait => {}
                    Verdict::Pass(ev) => {
                        i.state = State::Active;
                        i.updated_ms = now;
                        i.evidence.push(ev.clone());
                        records.push((i.id.clone(), "verify", "active".to_string(), ev));
                        changed = true;
                    }
                    Verdict::Fail(ev) => {
                        i.state = State::RolledBack;
                        i.updated_ms = now;
                        i.evidence.push(ev.clone());
                        records.push((i.id.clone(), "verify", "rolled-back".to_string(), ev));
                        changed = true;
                        ended = true;
                    }
                }
            }
            _ => {}
        }
    }
    trackers.retain(|id, _| {
        g.snap
            .intents
            .iter()
            .any(|i| &i.id == id && i.state == State::Verifying)
    });
    g.trackers = trackers;
    for (id, action, result, detail) in records {
        g.audit("kplane", action, &id, &result, detail);
    }
    if ended {
        g.rebuild_index();
    }
    if changed {
        g.save();
    }
    drop(g);
    if ended {
        // Remove what ended intents left on the switches now, not a whole interval later.
        intents.wake.notify_one();
    }
}
