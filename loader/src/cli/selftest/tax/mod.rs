//! `crossbench selftest tax`: the harness tax of one adapter, the loader CPU per
//! delivery of a crossbench cell against that of the system's bare client loop doing
//! the same publishes, reads and acks on the same broker, at the same rate, with the
//! same backlog shape (docs/performance.md, "The harness tax per adapter").
//!
//! One concept per file: [`shape`] (the stream cell both sides take their shape
//! from), [`bare`] (the client library alone, `adapters::bare`), [`cell`] (the cell,
//! as `crossbench run` runs it), [`figures`] (a run, the medians, the report).
//!
//! A sitting is `--runs` runs of each side, interleaved (bare then cell, then cell
//! then bare, …), under the machine-wide run lock, so drift on a shared machine falls
//! on both sides alike. Each side runs in a runtime of its own, shut down before the
//! other starts; each measures its process CPU (user + system, getrusage) over its
//! measured window only, and divides by the messages received while it ran.

pub mod bare;
pub mod cell;
pub mod figures;
pub mod shape;

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::cli::exit::Exit;
use crate::cli::BadInput;
use figures::{Side, Sitting};
use shape::Shape;

#[derive(Debug, Args)]
pub struct TaxArgs {
    /// The system (a scenario's `system`, e.g. the name of any adapter this build has
    /// except the control broker).
    #[arg(long)]
    pub system: String,
    /// Messages per second, both sides (pick one the system holds).
    #[arg(long, default_value_t = 2000)]
    pub rate: u64,
    /// The measured window, seconds (after the scenario's warm-up, 3 s).
    #[arg(long, default_value_t = 20)]
    pub secs: u64,
    /// Runs of each side, interleaved.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Override a field of the tax's stream scenario, e.g.
    /// --set stream.push.batch=100 (shape::BASE lists them).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Write every run, the medians and the tax as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Keep the cells' records in this directory (else a temporary one, removed).
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

pub fn tax(a: TaxArgs) -> anyhow::Result<Exit> {
    if !(1..=20).contains(&a.runs) {
        return Err(BadInput(format!("--runs {}: give 1 to 20", a.runs)).into());
    }
    if a.secs == 0 || a.secs > 3600 {
        return Err(BadInput(format!("--secs {}: give 1 to 3600 seconds", a.secs)).into());
    }
    let shape = Shape::new(&a.system, a.rate, a.secs, &a.sets)?;
    let s = shape.scenario();
    // A system this build lacks, or bad options: refused before anything runs.
    crate::cell::setup::build(s, &crate::workload::build_context(s))?;
    s.options
        .bare_check()
        .map_err(|e| BadInput(e.to_string()))?;
    let _lock = crate::workload::runner::lock::acquire(false)?;
    let (dir, keep) = match &a.keep {
        Some(d) => (d.clone(), true),
        None => (
            std::env::temp_dir().join(format!("crossbench-tax-{}", std::process::id())),
            false,
        ),
    };
    crate::workload::runner::prepare_out(&dir)?;
    println!(
        "selftest tax: system {} at {} msg/s, {} partitions, pushes of {}, pops of {}, {} B messages; warm-up {:.0} s, window {:.0} s; {} runs a side, interleaved",
        s.system,
        s.rate,
        shape.partitions,
        shape.push_batch,
        shape.plan.batch,
        shape.payload_bytes,
        shape.warmup.as_secs_f64(),
        shape.window.as_secs_f64(),
        a.runs
    );
    let mut sitting = Sitting {
        system: s.system.name().to_string(),
        variant: String::new(),
        rate_msgs_per_sec: s.rate,
        warmup_sec: shape.warmup.as_secs_f64(),
        window_sec: shape.window.as_secs_f64(),
        partitions: shape.partitions,
        push_batch: shape.push_batch,
        pop_batch: shape.plan.batch as u64,
        payload_bytes: shape.payload_bytes,
        sets: a.sets.clone(),
        runs: Vec::new(),
        bare: None,
        crossbench: None,
        tax: None,
        complete: false,
        held: false,
        left_out: 0,
    };
    let result = (|| -> anyhow::Result<()> {
        for i in 1..=a.runs {
            let order = if i % 2 == 1 {
                [Side::Bare, Side::Crossbench]
            } else {
                [Side::Crossbench, Side::Bare]
            };
            for side in order {
                let run = match side {
                    Side::Bare => {
                        bare::run(&shape, i).with_context(|| format!("run {i}, bare side"))?
                    }
                    Side::Crossbench => {
                        let (run, variant) =
                            cell::run(&shape, i, &dir.join(format!("cell-{i}")))
                                .with_context(|| format!("run {i}, crossbench side"))?;
                        sitting.variant = variant;
                        run
                    }
                };
                println!("{}", run.line());
                sitting.runs.push(run);
            }
        }
        Ok(())
    })();
    sitting.settle();
    print!("{}", sitting.summary());
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&sitting)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result?;
    Ok(if !sitting.complete {
        Exit::Fail
    } else if !sitting.held {
        Exit::NotHeld
    } else if sitting.tax.is_none() {
        // Every run of a side was left out: nothing to compare.
        Exit::Inconclusive
    } else {
        Exit::Pass
    })
}
