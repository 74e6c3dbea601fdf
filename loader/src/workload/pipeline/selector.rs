//! Which property the next event of a flow belongs to.
//!
//! Uniform: strict round robin 0, 1, …, P−1, 0, … . Skewed (`hot_props` H ≥ 1,
//! `hot_factor` F ≥ 2, H < P): each hot property gets F times a cold property's share,
//! interleaved with exact integer Bresenham arithmetic, so over every window of
//! H·F + (P − H) events exactly H·F are hot, spread as evenly as integers allow.
//! Deterministic for the same inputs.

#[derive(Debug, Clone)]
pub struct Selector {
    props: u64,
    hot: u64,
    hot_weight: u64,
    total: u64,
    acc: u64,
    next_hot: u64,
    next_cold: u64,
}

impl Selector {
    pub fn new(props: u64, hot_props: u64, hot_factor: u64) -> Self {
        let skewed = hot_props >= 1 && hot_factor >= 2 && hot_props < props;
        let (hot, hot_weight) = if skewed {
            (hot_props, hot_props * hot_factor)
        } else {
            (0, 0)
        };
        let cold = props - hot;
        Selector {
            props,
            hot,
            hot_weight,
            total: hot_weight + cold,
            acc: 0,
            next_hot: 0,
            next_cold: hot,
        }
    }

    pub fn is_skewed(&self) -> bool {
        self.hot > 0
    }

    /// Hot cohort membership.
    pub fn is_hot(&self, prop: u64) -> bool {
        prop < self.hot
    }

    /// Share of events that are hot, in percent.
    pub fn hot_share_pct(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            100.0 * self.hot_weight as f64 / self.total as f64
        }
    }

    /// Events per second one cold property receives at flow rate `rate`.
    pub fn cold_rate(&self, rate: f64) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            rate / self.total as f64
        }
    }

    pub fn hot_rate(&self, rate: f64) -> f64 {
        if self.is_skewed() {
            self.cold_rate(rate) * (self.hot_weight / self.hot) as f64
        } else {
            self.cold_rate(rate)
        }
    }

    pub fn next_prop(&mut self) -> u64 {
        if self.hot == 0 {
            let p = self.next_cold;
            self.next_cold = (self.next_cold + 1) % self.props.max(1);
            return p;
        }
        self.acc += self.hot_weight;
        if self.acc >= self.total {
            self.acc -= self.total;
            let p = self.next_hot;
            self.next_hot = (self.next_hot + 1) % self.hot;
            p
        } else {
            let p = self.next_cold;
            self.next_cold += 1;
            if self.next_cold >= self.props {
                self.next_cold = self.hot;
            }
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_round_robin() {
        for (p, h, f) in [(5, 0, 1), (5, 1, 1), (5, 5, 100)] {
            let mut s = Selector::new(p, h, f);
            let got: Vec<u64> = (0..10).map(|_| s.next_prop()).collect();
            assert_eq!(got, vec![0, 1, 2, 3, 4, 0, 1, 2, 3, 4], "{p} {h} {f}");
        }
    }

    #[test]
    fn bresenham_is_exact_and_interleaved() {
        let mut s = Selector::new(1000, 1, 100);
        let window = 100 + 999;
        let mut hot = 0;
        let mut cold = vec![0u32; 1000];
        let mut last_hot = false;
        for _ in 0..window * 7 {
            let p = s.next_prop();
            if p == 0 {
                hot += 1;
                assert!(!last_hot, "two hot events in a row");
                last_hot = true;
            } else {
                cold[p as usize] += 1;
                last_hot = false;
            }
        }
        assert_eq!(hot, 700);
        assert!(cold[1..].iter().all(|&c| c == 7));
    }

    #[test]
    fn deterministic() {
        let a: Vec<u64> = {
            let mut s = Selector::new(50, 3, 7);
            (0..500).map(|_| s.next_prop()).collect()
        };
        let b: Vec<u64> = {
            let mut s = Selector::new(50, 3, 7);
            (0..500).map(|_| s.next_prop()).collect()
        };
        assert_eq!(a, b);
    }
}
