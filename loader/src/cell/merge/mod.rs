//! `crossbench merge <loader dirs…> --out DIR`: the records of the loaders of one cell
//! made one cell (SPEC.md §10), which `verify`, `table`, `compare`, `report`,
//! campaigns and the gate read like any other.
//!
//! - Stream logs: each stream's logs merged by commit time, stable per loader
//!   ([`logs`]); the lines keep their loader and time, so the checker counts
//!   hand-offs between loaders.
//! - `produced.meta`: the union of the loaders' ([`meta`]), with a `# fleet` line.
//! - The verdict: the checker's, on the merged logs against the merged meta. A gap
//!   names the loader that produced the key and the loaders whose logs delivered it.
//! - Histograms: per interval, added ([`crate::fleet::hlog`]); every summary of
//!   `result.json` from the sum of the loaders' whole-run histograms of its path
//!   (`totals.hlog`), never from their percentiles.
//! - Counters added, rates over the window added, fractions recomputed
//!   ([`result`]); `samples.csv`: loader 0's rows as it sampled them, then every other
//!   loader's rows with `@l<J>` after their target; `report.csv`: counts added per
//!   second, each percentile the worst loader's of that second.
//! - `result.json` has a `loaders` section with every loader's own figures, and the
//!   clocks: latency between loaders on different hosts is only as good as their
//!   clocks, so it is reported apart (`e2e_*_cross_host`) and marked untrusted when a
//!   bound is unknown or above 1 ms.
//!
//! The command around it (`crate::cli::merge`) maps what comes out to an exit code:
//! `crossbench run`'s for the merged cell, and 2 for [`MergeError`]s that are the
//! user's (records that are not the loaders of one cell, or not records at all).

pub mod loaders;
pub mod logs;
pub mod meta;
pub mod result;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cell_record::CellResult;
use serde_json::{json, Value};

use crate::cell::Outcome;
use crate::fleet::hlog::{merge_logs, params, HlogError};
pub use loaders::read_loaders;
use loaders::{clocks, Loader};
use result::{put_summary, sum_numbers, Judged, MergedFigures, Sums};

/// Why loaders' records cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Hlog(#[from] HlogError),
    /// The record of an abandoned cell could not be written.
    #[error("{0:#}")]
    Write(anyhow::Error),
}

impl MergeError {
    pub fn io(path: &Path, source: std::io::Error) -> MergeError {
        MergeError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether it is the user's to fix (wrong directories, records that are not one
    /// cell's loaders), not the machine's (a file that could not be read or written).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, MergeError::Io { .. } | MergeError::Write(_))
    }
}

/// The record of a cell one of whose loaders gave it up.
fn abandoned(loaders: &[Loader], out: &Path) -> Result<Merged, MergeError> {
    let first = loaders.iter().find_map(Loader::abandonment);
    let l0 = &loaders[0];
    let b0 = l0.block();
    let v = json!({
        "schema_version": crate::record::result::SCHEMA_VERSION,
        "crossbench": crate::record::result::BuildInfo::current(),
        "cell": l0.rec.cell,
        "outcome": Outcome::Abandoned,
        "system": l0.rec.system,
        "workload": l0.carried.workload,
        "abandoned": first,
        "loaders": {
            "count": loaders.len(),
            "topology": b0.and_then(|b| b.topology.as_ref()),
            "rendezvous": b0.and_then(|b| b.rendezvous.as_ref()),
            "merged_from": loaders.iter().map(|l| l.dir.display().to_string()).collect::<Vec<_>>(),
            "loaders": loaders.iter().map(|l| json!({
                "index": l.index,
                "outcome": l.rec.outcome,
                "abandoned": l.abandonment(),
            })).collect::<Vec<_>>(),
        },
    });
    crate::record::result::write_result(out, &v).map_err(MergeError::Write)?;
    let why = first.map(|a| &a.typed);
    let text = format!(
        "\n=== MERGED  cell={}  {} loaders ===\nOUTCOME: ABANDONED  loader {} failed at {}: {}\n",
        l0.rec.cell,
        loaders.len(),
        why.map_or_else(|| "null".to_string(), |a| a.loader.to_string()),
        why.map_or("", |a| a.stage.as_str()),
        why.map_or("", |a| a.why.as_str())
    );
    Ok(Merged {
        outcome: Outcome::Abandoned,
        held: false,
        summary: text,
    })
}

/// The loaders' records ([`read_loaders`]) made one cell in `out`: the merged cell's
/// record, or, when a loader gave the cell up, the record of an abandoned cell.
pub fn merge_into(loaders: &[Loader], out: &Path) -> Result<Merged, MergeError> {
    if loaders.iter().any(|l| l.rec.outcome == Outcome::Abandoned) {
        return abandoned(loaders, out);
    }
    merge(loaders, out)
}

/// What a merge made.
#[derive(Debug)]
pub struct Merged {
    /// The merged cell's outcome.
    pub outcome: Outcome,
    /// Whether it held its load (or was exploratory, where holding is not asked).
    pub held: bool,
    /// What a person reads: the merged cell's summary.
    pub summary: String,
}

/// What the merged logs say: the lines each loader's logs gave, and per stream which
/// loaders' logs delivered each key (a bit per loader).
struct LogsMerged {
    per_loader_lines: Vec<u64>,
    delivered_by: BTreeMap<String, HashMap<u64, u64>>,
}

/// The clocks' verdict ([`clocks`]).
struct Clocks {
    trusted: bool,
    note: String,
}

/// The phases: the loaders' meta and logs merged, the merged logs verified, the
/// histograms and counters added, the figures summed and judged, the record written.
fn merge(loaders: &[Loader], out: &Path) -> Result<Merged, MergeError> {
    let topology = loaders[0].topology();
    let (trusted, note) = clocks(loaders);
    let clocks = Clocks { trusted, note };
    let metas = merge_meta(loaders, out, &topology, clocks.trusted)?;
    let logs = merge_stream_logs(loaders, &metas, out)?;
    let mut warnings: Vec<String> = Vec::new();
    let verdict = verify(loaders, out, &logs, &mut warnings)?;
    let mut merged_result = loaders[0].raw.clone();
    add_histograms(loaders, &metas, out, &mut merged_result)?;
    add_counters(loaders, &metas[0], &mut merged_result);
    // Loader 0's record with its counters and summaries added, read typed.
    let added = CellResult::from_value(&out.join("result.json"), merged_result.clone())
        .map_err(|e| MergeError::Input(format!("the merged record: {e}")))?;
    let sums = Sums::of(loaders, &added, &topology);
    let judged = judge(loaders, &added, &sums, verdict, &clocks, warnings);
    let figures = MergedFigures {
        loaders: loaders_block(loaders, &topology, &logs, &clocks),
        cost_note: loaders[0].rec.cost.is_some(),
        sums,
        judged,
    };
    figures.write(&mut merged_result);
    crate::record::result::write_result(out, &merged_result)
        .map_err(|e| MergeError::Input(format!("{e:#}")))?;

    samples(loaders, out)?;
    report_csv(loaders, out)?;
    invocation(loaders, out)?;

    let j = &figures.judged;
    let (outcome, held) = (j.outcome, j.load.held || j.load.exploratory);
    let summary = summary(loaders, out, &topology, &logs, &clocks, &figures, &added);
    Ok(Merged {
        outcome,
        held,
        summary,
    })
}

/// `produced.meta`: the loaders', parsed, and their union written to `out`.
fn merge_meta(
    loaders: &[Loader],
    out: &Path,
    topology: &str,
    trusted: bool,
) -> Result<Vec<meta::LoaderMeta>, MergeError> {
    let metas: Vec<meta::LoaderMeta> = loaders
        .iter()
        .map(|l| {
            let path = l.dir.join("produced.meta");
            let text = std::fs::read_to_string(&path).map_err(|e| MergeError::io(&path, e))?;
            let produced = checker::parse_produced(&text, &path).map_err(|e| MergeError::Bad {
                path: path.clone(),
                message: e.to_string(),
            })?;
            Ok(meta::LoaderMeta {
                loader: l.index as u32,
                path,
                produced,
            })
        })
        .collect::<Result<_, MergeError>>()?;
    let meta_text = meta::merge(&metas, topology, trusted)?;
    let meta_path = out.join("produced.meta");
    std::fs::write(&meta_path, &meta_text).map_err(|e| MergeError::io(&meta_path, e))?;
    Ok(metas)
}

/// Stream logs, stream by stream, each under the cell's name of the stream.
fn merge_stream_logs(
    loaders: &[Loader],
    metas: &[meta::LoaderMeta],
    out: &Path,
) -> Result<LogsMerged, MergeError> {
    let mut delivered_by = BTreeMap::new();
    let mut per_loader_lines = vec![0u64; loaders.len()];
    for st in &metas[0].produced.streams {
        let canonical = metas[0].canonical(&st.name);
        let inputs: Vec<(u32, PathBuf)> = metas
            .iter()
            .zip(loaders)
            .map(|(m, l)| {
                let own = m
                    .produced
                    .streams
                    .iter()
                    .find(|s| m.canonical(&s.name) == canonical)
                    .map_or_else(|| canonical.clone(), |s| s.name.clone());
                (m.loader, l.dir.join(format!("{own}.log")))
            })
            .collect();
        let stats = logs::merge_stream(&inputs, &out.join(format!("{canonical}.log")))?;
        for (j, c) in stats.per_loader.iter().enumerate() {
            per_loader_lines[j] += c;
        }
        delivered_by.insert(canonical, stats.delivered_by);
    }
    Ok(LogsMerged {
        per_loader_lines,
        delivered_by,
    })
}

/// The verdict on the merged logs. A gap names its key's producer and the loaders
/// whose logs delivered the key (a note in the verdict and a warning).
fn verify(
    loaders: &[Loader],
    out: &Path,
    logs: &LogsMerged,
    warnings: &mut Vec<String>,
) -> Result<checker::Verdict, MergeError> {
    let n = loaders.len() as u64;
    let mut verdict = checker::verify_dir(
        out,
        &checker::VerifyOptions {
            allow_duplicates: loaders[0].rec.accepts_duplicates(),
            ..Default::default()
        },
    )
    .map_err(|e| MergeError::Input(format!("verifying the merged logs: {e}")))?;
    for sv in &verdict.streams {
        for g in sv.gap_examples.iter().take(5) {
            let by = logs
                .delivered_by
                .get(&sv.name)
                .and_then(|m| m.get(&g.prop))
                .map(|b| logs::loaders_of(*b))
                .unwrap_or_default();
            let note = format!(
                "note: {}: {g} missing; key {} is produced by loader {}, and this stream's deliveries of it came from {}",
                sv.name,
                g.prop,
                crate::fleet::Share::owner_of(g.prop, n),
                if by.is_empty() {
                    "no loader".to_string()
                } else {
                    format!(
                        "loader{} {}",
                        if by.len() > 1 { "s" } else { "" },
                        by.iter().map(|j| j.to_string()).collect::<Vec<_>>().join(", ")
                    )
                }
            );
            verdict.reasons.push(note.clone());
            warnings.push(note.trim_start_matches("note: ").to_string());
        }
    }
    Ok(verdict)
}

/// Histograms: every summary of the record from the sum of the loaders' whole-run
/// histograms of its path (`totals.hlog`), then the per-second logs added.
fn add_histograms(
    loaders: &[Loader],
    metas: &[meta::LoaderMeta],
    out: &Path,
    merged: &mut Value,
) -> Result<(), MergeError> {
    let totals: Vec<BTreeMap<String, hdrhistogram::Histogram<u64>>> = loaders
        .iter()
        .map(|l| crate::fleet::totals::read(&l.dir.join("totals.hlog")))
        .collect::<Result<_, HlogError>>()?;
    let mut shape: Option<(u64, u64, u8)> = None;
    for (l, t) in loaders.iter().zip(&totals) {
        for h in t.values() {
            let p = params(h);
            match shape {
                None => shape = Some(p),
                Some(s) if s != p => {
                    return Err(MergeError::Bad {
                        path: l.dir.join("totals.hlog"),
                        message: format!("histogram parameters {p:?} differ from another loader's {s:?}: histograms of different shapes cannot be added"),
                    })
                }
                Some(_) => {}
            }
        }
    }
    let records: Vec<&Value> = loaders.iter().map(|l| &l.raw).collect();
    for tag in result::common_tags(&totals) {
        let mut sum = totals[0][&tag].clone();
        for t in &totals[1..] {
            sum.add(&t[&tag])
                .map_err(|e| MergeError::Input(format!("adding {tag}: {e:?}")))?;
        }
        put_summary(merged, &records, &tag, &sum);
    }
    for name in ["e2e.hlog", "schedule-lag.hlog", "entry-age.hlog"] {
        let paths: Vec<PathBuf> = loaders.iter().map(|l| l.dir.join(name)).collect();
        if paths.iter().all(|p| p.exists()) {
            // Stream tags without a partitioned loader's namespace.
            merge_logs(
                &paths,
                &out.join(name),
                &format!(
                    "crossbench interval log, {} loaders added per second",
                    loaders.len()
                ),
                &|j, tag| metas[j].canonical(tag),
            )?;
        }
    }
    Ok(())
}

/// Counters: every numeric leaf of `flows`, `broker_stats` and each stream added
/// (the fields the typed reader does not know too); each stream under the cell's
/// name of it.
fn add_counters(loaders: &[Loader], meta0: &meta::LoaderMeta, merged: &mut Value) {
    let records: Vec<&Value> = loaders.iter().map(|l| &l.raw).collect();
    for path in ["flows", "broker_stats"] {
        sum_numbers(merged, &records, path, &[]);
    }
    let stream_skip = ["entry_age_ms", "barrier_ms", "push_ms", "lane_budget_note"];
    for (i, st) in loaders[0].rec.streams.iter().enumerate() {
        sum_numbers(merged, &records, &format!("streams.{i}"), &stream_skip);
        // The stream's name, without a partitioned loader's namespace.
        if let Some(name) = &st.stream {
            result::set(
                merged,
                &format!("streams.{i}.stream"),
                json!(meta0.canonical(name)),
            );
        }
    }
}

/// The load rule, the clocks, the outcome and the warnings of the merged cell.
/// `added` is loader 0's record with the loaders' counters and summaries added.
fn judge(
    loaders: &[Loader],
    added: &CellResult,
    sums: &Sums,
    verdict: checker::Verdict,
    clocks: &Clocks,
    mut warnings: Vec<String>,
) -> Judged {
    let r0 = &loaders[0].rec;
    let held_rule = crate::scenario::HeldRule {
        served: r0
            .load
            .as_ref()
            .map_or(cell_record::held::SERVED_MIN, |l| l.served_min),
        exploratory: r0.load.as_ref().is_some_and(|l| l.exploratory),
    };
    let flow = |f: &str| added.flows.get(f).cloned().unwrap_or_default();
    let (a, b) = (flow("A"), flow("B"));
    let served_in_window = match sums.served {
        Some((_, window)) => window,
        None => added.throughput.window_served_fraction.unwrap_or(0.0),
    };
    let load = crate::cell::load_rule::verdict(
        &held_rule,
        &crate::cell::load_rule::LoadFacts {
            served_in_window,
            failed: (a.failed as f64 + b.failed as f64) as u64,
            shed: (a.shed_backpressure as f64 + b.shed_backpressure as f64) as u64,
            unit: "events",
            // Every loader wrote one of the names; any other gives no reason, as before.
            drain: crate::cell::drain::DrainEnd::from_name(&sums.drain_outcome)
                .unwrap_or(crate::cell::drain::DrainEnd::Grace),
        },
    );
    let clock_figures = latency_between_hosts(added, clocks, &mut warnings);
    let outcome = if loaders
        .iter()
        .any(|l| l.rec.outcome == Outcome::Interrupted)
    {
        Outcome::Interrupted
    } else {
        crate::cell::void_rule::outcome(verdict.pass, sums.identity_holds, &sums.void_reasons)
    };
    for l in loaders {
        for w in &l.rec.warnings {
            warnings.push(format!("loader {}: {w}", l.index));
        }
    }
    Judged {
        load,
        clocks: clock_figures,
        verdict,
        outcome,
        warnings,
    }
}

/// Latency between hosts: `latency_ms.clocks` (trusted, the cross-host share, the
/// note), and a warning when untrusted clocks measured some, or some were negative.
fn latency_between_hosts(added: &CellResult, clocks: &Clocks, warnings: &mut Vec<String>) -> Value {
    let lat = &added.latency_ms;
    let cross: f64 = [&lat.e2e_a_cross_host, &lat.e2e_b_cross_host]
        .iter()
        .map(|s| s.count as f64)
        .sum();
    let all: f64 = lat.e2e_a.count as f64 + lat.e2e_b.count as f64;
    let note = &clocks.note;
    if !clocks.trusted && cross > 0.0 {
        warnings.push(format!(
            "{:.1} % of the end-to-end latencies were measured between hosts whose clocks are not trusted ({note}): e2e_*_cross_host is untrusted, and e2e_a / e2e_b include it; e2e_*_same_host is exact",
            100.0 * cross / all.max(1.0)
        ));
    }
    let negative: f64 = [&lat.e2e_a, &lat.e2e_b]
        .iter()
        .map(|s| s.negative as f64)
        .sum();
    if negative > 0.0 {
        warnings.push(format!(
            "{negative} end-to-end latencies were negative (a stamp from a clock ahead of the reader's), counted in latency_ms.*.negative and recorded as 1 µs"
        ));
    }
    json!({
        "trusted": clocks.trusted,
        "cross_host_share": if all > 0.0 { cross / all } else { 0.0 },
        "note": note,
    })
}

/// The merged record's `loaders`: how many, whence, the lines each gave, the clocks,
/// and each loader's own figures.
fn loaders_block(loaders: &[Loader], topology: &str, logs: &LogsMerged, clocks: &Clocks) -> Value {
    let b0 = loaders[0].block();
    json!({
        "count": loaders.len() as u64,
        "topology": topology,
        "rendezvous": b0.and_then(|b| b.rendezvous.as_ref()),
        "verified_alone": false,
        "start_unix_us": b0.and_then(|b| b.start_unix_us),
        "merged_from": loaders.iter().map(|l| l.dir.display().to_string()).collect::<Vec<_>>(),
        "lines_per_loader": logs.per_loader_lines,
        "clocks": {"trusted": clocks.trusted, "note": clocks.note},
        "loaders": loaders.iter().map(result::loader_entry).collect::<Vec<_>>(),
    })
}

/// What `crossbench merge` prints: each loader's figures, the cell's, the verdict.
fn summary(
    loaders: &[Loader],
    out: &Path,
    topology: &str,
    logs: &LogsMerged,
    clocks: &Clocks,
    figures: &MergedFigures,
    added: &CellResult,
) -> String {
    let r0 = &loaders[0].rec;
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "\n=== MERGED  cell={}  {} loaders ({topology})  system={} ===",
        r0.cell,
        loaders.len(),
        r0.system
    );
    for l in loaders {
        let offered = |f: &str| l.rec.flows.get(f).map_or(0.0, |x| x.offered as f64);
        let _ = writeln!(
            summary,
            "loader {}: {}  offered {}  deliveries/s {:.1}  cpu {:.2} cores  lines {}",
            l.index,
            l.rec.outcome.name(),
            offered("A") + offered("B"),
            l.rec.throughput.window_deliveries_per_sec.unwrap_or(0.0),
            l.rec.loader.cpu_cores_mean,
            logs.per_loader_lines[l.index as usize]
        );
    }
    let s = &figures.sums;
    let window_served = match s.served {
        Some((_, window)) => window,
        None => added.throughput.window_served_fraction.unwrap_or(0.0),
    };
    let _ = writeln!(
        summary,
        "served:    {:.0} deliveries/s in the rated window ({:.1} % of demand)",
        s.window_deliveries_per_sec,
        100.0 * window_served
    );
    let _ = writeln!(summary, "clocks:    {}", clocks.note);
    let j = &figures.judged;
    summary.push_str(&j.verdict.render_table());
    let _ = writeln!(
        summary,
        "OUTCOME: {}   load: {}   record: {}",
        j.outcome.name(),
        j.load.verdict,
        out.display()
    );
    summary
}

/// `samples.csv`: loader 0's rows as they are, then every other loader's with
/// `@l<J>` after the target.
fn samples(loaders: &[Loader], out: &Path) -> Result<(), MergeError> {
    let mut text = String::new();
    for l in loaders {
        let p = l.dir.join("samples.csv");
        let Ok(body) = std::fs::read_to_string(&p) else {
            continue;
        };
        for (i, line) in body.lines().enumerate() {
            if i < 2 {
                if text.is_empty() {
                    text.push_str(line);
                    text.push('\n');
                }
                continue;
            }
            if line.starts_with('#') || l.index == 0 {
                text.push_str(line);
                text.push('\n');
                continue;
            }
            // unix_ms,elapsed_s,target,kind,metric,value
            let mut f: Vec<&str> = line.splitn(6, ',').collect();
            let relabelled;
            if f.len() == 6 {
                relabelled = format!("{}@l{}", f[2], l.index);
                f[2] = &relabelled;
            }
            text.push_str(&f.join(","));
            text.push('\n');
        }
    }
    if !text.is_empty() {
        let p = out.join("samples.csv");
        std::fs::write(&p, text).map_err(|e| MergeError::io(&p, e))?;
    }
    Ok(())
}

/// `report.csv`: loader 0's seconds; each other loader's row added to the second of
/// loader 0's nearest in time (within a second); counts add, and a percentile column
/// (`*_ms`) holds the worst loader's value of that second.
fn report_csv(loaders: &[Loader], out: &Path) -> Result<(), MergeError> {
    let read = |l: &Loader| std::fs::read_to_string(l.dir.join("report.csv")).ok();
    let Some(base) = read(&loaders[0]) else {
        return Ok(());
    };
    let mut lines = base.lines();
    let (Some(version), Some(header)) = (lines.next(), lines.next()) else {
        return Ok(());
    };
    let cols: Vec<&str> = header.split(',').collect();
    let mut rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let unix = |row: &[String]| row.get(1).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    for l in &loaders[1..] {
        let Some(text) = read(l) else { continue };
        for line in text.lines().skip(2) {
            let other: Vec<&str> = line.split(',').collect();
            let t: i64 = other.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            let Some(row) = rows
                .iter_mut()
                .filter(|r| (unix(r) - t).abs() < 1000)
                .min_by_key(|r| (unix(r) - t).abs())
            else {
                continue;
            };
            for (c, name) in cols.iter().enumerate().skip(3) {
                let (Some(a), Some(b)) = (
                    row.get(c).and_then(|v| v.parse::<f64>().ok()),
                    other.get(c).and_then(|v| v.parse::<f64>().ok()),
                ) else {
                    continue;
                };
                let v = if name.ends_with("_ms") {
                    a.max(b)
                } else {
                    a + b
                };
                row[c] = if name.ends_with("_ms") {
                    format!("{v:.3}")
                } else {
                    format!("{}", v as i64)
                };
            }
        }
    }
    let mut text = format!("{version}\n{header}\n");
    for r in rows {
        text.push_str(&r.join(","));
        text.push('\n');
    }
    let p = out.join("report.csv");
    std::fs::write(&p, text).map_err(|e| MergeError::io(&p, e))
}

/// `invocation.txt`: how the merge was made, then loader 0's invocation.
fn invocation(loaders: &[Loader], out: &Path) -> Result<(), MergeError> {
    let argv: Vec<String> = std::env::args().collect();
    let mut text = String::from("# crossbench invocation v1\n");
    let _ = writeln!(text, "merged_by: {}", argv.join(" "));
    for l in loaders {
        let _ = writeln!(text, "loader_{}: {}", l.index, l.dir.display());
    }
    if let Ok(inv) = std::fs::read_to_string(loaders[0].dir.join("invocation.txt")) {
        for line in inv.lines().skip(1) {
            text.push_str(line);
            text.push('\n');
        }
    }
    let p = out.join("invocation.txt");
    std::fs::write(&p, crate::record::redact::redact(&text)).map_err(|e| MergeError::io(&p, e))
}
