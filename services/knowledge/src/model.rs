//! One entity kind's model of normal behaviour: a scaler, a detector from the registry, and a
//! threshold calibrated on held-out normal windows.
//!
//! Training splits the entity-windows by time: the earlier `1 − holdout` fit the scaler and the
//! detector, the later `holdout` are scored to calibrate. The threshold is where the held-out
//! scores' tail, fitted as an exponential above their 90th percentile (peaks over threshold),
//! predicts the configured false-alarm rate — and never below the largest held-out score. The
//! rate is `false-alarms-per-hour` divided by the held-out entity-windows per hour.

use kplane_model::results::{EntityKind, FeatureDeviation};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::detectors::{self, Scorer};
use crate::features::{Sample, names};

/// How a threshold was calibrated (kept in the registry).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub method: String,
    pub heldout_samples: usize,
    pub heldout_max: f64,
    pub heldout_p90: f64,
    /// Mean excess over p90 (the exponential tail's scale).
    pub tail_scale: f64,
    /// Allowed false alarms per entity-window.
    pub rate: f64,
    pub threshold: f64,
}

/// The training range of a model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingRange {
    pub start_ns: i64,
    pub end_ns: i64,
    pub windows: usize,
    pub samples: usize,
}

/// A fitted model of one entity kind.
#[derive(Debug)]
pub struct EntityModel {
    pub kind: EntityKind,
    pub detector: &'static str,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub scorer: Box<dyn Scorer>,
    pub calibration: Calibration,
    pub training: TrainingRange,
}

/// What the registry stores of an [`EntityModel`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedModel {
    pub kind: EntityKind,
    pub detector: String,
    pub features: Vec<String>,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub fitted: serde_json::Value,
    pub calibration: Calibration,
    pub training: TrainingRange,
}

/// Training parameters.
#[derive(Clone, Debug)]
pub struct TrainParams {
    pub detector: String,
    pub clusters: usize,
    pub holdout: f64,
    pub false_alarms_per_hour: f64,
    pub window_ns: i64,
}

impl EntityModel {
    /// Standardised features.
    pub fn z(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .zip(self.mean.iter().zip(&self.std))
            .map(|(v, (m, s))| (v - m) / s)
            .collect()
    }

    pub fn score(&self, x: &[f64]) -> f64 {
        let mut z = self.z(x);
        excess_only(self.kind, &mut z);
        self.scorer.score(&z)
    }

    pub fn threshold(&self) -> f64 {
        self.calibration.threshold
    }

    /// The features, largest deviation first.
    pub fn deviations(&self, x: &[f64]) -> Vec<FeatureDeviation> {
        let mut d: Vec<FeatureDeviation> = names(self.kind)
            .iter()
            .zip(x.iter().zip(self.z(x)))
            .enumerate()
            .map(|(i, (n, (v, z)))| FeatureDeviation {
                name: n.to_string(),
                value: *v,
                normal: self.mean[i],
                z,
            })
            .collect();
        d.sort_by(|a, b| b.z.abs().total_cmp(&a.z.abs()));
        d
    }

    pub fn save(&self) -> SavedModel {
        SavedModel {
            kind: self.kind,
            detector: self.detector.to_string(),
            features: names(self.kind).iter().map(|s| s.to_string()).collect(),
            mean: self.mean.clone(),
            std: self.std.clone(),
            fitted: self.scorer.save(),
            calibration: self.calibration.clone(),
            training: self.training.clone(),
        }
    }

    pub fn load(s: &SavedModel) -> Result<Self, String> {
        let d = detectors::by_name(&s.detector)?;
        if s.features.len() != names(s.kind).len() {
            return Err(format!(
                "{} model has features {:?}; this version extracts {:?}",
                s.kind.as_str(),
                s.features,
                names(s.kind)
            ));
        }
        Ok(Self {
            kind: s.kind,
            detector: d.name,
            mean: s.mean.clone(),
            std: s.std.clone(),
            scorer: (d.load)(&s.fitted)?,
            calibration: s.calibration.clone(),
            training: s.training.clone(),
        })
    }

    /// Fits the model of `kind` on `samples` (entity-windows of normal traffic, any order).
    pub fn train(kind: EntityKind, samples: &[&Sample], p: &TrainParams) -> Result<Self, String> {
        let d = detectors::by_name(&p.detector)?;
        let dims = names(kind).len();
        let mut ends: Vec<i64> = samples.iter().map(|s| s.window_end_ns).collect();
        ends.sort_unstable();
        ends.dedup();
        if ends.len() < 4 {
            return Err(format!(
                "{}: {} windows of history; at least 4 are needed",
                kind.as_str(),
                ends.len()
            ));
        }
        let split = ends[((ends.len() as f64) * (1.0 - p.holdout)).floor() as usize].max(ends[1]);
        let (train, held): (Vec<&Sample>, Vec<&Sample>) =
            samples.iter().partition(|s| s.window_end_ns < split);
        if train.is_empty() || held.is_empty() {
            return Err(format!("{}: nothing to hold out", kind.as_str()));
        }
        let n = train.len() as f64;
        let mut mean = vec![0.0; dims];
        for s in &train {
            for (m, v) in mean.iter_mut().zip(&s.x) {
                *m += v / n;
            }
        }
        let mut std = vec![0.0; dims];
        for s in &train {
            for ((sd, v), m) in std.iter_mut().zip(&s.x).zip(&mean) {
                *sd += (v - m) * (v - m) / n;
            }
        }
        let names = names(kind);
        let std: Vec<f64> = std
            .iter()
            .enumerate()
            .map(|(i, v)| {
                // A deviation from the usual is scaled like the measure it deviates.
                let base = names[i]
                    .strip_prefix("vs_usual_")
                    .and_then(|b| names.iter().position(|n| *n == b))
                    .unwrap_or(i);
                v.sqrt().max(std_floor(names[i], mean[base]))
            })
            .collect();
        let rows: Vec<f64> = train
            .iter()
            .flat_map(|s| {
                let mut z: Vec<f64> =
                    s.x.iter()
                        .zip(mean.iter().zip(&std))
                        .map(|(v, (m, sd))| (v - m) / sd)
                        .collect();
                excess_only(kind, &mut z);
                z
            })
            .collect();
        let x = Array2::from_shape_vec((train.len(), dims), rows).map_err(|e| e.to_string())?;
        let scorer = (d.fit)(&x, p.clusters)?;
        let mut model = Self {
            kind,
            detector: d.name,
            mean,
            std,
            scorer,
            calibration: Calibration::default(),
            training: TrainingRange {
                start_ns: ends[0],
                end_ns: *ends.last().unwrap_or(&0),
                windows: ends.len(),
                samples: samples.len(),
            },
        };
        let scores: Vec<f64> = held.iter().map(|s| model.score(&s.x)).collect();
        let held_windows = ends.iter().filter(|e| **e >= split).count().max(1);
        let hours = held_windows as f64 * p.window_ns as f64 / 3.6e12;
        let rate = (p.false_alarms_per_hour * hours / scores.len() as f64).min(0.5);
        model.calibration = calibrate(scores, rate);
        Ok(model)
    }
}

/// The smallest standard deviation a feature is scaled by. A feature nearly constant in
/// training (the ports a fabric's clients use, a link always saturated) must not turn the
/// first ordinary change into thousands of sigmas: a silence is measured in nats (one more
/// silent flow is not a sigma), a `log_` count a quarter e-fold away (≈ 28 %) is at most one
/// sigma, any other measure 5 % of its mean (a deviation from the usual: of the measure's).
fn std_floor(name: &str, mean: f64) -> f64 {
    if name.ends_with("silence_surprise") {
        1.0
    } else if name.starts_with("log_") || name.starts_with("vs_usual_log_") {
        0.25
    } else {
        (0.05 * mean.abs()).max(1e-2)
    }
}

/// How far below normal an address's features count, in standard deviations. Hosts fall quiet
/// all the time (a client done, a server idle) and none of the anomaly types is a host sending
/// or receiving less: what the model sees of an address is its excess.
const ADDRESS_FLOOR: f64 = -2.0;

/// Caps how far below normal an address's standardised features reach (see [`ADDRESS_FLOOR`]).
fn excess_only(kind: EntityKind, z: &mut [f64]) {
    if matches!(kind, EntityKind::Source | EntityKind::Destination) {
        for v in z {
            *v = v.max(ADDRESS_FLOOR);
        }
    }
}

/// The threshold that `rate` of normal scores exceed, by an exponential tail above p90.
pub fn calibrate(mut scores: Vec<f64>, rate: f64) -> Calibration {
    scores.retain(|s| s.is_finite());
    scores.sort_by(f64::total_cmp);
    let n = scores.len();
    if n == 0 {
        return Calibration {
            method: "none: no held-out scores".into(),
            threshold: f64::INFINITY,
            ..Calibration::default()
        };
    }
    let p90 = scores[((n - 1) as f64 * 0.9) as usize];
    let max = scores[n - 1];
    let tail: Vec<f64> = scores
        .iter()
        .filter(|s| **s > p90)
        .map(|s| s - p90)
        .collect();
    let scale = if tail.is_empty() {
        0.0
    } else {
        tail.iter().sum::<f64>() / tail.len() as f64
    };
    // P(score > p90 + t) = 0.1 · exp(−t / scale)  ⇒  t = scale · ln(0.1 / rate).
    let pot = p90 + scale * (0.1 / rate.max(1e-12)).ln().max(0.0);
    // A small floor keeps an all-identical held-out set from flagging any change at all.
    let threshold = pot.max(max).max(p90 + 0.5);
    Calibration {
        method: "exponential tail above the held-out p90 (peaks over threshold)".into(),
        heldout_samples: n,
        heldout_max: max,
        heldout_p90: p90,
        tail_scale: scale,
        rate,
        threshold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(end: i64, x: Vec<f64>) -> Sample {
        Sample {
            kind: EntityKind::Link,
            entity: "1:1".into(),
            window_end_ns: end,
            x,
            exposure: Default::default(),
            reverse: None,
        }
    }

    #[test]
    fn calibration_extrapolates_the_tail_and_stays_above_the_heldout_maximum() {
        let scores: Vec<f64> = (0..1000).map(|i| (i as f64) / 100.0).collect();
        let c = calibrate(scores.clone(), 1e-4);
        assert!(c.threshold > c.heldout_max, "{c:?}");
        let looser = calibrate(scores, 1e-2);
        assert!(looser.threshold < c.threshold);
        assert!(calibrate(vec![], 0.1).threshold.is_infinite());
    }

    #[test]
    fn a_link_model_flags_a_dead_link_and_not_a_normal_one() {
        let p = TrainParams {
            detector: "kmeans".into(),
            clusters: 3,
            holdout: 0.25,
            false_alarms_per_hour: 1.0,
            window_ns: 1_000_000_000,
        };
        let samples: Vec<Sample> = (0..200)
            .map(|i| {
                let u = 0.4 + 0.05 * ((i * 7 % 11) as f64 / 11.0);
                let d = 0.01 * ((i % 5) as f64 - 2.0);
                // Measured, silence surprises (own, reverse), deviations from the usual.
                sample(
                    i,
                    vec![u, u + 0.1, 5.0 + (i % 3) as f64 * 0.1, 0.0, 0.0, d, d, d],
                )
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(EntityKind::Link, &refs, &p).unwrap();
        let dead = [0.0, 0.0, 0.0, 9.2, 9.2, -0.42, -0.52, -5.1];
        assert!(m.score(&[0.42, 0.52, 5.1, 0.0, 0.0, 0.0, 0.0, 0.0]) < m.threshold());
        assert!(m.score(&dead) > m.threshold());
        assert!(
            m.deviations(&dead)
                .iter()
                .any(|d| d.name == "silence_surprise" && d.z > 5.0)
        );
        let again = EntityModel::load(&m.save()).unwrap();
        assert_eq!(again.score(&dead), m.score(&dead));
        assert!(EntityModel::train(EntityKind::Link, &refs[..2], &p).is_err());
    }
}
