//! The merged `result.json`: one cell's figures from its loaders' records.
//!
//! Counters add (offered, published, shed, failed, delivered, acked, errors, the
//! adapters' counters); rates over the rated window add (every loader's window is
//! the same window, from the same start instant); fractions are recomputed from the
//! sums against the cell's demand; every latency summary is recomputed from the sum
//! of the loaders' whole-run histograms of that path (`totals.hlog`), never from
//! their percentiles; the loader's CPU is the loaders' CPU over their deliveries.
//! What one loader describes for the cell (its shape, invariants, host, the system's
//! cost as loader 0 sampled it) comes from loader 0, and every loader's own figures
//! stay under `loaders.loaders[]`.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use cell_record::paths::summary_counts;
pub use cell_record::paths::{at, set, sum_numbers};
use cell_record::result::Flow;
use cell_record::CellResult;

use super::loaders::Loader;
use crate::cell::Outcome;
use crate::measure::histograms::Summary;
use crate::record::result::LoadVerdict;

#[cfg(test)]
pub fn num(v: &Value, path: &str) -> f64 {
    at(v, path).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Replace the summary at `path` with the summary of `h`, its `clamped` and
/// `negative` counts the loaders' added.
pub fn put_summary(out: &mut Value, records: &[&Value], path: &str, h: &Histogram<u64>) {
    let (clamped, negative) = records
        .iter()
        .map(|r| summary_counts(r, path))
        .fold((0, 0), |(c, n), (a, b)| (c + a, n + b));
    let mut s = Summary::of(h, clamped);
    s.negative = negative;
    let value = serde_json::to_value(s).unwrap_or(Value::Null);
    set(out, path, value);
}

/// The worst drain outcome of the loaders.
pub fn worst_drain<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let rank = |n: &str| match n {
        "caught-up" => 0,
        "grace" => 1,
        "unreachable" | "stalled" => 2,
        "cut-short" => 3,
        _ => 4,
    };
    names
        .max_by_key(|n| rank(n))
        .unwrap_or("caught-up")
        .to_string()
}

/// One loader's figures for `loaders.loaders[]`: its own, from its typed record,
/// and the blocks it wrote (host, clocks, share, void, load, drain) as it wrote them.
pub fn loader_entry(l: &Loader) -> Value {
    let r = &l.rec;
    let b = l.block();
    let both = |f: fn(&Flow) -> u64| -> f64 {
        let g = |k: &str| r.flows.get(k).map_or(0.0, |x| f(x) as f64);
        g("A") + g("B")
    };
    json!({
        "index": l.index,
        "outcome": r.outcome,
        "host": b.and_then(|b| b.host.as_ref()),
        "clock_start": b.and_then(|b| b.clock_start.as_ref()),
        "clock_end": b.and_then(|b| b.clock_end.as_ref()),
        "share": b.and_then(|b| b.share.as_ref()),
        "namespace": b.and_then(|b| b.namespace.as_ref()),
        "offered_rated": both(|f| f.offered_rated),
        "published_rated": both(|f| f.published_rated),
        "window_deliveries_per_sec": r.throughput.window_deliveries_per_sec,
        "cpu_cores_mean": r.loader.cpu_cores_mean,
        "cpu_us_per_delivery": r.loader.cpu_us_per_delivery,
        "schedule_lag_p99_ms": r.latency_ms.schedule_lag.as_ref().map(|s| s.p99_ms),
        "void": l.carried.void,
        "load": l.carried.load,
        "drain": l.carried.drain,
        "warnings": r.warnings,
    })
}

/// What the merge writes into loader 0's record to make it the cell's:
/// [`MergedFigures::write`] writes each at its one path.
#[derive(Debug)]
pub struct MergedFigures {
    pub sums: Sums,
    pub judged: Judged,
    /// The merged `loaders` block.
    pub loaders: Value,
    /// Whether loader 0's record has a `cost` (the merged record says whose it is).
    pub cost_note: bool,
}

/// The cell's figures from its loaders': counters and rates added, fractions
/// recomputed against the demand, times from the first start to the last end.
#[derive(Debug)]
pub struct Sums {
    pub identity_holds: bool,
    pub offered_per_sec: f64,
    pub published_per_sec: f64,
    pub deliveries_per_sec: f64,
    pub reference_deliveries_per_sec: f64,
    pub window_deliveries_per_sec: f64,
    /// Served and served in the window, of the demand; `None` (loader 0's kept) when
    /// the cell states no demand.
    pub served: Option<(f64, f64)>,
    /// Partitioned cells only: each loader held the topology.
    pub ordered_lanes: Option<u64>,
    pub physical_queues: Option<u64>,
    pub consumer_members: u64,
    pub connections: u64,
    /// Partitioned cells: loader 0's notes and one saying so.
    pub notes: Option<Vec<String>>,
    pub started_unix_ms: i64,
    pub drain_sec: f64,
    pub hydration_sec: f64,
    pub started_utc: Option<String>,
    pub ended_utc: Option<String>,
    pub cpu_cores_mean: f64,
    pub cores_available: f64,
    pub peak_rss_bytes: u64,
    pub runtime_threads: u64,
    pub drain_outcome: String,
    pub drain_seconds: f64,
    /// Every loader's, named.
    pub void_reasons: Vec<String>,
}

/// What the merge judged of the cell.
#[derive(Debug)]
pub struct Judged {
    pub load: LoadVerdict,
    /// `latency_ms.clocks`: trusted, cross-host share, note.
    pub clocks: Value,
    pub verdict: checker::Verdict,
    pub outcome: Outcome,
    pub warnings: Vec<String>,
}

impl Sums {
    /// The sums of `loaders`' figures; `merged` is loader 0's record with its counters
    /// already added ([`sum_numbers`]).
    pub fn of(loaders: &[Loader], merged: &CellResult, topology: &str) -> Sums {
        let recs: Vec<&CellResult> = loaders.iter().map(|l| &l.rec).collect();
        let total = |f: fn(&CellResult) -> f64| -> f64 { recs.iter().map(|r| f(r)).sum() };
        let max_of = |f: fn(&CellResult) -> f64| recs.iter().map(|r| f(r)).fold(0.0, f64::max);
        let identity_holds = ["A", "B"].iter().all(|f| {
            merged
                .flows
                .get(*f)
                .is_none_or(|x| x.offered == x.published + x.shed + x.failed)
        });
        let deliveries_per_sec = total(|r| r.throughput.deliveries_per_sec);
        let window_deliveries_per_sec =
            total(|r| r.throughput.window_deliveries_per_sec.unwrap_or(0.0));
        let demand = recs[0].invariants.deliveries_per_sec;
        let n = loaders.len();
        let partitioned = topology == "partitioned";
        let cpu_cores_mean = total(|r| r.loader.cpu_cores_mean);
        Sums {
            identity_holds,
            offered_per_sec: total(|r| r.throughput.offered_per_sec),
            published_per_sec: total(|r| r.throughput.published_per_sec),
            deliveries_per_sec,
            reference_deliveries_per_sec: total(|r| r.throughput.reference_deliveries_per_sec),
            window_deliveries_per_sec,
            served: (demand > 0.0)
                .then(|| (deliveries_per_sec / demand, window_deliveries_per_sec / demand)),
            ordered_lanes: partitioned
                .then(|| total(|r| r.provisioned.ordered_lanes as f64) as u64),
            physical_queues: partitioned
                .then(|| total(|r| r.provisioned.physical_queues as f64) as u64),
            consumer_members: total(|r| r.provisioned.consumer_members as f64) as u64,
            connections: total(|r| r.provisioned.connections as f64) as u64,
            notes: recs[0].provisioned.notes.clone().filter(|_| partitioned).map(|mut v| {
                v.push(format!(
                    "partitioned: {n} loaders, each with a namespace of its own: the system held {n}x the topology"
                ));
                v
            }),
            started_unix_ms: recs
                .iter()
                .map(|r| r.time.started_unix_ms as f64)
                .fold(f64::INFINITY, f64::min) as i64,
            drain_sec: max_of(|r| r.time.drain_sec),
            hydration_sec: max_of(|r| r.time.hydration_sec),
            started_utc: written(recs.iter().map(|r| r.time.started_utc.as_str())).min(),
            ended_utc: written(recs.iter().map(|r| r.time.ended_utc.as_str())).max(),
            cpu_cores_mean,
            cores_available: total(|r| r.loader.cores_available),
            peak_rss_bytes: max_of(|r| r.loader.peak_rss_bytes as f64) as u64,
            runtime_threads: total(|r| r.loader.runtime_threads as f64) as u64,
            drain_outcome: worst_drain(recs.iter().map(|r| r.drain.outcome.as_str()).filter(|o| !o.is_empty())),
            drain_seconds: max_of(|r| r.drain.seconds),
            void_reasons: loaders
                .iter()
                .flat_map(|l| l.rec.void.reasons.iter().map(|x| format!("loader {}: {x}", l.index)))
                .collect(),
        }
    }
}

/// The names a record wrote (an absent one reads empty).
fn written<'a>(names: impl Iterator<Item = &'a str> + 'a) -> impl Iterator<Item = String> + 'a {
    names.filter(|s| !s.is_empty()).map(str::to_string)
}

impl MergedFigures {
    /// Write the figures into `out`, loader 0's record, each at its path.
    pub fn write(&self, out: &mut Value) {
        let s = &self.sums;
        let mut put = |path: &str, v: Value| set(out, path, v);
        put("identity_holds", json!(s.identity_holds));
        put("throughput.offered_per_sec", json!(s.offered_per_sec));
        put("throughput.published_per_sec", json!(s.published_per_sec));
        put("throughput.deliveries_per_sec", json!(s.deliveries_per_sec));
        put(
            "throughput.reference_deliveries_per_sec",
            json!(s.reference_deliveries_per_sec),
        );
        put(
            "throughput.window_deliveries_per_sec",
            json!(s.window_deliveries_per_sec),
        );
        if let Some((served, window)) = s.served {
            put("throughput.served_fraction", json!(served));
            put("throughput.window_served_fraction", json!(window));
        }
        if let (Some(lanes), Some(queues)) = (s.ordered_lanes, s.physical_queues) {
            put("provisioned.ordered_lanes", json!(lanes));
            put("provisioned.physical_queues", json!(queues));
        }
        put("provisioned.consumer_members", json!(s.consumer_members));
        put("provisioned.connections", json!(s.connections));
        if let Some(notes) = &s.notes {
            put("provisioned.notes", json!(notes));
        }
        put("time.started_unix_ms", json!(s.started_unix_ms));
        put("time.drain_sec", json!(s.drain_sec));
        put("time.hydration_sec", json!(s.hydration_sec));
        if let Some(t) = &s.started_utc {
            put("time.started_utc", json!(t));
        }
        if let Some(t) = &s.ended_utc {
            put("time.ended_utc", json!(t));
        }
        // The loaders' CPU, over the deliveries they made in the window.
        let (cores, avail) = (s.cpu_cores_mean, s.cores_available);
        put("loader.cpu_cores_mean", json!(cores));
        put("loader.cores_available", json!(avail));
        put(
            "loader.cpu_fraction_of_available",
            json!(cores / avail.max(1e-9)),
        );
        put(
            "loader.cpu_us_per_delivery",
            json!(cores * 1e6 / s.window_deliveries_per_sec.max(1e-9)),
        );
        put("loader.peak_rss_bytes", json!(s.peak_rss_bytes));
        put("loader.runtime_threads", json!(s.runtime_threads));
        put("drain.outcome", json!(s.drain_outcome));
        put("drain.seconds", json!(s.drain_seconds));
        put("void.void", json!(!s.void_reasons.is_empty()));
        put("void.reasons", json!(s.void_reasons));
        let j = &self.judged;
        put("load", serde_json::to_value(&j.load).unwrap_or(Value::Null));
        put("latency_ms.clocks", j.clocks.clone());
        put(
            "verdict",
            serde_json::to_value(&j.verdict).unwrap_or(Value::Null),
        );
        put("outcome", json!(j.outcome.name()));
        put("warnings", json!(j.warnings));
        put("loaders", self.loaders.clone());
        if self.cost_note {
            put(
                "cost_note",
                json!("cost: the system and host as loader 0 sampled them; every loader's own samples are in samples.csv"),
            );
        }
    }
}

/// The tags of the loaders' totals that are the same in every loader.
pub fn common_tags(totals: &[BTreeMap<String, Histogram<u64>>]) -> Vec<String> {
    let Some(first) = totals.first() else {
        return Vec::new();
    };
    first
        .keys()
        .filter(|k| totals.iter().all(|t| t.contains_key(*k)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_add_and_the_rest_stays() {
        let a = json!({"flows": {"A": {"offered": 3, "rate": 1.5, "name": "x"}}});
        let b = json!({"flows": {"A": {"offered": 4, "rate": 2.0, "name": "y"}}});
        let mut out = a.clone();
        sum_numbers(&mut out, &[&a, &b], "flows", &["skip"]);
        assert_eq!(
            out,
            json!({"flows": {"A": {"offered": 7, "rate": 3.5, "name": "x"}}})
        );
    }

    #[test]
    fn paths_reach_into_arrays_and_objects() {
        let mut v = json!({"streams": [{"a": 1}, {"a": 2}]});
        assert_eq!(num(&v, "streams.1.a"), 2.0);
        set(&mut v, "streams.0.b", json!(5));
        set(&mut v, "latency_ms.e2e_a", json!({"count": 1}));
        assert_eq!(num(&v, "streams.0.b"), 5.0);
        assert_eq!(num(&v, "latency_ms.e2e_a.count"), 1.0);
        assert_eq!(
            worst_drain(["caught-up", "cut-short", "grace"].into_iter()),
            "cut-short"
        );
    }

    #[test]
    fn summaries_come_from_the_summed_histogram() {
        let mut h = crate::measure::histograms::new_hist();
        for v in [1000u64, 2000, 3000, 4000] {
            h.record(v).unwrap();
        }
        let a = json!({"latency_ms": {"e2e_a": {"clamped": 1, "negative": 2}}});
        let b = json!({"latency_ms": {"e2e_a": {"clamped": 0, "negative": 1}}});
        let mut out = a.clone();
        put_summary(&mut out, &[&a, &b], "latency_ms.e2e_a", &h);
        assert_eq!(num(&out, "latency_ms.e2e_a.count"), 4.0);
        assert_eq!(num(&out, "latency_ms.e2e_a.clamped"), 1.0);
        assert_eq!(num(&out, "latency_ms.e2e_a.negative"), 3.0);
        assert!((num(&out, "latency_ms.e2e_a.p50_ms") - 2.0).abs() < 0.01);
    }
}
