//! A pipeline cell's live progress: what its `report.csv` rows (format v1,
//! docs/record.md), its interval logs (`e2e.hlog`, `schedule-lag.hlog`,
//! `entry-age.hlog`) and its console line hold each second.

use std::sync::Arc;

use adapters::StreamCounters;
use hdrhistogram::Histogram;

use crate::console::progress::{ProgressSource, Second};
use crate::measure::counters::FlowCounters;
use crate::measure::histograms::{new_hist, quantile_ms};
use crate::measure::phase::Phase;
use crate::workload::pipeline::metrics::Metrics;
use crate::workload::pipeline::stage::StageCounters;
use crate::workload::pipeline::topology::StreamDef;

/// report.csv format version (first line comment).
pub const REPORT_CSV_VERSION: u32 = 1;

/// What the pipeline's progress reads.
#[derive(Debug)]
pub struct PipelineProgress {
    pub flows: [Arc<FlowCounters>; 2],
    pub stages: Vec<Arc<StageCounters>>,
    pub streams: Vec<Arc<StreamCounters>>,
    pub defs: Vec<StreamDef>,
    pub metrics: Arc<Metrics>,
    /// Consumer streams one published event reaches (6).
    pub streams_per_flow: u64,
    prev: Totals,
    /// The second's histograms, reused every second: e2e of flows A and B, the
    /// schedule lag, and the entry age of each stream of `defs`.
    e2e_interval: [Histogram<u64>; 2],
    lag_interval: Histogram<u64>,
    age_intervals: Vec<Histogram<u64>>,
}

#[derive(Debug, Default, Clone)]
struct Totals {
    offered: u64,
    published: u64,
    shed: u64,
    failed: u64,
    processed: Vec<u64>,
    errors: u64,
}

impl PipelineProgress {
    pub fn new(
        flows: [Arc<FlowCounters>; 2],
        stages: Vec<Arc<StageCounters>>,
        streams: Vec<Arc<StreamCounters>>,
        defs: Vec<StreamDef>,
        metrics: Arc<Metrics>,
        streams_per_flow: u64,
    ) -> Self {
        let mut p = PipelineProgress {
            flows,
            stages,
            streams,
            defs,
            metrics,
            streams_per_flow,
            prev: Totals::default(),
            e2e_interval: [new_hist(), new_hist()],
            lag_interval: new_hist(),
            age_intervals: Vec::new(),
        };
        p.age_intervals = p.defs.iter().map(|_| new_hist()).collect();
        p.prev = p.totals();
        p
    }

    fn totals(&self) -> Totals {
        let f = |g: &dyn Fn(&FlowCounters) -> u64| g(&self.flows[0]) + g(&self.flows[1]);
        Totals {
            offered: f(&|c| c.offered.get()),
            published: f(&|c| c.published.get()),
            shed: f(&|c| c.shed()),
            failed: f(&|c| c.failed.get()),
            processed: self.stages.iter().map(|s| s.processed.get()).collect(),
            errors: self.stages.iter().map(|s| s.push_errors.get()).sum::<u64>()
                + self
                    .streams
                    .iter()
                    .map(|s| s.ack_errors.get() + s.receive_errors.get())
                    .sum::<u64>()
                + f(&|c| c.publish_retries.get()),
        }
    }
}

impl ProgressSource for PipelineProgress {
    fn live_totals(&self) -> Vec<(&'static str, u64)> {
        vec![
            (
                "crossbench_retries_total",
                self.flows.iter().map(|f| f.publish_retries.get()).sum(),
            ),
            (
                "crossbench_reconnects_total",
                self.streams.iter().map(|s| s.reconnects.get()).sum(),
            ),
        ]
    }

    fn csv_comment(&self) -> String {
        format!("# crossbench report.csv v{REPORT_CSV_VERSION}")
    }

    fn columns(&self) -> Vec<String> {
        let mut c: Vec<String> = [
            "offered",
            "published",
            "shed",
            "failed",
            "errors",
            "lag_msgs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        c.extend(self.defs.iter().map(|d| format!("delivered_{}", d.name())));
        c.extend(
            [
                "schedule_lag_p99_ms",
                "e2e_a_p50_ms",
                "e2e_a_p99_ms",
                "e2e_b_p50_ms",
                "e2e_b_p99_ms",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        c
    }

    fn hlogs(&self) -> Vec<(String, String)> {
        let comment = "crossbench interval log".to_string();
        ["e2e.hlog", "schedule-lag.hlog", "entry-age.hlog"]
            .iter()
            .map(|n| (n.to_string(), comment.clone()))
            .collect()
    }

    fn second(&mut self, t: u64, phase: Phase, show: bool) -> Second<'_> {
        let cur = self.totals();
        let prev = std::mem::replace(&mut self.prev, cur.clone());
        let m = &self.metrics;
        for (metric, h) in m.e2e.iter().zip(&mut self.e2e_interval) {
            metric.take_interval_into(h);
        }
        m.schedule_lag.take_interval_into(&mut self.lag_interval);
        for (metric, h) in m.age.iter().zip(&mut self.age_intervals) {
            metric.take_interval_into(h);
        }
        let (e2e, lag) = (&self.e2e_interval, &self.lag_interval);
        let mut intervals = vec![
            (0, "A".to_string(), &e2e[0]),
            (0, "B".to_string(), &e2e[1]),
            (1, "lag".to_string(), lag),
        ];
        for (d, h) in self.defs.iter().zip(&self.age_intervals) {
            intervals.push((2, d.name(), h));
        }
        let q = quantile_ms;
        let dproc: Vec<u64> = cur
            .processed
            .iter()
            .zip(&prev.processed)
            .map(|(a, b)| a - b)
            .collect();
        // Messages published but not yet processed downstream (every event reaches
        // `streams_per_flow` streams).
        let lag_msgs = (self.streams_per_flow as i64 * cur.published as i64)
            - cur.processed.iter().sum::<u64>() as i64;
        let row = format!(
            "{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3}",
            cur.offered - prev.offered,
            cur.published - prev.published,
            cur.shed - prev.shed,
            cur.failed - prev.failed,
            cur.errors - prev.errors,
            lag_msgs.max(0),
            dproc
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(","),
            q(lag, 0.99),
            q(&e2e[0], 0.5),
            q(&e2e[0], 0.99),
            q(&e2e[1], 0.5),
            q(&e2e[1], 0.99),
        );
        let line = show.then(|| {
            format!(
                "t={t:>4}s {:<8} off={:>6}/s pub={:>6}/s del={:>7}/s shed={} err={} backlog={} lag99={:.2}ms e2eA p50={:.1} p99={:.1} e2eB p50={:.1} p99={:.1} ms",
                phase.name(),
                cur.offered - prev.offered,
                cur.published - prev.published,
                dproc.iter().sum::<u64>(),
                cur.shed - prev.shed,
                cur.errors - prev.errors,
                lag_msgs.max(0),
                q(lag, 0.99),
                q(&e2e[0], 0.5),
                q(&e2e[0], 0.99),
                q(&e2e[1], 0.5),
                q(&e2e[1], 0.99),
            )
        });
        Second {
            row,
            intervals,
            line,
        }
    }
}
