//! The open-loop machinery, the same for every workload: the schedule (when each
//! slot is due), the pacer that releases slots on time without ever waiting for the
//! system, the priority its thread asks for, the publish-until-accepted loop, and the
//! work timer that times every stage's simulated work.

pub mod pacer;
pub mod priority;
pub mod retry;
pub mod schedule;
pub mod work_timer;
