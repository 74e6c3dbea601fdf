//! The system under test, as a cell gets it: the adapter the registry builds for the
//! scenario's system, and the topology set up on it (or refused by it).

use std::sync::Arc;

use adapters::{Broker, BuildContext, BuildError};

use crate::record::refused::Refusal;
use crate::scenario::Scenario;

/// Build the adapter of the scenario's system (bad options or a system this build
/// lacks: exit 2 before anything is created).
pub fn build(s: &Scenario, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
    s.options.build(ctx)
}

/// Build the adapter connected to `via` (the harness's proxy) instead of the
/// system's own address.
pub fn build_via(
    s: &Scenario,
    ctx: &BuildContext,
    via: std::net::SocketAddr,
) -> anyhow::Result<Arc<dyn Broker>> {
    let routed = s
        .options
        .routed_to(&via.to_string())
        .map_err(|m| anyhow::anyhow!("proxy: {m}"))?;
    Ok(routed.build(ctx)?)
}

/// How long building the topology may take before the cell gives up.
pub const SETUP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Build the topology on the system. A refusal of the topology is the cell's result,
/// not an error: it comes back as `Ok(Err(refusal))`; any other failure is an error.
pub async fn setup(
    broker: &dyn Broker,
    s: &Scenario,
    topology: &adapters::Topology,
) -> anyhow::Result<Result<adapters::Description, Refusal>> {
    use anyhow::Context;
    // Generous (a topology of a million partitions takes minutes on some systems), but
    // a deadline all the same: no system state can hang a run here.
    let setup = tokio::time::timeout(SETUP_DEADLINE, broker.setup(topology))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "setting up {}: no answer within {} s (is the system up and reachable?)",
                s.system.name(),
                SETUP_DEADLINE.as_secs()
            )
        })?;
    match setup {
        Ok(d) => Ok(Ok(d)),
        Err(adapters::BrokerError::TopologyRefused { what, answer }) => {
            Ok(Err(Refusal { what, answer }))
        }
        Err(e) => {
            Err(anyhow::Error::new(e)).with_context(|| format!("setting up {}", s.system.name()))
        }
    }
}
