//! Latency against offered rate across a sweep: one line per sweep (system/variant,
//! tier, P and ordered lanes — the ceiling table's grouping) with p50 and p99 of the
//! worse flow, one point per cell. Sweeps of a single rate are left out when any
//! sweep has two or more; VOID cells are always left out.

use std::collections::BTreeMap;
use std::path::Path;

use super::chart::{plain, Panel};
use super::{render, Picture, Series};
use crate::cell::CellRecord;
use crate::comparability::tier;
use crate::error::ReportError;

pub fn plot(cells: &[&CellRecord], base: &Path) -> Result<Picture, ReportError> {
    let mut lines: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for c in cells.iter().filter(|c| !c.is_void()) {
        let (Some(p50), Some(p99)) = (c.e2e(50), c.e2e(99)) else {
            continue;
        };
        let key = format!(
            "{} [{}] P={} lanes={}",
            c.system_label(),
            tier(c),
            c.result.workload.properties,
            c.ordered_lanes()
        );
        lines.entry(key).or_default().push((
            c.result.workload.rate_events_per_sec as f64,
            p50,
            p99,
        ));
    }
    let multi = lines.values().any(|v| v.len() > 1);
    let mut series = Vec::new();
    for (k, mut pts) in lines {
        if multi && pts.len() < 2 {
            continue;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series {
            label: format!("{k} p50"),
            points: pts.iter().map(|p| (p.0, p.1)).collect(),
        });
        series.push(Series {
            label: format!("{k} p99"),
            points: pts.iter().map(|p| (p.0, p.2)).collect(),
        });
    }
    let panel = Panel {
        title: "e2e latency vs offered rate (VOID cells left out)".into(),
        x_label: "offered R (ingress events/s)".into(),
        y_label: "e2e latency (ms, log)".into(),
        log_y: true,
        series,
        x_fmt: plain,
        x_labels: 10,
        legend_upper: true,
        markers: true,
    };
    render(&[panel], (900, 450), base, "Latency vs offered rate")
}
