//! The contract suite (tests/support/contract.rs) against the control broker `mem`.
//! In-process: it always runs, and has no server to be unreachable.

mod support;

use adapters::mem::MemOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{Counts, Expected, Fixture, Lanes, Redelivery};

async fn fixture() -> Option<Fixture> {
    Some(Fixture {
        name: "mem".into(),
        options: SystemOptions::Mem(MemOptions::default()),
        prefix: "ct-mem-".into(),
        durability: Durability::Memory,
        redelivery: Redelivery::AtOnce { lease: None },
        lanes: Lanes::PerKey,
        counts: Counts {
            published: Some("mem_published"),
            copies: None,
            acked: Some("mem_acked"),
            refused: Some("mem_refused"),
        },
        witness,
    })
}

/// The control broker is crossbench itself: its version is the crate's.
fn witness() -> Option<Expected> {
    Some(Expected {
        path: "the crate's own version (CARGO_PKG_VERSION)".into(),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        ..Default::default()
    })
}

contract_suite! {
    mod mem {
        subject: fixture(),
    }
}
