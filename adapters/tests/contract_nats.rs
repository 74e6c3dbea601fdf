//! The contract suite (tests/support/contract.rs) against NATS JetStream on
//! 127.0.0.1:4222 (scripts/provision/nats.sh), file and memory storage: skips when it
//! is not there, fails under `CI`.
#![cfg(feature = "nats")]

mod support;

use std::time::Duration;

use adapters::nats::NatsOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{tool, Counts, Expected, Fixture, Lanes, Redelivery, Unreachable};

/// The ack wait: a refused batch is nak'd with it as the delay.
const ACK_WAIT: Duration = Duration::from_secs(2);

fn fixture(durability: Durability) -> Option<Fixture> {
    if !support::ready::nats() {
        return None;
    }
    let tier = match durability {
        Durability::Memory => "mem",
        _ => "file",
    };
    Some(Fixture {
        name: format!("nats lane-consumers/{tier}"),
        options: SystemOptions::Nats(NatsOptions {
            ack_wait: ACK_WAIT,
            ..Default::default()
        }),
        prefix: format!("ctn{tier}_"),
        durability,
        redelivery: Redelivery::AfterLease(ACK_WAIT),
        lanes: Lanes::LaneBatches,
        counts: Counts {
            published: Some("nats_logical_publishes"),
            copies: Some("nats_logical_publishes"),
            acked: Some("nats_acked"),
            refused: Some("nats_refused"),
        },
        witness: if durability == Durability::Memory {
            witness_memory
        } else {
            witness_file
        },
    })
}

/// The server's version from its binary (`nats-server: v2.9.10`), and the storage the
/// stream was created with.
fn witness(storage: &str) -> Option<Expected> {
    let said = tool("nats-server", &["--version"])?;
    let version = said
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .trim_start_matches('v')
        .to_string();
    Some(Expected {
        path: format!("nats-server --version ({said:?})"),
        version: Some(version),
        reported: vec![("jetstream".into(), "true".into())],
        settings: vec![("stream_storage".into(), format!("{storage}, replicas 1"))],
        caveat: false,
    })
}

fn witness_file() -> Option<Expected> {
    witness("file")
}

fn witness_memory() -> Option<Expected> {
    witness("memory")
}

fn unreachable() -> Unreachable {
    Unreachable {
        options: SystemOptions::Nats(NatsOptions {
            url: "nats://u:n4ts-secret@127.0.0.1:1".into(),
            ..Default::default()
        }),
        secret: Some("n4ts-secret"),
        hint: "scripts/provision/nats.sh",
    }
}

contract_suite! {
    mod nats_file {
        subject: async { fixture(Durability::Default) },
        unreachable: unreachable(),
    }
}

contract_suite! {
    mod nats_memory {
        subject: async { fixture(Durability::Memory) },
    }
}
