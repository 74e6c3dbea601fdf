//! The median of repeated observations and its bootstrap confidence interval, and
//! the ratio of two medians with its interval (percentile bootstrap: resample each
//! arm with replacement, take the statistic, read the interval from the
//! percentiles of those statistics).

use serde::{Deserialize, Deserializer, Serialize};

use crate::stats::rng::Rng;

/// Resamples of a bootstrap unless the caller says otherwise.
pub const DEFAULT_RESAMPLES: usize = 10_000;

/// A point estimate and its confidence interval. A bound that is not finite (the
/// gate's ∞, which serde_json writes as `null`) reads back as NaN: a reader treats
/// it as "no bound".
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    #[serde(deserialize_with = "null_as_nan")]
    pub estimate: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub low: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub high: f64,
    /// The confidence level (0.95).
    pub level: f64,
    /// Observations behind it (for a ratio, the smaller arm's). Below 2 there is no
    /// interval to speak of: every resample is the one observation. (Absent from
    /// gate.json schema 1: read as 0.)
    #[serde(default)]
    pub n: usize,
}

/// A number written as `null` (serde_json's spelling of a non-finite float) read
/// back as NaN.
fn null_as_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Interval {
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The median (the mean of the two middle values for an even count); `None` for
/// no observations or a non-finite one.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut v = xs.to_vec();
    Some(median_in_place(&mut v))
}

fn median_in_place(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `q` quantile of sorted values (linear interpolation between order statistics).
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn resampled_median(xs: &[f64], rng: &mut Rng, scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend((0..xs.len()).map(|_| xs[rng.below(xs.len())]));
    median_in_place(scratch)
}

fn percentile_interval(estimate: f64, mut stats: Vec<f64>, level: f64, n: usize) -> Interval {
    stats.sort_unstable_by(|a, b| a.total_cmp(b));
    let tail = (1.0 - level) / 2.0;
    Interval {
        estimate,
        low: quantile_sorted(&stats, tail),
        high: quantile_sorted(&stats, 1.0 - tail),
        level,
        n,
    }
}

/// The median of `xs` and its percentile-bootstrap confidence interval at `level`
/// (0.95), from `resamples` resamples drawn with `seed`.
pub fn median_ci(xs: &[f64], level: f64, resamples: usize, seed: u64) -> Option<Interval> {
    let m = median(xs)?;
    let mut rng = Rng::new(seed);
    let mut scratch = Vec::with_capacity(xs.len());
    let stats: Vec<f64> = (0..resamples.max(1))
        .map(|_| resampled_median(xs, &mut rng, &mut scratch))
        .collect();
    Some(percentile_interval(m, stats, level, xs.len()))
}

/// The ratio median(`a`) ÷ median(`b`) and its percentile-bootstrap interval: each
/// resample draws both arms anew. `None` when an arm is empty or its median is 0.
pub fn ratio_ci(a: &[f64], b: &[f64], level: f64, resamples: usize, seed: u64) -> Option<Interval> {
    let (ma, mb) = (median(a)?, median(b)?);
    if mb == 0.0 {
        return None;
    }
    let mut rng = Rng::new(seed);
    let (mut sa, mut sb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let stats: Vec<f64> = (0..resamples.max(1))
        .filter_map(|_| {
            let ra = resampled_median(a, &mut rng, &mut sa);
            let rb = resampled_median(b, &mut rng, &mut sb);
            (rb != 0.0).then(|| ra / rb)
        })
        .collect();
    if stats.is_empty() {
        return None;
    }
    Some(percentile_interval(
        ma / mb,
        stats,
        level,
        a.len().min(b.len()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    /// The interval of a known distribution's median covers the true median in
    /// about 95 % of seeded trials (with a tolerance for the bootstrap's own error
    /// at small samples, not a fixed number).
    #[test]
    fn a_median_interval_covers_the_true_median_about_95_percent_of_the_time() {
        // Normal(100, 15): the true median is 100.
        let mut data_rng = Rng::new(2026);
        let (trials, n) = (1000, 30);
        let mut covered = 0;
        for t in 0..trials {
            let xs: Vec<f64> = (0..n).map(|_| 100.0 + 15.0 * data_rng.normal()).collect();
            let ci = median_ci(&xs, 0.95, 2000, t as u64).unwrap();
            if ci.contains(100.0) {
                covered += 1;
            }
        }
        let rate = covered as f64 / trials as f64;
        assert!(
            (0.91..=0.985).contains(&rate),
            "coverage {rate} over {trials} trials"
        );
    }

    #[test]
    fn the_ratio_of_two_identical_samples_contains_one() {
        let mut r = Rng::new(5);
        let a: Vec<f64> = (0..10).map(|_| 50.0 + 5.0 * r.normal()).collect();
        let ci = ratio_ci(&a, &a, 0.95, DEFAULT_RESAMPLES, 9).unwrap();
        assert_eq!(ci.estimate, 1.0);
        assert!(ci.contains(1.0), "{ci:?}");
    }

    #[test]
    fn a_twofold_shift_is_detected() {
        let mut r = Rng::new(11);
        let a: Vec<f64> = (0..10).map(|_| 100.0 + 10.0 * r.normal()).collect();
        let b: Vec<f64> = (0..10).map(|_| 50.0 + 5.0 * r.normal()).collect();
        let ci = ratio_ci(&a, &b, 0.95, DEFAULT_RESAMPLES, 9).unwrap();
        assert!(ci.low > 1.5 && ci.high < 2.6, "{ci:?}");
        assert!(!ci.contains(1.0));
    }

    #[test]
    fn the_same_seed_gives_the_same_interval() {
        let xs = [3.0, 5.0, 4.0, 6.0, 5.5];
        assert_eq!(median_ci(&xs, 0.95, 1000, 1), median_ci(&xs, 0.95, 1000, 1));
    }
}
