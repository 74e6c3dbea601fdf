//! What the raw-ratio tests (`<system>_raw_ratio.rs`) share: one body of work, run and
//! timed the same way on either side of a ratio. The adapter side is the system's
//! [`Broker`]; the bare side is the system's bare loop, `adapters/src/<system>/bare.rs`
//! (the client library alone, the loop `crossbench selftest tax` runs), built by
//! [`SystemOptions::bare`]. No test carries a client loop of its own.
//!
//! A [`Work`] is `n` messages over `keys` keys, `per_call` per publish. Its calls are
//! numbered in order, call `c` for key `p<c mod keys>`; `tasks` tasks publish them
//! (task `w` makes the calls `c ≡ w mod tasks`, in order), each message a JSON body of
//! `bytes` bytes ([`adapters::bare::body`]). [`Side::publish`] times the work;
//! [`Side::consume`] times the side's consumers from their start until they have
//! received `n` (the adapter's handler calls, or the bare loop's `consumed`), then
//! stops them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::{
    BareClient, BareCounters, BarePlan, BatchHandler, Broker, ConsumeOptions, Disposition,
    KeyBatch, StreamCounters, SystemOptions, Topology,
};
use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

/// How long a side may take to consume the work.
pub const WITHIN: Duration = Duration::from_secs(300);

/// What each side publishes (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub n: u64,
    pub keys: u64,
    pub tasks: u64,
    pub per_call: u64,
    pub bytes: usize,
}

impl Work {
    /// Call `c`: its key and its payloads.
    pub fn call(&self, c: u64) -> (String, Vec<Bytes>) {
        let k = c % self.keys;
        let seqs = c * self.per_call..((c + 1) * self.per_call).min(self.n);
        let payloads = seqs.map(|s| adapters::bare::body(k, s, self.bytes));
        (format!("p{k}"), payloads.collect())
    }

    /// Every call, in order.
    pub fn calls(&self) -> impl Iterator<Item = (String, Vec<Bytes>)> + '_ {
        (0..self.n.div_ceil(self.per_call)).map(|c| self.call(c))
    }
}

/// One side of a ratio.
#[derive(Clone)]
pub enum Side {
    /// The adapter, consuming (topic, group) with the stage's `batch` and `lanes`.
    Adapter {
        broker: Arc<dyn Broker>,
        topic: String,
        group: String,
        batch: usize,
        lanes: usize,
    },
    /// The system's bare loop.
    Bare(Arc<dyn BareClient>),
}

impl Side {
    /// The adapter on `topology`'s one topic and group (set up by the caller).
    pub fn adapter(
        broker: Arc<dyn Broker>,
        topology: &Topology,
        batch: usize,
        lanes: usize,
    ) -> Side {
        let t = &topology.topics[0];
        Side::Adapter {
            broker,
            topic: t.name.clone(),
            group: t.groups[0].clone(),
            batch,
            lanes,
        }
    }

    /// The system's bare loop for `plan`: its objects built by the adapter's own setup
    /// (reset first), then its client library alone.
    pub async fn bare(options: &SystemOptions, plan: &BarePlan) -> Side {
        Side::Bare(Arc::from(options.bare(plan).await.expect("the bare loop")))
    }

    fn name(&self) -> &'static str {
        match self {
            Side::Adapter { .. } => "adapter",
            Side::Bare(_) => "bare loop",
        }
    }

    async fn publish_call(&self, key: &str, payloads: &[Bytes]) {
        let r = match self {
            Side::Adapter { broker, topic, .. } => broker.publish(topic, key, payloads).await,
            Side::Bare(client) => client.publish(key, payloads).await,
        };
        r.unwrap_or_else(|e| panic!("{} publish: {e}", self.name()));
    }

    /// Publish `w`; the time it took.
    pub async fn publish(&self, w: Work) -> Duration {
        let t0 = Instant::now();
        let calls = w.n.div_ceil(w.per_call);
        let tasks: Vec<_> = (0..w.tasks)
            .map(|t| {
                let side = self.clone();
                tokio::spawn(async move {
                    for c in (t..calls).step_by(w.tasks as usize) {
                        let (key, payloads) = w.call(c);
                        side.publish_call(&key, &payloads).await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        t0.elapsed()
    }

    /// Start the side's consumers, wait until they have received `n`, stop them; the
    /// time from their start to the n-th.
    pub async fn consume(&self, n: u64) -> Duration {
        let stop = CancellationToken::new();
        let t0 = Instant::now();
        let (seen, task): (Box<dyn Fn() -> u64 + Send>, _) = match self.clone() {
            Side::Adapter {
                broker,
                topic,
                group,
                batch,
                lanes,
            } => {
                let count = Arc::new(Count(AtomicU64::new(0)));
                let (h, s) = (count.clone(), stop.clone());
                let o = ConsumeOptions {
                    batch,
                    lanes,
                    counters: Arc::new(StreamCounters::default()),
                };
                let task = tokio::spawn(async move {
                    broker
                        .consume(&topic, &group, o, h, s)
                        .await
                        .expect("consume");
                });
                (Box::new(move || count.0.load(Ordering::Relaxed)), task)
            }
            Side::Bare(client) => {
                let k = Arc::new(BareCounters::default());
                let (k2, s) = (k.clone(), stop.clone());
                let task = tokio::spawn(async move { client.consume(&k2, s).await });
                (Box::new(move || k.consumed.get()), task)
            }
        };
        while seen() < n {
            let got = seen();
            assert!(
                t0.elapsed() < WITHIN,
                "{}: {got} of {n} in {WITHIN:?}",
                self.name()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let took = t0.elapsed();
        stop.cancel();
        task.await.unwrap();
        took
    }

    /// Release the side's connections.
    pub async fn close(&self) {
        match self {
            Side::Adapter { broker, .. } => broker.close().await.expect("close"),
            Side::Bare(client) => client.close().await,
        }
    }
}

/// The adapter side's handler: counts, acks.
struct Count(AtomicU64);

#[async_trait]
impl BatchHandler for Count {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        self.0
            .fetch_add(batch.messages.len() as u64, Ordering::Relaxed);
        Disposition::Ack
    }
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
