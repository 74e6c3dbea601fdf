//! The contract suite (tests/support/contract.rs) against Redis on 127.0.0.1:6379
//! (scripts/provision/redis.sh): skips when it is not there, fails under `CI`.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use adapters::redis::RedisOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{field, tool, Counts, Expected, Fixture, Lanes, Redelivery, Unreachable};

/// The lease: XAUTOCLAIM's min-idle-time for a refused batch.
const LEASE: Duration = Duration::from_secs(2);

async fn fixture() -> Option<Fixture> {
    if !support::ready::redis() {
        return None;
    }
    Some(Fixture {
        name: "redis lane-streams".into(),
        options: SystemOptions::Redis(RedisOptions {
            lease: LEASE,
            block: Duration::from_millis(200),
            ..Default::default()
        }),
        prefix: "ctrd_".into(),
        durability: Durability::Default,
        redelivery: Redelivery::AfterLease(LEASE),
        lanes: Lanes::LaneBatches,
        counts: Counts {
            published: Some("redis_logical_publishes"),
            copies: Some("redis_logical_publishes"),
            acked: Some("redis_acked"),
            refused: Some("redis_refused"),
        },
        witness,
    })
}

/// The server's INFO and CONFIG through redis-cli.
fn witness() -> Option<Expected> {
    let info = tool("redis-cli", &["-h", "127.0.0.1", "INFO", "server"])?;
    let config = |k: &str| {
        tool("redis-cli", &["-h", "127.0.0.1", "CONFIG", "GET", k])
            .map(|o| o.lines().nth(1).unwrap_or_default().trim().to_string())
    };
    Some(Expected {
        path: "redis-cli -h 127.0.0.1 INFO server; redis-cli CONFIG GET appendonly|appendfsync"
            .into(),
        version: field(&info, "redis_version"),
        reported: vec![(
            "redis_mode".into(),
            field(&info, "redis_mode").unwrap_or_default(),
        )],
        settings: vec![
            ("appendonly".into(), config("appendonly")?),
            ("appendfsync".into(), config("appendfsync")?),
        ],
        caveat: false,
    })
}

fn unreachable() -> Unreachable {
    Unreachable {
        options: SystemOptions::Redis(RedisOptions {
            url: "redis://:r3dis-secret@127.0.0.1:1/".into(),
            ..Default::default()
        }),
        secret: Some("r3dis-secret"),
        hint: "scripts/provision/redis.sh",
    }
}

contract_suite! {
    mod redis {
        subject: fixture(),
        unreachable: unreachable(),
    }
}
