//! Each entity's history as features: how surprising a switch-to-switch link's silence is — the
//! routes (a flow's first switch and its destination, [`Route`]) the link usually carries that
//! reached their destination another way during the silent run, each costing −ln(1 − p) nats,
//! p the share of the times the route was seen that it went over the link, so that a link whose
//! routes all went elsewhere stands out within a window while a link whose destinations were
//! simply not sent to stays ordinary — and an
//! exponentially weighted mean of every measured feature, so that a model of a
//! whole kind can still see an entity leave its own habit — a busy link gone silent looks like
//! a quiet link to a model of all links, and a host receiving from ten times its usual sources
//! may still look like a busy server. Both are appended to the measured features
//! ([`crate::features::names`]). A queue's history also gives its congested run: the excess
//! share of congested samples over its usual, summed over the windows in a row it has been a
//! tenth or more over — a microburst train or an incast that holds for seconds adds up, an
//! elephant passing through a queue in one window does not.

use kplane_model::results::EntityKind;

use crate::features::{Exposure, FastMap, Route, Sample, by_entity, measured, tracks_silence};

/// Weight of the newest window in the usual value (about the last 20 windows), and of the
/// newest time a route was seen in a link's habit of carrying it.
const ALPHA: f64 = 0.05;
/// The largest share a silence is judged against: a route that avoids a link which took it
/// every time before costs −ln(1 − 0.95) ≈ 3 nats, not infinitely many (routes change).
const MAX_BUSY: f64 = 0.95;
/// A route whose habit of crossing a link has faded below this (about 60 times it was seen
/// going another way since it last crossed) is no longer one the link carries.
const FADED: f64 = 0.05;
/// Windows an entity is seen before its usual counts: its deviations and its silences are
/// judged from then on. A usual of fewer windows is noise for an entity busy and idle by
/// turns: a host's link at 66–78 ‰ in three of its first five windows and 642–924 ‰ in two
/// was 488 ‰ over their plain mean in its sixth (844 ‰), and raised.
pub(crate) const JUDGE_AFTER: u32 = 10;
/// Windows an entity is seen before an outlier no fault's definition explains (`unknown`) is
/// raised on it: a usual of ten windows judges well enough what a fault's definition asks
/// (a flood, a scan, a silence), but a link busy and idle by turns has not shown its range —
/// the clean-run false alarms measured before this wait were such links at 84–86 % for two
/// windows in their windows 10–15 against a usual of 38–41 %.
pub(crate) const MATURE_AFTER: u32 = 2 * JUDGE_AFTER;
/// A queue is congested beyond its usual while its share of samples over the congestion
/// threshold is at least this much above its usual share.
const CONGESTED_BEYOND: f64 = 0.1;
/// An entity not seen for this many windows is forgotten (bounded state); so is a route a
/// link carried that has not been seen for as long.
const FORGET_AFTER: u64 = 600;

/// How often one of a link's routes was seen, and how often it went over the link (both
/// decayed by [`ALPHA`] each time).
#[derive(Clone, Copy, Debug, Default)]
struct Carried {
    reached: f64,
    crossed: f64,
    last_window: u64,
}

impl Carried {
    /// The share of the times it was seen that it crossed the link, shrunk towards 0 for a
    /// route seen only a few times.
    fn share(&self) -> f64 {
        self.crossed / (self.reached + 1.0)
    }
}

#[derive(Debug)]
struct Usual {
    mean: Vec<f64>,
    /// While the entity is frozen: what its usual would have become (the same weighting), so
    /// that a change which lasts can become its usual ([`Baselines::settle`]).
    frozen_mean: Option<Vec<f64>>,
    seen: u32,
    /// Windows in a row the entity was silent in.
    silent: u32,
    /// For a link: the routes it carries.
    carried: FastMap<Route, Carried>,
    /// Their shares when the current silent run began: the run is judged against the habit
    /// before it, not against a habit the silence itself wears down (empty while not silent).
    before: FastMap<Route, f64>,
    /// The current silent run's surprise, in nats.
    run: f64,
    /// A queue's current run of windows congested beyond its usual: the sum of their excess
    /// shares (a burst that holds for seconds; a passing elephant's one window).
    congested_run: f64,
    last_window: u64,
}

impl Usual {
    /// What a silent window costs: the routes the link carried before the run that were seen
    /// going another way, each −ln(1 − its share).
    fn silence_cost(&self, e: &Exposure) -> f64 {
        self.before
            .iter()
            .filter(|(d, _)| e.reached.contains(*d))
            .map(|(_, p)| -(1.0 - p.min(MAX_BUSY)).ln())
            .sum()
    }

    /// Learns from a window: every route seen that crossed the link, or that the link carried
    /// before, counts once.
    fn learn_carried(&mut self, e: &Exposure, window: u64) {
        let count = |c: &mut Carried, crossed: bool| {
            c.reached = (1.0 - ALPHA) * c.reached + 1.0;
            c.crossed = (1.0 - ALPHA) * c.crossed + f64::from(u8::from(crossed));
            c.last_window = window;
        };
        for d in &e.crossed {
            count(self.carried.entry(*d).or_default(), true);
        }
        for (d, c) in self.carried.iter_mut() {
            if c.last_window != window && e.reached.contains(d) {
                count(c, false);
            }
        }
    }
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

    /// Whether the entity's usual has seen [`MATURE_AFTER`] windows.
    pub fn mature(&self, kind: EntityKind, entity: &str) -> bool {
        self.usual
            .get(&kind)
            .and_then(|m| m.get(entity))
            .is_some_and(|u| u.seen >= MATURE_AFTER)
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
                carried: FastMap::default(),
                before: FastMap::default(),
                run: 0.0,
                congested_run: 0.0,
                last_window: 0,
            });
            // A link is silent when none of the routes seen went over it; each one it usually
            // carries that went another way costs −ln(1 − its share) nats, summed over the
            // silent run.
            if tracks_silence(s.kind) {
                let e = &s.exposure;
                if e.crossed.is_empty() {
                    if u.silent == 0 {
                        u.before = u.carried.iter().map(|(d, c)| (*d, c.share())).collect();
                    }
                    u.silent = u.silent.saturating_add(1);
                    u.run += u.silence_cost(e);
                } else {
                    u.silent = 0;
                    u.run = 0.0;
                    u.before.clear();
                }
                u.learn_carried(e, self.windows);
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
            let warm = u.seen >= JUDGE_AFTER && u.mean.len() == n;
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
            } else if u.seen < JUDGE_AFTER || !frozen(s.kind, &s.entity) {
                // The first windows average plainly; then exponentially.
                let a = if u.seen < JUDGE_AFTER {
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
                for u in of_kind.values_mut() {
                    u.carried
                        .retain(|_, c| c.crossed >= FADED && c.last_window >= horizon);
                }
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
    use std::ops::Range;
    use std::sync::Arc;

    use super::*;

    fn sample(entity: &str, x: f64) -> Sample {
        link(entity, x, 0..0, 0..0)
    }

    /// Routes from switch 1 to 10.0.0.`r`.
    fn routes(r: Range<u8>) -> Vec<Route> {
        r.map(|i| (1, std::net::IpAddr::from([10, 0, 0, i])))
            .collect()
    }

    /// A link sample: the routes to 10.0.0.`reached` were seen, those to 10.0.0.`crossed` over
    /// it.
    fn link(entity: &str, x: f64, reached: Range<u8>, crossed: Range<u8>) -> Sample {
        Sample {
            kind: EntityKind::Link,
            entity: entity.into(),
            window_end_ns: 0,
            x: vec![x],
            exposure: Exposure {
                reached: Arc::new(routes(reached).into_iter().collect()),
                crossed: routes(crossed),
            },
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
            exposure: Exposure::default(),
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
        // Ten routes are seen; five always go over it.
        for _ in 0..30 {
            let mut w = vec![link("busy", 900.0, 1..11, 1..6), sample("quiet", 5.0)];
            b.augment(&mut w, |_, _| false);
            assert_eq!(w[0].x.len(), 4, "measured, silent run, reverse, deviation");
        }
        let mut w = vec![link("busy", 0.0, 1..11, 0..0), sample("quiet", 5.0)];
        b.augment(&mut w, |_, _| false);
        assert!(w[0].x[3] < -800.0, "{:?}", w[0].x);
        assert!(w[1].x[3].abs() < 1e-9, "{:?}", w[1].x);
        // Its five routes went another way: each close to −ln(1 − 0.95) ≈ 3 nats.
        let first = w[0].x[1];
        assert!(first > 5.0 * 2.5 && first < 5.0 * 3.0, "{:?}", w[0].x);
        let mut w = vec![link("busy", 0.0, 1..11, 0..0)];
        b.augment(&mut w, |_, _| false);
        assert!(
            (w[0].x[1] - 2.0 * first).abs() < 1e-9,
            "the run grows, judged by the habit before it: {:?}",
            w[0].x
        );
        // A window in which none of its routes was seen says nothing: the others went where
        // they always go.
        let mut w = vec![link("busy", 0.0, 6..11, 0..0)];
        b.augment(&mut w, |_, _| false);
        assert!((w[0].x[1] - 2.0 * first).abs() < 1e-9, "{:?}", w[0].x);
        // Traffic again ends the run.
        let mut w = vec![link("busy", 900.0, 1..11, 1..5)];
        b.augment(&mut w, |_, _| false);
        assert_eq!(w[0].x[1], 0.0, "{:?}", w[0].x);
        // A link that takes its route one time in ten (the others of an ECMP group take
        // the rest) is rarely missed: its usual silent runs stay ordinary (a few nats: likelier
        // than one in twenty).
        let mut b = Baselines::default();
        for i in 0..100 {
            let crossed = if i % 10 == 0 { 1..2 } else { 0..0 };
            b.augment(&mut [link("sparse", 9.0, 1..2, crossed)], |_, _| false);
        }
        let mut w = vec![link("sparse", 0.0, 1..2, 0..0)];
        b.augment(&mut w, |_, _| false);
        assert!(w[0].x[1] > 0.0 && w[0].x[1] < 3.0, "{:?}", w[0].x);
        // A new entity deviates by nothing until it has a habit, and its silences are not
        // judged before.
        let mut w = vec![sample("new", 50.0)];
        b.augment(&mut w, |_, _| false);
        assert_eq!(w[0].x[3], 0.0);
        for _ in 0..3 {
            b.augment(&mut [link("young", 900.0, 1..11, 1..6)], |_, _| false);
        }
        let mut w = vec![link("young", 0.0, 1..11, 0..0)];
        b.augment(&mut w, |_, _| false);
        assert_eq!(w[0].x[1], 0.0, "{:?}", w[0].x);
    }

    #[test]
    fn a_link_whose_switch_has_no_other_way_is_judged_by_the_routes_around_it() {
        // An aggregation switch's only uplink to a core: edges 1 and 2 send to eight hosts of
        // another pod, half their flows through this switch and over the link, half through
        // the pod's other aggregation switch.
        let window = |i: u8| {
            let all: Vec<(u32, u8)> = (1..3).flat_map(|e| (1..9).map(move |h| (e, h))).collect();
            let route = |&(e, h): &(u32, u8)| (e, std::net::IpAddr::from([10, 0, 9, h]));
            // Each route crosses every other window.
            let crossed = all
                .iter()
                .filter(|(e, h)| (*e as u8 + h + i).is_multiple_of(2))
                .map(route)
                .collect();
            Sample {
                exposure: Exposure {
                    reached: Arc::new(all.iter().map(route).collect()),
                    crossed,
                },
                ..link("101:3", 40.0, 0..0, 0..0)
            }
        };
        let mut b = Baselines::default();
        for i in 0..40 {
            b.augment(&mut [window(i)], |_, _| false);
        }
        // It fails: the edges send all sixteen routes the other way.
        let mut failed = window(0);
        failed.exposure.crossed.clear();
        failed.x = vec![0.0];
        let mut w = [failed];
        b.augment(&mut w, |_, _| false);
        // Each route crossed it about half the time: −ln(1 − ½) ≈ 0.7 nats, sixteen of them.
        assert!(
            w[0].x[1] > 16.0 * 0.6 && w[0].x[1] < 16.0 * 0.75,
            "{:?}",
            w[0].x
        );
    }

    #[test]
    fn a_link_reads_its_opposite_directions_silence() {
        let mut b = Baselines::default();
        let with_reverse = |e: &str, r: &str| Sample {
            reverse: Some(r.into()),
            ..link(e, 900.0, 1..11, 1..6)
        };
        for _ in 0..30 {
            b.augment(
                &mut [with_reverse("1:1", "2:1"), with_reverse("2:1", "1:1")],
                |_, _| false,
            );
        }
        // Both directions silent (a cut cable; the silent ones say nothing of their reverse):
        // each carries the other's surprise too.
        let silent = |e: &str| link(e, 0.0, 1..11, 0..0);
        let mut w = vec![silent("1:1"), silent("2:1")];
        b.augment(&mut w, |_, _| false);
        assert!(
            w[0].x[1] > 5.0 && (w[0].x[2] - w[1].x[1]).abs() < 1e-9,
            "{w:?}"
        );
        // One direction silent: its reverse's is nothing.
        let mut w = vec![with_reverse("1:1", "2:1"), with_reverse("2:1", "1:1")];
        b.augment(&mut w, |_, _| false);
        let mut w = vec![with_reverse("2:1", "1:1"), silent("1:1")];
        b.augment(&mut w, |_, _| false);
        assert!(w[1].x[1] > 5.0 && w[1].x[2] == 0.0, "{w:?}");
    }

    #[test]
    fn an_entitys_usual_counts_from_its_tenth_window() {
        // A host's link busy and idle by turns (‰; seed 491's `ls-2x4-1g`): its first five
        // windows are too few to know its usual by.
        let busy_and_idle = [
            642.0, 924.0, 66.0, 66.0, 78.0, 844.0, 761.0, 805.0, 636.0, 82.0,
        ];
        let mut b = Baselines::default();
        let mut deviations = Vec::new();
        for x in busy_and_idle.into_iter().chain([757.0]) {
            let mut w = [sample("5:0", x)];
            b.augment(&mut w, |_, _| false);
            deviations.push(w[0].x[3]);
        }
        assert!(deviations[..10].iter().all(|d| *d == 0.0), "{deviations:?}");
        let usual = busy_and_idle.iter().sum::<f64>() / 10.0;
        assert!(
            (deviations[10] - (757.0 - usual)).abs() < 1e-9,
            "{deviations:?}"
        );
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
