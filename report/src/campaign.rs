//! A campaign as the report reads it: `campaign.json` (docs/campaigns.md) and the
//! record of every cell that ran, grouped by arm, with each figure of an arm as the
//! median over its repeats and that median's bootstrap interval.
//!
//! Only PASS cells give figures: a VOID cell measured the loader, a FAIL cell a
//! broken run, a REFUSED cell nothing. They are counted, never averaged in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cell::CellRecord;
use crate::error::ReportError;
use crate::format::{ms, num, pct};
use crate::stats::{coverage, median_ci, Interval, Outcomes, DEFAULT_RESAMPLES};
use crate::table::Table;

/// The seed of every interval the report computes (written next to them).
pub const CI_SEED: u64 = 0x5EED;
/// The confidence level of every interval.
pub const CI_LEVEL: f64 = 0.95;

#[derive(Debug, Clone, Deserialize)]
struct RecordFile {
    schema_version: u32,
    campaign: String,
    #[serde(default)]
    description: String,
    status: String,
    repeats: u32,
    seed: u64,
    arms: Vec<ArmFile>,
    cells: Vec<CellFile>,
}

#[derive(Debug, Clone, Deserialize)]
struct ArmFile {
    id: String,
    #[serde(default)]
    system: String,
    #[serde(default)]
    point: BTreeMap<String, String>,
    not_run: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct CellFile {
    arm: String,
    dir: PathBuf,
    status: String,
    outcome: Option<cell_record::Outcome>,
}

/// One arm and the records of its cells.
#[derive(Debug, Clone)]
pub struct ArmView {
    pub id: String,
    pub system: String,
    pub point: BTreeMap<String, String>,
    pub not_run: Option<String>,
    pub outcomes: Outcomes,
    /// Every cell that left a record, in run order.
    pub cells: Vec<CellRecord>,
}

impl ArmView {
    /// The arm ran here and left records (it was not recorded "not run", and at
    /// least one of its cells ran to its end).
    pub fn ran(&self) -> bool {
        self.not_run.is_none() && !self.cells.is_empty()
    }

    /// The PASS cells: the ones figures are taken from.
    pub fn passed(&self) -> impl Iterator<Item = &CellRecord> {
        self.cells.iter().filter(|c| c.result.outcome.is_pass())
    }

    /// One figure per PASS repeat.
    pub fn values(&self, f: impl Fn(&CellRecord) -> Option<f64>) -> Vec<f64> {
        self.passed().filter_map(f).collect()
    }

    /// The median of a figure over the PASS repeats, with its 95 % bootstrap
    /// interval (None without a PASS repeat that has it).
    pub fn median(&self, f: impl Fn(&CellRecord) -> Option<f64>) -> Option<Interval> {
        median_ci(&self.values(f), CI_LEVEL, DEFAULT_RESAMPLES, CI_SEED)
    }
}

/// A campaign and its arms.
#[derive(Debug, Clone)]
pub struct CampaignView {
    pub dir: PathBuf,
    pub name: String,
    pub description: String,
    pub status: String,
    pub repeats: u32,
    pub seed: u64,
    pub arms: Vec<ArmView>,
}

/// Whether `dir` holds a campaign.
pub fn is_campaign(dir: &Path) -> bool {
    dir.join("campaign.json").is_file()
}

impl CampaignView {
    pub fn load(dir: &Path) -> Result<CampaignView, ReportError> {
        let p = dir.join("campaign.json");
        let text = std::fs::read_to_string(&p).map_err(|e| ReportError::io(&p, e))?;
        let f: RecordFile = serde_json::from_str(&text).map_err(|e| ReportError::BadRecord {
            path: p.clone(),
            message: e.to_string(),
        })?;
        if f.schema_version != 1 {
            return Err(ReportError::BadRecord {
                path: p,
                message: format!("schema_version {} is not 1", f.schema_version),
            });
        }
        let mut arms: Vec<ArmView> = f
            .arms
            .iter()
            .map(|a| ArmView {
                id: a.id.clone(),
                system: a.system.clone(),
                point: a.point.clone(),
                not_run: a.not_run.clone(),
                outcomes: Outcomes::default(),
                cells: Vec::new(),
            })
            .collect();
        for c in &f.cells {
            let Some(arm) = arms.iter_mut().find(|a| a.id == c.arm) else {
                continue;
            };
            match (c.status.as_str(), &c.outcome) {
                ("done", Some(o)) => arm.outcomes.add(*o),
                ("not-run", _) => {}
                ("pending", _) => arm.outcomes.pending += 1,
                _ => arm.outcomes.add_unfinished(),
            }
            let d = dir.join(&c.dir);
            if c.status == "done" && d.join("result.json").is_file() {
                arm.cells.push(CellRecord::load(&d)?);
            }
        }
        Ok(CampaignView {
            dir: dir.to_path_buf(),
            name: f.campaign,
            description: f.description,
            status: f.status,
            repeats: f.repeats,
            seed: f.seed,
            arms,
        })
    }

    /// The record directories of every cell that ran to its end.
    pub fn cell_dirs(&self) -> Vec<PathBuf> {
        self.arms
            .iter()
            .flat_map(|a| a.cells.iter().map(|c| c.dir.clone()))
            .collect()
    }

    pub fn arm(&self, id: &str) -> Option<&ArmView> {
        self.arms.iter().find(|a| a.id == id)
    }
}

/// Of several directories of one campaign (its sittings), in order of precedence, the
/// first whose arm `id` ran ([`ArmView::ran`]), with that arm: where all of a cell's
/// repeats are taken from.
pub fn first_that_ran<'a>(
    views: &'a [CampaignView],
    id: &str,
) -> Option<(&'a CampaignView, &'a ArmView)> {
    views
        .iter()
        .find_map(|v| v.arm(id).filter(|a| a.ran()).map(|a| (v, a)))
}

/// `172.0 [165.1, 181.2]` (a 95 % interval), `172.0 [165.1, 181.2] (≤ 75 %)` (an
/// interval from too few repeats to cover 95 %: [`crate::stats::coverage`]),
/// `172.0 (one repeat: no interval)`, or `—`.
pub fn with_ci(i: Option<Interval>, fmt: impl Fn(Option<f64>) -> String) -> String {
    match i {
        // One observation has no interval; printing [x, x] would claim a certainty
        // that one repeat cannot give.
        Some(i) if i.n < 2 => format!("{} (one repeat: no interval)", fmt(Some(i.estimate))),
        Some(i) => {
            let level = if coverage::nominal_stands(&i) {
                String::new()
            } else {
                format!(" (≤ {:.0} %)", 100.0 * coverage::stated_level(&i))
            };
            format!(
                "{} [{}, {}]{level}",
                fmt(Some(i.estimate)),
                fmt(Some(i.low)),
                fmt(Some(i.high))
            )
        }
        None => "—".into(),
    }
}

/// The campaign's table: per arm, its outcomes and the medians of its headline
/// figures over the PASS repeats, each with its interval (95 %, or the less that few
/// repeats can cover, marked).
pub fn table(c: &CampaignView) -> Table {
    let mut t = Table::new(
        format!("campaign {} ({}, {} repeats)", c.name, c.status, c.repeats),
        &[
            "arm",
            "system",
            "outcomes",
            "e2e p50 ms",
            "e2e p99 ms",
            "deliveries/s (window)",
            "served",
            "system cores",
        ],
    );
    t.notes.push(format!(
        "medians over the PASS repeats of each arm, with their {:.0} % percentile-bootstrap intervals ({} resamples, seed {CI_SEED:#x}), marked (≤ x %) where too few repeats cover less (the range of n repeats covers the median with probability 1 − 2^(1−n)); served: the rated demand delivered within the rated window, at most 100 %; VOID, FAIL and REFUSED repeats are counted, never averaged in",
        100.0 * CI_LEVEL,
        DEFAULT_RESAMPLES
    ));
    let all: Vec<&CellRecord> = c.arms.iter().flat_map(|a| &a.cells).collect();
    if let Some(mark) = crate::comparability::not_comparable(&all) {
        t.notes.push(format!(
            "{mark}: arms (or repeats of one arm) that differ in these do not compare with each other"
        ));
    }
    let mut rows = Vec::new();
    for a in &c.arms {
        if let Some(why) = &a.not_run {
            rows.push(vec![
                a.id.clone(),
                a.system.clone(),
                why.clone(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
            ]);
            continue;
        }
        rows.push(vec![
            a.id.clone(),
            a.system.clone(),
            a.outcomes.label(),
            with_ci(a.median(|r| r.e2e(50)), ms),
            with_ci(a.median(|r| r.e2e(99)), ms),
            with_ci(a.median(|r| Some(r.window_deliveries_per_sec())), |x| {
                num(x, 0)
            }),
            with_ci(a.median(|r| Some(r.served_in_window())), pct),
            with_ci(a.median(|r| r.system_cores()), |x| {
                x.map_or("—".into(), |v| format!("{v:.2}"))
            }),
        ]);
    }
    t.sections.push(crate::table::Section {
        heading: None,
        rows,
    });
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repeat_is_given_no_interval() {
        let f = |x: Option<f64>| ms(x);
        let one = median_ci(&[37_487.0], CI_LEVEL, 1000, CI_SEED);
        assert_eq!(one.map(|i| i.n), Some(1));
        let text = with_ci(one, f);
        assert!(text.contains("one repeat: no interval"), "{text}");
        assert!(!text.contains('['), "{text}");
        let three = with_ci(median_ci(&[1.0, 2.0, 3.0], CI_LEVEL, 1000, CI_SEED), f);
        assert!(
            three.contains('[') && !three.contains("no interval"),
            "{three}"
        );
        assert_eq!(with_ci(None, f), "—");
    }
}
