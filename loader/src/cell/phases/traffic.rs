//! The phases that load the system: hydrate (the workload's work before paced
//! traffic) and pace (a warm-up, then the rated window, from the start instant the
//! [`crate::cell::meeting::Meeting`] gives; the faults, timed from the rated
//! window's start, and the 100 ms timeline that measures what they did).

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cell::faults::timeline::Reading;
use crate::cell::faults::Faults;
use crate::cell::phases::{CellRun, Ended, Running, System};
use crate::cell::rated::RatedEdges;
use crate::cell::workload::{Traffic, Workload};
use crate::measure::phase::Phase;
use crate::pacing::pacer::Paced;

/// The paced traffic, once its rated window has ended.
pub(crate) struct Window {
    /// When traffic started and the rated window started, µs on the cell's clock.
    pub start_us: i64,
    pub rated_start_us: i64,
    pub edges: RatedEdges,
    /// Deliveries made while the window ran (whenever their unit was scheduled).
    pub deliveries_in_window: u64,
    /// The producers (taken by the drain, which waits for them to finish).
    pub producers: Vec<Paced>,
    /// The faults still running, and the timeline (taken when the drain ends).
    pub faults: Option<Faults>,
    pub timeline: Option<JoinHandle<Vec<Reading>>>,
    pub timeline_stop: CancellationToken,
}

impl<W: Workload> CellRun<'_, W> {
    /// The workload's work before paced traffic; its duration in seconds.
    pub(super) async fn hydrate(&mut self, run: &Running) -> Result<f64, Ended> {
        let say = self.say_fn();
        let prepared = self.workload.prepare(&run.env, &run.halt, &say).await;
        self.or_abandon("hydration", prepared).await
    }

    /// Pace a warm-up and the rated window, with the faults and their timeline.
    pub(super) async fn pace(&mut self, sys: &System, run: &Running) -> Result<Window, Ended> {
        let s = self.s();
        let started = self
            .meeting
            .start_at(self.clock, run.env.fleet.as_ref(), &self.say_fn())
            .await;
        let (start, start_us) = self.barrier(started).await?;
        let (warm, rated) = (s.warmup.0, s.duration.0);
        let rated_start_us = start_us + warm.as_micros() as i64;
        run.env
            .window
            .set(rated_start_us, rated_start_us + rated.as_micros() as i64);
        let producers = self.workload.start_traffic(
            &run.env,
            Traffic {
                start,
                start_us,
                run_for: warm + rated,
            },
        );
        run.phase.set(Phase::Warmup);
        let faults = (!s.faults.is_empty() || sys.proxy.is_some()).then(|| {
            Faults::start(
                s,
                sys.proxy.clone(),
                Some(sys.broker.clone()),
                Some(run.tally.clone()),
                self.clock,
                start + warm,
            )
        });
        let timeline_stop = CancellationToken::new();
        let timeline = (!s.faults.is_empty()).then(|| {
            crate::cell::faults::timeline::record(
                run.tally.clone(),
                self.clock,
                timeline_stop.clone(),
            )
        });
        let workload = &self.workload;
        let mut deliveries_at_start = 0;
        let edges = crate::cell::rated::run_window(start, warm, rated, &run.halt, || {
            deliveries_at_start = workload.deliveries();
            workload.at_rated_start();
            run.phase.set(Phase::Rated);
        })
        .await;
        // Every delivery made while the window ran (whenever its unit was
        // scheduled): what the loader's CPU in the window was spent on.
        let deliveries_in_window = workload.deliveries().saturating_sub(deliveries_at_start);
        workload.at_rated_end();
        if edges.stopped_early {
            self.say.line(
                "interrupted: stopping the producers; drain and verification still run".into(),
            );
            for p in &producers {
                p.stop_early();
            }
        }
        Ok(Window {
            start_us,
            rated_start_us,
            edges,
            deliveries_in_window,
            producers,
            faults,
            timeline,
            timeline_stop,
        })
    }
}
