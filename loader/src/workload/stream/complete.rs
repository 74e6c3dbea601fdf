//! The completed space (`stream.partitions.complete: true`): before the warm-up,
//! every partition of the space gets one message (seq 1) and every group drains it,
//! so the rated window runs on a space that already exists in full, none of it
//! created inside the window. This is seed 001's `Q1M-completed` shape, scaled: its
//! question is whether the serve path cares how many partitions exist, which a space
//! still being created cannot answer.
//!
//! The completing messages are checked like any other (they are seq 1 of their
//! partition in `produced.meta`, and the pacer starts every partition at seq 2), but
//! they are no part of the offered load: no flow counter, no rated figure counts them,
//! and their stamps fall before the warm-up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use adapters::{Broker, Counter};
use anyhow::Context as _;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::measure::clock::Clock;
use crate::pacing::retry::publish_until;
use crate::workload::stamp::key_of;
use crate::workload::stream::ledger::Ledger;
use crate::workload::stream::payload::Body;

/// The seq the pacer starts every partition at after a completed space.
pub const AFTER_COMPLETION: u32 = 2;

/// How long one completing publish may be retried.
const PUBLISH_DEADLINE: Duration = Duration::from_secs(30);

/// How often the console hears how far the completion has got.
const SAY_EVERY: Duration = Duration::from_secs(5);

/// What completing the space needs.
pub(crate) struct Completion<'a> {
    pub broker: Arc<dyn Broker>,
    pub topic: String,
    pub body: Body,
    pub ledger: Arc<Ledger>,
    pub clock: Clock,
    pub space: u64,
    /// Publishes in flight at once.
    pub concurrency: u64,
    /// How long the groups may take to drain it, once published.
    pub drain_max: Duration,
    pub interrupt: &'a CancellationToken,
    pub say: &'a (dyn Fn(String) + Sync),
}

impl Completion<'_> {
    /// Publish seq 1 to every partition, then wait until every group has consumed
    /// it; the seconds it took. An error (a publish given up, a drain past its
    /// limit, a signal) ends the cell: a window on a half-completed space would
    /// answer another question.
    pub async fn run(self) -> anyhow::Result<f64> {
        let started = Instant::now();
        (self.say)(format!(
            "completing the space: one message to each of {} partitions, drained by every group before the warm-up",
            self.space
        ));
        self.publish_all().await?;
        (self.say)(format!(
            "completing the space: {} partitions published in {:.1} s; draining",
            self.space,
            started.elapsed().as_secs_f64()
        ));
        self.drain().await?;
        let secs = started.elapsed().as_secs_f64();
        (self.say)(format!(
            "completing the space: {} partitions created and drained in {secs:.1} s",
            self.space
        ));
        Ok(secs)
    }

    async fn publish_all(&self) -> anyhow::Result<()> {
        let next = Arc::new(AtomicU64::new(0));
        let abandon = self.interrupt.child_token();
        let mut tasks = JoinSet::new();
        for _ in 0..self.concurrency.clamp(1, self.space.max(1)) {
            let (next, broker, topic) = (next.clone(), self.broker.clone(), self.topic.clone());
            let (body, ledger, clock, space) = (
                self.body.clone(),
                self.ledger.clone(),
                self.clock,
                self.space,
            );
            let abandon = abandon.clone();
            tasks.spawn(async move {
                let retries = Counter::default();
                loop {
                    let p = next.fetch_add(1, Ordering::Relaxed);
                    if p >= space {
                        return Ok(());
                    }
                    let payload = [body.encode(p, 1, clock.now_us())];
                    let deadline = Instant::now() + PUBLISH_DEADLINE;
                    let mut last = String::new();
                    publish_until(
                        broker.as_ref(),
                        &topic,
                        &key_of(p),
                        &payload,
                        deadline,
                        &abandon,
                        &retries,
                        |e| last = e.to_string(),
                    )
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "completing the space: partition {p}'s message was not accepted within {} s ({})",
                            PUBLISH_DEADLINE.as_secs(),
                            if last.is_empty() { "stopped" } else { last.as_str() }
                        )
                    })?;
                    ledger.acked.raise(p, 1);
                    ledger.created.mark(p);
                }
            });
        }
        let mut first_error = None;
        while let Some(r) = tasks.join_next().await {
            let r = r.context("a completing task")?;
            if let Err(e) = r {
                abandon.cancel();
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn drain(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut said = Instant::now();
        while !self.ledger.caught_up() {
            if self.interrupt.is_cancelled() {
                anyhow::bail!("completing the space: stopped by a signal before the warm-up");
            }
            if started.elapsed() > self.drain_max {
                anyhow::bail!(
                    "completing the space: the groups had not consumed every partition's message {} s after it was published (drain.max); raise drain.max or lower stream.partitions.space",
                    self.drain_max.as_secs()
                );
            }
            if said.elapsed() >= SAY_EVERY {
                said = Instant::now();
                (self.say)(format!(
                    "completing the space: draining ({:.0} s)",
                    started.elapsed().as_secs_f64()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}
