//! The scenario's sections shared by every workload: which workload and semantics,
//! hot keys, the drain, the VOID rule and resource sampling.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scenario::dur::{de_auto_dur, ser_auto_dur, Dur};

/// Which workload family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// The twelve-stream channel-manager pipeline.
    #[default]
    Pipeline,
    /// One topic, a partition space, open-loop pushes and consumer groups (section `stream`).
    Stream,
}

impl WorkloadKind {
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadKind::Pipeline => "pipeline",
            WorkloadKind::Stream => "stream",
        }
    }
}

/// What wakes a pipeline cell's clocked work in real time: the stages' work timer and
/// the flows' pacers (SPEC.md §1.2, §4.1).
///
/// `thread`: one OS thread of the cell's own at raised priority, which sleeps with the
/// kernel's sub-millisecond timer and wakes the runtime workers that run what it
/// released (two thread switches per look before any work is done). `runtime`: a task
/// on the loader's runtime sleeping on a `timerfd` in the runtime's I/O driver, as
/// precise, one switch per look, and what it releases runs on the worker it woke; it
/// runs at the runtime's priority, not raised, so a busy runtime delays it, which the
/// schedule lag shows. Measured on control-dense (docs/performance.md): with one
/// runtime worker (`threads: 1`) it is the cheaper; with two it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClockDrive {
    #[default]
    Thread,
    Runtime,
}

impl ClockDrive {
    pub fn is_default(&self) -> bool {
        *self == ClockDrive::Thread
    }
}

/// What the scenario accepts as delivery semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Accept {
    /// Duplicates fail the cell.
    #[default]
    ExactlyOnce,
    /// Duplicates are reported but allowed.
    AtLeastOnce,
}

impl Accept {
    /// The name `produced.meta` and the checker use.
    pub fn name(&self) -> &'static str {
        match self {
            Accept::ExactlyOnce => "exactly-once",
            Accept::AtLeastOnce => "at-least-once",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Hot {
    /// H: number of hot properties (0..H−1). 0 = uniform.
    pub props: u64,
    /// F: each hot property gets F× a cold property's share (≥ 2 to skew).
    pub factor: u64,
}

impl Default for Hot {
    fn default() -> Self {
        Hot {
            props: 0,
            factor: 1,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Drain {
    /// Longest drain after the producers stop; reaching it while messages still move
    /// means the run was cut short (the tail is reported in flight, not lost).
    pub max: Dur,
    /// Stop when nothing moved for this long (then a missing tail is lost). `auto` =
    /// the adapter's lease / visibility timeout + 5 s, at least 5 s.
    #[serde(deserialize_with = "de_auto_dur", serialize_with = "ser_auto_dur")]
    pub grace: Option<Dur>,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            max: Dur(Duration::from_secs(120)),
            grace: None,
        }
    }
}

/// When a cell is VOID (the loader, not the system, was the limit).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct VoidRule {
    /// Loader CPU over the rated window, as a fraction of the cores it may use.
    pub loader_cpu_max: f64,
    /// Schedule lag p99 (hand-over − scheduled instant) above which the pacer did not
    /// hold the schedule.
    pub schedule_lag_p99_max: Dur,
}

impl Default for VoidRule {
    fn default() -> Self {
        VoidRule {
            loader_cpu_max: 0.70,
            schedule_lag_p99_max: Dur(Duration::from_millis(5)),
        }
    }
}

/// Resource sampling (scenario section `sample`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SampleSection {
    /// Targets of the system under test, `label=spec` or `spec` (e.g.
    /// `postgres=proc:postgres`, `cgroup:/sys/fs/cgroup/system.slice/x.service`,
    /// `pid:1234`, `container:<id>`, `postgres:<dsn>`). Empty = the system's default
    /// targets (mem: the loader itself; pgmq: the postgres processes and internals;
    /// rabbitmq: the beam.smp node; queen: the queen-server process and postgres). The
    /// host and the loader are always sampled.
    pub targets: Vec<String>,
    /// Sampling period.
    pub interval: Dur,
}

impl Default for SampleSection {
    fn default() -> Self {
        SampleSection {
            targets: Vec::new(),
            interval: Dur(Duration::from_secs(1)),
        }
    }
}

/// Split `label=spec` (the label may be omitted).
pub fn split_target(t: &str) -> (Option<&str>, &str) {
    match t.split_once('=') {
        Some((l, spec)) if !l.contains(':') && !l.is_empty() => (Some(l), spec),
        _ => (None, t),
    }
}

/// When a cell held its load (scenario section `held`): correctness (PASS / FAIL) is
/// one verdict, whether the load the scenario asked for was served is another.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HeldRule {
    /// The share of the demand the system must serve while the rated window runs.
    pub served: f64,
    /// The load is exploratory (a probe past the ceiling, a fault cell that expects
    /// to fall behind): NOT-HELD is recorded but does not change the exit code.
    pub exploratory: bool,
}

impl Default for HeldRule {
    fn default() -> Self {
        HeldRule {
            served: cell_record::held::SERVED_MIN,
            exploratory: false,
        }
    }
}

/// Several loaders, one cell (scenario section `loaders`, SPEC.md §10): how the
/// loaders share the system, how many there are, where they meet and how long they
/// wait for each other. Which loader this process is comes from the command line
/// (`--loader-index`, or `JOB_COMPLETION_INDEX`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LoadersSection {
    /// N, the loaders of the cell (`--loader-count` overrides). 1: the ordinary cell.
    pub count: u64,
    /// `shared`: one topology, set up by loader 0; every loader consumes every stream.
    /// `partitioned`: each loader has a namespace of its own; the cell is the union.
    pub topology: FleetTopology,
    /// Loader 0's rendezvous, `http://host:port` (`--rendezvous` overrides).
    pub rendezvous: String,
    /// How long a loader waits at a barrier (and for a silent loader) before it
    /// abandons the cell.
    pub barrier_timeout: Dur,
}

impl Default for LoadersSection {
    fn default() -> Self {
        LoadersSection {
            count: 1,
            topology: FleetTopology::Shared,
            rendezvous: String::new(),
            barrier_timeout: Dur(Duration::from_secs(60)),
        }
    }
}

impl LoadersSection {
    /// Nothing set: the record's resolved scenario leaves the section out.
    pub fn is_default(&self) -> bool {
        *self == LoadersSection::default()
    }
}

/// How several loaders share the system (section `loaders.topology`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FleetTopology {
    /// One topology; consumers of every group on every loader.
    #[default]
    Shared,
    /// One namespace of topics and queues per loader.
    Partitioned,
}

impl FleetTopology {
    pub fn name(&self) -> &'static str {
        match self {
            FleetTopology::Shared => "shared",
            FleetTopology::Partitioned => "partitioned",
        }
    }
}
