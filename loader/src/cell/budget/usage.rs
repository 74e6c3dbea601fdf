//! Each side's use over the rated window against its budget, from the sampler's
//! summary of the window (the loader's own process; the system's sampled targets):
//! mean and peak cores against the cores granted (the CPU set's size, or the quota
//! when smaller), peak memory against the limit.

use cell_record::resources::{Asked, SideAsked, SideUse};

use crate::scenario::resources::cores_granted;

/// The loader's and the system's use, each against its budget.
pub fn sides(asked: Option<&Asked>, cost: &sampler::CostSummary) -> Vec<SideUse> {
    let side = |n: &str| -> Option<&SideAsked> {
        asked.and_then(|a| match n {
            "loader" => a.loader.as_ref(),
            _ => a.system.as_ref(),
        })
    };
    vec![
        SideUse {
            side: "loader".into(),
            sampled_as: vec!["loader".into()],
            cores_mean: cost.loader_cores_mean,
            cores_peak: cost.loader_cores_peak,
            cores_granted: cores_granted(side("loader")),
            memory_peak_bytes: cost.loader_rss_peak_bytes,
            memory_limit_bytes: side("loader").and_then(|s| s.memory_bytes),
        },
        SideUse {
            side: "system".into(),
            sampled_as: cost.system_targets.clone(),
            cores_mean: cost.system_cores_mean,
            cores_peak: cost.system_cores_peak,
            cores_granted: cores_granted(side("system")),
            memory_peak_bytes: cost.system_memory_peak_bytes,
            memory_limit_bytes: side("system").and_then(|s| s.memory_bytes),
        },
    ]
}
