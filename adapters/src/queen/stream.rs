//! One consumer stream (topic, group): what every pop mode shares. Pops decoded into
//! per-partition claims, the in-flight partition guard, the handler call, and the one
//! bulk ack that settles a set of handled claims.
//!
//! Queen leases a whole partition per (partition, group) at pop time, so two pops of
//! one group never hold the same partition at once, as long as the lease lasts. A
//! handler slower than the lease is the exception: the server hands the partition out
//! again. The per-stream in-flight set catches that case (the second claim is given
//! back with `retry` at once) so the stage never sees one key in two handler calls.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use reqwest::Method;
use tokio_util::sync::CancellationToken;

use super::client::{body_error, Client, Failure};
use super::stats::Stats;
use super::wire::{
    is_empty_pop, AckAnswer, AckBatch, AckItem, PopAnswer, PopMessage, COMPLETED, RETRY,
};
use crate::broker::{BatchHandler, Delivery, Disposition, KeyBatch, StreamCounters};

/// More remembered transaction ids than this and the memory is dropped (the flag is
/// informational).
const EXPECT_AGAIN_MAX: usize = 100_000;

/// One partition's share of a pop, in partition (FIFO) order.
#[derive(Debug)]
pub(crate) struct Claim {
    pub partition: String,
    pub lease_id: String,
    pub messages: Vec<PopMessage>,
}

#[derive(Debug)]
pub(crate) struct Stream {
    pub client: Client,
    pub queue: String,
    pub group: String,
    pub batch: usize,
    /// The server commits at pop: no acks.
    pub auto_ack: bool,
    pub attempts: u32,
    pub counters: Arc<StreamCounters>,
    pub handler: Arc<dyn BatchHandler>,
    pub stop: CancellationToken,
    pub stats: Arc<Stats>,
    /// Partitions in a handler call of this stream.
    in_flight: Mutex<HashSet<String>>,
    /// Transaction ids that were refused or whose ack failed: the next delivery of one
    /// is a redelivery (Queen's pop answers carry no redelivery flag).
    expect_again: Mutex<HashSet<String>>,
}

pub(crate) use crate::nap::nap;

/// Split a pop's messages into per-partition claims, keeping the server's order inside
/// each partition (a multi-partition pop answers messages grouped by partition).
pub(crate) fn claims_of(messages: Vec<PopMessage>, lease: Option<&str>) -> Vec<Claim> {
    let mut out: Vec<Claim> = Vec::new();
    for m in messages {
        let lease_id = m
            .lease_id
            .clone()
            .filter(|l| !l.is_empty())
            .or_else(|| lease.map(str::to_string))
            .unwrap_or_default();
        let slot = out.iter_mut().rev().find(|c| c.partition == m.partition);
        match slot {
            Some(c) => c.messages.push(m),
            None => out.push(Claim {
                partition: m.partition.clone(),
                lease_id,
                messages: vec![m],
            }),
        }
    }
    out
}

impl Stream {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        queue: String,
        group: String,
        batch: usize,
        auto_ack: bool,
        attempts: u32,
        counters: Arc<StreamCounters>,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
        stats: Arc<Stats>,
    ) -> Self {
        Stream {
            client,
            queue,
            group,
            batch,
            auto_ack,
            attempts,
            counters,
            handler,
            stop,
            stats,
            in_flight: Mutex::new(HashSet::new()),
            expect_again: Mutex::new(HashSet::new()),
        }
    }

    /// One pop; its claims (empty when there was nothing). Failures are counted here.
    pub async fn pop(&self, path_and_query: &str, wait: Duration) -> Result<Vec<Claim>, Failure> {
        self.stats.pops.inc();
        // Long polls answer ~150 ms after their timeout when nothing comes.
        let extra = if wait.is_zero() {
            Duration::ZERO
        } else {
            wait + Duration::from_secs(1)
        };
        let r: Result<PopAnswer, Failure> = self
            .client
            .call("pop", Method::GET, path_and_query, None, extra)
            .await;
        let answer = match r {
            Ok(a) => a,
            Err(f) => {
                self.failed_pop(&f);
                return Err(f);
            }
        };
        if answer.success == Some(false) || answer.error.is_some() {
            let e = answer.error.unwrap_or_default();
            if is_empty_pop(&e) || (e.is_empty() && answer.messages.is_empty()) {
                self.stats.empty_pops.inc();
                return Ok(Vec::new());
            }
            let f = body_error("pop", &e);
            self.failed_pop(&f);
            return Err(f);
        }
        if answer.messages.is_empty() {
            self.stats.empty_pops.inc();
            return Ok(Vec::new());
        }
        self.stats.messages_popped.add(answer.messages.len() as u64);
        let claims = claims_of(answer.messages, answer.lease_id.as_deref());
        self.stats.partitions_claimed.add(claims.len() as u64);
        Ok(claims)
    }

    fn failed_pop(&self, f: &Failure) {
        self.counters.receive_errors.inc();
        self.stats.error("pop", &f.error);
    }

    /// Take `partition` for a handler call; false when this stream already has it in one.
    pub fn try_claim(&self, partition: &str) -> bool {
        let fresh = self.in_flight.lock().insert(partition.to_string());
        if !fresh {
            self.stats.skipped_in_flight.inc();
        }
        fresh
    }

    pub fn is_in_flight(&self, partition: &str) -> bool {
        self.in_flight.lock().contains(partition)
    }

    /// Hand one claimed partition batch to the stage.
    pub async fn run(&self, claim: Claim) -> (Claim, Disposition) {
        let mut redelivered = 0u64;
        let messages: Vec<Delivery> = {
            let mut again = self.expect_again.lock();
            claim
                .messages
                .iter()
                .map(|m| {
                    let r = !again.is_empty() && again.remove(&m.transaction_id);
                    redelivered += u64::from(r);
                    Delivery {
                        payload: Bytes::copy_from_slice(m.data.get().as_bytes()),
                        redelivered: r,
                    }
                })
                .collect()
        };
        if redelivered > 0 {
            self.counters.redelivered.add(redelivered);
            self.stats.redelivered.add(redelivered);
        }
        let batch = KeyBatch {
            key: Arc::from(claim.partition.as_str()),
            messages,
        };
        let d = self.handler.handle(batch).await;
        (claim, d)
    }

    fn remember(&self, ids: impl Iterator<Item = String>) {
        let mut again = self.expect_again.lock();
        if again.len() > EXPECT_AGAIN_MAX {
            again.clear();
        }
        again.extend(ids);
    }

    /// Give claims back without handling them: their first message acked `retry`
    /// releases the partition's lease and the whole batch comes back at once.
    pub async fn release(&self, claims: Vec<Claim>) {
        if claims.is_empty() {
            return;
        }
        if self.auto_ack {
            // Already committed by the server: nothing to give back; they are lost to
            // this group (auto-ack runs one pop loop per stream, so this is only the
            // stop path).
            let n: u64 = claims.iter().map(|c| c.messages.len() as u64).sum();
            self.stats.auto_ack_refused_lost.add(n);
            return;
        }
        let items: Vec<AckItem> = claims.iter().filter_map(|c| self.retry_item(c)).collect();
        self.stats.released_batches.add(items.len() as u64);
        self.remember(
            claims
                .iter()
                .flat_map(|c| c.messages.iter().map(|m| m.transaction_id.clone())),
        );
        let _ = self.ack(&items).await;
    }

    fn retry_item(&self, c: &Claim) -> Option<AckItem> {
        c.messages.first().map(|m| AckItem {
            transaction_id: m.transaction_id.clone(),
            partition_id: m.partition_id.clone(),
            lease_id: c.lease_id.clone(),
            status: RETRY,
            consumer_group: self.group.clone(),
        })
    }

    /// Settle handled claims with one bulk ack: every message of an accepted batch
    /// `completed`, the first message of a refused batch `retry`. The partitions leave
    /// the in-flight set first: their leases are still held until the ack lands, so no
    /// other pop can take them in between.
    pub async fn settle(&self, done: Vec<(Claim, Disposition)>) {
        {
            let mut held = self.in_flight.lock();
            for (c, _) in &done {
                held.remove(&c.partition);
            }
        }
        let mut items: Vec<AckItem> = Vec::new();
        let mut completed = 0u64;
        for (c, d) in &done {
            let n = c.messages.len() as u64;
            match (d, self.auto_ack) {
                (Disposition::Ack, true) => {
                    self.counters.acked.add(n);
                    self.stats.acked.add(n);
                }
                (Disposition::Refuse, true) => {
                    self.counters.refused.add(n);
                    self.stats.refused_messages.add(n);
                    self.stats.auto_ack_refused_lost.add(n);
                }
                (Disposition::Ack, false) => {
                    completed += n;
                    items.extend(c.messages.iter().map(|m| AckItem {
                        transaction_id: m.transaction_id.clone(),
                        partition_id: m.partition_id.clone(),
                        lease_id: c.lease_id.clone(),
                        status: COMPLETED,
                        consumer_group: self.group.clone(),
                    }));
                }
                (Disposition::Refuse, false) => {
                    self.counters.refused.add(n);
                    self.stats.refused_messages.add(n);
                    self.stats.released_batches.inc();
                    self.remember(c.messages.iter().map(|m| m.transaction_id.clone()));
                    items.extend(self.retry_item(c));
                }
            }
        }
        if items.is_empty() {
            return;
        }
        match self.ack(&items).await {
            Some(results) => {
                let mut ok = 0u64;
                let mut lost: Vec<String> = Vec::new();
                for (item, success) in items.iter().zip(results) {
                    if item.status != COMPLETED {
                        continue;
                    }
                    if success {
                        ok += 1;
                    } else {
                        lost.push(item.transaction_id.clone());
                    }
                }
                self.counters.acked.add(ok);
                self.stats.acked.add(ok);
                if !lost.is_empty() {
                    self.counters.ack_errors.add(lost.len() as u64);
                    self.stats.ack_errors.add(lost.len() as u64);
                    self.remember(lost.into_iter());
                }
            }
            None => {
                self.counters.ack_errors.add(completed);
                self.stats.ack_errors.add(completed);
                self.remember(
                    items
                        .iter()
                        .filter(|i| i.status == COMPLETED)
                        .map(|i| i.transaction_id.clone()),
                );
            }
        }
    }

    /// One `ack/batch` request (retried on network errors and 5xx); per-item success,
    /// or None when the request itself failed. A failed ack never loses anything: the
    /// lease expires and the batch comes back.
    async fn ack(&self, items: &[AckItem]) -> Option<Vec<bool>> {
        if items.is_empty() {
            return Some(Vec::new());
        }
        let body = serde_json::to_vec(&AckBatch {
            consumer_group: &self.group,
            acknowledgments: items,
        })
        .expect("ack body serialises");
        self.stats.ack_requests.inc();
        let stats = &self.stats;
        let r: Result<AckAnswer, Failure> = self
            .client
            .call_retrying(
                "ack",
                Method::POST,
                "/api/v1/ack/batch",
                body,
                self.attempts,
                |e, again| {
                    stats.error("ack", e);
                    if again {
                        stats.ack_retries.inc();
                    }
                },
            )
            .await;
        let results = match r {
            Ok(AckAnswer::Items(v)) | Ok(AckAnswer::Wrapped { data: v }) => v,
            Ok(AckAnswer::Error(e)) => {
                self.stats.error("ack", &body_error("ack", &e.error).error);
                return None;
            }
            Err(_) => return None,
        };
        if results.len() != items.len() {
            let f = body_error(
                "ack",
                &format!("{} results for {} acks", results.len(), items.len()),
            );
            self.stats.error("ack", &f.error);
            return None;
        }
        Some(
            results
                .into_iter()
                .map(|r| {
                    let ok = r.success && r.error.is_none();
                    if !ok {
                        let e = body_error("ack", r.error.as_deref().unwrap_or("success:false"));
                        self.stats.error("ack", &e.error);
                    }
                    ok
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(p: &str, tx: &str) -> PopMessage {
        serde_json::from_str(&format!(
            r#"{{"transactionId":"{tx}","partitionId":"id-{p}","partition":"{p}","leaseId":"L","data":{{}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn claims_keep_partition_order() {
        let c = claims_of(
            vec![msg("a", "1"), msg("a", "2"), msg("b", "3"), msg("a", "4")],
            Some("L"),
        );
        assert_eq!(c.len(), 2);
        let a: Vec<&str> = c[0]
            .messages
            .iter()
            .map(|m| m.transaction_id.as_str())
            .collect();
        assert_eq!(a, ["1", "2", "4"]);
        assert_eq!(c[1].partition, "b");
        assert_eq!(c[0].lease_id, "L");
    }
}
