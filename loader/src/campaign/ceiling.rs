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

use crate::cell::Outcome;
use crate::pacing::pacer::Timing;
use crate::record::invocation::utc;
use crate::record::result::BuildInfo;
use crate::scenario;
use crate::workload::runner::signals::Interrupted;
use crate::workload::runner::{
    prepare_out, BadInput, CellJob, Exit, Runner, RunnerSettings, Signals,
};

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
    /// Written as its name (`PASS`, `VOID`, …).
    pub outcome: Outcome,
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

/// What one cell said about its rate.
#[derive(Debug, Clone)]
struct Judgement {
    outcome: Outcome,
    served: Option<f64>,
    p99_ms: Option<f64>,
    held: bool,
    /// Why it did not hold.
    why: Option<String>,
}

/// Judge one cell's record (the one the cell just returned, in memory).
fn judge(c: &report::CellRecord, served_min: f64, p99_max: Option<Duration>) -> Judgement {
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
    Judgement {
        outcome: r.outcome,
        served,
        p99_ms: p99,
        held: why.is_none(),
        why,
    }
}

/// The request's own bounds: a range, repeats, a served fraction and a resolution
/// that a search can work with.
fn check_request(req: &CeilingRequest) -> Result<(), BadInput> {
    if req.low == 0 || req.high <= req.low {
        return Err(BadInput(format!(
            "--between {} {}: give two rates, LOW < HIGH, both above 0",
            req.low, req.high
        )));
    }
    if !(1..=20).contains(&req.repeats) {
        return Err(BadInput("--repeats must be between 1 and 20".into()));
    }
    if !(req.served > 0.0 && req.served <= 1.0) {
        return Err(BadInput("--served must be in (0, 1]".into()));
    }
    if !(req.resolution > 1.0 && req.resolution <= 2.0) {
        return Err(BadInput("--resolution must be in (1, 2], e.g. 1.1".into()));
    }
    Ok(())
}

/// The scenario at the range's low end, checked once: no ladder of its own, a
/// system this build has, options that build.
fn load_checked(req: &CeilingRequest) -> anyhow::Result<scenario::Loaded> {
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
    Ok(loaded)
}

/// Run the search.
pub fn execute(req: &CeilingRequest) -> anyhow::Result<(Exit, PathBuf, CeilingRecord)> {
    check_request(req)?;
    let loaded = load_checked(req)?;
    let s = &loaded.scenario;
    let name = s.name.clone();
    let dir = req
        .out
        .clone()
        .unwrap_or_else(|| crate::cell::default_out(&format!("{name}-ceiling")));
    prepare_out(&dir)?;
    let runner = Runner::start(RunnerSettings::exclusive(req.timing, req.quiet, &req.argv))?;
    let host = crate::campaign::probe_host(req.host_probe, req.timing);
    let started = SystemTime::now();
    runner.listen(Signals::CutShort);
    let mut search = Search {
        req,
        runner,
        dir,
        name,
        probes: Vec::new(),
        book: Book::default(),
    };
    let (lo, hi) = search.bracket()?;
    let unit = if s.stream.is_some() { "msg/s" } else { "ev/s" };
    let ceiling = search.answer(lo, hi, unit);
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
        probes: std::mem::take(&mut search.probes),
        ceiling,
        host_probe: host,
    };
    let Search {
        mut runner,
        dir,
        name,
        ..
    } = search;
    let mut json = serde_json::to_string_pretty(&record)?;
    json.push('\n');
    std::fs::write(
        dir.join("ceiling.json"),
        crate::record::redact::redact(&json),
    )
    .context("writing ceiling.json")?;
    runner.shut_down();
    println!(
        "CEILING {} on {}: {}\nrecord: {}",
        name,
        record.system,
        record.ceiling.text,
        dir.join("ceiling.json").display()
    );
    Ok((Exit::Pass, dir, record))
}

/// A search under way: its runner, its directory, every cell it ran and what it
/// knows about each rate.
struct Search<'a> {
    req: &'a CeilingRequest,
    runner: Runner,
    dir: PathBuf,
    /// The scenario's name (each cell's is `<name>-r<rate>`).
    name: String,
    probes: Vec<Probe>,
    book: Book,
}

impl Search<'_> {
    /// Run one cell at `rate` and judge it: whether it held.
    fn probe(&mut self, rate: u64) -> anyhow::Result<bool> {
        let req = self.req;
        anyhow::ensure!(
            self.probes.len() < MAX_CELLS,
            "the search ran {MAX_CELLS} cells without settling (the boundary is too noisy for these repeats)"
        );
        if self.runner.stopped() {
            return Err(Interrupted(format!(
                "interrupted before the cell at {rate}: the search has no answer (its cells so far are in {})",
                self.dir.display()
            ))
            .into());
        }
        let k = self.book.count(rate) + 1;
        let rel = PathBuf::from(format!("r{rate}-{k}"));
        let cell_dir = self.dir.join(&rel);
        std::fs::create_dir_all(&cell_dir)?;
        let mut sets = req.sets.clone();
        sets.push(format!("rate={rate}"));
        sets.push(format!("name={}-r{rate}", self.name));
        let l = scenario::load(&req.scenario, &sets)?;
        if let Some(live) = crate::console::live::hub() {
            live.set_context(&format!("ceiling {}", self.name), &format!("r{rate}"));
        }
        let report = self
            .runner
            .run(&CellJob::new(&l, req.scenario.clone(), cell_dir.clone()))?;
        // A cell cut short by a signal did not answer whether its rate holds: it must
        // not count as "did not hold", and the search ends without an answer.
        if self.runner.cut_short() {
            return Err(Interrupted(format!(
                "interrupted during the cell at {rate} ({}): the search has no answer",
                cell_dir.display()
            ))
            .into());
        }
        let cell = report::CellRecord::from_result(&cell_dir, report.record);
        let j = judge(&cell, req.served, req.p99_max);
        if !req.quiet {
            eprintln!(
                "rate {rate} #{k}: {} ({})",
                if j.held { "held" } else { "did not hold" },
                j.why.clone().unwrap_or_else(|| j.outcome.to_string())
            );
        }
        self.book.by_rate.entry(rate).or_default().push(j.held);
        self.probes.push(Probe {
            rate,
            dir: rel,
            outcome: j.outcome,
            served: j.served,
            p99_ms: j.p99_ms,
            held: j.held,
            why: j.why,
        });
        Ok(j.held)
    }

    /// Repeat `rate` until it has its repeats, or fails one.
    fn confirm(&mut self, rate: u64) -> anyhow::Result<()> {
        while self.book.count(rate) < self.req.repeats as usize && self.book.held_all(rate) {
            self.probe(rate)?;
        }
        Ok(())
    }

    /// The ends of the range first (the answer is inside it, or said to be outside),
    /// then the bisection: the bracket `(lo, hi)` the search ends with.
    fn bracket(&mut self) -> anyhow::Result<(u64, u64)> {
        let (mut lo, hi) = (self.req.low, self.req.high);
        let low_held = self.probe(lo)?;
        let high_held = if low_held { self.probe(hi)? } else { false };
        // The top of the range held: confirm it with repeats. If every repeat holds,
        // the ceiling lies above the range and the top is the answer's lower bound; a
        // failed repeat makes the top the upper side of the bisection.
        let mut top_held = false;
        if high_held {
            self.confirm(hi)?;
            top_held = self.book.held_all(hi);
            if top_held {
                lo = hi;
            }
        }
        if low_held && !top_held {
            return self.bisect(lo, hi);
        }
        Ok((lo, hi))
    }

    /// Bisect on a log scale until the bracket is within the resolution, and confirm
    /// both sides with repeats; a side that fails its repeats moves the bracket.
    fn bisect(&mut self, mut lo: u64, mut hi: u64) -> anyhow::Result<(u64, u64)> {
        loop {
            while hi as f64 / lo as f64 > self.req.resolution {
                let mid = ((lo as f64) * (hi as f64)).sqrt().round() as u64;
                if mid <= lo || mid >= hi {
                    break;
                }
                if self.probe(mid)? {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            self.confirm(lo)?;
            if !self.book.held_all(lo) {
                // The lower side failed a repeat: it is the new upper side.
                hi = lo;
                match self.book.held_below(lo) {
                    Some(l) => {
                        lo = l;
                        continue;
                    }
                    None => break,
                }
            }
            self.confirm(hi)?;
            if self.book.held_all(hi) {
                // The upper side held every repeat: it is the new lower side.
                lo = hi;
                hi = self.book.failed_above(hi).unwrap_or(self.req.high);
                if hi <= lo {
                    break;
                }
                continue;
            }
            break;
        }
        Ok((lo, hi))
    }

    /// The answer the bracket `(lo, hi)` gives: what held, what did not, and what
    /// limited the first rate that did not hold.
    fn answer(&self, lo: u64, hi: u64, unit: &str) -> Ceiling {
        let req = self.req;
        let held = if self.book.held_all(lo) {
            Some(lo)
        } else {
            None
        };
        let not_held = if self
            .book
            .by_rate
            .get(&hi)
            .is_some_and(|v| v.iter().any(|h| !*h))
        {
            Some(hi)
        } else {
            None
        };
        let bound = not_held.map(|r| {
            let all_void = self
                .probes
                .iter()
                .filter(|p| p.rate == r && !p.held)
                .all(|p| p.outcome == Outcome::Void);
            if all_void { "loader" } else { "system" }.to_string()
        });
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
        Ceiling {
            held,
            not_held,
            bound,
            text,
        }
    }
}
