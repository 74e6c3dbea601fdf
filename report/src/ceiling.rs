//! The ceiling table (the reference SPEC §6.2): per sweep (same system, variant,
//! tier, properties and lanes), the highest rate that held, the resource that
//! bound the next step up, and the first symptom there.
//!
//! A cell **held** when it PASSed (not FAIL, not VOID), served at least 97 % (the
//! rated demand delivered in the rated window), shed nothing and kept the worse flow's
//! e2e p99 under 5 s.
//! A cell a ceiling search ran is judged as that search judged it instead (its
//! `--served` in the rated window and its `--p99-max`, in `ceiling.json`), so that the
//! per-sweep table and the search's interval never name different ceilings for the
//! same cells. A rate held when every cell at it held, as in the search.

use std::collections::BTreeMap;

use crate::cell::CellRecord;
use crate::comparability;
use crate::format::{count, ms, pct};
use crate::table::{Section, Table};

pub use cell_record::held::{P99_MAX_MS, SERVED_MIN};
/// Mean system cores at or above this share of the host's cores: CPU bound.
pub const CPU_BOUND_FRACTION: f64 = 0.85;

pub const COLUMNS: &[&str] = &[
    "sweep",
    "tier",
    "rates tried",
    "highest R held",
    "p99 there ms",
    "next R",
    "bound by",
    "first symptom",
];

/// Why a cell did not hold, or `None` when it held.
pub fn symptom(c: &CellRecord) -> Option<String> {
    let r = &c.result;
    if c.is_void() {
        return Some(format!("VOID: {}", r.void.reasons.join("; ")));
    }
    if !r.outcome.is_pass() {
        let t = &r.verdict.totals;
        return Some(format!(
            "FAIL: {} gaps, {} order violations, {} dups",
            t.gaps, t.order_violations, t.duplicates
        ));
    }
    if c.shed() > 0 {
        return Some(format!("shed {} events at publish", c.shed()));
    }
    if c.served_in_window() < SERVED_MIN {
        return Some(format!(
            "served {} in the rated window",
            pct(Some(c.served_in_window()))
        ));
    }
    match c.e2e(99) {
        Some(p99) if p99 > P99_MAX_MS => Some(format!("e2e p99 {} ms > 5 s", ms(Some(p99)))),
        _ => None,
    }
}

/// The resource that bound a cell that did not hold.
pub fn bound_by(c: &CellRecord) -> String {
    if c.is_void() {
        return "the loader (VOID)".into();
    }
    if !c.result.outcome.is_pass() {
        return "correctness".into();
    }
    let host = c.result.host.cores as f64;
    match c.system_cores() {
        Some(cores) if host > 0.0 && cores >= CPU_BOUND_FRACTION * host => {
            format!("CPU ({cores:.2} of {host:.0} cores)")
        }
        Some(cores) => format!("not CPU ({cores:.2} of {host:.0} cores): lanes or I/O"),
        None => "unknown (no samples)".into(),
    }
}

/// How the ceiling searches judged the cells they ran, by cell directory: the
/// search's own rule (`--served`, `--p99-max`) may differ from this table's.
#[derive(Debug, Default, Clone)]
pub struct SearchJudgements {
    cells: BTreeMap<std::path::PathBuf, Judgement>,
    /// Each search's rule, as the table's note states it.
    rules: std::collections::BTreeSet<String>,
}

#[derive(Debug, Clone)]
struct Judgement {
    held: bool,
    why: Option<String>,
}

impl SearchJudgements {
    /// Add the judgements of the search in `d` (a directory holding a `ceiling.json`):
    /// its cells are `d` joined with each probe's directory, as [`search_cells`] and
    /// [`SearchJudgements::around`] spell them.
    fn add(&mut self, d: &std::path::Path) -> Result<(), crate::error::ReportError> {
        let s = load_search(d)?;
        self.rules.insert(match s.p99_max_ms {
            Some(p) => format!(
                "served ≥ {:.0} % in the rated window, p99 ≤ {}",
                s.served_min * 100.0,
                if p >= 1000.0 {
                    format!("{} s", p / 1000.0)
                } else {
                    format!("{p} ms")
                }
            ),
            None => format!("served ≥ {:.0} % in the rated window", s.served_min * 100.0),
        });
        for p in &s.probes {
            self.cells.insert(
                d.join(&p.dir),
                Judgement {
                    held: p.held,
                    why: p.why.clone(),
                },
            );
        }
        Ok(())
    }

    fn get(&self, c: &CellRecord) -> Option<&Judgement> {
        self.cells.get(&c.dir)
    }

    /// Why `c` did not hold (`None` when it held): its search's verdict when a search
    /// ran it, this table's rule otherwise.
    fn symptom(&self, c: &CellRecord) -> Option<String> {
        match self.get(c) {
            Some(j) if j.held => None,
            Some(j) => Some(
                j.why
                    .clone()
                    .unwrap_or_else(|| "did not hold by its search's rule".into()),
            ),
            None => symptom(c),
        }
    }

    /// The judgements of the searches that ran any of `cells`: a search's cells are
    /// the directories beside its `ceiling.json`. A `ceiling.json` that cannot be read
    /// leaves its cells to this table's rule (`crossbench table` has read every search
    /// it was given with [`searches`] first, which fails on one).
    pub fn around(cells: &[CellRecord]) -> Self {
        let searches: std::collections::BTreeSet<std::path::PathBuf> = cells
            .iter()
            .filter_map(|c| c.dir.parent())
            .filter(|d| is_search(d))
            .map(std::path::Path::to_path_buf)
            .collect();
        let mut j = Self::default();
        for d in searches {
            // All of a search or none of it: a half-read one is left to this table.
            let mut one = Self::default();
            if one.add(&d).is_ok() {
                j.cells.extend(one.cells);
                j.rules.extend(one.rules);
            }
        }
        j
    }
}

/// The per-sweep ceiling table: the cells of ceiling searches judged as their
/// searches judged them, the others by this table's rule.
pub fn build(cells: &[CellRecord]) -> Table {
    build_judged(cells, &SearchJudgements::around(cells))
}

/// The per-sweep ceiling table, the cells of ceiling searches judged as their
/// searches judged them (`judged`), the others by this table's rule.
fn build_judged(cells: &[CellRecord], judged: &SearchJudgements) -> Table {
    let mut t = Table::new("Ceiling", COLUMNS);
    let rule = format!(
        "PASS, served ≥ {:.0} %, nothing shed, e2e p99 ≤ 5 s",
        SERVED_MIN * 100.0
    );
    let n_judged = cells.iter().filter(|c| judged.get(c).is_some()).count();
    if n_judged == 0 {
        t.notes.push(format!(
            "held = {rule}. A rate held when every cell at it held. A sweep is the cells of one system/variant, tier, P and lanes."
        ));
    } else {
        t.notes.push(format!(
            "held: {n_judged} cell(s) of ceiling searches as their search judged them (PASS, not VOID, {}); {} other cell(s) by {rule}. A rate held when every cell at it held. A sweep is the cells of one system/variant, tier, P and lanes.",
            judged.rules.iter().cloned().collect::<Vec<_>>().join("; or "),
            cells.len() - n_judged,
        ));
    }
    let kept = comparability::pipeline_cells(&mut t, cells);
    let mut sweeps: BTreeMap<(String, String, u64, u64), Vec<&CellRecord>> = BTreeMap::new();
    for c in kept {
        let key = (
            c.system_label(),
            comparability::tier(c),
            c.result.workload.properties,
            c.ordered_lanes(),
        );
        sweeps.entry(key).or_default().push(c);
    }
    let mut by_tier: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for ((sys, tier, p, lanes), mut group) in sweeps {
        let rate = |c: &CellRecord| c.result.workload.rate_events_per_sec;
        group.sort_by_key(|c| rate(c));
        // Each cell with why it did not hold (`None`: it held), judged once.
        let judged: Vec<(&CellRecord, Option<String>)> =
            group.iter().map(|c| (*c, judged.symptom(c))).collect();
        let rates = rates_tried(judged.iter().map(|(c, why)| (rate(c), why.is_none())), true);
        // The highest rate at which every cell held (repeats at one rate must agree,
        // as in the search), and the first cell above it that did not.
        let best = judged
            .iter()
            .rev()
            .find(|(c, _)| {
                judged
                    .iter()
                    .filter(|(o, _)| rate(o) == rate(c))
                    .all(|(_, why)| why.is_none())
            })
            .map(|(c, _)| *c);
        let best_rate = best.map(rate);
        let next = judged
            .iter()
            .find(|(c, why)| why.is_some() && best_rate.is_none_or(|b| rate(c) > b));
        let row = vec![
            format!("{sys} P={p} lanes={lanes}"),
            tier.clone(),
            rates.join(" "),
            best_rate.map_or_else(|| "none held".into(), |r| count(Some(r))),
            ms(best.and_then(|c| c.e2e(99))),
            next.map_or_else(|| "not reached".into(), |(c, _)| count(Some(rate(c)))),
            next.map_or_else(|| "—".into(), |(c, _)| bound_by(c)),
            next.and_then(|(_, why)| why.clone())
                .unwrap_or_else(|| "none: raise the rate to find the ceiling".into()),
        ];
        by_tier.entry(tier).or_default().push(row);
    }
    if by_tier.len() > 1 {
        t.notes.push(format!(
            "NOT COMPARABLE ACROSS SECTIONS: sweeps at {} durability tiers ({}) are in separate sections.",
            by_tier.len(),
            by_tier.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let n_void = cells
        .iter()
        .filter(|c| c.is_void() && !c.is_stream())
        .count();
    if n_void > 0 {
        t.notes.push(format!(
            "VOID: {n_void} cell(s) count as not held with the loader as the bound (✗); a ceiling at a VOID step is the loader's, not the system's."
        ));
    }
    let split = by_tier.len() > 1;
    for (tier, rows) in by_tier {
        t.sections.push(Section {
            heading: split.then(|| format!("durability tier: {tier}")),
            rows,
        });
    }
    t
}

/// Whether `dir` holds a ceiling search (`ceiling.json`).
pub fn is_search(dir: &std::path::Path) -> bool {
    dir.join("ceiling.json").is_file()
}

/// The subset of `ceiling.json` (docs/campaigns.md) the report reads.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Search {
    pub schema_version: u32,
    pub scenario: std::path::PathBuf,
    #[serde(default)]
    pub sets: Vec<String>,
    pub system: String,
    pub unit: String,
    pub between: [u64; 2],
    pub repeats: u32,
    pub served_min: f64,
    pub p99_max_ms: Option<f64>,
    pub probes: Vec<Probe>,
    pub ceiling: Answer,
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Probe {
    pub rate: u64,
    pub dir: std::path::PathBuf,
    pub outcome: String,
    pub held: bool,
    pub why: Option<String>,
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Answer {
    pub held: Option<u64>,
    pub not_held: Option<u64>,
    pub bound: Option<String>,
    pub text: String,
}

/// Read a search's `ceiling.json`.
pub fn load_search(dir: &std::path::Path) -> Result<Search, crate::error::ReportError> {
    let p = dir.join("ceiling.json");
    let text = std::fs::read_to_string(&p).map_err(|e| crate::error::ReportError::io(&p, e))?;
    let s: Search =
        serde_json::from_str(&text).map_err(|e| crate::error::ReportError::BadRecord {
            path: p.clone(),
            message: e.to_string(),
        })?;
    if s.schema_version != 1 {
        return Err(crate::error::ReportError::BadRecord {
            path: p,
            message: format!("schema_version {} is not 1", s.schema_version),
        });
    }
    Ok(s)
}

/// The cell directories of a search, in the order they ran.
pub fn search_cells(
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>, crate::error::ReportError> {
    Ok(load_search(dir)?
        .probes
        .iter()
        .map(|p| dir.join(&p.dir))
        .filter(|d| d.join("result.json").is_file())
        .collect())
}

pub const SEARCH_COLUMNS: &[&str] = &[
    "search",
    "system",
    "ceiling",
    "held (every repeat)",
    "did not hold",
    "bound by",
    "cells",
    "rates tried",
];

/// The rates tried, each once, from (rate, held) per cell: `250×3` (three cells,
/// all held), `300✗1/3` (one of three not held). With `bare_singles` (the sweep
/// table, whose cells are mostly one per rate), a rate of one cell is `200` (held)
/// or `450✗` (not); otherwise (a search's probes) it is `200×1` or `450✗1/1`.
fn rates_tried(cells: impl IntoIterator<Item = (u64, bool)>, bare_singles: bool) -> Vec<String> {
    let mut by_rate: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
    for (rate, held) in cells {
        let e = by_rate.entry(rate).or_default();
        if held {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    by_rate
        .iter()
        .map(|(r, &(h, n))| match (h, n) {
            (1, 0) if bare_singles => format!("{r}"),
            (0, 1) if bare_singles => format!("{r}✗"),
            (h, 0) => format!("{r}×{h}"),
            (h, n) => format!("{r}✗{n}/{}", h + n),
        })
        .collect()
}

/// The ceiling searches' table: per search, the interval it found.
pub fn searches(dirs: &[std::path::PathBuf]) -> Result<Table, crate::error::ReportError> {
    let mut t = Table::new("Ceiling searches", SEARCH_COLUMNS);
    t.notes.push("a cell held when it PASSed, was not VOID, served its demand in the rated window (--served) and kept p99 under --p99-max when given; the ceiling lies between the highest rate that held in every repeat and the lowest that did not (docs/campaigns.md)".into());
    let mut rows = Vec::new();
    for d in dirs {
        let s = load_search(d)?;
        let tried = rates_tried(s.probes.iter().map(|p| (p.rate, p.held)), false);
        let interval = match (s.ceiling.held, s.ceiling.not_held) {
            (Some(a), Some(b)) => format!("[{}, {}) {}", count(Some(a)), count(Some(b)), s.unit),
            (None, _) => format!("< {} {}", count(Some(s.between[0])), s.unit),
            (Some(a), None) => format!("≥ {} {}", count(Some(a)), s.unit),
        };
        rows.push(vec![
            d.file_name().map_or_else(
                || d.display().to_string(),
                |n| n.to_string_lossy().to_string(),
            ),
            s.system.clone(),
            interval,
            count(s.ceiling.held),
            count(s.ceiling.not_held),
            s.ceiling.bound.clone().unwrap_or_else(|| "—".into()),
            s.probes.len().to_string(),
            tried.join(" "),
        ]);
    }
    t.sections.push(Section {
        heading: None,
        rows,
    });
    Ok(t)
}

/// Whether `dir` holds a ceiling campaign (`ceiling-campaign.json`: one search per arm).
pub fn is_campaign(dir: &std::path::Path) -> bool {
    dir.join("ceiling-campaign.json").is_file()
}

/// The search directories of a ceiling campaign that finished.
pub fn campaign_searches(
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>, crate::error::ReportError> {
    #[derive(serde::Deserialize)]
    struct Arm {
        dir: std::path::PathBuf,
        text: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Rec {
        arms: Vec<Arm>,
    }
    let p = dir.join("ceiling-campaign.json");
    let text = std::fs::read_to_string(&p).map_err(|e| crate::error::ReportError::io(&p, e))?;
    let r: Rec = serde_json::from_str(&text).map_err(|e| crate::error::ReportError::BadRecord {
        path: p,
        message: e.to_string(),
    })?;
    Ok(r.arms
        .into_iter()
        .filter(|a| a.text.is_some())
        .map(|a| dir.join(a.dir))
        .filter(|d| is_search(d))
        .collect())
}
