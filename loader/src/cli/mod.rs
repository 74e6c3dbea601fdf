//! The command line: what each subcommand takes and does. `main.rs` only parses,
//! dispatches here and maps the result to an exit code ([`exit::Exit`],
//! [`exit_of_error`]). The exit codes, the run lock and the signals are the runner's
//! ([`crate::workload::runner`]), below the campaigns that use them too.

pub mod campaign;
pub mod live;
pub mod merge;
pub mod report;
pub mod run;
pub mod sample;
pub mod selftest;
pub mod verify;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The exit codes (the runner's).
pub use crate::workload::runner::exit;
/// Bad input: exit 2 (the runner's).
pub use crate::workload::runner::BadInput;

use exit::Exit;

/// The exit a command's error maps to: [`Exit::of_error`] for the errors of the
/// runner and the layers below it, and bad input for a campaign file's error too.
pub fn exit_of_error(e: &anyhow::Error) -> Exit {
    if e.downcast_ref::<crate::campaign::file::CampaignError>()
        .is_some()
    {
        return Exit::BadInput;
    }
    Exit::of_error(e)
}

/// Open-loop benchmark and correctness harness for message brokers.
#[derive(Debug, Parser)]
#[command(name = "crossbench", version, about, long_about = None, after_help = Exit::help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one cell from a scenario file and leave its record in a directory.
    Run {
        /// Scenario YAML (see docs/scenarios.md).
        scenario: PathBuf,
        /// Override a scenario field by its dotted path, e.g. --set rate=2000 --set drain.max=30s.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Cell directory to create (default: runs/<name>-<UTC time>). Must not exist or be empty.
        #[arg(long)]
        out: Option<PathBuf>,
        /// No per-second lines.
        #[arg(long, short)]
        quiet: bool,
        /// Pull samples from a remote `crossbench sample` at the end (http://host:port).
        #[arg(long, value_name = "URL")]
        sampler: Option<String>,
        /// After Ctrl-C or SIGTERM, drain for at most this long (e.g. 10s), then verify
        /// and record the cell as INTERRUPTED.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        interrupt_drain: String,
        /// Several loaders, one cell: this loader's index J (0..N-1; default
        /// JOB_COMPLETION_INDEX). It owns the properties p with p mod N = J.
        #[arg(long, value_name = "J")]
        loader_index: Option<u64>,
        /// Several loaders, one cell: the number of loaders N (loaders.count).
        #[arg(long, value_name = "N")]
        loader_count: Option<u64>,
        /// Loader 0's rendezvous, http://host:port, the same on every loader
        /// (loaders.rendezvous).
        #[arg(long, value_name = "URL")]
        rendezvous: Option<String>,
        /// Where loader 0 listens for the rendezvous (default: the --rendezvous address),
        /// e.g. 0.0.0.0:7070 in a pod.
        #[arg(long, value_name = "HOST:PORT")]
        rendezvous_listen: Option<String>,
        #[command(flatten)]
        live: live::LiveArgs,
    },
    /// Merge the records of several loaders of one cell into one cell (SPEC.md §10).
    Merge {
        /// Each loader's cell directory.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The merged cell's directory (must not exist or be empty).
        #[arg(long)]
        out: PathBuf,
        /// No table on stdout.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run a campaign: a matrix of cells, repeated, interleaved (docs/campaigns.md).
    Campaign(campaign::CampaignArgs),
    /// Find the highest rate a system holds: log-scale bisection, repeats at the boundary.
    Ceiling(campaign::CeilingArgs),
    /// Check the published findings against a findings campaign (docs/findings.md).
    Findings(campaign::FindingsArgs),
    /// The CI regression gate: a baseline and a candidate in ABBA pairs (docs/gate.md).
    Gate(campaign::GateArgs),
    /// Serve 1 Hz resource samples of this machine over HTTP, for `run --sampler`.
    Sample {
        /// Address to listen on, e.g. 127.0.0.1:9464.
        #[arg(long, default_value = "127.0.0.1:9464")]
        listen: String,
        /// Targets, `label=spec` or `spec` (proc:postgres, pid:123, cgroup:/path, container:id, postgres:dsn).
        #[arg(long = "target", value_name = "TARGET")]
        targets: Vec<String>,
    },
    /// Re-verify a cell directory offline (ours or the reference harness's).
    Verify {
        /// Cell or log directory.
        dir: PathBuf,
        /// Accept duplicates (at-least-once delivery declared acceptable).
        #[arg(long)]
        allow_duplicates: bool,
        /// Topic prefix used by a reference-harness run.
        #[arg(long, default_value = "")]
        prefix: String,
        /// Write the verdict as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Cost-to-serve, ceiling and cardinality tables from cell records (docs/report.md).
    Table(report::TableArgs),
    /// A measured cell beside the published cell it reproduces (results/published/).
    Compare(report::CompareArgs),
    /// Latency CDF, latency vs rate and per-cell time series, PNG and SVG.
    Plot(report::PlotArgs),
    /// One self-contained HTML page with tables, plots, verdicts and links to the raw files.
    Report(report::ReportArgs),
    /// Measure crossbench itself (the floor of a cell's work; docs/performance.md).
    Selftest(selftest::SelftestArgs),
}

/// Run a parsed command line.
pub fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Run {
            scenario,
            sets,
            out,
            quiet,
            sampler,
            interrupt_drain,
            loader_index,
            loader_count,
            rendezvous,
            rendezvous_listen,
            live,
        } => {
            let _endpoint = live.start()?;
            let interrupt_drain = adapters::duration_text::parse_duration(&interrupt_drain)
                .map_err(|e| {
                    BadInput(format!(
                        "--interrupt-drain {interrupt_drain}: {e} (write e.g. 10s)"
                    ))
                })?;
            let req = run::RunRequest {
                scenario,
                sets,
                out,
                quiet,
                sampler,
                timing: crate::pacing::pacer::Timing::Real,
                argv: std::env::args().collect(),
                interrupt_drain,
                loaders: crate::fleet::LoaderFlags {
                    index: loader_index,
                    count: loader_count,
                    rendezvous,
                    listen: rendezvous_listen,
                },
            };
            Ok(run::execute(&req)?.exit)
        }
        Command::Merge { dirs, out, quiet } => merge::command(&dirs, &out, quiet),
        Command::Campaign(a) => campaign::campaign(a),
        Command::Ceiling(a) => campaign::ceiling(a),
        Command::Findings(a) => campaign::findings(a),
        Command::Gate(a) => campaign::gate(a),
        Command::Sample { listen, targets } => sample::serve(&listen, &targets),
        Command::Verify {
            dir,
            allow_duplicates,
            prefix,
            json,
        } => verify::verify(&dir, allow_duplicates, prefix, json.as_deref()),
        Command::Table(a) => report::table(a),
        Command::Compare(a) => report::compare(a),
        Command::Plot(a) => report::plot(a),
        Command::Report(a) => report::report(a),
        Command::Selftest(a) => selftest::selftest(a),
    }
}
