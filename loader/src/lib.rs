//! crossbench's loader: the `crossbench` binary is a thin `main.rs` over this
//! library.
//!
//! The arrows run one way, from the top of this list down:
//! - [`cli`]: the subcommands;
//! - [`campaign`]: matrices of repeated cells, interleaved, and the ceiling search;
//! - [`workload`]: the channel-manager pipeline and the stream workload, and the
//!   runner every command runs its cells through (the run lock, the signals, the
//!   runtime, the exit codes);
//! - [`cell`]: the life of one cell, the same for every workload;
//! - [`fleet`]: several loaders, one cell: shares, the rendezvous, the merge;
//! - [`console`]: the live progress, the live metrics endpoint
//!   (`--metrics-listen`) and the final summary;
//! - [`record`]: every file a cell leaves;
//! - [`pacing`]: the open-loop schedule and pacer;
//! - [`measure`]: the cell's clock, counters, histograms and rated window, and the
//!   resource sampler beside every cell;
//! - [`scenario`]: the scenario file, validated.
//!
//! Nothing in `cell`, `pacing` or `measure` names a workload, and no module names a
//! system: systems are the adapters' registry's business.

pub mod campaign;
pub mod cell;
pub mod cli;
pub mod console;
pub mod fleet;
pub mod measure;
pub mod pacing;
pub mod record;
pub mod scenario;
pub mod workload;
