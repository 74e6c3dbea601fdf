//! The contract suite (tests/support/contract.rs) against a Kafka-protocol broker on
//! 127.0.0.1:9092 (tansu: scripts/provision/tansu.sh): skips when it is not there,
//! fails under `CI`.
#![cfg(feature = "kafka")]

mod support;

use std::time::Duration;

use adapters::kafka::KafkaOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{tool, Counts, Expected, Fixture, Lanes, Redelivery, Unreachable};

async fn fixture() -> Option<Fixture> {
    if !support::ready::kafka() {
        return None;
    }
    Some(Fixture {
        name: "kafka (tansu)".into(),
        options: SystemOptions::Kafka(KafkaOptions {
            members: 2,
            linger: Duration::from_millis(1),
            log_dir: String::new(),
            ..Default::default()
        }),
        prefix: "ct-kafka-".into(),
        durability: Durability::Default,
        redelivery: Redelivery::AtOnce { lease: None },
        lanes: Lanes::SharedKeyBatches,
        counts: Counts {
            published: Some("kafka_published"),
            copies: None,
            acked: Some("kafka_acked"),
            refused: Some("kafka_refused"),
        },
        witness,
    })
}

/// The broker here is tansu (its binary says which version); the Kafka protocol
/// carries no product or version, so the description must report none.
fn witness() -> Option<Expected> {
    let bin = std::env::var("HOME").unwrap_or_else(|_| "/root".into())
        + "/.cache/crossbench/tansu-0.6.0/bin/tansu";
    let said = tool(&bin, &["--version"])?;
    Some(Expected {
        path: format!("{bin} --version (answers {said:?}; the protocol does not)"),
        version: None,
        ..Default::default()
    })
}

/// Kafka's options carry no secret (no SASL): the error is checked for its class and hint.
fn unreachable() -> Unreachable {
    Unreachable {
        options: SystemOptions::Kafka(KafkaOptions {
            bootstrap_servers: "127.0.0.1:1".into(),
            setup_timeout: Duration::from_secs(5),
            log_dir: String::new(),
            ..Default::default()
        }),
        secret: None,
        hint: "scripts/provision/tansu.sh",
    }
}

contract_suite! {
    mod kafka {
        subject: fixture(),
        unreachable: unreachable(),
    }
}
