//! How a producer publishes one request: again and again until the system accepts
//! it, backing off 3 ms doubling to 500 ms, until the request's deadline passes or
//! the run abandons what is left (the drain's deadline, or Ctrl-C).
//!
//! A request given up is classified the way Jepsen classifies a write:
//! [`GiveUp::Failed`] when no attempt can have landed (every error was the system's
//! explicit refusal, or nothing was tried), [`GiveUp::Indeterminate`] when one may have
//! (an attempt timed out, lost its connection, or was cut off by the deadline or the
//! abandon while in flight).

use std::time::Duration;

use tokio::time::Instant;

use adapters::{Broker, BrokerError, Counter};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

pub use crate::measure::outcomes::GiveUp;

/// A request that was not accepted, and what is known of it.
#[derive(Debug)]
pub struct GaveUp {
    /// The last attempt's error (`None`: nothing was tried, or the last attempt was cut off).
    pub error: Option<BrokerError>,
    pub kind: GiveUp,
}

/// Publish `payloads` of `key` to `topic` until accepted: the round trip of the
/// accepted attempt, or what is known once `deadline` passed or `abandon` fired.
/// Every failed attempt is shown to `on_error`; every retry counts in `retries`.
#[allow(clippy::too_many_arguments)]
pub async fn publish_until(
    broker: &dyn Broker,
    topic: &str,
    key: &str,
    payloads: &[Bytes],
    deadline: Instant,
    abandon: &CancellationToken,
    retries: &Counter,
    mut on_error: impl FnMut(&BrokerError),
) -> Result<Duration, GaveUp> {
    let mut backoff = Duration::from_millis(3);
    // Did any attempt possibly land?
    let mut maybe_landed = false;
    let mut last: Option<BrokerError> = None;
    loop {
        let kind = |maybe: bool| {
            if maybe {
                GiveUp::Indeterminate
            } else {
                GiveUp::Failed
            }
        };
        if abandon.is_cancelled() || Instant::now() >= deadline {
            return Err(GaveUp {
                error: last,
                kind: kind(maybe_landed),
            });
        }
        let t0 = Instant::now();
        let attempt = tokio::select! {
            biased;
            r = broker.publish(topic, key, payloads) => Some(r),
            _ = abandon.cancelled() => None,
            _ = tokio::time::sleep_until(deadline) => None,
        };
        match attempt {
            Some(Ok(())) => return Ok(t0.elapsed()),
            Some(Err(e)) => {
                on_error(&e);
                maybe_landed |= !e.is_definite();
                last = Some(e);
            }
            // Cut off in flight: the request may have reached the system.
            None => {
                return Err(GaveUp {
                    error: last,
                    kind: GiveUp::Indeterminate,
                })
            }
        }
        if abandon.is_cancelled() || Instant::now() >= deadline {
            continue; // gives up at the top
        }
        retries.inc();
        tokio::select! {
            _ = abandon.cancelled() => {}
            _ = tokio::time::sleep_until((Instant::now() + backoff).min(deadline)) => {}
        }
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adapters::mem::{MemBroker, MemOptions};
    use adapters::{Durability, TopicSpec, Topology};

    async fn broker(opts: MemOptions) -> MemBroker {
        let b = MemBroker::new(opts);
        b.setup(&Topology {
            topics: vec![TopicSpec {
                name: "t".into(),
                groups: vec!["g".into()],
            }],
            keys: 1,
            lanes: 1,
            durability: Durability::Memory,
            dedup_window_sec: 0,
            reset: true,
            sharing: adapters::Sharing::ALONE,
        })
        .await
        .unwrap();
        b
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_publish_past_its_deadline_failed() {
        let b = broker(MemOptions::default()).await;
        let r = publish_until(
            &b,
            "nope",
            "k",
            &[Bytes::from_static(b"x")],
            Instant::now() + Duration::from_millis(50),
            &CancellationToken::new(),
            &Counter::default(),
            |_| {},
        )
        .await
        .unwrap_err();
        assert_eq!(r.kind, GiveUp::Failed, "{r:?}");
        assert!(r.error.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_cut_off_by_abandon_is_indeterminate() {
        let b = broker(MemOptions {
            publish_delay: Duration::from_secs(5),
            ..MemOptions::default()
        })
        .await;
        let stop = CancellationToken::new();
        let s2 = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            s2.cancel();
        });
        let r = publish_until(
            &b,
            "t",
            "k",
            &[Bytes::from_static(b"x")],
            far(),
            &stop,
            &Counter::default(),
            |_| {},
        )
        .await
        .unwrap_err();
        assert_eq!(r.kind, GiveUp::Indeterminate);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_tried_after_abandon_is_failed() {
        let b = broker(MemOptions::default()).await;
        let stop = CancellationToken::new();
        stop.cancel();
        let r = publish_until(
            &b,
            "t",
            "k",
            &[Bytes::from_static(b"x")],
            far(),
            &stop,
            &Counter::default(),
            |_| {},
        )
        .await
        .unwrap_err();
        assert_eq!(r.kind, GiveUp::Failed);
        assert!(r.error.is_none());
    }
}
