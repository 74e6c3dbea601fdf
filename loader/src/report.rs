//! The 1 Hz reporter: one line per second on stderr, one row per second in
//! `report.csv`, and each second's histograms in the `.hlog` interval logs.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use adapters::StreamCounters;

use crate::counters::{get, FlowCounters, StageCounters};
use crate::histograms::HlogWriter;
use crate::metrics::Metrics;
use crate::topology::StreamDef;

/// report.csv format version (first line comment).
pub const REPORT_CSV_VERSION: u32 = 1;

/// What the reporter watches.
#[derive(Debug, Clone)]
pub struct Watch {
    pub flows: [Arc<FlowCounters>; 2],
    pub stages: Vec<Arc<StageCounters>>,
    pub streams: Vec<Arc<StreamCounters>>,
    pub defs: Vec<StreamDef>,
    pub metrics: Arc<Metrics>,
    pub phase: Arc<parking_lot::Mutex<&'static str>>,
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

impl Watch {
    fn totals(&self) -> Totals {
        let f = |g: &dyn Fn(&FlowCounters) -> u64| g(&self.flows[0]) + g(&self.flows[1]);
        Totals {
            offered: f(&|c| get(&c.offered)),
            published: f(&|c| get(&c.published)),
            shed: f(&|c| c.shed()),
            failed: f(&|c| get(&c.failed)),
            processed: self.stages.iter().map(|s| get(&s.processed)).collect(),
            errors: self.stages.iter().map(|s| get(&s.push_errors)).sum::<u64>()
                + self
                    .streams
                    .iter()
                    .map(|s| {
                        StreamCounters::get(&s.ack_errors) + StreamCounters::get(&s.receive_errors)
                    })
                    .sum::<u64>()
                + f(&|c| get(&c.publish_retries)),
        }
    }
}

/// Run the reporter until `stop` fires; writes report.csv and the .hlog files.
pub async fn run(
    watch: Watch,
    dir: &Path,
    start: SystemTime,
    quiet: bool,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let mut csv = BufWriter::new(File::create(dir.join("report.csv"))?);
    writeln!(csv, "# crossbench report.csv v{REPORT_CSV_VERSION}")?;
    let stream_cols: Vec<String> = watch
        .defs
        .iter()
        .map(|d| format!("delivered_{}", d.name()))
        .collect();
    writeln!(
        csv,
        "t_s,unix_ms,phase,offered,published,shed,failed,errors,lag_msgs,{},schedule_lag_p99_ms,e2e_a_p50_ms,e2e_a_p99_ms,e2e_b_p50_ms,e2e_b_p99_ms",
        stream_cols.join(",")
    )?;
    let comment = "crossbench interval log";
    let mut e2e_log = HlogWriter::create(&dir.join("e2e.hlog"), start, comment)?;
    let mut lag_log = HlogWriter::create(&dir.join("schedule-lag.hlog"), start, comment)?;
    let mut age_log = HlogWriter::create(&dir.join("entry-age.hlog"), start, comment)?;
    let mut prev = watch.totals();
    let mut ticker = crate::ticker::Ticker::start(quiet).await;
    loop {
        let tick = ticker.next(&stop).await;
        let (t, last, len, stopping) = (tick.t, tick.start, tick.len, tick.stopping);
        let cur = watch.totals();
        let m = &watch.metrics;
        let e2e = [m.e2e[0].take_interval(), m.e2e[1].take_interval()];
        let lag = m.schedule_lag.take_interval();
        e2e_log.write("A", last, len, &e2e[0])?;
        e2e_log.write("B", last, len, &e2e[1])?;
        lag_log.write("lag", last, len, &lag)?;
        for (i, d) in watch.defs.iter().enumerate() {
            let h = m.age[i].take_interval();
            age_log.write(&d.name(), last, len, &h)?;
        }
        let q = crate::ticker::quantile_ms;
        let dproc: Vec<u64> = cur
            .processed
            .iter()
            .zip(&prev.processed)
            .map(|(a, b)| a - b)
            .collect();
        // Messages published but not yet processed downstream (1 ingress + 5 derived
        // consumers per flow event reach 6 streams).
        let lag_msgs = (6 * cur.published as i64) - cur.processed.iter().sum::<u64>() as i64;
        let phase = *watch.phase.lock();
        writeln!(
            csv,
            "{t},{},{phase},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3}",
            tick.unix_ms(),
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
            q(&lag, 0.99),
            q(&e2e[0], 0.5),
            q(&e2e[0], 0.99),
            q(&e2e[1], 0.5),
            q(&e2e[1], 0.99),
        )?;
        if ticker.shows() {
            let line = format!(
                "t={t:>4}s {phase:<8} off={:>6}/s pub={:>6}/s del={:>7}/s shed={} err={} backlog={} lag99={:.2}ms e2eA p50={:.1} p99={:.1} e2eB p50={:.1} p99={:.1} ms",
                cur.offered - prev.offered,
                cur.published - prev.published,
                dproc.iter().sum::<u64>(),
                cur.shed - prev.shed,
                cur.errors - prev.errors,
                lag_msgs.max(0),
                q(&lag, 0.99),
                q(&e2e[0], 0.5),
                q(&e2e[0], 0.99),
                q(&e2e[1], 0.5),
                q(&e2e[1], 0.99),
            );
            ticker.say(&line);
        }
        // Flushed every second so a run can be followed (and tested) live.
        csv.flush()?;
        prev = cur;
        if stopping {
            break;
        }
    }
    ticker.finish();
    csv.flush()?;
    e2e_log.flush()?;
    lag_log.flush()?;
    age_log.flush()?;
    Ok(())
}
