//! Scenario section `mem`: the control broker's test knobs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::options::{OptionsError, Section};

/// What a fault does to one message of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The message is consumed without ever being handed to the stage (a loss).
    Drop,
    /// The message is handed to the stage twice in a row (a duplicate).
    Duplicate,
    /// The message is held back and handed over after the next message of its key
    /// (an order violation).
    Reorder,
    /// The stream's consumer takes nothing from this message on, while the broker
    /// keeps the message and every later one (a stalled consumer: nothing lost).
    Stall,
}

/// A deliberate misbehaviour of the control broker, for tests of the checker path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub topic: String,
    pub group: String,
    pub kind: FaultKind,
    /// 0-based ordinal, among the messages first dispatched to this stream, of the
    /// message the fault applies to.
    pub at: u64,
}

/// What a publish fault does to one publish call (and to every retry of it: a
/// retry carries the same payloads, and gets the same answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PublishFaultKind {
    /// Store the payloads, then answer "refused": an aborted read once the producer
    /// gives up (Jepsen's *aborted read*).
    RefuseButKeep,
    /// Store the payloads, then answer "timed out": an indeterminate publish that
    /// is delivered (*recovered*).
    TimeoutButKeep,
    /// Store nothing and answer "timed out": an indeterminate publish never
    /// delivered (*unseen at end*).
    Timeout,
}

/// A deliberate misbehaviour on the publish side, for tests of Jepsen's taxonomy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishFault {
    pub topic: String,
    pub kind: PublishFaultKind,
    /// 0-based ordinal, among the publish calls to this topic, of the call it hits.
    pub at: u64,
}

/// Options of the control broker (scenario section `mem`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemOptions {
    /// Sleep this long inside every publish call (a deliberately slow broker).
    #[serde(with = "crate::duration_text")]
    pub publish_delay: Duration,
    /// Misbehaviours to inject (consume side).
    pub faults: Vec<Fault>,
    /// Misbehaviours to inject (publish side).
    pub publish_faults: Vec<PublishFault>,
    /// Refuse a topology with more ordered lanes per topic than this (0 = no limit),
    /// the way a broker refuses a partition count above its limit. Exercises the
    /// loader's REFUSED record.
    pub max_lanes: u64,
    /// Hand out at most this many messages per second, all streams together (0 = no
    /// cap): a broker with a known capacity, for tests of the ceiling search.
    pub max_deliveries_per_sec: u64,
}

impl Section for MemOptions {
    fn validate(&self) -> Result<(), OptionsError> {
        if self.max_deliveries_per_sec > 100_000_000 {
            return Err(OptionsError::new(
                "mem",
                "max_deliveries_per_sec",
                "must be at most 100000000 (0 = no cap)",
            ));
        }
        if self.publish_delay > Duration::from_secs(60) {
            return Err(OptionsError::new(
                "mem",
                "publish_delay",
                "must be at most 60s",
            ));
        }
        Ok(())
    }
}
