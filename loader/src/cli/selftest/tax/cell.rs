//! The crossbench side of the tax: the shape's stream cell, run by the same code as
//! `crossbench run` (the runner, `workload::runner`, with a runtime like `run`'s,
//! under the run lock the tax already holds): pacer
//! thread, push workers, the adapter's publish and consume, one sink per group
//! (decode every stamp, log `<partition>,<seq>`, e2e histograms), the 1 Hz sampler,
//! the per-second reporter, then the drain, the checker and the record. Its figure is
//! the record's own: `loader.cpu_us_per_delivery`, the process's CPU over the rated
//! window ÷ the deliveries made while it ran.

use std::path::Path;

use anyhow::Context as _;

use super::figures::{Side, SideRun};
use super::shape::Shape;
use crate::pacing::pacer::Timing;
use crate::workload::runner::{prepare_out, CellJob, RunLock, Runner, RunnerSettings};

/// Run the cell once, its record in `out` (created here; must not exist or be empty).
pub fn run(shape: &Shape, index: usize, out: &Path) -> anyhow::Result<(SideRun, String)> {
    prepare_out(out)?;
    let s = shape.scenario();
    let mut runner = Runner::start(RunnerSettings {
        lock: RunLock::Held,
        threads: s.threads,
        timing: Timing::Real,
        quiet: true,
        argv: std::env::args().collect(),
    })?;
    let report = runner.run(&CellJob::new(&shape.loaded, "selftest-tax.yaml", out));
    runner.shut_down();
    let report = report.context("running the crossbench cell")?;
    let r = &report.record;
    let cpu_us = r.loader.cpu_us_per_delivery;
    let cores = r.loader.cpu_cores_mean;
    let window = r.time.rated_sec;
    let cpu = cores * window;
    let deliveries = if cpu_us > 0.0 {
        (cpu * 1e6 / cpu_us).round() as u64
    } else {
        0
    };
    let pass = report.outcome == crate::cell::Outcome::Pass;
    // A VOID cell passed the checker (a FAIL takes precedence), but its loader was
    // the limit: delivered everything, did not keep the rate.
    let complete = pass || report.outcome == crate::cell::Outcome::Void;
    let held = pass && report.load.as_ref().is_some_and(|l| l.held);
    let variant = r.variant.clone();
    let first_group = r.groups.first().cloned().unwrap_or_default();
    let errors = r.errors.clone().unwrap_or_default();
    Ok((
        SideRun {
            side: Side::Crossbench,
            run: index,
            cpu_seconds: cpu,
            window_sec: window,
            deliveries_in_window: deliveries,
            cpu_us_per_delivery: cpu_us,
            cpu_cores: cores,
            published: r.flows.get("S").map_or(0, |f| f.published),
            consumed: first_group.popped,
            acked: first_group.acked,
            errors: errors.push + errors.pop + errors.ack,
            complete,
            // Its checker FAILs a duplicate: a cell never counts re-reads as work.
            comparable: true,
            held,
            outcome: if pass && !held {
                "NOT-HELD".into()
            } else {
                report.outcome.name().to_string()
            },
        },
        variant,
    ))
}
