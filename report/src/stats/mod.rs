//! Statistics over repeated cells, in one small pure module (no I/O, no plotting),
//! as criterion keeps its `stats/`: a seeded generator ([`rng`]), the median and the
//! bootstrap confidence intervals of a median and of a ratio of two medians
//! ([`bootstrap`]), the paired sign-flip test of a shift and its exact bounds
//! ([`sign_flip`], the gate's), what an interval from a few repeats can claim
//! ([`coverage`]), counts of outcomes ([`outcomes`]) and Fisher's
//! exact test of two arms' rates of failing runs ([`fisher`]).
//!
//! One repeat's summary is one observation: a cell's p50 is one number of the sample,
//! never its per-message latencies (they are not independent of each other).

pub mod bootstrap;
pub mod coverage;
pub mod fisher;
pub mod outcomes;
pub mod rng;
pub mod sign_flip;

pub use bootstrap::{median, median_ci, ratio_ci, Interval, DEFAULT_RESAMPLES};
pub use fisher::fisher_greater;
pub use outcomes::Outcomes;
pub use rng::Rng;
pub use sign_flip::{smallest_p, SignFlip};
