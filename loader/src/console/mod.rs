//! What a person (or a dashboard) sees while and after a cell runs: the live
//! progress (one line and one `report.csv` row a second), the live metrics endpoint
//! that serves the same figures to a Prometheus, and the final summary.

pub mod live;
pub mod progress;
pub mod summary;
pub mod ticker;
