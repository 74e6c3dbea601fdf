//! The cardinality table (the reference SPEC §6.3): cost and latency against the
//! number of ordered lanes, and per system the fitted cost model
//! `mCPU ≈ a·(msg/s) + b·(lanes) + c` with its R², RMSE and per-cell residuals.
//! msg/s is deliveries per second over the rated window; lanes are the ordered
//! lanes provisioned; mCPU is the system's mean cores × 1000.

use std::collections::BTreeMap;

use crate::cell::CellRecord;
use crate::comparability;
use crate::fit::{least_squares, Fit, FitError};
use crate::format::{count, ms, num};
use crate::stats::{Interval, Rng};
use crate::table::Table;

pub const COLUMNS: &[&str] = &[
    "cell",
    "system",
    "tier",
    "P",
    "ordered lanes",
    "msg/s",
    "mCPU",
    "model mCPU",
    "residual",
    "MB per 1000 lanes",
    "e2e p50 ms",
    "e2e p99 ms",
];

/// One system's model (or why there is none).
#[derive(Debug, Clone)]
pub struct SystemModel {
    pub system: String,
    pub tier: String,
    pub cells: Vec<String>,
    /// The cells' directories, in the fit's order.
    pub dirs: Vec<std::path::PathBuf>,
    pub fit: Result<Fit, FitError>,
    /// a, b and c with their 95 % intervals from the repeats, when some arm (cells
    /// sharing a name) was repeated.
    pub intervals: Option<[Interval; 3]>,
}

/// Bootstrap resamples of the coefficient intervals.
pub const COEFFICIENT_RESAMPLES: usize = 2000;

/// The coefficients' 95 % intervals from the repeats: resample every arm's cells
/// (cells sharing a name are repeats of one arm) with replacement, refit, and read
/// the percentiles of the refitted coefficients. `None` without a repeated arm.
pub fn coefficient_intervals(
    cells: &[&CellRecord],
    resamples: usize,
    seed: u64,
) -> Option<[Interval; 3]> {
    let mut arms: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for c in cells {
        if let Some(o) = observation(c) {
            arms.entry(c.name()).or_default().push(o);
        }
    }
    if !arms.values().any(|v| v.len() > 1) {
        return None;
    }
    let all: Vec<(f64, f64, f64)> = arms.values().flatten().copied().collect();
    let fit = |obs: &[(f64, f64, f64)]| -> Option<[f64; 3]> {
        let x: Vec<Vec<f64>> = obs.iter().map(|o| vec![o.0, o.1]).collect();
        let y: Vec<f64> = obs.iter().map(|o| o.2).collect();
        let f = least_squares(&x, &y, &["msg/s", "lanes"]).ok()?;
        Some([f.coefficients[0], f.coefficients[1], f.intercept])
    };
    let point = fit(&all)?;
    let mut rng = Rng::new(seed);
    let mut draws: [Vec<f64>; 3] = Default::default();
    for _ in 0..resamples {
        let sample: Vec<(f64, f64, f64)> = arms
            .values()
            .flat_map(|v| {
                (0..v.len())
                    .map(|_| v[rng.below(v.len())])
                    .collect::<Vec<_>>()
            })
            .collect();
        if let Some(k) = fit(&sample) {
            for (d, v) in draws.iter_mut().zip(k) {
                d.push(v);
            }
        }
    }
    if draws[0].len() < resamples / 2 {
        return None;
    }
    let mut ci = |i: usize| {
        let mut v = std::mem::take(&mut draws[i]);
        v.sort_unstable_by(|a, b| a.total_cmp(b));
        let q = |p: f64| v[((p * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
        Interval {
            estimate: point[i],
            low: q(0.025),
            high: q(0.975),
            level: 0.95,
            n: all.len(),
        }
    };
    Some([ci(0), ci(1), ci(2)])
}

impl SystemModel {
    pub fn describe(&self) -> String {
        let intervals = self.intervals.map_or(String::new(), |[a, b, c]| {
            format!(
                "; from the repeats (95 %, {COEFFICIENT_RESAMPLES} cluster-bootstrap resamples): a ∈ [{:.4}, {:.4}], b ∈ [{:.4}, {:.4}], c ∈ [{:.1}, {:.1}]",
                a.low, a.high, b.low, b.high, c.low, c.high
            )
        });
        match &self.fit {
            Ok(f) => format!(
                "{} [{}]: mCPU ≈ {:.4}·(msg/s) {} {:.4}·(lanes) {} {:.1}; R² = {:.3}, RMSE = {:.1} mCPU over {} cells",
                self.system,
                self.tier,
                f.coefficients[0],
                sign(f.coefficients[1]),
                f.coefficients[1].abs(),
                sign(f.intercept),
                f.intercept.abs(),
                f.r_squared,
                f.rmse,
                f.n
            ) + &intervals,
            Err(e) => format!("{} [{}]: no model: {e}", self.system, self.tier),
        }
    }
}

fn sign(v: f64) -> char {
    if v < 0.0 {
        '−'
    } else {
        '+'
    }
}

fn observation(c: &CellRecord) -> Option<(f64, f64, f64)> {
    let cores = c.system_cores()?;
    Some((
        c.result.throughput.deliveries_per_sec,
        c.ordered_lanes() as f64,
        cores * 1000.0,
    ))
}

/// Fit one model per (system, tier) over its non-VOID cells with cost data.
pub fn models(cells: &[CellRecord]) -> Vec<SystemModel> {
    let mut groups: BTreeMap<(String, String), Vec<&CellRecord>> = BTreeMap::new();
    for c in cells
        .iter()
        .filter(|c| !c.is_void() && !c.is_refused() && !c.is_stream())
    {
        if observation(c).is_some() {
            groups
                .entry((c.result.system.clone(), comparability::tier(c)))
                .or_default()
                .push(c);
        }
    }
    groups
        .into_iter()
        .map(|((system, tier), cs)| {
            let obs: Vec<(f64, f64, f64)> = cs.iter().filter_map(|c| observation(c)).collect();
            let x: Vec<Vec<f64>> = obs.iter().map(|o| vec![o.0, o.1]).collect();
            let y: Vec<f64> = obs.iter().map(|o| o.2).collect();
            SystemModel {
                system,
                tier,
                cells: cs.iter().map(|c| c.name()).collect(),
                dirs: cs.iter().map(|c| c.dir.clone()).collect(),
                fit: least_squares(&x, &y, &["msg/s", "lanes"]),
                intervals: coefficient_intervals(&cs, COEFFICIENT_RESAMPLES, 0x5EED),
            }
        })
        .collect()
}

pub fn build(cells: &[CellRecord]) -> Table {
    let mut t = Table::new("Cardinality and the cost model", COLUMNS);
    let models = models(cells);
    t.notes
        .push("model: mCPU ≈ a·(msg/s) + b·(lanes) + c, least squares per system and tier; msg/s = deliveries/s, lanes = ordered lanes provisioned.".into());
    for m in &models {
        t.notes.push(m.describe());
    }
    let mut sorted = comparability::pipeline_cells(&mut t, cells);
    sorted.sort_by_key(|c| {
        (
            c.result.system.clone(),
            c.ordered_lanes(),
            c.result.workload.rate_events_per_sec,
        )
    });
    comparability::sectioned(&mut t, &sorted, |c| {
        let model = models
            .iter()
            .find(|m| m.dirs.contains(&c.dir) && m.system == c.result.system);
        let fitted = model.and_then(|m| {
            let f = m.fit.as_ref().ok()?;
            let i = m.dirs.iter().position(|d| d == &c.dir)?;
            let (_, _, y) = observation(c)?;
            Some((y - f.residuals[i], f.residuals[i]))
        });
        let lanes = c.ordered_lanes();
        vec![
            c.name(),
            c.system_label(),
            comparability::tier(c),
            count(Some(c.result.workload.properties)),
            count(Some(lanes)),
            num(Some(c.result.throughput.deliveries_per_sec), 0),
            num(c.system_cores().map(|x| x * 1000.0), 0),
            num(fitted.map(|f| f.0), 0),
            num(fitted.map(|f| f.1), 0),
            num(
                c.system_peak_rss()
                    .filter(|_| lanes > 0)
                    .map(|b| b / 1_048_576.0 / (lanes as f64 / 1000.0)),
                1,
            ),
            ms(c.e2e(50)),
            ms(c.e2e(99)),
        ]
    });
    t
}
