//! Bare client loops: the publish / consume / ack calls of one system made with its
//! client library alone, for `crossbench selftest tax` (docs/performance.md, "The
//! harness tax per adapter"), which runs one beside a real cell of the stream workload
//! on the same broker and compares the loader CPU each spends per delivery.
//!
//! A bare loop is what a careful programmer would write to move the same messages
//! through the same objects: no handler, no key-batches, no in-flight key set, no
//! counters beyond the four below, no stage, no log, no histogram. Its objects are
//! built by the adapter's own `setup` (outside the measured window), so the bare side
//! reads and writes queues, streams and partitions of exactly the cell's shape; from
//! then on only the client library is called. Each system's loop is in its own folder
//! (`<system>/bare.rs`), built by [`crate::SystemOptions::bare`].

use std::fmt::Write as _;

use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::broker::Topology;
use crate::counter::Counter;
use crate::error::BrokerError;

/// What a bare loop is asked to move, and through what.
#[derive(Debug, Clone)]
pub struct BarePlan {
    /// One topic with one group, built with the adapter's own `setup` (reset first).
    pub topology: Topology,
    /// Messages per read, fetch or pull at most (the cell's `consume.pop_batch`).
    pub batch: usize,
    /// The concurrency the cell's stage gives the adapter (`ConsumeOptions::lanes`);
    /// loops whose adapter sizes a pool or a prefetch from it do the same.
    pub lanes: usize,
}

impl BarePlan {
    /// The plan's topic and its one group.
    pub fn stream(&self) -> Result<(&str, &str), BrokerError> {
        match self.topology.topics.as_slice() {
            [t] if t.groups.len() == 1 => Ok((&t.name, &t.groups[0])),
            _ => Err(BrokerError::Other(
                "a bare loop runs one topic with one group".into(),
            )),
        }
    }
}

/// What a bare loop did. Relaxed atomics, read by the caller while it runs.
#[derive(Debug, Default)]
pub struct BareCounters {
    /// Messages the system accepted (publish calls that returned Ok, times their
    /// payloads).
    pub published: Counter,
    /// Messages received (redeliveries included).
    pub consumed: Counter,
    /// Messages acknowledged (deleted, acked, committed).
    pub acked: Counter,
    /// Failed calls (each retried or left to redelivery).
    pub errors: Counter,
}

/// One system's bare loop.
#[async_trait]
pub trait BareClient: Send + Sync + std::fmt::Debug {
    /// Publish one key's payloads, in order; returns when the system accepted them at
    /// the tier the adapter would have asked for.
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError>;

    /// Receive, acknowledge and count until `stop`; failures are counted and retried.
    async fn consume(&self, counters: &BareCounters, stop: CancellationToken);

    /// Release connections.
    async fn close(&self);
}

/// Why a bare loop could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BareError {
    #[error("system `{name}` has no bare loop: {why}")]
    Unsupported { name: &'static str, why: String },
    #[error(transparent)]
    Build(#[from] crate::registry::BuildError),
    #[error("system `{name}`: setting up the bare loop's objects: {source}")]
    Setup {
        name: &'static str,
        #[source]
        source: BrokerError,
    },
}

/// A JSON message body of exactly `bytes` bytes (at least the fields' length):
/// `{"p":<partition>,"s":<seq>,"x":"xx…"}`. Valid JSON, so a system that stores
/// JSON (pgmq's jsonb) takes it; unique per (partition, seq), so nothing dedups it.
pub fn body(partition: u64, seq: u64, bytes: usize) -> Bytes {
    let mut s = String::with_capacity(bytes.max(48));
    let _ = write!(s, "{{\"p\":{partition},\"s\":{seq},\"x\":\"");
    let pad = bytes.saturating_sub(s.len() + 2);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str("\"}");
    Bytes::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_of_the_size_asked() {
        let b = body(123, 45_678, 256);
        assert_eq!(b.len(), 256);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            (v["p"].as_u64(), v["s"].as_u64()),
            (Some(123), Some(45_678))
        );
        // Too small a size: the fields, nothing cut.
        let small = body(1, 2, 4);
        assert!(serde_json::from_slice::<serde_json::Value>(&small).is_ok());
    }
}
