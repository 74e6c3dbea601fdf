//! The stream workload's 1 Hz reporter: one row per second in `report.csv` (format
//! in docs/record.md, "stream cells"), one line per second on stderr, and each
//! second's end-to-end histogram in `e2e.hlog`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use adapters::StreamCounters;

use crate::counters::{get, FlowCounters};
use crate::histograms::HlogWriter;
use crate::stream::ledger::Ledger;
use crate::stream::push::{PushCounters, PushMetrics, ERROR_CLASSES};
use crate::stream::sink::{SinkCounters, SinkMetrics};

/// First line of a stream cell's report.csv.
pub const HEADER_COMMENT: &str = "# crossbench report.csv v1 workload=stream";

#[derive(Debug, Clone)]
pub struct Watch {
    pub flow: Arc<FlowCounters>,
    pub push: Arc<PushCounters>,
    pub push_metrics: Arc<PushMetrics>,
    pub sinks: Vec<Arc<SinkCounters>>,
    pub streams: Vec<Arc<StreamCounters>>,
    pub sink_metrics: Arc<SinkMetrics>,
    pub ledger: Arc<Ledger>,
    pub phase: Arc<parking_lot::Mutex<&'static str>>,
}

#[derive(Debug, Default, Clone)]
struct Totals {
    offered: u64,
    accepted: u64,
    shed: u64,
    failed: u64,
    popped: u64,
    acked: u64,
    push_errors: [u64; 6],
    pop_errors: u64,
    ack_errors: u64,
    ack_calls: u64,
    ack_micros: u64,
    requests_ok: u64,
}

impl Watch {
    fn totals(&self) -> Totals {
        let sc = |f: &dyn Fn(&StreamCounters) -> u64| self.streams.iter().map(|s| f(s)).sum();
        let mut push_errors = [0u64; 6];
        for (i, e) in self.push.errors.iter().enumerate() {
            push_errors[i] = get(e);
        }
        Totals {
            offered: get(&self.flow.offered),
            accepted: get(&self.flow.published),
            shed: self.flow.shed(),
            failed: get(&self.flow.failed),
            popped: self.sinks.iter().map(|s| get(&s.popped)).sum(),
            acked: sc(&|s| StreamCounters::get(&s.acked)),
            push_errors,
            pop_errors: sc(&|s| StreamCounters::get(&s.receive_errors)),
            ack_errors: sc(&|s| StreamCounters::get(&s.ack_errors)),
            ack_calls: sc(&|s| StreamCounters::get(&s.ack_calls)),
            ack_micros: sc(&|s| StreamCounters::get(&s.ack_micros)),
            requests_ok: get(&self.push.requests_ok),
        }
    }
}

pub async fn run(
    watch: Watch,
    dir: &Path,
    start: SystemTime,
    quiet: bool,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let mut csv = BufWriter::new(File::create(dir.join("report.csv"))?);
    writeln!(csv, "{HEADER_COMMENT}")?;
    let err_cols: Vec<String> = ERROR_CLASSES
        .iter()
        .map(|c| format!("push_err_{c}"))
        .collect();
    writeln!(
        csv,
        "t_s,unix_ms,phase,offered,accepted,shed,failed,popped,acked,unacked,{},pop_errors,ack_errors,e2e_p50_ms,e2e_p99_ms,e2e_p999_ms,push_p99_ms,ack_rtt_mean_ms,push_requests,partitions_created",
        err_cols.join(",")
    )?;
    let mut e2e_log = HlogWriter::create(&dir.join("e2e.hlog"), start, "crossbench stream")?;
    let mut prev = watch.totals();
    let mut ticker = crate::ticker::Ticker::start(quiet).await;
    loop {
        let tick = ticker.next(&stop).await;
        let (t, last, len, stopping) = (tick.t, tick.start, tick.len, tick.stopping);
        let cur = watch.totals();
        let e2e = watch.sink_metrics.e2e_interval.take_interval();
        // The push histogram only holds rated requests; its interval view is what
        // the report shows (zero outside the rated window).
        let push = watch.push_metrics.push.take_interval();
        e2e_log.write("e2e", last, len, &e2e)?;
        let q = crate::ticker::quantile_ms;
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let ack_calls = d(cur.ack_calls, prev.ack_calls);
        let ack_rtt = if ack_calls == 0 {
            0.0
        } else {
            d(cur.ack_micros, prev.ack_micros) as f64 / ack_calls as f64 / 1000.0
        };
        let groups = watch.sinks.len().max(1) as u64;
        let unacked = cur.popped.saturating_sub(cur.acked);
        let phase = *watch.phase.lock();
        let errs: Vec<String> = (0..6)
            .map(|i| d(cur.push_errors[i], prev.push_errors[i]).to_string())
            .collect();
        writeln!(
            csv,
            "{t},{},{phase},{},{},{},{},{},{},{unacked},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{}",
            tick.unix_ms(),
            d(cur.offered, prev.offered),
            d(cur.accepted, prev.accepted),
            d(cur.shed, prev.shed),
            d(cur.failed, prev.failed),
            d(cur.popped, prev.popped),
            d(cur.acked, prev.acked),
            errs.join(","),
            d(cur.pop_errors, prev.pop_errors),
            d(cur.ack_errors, prev.ack_errors),
            q(&e2e, 0.5),
            q(&e2e, 0.99),
            q(&e2e, 0.999),
            q(&push, 0.99),
            ack_rtt,
            d(cur.requests_ok, prev.requests_ok),
            watch.ledger.created.count(),
        )?;
        if ticker.shows() {
            let push_err: u64 = (0..6)
                .map(|i| d(cur.push_errors[i], prev.push_errors[i]))
                .sum();
            let line = format!(
                "t={t:>4}s {phase:<7} off={:>7}/s acc={:>7}/s shed={} pop={:>7}/s ack={:>7}/s lag={} err push={} pop={} ack={} | e2e p50={:.1} p99={:.1} p999={:.1} ms | created={}",
                d(cur.offered, prev.offered),
                d(cur.accepted, prev.accepted),
                d(cur.shed, prev.shed),
                d(cur.popped, prev.popped) / groups,
                d(cur.acked, prev.acked) / groups,
                (cur.accepted * groups).saturating_sub(cur.popped),
                push_err,
                d(cur.pop_errors, prev.pop_errors),
                d(cur.ack_errors, prev.ack_errors),
                q(&e2e, 0.5),
                q(&e2e, 0.99),
                q(&e2e, 0.999),
                watch.ledger.created.count(),
            );
            ticker.say(&line);
        }
        csv.flush()?;
        prev = cur;
        if stopping {
            break;
        }
    }
    ticker.finish();
    csv.flush()?;
    e2e_log.flush()?;
    Ok(())
}
