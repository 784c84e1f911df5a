//! The model registry, persisted beside the store (`<state-dir>/models.json`): the current
//! version, its models with their training range, features, calibration and evaluation, the
//! type classifier, the forecast models, and the history of (re)trainings. A restart loads it
//! instead of learning again.

use crate::KnowledgeError;
use std::collections::BTreeMap;
use std::path::Path;

use kplane_model::results::EntityKind;
use serde::{Deserialize, Serialize};

use crate::forecast::{Coefficients, Evaluation};
use crate::model::SavedModel;
use crate::typer::Labelled;

/// `learning` (cold start: not enough history), `ready`, or `failed` (no model could be
/// trained; `message` says why).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Learning,
    Ready,
    Failed,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TyperInfo {
    pub samples: usize,
    /// Per type, the out-of-fold precision (docs/knowledge.md, typing).
    pub precision: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForecastInfo {
    pub model: Coefficients,
    /// Online errors of the model and its baselines since this process started.
    #[serde(default)]
    pub evaluation: Evaluation,
}

/// One (re)training, kept in the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Training {
    pub version: u64,
    pub trained_ns: i64,
    pub ok: bool,
    pub message: String,
    pub seconds: f64,
}

/// An entity whose `unknown` change settled: not raised as `unknown` again until the model
/// version `from_version` (two trainings after the settling, which learnt its new usual).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    pub kind: EntityKind,
    pub entity: String,
    pub from_version: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    pub version: u64,
    pub status: Status,
    pub message: String,
    pub models: Vec<SavedModel>,
    pub typer: Option<TyperInfo>,
    pub forecasts: BTreeMap<String, ForecastInfo>,
    pub history: Vec<Training>,
    /// What settled and is not raised as `unknown` yet: a restart remembers it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<Settled>,
}

/// Trainings kept in the history.
const HISTORY: usize = 50;

impl Registry {
    pub const FILE: &'static str = "models.json";
    /// Labelled anomalies for the type classifier (see docs/knowledge.md for the format).
    pub const TYPES_FILE: &'static str = "types.json";

    pub fn load(dir: &Path) -> Result<Option<Self>, KnowledgeError> {
        let p = dir.join(Self::FILE);
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| KnowledgeError::Corrupt {
                    path: p,
                    reason: format!("not a model registry ({e}); remove it to train afresh"),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Written to a temporary file and renamed: a crash leaves the old or the new registry.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!("{}.tmp", Self::FILE));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(tmp, dir.join(Self::FILE))
    }

    pub fn record(&mut self, t: Training) {
        self.history.push(t);
        if self.history.len() > HISTORY {
            self.history.remove(0);
        }
    }
}

/// The labelled anomalies the type definitions' confidences are measured on:
/// `<state-dir>/types.json` if present, else the set shipped with kplane (the four emulator
/// families' training variants: docs/knowledge.md, "Confidence is measured").
pub fn labelled(dir: &Path) -> Result<Vec<Labelled>, KnowledgeError> {
    let p = dir.join(Registry::TYPES_FILE);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => SHIPPED.to_string(),
        Err(e) => return Err(e.into()),
    };
    serde_json::from_str(&text).map_err(|e| KnowledgeError::Corrupt {
        path: p,
        reason: format!("not labelled anomalies ({e})"),
    })
}

/// The shipped labelled set.
pub const SHIPPED: &str = include_str!("types.json");
