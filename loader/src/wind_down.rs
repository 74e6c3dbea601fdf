//! The end of a cell's traffic, the same in both workloads: stop the consumers and
//! wait for them, close their stream logs, stop the reporter. What went wrong on the
//! way is returned as warnings for the record, never dropped.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::streamlog::StreamLog;

/// One consumer task's end: the stream's name and how `consume` returned.
pub type ConsumerEnd = (String, Result<(), adapters::BrokerError>);

/// Stop `consumers` (through `stage_stop`), close `logs`, stop the reporter.
/// Returns the consumers' and the reporter's errors, one line each.
pub async fn wind_down(
    stage_stop: &CancellationToken,
    mut consumers: JoinSet<ConsumerEnd>,
    logs: &[Arc<StreamLog>],
    report_stop: &CancellationToken,
    reporter: JoinHandle<std::io::Result<()>>,
) -> Result<Vec<String>> {
    stage_stop.cancel();
    let mut errors = Vec::new();
    while let Some(r) = consumers.join_next().await {
        match r {
            Ok((_, Ok(()))) => {}
            Ok((name, Err(e))) => errors.push(format!("{name}: {e}")),
            Err(e) => errors.push(format!("consumer task: {e}")),
        }
    }
    for l in logs {
        l.close()
            .with_context(|| format!("closing {}", l.path().display()))?;
    }
    report_stop.cancel();
    if let Ok(Err(e)) = reporter.await {
        errors.push(format!("reporter: {e}"));
    }
    Ok(errors)
}
