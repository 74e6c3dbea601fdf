//! Fisher's exact test of two proportions: is arm A's rate of FAIL repeats higher than
//! arm B's? For a correctness finding that shows up in some runs and not others, the
//! count of runs is the sample, and the test says how likely a split at least as
//! lopsided is when both arms fail alike.

/// One-sided p-value that A's proportion (`a_hits` of `a_n`) exceeds B's (`b_hits` of
/// `b_n`): the hypergeometric probability of A holding at least `a_hits` of all the
/// hits when the `a_n + b_n` runs are relabelled at random. `None` when an arm has no
/// runs or a count exceeds its runs.
pub fn fisher_greater(a_hits: u32, a_n: u32, b_hits: u32, b_n: u32) -> Option<f64> {
    if a_n == 0 || b_n == 0 || a_hits > a_n || b_hits > b_n {
        return None;
    }
    let n = (a_n + b_n) as u64;
    let k = (a_hits + b_hits) as u64;
    let (a_n, a_hits) = (a_n as u64, a_hits as u64);
    let hi = k.min(a_n);
    let p: f64 = (a_hits..=hi)
        .map(|x| {
            if k - x > n - a_n {
                return 0.0;
            }
            (ln_choose(a_n, x) + ln_choose(n - a_n, k - x) - ln_choose(n, k)).exp()
        })
        .sum();
    Some(p.min(1.0))
}

/// ln C(n, k), exact enough for the counts of runs a campaign makes.
fn ln_choose(n: u64, k: u64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    let k = k.min(n - k);
    (0..k)
        .map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // 10 of 10 against 0 of 10: only one arrangement of 20 runs is as lopsided.
        let p = fisher_greater(10, 10, 0, 10).unwrap();
        assert!((p - 1.0 / 184_756.0).abs() < 1e-12, "{p}");
        // 4 of 10 against 0 of 10: C(10,4) / C(20,4) = 210 / 4845.
        let p = fisher_greater(4, 10, 0, 10).unwrap();
        assert!((p - 210.0 / 4845.0).abs() < 1e-12, "{p}");
        // 1 of 5 against 0 of 5: half the arrangements put the one hit in A.
        assert!((fisher_greater(1, 5, 0, 5).unwrap() - 0.5).abs() < 1e-12);
        // No difference at all: p = 1.
        assert!((fisher_greater(0, 5, 0, 5).unwrap() - 1.0).abs() < 1e-12);
        assert!(fisher_greater(3, 5, 3, 5).unwrap() > 0.5);
    }

    #[test]
    fn a_reversed_split_is_not_significant_and_bad_counts_are_refused() {
        assert!(fisher_greater(0, 10, 10, 10).unwrap() > 0.99);
        assert_eq!(fisher_greater(1, 0, 0, 5), None);
        assert_eq!(fisher_greater(6, 5, 0, 5), None);
    }
}
