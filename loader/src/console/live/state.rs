//! What the live endpoint serves, and its text: the cell's identity (on every
//! series as labels), its phase, its counters and backlog as `report.csv` has them,
//! its latency histograms as the `.hlog` files have them, the sampler's latest
//! resources, the outcome once known, and a campaign's progress. Updated once a
//! second by the live progress and at the cell's turns (the phase is the cell's
//! own, read at each scrape while the live progress runs); rendered on each scrape.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;

use std::sync::Arc;

use crate::measure::phase::{Phase, PhaseCell};

/// Every series the endpoint serves: (name, type, help). The dashboard's queries
/// name only these (a test checks it).
pub const SERIES: &[(&str, &str, &str)] = &[
    ("crossbench_phase", "gauge", "1 for the cell's current phase (setup, hydrating, warmup, rated, draining, verifying, done), 0 for the others"),
    ("crossbench_offered_total", "counter", "units the schedule owed (report.csv offered)"),
    ("crossbench_published_total", "counter", "units the system acknowledged (report.csv published, or accepted for a stream cell)"),
    ("crossbench_shed_total", "counter", "units shed by the publishers' queues or the pacer (report.csv shed)"),
    ("crossbench_failed_total", "counter", "units whose publish was given up (report.csv failed)"),
    ("crossbench_errors_total", "counter", "failed attempts by operation and class (report.csv errors, push_err_*, pop_errors, ack_errors)"),
    ("crossbench_delivered_total", "counter", "deliveries per stream (report.csv delivered_<stream>; popped for a stream cell, stream=\"all\")"),
    ("crossbench_acked_total", "counter", "stream cells: acknowledged pops (report.csv acked)"),
    ("crossbench_push_requests_total", "counter", "stream cells: push requests (report.csv push_requests)"),
    ("crossbench_partitions_created_total", "counter", "stream cells: partitions created (report.csv partitions_created)"),
    ("crossbench_retries_total", "counter", "publish attempts that failed and were retried (the flows' publish_retries, as result.json has them)"),
    ("crossbench_reconnects_total", "counter", "consumer reconnects, over the streams (the streams' reconnects, as result.json has them)"),
    ("crossbench_backlog_messages", "gauge", "messages published and not yet delivered downstream (report.csv lag_msgs)"),
    ("crossbench_unacked_messages", "gauge", "stream cells: popped and not yet acknowledged (report.csv unacked)"),
    ("crossbench_e2e_latency_seconds", "histogram", "end-to-end latency per flow (the e2e.hlog intervals, summed)"),
    ("crossbench_schedule_lag_seconds", "histogram", "how late the pacer ran its schedule (the schedule-lag.hlog intervals, summed)"),
    ("crossbench_resource", "gauge", "the sampler's latest value per target and metric (the rows samples.csv gets); role is system, loader, host or other"),
    ("crossbench_outcome", "gauge", "1 for the cell's outcome once judged (PASS, FAIL, VOID, INTERRUPTED, …)"),
    ("crossbench_load_held", "gauge", "1 when the cell held its load, 0 when it did not, once judged"),
    ("crossbench_campaign_cells_done", "gauge", "cells of the campaign (ceiling search, gate) finished"),
    ("crossbench_campaign_cells_total", "gauge", "cells of the campaign (ceiling search, gate) to run"),
    ("crossbench_campaign_cells_left", "gauge", "cells of the campaign (ceiling search, gate) still to run"),
    ("crossbench_campaign_eta_seconds", "gauge", "the campaign's estimated time left, from the cells done so far"),
];

/// Latency buckets, in seconds.
pub const BUCKETS_S: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// Who the series are about: on every series but the campaign's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    pub cell: String,
    pub system: String,
    pub variant: String,
    /// This loader's index, and the number of loaders.
    pub loader: u64,
    pub loaders: u64,
    pub campaign: String,
    pub arm: String,
}

/// The live metrics of this process.
#[derive(Debug, Default)]
pub struct Live {
    inner: Mutex<State>,
    /// Scrapes rendered, and the latest whose reply was written whole (by number).
    renders: std::sync::atomic::AtomicU64,
    scrapes: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    labels: Labels,
    /// The phase when the cell is not in one of its live progress's (setup,
    /// verifying, done); empty before the first cell.
    phase: &'static str,
    /// While the live progress runs: the cell's own phase, read at each scrape.
    follow: Option<Arc<PhaseCell>>,
    /// (series, its own labels) → value.
    counters: BTreeMap<(&'static str, String), u64>,
    gauges: BTreeMap<(&'static str, String), f64>,
    hists: BTreeMap<(&'static str, String), Histogram<u64>>,
    samples: Option<(sampler::SampleView, Vec<String>)>,
    outcome: Option<String>,
    load_held: Option<bool>,
    campaign: Option<Progress>,
}

#[derive(Debug, Clone)]
struct Progress {
    done: usize,
    total: usize,
    started: Instant,
}

/// A phase of the live progress by its live name.
pub fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Hydrate => "hydrating",
        Phase::Warmup => "warmup",
        Phase::Rated => "rated",
        Phase::Drain => "draining",
    }
}

const PHASES: &[&str] = &[
    "setup",
    "hydrating",
    "warmup",
    "rated",
    "draining",
    "verifying",
    "done",
];

/// How a `report.csv` column is served: a counter or a gauge, the series, its own
/// labels; `None`: not served (the per-second quantiles: the histograms serve them).
fn column(name: &str) -> Option<(bool, &'static str, String)> {
    let c = |s: &'static str| Some((true, s, String::new()));
    match name {
        "offered" => c("crossbench_offered_total"),
        "published" | "accepted" => c("crossbench_published_total"),
        "shed" => c("crossbench_shed_total"),
        "failed" => c("crossbench_failed_total"),
        "acked" => c("crossbench_acked_total"),
        "push_requests" => c("crossbench_push_requests_total"),
        "partitions_created" => c("crossbench_partitions_created_total"),
        "errors" => Some((
            true,
            "crossbench_errors_total",
            "op=\"publish\",class=\"all\"".into(),
        )),
        "pop_errors" => Some((
            true,
            "crossbench_errors_total",
            "op=\"pop\",class=\"all\"".into(),
        )),
        "ack_errors" => Some((
            true,
            "crossbench_errors_total",
            "op=\"ack\",class=\"all\"".into(),
        )),
        "popped" => Some((true, "crossbench_delivered_total", "stream=\"all\"".into())),
        "lag_msgs" => Some((false, "crossbench_backlog_messages", String::new())),
        "unacked" => Some((false, "crossbench_unacked_messages", String::new())),
        _ => {
            if let Some(s) = name.strip_prefix("delivered_") {
                Some((
                    true,
                    "crossbench_delivered_total",
                    format!("stream=\"{}\"", esc(s)),
                ))
            } else {
                name.strip_prefix("push_err_").map(|class| {
                    (
                        true,
                        "crossbench_errors_total",
                        format!("op=\"publish\",class=\"{}\"", esc(class)),
                    )
                })
            }
        }
    }
}

/// A label value escaped for the text format.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Live {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A campaign (ceiling search, gate) is about to run a cell of `arm`.
    pub fn set_context(&self, campaign: &str, arm: &str) {
        let mut s = self.state();
        s.labels.campaign = campaign.to_string();
        s.labels.arm = arm.to_string();
    }

    /// A cell begins: its figures start from nothing.
    pub fn cell_started(&self, cell: &str, system: &str, loader: u64, loaders: u64) {
        let mut s = self.state();
        s.labels.cell = cell.to_string();
        s.labels.system = system.to_string();
        s.labels.variant = String::new();
        s.labels.loader = loader;
        s.labels.loaders = loaders;
        s.phase = "setup";
        s.follow = None;
        s.counters.clear();
        s.gauges.clear();
        s.hists.clear();
        s.samples = None;
        s.outcome = None;
        s.load_held = None;
    }

    /// The system described itself (its variant is known once it is set up).
    pub fn set_variant(&self, variant: &str) {
        self.state().labels.variant = variant.to_string();
    }

    /// The cell left its live progress's phases for `phase` (verifying).
    pub fn set_phase(&self, phase: &'static str) {
        let mut s = self.state();
        s.phase = phase;
        s.follow = None;
    }

    /// The live progress runs: the phase is the cell's own, as it changes.
    pub fn follow_phase(&self, cell: Arc<PhaseCell>) {
        self.state().follow = Some(cell);
    }

    /// The sampler's rows, read at each scrape; `system` names the system's targets.
    pub fn set_samples(&self, view: sampler::SampleView, system: Vec<String>) {
        self.state().samples = Some((view, system));
    }

    /// One second of the live progress: `report.csv`'s row under its `columns`, and
    /// the second's histograms as (interval log's file name, tag, histogram).
    pub fn second(&self, columns: &[String], row: &str, hists: &[(&str, &str, &Histogram<u64>)]) {
        let mut s = self.state();
        for (c, v) in columns.iter().zip(row.split(',')) {
            let Some((counter, series, labels)) = column(c) else {
                continue;
            };
            let Ok(x) = v.trim().parse::<f64>() else {
                continue;
            };
            if counter {
                *s.counters.entry((series, labels)).or_default() += x.max(0.0) as u64;
            } else {
                s.gauges.insert((series, labels), x);
            }
        }
        for (file, tag, h) in hists {
            let key = match *file {
                "e2e.hlog" => (
                    "crossbench_e2e_latency_seconds",
                    format!("flow=\"{}\"", esc(tag)),
                ),
                "schedule-lag.hlog" => ("crossbench_schedule_lag_seconds", String::new()),
                _ => continue,
            };
            let total = s
                .hists
                .entry(key)
                .or_insert_with(crate::measure::histograms::new_hist);
            // Both come from new_hist(): the same range, so adding cannot fail.
            let _ = total.add(*h);
        }
    }

    /// Totals read from the cell's counters (`ProgressSource::live_totals`).
    pub fn totals(&self, totals: &[(&'static str, u64)]) {
        let mut s = self.state();
        for (name, v) in totals {
            s.counters.insert((name, String::new()), *v);
        }
    }

    /// The cell was judged.
    pub fn cell_ended(&self, outcome: &str, load_held: Option<bool>) {
        let mut s = self.state();
        s.phase = "done";
        s.follow = None;
        s.outcome = Some(outcome.to_string());
        s.load_held = load_held;
    }

    /// A campaign's progress: `done` of `total` cells (its clock starts at the
    /// first call).
    pub fn campaign_progress(&self, done: usize, total: usize) {
        let mut s = self.state();
        let started = s.campaign.as_ref().map_or_else(Instant::now, |p| p.started);
        s.campaign = Some(Progress {
            done,
            total,
            started,
        });
    }

    /// Scrapes rendered so far: the next one rendered gets this number plus one.
    pub fn rendered(&self) -> u64 {
        self.renders.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The latest scrape whose reply was written whole, by its number.
    pub fn last_answered(&self) -> u64 {
        self.scrapes.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Scrape `ticket`'s reply was written whole.
    pub fn answered(&self, ticket: u64) {
        self.scrapes
            .fetch_max(ticket, std::sync::atomic::Ordering::AcqRel);
    }

    /// The text a scrape gets, and its number (for [`Live::answered`]).
    pub fn render_numbered(&self) -> (String, u64) {
        let ticket = self
            .renders
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1;
        (self.render(), ticket)
    }

    /// The text a scrape gets.
    pub fn render(&self) -> String {
        let s = self.state();
        let l = &s.labels;
        let id = format!(
            "cell=\"{}\",system=\"{}\",variant=\"{}\",loader=\"{}\",loaders=\"{}\",campaign=\"{}\",arm=\"{}\"",
            esc(&l.cell),
            esc(&l.system),
            esc(&l.variant),
            l.loader,
            l.loaders.max(1),
            esc(&l.campaign),
            esc(&l.arm)
        );
        let with = |extra: &str| {
            if extra.is_empty() {
                id.clone()
            } else {
                format!("{id},{extra}")
            }
        };
        let mut out = String::new();
        let head = |out: &mut String, name: &str| {
            if let Some((_, kind, help)) = SERIES.iter().find(|(n, _, _)| *n == name) {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            }
        };
        let phase = s.follow.as_ref().map_or(s.phase, |c| phase_name(c.get()));
        if !phase.is_empty() {
            head(&mut out, "crossbench_phase");
            for p in PHASES {
                let _ = writeln!(
                    out,
                    "crossbench_phase{{{}}} {}",
                    with(&format!("phase=\"{p}\"")),
                    u8::from(*p == phase)
                );
            }
        }
        let mut last = "";
        for ((name, labels), v) in &s.counters {
            if *name != last {
                head(&mut out, name);
                last = name;
            }
            let _ = writeln!(out, "{name}{{{}}} {v}", with(labels));
        }
        for ((name, labels), v) in &s.gauges {
            if *name != last {
                head(&mut out, name);
                last = name;
            }
            let _ = writeln!(out, "{name}{{{}}} {v}", with(labels));
        }
        for ((name, labels), h) in &s.hists {
            if *name != last {
                head(&mut out, name);
                last = name;
            }
            let base = with(labels);
            for b in BUCKETS_S {
                let us = (b * 1e6) as u64;
                let _ = writeln!(
                    out,
                    "{name}_bucket{{{base},le=\"{b}\"}} {}",
                    h.count_between(0, us)
                );
            }
            let _ = writeln!(out, "{name}_bucket{{{base},le=\"+Inf\"}} {}", h.len());
            let sum_us: f64 = h
                .iter_recorded()
                .map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64)
                .sum();
            let _ = writeln!(out, "{name}_sum{{{base}}} {}", sum_us / 1e6);
            let _ = writeln!(out, "{name}_count{{{base}}} {}", h.len());
        }
        if let Some((view, system)) = &s.samples {
            let rows = view.latest();
            if !rows.is_empty() {
                head(&mut out, "crossbench_resource");
            }
            for r in rows {
                let Some(v) = r.value else { continue };
                let role = if system.iter().any(|x| **x == *r.target) {
                    "system"
                } else {
                    match &*r.target {
                        "loader" => "loader",
                        "host" => "host",
                        _ => "other",
                    }
                };
                let _ = writeln!(
                    out,
                    "crossbench_resource{{{}}} {v}",
                    with(&format!(
                        "target=\"{}\",role=\"{role}\",metric=\"{}\"",
                        esc(&r.target),
                        esc(&r.metric)
                    ))
                );
            }
        }
        if let Some(o) = &s.outcome {
            head(&mut out, "crossbench_outcome");
            let _ = writeln!(
                out,
                "crossbench_outcome{{{}}} 1",
                with(&format!("outcome=\"{}\"", esc(o)))
            );
        }
        if let Some(h) = s.load_held {
            head(&mut out, "crossbench_load_held");
            let _ = writeln!(out, "crossbench_load_held{{{id}}} {}", u8::from(h));
        }
        if let Some(p) = &s.campaign {
            let c = format!("campaign=\"{}\"", esc(&l.campaign));
            head(&mut out, "crossbench_campaign_cells_done");
            let _ = writeln!(out, "crossbench_campaign_cells_done{{{c}}} {}", p.done);
            head(&mut out, "crossbench_campaign_cells_total");
            let _ = writeln!(out, "crossbench_campaign_cells_total{{{c}}} {}", p.total);
            head(&mut out, "crossbench_campaign_cells_left");
            let _ = writeln!(
                out,
                "crossbench_campaign_cells_left{{{c}}} {}",
                p.total.saturating_sub(p.done)
            );
            if p.done > 0 {
                let per = p.started.elapsed().as_secs_f64() / p.done as f64;
                head(&mut out, "crossbench_campaign_eta_seconds");
                let _ = writeln!(
                    out,
                    "crossbench_campaign_eta_seconds{{{c}}} {:.0}",
                    per * p.total.saturating_sub(p.done) as f64
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counters are the sums of report.csv's rows; a histogram's buckets are
    /// cumulative and end at its count; every series served is listed in SERIES.
    #[test]
    fn a_second_becomes_series() {
        let live = Live::default();
        live.set_context("c", "arm-1");
        live.cell_started("smoke", "mem", 0, 1);
        let cols: Vec<String> = [
            "offered",
            "published",
            "lag_msgs",
            "delivered_a_db",
            "e2e_a_p50_ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut h = crate::measure::histograms::new_hist();
        h.record(2_000).unwrap();
        h.record(40_000).unwrap();
        let cell_phase = Arc::new(PhaseCell::new(Phase::Warmup));
        live.follow_phase(cell_phase.clone());
        live.second(&cols, "10,9,3,8,1.5", &[("e2e.hlog", "A", &h)]);
        // The phase is read at the scrape, as the cell changes it.
        cell_phase.set(Phase::Rated);
        live.second(&cols, "5,6,1,7,1.5", &[("e2e.hlog", "A", &h)]);
        let t = live.render();
        let id = "cell=\"smoke\",system=\"mem\",variant=\"\",loader=\"0\",loaders=\"1\",campaign=\"c\",arm=\"arm-1\"";
        assert!(
            t.contains(&format!("crossbench_offered_total{{{id}}} 15\n")),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "crossbench_delivered_total{{{id},stream=\"a_db\"}} 15\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!("crossbench_backlog_messages{{{id}}} 1\n")),
            "{t}"
        );
        assert!(
            t.contains(&format!("crossbench_phase{{{id},phase=\"rated\"}} 1\n")),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "crossbench_e2e_latency_seconds_bucket{{{id},flow=\"A\",le=\"0.0025\"}} 2\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "crossbench_e2e_latency_seconds_bucket{{{id},flow=\"A\",le=\"0.05\"}} 4\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "crossbench_e2e_latency_seconds_count{{{id},flow=\"A\"}} 4\n"
            )),
            "{t}"
        );
        assert!(!t.contains("p50"), "quantile columns are not served: {t}");
        for line in t.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split('{').next().unwrap();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            assert!(
                SERIES.iter().any(|(n, _, _)| *n == base || *n == name),
                "{name} not in SERIES"
            );
        }
        live.campaign_progress(1, 4);
        let t = live.render();
        assert!(
            t.contains("crossbench_campaign_cells_left{campaign=\"c\"} 3\n"),
            "{t}"
        );
        assert!(
            t.contains("crossbench_campaign_eta_seconds{campaign=\"c\"}"),
            "{t}"
        );
        live.cell_ended("PASS", Some(true));
        let t = live.render();
        assert!(t.contains("crossbench_outcome{") && t.contains("outcome=\"PASS\"} 1"));
        assert!(
            t.contains(&format!("crossbench_phase{{{id},phase=\"done\"}} 1\n")),
            "{t}"
        );
    }
}
