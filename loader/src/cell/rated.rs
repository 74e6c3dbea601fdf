//! The rated window, the same in both workloads: wait out the warm-up, note the
//! loader's CPU and whatever the caller counts at the window's start, wait out the
//! window, note them again. Ctrl-C ends the window early; the cell still drains and
//! is verified, over the window as it actually ran.

use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::record::host::process_cpu_seconds;

/// What the rated window's edges measured.
#[derive(Debug, Clone, Copy)]
pub struct RatedEdges {
    /// Ctrl-C ended the warm-up or the window early.
    pub stopped_early: bool,
    /// Loader CPU seconds used inside the window.
    pub cpu_seconds: f64,
    /// Wall seconds of the window as it ran (never 0).
    pub wall_sec: f64,
    /// The window as planned.
    pub planned: Duration,
}

impl RatedEdges {
    /// The window's length for per-second figures: as planned, or as it ran when
    /// stopped early.
    pub fn rated_sec(&self) -> f64 {
        if self.stopped_early {
            self.wall_sec
        } else {
            self.planned.as_secs_f64()
        }
    }

    /// Mean loader cores over the window.
    pub fn loader_cores(&self) -> f64 {
        self.cpu_seconds / self.wall_sec
    }
}

/// Wait until `start + warm`, call `at_rated_start` there (it snapshots the caller's
/// counters and sets its phase), then wait until `start + warm + rated`.
pub async fn run_window(
    start: Instant,
    warm: Duration,
    rated: Duration,
    interrupt: &CancellationToken,
    at_rated_start: impl FnOnce(),
) -> RatedEdges {
    let sleep_until = tokio::time::sleep_until;
    let mut stopped_early = false;
    let mut cpu_at_start = process_cpu_seconds();
    let mut wall_at_start = Instant::now();
    tokio::select! {
        _ = sleep_until(start + warm) => {
            cpu_at_start = process_cpu_seconds();
            wall_at_start = Instant::now();
            at_rated_start();
        }
        _ = interrupt.cancelled() => { stopped_early = true; }
    }
    if !stopped_early {
        tokio::select! {
            _ = sleep_until(start + warm + rated) => {}
            _ = interrupt.cancelled() => { stopped_early = true; }
        }
    }
    RatedEdges {
        stopped_early,
        cpu_seconds: process_cpu_seconds() - cpu_at_start,
        wall_sec: wall_at_start.elapsed().as_secs_f64().max(1e-9),
        planned: rated,
    }
}
