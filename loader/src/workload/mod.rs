//! The workloads crossbench drives through the cell lifecycle ([`crate::cell`]): the
//! channel-manager [`pipeline`] and the [`stream`] workload, and the [`stamp`] every
//! message of both carries; and the [`runner`] every command runs its cells with (the
//! run lock, the runtime, the signals, the exit codes).

pub mod pipeline;
pub mod runner;
pub mod stamp;
pub mod stream;

use adapters::BuildContext;
use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::cell::{CellReport, RunOptions};
use crate::scenario::{Loaded, Scenario, WorkloadKind};

/// How the scenario's workload drives the adapter (partitions per pop).
pub fn build_context(s: &Scenario) -> BuildContext {
    BuildContext {
        pop_partitions: match s.workload {
            WorkloadKind::Pipeline => 1,
            WorkloadKind::Stream => s.stream.as_ref().map_or(1, |st| st.consume.pop_partitions),
        },
        clients: 1,
    }
}

/// Run one cell of the scenario's workload. `ladder` is the ladder a stream cell
/// belongs to (for its record; empty otherwise). Commands call it through
/// [`runner::Runner::run`].
pub async fn run_cell(
    loaded: &Loaded,
    opts: &RunOptions,
    ladder: &[u64],
    interrupt: &CancellationToken,
) -> Result<CellReport> {
    let s = &loaded.scenario;
    match s.workload {
        WorkloadKind::Pipeline => {
            let share = opts
                .fleet
                .as_ref()
                .map_or(crate::fleet::Share::WHOLE, |f| f.share);
            let p = pipeline::Pipeline::new(s).with_share(share);
            crate::cell::run(p, loaded, opts, interrupt).await
        }
        WorkloadKind::Stream => {
            crate::cell::run(stream::Stream::new(s, ladder)?, loaded, opts, interrupt).await
        }
    }
}
