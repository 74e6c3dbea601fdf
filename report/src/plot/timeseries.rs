//! One cell over time, x = seconds from the start of the rated window (negative:
//! warm-up): rates (offered, published, deliveries ÷ 6), lag, per-second e2e
//! p50/p99 per flow (report.csv), and the system's and the loader's CPU and the
//! system's memory (samples.csv).

use std::path::Path;

use super::chart::{plain, Panel};
use super::{render, Picture, Series};
use crate::cell::CellRecord;
use crate::error::ReportError;
use crate::{per_second, samples};

fn panel(title: &str, y: &str, log_y: bool, series: Vec<Series>) -> Panel {
    Panel {
        title: title.into(),
        x_label: "s from rated start".into(),
        y_label: y.into(),
        log_y,
        series,
        x_fmt: plain,
        x_labels: 10,
        markers: false,
    }
}

fn line(label: &str, pts: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        points: pts,
        errors: Vec::new(),
        faint: false,
    }
}

pub fn plot(c: &CellRecord, base: &Path) -> Result<Picture, ReportError> {
    let origin = c.result.time.rated_start_unix_ms;
    let x = |unix_ms: i64| (unix_ms - origin) as f64 / 1000.0;
    let secs = match c.dir.join("report.csv") {
        p if p.is_file() => per_second::read(&p)?,
        _ => Vec::new(),
    };
    let targets = c
        .result
        .cost
        .as_ref()
        .map(|k| k.system_targets.clone())
        .unwrap_or_default();
    let ticks = match c.dir.join("samples.csv") {
        p if p.is_file() => samples::read(&p, &targets)?,
        _ => Vec::new(),
    };
    let s = |f: fn(&per_second::Second) -> f64| -> Vec<(f64, f64)> {
        secs.iter().map(|r| (x(r.unix_ms), f(r))).collect()
    };
    let t = |f: fn(&samples::Tick) -> Option<f64>| -> Vec<(f64, f64)> {
        ticks
            .iter()
            .filter_map(|k| f(k).map(|v| (x(k.unix_ms), v)))
            .collect()
    };
    let is_mem = c.in_process();
    let mut cpu = vec![line("loader cores", t(|k| k.loader_cores))];
    if !is_mem {
        cpu.insert(0, line("system cores", t(|k| k.system_cores)));
    }
    let panels = vec![
        panel(
            "Rates per second",
            "events/s",
            false,
            vec![
                line("offered", s(|r| r.offered)),
                line("published", s(|r| r.published)),
                if c.is_stream() {
                    line("popped (all groups)", s(|r| r.delivered))
                } else {
                    line("deliveries ÷ 6", s(|r| r.delivered / 6.0))
                },
            ],
        ),
        panel(
            "Lag",
            "messages",
            false,
            vec![line("lag", s(|r| r.lag_msgs))],
        ),
        panel(
            "e2e latency per second",
            "ms (log)",
            true,
            vec![
                line("A p50", s(|r| r.e2e_a_p50_ms)),
                line("A p99", s(|r| r.e2e_a_p99_ms)),
                line("B p50", s(|r| r.e2e_b_p50_ms)),
                line("B p99", s(|r| r.e2e_b_p99_ms)),
            ],
        ),
        panel(
            if is_mem {
                "CPU (mem runs inside the loader)"
            } else {
                "CPU"
            },
            "cores",
            false,
            cpu,
        ),
        panel(
            "System memory",
            "MB",
            false,
            vec![line(
                "system memory",
                t(|k| k.system_memory_bytes.map(|b| b / 1_048_576.0)),
            )],
        ),
    ];
    render(
        &panels,
        (900, 1250),
        base,
        &format!("{} over time", c.name()),
    )
}
