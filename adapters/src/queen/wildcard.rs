//! Wildcard pops (modes `wildcard` and `auto-ack`): the broker picks up to K free
//! partitions per pop and leases them to this consumer; the adapter hands each
//! partition's messages to the stage as one key-batch, all of them concurrently, and
//! settles the whole pop with one bulk ack.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::encode;
use super::stream::{nap, Stream};

/// The wildcard pop URL of a stream.
pub(crate) fn pop_path(s: &Stream, partitions: u32, long_poll: Duration) -> String {
    let mut p = format!(
        "/api/v1/pop/queue/{}?batch={}&consumerGroup={}&autoAck={}",
        encode(&s.queue),
        s.batch,
        encode(&s.group),
        s.auto_ack
    );
    if partitions > 1 {
        p.push_str(&format!("&partitions={partitions}"));
    }
    if long_poll.is_zero() {
        p.push_str("&wait=false");
    } else {
        p.push_str(&format!("&wait=true&timeout={}", long_poll.as_millis()));
    }
    p
}

/// One pop loop; runs until the stream's stop token fires.
pub(crate) async fn pop_loop(s: Arc<Stream>, partitions: u32, long_poll: Duration) {
    let path = pop_path(&s, partitions, long_poll);
    let mut err_backoff = Duration::from_millis(50);
    let mut empty_backoff = Duration::from_millis(5);
    loop {
        let t0 = Instant::now();
        let popped = tokio::select! {
            _ = s.stop.cancelled() => break,
            r = s.pop(&path, long_poll) => r,
        };
        let claims = match popped {
            Ok(c) => {
                err_backoff = Duration::from_millis(50);
                c
            }
            Err(_) => {
                if nap(err_backoff, &s.stop).await {
                    break;
                }
                err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        if claims.is_empty() {
            // A long poll that came back early (another consumer holds every partition
            // with messages, or the server does not park) must not spin.
            if t0.elapsed() < long_poll / 2 || long_poll.is_zero() {
                if nap(empty_backoff, &s.stop).await {
                    break;
                }
                empty_backoff = (empty_backoff * 2).min(Duration::from_millis(100));
            }
            continue;
        }
        empty_backoff = Duration::from_millis(5);
        if s.stop.is_cancelled() {
            s.release(claims).await;
            break;
        }
        let (mine, busy): (Vec<_>, Vec<_>) =
            claims.into_iter().partition(|c| s.try_claim(&c.partition));
        s.release(busy).await;
        let done = futures::future::join_all(mine.into_iter().map(|c| s.run(c))).await;
        s.settle(done).await;
    }
}
