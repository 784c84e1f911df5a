//! Models of normal behaviour, one module folder each, registered in [`REGISTRY`]: a
//! detector is fitted on standardised entity-windows of normal traffic and scores a new one by
//! how far it lies from them. Adding one: a folder here and one line in the registry.

mod kmeans;

use ndarray::Array2;

/// A fitted model: scores standardised feature vectors (higher: further from normal).
pub trait Scorer: Send + Sync + std::fmt::Debug {
    fn score(&self, z: &[f64]) -> f64;
    /// The fitted parameters, stored in the model registry and given back to `load`.
    fn save(&self) -> serde_json::Value;
}

/// Fits a detector on standardised rows, with a size parameter (k-means: clusters).
pub type Fit = fn(&Array2<f64>, usize) -> Result<Box<dyn Scorer>, String>;
/// Rebuilds a fitted detector from what [`Scorer::save`] gave.
pub type Load = fn(&serde_json::Value) -> Result<Box<dyn Scorer>, String>;

/// A registered detector.
#[derive(Debug)]
pub struct DetectorKind {
    pub name: &'static str,
    pub fit: Fit,
    pub load: Load,
}

/// Every detector, by name.
pub const REGISTRY: &[DetectorKind] = &[kmeans::KIND];

pub fn by_name(name: &str) -> Result<&'static DetectorKind, crate::KnowledgeError> {
    REGISTRY.iter().find(|d| d.name == name).ok_or_else(|| {
        let known: Vec<_> = REGISTRY.iter().map(|d| d.name).collect();
        crate::KnowledgeError::Config(format!("detector {name:?} is not one of {known:?}"))
    })
}
