//! `crossbench selftest`: measurements of crossbench itself, not of a system.
//!
//! `selftest floor` is the floor of control-dense's work without crossbench: what a
//! bare tokio program, built like the cells (this binary: the same allocator, the same
//! tokio, a runtime of the same two workers), costs per message when it does only
//! what every delivery of the cell must do. At `--rate` messages/s (control-dense's
//! 72 000 deliveries/s) for `--secs`, a ticker task releases `rate/1000` messages
//! every millisecond; each message is one spawned task that sleeps its simulated work
//! (uniform 10–30 ms, one tokio timer), then records one HdrHistogram value and
//! appends one `<key>,<seq>` line to a buffered file, both under a mutex. No broker,
//! no pacer thread, no checker, no sampling. It prints the process's CPU time per
//! message, to set beside a cell's `loader.cpu_us_per_delivery`
//! (docs/performance.md).
//!
//! `selftest verify` times the checker as a user meets it: it writes a clean cell of
//! the reference's 12 stream logs (`checker::synth`, `--lines` lines over `--props`
//! properties, in the reference's `produced.meta` format by default), then runs this
//! binary's `crossbench verify <cell>` `--runs` times as a child process, so every
//! figure counts the process's start, the file reads and the verdict, and prints the
//! lines per second of each run with their median, beside `verify_dir` called in
//! this process on the same files (what the checker's own bench measures).
//!
//! `selftest tax` is the harness tax of one adapter: [`tax`].
//!
//! `selftest gate-power` simulates the gate's statistics with the noise of real A/A
//! records, no cells ([`gate_power`], docs/gate.md).
//!
//! `selftest race` races a system's bare grouped reads without its adapter's guard
//! and counts exclusivity breaches ([`race`], finding F3 as the seed ran it).
//!
//! `selftest stalls` is the host probe a campaign runs first: does this machine stall
//! a guest whose cores are all busy ([`stalls`], `crate::record::host_stalls`).

pub mod floor;
pub mod gate_power;
pub mod race;
pub mod stalls;
pub mod tax;
pub mod verify;

use clap::{Args, Subcommand};

use crate::cli::exit::Exit;

#[derive(Debug, Args)]
pub struct SelftestArgs {
    #[command(subcommand)]
    pub what: Selftest,
}

#[derive(Debug, Subcommand)]
pub enum Selftest {
    /// The floor of control-dense's work in a bare tokio program: CPU µs per message.
    Floor {
        /// Messages per second.
        #[arg(long, default_value_t = 72_000)]
        rate: u64,
        /// How long to run, in seconds.
        #[arg(long, default_value_t = 20)]
        secs: u64,
    },
    /// `crossbench verify` of a synthetic clean cell, as a child process: lines/s.
    Verify {
        /// Lines over the 12 logs.
        #[arg(long, default_value_t = 24_000_000)]
        lines: u64,
        /// Properties (keys), interleaved round-robin in every log.
        #[arg(long, default_value_t = 1000)]
        props: u64,
        /// Timed runs of each kind.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Where the cell is written (a fresh directory under it, removed at the end).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// The crossbench v1 `produced.meta` instead of the reference's.
        #[arg(long)]
        crossbench_meta: bool,
    },
    /// The harness tax of one adapter: loader CPU µs per delivery of a crossbench
    /// cell against the system's bare client loop, same broker, rate and shape.
    Tax(tax::TaxArgs),
    /// The gate's false-alarm and detection rates, simulated (no cells) with the
    /// noise of the A/A records under results/gates (docs/gate.md).
    GatePower(gate_power::GatePowerArgs),
    /// Concurrent bare readers of a system's grouped read, without its adapter's
    /// guard: exclusivity breaches per 90 s (finding F3, docs/performance.md).
    Race(race::RaceArgs),
    /// Does this host stall a busy machine? Every core kept busy while a thread times
    /// 1 ms sleeps (the probe a campaign runs before its first cell).
    Stalls {
        /// Seconds per probe.
        #[arg(long, default_value_t = 15)]
        secs: u64,
        /// Probes, one after the other.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// One JSON object per probe instead of a line.
        #[arg(long)]
        json: bool,
    },
}

pub fn selftest(a: SelftestArgs) -> anyhow::Result<Exit> {
    match a.what {
        Selftest::Floor { rate, secs } => floor::floor(rate, secs),
        Selftest::Verify {
            lines,
            props,
            runs,
            dir,
            crossbench_meta,
        } => verify::verify(lines, props, runs, dir, crossbench_meta),
        Selftest::Tax(a) => tax::tax(a),
        Selftest::GatePower(a) => gate_power::gate_power(a),
        Selftest::Race(a) => race::race(a),
        Selftest::Stalls { secs, runs, json } => stalls::stalls(secs, runs, json),
    }
}
