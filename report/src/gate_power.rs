//! The gate's power, simulated (no cells): how often its statistics, both stages,
//! call a metric a regression, a pass or inconclusive, for a known effect and a
//! realistic noise. The noise is a sample of A/A pairs' log-ratios (a calibration's
//! legs, `crossbench selftest gate-power`); each simulated pair draws one of them
//! with a random sign (an A/A pair's two legs are exchangeable, so its log-ratio is
//! as likely negated) and adds ln(1 + effect) in the metric's bad direction.
//! docs/gate.md has the table this produces.

use std::fmt::Write as _;

use serde::Serialize;

use crate::gate::{judge, Metric, MetricVerdict, PairFigures, TauSource, TestPlan};
use crate::stats::Rng;

/// How a simulated gate ended, counted over the repetitions of one case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    pub reps: usize,
    /// Stage 1 flagged a regression.
    pub stage1: usize,
    /// Both stages flagged it: the gate's exit 6.
    pub confirmed: usize,
    /// The metric passed (its bad-side bound within τ; an improvement included).
    pub pass: usize,
    /// Inconclusive: stage 1 not significant beyond τ, or stage 2 could not confirm.
    pub inconclusive: usize,
}

impl Rates {
    pub fn rate(&self, n: usize) -> f64 {
        n as f64 / self.reps.max(1) as f64
    }
}

/// One case: a metric's noise, its τ, an effect and a number of pairs.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub metric: String,
    pub tau: f64,
    /// The effect as a label (`0`, `τ/2`, `τ`, `2τ`) and as a fraction.
    pub effect_label: String,
    pub effect: f64,
    pub pairs: usize,
    pub rates: Rates,
}

/// `pairs` simulated pairs of `m`: the baseline at 100, the candidate at 100 × the
/// effect and a noise draw, in the metric's bad direction.
fn simulated(
    m: Metric,
    noise: &[f64],
    effect: f64,
    pairs: usize,
    rng: &mut Rng,
) -> Vec<PairFigures> {
    let bad = match m.better() {
        crate::gate::Better::Lower => 1.0,
        crate::gate::Better::Higher => -1.0,
    };
    (0..pairs)
        .map(|_| {
            let e = noise[rng.below(noise.len())];
            let sign = if rng.next_u64() & 1 == 1 { 1.0 } else { -1.0 };
            let d = bad * (1.0 + effect).ln() + sign * e;
            (Some(100.0), Some(100.0 * d.exp()))
        })
        .collect()
}

/// One metric's simulation: its A/A noise (log-ratios), τ, the test, the
/// repetitions per case and the seed.
#[derive(Debug, Clone)]
pub struct Sim<'a> {
    pub metric: Metric,
    pub noise: &'a [f64],
    pub tau: f64,
    pub test: TestPlan,
    pub reps: usize,
    pub seed: u64,
}

/// The effects the table shows, as multiples of τ.
pub const EFFECTS: [(&str, f64); 4] = [("0", 0.0), ("τ/2", 0.5), ("τ", 1.0), ("2τ", 2.0)];
/// The pairs the table shows.
pub const PAIRS: [usize; 3] = [5, 10, 20];

impl Sim<'_> {
    /// Run `reps` gates with this effect and pairs, both stages as the gate runs them.
    pub fn run(&self, effect: f64, pairs: usize) -> Rates {
        let mut r = Rates {
            reps: self.reps,
            ..Rates::default()
        };
        if self.noise.is_empty() {
            return r;
        }
        let m = self.metric;
        let mut rng = Rng::new(self.seed);
        let stage = |rng: &mut Rng, s: u64| {
            judge(
                m,
                &simulated(m, self.noise, effect, pairs, rng),
                self.tau,
                TauSource::Scenario,
                self.test,
                s,
            )
            .verdict
        };
        for i in 0..self.reps {
            let s = self.seed ^ (i as u64).wrapping_mul(0x9E37_79B9);
            match stage(&mut rng, s) {
                MetricVerdict::Regression => {
                    r.stage1 += 1;
                    match stage(&mut rng, s ^ 2) {
                        MetricVerdict::Regression => r.confirmed += 1,
                        MetricVerdict::Inconclusive => r.inconclusive += 1,
                        _ => r.pass += 1,
                    }
                }
                MetricVerdict::Inconclusive => r.inconclusive += 1,
                _ => r.pass += 1,
            }
        }
        r
    }

    /// Every case: [`EFFECTS`] × [`PAIRS`].
    pub fn cases(&self) -> Vec<Case> {
        let mut out = Vec::new();
        for (label, k) in EFFECTS {
            for pairs in PAIRS {
                let effect = k * self.tau;
                out.push(Case {
                    metric: self.metric.name().into(),
                    tau: self.tau,
                    effect_label: label.into(),
                    effect,
                    pairs,
                    rates: self.run(effect, pairs),
                });
            }
        }
        out
    }
}

/// The A/A noise of a sample of log-ratios, in words: its count and the spread of
/// the ratios (`exp` of the quartiles and extremes of |log-ratio|).
pub fn noise_text(noise: &[f64]) -> String {
    let mut a: Vec<f64> = noise.iter().map(|x| x.abs()).collect();
    a.sort_by(f64::total_cmp);
    if a.is_empty() {
        return "no A/A pairs".into();
    }
    let q = |p: f64| a[((p * (a.len() - 1) as f64).round() as usize).min(a.len() - 1)];
    format!(
        "{} A/A pairs, |ratio − 1| median {:.1} %, 90th percentile {:.1} %, largest {:.1} %",
        a.len(),
        (q(0.5).exp() - 1.0) * 100.0,
        (q(0.9).exp() - 1.0) * 100.0,
        (a[a.len() - 1].exp() - 1.0) * 100.0
    )
}

/// The Markdown table of a metric's cases: one row per effect and pairs.
pub fn table(cases: &[Case]) -> String {
    let mut s = String::from(
        "| effect | pairs | stage 1 flags | confirmed (exit 6) | pass | inconclusive |\n|---|---|---|---|---|---|\n",
    );
    for c in cases {
        let r = &c.rates;
        let _ = writeln!(
            s,
            "| {} ({:+.1} %) | {} | {:.1} % | **{:.1} %** | {:.1} % | {:.1} % |",
            c.effect_label,
            c.effect * 100.0,
            c.pairs,
            r.rate(r.stage1) * 100.0,
            r.rate(r.confirmed) * 100.0,
            r.rate(r.pass) * 100.0,
            r.rate(r.inconclusive) * 100.0
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(metric: Metric, noise: &[f64], reps: usize) -> Sim<'_> {
        Sim {
            metric,
            noise,
            tau: 0.05,
            test: TestPlan::default(),
            reps,
            seed: 1,
        }
    }

    /// No noise at all (ties): an effect of 2τ is confirmed every time from 5 pairs,
    /// none is never flagged and always passes.
    #[test]
    fn without_noise_the_gate_is_certain() {
        let r = sim(Metric::E2eP50A, &[0.0], 50).run(0.10, 5);
        assert_eq!((r.confirmed, r.reps), (50, 50), "{r:?}");
        let r = sim(Metric::E2eP50A, &[0.0], 50).run(0.0, 5);
        assert_eq!((r.pass, r.stage1), (50, 0), "{r:?}");
        let r = sim(Metric::DeliveriesPerSec, &[0.0], 50).run(0.10, 5);
        assert_eq!(
            r.confirmed, 50,
            "the bad direction follows the metric: {r:?}"
        );
    }

    /// Under no effect, the confirmed rate stays below α (about α² with two stages),
    /// whatever the noise.
    #[test]
    fn false_alarms_stay_below_alpha() {
        let noise = [0.01, 0.03, 0.02, 0.08, 0.005, 0.04];
        let r = sim(Metric::E2eP50A, &noise, 1000).run(0.0, 10);
        assert!(r.rate(r.confirmed) <= 0.05, "{r:?}");
        assert!(r.rate(r.stage1) <= 0.06, "{r:?}");
        assert_eq!(r.confirmed + r.pass + r.inconclusive, r.reps, "{r:?}");
    }
}
