//! Anomaly typing: per entity kind a decision tree (linfa-trees) over an anomalous
//! entity-window's standardised features, trained on entity-windows labelled by the emulator's
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

/// One labelled anomalous entity-window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Labelled {
    pub kind: EntityKind,
    pub z: Vec<f64>,
    #[serde(rename = "type")]
    pub label: AnomalyType,
}

fn index_of(t: AnomalyType) -> usize {
    LEARNT
        .iter()
        .position(|l| *l == t)
        .unwrap_or(LEARNT.len() - 1)
}

/// The classifier of one entity kind: a feature means one thing within a kind (`z[0]` is an
/// address's flows, a queue's occupancy), and a kind is only given the types it was labelled
/// with — a queue is never typed a port scan because a scanner's features resemble it.
#[derive(Debug)]
struct OfKind {
    kind: EntityKind,
    tree: DecisionTree<f64, usize>,
    width: usize,
}

impl OfKind {
    fn predict(&self, z: &[f64]) -> usize {
        let row: Vec<f64> = (0..self.width)
            .map(|i| z.get(i).copied().unwrap_or(0.0))
            .collect();
        let x = Array2::from_shape_vec((1, self.width), row).expect("one row of the tree's width");
        self.tree.predict(&x)[0]
    }
}

#[derive(Debug)]
pub struct Typer {
    trees: Vec<OfKind>,
    /// Per learnt type: the fraction of training rows predicted as it that are it.
    pub precision: Vec<(AnomalyType, f64)>,
    pub samples: usize,
}

impl Typer {
    /// A decision tree per entity kind with labelled anomalies.
    pub fn train(data: &[Labelled]) -> Result<Self, crate::KnowledgeError> {
        Self::fit(data).map_err(crate::KnowledgeError::Training)
    }

    fn fit(data: &[Labelled]) -> Result<Self, String> {
        if data.is_empty() {
            return Err("no labelled anomalies to learn types from".into());
        }
        let mut trees = Vec::new();
        // (predicted, labelled) of every training row, for the precision.
        let mut fitted = Vec::new();
        for kind in MODELLED {
            let of_kind: Vec<&Labelled> = data.iter().filter(|l| l.kind == kind).collect();
            let Some(width) = of_kind.iter().map(|l| l.z.len()).max() else {
                continue;
            };
            let rows: Vec<f64> = of_kind
                .iter()
                .flat_map(|l| (0..width).map(|i| l.z.get(i).copied().unwrap_or(0.0)))
                .collect();
            let x =
                Array2::from_shape_vec((of_kind.len(), width), rows).map_err(|e| e.to_string())?;
            let y: Array1<usize> = of_kind.iter().map(|l| index_of(l.label)).collect();
            // Shallow: the labelled sets are small, and a deep tree learns their noise.
            let tree = DecisionTree::params()
                .max_depth(Some(4))
                .min_weight_leaf(2.0)
                .fit(&Dataset::new(x.clone(), y.clone()))
                .map_err(|e| format!("decision tree ({}): {e}", kind.as_str()))?;
            fitted.extend(tree.predict(&x).into_iter().zip(y));
            trees.push(OfKind { kind, tree, width });
        }
        let precision = LEARNT
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let said = fitted.iter().filter(|(p, _)| *p == i).count();
                let right = fitted.iter().filter(|(p, y)| *p == i && *y == i).count();
                (said > 0).then(|| (*t, right as f64 / said as f64))
            })
            .collect();
        Ok(Self {
            trees,
            precision,
            samples: data.len(),
        })
    }

    /// The type of an anomalous entity-window, and the classifier's training precision for it
    /// (`unknown` for a kind no anomaly was labelled for).
    pub fn classify(&self, kind: EntityKind, z: &[f64]) -> (AnomalyType, f64) {
        let Some(t) = self.trees.iter().find(|t| t.kind == kind) else {
            return (AnomalyType::Unknown, 0.0);
        };
        let t = LEARNT
            .get(t.predict(z))
            .copied()
            .unwrap_or(AnomalyType::Unknown);
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
        // A kind nobody labelled is not typed.
        assert_eq!(
            t.classify(EntityKind::Source, &[9.0; 5]).0,
            AnomalyType::Unknown
        );
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
