//! k-means distance (linfa-clustering): normal entity-windows form a few clusters; a window's
//! score is its Euclidean distance to the nearest centroid, in standard deviations.

use linfa::prelude::*;
use linfa_clustering::KMeans;
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use super::{DetectorKind, Scorer};

pub const KIND: DetectorKind = DetectorKind {
    name: "kmeans",
    fit,
    load,
};

#[derive(Debug, Serialize, Deserialize)]
struct Centroids {
    centroids: Vec<Vec<f64>>,
}

impl Scorer for Centroids {
    fn score(&self, z: &[f64]) -> f64 {
        self.centroids
            .iter()
            .map(|c| {
                c.iter()
                    .zip(z)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(f64::INFINITY, f64::min)
    }

    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Rows the centroids are fitted on, at most.
const FIT_ROWS: usize = 50_000;
/// Initialisations tried (the best is kept).
const RUNS: usize = 4;

fn fit(x: &Array2<f64>, clusters: usize) -> Result<Box<dyn Scorer>, String> {
    if x.nrows() == 0 {
        return Err("no training rows".into());
    }
    // Fewer rows than clusters would leave clusters empty.
    let k = clusters.clamp(1, x.nrows());
    // Centroids from an even sample of at most FIT_ROWS rows: an hour of a fabric's links is
    // hundreds of thousands of rows, and a few clusters are placed as well from a tenth.
    let step = x.nrows().div_ceil(FIT_ROWS);
    let sample = x.slice(ndarray::s![..;step, ..]).to_owned();
    // `params` seeds its generator with a constant: the same data gives the same model.
    let model = KMeans::params(k)
        .n_runs(RUNS)
        .max_n_iterations(200)
        .tolerance(1e-5)
        .fit(&DatasetBase::from(sample))
        .map_err(|e| format!("k-means: {e}"))?;
    let centroids: Vec<Vec<f64>> = model
        .centroids()
        .rows()
        .into_iter()
        .map(|r| r.to_vec())
        .filter(|c| c.iter().all(|v| v.is_finite()))
        .collect();
    if centroids.is_empty() {
        return Err("k-means gave no finite centroid".into());
    }
    Ok(Box::new(Centroids { centroids }))
}

fn load(v: &serde_json::Value) -> Result<Box<dyn Scorer>, String> {
    let c: Centroids = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    Ok(Box::new(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_points_score_higher_and_the_model_round_trips() {
        // Two tight clusters.
        let rows: Vec<f64> = (0..40)
            .flat_map(|i| {
                let base = if i % 2 == 0 { -1.0 } else { 1.0 };
                [base + (i as f64) * 1e-3, base]
            })
            .collect();
        let x = Array2::from_shape_vec((40, 2), rows).unwrap();
        let m = fit(&x, 2).unwrap();
        assert!(m.score(&[1.0, 1.0]) < 0.05);
        assert!(m.score(&[-1.0, -1.0]) < 0.05);
        assert!(m.score(&[4.0, 4.0]) > 3.0);
        let again = load(&m.save()).unwrap();
        assert_eq!(again.score(&[4.0, 4.0]), m.score(&[4.0, 4.0]));
        assert!(fit(&Array2::zeros((0, 2)), 2).is_err());
    }
}
