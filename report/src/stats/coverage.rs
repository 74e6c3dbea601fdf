//! What an interval from a few repeats can claim. A percentile-bootstrap interval of a
//! median never leaves the smallest and largest of its n observations, and that range
//! covers the true median with probability 1 − 2^(1−n): 75 % for 3 repeats, 94 % for
//! 5, 97 % for 6. So with fewer than 6 repeats a "95 %" interval is at most a
//! [`hull_coverage`] one, and it is labelled so ([`level_label`]); a ratio of two
//! medians takes its smaller arm's n ([`crate::stats::Interval::n`]).

use crate::stats::Interval;

/// The probability that the range of `n` independent observations covers their
/// distribution's median: 1 − 2^(1−n) (0 below 2 observations).
pub fn hull_coverage(n: usize) -> f64 {
    if n < 2 {
        return 0.0;
    }
    1.0 - 0.5f64.powi(n as i32 - 1)
}

/// The coverage an interval can claim: its nominal level, or less when its n
/// observations cannot give that much.
pub fn stated_level(i: &Interval) -> f64 {
    i.level.min(hull_coverage(i.n))
}

/// Whether the nominal level stands (`n` large enough for it).
pub fn nominal_stands(i: &Interval) -> bool {
    hull_coverage(i.n) >= i.level
}

/// `95 %` when the nominal level stands; otherwise `at most 75 % (3 repeats)`.
pub fn level_label(i: &Interval) -> String {
    if nominal_stands(i) {
        format!("{:.0} %", 100.0 * i.level)
    } else {
        format!(
            "at most {:.0} % ({} repeats)",
            100.0 * hull_coverage(i.n),
            i.n
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(n: usize) -> Interval {
        Interval {
            estimate: 1.0,
            low: 0.9,
            high: 1.1,
            level: 0.95,
            n,
        }
    }

    #[test]
    fn a_range_of_three_is_a_seventy_five_percent_interval() {
        assert!((hull_coverage(3) - 0.75).abs() < 1e-12);
        assert!((hull_coverage(5) - 0.9375).abs() < 1e-12);
        assert_eq!(level_label(&iv(3)), "at most 75 % (3 repeats)");
        assert_eq!(level_label(&iv(5)), "at most 94 % (5 repeats)");
        assert_eq!(level_label(&iv(6)), "95 %");
        assert!(!nominal_stands(&iv(5)) && nominal_stands(&iv(6)));
        assert!((stated_level(&iv(3)) - 0.75).abs() < 1e-12);
    }
}
