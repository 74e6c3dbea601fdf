//! Campaign files (`campaigns/*.yaml`, docs/campaigns.md): which scenarios, which
//! overrides for every cell, which matrix of values over which scenario fields, how
//! many repeats, and the seed of the interleaved order. Unknown fields are refused
//! with their name; every cell's scenario is resolved and validated before anything
//! runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A campaign that cannot run, with the field and the fix (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error("cannot read campaign {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("campaign {path}: {message} (fields are listed in docs/campaigns.md)")]
    Parse { path: String, message: String },
    #[error("campaign {path}, field `{field}`: {message}")]
    Invalid {
        path: String,
        field: String,
        message: String,
    },
}

/// Scenario field overrides: dotted path → value (`rate: 2000`, `drain.max: 30s`).
pub type Sets = BTreeMap<String, serde_yaml::Value>;

/// A matrix: dotted path → the values it takes; the arms are every combination.
pub type Matrix = BTreeMap<String, Vec<serde_yaml::Value>>;

/// One group of arms: a base scenario, its overrides and its matrix.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Group {
    /// The group's name (default: the scenario file's stem). Arms are named
    /// `<group>` or `<group>[path=value,…]`.
    pub name: String,
    /// The base scenario, relative to the campaign file's directory (or, failing
    /// that, to the current directory).
    pub scenario: PathBuf,
    /// Overrides for every arm of the group (after the campaign's own `set`).
    pub set: Sets,
    pub matrix: Matrix,
    /// Environment variables the group needs (e.g. `CROSSBENCH_QUEEN_URL`); when
    /// one is unset its arms are recorded as not run. `${VAR}` in a set value is
    /// replaced by the variable's value.
    pub requires_env: Vec<String>,
    /// In a ceiling campaign: this group's range, in place of the campaign's.
    pub between: Option<[u64; 2]>,
    /// Cells per arm of this group, in place of the campaign's `repeats` (a finding
    /// that needs more evidence than the others: F7's 10 runs per arm).
    pub repeats: Option<u32>,
}

/// A ceiling campaign: instead of repeats, one ceiling search per arm.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CeilingSpec {
    /// The range searched (a group's `between` overrides it).
    pub between: [u64; 2],
    /// Repeats at each side of the boundary.
    #[serde(default = "three")]
    pub repeats: u32,
    #[serde(default = "served")]
    pub served: f64,
    /// End-to-end p99 a cell must stay under (`5s`), if any.
    #[serde(default)]
    pub p99_max: Option<String>,
    #[serde(default = "resolution")]
    pub resolution: f64,
}

fn three() -> u32 {
    3
}
fn served() -> f64 {
    0.99
}
fn resolution() -> f64 {
    1.1
}

/// Arms from the published cells (`results/published/*.yaml`): each published cell
/// whose `reproduce` block runs here is one arm, with its scenario and sets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PublishedGroup {
    /// The published cells' directory, relative like a group's scenario.
    pub dir: PathBuf,
    /// Only these ids (default: every cell that runs here).
    pub ids: Vec<String>,
    /// Per system: environment variables its arms need (`queen: [CROSSBENCH_QUEEN_URL]`).
    pub requires_env: BTreeMap<String, Vec<String>>,
    /// Per system: overrides its arms get (`queen: {queen.url: "${CROSSBENCH_QUEEN_URL}"}`).
    pub set: BTreeMap<String, Sets>,
}

/// A campaign file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    /// The campaign's name (the default output directory is `runs/<name>-<time>`).
    pub campaign: String,
    #[serde(default)]
    pub description: String,
    /// Cells per arm.
    #[serde(default = "one")]
    pub repeats: u32,
    /// Seed of the interleaved order (recorded in campaign.json).
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Overrides for every cell of the campaign.
    #[serde(default)]
    pub set: Sets,
    /// A single group written inline: `scenario`, `matrix` (and the campaign's `set`).
    #[serde(default)]
    pub scenario: Option<PathBuf>,
    #[serde(default)]
    pub matrix: Matrix,
    #[serde(default)]
    pub requires_env: Vec<String>,
    /// Several groups.
    #[serde(default)]
    pub groups: Vec<Group>,
    /// Arms from the published cells.
    #[serde(default)]
    pub published: Option<PublishedGroup>,
    /// A ceiling campaign: one ceiling search per arm (`crossbench campaign` then
    /// runs searches, not repeats).
    #[serde(default)]
    pub ceiling: Option<CeilingSpec>,
    /// The published findings this campaign checks, each as arms whose direction is
    /// the finding (`crossbench findings`, docs/findings.md).
    #[serde(default)]
    pub findings: Vec<report::findings::Finding>,
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}

impl CampaignFile {
    /// Read and check a campaign file (not yet its cells' scenarios).
    pub fn load(path: &Path) -> Result<CampaignFile, CampaignError> {
        let text = std::fs::read_to_string(path).map_err(|e| CampaignError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let f: CampaignFile = serde_yaml::from_str(&text).map_err(|e| CampaignError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        f.check(path)?;
        Ok(f)
    }

    fn check(&self, path: &Path) -> Result<(), CampaignError> {
        let bad = |field: &str, message: &str| {
            Err(CampaignError::Invalid {
                path: path.display().to_string(),
                field: field.into(),
                message: message.into(),
            })
        };
        if self.campaign.is_empty()
            || !self
                .campaign
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return bad(
                "campaign",
                "must be non-empty and use only letters, digits, '-', '_' and '.'",
            );
        }
        if !(1..=1000).contains(&self.repeats) {
            return bad("repeats", "must be between 1 and 1000");
        }
        if let Some(c) = &self.ceiling {
            // The search's own bounds (crate::campaign::ceiling::execute), refused here,
            // before anything runs, rather than per arm once the campaign has started.
            if !(1..=20).contains(&c.repeats) {
                return bad("ceiling.repeats", "must be between 1 and 20");
            }
            if !(c.served > 0.0 && c.served <= 1.0) {
                return bad("ceiling.served", "must be in (0, 1], e.g. 0.99");
            }
            if !(c.resolution > 1.0 && c.resolution <= 2.0) {
                return bad("ceiling.resolution", "must be in (1, 2], e.g. 1.1");
            }
            let ranges = std::iter::once(("ceiling.between".to_string(), Some(c.between))).chain(
                self.groups
                    .iter()
                    .enumerate()
                    .map(|(i, g)| (format!("groups[{i}].between"), g.between)),
            );
            for (field, r) in ranges {
                if let Some([lo, hi]) = r {
                    if lo == 0 || hi <= lo {
                        return bad(
                            &field,
                            "give two rates, [LOW, HIGH], LOW < HIGH, both above 0",
                        );
                    }
                }
            }
        }
        let inline = self.scenario.is_some();
        if !inline && (!self.matrix.is_empty() || !self.requires_env.is_empty()) {
            return bad(
                "matrix",
                "a top-level matrix (or requires_env) needs a top-level `scenario:`; or put it in a group under `groups:`",
            );
        }
        if !inline && self.groups.is_empty() && self.published.is_none() {
            return bad(
                "scenario",
                "name what to run: `scenario:` (with an optional `matrix:`), `groups:` or `published:`",
            );
        }
        for (i, g) in self.groups.iter().enumerate() {
            if g.scenario.as_os_str().is_empty() {
                return bad(
                    &format!("groups[{i}].scenario"),
                    "every group needs a scenario",
                );
            }
            if g.repeats.is_some_and(|r| !(1..=1000).contains(&r)) {
                return bad(
                    &format!("groups[{i}].repeats"),
                    "must be between 1 and 1000",
                );
            }
            if g.repeats.is_some() && self.ceiling.is_some() {
                return bad(
                    &format!("groups[{i}].repeats"),
                    "a ceiling campaign repeats at the boundary (`ceiling.repeats`), not per group",
                );
            }
        }
        let matrices = std::iter::once(("matrix".to_string(), &self.matrix)).chain(
            self.groups
                .iter()
                .enumerate()
                .map(|(i, g)| (format!("groups[{i}].matrix"), &g.matrix)),
        );
        for (field, m) in matrices {
            for (k, vs) in m {
                if vs.is_empty() {
                    return bad(&format!("{field}.{k}"), "lists no values");
                }
            }
        }
        Ok(())
    }

    /// Every group, the inline one first, then `groups`, with their names resolved.
    pub fn groups(&self) -> Vec<Group> {
        let mut out = Vec::new();
        if let Some(s) = &self.scenario {
            out.push(Group {
                name: String::new(),
                scenario: s.clone(),
                set: Sets::new(),
                matrix: self.matrix.clone(),
                requires_env: self.requires_env.clone(),
                between: None,
                repeats: None,
            });
        }
        out.extend(self.groups.iter().cloned());
        for g in &mut out {
            if g.name.is_empty() {
                g.name = g
                    .scenario
                    .file_stem()
                    .map_or_else(|| "arm".into(), |s| s.to_string_lossy().to_string());
            }
        }
        out
    }
}

/// Resolve `p` relative to the campaign file's directory, or, when nothing is there,
/// to the current directory.
pub fn resolve(campaign: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let near = campaign.parent().unwrap_or(Path::new(".")).join(p);
    if near.exists() {
        near
    } else {
        p.to_path_buf()
    }
}

/// A set value as `--set` text (`rate=2000`), with `${VAR}` replaced from the
/// environment: `Err(VAR)` when a variable is unset.
pub fn set_arg(path: &str, v: &serde_yaml::Value) -> Result<String, String> {
    let text = match v {
        serde_yaml::Value::String(s) => expand_env(s)?,
        other => serde_yaml::to_string(other)
            .map_err(|e| e.to_string())?
            .trim_end()
            .to_string(),
    };
    Ok(format!("{path}={text}"))
}

fn expand_env(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            return Ok(out);
        };
        let var = &rest[i + 2..i + j];
        out.push_str(&std::env::var(var).map_err(|_| var.to_string())?);
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CampaignFile, CampaignError> {
        let f: CampaignFile = serde_yaml::from_str(text).map_err(|e| CampaignError::Parse {
            path: "t".into(),
            message: e.to_string(),
        })?;
        f.check(Path::new("t"))?;
        Ok(f)
    }

    #[test]
    fn a_small_campaign_parses_and_names_its_groups() {
        let f = parse(
            "campaign: c\nrepeats: 3\nscenario: ../scenarios/smoke.yaml\nmatrix:\n  rate: [100, 200]\ngroups:\n  - scenario: x/pgmq-sparse.yaml\n",
        )
        .unwrap();
        let g = f.groups();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].name, "smoke");
        assert_eq!(g[1].name, "pgmq-sparse");
        assert_eq!(g[0].matrix["rate"].len(), 2);
    }

    #[test]
    fn bad_files_name_the_field() {
        for (text, field) in [
            ("campaign: c\nscenario: s.yaml\nrepeat: 3\n", "repeat"),
            ("campaign: c\nscenario: s.yaml\nrepeats: 0\n", "repeats"),
            ("campaign: c\nmatrix:\n  rate: [1]\n", "matrix"),
            ("campaign: c\n", "scenario"),
            (
                "campaign: c\nscenario: s.yaml\nceiling:\n  between: [10, 100]\n  resolution: 4\n",
                "ceiling.resolution",
            ),
            (
                "campaign: c\nceiling:\n  between: [10, 100]\ngroups:\n  - scenario: s.yaml\n    between: [100, 10]\n",
                "groups[0].between",
            ),
            (
                "campaign: c\nscenario: s.yaml\nmatrix:\n  rate: []\n",
                "matrix.rate",
            ),
            ("campaign: 'a b'\nscenario: s.yaml\n", "campaign"),
            (
                "campaign: c\ngroups:\n  - scenario: s.yaml\n    repeats: 0\n",
                "groups[0].repeats",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(field), "{text}: {e}");
        }
    }

    #[test]
    fn set_values_become_set_arguments_with_the_environment() {
        assert_eq!(
            set_arg("rate", &serde_yaml::Value::from(2000)).unwrap(),
            "rate=2000"
        );
        std::env::set_var("CB_TEST_URL_X", "http://127.0.0.1:1");
        assert_eq!(
            set_arg("queen.url", &serde_yaml::Value::from("${CB_TEST_URL_X}/")).unwrap(),
            "queen.url=http://127.0.0.1:1/"
        );
        assert_eq!(
            set_arg("x", &serde_yaml::Value::from("${CB_TEST_SURELY_UNSET}")).unwrap_err(),
            "CB_TEST_SURELY_UNSET"
        );
    }
}
