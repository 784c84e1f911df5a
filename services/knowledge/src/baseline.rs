//! Each entity's history as features: how surprising a switch-to-switch link's silence is — the
//! destinations its switch reached through another switch during the silent run, each costing
//! −ln(1 − p) nats, p the share of them the link usually takes, so that a link avoided by
//! a busy switch's traffic stands out within a window while a quiet switch's link stays ordinary
//! — and an exponentially weighted mean of every measured feature, so that a model of a
//! whole kind can still see an entity leave its own habit — a busy link gone silent looks like
//! a quiet link to a model of all links, and a host receiving from ten times its usual sources
//! may still look like a busy server. Both are appended to the measured features
//! ([`crate::features::names`]). A queue's history also gives its congested run: the excess
//! share of congested samples over its usual, summed over the windows in a row it has been a
//! tenth or more over — a microburst train or an incast that holds for seconds adds up, an
//! elephant passing through a queue in one window does not.

use kplane_model::results::EntityKind;

use crate::features::{FastMap, Sample, by_entity, measured, tracks_silence};

/// Weight of the newest window in the usual value (about the last 20 windows).
const ALPHA: f64 = 0.05;
/// The largest share a silence is judged against: a flow that avoids a link which took every
/// flow before costs −ln(1 − 0.95) ≈ 3 nats, not infinitely many (routes change).
const MAX_BUSY: f64 = 0.95;
/// Windows an entity is seen before its silences are judged.
pub(crate) const JUDGE_AFTER: u32 = 10;
/// A queue is congested beyond its usual while its share of samples over the congestion
/// threshold is at least this much above its usual share.
const CONGESTED_BEYOND: f64 = 0.1;
/// Windows an entity is seen before its usual value counts (deviations are 0 before).
const WARM: u32 = 5;
/// An entity not seen for this many windows is forgotten (bounded state).
const FORGET_AFTER: u64 = 600;

#[derive(Debug)]
struct Usual {
    mean: Vec<f64>,
    /// While the entity is frozen: what its usual would have become (the same weighting), so
    /// that a change which lasts can become its usual ([`Baselines::settle`]).
    frozen_mean: Option<Vec<f64>>,
    seen: u32,
    /// Windows in a row the entity was silent in.
    silent: u32,
    /// Share of its chances the entity took (exponentially weighted): for a link, the share of
    /// the flows leaving its switch for another switch that crossed it.
    share: f64,
    /// `share` when the current silent run began: the run is judged against the habit before
    /// it, not against a habit the silence itself wears down.
    share_before: f64,
    /// The current silent run's surprise, in nats.
    run: f64,
    /// A queue's current run of windows congested beyond its usual: the sum of their excess
    /// shares (a burst that holds for seconds; a passing elephant's one window).
    congested_run: f64,
    last_window: u64,
}

#[derive(Debug, Default)]
pub struct Baselines {
    usual: FastMap<EntityKind, FastMap<String, Usual>>,
    /// Link → the link of the opposite direction, as last seen (a silent link's is remembered).
    reverse: FastMap<String, String>,
    windows: u64,
}

impl Baselines {
    /// A link's opposite direction, as last seen.
    pub fn reverse_of(&self, link: &str) -> Option<&str> {
        self.reverse.get(link).map(String::as_str)
    }

    /// A change that lasted becomes the entity's usual: what its usual would have learnt while
    /// it was frozen. Its next windows deviate from that, not from its habit before the change.
    pub fn settle(&mut self, kind: EntityKind, entity: &str) {
        if let Some(u) = self.usual.get_mut(&kind).and_then(|m| m.get_mut(entity))
            && let Some(m) = u.frozen_mean.take()
        {
            u.mean = m;
        }
    }

    /// Appends to every sample of one window its silent run's surprise and its opposite
    /// direction's (links) and its deviations from the entity's usual values, then lets the
    /// usual values learn from this window — except for entities `frozen` (in an anomaly: an
    /// attack must not become their habit).
    pub fn augment(&mut self, samples: &mut [Sample], frozen: impl Fn(EntityKind, &str) -> bool) {
        self.windows += 1;
        // First every entity's silent run, so that a link can read its opposite direction's.
        for s in samples.iter_mut() {
            let u = by_entity(self.usual.entry(s.kind).or_default(), &s.entity, || Usual {
                mean: s.x.clone(),
                frozen_mean: None,
                seen: 0,
                silent: 0,
                share: 0.0,
                share_before: 0.0,
                run: 0.0,
                congested_run: 0.0,
                last_window: 0,
            });
            // A link is silent when none of the destinations its switch reached through another
            // switch was reached over it; each had `share` chance of it, so the silence costs
            // chances · −ln(1 − share) nats, summed over the silent run.
            let e = s.exposure;
            let silent = e.hits == 0.0;
            if silent && u.silent == 0 {
                u.share_before = u.share;
            }
            if silent {
                u.silent = u.silent.saturating_add(1);
                u.run += e.chances * -(1.0 - u.share_before.min(MAX_BUSY)).ln();
            } else {
                u.silent = 0;
                u.run = 0.0;
            }
            if e.chances > 0.0 {
                let a = ALPHA.max(1.0 / f64::from(u.seen + 1));
                u.share += a * (e.hits / e.chances - u.share);
            }
            if let Some(r) = s.reverse.take()
                && self.reverse.get(&s.entity) != Some(&r)
            {
                self.reverse.insert(s.entity.clone(), r);
            }
        }
        // Judged once the entity's habit is known (a link seen in its first few windows only
        // is not yet "always busy").
        let surprise = |usual: &FastMap<EntityKind, FastMap<String, Usual>>, k, e: &str| {
            usual
                .get(&k)
                .and_then(|m| m.get(e))
                .filter(|u| u.seen >= JUDGE_AFTER)
                .map_or(0.0, |u| u.run)
        };
        for s in samples.iter_mut() {
            let n = s.x.len();
            let own = surprise(&self.usual, s.kind, &s.entity);
            let reverse = self
                .reverse
                .get(&s.entity)
                .map_or(0.0, |r| surprise(&self.usual, s.kind, r));
            let Some(u) = self
                .usual
                .get_mut(&s.kind)
                .and_then(|m| m.get_mut(&s.entity))
            else {
                continue;
            };
            let warm = u.seen >= WARM && u.mean.len() == n;
            let deviations: Vec<f64> = (0..n)
                .map(|i| if warm { s.x[i] - u.mean[i] } else { 0.0 })
                .collect();
            if let Some(i) = congested_at(s.kind) {
                let excess = deviations[i];
                u.congested_run = if excess >= CONGESTED_BEYOND {
                    u.congested_run + excess
                } else {
                    0.0
                };
            }
            if u.mean.len() != n {
                u.mean = s.x.clone();
            } else if u.seen < WARM || !frozen(s.kind, &s.entity) {
                // The first windows average plainly; then exponentially.
                let a = if u.seen < WARM {
                    1.0 / f64::from(u.seen + 1)
                } else {
                    ALPHA
                };
                for (m, x) in u.mean.iter_mut().zip(&s.x) {
                    *m += a * (x - *m);
                }
                u.frozen_mean = None;
            } else {
                let m = u.frozen_mean.get_or_insert_with(|| s.x.clone());
                for (m, x) in m.iter_mut().zip(&s.x) {
                    *m += ALPHA * (x - *m);
                }
            }
            u.seen = u.seen.saturating_add(1);
            u.last_window = self.windows;
            if tracks_silence(s.kind) {
                s.x.push(own);
                s.x.push(reverse);
            }
            if congested_at(s.kind).is_some() {
                s.x.push(u.congested_run);
            }
            s.x.extend(deviations);
        }
        let horizon = self.windows.saturating_sub(FORGET_AFTER);
        if self.windows.is_multiple_of(64) {
            for of_kind in self.usual.values_mut() {
                of_kind.retain(|_, u| u.last_window >= horizon);
            }
            let links = self.usual.get(&EntityKind::Link);
            self.reverse
                .retain(|e, _| links.is_some_and(|m| m.contains_key(e)));
        }
    }
}

/// Where a kind's measured features hold its share of congested samples (queues only).
fn congested_at(kind: EntityKind) -> Option<usize> {
    measured(kind)
        .iter()
        .position(|n| *n == "congested_fraction")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(entity: &str, x: f64) -> Sample {
        link(entity, x, 0.0, 0.0)
    }

    /// A link sample: `chances` flows left its switch for other switches, `hits` crossed it.
    fn link(entity: &str, x: f64, chances: f64, hits: f64) -> Sample {
        Sample {
            kind: EntityKind::Link,
            entity: entity.into(),
            window_end_ns: 0,
            x: vec![x],
            exposure: crate::features::Exposure { chances, hits },
            reverse: None,
        }
    }

    /// A queue sample: occupancy mean and max, congested fraction, log samples.
    fn queue(congested: f64) -> Sample {
        Sample {
            kind: EntityKind::Queue,
            entity: "5/0".into(),
            window_end_ns: 0,
            x: vec![1.0, 4.0, congested, 7.0],
            exposure: crate::features::Exposure::default(),
            reverse: None,
        }
    }

    #[test]
    fn a_queue_congested_for_windows_in_a_row_adds_up_and_one_window_does_not() {
        let mut b = Baselines::default();
        let run = |b: &mut Baselines, congested: f64, frozen: bool| {
            let mut w = vec![queue(congested)];
            b.augment(&mut w, |_, _| frozen);
            assert_eq!(w[0].x.len(), 9, "measured, congested run, deviations");
            w[0].x[4]
        };
        for _ in 0..30 {
            assert_eq!(run(&mut b, 0.0, false), 0.0);
        }
        // An elephant through it for one window: a run of one window, then none.
        assert!((run(&mut b, 0.4, false) - 0.4).abs() < 1e-9);
        assert_eq!(run(&mut b, 0.0, false), 0.0);
        // A burst train held for three windows (in an anomaly: its usual stays) adds up.
        for _ in 0..3 {
            run(&mut b, 0.6, true);
        }
        assert!(run(&mut b, 0.6, true) > 2.2);
        // Less than a tenth over its usual is no run.
        assert_eq!(run(&mut b, 0.05, false), 0.0);
    }

    #[test]
    fn a_busy_entity_gone_silent_deviates_and_a_steady_one_does_not() {
        let mut b = Baselines::default();
        for _ in 0..30 {
            let mut w = vec![link("busy", 900.0, 10.0, 5.0), sample("quiet", 5.0)];
            b.augment(&mut w, |_, _| false);
            assert_eq!(w[0].x.len(), 4, "measured, silent run, reverse, deviation");
        }
        let mut w = vec![link("busy", 0.0, 10.0, 0.0), sample("quiet", 5.0)];
        b.augment(&mut w, |_, _| false);
        assert!(w[0].x[3] < -800.0, "{:?}", w[0].x);
        assert!(w[1].x[3].abs() < 1e-9, "{:?}", w[1].x);
        // Ten flows avoided a link that takes half of them: 10 · ln 2 nats.
        let first = w[0].x[1];
        assert!((first - 10.0 * 2f64.ln()).abs() < 0.01, "{:?}", w[0].x);
        let mut w = vec![link("busy", 0.0, 10.0, 0.0)];
        b.augment(&mut w, |_, _| false);
        assert!(
            (w[0].x[1] - 2.0 * first).abs() < 1e-9,
            "the run grows: {:?}",
            w[0].x
        );
        // A window in which its switch sent nothing says nothing.
        let mut w = vec![link("busy", 0.0, 0.0, 0.0)];
        b.augment(&mut w, |_, _| false);
        assert!((w[0].x[1] - 2.0 * first).abs() < 1e-9, "{:?}", w[0].x);
        // Traffic again ends the run.
        let mut w = vec![link("busy", 900.0, 10.0, 4.0)];
        b.augment(&mut w, |_, _| false);
        assert_eq!(w[0].x[1], 0.0, "{:?}", w[0].x);
        // A link that takes few of its switch's flows is rarely missed: its usual silent runs
        // stay ordinary (a few nats: likelier than one in twenty).
        let mut b = Baselines::default();
        for i in 0..100 {
            b.augment(
                &mut [link(
                    "sparse",
                    9.0,
                    20.0,
                    if i % 10 == 0 { 1.0 } else { 0.0 },
                )],
                |_, _| false,
            );
        }
        let mut w = vec![link("sparse", 0.0, 4.0, 0.0)];
        b.augment(&mut w, |_, _| false);
        assert!(w[0].x[1] < 3.0, "{:?}", w[0].x);
        // A new entity deviates by nothing until it has a habit, and its silences are not
        // judged before.
        let mut w = vec![sample("new", 50.0)];
        b.augment(&mut w, |_, _| false);
        assert_eq!(w[0].x[3], 0.0);
        for _ in 0..3 {
            b.augment(&mut [link("young", 900.0, 10.0, 5.0)], |_, _| false);
        }
        let mut w = vec![link("young", 0.0, 10.0, 0.0)];
        b.augment(&mut w, |_, _| false);
        assert_eq!(w[0].x[1], 0.0, "{:?}", w[0].x);
    }

    #[test]
    fn a_link_reads_its_opposite_directions_silence() {
        let mut b = Baselines::default();
        let with_reverse = |e: &str, r: &str, hits: f64| Sample {
            reverse: Some(r.into()),
            ..link(e, 900.0, 10.0, hits)
        };
        for _ in 0..30 {
            b.augment(
                &mut [
                    with_reverse("1:1", "2:1", 5.0),
                    with_reverse("2:1", "1:1", 5.0),
                ],
                |_, _| false,
            );
        }
        // Both directions silent (a cut cable; the silent ones say nothing of their reverse):
        // each carries the other's surprise too.
        let mut w = vec![link("1:1", 0.0, 10.0, 0.0), link("2:1", 0.0, 10.0, 0.0)];
        b.augment(&mut w, |_, _| false);
        assert!(
            w[0].x[1] > 5.0 && (w[0].x[2] - w[1].x[1]).abs() < 1e-9,
            "{w:?}"
        );
        // One direction silent: its reverse's is nothing.
        let mut w = vec![
            with_reverse("1:1", "2:1", 5.0),
            with_reverse("2:1", "1:1", 5.0),
        ];
        b.augment(&mut w, |_, _| false);
        let mut w = vec![with_reverse("2:1", "1:1", 5.0), link("1:1", 0.0, 10.0, 0.0)];
        b.augment(&mut w, |_, _| false);
        assert!(w[1].x[1] > 5.0 && w[1].x[2] == 0.0, "{w:?}");
    }

    #[test]
    fn a_frozen_entity_keeps_its_habit() {
        let mut b = Baselines::default();
        for _ in 0..30 {
            b.augment(&mut [sample("victim", 10.0)], |_, _| false);
        }
        for _ in 0..100 {
            b.augment(&mut [sample("victim", 1_000.0)], |_, _| true);
        }
        let mut w = vec![sample("victim", 1_000.0)];
        b.augment(&mut w, |_, _| true);
        assert!((w[0].x[3] - 990.0).abs() < 1e-6, "{:?}", w[0].x);
    }
}
