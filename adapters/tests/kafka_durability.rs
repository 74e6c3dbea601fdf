//! The Kafka adapter's durability tiers, read back from the broker: after `setup`,
//! the topics' configs as the broker reports them through the admin API
//! (DescribeConfigs, a client of this test's own, not the adapter's): the `fsync`
//! tier's `flush.messages=1` and `flush.ms=0` are on every topic, the `default` tier's
//! topics do not carry them, and the description's note says what the broker
//! reported. A config the adapter silently dropped fails here.
//!
//! What this cannot show: whether the broker honours the configs. tansu 0.6.0 stores
//! and reports them but never reads them (compose/kafka/README.md), so on tansu the
//! note says the tier was requested and reported back, not that writes are fsynced.
//!
//! Needs a Kafka-protocol broker on 127.0.0.1:9092 (scripts/provision/tansu.sh).
#![cfg(feature = "kafka")]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use adapters::kafka::{KafkaBroker, KafkaOptions};
use adapters::{Broker, Durability, TopicSpec, Topology};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

const BROKER: &str = "127.0.0.1:9092";

fn topology(names: &[String], durability: Durability) -> Topology {
    Topology {
        topics: names
            .iter()
            .map(|n| TopicSpec {
                name: n.clone(),
                groups: vec!["g".into()],
            })
            .collect(),
        keys: 4,
        lanes: 2,
        durability,
        dedup_window_sec: 0,
        reset: true,
        sharing: adapters::Sharing::ALONE,
    }
}

/// Every config the broker reports for `topic`, through an admin client of our own.
async fn described(topic: &str) -> BTreeMap<String, Option<String>> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", BROKER)
        .set("log_level", "3")
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(20)));
    let res = admin
        .describe_configs([ResourceSpecifier::Topic(topic)].iter(), &opts)
        .await
        .expect("DescribeConfigs answered");
    let r = res
        .into_iter()
        .next()
        .expect("one resource")
        .unwrap_or_else(|e| panic!("DescribeConfigs of {topic}: {e:?}"));
    r.entries.into_iter().map(|e| (e.name, e.value)).collect()
}

fn get<'a>(c: &'a BTreeMap<String, Option<String>>, k: &str) -> Option<&'a str> {
    c.get(k).and_then(|v| v.as_deref())
}

async fn tier(durability: Durability, tag: &str) -> (Vec<String>, adapters::Description) {
    let names: Vec<String> = (0..2)
        .map(|i| format!("cbdur-{tag}-{}-t{i}", std::process::id()))
        .collect();
    let b = KafkaBroker::new(KafkaOptions {
        members: 1,
        log_dir: String::new(),
        ..Default::default()
    })
    .unwrap();
    let d = b.setup(&topology(&names, durability)).await.expect("setup");
    b.close().await.unwrap();
    (names, d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_tier_configs_are_on_every_topic_as_the_broker_reports_them() {
    if !support::reachable(
        BROKER,
        "a Kafka-protocol broker",
        "scripts/provision/tansu.sh",
    ) {
        return;
    }
    let (names, d) = tier(Durability::Fsync, "fsync").await;
    assert_eq!(d.durability, Durability::Fsync);
    for n in &names {
        let c = described(n).await;
        assert_eq!(
            get(&c, "flush.messages"),
            Some("1"),
            "{n}: the broker reports {c:?}"
        );
        assert_eq!(
            get(&c, "flush.ms"),
            Some("0"),
            "{n}: the broker reports {c:?}"
        );
    }
    let note = d
        .notes
        .iter()
        .find(|n| n.starts_with("durability"))
        .unwrap_or_else(|| panic!("a durability note: {:?}", d.notes));
    assert!(
        note.contains("reported back by the broker on all 2 topics")
            && note.contains("not shown to be honoured"),
        "{note}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_tier_topics_carry_no_flush_configs() {
    if !support::reachable(
        BROKER,
        "a Kafka-protocol broker",
        "scripts/provision/tansu.sh",
    ) {
        return;
    }
    let (names, d) = tier(Durability::Default, "default").await;
    assert_eq!(d.durability, Durability::Default);
    for n in &names {
        let c = described(n).await;
        assert_ne!(get(&c, "flush.messages"), Some("1"), "{n}: {c:?}");
        assert_ne!(get(&c, "flush.ms"), Some("0"), "{n}: {c:?}");
        // The one config the adapter always sets is there: the describe reads this topic.
        assert_eq!(get(&c, "retention.ms"), Some("3600000"), "{n}: {c:?}");
    }
}
