//! The CI regression gate's decision (docs/gate.md), pure: given each leg's figures
//! of a baseline and a candidate arm, run paired and interleaved, say per metric
//! whether the candidate regressed beyond the noise, improved, passed, or cannot be
//! told; and render the verdict for CI systems (gate.json, JUnit XML, Markdown,
//! GitLab metrics.txt). Running the legs is the loader's business.
//!
//! One leg's summary is one observation, and the design is paired (ABBA): each pair
//! gives one log-ratio ln(candidate ÷ baseline). A metric is judged by the exact
//! sign-flip test of those log-ratios ([`crate::stats::sign_flip`]), one-sided in the
//! metric's bad direction unless a two-sided test is asked for, and by the exact
//! bounds of the ratio that go with the test:
//!
//! - **regression**: p ≤ α **and** the interval's bad-side bound beyond 1 ± τ;
//! - **pass**: the bad-side bound within τ (whatever p);
//! - **inconclusive**: the bad-side bound beyond τ without significance (too few pairs
//!   or too much noise to tell).
//!
//! τ is a floor (5 % for throughput, p50 and cost, 10 % for p99 and above), raised to
//! what an A/A calibration of this host measured; a metric whose A/A noise exceeds
//! 15 % is **unstable**: reported, never failing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::cell::CellRecord;
use crate::stats::sign_flip::DEFAULT_DRAWS;
use crate::stats::{median, smallest_p, Interval, SignFlip};

/// Random sign flips drawn above 16 pairs (up to 16, all 2^n are enumerated).
pub const DRAWS: usize = DEFAULT_DRAWS;
/// The significance level of each stage unless `--alpha` says otherwise.
pub const ALPHA: f64 = 0.05;
/// Above this A/A noise a metric is unstable.
pub const UNSTABLE_TAU: f64 = 0.15;
/// Pairs below this are refused whatever α.
pub const MIN_PAIRS: usize = 5;
pub const DEFAULT_PAIRS: usize = 10;
/// More VOID legs than this share of all legs makes the gate inconclusive.
pub const MAX_VOID_SHARE: f64 = 0.3;

/// The test asked for: its level and its sides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestPlan {
    /// Significance level of each stage.
    pub alpha: f64,
    /// Two-sided (any change) instead of one-sided in the metric's bad direction.
    pub two_sided: bool,
}

impl Default for TestPlan {
    fn default() -> TestPlan {
        TestPlan {
            alpha: ALPHA,
            two_sided: false,
        }
    }
}

impl TestPlan {
    /// The smallest p `n` pairs can give (2^-n one-sided, twice that two-sided).
    pub fn smallest_p(&self, n: usize) -> f64 {
        let p = smallest_p(n, DRAWS);
        if self.two_sided {
            (2.0 * p).min(1.0)
        } else {
            p
        }
    }

    /// `n` pairs can reach significance at all.
    pub fn reachable(&self, n: usize) -> bool {
        self.smallest_p(n) <= self.alpha * (1.0 + 1e-9)
    }

    /// The fewest pairs that can reach significance (`None`: no number of pairs can,
    /// α is below the drawn test's resolution).
    pub fn min_pairs(&self) -> Option<usize> {
        (1..=64).find(|n| self.reachable(*n))
    }

    /// The one-sided level of each of the interval's bounds.
    pub fn bound_alpha(&self) -> f64 {
        if self.two_sided {
            self.alpha / 2.0
        } else {
            self.alpha
        }
    }

    /// The interval's confidence level (1 − 2α one-sided: each bound at 1 − α).
    pub fn level(&self) -> f64 {
        1.0 - 2.0 * self.bound_alpha()
    }

    /// `one-sided (the bad direction), α = 0.05`.
    pub fn describe(&self) -> String {
        format!(
            "exact paired sign-flip test of the pairs' log-ratios, {}, α = {}",
            if self.two_sided {
                "two-sided"
            } else {
                "one-sided in each metric's bad direction"
            },
            self.alpha
        )
    }

    /// Why `n` pairs cannot reach significance, with the fix; `None` when they can.
    pub fn underpowered(&self, n: usize) -> Option<String> {
        if self.reachable(n) {
            return None;
        }
        let sides = if self.two_sided {
            "two-sided"
        } else {
            "one-sided"
        };
        Some(match self.min_pairs() {
            Some(need) => format!(
                "with {n} pairs the exact {sides} test's smallest p is {:.4}, above α = {}: it could never find a regression; give --pairs {need} or more{}",
                self.smallest_p(n),
                self.alpha,
                if self.two_sided { " (or drop --two-sided: one-sided in the bad direction is the gate's question)" } else { " (or a larger --alpha)" }
            ),
            None => format!(
                "α = {} is below what the {sides} test can resolve with any number of pairs; give --alpha 0.001 or more",
                self.alpha
            ),
        })
    }
}

/// Which way is worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

/// A gated metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    ServedFraction,
    DeliveriesPerSec,
    E2eP50A,
    E2eP99A,
    E2eP999A,
    E2eP50B,
    E2eP99B,
    E2eP999B,
    SystemCores,
    McpuPer1kEventsPerSec,
    SystemPeakMemory,
    DiskBytesPerEvent,
}

impl Metric {
    pub const ALL: [Metric; 12] = [
        Metric::ServedFraction,
        Metric::DeliveriesPerSec,
        Metric::E2eP50A,
        Metric::E2eP99A,
        Metric::E2eP999A,
        Metric::E2eP50B,
        Metric::E2eP99B,
        Metric::E2eP999B,
        Metric::SystemCores,
        Metric::McpuPer1kEventsPerSec,
        Metric::SystemPeakMemory,
        Metric::DiskBytesPerEvent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::ServedFraction => "served_fraction",
            Metric::DeliveriesPerSec => "deliveries_per_sec",
            Metric::E2eP50A => "e2e_p50_a",
            Metric::E2eP99A => "e2e_p99_a",
            Metric::E2eP999A => "e2e_p999_a",
            Metric::E2eP50B => "e2e_p50_b",
            Metric::E2eP99B => "e2e_p99_b",
            Metric::E2eP999B => "e2e_p999_b",
            Metric::SystemCores => "system_cores",
            Metric::McpuPer1kEventsPerSec => "mcpu_per_1k_events_per_sec",
            Metric::SystemPeakMemory => "system_peak_memory",
            Metric::DiskBytesPerEvent => "disk_bytes_per_event",
        }
    }

    pub fn from_name(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s)
    }

    pub fn better(self) -> Better {
        match self {
            Metric::ServedFraction | Metric::DeliveriesPerSec => Better::Higher,
            _ => Better::Lower,
        }
    }

    /// The τ floor: 10 % for p99 and above, 5 % for the rest.
    pub fn floor(self) -> f64 {
        match self {
            Metric::E2eP99A | Metric::E2eP999A | Metric::E2eP99B | Metric::E2eP999B => 0.10,
            _ => 0.05,
        }
    }

    /// The metric of one leg (stream cells: flow A's are the every-delivery figures,
    /// and flow B's are absent).
    pub fn read(self, c: &CellRecord) -> Option<f64> {
        let r = &c.result;
        let l = &r.latency_ms;
        let (a, b) = if c.is_stream() {
            (&l.e2e, None)
        } else {
            (&l.e2e_a, Some(&l.e2e_b))
        };
        let cost = r.cost.as_ref();
        match self {
            Metric::ServedFraction => Some(c.served_in_window()),
            Metric::DeliveriesPerSec => Some(if c.is_stream() {
                r.throughput.popped_per_sec
            } else {
                c.served_in_window() * 6.0 * r.workload.rate_events_per_sec as f64
            }),
            Metric::E2eP50A => (a.count > 0).then_some(a.p50_ms),
            Metric::E2eP99A => (a.count > 0).then_some(a.p99_ms),
            Metric::E2eP999A => (a.count > 0).then_some(a.p999_ms),
            Metric::E2eP50B => b.filter(|b| b.count > 0).map(|b| b.p50_ms),
            Metric::E2eP99B => b.filter(|b| b.count > 0).map(|b| b.p99_ms),
            Metric::E2eP999B => b.filter(|b| b.count > 0).map(|b| b.p999_ms),
            Metric::SystemCores => c.system_cores(),
            Metric::McpuPer1kEventsPerSec => {
                let eps = cost.and_then(|k| k.ingress_events_per_s)?;
                (eps > 0.0).then(|| {
                    c.system_cores()
                        .map(|cores| cores * 1000.0 / (eps / 1000.0))
                })?
            }
            Metric::SystemPeakMemory => c.system_peak_rss(),
            Metric::DiskBytesPerEvent => c.disk_bytes_per_event(),
        }
    }
}

/// The scenario's `gate:` section: which metrics, and τ overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// The metrics gated (default: every one).
    pub metrics: Vec<String>,
    /// τ per metric (a fraction: 0.08 = 8 %), in place of the floor (the A/A
    /// calibration can still raise it).
    pub thresholds: BTreeMap<String, f64>,
}

impl GateConfig {
    /// The metrics, resolved; an unknown name is an error naming it.
    pub fn resolve(&self) -> Result<Vec<Metric>, String> {
        for k in self.thresholds.keys() {
            if Metric::from_name(k).is_none() {
                return Err(unknown(k, "gate.thresholds"));
            }
        }
        for (k, v) in &self.thresholds {
            if !(v.is_finite() && *v >= 0.0 && *v < 1.0) {
                return Err(format!(
                    "gate.thresholds.{k}: {v} must be a fraction in [0, 1), e.g. 0.05"
                ));
            }
        }
        if self.metrics.is_empty() {
            return Ok(Metric::ALL.to_vec());
        }
        self.metrics
            .iter()
            .map(|n| Metric::from_name(n).ok_or_else(|| unknown(n, "gate.metrics")))
            .collect()
    }
}

fn unknown(name: &str, field: &str) -> String {
    format!(
        "{field}: unknown metric `{name}`; the metrics are {}",
        Metric::ALL
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The A/A calibration of one host: per metric, the 95th percentile of |ratio − 1|
/// over the pairs of a baseline-against-itself run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    pub schema_version: u32,
    pub host: String,
    pub scenario: String,
    pub pairs: usize,
    pub created_utc: String,
    pub noise: BTreeMap<String, f64>,
}

/// One leg's figures, by metric.
pub type Figures = BTreeMap<Metric, f64>;

/// The A/A noise of each metric: the 95th percentile of |b ÷ a − 1| over pairs.
pub fn calibrate(pairs: &[(Figures, Figures)]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for m in Metric::ALL {
        let mut dev: Vec<f64> = pairs
            .iter()
            .filter_map(|(a, b)| {
                let (x, y) = (a.get(&m)?, b.get(&m)?);
                (*x != 0.0).then(|| (y / x - 1.0).abs())
            })
            .collect();
        if dev.len() < 2 {
            continue;
        }
        dev.sort_by(f64::total_cmp);
        let i = ((0.95 * (dev.len() - 1) as f64).ceil() as usize).min(dev.len() - 1);
        out.insert(m.name().to_string(), dev[i]);
    }
    out
}

/// Where τ came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TauSource {
    Floor,
    Scenario,
    Calibration,
}

/// One metric's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricVerdict {
    /// The interval's bad-side bound lies within τ.
    Pass,
    /// Significant in the bad direction, and the interval reaches beyond τ.
    Regression,
    /// The interval lies on the good side of 1 (significant), its estimate beyond τ:
    /// reported, never failing.
    Improvement,
    /// The interval reaches beyond τ on the bad side and the test is not
    /// significant: too few pairs or too much noise to tell. Never a pass.
    Inconclusive,
    /// A/A noise above 15 %: reported only.
    Unstable,
    /// No pair with both legs' figure.
    NoData,
}

/// One stage's judgement of a metric (the confirmation stage's, in gate.json).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct StageResult {
    pub pairs: usize,
    pub ratio: Option<Interval>,
    pub p: Option<f64>,
    pub verdict: MetricVerdict,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricResult {
    pub metric: String,
    pub better: Better,
    pub baseline_median: Option<f64>,
    pub candidate_median: Option<f64>,
    /// Pairs with both legs' figure: the test's n (absent from schema 1: 0).
    #[serde(default)]
    pub pairs: usize,
    /// candidate ÷ baseline: the geometric mean of the pairs' ratios, with the exact
    /// bounds of the sign-flip test (each at 1 − α one-sided; a bound the pairs
    /// cannot give is 0 or ∞, written null in gate.json).
    pub ratio: Option<Interval>,
    /// The test's p: one-sided in the bad direction, or two-sided.
    pub p: Option<f64>,
    pub tau: f64,
    pub tau_source: TauSource,
    pub verdict: MetricVerdict,
    /// Flagged in the first stage and confirmed (or not) by fresh pairs.
    pub confirmed: Option<bool>,
    /// The confirmation stage's own judgement.
    pub confirmation: Option<StageResult>,
    /// The value every baseline leg gave, when they all tied (at least 2 legs).
    pub baseline_tied: Option<f64>,
    /// The value every candidate leg gave, when they all tied.
    pub candidate_tied: Option<f64>,
    pub n_baseline: usize,
    pub n_candidate: usize,
    /// Why the verdict is what it is, when that is not plain (too few pairs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl MetricResult {
    /// The τ floor of this result's metric.
    pub fn floor(&self) -> f64 {
        Metric::from_name(&self.metric).map_or(0.05, Metric::floor)
    }

    /// This stage's judgement, for a confirmation.
    pub fn stage(&self) -> StageResult {
        StageResult {
            pairs: self.pairs,
            ratio: self.ratio,
            p: self.p,
            verdict: self.verdict,
        }
    }
}

/// τ of a metric: the floor or the scenario's value, raised to the calibration's.
pub fn tau(m: Metric, cfg: &GateConfig, cal: Option<&Calibration>) -> (f64, TauSource) {
    let (mut t, mut src) = match cfg.thresholds.get(m.name()) {
        Some(v) => (*v, TauSource::Scenario),
        None => (m.floor(), TauSource::Floor),
    };
    if let Some(n) = cal.and_then(|c| c.noise.get(m.name())) {
        if *n > t {
            t = *n;
            src = TauSource::Calibration;
        }
    }
    (t, src)
}

/// One pair's figures: (baseline, candidate), `None` where that leg did not PASS or
/// lacks the metric.
pub type PairFigures = (Option<f64>, Option<f64>);

/// The value every leg gave, when at least two did and they all tied exactly.
fn tied(xs: &[f64]) -> Option<f64> {
    (xs.len() >= 2 && xs.iter().all(|x| *x == xs[0])).then(|| xs[0])
}

/// Judge one metric from the pairs' figures.
pub fn judge(
    m: Metric,
    pairs: &[PairFigures],
    tau: f64,
    tau_source: TauSource,
    test: TestPlan,
    seed: u64,
) -> MetricResult {
    let base: Vec<f64> = pairs.iter().filter_map(|p| p.0).collect();
    let cand: Vec<f64> = pairs.iter().filter_map(|p| p.1).collect();
    // Per pair, ln(candidate ÷ baseline); two zero legs tie (0), one zero leg has no
    // ratio and leaves the pair out.
    let mut zero_legs = 0;
    let d: Vec<f64> = pairs
        .iter()
        .filter_map(|p| match *p {
            (Some(b), Some(c)) if b > 0.0 && c > 0.0 => Some((c / b).ln()),
            (Some(b), Some(c)) if b == 0.0 && c == 0.0 => Some(0.0),
            (Some(_), Some(_)) => {
                zero_legs += 1;
                None
            }
            _ => None,
        })
        .filter(|x| x.is_finite())
        .collect();
    let mut r = MetricResult {
        metric: m.name().into(),
        better: m.better(),
        baseline_median: median(&base),
        candidate_median: median(&cand),
        pairs: d.len(),
        ratio: None,
        p: None,
        tau,
        tau_source,
        verdict: MetricVerdict::NoData,
        confirmed: None,
        confirmation: None,
        baseline_tied: tied(&base),
        candidate_tied: tied(&cand),
        n_baseline: base.len(),
        n_candidate: cand.len(),
        note: (zero_legs > 0).then(|| {
            format!("{zero_legs} pair(s) with one leg at 0 have no ratio and were left out")
        }),
    };
    // Positive is worse, whichever way the metric is better.
    let dir = match m.better() {
        Better::Lower => 1.0,
        Better::Higher => -1.0,
    };
    let worse: Vec<f64> = d.iter().map(|x| dir * x).collect();
    let Some(f) = SignFlip::new(&worse, DRAWS, seed) else {
        return r;
    };
    let a = test.bound_alpha();
    let (p_bad, p_good) = (f.p_above(0.0), f.p_below(0.0));
    let p = if test.two_sided {
        (2.0 * p_bad.min(p_good)).min(1.0)
    } else {
        p_bad
    };
    // The bounds of the shift towards worse, then in ratio space.
    let (w_low, w_high) = (f.lower(a), f.upper(a));
    let ratio = |w: f64| (dir * w).exp();
    let (low, high) = match m.better() {
        Better::Lower => (
            w_low.map_or(0.0, ratio),
            w_high.map_or(f64::INFINITY, ratio),
        ),
        Better::Higher => (
            w_high.map_or(0.0, ratio),
            w_low.map_or(f64::INFINITY, ratio),
        ),
    };
    let i = Interval {
        estimate: ratio(f.mean),
        low,
        high,
        level: test.level(),
        n: d.len(),
    };
    r.ratio = Some(i);
    r.p = Some(p);
    if let Some(why) = test.underpowered(d.len()) {
        r.note = Some(format!("{} usable pairs: {why}", d.len()));
    }
    let significant = p <= test.alpha * (1.0 + 1e-9);
    let bad_significant = significant && (!test.two_sided || p_bad <= p_good);
    let good_significant = if test.two_sided {
        significant && p_good < p_bad
    } else {
        p_good <= test.alpha * (1.0 + 1e-9)
    };
    let (within, beyond_good) = match m.better() {
        Better::Lower => (i.high <= 1.0 + tau, i.estimate < 1.0 - tau),
        Better::Higher => (i.low >= 1.0 - tau, i.estimate > 1.0 + tau),
    };
    r.verdict = if tau > UNSTABLE_TAU && tau_source == TauSource::Calibration {
        MetricVerdict::Unstable
    } else if bad_significant && !within {
        MetricVerdict::Regression
    } else if within && good_significant && beyond_good {
        MetricVerdict::Improvement
    } else if within {
        MetricVerdict::Pass
    } else {
        MetricVerdict::Inconclusive
    };
    r
}

/// What keeps a gate without a confirmed regression from passing, each named in
/// `reasons`: metrics whose interval reaches beyond τ without significance,
/// regressions the fresh pairs could not confirm for want of pairs or evidence, and
/// unstable metrics that moved beyond their floor. Inconclusive when there is any.
pub fn undecided(results: &[MetricResult], reasons: &mut Vec<String>) -> Verdict {
    let mut verdict = Verdict::Pass;
    let names = |f: &dyn Fn(&MetricResult) -> bool| -> Vec<String> {
        results.iter().filter(|r| f(r)).map(describe).collect()
    };
    let inconclusive = names(&|r| r.verdict == MetricVerdict::Inconclusive);
    if !inconclusive.is_empty() {
        verdict = Verdict::Inconclusive;
        reasons.push(format!(
            "inconclusive, not a pass: {} metric(s) reach beyond τ without a significant test (too few pairs or too much noise to tell): {}",
            inconclusive.len(),
            inconclusive.join("; ")
        ));
    }
    let unconfirmed = names(&|r| {
        r.verdict == MetricVerdict::Regression
            && r.confirmation
                .is_some_and(|c| c.verdict == MetricVerdict::Inconclusive)
    });
    if !unconfirmed.is_empty() {
        verdict = Verdict::Inconclusive;
        reasons.push(format!(
            "inconclusive: the first stage found a regression the fresh pairs could neither confirm nor clear: {}",
            unconfirmed.join("; ")
        ));
    }
    if results.iter().any(|r| {
        r.verdict == MetricVerdict::Unstable
            && r.ratio.is_some_and(|i| match r.better {
                Better::Lower => i.low > 1.0 + r.floor(),
                Better::Higher => i.high < 1.0 - r.floor(),
            })
    }) {
        verdict = Verdict::Inconclusive;
        reasons.push("an unstable metric (A/A noise above 15 %) moved beyond its floor: this host cannot tell".into());
    }
    verdict
}

/// The gate's overall verdict, and the exit it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No regression beyond the noise (exit 0).
    Pass,
    /// A confirmed regression (exit 6).
    Regression,
    /// A metric whose interval reaches beyond τ without significance (too few
    /// pairs, too much noise), a regression the fresh pairs could not confirm, an
    /// unstable metric that moved, or too many VOID legs (exit 7).
    Inconclusive,
    /// The candidate failed correctness in a leg (exit 3).
    CandidateFail,
}

/// Whether `dir` holds a gate's record.
pub fn is_gate(dir: &std::path::Path) -> bool {
    dir.join("gate.json").is_file()
}

/// A gate's record with the cells of its legs, for the report.
#[derive(Debug, Clone)]
pub struct GateView {
    pub dir: std::path::PathBuf,
    pub record: GateRecord,
    /// Each leg that left a cell record, with its label (`pair 3 candidate, stage 1`).
    pub legs: Vec<(String, CellRecord)>,
}

impl GateView {
    pub fn load(dir: &std::path::Path) -> Result<GateView, crate::error::ReportError> {
        let record = GateRecord::read(dir)?;
        let legs = record
            .recorded_legs(dir)
            .map(|(l, d)| {
                Ok((
                    format!("pair {} {}, stage {}", l.pair, l.arm, l.stage),
                    CellRecord::load(&d)?,
                ))
            })
            .collect::<Result<Vec<_>, crate::error::ReportError>>()?;
        Ok(GateView {
            dir: dir.to_path_buf(),
            record,
            legs,
        })
    }

    /// The gate's name: its directory's.
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map_or_else(|| "gate".into(), |n| n.to_string_lossy().into_owned())
    }
}

/// A gate picture's title.
pub const PICTURE_TITLE: &str = "Gate: candidate ÷ baseline per metric, τ band shaded";

/// The legend's words for a gate's picture.
pub const PICTURE_WORDS: crate::plot::forest::Words = [
    "pass (or improvement)",
    "regression",
    "inconclusive",
    "unstable or no data",
];

/// gate.json's schema: 2 since the paired test (1 had an unpaired median test and
/// `low_confidence`).
pub const SCHEMA_VERSION: u32 = 2;

/// gate.json (schema_version [`SCHEMA_VERSION`]), written by the loader's gate and
/// read back by [`GateRecord::read`] (schemas 1 and 2) for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateRecord {
    pub schema_version: u32,
    pub kind: String,
    pub scenario: String,
    pub baseline_sets: Vec<String>,
    pub candidate_sets: Vec<String>,
    pub pairs: usize,
    /// The test: α and sides (absent from schema 1: the default plan).
    #[serde(default)]
    pub test: TestPlan,
    /// The same in words (absent from schema 1).
    #[serde(default)]
    pub test_text: String,
    pub seed: u64,
    pub order: Vec<String>,
    pub legs: Vec<Leg>,
    pub void_legs: usize,
    pub fail_legs: Vec<String>,
    pub calibration: Option<String>,
    pub metrics: Vec<MetricResult>,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    /// What the loader's host probe saw before the first leg (absent when skipped or
    /// when the gate compared records already made), and its warning when the host
    /// stalled a busy machine (VOID legs are then likely).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_probe: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_warning: Option<String>,
}

/// One leg as gate.json lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Leg {
    pub arm: String,
    pub pair: usize,
    pub stage: u8,
    pub dir: String,
    /// The cell's outcome by name, or `ERROR: …` when the leg did not run.
    pub outcome: String,
}

impl Leg {
    /// The cell's outcome (`None`: the leg errored, or an outcome this build does not
    /// know).
    pub fn cell_outcome(&self) -> Option<cell_record::Outcome> {
        self.outcome.parse().ok()
    }
}

/// What a reader of gate.json gets back: its arms' overrides and its legs (every
/// schema version has these).
#[derive(Debug, Clone, Deserialize)]
pub struct GateLegs {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub baseline_sets: Vec<String>,
    #[serde(default)]
    pub candidate_sets: Vec<String>,
    #[serde(default)]
    pub legs: Vec<Leg>,
}

impl GateLegs {
    /// Read a gate.json; `None` when it is not one.
    pub fn read(path: &std::path::Path) -> Option<GateLegs> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// An A/A run: a calibration, or the candidate's overrides equal to the
    /// baseline's.
    pub fn is_a_a(&self) -> bool {
        self.kind == "gate-calibration" || self.baseline_sets == self.candidate_sets
    }
}

impl GateRecord {
    pub fn exit_code(&self) -> u8 {
        match self.verdict {
            Verdict::Pass => 0,
            Verdict::CandidateFail => 3,
            Verdict::Regression => 6,
            Verdict::Inconclusive => 7,
        }
    }

    /// JUnit XML: one test case per metric, a failure element on regression.
    pub fn junit(&self) -> String {
        let esc = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        };
        let failures = self
            .metrics
            .iter()
            .filter(|m| m.verdict == MetricVerdict::Regression && m.confirmed != Some(false))
            .count()
            + usize::from(self.verdict == Verdict::CandidateFail);
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            s,
            "<testsuites name=\"crossbench gate\" tests=\"{}\" failures=\"{failures}\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">",
            self.metrics.len() + 1,
            esc(&self.scenario),
            self.metrics.len() + 1
        );
        let _ = writeln!(
            s,
            "    <testcase classname=\"crossbench.gate\" name=\"correctness\">"
        );
        if self.verdict == Verdict::CandidateFail {
            let _ = writeln!(
                s,
                "      <failure message=\"the candidate failed correctness\">{}</failure>",
                esc(&self.fail_legs.join(", "))
            );
        }
        let _ = writeln!(s, "    </testcase>");
        for m in &self.metrics {
            let _ = writeln!(
                s,
                "    <testcase classname=\"crossbench.gate\" name=\"{}\">",
                esc(&m.metric)
            );
            let line = describe(m);
            match m.verdict {
                MetricVerdict::Regression if m.confirmed != Some(false) => {
                    let _ = writeln!(
                        s,
                        "      <failure message=\"regression\">{}</failure>",
                        esc(&line)
                    );
                }
                MetricVerdict::Unstable | MetricVerdict::NoData | MetricVerdict::Inconclusive => {
                    let _ = writeln!(s, "      <skipped message=\"{}\"/>", esc(&line));
                }
                _ => {
                    let _ = writeln!(s, "      <system-out>{}</system-out>", esc(&line));
                }
            }
            let _ = writeln!(s, "    </testcase>");
        }
        let _ = writeln!(s, "  </testsuite>\n</testsuites>");
        s
    }

    /// A Markdown summary (for `$GITHUB_STEP_SUMMARY`).
    /// The gate as a forest plot's rows: each metric's candidate ÷ baseline ratio with
    /// its interval (a bound the pairs cannot give is drawn to the estimate), the τ
    /// band round 1 shaded, the verdict the colour. A metric with no ratio is left
    /// out.
    pub fn forest_rows(&self) -> Vec<crate::plot::forest::Row> {
        use crate::plot::forest::{Row, Side, Verdict as V};
        self.metrics
            .iter()
            .filter_map(|m| {
                let i = m.ratio.as_ref()?;
                let bound = |b: f64| {
                    if b.is_finite() && b > 0.0 {
                        b
                    } else {
                        i.estimate
                    }
                };
                Some(Row {
                    label: format!("{} (τ {:.0} %)", m.metric, m.tau * 100.0),
                    estimate: i.estimate,
                    low: bound(i.low),
                    high: bound(i.high),
                    side: Side::Within(1.0 - m.tau, 1.0 + m.tau),
                    published: None,
                    verdict: match m.verdict {
                        MetricVerdict::Pass | MetricVerdict::Improvement => V::Holds,
                        MetricVerdict::Regression => V::DoesNotHold,
                        MetricVerdict::Inconclusive => V::Inconclusive,
                        MetricVerdict::Unstable | MetricVerdict::NoData => V::NotJudged,
                    },
                })
            })
            .collect()
    }

    /// The metrics table's column names. Schema 1's ratios carry their own level
    /// (a 95 % bootstrap interval) and its p came from another test.
    fn columns(&self) -> [String; 7] {
        let (level, p) = if self.schema_version < 2 {
            let level = self
                .metrics
                .iter()
                .find_map(|m| m.ratio.map(|i| i.level))
                .unwrap_or(0.95);
            (
                format!("ratio [{:.0} % interval]", level * 100.0),
                "p".into(),
            )
        } else {
            (
                format!("ratio [{:.0} % bounds]", self.test.level() * 100.0),
                format!(
                    "p{}",
                    if self.test.two_sided {
                        ""
                    } else {
                        " (one-sided)"
                    }
                ),
            )
        };
        [
            "metric".into(),
            "baseline".into(),
            "candidate".into(),
            level,
            p,
            "τ".into(),
            "verdict".into(),
        ]
    }

    /// The metrics as a report table (the Markdown summary's, without its emphasis).
    pub fn table(&self, title: &str) -> crate::table::Table {
        let columns = self.columns();
        let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
        let mut t = crate::table::Table::new(title, &cols);
        t.notes.push(format!(
            "{} pairs (ABBA), {} VOID legs excluded; {}",
            self.pairs,
            self.void_legs,
            if self.test_text.is_empty() {
                "gate.json schema 1: an unpaired median test".to_string()
            } else {
                self.test_text.clone()
            }
        ));
        t.notes
            .extend(self.reasons.iter().map(|r| r.replace("**", "")));
        if let Some(w) = &self.host_warning {
            t.notes.push(format!("host probe: {w}"));
        }
        t.sections.push(crate::table::Section {
            heading: None,
            rows: self
                .metrics
                .iter()
                .map(|m| {
                    metric_cells(m)
                        .into_iter()
                        .map(|c| c.replace("**", ""))
                        .collect()
                })
                .collect(),
        });
        t
    }

    /// The gate's verdict in a few words.
    pub fn verdict_words(&self) -> &'static str {
        match self.verdict {
            Verdict::Pass => "no regression",
            Verdict::Regression => "REGRESSION",
            Verdict::Inconclusive => "inconclusive",
            Verdict::CandidateFail => "candidate FAILED correctness",
        }
    }

    /// Draw the gate's picture ([`PICTURE_TITLE`]) into `<base>.png` and `.svg`.
    pub fn picture(
        &self,
        base: &std::path::Path,
    ) -> Result<crate::plot::Picture, crate::error::ReportError> {
        crate::plot::forest::plot(&self.forest_rows(), PICTURE_TITLE, PICTURE_WORDS, base)
    }

    /// Read `dir/gate.json` (schema 1 or 2).
    pub fn read(dir: &std::path::Path) -> Result<GateRecord, crate::error::ReportError> {
        use crate::error::ReportError;
        let p = dir.join("gate.json");
        let text = std::fs::read_to_string(&p).map_err(|e| ReportError::io(&p, e))?;
        let r: GateRecord = serde_json::from_str(&text).map_err(|e| ReportError::BadRecord {
            path: p.clone(),
            message: e.to_string(),
        })?;
        if !(1..=SCHEMA_VERSION).contains(&r.schema_version) {
            return Err(ReportError::BadRecord {
                path: p,
                message: format!(
                    "schema_version {} is not one this build reads (1 to {SCHEMA_VERSION}): use a crossbench as new as the record",
                    r.schema_version
                ),
            });
        }
        Ok(r)
    }

    /// The directories of the legs that left a cell record, under the gate's `dir`.
    pub fn leg_dirs(&self, dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        self.recorded_legs(dir).map(|(_, d)| d).collect()
    }

    /// Each leg that left a cell record, with its directory under the gate's `dir`,
    /// in gate.json's order.
    fn recorded_legs<'a>(
        &'a self,
        dir: &'a std::path::Path,
    ) -> impl Iterator<Item = (&'a Leg, std::path::PathBuf)> + 'a {
        self.legs
            .iter()
            .map(move |l| (l, dir.join(&l.dir)))
            .filter(|(_, d)| d.join("result.json").is_file())
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## crossbench gate: **{}**\n", self.verdict_words());
        let _ = writeln!(
            s,
            "`{}`: baseline `{}` against candidate `{}`, {} pairs (ABBA), {} VOID legs excluded; {}.\n",
            self.scenario,
            self.baseline_sets.join(" "),
            self.candidate_sets.join(" "),
            self.pairs,
            self.void_legs,
            self.test_text
        );
        for r in &self.reasons {
            let _ = writeln!(s, "- {r}");
        }
        if let Some(w) = &self.host_warning {
            let _ = writeln!(s, "- host probe: {w}");
        }
        if !self.reasons.is_empty() || self.host_warning.is_some() {
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "| {} |\n|---|---|---|---|---|---|---|",
            self.columns().join(" | ")
        );
        for m in &self.metrics {
            let _ = writeln!(s, "| {} |", metric_cells(m).join(" | "));
        }
        let tied: Vec<String> = self
            .metrics
            .iter()
            .flat_map(|m| {
                [
                    ("baseline", m.baseline_tied),
                    ("candidate", m.candidate_tied),
                ]
                .into_iter()
                .filter_map(move |(arm, v)| {
                    v.map(|v| format!("`{}`: every {arm} leg gave {v:.4}", m.metric))
                })
            })
            .collect();
        if !tied.is_empty() {
            let _ = writeln!(
                s,
                "\nTied legs (the resolution of these figures is the histogram's or the workload's, not the system's): {}.",
                tied.join("; ")
            );
        }
        let notes: Vec<String> = self
            .metrics
            .iter()
            .filter_map(|m| m.note.as_ref().map(|n| format!("- `{}`: {n}", m.metric)))
            .collect();
        if !notes.is_empty() {
            let _ = writeln!(s, "\n{}", notes.join("\n"));
        }
        s
    }

    /// GitLab `metrics.txt`: `name value` lines.
    pub fn metrics_txt(&self) -> String {
        let mut s = String::new();
        for m in &self.metrics {
            if let Some(i) = m.ratio {
                let _ = writeln!(s, "crossbench_gate_{}_ratio {:.6}", m.metric, i.estimate);
            }
            if let Some(v) = m.candidate_median {
                let _ = writeln!(s, "crossbench_gate_{}_candidate {v:.6}", m.metric);
            }
        }
        let _ = writeln!(s, "crossbench_gate_exit {}", self.exit_code());
        s
    }
}

/// `1.575 [1.574, 1.577]`; an unbounded side is `0` or `∞`.
fn ratio_text(i: Option<Interval>) -> String {
    let b = |x: f64| {
        if x.is_finite() {
            format!("{x:.3}")
        } else {
            "∞".into()
        }
    };
    i.map_or("—".into(), |i| {
        format!("{:.3} [{}, {}]", i.estimate, b(i.low), b(i.high))
    })
}

/// One metric's row of the summary's table.
fn metric_cells(m: &MetricResult) -> Vec<String> {
    let f = |v: Option<f64>| v.map_or("—".into(), |x| format!("{x:.4}"));
    vec![
        m.metric.clone(),
        f(m.baseline_median),
        f(m.candidate_median),
        ratio_text(m.ratio),
        m.p.map_or("—".into(), |p| format!("{p:.4}")),
        format!(
            "{:.1} % ({})",
            m.tau * 100.0,
            match m.tau_source {
                TauSource::Floor => "floor",
                TauSource::Scenario => "scenario",
                TauSource::Calibration => "A/A",
            }
        ),
        verdict_text(m),
    ]
}

/// The verdict's words, the confirmation stage's included.
pub fn verdict_text(m: &MetricResult) -> String {
    let second = m.confirmation.map(|c| {
        format!(
            "fresh pairs: {}, p {}",
            ratio_text(c.ratio),
            c.p.map_or("—".into(), |p| format!("{p:.4}"))
        )
    });
    match (m.verdict, m.confirmed) {
        (MetricVerdict::Regression, Some(true)) => {
            format!("**REGRESSION**, confirmed ({})", second.unwrap_or_default())
        }
        (MetricVerdict::Regression, Some(false))
            if m.confirmation.map(|c| c.verdict) == Some(MetricVerdict::Inconclusive) =>
        {
            format!(
                "inconclusive: the fresh pairs could not confirm it ({})",
                second.unwrap_or_default()
            )
        }
        (MetricVerdict::Regression, Some(false)) => format!(
            "not confirmed: the fresh pairs contradict it ({})",
            second.unwrap_or_default()
        ),
        (MetricVerdict::Regression, None) => "**REGRESSION**".into(),
        (MetricVerdict::Improvement, _) => "improvement".into(),
        (MetricVerdict::Inconclusive, _) => "inconclusive (beyond τ, not significant)".into(),
        (MetricVerdict::Unstable, _) => "unstable (reported only)".into(),
        (MetricVerdict::NoData, _) => "no data".into(),
        (MetricVerdict::Pass, _) => "pass".into(),
    }
}

/// One line on a metric.
pub fn describe(m: &MetricResult) -> String {
    format!(
        "{}: candidate ÷ baseline {} over {} pairs (p {}, τ {:.1} %): {}",
        m.metric,
        ratio_text(m.ratio),
        m.pairs,
        m.p.map_or("—".into(), |p| format!("{p:.4}")),
        m.tau * 100.0,
        verdict_text(m)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Rng;

    /// The host probe's warning reaches the summary a CI job shows, and gate.json;
    /// a gate without one says nothing of the host.
    #[test]
    fn the_host_warning_is_in_the_summary_and_the_record() {
        let mut r = GateRecord {
            schema_version: SCHEMA_VERSION,
            kind: "gate".into(),
            scenario: "s.yaml".into(),
            baseline_sets: vec![],
            candidate_sets: vec![],
            pairs: 10,
            test: TestPlan::default(),
            test_text: TestPlan::default().describe(),
            seed: 1,
            order: vec![],
            legs: vec![],
            void_legs: 4,
            fail_legs: vec![],
            calibration: None,
            metrics: vec![],
            verdict: Verdict::Pass,
            reasons: vec![],
            host_probe: None,
            host_warning: None,
        };
        assert!(!r.markdown().contains("host probe"), "{}", r.markdown());
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("host_probe").is_none() && json.get("host_warning").is_none());
        r.host_warning = Some("this host stalled the whole machine for 1.33 %".into());
        r.host_probe = Some(serde_json::json!({"stalled_fraction": 0.0133}));
        let md = r.markdown();
        assert!(
            md.contains("- host probe: this host stalled the whole machine for 1.33 %"),
            "{md}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["host_probe"]["stalled_fraction"], 0.0133);
        assert!(json["host_warning"].as_str().unwrap().contains("1.33 %"));
    }

    /// gate.json reads back as it was written, for the report: the verdicts, the
    /// metrics, and a bound the pairs could not give (∞, written `null`) as no bound;
    /// a schema this build does not know is refused by name.
    #[test]
    fn a_gate_record_reads_back_what_it_wrote() {
        let mut rng = Rng::new(5);
        let mut m = one_sided(&pairs(&mut rng, 8, 100.0, 1.3, 0.02), 0.05);
        m.ratio = m.ratio.map(|i| Interval {
            high: f64::INFINITY,
            ..i
        });
        let r = GateRecord {
            schema_version: SCHEMA_VERSION,
            kind: "gate".into(),
            scenario: "s.yaml".into(),
            baseline_sets: vec!["a=1".into()],
            candidate_sets: vec!["a=2".into()],
            pairs: 8,
            test: TestPlan::default(),
            test_text: TestPlan::default().describe(),
            seed: 1,
            order: vec![],
            legs: vec![],
            void_legs: 0,
            fail_legs: vec![],
            calibration: None,
            metrics: vec![m.clone()],
            verdict: Verdict::Regression,
            reasons: vec!["a **reason**".into()],
            host_probe: None,
            host_warning: None,
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gate.json"),
            serde_json::to_string_pretty(&r).unwrap(),
        )
        .unwrap();
        assert!(is_gate(dir.path()));
        let back = GateRecord::read(dir.path()).unwrap();
        assert_eq!(back.verdict, Verdict::Regression);
        assert_eq!(back.metrics[0].verdict, m.verdict);
        let i = back.metrics[0].ratio.unwrap();
        assert_eq!(i.estimate, m.ratio.unwrap().estimate);
        assert!(i.high.is_nan(), "null reads back as no bound: {i:?}");
        assert_eq!(
            back.markdown(),
            r.markdown(),
            "the same summary from either"
        );
        let t = back.table("g");
        assert!(t.notes.iter().any(|n| n == "a reason"), "{:?}", t.notes);
        assert_eq!(t.rows().count(), 1);
        // A later schema is refused, naming it.
        let mut later = serde_json::to_value(&r).unwrap();
        later["schema_version"] = serde_json::json!(SCHEMA_VERSION + 1);
        std::fs::write(dir.path().join("gate.json"), later.to_string()).unwrap();
        let e = GateRecord::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("schema_version 3"), "{e}");
    }

    /// `n` ABBA pairs: the baseline's legs at `level`, the candidate's at `level` ×
    /// `ratio`, each leg with its own log-normal noise of about `cv`.
    fn pairs(rng: &mut Rng, n: usize, level: f64, ratio: f64, cv: f64) -> Vec<PairFigures> {
        (0..n)
            .map(|_| {
                let b = level * (cv * rng.normal()).exp();
                let c = level * ratio * (cv * rng.normal()).exp();
                (Some(b), Some(c))
            })
            .collect()
    }

    fn one_sided(p: &[PairFigures], tau: f64) -> MetricResult {
        judge(
            Metric::E2eP50A,
            p,
            tau,
            TauSource::Floor,
            TestPlan::default(),
            1,
        )
    }

    fn tied_pairs(n: usize, base: f64, cand: f64) -> Vec<PairFigures> {
        vec![(Some(base), Some(cand)); n]
    }

    /// The issue's case: every leg of each arm tied, a 50 % regression, 5 pairs. The
    /// old unpaired median test gave p ≈ 0.5 and "pass"; the paired one-sided test
    /// gives 1/32 and a regression whose exact interval is the tied ratio.
    #[test]
    fn tied_legs_with_a_50_percent_regression_at_5_pairs_are_a_regression() {
        let r = one_sided(&tied_pairs(5, 45.0, 67.5), 0.05);
        assert_eq!(r.verdict, MetricVerdict::Regression, "{r:?}");
        assert!((r.p.unwrap() - 1.0 / 32.0).abs() < 1e-12, "{r:?}");
        let i = r.ratio.unwrap();
        assert!(
            (i.estimate - 1.5).abs() < 1e-9 && (i.low - 1.5).abs() < 1e-9,
            "{i:?}"
        );
        assert_eq!(
            (r.baseline_tied, r.candidate_tied),
            (Some(45.0), Some(67.5))
        );
        // The issue's own figures: baselines 45.18-45.25 ms, every candidate 71.231.
        let issue: Vec<PairFigures> = [45.215, 45.18, 45.25, 45.2, 45.23]
            .iter()
            .map(|b| (Some(*b), Some(71.231)))
            .collect();
        let r = one_sided(&issue, 0.05);
        assert_eq!(r.verdict, MetricVerdict::Regression, "{r:?}");
        assert_eq!(r.candidate_tied, Some(71.231));
        assert_eq!(r.baseline_tied, None);
    }

    /// Two-sided at 5 pairs cannot reach 0.05 (2/32 = 0.0625): never a pass, the
    /// note names the pairs needed.
    #[test]
    fn two_sided_at_5_pairs_is_inconclusive_and_says_how_many_pairs() {
        let plan = TestPlan {
            two_sided: true,
            ..TestPlan::default()
        };
        assert_eq!(plan.min_pairs(), Some(6));
        assert!(plan.underpowered(5).unwrap().contains("--pairs 6"));
        assert_eq!(TestPlan::default().min_pairs(), Some(5));
        let r = judge(
            Metric::E2eP50A,
            &tied_pairs(5, 45.0, 67.5),
            0.05,
            TauSource::Floor,
            plan,
            1,
        );
        assert_eq!(r.verdict, MetricVerdict::Inconclusive, "{r:?}");
        assert!((r.p.unwrap() - 2.0 / 32.0).abs() < 1e-12);
        assert!(r.note.as_deref().unwrap().contains("--pairs 6"), "{r:?}");
        // At 6 pairs, two-sided, it is found.
        let r = judge(
            Metric::E2eP50A,
            &tied_pairs(6, 45.0, 67.5),
            0.05,
            TauSource::Floor,
            plan,
            1,
        );
        assert_eq!(r.verdict, MetricVerdict::Regression, "{r:?}");
        assert_eq!(
            TestPlan {
                alpha: 0.01,
                two_sided: false
            }
            .min_pairs(),
            Some(7)
        );
    }

    #[test]
    fn an_aa_with_ties_passes_with_the_interval_at_one() {
        let r = one_sided(&tied_pairs(5, 45.0, 45.0), 0.05);
        assert_eq!(r.verdict, MetricVerdict::Pass, "{r:?}");
        let i = r.ratio.unwrap();
        assert_eq!((i.low, i.estimate, i.high), (1.0, 1.0, 1.0));
        assert_eq!(r.p, Some(1.0));
    }

    /// A 3 % change under τ = 5 %: significant, but its bound lies within τ.
    #[test]
    fn a_3_percent_change_with_tau_5_percent_passes() {
        let r = one_sided(&tied_pairs(5, 45.0, 45.0 * 1.03), 0.05);
        assert_eq!(r.verdict, MetricVerdict::Pass, "{r:?}");
        let mut rng = Rng::new(8);
        let r = one_sided(&pairs(&mut rng, 10, 50.0, 1.03, 0.003), 0.05);
        assert_eq!(r.verdict, MetricVerdict::Pass, "{r:?}");
    }

    /// 20 % buried in noise of about 30 % a leg, 5 pairs: the interval reaches far
    /// beyond τ and the test cannot tell: inconclusive, not a pass. Over many such
    /// gates a pass (every pair's ratio within τ by chance) is at most α of them:
    /// that is the bound's guarantee.
    #[test]
    fn a_20_percent_change_in_too_much_noise_for_5_pairs_is_inconclusive() {
        let mut rng = Rng::new(4);
        let r = one_sided(&pairs(&mut rng, 5, 50.0, 1.2, 0.3), 0.05);
        assert_eq!(r.verdict, MetricVerdict::Inconclusive, "{r:?}");
        assert!(r.ratio.unwrap().high > 1.05, "{r:?}");
        let (mut inconclusive, mut passes) = (0, 0);
        for _ in 0..2000 {
            match one_sided(&pairs(&mut rng, 5, 50.0, 1.2, 0.3), 0.05).verdict {
                MetricVerdict::Inconclusive => inconclusive += 1,
                MetricVerdict::Pass | MetricVerdict::Improvement => passes += 1,
                _ => {}
            }
        }
        assert!(passes <= 100, "{passes} of 2000 passed (α = 5 %)");
        assert!(inconclusive > 1500, "mostly inconclusive: {inconclusive}");
    }

    #[test]
    fn an_aa_comparison_flags_at_most_alpha_of_trials() {
        let mut rng = Rng::new(1);
        let mut flags = 0;
        for t in 0..200 {
            let p = pairs(&mut rng, 10, 50.0, 1.0, 0.04);
            let r = judge(
                Metric::E2eP50A,
                &p,
                0.05,
                TauSource::Floor,
                TestPlan::default(),
                t,
            );
            if r.verdict == MetricVerdict::Regression {
                flags += 1;
            }
        }
        assert!(flags <= 16, "{flags} of 200 A/A trials flagged");
    }

    #[test]
    fn a_20_percent_p50_shift_with_10_pairs_is_flagged_in_95_of_100_trials() {
        let mut rng = Rng::new(2);
        let mut flags = 0;
        for _ in 0..100 {
            let r = one_sided(&pairs(&mut rng, 10, 50.0, 1.2, 0.04), 0.05);
            if r.verdict == MetricVerdict::Regression {
                flags += 1;
            }
        }
        assert!(flags >= 95, "only {flags} of 100 shifted trials flagged");
    }

    #[test]
    fn a_2_percent_shift_under_a_5_percent_tau_is_never_flagged() {
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            let p = pairs(&mut rng, 10, 50.0, 1.02, 0.005);
            let r = one_sided(&p, 0.05);
            assert_eq!(r.verdict, MetricVerdict::Pass, "{p:?} {r:?}");
        }
    }

    #[test]
    fn an_improvement_is_reported_and_direction_follows_the_metric() {
        let a = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8];
        let p: Vec<PairFigures> = a.iter().map(|x| (Some(*x), Some(x * 0.7))).collect();
        let r = one_sided(&p, 0.05);
        assert_eq!(r.verdict, MetricVerdict::Improvement, "{r:?}");
        // Fewer deliveries per second is the bad direction.
        let r = judge(
            Metric::DeliveriesPerSec,
            &p,
            0.05,
            TauSource::Floor,
            TestPlan::default(),
            1,
        );
        assert_eq!(r.verdict, MetricVerdict::Regression, "{r:?}");
        let i = r.ratio.unwrap();
        assert!(i.high < 0.95 && (i.estimate - 0.7).abs() < 1e-9, "{i:?}");
        // A pair with one leg missing counts for the medians only; zero legs on both
        // sides tie.
        let mut q = p.clone();
        q.push((Some(100.0), None));
        q.push((Some(0.0), Some(0.0)));
        let r = one_sided(&q, 0.05);
        assert_eq!((r.pairs, r.n_baseline, r.n_candidate), (7, 8, 7));
    }

    /// A second stage left with too few pairs (VOID legs) cannot confirm: the
    /// metric is inconclusive, and so is the gate; one whose fresh pairs contradict
    /// it (their bound within τ) is not confirmed and does not hold the gate.
    #[test]
    fn a_confirmation_without_enough_pairs_is_inconclusive() {
        let mut first = one_sided(&tied_pairs(5, 45.0, 67.5), 0.05);
        assert_eq!(first.verdict, MetricVerdict::Regression);
        // Stage 2: one pair's candidate leg VOID, 4 pairs left (smallest p 1/16).
        let mut fresh = tied_pairs(5, 45.0, 67.5);
        fresh[2].1 = None;
        let again = one_sided(&fresh, 0.05);
        assert_eq!(again.verdict, MetricVerdict::Inconclusive, "{again:?}");
        assert!(
            again.note.as_deref().unwrap().contains("--pairs 5"),
            "{again:?}"
        );
        first.confirmed = Some(again.verdict == MetricVerdict::Regression);
        first.confirmation = Some(again.stage());
        let mut reasons = Vec::new();
        assert_eq!(
            undecided(std::slice::from_ref(&first), &mut reasons),
            Verdict::Inconclusive
        );
        assert!(
            reasons[0].contains("could neither confirm nor clear")
                && reasons[0].contains("e2e_p50_a"),
            "{reasons:?}"
        );
        // Fresh pairs that show no change: not confirmed, nothing undecided.
        let cleared = one_sided(&tied_pairs(5, 45.0, 45.0), 0.05);
        first.confirmed = Some(false);
        first.confirmation = Some(cleared.stage());
        let mut reasons = Vec::new();
        assert_eq!(
            undecided(std::slice::from_ref(&first), &mut reasons),
            Verdict::Pass
        );
        assert!(
            verdict_text(&first).starts_with("not confirmed"),
            "{}",
            verdict_text(&first)
        );
        // An inconclusive metric of the first stage holds the gate, named.
        let mut rng = Rng::new(4);
        let noisy = one_sided(&pairs(&mut rng, 5, 50.0, 1.2, 0.3), 0.05);
        let mut reasons = Vec::new();
        assert_eq!(undecided(&[noisy], &mut reasons), Verdict::Inconclusive);
        assert!(
            reasons[0].contains("inconclusive, not a pass"),
            "{reasons:?}"
        );
    }

    #[test]
    fn calibration_raises_tau_and_marks_noisy_metrics_unstable() {
        let mut cal = Calibration {
            schema_version: 1,
            host: "h".into(),
            scenario: "s".into(),
            pairs: 10,
            created_utc: String::new(),
            noise: BTreeMap::new(),
        };
        cal.noise.insert("e2e_p50_a".into(), 0.08);
        cal.noise.insert("e2e_p99_a".into(), 0.30);
        let cfg = GateConfig::default();
        assert_eq!(
            tau(Metric::E2eP50A, &cfg, Some(&cal)),
            (0.08, TauSource::Calibration)
        );
        assert_eq!(
            tau(Metric::E2eP50B, &cfg, Some(&cal)),
            (0.05, TauSource::Floor)
        );
        let (t, s) = tau(Metric::E2eP99A, &cfg, Some(&cal));
        let p = tied_pairs(6, 100.0, 200.0);
        assert_eq!(
            judge(Metric::E2eP99A, &p, t, s, TestPlan::default(), 1).verdict,
            MetricVerdict::Unstable
        );
        // The A/A noise is the 95th percentile of |b/a - 1| over pairs.
        let pairs: Vec<_> = (1..=20)
            .map(|i| {
                let a: BTreeMap<Metric, f64> = [(Metric::E2eP50A, 100.0)].into_iter().collect();
                let b: BTreeMap<Metric, f64> =
                    [(Metric::E2eP50A, 100.0 + i as f64)].into_iter().collect();
                (a, b)
            })
            .collect();
        let n = calibrate(&pairs);
        assert!((n["e2e_p50_a"] - 0.20).abs() < 1e-9, "{n:?}");
    }

    #[test]
    fn the_gate_section_names_unknown_metrics() {
        let cfg = GateConfig {
            metrics: vec!["e2e_p50_a".into(), "latency".into()],
            ..Default::default()
        };
        assert!(cfg.resolve().unwrap_err().contains("`latency`"));
        let mut cfg = GateConfig::default();
        cfg.thresholds.insert("bogus".into(), 0.1);
        assert!(cfg.resolve().unwrap_err().contains("gate.thresholds"));
        assert_eq!(GateConfig::default().resolve().unwrap().len(), 12);
    }
}
