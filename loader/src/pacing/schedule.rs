//! The open-loop schedule of one flow: when the k-th event is due.
//!
//! Cumulative events owed at `t` seconds after the start, with a linear ramp of
//! `ramp` seconds from 0 to the full rate:
//! `F(t) = rate·t²/(2·ramp)` while `t < ramp`, else `rate·(t − ramp/2)`.
//! The k-th event (k from 0) is due at `F⁻¹(k)`; the first one immediately.

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Events per second at full rate.
    pub rate: f64,
    /// Ramp length in seconds (0 = none).
    pub ramp: f64,
}

impl Schedule {
    /// Events owed by `t` seconds (inclusive of the one due exactly at 0).
    pub fn owed(&self, t: f64) -> u64 {
        if self.rate <= 0.0 || t < 0.0 {
            return 0;
        }
        let f = if self.ramp > 0.0 && t < self.ramp {
            self.rate * t * t / (2.0 * self.ramp)
        } else {
            self.rate * (t - self.ramp / 2.0)
        };
        f.max(0.0).floor() as u64 + 1
    }

    /// Seconds after the start at which event `k` is due.
    pub fn due(&self, k: u64) -> f64 {
        if self.rate <= 0.0 {
            return f64::INFINITY;
        }
        let k = k as f64;
        if self.ramp > 0.0 && k < self.rate * self.ramp / 2.0 {
            (2.0 * k * self.ramp / self.rate).sqrt()
        } else {
            k / self.rate + self.ramp / 2.0
        }
    }

    /// Events due in [0, t).
    pub fn total_before(&self, t: f64) -> u64 {
        // Smallest k with due(k) >= t.
        if self.rate <= 0.0 || t <= 0.0 {
            return 0;
        }
        let mut k = self.owed(t).saturating_sub(2);
        while self.due(k) < t {
            k += 1;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_offers_rate_times_duration() {
        let s = Schedule {
            rate: 6000.0,
            ramp: 0.0,
        };
        assert_eq!(s.total_before(60.0), 360_000);
        assert_eq!(s.due(0), 0.0);
        assert!((s.due(6000) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn ramp_offers_half_during_ramp() {
        // The reference's published offered count: 12000 ev/s, 60 s with a 5 s ramp.
        let s = Schedule {
            rate: 12000.0,
            ramp: 5.0,
        };
        let n = s.total_before(60.0);
        assert!((n as i64 - 690_000).abs() <= 1, "{n}");
        // due() inverts owed().
        for k in [0u64, 1, 10, 1000, 29_999, 30_000, 30_001, 400_000] {
            let t = s.due(k);
            assert!(s.owed(t + 1e-9) > k, "k={k}");
        }
    }
}
