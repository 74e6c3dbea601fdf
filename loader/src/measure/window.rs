//! The rated window: the scheduled instants whose events count in the figures.
//! Events scheduled before it are warm-up (reported apart), after it nothing is
//! scheduled. Set once, when paced traffic starts; read by every handler.

use std::sync::atomic::{AtomicI64, Ordering};

/// The rated window in µs since the epoch, `[start, end)`.
#[derive(Debug)]
pub struct RatedWindow {
    start_us: AtomicI64,
    end_us: AtomicI64,
}

impl Default for RatedWindow {
    fn default() -> Self {
        RatedWindow {
            start_us: AtomicI64::new(i64::MAX),
            end_us: AtomicI64::new(i64::MAX),
        }
    }
}

impl RatedWindow {
    pub fn set(&self, start_us: i64, end_us: i64) {
        self.start_us.store(start_us, Ordering::Relaxed);
        self.end_us.store(end_us, Ordering::Relaxed);
    }
    pub fn start_us(&self) -> i64 {
        self.start_us.load(Ordering::Relaxed)
    }
    pub fn end_us(&self) -> i64 {
        self.end_us.load(Ordering::Relaxed)
    }
    /// Was an event scheduled at `ts` part of the rated window?
    pub fn is_rated(&self, ts: i64) -> bool {
        ts >= self.start_us() && ts < self.end_us()
    }
    /// Was it scheduled before the window (warm-up)?
    pub fn is_warmup(&self, ts: i64) -> bool {
        ts < self.start_us()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_open_and_unset_counts_nothing() {
        let w = RatedWindow::default();
        assert!(!w.is_rated(0));
        w.set(10, 20);
        assert!(w.is_rated(10) && w.is_rated(19));
        assert!(!w.is_rated(20) && !w.is_rated(9));
        assert!(w.is_warmup(9) && !w.is_warmup(10));
    }
}
