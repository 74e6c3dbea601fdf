//! The record of a cell: everything a run leaves in its directory.

pub mod host;
pub mod invocation;
pub mod meta;
pub mod redact;
pub mod refused;
pub mod result;
