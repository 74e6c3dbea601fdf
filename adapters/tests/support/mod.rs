//! What the adapter tests share: finding their server (skip when run by hand, fail
//! under `CI`, which the test command sets after provisioning), the recorder that
//! checks what a group processed, publishing, the contract suite every system's
//! `contract_<system>.rs` instantiates, and the raw-ratio tests' two sides (`raw`).
#![allow(dead_code, unused_imports)]

pub mod contract;
pub mod raw;
pub mod ready;
mod recorder;
mod services;
pub use recorder::*;
pub use services::{absent, queen_url, reachable};
