//! One loader's share of a cell: the keys it owns and the part of the rate they get.
//!
//! Loader `J` of `N` owns every key `p` with `p mod N = J` (properties in the
//! pipeline), and only those: it publishes them, hydrates them and keeps their seq
//! tables, so the union of the loaders' `produced.meta` is the cell's and no key has
//! two producers. Its schedule is the cell's schedule thinned to its keys: each flow's
//! rate times the share of the selection weight its keys hold (with hot keys, a hot
//! key weighs `hot.factor` cold ones), so every key is offered what a single loader
//! would offer it.
//!
//! The loader's own selector walks its keys as local indices `0..owned`; local index
//! `i` is key `J + i·N`. Hot keys are `p < H`, so the local hot keys are the first
//! `⌈(H − J) / N⌉` indices, and the selector's "hot keys first" layout holds locally.

/// Which keys one loader owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// `J`, from 0.
    pub index: u64,
    /// `N` ≥ 1.
    pub count: u64,
}

impl Share {
    /// The whole cell: one loader owns every key.
    pub const WHOLE: Share = Share { index: 0, count: 1 };

    pub fn new(index: u64, count: u64) -> Share {
        debug_assert!(count >= 1 && index < count);
        Share { index, count }
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// Whether key `p` is this loader's.
    pub fn owns(&self, p: u64) -> bool {
        p % self.count == self.index
    }

    /// The loader that owns key `p`.
    pub fn owner_of(p: u64, count: u64) -> u64 {
        p % count.max(1)
    }

    /// How many of the keys `0..keys` are this loader's.
    pub fn owned(&self, keys: u64) -> u64 {
        Self::count_below(keys, self.index, self.count)
    }

    /// Keys `p < bound` with `p mod n = j`.
    fn count_below(bound: u64, j: u64, n: u64) -> u64 {
        if bound <= j {
            0
        } else {
            (bound - j).div_ceil(n)
        }
    }

    /// The key of local index `i` (`0..owned`).
    pub fn key(&self, i: u64) -> u64 {
        self.index + i * self.count
    }

    /// The local index of an owned key.
    pub fn local(&self, p: u64) -> u64 {
        debug_assert!(self.owns(p));
        p / self.count
    }

    /// This loader's keys of `0..keys`, in order.
    pub fn keys(&self, keys: u64) -> impl Iterator<Item = u64> + '_ {
        (0..self.owned(keys)).map(move |i| self.key(i))
    }

    /// Of the hot keys `0..hot`, how many are this loader's (they are its first local
    /// indices).
    pub fn owned_hot(&self, hot: u64) -> u64 {
        Self::count_below(hot, self.index, self.count)
    }

    /// This loader's part of a flow's rate: the selection weight of its keys over the
    /// weight of all keys (`hot` keys weigh `factor` each when the cell is skewed, as
    /// the selector weighs them).
    pub fn rate_fraction(&self, keys: u64, hot: u64, factor: u64) -> f64 {
        if keys == 0 {
            return 0.0;
        }
        let skewed = hot >= 1 && factor >= 2 && hot < keys;
        let (hot, factor) = if skewed { (hot, factor) } else { (0, 1) };
        let weight = |h: u64, all: u64| (h * factor + (all - h)) as f64;
        let mine = weight(self.owned_hot(hot), self.owned(keys));
        mine / weight(hot, keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_partition_the_keys() {
        for n in 1..=5u64 {
            for keys in [0u64, 1, 2, 7, 100, 101] {
                let mut seen = vec![0u32; keys as usize];
                let mut total = 0;
                for j in 0..n {
                    let s = Share::new(j, n);
                    let mine: Vec<u64> = s.keys(keys).collect();
                    assert_eq!(mine.len() as u64, s.owned(keys));
                    for (i, &p) in mine.iter().enumerate() {
                        assert!(s.owns(p));
                        assert_eq!(s.local(p), i as u64);
                        assert_eq!(Share::owner_of(p, n), j);
                        seen[p as usize] += 1;
                    }
                    total += s.owned(keys);
                }
                assert_eq!(total, keys);
                assert!(seen.iter().all(|&c| c == 1), "n={n} keys={keys}");
            }
        }
    }

    #[test]
    fn rate_fractions_sum_to_one_and_follow_the_weights() {
        for (keys, hot, factor) in [(10u64, 0u64, 1u64), (10, 3, 4), (1000, 1, 10), (7, 6, 2)] {
            for n in 1..=4u64 {
                let sum: f64 = (0..n)
                    .map(|j| Share::new(j, n).rate_fraction(keys, hot, factor))
                    .sum();
                assert!(
                    (sum - 1.0).abs() < 1e-12,
                    "{keys} {hot} {factor} {n}: {sum}"
                );
            }
        }
        // Two loaders, 10 keys, keys 0..3 hot at 4x: loader 0 owns hot 0, 2 and cold
        // 4, 6, 8 (weight 2*4 + 3 = 11); loader 1 hot 1 and cold 3, 5, 7, 9 (4 + 4 =
        // 8); all: 3*4 + 7 = 19.
        assert!((Share::new(0, 2).rate_fraction(10, 3, 4) - 11.0 / 19.0).abs() < 1e-12);
        assert!((Share::new(1, 2).rate_fraction(10, 3, 4) - 8.0 / 19.0).abs() < 1e-12);
        assert_eq!(Share::WHOLE.rate_fraction(10, 3, 4), 1.0);
    }
}
