//! The one scenario both sides of the tax take their shape from: a stream cell (one
//! topic, one group, a fixed set of partitions, no simulated work) of the system
//! asked for, at the rate asked for, with the user's `--set`s on top. The crossbench
//! side runs it as a cell; the bare side reads its partitions, push size, pop size,
//! payload size, warm-up, window and system options from it.

use std::time::Duration;

use adapters::{BarePlan, TopicSpec, Topology};

use crate::cli::BadInput;
use crate::scenario::{Loaded, Scenario, StreamSection};
use crate::workload::stream::{group_names, TOPIC};

/// The stream cell the tax runs, before the system, rate, window and `--set`s.
/// 100 partitions always active, pushes of 10 messages to one partition, one group of
/// 8 consumers popping up to 100, async acks, 256-byte messages, 3 s of warm-up.
pub const BASE: &str = "\
name: tax
workload: stream
duration: 20s
warmup: 3s
drain:
  max: 60s
  grace: auto
stream:
  partitions:
    fixed: 100
  push:
    batch: 10
    partitions_per_request: 1
    workers: 10
    in_flight: 1024
  payload:
    bytes: 256
  consume:
    groups: 1
    consumers: 8
    pop_batch: 100
    ack: async
    ack_in_flight: 64
";

/// Where each side's objects live: never a cell's, never the other side's.
pub const CELL_PREFIX: &str = "cbtax-cell-";
pub const BARE_PREFIX: &str = "cbtax-bare-";

/// The tax's scenario and what the bare side needs from it.
#[derive(Debug, Clone)]
pub struct Shape {
    pub loaded: Loaded,
    /// Partitions (all active).
    pub partitions: u64,
    /// Messages per publish (one partition each).
    pub push_batch: u64,
    /// Ordered publishers (a partition always goes through the same one).
    pub push_workers: u64,
    pub payload_bytes: usize,
    pub warmup: Duration,
    pub window: Duration,
    /// The bare loop's topology and sizes.
    pub plan: BarePlan,
}

impl Shape {
    /// The scenario for `system` at `rate` msg/s over a `secs` s window, `sets` last.
    pub fn new(system: &str, rate: u64, secs: u64, sets: &[String]) -> anyhow::Result<Shape> {
        let mut all = vec![
            format!("system={system}"),
            format!("rate={rate}"),
            format!("duration={secs}s"),
            format!("prefix={CELL_PREFIX}"),
        ];
        all.extend(sets.iter().cloned());
        let scenario = crate::scenario::parse(BASE, "selftest tax", &all)?;
        let st = scenario
            .stream
            .clone()
            .ok_or_else(|| BadInput("the tax runs the stream workload".into()))?;
        check(&scenario, &st)?;
        let shape = st.shape();
        let topic = format!("{BARE_PREFIX}{TOPIC}");
        let plan = BarePlan {
            topology: Topology {
                topics: vec![TopicSpec {
                    name: topic,
                    groups: group_names(1),
                }],
                keys: shape.space,
                lanes: st.lanes(),
                durability: scenario.durability,
                dedup_window_sec: scenario.dedup_window_sec,
                reset: true,
                sharing: adapters::Sharing::ALONE,
            },
            batch: st.consume.pop_batch as usize,
            lanes: st.consume_lanes() as usize,
        };
        Ok(Shape {
            partitions: shape.space,
            push_batch: st.push.batch,
            push_workers: crate::scenario::stream::workers_for(
                st.push.workers,
                shape.window,
                shape.space,
            ),
            payload_bytes: st.payload.bytes as usize,
            warmup: scenario.warmup.0,
            window: scenario.duration.0,
            plan,
            loaded: Loaded {
                source_text: BASE.to_string(),
                scenario,
            },
        })
    }

    pub fn scenario(&self) -> &Scenario {
        &self.loaded.scenario
    }
}

/// What the bare side cannot mirror: refused before anything runs.
fn check(s: &Scenario, st: &StreamSection) -> Result<(), BadInput> {
    let bad = |m: String| Err(BadInput(m));
    if s.system.capabilities().in_process {
        return bad(format!(
            "--system {}: the control broker is crossbench's own code, with no client library to compare with (its cost is control-dense's and `selftest floor`'s)",
            s.system
        ));
    }
    if st.partitions.fixed == 0 {
        return bad("the tax needs a fixed set of partitions (stream.partitions.fixed)".into());
    }
    if st.push.partitions_per_request != 1 {
        return bad(
            "the tax pushes to one partition per request (stream.push.partitions_per_request=1)"
                .into(),
        );
    }
    if st.consume.groups != 1 {
        return bad("the tax runs one consumer group (stream.consume.groups=1)".into());
    }
    if !st.ladder.is_empty() {
        return bad("the tax runs one rate (--rate), not a ladder".into());
    }
    if !s.faults.is_empty() || s.proxy.is_some() {
        return bad("the tax runs no faults and no proxy".into());
    }
    if s.no_reset {
        return bad("the tax resets its objects (no_reset must stay false)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_follows_the_sets() {
        let s = Shape::new(
            "pgmq",
            500,
            4,
            &[
                "stream.push.batch=5".into(),
                "stream.partitions.fixed=20".into(),
            ],
        )
        .unwrap();
        assert_eq!(s.scenario().rate, 500);
        assert_eq!((s.partitions, s.push_batch), (20, 5));
        assert_eq!(s.window, Duration::from_secs(4));
        assert_eq!(s.scenario().prefix, CELL_PREFIX);
        assert_eq!(s.plan.topology.topics[0].name, "cbtax-bare-stream");
        assert_eq!(s.plan.topology.keys, 20);
        assert_eq!(s.plan.batch, 100);
    }

    #[test]
    fn what_the_bare_side_cannot_mirror_is_refused() {
        for (system, set) in [
            ("mem", "rate=100"),
            ("pgmq", "stream.consume.groups=2"),
            ("pgmq", "stream.push.partitions_per_request=2"),
        ] {
            let e = Shape::new(system, 100, 2, &[set.into()]).unwrap_err();
            assert!(
                e.downcast_ref::<BadInput>().is_some(),
                "{system} {set}: {e}"
            );
        }
    }
}
