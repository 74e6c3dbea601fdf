//! Scenario section `stream`: every knob of the stream workload (SPEC §9).
//!
//! One topic; a partition space of `space` partitions of which a `window` takes
//! pushes at a time, the window advancing by `rotate_step` partitions every
//! `rotate_every` (or a fixed set: `fixed: N`); producers push `push.batch`
//! messages per request to `push.partitions_per_request` partitions; `consume.groups`
//! consumer groups of `consume.consumers` members each pop up to `consume.pop_batch`
//! messages. The offered rate is the scenario's `rate` (one cell) or the `ladder`
//! (one cell per rate).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use adapters::System;

use crate::scenario::{Dur, ScenarioError};

/// The partition space and its active window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionsSection {
    /// A fixed set of N partitions, all active all the time (seed 002's shape).
    /// Exclusive with `space`.
    pub fixed: u64,
    /// S: partitions in the space (seed 001: 1 000 000). They come into existence on
    /// their first push.
    pub space: u64,
    /// W: partitions taking pushes at any one time; 0 = the whole space.
    pub window: u64,
    /// The window advances every this long; 0 = it never moves.
    pub rotate_every: Dur,
    /// Partitions the window advances by at each step; 0 = `window` (contiguous, no overlap).
    pub rotate_step: u64,
    /// Before the warm-up, give every partition of the space one message and let
    /// every group drain it: the rated window then runs on a space that exists in
    /// full (seed 001's completed space). Off by default: partitions come into
    /// existence on their first push, inside the window.
    pub complete: bool,
}

/// The producer side.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PushSection {
    /// Messages per push request.
    pub batch: u64,
    /// Partitions one request spreads its messages over (batch / this each).
    pub partitions_per_request: u64,
    /// Ordered push workers; a partition always goes through the same worker (so its
    /// pushes stay in seq order). Clamped to the largest divisor of the window.
    pub workers: u64,
    /// Requests queued or in flight, all workers together; a request that finds no
    /// room is shed whole (counted, no seq consumed).
    pub in_flight: u64,
    /// What wakes the pacer at each request's due instant.
    pub pacer: PacerDrive,
}

/// What wakes the stream producer's pacer.
///
/// `thread`: an OS thread of its own at raised priority, which sleeps to each
/// request's due instant with the kernel's sub-millisecond timer and hands the request
/// to a runtime worker: two thread wake-ups per request. `runtime`: a task on the
/// loader's runtime sleeping on a `timerfd` in the runtime's I/O driver, the same
/// kernel timer, so as precise while the runtime has room; the worker the timer wakes
/// runs the hand-over itself (one wake-up per request), at the runtime's priority,
/// not raised, so a busy runtime delays it. (Until 2026-12-03 `runtime` slept on
/// tokio's millisecond timer: schedule lag p99 1.2–2.1 ms.) Latencies are measured
/// from the scheduled instant either way, so a later hand-over shows in them and in
/// the schedule lag, never hidden. docs/performance.md ("The harness tax per adapter")
/// has what each costs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum PacerDrive {
    #[default]
    Thread,
    Runtime,
}

impl Default for PushSection {
    fn default() -> Self {
        PushSection {
            batch: 100,
            partitions_per_request: 1,
            workers: 64,
            in_flight: 4096,
            pacer: PacerDrive::Thread,
        }
    }
}

/// The message body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PayloadSection {
    /// Bytes per message, stamp included (the stamp alone is about 60 bytes).
    pub bytes: u64,
    /// Pad with one repeated character instead of random characters.
    pub compressible: bool,
}

impl Default for PayloadSection {
    fn default() -> Self {
        PayloadSection {
            bytes: 256,
            compressible: false,
        }
    }
}

/// How consumers acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AckMode {
    /// The ack is sent without waiting for it, up to `ack_in_flight` batches unacked
    /// per group beyond the members' own.
    #[default]
    Async,
    /// Every member waits for its ack before popping again.
    Sync,
}

/// The consumer side.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConsumeSection {
    /// Consumer groups, each reading every message (`g1`, `g2`, ...).
    pub groups: u64,
    /// C: members per group (concurrent key-batches a group works on).
    pub consumers: u64,
    /// Messages per pop / fetch / read at most.
    pub pop_batch: u64,
    /// K: partitions one pop may span, where the system has that notion (Queen).
    pub pop_partitions: u64,
    pub ack: AckMode,
    /// Batches whose ack may be outstanding per group (ack: async).
    pub ack_in_flight: u64,
}

impl Default for ConsumeSection {
    fn default() -> Self {
        ConsumeSection {
            groups: 1,
            consumers: 8,
            pop_batch: 1000,
            pop_partitions: 1,
            ack: AckMode::Async,
            ack_in_flight: 256,
        }
    }
}

/// Scenario section `stream`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct StreamSection {
    pub partitions: PartitionsSection,
    /// Offered rates in messages/s, one cell each (`<name>-r<rate>`). Exclusive with
    /// the top-level `rate`.
    pub ladder: Vec<u64>,
    /// Physical ordered lanes the partitions are placed on (RabbitMQ lane queues,
    /// pgmq groups); 0 = one per partition.
    pub lanes: u64,
    pub push: PushSection,
    pub payload: PayloadSection,
    pub consume: ConsumeSection,
}

/// The resolved partition shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// S.
    pub space: u64,
    /// W.
    pub window: u64,
    /// Window step period in µs (0 = static window).
    pub rotate_every_us: u64,
    /// Partitions per step.
    pub rotate_step: u64,
}

impl StreamSection {
    /// The partition shape with every default resolved.
    pub fn shape(&self) -> Shape {
        let p = &self.partitions;
        let space = if p.fixed > 0 { p.fixed } else { p.space };
        let window = if p.fixed > 0 || p.window == 0 {
            space
        } else {
            p.window
        };
        let rotating = p.fixed == 0 && !p.rotate_every.0.is_zero() && window < space;
        Shape {
            space,
            window,
            rotate_every_us: if rotating {
                p.rotate_every.0.as_micros() as u64
            } else {
                0
            },
            rotate_step: if !rotating {
                0
            } else if p.rotate_step == 0 {
                window
            } else {
                p.rotate_step
            },
        }
    }

    /// Physical lanes (= partitions unless lowered).
    pub fn lanes(&self) -> u64 {
        if self.lanes == 0 {
            self.shape().space
        } else {
            self.lanes.min(self.shape().space)
        }
    }

    /// The concurrency handed to the adapter per group (`ConsumeOptions::lanes`):
    /// the members, plus the batches whose ack may be outstanding when acks are async.
    pub fn consume_lanes(&self) -> u64 {
        let c = &self.consume;
        match c.ack {
            AckMode::Sync => c.consumers,
            AckMode::Async => c.consumers + c.ack_in_flight,
        }
    }

    /// Check every knob; `rate` is the top-level rate (0 = none given).
    pub fn validate(&self, rate: u64, system: System) -> Result<(), ScenarioError> {
        self.validate_partitions()?;
        self.validate_rates(rate)?;
        self.validate_push()?;
        self.validate_consume(system)?;
        let shape = self.shape();
        if self.lanes > shape.space {
            return Err(invalid(
                "stream.lanes",
                format!(
                    "must not exceed the partitions ({}); 0 = one lane per partition",
                    shape.space
                ),
            ));
        }
        Ok(())
    }

    /// The partitions: a fixed set, or a space with a rotating window.
    fn validate_partitions(&self) -> Result<(), ScenarioError> {
        let p = &self.partitions;
        if p.fixed > 0 && (p.space > 0 || p.window > 0 || !p.rotate_every.0.is_zero()) {
            return Err(invalid(
                "stream.partitions.fixed",
                "a fixed set excludes space, window and rotate_every; give either `fixed: N` or `space:` (+ `window:`, `rotate_every:`)",
            ));
        }
        if p.fixed == 0 && p.space == 0 {
            return Err(invalid(
                "stream.partitions",
                "give the partitions: `fixed: N` (N always-active partitions) or `space: S` with `window: W` and `rotate_every:`",
            ));
        }
        let shape = self.shape();
        if shape.space > 100_000_000 {
            return Err(invalid(
                "stream.partitions.space",
                "must be at most 100000000",
            ));
        }
        if shape.window > shape.space {
            return Err(invalid(
                "stream.partitions.window",
                format!("must not exceed space ({})", shape.space),
            ));
        }
        if p.fixed == 0 && shape.window < shape.space && p.rotate_every.0.is_zero() {
            return Err(invalid(
                "stream.partitions.rotate_every",
                "a window smaller than the space must rotate (e.g. rotate_every: 1s), or the rest of the space is never used; set window = space for a static set",
            ));
        }
        if !p.rotate_every.0.is_zero() && p.rotate_every.0 < Duration::from_millis(10) {
            return Err(invalid("stream.partitions.rotate_every", "must be >= 10ms"));
        }
        if p.rotate_step > shape.space {
            return Err(invalid(
                "stream.partitions.rotate_step",
                "must not exceed space",
            ));
        }
        if p.complete && shape.space > 10_000_000 {
            return Err(invalid(
                "stream.partitions.complete",
                "completes at most 10000000 partitions (one message each before the warm-up); lower space or leave complete out",
            ));
        }
        Ok(())
    }

    /// The offered rate: the top-level one, or a ladder of distinct rates.
    fn validate_rates(&self, rate: u64) -> Result<(), ScenarioError> {
        match (rate, self.ladder.is_empty()) {
            (0, true) => {
                return Err(invalid(
                    "rate",
                    "give the offered rate: `rate: <msg/s>` (one cell) or `stream.ladder: [r1, r2, ...]` (one cell per rate)",
                ))
            }
            (r, false) if r > 0 => {
                return Err(invalid(
                    "stream.ladder",
                    "give either the top-level `rate` or `stream.ladder`, not both",
                ))
            }
            _ => {}
        }
        for (i, r) in self.ladder.iter().enumerate() {
            if *r == 0 || *r > 10_000_000 {
                return Err(invalid(
                    &format!("stream.ladder[{i}]"),
                    "must be between 1 and 10000000 msg/s",
                ));
            }
            if self.ladder[..i].contains(r) {
                return Err(invalid(
                    &format!("stream.ladder[{i}]"),
                    format!("rate {r} appears twice (cells are named by rate)"),
                ));
            }
        }
        Ok(())
    }

    /// The producers: batches, requests, workers and what they keep in flight.
    fn validate_push(&self) -> Result<(), ScenarioError> {
        let shape = self.shape();
        let push = &self.push;
        if push.batch == 0 || push.batch > 100_000 {
            return Err(invalid("stream.push.batch", "must be between 1 and 100000"));
        }
        if push.partitions_per_request == 0 || push.partitions_per_request > push.batch {
            return Err(invalid(
                "stream.push.partitions_per_request",
                format!("must be between 1 and push.batch ({})", push.batch),
            ));
        }
        if !push.batch.is_multiple_of(push.partitions_per_request) {
            return Err(invalid(
                "stream.push.partitions_per_request",
                format!(
                    "must divide push.batch ({}) so every partition of a request gets the same count",
                    push.batch
                ),
            ));
        }
        if push.workers == 0 || push.workers > 4096 {
            return Err(invalid("stream.push.workers", "must be between 1 and 4096"));
        }
        let workers = workers_for(push.workers, shape.window, shape.space);
        if push.partitions_per_request > shape.window / workers {
            return Err(invalid(
                "stream.push.partitions_per_request",
                format!(
                    "a request's partitions must share a push worker: at most window / workers = {} / {} = {}; lower push.workers or partitions_per_request",
                    shape.window,
                    workers,
                    shape.window / workers
                ),
            ));
        }
        if push.in_flight == 0 || push.in_flight > 1_000_000 {
            return Err(invalid(
                "stream.push.in_flight",
                "must be between 1 and 1000000",
            ));
        }
        Ok(())
    }

    /// The payload and the consumers: groups, members, pops and acknowledgements.
    fn validate_consume(&self, system: System) -> Result<(), ScenarioError> {
        let pl = &self.payload;
        if pl.bytes < 64 || pl.bytes > 1024 * 1024 {
            return Err(invalid(
                "stream.payload.bytes",
                "must be between 64 (the stamp needs about 60) and 1048576",
            ));
        }
        let c = &self.consume;
        if c.groups == 0 || c.groups > 1000 {
            return Err(invalid(
                "stream.consume.groups",
                "must be between 1 and 1000",
            ));
        }
        if c.consumers == 0 || c.consumers > 10_000 {
            return Err(invalid(
                "stream.consume.consumers",
                "must be between 1 and 10000",
            ));
        }
        if c.pop_batch == 0 || c.pop_batch > 100_000 {
            return Err(invalid(
                "stream.consume.pop_batch",
                "must be between 1 and 100000",
            ));
        }
        if c.pop_partitions == 0 {
            return Err(invalid("stream.consume.pop_partitions", "must be >= 1"));
        }
        if c.pop_partitions > 1 && !system.capabilities().multi_partition_pop {
            return Err(invalid(
                "stream.consume.pop_partitions",
                format!(
                    "system {} has no multi-partition pop; remove the field or set 1",
                    system.name()
                ),
            ));
        }
        if c.ack == AckMode::Async && (c.ack_in_flight == 0 || c.ack_in_flight > 100_000) {
            return Err(invalid(
                "stream.consume.ack_in_flight",
                "must be between 1 and 100000 with ack: async",
            ));
        }
        Ok(())
    }
}

/// Push workers actually used: the largest common divisor of the window and the
/// space not above the requested count, so each worker owns the same number of
/// window slots and a partition belongs to worker `p mod workers` wherever the
/// window stands.
pub fn workers_for(requested: u64, window: u64, space: u64) -> u64 {
    let want = requested.clamp(1, window.max(1));
    (1..=want)
        .rev()
        .find(|d| window.is_multiple_of(*d) && space.is_multiple_of(*d))
        .unwrap_or(1)
}

fn invalid(field: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Top-level scenario fields that only mean something to the pipeline; a stream
/// scenario naming one is told where the knob lives instead.
pub const PIPELINE_ONLY: &[(&str, &str)] = &[
    (
        "properties",
        "stream.partitions.fixed or stream.partitions.space",
    ),
    ("batch", "stream.consume.pop_batch (and stream.push.batch)"),
    ("lanes", "stream.lanes"),
    ("lane_headroom", "stream.consume.consumers"),
    ("payload_b", "stream.payload.bytes"),
    (
        "hot",
        "nothing (the stream workload selects partitions by its window)",
    ),
    (
        "hydrate",
        "nothing (partitions are created by their first push)",
    ),
    ("push_shards", "stream.push.workers"),
    ("shard_queue", "stream.push.in_flight"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_divide_the_window() {
        assert_eq!(workers_for(64, 1000, 1_000_000), 50);
        assert_eq!(workers_for(64, 200, 200), 50);
        assert_eq!(workers_for(64, 7, 7), 7);
        assert_eq!(workers_for(4, 1, 10), 1);
        assert_eq!(workers_for(64, 1000, 1001), 1);
        assert_eq!(workers_for(64, 1000, 3000), 50);
    }

    #[test]
    fn shape_defaults() {
        let mut s = StreamSection::default();
        s.partitions.fixed = 200;
        let sh = s.shape();
        assert_eq!((sh.space, sh.window, sh.rotate_every_us), (200, 200, 0));
        let mut s = StreamSection::default();
        s.partitions.space = 1_000_000;
        s.partitions.window = 1000;
        s.partitions.rotate_every = Dur(Duration::from_secs(1));
        let sh = s.shape();
        assert_eq!(sh.rotate_step, 1000);
        assert_eq!(sh.rotate_every_us, 1_000_000);
        assert_eq!(s.lanes(), 1_000_000);
    }
}
