//! The contract suite (tests/support/contract.rs) against a Queen server, in its three
//! pop modes. Needs `CROSSBENCH_QUEEN_URL` (see compose/queen/README.md); without it
//! every case that needs the server skips with a message, also under `CI` (CI cannot
//! provision Queen). The unreachable-server case needs no server and always runs.
#![cfg(feature = "queen")]

mod support;

use std::time::Duration;

use adapters::queen::{PopMode, QueenOptions};
use adapters::{Durability, SystemOptions};
use support::contract::{tool, Counts, Expected, Fixture, Lanes, Redelivery, Unreachable};

/// Long next to the suite's waits: a refused batch that waited for it would show.
const LEASE: Duration = Duration::from_secs(30);

async fn fixture(mode: PopMode) -> Option<Fixture> {
    let url = support::queen_url(&format!("contract_queen ({})", mode.name()))?;
    // Topic names unique per run, so runs never see each other's leftovers.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 1_000_000_000;
    Some(Fixture {
        name: format!("queen {}", mode.name()),
        options: SystemOptions::Queen(QueenOptions {
            url,
            mode,
            lease_time: LEASE,
            long_poll: Duration::from_millis(500),
            sweep_floor: Duration::from_millis(10),
            // Auto-ack allows one pop loop per stream (it releases partitions at pop).
            pop_workers: if mode == PopMode::AutoAck { 1 } else { 3 },
            partitions_per_pop: 3,
            ..Default::default()
        }),
        prefix: format!("ct-{}-{run}-", mode.name()),
        durability: Durability::Default,
        redelivery: Redelivery::AtOnce { lease: Some(LEASE) },
        lanes: Lanes::LaneBatches,
        counts: Counts {
            published: Some("queen_messages_pushed"),
            copies: None,
            acked: Some("queen_acked"),
            refused: Some("queen_refused_messages"),
        },
        witness,
    })
}

/// `/health`'s version through curl; "1.0.0" (what 0.15.1 answers too) must carry the
/// caveat.
fn witness() -> Option<Expected> {
    let url = std::env::var("CROSSBENCH_QUEEN_URL").ok()?;
    let health = format!("{}/health", url.trim().trim_end_matches('/'));
    let body = tool("curl", &["-s", "-m", "10", &health])?;
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{health} answered {body:?}: {e}"));
    let version = v["version"].as_str().map(str::to_string);
    Some(Expected {
        path: format!("curl {health}"),
        caveat: version.as_deref() == Some("1.0.0"),
        version,
        ..Default::default()
    })
}

/// The connection does not depend on the pop mode: checked once.
fn unreachable() -> Unreachable {
    Unreachable {
        options: SystemOptions::Queen(QueenOptions {
            url: "http://127.0.0.1:1".into(),
            token: Some("hush-hush".into()),
            ..Default::default()
        }),
        secret: Some("hush-hush"),
        hint: "compose/queen/README.md",
    }
}

contract_suite! {
    mod queen_wildcard {
        subject: fixture(PopMode::Wildcard),
        unreachable: unreachable(),
    }
}

contract_suite! {
    mod queen_targeted {
        subject: fixture(PopMode::Targeted),
    }
}

contract_suite! {
    mod queen_auto_ack {
        subject: fixture(PopMode::AutoAck),
        // known: auto-ack is at-most-once by design (the server commits at pop, and the
        // description says DeliveryGuarantee::AtMostOnce): a refused batch is lost, so
        // the cases that refuse batches cannot pass in this mode.
        known: {
            refused_batch_is_redelivered: "known: queen auto-ack commits at pop (at-most-once, declared in its description); a refused batch is lost",
            counters_are_consistent: "known: queen auto-ack commits at pop (at-most-once, declared in its description); the refused batches are lost",
        },
    }
}
