//! Scenario files: every knob of a run, in YAML, validated before anything starts.
//!
//! Unknown fields are rejected with their name; `--set key=value` overrides any
//! field by its dotted path before validation.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use adapters::mem::MemOptions;
use adapters::Durability;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as `250ms`, `2s`, `1m`, or a bare number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Dur {
    pub fn secs_f64(&self) -> f64 {
        self.0.as_secs_f64()
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0.as_micros();
        if us.is_multiple_of(1_000_000) {
            write!(f, "{}s", us / 1_000_000)
        } else if us.is_multiple_of(1000) {
            write!(f, "{}ms", us / 1000)
        } else {
            write!(f, "{us}us")
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        adapters::duration_text::deserialize(d).map(Dur)
    }
}

/// Which system the run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemKind {
    Mem,
    Pgmq,
    Rabbitmq,
    Kafka,
    Queen,
}

impl SystemKind {
    pub fn name(&self) -> &'static str {
        match self {
            SystemKind::Mem => "mem",
            SystemKind::Pgmq => "pgmq",
            SystemKind::Rabbitmq => "rabbitmq",
            SystemKind::Kafka => "kafka",
            SystemKind::Queen => "queen",
        }
    }
}

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

fn de_auto_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(f64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::S(s) if s == "auto" => Ok(None),
        Raw::S(s) => adapters::duration_text::parse_duration(&s)
            .map(|x| Some(Dur(x)))
            .map_err(serde::de::Error::custom),
        Raw::N(n) if n.is_finite() && n >= 0.0 => Ok(Some(Dur(Duration::from_secs_f64(n)))),
        Raw::N(n) => Err(serde::de::Error::custom(format!("{n} is not a duration"))),
    }
}

fn ser_auto_dur<S: Serializer>(v: &Option<Dur>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_str("auto"),
        Some(d) => d.serialize(s),
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

/// A scenario: one cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Cell name (directory name under `--out`).
    pub name: String,
    pub system: SystemKind,
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
    /// Runtime worker threads for the loader (0 = one per core).
    #[serde(default)]
    pub threads: u64,
    /// Resource sampling.
    #[serde(default)]
    pub sample: SampleSection,
    /// Control broker options.
    #[serde(default)]
    pub mem: MemOptions,
    /// pgmq options (system: pgmq).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgmq: Option<adapters::pgmq::PgmqOptions>,
    /// RabbitMQ options (system: rabbitmq).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabbitmq: Option<adapters::rabbitmq::RabbitOptions>,
    /// The stream workload's shape (workload: stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<crate::stream::config::StreamSection>,
    /// Queen options (system: queen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queen: Option<adapters::queen::QueenOptions>,
    /// Kafka options (system: kafka).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<adapters::kafka::KafkaOptions>,
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

/// A scenario that cannot run, with the field and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("scenario {path}: {message}")]
    Parse { path: String, message: String },
    #[error("--set {arg:?}: {message}")]
    Set { arg: String, message: String },
    #[error("scenario field `{field}`: {message}")]
    Invalid { field: String, message: String },
}

fn invalid(field: &str, message: impl Into<String>) -> ScenarioError {
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
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.display().to_string(),
        source,
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
        apply_set(&mut value, arg)?;
    }
    reject_pipeline_only_fields(&value)?;
    let scenario: Scenario = serde_yaml::from_value(value).map_err(|e| ScenarioError::Parse {
        path: origin.into(),
        message: format!("{e} (fields are listed in docs/scenarios.md)"),
    })?;
    validate(&scenario)?;
    Ok(scenario)
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
    for (field, instead) in crate::stream::config::PIPELINE_ONLY {
        if map.contains_key(*field) {
            return Err(invalid(
                field,
                format!("not used by workload: stream; remove it (the stream knob is {instead})"),
            ));
        }
    }
    Ok(())
}

fn apply_set(root: &mut serde_yaml::Value, arg: &str) -> Result<(), ScenarioError> {
    let (path, raw) = arg.split_once('=').ok_or_else(|| ScenarioError::Set {
        arg: arg.into(),
        message: "expected key=value, e.g. --set rate=2000 or --set drain.max=30s".into(),
    })?;
    let new: serde_yaml::Value = serde_yaml::from_str(raw).map_err(|e| ScenarioError::Set {
        arg: arg.into(),
        message: e.to_string(),
    })?;
    let mut cur = root;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            return Err(ScenarioError::Set {
                arg: arg.into(),
                message: "empty path segment".into(),
            });
        }
        if !cur.is_mapping() {
            if cur.is_null() {
                *cur = serde_yaml::Value::Mapping(Default::default());
            } else {
                return Err(ScenarioError::Set {
                    arg: arg.into(),
                    message: format!("`{}` is not a section", parts[..i].join(".")),
                });
            }
        }
        let map = cur.as_mapping_mut().expect("checked mapping");
        let key = serde_yaml::Value::String((*part).to_string());
        if i + 1 == parts.len() {
            map.insert(key, new);
            return Ok(());
        }
        cur = map
            .entry(key)
            .or_insert(serde_yaml::Value::Mapping(Default::default()));
    }
    Ok(())
}

/// Check every number before anything starts.
pub fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    if s.name.is_empty()
        || !s
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(invalid(
            "name",
            "must be non-empty and use only letters, digits, '-', '_' and '.' (it names the cell directory)",
        ));
    }
    match (s.workload, &s.stream) {
        (WorkloadKind::Pipeline, Some(_)) => {
            return Err(invalid(
                "stream",
                "the stream section only applies to workload: stream; remove it or set workload: stream",
            ))
        }
        (WorkloadKind::Stream, None) => {
            return Err(invalid(
                "stream",
                "workload: stream needs a `stream:` section (partitions, push, consume; see docs/scenarios.md)",
            ))
        }
        (WorkloadKind::Stream, Some(st)) => {
            if s.rate > 10_000_000 {
                return Err(invalid("rate", "must be between 1 and 10000000 msg/s"));
            }
            st.validate(s.rate, s.system)?;
        }
        (WorkloadKind::Pipeline, None) => {
            if s.rate == 0 || s.rate > 10_000_000 {
                return Err(invalid("rate", "must be between 1 and 10000000 events/s"));
            }
            if s.properties == 0 || s.properties > 100_000_000 {
                return Err(invalid("properties", "must be between 1 and 100000000"));
            }
        }
    }
    if s.duration.0.is_zero() || s.duration.0 > Duration::from_secs(7 * 86_400) {
        return Err(invalid("duration", "must be > 0 and at most 7 days"));
    }
    if s.ramp > s.duration {
        return Err(invalid(
            "ramp",
            "must not exceed duration (the ramp is part of the rated window)",
        ));
    }
    if s.drain.max.0 > Duration::from_secs(3600) {
        return Err(invalid("drain.max", "must be at most 1h"));
    }
    if s.batch == 0 || s.batch > 100_000 {
        return Err(invalid("batch", "must be between 1 and 100000"));
    }
    if !(s.lane_headroom.is_finite() && s.lane_headroom > 0.0 && s.lane_headroom <= 100.0) {
        return Err(invalid("lane_headroom", "must be in (0, 100]"));
    }
    if s.payload_b > 16 * 1024 * 1024 {
        return Err(invalid("payload_b", "must be at most 16 MiB"));
    }
    if s.hot.props >= s.properties && s.hot.props > 0 && s.hot.factor >= 2 {
        return Err(invalid(
            "hot.props",
            "must be smaller than properties (a cold cohort must exist)",
        ));
    }
    if s.hot.props > 0 && s.hot.factor < 2 {
        return Err(invalid(
            "hot.factor",
            "must be >= 2 when hot.props > 0 (1 means uniform)",
        ));
    }
    if s.push_shards == 0 || s.push_shards > 4096 {
        return Err(invalid("push_shards", "must be between 1 and 4096"));
    }
    if s.shard_queue == 0 || s.shard_queue > 1_000_000 {
        return Err(invalid("shard_queue", "must be between 1 and 1000000"));
    }
    if !(s.void.loader_cpu_max > 0.0 && s.void.loader_cpu_max <= 1.0) {
        return Err(invalid("void.loader_cpu_max", "must be in (0, 1]"));
    }
    if s.sample.interval.0 < Duration::from_millis(100)
        || s.sample.interval.0 > Duration::from_secs(60)
    {
        return Err(invalid("sample.interval", "must be between 100ms and 60s"));
    }
    for (i, t) in s.sample.targets.iter().enumerate() {
        let (_, spec) = split_target(t);
        if let Err(e) = spec.parse::<sampler::TargetSpec>() {
            return Err(invalid(&format!("sample.targets[{i}]"), e.to_string()));
        }
    }
    if s.threads > 256 {
        return Err(invalid("threads", "must be at most 256 (0 = one per core)"));
    }
    if s.prefix.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(invalid("prefix", "must not contain whitespace or '/'"));
    }
    for (section, present, system) in [
        ("pgmq", s.pgmq.is_some(), SystemKind::Pgmq),
        ("rabbitmq", s.rabbitmq.is_some(), SystemKind::Rabbitmq),
        ("queen", s.queen.is_some(), SystemKind::Queen),
        ("kafka", s.kafka.is_some(), SystemKind::Kafka),
    ] {
        if present && s.system != system {
            return Err(invalid(
                section,
                format!("the {section} section only applies to system: {section}; remove it"),
            ));
        }
    }
    if let Some(q) = &s.queen {
        q.validate().map_err(|(field, m)| invalid(&field, m))?;
    }
    if s.system != SystemKind::Mem && s.mem != MemOptions::default() {
        return Err(invalid(
            "mem",
            "the mem section only applies to system: mem; remove it",
        ));
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
        let o = s.queen.as_ref().unwrap();
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
}
