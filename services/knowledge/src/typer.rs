//! Anomaly typing: per entity kind a decision tree (linfa-trees) over an anomalous
//! entity-window's standardised features, trained on entity-windows labelled by the emulator's
//! ground truth (`types.json` in the state directory). Loops and black holes are not learnt: they
//! are the stream processor's alerts, merged as facts.
//!
//! Confidence is the type's out-of-fold precision for the entity kind: the labelled set is
//! split in [`FOLDS`], each fold typed by a tree trained on the others, and of the rows typed
//! as a type, the share labelled it (smoothed: (right + 1) / (typed + 2)). A type whose
//! confidence is below [`MIN_CONFIDENCE`] is not said: the answer is `unknown`, and nothing is
//! recommended for it.

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

/// Folds of the out-of-fold precision.
pub const FOLDS: usize = 5;
/// Below this confidence a type is not said (`unknown`).
pub const MIN_CONFIDENCE: f64 = 0.5;

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
    /// Per learnt type: the out-of-fold precision over every kind (the registry's figure).
    pub precision: Vec<(AnomalyType, f64)>,
    /// Per kind and type: the out-of-fold precision, smoothed (the confidence).
    confidence: Vec<(EntityKind, AnomalyType, f64)>,
    pub samples: usize,
}

/// A shallow tree: the labelled sets are small, and a deep tree learns their noise.
fn fit_tree(
    x: Array2<f64>,
    y: Array1<usize>,
    kind: EntityKind,
) -> Result<DecisionTree<f64, usize>, String> {
    DecisionTree::params()
        .max_depth(Some(4))
        .min_weight_leaf(2.0)
        .fit(&Dataset::new(x, y))
        .map_err(|e| format!("decision tree ({}): {e}", kind.as_str()))
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
        // (kind, typed out of fold, labelled) of every training row, for the precision.
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
            // Out of fold: each row typed by a tree that did not see it (a set too small to
            // split is typed by the whole tree, which flatters it).
            let n = of_kind.len();
            let mut typed = vec![0usize; n];
            if n >= 2 * FOLDS {
                for f in 0..FOLDS {
                    let rows = |held: bool| -> Vec<usize> {
                        (0..n).filter(|i| (i % FOLDS == f) == held).collect()
                    };
                    let (train, held) = (rows(false), rows(true));
                    let tree = fit_tree(
                        x.select(ndarray::Axis(0), &train),
                        y.select(ndarray::Axis(0), &train),
                        kind,
                    )?;
                    let out = tree.predict(&x.select(ndarray::Axis(0), &held));
                    for (i, p) in held.into_iter().zip(out) {
                        typed[i] = p;
                    }
                }
            }
            let tree = fit_tree(x.clone(), y.clone(), kind)?;
            if n < 2 * FOLDS {
                typed = tree.predict(&x).to_vec();
            }
            fitted.extend(typed.into_iter().zip(y).map(|(p, l)| (kind, p, l)));
            trees.push(OfKind { kind, tree, width });
        }
        let share = |rows: &mut dyn Iterator<Item = &(EntityKind, usize, usize)>, i: usize| {
            let (said, right) = rows
                .filter(|(_, p, _)| *p == i)
                .fold((0usize, 0usize), |(s, r), (_, _, y)| {
                    (s + 1, r + usize::from(*y == i))
                });
            (said, right)
        };
        let precision = LEARNT
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let (said, right) = share(&mut fitted.iter(), i);
                (said > 0).then(|| (*t, right as f64 / said as f64))
            })
            .collect();
        let confidence = MODELLED
            .iter()
            .flat_map(|k| LEARNT.iter().enumerate().map(move |(i, t)| (*k, i, *t)))
            .filter_map(|(k, i, t)| {
                let (said, right) = share(&mut fitted.iter().filter(|(fk, _, _)| *fk == k), i);
                (said > 0).then(|| (k, t, (right as f64 + 1.0) / (said as f64 + 2.0)))
            })
            .collect();
        Ok(Self {
            trees,
            precision,
            confidence,
            samples: data.len(),
        })
    }

    /// The type of an anomalous entity-window and its confidence (the type's out-of-fold
    /// precision for the kind); `unknown` for a kind no anomaly was labelled for, and for a type
    /// whose confidence is below [`MIN_CONFIDENCE`].
    pub fn classify(&self, kind: EntityKind, z: &[f64]) -> (AnomalyType, f64) {
        let Some(tree) = self.trees.iter().find(|t| t.kind == kind) else {
            return (AnomalyType::Unknown, 0.0);
        };
        let t = LEARNT
            .get(tree.predict(z))
            .copied()
            .unwrap_or(AnomalyType::Unknown);
        let confidence = |t: AnomalyType| {
            self.confidence
                .iter()
                .find(|(k, c, _)| *k == kind && *c == t)
                .map_or(0.0, |(_, _, p)| *p)
        };
        match confidence(t) {
            p if t == AnomalyType::Unknown || p >= MIN_CONFIDENCE => (t, p),
            _ => (AnomalyType::Unknown, confidence(AnomalyType::Unknown)),
        }
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

    #[test]
    fn confidence_is_out_of_fold_and_an_unreliable_type_is_not_said() {
        let mut data = Vec::new();
        for i in 0..20 {
            let j = i as f64 * 0.01;
            // Separable: destinations.
            data.push(Labelled {
                kind: EntityKind::Destination,
                z: vec![3.0 + j, 0.0],
                label: AnomalyType::Ddos,
            });
            data.push(Labelled {
                kind: EntityKind::Destination,
                z: vec![-3.0 - j, 0.0],
                label: AnomalyType::PortScan,
            });
            // Not separable: sources of three types with the same features.
            let label = [
                AnomalyType::Ddos,
                AnomalyType::PortScan,
                AnomalyType::Congestion,
            ][i % 3];
            data.push(Labelled {
                kind: EntityKind::Source,
                z: vec![5.0, 5.0],
                label,
            });
        }
        let t = Typer::train(&data).unwrap();
        let (ty, p) = t.classify(EntityKind::Destination, &[3.1, 0.0]);
        assert_eq!(ty, AnomalyType::Ddos);
        // 20 of 20 out of fold, smoothed: 21 / 22.
        assert!((p - 21.0 / 22.0).abs() < 1e-9, "{p}");
        // Whatever the tree says for the sources is right a third of the time: not said.
        assert_eq!(
            t.classify(EntityKind::Source, &[5.0, 5.0]).0,
            AnomalyType::Unknown
        );
    }
}
