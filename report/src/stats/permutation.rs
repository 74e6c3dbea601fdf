//! A randomization (permutation) test of the difference of two arms' medians: under
//! the null hypothesis the labels are exchangeable, so relabel the pooled
//! observations many times and count how often the difference is at least as large
//! as the one observed.

use crate::stats::bootstrap::median;
use crate::stats::rng::Rng;

/// Two-sided p-value of median(`a`) − median(`b`), from `relabelings` random
/// relabelings drawn with `seed` (the observed labelling counts as one, so p > 0).
pub fn permutation_p(a: &[f64], b: &[f64], relabelings: usize, seed: u64) -> Option<f64> {
    let observed = (median(a)? - median(b)?).abs();
    let mut pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let mut rng = Rng::new(seed);
    let mut extreme = 0usize;
    for _ in 0..relabelings {
        rng.shuffle(&mut pooled);
        let (x, y) = pooled.split_at(a.len());
        let d = (median(x)? - median(y)?).abs();
        // A tolerance for float noise: ties count as at least as extreme.
        if d >= observed - 1e-12 * observed.abs().max(1.0) {
            extreme += 1;
        }
    }
    Some((extreme + 1) as f64 / (relabelings + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_arms_are_not_significant_and_shifted_ones_are() {
        let mut r = Rng::new(1);
        let a: Vec<f64> = (0..10).map(|_| 100.0 + 3.0 * r.normal()).collect();
        let b: Vec<f64> = (0..10).map(|_| 100.0 + 3.0 * r.normal()).collect();
        let p = permutation_p(&a, &b, 10_000, 2).unwrap();
        assert!(p > 0.05, "{p}");
        let c: Vec<f64> = b.iter().map(|x| x * 1.2).collect();
        let p = permutation_p(&a, &c, 10_000, 2).unwrap();
        assert!(p < 0.01, "{p}");
    }
}
