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
//! Exit codes are `crossbench run`'s for the merged cell.

pub mod logs;
pub mod meta;
pub mod result;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Value};

use crate::cell::Outcome;
use crate::cli::exit::Exit;
use crate::cli::BadInput;
use crate::fleet::hlog::{merge_logs, params, HlogError};
use crate::fleet::CLOCK_TRUST_US;
use result::{at, num, put_summary, set, sum_numbers};

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
}

impl MergeError {
    pub fn io(path: &Path, source: std::io::Error) -> MergeError {
        MergeError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One loader's record.
struct Loader {
    dir: PathBuf,
    index: u64,
    result: Value,
}

impl Loader {
    /// How this loader's cell ended; `None` when its record names no outcome this
    /// build knows.
    fn outcome(&self) -> Option<Outcome> {
        at(&self.result, "outcome")
            .and_then(Value::as_str)
            .and_then(|o| o.parse().ok())
    }
}

fn bad(msg: String) -> anyhow::Error {
    BadInput(msg).into()
}

/// Read every loader's record and check they are the loaders of one cell.
fn read_loaders(dirs: &[PathBuf]) -> anyhow::Result<Vec<Loader>> {
    let mut loaders = Vec::new();
    for d in dirs {
        let p = d.join("result.json");
        let text = std::fs::read_to_string(&p).map_err(|e| {
            bad(format!(
                "{}: {e} (give each loader's cell directory)",
                p.display()
            ))
        })?;
        let result: Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("{}: not JSON: {e}", p.display())))?;
        let index = at(&result, "loaders.index")
            .and_then(Value::as_u64)
            .ok_or_else(|| {
                bad(format!(
                    "{}: not a loader's record (no loaders.index): run each loader with --loader-index and --loader-count",
                    p.display()
                ))
            })?;
        loaders.push(Loader {
            dir: d.clone(),
            index,
            result,
        });
    }
    loaders.sort_by_key(|l| l.index);
    let n = at(&loaders[0].result, "loaders.count")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let cell = at(&loaders[0].result, "cell").cloned();
    let topology = at(&loaders[0].result, "loaders.topology").cloned();
    for (k, l) in loaders.iter().enumerate() {
        let r = &l.result;
        if at(r, "loaders.count").and_then(Value::as_u64) != Some(n) {
            return Err(bad(format!(
                "{}: loader {} of {} loaders, loader {} of {}: not the loaders of one cell",
                l.dir.display(),
                l.index,
                num(r, "loaders.count"),
                loaders[0].index,
                n
            )));
        }
        if at(r, "cell").cloned() != cell || at(r, "loaders.topology").cloned() != topology {
            return Err(bad(format!(
                "{}: cell {} ({} topology) is not {} ({}): not the loaders of one cell",
                l.dir.display(),
                at(r, "cell").unwrap_or(&Value::Null),
                at(r, "loaders.topology").unwrap_or(&Value::Null),
                cell.clone().unwrap_or(Value::Null),
                topology.clone().unwrap_or(Value::Null)
            )));
        }
        if l.index != k as u64 {
            return Err(bad(format!(
                "loader {k} of {n} is missing (or given twice): give every loader's directory, loader 0 to {}",
                n.saturating_sub(1)
            )));
        }
    }
    if loaders.len() as u64 != n {
        return Err(bad(format!(
            "{} directories for a cell of {n} loaders: give every loader's directory",
            loaders.len()
        )));
    }
    // The loaders of one cell: the record's one reader checks each one's version and
    // outcome (an outcome no crossbench wrote is an error, never taken as a default).
    for l in &loaders {
        cell_record::CellResult::from_value(&l.dir.join("result.json"), l.result.clone())
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(loaders)
}

/// Whether the loaders' clocks can be compared: one host (one boot), or every
/// loader's offset bound known and at most [`CLOCK_TRUST_US`] at start and end.
fn clocks(loaders: &[Loader]) -> (bool, String) {
    let boots: Vec<Option<&str>> = loaders
        .iter()
        .map(|l| at(&l.result, "loaders.host.boot_id").and_then(Value::as_str))
        .collect();
    if boots.iter().all(|b| b.is_some() && *b == boots[0]) {
        return (
            true,
            "every loader on one host: one clock, cross-loader order and latency exact".into(),
        );
    }
    let mut worst: Option<u64> = Some(0);
    for l in loaders {
        for k in ["loaders.clock_start", "loaders.clock_end"] {
            let b = at(&l.result, &format!("{k}.offset_bound_us")).and_then(Value::as_u64);
            worst = match (worst, b) {
                (Some(w), Some(b)) => Some(w.max(b)),
                _ => None,
            };
        }
    }
    match worst {
        Some(w) if w <= CLOCK_TRUST_US => (
            true,
            format!("loaders on several hosts, every clock-offset bound known: worst {w} µs (≤ {CLOCK_TRUST_US} µs)"),
        ),
        Some(w) => (
            false,
            format!("loaders on several hosts, worst clock-offset bound {w} µs (> {CLOCK_TRUST_US} µs): cross-host latency and the order across a hand-off are untrusted"),
        ),
        None => (
            false,
            "loaders on several hosts, and some clock-offset bound is unknown (no chrony or synchronised kernel clock): cross-host latency and the order across a hand-off are untrusted".into(),
        ),
    }
}

/// The record of a cell one of whose loaders gave it up.
fn abandoned(loaders: &[Loader], out: &Path, quiet: bool) -> anyhow::Result<Exit> {
    let first = loaders
        .iter()
        .find_map(|l| {
            at(&l.result, "abandoned")
                .or_else(|| at(&l.result, "loaders.abandoned"))
                .cloned()
        })
        .unwrap_or(Value::Null);
    let r0 = &loaders[0].result;
    let v = json!({
        "schema_version": crate::record::result::SCHEMA_VERSION,
        "crossbench": crate::record::result::BuildInfo::current(),
        "cell": at(r0, "cell"),
        "outcome": Outcome::Abandoned,
        "system": at(r0, "system"),
        "workload": at(r0, "workload"),
        "abandoned": first,
        "loaders": {
            "count": loaders.len(),
            "topology": at(r0, "loaders.topology"),
            "rendezvous": at(r0, "loaders.rendezvous"),
            "merged_from": loaders.iter().map(|l| l.dir.display().to_string()).collect::<Vec<_>>(),
            "loaders": loaders.iter().map(|l| json!({
                "index": l.index,
                "outcome": l.outcome(),
                "abandoned": at(&l.result, "abandoned").or_else(|| at(&l.result, "loaders.abandoned")),
            })).collect::<Vec<_>>(),
        },
    });
    crate::record::result::write_result(out, &v)?;
    let text = format!(
        "\n=== MERGED  cell={}  {} loaders ===\nOUTCOME: ABANDONED  loader {} failed at {}: {}\n",
        at(r0, "cell").and_then(Value::as_str).unwrap_or(""),
        loaders.len(),
        first["loader"],
        first["stage"].as_str().unwrap_or(""),
        first["why"].as_str().unwrap_or("")
    );
    if !quiet {
        print!("{text}");
    }
    Ok(Exit::Abandoned)
}

/// `crossbench merge`.
pub fn command(dirs: &[PathBuf], out: &Path, quiet: bool) -> anyhow::Result<Exit> {
    let loaders = read_loaders(dirs)?;
    crate::cli::run::prepare_out(out)?;
    if loaders
        .iter()
        .any(|l| l.outcome() == Some(Outcome::Abandoned))
    {
        return abandoned(&loaders, out, quiet);
    }
    let merged = merge(&loaders, out).map_err(|e| match e {
        MergeError::Io { .. } => anyhow::Error::new(e),
        other => bad(other.to_string()),
    })?;
    if !quiet {
        print!("{}", merged.summary);
    }
    Ok(merged.exit)
}

struct Merged {
    exit: Exit,
    summary: String,
}

fn merge(loaders: &[Loader], out: &Path) -> Result<Merged, MergeError> {
    let n = loaders.len() as u64;
    let r0 = &loaders[0].result;
    let records: Vec<&Value> = loaders.iter().map(|l| &l.result).collect();
    let topology = at(r0, "loaders.topology")
        .and_then(Value::as_str)
        .unwrap_or("shared")
        .to_string();
    let (trusted, clock_note) = clocks(loaders);
    let mut warnings: Vec<String> = Vec::new();

    // produced.meta.
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
    let meta_text = meta::merge(&metas, &topology, trusted)?;
    let meta_path = out.join("produced.meta");
    std::fs::write(&meta_path, &meta_text).map_err(|e| MergeError::io(&meta_path, e))?;

    // Stream logs, stream by stream.
    let mut delivered_by: BTreeMap<String, std::collections::HashMap<u64, u64>> = BTreeMap::new();
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

    // The verdict on the merged logs.
    let accept_at_least_once = at(r0, "accept").and_then(Value::as_str) == Some("at-least-once");
    let mut verdict = checker::verify_dir(
        out,
        &checker::VerifyOptions {
            allow_duplicates: accept_at_least_once,
            ..Default::default()
        },
    )
    .map_err(|e| MergeError::Input(format!("verifying the merged logs: {e}")))?;
    // A gap names its key's producer and the loaders whose logs delivered the key.
    for sv in &verdict.streams {
        for g in sv.gap_examples.iter().take(5) {
            let by = delivered_by
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

    // Histograms: whole-run totals by path, then the per-second logs.
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
    let mut merged_result = r0.clone();
    for tag in result::common_tags(&totals) {
        let mut sum = totals[0][&tag].clone();
        for t in &totals[1..] {
            sum.add(&t[&tag])
                .map_err(|e| MergeError::Input(format!("adding {tag}: {e:?}")))?;
        }
        put_summary(&mut merged_result, &records, &tag, &sum);
    }
    for name in ["e2e.hlog", "schedule-lag.hlog", "entry-age.hlog"] {
        let paths: Vec<PathBuf> = loaders.iter().map(|l| l.dir.join(name)).collect();
        if paths.iter().all(|p| p.exists()) {
            // Stream tags without a partitioned loader's namespace.
            merge_logs(
                &paths,
                &out.join(name),
                &format!("crossbench interval log, {n} loaders added per second"),
                &|j, tag| metas[j].canonical(tag),
            )?;
        }
    }

    // Counters and rates.
    let r = &mut merged_result;
    for path in ["flows", "broker_stats"] {
        sum_numbers(r, &records, path, &[]);
    }
    let stream_skip = ["entry_age_ms", "barrier_ms", "push_ms", "lane_budget_note"];
    if let Some(streams) = at(r0, "streams").and_then(Value::as_array) {
        for i in 0..streams.len() {
            sum_numbers(r, &records, &format!("streams.{i}"), &stream_skip);
            // The stream's name, without a partitioned loader's namespace.
            if let Some(name) = at(r0, &format!("streams.{i}.stream")).and_then(Value::as_str) {
                set(
                    r,
                    &format!("streams.{i}.stream"),
                    json!(metas[0].canonical(name)),
                );
            }
        }
    }
    let identity = ["A", "B"].iter().all(|f| {
        let g = |k: &str| num(r, &format!("flows.{f}.{k}"));
        at(r, &format!("flows.{f}")).is_none()
            || g("offered") == g("published") + g("shed") + g("failed")
    });
    set(r, "identity_holds", json!(identity));
    let demand = num(r0, "invariants.deliveries_per_sec");
    for k in [
        "offered_per_sec",
        "published_per_sec",
        "deliveries_per_sec",
        "reference_deliveries_per_sec",
        "window_deliveries_per_sec",
    ] {
        let s: f64 = records
            .iter()
            .map(|x| num(x, &format!("throughput.{k}")))
            .sum();
        set(r, &format!("throughput.{k}"), json!(s));
    }
    if demand > 0.0 {
        let served = num(r, "throughput.deliveries_per_sec") / demand;
        let window = num(r, "throughput.window_deliveries_per_sec") / demand;
        set(r, "throughput.served_fraction", json!(served));
        set(r, "throughput.window_served_fraction", json!(window));
    }
    if topology == "partitioned" {
        for k in [
            "ordered_lanes",
            "physical_queues",
            "consumer_members",
            "connections",
        ] {
            let s: f64 = records
                .iter()
                .map(|x| num(x, &format!("provisioned.{k}")))
                .sum();
            set(r, &format!("provisioned.{k}"), json!(s as u64));
        }
        if let Some(Value::Array(notes)) = at_mut(r, "provisioned.notes") {
            notes.push(json!(format!(
                "partitioned: {n} loaders, each with a namespace of its own: the system held {n}x the topology"
            )));
        }
    } else {
        for k in ["consumer_members", "connections"] {
            let s: f64 = records
                .iter()
                .map(|x| num(x, &format!("provisioned.{k}")))
                .sum();
            set(r, &format!("provisioned.{k}"), json!(s as u64));
        }
    }

    // Time: from the first start to the last end; the window is every loader's.
    let min_of = |k: &str| {
        records
            .iter()
            .map(|x| num(x, k))
            .fold(f64::INFINITY, f64::min)
    };
    let max_of = |k: &str| records.iter().map(|x| num(x, k)).fold(0.0, f64::max);
    set(
        r,
        "time.started_unix_ms",
        json!(min_of("time.started_unix_ms") as i64),
    );
    for k in ["time.drain_sec", "time.hydration_sec"] {
        set(r, k, json!(max_of(k)));
    }
    if let Some(first) = records
        .iter()
        .filter_map(|x| at(x, "time.started_utc").and_then(Value::as_str))
        .min()
    {
        set(r, "time.started_utc", json!(first));
    }
    if let Some(last) = records
        .iter()
        .filter_map(|x| at(x, "time.ended_utc").and_then(Value::as_str))
        .max()
    {
        set(r, "time.ended_utc", json!(last));
    }

    // The loaders' CPU, over the deliveries they made in the window.
    let cores: f64 = records
        .iter()
        .map(|x| num(x, "loader.cpu_cores_mean"))
        .sum();
    let avail: f64 = records
        .iter()
        .map(|x| num(x, "loader.cores_available"))
        .sum();
    let per_sec = num(r, "throughput.window_deliveries_per_sec");
    set(r, "loader.cpu_cores_mean", json!(cores));
    set(r, "loader.cores_available", json!(avail));
    set(
        r,
        "loader.cpu_fraction_of_available",
        json!(cores / avail.max(1e-9)),
    );
    set(
        r,
        "loader.cpu_us_per_delivery",
        json!(cores * 1e6 / per_sec.max(1e-9)),
    );
    set(
        r,
        "loader.peak_rss_bytes",
        json!(max_of("loader.peak_rss_bytes") as u64),
    );
    set(
        r,
        "loader.runtime_threads",
        json!(records
            .iter()
            .map(|x| num(x, "loader.runtime_threads"))
            .sum::<f64>() as u64),
    );

    // Drain, VOID, load.
    let drain = result::worst_drain(
        records
            .iter()
            .filter_map(|x| at(x, "drain.outcome").and_then(Value::as_str)),
    );
    set(r, "drain.outcome", json!(drain));
    set(r, "drain.seconds", json!(max_of("drain.seconds")));
    let mut void_reasons: Vec<String> = Vec::new();
    for l in loaders {
        if let Some(rs) = at(&l.result, "void.reasons").and_then(Value::as_array) {
            for x in rs.iter().filter_map(Value::as_str) {
                void_reasons.push(format!("loader {}: {x}", l.index));
            }
        }
    }
    set(r, "void.void", json!(!void_reasons.is_empty()));
    set(r, "void.reasons", json!(void_reasons));
    let held_rule = crate::scenario::HeldRule {
        served: at(r0, "load.served_min")
            .and_then(Value::as_f64)
            .unwrap_or(cell_record::held::SERVED_MIN),
        exploratory: at(r0, "load.exploratory")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    };
    let failed = num(r, "flows.A.failed") + num(r, "flows.B.failed");
    let shed = num(r, "flows.A.shed_backpressure") + num(r, "flows.B.shed_backpressure");
    let load = crate::cell::load_rule::verdict(
        &held_rule,
        &crate::cell::load_rule::LoadFacts {
            served_in_window: num(r, "throughput.window_served_fraction"),
            failed: failed as u64,
            shed: shed as u64,
            unit: "events",
            // Every loader wrote one of the names; any other gives no reason, as before.
            drain: crate::cell::drain::DrainEnd::from_name(&drain)
                .unwrap_or(crate::cell::drain::DrainEnd::Grace),
        },
    );
    set(
        r,
        "load",
        serde_json::to_value(&load).unwrap_or(Value::Null),
    );

    // Latency between hosts.
    let cross: f64 = ["e2e_a_cross_host", "e2e_b_cross_host"]
        .iter()
        .map(|k| num(r, &format!("latency_ms.{k}.count")))
        .sum();
    let all: f64 = num(r, "latency_ms.e2e_a.count") + num(r, "latency_ms.e2e_b.count");
    set(
        r,
        "latency_ms.clocks",
        json!({
            "trusted": trusted,
            "cross_host_share": if all > 0.0 { cross / all } else { 0.0 },
            "note": clock_note,
        }),
    );
    if !trusted && cross > 0.0 {
        warnings.push(format!(
            "{:.1} % of the end-to-end latencies were measured between hosts whose clocks are not trusted ({clock_note}): e2e_*_cross_host is untrusted, and e2e_a / e2e_b include it; e2e_*_same_host is exact",
            100.0 * cross / all.max(1.0)
        ));
    }
    let negative: f64 = ["e2e_a", "e2e_b"]
        .iter()
        .map(|k| num(r, &format!("latency_ms.{k}.negative")))
        .sum();
    if negative > 0.0 {
        warnings.push(format!(
            "{negative} end-to-end latencies were negative (a stamp from a clock ahead of the reader's), counted in latency_ms.*.negative and recorded as 1 µs"
        ));
    }

    // Outcome.
    set(
        r,
        "verdict",
        serde_json::to_value(&verdict).unwrap_or(Value::Null),
    );
    let interrupted = loaders
        .iter()
        .any(|l| l.outcome() == Some(Outcome::Interrupted));
    let outcome = if interrupted {
        Outcome::Interrupted
    } else {
        crate::cell::void_rule::outcome(verdict.pass, identity, &void_reasons)
    };
    set(r, "outcome", json!(outcome.name()));
    for l in loaders {
        if let Some(ws) = at(&l.result, "warnings").and_then(Value::as_array) {
            for w in ws.iter().filter_map(Value::as_str) {
                warnings.push(format!("loader {}: {w}", l.index));
            }
        }
    }
    set(r, "warnings", json!(warnings));
    set(
        r,
        "loaders",
        json!({
            "count": n,
            "topology": topology,
            "rendezvous": at(r0, "loaders.rendezvous"),
            "verified_alone": false,
            "start_unix_us": at(r0, "loaders.start_unix_us"),
            "merged_from": loaders.iter().map(|l| l.dir.display().to_string()).collect::<Vec<_>>(),
            "lines_per_loader": per_loader_lines,
            "clocks": {"trusted": trusted, "note": clock_note},
            "loaders": loaders.iter().map(|l| result::loader_entry(l.index, &l.result)).collect::<Vec<_>>(),
        }),
    );
    if at(r0, "cost").is_some() {
        set(
            r,
            "cost_note",
            json!("cost: the system and host as loader 0 sampled them; every loader's own samples are in samples.csv"),
        );
    }
    crate::record::result::write_result(out, &merged_result)
        .map_err(|e| MergeError::Input(format!("{e:#}")))?;

    samples(loaders, out)?;
    report_csv(loaders, out)?;
    invocation(loaders, out)?;

    let exit = match (outcome, load.held || load.exploratory) {
        (Outcome::Pass, false) => Exit::NotHeld,
        (o, _) => Exit::of(o),
    };
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "\n=== MERGED  cell={}  {n} loaders ({topology})  system={} ===",
        at(r0, "cell").and_then(Value::as_str).unwrap_or(""),
        at(r0, "system").and_then(Value::as_str).unwrap_or("")
    );
    for l in loaders {
        let _ = writeln!(
            summary,
            "loader {}: {}  offered {}  deliveries/s {:.1}  cpu {:.2} cores  lines {}",
            l.index,
            l.outcome().map_or("(unknown)", |o| o.name()),
            num(&l.result, "flows.A.offered") + num(&l.result, "flows.B.offered"),
            num(&l.result, "throughput.window_deliveries_per_sec"),
            num(&l.result, "loader.cpu_cores_mean"),
            per_loader_lines[l.index as usize]
        );
    }
    let _ = writeln!(
        summary,
        "served:    {:.0} deliveries/s in the rated window ({:.1} % of demand)",
        num(&merged_result, "throughput.window_deliveries_per_sec"),
        100.0 * num(&merged_result, "throughput.window_served_fraction")
    );
    let _ = writeln!(summary, "clocks:    {clock_note}");
    summary.push_str(&verdict.render_table());
    let _ = writeln!(
        summary,
        "OUTCOME: {}   load: {}   record: {}",
        outcome.name(),
        load.verdict,
        out.display()
    );
    Ok(Merged { exit, summary })
}

fn at_mut<'a>(v: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    result::at_mut(v, path)
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

/// Read `dir`'s result.json (a test helper and `crossbench merge`'s callers).
pub fn read_result(dir: &Path) -> anyhow::Result<Value> {
    let p = dir.join("result.json");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
}
