//! The CI regression gate (`crossbench gate`, docs/gate.md): a baseline and a
//! candidate arm of one scenario, run in ABBA pairs (each leg a fresh cell, its
//! topology reset), judged metric by metric by `report::gate` (the paired sign-flip
//! test of the pairs' log-ratios); a metric flagged in the first stage is judged
//! again by the same test on fresh pairs in the reverse order (BAAB), and fails only
//! if the regression reproduces. Before the first leg, the gate refuses a number of
//! pairs with which the test could never reach significance. `--calibrate` runs the
//! baseline against itself and keeps the host's noise per metric in a calibration
//! file the gate reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;
use report::gate::undecided;
use report::gate::{
    calibrate, judge, tau, Calibration, GateConfig, GateRecord, Leg, Metric, MetricResult,
    MetricVerdict, PairFigures, TestPlan, Verdict, MAX_VOID_SHARE, MIN_PAIRS, SCHEMA_VERSION,
};
use report::CellRecord;

use crate::cell::Outcome;
use crate::pacing::pacer::Timing;
use crate::record::invocation::utc;
use crate::scenario::{self, Loaded};
use crate::workload::runner::{
    prepare_out, BadInput, CellJob, Exit, Runner, RunnerSettings, Signals,
};

/// Which arm a leg ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Baseline,
    /// The candidate (in a calibration, the baseline again).
    Candidate,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Baseline => Side::Candidate,
            Side::Candidate => Side::Baseline,
        }
    }
}

/// How a leg ended: its cell's outcome, or the error that left it without one.
/// Written as gate.json has always spelled it: the outcome's name (`PASS`, `FAIL`,
/// …), or `ERROR: <the error>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LegOutcome {
    Cell(Outcome),
    Error(String),
}

impl std::fmt::Display for LegOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LegOutcome::Cell(o) => f.write_str(o.name()),
            LegOutcome::Error(e) => write!(f, "ERROR: {e}"),
        }
    }
}

impl serde::Serialize for LegOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One leg the gate ran: where, how it ended, and the record it left (none when it
/// ended in an error).
#[derive(Debug)]
struct LegRun {
    side: Side,
    /// 1: the first stage, 2: the confirmation.
    stage: u8,
    /// The pair, from 1.
    pair: usize,
    /// Relative to the gate's directory.
    dir: String,
    outcome: LegOutcome,
    record: Option<CellRecord>,
}

impl LegRun {
    /// The leg as gate.json lists it.
    fn entry(&self, arms: &[Arm; 2]) -> Leg {
        Leg {
            arm: arms[self.side as usize].name.into(),
            pair: self.pair,
            stage: self.stage,
            dir: self.dir.clone(),
            outcome: self.outcome.to_string(),
        }
    }

    /// Its record, when it PASSed.
    fn passed(&self) -> Option<&CellRecord> {
        self.record
            .as_ref()
            .filter(|r| r.result.outcome == Outcome::Pass)
    }
}

/// One `gate` request.
#[derive(Debug, Clone)]
pub struct GateRequest {
    pub scenario: Option<PathBuf>,
    /// Overrides for both arms.
    pub sets: Vec<String>,
    pub baseline_sets: Vec<String>,
    pub candidate_sets: Vec<String>,
    /// Compare two campaign records already made instead of running legs.
    pub baseline_dir: Option<PathBuf>,
    pub candidate_dir: Option<PathBuf>,
    pub pairs: usize,
    /// The test: α of each stage, one- or two-sided.
    pub test: TestPlan,
    /// Run the baseline against itself and write the calibration file.
    pub calibrate: bool,
    pub calibration: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub metrics_txt: Option<PathBuf>,
    pub seed: u64,
    pub quiet: bool,
    pub timing: Timing,
    /// How long the host probe runs before the first leg (`record::host_stalls`);
    /// zero skips it, and so does virtual time.
    pub host_probe: std::time::Duration,
    pub argv: Vec<String>,
}

impl GateRequest {
    pub fn new(scenario: impl Into<PathBuf>) -> GateRequest {
        GateRequest {
            scenario: Some(scenario.into()),
            sets: Vec::new(),
            baseline_sets: Vec::new(),
            candidate_sets: Vec::new(),
            baseline_dir: None,
            candidate_dir: None,
            pairs: report::gate::DEFAULT_PAIRS,
            test: TestPlan::default(),
            calibrate: false,
            calibration: None,
            out: None,
            markdown: None,
            junit: None,
            metrics_txt: None,
            seed: 0x6A7E,
            quiet: true,
            timing: Timing::Real,
            host_probe: std::time::Duration::ZERO,
            argv: std::env::args().collect(),
        }
    }
}

/// The calibration file of this host when none is named:
/// `~/.cache/crossbench/gate-calibration-<host>.json`.
pub fn default_calibration() -> PathBuf {
    let host = crate::record::host::Host::probe().hostname;
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(".cache/crossbench")
        .join(format!("gate-calibration-{host}.json"))
}

fn keys(sets: &[String]) -> Vec<String> {
    let mut k: Vec<String> = sets
        .iter()
        .map(|s| s.split_once('=').map_or(s.clone(), |(k, _)| k.to_string()))
        .collect();
    k.sort();
    k
}

/// A leg's figures: every metric it has.
fn figures(c: &CellRecord) -> BTreeMap<Metric, f64> {
    Metric::ALL
        .iter()
        .filter_map(|m| m.read(c).filter(|v| v.is_finite()).map(|v| (*m, v)))
        .collect()
}

/// One arm of the gate: its name in the record and its scenario.
#[derive(Debug)]
struct Arm {
    name: &'static str,
    loaded: Loaded,
}

/// `--alpha` must be a level in (0, 0.5].
fn check_alpha(t: &TestPlan) -> Result<(), BadInput> {
    if t.alpha.is_finite() && t.alpha > 0.0 && t.alpha <= 0.5 {
        Ok(())
    } else {
        Err(BadInput(format!(
            "--alpha {}: the significance level of each stage must be in (0, 0.5], e.g. 0.05 (the default)",
            t.alpha
        )))
    }
}

/// The power check, before the first leg: `pairs` can reach significance at the
/// plan's α, and are at least [`MIN_PAIRS`].
pub fn check_power(pairs: usize, t: &TestPlan) -> Result<(), BadInput> {
    check_alpha(t)?;
    if pairs < MIN_PAIRS {
        return Err(BadInput(format!(
            "--pairs {pairs}: at least {MIN_PAIRS} pairs (one leg's summary is one observation); default {}",
            report::gate::DEFAULT_PAIRS
        )));
    }
    match t.underpowered(pairs) {
        Some(why) => Err(BadInput(format!("--pairs {pairs}: {why}"))),
        None => Ok(()),
    }
}

/// What a gate that runs legs runs and judges with, checked before the first leg.
struct GatePlan {
    scenario: PathBuf,
    baseline_sets: Vec<String>,
    candidate_sets: Vec<String>,
    /// The baseline's and the candidate's (indexed by [`Side`]).
    arms: [Arm; 2],
    cfg: GateConfig,
    metrics: Vec<Metric>,
    cal_path: PathBuf,
    /// The host's calibration, when there is one (never in a calibration).
    cal: Option<Calibration>,
    /// The gate's directory.
    dir: PathBuf,
}

impl GatePlan {
    /// Check the request (the power, the arms' overrides and workloads, the
    /// metrics) and load both arms.
    fn new(req: &GateRequest) -> anyhow::Result<GatePlan> {
        let scn = req.scenario.clone().ok_or_else(|| {
            BadInput("give a scenario (or --baseline DIR --candidate DIR)".into())
        })?;
        if !req.calibrate {
            check_power(req.pairs, &req.test)?;
        } else if req.pairs < MIN_PAIRS {
            return Err(BadInput(format!(
                "--pairs {}: at least {MIN_PAIRS} pairs for a calibration; default {}",
                req.pairs,
                report::gate::DEFAULT_PAIRS
            ))
            .into());
        }
        let (bsets, csets) = if req.calibrate {
            (req.baseline_sets.clone(), req.baseline_sets.clone())
        } else {
            if keys(&req.baseline_sets) != keys(&req.candidate_sets) {
                return Err(BadInput(format!(
                    "mismatched arms: --baseline-set sets {:?} but --candidate-set sets {:?}; both arms must set the same fields (to different values)",
                    keys(&req.baseline_sets),
                    keys(&req.candidate_sets)
                ))
                .into());
            }
            (req.baseline_sets.clone(), req.candidate_sets.clone())
        };
        let load = |arm: &str, sets: &[String]| -> anyhow::Result<Loaded> {
            let mut all = req.sets.clone();
            all.extend(sets.iter().cloned());
            Ok(scenario::load(&scn, &all).map_err(|e| BadInput(format!("the {arm} arm: {e}")))?)
        };
        let base = load("baseline", &bsets)?;
        let cand = load("candidate", &csets)?;
        if base.scenario.workload != cand.scenario.workload {
            return Err(BadInput(
                "mismatched arms: the baseline and the candidate run different workloads".into(),
            )
            .into());
        }
        let cfg: GateConfig = base.scenario.gate.clone().unwrap_or_default();
        let metrics = cfg.resolve().map_err(BadInput)?;
        for l in [&base, &cand] {
            let s = &l.scenario;
            crate::cell::setup::build(s, &crate::workload::build_context(s))?;
        }
        let cal_path = req.calibration.clone().unwrap_or_else(default_calibration);
        let cal: Option<Calibration> = if req.calibrate {
            None
        } else {
            std::fs::read_to_string(&cal_path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
        };
        let dir = req.out.clone().unwrap_or_else(|| {
            crate::cell::default_out(&format!(
                "{}-{}",
                base.scenario.name,
                if req.calibrate { "calibrate" } else { "gate" }
            ))
        });
        let candidate = if req.calibrate {
            "baseline-again"
        } else {
            "candidate"
        };
        Ok(GatePlan {
            scenario: scn,
            baseline_sets: bsets,
            candidate_sets: csets,
            arms: [
                Arm {
                    name: "baseline",
                    loaded: base,
                },
                Arm {
                    name: candidate,
                    loaded: cand,
                },
            ],
            cfg,
            metrics,
            cal_path,
            cal,
            dir,
        })
    }
}

/// Run the gate.
pub fn execute(req: &GateRequest) -> anyhow::Result<(Exit, PathBuf, GateRecord)> {
    if let (Some(b), Some(c)) = (&req.baseline_dir, &req.candidate_dir) {
        return compare_records(req, b, c);
    }
    let plan = GatePlan::new(req)?;
    prepare_out(&plan.dir)?;
    let mut runner = Runner::start(RunnerSettings::exclusive(req.timing, req.quiet, &req.argv))?;
    let host = crate::campaign::probe_host(req.host_probe, req.timing);
    runner.listen(Signals::CutShort);
    let mut legs: Vec<LegRun> = Vec::new();
    run_stage(&runner, req, &plan, 1, false, &mut legs)?;
    let mut reasons = Vec::new();
    if !req.calibrate && plan.baseline_sets == plan.candidate_sets {
        reasons.push("A/A: the candidate is the baseline (the same overrides): a sanity check of the gate on this host".into());
    }
    let first = FirstStage::of(&legs);
    if req.calibrate {
        reasons.push(write_calibration(req, &plan, &legs)?);
    }
    let verdict = first.verdict(req.calibrate, &mut reasons);
    let results = judge_metrics(&runner, req, &plan, verdict, &mut legs)?;
    let verdict = conclude(req.calibrate, verdict, &results, &mut reasons);
    let record = GateRecord {
        schema_version: SCHEMA_VERSION,
        kind: if req.calibrate {
            "gate-calibration"
        } else {
            "gate"
        }
        .into(),
        scenario: plan.scenario.display().to_string(),
        baseline_sets: plan.baseline_sets.clone(),
        candidate_sets: plan.candidate_sets.clone(),
        pairs: req.pairs,
        test: req.test,
        test_text: req.test.describe(),
        seed: req.seed,
        order: legs.iter().map(|l| l.dir.clone()).collect(),
        legs: legs.iter().map(|l| l.entry(&plan.arms)).collect(),
        void_legs: first.void_legs,
        fail_legs: first.fail_legs,
        calibration: plan
            .cal
            .as_ref()
            .map(|_| plan.cal_path.display().to_string()),
        metrics: results,
        verdict,
        reasons,
        host_warning: host.as_ref().and_then(|p| p.warning()),
        host_probe: host.and_then(|p| serde_json::to_value(p).ok()),
    };
    runner.shut_down();
    let exit = write_outputs(req, &plan.dir, &record)?;
    Ok((exit, plan.dir, record))
}

/// Run one stage: `req.pairs` pairs, ABBA (the confirmation stage, `reversed`, BAAB),
/// each leg a fresh cell in `stage<N>/p<pair>-<arm>`.
fn run_stage(
    runner: &Runner,
    req: &GateRequest,
    plan: &GatePlan,
    stage: u8,
    reversed: bool,
    legs: &mut Vec<LegRun>,
) -> anyhow::Result<()> {
    for pair in 1..=req.pairs {
        // ABBA: pairs alternate which arm goes first; the confirmation stage starts
        // with the other arm (BAAB).
        let first = if (pair % 2 == 0) != reversed {
            Side::Candidate
        } else {
            Side::Baseline
        };
        for side in [first, first.other()] {
            anyhow::ensure!(!runner.stopped(), "interrupted");
            legs.push(run_leg(runner, req, plan, stage, pair, side)?);
        }
    }
    Ok(())
}

/// Run one leg: a fresh cell of `side`'s arm, named `<scenario>-<arm>`.
fn run_leg(
    runner: &Runner,
    req: &GateRequest,
    plan: &GatePlan,
    stage: u8,
    pair: usize,
    side: Side,
) -> anyhow::Result<LegRun> {
    let a = &plan.arms[side as usize];
    let rel = format!("stage{stage}/p{pair:02}-{}", a.name);
    let cell_dir = plan.dir.join(&rel);
    std::fs::create_dir_all(&cell_dir)?;
    let mut l = a.loaded.clone();
    l.scenario.name = format!("{}-{}", l.scenario.name, a.name);
    let started = std::time::Instant::now();
    if let Some(live) = crate::console::live::hub() {
        live.set_context("gate", a.name);
    }
    let r = runner.run(&CellJob::new(&l, plan.scenario.clone(), cell_dir.clone()));
    let (outcome, record) = match r {
        Ok(rep) => (
            LegOutcome::Cell(rep.outcome),
            Some(CellRecord::from_result(&cell_dir, rep.record)),
        ),
        Err(e) => (LegOutcome::Error(format!("{e:#}")), None),
    };
    if !req.quiet {
        eprintln!(
            "stage {stage} pair {pair} {}: {outcome} ({:.1} s)",
            a.name,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(LegRun {
        side,
        stage,
        pair,
        dir: rel,
        outcome,
        record,
    })
}

/// What the first stage's legs say before any metric is judged.
#[derive(Debug)]
struct FirstStage {
    legs: usize,
    /// Legs VOID or ended in an error.
    void_legs: usize,
    /// The candidate's legs that FAILed (their directories).
    fail_legs: Vec<String>,
    /// Why the legs cannot be compared (machines, budgets), if they cannot.
    footing: Option<String>,
}

impl FirstStage {
    fn of(legs: &[LegRun]) -> FirstStage {
        let records: Vec<&CellRecord> = legs.iter().filter_map(|l| l.record.as_ref()).collect();
        let errors = legs
            .iter()
            .filter(|l| matches!(l.outcome, LegOutcome::Error(_)))
            .count();
        FirstStage {
            legs: legs.len(),
            void_legs: records.iter().filter(|r| r.is_void()).count() + errors,
            fail_legs: legs
                .iter()
                .filter(|l| {
                    l.side != Side::Baseline && l.outcome == LegOutcome::Cell(Outcome::Fail)
                })
                .map(|l| l.dir.clone())
                .collect(),
            // Legs on one machine under one budget, or no comparison (the candidate's
            // overrides may change the budget: then the ratio is the budget's, not the
            // change's).
            footing: report::comparability::not_comparable_legs(&records),
        }
    }

    /// The verdict before any metric: the candidate's FAILs, legs not comparable,
    /// too many VOID legs.
    fn verdict(&self, calibrate: bool, reasons: &mut Vec<String>) -> Verdict {
        let total = self.legs.max(1);
        let mut verdict = Verdict::Pass;
        if !self.fail_legs.is_empty() && !calibrate {
            verdict = Verdict::CandidateFail;
            reasons.push(format!(
                "the candidate FAILED correctness in {} leg(s): a regression whatever the noise",
                self.fail_legs.len()
            ));
        }
        if let Some(mark) = &self.footing {
            if verdict == Verdict::Pass {
                verdict = Verdict::Inconclusive;
            }
            reasons.push(mark.clone());
        }
        if self.void_legs as f64 / total as f64 > MAX_VOID_SHARE {
            if verdict == Verdict::Pass {
                verdict = Verdict::Inconclusive;
            }
            reasons.push(format!(
                "{} of {total} legs were VOID or errored (more than {:.0} %): the loader, not the system, limited them",
                self.void_legs,
                MAX_VOID_SHARE * 100.0
            ));
        }
        verdict
    }
}

/// Each pair's (baseline, candidate) figure of metric `m` in `stage`, from its PASS
/// legs.
fn pair_figures(legs: &[LegRun], pairs: usize, stage: u8, m: Metric) -> Vec<PairFigures> {
    let get = |side: Side, pair: usize| {
        legs.iter()
            .find(|l| l.side == side && l.stage == stage && l.pair == pair && l.record.is_some())
            .and_then(LegRun::passed)
            .and_then(|r| m.read(r))
            .filter(|v| v.is_finite())
    };
    (1..=pairs)
        .map(|p| (get(Side::Baseline, p), get(Side::Candidate, p)))
        .collect()
}

/// `--calibrate`: the noise of each metric over the A/A pairs, written to the
/// calibration file and to the gate's directory; the reason that says so.
fn write_calibration(
    req: &GateRequest,
    plan: &GatePlan,
    legs: &[LegRun],
) -> anyhow::Result<String> {
    let mut pairs = Vec::new();
    for p in 1..=req.pairs {
        let get = |side: Side| {
            legs.iter()
                .filter(|l| l.side == side && l.pair == p)
                .find_map(LegRun::passed)
                .map(figures)
        };
        if let (Some(a), Some(b)) = (get(Side::Baseline), get(Side::Candidate)) {
            pairs.push((a, b));
        }
    }
    let noise = calibrate(&pairs);
    let c = Calibration {
        schema_version: 1,
        host: crate::record::host::Host::probe().hostname,
        scenario: plan.scenario.display().to_string(),
        pairs: pairs.len(),
        created_utc: utc(SystemTime::now()),
        noise,
    };
    let cal_path = &plan.cal_path;
    if let Some(parent) = cal_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut text = serde_json::to_string_pretty(&c)?;
    text.push('\n');
    std::fs::write(cal_path, &text).with_context(|| format!("writing {}", cal_path.display()))?;
    std::fs::write(plan.dir.join("calibration.json"), &text)?;
    Ok(format!(
        "A/A calibration over {} pairs written to {}",
        c.pairs,
        cal_path.display()
    ))
}

/// Judge every metric on the first stage's pairs; a metric flagged as a regression
/// (unless the candidate FAILed, or this is a calibration) is judged again on a
/// confirmation stage of fresh pairs, run here.
fn judge_metrics(
    runner: &Runner,
    req: &GateRequest,
    plan: &GatePlan,
    verdict: Verdict,
    legs: &mut Vec<LegRun>,
) -> anyhow::Result<Vec<MetricResult>> {
    let tau_of = |m: Metric| tau(m, &plan.cfg, plan.cal.as_ref());
    let mut results: Vec<MetricResult> = plan
        .metrics
        .iter()
        .map(|&m| {
            let (t, src) = tau_of(m);
            judge(
                m,
                &pair_figures(legs, req.pairs, 1, m),
                t,
                src,
                req.test,
                req.seed,
            )
        })
        .collect();
    let flagged: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.verdict == MetricVerdict::Regression)
        .map(|(i, _)| i)
        .collect();
    if !flagged.is_empty() && !req.calibrate && verdict != Verdict::CandidateFail {
        run_stage(runner, req, plan, 2, true, legs)?;
        for i in flagged {
            let m = plan.metrics[i];
            let (t, src) = tau_of(m);
            let figures = pair_figures(legs, req.pairs, 2, m);
            let again = judge(m, &figures, t, src, req.test, req.seed ^ 2);
            results[i].confirmed = Some(again.verdict == MetricVerdict::Regression);
            results[i].confirmation = Some(again.stage());
        }
    }
    Ok(results)
}

/// The verdict after the metrics: a regression only when the fresh pairs confirmed
/// it; otherwise whatever the undecided metrics say.
fn conclude(
    calibrate: bool,
    mut verdict: Verdict,
    results: &[MetricResult],
    reasons: &mut Vec<String>,
) -> Verdict {
    if verdict == Verdict::Pass {
        let confirmed: Vec<&MetricResult> = results
            .iter()
            .filter(|r| r.verdict == MetricVerdict::Regression && r.confirmed == Some(true))
            .collect();
        if !confirmed.is_empty() {
            verdict = Verdict::Regression;
            for r in confirmed {
                reasons.push(format!(
                    "regression (confirmed by fresh pairs): {}",
                    report::gate::describe(r)
                ));
            }
        } else if !calibrate {
            verdict = undecided(results, reasons);
        }
    }
    if verdict == Verdict::Regression {
        undecided(results, reasons);
    }
    verdict
}

/// `--baseline DIR --candidate DIR`: two campaign records (or directories of cells)
/// already made; their PASS legs are the observations. No confirmation stage: the
/// arms cannot be run again.
fn compare_records(
    req: &GateRequest,
    b: &Path,
    c: &Path,
) -> anyhow::Result<(Exit, PathBuf, GateRecord)> {
    let load =
        |d: &Path| -> anyhow::Result<Vec<CellRecord>> {
            let arg = d.display().to_string();
            Ok(report::cell::load_all(&[arg])
                .map_err(|e| BadInput(format!("{}: {e}", d.display())))?)
        };
    check_alpha(&req.test)?;
    let (mut bc, mut cc) = (load(b)?, load(c)?);
    // Pairs by order: the i-th baseline record with the i-th candidate record (in the
    // order of their directories' names). Under no change any pairing made without
    // looking at the figures leaves each pair's legs exchangeable, so the test holds;
    // records made apart were not interleaved, so drift between them is in it.
    bc.sort_by(|x, y| x.dir.cmp(&y.dir));
    cc.sort_by(|x, y| x.dir.cmp(&y.dir));
    let cal_path = req.calibration.clone().unwrap_or_else(default_calibration);
    let cal: Option<Calibration> = std::fs::read_to_string(&cal_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    // A scenario given beside the records picks the metrics and τ (its `gate:`).
    let cfg: GateConfig = match &req.scenario {
        Some(scn) => scenario::load(scn, &req.sets)
            .map_err(|e| BadInput(format!("{}: {e}", scn.display())))?
            .scenario
            .gate
            .unwrap_or_default(),
        None => GateConfig::default(),
    };
    let metrics = cfg.resolve().map_err(BadInput)?;
    let figure = |r: Option<&CellRecord>, m: Metric| {
        r.filter(|r| r.result.outcome == Outcome::Pass)
            .and_then(|r| m.read(r))
            .filter(|v| v.is_finite())
    };
    let pairs_of = |m: Metric| -> Vec<PairFigures> {
        (0..bc.len().max(cc.len()))
            .map(|i| (figure(bc.get(i), m), figure(cc.get(i), m)))
            .collect()
    };
    let mut reasons = vec![format!(
        "compared two records ({} and {} legs), paired by order; without pairs run here there is no confirmation stage",
        bc.len(),
        cc.len()
    )];
    let fail_legs: Vec<String> = cc
        .iter()
        .filter(|r| r.result.outcome == Outcome::Fail)
        .map(|r| r.dir.display().to_string())
        .collect();
    let results: Vec<MetricResult> = metrics
        .iter()
        .map(|&m| {
            let (t, src) = tau(m, &cfg, cal.as_ref());
            judge(m, &pairs_of(m), t, src, req.test, req.seed)
        })
        .collect();
    let n = bc.len().min(cc.len());
    let verdict = records_verdict(req, &bc, &cc, &results, !fail_legs.is_empty(), &mut reasons);
    let dir = req
        .out
        .clone()
        .unwrap_or_else(|| crate::cell::default_out("gate-records"));
    prepare_out(&dir)?;
    let record = GateRecord {
        schema_version: SCHEMA_VERSION,
        kind: "gate".into(),
        scenario: format!("{} vs {}", b.display(), c.display()),
        baseline_sets: vec![b.display().to_string()],
        candidate_sets: vec![c.display().to_string()],
        pairs: n,
        test: req.test,
        test_text: req.test.describe(),
        seed: req.seed,
        order: Vec::new(),
        legs: Vec::new(),
        void_legs: bc.iter().chain(&cc).filter(|r| r.is_void()).count(),
        fail_legs,
        calibration: cal.as_ref().map(|_| cal_path.display().to_string()),
        metrics: results,
        verdict,
        reasons,
        host_probe: None,
        host_warning: None,
    };
    let exit = write_outputs(req, &dir, &record)?;
    Ok((exit, dir, record))
}

/// The verdict on two records compared: the candidate's FAILs, then the metrics (a
/// regression cannot be confirmed), then legs not comparable or too few pairs.
fn records_verdict(
    req: &GateRequest,
    bc: &[CellRecord],
    cc: &[CellRecord],
    results: &[MetricResult],
    candidate_failed: bool,
    reasons: &mut Vec<String>,
) -> Verdict {
    let n = bc.len().min(cc.len());
    let mut verdict = if candidate_failed {
        reasons.push("the candidate FAILED correctness".into());
        Verdict::CandidateFail
    } else if results
        .iter()
        .any(|r| r.verdict == MetricVerdict::Regression)
    {
        for r in results
            .iter()
            .filter(|r| r.verdict == MetricVerdict::Regression)
        {
            reasons.push(format!(
                "regression (not confirmed: records cannot be run again): {}",
                report::gate::describe(r)
            ));
        }
        undecided(results, reasons);
        Verdict::Regression
    } else {
        undecided(results, reasons)
    };
    let legs_all: Vec<&CellRecord> = bc.iter().chain(cc.iter()).collect();
    if let Some(mark) = report::comparability::not_comparable_legs(&legs_all) {
        reasons.push(mark);
        if verdict == Verdict::Pass || verdict == Verdict::Regression {
            verdict = Verdict::Inconclusive;
        }
    }
    if let Some(why) = req.test.underpowered(n) {
        reasons.push(format!("{n} pairs: {why}"));
        if verdict == Verdict::Pass {
            verdict = Verdict::Inconclusive;
        }
    }
    verdict
}

/// gate.json, JUnit XML, the Markdown summary (to `$GITHUB_STEP_SUMMARY` when set),
/// GitLab's metrics.txt; the console summary; the exit.
fn write_outputs(req: &GateRequest, dir: &Path, r: &GateRecord) -> anyhow::Result<Exit> {
    let mut json = serde_json::to_string_pretty(r)?;
    json.push('\n');
    std::fs::write(dir.join("gate.json"), crate::record::redact::redact(&json))?;
    let junit = r.junit();
    std::fs::write(dir.join("junit.xml"), &junit)?;
    if let Some(p) = &req.junit {
        std::fs::write(p, &junit).with_context(|| format!("writing {}", p.display()))?;
    }
    let md = r.markdown();
    std::fs::write(dir.join("summary.md"), &md)?;
    // The picture beside it (gate.png, gate.svg), for a CI job to attach.
    r.picture(&dir.join("gate")).context("drawing gate.png")?;
    if let Some(p) = &req.markdown {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    } else if let Some(p) = std::env::var_os("GITHUB_STEP_SUMMARY") {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)?;
        f.write_all(md.as_bytes())?;
    }
    let txt = r.metrics_txt();
    std::fs::write(dir.join("metrics.txt"), &txt)?;
    if let Some(p) = &req.metrics_txt {
        std::fs::write(p, &txt).with_context(|| format!("writing {}", p.display()))?;
    }
    print!("{md}");
    println!("record: {}", dir.join("gate.json").display());
    Ok(match r.verdict {
        Verdict::Pass => Exit::Pass,
        Verdict::CandidateFail => Exit::Fail,
        Verdict::Regression => Exit::Regression,
        Verdict::Inconclusive => Exit::Inconclusive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leg_outcome_is_written_as_gate_json_always_spelled_it() {
        for o in Outcome::ALL {
            let leg = LegOutcome::Cell(o);
            assert_eq!(leg.to_string(), o.name());
            assert_eq!(
                serde_json::to_string(&leg).unwrap(),
                format!("\"{}\"", o.name())
            );
        }
        let e = LegOutcome::Error("setup: refused".into());
        assert_eq!(e.to_string(), "ERROR: setup: refused");
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            "\"ERROR: setup: refused\""
        );
    }
}
