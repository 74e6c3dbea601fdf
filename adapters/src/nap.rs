//! A pause that a stop cuts short: every adapter's back-off and idle wait.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Sleep unless `stop` fires first; true when stopped.
pub async fn nap(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = stop.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}
