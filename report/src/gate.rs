//! The CI regression gate's decision (docs/gate.md), pure: given each leg's figures
//! of a baseline and a candidate arm, run paired and interleaved, say per metric
//! whether the candidate regressed beyond the noise, improved, or neither; and
//! render the verdict for CI systems (gate.json, JUnit XML, Markdown, GitLab
//! metrics.txt). Running the legs is the loader's business.
//!
//! One leg's summary is one observation. A metric **regresses** when a
//! randomization test of the difference of the arms' medians gives p < 0.01 **and**
//! the 95 % bootstrap interval of the ratio candidate ÷ baseline reaches beyond
//! 1 + τ in the metric's bad direction. τ is a floor (5 % for throughput, p50 and
//! cost, 10 % for p99 and above), raised to what an A/A calibration of this host
//! measured; a metric whose A/A noise exceeds 15 % is **unstable**: reported, never
//! failing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::cell::CellRecord;
use crate::stats::{median, permutation_p, ratio_ci, Interval};

/// Relabelings of the permutation test and resamples of the interval.
pub const RELABELINGS: usize = 10_000;
pub const RESAMPLES: usize = 10_000;
/// Significance the permutation test must reach.
pub const P_MAX: f64 = 0.01;
/// Above this A/A noise a metric is unstable.
pub const UNSTABLE_TAU: f64 = 0.15;
/// Pairs below this are refused; below `CONFIDENT_PAIRS` the verdict is low-confidence.
pub const MIN_PAIRS: usize = 5;
pub const CONFIDENT_PAIRS: usize = 9;
pub const DEFAULT_PAIRS: usize = 10;
/// More VOID legs than this share of all legs makes the gate inconclusive.
pub const MAX_VOID_SHARE: f64 = 0.3;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TauSource {
    Floor,
    Scenario,
    Calibration,
}

/// One metric's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricVerdict {
    Pass,
    Regression,
    Improvement,
    Unstable,
    /// Too few observations to judge.
    NoData,
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricResult {
    pub metric: String,
    pub better: Better,
    pub baseline_median: Option<f64>,
    pub candidate_median: Option<f64>,
    /// candidate ÷ baseline, with its 95 % interval.
    pub ratio: Option<Interval>,
    pub p: Option<f64>,
    pub tau: f64,
    pub tau_source: TauSource,
    pub verdict: MetricVerdict,
    /// Flagged in the first stage and confirmed (or not) by fresh pairs.
    pub confirmed: Option<bool>,
    pub n_baseline: usize,
    pub n_candidate: usize,
}

impl MetricResult {
    /// The τ floor of this result's metric.
    pub fn floor(&self) -> f64 {
        Metric::from_name(&self.metric).map_or(0.05, Metric::floor)
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

/// Judge one metric from the baseline's and the candidate's legs.
pub fn judge(
    m: Metric,
    base: &[f64],
    cand: &[f64],
    tau: f64,
    tau_source: TauSource,
    seed: u64,
) -> MetricResult {
    let mut r = MetricResult {
        metric: m.name().into(),
        better: m.better(),
        baseline_median: median(base),
        candidate_median: median(cand),
        ratio: None,
        p: None,
        tau,
        tau_source,
        verdict: MetricVerdict::NoData,
        confirmed: None,
        n_baseline: base.len(),
        n_candidate: cand.len(),
    };
    if base.len() < 3 || cand.len() < 3 {
        return r;
    }
    r.ratio = ratio_ci(cand, base, 0.95, RESAMPLES, seed);
    r.p = permutation_p(cand, base, RELABELINGS, seed ^ 0x9E37);
    let (Some(i), Some(p)) = (r.ratio, r.p) else {
        return r;
    };
    r.verdict = if tau > UNSTABLE_TAU && tau_source == TauSource::Calibration {
        MetricVerdict::Unstable
    } else {
        let (worse, better) = match m.better() {
            Better::Lower => (
                i.high > 1.0 + tau && i.estimate > 1.0,
                i.low < 1.0 - tau && i.estimate < 1.0,
            ),
            Better::Higher => (
                i.low < 1.0 - tau && i.estimate < 1.0,
                i.high > 1.0 + tau && i.estimate > 1.0,
            ),
        };
        if p < P_MAX && worse {
            MetricVerdict::Regression
        } else if p < P_MAX && better {
            MetricVerdict::Improvement
        } else {
            MetricVerdict::Pass
        }
    };
    r
}

/// The gate's overall verdict, and the exit it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No regression beyond the noise (exit 0).
    Pass,
    /// A confirmed regression (exit 6).
    Regression,
    /// Unstable metrics only, too many VOID legs, or too few pairs (exit 7).
    Inconclusive,
    /// The candidate failed correctness in a leg (exit 3).
    CandidateFail,
}

/// gate.json (schema_version 1).
#[derive(Debug, Clone, Serialize)]
pub struct GateRecord {
    pub schema_version: u32,
    pub kind: &'static str,
    pub scenario: String,
    pub baseline_sets: Vec<String>,
    pub candidate_sets: Vec<String>,
    pub pairs: usize,
    pub low_confidence: bool,
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
#[derive(Debug, Clone, Serialize)]
pub struct Leg {
    pub arm: String,
    pub pair: usize,
    pub stage: u8,
    pub dir: String,
    pub outcome: String,
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
                MetricVerdict::Unstable | MetricVerdict::NoData => {
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
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## crossbench gate: **{}**\n",
            match self.verdict {
                Verdict::Pass => "no regression",
                Verdict::Regression => "REGRESSION",
                Verdict::Inconclusive => "inconclusive",
                Verdict::CandidateFail => "candidate FAILED correctness",
            }
        );
        let _ = writeln!(
            s,
            "`{}`: baseline `{}` against candidate `{}`, {} pairs (ABBA){}, {} VOID legs excluded.\n",
            self.scenario,
            self.baseline_sets.join(" "),
            self.candidate_sets.join(" "),
            self.pairs,
            if self.low_confidence { ", low confidence (fewer than 9 pairs)" } else { "" },
            self.void_legs
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
        let _ = writeln!(s, "| metric | baseline | candidate | ratio [95 % CI] | p | τ | verdict |\n|---|---|---|---|---|---|---|");
        for m in &self.metrics {
            let f = |v: Option<f64>| v.map_or("—".into(), |x| format!("{x:.4}"));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.1} % ({}) | {} |",
                m.metric,
                f(m.baseline_median),
                f(m.candidate_median),
                m.ratio.map_or("—".into(), |i| format!(
                    "{:.3} [{:.3}, {:.3}]",
                    i.estimate, i.low, i.high
                )),
                m.p.map_or("—".into(), |p| format!("{p:.4}")),
                m.tau * 100.0,
                match m.tau_source {
                    TauSource::Floor => "floor",
                    TauSource::Scenario => "scenario",
                    TauSource::Calibration => "A/A",
                },
                verdict_text(m)
            );
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

fn verdict_text(m: &MetricResult) -> &'static str {
    match (m.verdict, m.confirmed) {
        (MetricVerdict::Regression, Some(false)) => "not confirmed",
        (MetricVerdict::Regression, _) => "**REGRESSION**",
        (MetricVerdict::Improvement, _) => "improvement",
        (MetricVerdict::Unstable, _) => "unstable (reported only)",
        (MetricVerdict::NoData, _) => "no data",
        (MetricVerdict::Pass, _) => "pass",
    }
}

/// One line on a metric.
pub fn describe(m: &MetricResult) -> String {
    format!(
        "{}: candidate ÷ baseline {} (p {}, τ {:.1} %): {}",
        m.metric,
        m.ratio.map_or("—".into(), |i| format!(
            "{:.3} [{:.3}, {:.3}]",
            i.estimate, i.low, i.high
        )),
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
            schema_version: 1,
            kind: "gate",
            scenario: "s.yaml".into(),
            baseline_sets: vec![],
            candidate_sets: vec![],
            pairs: 10,
            low_confidence: false,
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

    /// Legs whose p50 is `level` with multiplicative noise `cv`.
    fn legs(rng: &mut Rng, n: usize, level: f64, cv: f64) -> Vec<f64> {
        (0..n).map(|_| level * (1.0 + cv * rng.normal())).collect()
    }

    fn flagged(base: &[f64], cand: &[f64], tau: f64, seed: u64) -> bool {
        judge(Metric::E2eP50A, base, cand, tau, TauSource::Floor, seed).verdict
            == MetricVerdict::Regression
    }

    #[test]
    fn an_aa_comparison_flags_nothing_in_95_of_100_trials() {
        let mut rng = Rng::new(1);
        let mut flags = 0;
        for t in 0..100 {
            let a = legs(&mut rng, 10, 50.0, 0.04);
            let b = legs(&mut rng, 10, 50.0, 0.04);
            if flagged(&a, &b, 0.05, t) {
                flags += 1;
            }
        }
        assert!(flags <= 5, "{flags} of 100 A/A trials flagged");
    }

    #[test]
    fn a_20_percent_p50_shift_with_10_pairs_is_flagged_in_95_of_100_trials() {
        let mut rng = Rng::new(2);
        let mut flags = 0;
        for t in 0..100 {
            let a = legs(&mut rng, 10, 50.0, 0.04);
            let b = legs(&mut rng, 10, 60.0, 0.04);
            if flagged(&a, &b, 0.05, t) {
                flags += 1;
            }
        }
        assert!(flags >= 95, "only {flags} of 100 shifted trials flagged");
    }

    #[test]
    fn a_2_percent_shift_under_a_5_percent_tau_is_never_flagged() {
        let mut rng = Rng::new(3);
        for t in 0..100 {
            let a = legs(&mut rng, 10, 50.0, 0.005);
            let b = legs(&mut rng, 10, 51.0, 0.005);
            assert!(!flagged(&a, &b, 0.05, t), "trial {t}: {a:?} {b:?}");
        }
    }

    #[test]
    fn an_improvement_is_reported_and_direction_follows_the_metric() {
        // Ten pairs: with a median statistic, fewer cannot reach p < 0.01.
        let a = [
            100.0, 101.0, 99.0, 100.5, 100.2, 99.8, 100.1, 99.9, 100.3, 99.7,
        ];
        let b: Vec<f64> = a.iter().map(|x| x * 0.7).collect();
        let r = judge(Metric::E2eP50A, &a, &b, 0.05, TauSource::Floor, 1);
        assert_eq!(r.verdict, MetricVerdict::Improvement, "{r:?}");
        // Fewer deliveries per second is the bad direction.
        assert_eq!(
            judge(Metric::DeliveriesPerSec, &a, &b, 0.05, TauSource::Floor, 1).verdict,
            MetricVerdict::Regression
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
        let a = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8];
        let b = [200.0, 201.0, 199.0, 200.5, 200.2, 199.8];
        assert_eq!(
            judge(Metric::E2eP99A, &a, &b, t, s, 1).verdict,
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
