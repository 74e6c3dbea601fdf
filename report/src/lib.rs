//! Tables, comparisons with published cells, plots and an HTML report, all built
//! from cell records (`result.json`, `samples.csv`, `report.csv`, `e2e.hlog`) and
//! from the published cells kept as data under `results/published/`.
//!
//! Formats: docs/report.md (what each output contains and its version marker) and
//! results/published/README.md (the published-cell files).

pub mod campaign;
pub mod cardinality;
pub mod ceiling;
pub mod cell;
pub mod commands;
pub mod comparability;
pub mod compare;
pub mod cost_table;
pub mod error;
pub mod faults_table;
pub mod findings;
pub mod fit;
pub mod format;
pub mod gate;
pub mod gate_power;
pub mod html;
pub mod latency_log;
pub mod per_second;
pub mod plot;
pub mod published;
pub mod reproducing;
pub mod samples;
pub mod stats;
pub mod table;

pub use cell::CellRecord;
pub use error::ReportError;
pub use published::PublishedCell;
pub use table::Table;

/// Version of every generated output (tables, comparisons, the HTML page): written
/// into each as `crossbench report v1` so a reader can tell which layout it holds.
pub const OUTPUT_VERSION: u32 = 1;
