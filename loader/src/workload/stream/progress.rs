//! A stream cell's live progress: what its `report.csv` rows (format in
//! docs/record.md, "stream cells"), its interval log (`e2e.hlog`) and its console
//! line hold each second.

use std::sync::Arc;

use adapters::{ErrorClass, StreamCounters};
use hdrhistogram::Histogram;

use crate::console::progress::{ProgressSource, Second};
use crate::measure::counters::FlowCounters;
use crate::measure::histograms::{new_hist, quantile_ms};
use crate::measure::phase::Phase;
use crate::workload::stream::ledger::Ledger;
use crate::workload::stream::push::{PushCounters, PushMetrics};
use crate::workload::stream::sink::{SinkCounters, SinkMetrics};

/// report.csv format version of stream cells. v2 added the column of the
/// `topology_refused` error class (every class of `ErrorClass::ALL` has one).
pub const REPORT_CSV_VERSION: u32 = 2;

/// What the stream workload's progress reads.
#[derive(Debug)]
pub struct StreamProgress {
    pub flow: Arc<FlowCounters>,
    pub push: Arc<PushCounters>,
    pub push_metrics: Arc<PushMetrics>,
    pub sinks: Vec<Arc<SinkCounters>>,
    pub streams: Vec<Arc<StreamCounters>>,
    pub sink_metrics: Arc<SinkMetrics>,
    pub ledger: Arc<Ledger>,
    prev: Totals,
    /// The second's e2e and push histograms, reused every second.
    e2e_interval: Histogram<u64>,
    push_interval: Histogram<u64>,
}

#[derive(Debug, Default, Clone)]
struct Totals {
    offered: u64,
    accepted: u64,
    shed: u64,
    failed: u64,
    popped: u64,
    acked: u64,
    push_errors: [u64; ErrorClass::ALL.len()],
    pop_errors: u64,
    ack_errors: u64,
    ack_calls: u64,
    ack_micros: u64,
    requests_ok: u64,
}

impl StreamProgress {
    pub fn new(
        flow: Arc<FlowCounters>,
        push: Arc<PushCounters>,
        push_metrics: Arc<PushMetrics>,
        sinks: Vec<Arc<SinkCounters>>,
        streams: Vec<Arc<StreamCounters>>,
        sink_metrics: Arc<SinkMetrics>,
        ledger: Arc<Ledger>,
    ) -> Self {
        let mut p = StreamProgress {
            flow,
            push,
            push_metrics,
            sinks,
            streams,
            sink_metrics,
            ledger,
            prev: Totals::default(),
            e2e_interval: new_hist(),
            push_interval: new_hist(),
        };
        p.prev = p.totals();
        p
    }

    fn totals(&self) -> Totals {
        let sc = |f: &dyn Fn(&StreamCounters) -> u64| self.streams.iter().map(|s| f(s)).sum();
        let mut push_errors = [0u64; ErrorClass::ALL.len()];
        for (i, e) in self.push.errors.iter().enumerate() {
            push_errors[i] = e.get();
        }
        Totals {
            offered: self.flow.offered.get(),
            accepted: self.flow.published.get(),
            shed: self.flow.shed(),
            failed: self.flow.failed.get(),
            popped: self.sinks.iter().map(|s| s.popped.get()).sum(),
            acked: sc(&|s| s.acked.get()),
            push_errors,
            pop_errors: sc(&|s| s.receive_errors.get()),
            ack_errors: sc(&|s| s.ack_errors.get()),
            ack_calls: sc(&|s| s.ack_calls.get()),
            ack_micros: sc(&|s| s.ack_micros.get()),
            requests_ok: self.push.requests_ok.get(),
        }
    }
}

impl ProgressSource for StreamProgress {
    fn live_totals(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("crossbench_retries_total", self.flow.publish_retries.get()),
            (
                "crossbench_reconnects_total",
                self.streams.iter().map(|s| s.reconnects.get()).sum(),
            ),
        ]
    }

    fn csv_comment(&self) -> String {
        format!("# crossbench report.csv v{REPORT_CSV_VERSION} workload=stream")
    }

    fn columns(&self) -> Vec<String> {
        let mut c: Vec<String> = [
            "offered", "accepted", "shed", "failed", "popped", "acked", "unacked",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        c.extend(ErrorClass::ALL.iter().map(|e| format!("push_err_{e}")));
        c.extend(
            [
                "pop_errors",
                "ack_errors",
                "e2e_p50_ms",
                "e2e_p99_ms",
                "e2e_p999_ms",
                "push_p99_ms",
                "ack_rtt_mean_ms",
                "push_requests",
                "partitions_created",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        c
    }

    fn hlogs(&self) -> Vec<(String, String)> {
        vec![("e2e.hlog".into(), "crossbench stream".into())]
    }

    fn second(&mut self, t: u64, phase: Phase, show: bool) -> Second<'_> {
        let cur = self.totals();
        let prev = std::mem::replace(&mut self.prev, cur.clone());
        self.sink_metrics
            .e2e_interval
            .take_interval_into(&mut self.e2e_interval);
        // The push histogram only holds rated requests; its interval view is what
        // the report shows (zero outside the rated window).
        self.push_metrics
            .push
            .take_interval_into(&mut self.push_interval);
        let (e2e, push) = (&self.e2e_interval, &self.push_interval);
        let q = quantile_ms;
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let ack_calls = d(cur.ack_calls, prev.ack_calls);
        let ack_rtt = if ack_calls == 0 {
            0.0
        } else {
            d(cur.ack_micros, prev.ack_micros) as f64 / ack_calls as f64 / 1000.0
        };
        let groups = self.sinks.len().max(1) as u64;
        let unacked = cur.popped.saturating_sub(cur.acked);
        let errs: Vec<String> = (0..ErrorClass::ALL.len())
            .map(|i| d(cur.push_errors[i], prev.push_errors[i]).to_string())
            .collect();
        let created = self.ledger.created.count();
        let row = format!(
            "{},{},{},{},{},{},{unacked},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{}",
            d(cur.offered, prev.offered),
            d(cur.accepted, prev.accepted),
            d(cur.shed, prev.shed),
            d(cur.failed, prev.failed),
            d(cur.popped, prev.popped),
            d(cur.acked, prev.acked),
            errs.join(","),
            d(cur.pop_errors, prev.pop_errors),
            d(cur.ack_errors, prev.ack_errors),
            q(e2e, 0.5),
            q(e2e, 0.99),
            q(e2e, 0.999),
            q(push, 0.99),
            ack_rtt,
            d(cur.requests_ok, prev.requests_ok),
            created,
        );
        let line = show.then(|| {
            let push_err: u64 = (0..ErrorClass::ALL.len())
                .map(|i| d(cur.push_errors[i], prev.push_errors[i]))
                .sum();
            format!(
                "t={t:>4}s {:<7} off={:>7}/s acc={:>7}/s shed={} pop={:>7}/s ack={:>7}/s lag={} err push={} pop={} ack={} | e2e p50={:.1} p99={:.1} p999={:.1} ms | created={}",
                phase.name(),
                d(cur.offered, prev.offered),
                d(cur.accepted, prev.accepted),
                d(cur.shed, prev.shed),
                d(cur.popped, prev.popped) / groups,
                d(cur.acked, prev.acked) / groups,
                (cur.accepted * groups).saturating_sub(cur.popped),
                push_err,
                d(cur.pop_errors, prev.pop_errors),
                d(cur.ack_errors, prev.ack_errors),
                q(e2e, 0.5),
                q(e2e, 0.99),
                q(e2e, 0.999),
                created,
            )
        });
        Second {
            row,
            intervals: vec![(0, "e2e".into(), e2e)],
            line,
        }
    }
}
