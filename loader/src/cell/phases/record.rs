//! The last phase: the cell's record. `result.json` (its head, the workload's
//! figures, its tail), `invocation.txt`'s outcome, and the summary to print; the
//! report carries the record as written, typed, so that a campaign judges the cell
//! it just ran without reading it back.

use std::time::SystemTime;

use crate::cell::phases::{CellRun, Drained, Ended, Judged, System, Window};
use crate::cell::workload::Workload;
use crate::cell::CellReport;
use crate::fleet::clock::ClockBound;
use crate::record::result::{
    write_record, CellHead, CellResult, CellTail, DrainFigures, Times, VoidFigures,
};

impl<W: Workload> CellRun<'_, W> {
    /// Write the record, close the cell, and render its summary.
    pub(super) async fn record(
        &mut self,
        sys: &System,
        w: &Window,
        d: &Drained,
        verdict: &checker::Verdict,
        j: Judged<W::Body>,
        hydration_sec: f64,
    ) -> Result<CellReport, Ended> {
        let s = self.s();
        let ended = SystemTime::now();
        let times = Times::new(
            self.inv.started,
            ended,
            w.rated_start_us,
            w.edges.rated_sec(),
            s.warmup.0.as_secs_f64(),
            d.seconds,
            hydration_sec,
        );
        let loaders = match self.opts.fleet.as_ref() {
            None => None,
            Some(f) => {
                // Off the runtime: it may run chronyc.
                let clock_end = ClockBound::read_off_runtime().await;
                Some(self.loaders_record(f, Some(w.start_us), clock_end, j.abandoned.clone()))
            }
        };
        let result = CellResult {
            head: CellHead::new(s, j.outcome, &sys.description, times, self.inv.host.clone()),
            body: j.body,
            tail: CellTail {
                loader: j.loader,
                drain: DrainFigures {
                    outcome: d.end.name().into(),
                    seconds: d.seconds,
                    grace_sec: d.grace.as_secs_f64(),
                    max_sec: s.drain.max.0.as_secs_f64(),
                },
                void: VoidFigures {
                    void: !j.void_reasons.is_empty(),
                    reasons: j.void_reasons,
                },
                load: j.load.clone(),
                verdict: verdict.clone(),
                cost: Some(j.cost),
                broker_stats: d.broker_stats.clone(),
                warnings: j.warnings,
                faults: j.faults,
                resources: j.resources,
                loaders,
            },
        };
        let record = write_record(&self.opts.out, &result)?;
        self.close(j.outcome, ended)?;
        // Loader 0 keeps the rendezvous up until every loader is done.
        self.meeting.finish().await;
        let summary = crate::console::summary::render(
            &result.head,
            &result.tail,
            &self.workload.shape(),
            &self.workload.summary(&result),
            &verdict.render_table(),
            &self.opts.out,
        );
        Ok(CellReport {
            outcome: j.outcome,
            load: Some(j.load),
            dir: self.opts.out.clone(),
            summary,
            record,
        })
    }
}
