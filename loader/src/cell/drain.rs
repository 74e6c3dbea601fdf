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
/// the drain's deadline passes, or 5 s after a Ctrl-C.
pub fn abandon_at_deadline(
    abandon: &CancellationToken,
    max: Duration,
    interrupt: &CancellationToken,
) {
    let (abandon, interrupt) = (abandon.clone(), interrupt.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(max) => {}
            _ = async { interrupt.cancelled().await; tokio::time::sleep(Duration::from_secs(5)).await } => {}
        }
        abandon.cancel();
    });
}

/// Poll every 50 ms until `caught_up()` holds, `progress()` (a count that grows
/// while consumers work) stood still for `grace`, or `max` passed since `started`.
/// A Ctrl-C during the drain cuts it short; one that already ended the rated window
/// early (`stopped_early`) does not.
pub async fn drain(
    started: Instant,
    grace: Duration,
    max: Duration,
    interrupt: &CancellationToken,
    stopped_early: bool,
    mut caught_up: impl FnMut() -> bool,
    mut progress: impl FnMut() -> u64,
) -> DrainEnd {
    let mut last_total = progress();
    let mut last_move = Instant::now();
    loop {
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
        if started.elapsed() >= max {
            return DrainEnd::CutShort;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = async { if stopped_early { std::future::pending::<()>().await } else { interrupt.cancelled().await } } => {
                return DrainEnd::CutShort;
            }
        }
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
            false,
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
            false,
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
            false,
            || false,
            || moving.fetch_add(1, Ordering::Relaxed),
        )
        .await;
        assert_eq!(end, DrainEnd::CutShort);
        let ctrl_c = CancellationToken::new();
        ctrl_c.cancel();
        let end = drain(
            Instant::now(),
            Duration::from_secs(5),
            Duration::from_secs(5),
            &ctrl_c,
            false,
            || false,
            || 0,
        )
        .await;
        assert_eq!(end, DrainEnd::CutShort, "Ctrl-C during the drain");
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
