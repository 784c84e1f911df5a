//! What an experiment leaves in its output directory: `NAME.csv` (every run's rows),
//! `NAME[-PLOT].svg` (drawn with plotters) and `NAME.md` (the summary table and kplane's
//! figures beside the paper's).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

use super::table::{Cell, Summary, Table, fmt_num};
use super::{Comparison, Experiment, Plot};

/// Every run's rows, with the run's index and seed first.
pub fn write_csv(path: &Path, runs: &[(u64, Table)]) -> anyhow::Result<()> {
    let mut s = String::from("run,seed");
    for c in runs[0].1.columns() {
        s.push(',');
        s.push_str(c);
    }
    s.push('\n');
    for (i, (seed, t)) in runs.iter().enumerate() {
        for r in &t.rows {
            let _ = write!(s, "{i},{seed}");
            for c in r {
                s.push(',');
                match c {
                    Cell::Num(v) => {
                        let _ = write!(s, "{v}");
                    }
                    Cell::Text(t) if t.contains([',', '"']) => {
                        let _ = write!(s, "\"{}\"", t.replace('"', "\"\""));
                    }
                    Cell::Text(t) => s.push_str(t),
                }
            }
            s.push('\n');
        }
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// The summary as a markdown table: a value with its 95 % interval when there were runs
/// enough for one.
pub fn markdown_table(s: &Summary) -> String {
    let t = &s.means;
    let mut out = String::new();
    let cols: Vec<&str> = t.columns().collect();
    let _ = writeln!(out, "| {} |", cols.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(cols.len()));
    for (r, ci) in t.rows.iter().zip(&s.ci95) {
        let mut cells: Vec<String> = r[..t.keys.len()].iter().map(Cell::text).collect();
        for (v, c) in r[t.keys.len()..].iter().zip(ci) {
            cells.push(match c {
                Some(h) => format!("{} ± {}", v.text(), fmt_num(*h)),
                None => v.text(),
            });
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// The whole markdown report of one experiment.
pub fn markdown(
    e: &dyn Experiment,
    s: &Summary,
    cmp: &[Comparison],
    plots: &[PathBuf],
    fast: bool,
    seed: u64,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### `{}` — {}\n", e.name(), e.about());
    let _ = writeln!(out, "Source: {}.\n", e.source());
    let _ = writeln!(
        out,
        "Run: `kplane experiment {}{} --runs {} --seed {seed}`.\n",
        e.name(),
        if fast { " --fast" } else { "" },
        s.runs
    );
    let _ = writeln!(out, "{}\n", e.setup(fast));
    if !cmp.is_empty() {
        let _ = writeln!(out, "| | paper | kplane |\n| --- | --- | --- |");
        for c in cmp {
            let _ = writeln!(out, "| {} | {} | {} |", c.what, c.paper, c.kplane);
        }
        out.push('\n');
    }
    out.push_str(&markdown_table(s));
    out.push('\n');
    for p in plots {
        if let Some(f) = p.file_name() {
            let _ = writeln!(out, "![{}]({})\n", e.name(), f.to_string_lossy());
        }
    }
    let notes = e.notes();
    if !notes.is_empty() {
        let _ = writeln!(out, "{notes}\n");
    }
    out
}

/// A log axis's tick value to two significant digits (63, 2.5, 0.016).
fn two_digits(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return fmt_num(v);
    }
    let e = v.log10().floor() as i32;
    let step = 10f64.powi(e - 1);
    let r = (v / step).round() * step;
    format!("{r:.*}", (1 - e).max(0) as usize)
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// One plot of the means: a line per distinct value of the plot's series columns.
pub fn draw(path: &Path, p: &Plot, t: &Table) -> anyhow::Result<()> {
    let scale = |log: bool| move |v: f64| if log { v.max(1e-12).log10() } else { v };
    let (sx, sy) = (scale(p.log_x), scale(p.log_y));
    // Series: the distinct values of the series columns, in order of appearance.
    let si: Vec<usize> = p.series.iter().map(|c| t.col(c)).collect();
    let fi: Vec<(usize, &str)> = p.filter.iter().map(|(c, v)| (t.col(c), *v)).collect();
    let (xi, yi) = (t.col(p.x), t.col(p.y));
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in t
        .rows
        .iter()
        .filter(|r| fi.iter().all(|(i, v)| r[*i].text() == *v))
    {
        let (x, y) = (r[xi].num(), r[yi].num());
        if !x.is_finite() || !y.is_finite() || (p.log_y && y <= 0.0) || (p.log_x && x <= 0.0) {
            continue;
        }
        let name = si
            .iter()
            .map(|i| r[*i].text())
            .collect::<Vec<_>>()
            .join(" ");
        let pt = (sx(x), sy(y));
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(pt),
            None => lines.push((name, vec![pt])),
        }
    }
    let all = lines.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let pad = |a: f64, b: f64| if a == b { (a - 1.0, b + 1.0) } else { (a, b) };
    let (x0, x1) = pad(x0, x1);
    let (y0, y1) = pad(if p.log_y { y0 } else { y0.min(0.0) }, y1);
    let y1 = y1 + (y1 - y0) * 0.05;
    let label = |log: bool| {
        move |v: &f64| {
            if log {
                two_digits(10f64.powf(*v))
            } else {
                fmt_num(*v)
            }
        }
    };
    let root = SVGBackend::new(path, (860, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(p.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(p.x_label)
        .y_desc(p.y_label)
        .x_label_formatter(&label(p.log_x))
        .y_label_formatter(&label(p.log_y))
        .draw()?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(pts.iter().map(|pt| Circle::new(*pt, 3, color.filled())))?;
    }
    if lines.iter().any(|(n, _)| !n.is_empty()) {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_ticks_read_as_two_digits() {
        assert_eq!(super::two_digits(63.0957), "63");
        assert_eq!(super::two_digits(2.5119), "2.5");
        assert_eq!(super::two_digits(1584.9), "1600");
        assert_eq!(super::two_digits(0.015849), "0.016");
    }
}
