//! Every number of a scenario checked before anything starts; each error names the
//! field and the fix.

use std::time::Duration;

use crate::scenario::sections::{split_target, ClockDrive, WorkloadKind};
use crate::scenario::{invalid, Scenario, ScenarioError};

/// Check every number before anything starts.
pub fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    names(s)?;
    workload(s)?;
    build(s)?;
    shape(s)?;
    rules(s)?;
    wiring(s)
}

/// The cell's name (it names the cell's directory).
fn names(s: &Scenario) -> Result<(), ScenarioError> {
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
    Ok(())
}

/// The build of the system under test, as the scenario states it.
fn build(s: &Scenario) -> Result<(), ScenarioError> {
    if let Some(b) = &s.system_build {
        if b.trim().is_empty() || b.len() > 200 || b.chars().any(char::is_control) {
            return Err(invalid(
                "system_build",
                "must be one line of 1 to 200 characters naming the build of the system under test (a commit or an image digest); leave it out when unknown",
            ));
        }
        if b.contains("://") {
            return Err(invalid(
                "system_build",
                "names a build (a commit or an image digest), not a URL: a URL may carry a password and the record keeps this field as given",
            ));
        }
    }
    Ok(())
}

/// The workload and its section: a stream cell's `stream:`, a pipeline's rate and
/// properties.
fn workload(s: &Scenario) -> Result<(), ScenarioError> {
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
    Ok(())
}

/// The run's shape: its windows, batches, payload, hot cohort and publisher shards.
fn shape(s: &Scenario) -> Result<(), ScenarioError> {
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
    Ok(())
}

/// The rules the cell is judged by, sampling, the budget, the threads and the clock.
fn rules(s: &Scenario) -> Result<(), ScenarioError> {
    if !(s.held.served > 0.0 && s.held.served <= 1.0) {
        return Err(invalid("held.served", "must be in (0, 1], e.g. 0.97"));
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
    if let Some(r) = &s.resources {
        crate::scenario::resources::validate(r)?;
    }
    if s.threads > 256 {
        return Err(invalid("threads", "must be at most 256 (0 = one per core)"));
    }
    if s.clock != ClockDrive::Thread && s.workload == WorkloadKind::Stream {
        return Err(invalid(
            "clock",
            "applies to workload: pipeline; a stream cell's pacer is chosen by stream.push.pacer (remove clock)",
        ));
    }
    if s.prefix.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(invalid("prefix", "must not contain whitespace or '/'"));
    }
    Ok(())
}

/// What the cell is wired to: the system's options, the faults, the proxy, the gate.
fn wiring(s: &Scenario) -> Result<(), ScenarioError> {
    s.options
        .validate()
        .map_err(|e| invalid(&e.field, e.message))?;
    if let Some(c) = &s.cluster {
        crate::scenario::cluster::validate(c)?;
    }
    crate::scenario::faults::validate(
        &s.faults,
        s.proxy.as_ref(),
        s.cluster.as_ref(),
        s.duration.0,
        s.publish_deadline.0,
    )?;
    if let Some(p) = &s.proxy {
        // The proxy goes in front of the system's own address, or the one given.
        let endpoint = s.options.endpoint().map_err(|m| invalid("proxy", m))?;
        let upstream = if p.upstream.is_empty() {
            &endpoint
        } else {
            &p.upstream
        };
        crate::scenario::faults::loopback_addr(upstream).map_err(|m| {
            invalid(
                "proxy.upstream",
                format!("{m} (the system's address is {endpoint})"),
            )
        })?;
    }
    if let Some(g) = &s.gate {
        g.resolve().map_err(|m| invalid("gate", m))?;
    }
    Ok(())
}
