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
use std::time::{Duration, SystemTime};

use anyhow::Context;
use report::gate::undecided;
use report::gate::{
    calibrate, judge, tau, Calibration, GateConfig, GateRecord, Leg, Metric, MetricResult,
    MetricVerdict, PairFigures, TestPlan, Verdict, MAX_VOID_SHARE, MIN_PAIRS, SCHEMA_VERSION,
};
use report::CellRecord;
use tokio_util::sync::CancellationToken;

use crate::cell::{Outcome, RunOptions};
use crate::cli::exit::Exit;
use crate::cli::BadInput;
use crate::pacing::pacer::Timing;
use crate::record::invocation::utc;
use crate::scenario::{self, Loaded};

/// One leg the gate ran and the record it left.
#[derive(Debug)]
struct LegRecord {
    /// 0: the baseline, 1: the candidate.
    arm: usize,
    /// 1: the first stage, 2: the confirmation.
    stage: u8,
    /// The pair, from 1.
    pair: usize,
    record: CellRecord,
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

/// Run the gate.
pub fn execute(req: &GateRequest) -> anyhow::Result<(Exit, PathBuf, GateRecord)> {
    if let (Some(b), Some(c)) = (&req.baseline_dir, &req.candidate_dir) {
        return compare_records(req, b, c);
    }
    let scn = req
        .scenario
        .clone()
        .ok_or_else(|| BadInput("give a scenario (or --baseline DIR --candidate DIR)".into()))?;
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
    crate::cli::run::prepare_out(&dir)?;
    let _lock = crate::cli::lock::acquire(req.quiet)?;
    let rt = match req.timing {
        Timing::Real => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            .enable_all()
            .build(),
        Timing::Virtual => crate::cli::run::virtual_runtime(),
    }
    .context("starting the runtime")?;
    let host = crate::campaign::probe_host(req.host_probe, req.timing);
    let interrupt = CancellationToken::new();
    {
        let _in_runtime = rt.enter();
        crate::cli::signals::install(interrupt.clone());
    }
    let arms = [
        Arm {
            name: "baseline",
            loaded: base.clone(),
        },
        Arm {
            name: if req.calibrate {
                "baseline-again"
            } else {
                "candidate"
            },
            loaded: cand.clone(),
        },
    ];
    let mut legs: Vec<Leg> = Vec::new();
    let mut records: Vec<LegRecord> = Vec::new();
    let run_stage = |stage: u8,
                     reversed: bool,
                     legs: &mut Vec<Leg>,
                     records: &mut Vec<LegRecord>|
     -> anyhow::Result<()> {
        for pair in 1..=req.pairs {
            // ABBA: pairs alternate which arm goes first; the confirmation stage
            // starts with the other arm (BAAB).
            let first = usize::from((pair % 2 == 0) != reversed);
            for arm in [first, 1 - first] {
                anyhow::ensure!(!interrupt.is_cancelled(), "interrupted");
                let a = &arms[arm];
                let rel = format!("stage{stage}/p{pair:02}-{}", a.name);
                let cell_dir = dir.join(&rel);
                std::fs::create_dir_all(&cell_dir)?;
                let mut l = a.loaded.clone();
                l.scenario.name = format!("{}-{}", l.scenario.name, a.name);
                let opts = RunOptions {
                    argv: req.argv.clone(),
                    scenario_path: scn.clone(),
                    out: cell_dir.clone(),
                    quiet: true,
                    sampler_url: None,
                    timing: req.timing,
                    interrupt_drain: crate::cell::INTERRUPT_DRAIN,
                    fleet: None,
                };
                let started = std::time::Instant::now();
                let r = rt.block_on(crate::workload::run_cell(&l, &opts, &[], &interrupt));
                let outcome = match &r {
                    Ok(rep) => rep.outcome.name().to_string(),
                    Err(e) => format!("ERROR: {e:#}"),
                };
                if !req.quiet {
                    eprintln!(
                        "stage {stage} pair {pair} {}: {outcome} ({:.1} s)",
                        a.name,
                        started.elapsed().as_secs_f64()
                    );
                }
                legs.push(Leg {
                    arm: a.name.into(),
                    pair,
                    stage,
                    dir: rel,
                    outcome: outcome.clone(),
                });
                if r.is_ok() {
                    records.push(LegRecord {
                        arm,
                        stage,
                        pair,
                        record: CellRecord::load(&cell_dir)?,
                    });
                }
            }
        }
        Ok(())
    };
    run_stage(1, false, &mut legs, &mut records)?;

    let mut reasons = Vec::new();
    if !req.calibrate && bsets == csets {
        reasons.push("A/A: the candidate is the baseline (the same overrides): a sanity check of the gate on this host".into());
    }
    let void_legs = records.iter().filter(|r| r.record.is_void()).count()
        + legs
            .iter()
            .filter(|l| l.outcome.starts_with("ERROR"))
            .count();
    let fail_legs: Vec<String> = legs
        .iter()
        .filter(|l| l.arm != "baseline" && l.outcome == "FAIL")
        .map(|l| l.dir.clone())
        .collect();
    // Each pair's (baseline, candidate) figure of a metric, from its PASS legs.
    let values = |records: &[LegRecord], stage: u8, m: Metric| -> Vec<PairFigures> {
        let get = |arm: usize, pair: usize| {
            records
                .iter()
                .find(|r| r.arm == arm && r.stage == stage && r.pair == pair)
                .filter(|r| r.record.result.outcome == Outcome::Pass)
                .and_then(|r| m.read(&r.record))
                .filter(|v| v.is_finite())
        };
        (1..=req.pairs).map(|p| (get(0, p), get(1, p))).collect()
    };

    if req.calibrate {
        let mut pairs = Vec::new();
        for p in 1..=req.pairs {
            let get = |arm: usize| {
                records
                    .iter()
                    .find(|r| {
                        r.arm == arm && r.pair == p && r.record.result.outcome == Outcome::Pass
                    })
                    .map(|r| figures(&r.record))
            };
            if let (Some(a), Some(b)) = (get(0), get(1)) {
                pairs.push((a, b));
            }
        }
        let noise = calibrate(&pairs);
        let c = Calibration {
            schema_version: 1,
            host: crate::record::host::Host::probe().hostname,
            scenario: scn.display().to_string(),
            pairs: pairs.len(),
            created_utc: utc(SystemTime::now()),
            noise,
        };
        if let Some(parent) = cal_path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut text = serde_json::to_string_pretty(&c)?;
        text.push('\n');
        std::fs::write(&cal_path, &text)
            .with_context(|| format!("writing {}", cal_path.display()))?;
        std::fs::write(dir.join("calibration.json"), &text)?;
        reasons.push(format!(
            "A/A calibration over {} pairs written to {}",
            c.pairs,
            cal_path.display()
        ));
    }

    let total = legs.len().max(1);
    let mut verdict = Verdict::Pass;
    // Legs on one machine under one budget, or no comparison (the candidate's
    // overrides may change the budget: then the ratio is the budget's, not the change's).
    let leg_cells: Vec<&CellRecord> = records.iter().map(|r| &r.record).collect();
    let footing = report::comparability::not_comparable_legs(&leg_cells);
    if !fail_legs.is_empty() && !req.calibrate {
        verdict = Verdict::CandidateFail;
        reasons.push(format!(
            "the candidate FAILED correctness in {} leg(s): a regression whatever the noise",
            fail_legs.len()
        ));
    }
    if let Some(mark) = footing {
        if verdict == Verdict::Pass {
            verdict = Verdict::Inconclusive;
        }
        reasons.push(mark);
    }
    if void_legs as f64 / total as f64 > MAX_VOID_SHARE {
        if verdict == Verdict::Pass {
            verdict = Verdict::Inconclusive;
        }
        reasons.push(format!(
            "{void_legs} of {total} legs were VOID or errored (more than {:.0} %): the loader, not the system, limited them",
            MAX_VOID_SHARE * 100.0
        ));
    }
    let mut results: Vec<MetricResult> = metrics
        .iter()
        .map(|&m| {
            let (t, src) = tau(m, &cfg, cal.as_ref());
            judge(m, &values(&records, 1, m), t, src, req.test, req.seed)
        })
        .collect();
    let flagged: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.verdict == MetricVerdict::Regression)
        .map(|(i, _)| i)
        .collect();
    if !flagged.is_empty() && !req.calibrate && verdict != Verdict::CandidateFail {
        run_stage(2, true, &mut legs, &mut records)?;
        for i in &flagged {
            let m = metrics[*i];
            let (t, src) = tau(m, &cfg, cal.as_ref());
            let again = judge(m, &values(&records, 2, m), t, src, req.test, req.seed ^ 2);
            results[*i].confirmed = Some(again.verdict == MetricVerdict::Regression);
            results[*i].confirmation = Some(again.stage());
        }
    }
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
        } else if !req.calibrate {
            verdict = undecided(&results, &mut reasons);
        }
    }
    if verdict == Verdict::Regression {
        undecided(&results, &mut reasons);
    }
    let record = GateRecord {
        schema_version: SCHEMA_VERSION,
        kind: if req.calibrate {
            "gate-calibration"
        } else {
            "gate"
        },
        scenario: scn.display().to_string(),
        baseline_sets: bsets,
        candidate_sets: csets,
        pairs: req.pairs,
        test: req.test,
        test_text: req.test.describe(),
        seed: req.seed,
        order: legs.iter().map(|l| l.dir.clone()).collect(),
        legs,
        void_legs,
        fail_legs,
        calibration: cal.as_ref().map(|_| cal_path.display().to_string()),
        metrics: results,
        verdict,
        reasons,
        host_warning: host.as_ref().and_then(|p| p.warning()),
        host_probe: host.and_then(|p| serde_json::to_value(p).ok()),
    };
    rt.shutdown_timeout(Duration::from_secs(2));
    let exit = write_outputs(req, &dir, &record)?;
    Ok((exit, dir, record))
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
    let mut verdict = if !fail_legs.is_empty() {
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
        undecided(&results, &mut reasons);
        Verdict::Regression
    } else {
        undecided(&results, &mut reasons)
    };
    let legs_all: Vec<&CellRecord> = bc.iter().chain(cc.iter()).collect();
    if let Some(mark) = report::comparability::not_comparable_legs(&legs_all) {
        reasons.push(mark);
        if verdict == Verdict::Pass || verdict == Verdict::Regression {
            verdict = Verdict::Inconclusive;
        }
    }
    let n = bc.len().min(cc.len());
    if let Some(why) = req.test.underpowered(n) {
        reasons.push(format!("{n} pairs: {why}"));
        if verdict == Verdict::Pass {
            verdict = Verdict::Inconclusive;
        }
    }
    let dir = req
        .out
        .clone()
        .unwrap_or_else(|| crate::cell::default_out("gate-records"));
    crate::cli::run::prepare_out(&dir)?;
    let record = GateRecord {
        schema_version: SCHEMA_VERSION,
        kind: "gate",
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
