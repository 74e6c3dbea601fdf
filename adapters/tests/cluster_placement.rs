//! The NATS and RabbitMQ adapters on three-node clusters: `placement()` names each
//! stream's or queue's leader and replicas and the node of each connection, and
//! follows a change (a JetStream stream leader stepping down; a RabbitMQ consumer
//! connection the server closes, which the adapter reopens on the next node).
//!
//! Needs the clusters of `CROSSBENCH_NATS_CLUSTER` (comma-separated nats:// URLs) and
//! `CROSSBENCH_RABBIT_CLUSTER` (comma-separated amqp:// URLs, the first node's
//! management API at `CROSSBENCH_RABBIT_MANAGEMENT`); without them each test prints
//! SKIP and passes. Nothing here stops a server: a leader step-down and a closed
//! connection are requests any client may make.
#![cfg(any(feature = "nats", feature = "rabbitmq"))]

use std::sync::Arc;
use std::time::Duration;

use adapters::{
    BatchHandler, Broker, ConsumeOptions, Disposition, Durability, KeyBatch, Placement, Sharing,
    StreamCounters, TopicSpec, Topology,
};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

fn cluster(var: &str) -> Option<Vec<String>> {
    let v = std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    if v.is_none() {
        eprintln!("SKIP: {var} is not set (comma-separated URLs of a three-node cluster)");
    }
    Some(v?.split(',').map(|s| s.trim().to_string()).collect())
}

fn topology(topic: &str, groups: &[&str], lanes: u64, durability: Durability) -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: topic.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }],
        keys: lanes,
        lanes,
        durability,
        dedup_window_sec: 0,
        reset: true,
        sharing: Sharing::ALONE,
    }
}

struct Ack;

#[async_trait]
impl BatchHandler for Ack {
    async fn handle(&self, _batch: KeyBatch) -> Disposition {
        Disposition::Ack
    }
}

/// Ask until `ok` holds (the management database learns of connections within a few
/// seconds), at most `secs`.
async fn placement_until(b: &dyn Broker, secs: u64, ok: impl Fn(&Placement) -> bool) -> Placement {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let p = b.placement().await.expect("the adapter answers placement");
        if ok(&p) || tokio::time::Instant::now() > deadline {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(feature = "nats")]
#[tokio::test]
async fn nats_streams_are_led_and_kept_by_three_servers_and_a_step_down_moves_the_leader() {
    use adapters::nats::{NatsBroker, NatsOptions};
    let Some(urls) = cluster("CROSSBENCH_NATS_CLUSTER") else {
        return;
    };
    let b = NatsBroker::new(NatsOptions {
        url: urls.join(","),
        replicas: 3,
        request_timeout: Duration::from_secs(3),
        ..Default::default()
    })
    .unwrap();
    let d = b
        .setup(&topology("ctplace", &["g"], 2, Durability::Default))
        .await
        .unwrap();
    assert_eq!(d.provenance.settings["stream_replicas"], "3");
    let p = b.placement().await.unwrap();
    eprintln!("{p:?}");
    let leader = p.leaders["CB_ctplace"].clone();
    assert_eq!(p.replicas["CB_ctplace"].len(), 3, "{p:?}");
    assert_eq!(p.replicas["CB_ctplace"][0], leader);
    assert_eq!(p.connected.len(), 1, "{p:?}");
    assert!(p.unanswered.is_empty() && p.leaderless.is_empty(), "{p:?}");

    let client = async_nats::connect(urls.clone()).await.unwrap();
    let _ = client
        .request("$JS.API.STREAM.LEADER.STEPDOWN.CB_ctplace", "".into())
        .await
        .unwrap();
    let p = placement_until(&b, 15, |p| {
        p.leaders.get("CB_ctplace").is_some_and(|l| *l != leader)
    })
    .await;
    eprintln!("after the step-down: {p:?}");
    assert_ne!(p.leaders.get("CB_ctplace"), Some(&leader), "{p:?}");
    b.close().await.unwrap();
}

#[cfg(feature = "rabbitmq")]
#[tokio::test]
async fn rabbit_quorum_queues_on_three_nodes_and_a_closed_connection_moves_to_the_next_node() {
    use adapters::rabbitmq::{QueueType, RabbitBroker, RabbitOptions};
    let Some(urls) = cluster("CROSSBENCH_RABBIT_CLUSTER") else {
        return;
    };
    let Ok(management) = std::env::var("CROSSBENCH_RABBIT_MANAGEMENT") else {
        eprintln!("SKIP: CROSSBENCH_RABBIT_MANAGEMENT is not set");
        return;
    };
    let b = Arc::new(
        RabbitBroker::new(RabbitOptions {
            url: urls[0].clone(),
            nodes: urls[1..].to_vec(),
            management_url: management.clone(),
            queue_type: QueueType::Quorum,
            consumer_connections: 3,
            cost_snapshot: false,
            ..Default::default()
        })
        .unwrap(),
    );
    let d = b
        .setup(&topology("ctplace", &["g"], 3, Durability::Fsync))
        .await
        .unwrap();
    assert_eq!(d.provenance.settings["queue_replicas"], "3", "{d:?}");
    assert!(d.provenance.reported["cluster_nodes"].contains("(running)"));
    b.publish("ctplace", "p0", &[bytes::Bytes::from_static(b"x")])
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let consuming = {
        let (b, stop) = (b.clone(), stop.clone());
        tokio::spawn(async move {
            let options = ConsumeOptions {
                batch: 10,
                lanes: 4,
                counters: Arc::new(StreamCounters::default()),
            };
            b.consume("ctplace", "g", options, Arc::new(Ack), stop)
                .await
        })
    };
    // The publish connection and three consumer connections, one per node.
    let p = placement_until(b.as_ref(), 20, |p| p.connected.len() == 4).await;
    eprintln!("{p:?}");
    assert_eq!(p.leaders.len(), 3, "{p:?}");
    for (q, members) in &p.replicas {
        assert_eq!(members.len(), 3, "{q}: {p:?}");
        assert_eq!(members[0], p.leaders[q]);
    }
    assert_eq!(p.connected.len(), 4, "{p:?}");
    let mut consumer_nodes = p.connected[1..].to_vec();
    consumer_nodes.sort();
    consumer_nodes.dedup();
    assert_eq!(consumer_nodes.len(), 3, "spread over the nodes: {p:?}");

    // The server closes consumer connection 0 (on node 0): it comes back on node 1.
    let was = p.connected[1].clone();
    let http = reqwest::Client::new();
    let listing: serde_json::Value = http
        .get(format!(
            "{management}/api/connections?columns=name,user_provided_name"
        ))
        .basic_auth("guest", Some("guest"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let name = listing
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["user_provided_name"]
                .as_str()
                .is_some_and(|n| n.starts_with("crossbench-consume-0#"))
        })
        .and_then(|c| c["name"].as_str())
        .expect("consumer connection 0 is listed")
        .to_string();
    let r = http
        .delete(format!(
            "{management}/api/connections/{}",
            name.replace(' ', "%20").replace('>', "%3E")
        ))
        .basic_auth("guest", Some("guest"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{r:?}");
    let p = placement_until(b.as_ref(), 30, |p| {
        p.connected.len() == 4 && p.connected[1] != was
    })
    .await;
    eprintln!("after the close: {p:?}");
    assert_eq!(p.connected.len(), 4, "{p:?}");
    assert_ne!(p.connected[1], was, "{p:?}");
    stop.cancel();
    consuming.await.unwrap().unwrap();
    b.close().await.unwrap();
}
