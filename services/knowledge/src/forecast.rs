//! Forecasts of the next window: per link utilisation (`link_utilization`) and per destination
//! volume (`destination_bytes`). A linear model (linfa-linear, least squares weighted for
//! relative error) on lagged values, their EWMA and their median, each scaled by the entity's
//! recent mean so that one model serves every entity of a series; scored online against the
//! last-value and EWMA baselines.

use std::collections::{BTreeMap, HashMap, VecDeque};

use kplane_model::results::Forecast;
use linfa::prelude::*;
use linfa_linear::{FittedLinearRegression, LinearRegression};
use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

use crate::features::{Window, by_entity, link_entity};

pub const SERIES: [&str; 2] = ["link_utilization", "destination_bytes"];
/// Lags the model reads.
const LAGS: usize = 3;
/// The model's inputs: the lags, the EWMA and the median.
const INPUTS: usize = LAGS + 2;
/// How many values per entity are kept.
const KEPT: usize = 16;
const EWMA_ALPHA: f64 = 0.3;

/// One window's value of every series entity.
pub fn values(w: &Window) -> Vec<(&'static str, String, f64)> {
    let mut out = Vec::new();
    for (&(node, port), &(n, sum, _, _)) in &w.links {
        let mean = if n > 0.0 { sum / n } else { 0.0 };
        out.push((SERIES[0], link_entity(node, port), mean));
    }
    let mut bytes: BTreeMap<std::net::IpAddr, f64> = BTreeMap::new();
    for f in &w.flows {
        if let Some(d) = f.dst {
            *bytes.entry(d).or_default() += f.bytes;
        }
    }
    out.extend(
        bytes
            .into_iter()
            .map(|(d, b)| (SERIES[1], d.to_string(), b)),
    );
    out
}

/// Errors of one method over the windows scored so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Errors {
    pub windows: u64,
    pub abs_pct_sum: f64,
    pub pct_n: u64,
    pub sq_sum: f64,
}

impl Errors {
    fn add(&mut self, predicted: f64, actual: f64) {
        self.windows += 1;
        self.sq_sum += (predicted - actual).powi(2);
        if actual.abs() > 1e-9 {
            self.abs_pct_sum += ((predicted - actual) / actual).abs();
            self.pct_n += 1;
        }
    }

    /// Mean absolute percentage error (%), over values that are not zero.
    pub fn mape(&self) -> f64 {
        100.0 * self.abs_pct_sum / self.pct_n.max(1) as f64
    }

    pub fn rmse(&self) -> f64 {
        (self.sq_sum / self.windows.max(1) as f64).sqrt()
    }
}

/// Online evaluation of a series: the model against its baselines.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub model: Errors,
    pub last_value: Errors,
    pub ewma: Errors,
}

#[derive(Debug, Default)]
struct History {
    values: VecDeque<f64>,
    ewma: f64,
    /// (model, last value, ewma) forecast for the next window.
    pending: Option<(f64, f64, f64)>,
    /// The last window (end) with a value.
    seen_ns: i64,
}

impl History {
    fn push(&mut self, v: f64) {
        self.ewma = if self.values.is_empty() {
            v
        } else {
            EWMA_ALPHA * v + (1.0 - EWMA_ALPHA) * self.ewma
        };
        self.values.push_back(v);
        if self.values.len() > KEPT {
            self.values.pop_front();
        }
    }

    fn scale(&self) -> f64 {
        let n = self.values.len().max(1) as f64;
        (self.values.iter().sum::<f64>() / n).abs().max(1e-9)
    }

    /// The model's input (lags newest first, the EWMA, the median of the kept values), scaled
    /// by their mean.
    fn input(&self) -> Option<Vec<f64>> {
        if self.values.len() < LAGS {
            return None;
        }
        let s = self.scale();
        let mut x: Vec<f64> = self.values.iter().rev().take(LAGS).map(|v| v / s).collect();
        x.push(self.ewma / s);
        let mut sorted: Vec<f64> = self.values.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        x.push(sorted[sorted.len() / 2] / s);
        Some(x)
    }
}

/// The fitted linear model of one series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coefficients {
    pub weights: Vec<f64>,
    pub intercept: f64,
    pub rows: usize,
}

impl Coefficients {
    fn predict(&self, x: &[f64]) -> f64 {
        self.intercept + self.weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>()
    }
}

/// Fits one series' model on consecutive values per entity (oldest first), minimising the
/// squared *relative* error: each row is divided by the value it predicts (weighted least
/// squares), so that a window of a quiet entity counts as much as one of a busy entity and a
/// spike does not drag every forecast up — the error operators read is relative (MAPE).
/// Windows with a value of zero are skipped (a relative error is undefined there).
pub fn fit(series: &[Vec<f64>]) -> Result<Coefficients, String> {
    let width = INPUTS + 1;
    let mut rows = Vec::new();
    let mut n = 0;
    for values in series {
        let mut h = History::default();
        for &v in values {
            if let Some(x) = h.input() {
                let y = v / h.scale();
                if y > 1e-9 {
                    rows.extend(x.iter().map(|x| x / y));
                    // The intercept's column, weighted like the rest.
                    rows.push(1.0 / y);
                    n += 1;
                }
            }
            h.push(v);
        }
    }
    if n < 2 * width {
        return Err(format!(
            "{n} training rows; at least {} are needed",
            2 * width
        ));
    }
    let x = Array2::from_shape_vec((n, width), rows).map_err(|e| e.to_string())?;
    let model: FittedLinearRegression<f64> = LinearRegression::new()
        .with_intercept(false)
        .fit(&Dataset::new(x, Array1::from_elem(n, 1.0)))
        .map_err(|e| format!("least squares: {e}"))?;
    let p = model.params().to_vec();
    Ok(Coefficients {
        weights: p[..INPUTS].to_vec(),
        intercept: p[INPUTS],
        rows: n,
    })
}

/// Live forecasting: per series entity a short history, the models, and their evaluation.
#[derive(Debug, Default)]
pub struct Forecaster {
    models: BTreeMap<&'static str, Coefficients>,
    /// Per series, per entity.
    history: BTreeMap<&'static str, HashMap<String, History>>,
    pub evaluation: BTreeMap<&'static str, Evaluation>,
}

impl Forecaster {
    pub fn set_models(&mut self, models: BTreeMap<&'static str, Coefficients>) {
        self.models = models;
    }

    pub fn models(&self) -> &BTreeMap<&'static str, Coefficients> {
        &self.models
    }

    /// Scores last window's forecasts against window `w`'s `values` ([`values`]), then
    /// forecasts the window after `w`.
    pub fn observe(
        &mut self,
        w: &Window,
        values: &[(&'static str, String, f64)],
        window_ns: i64,
        version: u64,
    ) -> Vec<Forecast> {
        let mut out = Vec::new();
        for (series, entity, v) in values {
            let (series, v) = (*series, *v);
            let h = by_entity(
                self.history.entry(series).or_default(),
                entity,
                History::default,
            );
            if let Some((m, last, ewma)) = h.pending.take() {
                let e = self.evaluation.entry(series).or_default();
                e.model.add(m, v);
                e.last_value.add(last, v);
                e.ewma.add(ewma, v);
            }
            h.push(v);
            h.seen_ns = w.end_ns;
            let Some(model) = self.models.get(series) else {
                continue;
            };
            let Some(x) = h.input() else {
                continue;
            };
            let predicted = (model.predict(&x) * h.scale()).max(0.0);
            h.pending = Some((predicted, v, h.ewma));
            out.push(Forecast {
                series: series.to_string(),
                entity: entity.clone(),
                window_end_ns: w.end_ns + window_ns,
                horizon_windows: 1,
                predicted,
                last_value: v,
                observed_end_ns: w.end_ns,
                ewma: h.ewma,
                model_version: version,
            });
        }
        // Entities not seen for `KEPT` windows are forgotten (bounded state); a forecast for
        // a window the entity does not appear in is not scored.
        let horizon = w.end_ns - KEPT as i64 * window_ns;
        for of_series in self.history.values_mut() {
            of_series.retain(|_, h| h.seen_ns >= horizon);
        }
        for h in self.history.values_mut().flat_map(HashMap::values_mut) {
            if h.seen_ns < w.end_ns {
                h.pending = None;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seasonal_series_is_forecast_better_than_last_value_and_ewma() {
        // Period 4: 10, 20, 30, 20, …
        let pattern = [10.0, 20.0, 30.0, 20.0];
        let series: Vec<Vec<f64>> = (0..4)
            .map(|k| (0..64).map(|i| pattern[i % 4] * (1.0 + k as f64)).collect())
            .collect();
        let c = fit(&series).unwrap();
        let mut h = History::default();
        let mut eval = Evaluation::default();
        for (i, &v) in series[1].iter().enumerate() {
            if let (Some(x), true) = (h.input(), i > 8) {
                eval.model.add(c.predict(&x) * h.scale(), v);
                eval.last_value.add(*h.values.back().unwrap(), v);
                eval.ewma.add(h.ewma, v);
            }
            h.push(v);
        }
        assert!(eval.model.mape() < eval.ewma.mape() * 0.8, "{eval:?}");
        assert!(eval.model.rmse() < eval.last_value.rmse(), "{eval:?}");
        assert!(fit(&[vec![1.0, 2.0]]).is_err());
    }
}
