//! crossbench's loader: scenario, plan, pacer, stages, recorder and reports.
//!
//! The binary `crossbench` is a thin CLI over this library.

pub mod counters;
pub mod drain;
pub mod histograms;
pub mod metrics;
pub mod paced;
pub mod plan;
pub mod priority;
pub mod producer;
pub mod rated;
pub mod record;
pub mod report;
pub mod retry;
pub mod run;
pub mod sampling;
pub mod scenario;
pub mod schedule;
pub mod selector;
pub mod stage;
pub mod stamp;
pub mod stream;
pub mod streamlog;
pub mod summary;
pub mod systems;
pub mod ticker;
pub mod topology;
pub mod void_rule;
pub mod wind_down;
