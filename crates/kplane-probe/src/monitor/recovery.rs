//! The data recovery of Algorithms 1–2 (§IV-C) as state, with time passed in: `P_INT` (one
//! entry per path: its route, the index probes start from, the last initiation, the deadline,
//! attempts), `F` (probes whose first switch has not confirmed them), `Q` (the recovery
//! queue, by initiation time) and `A` (what was found unavailable).
//!
//! * A probe is sent from its path's index; its first switch's feedback (0x19) moves it from
//!   `F` to `Q` with a deadline: `t_f` plus a hop budget per switch left.
//! * The timeout sequence, every `t_ro`: a probe in `F` longer than `t_f` joins `Q` (it is
//!   sent again from the same switch); after more than `r_a` attempts that switch is marked
//!   unavailable and the path resumes at the next one.
//! * A failure notification (0x21) from the switch at index i: what it carries is kept, the
//!   link to the next switch is marked unavailable, and the path resumes at i + 1 at once.
//! * Algorithm 2: each probe in `Q` whose deadline has passed and whose path is not finished
//!   is sent again; a path is finished when its last switch's probe (0x17) arrived and every
//!   switch on it has been measured, by it or by the notifications before it.

use std::collections::BTreeSet;

#[derive(Clone, Debug, PartialEq)]
pub struct RecoveryConfig {
    /// t_f: how long a probe may go unconfirmed before it is sent again.
    pub feedback_timeout_ns: u64,
    /// r_a: attempts from one switch before it is marked unavailable and skipped.
    pub attempts: u32,
    /// t_ro: how often the timeout sequence runs.
    pub resolution_ns: u64,
    /// The time a probe is given per switch left on its route, after `t_f`, before it is
    /// recovered from its start.
    pub hop_budget_ns: u64,
}

impl RecoveryConfig {
    /// The paper's evaluation: t_f = 1.5 s, r_a = 10.
    pub fn paper() -> Self {
        Self {
            feedback_timeout_ns: 1_500_000_000,
            attempts: 10,
            resolution_ns: 50_000_000,
            hop_budget_ns: 10_000_000,
        }
    }

    /// GPINT-FT (Fig. 14): t_f = 0.4 s, r_a = 2.
    pub fn fine_tuned() -> Self {
        Self {
            feedback_timeout_ns: 400_000_000,
            attempts: 2,
            ..Self::paper()
        }
    }
}

/// A component Algorithm 1 deduced unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// Never confirmed a probe in `r_a` attempts.
    Switch(usize),
    /// A probe sent over it was not confirmed within the switches' hold time.
    Link(usize, usize),
}

#[derive(Clone, Debug)]
struct Entry {
    route: Vec<usize>,
    measured: Vec<bool>,
    index: usize,
    init: u64,
    first_sent: Option<u64>,
    deadline: u64,
    attempts: u32,
    sends: u32,
    /// In `Q`, under this initiation time.
    queued: Option<u64>,
    finished: bool,
    given_up: bool,
}

#[derive(Clone, Debug)]
pub struct Recovery {
    cfg: RecoveryConfig,
    paths: Vec<Entry>,
    pending: BTreeSet<usize>,
    queue: BTreeSet<(u64, usize)>,
    unavailable: Vec<Unavailable>,
    initial: u64,
    resent: u64,
    last_done: Option<u64>,
}

impl Recovery {
    pub fn new(cfg: RecoveryConfig) -> Self {
        Self {
            cfg,
            paths: Vec::new(),
            pending: BTreeSet::new(),
            queue: BTreeSet::new(),
            unavailable: Vec::new(),
            initial: 0,
            resent: 0,
            last_done: None,
        }
    }

    /// A path to collect; its id.
    pub fn add(&mut self, route: Vec<usize>, now: u64) -> usize {
        let n = route.len();
        self.paths.push(Entry {
            route,
            measured: vec![false; n],
            index: 0,
            init: now,
            first_sent: None,
            deadline: now,
            attempts: 0,
            sends: 0,
            queued: None,
            finished: n == 0,
            given_up: false,
        });
        self.paths.len() - 1
    }

    /// The route and the index its next probe starts from.
    pub fn route_from(&self, p: usize) -> (&[usize], usize) {
        (&self.paths[p].route, self.paths[p].index)
    }

    /// A probe of `p` was sent at `now`.
    pub fn sent(&mut self, p: usize, now: u64) {
        let timeout = self.cfg.feedback_timeout_ns;
        let e = &mut self.paths[p];
        if e.sends == 0 {
            self.initial += 1;
        } else {
            self.resent += 1;
        }
        e.sends += 1;
        e.first_sent.get_or_insert(now);
        e.init = now;
        e.deadline = now + timeout;
        self.pending.insert(p);
    }

    /// 0x19 from the first switch (Algorithm 1, lines 19 and 24–26).
    pub fn feedback(&mut self, p: usize, now: u64) {
        self.pending.remove(&p);
        let e = &mut self.paths[p];
        if e.finished || e.queued.is_some() {
            return;
        }
        let left = (e.route.len() - e.index) as u64;
        e.deadline = now + self.cfg.feedback_timeout_ns + left * self.cfg.hop_budget_ns;
        self.enqueue(p);
    }

    /// 0x17 carrying `measured` (lines 19–22); whether `p` is now finished.
    pub fn complete(&mut self, p: usize, measured: &[usize], now: u64) -> bool {
        self.pending.remove(&p);
        self.mark(p, measured);
        let e = &mut self.paths[p];
        if e.finished {
            return false;
        }
        match e.measured.iter().position(|m| !m) {
            None => {
                e.finished = true;
                self.dequeue(p);
                self.last_done = Some(now);
                true
            }
            // A recovery probe's tail arrived before the head it resumed after: the
            // missing switches are asked again.
            Some(i) => {
                e.index = i;
                e.deadline = now;
                self.enqueue(p);
                false
            }
        }
    }

    /// 0x21 from the switch at `index`, carrying `measured` (lines 29–34).
    pub fn failure(&mut self, p: usize, index: usize, measured: &[usize], now: u64) {
        self.pending.remove(&p);
        self.mark(p, measured);
        let e = &mut self.paths[p];
        if e.finished || index + 1 >= e.route.len() {
            return;
        }
        self.unavailable
            .push(Unavailable::Link(e.route[index], e.route[index + 1]));
        e.index = e.index.max(index + 1);
        e.attempts = 0;
        e.init = now;
        e.deadline = now;
        self.dequeue(p);
        self.enqueue(p);
    }

    /// The timeout sequence (lines 2–16) and Algorithm 2: the paths to send a probe for now
    /// (or that were just given up: every switch left on them unavailable).
    pub fn timeout(&mut self, now: u64) -> Vec<usize> {
        let mut out = Vec::new();
        let pending: Vec<usize> = self.pending.iter().copied().collect();
        for p in pending {
            let e = &mut self.paths[p];
            if now.saturating_sub(e.init) <= self.cfg.feedback_timeout_ns || e.queued.is_some() {
                continue;
            }
            if e.attempts > self.cfg.attempts {
                self.unavailable.push(Unavailable::Switch(e.route[e.index]));
                e.index += 1;
                e.attempts = 0;
            }
            e.attempts += 1;
            if e.index >= e.route.len() {
                e.finished = true;
                e.given_up = true;
                self.pending.remove(&p);
                out.push(p);
                continue;
            }
            self.enqueue(p);
        }
        let due: Vec<(u64, usize)> = self
            .queue
            .iter()
            .copied()
            .filter(|&(_, p)| now >= self.paths[p].deadline)
            .collect();
        for (_, p) in due {
            self.dequeue(p);
            if !self.paths[p].finished {
                out.push(p);
            }
        }
        out
    }

    /// Whether `p` was abandoned (its remaining switches unavailable).
    pub fn given_up(&self, p: usize) -> bool {
        self.paths[p].given_up
    }

    /// When `p`'s first probe left, and whether it needed more than one.
    pub fn times(&self, p: usize) -> (u64, bool) {
        let e = &self.paths[p];
        (e.first_sent.unwrap_or(0), e.sends > 1)
    }

    pub fn all_measured(&self) -> bool {
        self.paths.iter().all(|e| e.measured.iter().all(|m| *m))
    }

    pub fn last_done(&self) -> Option<u64> {
        self.last_done
    }

    /// (first probes, probes sent again).
    pub fn sends(&self) -> (u64, u64) {
        (self.initial, self.resent)
    }

    pub fn unavailable(&self) -> &[Unavailable] {
        &self.unavailable
    }

    fn mark(&mut self, p: usize, measured: &[usize]) {
        let e = &mut self.paths[p];
        for (i, s) in e.route.iter().enumerate() {
            if measured.contains(s) {
                e.measured[i] = true;
            }
        }
    }

    fn enqueue(&mut self, p: usize) {
        let e = &mut self.paths[p];
        if e.queued.is_none() {
            e.queued = Some(e.init);
            self.queue.insert((e.init, p));
        }
    }

    fn dequeue(&mut self, p: usize) {
        if let Some(t) = self.paths[p].queued.take() {
            self.queue.remove(&(t, p));
        }
    }
}
