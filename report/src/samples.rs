//! `samples.csv` (v1, sampler/FORMAT.md) as per-tick series of the system under
//! test's CPU and memory and the loader's CPU.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::ReportError;

pub const HEADER_LINE: &str = "# crossbench samples v1";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tick {
    pub unix_ms: i64,
    /// Σ cpu_cores of the system targets (`None`: no value this tick).
    pub system_cores: Option<f64>,
    /// Σ rss_bytes (processes) and memory_current_bytes (cgroups) of the system targets.
    pub system_memory_bytes: Option<f64>,
    pub loader_cores: Option<f64>,
}

/// Read the file; `system_targets` are the labels of the system under test (from
/// the cell's cost summary). Empty: every target that is not `host` or `loader`.
pub fn read(path: &Path, system_targets: &[String]) -> Result<Vec<Tick>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    parse(path, &text, system_targets)
}

pub fn parse(path: &Path, text: &str, system_targets: &[String]) -> Result<Vec<Tick>, ReportError> {
    let bad = |message: String| ReportError::BadRecord {
        path: path.to_path_buf(),
        message,
    };
    let mut lines = text.lines();
    if lines.next() != Some(HEADER_LINE) {
        return Err(bad(format!(
            "first line is not `{HEADER_LINE}`: not a v1 samples file"
        )));
    }
    let _header = lines.next();
    let mut ticks: BTreeMap<i64, Tick> = BTreeMap::new();
    for line in lines {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 6 {
            return Err(bad(format!(
                "row `{line}` has {} fields, expected 6",
                f.len()
            )));
        }
        let Ok(unix_ms) = f[0].parse::<i64>() else {
            return Err(bad(format!("row `{line}`: unix_ms is not a number")));
        };
        let (target, kind, metric) = (f[2], f[3], f[4]);
        let Ok(value) = f[5].parse::<f64>() else {
            continue; // empty: not measured this tick
        };
        let tick = ticks.entry(unix_ms).or_insert_with(|| Tick {
            unix_ms,
            ..Tick::default()
        });
        let is_system = if system_targets.is_empty() {
            kind != "host" && kind != "loader"
        } else {
            system_targets.iter().any(|t| t == target)
        };
        let add = |slot: &mut Option<f64>| *slot = Some(slot.unwrap_or(0.0) + value);
        if kind == "loader" && metric == "cpu_cores" {
            add(&mut tick.loader_cores);
        } else if is_system {
            match (kind, metric) {
                (_, "cpu_cores") => add(&mut tick.system_cores),
                (_, "rss_bytes") | ("cgroup", "memory_current_bytes") => {
                    add(&mut tick.system_memory_bytes)
                }
                _ => {}
            }
        }
    }
    Ok(ticks.into_values().collect())
}
