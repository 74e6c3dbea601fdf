//! `result.json`'s `resources` block (schema 1, additive to schema_version 1;
//! docs/record.md): the resource budget a cell was asked to run under, what of it
//! was enforced and how, what could not be and why, and each side's use against it.
//!
//! One shape, written by the loader and read by every reader. `label` is what a
//! comparison compares: the same budget gives the same label, and a cell without a
//! `resources:` section is exactly [`NO_BUDGET`]. A record without the block was
//! written before budgets existed (or is a refused or abandoned cell's), and reads as
//! [`NO_BUDGET`] too ([`Resources::label_of`]).

use serde::{Deserialize, Serialize};

/// The label of a cell that ran without a budget (the default).
pub const NO_BUDGET: &str = "no budget";

/// The block's schema.
pub const RESOURCES_SCHEMA: u32 = 1;

/// `resources`: the budget asked, enforced and used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    pub schema: u32,
    /// One line naming the budget asked (never the processes it named, which change
    /// from run to run): `"no budget"`, or e.g. `"loader cpus 0 | system cpus 1,
    /// quota 1.00 cores, memory 4 GiB"`.
    pub label: String,
    /// A budget that cannot be enforced is bad input (`true`) or a warning.
    pub strict: bool,
    /// The scenario's `resources:` section as resolved; `None` without one.
    pub asked: Option<Asked>,
    /// What was enforced, per side and mechanism, and what could not be.
    pub enforced: Vec<Enforced>,
    /// What was put back when the cell ended (and what could not be).
    pub restored: Vec<String>,
    /// Each side's use over the rated window against its budget.
    #[serde(rename = "use")]
    pub usage: Vec<SideUse>,
}

impl Resources {
    /// The budget label of a record's block, [`NO_BUDGET`] when it has none.
    pub fn label_of(r: Option<&Resources>) -> &str {
        r.map_or(NO_BUDGET, |r| r.label.as_str())
    }
}

/// The section as resolved: both sides, each optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Asked {
    pub loader: Option<SideAsked>,
    pub system: Option<SideAsked>,
}

/// One side's budget as resolved (CPU lists canonical, memory in bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SideAsked {
    /// The system's processes as the sampler names targets (`pid:1234`,
    /// `proc:postgres`); empty for the loader (this process).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// CPU list, canonical (`"0"`, `"0-2,5"`).
    pub cpus: Option<String>,
    /// CPU time in cores (1.5 = one and a half cores' worth per period).
    pub cpu_quota: Option<f64>,
    pub memory_bytes: Option<u64>,
}

/// One mechanism on one side: enforced (`ok`, with how) or not (with why).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Enforced {
    /// `loader` or `system`.
    pub side: String,
    /// `affinity`, `cpu_quota` or `memory`.
    pub what: String,
    pub ok: bool,
    /// How it was enforced, or why it could not be.
    pub how: String,
}

/// One side's use over the rated window, from the sampler's samples, against its
/// budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SideUse {
    pub side: String,
    /// The sampler's targets the figures come from.
    pub sampled_as: Vec<String>,
    pub cores_mean: Option<f64>,
    pub cores_peak: Option<f64>,
    /// min(CPUs in the set, quota); `None` without a CPU budget.
    pub cores_granted: Option<f64>,
    pub memory_peak_bytes: Option<f64>,
    pub memory_limit_bytes: Option<u64>,
}
