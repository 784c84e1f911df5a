//! A switch's background backlog: the packets of ordinary traffic waiting for its packet
//! processor, which serves `capacity` packets per second from a queue of at most `limit`.
//! Simulating every background packet would cost millions of events per emulated second for
//! what a probe only needs at the moment it arrives — how many packets are ahead of it, and
//! whether the queue is full — so the backlog is the diffusion approximation of that queue: a
//! random walk reflected at 0 and `limit`, advanced lazily in steps of [`STEP_NS`], with
//! normal arrivals of the load's mean and variance per step and a fixed service per step.

use kplane_model::rng::Rng;

/// The walk's step.
pub const STEP_NS: u64 = 5_000_000;

/// Offered load and service of one switch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// Background packets arriving per second.
    pub arrivals_pps: f64,
    /// Packets the processor serves per second.
    pub capacity_pps: f64,
    /// Packets the queue holds at most.
    pub limit: f64,
}

#[derive(Clone, Debug)]
pub struct Backlog {
    queued: f64,
    /// The share of the last step's arrivals the full queue dropped.
    overflow: f64,
    at_ns: u64,
    /// Background packets served so far (the port counters' traffic).
    pub served: f64,
}

impl Backlog {
    /// A backlog at time `at_ns`, drawn from the walk's stationary law (a truncated
    /// exponential in the queue length: uniform when the load equals the capacity), so a run
    /// needs no warm-up.
    pub fn stationary(load: &Load, at_ns: u64, rng: &mut Rng) -> Self {
        let step = STEP_NS as f64 / 1e9;
        let drift = (load.arrivals_pps - load.capacity_pps) * step;
        let variance = (load.arrivals_pps * step).max(1e-9);
        // Density ∝ exp(θx) on [0, limit], θ = 2·drift / variance.
        let theta = 2.0 * drift / variance;
        let u = rng.uniform();
        let queued = if theta.abs() * load.limit < 1e-6 {
            u * load.limit
        } else {
            ((u * ((theta * load.limit).exp() - 1.0) + 1.0).ln() / theta).clamp(0.0, load.limit)
        };
        Self {
            queued,
            overflow: 0.0,
            at_ns,
            served: 0.0,
        }
    }

    /// Packets waiting as of the last advance.
    pub fn queued(&self) -> f64 {
        self.queued
    }

    /// Packets waiting at `now_ns`.
    pub fn advance(&mut self, load: &Load, now_ns: u64, rng: &mut Rng) -> f64 {
        let step = STEP_NS as f64 / 1e9;
        let (mean, service) = (load.arrivals_pps * step, load.capacity_pps * step);
        while self.at_ns + STEP_NS <= now_ns {
            let arrivals = (mean + mean.sqrt() * rng.normal()).max(0.0);
            let before = self.queued + arrivals;
            self.served += before.min(service);
            let after = before - service;
            self.overflow = ((after - load.limit) / arrivals.max(1.0)).clamp(0.0, 1.0);
            self.queued = after.clamp(0.0, load.limit);
            self.at_ns += STEP_NS;
        }
        self.queued
    }

    /// One packet (a probe, a feedback, a request) offered at `now_ns`: the time it waits
    /// for the packets ahead of it and its own service, or `None` when it finds the queue
    /// full — as often as the step's arrivals did (a queue at its limit at a step's end was
    /// not full all through it).
    pub fn admit(&mut self, load: &Load, now_ns: u64, rng: &mut Rng) -> Option<u64> {
        let ahead = self.advance(load, now_ns, rng);
        if rng.uniform() < self.overflow {
            return None;
        }
        self.queued += 1.0;
        Some(((ahead + 1.0) / load.capacity_pps * 1e9) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share_dropped(load: Load, seed: u64) -> (f64, f64) {
        let mut rng = Rng::new(seed);
        let mut b = Backlog::stationary(&load, 0, &mut rng);
        let (mut dropped, mut waited) = (0, 0u64);
        let n = 20_000;
        for i in 0..n {
            match b.admit(&load, i * 7_000_000, &mut rng) {
                Some(w) => waited += w,
                None => dropped += 1,
            }
        }
        (dropped as f64 / n as f64, waited as f64 / n as f64 / 1e6)
    }

    #[test]
    fn an_underloaded_switch_neither_drops_nor_delays_and_an_overloaded_one_does_both() {
        let load = |pps| Load {
            arrivals_pps: pps,
            capacity_pps: 12_000.0,
            limit: 1000.0,
        };
        let (drop_low, wait_low) = share_dropped(load(8_000.0), 1);
        assert_eq!(drop_low, 0.0);
        assert!(wait_low < 1.0, "{wait_low} ms");
        let (drop_high, wait_high) = share_dropped(load(14_000.0), 1);
        // Past the capacity the queue stays near full: what is admitted waits about
        // limit / capacity, and what exceeds the capacity is dropped (1 − 12/14 ≈ 14 %).
        assert!((0.10..0.20).contains(&drop_high), "{drop_high}");
        assert!(wait_high / (1.0 - drop_high) > 70.0, "{wait_high} ms");
    }

    #[test]
    fn the_walk_serves_what_arrives_below_capacity() {
        let load = Load {
            arrivals_pps: 5_000.0,
            capacity_pps: 12_000.0,
            limit: 1000.0,
        };
        let mut rng = Rng::new(3);
        let mut b = Backlog::stationary(&load, 0, &mut rng);
        b.advance(&load, 10_000_000_000, &mut rng);
        assert!((b.served - 50_000.0).abs() < 1_000.0, "{}", b.served);
    }
}
