//! Forecast errors against what each window turned out to be: the model's, and three
//! baselines' (last value, EWMA, seasonal naive), for `kplane eval knowledge` and `replay`.

use std::collections::BTreeMap;

use kplane_model::results::Forecast;

use super::knowledge::Csv;

/// Forecast errors of one method: windows, sum of |error| / actual (actual > 0), sum of
/// squared errors.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Err3 {
    pub(super) n: u64,
    n_pct: u64,
    abs_pct: f64,
    sq: f64,
}

impl Err3 {
    fn add(&mut self, predicted: f64, actual: f64) {
        self.n += 1;
        self.sq += (predicted - actual).powi(2);
        if actual > 0.0 {
            self.n_pct += 1;
            self.abs_pct += (predicted - actual).abs() / actual;
        }
    }
    pub(super) fn add_all(&mut self, o: &Self) {
        self.n += o.n;
        self.n_pct += o.n_pct;
        self.abs_pct += o.abs_pct;
        self.sq += o.sq;
    }
    pub(super) fn mape(&self) -> f64 {
        100.0 * self.abs_pct / self.n_pct.max(1) as f64
    }
    pub(super) fn rmse(&self) -> f64 {
        (self.sq / self.n.max(1) as f64).sqrt()
    }
}

/// Per series: model, last value, EWMA, seasonal naive.
pub(super) type ForecastScore = BTreeMap<String, [Err3; 4]>;

/// Each (series, entity)'s period in windows, as the forecasts learnt it.
pub(super) type Periods = BTreeMap<(String, String), usize>;

/// The periods of a model registry's forecast models.
pub(super) fn periods_of(r: &kplane_knowledge::registry::Registry) -> Periods {
    r.forecasts
        .iter()
        .flat_map(|(series, info)| {
            info.model
                .periods
                .iter()
                .map(move |(entity, p)| ((series.clone(), entity.clone()), *p))
        })
        .collect()
}

/// Scores each forecast and the baselines against what the window turned out to be. The
/// seasonal naive forecast is the value one period before, with the period the forecasts learnt
/// for the entity (one window, the last value, for an entity without one or whose value a
/// period before is not known).
pub(super) fn score_forecasts(forecasts: &[Forecast], periods: &Periods, into: &mut ForecastScore) {
    // What window T turned out to be is the last value of the forecast made at T.
    let actual: BTreeMap<(&str, &str, i64), f64> = forecasts
        .iter()
        .map(|f| {
            (
                (f.series.as_str(), f.entity.as_str(), f.observed_end_ns),
                f.last_value,
            )
        })
        .collect();
    for f in forecasts {
        let at = |t: i64| {
            actual
                .get(&(f.series.as_str(), f.entity.as_str(), t))
                .copied()
        };
        let Some(v) = at(f.window_end_ns) else {
            continue;
        };
        let window = f.window_end_ns - f.observed_end_ns;
        let seasonal = periods
            .get(&(f.series.clone(), f.entity.clone()))
            .and_then(|p| at(f.window_end_ns - *p as i64 * window))
            .unwrap_or(f.last_value);
        let e = into.entry(f.series.clone()).or_default();
        e[0].add(f.predicted, v);
        e[1].add(f.last_value, v);
        e[2].add(f.ewma, v);
        e[3].add(seasonal, v);
    }
}

/// The forecasts' errors per series, for each `(family, its load, score)` row (all pooled
/// first), with the model's gain over the best baseline on each measure.
pub(super) fn forecast_table(
    rows: &[(&str, &str, &ForecastScore)],
    table: &str,
    csv: &mut Csv,
) -> String {
    let mut md = "\n| forecast | families | windows | MAPE model | MAPE last value | MAPE EWMA | MAPE seasonal naive | vs best baseline | RMSE model | RMSE last value | RMSE EWMA | RMSE seasonal naive | vs best baseline |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n".to_string();
    // Gain over the best of the three baselines, on each measure.
    let gain = |model: f64, baselines: [f64; 3]| {
        let best = baselines.into_iter().fold(f64::INFINITY, f64::min);
        100.0 * (1.0 - model / best.max(1e-9))
    };
    for (family, load, score) in rows {
        let families = if load.is_empty() {
            family.to_string()
        } else {
            format!("{family} ({load})")
        };
        for (series, [m, l, e, sn]) in score.iter() {
            let mape_gain = gain(m.mape(), [l.mape(), e.mape(), sn.mape()]);
            let rmse_gain = gain(m.rmse(), [l.rmse(), e.rmse(), sn.rmse()]);
            md += &format!(
                "| {series} | {families} | {} | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {mape_gain:+.0} % | {:.1} | {:.1} | {:.1} | {:.1} | {rmse_gain:+.0} % |\n",
                m.n,
                m.mape(),
                l.mape(),
                e.mape(),
                sn.mape(),
                m.rmse(),
                l.rmse(),
                e.rmse(),
                sn.rmse()
            );
            for (metric, v) in [
                ("forecast_mape_model", m.mape()),
                ("forecast_mape_last_value", l.mape()),
                ("forecast_mape_ewma", e.mape()),
                ("forecast_mape_seasonal_naive", sn.mape()),
                ("forecast_mape_gain_vs_best_baseline_pct", mape_gain),
                ("forecast_rmse_model", m.rmse()),
                ("forecast_rmse_last_value", l.rmse()),
                ("forecast_rmse_ewma", e.rmse()),
                ("forecast_rmse_seasonal_naive", sn.rmse()),
                ("forecast_rmse_gain_vs_best_baseline_pct", rmse_gain),
            ] {
                csv.row(family, table, metric, series, v);
            }
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seasonal_naive_baseline_repeats_the_value_a_learnt_period_before() {
        // A period-2 wave: 10, 30, 10, 30, … observed at windows 1, 2, …
        let value = |t: i64| if t % 2 == 1 { 10.0 } else { 30.0 };
        let forecasts: Vec<Forecast> = (1..=8)
            .map(|t| Forecast {
                series: "link_utilization".into(),
                entity: "1:1".into(),
                window_end_ns: t + 1,
                horizon_windows: 1,
                predicted: value(t + 1),
                last_value: value(t),
                observed_end_ns: t,
                ewma: 20.0,
                model_version: 1,
            })
            .collect();
        let periods: Periods = [(("link_utilization".into(), "1:1".into()), 2)].into();
        let mut score = ForecastScore::new();
        score_forecasts(&forecasts, &periods, &mut score);
        let [model, last, ewma, seasonal] = score["link_utilization"];
        assert_eq!(model.n, 7);
        assert_eq!(model.rmse(), 0.0);
        assert_eq!(last.rmse(), 20.0);
        assert_eq!(ewma.rmse(), 10.0);
        // The first window has no value a period before: the last value stands in.
        assert!(seasonal.rmse() < last.rmse() / 2.0, "{seasonal:?}");
        let mut no_period = ForecastScore::new();
        score_forecasts(&forecasts, &Periods::new(), &mut no_period);
        assert_eq!(no_period["link_utilization"][3].rmse(), 20.0);
    }

    #[test]
    fn the_forecast_table_has_a_row_per_family_with_its_load_and_the_pooled_one_first() {
        // One destination forecast at 100 per window; the windows turned out 100 then 200.
        let forecast = |observed_s: i64, last_value: f64| kplane_model::results::Forecast {
            series: "destination_bytes".into(),
            entity: "10.0.0.1".into(),
            window_end_ns: (observed_s + 1) * 1_000_000_000,
            horizon_windows: 1,
            predicted: 100.0,
            last_value,
            observed_end_ns: observed_s * 1_000_000_000,
            ewma: last_value,
            model_version: 1,
        };
        let mut score = ForecastScore::default();
        let run = [forecast(1, 50.0), forecast(2, 100.0), forecast(3, 200.0)];
        score_forecasts(&run, &Periods::default(), &mut score);
        let mut csv = Csv::default();
        let md = forecast_table(
            &[("all", "", &score), ("ft4-100m", "periodic jobs", &score)],
            "held-out",
            &mut csv,
        );
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| destination"))
            .collect();
        assert_eq!(rows.len(), 2, "{md}");
        assert!(
            rows[0].starts_with("| destination_bytes | all | 2 | 25.0 % | 50.0 % |"),
            "{md}"
        );
        assert!(
            rows[1].starts_with("| destination_bytes | ft4-100m (periodic jobs) | 2 |"),
            "{md}"
        );
        // The model's MAPE (0 % and 50 % → 25 %) against the last value's (50 % twice).
        assert!(
            csv.0.contains(
                "ft4-100m,held-out,forecast_mape_gain_vs_best_baseline_pct,destination_bytes,50\n"
            ),
            "{}",
            csv.0
        );
    }
}
