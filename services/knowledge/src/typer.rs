//! Anomaly typing: a decision tree (linfa-trees) over an anomalous entity-window — its entity
//! kind and its standardised features — trained on entity-windows labelled by the emulator's
//! ground truth (`types.json` in the state directory). Loops and black holes are not learnt: they
//! are the stream processor's alerts, merged as facts.

use kplane_model::results::{AnomalyType, EntityKind};
use linfa::prelude::*;
use linfa_trees::DecisionTree;
use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

use crate::features::MODELLED;

/// The types the classifier learns.
pub const LEARNT: [AnomalyType; 5] = [
    AnomalyType::Ddos,
    AnomalyType::PortScan,
    AnomalyType::Congestion,
    AnomalyType::LinkFailure,
    AnomalyType::Unknown,
];

/// Width of the standardised-feature part of the classifier input (the widest kind).
const WIDTH: usize = 10;

/// One labelled anomalous entity-window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Labelled {
    pub kind: EntityKind,
    pub z: Vec<f64>,
    #[serde(rename = "type")]
    pub label: AnomalyType,
}

/// The classifier's input row.
fn row(kind: EntityKind, z: &[f64]) -> Vec<f64> {
    let mut r: Vec<f64> = MODELLED
        .iter()
        .map(|k| if *k == kind { 1.0 } else { 0.0 })
        .collect();
    r.extend((0..WIDTH).map(|i| z.get(i).copied().unwrap_or(0.0)));
    r
}

#[derive(Debug)]
pub struct Typer {
    tree: DecisionTree<f64, usize>,
    /// Per learnt type: the fraction of training rows predicted as it that are it.
    pub precision: Vec<(AnomalyType, f64)>,
    pub samples: usize,
}

impl Typer {
    pub fn train(data: &[Labelled]) -> Result<Self, String> {
        if data.is_empty() {
            return Err("no labelled anomalies to learn types from".into());
        }
        let rows: Vec<f64> = data.iter().flat_map(|l| row(l.kind, &l.z)).collect();
        let x = Array2::from_shape_vec((data.len(), MODELLED.len() + WIDTH), rows)
            .map_err(|e| e.to_string())?;
        let y: Array1<usize> = data
            .iter()
            .map(|l| {
                LEARNT
                    .iter()
                    .position(|t| *t == l.label)
                    .unwrap_or(LEARNT.len() - 1)
            })
            .collect();
        let ds = Dataset::new(x.clone(), y.clone());
        // Shallow: the labelled sets are small, and a deep tree learns their noise.
        let tree = DecisionTree::params()
            .max_depth(Some(4))
            .min_weight_leaf(2.0)
            .fit(&ds)
            .map_err(|e| format!("decision tree: {e}"))?;
        let predicted = tree.predict(&x);
        let precision = LEARNT
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let said = predicted.iter().filter(|p| **p == i).count();
                let right = predicted
                    .iter()
                    .zip(y.iter())
                    .filter(|(p, y)| **p == i && **y == i)
                    .count();
                (said > 0).then(|| (*t, right as f64 / said as f64))
            })
            .collect();
        Ok(Self {
            tree,
            precision,
            samples: data.len(),
        })
    }

    /// The type of an anomalous entity-window, and the classifier's training precision for it.
    pub fn classify(&self, kind: EntityKind, z: &[f64]) -> (AnomalyType, f64) {
        let x = Array2::from_shape_vec((1, MODELLED.len() + WIDTH), row(kind, z))
            .expect("one row of the classifier's width");
        let i = self.tree.predict(&x)[0];
        let t = LEARNT.get(i).copied().unwrap_or(AnomalyType::Unknown);
        let p = self
            .precision
            .iter()
            .find(|(k, _)| *k == t)
            .map_or(0.0, |(_, p)| *p);
        (t, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_separates_learnt_types_by_kind_and_features() {
        let mut data = Vec::new();
        for i in 0..20 {
            let j = i as f64 * 0.1;
            data.push(Labelled {
                kind: EntityKind::Destination,
                z: vec![3.0 + j, 3.0, 0.1, 6.0 + j, 8.0],
                label: AnomalyType::Ddos,
            });
            data.push(Labelled {
                kind: EntityKind::Destination,
                z: vec![9.0 + j, 1.0, 12.0, 4.0, 2.0],
                label: AnomalyType::PortScan,
            });
            data.push(Labelled {
                kind: EntityKind::Queue,
                z: vec![5.0 + j, 6.0, 7.0, 0.0],
                label: AnomalyType::Congestion,
            });
            data.push(Labelled {
                kind: EntityKind::Link,
                z: vec![-4.0 - j, -4.0, -6.0],
                label: AnomalyType::LinkFailure,
            });
        }
        let t = Typer::train(&data).unwrap();
        let kinds = [
            (
                EntityKind::Destination,
                vec![3.5, 3.0, 0.2, 6.5, 8.0],
                AnomalyType::Ddos,
            ),
            (
                EntityKind::Destination,
                vec![9.5, 1.0, 11.0, 4.0, 2.0],
                AnomalyType::PortScan,
            ),
            (
                EntityKind::Queue,
                vec![5.5, 6.0, 7.0, 0.0],
                AnomalyType::Congestion,
            ),
            (
                EntityKind::Link,
                vec![-4.5, -4.0, -6.0],
                AnomalyType::LinkFailure,
            ),
        ];
        for (k, z, want) in kinds {
            assert_eq!(t.classify(k, &z).0, want);
        }
        assert!(Typer::train(&[]).is_err());
    }
}
