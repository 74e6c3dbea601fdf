//! What a consumer group processed, as the contract tests check it: a batch handler
//! that records every delivery per key, notices a key in two handler calls at once,
//! can refuse one batch and can be slow on one key; plus starting and stopping the
//! groups' consumers and publishing `{"k":…,"seq":…}` payloads.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::{
    BatchHandler, Broker, BrokerError, ConsumeOptions, Disposition, Durability, KeyBatch,
    StreamCounters, TopicSpec, Topology,
};
use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// The payload of message `seq` of key `key` (JSON: pgmq and Queen store JSON).
pub fn payload(key: &str, seq: u64) -> Bytes {
    Bytes::from(format!(r#"{{"k":"{key}","seq":{seq}}}"#))
}

/// (key, seq) of a [`payload`].
pub fn parse(p: &[u8]) -> (String, u64) {
    let v: serde_json::Value = serde_json::from_slice(p).expect("json payload");
    (
        v["k"].as_str().expect("a key").to_string(),
        v["seq"].as_u64().expect("a seq"),
    )
}

/// Key names `p0..p{n}`, as the workload names its properties.
pub fn keys(n: u64) -> Vec<String> {
    (0..n).map(|k| format!("p{k}")).collect()
}

/// One topic read by `groups`, reset at setup.
pub fn topology(topic: &str, groups: &[&str], keys: u64, lanes: u64) -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: topic.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }],
        keys,
        lanes,
        durability: Durability::Default,
        dedup_window_sec: 0,
        reset: true,
    }
}

/// Records what one group processed. Keys are the payloads' keys (a batch's own key
/// may be a lane holding several of them).
pub struct Recorder {
    pub group: String,
    /// Per key, each processed seq in order with its redelivered flag.
    seen: Mutex<HashMap<String, Vec<(u64, bool)>>>,
    in_flight: Mutex<HashSet<Arc<str>>>,
    overlaps: AtomicU64,
    processed: AtomicU64,
    redelivered_seen: AtomicU64,
    refuse_once: Mutex<Option<(String, u64)>>,
    refused: Mutex<Vec<(String, u64)>>,
    refused_batches: AtomicU64,
    refused_at: Mutex<Option<Instant>>,
    redelivered_at: Mutex<Option<Instant>>,
    done_at: Mutex<HashMap<String, Instant>>,
    /// Sleep per handler call, so keys overlap in time.
    work: Duration,
    /// Sleep per message of this key instead (the slow key).
    slow: Option<(String, Duration)>,
    /// Handler calls that may work at once, like a stage's lane budget; the others
    /// wait for a turn while their batch stays claimed.
    budget: Option<Arc<tokio::sync::Semaphore>>,
}

impl Recorder {
    pub fn new(group: &str) -> Self {
        Recorder {
            group: group.into(),
            seen: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashSet::new()),
            overlaps: AtomicU64::new(0),
            processed: AtomicU64::new(0),
            redelivered_seen: AtomicU64::new(0),
            refuse_once: Mutex::new(None),
            refused: Mutex::new(Vec::new()),
            refused_batches: AtomicU64::new(0),
            refused_at: Mutex::new(None),
            redelivered_at: Mutex::new(None),
            done_at: Mutex::new(HashMap::new()),
            work: Duration::from_millis(2),
            slow: None,
            budget: None,
        }
    }

    /// Refuse, once, the first batch that holds (key, seq).
    pub fn refusing(self, refuse: Option<(String, u64)>) -> Self {
        *self.refuse_once.lock() = refuse;
        self
    }

    /// Sleep `per_message` for every message of `key`.
    pub fn slow_key(mut self, key: &str, per_message: Duration) -> Self {
        self.slow = Some((key.into(), per_message));
        self
    }

    pub fn work(mut self, per_call: Duration) -> Self {
        self.work = per_call;
        self
    }

    /// At most `calls` handler calls work at once.
    pub fn budget(mut self, calls: usize) -> Self {
        self.budget = Some(Arc::new(tokio::sync::Semaphore::new(calls)));
        self
    }

    pub fn arc(self) -> Arc<Self> {
        Arc::new(self)
    }

    /// Messages processed (refused batches not counted).
    pub fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }

    /// Handler calls that found their key already in another call.
    pub fn overlaps(&self) -> u64 {
        self.overlaps.load(Ordering::Relaxed)
    }

    /// Deliveries flagged redelivered, refused batches included.
    pub fn redelivered_seen(&self) -> u64 {
        self.redelivered_seen.load(Ordering::Relaxed)
    }

    pub fn refused_batches(&self) -> u64 {
        self.refused_batches.load(Ordering::Relaxed)
    }

    /// (key, seq) of every message in the refused batch.
    pub fn refused(&self) -> Vec<(String, u64)> {
        self.refused.lock().clone()
    }

    /// When the batch was refused, and when the refused (key, seq) first came back
    /// flagged redelivered.
    pub fn refused_then_back(&self) -> (Option<Instant>, Option<Instant>) {
        (*self.refused_at.lock(), *self.redelivered_at.lock())
    }

    /// Keys processed at least once.
    pub fn keys_seen(&self) -> Vec<String> {
        let mut k: Vec<String> = self.seen.lock().keys().cloned().collect();
        k.sort();
        k
    }

    /// The seqs of `key` in processing order.
    pub fn seqs(&self, key: &str) -> Vec<u64> {
        self.deliveries(key).into_iter().map(|(s, _)| s).collect()
    }

    /// The seqs of `key` in processing order, with their redelivered flags.
    pub fn deliveries(&self, key: &str) -> Vec<(u64, bool)> {
        self.seen.lock().get(key).cloned().unwrap_or_default()
    }

    /// When the last message of `key` was processed.
    pub fn done_at(&self, key: &str) -> Option<Instant> {
        self.done_at.lock().get(key).copied()
    }

    /// Every key has seqs `0..per_key` in order, for `keys` keys; the message names
    /// the first key that does not (and `context`).
    pub fn assert_in_order(&self, keys: &[String], per_key: u64, context: &str) {
        assert_eq!(
            self.overlaps(),
            0,
            "{}: a key was in two handler calls at once",
            self.group
        );
        assert_eq!(
            self.keys_seen(),
            sorted(keys),
            "{}: keys seen; {context}",
            self.group
        );
        let expect: Vec<u64> = (0..per_key).collect();
        for k in keys {
            assert_eq!(
                self.seqs(k),
                expect,
                "{} key {k}: processed order; {context}",
                self.group
            );
        }
    }

    /// Wait until `want` messages were processed, at most `limit`.
    pub async fn wait_for(&self, want: u64, limit: Duration) {
        wait_all(std::slice::from_ref(self), want, limit).await;
    }
}

fn sorted(keys: &[String]) -> Vec<String> {
    let mut k = keys.to_vec();
    k.sort();
    k
}

/// Wait until every recorder processed `want` messages, at most `limit`.
pub async fn wait_all<R: std::borrow::Borrow<Recorder>>(recs: &[R], want: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while recs.iter().any(|r| r.borrow().processed() < want) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[async_trait]
impl BatchHandler for Recorder {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        if !self.in_flight.lock().insert(batch.key.clone()) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        let msgs: Vec<(String, u64, bool)> = batch
            .messages
            .iter()
            .map(|m| {
                let (k, s) = parse(&m.payload);
                (k, s, m.redelivered)
            })
            .collect();
        let again = msgs.iter().filter(|m| m.2).count() as u64;
        self.redelivered_seen.fetch_add(again, Ordering::Relaxed);
        let pause = match &self.slow {
            Some((key, d)) if msgs.iter().any(|m| m.0 == *key) => *d * msgs.len() as u32,
            _ => self.work,
        };
        {
            let _turn = match &self.budget {
                Some(b) => Some(b.acquire().await.expect("budget open")),
                None => None,
            };
            tokio::time::sleep(pause).await;
        }
        let refuse = {
            let mut r = self.refuse_once.lock();
            match &*r {
                Some((k, s)) if msgs.iter().any(|m| m.0 == *k && m.1 == *s) => {
                    *r = None;
                    true
                }
                _ => false,
            }
        };
        if refuse {
            *self.refused.lock() = msgs.iter().map(|m| (m.0.clone(), m.1)).collect();
            *self.refused_at.lock() = Some(Instant::now());
            self.refused_batches.fetch_add(1, Ordering::Relaxed);
            self.in_flight.lock().remove(&batch.key);
            return Disposition::Refuse;
        }
        let now = Instant::now();
        {
            let refused = self.refused.lock();
            let mut back = self.redelivered_at.lock();
            if back.is_none()
                && msgs
                    .iter()
                    .any(|m| m.2 && refused.iter().any(|r| r.0 == m.0 && r.1 == m.1))
            {
                *back = Some(now);
            }
        }
        {
            let mut seen = self.seen.lock();
            let mut done = self.done_at.lock();
            for (k, s, again) in &msgs {
                seen.entry(k.clone()).or_default().push((*s, *again));
                done.insert(k.clone(), now);
            }
        }
        self.processed
            .fetch_add(msgs.len() as u64, Ordering::Relaxed);
        self.in_flight.lock().remove(&batch.key);
        Disposition::Ack
    }
}

/// The consumers of some groups of one topic, one per recorder.
pub struct Consumers {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<Result<(), BrokerError>>>,
    pub counters: Vec<Arc<StreamCounters>>,
}

impl Consumers {
    /// Start one consumer per recorder (its group), pops of `batch`, `lanes` lanes.
    pub fn start<B: Broker + ?Sized + 'static>(
        broker: &Arc<B>,
        topic: &str,
        recs: &[Arc<Recorder>],
        batch: usize,
        lanes: usize,
    ) -> Consumers {
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut counters = Vec::new();
        for rec in recs {
            let cnt = Arc::new(StreamCounters::default());
            counters.push(cnt.clone());
            let b = broker.clone();
            let h: Arc<dyn BatchHandler> = rec.clone();
            let opts = ConsumeOptions {
                batch,
                lanes,
                counters: cnt,
            };
            let (t, g, s) = (topic.to_string(), rec.group.clone(), stop.clone());
            tasks.push(tokio::spawn(
                async move { b.consume(&t, &g, opts, h, s).await },
            ));
        }
        Consumers {
            stop,
            tasks,
            counters,
        }
    }

    /// Stop the consumers; each must end cleanly within 60 s.
    pub async fn finish(self) -> Vec<Arc<StreamCounters>> {
        self.stop.cancel();
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("consumers stop")
                .unwrap()
                .expect("consume ends cleanly");
        }
        self.counters
    }
}

/// Publish seqs `seqs` of every key, each key from its own task, in order; every
/// fourth call carries 3 payloads.
pub async fn publish_concurrently<B: Broker + ?Sized + 'static>(
    broker: &Arc<B>,
    topic: &str,
    keys: &[String],
    seqs: Range<u64>,
) {
    let mut pubs = Vec::new();
    for key in keys {
        let (b, t, key, to) = (broker.clone(), topic.to_string(), key.clone(), seqs.end);
        let mut seq = seqs.start;
        pubs.push(tokio::spawn(async move {
            while seq < to {
                let n = if seq.is_multiple_of(4) {
                    3.min(to - seq)
                } else {
                    1
                };
                let ps: Vec<Bytes> = (seq..seq + n).map(|s| payload(&key, s)).collect();
                b.publish(&t, &key, &ps).await.expect("publish");
                seq += n;
            }
        }));
    }
    for p in pubs {
        p.await.unwrap();
    }
}

/// Publish seqs `seqs` of every key from one task, `per_call` payloads per call, keys
/// interleaved call by call.
pub async fn publish_interleaved<B: Broker + ?Sized>(
    broker: &B,
    topic: &str,
    keys: &[String],
    seqs: Range<u64>,
    per_call: u64,
) {
    let mut from = seqs.start;
    while from < seqs.end {
        let to = (from + per_call).min(seqs.end);
        for key in keys {
            let ps: Vec<Bytes> = (from..to).map(|s| payload(key, s)).collect();
            broker.publish(topic, key, &ps).await.expect("publish");
        }
        from = to;
    }
}
