//! A cell's consumers, the same in every workload: one `consume` task per consumer
//! stream, started after setup and stopped (with their stream logs and the live
//! progress) at the end. What went wrong on the way is returned as warnings for the
//! record, never dropped.

use std::sync::Arc;

use adapters::{BatchHandler, Broker, ConsumeOptions, StreamCounters};
use anyhow::{Context, Result};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::cell::workload::ConsumerSpec;
use crate::record::stream_log::StreamLogs;

/// Start one `consume` task per consumer stream, each with its handler and counters.
pub fn start(
    broker: &Arc<dyn Broker>,
    specs: &[ConsumerSpec],
    handlers: Vec<Arc<dyn BatchHandler>>,
    counters: &[Arc<StreamCounters>],
    stop: &CancellationToken,
) -> JoinSet<ConsumerEnd> {
    let mut consumers = JoinSet::new();
    for ((spec, h), c) in specs.iter().zip(handlers).zip(counters) {
        let options = ConsumeOptions {
            batch: spec.batch,
            lanes: spec.lanes,
            counters: c.clone(),
        };
        let b = broker.clone();
        let (topic, group) = (spec.topic.clone(), spec.group.clone());
        let stop = stop.clone();
        consumers.spawn(async move {
            let r = b.consume(&topic, &group, options, h, stop).await;
            (format!("{topic}_{group}"), r)
        });
    }
    consumers
}

/// One consumer task's end: the stream's name and how `consume` returned.
pub type ConsumerEnd = (String, Result<(), adapters::BrokerError>);

/// Stop `consumers` (through `stage_stop`), close `logs`, stop the live progress.
/// Returns the consumers' and the progress's errors, one line each.
/// How long the consumers get to stop once told to.
pub const WIND_DOWN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

pub async fn wind_down(
    stage_stop: &CancellationToken,
    mut consumers: JoinSet<ConsumerEnd>,
    logs: &StreamLogs,
    report_stop: &CancellationToken,
    reporter: JoinHandle<std::io::Result<()>>,
) -> Result<Vec<String>> {
    stage_stop.cancel();
    let mut errors = Vec::new();
    // A consumer stuck in its adapter (a receive that ignores cancellation on a hung
    // connection) must not hang the cell: after the deadline the rest are aborted and
    // named in the errors; their logs hold what they wrote.
    let deadline = tokio::time::Instant::now() + WIND_DOWN_DEADLINE;
    loop {
        match tokio::time::timeout_at(deadline, consumers.join_next()).await {
            Ok(None) => break,
            Ok(Some(Ok((_, Ok(()))))) => {}
            Ok(Some(Ok((name, Err(e))))) => errors.push(format!("{name}: {e}")),
            Ok(Some(Err(e))) => errors.push(format!("consumer task: {e}")),
            Err(_) => {
                errors.push(format!(
                    "{} consumer(s) still running {}s after the stop; aborted",
                    consumers.len(),
                    WIND_DOWN_DEADLINE.as_secs()
                ));
                consumers.abort_all();
                while consumers.join_next().await.is_some() {}
                break;
            }
        }
    }
    logs.close().await.context("closing the stream logs")?;
    report_stop.cancel();
    if let Ok(Err(e)) = reporter.await {
        errors.push(format!("live progress: {e}"));
    }
    Ok(errors)
}
