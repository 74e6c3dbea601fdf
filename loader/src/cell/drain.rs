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
    /// Nothing moved for the grace period while the system kept failing (publish or
    /// consume errors during that time): it is down, so what it still holds can be
    /// neither delivered nor called lost. The checker treats it as cut short.
    Unreachable,
    /// Nothing moved for the grace period while the system said it still held
    /// messages for the consumers ([`adapters::Broker::held`]): the consumers stalled,
    /// and what the system holds is in flight, not lost. The checker treats it as cut
    /// short.
    Stalled,
}

impl DrainEnd {
    /// The record's name (`drain.outcome`).
    pub fn name(&self) -> &'static str {
        match self {
            DrainEnd::CaughtUp => "caught-up",
            DrainEnd::Grace => "grace",
            DrainEnd::CutShort => "cut-short",
            DrainEnd::Unreachable => "unreachable",
            DrainEnd::Stalled => "stalled",
        }
    }

    /// The end a record's name (`drain.outcome`) stands for.
    pub fn from_name(name: &str) -> Option<DrainEnd> {
        [
            DrainEnd::CaughtUp,
            DrainEnd::Grace,
            DrainEnd::CutShort,
            DrainEnd::Unreachable,
            DrainEnd::Stalled,
        ]
        .into_iter()
        .find(|d| d.name() == name)
    }

    /// The checker's name (`drain=` of produced.meta): an unreachable system's tail,
    /// and a stalled one's, is in flight, not lost.
    pub fn meta_name(&self) -> &'static str {
        match self {
            DrainEnd::Unreachable | DrainEnd::Stalled => "cut-short",
            d => d.name(),
        }
    }
}

/// A drain that ended by its grace, told what the system still holds: when it holds
/// messages, the consumers stalled (`Stalled`) and the warning says where; otherwise
/// the grace stands and the checker may call the missing tail lost.
pub fn judge_grace(
    end: DrainEnd,
    held: Option<&adapters::Held>,
    system: &str,
) -> (DrainEnd, Option<String>) {
    match (end, held) {
        (DrainEnd::Grace, Some(h)) if h.messages > 0 => (
            DrainEnd::Stalled,
            Some(format!(
                "STALLED: nothing was delivered for the drain's grace while {system} still held {} messages for the consumers in {} places ({}): the consumers stalled; the tail is counted in flight, not lost",
                h.messages,
                h.places,
                h.describe()
            )),
        ),
        (end, _) => (end, None),
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
/// A grace that ran out while `errors()` (the system's failed answers) kept growing
/// ends the drain `Unreachable`. After a Ctrl-C (before the drain or during it) the
/// drain goes on for at most `after_interrupt` more; when that deadline ends it, it
/// was cut short.
#[allow(clippy::too_many_arguments)]
pub async fn drain(
    started: Instant,
    grace: Duration,
    max: Duration,
    interrupt: &CancellationToken,
    after_interrupt: Duration,
    mut caught_up: impl FnMut() -> bool,
    mut progress: impl FnMut() -> u64,
    mut errors: impl FnMut() -> u64,
) -> DrainEnd {
    let mut last_total = progress();
    let mut errors_at_move = errors();
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
            errors_at_move = errors();
        }
        if last_move.elapsed() >= grace {
            return if errors() > errors_at_move {
                DrainEnd::Unreachable
            } else {
                DrainEnd::Grace
            };
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

    #[test]
    fn a_grace_with_messages_still_held_is_a_stall() {
        let held = adapters::Held::from_places([("q1".to_string(), 58), ("q2".to_string(), 0)]);
        let (end, warning) = judge_grace(DrainEnd::Grace, Some(&held), "rabbitmq");
        assert_eq!(end, DrainEnd::Stalled);
        assert_eq!(end.meta_name(), "cut-short", "in flight, not lost");
        assert_eq!(DrainEnd::from_name("stalled"), Some(DrainEnd::Stalled));
        assert_eq!(DrainEnd::from_name("nonsense"), None);
        let w = warning.unwrap();
        assert!(w.contains("rabbitmq still held 58 messages"), "{w}");
        assert!(w.contains("58 in q1"), "{w}");
        // Nothing held, or a system that cannot say: the grace stands (a loss).
        let empty = adapters::Held::default();
        assert_eq!(
            judge_grace(DrainEnd::Grace, Some(&empty), "mem"),
            (DrainEnd::Grace, None)
        );
        assert_eq!(
            judge_grace(DrainEnd::Grace, None, "kafka"),
            (DrainEnd::Grace, None)
        );
        // Only a grace is judged: the other ends stand whatever is held.
        for end in [
            DrainEnd::CaughtUp,
            DrainEnd::CutShort,
            DrainEnd::Unreachable,
        ] {
            assert_eq!(judge_grace(end, Some(&held), "x"), (end, None));
        }
    }

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
            || 0,
        )
        .await;
        assert_eq!(end, DrainEnd::Grace);
        // Nothing moves and the system keeps failing: unreachable, not lost.
        let errs = AtomicU64::new(0);
        let end = drain(
            Instant::now(),
            Duration::from_millis(120),
            Duration::from_secs(5),
            &never,
            Duration::from_secs(10),
            || false,
            || 7,
            || errs.fetch_add(1, Ordering::Relaxed),
        )
        .await;
        assert_eq!(end, DrainEnd::Unreachable);
        assert_eq!(end.meta_name(), "cut-short");
        let moving = AtomicU64::new(0);
        let end = drain(
            Instant::now(),
            Duration::from_secs(5),
            Duration::from_millis(150),
            &never,
            Duration::from_secs(10),
            || false,
            || moving.fetch_add(1, Ordering::Relaxed),
            || 0,
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
            || 0,
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
