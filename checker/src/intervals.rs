//! A sorted set of disjoint, non-adjacent closed intervals of non-negative seqs.
//!
//! Only properties that have shown an out-of-order, repeated or skipping seq own one; for an
//! in-order history it stays one interval and every insert is an O(1) append.

#[derive(Debug, Clone, Default)]
pub(crate) struct IntervalSet {
    v: Vec<(i64, i64)>,
}

impl IntervalSet {
    pub(crate) fn from_range(lo: i64, hi: i64) -> Self {
        let mut s = IntervalSet::default();
        if lo <= hi {
            s.v.push((lo, hi));
        }
        s
    }

    pub(crate) fn as_slice(&self) -> &[(i64, i64)] {
        &self.v
    }

    /// Insert `x` (must be >= 0). Returns true when `x` was not present.
    pub(crate) fn insert(&mut self, x: i64) -> bool {
        debug_assert!(x >= 0);
        let Some(last) = self.v.last_mut() else {
            self.v.push((x, x));
            return true;
        };
        // x >= 0, so x - 1 cannot overflow.
        if x - 1 == last.1 {
            last.1 = x;
            return true;
        }
        if x - 1 > last.1 {
            self.v.push((x, x));
            return true;
        }
        let i = self.v.partition_point(|&(s, _)| s <= x);
        if i > 0 && self.v[i - 1].1 >= x {
            return false;
        }
        let left = i > 0 && self.v[i - 1].1 == x - 1;
        let right = i < self.v.len() && self.v[i].0 - 1 == x;
        match (left, right) {
            (true, true) => {
                self.v[i - 1].1 = self.v[i].1;
                self.v.remove(i);
            }
            (true, false) => self.v[i - 1].1 = x,
            (false, true) => self.v[i].0 = x,
            (false, false) => self.v.insert(i, (x, x)),
        }
        true
    }
}

/// Number of members of `set` inside `[lo, hi]`.
pub(crate) fn count_in(set: &[(i64, i64)], lo: i64, hi: i64) -> u64 {
    if lo > hi {
        return 0;
    }
    let mut n: u64 = 0;
    let start = set.partition_point(|&(_, e)| e < lo);
    for &(s, e) in &set[start..] {
        if s > hi {
            break;
        }
        let a = s.max(lo);
        let b = e.min(hi);
        if a <= b {
            n += (b as i128 - a as i128 + 1) as u64;
        }
    }
    n
}

/// Largest member of `set` inside `[lo, hi]`.
pub(crate) fn max_in(set: &[(i64, i64)], lo: i64, hi: i64) -> Option<i64> {
    if lo > hi {
        return None;
    }
    // Last interval starting at or below hi.
    let i = set.partition_point(|&(s, _)| s <= hi);
    if i == 0 {
        return None;
    }
    let (_, e) = set[i - 1];
    let m = e.min(hi);
    (m >= lo).then_some(m)
}

/// Number of members of both `a` and `b` inside `[lo, hi]` (both sorted, disjoint).
pub(crate) fn count_overlap(a: &[(i64, i64)], b: &[(i64, i64)], lo: i64, hi: i64) -> u64 {
    if lo > hi || a.is_empty() || b.is_empty() {
        return 0;
    }
    let mut n: u64 = 0;
    let mut i = a.partition_point(|&(_, e)| e < lo);
    let mut j = b.partition_point(|&(_, e)| e < lo);
    while i < a.len() && j < b.len() {
        let (s1, e1) = a[i];
        let (s2, e2) = b[j];
        if s1 > hi || s2 > hi {
            break;
        }
        let s = s1.max(s2).max(lo);
        let e = e1.min(e2).min(hi);
        n += range_len(s, e);
        if e1 < e2 {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
}

/// Largest member of `set` inside `[lo, hi]` that is not in `minus` (both sorted, disjoint).
pub(crate) fn max_in_minus(
    set: &[(i64, i64)],
    lo: i64,
    hi: i64,
    minus: &[(i64, i64)],
) -> Option<i64> {
    if lo > hi {
        return None;
    }
    let mut i = set.partition_point(|&(s, _)| s <= hi);
    while i > 0 {
        i -= 1;
        let (s, e) = set[i];
        if e < lo {
            return None;
        }
        let mut x = e.min(hi);
        let floor = s.max(lo);
        while x >= floor {
            let k = minus.partition_point(|&(ms, _)| ms <= x);
            match (k > 0).then(|| minus[k - 1]) {
                Some((ms, me)) if me >= x => {
                    if ms == i64::MIN {
                        return None;
                    }
                    x = ms - 1;
                }
                _ => return Some(x),
            }
        }
    }
    None
}

pub(crate) fn contains(set: &[(i64, i64)], x: i64) -> bool {
    let i = set.partition_point(|&(s, _)| s <= x);
    i > 0 && set[i - 1].1 >= x
}

/// Number of elements of the range `[lo, hi]` (0 when empty).
pub(crate) fn range_len(lo: i64, hi: i64) -> u64 {
    if lo > hi {
        0
    } else {
        (hi as i128 - lo as i128 + 1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_detects_repeats() {
        let mut s = IntervalSet::default();
        for x in [1, 2, 3, 7, 8, 5] {
            assert!(s.insert(x));
        }
        assert_eq!(s.as_slice(), &[(1, 3), (5, 5), (7, 8)]);
        assert!(!s.insert(2));
        assert!(!s.insert(5));
        assert!(s.insert(4));
        assert_eq!(s.as_slice(), &[(1, 5), (7, 8)]);
        assert!(s.insert(6));
        assert_eq!(s.as_slice(), &[(1, 8)]);
        assert!(s.insert(0));
        assert_eq!(s.as_slice(), &[(0, 8)]);
        assert_eq!(count_in(s.as_slice(), 2, 100), 7);
        assert_eq!(max_in(s.as_slice(), 0, 5), Some(5));
        assert_eq!(max_in(s.as_slice(), 9, 50), None);
    }

    #[test]
    fn helpers_on_split_sets() {
        let s = [(1, 3), (10, 12)];
        assert_eq!(count_in(&s, 2, 11), 4);
        assert_eq!(count_in(&s, 4, 9), 0);
        assert_eq!(max_in(&s, 0, 9), Some(3));
        assert_eq!(max_in(&s, 4, 9), None);
        assert!(contains(&s, 11));
        assert!(!contains(&s, 5));
        assert_eq!(range_len(5, 4), 0);
        assert_eq!(range_len(0, i64::MAX), 1u64 << 63);
    }

    #[test]
    fn overlap_and_max_minus() {
        let a = [(1, 10), (20, 30)];
        let b = [(5, 22), (29, 40)];
        assert_eq!(count_overlap(&a, &b, 0, 100), 6 + 3 + 2);
        assert_eq!(count_overlap(&a, &b, 8, 21), 3 + 2);
        assert_eq!(count_overlap(&a, &[], 0, 100), 0);
        assert_eq!(max_in_minus(&a, 0, 100, &b), Some(28));
        assert_eq!(max_in_minus(&a, 0, 22, &b), Some(4));
        assert_eq!(max_in_minus(&a, 5, 22, &b), None);
        assert_eq!(max_in_minus(&[(0, 3)], 0, 3, &[(0, 3)]), None);
    }
}
