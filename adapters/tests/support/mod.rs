//! What the adapter contract tests share: finding their server (skip when run by
//! hand, fail under `CI`, which the test command sets after provisioning), the
//! recorder that checks what a group processed, and publishing.
#![allow(dead_code, unused_imports)]

mod recorder;
mod services;
pub use recorder::*;
pub use services::{absent, queen_url, reachable};
