//! Raw throughput: the adapter against a bare `async-nats` loop doing the same work on
//! the same server (no `nats bench` here: the `nats` CLI is in no registry this project
//! reaches). Publish: 20 000 messages of 256 B over 20 keys, 4 concurrent publishers,
//! 10 messages per call, every PubAck awaited. Consume: the same backlog on 20 lane
//! consumers, fetch up to 100 and ack each, until all is acked. Medians of three
//! alternating repetitions. Ignored by default (a measurement, not a check):
//!   cargo test --release -p crossbench-adapters --features nats --test nats_raw_ratio \
//!     -- --ignored --nocapture
#![cfg(feature = "nats")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::nats::{NatsBroker, NatsOptions};
use adapters::{
    BatchHandler, Broker, ConsumeOptions, Disposition, KeyBatch, StreamCounters, TopicSpec,
    Topology,
};
use async_nats::jetstream::{self, consumer, stream};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

const KEYS: u64 = 20;
const N: u64 = 20_000;
const TASKS: u64 = 4;
const PER_CALL: u64 = 10;

fn topo(dedup: u64) -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: "rawn".into(),
            groups: vec!["g".into()],
        }],
        keys: KEYS,
        lanes: KEYS,
        durability: adapters::Durability::Default,
        dedup_window_sec: dedup,
        reset: true,
        sharing: adapters::Sharing::ALONE,
    }
}

fn body(i: u64) -> Bytes {
    Bytes::from(format!("{i:0>256}"))
}

async fn adapter_publish(b: &Arc<NatsBroker>) -> f64 {
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|w| {
            let b = b.clone();
            tokio::spawn(async move {
                let mut i = w * PER_CALL;
                while i < N {
                    let key = format!("p{}", (i / PER_CALL) % KEYS);
                    let ps: Vec<Bytes> = (i..i + PER_CALL).map(body).collect();
                    b.publish("rawn", &key, &ps).await.unwrap();
                    i += TASKS * PER_CALL;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    N as f64 / t.elapsed().as_secs_f64()
}

struct Count(AtomicU64);

#[async_trait]
impl BatchHandler for Count {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        self.0
            .fetch_add(batch.messages.len() as u64, Ordering::Relaxed);
        Disposition::Ack
    }
}

async fn adapter_consume(b: &Arc<NatsBroker>) -> f64 {
    let count = Arc::new(Count(AtomicU64::new(0)));
    let stop = CancellationToken::new();
    let t = Instant::now();
    let run = {
        let (b, count, stop) = (b.clone(), count.clone(), stop.clone());
        tokio::spawn(async move {
            b.consume(
                "rawn",
                "g",
                ConsumeOptions {
                    batch: 100,
                    lanes: 64,
                    counters: Arc::new(StreamCounters::default()),
                },
                count,
                stop,
            )
            .await
        })
    };
    while count.0.load(Ordering::Relaxed) < N {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = N as f64 / t.elapsed().as_secs_f64();
    stop.cancel();
    run.await.unwrap().unwrap();
    rate
}

/// The bare loop's stream: the same subjects, storage and lane consumers.
async fn bare_setup(js: &jetstream::Context) -> Vec<consumer::PullConsumer> {
    let _ = js.delete_stream("RAWBARE").await;
    let st = js
        .create_stream(stream::Config {
            name: "RAWBARE".into(),
            subjects: vec!["rawbare.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut cs = Vec::new();
    for l in 0..KEYS {
        cs.push(
            st.create_consumer(consumer::pull::Config {
                durable_name: Some(format!("g_l{l}")),
                filter_subject: format!("rawbare.l{l}.*"),
                ack_policy: consumer::AckPolicy::Explicit,
                max_ack_pending: 1000,
                ..Default::default()
            })
            .await
            .unwrap(),
        );
    }
    cs
}

async fn bare_publish(js: &jetstream::Context) -> f64 {
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|w| {
            let js = js.clone();
            tokio::spawn(async move {
                let mut i = w * PER_CALL;
                while i < N {
                    let k = (i / PER_CALL) % KEYS;
                    let subject = format!("rawbare.l{k}.p{k}");
                    let mut acks = Vec::new();
                    for j in i..i + PER_CALL {
                        acks.push(js.publish(subject.clone(), body(j)).await.unwrap());
                    }
                    for a in acks {
                        a.await.unwrap();
                    }
                    i += TASKS * PER_CALL;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    N as f64 / t.elapsed().as_secs_f64()
}

async fn bare_consume(cs: Vec<consumer::PullConsumer>) -> f64 {
    let count = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let tasks: Vec<_> = cs
        .into_iter()
        .map(|c| {
            let count = count.clone();
            tokio::spawn(async move {
                let mut msgs = c
                    .stream()
                    .max_messages_per_batch(100)
                    .messages()
                    .await
                    .unwrap();
                while count.load(Ordering::Relaxed) < N {
                    match tokio::time::timeout(Duration::from_millis(200), msgs.next()).await {
                        Ok(Some(Ok(m))) => {
                            m.ack().await.unwrap();
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => continue,
                    }
                }
            })
        })
        .collect();
    while count.load(Ordering::Relaxed) < N {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = N as f64 / t.elapsed().as_secs_f64();
    for t in tasks {
        t.abort();
    }
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --release -- --ignored --nocapture"]
async fn nats_raw_ratio() {
    if !support::ready::nats() {
        return;
    }
    let client = async_nats::connect("127.0.0.1:4222").await.unwrap();
    let js = jetstream::new(client);
    let (mut ap, mut ac, mut bp, mut bc) = (vec![], vec![], vec![], vec![]);
    for rep in 0..3 {
        let b = Arc::new(NatsBroker::new(NatsOptions::default()).unwrap());
        b.setup(&topo(0)).await.unwrap();
        ap.push(adapter_publish(&b).await);
        ac.push(adapter_consume(&b).await);
        let cs = bare_setup(&js).await;
        bp.push(bare_publish(&js).await);
        bc.push(bare_consume(cs).await);
        println!(
            "rep {rep}: publish adapter {:.0}/s bare {:.0}/s; consume adapter {:.0}/s bare {:.0}/s",
            ap[rep], bp[rep], ac[rep], bc[rep]
        );
    }
    let (ap, ac, bp, bc) = (median(ap), median(ac), median(bp), median(bc));
    println!(
        "NATS raw ratio (medians of 3): publish {ap:.0} / {bp:.0} = {:.2}; consume {ac:.0} / {bc:.0} = {:.2}",
        ap / bp,
        ac / bc
    );
    // The dedup axis at the client: the same publish with Nats-Msg-Id on.
    let mut on = vec![];
    let mut off = vec![];
    for _ in 0..3 {
        let b = Arc::new(NatsBroker::new(NatsOptions::default()).unwrap());
        b.setup(&topo(0)).await.unwrap();
        off.push(adapter_publish(&b).await);
        b.setup(&topo(120)).await.unwrap();
        on.push(adapter_publish(&b).await);
    }
    let (on, off) = (median(on), median(off));
    println!(
        "NATS publish with dedup on {on:.0}/s, off {off:.0}/s: dedup costs {:.2}x the time",
        off / on
    );
}
