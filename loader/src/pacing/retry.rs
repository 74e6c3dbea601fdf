//! How a producer publishes one request: again and again until the system accepts
//! it, backing off 3 ms doubling to 500 ms, until the run abandons what is left
//! (the drain's deadline, or Ctrl-C).

use std::time::Duration;

use tokio::time::Instant;

use adapters::{Broker, BrokerError, Counter};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

/// Publish `payloads` of `key` to `topic` until accepted: the round trip of the
/// accepted attempt, or the last error once `abandon` fired. Every failed attempt is
/// shown to `on_error`; every retry counts in `retries`.
pub async fn publish_until(
    broker: &dyn Broker,
    topic: &str,
    key: &str,
    payloads: &[Bytes],
    abandon: &CancellationToken,
    retries: &Counter,
    mut on_error: impl FnMut(&BrokerError),
) -> Result<Duration, BrokerError> {
    let mut backoff = Duration::from_millis(3);
    loop {
        let t0 = Instant::now();
        match broker.publish(topic, key, payloads).await {
            Ok(()) => return Ok(t0.elapsed()),
            Err(e) => {
                on_error(&e);
                if abandon.is_cancelled() {
                    return Err(e);
                }
                retries.inc();
                tokio::select! {
                    _ = abandon.cancelled() => return Err(e),
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}
