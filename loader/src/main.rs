//! `crossbench`: run a cell, verify a record.
//!
//! Exit codes: 0 PASS, 1 internal error, 2 bad input, 3 FAIL (correctness),
//! 4 VOID (the loader could not hold the schedule).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use loader::run::{default_out, run_cell, RunOptions};
use loader::scenario;

mod report_cli;

// The loader allocates on every batch; glibc's allocator showed up at ~15 % of a
// control-dense profile. mimalloc halves that (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Open-loop benchmark and correctness harness for message brokers.
#[derive(Debug, Parser)]
#[command(name = "crossbench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
    },
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
    Table(report_cli::TableArgs),
    /// A measured cell beside the published cell it reproduces (results/published/).
    Compare(report_cli::CompareArgs),
    /// Latency CDF, latency vs rate and per-cell time series, PNG and SVG.
    Plot(report_cli::PlotArgs),
    /// One self-contained HTML page with tables, plots, verdicts and links to the raw files.
    Report(report_cli::ReportArgs),
}

/// Bad input: exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadInput(String);

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match real_main(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<BadInput>().is_some()
                || e.downcast_ref::<scenario::ScenarioError>().is_some()
                || e.downcast_ref::<loader::systems::SystemError>().is_some()
                || e.downcast_ref::<checker::CheckError>().is_some()
                || e.downcast_ref::<report::ReportError>()
                    .is_some_and(report::ReportError::is_bad_input)
            {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn real_main(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run {
            scenario: path,
            sets,
            out,
            quiet,
            sampler,
        } => {
            let loaded = scenario::load(&path, &sets)?;
            // Fail on a system this build lacks before creating anything.
            loader::systems::check_available(&loaded.scenario)?;
            let out = out.unwrap_or_else(|| default_out(&loaded.scenario.name));
            // Two runs at once contaminate each other's figures: take the machine-wide
            // run lock, waiting for a run in progress to finish.
            let _lock = run_lock(quiet)?;
            prepare_out(&out)?;
            if loaded.scenario.workload == scenario::WorkloadKind::Stream {
                return run_stream(&loaded, path, out, quiet, sampler);
            }
            let threads = match loaded.scenario.threads {
                0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
                n => n as usize,
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
                .context("starting the runtime")?;
            let opts = RunOptions {
                argv: std::env::args().collect(),
                scenario_path: path,
                out,
                quiet,
                sampler_url: sampler,
            };
            let report = rt.block_on(run_cell(&loaded, &opts))?;
            rt.shutdown_timeout(std::time::Duration::from_secs(2));
            print!("{}", report.summary);
            Ok(report.outcome.exit_code())
        }
        Command::Sample { listen, targets } => {
            let mut specs = Vec::new();
            for (i, t) in targets.iter().enumerate() {
                let (label, spec) = scenario::split_target(t);
                let parsed: sampler::TargetSpec = spec
                    .parse()
                    .map_err(|e| BadInput(format!("--target {t}: {e}")))?;
                specs.push((
                    label.map_or_else(|| format!("target{i}"), str::to_string),
                    parsed,
                ));
            }
            let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
                BadInput(format!(
                    "--listen {listen}: expected host:port, e.g. 127.0.0.1:9464"
                ))
            })?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening on {addr}"))?;
                eprintln!("serving samples on http://{addr}/samples.csv (Ctrl-C stops)");
                sampler::serve(listener, sampler::SamplerConfig::new(specs), async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await
                .context("serving samples")
            })?;
            Ok(0)
        }
        Command::Verify {
            dir,
            allow_duplicates,
            prefix,
            json,
        } => {
            if !dir.is_dir() {
                return Err(BadInput(format!(
                    "{} is not a directory; give the cell (or reference log) directory",
                    dir.display()
                ))
                .into());
            }
            let opts = checker::VerifyOptions {
                allow_duplicates,
                legacy_prefix: prefix,
                ..Default::default()
            };
            let verdict = checker::verify_dir(&dir, &opts)?;
            print!("{}", verdict.render_table());
            if let Some(j) = json {
                let mut text = serde_json::to_string_pretty(&verdict)?;
                text.push('\n');
                std::fs::write(&j, text).with_context(|| format!("writing {}", j.display()))?;
            }
            Ok(if verdict.pass { 0 } else { 3 })
        }
        Command::Table(a) => report_cli::table(a),
        Command::Compare(a) => report_cli::compare(a),
        Command::Plot(a) => report_cli::plot(a),
        Command::Report(a) => report_cli::report(a),
    }
}

/// A stream scenario: one cell, or one per ladder rate under `out`, in one runtime.
/// Exit code: the worst outcome (FAIL over REFUSED over VOID over PASS).
fn run_stream(
    loaded: &scenario::Loaded,
    path: PathBuf,
    out: PathBuf,
    quiet: bool,
    sampler: Option<String>,
) -> anyhow::Result<i32> {
    use loader::run::Outcome;
    let threads = match loaded.scenario.threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n as usize,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let cells = loader::stream::cells(loaded, &out);
    let ladder = loaded
        .scenario
        .stream
        .as_ref()
        .map(|s| s.ladder.clone())
        .unwrap_or_default();
    let mut worst = Outcome::Pass;
    let mut rows = Vec::new();
    rt.block_on(async {
        let interrupt = tokio_util::sync::CancellationToken::new();
        {
            let interrupt = interrupt.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    interrupt.cancel();
                }
            });
        }
        for cell in &cells {
            if interrupt.is_cancelled() {
                break;
            }
            if cell.out != out {
                prepare_out(&cell.out)?;
            }
            let opts = RunOptions {
                argv: std::env::args().collect(),
                scenario_path: path.clone(),
                out: cell.out.clone(),
                quiet,
                sampler_url: sampler.clone(),
            };
            let report =
                loader::stream::cell::run_stream_cell(&cell.loaded, &opts, &ladder, &interrupt)
                    .await?;
            print!("{}", report.summary);
            worst = match (worst, report.outcome) {
                (Outcome::Fail, _) | (_, Outcome::Fail) => Outcome::Fail,
                (Outcome::Refused, _) | (_, Outcome::Refused) => Outcome::Refused,
                (Outcome::Void, _) | (_, Outcome::Void) => Outcome::Void,
                _ => Outcome::Pass,
            };
            rows.push(report.dir.clone());
        }
        anyhow::Ok(())
    })?;
    if !ladder.is_empty() {
        let table = loader::stream::ladder_table(&rows)?;
        std::fs::write(out.join("ladder.csv"), &table)
            .with_context(|| format!("writing {}", out.join("ladder.csv").display()))?;
        print!("\n=== LADDER {} ===\n{table}", out.display());
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(worst.exit_code())
}

/// Hold the machine-wide run lock (`$CROSSBENCH_LOCK` or /tmp/crossbench-run.lock)
/// until dropped.
fn run_lock(quiet: bool) -> anyhow::Result<std::fs::File> {
    let path = std::env::var_os("CROSSBENCH_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("crossbench-run.lock"));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening the run lock {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            if !quiet {
                eprintln!(
                    "waiting for another crossbench run to finish (lock {}): two runs at once would contaminate each other's figures",
                    path.display()
                );
            }
            f.lock()
                .with_context(|| format!("waiting for the run lock {}", path.display()))?;
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()));
        }
    }
    Ok(f)
}

fn prepare_out(out: &std::path::Path) -> anyhow::Result<()> {
    if out.exists() {
        let non_empty = std::fs::read_dir(out)
            .with_context(|| format!("reading {}", out.display()))?
            .next()
            .is_some();
        if non_empty {
            return Err(BadInput(format!(
                "--out {} exists and is not empty; choose a new directory (cells are never overwritten)",
                out.display()
            ))
            .into());
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    Ok(())
}
