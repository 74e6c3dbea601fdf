//! The ceiling search (`crossbench ceiling`): the highest rate at which a system
//! holds a scenario, found by bisection on a logarithmic scale between two rates,
//! then confirmed with repeats at the boundary. The answer is an interval: between
//! the highest rate that held in every repeat and the lowest that did not.
//!
//! A cell **held** when it PASSed (not FAIL, not VOID), served at least `served` of
//! the demanded deliveries in its rated window, and, when a bound is given, kept
//! its end-to-end p99 under it. A VOID cell did not hold: the loader, not the
//! system, was the limit there, and the record says so (`bound: loader`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cell::RunOptions;
use crate::cli::exit::Exit;
use crate::cli::signals::Interrupted;
use crate::cli::BadInput;
use crate::pacing::pacer::Timing;
use crate::record::invocation::utc;
use crate::record::result::BuildInfo;
use crate::scenario;

pub const CEILING_SCHEMA_VERSION: u32 = 1;
/// Cells a search may run before it gives up (a flaky boundary cannot loop).
pub const MAX_CELLS: usize = 60;

/// One `ceiling` request.
#[derive(Debug, Clone)]
pub struct CeilingRequest {
    pub scenario: PathBuf,
    pub sets: Vec<String>,
    pub low: u64,
    pub high: u64,
    /// Repeats at each side of the boundary.
    pub repeats: u32,
    /// Served fraction a cell must reach to hold.
    pub served: f64,
    /// End-to-end p99 a cell must stay under to hold.
    pub p99_max: Option<Duration>,
    /// Stop bisecting when high ÷ low is at most this.
    pub resolution: f64,
    pub out: Option<PathBuf>,
    pub quiet: bool,
    pub timing: Timing,
    /// How long the host probe runs before the first cell (`record::host_stalls`);
    /// zero skips it, and so does virtual time.
    pub host_probe: Duration,
    pub argv: Vec<String>,
}

impl CeilingRequest {
    pub fn new(scenario: impl Into<PathBuf>, low: u64, high: u64) -> CeilingRequest {
        CeilingRequest {
            scenario: scenario.into(),
            sets: Vec::new(),
            low,
            high,
            repeats: 3,
            served: 0.99,
            p99_max: None,
            resolution: 1.1,
            out: None,
            quiet: true,
            timing: Timing::Real,
            host_probe: Duration::ZERO,
            argv: std::env::args().collect(),
        }
    }
}

/// One cell of the search.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub rate: u64,
    /// Relative to the search's directory.
    pub dir: PathBuf,
    pub outcome: String,
    pub served: Option<f64>,
    pub p99_ms: Option<f64>,
    pub held: bool,
    /// Why it did not hold.
    pub why: Option<String>,
}

/// The answer.
#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    /// The highest rate that held in every repeat (`None`: not even `low`).
    pub held: Option<u64>,
    /// The lowest rate that did not hold (`None`: `high` held).
    pub not_held: Option<u64>,
    /// What limited the first rate that did not hold: `system`, or `loader` when
    /// that rate's failures were VOID.
    pub bound: Option<String>,
    /// The interval as text: `between 1000 and 1100 msg/s`.
    pub text: String,
}

/// `ceiling.json` (docs/campaigns.md).
#[derive(Debug, Clone, Serialize)]
pub struct CeilingRecord {
    pub schema_version: u32,
    pub kind: &'static str,
    pub scenario: PathBuf,
    pub sets: Vec<String>,
    pub system: String,
    pub workload: String,
    pub unit: &'static str,
    pub between: [u64; 2],
    pub resolution: f64,
    pub repeats: u32,
    pub served_min: f64,
    pub p99_max_ms: Option<f64>,
    pub crossbench: BuildInfo,
    pub started_utc: String,
    pub ended_utc: String,
    /// Every cell, in the order it ran.
    pub probes: Vec<Probe>,
    pub ceiling: Ceiling,
    /// What the host probe saw before the first cell (absent when skipped, and in a
    /// ceiling campaign's searches: the campaign probes once, `host_probes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_probe: Option<crate::record::host_stalls::StallProbe>,
}

/// What the search knows about each rate tried.
#[derive(Debug, Default)]
struct Book {
    by_rate: BTreeMap<u64, Vec<bool>>,
}

impl Book {
    fn held_all(&self, r: u64) -> bool {
        self.by_rate
            .get(&r)
            .is_some_and(|v| !v.is_empty() && v.iter().all(|h| *h))
    }
    /// Highest rate below `r` that held in every repeat.
    fn held_below(&self, r: u64) -> Option<u64> {
        self.by_rate
            .range(..r)
            .rev()
            .find(|(_, v)| v.iter().all(|h| *h))
            .map(|(k, _)| *k)
    }
    /// Lowest rate above `r` that failed at least once.
    fn failed_above(&self, r: u64) -> Option<u64> {
        self.by_rate
            .range(r + 1..)
            .find(|(_, v)| v.iter().any(|h| !*h))
            .map(|(k, _)| *k)
    }
    fn count(&self, r: u64) -> usize {
        self.by_rate.get(&r).map_or(0, Vec::len)
    }
}

/// Judge one cell's record.
fn judge(
    dir: &std::path::Path,
    served_min: f64,
    p99_max: Option<Duration>,
) -> (String, Option<f64>, Option<f64>, bool, Option<String>) {
    let Ok(c) = report::CellRecord::load(dir) else {
        return (
            "ERROR".into(),
            None,
            None,
            false,
            Some("no readable result.json".into()),
        );
    };
    let r = &c.result;
    let served = Some(c.served_in_window());
    let p99 = c.e2e(99);
    let why = if c.is_void() {
        Some(format!("VOID: {}", r.void.reasons.join("; ")))
    } else if !r.outcome.is_pass() {
        Some(r.outcome.to_string())
    } else if c.served_in_window() < served_min {
        Some(format!(
            "served {:.1} % in the rated window < {:.1} %",
            100.0 * c.served_in_window(),
            100.0 * served_min
        ))
    } else {
        match (p99, p99_max) {
            (Some(p), Some(m)) if p > m.as_secs_f64() * 1000.0 => Some(format!(
                "e2e p99 {p:.1} ms > {:.1} ms",
                m.as_secs_f64() * 1000.0
            )),
            _ => None,
        }
    };
    (r.outcome.to_string(), served, p99, why.is_none(), why)
}

/// Run the search.
pub fn execute(req: &CeilingRequest) -> anyhow::Result<(Exit, PathBuf, CeilingRecord)> {
    if req.low == 0 || req.high <= req.low {
        return Err(BadInput(format!(
            "--between {} {}: give two rates, LOW < HIGH, both above 0",
            req.low, req.high
        ))
        .into());
    }
    if !(1..=20).contains(&req.repeats) {
        return Err(BadInput("--repeats must be between 1 and 20".into()).into());
    }
    if !(req.served > 0.0 && req.served <= 1.0) {
        return Err(BadInput("--served must be in (0, 1]".into()).into());
    }
    if !(req.resolution > 1.0 && req.resolution <= 2.0) {
        return Err(BadInput("--resolution must be in (1, 2], e.g. 1.1".into()).into());
    }
    // Validate the scenario once, at both ends of the range.
    let mut sets = req.sets.clone();
    sets.push(format!("rate={}", req.low));
    let loaded = scenario::load(&req.scenario, &sets)?;
    let s = &loaded.scenario;
    if s.stream.as_ref().is_some_and(|st| !st.ladder.is_empty()) {
        return Err(BadInput(
            "the scenario has a stream.ladder: the ceiling search picks the rates; add --set 'stream.ladder=[]'".into(),
        )
        .into());
    }
    crate::cell::setup::build(s, &crate::workload::build_context(s))?;
    let name = s.name.clone();
    let dir = req
        .out
        .clone()
        .unwrap_or_else(|| crate::cell::default_out(&format!("{name}-ceiling")));
    crate::cli::run::prepare_out(&dir)?;
    let _lock = crate::cli::lock::acquire(req.quiet)?;
    let rt = match req.timing {
        Timing::Real => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            .enable_all()
            .build(),
        Timing::Virtual => crate::cli::run::virtual_runtime(),
    }
    .context("starting the runtime")?;
    let host = crate::campaign::probe_host(req.host_probe, req.timing);
    let started = SystemTime::now();
    let interrupt = CancellationToken::new();
    {
        let _in_runtime = rt.enter();
        crate::cli::signals::install(interrupt.clone());
    }
    let mut probes: Vec<Probe> = Vec::new();
    let mut book = Book::default();
    let probe = |rate: u64, probes: &mut Vec<Probe>, book: &mut Book| -> anyhow::Result<bool> {
        anyhow::ensure!(
            probes.len() < MAX_CELLS,
            "the search ran {MAX_CELLS} cells without settling (the boundary is too noisy for these repeats)"
        );
        if interrupt.is_cancelled() {
            return Err(Interrupted(format!(
                "interrupted before the cell at {rate}: the search has no answer (its cells so far are in {})",
                dir.display()
            ))
            .into());
        }
        let k = book.count(rate) + 1;
        let rel = PathBuf::from(format!("r{rate}-{k}"));
        let cell_dir = dir.join(&rel);
        std::fs::create_dir_all(&cell_dir)?;
        let mut sets = req.sets.clone();
        sets.push(format!("rate={rate}"));
        sets.push(format!("name={name}-r{rate}"));
        let l = scenario::load(&req.scenario, &sets)?;
        let opts = RunOptions {
            argv: req.argv.clone(),
            scenario_path: req.scenario.clone(),
            out: cell_dir.clone(),
            quiet: true,
            sampler_url: None,
            timing: req.timing,
            interrupt_drain: crate::cell::INTERRUPT_DRAIN,
            fleet: None,
        };
        rt.block_on(crate::workload::run_cell(&l, &opts, &[], &interrupt))?;
        // A cell cut short by a signal did not answer whether its rate holds: it must
        // not count as "did not hold", and the search ends without an answer.
        if interrupt.is_cancelled() {
            return Err(Interrupted(format!(
                "interrupted during the cell at {rate} ({}): the search has no answer",
                cell_dir.display()
            ))
            .into());
        }
        let (outcome, served, p99_ms, held, why) = judge(&cell_dir, req.served, req.p99_max);
        if !req.quiet {
            eprintln!(
                "rate {rate} #{k}: {} ({})",
                if held { "held" } else { "did not hold" },
                why.as_deref().unwrap_or(&outcome)
            );
        }
        book.by_rate.entry(rate).or_default().push(held);
        probes.push(Probe {
            rate,
            dir: rel,
            outcome,
            served,
            p99_ms,
            held,
            why,
        });
        Ok(held)
    };

    // The ends of the range first: the answer is inside it, or said to be outside.
    let (mut lo, mut hi) = (req.low, req.high);
    let low_held = probe(lo, &mut probes, &mut book)?;
    let high_held = if low_held {
        probe(hi, &mut probes, &mut book)?
    } else {
        false
    };
    // The top of the range held: confirm it with repeats. If every repeat holds, the
    // ceiling lies above the range and the top is the answer's lower bound; a failed
    // repeat makes the top the upper side of the bisection.
    let mut top_held = false;
    if high_held {
        while book.count(hi) < req.repeats as usize && book.held_all(hi) {
            probe(hi, &mut probes, &mut book)?;
        }
        top_held = book.held_all(hi);
        if top_held {
            lo = hi;
        }
    }
    if low_held && !top_held {
        loop {
            // Bisect on a log scale until the bracket is within the resolution.
            while hi as f64 / lo as f64 > req.resolution {
                let mid = ((lo as f64) * (hi as f64)).sqrt().round() as u64;
                if mid <= lo || mid >= hi {
                    break;
                }
                if probe(mid, &mut probes, &mut book)? {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            // Confirm both sides with repeats.
            while book.count(lo) < req.repeats as usize && book.held_all(lo) {
                probe(lo, &mut probes, &mut book)?;
            }
            if !book.held_all(lo) {
                // The lower side failed a repeat: it is the new upper side.
                hi = lo;
                match book.held_below(lo) {
                    Some(l) => {
                        lo = l;
                        continue;
                    }
                    None => break,
                }
            }
            while book.count(hi) < req.repeats as usize && book.held_all(hi) {
                probe(hi, &mut probes, &mut book)?;
            }
            if book.held_all(hi) {
                // The upper side held every repeat: it is the new lower side.
                lo = hi;
                hi = book.failed_above(hi).unwrap_or(req.high);
                if hi <= lo {
                    break;
                }
                continue;
            }
            break;
        }
    }
    let held = if book.held_all(lo) { Some(lo) } else { None };
    let not_held = if book.by_rate.get(&hi).is_some_and(|v| v.iter().any(|h| !*h)) {
        Some(hi)
    } else {
        None
    };
    let bound = not_held.map(|r| {
        let all_void = probes
            .iter()
            .filter(|p| p.rate == r && !p.held)
            .all(|p| p.outcome == crate::cell::Outcome::Void.name());
        if all_void { "loader" } else { "system" }.to_string()
    });
    let unit = if s.stream.is_some() { "msg/s" } else { "ev/s" };
    let text = match (held, not_held) {
        (Some(a), Some(b)) => {
            format!("between {a} and {b} {unit}: {a} held in every repeat, {b} did not")
        }
        (None, _) => format!("below {} {unit}: the lowest rate did not hold", req.low),
        (Some(a), None) if a >= req.high => format!(
            "at least {a} {unit}: the top of the searched range held in every repeat, so the ceiling is above it (raise `between`)"
        ),
        (Some(a), None) => format!("at least {a} {unit}: the highest rate held"),
    };
    let record = CeilingRecord {
        schema_version: CEILING_SCHEMA_VERSION,
        kind: "ceiling",
        scenario: req.scenario.clone(),
        sets: req.sets.clone(),
        system: s.system.name().into(),
        workload: s.workload.name().into(),
        unit,
        between: [req.low, req.high],
        resolution: req.resolution,
        repeats: req.repeats,
        served_min: req.served,
        p99_max_ms: req.p99_max.map(|d| d.as_secs_f64() * 1000.0),
        crossbench: BuildInfo::current(),
        started_utc: utc(started),
        ended_utc: utc(SystemTime::now()),
        probes,
        ceiling: Ceiling {
            held,
            not_held,
            bound,
            text,
        },
        host_probe: host,
    };
    let mut json = serde_json::to_string_pretty(&record)?;
    json.push('\n');
    std::fs::write(
        dir.join("ceiling.json"),
        crate::record::redact::redact(&json),
    )
    .context("writing ceiling.json")?;
    rt.shutdown_timeout(Duration::from_secs(2));
    println!(
        "CEILING {} on {}: {}\nrecord: {}",
        name,
        record.system,
        record.ceiling.text,
        dir.join("ceiling.json").display()
    );
    Ok((Exit::Pass, dir, record))
}

/// One arm of a ceiling campaign, as `ceiling-campaign.json` records it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CampaignArm {
    pub id: String,
    pub slug: String,
    pub system: String,
    pub between: [u64; 2],
    pub not_run: Option<String>,
    /// The search's directory, relative to the campaign's.
    pub dir: PathBuf,
    pub held: Option<u64>,
    pub not_held: Option<u64>,
    pub bound: Option<String>,
    pub text: Option<String>,
    pub error: Option<String>,
    /// When this arm's search started and ended (absent in records written before
    /// these fields: such an arm was searched between the campaign's own times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_utc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_utc: Option<String>,
}

/// `ceiling-campaign.json`: one search per arm.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CampaignRecord {
    pub schema_version: u32,
    pub kind: String,
    pub campaign: String,
    pub description: String,
    pub file: PathBuf,
    pub repeats: u32,
    pub served_min: f64,
    pub p99_max: Option<String>,
    pub resolution: f64,
    pub started_utc: String,
    pub ended_utc: Option<String>,
    pub status: String,
    pub arms: Vec<CampaignArm>,
    /// What the host probe saw before each sitting's first search
    /// (`crate::record::host_stalls`; absent when skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_probes: Vec<crate::record::host_stalls::StallProbe>,
}

impl CampaignRecord {
    fn write(&self, dir: &std::path::Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        let tmp = dir.join(".ceiling-campaign.json.tmp");
        std::fs::write(&tmp, crate::record::redact::redact(&text))?;
        std::fs::rename(&tmp, dir.join("ceiling-campaign.json"))?;
        Ok(())
    }
}

/// A ceiling campaign: one search per arm, each in `<dir>/<arm slug>/`.
pub fn run_campaign(
    req: &crate::campaign::CampaignRequest,
    file: &crate::campaign::file::CampaignFile,
    spec: &crate::campaign::file::CeilingSpec,
    arms: &[crate::campaign::arms::Arm],
    dir: &std::path::Path,
) -> anyhow::Result<crate::campaign::CampaignDone> {
    let p99_max = match &spec.p99_max {
        None => None,
        Some(t) => Some(adapters::duration_text::parse_duration(t).map_err(|e| {
            BadInput(format!(
                "campaign {}, field `ceiling.p99_max`: {e} (write e.g. 5s)",
                req.file.display()
            ))
        })?),
    };
    let range = |a: &crate::campaign::arms::Arm| a.between.unwrap_or(spec.between);
    if req.dry_run {
        let mut text = format!(
            "ceiling campaign {}: {} arms, {} repeats at each side of every boundary\n",
            file.campaign,
            arms.len(),
            spec.repeats
        );
        for a in arms {
            let [lo, hi] = range(a);
            text.push_str(&match &a.not_run {
                Some(w) => format!("  {}  ({w})\n", a.id),
                None => format!("  {}  {}  between {lo} and {hi}\n", a.id, a.system()),
            });
        }
        print!("{text}");
        return Ok(crate::campaign::CampaignDone {
            exit: Exit::Pass,
            dir: dir.to_path_buf(),
            record: None,
            text,
            ran: 0,
        });
    }
    let mut rec = if req.resume {
        let p = dir.join("ceiling-campaign.json");
        let text = std::fs::read_to_string(&p)
            .map_err(|e| BadInput(format!("--resume {}: {e}", p.display())))?;
        let mut r = serde_json::from_str::<CampaignRecord>(&text)
            .map_err(|e| BadInput(format!("--resume {}: {e}", p.display())))?;
        let same = r.arms.len() == arms.len()
            && r.arms.iter().zip(arms).all(|(e, a)| e.id == a.id)
            && r.repeats == spec.repeats
            && r.served_min == spec.served
            && r.p99_max == spec.p99_max
            && r.resolution == spec.resolution;
        if !same {
            return Err(BadInput(format!(
                "--resume {}: the campaign file now has other arms, repeats or bounds than the campaign recorded there; resume with the file as it was, or start a new --out",
                dir.display()
            ))
            .into());
        }
        // An arm run again is searched anew, over the range the file gives it now.
        for (e, a) in r.arms.iter_mut().zip(arms) {
            if req.rerun.contains(&a.id) {
                e.between = range(a);
                e.held = None;
                e.not_held = None;
                e.bound = None;
                e.text = None;
                e.error = None;
                e.started_utc = None;
                e.ended_utc = None;
            }
        }
        r
    } else {
        crate::cli::run::prepare_out(dir)?;
        CampaignRecord {
            schema_version: 1,
            kind: "ceiling-campaign".into(),
            campaign: file.campaign.clone(),
            description: file.description.clone(),
            file: req.file.clone(),
            repeats: spec.repeats,
            served_min: spec.served,
            p99_max: spec.p99_max.clone(),
            resolution: spec.resolution,
            started_utc: utc(SystemTime::now()),
            ended_utc: None,
            status: "running".into(),
            arms: arms
                .iter()
                .map(|a| CampaignArm {
                    id: a.id.clone(),
                    slug: a.slug.clone(),
                    system: a.system(),
                    between: range(a),
                    not_run: a.not_run.clone(),
                    dir: PathBuf::from(&a.slug),
                    held: None,
                    not_held: None,
                    bound: None,
                    text: None,
                    error: None,
                    started_utc: None,
                    ended_utc: None,
                })
                .collect(),
            host_probes: Vec::new(),
        }
    };
    rec.status = "running".into();
    rec.write(dir)?;
    let to_search = arms
        .iter()
        .enumerate()
        .any(|(i, a)| a.not_run.is_none() && rec.arms[i].text.is_none());
    if let Some(p) = to_search
        .then(|| crate::campaign::probe_host(req.host_probe, req.timing))
        .flatten()
    {
        rec.host_probes.push(p);
        rec.write(dir)?;
    }
    let mut ran = 0;
    let mut interrupted = false;
    for (i, a) in arms.iter().enumerate() {
        if a.not_run.is_some() || rec.arms[i].text.is_some() {
            continue;
        }
        let search_dir = dir.join(&a.slug);
        if search_dir.exists() {
            std::fs::remove_dir_all(&search_dir)?;
        }
        let [lo, hi] = range(a);
        // The arm's sets without the rate the search sets itself.
        let sets: Vec<String> = a
            .sets
            .iter()
            .filter(|s| !s.starts_with("rate="))
            .cloned()
            .collect();
        let r = CeilingRequest {
            sets,
            repeats: spec.repeats,
            served: spec.served,
            p99_max,
            resolution: spec.resolution,
            out: Some(search_dir),
            quiet: req.quiet,
            timing: req.timing,
            host_probe: Duration::ZERO,
            argv: req.argv.clone(),
            ..CeilingRequest::new(a.scenario.clone(), lo, hi)
        };
        ran += 1;
        // An arm recorded as not run (a variable it needed was unset) runs now.
        rec.arms[i].not_run = None;
        rec.arms[i].system = a.system();
        rec.arms[i].started_utc = Some(utc(SystemTime::now()));
        let result = execute(&r);
        let e = &mut rec.arms[i];
        e.ended_utc = Some(utc(SystemTime::now()));
        match result {
            Ok((_, _, c)) => {
                e.held = c.ceiling.held;
                e.not_held = c.ceiling.not_held;
                e.bound = c.ceiling.bound;
                e.text = Some(c.ceiling.text);
                e.error = None;
            }
            Err(err) => {
                e.error = Some(crate::record::redact::redact(&format!("{err:#}")));
                // A signal stops the campaign after the arm it cut short, as a matrix
                // campaign stops after its cell: that arm has no answer, and
                // `--resume` searches it (and the arms after it) again.
                if err.downcast_ref::<Interrupted>().is_some() || crate::cli::signals::received() {
                    interrupted = true;
                }
            }
        }
        rec.write(dir)?;
        if interrupted {
            break;
        }
    }
    // `complete` only when every arm that ran has its answer: an arm whose search
    // ended in an error makes the campaign `incomplete` (exit 1), and a signal makes it
    // `interrupted` (exit 130 or 143), whatever the arms before it found.
    let errors: Vec<&CampaignArm> = rec.arms.iter().filter(|a| a.error.is_some()).collect();
    let (status, exit) = if interrupted {
        ("interrupted", crate::cli::signals::exit())
    } else if errors.is_empty() {
        ("complete", Exit::Pass)
    } else {
        ("incomplete", Exit::Internal)
    };
    let mut closing = String::new();
    for a in &errors {
        closing.push_str(&format!(
            "arm {}: no answer: {}\n",
            a.id,
            a.error.as_deref().unwrap_or_default()
        ));
    }
    if status != "complete" {
        closing.push_str(&format!(
            "the campaign is {status}: `--resume` searches the arms without an answer\n"
        ));
    }
    rec.status = status.into();
    rec.ended_utc = Some(utc(SystemTime::now()));
    rec.write(dir)?;
    let dirs: Vec<PathBuf> = rec
        .arms
        .iter()
        .filter(|a| a.text.is_some())
        .map(|a| dir.join(&a.dir))
        .collect();
    let text = match report::ceiling::searches(&dirs) {
        Ok(t) => t.to_markdown(),
        Err(e) => format!("(no table: {e})\n"),
    };
    print!(
        "\n=== CEILING CAMPAIGN {} ({}) ===\n{text}{closing}",
        rec.campaign, rec.status
    );
    Ok(crate::campaign::CampaignDone {
        exit,
        dir: dir.to_path_buf(),
        record: None,
        text,
        ran,
    })
}
