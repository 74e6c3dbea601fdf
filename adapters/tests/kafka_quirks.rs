//! Kafka behaviour beyond the adapter contract (the contract itself is the shared
//! suite: contract_kafka.rs): what the description says about partitions and members,
//! a slow key holds back only its own partition (pause / resume), a topology the
//! broker refuses comes back with the broker's answer, and a reset waits until the
//! broker has finished with connections closed mid-request.
//!
//! Needs a broker on 127.0.0.1:9092 (scripts/provision/tansu.sh). When it is not
//! reachable the tests print SKIP and pass, unless `CI` is set (then they fail).
#![cfg(feature = "kafka")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::kafka::{KafkaBroker, KafkaOptions};
use adapters::{Broker, BrokerError, Durability, StreamCounters};
use support::{keys, publish_concurrently, topology, Consumers, Recorder};

/// One test at a time: they share the broker and the 2 cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn options() -> KafkaOptions {
    KafkaOptions {
        members: 2,
        linger: Duration::from_millis(1),
        log_dir: String::new(),
        ..Default::default()
    }
}

/// Lanes are partitions per topic, every stream gets `members` consumer clients, and
/// the counters say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_describes_partitions_and_members() {
    if !support::ready::kafka() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let broker = KafkaBroker::new(options()).unwrap();
    let d = broker
        .setup(&topology("cbt-kafka-describe", &["g1", "g2"], 20, 8))
        .await
        .expect("setup");
    assert_eq!(d.system, "kafka");
    assert_eq!(d.durability, Durability::Default);
    assert_eq!(d.ordered_lanes, 8, "partitions x topics");
    assert_eq!(d.physical_queues, 1);
    assert_eq!(d.consumer_members, 4, "members x streams");
    let stats = broker.counters();
    assert_eq!(stats["kafka_partitions_per_topic"], 8);
    assert_eq!(stats["kafka_members_per_group"], 2);
    assert_eq!(stats["kafka_fsync_tier"], 0);
    broker.close().await.unwrap();
}

/// Java-compatible murmur2 (Kafka's `Utils.murmur2`), only to *choose* test keys on
/// known partitions; the adapter itself leaves placement to librdkafka.
fn murmur2(data: &[u8]) -> u32 {
    let seed: u32 = 0x9747_b28c;
    let m: u32 = 0x5bd1_e995;
    let len = data.len();
    let mut h: u32 = seed ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(m);
        k ^= k >> 24;
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(m);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(m);
    h ^= h >> 15;
    h
}

fn partition_of(key: &str, partitions: u32) -> u32 {
    (murmur2(key.as_bytes()) & 0x7fff_ffff) % partitions
}

/// One key is slow (100 ms per message). Keys on the other partitions finish before
/// it; keys sharing its partition wait behind it. The slow partition is paused when it
/// backs up and resumed when it drains. Timings are printed; the assertion counts: when
/// the last record of the other partitions was processed, the slow key still had
/// records to go (held to its pace, the other partitions would finish after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_slow_key_holds_back_only_its_partition() {
    if !support::ready::kafka() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let topic = "cbt-kafka-slow";
    let partitions = 4u32;
    let slow_key = "p0".to_string();
    let slow_p = partition_of(&slow_key, partitions);
    let keys = keys(24);
    let (same, other): (Vec<&String>, Vec<&String>) = keys[1..]
        .iter()
        .partition(|k| partition_of(k, partitions) == slow_p);
    assert!(!other.is_empty(), "no key on another partition");
    let broker = Arc::new(
        KafkaBroker::new(KafkaOptions {
            partition_buffer: 40,
            ..options()
        })
        .unwrap(),
    );
    broker
        .setup(&topology(
            topic,
            &["g"],
            keys.len() as u64,
            u64::from(partitions),
        ))
        .await
        .expect("setup");
    let per_key = 40u64;
    // The other keys carry a quarter of the slow key's records each.
    let fast_per_key = per_key / 4;
    let rec = Recorder::new("g")
        .slow_key(&slow_key, Duration::from_millis(100))
        .arc();
    let run = Consumers::start(&broker, topic, std::slice::from_ref(&rec), 20, 64);
    // Seq 0 of every key first: once through, the group has joined and settled.
    publish_concurrently(&broker, topic, &keys, 0..1).await;
    rec.wait_for(keys.len() as u64, Duration::from_secs(60))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = Instant::now();
    publish_concurrently(&broker, topic, std::slice::from_ref(&slow_key), 1..per_key).await;
    publish_concurrently(&broker, topic, &keys[1..], 1..fast_per_key).await;
    let want = per_key + fast_per_key * (keys.len() as u64 - 1);
    rec.wait_for(want, Duration::from_secs(120)).await;
    let counters = run.finish().await;
    let at = |k: &String| {
        rec.done_at(k)
            .map(|t| t.duration_since(t0))
            .expect("key done")
    };
    let slow = at(&slow_key);
    let other_max = other.iter().map(|k| at(k)).max().unwrap();
    let same_max = same.iter().map(|k| at(k)).max();
    let stats = broker.counters();
    println!(
        "slow key {slow_key} on partition {slow_p}: done after {slow:?}; {} keys on other partitions: all done after {other_max:?}; {} keys on its partition: all done after {same_max:?}; pauses {} resumes {}",
        other.len(),
        same.len(),
        stats["kafka_pauses"],
        stats["kafka_resumes"]
    );
    assert_eq!(rec.overlaps(), 0);
    for k in &keys {
        let n = if *k == slow_key {
            per_key
        } else {
            fast_per_key
        };
        let expect: Vec<u64> = (0..n).collect();
        assert_eq!(rec.seqs(k), expect, "key {k}: order");
    }
    // 39 records of the slow key after t0 at 100 ms each: a sleep, which load only
    // lengthens.
    assert!(
        slow >= Duration::from_millis(3900),
        "slow key took {slow:?}"
    );
    // Counted, not timed: how many of the slow key's records were processed before
    // the last record of the other partitions.
    let log = rec.log();
    let last_other = log
        .iter()
        .rposition(|(k, _)| other.contains(&k))
        .expect("records of the other partitions");
    let slow_before = log[..last_other]
        .iter()
        .filter(|(k, _)| *k == slow_key)
        .count() as u64;
    println!(
        "when the other partitions were done, the slow key had processed {slow_before} of {per_key} records"
    );
    assert!(
        slow_before < per_key,
        "keys on other partitions were held back to the slow key's pace: they finished after all {per_key} of its records ({other_max:?} vs slow key {slow:?})"
    );
    assert_eq!(stats["kafka_stray_records"], 0, "{stats:?}");
    assert!(
        stats["kafka_pauses"] >= 1,
        "the slow partition was never paused: {stats:?}"
    );
    // Resumed at half its buffer, unless a rebalance took the paused partition away
    // first (its new owner starts unpaused): that is counted as a revocation.
    assert!(
        stats["kafka_resumes"] >= 1 || stats["kafka_partitions_revoked"] >= 1,
        "the paused partition was neither resumed nor revoked: {stats:?}"
    );
    assert_eq!(StreamCounters::get(&counters[0].ack_errors), 0);
    broker.close().await.unwrap();
}

/// A topology the broker refuses (a replication factor a single broker cannot give, or
/// an illegal topic name) comes back as `TopologyRefused` carrying the broker's own
/// answer. Ignored by default: tansu 0.6.0 accepts both (replication factor 3 on one
/// broker and the name "cbt kafka/refused!"), so it cannot be provoked here; run it
/// against Apache Kafka or Redpanda (compose/kafka/README.md) with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tansu 0.6.0 refuses neither request; needs Apache Kafka or Redpanda"]
async fn kafka_refused_topology_carries_the_broker_answer() {
    if !support::ready::kafka() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let broker = KafkaBroker::new(KafkaOptions {
        replication_factor: 3,
        ..options()
    })
    .unwrap();
    let r = broker
        .setup(&topology("cbt-kafka-refused", &["g"], 4, 4))
        .await;
    println!(
        "replication factor 3 on one broker: {:?}",
        r.as_ref().map(|_| "accepted")
    );
    let plain = KafkaBroker::new(options()).unwrap();
    let r2 = plain
        .setup(&topology("cbt kafka/refused!", &["g"], 4, 4))
        .await;
    println!("illegal topic name: {:?}", r2.as_ref().map(|_| "accepted"));
    let refused = [r, r2].into_iter().find_map(|r| match r {
        Err(BrokerError::TopologyRefused { what, answer }) => Some((what, answer)),
        _ => None,
    });
    let (what, answer) = refused.expect("the broker refused neither request");
    println!("refused: {what}: {answer}");
    assert!(what.contains("refused"), "{what}");
    assert!(!answer.is_empty());
}

/// A reset does not delete topics while the broker is still serving a request of a
/// connection that was closed to it (tansu 0.6.0 panics when such a request reaches a
/// deleted partition, and stays down: `quiesce` in the adapter). Here the request is a
/// long-poll Fetch (3 s on an empty partition) left with the broker by a consumer that
/// closes at once; the next setup must wait for the broker to finish it, and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_reset_waits_until_the_broker_has_finished_closed_connections() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    if !support::ready::kafka() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let topic = "cbt-kafka-quiesce";
    let broker = KafkaBroker::new(options()).unwrap();
    broker
        .setup(&topology(topic, &["g"], 4, 2))
        .await
        .expect("first setup");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &options().bootstrap_servers)
        .set("group.id", "cbt-kafka-quiesce-probe")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "3000")
        .set("log_level", "3")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(0))
        .unwrap();
    consumer.assign(&tpl).expect("assign");
    // Long enough for librdkafka to connect and send its Fetch, well inside the 3 s
    // the broker then holds it for.
    let consumer = tokio::task::spawn_blocking(move || {
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(800) {
            let _ = consumer.poll(Duration::from_millis(100));
        }
        consumer
    })
    .await
    .unwrap();
    let closed = Instant::now();
    tokio::task::spawn_blocking(move || drop(consumer))
        .await
        .unwrap();
    let d = broker
        .setup(&topology(topic, &["g"], 4, 2))
        .await
        .expect("second setup");
    let after = closed.elapsed();
    let note = d
        .notes
        .iter()
        .find(|n| n.starts_with("before deleting the topics"))
        .unwrap_or_else(|| panic!("no note on the wait before deleting: {:?}", d.notes));
    println!("{note} (setup done {after:?} after the consumer closed)");
    assert!(
        note.contains("waited") && note.contains("finished with"),
        "the broker was still serving the closed consumer's Fetch: {note}"
    );
    assert!(
        after >= Duration::from_millis(1000),
        "the setup deleted the topics {after:?} after the close, before the broker's 3 s long poll could end"
    );
    broker.close().await.unwrap();
}
