//! The contract suite (tests/support/contract.rs) against PostgreSQL + pgmq on
//! 127.0.0.1:5432 (scripts/provision/pgmq.sh): skips when it is not there, fails
//! under `CI`.
#![cfg(feature = "pgmq")]

mod support;

use std::time::Duration;

use adapters::pgmq::PgmqOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{Counts, Fixture, Lanes, Redelivery, Unreachable};

/// The visibility timeout: how long a refused batch stays away.
const VT: Duration = Duration::from_secs(2);

async fn fixture() -> Option<Fixture> {
    if !support::ready::pgmq().await {
        return None;
    }
    Some(Fixture {
        name: "pgmq read_grouped_head/delete".into(),
        options: SystemOptions::Pgmq(PgmqOptions {
            readers: 3,
            visibility_timeout: VT,
            ..Default::default()
        }),
        prefix: "ctpg_".into(),
        durability: Durability::Default,
        redelivery: Redelivery::AfterLease(VT),
        lanes: Lanes::LaneBatches,
        counts: Counts {
            published: Some("pgmq_logical_publishes"),
            copies: Some("pgmq_rows_sent"),
            acked: Some("pgmq_rows_acked"),
            refused: Some("pgmq_rows_refused"),
        },
    })
}

fn unreachable() -> Unreachable {
    Unreachable {
        options: SystemOptions::Pgmq(PgmqOptions {
            dsn: "postgres://u:hunter2@127.0.0.1:1/crossbench".into(),
            ..Default::default()
        }),
        secret: Some("hunter2"),
        hint: "scripts/provision/pgmq.sh",
    }
}

contract_suite! {
    mod pgmq {
        subject: fixture(),
        unreachable: unreachable(),
    }
}
