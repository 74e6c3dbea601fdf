//! `crossbench selftest gate-power`: the gate's false-alarm and detection rates,
//! simulated with no cells (`report::gate_power`), with the noise of real A/A
//! records: every gate directory under `--aa` (default `results/gates`) whose two
//! arms ran the same overrides (`--calibrate`, or an A/A gate) gives, per metric, the
//! log-ratio of each of its stage-1 pairs. Prints one Markdown table per metric
//! (docs/gate.md has the one for the default arguments).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use report::gate::{Metric, TestPlan};
use report::gate_power::{noise_text, table, Sim};
use report::CellRecord;

use crate::cli::exit::Exit;
use crate::cli::BadInput;

#[derive(Debug, Args)]
pub struct GatePowerArgs {
    /// Where the A/A gate records are (searched for gate.json files).
    #[arg(long, default_value = "results/gates")]
    pub aa: PathBuf,
    /// Simulated gates per case.
    #[arg(long, default_value_t = 1000)]
    pub reps: usize,
    /// The metrics simulated (repeatable; default: both p50s' and p99s' of flow A,
    /// system_cores, system_peak_memory, deliveries_per_sec).
    #[arg(long = "metric", value_name = "NAME")]
    pub metrics: Vec<String>,
    /// Significance level of each stage.
    #[arg(long, default_value_t = report::gate::ALPHA)]
    pub alpha: f64,
    /// The two-sided test instead of the one-sided.
    #[arg(long)]
    pub two_sided: bool,
    #[arg(long, default_value_t = 0x6A7E)]
    pub seed: u64,
}

const DEFAULT_METRICS: [Metric; 5] = [
    Metric::E2eP50A,
    Metric::E2eP99A,
    Metric::SystemCores,
    Metric::SystemPeakMemory,
    Metric::DeliveriesPerSec,
];

/// Every gate.json under `dir`.
fn gate_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            gate_files(&p, out);
        } else if p.file_name().is_some_and(|n| n == "gate.json") {
            out.push(p);
        }
    }
}

/// Per metric, the log-ratios of the A/A pairs.
type Noise = BTreeMap<Metric, Vec<f64>>;

/// The A/A log-ratios per metric, and the records they came from.
fn aa_noise(dir: &Path) -> anyhow::Result<(Noise, Vec<String>)> {
    let mut files = Vec::new();
    gate_files(dir, &mut files);
    let mut noise = Noise::new();
    let mut used = Vec::new();
    for f in files {
        let Some(g) = report::gate::GateLegs::read(&f) else {
            continue;
        };
        if !g.is_a_a() {
            continue;
        }
        let root = f.parent().unwrap_or(Path::new("."));
        let mut legs: BTreeMap<u64, Vec<CellRecord>> = BTreeMap::new();
        for l in &g.legs {
            if l.stage != 1 || l.cell_outcome() != Some(cell_record::Outcome::Pass) {
                continue;
            }
            let (pair, d) = (l.pair as u64, l.dir.as_str());
            if let Ok(c) = CellRecord::load(&root.join(d)) {
                legs.entry(pair).or_default().push(c);
            }
        }
        let mut pairs = 0;
        for cells in legs.values().filter(|v| v.len() == 2) {
            pairs += 1;
            for m in Metric::ALL {
                if let (Some(a), Some(b)) = (m.read(&cells[0]), m.read(&cells[1])) {
                    if a > 0.0 && b > 0.0 && (b / a).ln().is_finite() {
                        noise.entry(m).or_default().push((b / a).ln());
                    }
                }
            }
        }
        used.push(format!("{} ({pairs} pairs)", root.display()));
    }
    Ok((noise, used))
}

pub fn gate_power(a: GatePowerArgs) -> anyhow::Result<Exit> {
    let test = TestPlan {
        alpha: a.alpha,
        two_sided: a.two_sided,
    };
    if !(a.alpha > 0.0 && a.alpha <= 0.5) {
        return Err(BadInput(format!(
            "--alpha {}: must be in (0, 0.5], e.g. 0.05",
            a.alpha
        ))
        .into());
    }
    if a.reps == 0 {
        return Err(BadInput("--reps 0: give at least 1 (1000 for the table)".into()).into());
    }
    let metrics: Vec<Metric> = if a.metrics.is_empty() {
        DEFAULT_METRICS.to_vec()
    } else {
        a.metrics
            .iter()
            .map(|n| {
                Metric::from_name(n).ok_or_else(|| {
                    BadInput(format!(
                        "--metric {n}: unknown; the metrics are {}",
                        Metric::ALL.map(|m| m.name()).join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let (noise, used) = aa_noise(&a.aa)?;
    if used.is_empty() {
        return Err(BadInput(format!(
            "--aa {}: no A/A gate record (a gate.json of `--calibrate`, or of a gate whose arms set the same overrides) under it",
            a.aa.display()
        ))
        .into());
    }
    println!(
        "# gate power: {}, {} simulated gates per case (both stages), τ = each metric's floor\n",
        test.describe(),
        a.reps
    );
    println!("A/A noise from: {}\n", used.join(", "));
    for m in metrics {
        let Some(n) = noise.get(&m) else {
            println!("## {}\n\nno A/A pairs have it\n", m.name());
            continue;
        };
        let sim = Sim {
            metric: m,
            noise: n,
            tau: m.floor(),
            test,
            reps: a.reps,
            seed: a.seed,
        };
        println!(
            "## {} (τ = {:.0} %; {})\n\n{}",
            m.name(),
            m.floor() * 100.0,
            noise_text(n),
            table(&sim.cases())
        );
    }
    Ok(Exit::Pass)
}
