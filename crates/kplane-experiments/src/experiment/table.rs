//! An experiment's results: rows of named cells, key columns naming a point (a threshold, a
//! profile, a series) and value columns measured at it; and their summary over runs.

use std::collections::BTreeMap;

/// One cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Num(f64),
    Text(String),
}

impl Cell {
    pub fn num(&self) -> f64 {
        match self {
            Cell::Num(v) => *v,
            Cell::Text(_) => f64::NAN,
        }
    }

    pub fn text(&self) -> String {
        match self {
            Cell::Num(v) => fmt_num(*v),
            Cell::Text(s) => s.clone(),
        }
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Self {
        Cell::Num(v)
    }
}
impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::Num(v as f64)
    }
}
impl From<u32> for Cell {
    fn from(v: u32) -> Self {
        Cell::Num(v.into())
    }
}
impl From<usize> for Cell {
    fn from(v: usize) -> Self {
        Cell::Num(v as f64)
    }
}
impl From<&str> for Cell {
    fn from(v: &str) -> Self {
        Cell::Text(v.to_string())
    }
}
impl From<String> for Cell {
    fn from(v: String) -> Self {
        Cell::Text(v)
    }
}

/// A number as a table shows it: integers whole, others with 3 significant decimals.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "—".into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Rows under `keys` (what identifies a point) then `values` (what was measured).
#[derive(Clone, Debug)]
pub struct Table {
    pub keys: Vec<&'static str>,
    pub values: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(keys: &[&'static str], values: &[&'static str]) -> Self {
        Self {
            keys: keys.to_vec(),
            values: values.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Every column name, keys first.
    pub fn columns(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.keys.iter().chain(&self.values).copied()
    }

    pub fn col(&self, name: &str) -> usize {
        self.columns()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name:?}"))
    }

    /// Appends a row; it must have a cell per column.
    pub fn push(&mut self, row: Vec<Cell>) {
        assert_eq!(row.len(), self.keys.len() + self.values.len(), "{row:?}");
        self.rows.push(row);
    }

    /// Column `col` over the rows whose leading key cells read `keys` (a prefix of the key
    /// columns; empty: every row), in row order.
    pub fn values(&self, keys: &[&str], col: &str) -> Vec<f64> {
        let c = self.col(col);
        self.rows
            .iter()
            .filter(|r| keys.iter().zip(r.iter()).all(|(k, cell)| cell.text() == *k))
            .map(|r| r[c].num())
            .collect()
    }

    /// Column `col` at the first row whose leading key cells read `keys` (NaN if none).
    pub fn value(&self, keys: &[&str], col: &str) -> f64 {
        self.values(keys, col).first().copied().unwrap_or(f64::NAN)
    }
}

/// Runs of one experiment summarised: per point (same key cells), the mean of every value
/// and, with more than one run, the half-width of its 95 % confidence interval.
#[derive(Clone, Debug)]
pub struct Summary {
    pub means: Table,
    /// Per row of `means`, per value column.
    pub ci95: Vec<Vec<Option<f64>>>,
    pub runs: usize,
}

/// Student's t at 97.5 % for `df` degrees of freedom (1..=30; the normal 1.96 beyond).
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

pub fn summarise(runs: &[Table]) -> Summary {
    let first = &runs[0];
    let nk = first.keys.len();
    // Points in order of first appearance; their rows across runs.
    let mut order: Vec<Vec<Cell>> = Vec::new();
    let mut samples: BTreeMap<String, Vec<&Vec<Cell>>> = BTreeMap::new();
    for t in runs {
        for r in &t.rows {
            let id = r[..nk]
                .iter()
                .map(Cell::text)
                .collect::<Vec<_>>()
                .join("\u{1f}");
            let e = samples.entry(id).or_default();
            if e.is_empty() {
                order.push(r[..nk].to_vec());
            }
            e.push(r);
        }
    }
    let mut means = Table::new(&first.keys, &first.values);
    let mut ci95 = Vec::new();
    for key in order {
        let id = key
            .iter()
            .map(Cell::text)
            .collect::<Vec<_>>()
            .join("\u{1f}");
        let rows = &samples[&id];
        let mut row = key;
        let mut ci = Vec::new();
        for v in 0..first.values.len() {
            let xs: Vec<f64> = rows.iter().map(|r| r[nk + v].num()).collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            row.push(Cell::Num(mean));
            ci.push((xs.len() > 1).then(|| {
                let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
                t975(xs.len() - 1) * (var / n).sqrt()
            }));
        }
        means.push(row);
        ci95.push(ci);
    }
    Summary {
        means,
        ci95,
        runs: runs.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_averaged_per_point_with_a_confidence_interval() {
        let mut a = Table::new(&["t"], &["events"]);
        a.push(vec![20.0.into(), 54.0.into()]);
        a.push(vec![40.0.into(), 29.0.into()]);
        let mut b = a.clone();
        b.rows[0][1] = 56.0.into();
        b.rows[1][1] = 29.0.into();
        let s = summarise(&[a, b]);
        assert_eq!(s.means.rows.len(), 2);
        assert_eq!(s.means.rows[0][1], Cell::Num(55.0));
        // sd 1.414, n 2: 12.706 · 1.414 / 1.414.
        assert!((s.ci95[0][0].unwrap() - 12.706).abs() < 1e-9);
        assert_eq!(s.ci95[1][0], Some(0.0));
        assert_eq!(s.means.rows[1][1], Cell::Num(29.0));
        assert_eq!(s.means.values(&[], "events"), [55.0, 29.0]);
        assert_eq!(s.means.value(&["40"], "events"), 29.0);
        assert!(s.means.value(&["80"], "events").is_nan());
    }

    #[test]
    fn one_run_has_no_interval() {
        let mut a = Table::new(&["profile", "t"], &["reports"]);
        a.push(vec!["web".into(), 10u64.into(), 5u64.into()]);
        let s = summarise(&[a]);
        assert_eq!(s.ci95, vec![vec![None]]);
        assert_eq!(s.means.values(&["web"], "reports"), [5.0]);
    }
}
