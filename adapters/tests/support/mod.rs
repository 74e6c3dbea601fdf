//! What the adapter tests share: finding their server (skip when run by hand, fail
//! under `CI`, which the test command sets after provisioning), the recorder that
//! checks what a group processed, publishing, and the contract suite every system's
//! `contract_<system>.rs` instantiates.
#![allow(dead_code, unused_imports)]

pub mod contract;
pub mod ready;
mod recorder;
mod services;
pub use recorder::*;
pub use services::{absent, queen_url, reachable};
