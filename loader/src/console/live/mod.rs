//! Watching a run live: an endpoint in the Prometheus text format
//! (`--metrics-listen ADDR`, or `CROSSBENCH_METRICS_LISTEN`) that serves what the
//! running cell, campaign, ceiling search or gate is doing, for a Prometheus to
//! scrape and a dashboard to draw (compose/grafana/crossbench.json).
//!
//! Its figures are the record's own, read where the record reads them, never kept a
//! second time: the counters are the sums of `report.csv`'s per-second rows (each a
//! difference of the cell's counters, so the sum is the counter), the latency
//! histograms the sums of the per-second histograms the `.hlog` files get, the
//! resources the sampler's latest rows (those `samples.csv` gets). They are updated
//! once a second by the live progress, never on the delivery path: a run without
//! the flag does no more work than before, and a run with it does this once a
//! second.
//!
//! The endpoint is opt-in and global to the process: one per `crossbench`, serving
//! every cell the command runs in turn ([`state::Live`]), on a thread of its own
//! ([`endpoint`]).

pub mod endpoint;
pub mod state;

use std::sync::OnceLock;

pub use endpoint::{listen_address, Endpoint};
pub use state::{Labels, Live};

static LIVE: OnceLock<Live> = OnceLock::new();

/// The live metrics, when an endpoint serves them.
pub fn hub() -> Option<&'static Live> {
    LIVE.get()
}

/// Start serving on `addr` (bound here, before any cell starts: an address in use
/// is an error now, with nothing written). Once per process.
pub fn serve(addr: std::net::SocketAddr) -> anyhow::Result<Endpoint> {
    let live = LIVE.get_or_init(Live::default);
    endpoint::start(addr, live)
}
