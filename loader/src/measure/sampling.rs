//! The sampler beside every run: targets from the scenario (or the system's
//! defaults), `samples.csv` in the cell directory, and the cost summary over the
//! rated window.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sampler::{CostSummary, RatedWindow, SamplerConfig, SamplerHandle, TargetSpec, WorkloadFacts};

use crate::scenario::{split_target, Scenario};

#[derive(Debug)]
pub struct Sampling {
    handle: Option<SamplerHandle>,
    /// Labels of the system under test's targets.
    pub system_labels: Vec<String>,
    pub path: PathBuf,
}

/// Resolve the targets and start sampling into `<dir>/samples.csv`.
pub fn start(s: &Scenario, dir: &Path) -> Result<Sampling> {
    let mut targets: Vec<(String, TargetSpec)> = Vec::new();
    let given: Vec<(String, String)> = if s.sample.targets.is_empty() {
        s.options.sample_targets()
    } else {
        s.sample
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (label, spec) = split_target(t);
                (
                    label.map_or_else(|| format!("target{i}"), str::to_string),
                    spec.to_string(),
                )
            })
            .collect()
    };
    for (label, spec) in &given {
        let t: TargetSpec = spec
            .parse()
            .with_context(|| format!("sample target {label}"))?;
        targets.push((label.clone(), t));
    }
    // Internals targets (postgres:) describe the system but carry no CPU of their own.
    let mut system_labels: Vec<String> = targets
        .iter()
        .filter(|(_, t)| !matches!(t, TargetSpec::Postgres { .. }))
        .map(|(l, _)| l.clone())
        .collect();
    if system_labels.is_empty() {
        // The control broker runs inside the loader: the loader is the system.
        system_labels.push("loader".into());
    }
    // A system budget's own processes, sampled as targets of their own (their use
    // against the budget; not part of the system's cost figures).
    for (label, spec) in crate::scenario::resources::budget_targets(s.resources.as_ref()) {
        let t: TargetSpec = spec
            .parse()
            .with_context(|| format!("resources target {label}"))?;
        targets.push((label, t));
    }
    let mut config = SamplerConfig::new(targets);
    config.interval = s.sample.interval.0;
    // Each side's resource budget, in every second's rows (sampler/FORMAT.md).
    config.budgets = crate::scenario::resources::per_second(s.resources.as_ref());
    let path = dir.join("samples.csv");
    let handle = sampler::start(config, &path).context("starting the sampler")?;
    Ok(Sampling {
        handle: Some(handle),
        system_labels,
        path,
    })
}

/// What the cost summary divides by: the rated window's ingress events and
/// deliveries, and what the system provisioned for them (`d`).
pub fn workload_facts(
    d: &adapters::Description,
    ingress_events: u64,
    deliveries: u64,
    partitions: u64,
) -> WorkloadFacts {
    WorkloadFacts {
        ingress_events,
        deliveries,
        physical_publishes: (ingress_events as f64 * d.publishes_per_ingress_event).round() as u64,
        ordered_lanes: d.ordered_lanes,
        connections: d.connections,
        consumers: d.consumer_members,
        queues: d.physical_queues,
        partitions,
        loader_cores_available: crate::record::host::cores_available(),
    }
}

impl Sampling {
    /// Stop sampling and summarise the rated window.
    pub fn finish(mut self, window: RatedWindow, facts: WorkloadFacts) -> Result<CostSummary> {
        let set = self
            .handle
            .take()
            .expect("finish called once")
            .stop()
            .context("stopping the sampler")?;
        Ok(sampler::cost_summary(
            &set,
            window,
            facts,
            &self.system_labels,
        ))
    }

    /// Stop sampling and summarise the rated window that began at `rated_start_us`
    /// (µs since the epoch) and ran `rated_sec`; then, with `--sampler-url`, pull the
    /// remote sampler's rows since `since_unix_ms` into `samples-remote.csv`. A failed
    /// pull is a line for the console, not an error: the local figures stand.
    pub async fn finish_cell(
        self,
        rated_start_us: i64,
        rated_sec: f64,
        facts: WorkloadFacts,
        remote: Option<&str>,
        since_unix_ms: u64,
        say: impl Fn(String),
    ) -> Result<CostSummary> {
        let start_unix_ms = (rated_start_us / 1000) as u64;
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let cost = self.finish(
            RatedWindow {
                start_unix_ms,
                end_unix_ms: start_unix_ms + (rated_sec * 1000.0) as u64,
            },
            facts,
        )?;
        if let Some(url) = remote {
            match sampler::pull(url, since_unix_ms, &dir.join("samples-remote.csv")).await {
                Ok(rows) => say(format!("pulled {rows} remote samples from {url}")),
                Err(e) => say(format!(
                    "warning: could not pull remote samples from {url}: {e}"
                )),
            }
        }
        Ok(cost)
    }

    /// Stop sampling without a summary (a cell that ended before its rated window,
    /// e.g. refused at setup). Whatever was sampled stays in samples.csv.
    /// The rows as they are taken (for the live metrics).
    pub fn view(&self) -> Option<sampler::SampleView> {
        self.handle.as_ref().map(|h| h.view())
    }

    pub fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.stop();
        }
    }
}
