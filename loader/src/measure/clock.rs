//! The cell's clock: monotonic time anchored once to the wall clock.
//!
//! Every stamp and every latency of a cell is read from one [`Clock`]: the wall
//! clock is read once, when the cell starts, and every later instant is that anchor
//! plus the monotonic time elapsed since. A step of the system clock during the cell
//! (NTP, a manual change) therefore cannot bend a latency or reorder two stamps.
//!
//! The monotonic source is tokio's clock: the real monotonic clock, except inside a
//! runtime whose time is paused (tests), where it is the runtime's virtual time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Monotonic time since an anchor, expressed as wall-clock microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    origin_unix_us: i64,
}

impl Clock {
    /// Anchor a clock to the wall clock now.
    pub fn anchor() -> Clock {
        let origin_unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        Clock::anchored_at(Instant::now(), origin_unix_us)
    }

    /// A clock whose `origin` reads `origin_unix_us` (tests).
    pub fn anchored_at(origin: Instant, origin_unix_us: i64) -> Clock {
        Clock {
            origin,
            origin_unix_us,
        }
    }

    /// Microseconds since the Unix epoch, now.
    pub fn now_us(&self) -> i64 {
        self.us_at(Instant::now())
    }

    /// Microseconds since the Unix epoch at the monotonic instant `at`.
    pub fn us_at(&self, at: Instant) -> i64 {
        let since = at.saturating_duration_since(self.origin).as_micros() as i64;
        self.origin_unix_us + since
    }

    /// The monotonic instant at which this clock reads `us` (the anchor for any earlier
    /// reading).
    pub fn instant_of(&self, us: i64) -> Instant {
        let since = us.saturating_sub(self.origin_unix_us).max(0) as u64;
        self.origin + Duration::from_micros(since)
    }

    /// The wall-clock time now, as this clock reads it.
    pub fn now_system(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.now_us().max(0) as u64)
    }

    /// Milliseconds since the Unix epoch at the anchor.
    pub fn origin_unix_ms(&self) -> i64 {
        self.origin_unix_us / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reads_the_anchor_plus_monotonic_time() {
        let c = Clock::anchored_at(Instant::now(), 1_000_000);
        assert_eq!(c.now_us(), 1_000_000);
        tokio::time::sleep(Duration::from_millis(45)).await;
        assert_eq!(c.now_us(), 1_045_000);
        assert_eq!(
            c.us_at(Instant::now() + Duration::from_millis(5)),
            1_050_000
        );
    }

    #[test]
    fn anchors_to_the_wall_clock() {
        let c = Clock::anchor();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64;
        assert!((c.now_us() - wall).abs() < 1_000_000);
    }
}
