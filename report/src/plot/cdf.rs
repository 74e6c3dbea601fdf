//! Latency CDF per cell on a log percentile ("nines") axis: x = −log10(1 − q),
//! labelled 0 %, 90 %, 99 %, 99.9 % …; y = e2e latency in ms, log scale. Built
//! from the rated-window intervals of each cell's `e2e.hlog`, both flows merged.
//!
//! A campaign's arms are drawn by workload shape ([`plot_arms`]): one picture per
//! shape, one line per arm, the median of its repeats' curves at each percentile,
//! with each repeat faint behind it in the same colour.

use std::path::Path;

use super::chart::Panel;
use super::{render, Picture, Series};
use crate::cell::CellRecord;
use crate::error::ReportError;
use crate::latency_log;

fn nines(v: &f64) -> String {
    let n = v.round();
    if (v - n).abs() > 1e-6 || n < 0.0 {
        return String::new();
    }
    match n as usize {
        0 => "0%".into(),
        1 => "90%".into(),
        k => format!("99.{}%", "9".repeat(k - 2)).replace(".%", "%"),
    }
}

/// The CDF series of one cell (`None` when it has no e2e.hlog or no samples).
pub fn series(c: &CellRecord) -> Result<Option<Series>, ReportError> {
    let path = c.dir.join("e2e.hlog");
    if !path.is_file() {
        return Ok(None);
    }
    let t = &c.result.time;
    let (from, to) = if t.rated_end_unix_ms > t.rated_start_unix_ms {
        (Some(t.rated_start_unix_ms), Some(t.rated_end_unix_ms))
    } else {
        (None, None)
    };
    let mut h = latency_log::merged(&path, "A", from, to)?;
    let b = latency_log::merged(&path, "B", from, to)?;
    let _ = h.add(&b);
    let pts = latency_log::cdf_points(&h);
    if pts.is_empty() {
        return Ok(None);
    }
    Ok(Some(Series {
        label: c.name(),
        points: pts
            .into_iter()
            .map(|(pct, ms)| (-(1.0 - pct / 100.0).max(1e-5).log10(), ms))
            .collect(),
        errors: Vec::new(),
        faint: false,
    }))
}

/// One chart with the CDF of every cell given.
pub fn plot(cells: &[&CellRecord], base: &Path) -> Result<Picture, ReportError> {
    let mut lines = Vec::new();
    for c in cells {
        if let Some(s) = series(c)? {
            lines.push(s);
        }
    }
    let panel = cdf_panel(
        "End-to-end latency CDF (rated window, flows A+B)".into(),
        lines,
    );
    render(&[panel], (900, 450), base, "Latency CDF")
}

/// A CDF panel: percentiles on the nines axis, e2e latency on a log axis.
fn cdf_panel(title: String, series: Vec<Series>) -> Panel {
    Panel {
        title,
        x_label: "percentile".into(),
        y_label: "e2e latency (ms, log)".into(),
        log_y: true,
        series,
        x_fmt: nines,
        x_labels: 6,
        markers: false,
    }
}

/// One arm's repeats: its name and its cells.
#[derive(Debug)]
pub struct Arm<'a> {
    pub name: String,
    pub cells: Vec<&'a CellRecord>,
}

/// One CDF of `arms` (arms of one workload shape): per arm, the median over its
/// repeats of the latency at each percentile, drawn over its repeats drawn faint.
pub fn plot_arms(arms: &[Arm<'_>], title: &str, base: &Path) -> Result<Picture, ReportError> {
    let mut lines = Vec::new();
    for arm in arms {
        let mut repeats = Vec::new();
        for c in &arm.cells {
            if let Some(s) = series(c)? {
                repeats.push(s);
            }
        }
        let Some(median) = median_curve(&repeats) else {
            continue;
        };
        let n = repeats.len();
        for mut r in repeats {
            r.faint = true;
            r.label.clear();
            lines.push(r);
        }
        lines.push(Series {
            label: format!("{} (median of {n})", arm.name),
            points: median,
            errors: Vec::new(),
            faint: false,
        });
    }
    let panel = cdf_panel(
        format!("e2e latency CDF, {title}: median of repeats per arm, repeats faint"),
        lines,
    );
    render(&[panel], (900, 420), base, &format!("Latency CDF: {title}"))
}

/// The median at each point of curves on one percentile grid (every cell's CDF has
/// the same grid: `latency_log::cdf_points`); `None` without a curve.
pub fn median_curve(curves: &[Series]) -> Option<Vec<(f64, f64)>> {
    let first = curves.first()?;
    let mut out = Vec::with_capacity(first.points.len());
    for (i, &(x, _)) in first.points.iter().enumerate() {
        let mut ys: Vec<f64> = curves
            .iter()
            .filter_map(|c| c.points.get(i).map(|p| p.1))
            .collect();
        ys.sort_by(f64::total_cmp);
        let m = ys.len();
        let y = if m % 2 == 1 {
            ys[m / 2]
        } else {
            (ys[m / 2 - 1] + ys[m / 2]) / 2.0
        };
        out.push((x, y));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_curve_is_the_middle_repeat_at_each_point() {
        let curve = |ys: [f64; 3]| Series {
            points: vec![(0.0, ys[0]), (1.0, ys[1]), (2.0, ys[2])],
            ..Series::default()
        };
        let m = median_curve(&[
            curve([1.0, 10.0, 100.0]),
            curve([3.0, 30.0, 300.0]),
            curve([2.0, 50.0, 200.0]),
        ])
        .unwrap();
        assert_eq!(m, vec![(0.0, 2.0), (1.0, 30.0), (2.0, 200.0)]);
        assert_eq!(median_curve(&[]), None);
    }
}
