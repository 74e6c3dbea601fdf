//! The phases after the rated window: drain (until the producers are done and every
//! consumer processed what was acknowledged, or nothing moved for the grace, or the
//! deadline; publishers retry meanwhile) and wind down (what producers still hold is
//! given up, the faults end, the consumers stop, the adapter's counters are read and
//! it is closed).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cell::drain::{abandon_at_deadline, drain, DrainEnd};
use crate::cell::faults::timeline::Reading;
use crate::cell::meeting::Progress;
use crate::cell::phases::{CellRun, Ended, Running, System, Window};
use crate::cell::workload::Workload;
use crate::fleet::rendezvous::Stage;
use crate::measure::phase::Phase;

/// How long the cut-off producers, the held-messages question, the adapter's
/// counters and its close may each take before the cell goes on without them.
const PRODUCERS_FINISH: Duration = Duration::from_secs(30);
const HELD_ANSWER: Duration = Duration::from_secs(15);
const COUNTERS_ANSWER: Duration = Duration::from_secs(30);
const CLOSE_ANSWER: Duration = Duration::from_secs(15);

/// How the drain ended, before the wind-down: what [`CellRun::wind_down`] takes.
pub(crate) struct DrainEnded {
    end: DrainEnd,
    grace: Duration,
    stalled: Option<String>,
    /// The producers' task, which the wind-down waits for.
    finishing: JoinHandle<()>,
    started: Instant,
}

/// How the drain ended, and what the wind-down gathered.
pub(crate) struct Drained {
    pub end: DrainEnd,
    /// From the drain's start to the producers' end.
    pub seconds: f64,
    pub grace: Duration,
    /// Nothing moved, and the system still holds messages: the consumers stalled.
    pub stalled: Option<String>,
    /// What the faults did, and the timeline's readings.
    pub faults: Option<crate::cell::faults::FaultsEnded>,
    pub readings: Vec<Reading>,
    /// The consumers' errors, and the adapter's own counters.
    pub consume_errors: Vec<String>,
    pub broker_stats: BTreeMap<String, u64>,
}

impl<W: Workload> CellRun<'_, W> {
    /// Drain until caught up, the grace or the deadline; after the grace, ask the
    /// system what it still holds before the consumers wind down (closing them gives
    /// back what they hold): messages it holds are not lost, the consumers stalled.
    pub(super) async fn drain(
        &mut self,
        sys: &System,
        run: &Running,
        window: &mut Window,
    ) -> Result<DrainEnded, Ended> {
        let s = self.s();
        run.phase.set(Phase::Drain);
        self.meeting.drain_begins(self.workload.frontier_source());
        let started = Instant::now();
        let max = s.drain.max.0;
        abandon_at_deadline(&run.env.abandon, max, &run.halt, self.opts.interrupt_drain);
        let finishing = {
            let (done, producers) = (
                run.producers_done.clone(),
                std::mem::take(&mut window.producers),
            );
            tokio::spawn(async move {
                for p in producers {
                    p.finish().await;
                }
                done.store(true, Ordering::Release);
            })
        };
        let grace = crate::cell::drain::grace(s.drain.grace.map(|d| d.0), sys.description.lease_ms);
        let (workload, meeting) = (&self.workload, &self.meeting);
        let end = drain(
            started,
            grace,
            max,
            &run.halt,
            self.opts.interrupt_drain,
            || {
                let mine = run.producers_done.load(Ordering::Acquire);
                match meeting.progress() {
                    // Shared: every loader's producers done and every stream caught up
                    // with every key, as the rendezvous merges them.
                    Progress::Global(v) => {
                        mine && v.is_some_and(|v| v.producers_done && v.caught_up)
                    }
                    Progress::Mine => mine && workload.caught_up(),
                }
            },
            || match meeting.progress() {
                Progress::Global(v) => v.map_or(0, |v| v.moved),
                Progress::Mine => workload.deliveries() + (run.tally.published)(),
            },
            || {
                // The system's failed answers: the consumers' and the publishers'.
                let consume: u64 = run
                    .counters
                    .iter()
                    .map(|c| c.receive_errors.get() + c.ack_errors.get() + c.reconnects.get())
                    .sum();
                consume + (run.tally.errors)()
            },
        )
        .await;
        let (end, stalled) = if end == DrainEnd::Grace {
            let held = tokio::time::timeout(HELD_ANSWER, sys.broker.held())
                .await
                .ok()
                .flatten();
            crate::cell::drain::judge_grace(end, held.as_ref(), &sys.description.system)
        } else {
            (end, None)
        };
        if let Some(w) = &stalled {
            self.say.line(w.clone());
        }
        Ok(DrainEnded {
            end,
            grace,
            stalled,
            finishing,
            started,
        })
    }

    /// Give up what producers still hold, end the faults, stop the consumers, read
    /// the adapter's counters and close it.
    pub(super) async fn wind_down(
        &mut self,
        sys: &System,
        run: &mut Running,
        window: &mut Window,
        ended: DrainEnded,
    ) -> Result<Drained, Ended> {
        // Attempts in flight are cut off and counted indeterminate; a deadline all the
        // same, so no adapter can hang the cell here.
        run.env.abandon.cancel();
        match tokio::time::timeout(PRODUCERS_FINISH, ended.finishing).await {
            Ok(r) => r.context("the producers' task")?,
            Err(_) => self.say.line(
                "warning: the producers did not finish 30 s after the drain; left behind".into(),
            ),
        }
        let seconds = ended.started.elapsed().as_secs_f64();
        self.say
            .line(format!("drain: {} after {seconds:.1}s", ended.end.name()));
        // Every fault ends here: the paused are continued, toxics switched off, the
        // killed restarted (each command has its own deadline).
        let faults = match window.faults.take() {
            Some(f) => Some(f.finish().await),
            None => None,
        };
        window.timeline_stop.cancel();
        let readings = match window.timeline.take() {
            Some(t) => t.await.unwrap_or_default(),
            None => Vec::new(),
        };
        // Stop the consumers, close the logs, stop the progress.
        let mut consume_errors = Vec::new();
        if let (Some(consumers), Some(progress)) = (run.consumers.take(), run.progress.take()) {
            consume_errors = crate::cell::consumers::wind_down(
                &run.env.stop,
                consumers,
                &run.logs,
                &run.progress_stop,
                progress,
            )
            .await?;
        }
        let broker_stats = self.broker_stats(sys).await?;
        if tokio::time::timeout(CLOSE_ANSWER, sys.broker.close())
            .await
            .is_err()
        {
            self.say
                .line("warning: closing the adapter took over 15 s; left behind".into());
        }
        if let Some(p) = &sys.proxy {
            p.close();
        }
        self.meeting.set_stage(Stage::Drained);
        Ok(Drained {
            end: ended.end,
            seconds,
            grace: ended.grace,
            stalled: ended.stalled,
            faults,
            readings,
            consume_errors,
            broker_stats,
        })
    }

    /// The adapter's own counters; they may ask the system (a shell-out), so off the
    /// runtime.
    async fn broker_stats(&self, sys: &System) -> anyhow::Result<BTreeMap<String, u64>> {
        let b = sys.broker.clone();
        let read = tokio::task::spawn_blocking(move || b.counters());
        Ok(match tokio::time::timeout(COUNTERS_ANSWER, read).await {
            Ok(r) => r.context("reading the adapter's counters")?,
            Err(_) => {
                self.say.line(
                    "warning: the adapter's counters did not answer in 30 s; none recorded".into(),
                );
                Default::default()
            }
        })
    }
}
