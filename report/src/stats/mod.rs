//! Statistics over repeated cells, in one small pure module (no I/O, no plotting),
//! as criterion keeps its `stats/`: a seeded generator ([`rng`]), the median and the
//! bootstrap confidence intervals of a median and of a ratio of two medians
//! ([`bootstrap`]), a randomization test of a difference of medians
//! ([`permutation`]) and counts of outcomes ([`outcomes`]).
//!
//! One repeat's summary is one observation: a cell's p50 is one number of the sample,
//! never its per-message latencies (they are not independent of each other).

pub mod bootstrap;
pub mod outcomes;
pub mod permutation;
pub mod rng;

pub use bootstrap::{median, median_ci, ratio_ci, Interval, DEFAULT_RESAMPLES};
pub use outcomes::Outcomes;
pub use permutation::permutation_p;
pub use rng::Rng;
