//! The drain, the same in both workloads: after the paced traffic, wait until every
//! consumer has processed what was published, or nothing moved for the grace, or
//! the deadline passed. How it ended is part of the record (`drain.outcome`).

use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

/// How the drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainEnd {
    /// Every consumer processed everything that was acknowledged to the producer.
    CaughtUp,
    /// Nothing moved for the grace period.
    Grace,
    /// The deadline (`drain.max`) passed, or Ctrl-C during the drain.
    CutShort,
}

impl DrainEnd {
    pub fn name(&self) -> &'static str {
        match self {
            DrainEnd::CaughtUp => "caught-up",
            DrainEnd::Grace => "grace",
            DrainEnd::CutShort => "cut-short",
        }
    }
}

/// The grace of a drain: as the scenario sets it, or the system's lease plus 5 s
/// (at least 5 s), so that a redelivery after a lease expiry still counts.
pub fn grace(set: Option<Duration>, lease_ms: Option<u64>) -> Duration {
    set.unwrap_or_else(|| {
        Duration::from_millis(lease_ms.unwrap_or(0) + 5000).max(Duration::from_secs(5))
    })
}

/// Cancel `abandon` (publishers stop retrying and count what is left as failed) when
/// the drain's deadline passes, or half of `after_interrupt` after a Ctrl-C.
pub fn abandon_at_deadline(
    abandon: &CancellationToken,
    max: Duration,
    interrupt: &CancellationToken,
    after_interrupt: Duration,
) {
    let (abandon, interrupt) = (abandon.clone(), interrupt.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(max) => {}
            _ = async { interrupt.cancelled().await; tokio::time::sleep(after_interrupt / 2).await } => {}
        }
        abandon.cancel();
    });
}

/// Poll every 50 ms until `caught_up()` holds, `progress()` (a count that grows
/// while consumers work) stood still for `grace`, or `max` passed since `started`.
/// After a Ctrl-C (before the drain or during it) the drain goes on for at most
/// `after_interrupt` more; when that deadline ends it, it was cut short.
pub async fn drain(
    started: Instant,
    grace: Duration,
    max: Duration,
    interrupt: &CancellationToken,
    after_interrupt: Duration,
    mut caught_up: impl FnMut() -> bool,
    mut progress: impl FnMut() -> u64,
) -> DrainEnd {
    let mut last_total = progress();
    let mut last_move = Instant::now();
    let mut deadline = started + max;
    let mut interrupted = false;
    loop {
        if !interrupted && interrupt.is_cancelled() {
            interrupted = true;
            deadline = deadline.min(Instant::now() + after_interrupt);
        }
        if caught_up() {
            return DrainEnd::CaughtUp;
        }
        let total = progress();
        if total != last_total {
            last_total = total;
            last_move = Instant::now();
        }
        if last_move.elapsed() >= grace {
            return DrainEnd::Grace;
        }
        if Instant::now() >= deadline {
            return DrainEnd::CutShort;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn ends_caught_up_grace_or_cut_short() {
        let never = CancellationToken::new();
        let n = AtomicU64::new(0);
        let end = drain(
            Instant::now(),
            Duration::from_secs(5),
            Duration::from_secs(5),
            &never,
            Duration::from_secs(10),
            || n.fetch_add(1, Ordering::Relaxed) >= 3,
            || 0,
        )
        .await;
        assert_eq!(end, DrainEnd::CaughtUp);
        let end = drain(
            Instant::now(),
            Duration::from_millis(120),
            Duration::from_secs(5),
            &never,
            Duration::from_secs(10),
            || false,
            || 7,
        )
        .await;
        assert_eq!(end, DrainEnd::Grace);
        let moving = AtomicU64::new(0);
        let end = drain(
            Instant::now(),
            Duration::from_secs(5),
            Duration::from_millis(150),
            &never,
            Duration::from_secs(10),
            || false,
            || moving.fetch_add(1, Ordering::Relaxed),
        )
        .await;
        assert_eq!(end, DrainEnd::CutShort);
        // After a Ctrl-C the drain goes on for at most `after_interrupt`, while things
        // still move.
        let ctrl_c = CancellationToken::new();
        ctrl_c.cancel();
        let t0 = Instant::now();
        let moving = AtomicU64::new(0);
        let end = drain(
            Instant::now(),
            Duration::from_secs(5),
            Duration::from_secs(60),
            &ctrl_c,
            Duration::from_millis(200),
            || false,
            || moving.fetch_add(1, Ordering::Relaxed),
        )
        .await;
        assert_eq!(end, DrainEnd::CutShort, "Ctrl-C: a short bounded drain");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn grace_covers_a_lease() {
        assert_eq!(grace(None, None), Duration::from_secs(5));
        assert_eq!(grace(None, Some(30_000)), Duration::from_secs(35));
        assert_eq!(
            grace(Some(Duration::from_secs(2)), Some(30_000)),
            Duration::from_secs(2)
        );
    }
}
