//! The scenario's `resources:` section: a CPU set, a CPU quota and a memory limit
//! for the loader and for the system under test, whose processes are named as the
//! sampler names its targets (`pid:<n>`, `proc:<pattern>`; each with its
//! descendants). Several processes share the system's one budget.
//!
//! This file reads and checks the section and resolves it ([`ResourcesSection::asked`],
//! [`label`]); `crate::cell::budget` enforces it for the cell.

use serde::{Deserialize, Deserializer, Serialize};

use crate::scenario::{invalid, ScenarioError};

/// `resources:` (docs/scenarios.md). Absent: no budget (the default).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ResourcesSection {
    /// A budget that cannot be enforced is bad input (exit 2, naming the field);
    /// otherwise a warning on the console and in the record.
    pub strict: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader: Option<SideSection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<SideSection>,
}

/// One side's budget, every field optional.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SideSection {
    /// The system's processes (system only): `pid:<n>`, `pidfile:<path>` or
    /// `proc:<pattern>`, as in
    /// `sample.targets`, each with its descendants.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// CPU list: `"1"`, `"0-1"`, `"0,2"`.
    #[serde(deserialize_with = "de_text", skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// CPU time, in cores (1.0 = one core's worth in every period).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// Memory limit: bytes, or with a unit (`512MiB`, `2GiB`, `1G`).
    #[serde(deserialize_with = "de_text", skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// A field that YAML may read as a number (`cpus: 0`, `memory: 1073741824`).
fn de_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum T {
        S(String),
        N(u64),
    }
    Ok(Option::<T>::deserialize(d)?.map(|t| match t {
        T::S(s) => s,
        T::N(n) => n.to_string(),
    }))
}

/// Parse a CPU list (`0-2,5`) into sorted, distinct CPU numbers.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!(
                "{s:?} is not a CPU list (e.g. \"1\", \"0-1\", \"0,2\")"
            ));
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let (a, b) = match (a.parse::<usize>(), b.parse::<usize>()) {
            (Ok(a), Ok(b)) if a <= b && b < 4096 => (a, b),
            _ => {
                return Err(format!(
                    "{s:?} is not a CPU list (e.g. \"1\", \"0-1\", \"0,2\")"
                ))
            }
        };
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A CPU set in its canonical list form (`0-2,5`).
pub fn format_cpus(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Parse a memory size: bytes, or a number with K/M/G/T (powers of 1000) or
/// KiB/MiB/GiB/TiB (powers of 1024).
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a memory size (e.g. 512MiB, 2GiB)"))?;
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "K" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "T" | "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0_f64.powi(4),
        _ => return Err(format!("{s:?} is not a memory size (e.g. 512MiB, 2GiB)")),
    };
    let b = n * mult;
    if !(b.is_finite() && (4096.0 * 1024.0..1e18).contains(&b)) {
        return Err(format!("{s:?}: a memory limit is at least 4 MiB"));
    }
    Ok(b as u64)
}

/// Bytes as the label writes them (`4 GiB`, `1536 MiB`, `123456 B`).
pub fn format_memory(b: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (u, m) in UNITS {
        if b >= m && b.is_multiple_of(m) {
            return format!("{} {u}", b / m);
        }
    }
    format!("{b} B")
}

impl SideSection {
    fn is_empty(&self) -> bool {
        self.cpus.is_none() && self.cpu_quota.is_none() && self.memory.is_none()
    }

    /// The side as resolved (checked by [`validate`] first).
    fn asked(&self) -> cell_record::resources::SideAsked {
        cell_record::resources::SideAsked {
            targets: self.targets.iter().map(|t| t.trim().to_string()).collect(),
            cpus: self
                .cpus
                .as_deref()
                .and_then(|c| parse_cpus(c).ok())
                .map(|c| format_cpus(&c)),
            cpu_quota: self.cpu_quota,
            memory_bytes: self.memory.as_deref().and_then(|m| parse_memory(m).ok()),
        }
    }
}

impl ResourcesSection {
    /// The section as resolved (CPU lists canonical, memory in bytes).
    pub fn asked(&self) -> cell_record::resources::Asked {
        cell_record::resources::Asked {
            loader: self.loader.as_ref().map(SideSection::asked),
            system: self.system.as_ref().map(SideSection::asked),
        }
    }
}

/// The cores a side is granted: min(CPUs in its set, its quota); `None` without a
/// CPU budget.
pub fn cores_granted(s: Option<&cell_record::resources::SideAsked>) -> Option<f64> {
    let s = s?;
    let set = s
        .cpus
        .as_deref()
        .and_then(|c| parse_cpus(c).ok())
        .map(|c| c.len() as f64);
    match (set, s.cpu_quota) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The sampler's label of a system budget's target `i` (`budget-system-<i>`): the
/// budget's own processes are sampled as targets of their own, whatever the system's
/// default targets are, so that the side's use is read from exactly what it budgets.
pub fn budget_label(i: usize) -> String {
    format!("{BUDGET_TARGET_PREFIX}{i}")
}

/// What every [`budget_label`] starts with.
pub const BUDGET_TARGET_PREFIX: &str = "budget-system-";

/// The sampler targets of the system budget's processes: `(label, spec)`.
pub fn budget_targets(r: Option<&ResourcesSection>) -> Vec<(String, String)> {
    r.and_then(|r| r.system.as_ref())
        .map(|s| {
            s.targets
                .iter()
                .enumerate()
                .map(|(i, t)| (budget_label(i), t.trim().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The per-second figures of each side's budget, for the sampler to write beside the
/// side's targets: `(target label, metric, value)` with `budget_cores` and
/// `budget_memory_bytes`, on `loader` for the loader's and on each of the system
/// budget's own targets ([`budget_targets`]) for the system's (each carries the whole
/// budget its processes share).
pub fn per_second(r: Option<&ResourcesSection>) -> Vec<(String, String, f64)> {
    let Some(r) = r else { return Vec::new() };
    let system: Vec<String> = budget_targets(Some(r)).into_iter().map(|t| t.0).collect();
    let a = r.asked();
    let mut out = Vec::new();
    let mut side = |labels: Vec<String>, s: Option<&cell_record::resources::SideAsked>| {
        for l in labels {
            if let Some(c) = cores_granted(s) {
                out.push((l.clone(), "budget_cores".to_string(), c));
            }
            if let Some(m) = s.and_then(|s| s.memory_bytes) {
                out.push((l, "budget_memory_bytes".to_string(), m as f64));
            }
        }
    };
    side(vec!["loader".into()], a.loader.as_ref());
    side(system, a.system.as_ref());
    out
}

/// One line naming the budget asked (the same budget, the same line; the processes
/// it names are left out: they change from run to run). `"no budget"` without one.
pub fn label(r: Option<&ResourcesSection>) -> String {
    let Some(r) = r else {
        return cell_record::resources::NO_BUDGET.into();
    };
    let a = r.asked();
    let side = |name: &str, s: &Option<cell_record::resources::SideAsked>| {
        let mut parts = Vec::new();
        if let Some(s) = s {
            if let Some(c) = &s.cpus {
                parts.push(format!("cpus {c}"));
            }
            if let Some(q) = s.cpu_quota {
                parts.push(format!("quota {q:.2} cores"));
            }
            if let Some(m) = s.memory_bytes {
                parts.push(format!("memory {}", format_memory(m)));
            }
        }
        if parts.is_empty() {
            format!("{name} unbudgeted")
        } else {
            format!("{name} {}", parts.join(", "))
        }
    };
    if a.loader
        .as_ref()
        .is_none_or(|_| r.loader.as_ref().is_some_and(SideSection::is_empty))
        && a.system
            .as_ref()
            .is_none_or(|_| r.system.as_ref().is_some_and(SideSection::is_empty))
    {
        return cell_record::resources::NO_BUDGET.into();
    }
    format!(
        "{} | {}",
        side("loader", &a.loader),
        side("system", &a.system)
    )
}

/// Check the section: every field parses, the loader names no processes (it is this
/// one), a system budget names its processes in the forms a budget can take.
pub fn validate(r: &ResourcesSection) -> Result<(), ScenarioError> {
    for (name, side) in [("loader", &r.loader), ("system", &r.system)] {
        let Some(side) = side else { continue };
        if let Some(c) = &side.cpus {
            let cpus = parse_cpus(c).map_err(|e| invalid(&format!("resources.{name}.cpus"), e))?;
            if cpus.is_empty() {
                return Err(invalid(&format!("resources.{name}.cpus"), "names no CPU"));
            }
        }
        if let Some(q) = side.cpu_quota {
            if !(q.is_finite() && (0.01..=4096.0).contains(&q)) {
                return Err(invalid(
                    &format!("resources.{name}.cpu_quota"),
                    "must be a number of cores between 0.01 and 4096, e.g. 1.0",
                ));
            }
        }
        if let Some(m) = &side.memory {
            parse_memory(m).map_err(|e| invalid(&format!("resources.{name}.memory"), e))?;
        }
        if name == "loader" && !side.targets.is_empty() {
            return Err(invalid(
                "resources.loader.targets",
                "the loader is this process: remove targets (the system's processes go under resources.system.targets)",
            ));
        }
    }
    if let Some(sys) = &r.system {
        if sys.targets.is_empty() && !sys.is_empty() {
            return Err(invalid(
                "resources.system.targets",
                "a system budget names the system's processes, e.g. [\"proc:postgres\"] or [\"pid:1234\"]",
            ));
        }
        for (i, t) in sys.targets.iter().enumerate() {
            let field = format!("resources.system.targets[{i}]");
            match t.parse::<sampler::TargetSpec>() {
                Ok(sampler::TargetSpec::Pid(_))
                | Ok(sampler::TargetSpec::PidFile(_))
                | Ok(sampler::TargetSpec::ProcessPattern(_)) => {}
                Ok(other) => {
                    return Err(invalid(
                        &field,
                        format!("{other}: a budget's processes are named pid:<n>, pidfile:<path> or proc:<pattern> (each with its descendants)"),
                    ))
                }
                Err(e) => return Err(invalid(&field, e.to_string())),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_sizes() {
        assert_eq!(parse_cpus("0-2,5,1").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(format_cpus(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert!(parse_cpus("a").is_err());
        assert!(parse_cpus("2-1").is_err());
        assert_eq!(parse_memory("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_memory("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_memory("1G").unwrap(), 1_000_000_000);
        assert!(parse_memory("12 parsecs").is_err());
        assert_eq!(format_memory(4 << 30), "4 GiB");
    }

    #[test]
    fn the_same_budget_gives_the_same_label() {
        assert_eq!(label(None), "no budget");
        let y = |s: &str| serde_yaml::from_str::<ResourcesSection>(s).unwrap();
        let a = y("loader: {cpus: 0}\nsystem: {targets: [\"pid:1\"], cpus: \"1\", memory: 4GiB}");
        let b = y("strict: true\nloader: {cpus: \"0\"}\nsystem: {targets: [\"proc:x\"], cpus: \"1-1\", memory: 4096MiB}");
        assert_eq!(label(Some(&a)), label(Some(&b)));
        assert_eq!(
            label(Some(&a)),
            "loader cpus 0 | system cpus 1, memory 4 GiB"
        );
        assert_eq!(label(Some(&y("strict: false"))), "no budget");
    }
}
