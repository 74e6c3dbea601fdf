//! Findings: the published pages' claims, each as a pair (or series) of campaign
//! arms whose direction is the claim, judged here as **holds**, **does not hold** or
//! **inconclusive** from the measured ratio and its interval, or **not testable here**
//! when its preconditions fail ([`requires`]); judged per sitting and combined across
//! sittings ([`sittings`]). docs/findings.md is generated from the sittings of a
//! findings campaign by `crossbench findings`.
//!
//! A verdict rests only on repeats that held their load, unless the finding says why
//! repeats that did not may count (`not_held`): a median over an overloaded repeat
//! compares a backlog, not the system's answer to the question.

pub mod forest;
pub mod requires;
pub mod sittings;

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::campaign::{ArmView, CampaignView, CI_LEVEL, CI_SEED};
use crate::cell::CellRecord;
use crate::stats::{coverage, fisher_greater, ratio_ci, Interval, DEFAULT_RESAMPLES};
use cell_record::Outcome;

pub use requires::Requirement;

/// A published claim and how to check it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub id: String,
    pub title: String,
    /// What the published page says (our words), and where.
    #[serde(default)]
    pub published: String,
    #[serde(default)]
    pub source: String,
    pub checks: Vec<Check>,
    /// The conditions under which the question can be asked here ([`requires`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Requirement>,
    /// Why repeats that did not hold their load may count in this finding's ratios
    /// (empty: they do not).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_held: String,
    /// crossbench's own finding, not one of the published pages': listed apart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own: bool,
    /// How the finding is scaled against the seed here (rate, lanes, window, cores)
    /// and which products are compared: shown under its title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scaling: String,
    /// Why the finding does not hold here, or is inconclusive, as far as it was
    /// measured: our words, naming where the evidence is. The page shows it under a
    /// verdict other than **holds** ([`why_line`]).
    #[serde(default)]
    pub why: String,
}

impl Finding {
    /// Every arm the finding reads: its checks' and its preconditions'.
    pub fn arms(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for k in &self.checks {
            let (a, b) = match k {
                Check::Ratio { a, b, .. } | Check::Failures { a, b } => (a, b),
            };
            v.extend([a.as_str(), b.as_str()]);
        }
        v.extend(self.requires.iter().map(|r| r.arm.as_str()));
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether the finding says something checkable: its preconditions each name a
    /// condition.
    pub fn validate(&self) -> Result<(), String> {
        self.requires.iter().try_for_each(Requirement::validate)
    }
}

/// One check: a ratio of two arms' medians with an expected direction, or failures
/// in one arm and none in the other.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "kebab-case")]
pub enum Check {
    /// metric(a) ÷ metric(b), medians over PASS repeats.
    Ratio {
        metric: Metric,
        a: String,
        b: String,
        expect: Direction,
        /// For `expect: near`: the ratio may differ from 1 by this much (0.1 = ±10 %).
        #[serde(default)]
        tolerance: f64,
        /// The published page's ratio, when it gives one.
        #[serde(default)]
        published_ratio: Option<f64>,
    },
    /// Arm `a` has correctness failures (FAIL repeats) and arm `b` has none, with
    /// `a`'s failures more than chance (Fisher's exact test, [`failures_judgement`]).
    Failures { a: String, b: String },
}

/// The figure a ratio check reads from each PASS repeat.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    E2eP50Ms,
    E2eP99Ms,
    /// Deliveries made while the rated window ran, per second (the service rate).
    WindowDeliveriesPerSec,
    /// Deliveries of rated events per second (a backlog drained later counts).
    DeliveriesPerSec,
    WindowServedFraction,
    SystemCores,
    /// Stream cells: partitions created ÷ the space (1: every partition existed).
    PartitionsCreatedFraction,
    /// Stream cells: partitions created per second inside the rated window (0: the
    /// space was complete before it).
    PartitionsCreatedPerSecRated,
    /// 1 for a repeat the checker failed (a loss, reorder or duplicate reached it), 0
    /// for one it passed; read by preconditions (`stat: max`: in at least one repeat).
    CheckerFailed,
}

impl Metric {
    pub fn read(self, c: &CellRecord) -> Option<f64> {
        let t = &c.result.throughput;
        match self {
            Metric::E2eP50Ms => Some(c.headline_e2e().p50_ms),
            Metric::E2eP99Ms => Some(c.headline_e2e().p99_ms),
            Metric::WindowDeliveriesPerSec => {
                let six_r = 6.0 * c.result.workload.rate_events_per_sec as f64;
                match c.is_stream() {
                    true => Some(t.popped_per_sec),
                    false => Some(c.served_in_window() * six_r),
                }
            }
            Metric::DeliveriesPerSec => Some(t.deliveries_per_sec),
            Metric::WindowServedFraction => Some(c.served_in_window()),
            Metric::SystemCores => c.system_cores(),
            Metric::PartitionsCreatedFraction => c
                .result
                .partitions
                .as_ref()
                .filter(|p| p.space > 0)
                .map(|p| p.created as f64 / p.space as f64),
            Metric::PartitionsCreatedPerSecRated => c
                .result
                .partitions
                .as_ref()
                .map(|p| p.created_per_sec_rated),
            Metric::CheckerFailed => match c.result.outcome {
                Outcome::Fail => Some(1.0),
                Outcome::Pass => Some(0.0),
                _ => None,
            },
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::E2eP50Ms => "e2e p50",
            Metric::E2eP99Ms => "e2e p99",
            Metric::WindowDeliveriesPerSec => "deliveries/s in the rated window",
            Metric::DeliveriesPerSec => "deliveries/s of rated events",
            Metric::WindowServedFraction => "served in the rated window",
            Metric::SystemCores => "system cores",
            Metric::PartitionsCreatedFraction => "partitions created of the space",
            Metric::PartitionsCreatedPerSecRated => {
                "partitions created per second in the rated window"
            }
            Metric::CheckerFailed => "repeats the checker failed (1) or passed (0)",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The ratio is below 1.
    Below,
    /// The ratio is above 1.
    Above,
    /// The ratio is 1 within the tolerance.
    Near,
}

/// How a check (or a finding) came out here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Judgement {
    Holds,
    DoesNotHold,
    Inconclusive,
    /// An arm did not run here (e.g. no Queen server).
    NotRun,
    /// Its preconditions failed: the question cannot be asked with these records.
    NotTestable,
    /// Sittings that judged it disagree ([`sittings::combine`]).
    Varies,
}

impl Judgement {
    pub fn text(self) -> &'static str {
        match self {
            Judgement::Holds => "holds",
            Judgement::DoesNotHold => "does not hold",
            Judgement::Inconclusive => "inconclusive",
            Judgement::NotRun => "not run here",
            Judgement::NotTestable => "not testable here",
            Judgement::Varies => "varies between sittings",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub judgement: Judgement,
    /// What was measured, in words.
    pub measured: String,
    pub ratio: Option<Interval>,
}

fn arm<'a>(c: &'a CampaignView, id: &str) -> Result<&'a ArmView, String> {
    c.arm(id).ok_or_else(|| {
        format!(
            "arm `{id}` is not in campaign {} (its arms: {})",
            c.name,
            c.arms
                .iter()
                .map(|a| a.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Judge a ratio interval against a direction.
pub fn judge_ratio(i: &Interval, expect: Direction, tolerance: f64) -> Judgement {
    match expect {
        Direction::Below if i.high < 1.0 => Judgement::Holds,
        Direction::Below if i.low > 1.0 => Judgement::DoesNotHold,
        Direction::Above if i.low > 1.0 => Judgement::Holds,
        Direction::Above if i.high < 1.0 => Judgement::DoesNotHold,
        Direction::Near if i.low >= 1.0 - tolerance && i.high <= 1.0 + tolerance => {
            Judgement::Holds
        }
        Direction::Near if i.low > 1.0 + tolerance || i.high < 1.0 - tolerance => {
            Judgement::DoesNotHold
        }
        _ => Judgement::Inconclusive,
    }
}

/// Judge one check on campaign `c`. Ratios use the PASS repeats that held their load,
/// or every PASS repeat when `with_not_held` (the finding's `not_held` says why).
pub fn check(c: &CampaignView, k: &Check, with_not_held: bool) -> Result<CheckResult, String> {
    match k {
        Check::Ratio {
            metric,
            a,
            b,
            expect,
            tolerance,
            published_ratio,
        } => {
            let (aa, bb) = (arm(c, a)?, arm(c, b)?);
            if aa.not_run.is_some() || bb.not_run.is_some() {
                return Ok(CheckResult {
                    judgement: Judgement::NotRun,
                    measured: aa
                        .not_run
                        .clone()
                        .or(bb.not_run.clone())
                        .unwrap_or_default(),
                    ratio: None,
                });
            }
            let take = |arm: &ArmView| -> (Vec<f64>, usize) {
                let pass: Vec<&CellRecord> = arm.passed().collect();
                let kept: Vec<f64> = pass
                    .iter()
                    .filter(|c| with_not_held || c.held())
                    .filter_map(|c| metric.read(c))
                    .collect();
                let left_out = pass.iter().filter(|c| !with_not_held && !c.held()).count();
                (kept, left_out)
            };
            let ((va, la), (vb, lb)) = (take(aa), take(bb));
            let left_out = match (la, lb) {
                (0, 0) => String::new(),
                _ => format!(
                    "; left out, not having held their load: {la} PASS repeats of `{a}`, {lb} of `{b}`"
                ),
            };
            let ci = ratio_ci(&va, &vb, CI_LEVEL, DEFAULT_RESAMPLES, CI_SEED);
            let Some(i) = ci else {
                return Ok(CheckResult {
                    judgement: Judgement::Inconclusive,
                    measured: format!(
                        "no ratio: {} usable repeats of `{a}` ({}), {} of `{b}` ({}){left_out}",
                        va.len(),
                        aa.outcomes.label(),
                        vb.len(),
                        bb.outcomes.label()
                    ),
                    ratio: None,
                });
            };
            let expected = match expect {
                Direction::Below => "below 1".to_string(),
                Direction::Above => "above 1".to_string(),
                Direction::Near => format!("1 ± {:.0} %", tolerance * 100.0),
            };
            Ok(CheckResult {
                judgement: judge_ratio(&i, *expect, *tolerance),
                measured: format!(
                    "{} `{a}` ÷ `{b}` = {:.3} [{:.3}, {:.3}] (interval: {}; expected {expected}; {} vs {} repeats{}){left_out}{}",
                    metric.name(),
                    i.estimate,
                    i.low,
                    i.high,
                    coverage::level_label(&i),
                    va.len(),
                    vb.len(),
                    if with_not_held { ", whether or not they held" } else { " that held" },
                    published_ratio.map_or(String::new(), |p| format!("; published ratio {p:.3}"))
                ),
                ratio: Some(i),
            })
        }
        Check::Failures { a, b } => {
            let (aa, bb) = (arm(c, a)?, arm(c, b)?);
            if aa.not_run.is_some() || bb.not_run.is_some() {
                return Ok(CheckResult {
                    judgement: Judgement::NotRun,
                    measured: aa
                        .not_run
                        .clone()
                        .or(bb.not_run.clone())
                        .unwrap_or_default(),
                    ratio: None,
                });
            }
            let (fa, fb) = (aa.outcomes.fail, bb.outcomes.fail);
            // The runs that ended with a verdict: PASS or FAIL (VOID, REFUSED and the
            // rest say nothing of correctness).
            let (na, nb) = (fa + aa.outcomes.pass, fb + bb.outcomes.pass);
            let p = fisher_greater(fa, na, fb, nb);
            let judgement = failures_judgement(fa, na, fb, nb);
            Ok(CheckResult {
                judgement,
                measured: format!(
                    "`{a}`: {} ; `{b}`: {} (FAIL in {fa} of {na} against {fb} of {nb} runs with a verdict{}; holds when `{b}` never fails and Fisher's exact one-sided p < {FAILURES_ALPHA}); {}",
                    aa.outcomes.label(),
                    bb.outcomes.label(),
                    p.map_or(String::new(), |p| format!(", Fisher p = {}", p_text(p))),
                    lost_messages(&[aa, bb]),
                ),
                ratio: None,
            })
        }
    }
}

/// Each arm's lost messages, counted once (distinct key and seq acknowledged and never
/// delivered to at least one group; a message its first hop lost is not counted again
/// for the groups after it), per repeat with a verdict, in run order.
fn lost_messages(arms: &[&ArmView]) -> String {
    let per_arm: Vec<String> = arms
        .iter()
        .map(|arm| {
            let per_run: Vec<Option<u64>> = arm
                .cells
                .iter()
                .filter(|c| matches!(c.result.outcome, Outcome::Pass | Outcome::Fail))
                .map(|c| c.result.verdict.lost_messages())
                .collect();
            let counts: Vec<String> = per_run
                .iter()
                .map(|n| n.map_or("not counted".to_string(), |n| n.to_string()))
                .collect();
            let total: Option<u64> = per_run.iter().copied().sum();
            format!(
                "`{}` {}{}",
                arm.id,
                total.map_or("not counted in every run".to_string(), |t| t.to_string()),
                if counts.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", counts.join(", "))
                }
            )
        })
        .collect();
    format!(
        "lost messages (each counted once, however many groups missed it): {}",
        per_arm.join(", ")
    )
}

/// The level below which a split of FAIL runs is taken as real.
pub const FAILURES_ALPHA: f64 = 0.05;

/// A failures check: arm `a` fails in `fa` of `na` runs with a verdict, arm `b` in `fb`
/// of `nb`. It holds when `b` never fails and `a`'s failures are more than chance
/// (Fisher's exact one-sided p < [`FAILURES_ALPHA`]); it does not hold when `b` fails
/// too, or when `a` never fails in as many runs as would have shown a difference;
/// otherwise it is inconclusive (too few runs either way).
pub fn failures_judgement(fa: u32, na: u32, fb: u32, nb: u32) -> Judgement {
    match fisher_greater(fa, na, fb, nb) {
        None => Judgement::Inconclusive,
        Some(_) if fb > 0 => Judgement::DoesNotHold,
        Some(p) if p < FAILURES_ALPHA => Judgement::Holds,
        // `a` never failed, and with these counts a split of all its runs would
        // have been significant: the effect is absent, not merely unseen.
        Some(_) if fa == 0 && fisher_greater(na, na, 0, nb).is_some_and(|p| p < FAILURES_ALPHA) => {
            Judgement::DoesNotHold
        }
        Some(_) => Judgement::Inconclusive,
    }
}

fn p_text(p: f64) -> String {
    if p < 0.0001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

/// A finding holds when every check holds; does not hold when any check does not;
/// is not run when a check's arm did not run; inconclusive otherwise.
pub fn overall(results: &[Judgement]) -> Judgement {
    if results.contains(&Judgement::NotRun) {
        Judgement::NotRun
    } else if results.contains(&Judgement::DoesNotHold) {
        Judgement::DoesNotHold
    } else if !results.is_empty() && results.iter().all(|j| *j == Judgement::Holds) {
        Judgement::Holds
    } else {
        Judgement::Inconclusive
    }
}

/// The line under a finding's verdict that says why it came out as it did: none when
/// it holds or did not run; the campaign file's `why` when it gives one; otherwise
/// a plain statement that no reason was examined, so a finding that does not hold is
/// never left to look explained.
pub fn why_line(o: Judgement, why: &str) -> Option<String> {
    match o {
        Judgement::Holds | Judgement::NotRun => None,
        // The failed preconditions say why it could not be asked; the file's `why`
        // adds what was learnt of the question elsewhere, when it gives one.
        Judgement::NotTestable => {
            (!why.trim().is_empty()).then(|| format!("What else is known: {}", why.trim()))
        }
        Judgement::DoesNotHold | Judgement::Inconclusive | Judgement::Varies => {
            Some(if why.trim().is_empty() {
                "Why: not examined (the campaign file gives no reason).".to_string()
            } else {
                format!("Why: {}", why.trim())
            })
        }
    }
}

/// How one finding came out in one sitting.
#[derive(Debug, Clone)]
pub struct FindingResult {
    pub judgement: Judgement,
    /// Each precondition, met or not, with its figures.
    pub preconditions: Vec<requires::RequirementResult>,
    /// Each check; when a precondition failed, what they would have read (not
    /// judged).
    pub checks: Vec<CheckResult>,
}

/// Judge finding `f` on one sitting `c`: its preconditions first (a failed one makes
/// it **not testable here**, whatever the checks read), then its checks.
pub fn judge(c: &CampaignView, f: &Finding) -> Result<FindingResult, String> {
    let preconditions = f
        .requires
        .iter()
        .map(|r| requires::evaluate(c, r))
        .collect::<Result<Vec<_>, _>>()?;
    let checks = f
        .checks
        .iter()
        .map(|k| check(c, k, !f.not_held.trim().is_empty()))
        .collect::<Result<Vec<_>, _>>()?;
    // The finding's arms must stand on one footing within the sitting (one machine,
    // one budget, one product of each system): a comparison across them is not
    // one, whatever its ratio.
    let mut preconditions = preconditions;
    let cells: Vec<&CellRecord> = f
        .arms()
        .iter()
        .filter_map(|a| c.arm(a))
        .flat_map(|a| &a.cells)
        .collect();
    if let Some(mark) = crate::comparability::not_comparable(&cells) {
        preconditions.push(requires::RequirementResult {
            met: false,
            text: format!("the arms stand on one footing: {mark}"),
        });
    }
    let js: Vec<Judgement> = checks.iter().map(|r| r.judgement).collect();
    let judgement = if js.contains(&Judgement::NotRun) {
        Judgement::NotRun
    } else if preconditions.iter().any(|p| !p.met) {
        Judgement::NotTestable
    } else {
        overall(&js)
    };
    Ok(FindingResult {
        judgement,
        preconditions,
        checks,
    })
}

/// The forest plots a findings page shows, as files beside it: the combined one
/// (every sitting's rows) and, when there are several sittings, one per sitting
/// that has rows to draw, `(sitting label, file)`.
#[derive(Debug, Clone, Default)]
pub struct ForestFiles {
    pub combined: Option<String>,
    pub per_sitting: Vec<(String, String)>,
}

/// docs/findings.md, from one sitting or several of the same campaign file.
pub fn render(
    sittings: &[sittings::Sitting],
    findings: &[Finding],
    command: &str,
    forests: &ForestFiles,
) -> Result<String, String> {
    let first = sittings.first().ok_or("no sitting given")?;
    let c = &first.view;
    let mut s = String::new();
    let _ = writeln!(s, "# The published findings, checked here\n");
    let _ = writeln!(
        s,
        "<!-- generated by `crossbench findings` (crossbench report v{}); do not edit by hand -->\n",
        crate::OUTPUT_VERSION
    );
    let _ = writeln!(
        s,
        "Each finding of the published pages, as a pair (or series) of arms of the campaign `{}` ({} repeats per arm, interleaved within each sitting), judged by the measured ratio of the arms' medians and its percentile-bootstrap interval: **holds** when the interval lies on the finding's side, **does not hold** when it lies on the other side, **inconclusive** when it straddles. The interval is nominally 95 %; from n repeats it cannot cover more than the range of n does, 1 − 2^(1−n) (75 % for 3, 94 % for 5), and it says so. Before any check, a finding's **preconditions** are checked from the records: where they fail, the question cannot be asked here and the finding is **not testable here**, with the figures that failed it, never \"does not hold\". Figures are medians over PASS repeats that held their load (a finding that lets repeats that did not hold count says why); VOID, FAIL and REFUSED repeats are counted, never averaged in. **Served** is the rated demand delivered within the rated window, at most 100 % (docs/record.md).\n",
        c.name, c.repeats
    );
    let _ = writeln!(
        s,
        "Each **sitting** is one whole run of the campaign on one machine; a finding is judged in each sitting that holds all its arms, and its arms never mix sittings. The combined verdict is the sittings' when they agree and **varies between sittings** otherwise: a verdict that holds in one sitting and not the next is not a finding. A sitting whose preconditions failed could not ask the question and gives no answer: the combined verdict then says in how many sittings it was answered. Each sitting's resource budget is in its row below: with none, the system and the loader shared the machine's cores. These machines are far from the published rigs; a finding that does not hold here is a result, not an error.\n"
    );
    let _ = writeln!(s, "Generated by:\n\n```sh\n{command}\n```\n");
    s.push_str(&sittings::table(sittings));
    s.push('\n');
    if let Some(file) = &forests.combined {
        let _ = writeln!(
            s,
            "![Each finding's ratio in each sitting with its interval, on a log axis: the side where the claim holds shaded, the seed's ratio as a cross, the colour the verdict]({file})\n"
        );
    }
    if !forests.per_sitting.is_empty() {
        let _ = writeln!(
            s,
            "<details><summary>The same, one picture per sitting</summary>\n"
        );
        for (label, file) in &forests.per_sitting {
            let _ = writeln!(s, "![The findings judged in {label}]({file})\n");
        }
        let _ = writeln!(s, "</details>\n");
    }

    let mut rows = Vec::new();
    let mut body = String::new();
    for f in findings {
        let per: Vec<Option<FindingResult>> = sittings
            .iter()
            .map(|st| match st.holds_arms(f) {
                true => judge(&st.view, f).map(Some),
                false => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        let judgements: Vec<Option<Judgement>> = per
            .iter()
            .map(|r| r.as_ref().map(|r| r.judgement))
            .collect();
        let combined = sittings::combine(&judgements);
        let answered = sittings::answered(&judgements);
        let cols: Vec<String> = per
            .iter()
            .map(|r| {
                r.as_ref().map_or("not in this sitting".into(), |r| {
                    r.judgement.text().to_string()
                })
            })
            .collect();
        let title = match f.own {
            true => format!("{} *(crossbench's own, not a published finding)*", f.title),
            false => f.title.clone(),
        };
        rows.push(format!(
            "| {} | {} | {} | **{}** |",
            f.id,
            title,
            cols.join(" | "),
            combined.text()
        ));
        let _ = writeln!(body, "## {}: {}\n", f.id, title);
        if !f.published.is_empty() {
            let _ = writeln!(
                body,
                "Published: {}{}\n",
                f.published,
                if f.source.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.source)
                }
            );
        }
        if !f.scaling.trim().is_empty() {
            let _ = writeln!(body, "Scaled here: {}\n", f.scaling.trim());
        }
        match &answered {
            Some(a) => {
                let _ = writeln!(body, "Here: **{}** ({a})\n", combined.text());
            }
            None => {
                let _ = writeln!(body, "Here: **{}**\n", combined.text());
            }
        }
        for (st, r) in sittings.iter().zip(&per) {
            let Some(r) = r else {
                let _ = writeln!(
                    body,
                    "{}: not in this sitting (it lacks an arm of the finding).\n",
                    st.label
                );
                continue;
            };
            let _ = writeln!(
                body,
                "{} ({}): **{}**\n",
                st.label,
                st.facts.short(),
                r.judgement.text()
            );
            for p in &r.preconditions {
                let _ = writeln!(
                    body,
                    "- precondition {}: {}",
                    if p.met { "met" } else { "**failed**" },
                    p.text
                );
            }
            let judged = r.judgement != Judgement::NotTestable;
            for k in &r.checks {
                let verdict = if judged {
                    k.judgement.text()
                } else {
                    "not judged"
                };
                let _ = writeln!(body, "- {verdict}: {}", k.measured);
            }
            body.push('\n');
        }
        if !f.not_held.trim().is_empty() {
            let _ = writeln!(
                body,
                "Repeats that did not hold their load count here because: {}\n",
                f.not_held.trim()
            );
        }
        if let Some(w) = why_line(combined, &f.why) {
            let _ = writeln!(body, "{w}\n");
        }
    }
    let heads: Vec<String> = sittings.iter().map(|st| st.label.clone()).collect();
    let _ = writeln!(
        s,
        "| finding | claim | {} | combined |\n|---|---|{}---|",
        heads.join(" | "),
        "---|".repeat(heads.len())
    );
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    s.push('\n');
    s.push_str(&body);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(low: f64, high: f64) -> Interval {
        Interval {
            estimate: (low + high) / 2.0,
            low,
            high,
            level: 0.95,
            n: 5,
        }
    }

    #[test]
    fn a_ratio_is_judged_by_where_its_interval_lies() {
        assert_eq!(
            judge_ratio(&iv(0.4, 0.8), Direction::Below, 0.0),
            Judgement::Holds
        );
        assert_eq!(
            judge_ratio(&iv(1.2, 1.8), Direction::Below, 0.0),
            Judgement::DoesNotHold
        );
        assert_eq!(
            judge_ratio(&iv(0.8, 1.2), Direction::Below, 0.0),
            Judgement::Inconclusive
        );
        assert_eq!(
            judge_ratio(&iv(1.1, 1.3), Direction::Above, 0.0),
            Judgement::Holds
        );
        assert_eq!(
            judge_ratio(&iv(0.95, 1.04), Direction::Near, 0.1),
            Judgement::Holds
        );
        assert_eq!(
            judge_ratio(&iv(1.2, 1.4), Direction::Near, 0.1),
            Judgement::DoesNotHold
        );
        assert_eq!(
            judge_ratio(&iv(1.05, 1.2), Direction::Near, 0.1),
            Judgement::Inconclusive
        );
        assert_eq!(
            overall(&[Judgement::Holds, Judgement::Inconclusive]),
            Judgement::Inconclusive
        );
        assert_eq!(
            overall(&[Judgement::Holds, Judgement::Holds]),
            Judgement::Holds
        );
        assert_eq!(
            overall(&[Judgement::Holds, Judgement::NotRun]),
            Judgement::NotRun
        );
    }

    #[test]
    fn a_failures_check_needs_more_than_chance() {
        use Judgement::*;
        // F7's evidence at ten runs an arm: every no-delay run lost messages.
        assert_eq!(failures_judgement(10, 10, 0, 10), Holds);
        // 4 of 10 against 0 of 10 is p = 0.043; 1 of 5 against 0 of 5 is a coin.
        assert_eq!(failures_judgement(4, 10, 0, 10), Holds);
        assert_eq!(failures_judgement(1, 5, 0, 5), Inconclusive);
        // The arm that must never fail did.
        assert_eq!(failures_judgement(10, 10, 1, 10), DoesNotHold);
        // Never failing in five runs against five is enough to say the effect is absent;
        // in two against two it is not.
        assert_eq!(failures_judgement(0, 5, 0, 5), DoesNotHold);
        assert_eq!(failures_judgement(0, 2, 0, 2), Inconclusive);
        // No runs with a verdict (all VOID): nothing to judge.
        assert_eq!(failures_judgement(0, 0, 0, 5), Inconclusive);
    }

    #[test]
    fn findings_parse_from_yaml() {
        let f: Vec<Finding> = serde_yaml::from_str(
            "- id: F3\n  title: t\n  checks:\n    - kind: failures\n      a: rr\n      b: head\n    - kind: ratio\n      metric: e2e_p50_ms\n      a: x\n      b: y\n      expect: below\n",
        )
        .unwrap();
        assert_eq!(f[0].checks.len(), 2);
        assert_eq!(f[0].why, "");
        assert!(serde_yaml::from_str::<Vec<Finding>>(
            "- id: F\n  title: t\n  checks: []\n  bogus: 1\n"
        )
        .is_err());
    }

    #[test]
    fn a_finding_that_does_not_hold_says_why_or_that_no_one_looked() {
        use Judgement::*;
        assert_eq!(why_line(Holds, "a reason"), None);
        assert_eq!(why_line(NotRun, "a reason"), None);
        assert_eq!(
            why_line(DoesNotHold, "  the pop scans every partition. "),
            Some("Why: the pop scans every partition.".to_string())
        );
        for o in [DoesNotHold, Inconclusive] {
            let l = why_line(o, " ").unwrap();
            assert!(l.contains("not examined"), "{l}");
        }
    }
}
