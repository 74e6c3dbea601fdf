//! RabbitMQ behaviour beyond the adapter contract (the contract itself is the shared
//! suite: contract_rabbitmq.rs): what each idiom and queue type provisions and which
//! durability tier it is, fsync only with quorum queues, a reset that clears what
//! the other idiom built (exchanges of another type, exchange-to-exchange bindings),
//! and a publish no queue takes refused, never confirmed as delivered.
//!
//! Needs RabbitMQ on 127.0.0.1:5672 (scripts/provision/rabbitmq.sh). When it is not
//! reachable the tests print SKIP and pass, unless `CI` is set (then they fail).
#![cfg(feature = "rabbitmq")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use adapters::rabbitmq::{Idiom, QueueType, RabbitBroker, RabbitOptions};
use adapters::{Broker, BrokerError, Durability, FanOut};
use support::contract::DEADLINE;
use support::{keys, publish_interleaved, topology, Consumers, Recorder};

/// Tests share one server.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn options(idiom: Idiom, queue_type: QueueType) -> RabbitOptions {
    RabbitOptions {
        idiom,
        queue_type,
        queues_per_group: 4,
        linger: Duration::from_millis(5),
        cost_snapshot: false,
        ..Default::default()
    }
}

/// Every idiom on every queue type: its variant name, its tier (quorum queues fsync
/// before the confirm, classic ones do not), no lease, one queue per lane per group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbit_describes_variant_and_tier() {
    if !support::ready::rabbitmq() {
        return;
    }
    let _serial = SERIAL.lock().await;
    for idiom in [Idiom::LaneQueues, Idiom::HashExchange] {
        for qt in [QueueType::Classic, QueueType::Quorum] {
            let b = RabbitBroker::new(options(idiom, qt)).unwrap();
            let topic = format!("rq-describe-{}-{}", idiom.name(), qt.name());
            let d = b
                .setup(&topology(&topic, &["g1", "g2"], 20, 8))
                .await
                .expect("setup");
            let what = format!("{}/{}", idiom.name(), qt.name());
            assert_eq!(d.variant, what);
            let tier = match qt {
                QueueType::Quorum => Durability::Fsync,
                QueueType::Classic => Durability::Default,
            };
            assert_eq!(d.durability, tier, "{what}");
            assert_eq!(d.lease_ms, None, "{what}");
            assert_eq!(d.fan_out, FanOut::Materialised, "{what}");
            assert_eq!(d.publishes_per_ingress_event, 2.0, "{what}");
            // lane-queues: 8 lanes per group; hash-exchange: queues_per_group = 4.
            let per_group = match idiom {
                Idiom::LaneQueues => 8,
                Idiom::HashExchange => 4,
            };
            assert_eq!(d.physical_queues, 2 * per_group, "{what}");
            let c = b.counters();
            assert_eq!(c["rabbit_queues_per_group"], per_group, "{what}");
            assert_eq!(
                c["rabbit_quorum"],
                u64::from(qt == QueueType::Quorum),
                "{what}"
            );
            b.close().await.unwrap();
        }
    }
}

/// The fsync tier needs quorum queues: classic queues refuse it with the knob to turn,
/// before anything is created. The memory tier is nothing RabbitMQ offers here.
#[tokio::test]
async fn rabbit_fsync_needs_quorum_queues() {
    let b = RabbitBroker::new(options(Idiom::LaneQueues, QueueType::Classic)).unwrap();
    let mut t = topology("rq-fsync", &["g"], 1, 1);
    t.durability = Durability::Fsync;
    match b.setup(&t).await {
        Err(BrokerError::Config { field, .. }) => assert_eq!(field, "rabbitmq.queue_type"),
        other => panic!("classic queues at fsync: {other:?}"),
    }
    t.durability = Durability::Memory;
    let e = b.setup(&t).await.expect_err("memory tier");
    assert!(matches!(e, BrokerError::Config { .. }), "{e}");
}

/// A reset clears what the other idiom left under the same topic: lane-queues' direct
/// exchange, hash-exchange's fanout and the hash exchanges bound to it (deleted topic
/// exchange first: rabbitmq-server#11951). Each setup works, and messages flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbit_reset_clears_the_other_idioms_objects() {
    if !support::ready::rabbitmq() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let topic = "rq-reset-idiom";
    for idiom in [Idiom::HashExchange, Idiom::LaneQueues, Idiom::HashExchange] {
        let b = Arc::new(RabbitBroker::new(options(idiom, QueueType::Classic)).unwrap());
        b.setup(&topology(topic, &["g"], 4, 4))
            .await
            .unwrap_or_else(|e| panic!("setup {} over the other idiom: {e}", idiom.name()));
        let names = keys(4);
        publish_interleaved(&*b, topic, &names, 0..5, 5).await;
        let rec = Recorder::new("g").arc();
        let run = Consumers::start(&b, topic, std::slice::from_ref(&rec), 10, 8);
        rec.wait_for(20, DEADLINE).await;
        run.finish().await;
        rec.assert_in_order(&names, 5, idiom.name());
        b.close().await.unwrap();
    }
}

/// A publish that no queue takes (the lane's queue deleted behind the adapter's back,
/// as a binding not yet recovered after a restart) comes back unroutable: the publish
/// is refused and counted (`rabbit_returned`), never confirmed as if it had landed. A
/// publish to a lane whose queue is there still goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbit_a_publish_no_queue_takes_is_refused_not_confirmed() {
    if !support::ready::rabbitmq() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let topic = "rq-unroutable";
    let mut o = options(Idiom::LaneQueues, QueueType::Classic);
    o.queues_per_group = 2;
    let b = RabbitBroker::new(o).unwrap();
    b.setup(&topology(topic, &["g"], 2, 2))
        .await
        .expect("setup");
    // Two keys on two lanes: find one key of each.
    let names = keys(64);
    let lane = |k: &str| adapters::lanes::lane_of(k, 2);
    let gone = names.iter().find(|k| lane(k) == 0).unwrap();
    let kept = names.iter().find(|k| lane(k) == 1).unwrap();
    let conn = lapin::Connection::connect(
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        lapin::ConnectionProperties::default(),
    )
    .await
    .expect("a connection of the test's own");
    let ch = conn.create_channel().await.unwrap();
    ch.queue_delete(
        format!("cb.{topic}.g.l0").as_str().into(),
        lapin::options::QueueDeleteOptions::default(),
    )
    .await
    .expect("delete lane 0's queue");
    let payload = [bytes::Bytes::from_static(b"unroutable")];
    let e = b
        .publish(topic, gone, &payload)
        .await
        .expect_err("a publish no queue takes must not be confirmed");
    assert!(matches!(e, BrokerError::Refused(_)), "{e:?}");
    assert!(e.to_string().contains("returned unroutable"), "{e}");
    assert_eq!(b.counters().get("rabbit_returned"), Some(&1));
    b.publish(topic, kept, &payload)
        .await
        .expect("the lane whose queue is there");
    assert_eq!(b.counters().get("rabbit_returned"), Some(&1));
    conn.close(0, "done".into()).await.ok();
    b.close().await.unwrap();
}
