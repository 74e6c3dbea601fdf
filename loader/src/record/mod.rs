//! The record of a cell: every file a run leaves in its directory, and how each is
//! written (secrets redacted, versions stated).

pub mod host;
pub mod host_stalls;
pub mod incomplete;
pub mod invocation;
pub mod redact;
pub mod refused;
pub mod result;
pub mod stream_log;
