//! Latency CDF per cell on a log percentile ("nines") axis: x = −log10(1 − q),
//! labelled 0 %, 90 %, 99 %, 99.9 % …; y = e2e latency in ms, log scale. Built
//! from the rated-window intervals of each cell's `e2e.hlog`, both flows merged.

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
    let panel = Panel {
        title: "End-to-end latency CDF (rated window, flows A+B)".into(),
        x_label: "percentile".into(),
        y_label: "e2e latency (ms, log)".into(),
        log_y: true,
        series: lines,
        x_fmt: nines,
        x_labels: 6,
        markers: false,
    };
    render(&[panel], (900, 450), base, "Latency CDF")
}
