//! Latency against offered rate across a sweep: one line per sweep (system/variant,
//! tier, P and ordered lanes — the ceiling table's grouping) with p50 and p99 of the
//! worse flow, one point per rate. Where a rate was repeated (a campaign), the point
//! is the median over the repeats and an error bar shows its 95 % bootstrap
//! interval. Sweeps of a single rate are left out when any sweep has two or more;
//! VOID cells are always left out.
//!
//! The two workloads have two rates: the pipeline's ingress events/s ([`plot`]) and
//! the stream's pushed messages/s ([`plot_stream`]), each on its own picture, so a
//! stream cell is never drawn at an ingress rate of 0.

use std::collections::BTreeMap;
use std::path::Path;

use super::chart::{plain, Panel};
use super::{render, Picture, Series};
use crate::cell::CellRecord;
use crate::comparability::tier;
use crate::error::ReportError;
use crate::stats::{median_ci, DEFAULT_RESAMPLES};

/// The pipeline cells' latency against their ingress rate (stream cells left out).
pub fn plot(cells: &[&CellRecord], base: &Path) -> Result<Picture, ReportError> {
    draw(cells, base, Axis::Ingress)
}

/// The stream cells' latency against their push rate (pipeline cells left out).
pub fn plot_stream(cells: &[&CellRecord], base: &Path) -> Result<Picture, ReportError> {
    draw(cells, base, Axis::Push)
}

/// Which workload's rate the x axis is.
#[derive(Clone, Copy, PartialEq)]
enum Axis {
    Ingress,
    Push,
}

/// The cells a picture of `axis` draws: its workload's, VOID left out.
fn drawn<'a>(cells: &[&'a CellRecord], axis: Axis) -> Vec<&'a CellRecord> {
    cells
        .iter()
        .copied()
        .filter(|c| !c.is_void() && c.is_stream() == (axis == Axis::Push))
        .collect()
}

/// The distinct offered rates of `cells`' pipeline (`stream` false) or stream cells:
/// a picture is worth drawing when there are two or more.
pub fn rates(cells: &[&CellRecord], stream: bool) -> usize {
    let axis = if stream { Axis::Push } else { Axis::Ingress };
    drawn(cells, axis)
        .iter()
        .map(|c| c.offered_rate())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

fn draw(cells: &[&CellRecord], base: &Path, axis: Axis) -> Result<Picture, ReportError> {
    let mut lines: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for c in drawn(cells, axis) {
        let (Some(p50), Some(p99)) = (c.e2e(50), c.e2e(99)) else {
            continue;
        };
        // The tier is named when it is not the default, to keep the legend's labels
        // short enough to be read whole.
        let t = tier(c);
        let key = format!(
            "{}{} P={} lanes={}",
            c.system_label(),
            if t == "default" {
                String::new()
            } else {
                format!(" [{t}]")
            },
            c.result.workload.properties,
            c.ordered_lanes()
        );
        lines
            .entry(key)
            .or_default()
            .push((c.offered_rate() as f64, p50, p99));
    }
    // One point per rate: the median over its repeats, and the interval when repeated.
    let point = |vals: &[f64]| -> ((f64, Option<(f64, f64)>), bool) {
        let ci = median_ci(vals, 0.95, DEFAULT_RESAMPLES, 0x5EED);
        match ci {
            Some(i) if vals.len() > 1 => ((i.estimate, Some((i.low, i.high))), true),
            Some(i) => ((i.estimate, None), false),
            None => ((f64::NAN, None), false),
        }
    };
    let rates = |pts: &[(f64, f64, f64)]| {
        let mut r: Vec<f64> = pts.iter().map(|p| p.0).collect();
        r.sort_by(f64::total_cmp);
        r.dedup();
        r
    };
    let multi = lines.values().any(|v| rates(v).len() > 1);
    let mut series = Vec::new();
    let mut repeated = false;
    for (k, pts) in lines {
        let rs = rates(&pts);
        if multi && rs.len() < 2 {
            continue;
        }
        let mut p50 = Series {
            label: format!("{k} p50"),
            ..Series::default()
        };
        let mut p99 = Series {
            label: format!("{k} p99"),
            ..Series::default()
        };
        for r in rs {
            let at: Vec<&(f64, f64, f64)> = pts.iter().filter(|p| p.0 == r).collect();
            let ((m50, e50), rep) = point(&at.iter().map(|p| p.1).collect::<Vec<_>>());
            let ((m99, e99), _) = point(&at.iter().map(|p| p.2).collect::<Vec<_>>());
            repeated |= rep;
            p50.points.push((r, m50));
            p50.errors.push(e50);
            p99.points.push((r, m99));
            p99.errors.push(e99);
        }
        series.push(p50);
        series.push(p99);
    }
    let panel = Panel {
        title: if repeated {
            "e2e latency vs offered rate: medians of repeats, bars = 95 % interval (VOID cells left out)".into()
        } else {
            "e2e latency vs offered rate (VOID cells left out)".into()
        },
        x_label: match axis {
            Axis::Ingress => "offered R (ingress events/s)".into(),
            Axis::Push => "offered push rate (messages/s, stream cells)".into(),
        },
        y_label: "e2e latency (ms, log)".into(),
        log_y: true,
        series,
        x_fmt: plain,
        x_labels: 10,
        markers: true,
    };
    render(&[panel], (1100, 450), base, "Latency vs offered rate")
}
