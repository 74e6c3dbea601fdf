//! Scenario files: every knob of a cell, in YAML, validated before anything starts.
//!
//! Unknown fields are rejected with their name; `--set key=value` overrides any
//! field by its dotted path before validation ([`set`]). The system's own section
//! (`pgmq:`, `rabbitmq:`, …) is typed and checked by the adapters' registry; the
//! stream workload's section is [`stream`]; the sections every workload shares are
//! in [`sections`]; every number is checked in [`validate`].

pub mod cluster;
pub mod dur;
pub mod faults;
pub mod resources;
pub mod sections;
pub mod set;
pub mod stream;
pub mod validate;

use std::path::Path;
use std::time::Duration;

use adapters::{Durability, System, SystemOptions};
use serde::{Deserialize, Serialize};

pub use dur::Dur;
pub use faults::{FaultKind, FaultSpec, ProxySection, Toxic, Victim};
pub use sections::{
    split_target, Accept, ClockDrive, Drain, FleetTopology, HeldRule, Hot, LoadersSection,
    SampleSection, VoidRule, WorkloadKind,
};
pub use stream::StreamSection;

/// A scenario: one cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Cell name (directory name under `--out`).
    pub name: String,
    pub system: System,
    #[serde(default)]
    pub workload: WorkloadKind,
    /// R: total offered ingress events per second (flow A gets ⌊R/2⌋, flow B the rest).
    /// Stream workload: messages per second (or `stream.ladder`).
    #[serde(default)]
    pub rate: u64,
    /// P: number of ordering keys (properties). Pipeline only.
    #[serde(default)]
    pub properties: u64,
    /// Rated window (the ramp is part of it, as in the reference).
    pub duration: Dur,
    /// Paced traffic before the rated window, kept out of histograms and rates.
    #[serde(default = "default_warmup")]
    pub warmup: Dur,
    /// Linear ramp from 0 to the full rate at the start of the paced traffic.
    #[serde(default)]
    pub ramp: Dur,
    /// Publish seq 0 of every property first and wait for it to flow through (the
    /// reference's pre-hydration); the checker's base seq is then 0, else 1.
    #[serde(default = "yes")]
    pub hydrate: bool,
    #[serde(default)]
    pub drain: Drain,
    /// Max messages per key-batch (also the pop / read / prefetch size).
    #[serde(default = "default_batch")]
    pub batch: u64,
    /// Physical ordered lanes per topic; 0 = one per property.
    #[serde(default)]
    pub lanes: u64,
    /// Multiplier on the Little's-law lane budget of each stage.
    #[serde(default = "default_headroom")]
    pub lane_headroom: f64,
    /// Target bytes of the flow-B `rates` padding.
    #[serde(default = "default_payload")]
    pub payload_b: u64,
    #[serde(default)]
    pub hot: Hot,
    /// Seed of the work-time generator.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Ordered publisher shards per flow (clamped to [1, P]).
    #[serde(default = "default_shards")]
    pub push_shards: u64,
    /// Capacity of each shard's queue; a full queue sheds the event.
    #[serde(default = "default_shard_queue")]
    pub shard_queue: u64,
    /// How long after its scheduled instant an event may still be published; past it
    /// the event is given up (counted failed, recorded in produced.meta) and dropped.
    #[serde(default = "default_publish_deadline")]
    pub publish_deadline: Dur,
    #[serde(default)]
    pub durability: Durability,
    /// Broker-side dedup window in seconds (systems that have one).
    #[serde(default)]
    pub dedup_window_sec: u64,
    /// Delivery semantics the scenario accepts.
    #[serde(default)]
    pub accept: Accept,
    /// Prefix for topic names.
    #[serde(default)]
    pub prefix: String,
    /// Keep the topology instead of dropping and recreating it.
    #[serde(default)]
    pub no_reset: bool,
    #[serde(default)]
    pub void: VoidRule,
    /// When the cell held its load (served, nothing failed or shed, drained).
    #[serde(default)]
    pub held: HeldRule,
    /// Runtime worker threads for the loader (0 = one per core).
    #[serde(default)]
    pub threads: u64,
    /// What wakes a pipeline cell's work timer and pacers in real time ([`ClockDrive`]).
    #[serde(default, skip_serializing_if = "ClockDrive::is_default")]
    pub clock: ClockDrive,
    /// Resource sampling.
    #[serde(default)]
    pub sample: SampleSection,
    /// The options section of the system (`mem:`, `pgmq:`, …: docs/scenarios.md),
    /// typed by the registry. Read by `parse`, written under the system's name.
    #[serde(flatten, skip_deserializing)]
    pub options: SystemOptions,
    /// The stream workload's shape (workload: stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamSection>,
    /// Faults injected during the rated window (docs/reliability.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultSpec>,
    /// The harness's TCP proxy between the adapter and the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySection>,
    /// The nodes of a replicated system on test hosts of their own, as the faults
    /// `partition`, `heal` and `kill-leader` name them (docs/reliability.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<cluster::ClusterSection>,
    /// Several loaders, one cell (SPEC.md §10).
    #[serde(default, skip_serializing_if = "LoadersSection::is_default")]
    pub loaders: LoadersSection,
    /// What `crossbench gate` gates on this scenario: metrics and thresholds
    /// (docs/gate.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<report::gate::GateConfig>,
    /// The build of the system under test as the user states it (a commit or an image
    /// digest), recorded beside what the server reports (`provenance.stated_build`):
    /// for servers whose own answer does not name the build (docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_build: Option<String>,
    /// Resource budgets for the loader and the system (issue 42; docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<resources::ResourcesSection>,
}

fn yes() -> bool {
    true
}
fn default_warmup() -> Dur {
    Dur(Duration::from_secs(5))
}
fn default_batch() -> u64 {
    100
}
fn default_headroom() -> f64 {
    1.5
}
fn default_payload() -> u64 {
    2048
}
fn default_seed() -> u64 {
    1
}
fn default_shards() -> u64 {
    64
}
fn default_shard_queue() -> u64 {
    1024
}
fn default_publish_deadline() -> Dur {
    Dur(Duration::from_secs(30))
}

/// A scenario that cannot run, with the field and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("scenario {path}: {message}")]
    Parse { path: String, message: String },
    #[error("--set {arg:?}: {message}")]
    Set { arg: String, message: String },
    #[error("scenario field `{field}`: {message}")]
    Invalid { field: String, message: String },
}

pub(crate) fn invalid(field: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// The scenario as given (text) and as resolved.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub source_text: String,
    pub scenario: Scenario,
}

/// Read, override, parse and validate a scenario file.
pub fn load(path: &Path, sets: &[String]) -> Result<Loaded, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let scenario = parse(&text, &path.display().to_string(), sets)?;
    Ok(Loaded {
        source_text: text,
        scenario,
    })
}

/// Parse scenario text with `--set` overrides applied, then validate.
pub fn parse(text: &str, origin: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let mut value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: origin.into(),
            message: e.to_string(),
        })?;
    for arg in sets {
        set::apply_set(&mut value, arg)?;
    }
    reject_pipeline_only_fields(&value)?;
    let sections = take_system_sections(&mut value);
    let mut scenario: Scenario = serde_path_to_error::deserialize(value).map_err(|e| {
        // The dotted path of the field that failed (`stream.push.pacer`), so a bad
        // value is named by its field, not only by what was wrong with it.
        let field = e.path().to_string();
        let inner = e.into_inner().to_string();
        let message = if field.is_empty() || field == "." {
            format!("{inner} (fields are listed in docs/scenarios.md)")
        } else {
            format!("field `{field}`: {inner} (fields are listed in docs/scenarios.md)")
        };
        match set_behind(&field, sets) {
            // The bad field came from the command line, not from the file.
            Some(arg) => ScenarioError::Set {
                arg: arg.clone(),
                message,
            },
            None => ScenarioError::Parse {
                path: origin.into(),
                message,
            },
        }
    })?;
    scenario.options = system_options(scenario.system, sections)?;
    validate::validate(&scenario)?;
    Ok(scenario)
}

/// Remove every system's section (`mem:`, `pgmq:`, …) from the scenario's mapping.
fn take_system_sections(value: &mut serde_yaml::Value) -> Vec<(System, serde_yaml::Value)> {
    let Some(map) = value.as_mapping_mut() else {
        return Vec::new();
    };
    System::all()
        .filter_map(|sys| map.remove(sys.name()).map(|v| (sys, v)))
        .collect()
}

/// The typed section of `system`: its own section (or its defaults). Another
/// system's section is refused, unless it is that system's defaults written out in
/// full, as the resolved scenario in older records lists the control broker's.
fn system_options(
    system: System,
    sections: Vec<(System, serde_yaml::Value)>,
) -> Result<SystemOptions, ScenarioError> {
    let mut own = SystemOptions::defaults(system);
    for (sys, v) in sections {
        let v = if v.is_null() {
            serde_yaml::Value::Mapping(Default::default())
        } else {
            v
        };
        let parsed = SystemOptions::deserialize_for(sys, v.clone()).map_err(|e| {
            invalid(
                sys.name(),
                format!("{e} (the section's fields are listed in docs/scenarios.md)"),
            )
        })?;
        let written_defaults = serde_json::to_value(&v)
            .is_ok_and(|given| given == SystemOptions::defaults(sys).section_json());
        if sys == system {
            own = parsed;
        } else if !written_defaults {
            return Err(invalid(
                sys.name(),
                format!(
                    "the {0} section only applies to system: {0}; remove it",
                    sys.name()
                ),
            ));
        }
    }
    Ok(own)
}

/// The `--set` behind a parse error at `field` (a dotted path, `[i]` for an item):
/// the last one that set that path, a path below it (an unknown key it went through)
/// or a path above it (a whole section or list it gave).
fn set_behind<'a>(field: &str, sets: &'a [String]) -> Option<&'a String> {
    let under = |deep: &str, top: &str| {
        deep.strip_prefix(top)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    sets.iter().rev().find(|arg| {
        arg.split_once('=')
            .is_some_and(|(path, _)| under(path, field) || under(field, path))
    })
}

/// A stream scenario that sets a pipeline-only field is told where the knob lives.
fn reject_pipeline_only_fields(value: &serde_yaml::Value) -> Result<(), ScenarioError> {
    let Some(map) = value.as_mapping() else {
        return Ok(());
    };
    let is_stream = map
        .get("workload")
        .and_then(|w| w.as_str())
        .is_some_and(|w| w == "stream");
    if !is_stream {
        return Ok(());
    }
    for (field, instead) in crate::scenario::stream::PIPELINE_ONLY {
        if map.contains_key(*field) {
            return Err(invalid(
                field,
                format!("not used by workload: stream; remove it (the stream knob is {instead})"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = "name: t\nsystem: mem\nrate: 100\nproperties: 10\nduration: 2s\n";

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = parse(MIN, "t", &[]).unwrap();
        assert_eq!(s.batch, 100);
        assert_eq!(s.warmup.0, Duration::from_secs(5));
        assert!(s.drain.grace.is_none());
    }

    #[test]
    fn unknown_field_is_named() {
        let e = parse(&format!("{MIN}ratee: 5\n"), "t", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ratee"), "{e}");
    }

    #[test]
    fn set_overrides_nested_fields() {
        let s = parse(
            MIN,
            "t",
            &[
                "rate=2000".into(),
                "drain.max=30s".into(),
                "hot.props=1".into(),
                "hot.factor=10".into(),
            ],
        )
        .unwrap();
        assert_eq!(s.rate, 2000);
        assert_eq!(s.drain.max.0, Duration::from_secs(30));
        assert_eq!(s.hot.props, 1);
    }

    #[test]
    fn bad_numbers_name_the_field() {
        for (set, field) in [
            ("rate=0", "rate"),
            ("batch=0", "batch"),
            ("ramp=10s", "ramp"),
            ("hot.props=3", "hot.factor"),
            ("void.loader_cpu_max=2", "void.loader_cpu_max"),
        ] {
            let e = parse(MIN, "t", &[set.into()]).unwrap_err().to_string();
            assert!(e.contains(field), "{set}: {e}");
        }
        let e = parse(MIN, "t", &["duration=banana".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("banana"), "{e}");
    }

    #[test]
    fn queen_section_parses_and_is_checked() {
        let q = "name: t\nsystem: queen\nrate: 100\nproperties: 10\nduration: 2s\nqueen:\n  mode: targeted\n  token: abc\n";
        let s = parse(q, "t", &[]).unwrap();
        let SystemOptions::Queen(o) = &s.options else {
            panic!("{:?}", s.options)
        };
        assert_eq!(o.mode, adapters::queen::PopMode::Targeted);
        let e = parse(q, "t", &["queen.lease_time=1500ms".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("queen.lease_time"), "{e}");
        let e = parse(&format!("{MIN}queen:\n  mode: wildcard\n"), "t", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("only applies to system: queen"), "{e}");
    }

    #[test]
    fn a_system_section_is_typed_and_written_back_under_its_name() {
        let s = parse(
            &format!("{MIN}mem:\n  max_lanes: 3\n"),
            "t",
            &["mem.publish_delay=1ms".into()],
        )
        .unwrap();
        let SystemOptions::Mem(m) = &s.options else {
            panic!("{:?}", s.options)
        };
        assert_eq!(
            (m.max_lanes, m.publish_delay),
            (3, Duration::from_millis(1))
        );
        let yaml = serde_yaml::to_string(&s).unwrap();
        assert!(yaml.contains("\nmem:\n"), "{yaml}");
        let back = parse(&yaml, "resolved", &[]).unwrap();
        assert_eq!(back, s);
        // Another system's defaults written out in full are tolerated (older records
        // list them); anything else of another system is not.
        let pg = serde_yaml::to_string(&SystemOptions::defaults(System::Pgmq).section_json())
            .unwrap()
            .replace('\n', "\n  ");
        let pg = format!("{MIN}pgmq:\n  {pg}");
        assert!(parse(&pg, "t", &[]).is_ok(), "{pg}");
        assert!(parse(&format!("{MIN}pgmq: {{}}\n"), "t", &[]).is_err());
        let e = parse(&format!("{MIN}pgmq:\n  readers: 4\n"), "t", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("only applies to system: pgmq"), "{e}");
        let e = parse(MIN, "t", &["mem.bogus=1".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus") && e.contains("`mem`"), "{e}");
    }

    #[test]
    fn an_unknown_set_key_names_the_set_argument() {
        let e = parse(MIN, "t", &["ratee=5".into()]).unwrap_err();
        assert!(
            matches!(&e, ScenarioError::Set { arg, .. } if arg == "ratee=5"),
            "{e}"
        );
        let e = parse(&format!("{MIN}ratee: 5\n"), "t", &[]).unwrap_err();
        assert!(matches!(&e, ScenarioError::Parse { .. }), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_field_and_where_it_came_from() {
        // In the file: the file is blamed, the field is named by its dotted path.
        let text = format!("{MIN}durability: weird\n");
        let e = parse(&text, "t", &[]).unwrap_err();
        assert!(matches!(&e, ScenarioError::Parse { .. }), "{e}");
        assert!(e.to_string().contains("field `durability`"), "{e}");
        // From --set, nested: the argument is blamed and the field named.
        let stream = "name: t\nsystem: mem\nworkload: stream\nrate: 100\nduration: 2s\nstream:\n  partitions:\n    fixed: 10\n";
        let e = parse(stream, "t", &["stream.push.pacer=fast".into()]).unwrap_err();
        assert!(
            matches!(&e, ScenarioError::Set { arg, .. } if arg == "stream.push.pacer=fast"),
            "{e}"
        );
        assert!(e.to_string().contains("field `stream.push.pacer`"), "{e}");
    }

    #[test]
    fn the_clock_is_a_pipeline_choice() {
        let ok = parse(&format!("{MIN}clock: runtime\n"), "t", &[]).unwrap();
        assert_eq!(ok.clock, ClockDrive::Runtime);
        let e = parse(MIN, "t", &["clock=fast".into()]).unwrap_err();
        assert!(e.to_string().contains("field `clock`"), "{e}");
        // A stream cell's pacer is stream.push.pacer: the clock is refused there,
        // naming the field and the fix.
        let stream = "name: t\nsystem: mem\nworkload: stream\nrate: 100\nduration: 2s\nclock: runtime\nstream:\n  partitions:\n    fixed: 10\n";
        let e = parse(stream, "t", &[]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("clock") && text.contains("stream.push.pacer"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_file_says_why_once() {
        let e = load(Path::new("/nonexistent/s.yaml"), &[]).unwrap_err();
        let chain = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
    }
}
