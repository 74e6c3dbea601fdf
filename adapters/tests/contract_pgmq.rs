//! The contract suite (tests/support/contract.rs) against PostgreSQL + pgmq on
//! 127.0.0.1:5432 (scripts/provision/pgmq.sh): skips when it is not there, fails
//! under `CI`.
#![cfg(feature = "pgmq")]

mod support;

use std::time::Duration;

use adapters::pgmq::PgmqOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{tool, Counts, Expected, Fixture, Lanes, Redelivery, Unreachable};

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
        witness,
    })
}

/// PostgreSQL's version, settings and pgmq's version through psql.
fn witness() -> Option<Expected> {
    let args = [
        "-h",
        "127.0.0.1",
        "-U",
        "postgres",
        "-d",
        "crossbench",
        "-At",
        "-c",
        "SHOW server_version",
        "-c",
        "SHOW fsync",
        "-c",
        "SHOW synchronous_commit",
        "-c",
        "SHOW autovacuum",
        "-c",
        "SHOW shared_buffers",
        "-c",
        "SELECT extversion FROM pg_extension WHERE extname = 'pgmq'",
    ];
    let out = tool("psql", &args)?;
    let l: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(l.len(), 6, "psql answered {out:?}");
    Some(Expected {
        path: format!("psql {}", args.join(" ")),
        version: Some(l[0].clone()),
        reported: vec![("pgmq_extversion".into(), l[5].clone())],
        settings: vec![
            ("fsync".into(), l[1].clone()),
            ("synchronous_commit".into(), l[2].clone()),
            ("autovacuum".into(), l[3].clone()),
            ("shared_buffers".into(), l[4].clone()),
        ],
        caveat: false,
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
