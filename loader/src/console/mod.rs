//! What a person sees while and after a cell runs: the live progress (one line and
//! one `report.csv` row a second) and the final summary.

pub mod progress;
pub mod summary;
pub mod ticker;
