//! The paired sign-flip randomization test of a location shift, and the exact
//! confidence bounds that go with it (Hartigan's subset means).
//!
//! The observations are per-pair differences `d_i` (the gate's are the log-ratios
//! ln(candidate ÷ baseline) of ABBA pairs). Under the null hypothesis of no shift,
//! each pair's two legs are exchangeable, so each `d_i` is as likely to be `-d_i`:
//! flip the signs of every subset `F` of the pairs and compare the sum. A flip of `F`
//! gives a sum at least the observed one exactly when the mean of `d` over `F` is at
//! most 0, so the one-sided p-value that the shift is above `δ` is
//!
//! `p(δ) = (1 + #{non-empty F : mean_F(d) ≤ δ}) / 2^n`,
//!
//! and inverting it gives the exact bounds: the (1 − a) lower bound of the shift is
//! the (k + 1)-th smallest subset mean, with `k = ⌊a·2^n⌋ − 1` (Hartigan 1969). The
//! test is therefore significant at `a` exactly when that lower bound is above 0.
//!
//! **Ties and zeros.** A pair whose legs tie gives `d_i = 0`: its flip changes no sum,
//! and it only makes the test more conservative (n zeros among n pairs give p = 1).
//! Pairs that tie with each other (the same `d_i` in every pair, as when HdrHistogram
//! puts every leg of an arm into one bucket) are no problem either: the test uses the
//! pairing, never ranks across arms. With `n` pairs the smallest p is `2^-n`:
//! 1/32 = 0.031 at 5 pairs one-sided, and a two-sided test doubles it.
//!
//! Up to [`ENUMERATE_MAX_PAIRS`] pairs every subset is enumerated; above, `draws`
//! random subsets are drawn with a seeded generator, the identity counted once
//! (the usual Monte Carlo p-value, `(1 + hits) / (draws + 1)`).

use crate::stats::rng::Rng;

/// Pairs up to which all 2^n sign flips are enumerated (65 536 at 16).
pub const ENUMERATE_MAX_PAIRS: usize = 16;
/// Random sign flips drawn above [`ENUMERATE_MAX_PAIRS`].
pub const DEFAULT_DRAWS: usize = 20_000;

/// The sign-flip distribution of one sample of paired differences.
#[derive(Debug, Clone)]
pub struct SignFlip {
    /// Pairs.
    pub n: usize,
    /// The mean of the differences (the point estimate of the shift).
    pub mean: f64,
    /// Every flip was enumerated (exact), or `draws` were drawn.
    pub exact: bool,
    /// Flips counted, the identity included: 2^n, or draws + 1.
    pub flips: usize,
    /// The means of `d` over the non-empty flipped subsets, sorted.
    means: Vec<f64>,
    /// Drawn empty subsets: the identity again, as extreme as itself either way.
    empty: usize,
    /// Float noise below which two sums are equal.
    tol: f64,
}

impl SignFlip {
    /// The distribution of `d` (finite values); `None` for no pairs or a non-finite
    /// one.
    pub fn new(d: &[f64], draws: usize, seed: u64) -> Option<SignFlip> {
        if d.is_empty() || d.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let n = d.len();
        let mean = d.iter().sum::<f64>() / n as f64;
        let tol = 1e-9 * d.iter().map(|x| x.abs()).fold(0.0, f64::max).max(1e-300);
        let mut empty = 0;
        let (exact, mut means) = if n <= ENUMERATE_MAX_PAIRS {
            let total = 1usize << n;
            let mut sums = vec![0.0f64; total];
            let mut means = Vec::with_capacity(total - 1);
            for mask in 1..total {
                let low = mask.trailing_zeros() as usize;
                sums[mask] = sums[mask & (mask - 1)] + d[low];
                means.push(sums[mask] / mask.count_ones() as f64);
            }
            (true, means)
        } else {
            let draws = draws.max(1);
            let mut rng = Rng::new(seed);
            let mut means = Vec::with_capacity(draws);
            for _ in 0..draws {
                let (mut sum, mut count, mut bits, mut left) = (0.0, 0usize, 0u64, 0u32);
                for x in d {
                    if left == 0 {
                        bits = rng.next_u64();
                        left = 64;
                    }
                    if bits & 1 == 1 {
                        sum += x;
                        count += 1;
                    }
                    bits >>= 1;
                    left -= 1;
                }
                if count == 0 {
                    empty += 1;
                } else {
                    means.push(sum / count as f64);
                }
            }
            (false, means)
        };
        means.sort_unstable_by(f64::total_cmp);
        Some(SignFlip {
            n,
            mean,
            exact,
            flips: means.len() + empty + 1,
            means,
            empty,
            tol,
        })
    }

    /// One-sided p-value that the shift is above `delta` (`delta` = 0: that the
    /// differences lean positive). Ties count as at least as extreme.
    pub fn p_above(&self, delta: f64) -> f64 {
        let hits = self.empty + self.means.partition_point(|m| *m <= delta + self.tol);
        (1 + hits) as f64 / self.flips as f64
    }

    /// One-sided p-value that the shift is below `delta`.
    pub fn p_below(&self, delta: f64) -> f64 {
        let hits =
            self.empty + self.means.len() - self.means.partition_point(|m| *m < delta - self.tol);
        (1 + hits) as f64 / self.flips as f64
    }

    /// Subset means that may lie beyond a bound at a one-sided p of `a`:
    /// `⌊a · flips⌋ − 1` less the drawn identities, `None` when even the identity
    /// alone is above `a`.
    fn allowed(&self, a: f64) -> Option<usize> {
        let k = (a * self.flips as f64 + 1e-9).floor() as i64 - 1 - self.empty as i64;
        usize::try_from(k).ok().filter(|k| *k < self.means.len())
    }

    /// The one-sided (1 − `a`) lower bound of the shift; `None` (−∞) when `n` pairs
    /// cannot reach a p of `a` at all.
    pub fn lower(&self, a: f64) -> Option<f64> {
        self.allowed(a).map(|k| self.means[k])
    }

    /// The one-sided (1 − `a`) upper bound of the shift; `None` (+∞) when `n` pairs
    /// cannot reach a p of `a` at all.
    pub fn upper(&self, a: f64) -> Option<f64> {
        self.allowed(a)
            .map(|k| self.means[self.means.len() - 1 - k])
    }
}

/// The smallest one-sided p-value `n` pairs can give: 2^-n (exact), or the Monte
/// Carlo resolution `1 / (draws + 1)` above [`ENUMERATE_MAX_PAIRS`].
pub fn smallest_p(n: usize, draws: usize) -> f64 {
    if n <= ENUMERATE_MAX_PAIRS {
        0.5f64.powi(n as i32)
    } else {
        (1.0 / (draws.max(1) + 1) as f64).max(0.5f64.powi(n.min(1000) as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flip(d: &[f64]) -> SignFlip {
        SignFlip::new(d, DEFAULT_DRAWS, 1).unwrap()
    }

    /// Five pairs, every one positive and all tied: the one flip of 32 at least as
    /// extreme is the identity, p = 1/32; the exact bounds are the tied value.
    #[test]
    fn tied_positive_pairs_give_one_in_two_to_the_n() {
        let c = 1.5f64.ln();
        let f = flip(&[c; 5]);
        assert!(f.exact);
        assert!(
            (f.p_above(0.0) - 1.0 / 32.0).abs() < 1e-12,
            "{}",
            f.p_above(0.0)
        );
        assert!((f.p_below(0.0) - 1.0).abs() < 1e-12);
        assert!((f.lower(0.05).unwrap() - c).abs() < 1e-12);
        assert!((f.upper(0.05).unwrap() - c).abs() < 1e-12);
        // Below 1/32 no bound exists: 5 pairs cannot reach p = 0.025.
        assert_eq!(f.lower(0.025), None);
        assert_eq!(f.upper(0.025), None);
    }

    #[test]
    fn all_zero_pairs_are_never_significant() {
        let f = flip(&[0.0; 8]);
        assert_eq!(f.p_above(0.0), 1.0);
        assert_eq!(f.p_below(0.0), 1.0);
        assert_eq!((f.lower(0.05), f.upper(0.05)), (Some(0.0), Some(0.0)));
    }

    /// A zero pair takes one pair's worth of resolution: 4 positive and one tie is
    /// p = 2/32, as 4 pairs alone would be.
    #[test]
    fn a_zero_pair_counts_as_no_evidence() {
        let f = flip(&[0.2, 0.2, 0.2, 0.2, 0.0]);
        assert!((f.p_above(0.0) - 2.0 / 32.0).abs() < 1e-12);
    }

    /// The p-value agrees with a direct count over all flips of the sum, and the
    /// test is significant exactly when the lower bound is above 0.
    #[test]
    fn the_closed_form_agrees_with_counting_flips_and_with_the_bound() {
        let mut rng = Rng::new(7);
        for trial in 0..200 {
            let n = 3 + trial % 8;
            let d: Vec<f64> = (0..n).map(|_| 0.3 + rng.normal()).collect();
            let f = flip(&d);
            let obs: f64 = d.iter().sum();
            let mut hits = 0;
            for mask in 0..(1usize << n) {
                let s: f64 = d
                    .iter()
                    .enumerate()
                    .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                    .sum();
                if s >= obs - 1e-9 {
                    hits += 1;
                }
            }
            let p = hits as f64 / (1usize << n) as f64;
            assert!((f.p_above(0.0) - p).abs() < 1e-12, "{d:?}");
            for a in [0.05, 0.1] {
                let significant = f.p_above(0.0) <= a;
                let bound_above_0 = f.lower(a).is_some_and(|l| l > 0.0);
                assert_eq!(significant, bound_above_0, "{d:?} at {a}");
            }
        }
    }

    /// Coverage: the (1 − a) lower bound is below the true shift in at least 1 − a
    /// of samples (exact test: within sampling error of the trials).
    #[test]
    fn the_bounds_cover_the_true_shift() {
        let mut rng = Rng::new(11);
        let (trials, mut low_ok, mut high_ok) = (2000, 0, 0);
        for _ in 0..trials {
            let d: Vec<f64> = (0..10).map(|_| 0.2 + 0.1 * rng.normal()).collect();
            let f = flip(&d);
            low_ok += usize::from(f.lower(0.05).unwrap() <= 0.2);
            high_ok += usize::from(f.upper(0.05).unwrap() >= 0.2);
        }
        for ok in [low_ok, high_ok] {
            let rate = ok as f64 / trials as f64;
            assert!((0.93..=0.975).contains(&rate), "coverage {rate}");
        }
    }

    /// Above 16 pairs the flips are drawn: p is close to the exact one and the
    /// same seed gives the same answer.
    #[test]
    fn drawn_flips_approximate_the_exact_test() {
        let mut rng = Rng::new(3);
        let d: Vec<f64> = (0..24).map(|_| 0.1 + rng.normal()).collect();
        let f = SignFlip::new(&d, DEFAULT_DRAWS, 5).unwrap();
        assert!(!f.exact);
        assert_eq!(f.flips, DEFAULT_DRAWS + 1);
        let again = SignFlip::new(&d, DEFAULT_DRAWS, 5).unwrap();
        assert_eq!(f.p_above(0.0), again.p_above(0.0));
        // The normal approximation of the flip distribution, for a rough check.
        let obs: f64 = d.iter().sum();
        let sd = d.iter().map(|x| x * x).sum::<f64>().sqrt();
        let z = obs / sd;
        let approx = 0.5 * erfc(z / std::f64::consts::SQRT_2);
        assert!(
            (f.p_above(0.0) - approx).abs() < 0.03,
            "{} vs {approx}",
            f.p_above(0.0)
        );
        assert!(smallest_p(24, DEFAULT_DRAWS) < 1e-4);
        assert!((smallest_p(5, DEFAULT_DRAWS) - 1.0 / 32.0).abs() < 1e-15);
    }

    /// erfc, Numerical Recipes' Chebyshev fit (1.2e-7), for the check above.
    fn erfc(x: f64) -> f64 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.5 * z);
        let r = t
            * (-z * z - 1.265_512_23
                + t * (1.000_023_68
                    + t * (0.374_091_96
                        + t * (0.096_784_18
                            + t * (-0.186_288_06
                                + t * (0.278_868_07
                                    + t * (-1.135_203_98
                                        + t * (1.488_515_87
                                            + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
                .exp();
        if x >= 0.0 {
            r
        } else {
            2.0 - r
        }
    }
}
