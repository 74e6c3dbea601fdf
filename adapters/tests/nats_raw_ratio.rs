//! Raw throughput: the adapter against NATS's bare loop, `adapters/src/nats/bare.rs`
//! (async-nats alone on the stream and lane consumers the adapter's setup builds, the
//! loop `crossbench selftest tax` runs), doing the same work on the same server (no
//! `nats bench` here: the `nats` CLI is in no registry this project reaches). Publish
//! (`support::raw::Work`): 20 000 messages of 256 B over 20 keys, 4 concurrent
//! publishers, 10 messages per call, every PubAck awaited. Consume: the same backlog on
//! 20 lane consumers, up to 100 per pull, every message acked, until all 20 000 are
//! received. Medians of three alternating repetitions; then the adapter's publish with
//! dedup (`Nats-Msg-Id`) on and off. Ignored by default (a measurement, not a check):
//!   cargo test --release -p crossbench-adapters --features nats --test nats_raw_ratio \
//!     -- --ignored --nocapture
#![cfg(feature = "nats")]

mod support;

use std::sync::Arc;

use adapters::nats::{NatsBroker, NatsOptions};
use adapters::{BarePlan, Broker, SystemOptions, Topology};
use support::raw::{median, Side, Work};

const KEYS: u64 = 20;
const N: u64 = 20_000;
const WORK: Work = Work {
    n: N,
    keys: KEYS,
    tasks: 4,
    per_call: 10,
    bytes: 256,
};

fn topo(dedup: u64) -> Topology {
    Topology {
        dedup_window_sec: dedup,
        ..support::topology("rawn", &["g"], KEYS, KEYS)
    }
}

/// The adapter on a fresh `topo(dedup)`.
async fn adapter(dedup: u64) -> Side {
    let b = Arc::new(NatsBroker::new(NatsOptions::default()).unwrap());
    b.setup(&topo(dedup)).await.unwrap();
    Side::adapter(b, &topo(dedup), 100, 64)
}

fn rate(d: std::time::Duration) -> f64 {
    N as f64 / d.as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --release -- --ignored --nocapture"]
async fn nats_raw_ratio() {
    if !support::ready::nats() {
        return;
    }
    let plan = BarePlan {
        topology: topo(0),
        batch: 100,
        lanes: 64,
    };
    let (mut ap, mut ac, mut bp, mut bc) = (vec![], vec![], vec![], vec![]);
    for rep in 0..3 {
        let a = adapter(0).await;
        ap.push(rate(a.publish(WORK).await));
        ac.push(rate(a.consume(N).await));
        a.close().await;
        let bare = Side::bare(&SystemOptions::Nats(NatsOptions::default()), &plan).await;
        bp.push(rate(bare.publish(WORK).await));
        bc.push(rate(bare.consume(N).await));
        bare.close().await;
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
        for (dedup, rates) in [(0, &mut off), (120, &mut on)] {
            let a = adapter(dedup).await;
            rates.push(rate(a.publish(WORK).await));
            a.close().await;
        }
    }
    let (on, off) = (median(on), median(off));
    println!(
        "NATS publish with dedup on {on:.0}/s, off {off:.0}/s: dedup costs {:.2}x the time",
        off / on
    );
}
