//! `--metrics-listen`, shared by `run`, `campaign`, `ceiling` and `gate`: the live
//! metrics endpoint ([`crate::console::live`]) started before anything runs.

use crate::console::live::{listen_address, serve, Endpoint};

/// `--metrics-listen`, shared by `run`, `campaign`, `ceiling` and `gate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LiveArgs {
    /// Serve live metrics in the Prometheus text format on this address
    /// (`HOST:PORT`, or `PORT` for 127.0.0.1:PORT; `0.0.0.0:PORT` to be scraped from
    /// other hosts) at /metrics while the command runs (docs/live.md).
    #[arg(long, value_name = "ADDR", env = "CROSSBENCH_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
}

impl LiveArgs {
    /// Start the endpoint if asked: a bad address is bad input (exit 2) naming the
    /// flag; an address that cannot be bound is an error before anything runs.
    pub fn start(&self) -> anyhow::Result<Option<Endpoint>> {
        let Some(a) = &self.metrics_listen else {
            return Ok(None);
        };
        let addr = listen_address(a).map_err(super::BadInput)?;
        let e = serve(addr)?;
        eprintln!("live metrics: http://{}/metrics", e.addr);
        Ok(Some(e))
    }
}
