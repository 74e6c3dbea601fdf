//! The contract suite (tests/support/contract.rs) against the control broker `mem`.
//! In-process: it always runs, and has no server to be unreachable.

mod support;

use adapters::mem::MemOptions;
use adapters::{Durability, SystemOptions};
use support::contract::{Counts, Fixture, Lanes, Redelivery};

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
    })
}

contract_suite! {
    mod mem {
        subject: fixture(),
    }
}
