//! Each side's use over the rated window against its budget, from the sampler's
//! samples of the window: the loader's own process, and the system budget's own
//! processes (sampled as targets `budget-system-<i>`, summed per tick; without a
//! system budget, the system's sampled targets as the cost summary has them): mean
//! and peak cores against the cores granted (the CPU set's size, or the quota when
//! smaller), peak memory against the limit.

use std::collections::BTreeMap;
use std::path::Path;

use cell_record::resources::{Asked, SideAsked, SideUse};

use crate::scenario::resources::cores_granted;

/// Per tick of the window `(start, end]`, the sum of `metric` over the targets whose
/// label starts with `prefix`: (mean, peak) over the ticks that had a value.
fn summed(
    rows: &[sampler::Sample],
    prefix: &str,
    metric: &str,
    start: u64,
    end: u64,
) -> (Option<f64>, Option<f64>) {
    let mut ticks: BTreeMap<u64, f64> = BTreeMap::new();
    for r in rows.iter().filter(|r| {
        r.unix_ms > start
            && r.unix_ms <= end
            && r.target.starts_with(prefix)
            && &*r.metric == metric
    }) {
        if let Some(v) = r.value {
            *ticks.entry(r.unix_ms).or_default() += v;
        }
    }
    if ticks.is_empty() {
        return (None, None);
    }
    let n = ticks.len() as f64;
    let mean = ticks.values().sum::<f64>() / n;
    let peak = ticks.values().copied().fold(f64::MIN, f64::max);
    (Some(mean), Some(peak))
}

/// The loader's and the system's use, each against its budget.
pub fn sides(asked: Option<&Asked>, cost: &sampler::CostSummary, samples: &Path) -> Vec<SideUse> {
    let side = |n: &str| -> Option<&SideAsked> {
        asked.and_then(|a| match n {
            "loader" => a.loader.as_ref(),
            _ => a.system.as_ref(),
        })
    };
    let loader = SideUse {
        side: "loader".into(),
        sampled_as: vec!["loader".into()],
        cores_mean: cost.loader_cores_mean,
        cores_peak: cost.loader_cores_peak,
        cores_granted: cores_granted(side("loader")),
        memory_peak_bytes: cost.loader_rss_peak_bytes,
        memory_limit_bytes: side("loader").and_then(|s| s.memory_bytes),
    };
    let budgeted = side("system").filter(|s| !s.targets.is_empty());
    let system = match budgeted {
        Some(s) => {
            let rows = sampler::read_samples(samples)
                .map(|s| s.rows)
                .unwrap_or_default();
            let (start, end) = (cost.window_start_unix_ms, cost.window_end_unix_ms);
            let prefix = crate::scenario::resources::BUDGET_TARGET_PREFIX;
            let (cores_mean, cores_peak) = summed(&rows, prefix, "cpu_cores", start, end);
            let (_, memory_peak) = summed(&rows, prefix, "rss_bytes", start, end);
            SideUse {
                side: "system".into(),
                sampled_as: s.targets.clone(),
                cores_mean,
                cores_peak,
                cores_granted: cores_granted(Some(s)),
                memory_peak_bytes: memory_peak,
                memory_limit_bytes: s.memory_bytes,
            }
        }
        None => SideUse {
            side: "system".into(),
            sampled_as: cost.system_targets.clone(),
            cores_mean: cost.system_cores_mean,
            cores_peak: cost.system_cores_peak,
            cores_granted: cores_granted(side("system")),
            memory_peak_bytes: cost.system_memory_peak_bytes,
            memory_limit_bytes: side("system").and_then(|s| s.memory_bytes),
        },
    };
    vec![loader, system]
}
