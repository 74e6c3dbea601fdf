//! The contract suite (tests/support/contract.rs) against RabbitMQ on 127.0.0.1:5672
//! (scripts/provision/rabbitmq.sh), in both idioms on both queue types: skips when it
//! is not there, fails under `CI`.
#![cfg(feature = "rabbitmq")]

mod support;

use std::time::Duration;

use adapters::rabbitmq::{Idiom, QueueType, RabbitOptions};
use adapters::{Durability, SystemOptions};
use support::contract::{tool, Counts, Expected, Fixture, Lanes, Redelivery, Unreachable};

async fn fixture(idiom: Idiom, queue_type: QueueType) -> Option<Fixture> {
    if !support::ready::rabbitmq() {
        return None;
    }
    Some(Fixture {
        name: format!("rabbitmq {}/{}", idiom.name(), queue_type.name()),
        options: SystemOptions::Rabbitmq(RabbitOptions {
            idiom,
            queue_type,
            queues_per_group: 4,
            linger: Duration::from_millis(5),
            cost_snapshot: false,
            ..Default::default()
        }),
        prefix: format!("ct-{}-{}-", idiom.name(), queue_type.name()),
        durability: match queue_type {
            QueueType::Classic => Durability::Default,
            QueueType::Quorum => Durability::Fsync,
        },
        redelivery: Redelivery::AtOnce { lease: None },
        lanes: Lanes::SharedKeyBatches,
        counts: Counts {
            published: Some("rabbit_logical_published"),
            copies: Some("rabbit_broker_copies"),
            acked: Some("rabbit_acked"),
            refused: Some("rabbit_refused"),
        },
        witness: match queue_type {
            QueueType::Classic => witness_classic,
            QueueType::Quorum => witness_quorum,
        },
    })
}

/// The node's version and Erlang/OTP release through rabbitmqctl and
/// rabbitmq-diagnostics (the CLI's distribution link, not AMQP).
fn witness(queue_type: &str) -> Option<Expected> {
    let version = tool("rabbitmqctl", &["version"])?;
    let otp = tool("rabbitmq-diagnostics", &["erlang_version", "-q"])?;
    Some(Expected {
        path: format!(
            "rabbitmqctl version ({version:?}); rabbitmq-diagnostics erlang_version -q ({otp:?})"
        ),
        version: Some(
            version
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .to_string(),
        ),
        reported: vec![("platform".into(), otp.clone())],
        settings: vec![
            (
                "erlang_otp".into(),
                otp.trim_start_matches("Erlang/OTP").trim().to_string(),
            ),
            ("queue_type".into(), queue_type.into()),
        ],
        caveat: false,
    })
}

fn witness_classic() -> Option<Expected> {
    witness("classic")
}

fn witness_quorum() -> Option<Expected> {
    witness("quorum")
}

/// The connection does not depend on the idiom or the queue type: checked once.
fn unreachable() -> Unreachable {
    Unreachable {
        options: SystemOptions::Rabbitmq(RabbitOptions {
            url: "amqp://u:s3cret-pw@127.0.0.1:1/%2f".into(),
            cost_snapshot: false,
            ..Default::default()
        }),
        secret: Some("s3cret-pw"),
        hint: "scripts/provision/rabbitmq.sh",
    }
}

contract_suite! {
    mod rabbitmq_lane_queues_classic {
        subject: fixture(Idiom::LaneQueues, QueueType::Classic),
        unreachable: unreachable(),
    }
}

contract_suite! {
    mod rabbitmq_lane_queues_quorum {
        subject: fixture(Idiom::LaneQueues, QueueType::Quorum),
    }
}

contract_suite! {
    mod rabbitmq_hash_exchange_classic {
        subject: fixture(Idiom::HashExchange, QueueType::Classic),
    }
}

contract_suite! {
    mod rabbitmq_hash_exchange_quorum {
        subject: fixture(Idiom::HashExchange, QueueType::Quorum),
    }
}
