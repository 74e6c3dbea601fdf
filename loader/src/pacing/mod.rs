//! The open-loop machinery, the same for every workload: the schedule (when each
//! slot is due), the pacer that releases slots on time without ever waiting for the
//! system, the priority its thread asks for, the publish-until-accepted loop, and the
//! work timer that times every stage's simulated work, and the sub-millisecond timer
//! inside the runtime that either can be driven by; the doorbell through which a
//! pacer's own thread hands its slots into the runtime; and a test's failpoint that
//! stalls the pacer.

pub mod doorbell;
pub mod failpoint;
pub mod fd_timer;
pub mod pacer;
pub mod priority;
pub mod retry;
pub mod schedule;
pub mod work_timer;
