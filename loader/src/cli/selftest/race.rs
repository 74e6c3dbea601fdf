//! `crossbench selftest race`: the exclusivity race of a system's bare grouped read,
//! without its adapter's guard (`adapters::race`, finding F3 as the seed ran it).
//!
//! For every read function (`--fns`, default: the grouped reads the system's probe
//! offers) and every reader count (`--readers`, default 4, 16, 64), one run of
//! `--secs` seconds: a fresh queue of `--keys` groups with a standing backlog of
//! `--backlog` rows kept topped up, `readers` bare readers each holding what it read
//! for `--hold-ms` then deleting it. A line per run: rows read per second, breaches
//! (a read handing a reader rows of a group another reader holds), the same scaled
//! to 90 s (the seed's window, `breaches × 90 / window`), the groups that breached,
//! the ambiguous conflicts (the holder's delete on the wire) and the rows an
//! in-flight key guard would have deferred. The system is named on the command line
//! (`--system`); the registry builds it, and its adapter hands out the probe.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use adapters::race::{RacePlan, RaceReport};
use adapters::{BuildContext, System, SystemOptions};

use crate::cli::exit::Exit;
use crate::cli::BadInput;

#[derive(Debug, Args)]
pub struct RaceArgs {
    /// The system (a scenario's `system`) whose adapter offers a race probe.
    #[arg(long)]
    pub system: String,
    /// Its address, host:port (default: the scenario section's default).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Read functions to race, comma-separated (default: the probe's grouped reads).
    #[arg(long, value_delimiter = ',')]
    pub fns: Vec<String>,
    /// Reader counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [4usize, 16, 64])]
    pub readers: Vec<usize>,
    /// The window of each run, seconds.
    #[arg(long, default_value_t = 90)]
    pub secs: u64,
    /// Groups (keys) in the queue.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Rows kept waiting in the queue.
    #[arg(long, default_value_t = 10_000)]
    pub backlog: u64,
    /// Rows asked for per read.
    #[arg(long, default_value_t = 10)]
    pub read_qty: u32,
    /// How long a reader holds what it read before deleting it, milliseconds.
    #[arg(long, default_value_t = 5)]
    pub hold_ms: u64,
    /// The visibility timeout of a read, seconds.
    #[arg(long, default_value_t = 30)]
    pub vt: u32,
    /// The prefix of the runs' queues (each dropped after its run).
    #[arg(long, default_value = "cbf3_")]
    pub prefix: String,
    /// Write every run's report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One line of the table.
fn line(r: &RaceReport) -> String {
    format!(
        "{:<18} {:>4} {:>7.1} {:>9.0} {:>9} {:>10.0} {:>7} {:>9} {:>9} {:>6} {:>6}",
        r.read_fn,
        r.readers,
        r.window_s,
        r.rows_per_s(),
        r.breaches,
        r.breaches_per_90s(),
        r.breached_keys,
        r.ambiguous,
        r.deferred_rows,
        r.rows_redelivered,
        r.errors
    )
}

pub fn race(a: RaceArgs) -> anyhow::Result<Exit> {
    let system = System::from_name(&a.system).ok_or_else(|| {
        BadInput(format!(
            "--system {:?}: give one of {}",
            a.system,
            System::names().join(", ")
        ))
    })?;
    let mut options = SystemOptions::defaults(system);
    if let Some(addr) = &a.endpoint {
        options = options
            .routed_to(addr)
            .map_err(|e| BadInput(format!("--endpoint {addr}: {e}")))?;
    }
    let broker = options.build(&BuildContext::default())?;
    let probe = broker.exclusivity_probe().ok_or_else(|| {
        BadInput(format!(
            "{}: its adapter has no race probe (no guard of its own to look behind)",
            a.system
        ))
    })?;
    let known = probe.read_fns();
    let fns: Vec<String> = if a.fns.is_empty() {
        known
            .iter()
            .take(known.len().saturating_sub(1).max(1))
            .map(|s| s.to_string())
            .collect()
    } else {
        a.fns.clone()
    };
    for f in &fns {
        if !known.contains(&f.as_str()) {
            return Err(BadInput(format!("--fns {f}: give some of {}", known.join(", "))).into());
        }
    }
    let plans: Vec<RacePlan> = fns
        .iter()
        .flat_map(|f| {
            a.readers.iter().map(|&readers| RacePlan {
                read_fn: f.clone(),
                readers,
                window: Duration::from_secs(a.secs),
                keys: a.keys,
                backlog: a.backlog,
                read_qty: a.read_qty,
                hold: Duration::from_millis(a.hold_ms),
                visibility_timeout_s: a.vt,
                queue_prefix: a.prefix.clone(),
            })
        })
        .collect();
    for p in &plans {
        p.validate().map_err(|e| BadInput(e.to_string()))?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut reports = Vec::new();
    rt.block_on(async {
        println!("{} at {}", a.system, probe.describe());
        for (k, v) in probe.versions().await? {
            println!("  {k}: {v}");
        }
        println!(
            "keys {}, backlog {}, read_qty {}, hold {} ms, vt {} s, window {} s (breaches/90s = breaches x 90 / window)",
            a.keys, a.backlog, a.read_qty, a.hold_ms, a.vt, a.secs
        );
        println!(
            "{:<18} {:>4} {:>7} {:>9} {:>9} {:>10} {:>7} {:>9} {:>9} {:>6} {:>6}",
            "fn", "rdrs", "win_s", "rows/s", "breaches", "per_90s", "keys", "ambig", "deferred", "redel", "errs"
        );
        for p in &plans {
            let r = probe
                .run(p)
                .await
                .with_context(|| format!("{} with {} readers", p.read_fn, p.readers))?;
            println!("{}", line(&r));
            reports.push(r);
        }
        anyhow::Ok(())
    })?;
    if let Some(path) = &a.json {
        let doc = serde_json::json!({ "plans": plans, "runs": reports });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(Exit::Pass)
}
