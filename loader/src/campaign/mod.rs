//! Campaigns: a matrix of cells, each repeated, run in an interleaved order through
//! the normal cell lifecycle, and recorded in `campaign.json` (docs/campaigns.md).
//!
//! One concept per file: [`file`] (the campaign file), [`arms`] (its matrix
//! expanded and every scenario resolved), [`order`] (the interleaved order),
//! [`record`] (`campaign.json`), [`progress`] (what the console shows),
//! [`ceiling`] (the ceiling search, a campaign that picks its next rate from the
//! last outcome), [`ceiling_campaign`] (one search per arm, `ceiling-campaign.json`)
//! and [`gate`] (the CI regression gate). Every cell runs through the runner
//! ([`crate::workload::runner`]).

pub mod arms;
pub mod ceiling;
pub mod ceiling_campaign;
pub mod file;
pub mod gate;
pub mod order;
pub mod progress;
pub mod record;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::cell::Outcome;
use crate::pacing::pacer::Timing;
use crate::record::invocation::utc;
use crate::record::result::BuildInfo;
use crate::workload::runner::{
    prepare_out, signals, BadInput, CellJob, Exit, Runner, RunnerSettings, Signals,
};

use arms::Arm;
use record::{ArmEntry, CampaignRecord, CellEntry, CellStatus, CAMPAIGN_SCHEMA_VERSION};

/// One `campaign` request.
#[derive(Debug, Clone)]
pub struct CampaignRequest {
    pub file: PathBuf,
    /// The campaign's directory (`runs/<campaign>-<UTC time>` when absent).
    pub out: Option<PathBuf>,
    /// Run only what `out` is missing.
    pub resume: bool,
    /// With `resume`: these arms (by id) run again, whatever their record says, with
    /// the overrides the file gives them now.
    pub rerun: Vec<String>,
    /// Only the arms these patterns select (an arm's id, `*` matching any run of
    /// characters, or a system's name). A new campaign records the others "not run"
    /// (not in this sitting); with `resume`, every other arm's record is left as it
    /// is, unverified.
    pub only: Vec<String>,
    /// List the cells and an estimated duration; run nothing.
    pub dry_run: bool,
    /// No per-cell lines (the progress bar, on a terminal, stays).
    pub quiet: bool,
    pub timing: Timing,
    /// How long the host probe runs before the first cell (`record::host_stalls`);
    /// zero skips it, and so does virtual time (it measures the real machine).
    pub host_probe: Duration,
    pub argv: Vec<String>,
}

impl CampaignRequest {
    pub fn new(file: impl Into<PathBuf>) -> CampaignRequest {
        CampaignRequest {
            file: file.into(),
            out: None,
            resume: false,
            rerun: Vec::new(),
            only: Vec::new(),
            dry_run: false,
            quiet: true,
            timing: Timing::Real,
            host_probe: Duration::ZERO,
            argv: std::env::args().collect(),
        }
    }
}

/// What a campaign did.
#[derive(Debug)]
pub struct CampaignDone {
    pub exit: Exit,
    pub dir: PathBuf,
    pub record: Option<CampaignRecord>,
    /// What was printed (the dry-run list, or the closing table).
    pub text: String,
    /// Cells run by this invocation.
    pub ran: usize,
}

/// Seconds a cell of `arm` should take: hydration and setup (a guess), warm-up,
/// the rated window, a drain that catches up quickly.
fn estimate(arm: &Arm) -> Duration {
    let Some(l) = &arm.loaded else {
        return Duration::ZERO;
    };
    let s = &l.scenario;
    Duration::from_secs(5) + s.warmup.0 + s.duration.0 + Duration::from_secs(2)
}

fn cell_id(arm: &Arm, repeat: u32) -> String {
    format!("{}#{repeat}", arm.id)
}

/// The host probe before the first cell of a campaign, a ceiling search or a gate
/// (`record::host_stalls`), said on stderr with its warning. None when `secs` is zero
/// or the time is virtual (the probe measures the real machine).
pub(crate) fn probe_host(
    secs: Duration,
    timing: Timing,
) -> Option<crate::record::host_stalls::StallProbe> {
    if secs.is_zero() || timing != Timing::Real {
        return None;
    }
    let p = crate::record::host_stalls::probe(secs);
    eprintln!("{}", p.describe());
    if let Some(w) = p.warning() {
        eprintln!("WARNING: {w}");
    }
    Some(p)
}

/// Run (or `--dry-run`, or `--resume`) a campaign.
pub fn execute(req: &CampaignRequest) -> anyhow::Result<CampaignDone> {
    let file = file::CampaignFile::load(&req.file)?;
    let mut arms = arms::expand(&file, &req.file)?;
    check_request(req, &arms)?;
    if !req.resume {
        leave_out_unselected(req, &mut arms);
    }
    let per_arm: Vec<u32> = arms.iter().map(|a| a.repeats).collect();
    let order = order::interleave_each(&per_arm, file.seed);
    let dir = req
        .out
        .clone()
        .unwrap_or_else(|| crate::cell::default_out(&file.campaign));
    if file.ceiling.is_some() && !req.only.is_empty() {
        return Err(BadInput(
            "--only narrows a campaign of cells; a ceiling campaign resumes whole".into(),
        )
        .into());
    }
    if let Some(spec) = &file.ceiling {
        return ceiling_campaign::run_campaign(req, &file, spec, &arms, &dir);
    }
    if req.dry_run && !req.resume {
        return Ok(dry_run_done(
            progress::dry_run(&file, &arms, &order, estimate),
            dir,
        ));
    }
    let rec = if req.resume {
        resumed_record(req, &file, &arms, &dir)?
    } else {
        prepare_out(&dir)?;
        new_record(req, &file, &arms, &order)
    };
    if req.dry_run {
        // What this resume would run, nothing written.
        let todo = cells_to_run(req, &arms, &dir, &rec);
        let arm_of = |i: usize| arms.iter().find(|a| a.id == rec.cells[i].arm);
        let text = progress::resume_dry_run(
            &file,
            &dir,
            todo.iter()
                .filter_map(|&i| arm_of(i).map(|a| (&rec.cells[i], a))),
            estimate,
        );
        return Ok(dry_run_done(text, dir));
    }
    sit(req, &arms, dir, rec)
}

/// `--rerun` and `--only` name arms that exist and run, and every arm that runs
/// builds: anything else is bad input, before anything is written.
fn check_request(req: &CampaignRequest, arms: &[Arm]) -> anyhow::Result<()> {
    check_rerun(req, arms)?;
    check_only(req, arms)?;
    for a in arms {
        if let Some(l) = &a.loaded {
            let s = &l.scenario;
            crate::cell::setup::build(s, &crate::workload::build_context(s)).map_err(|e| {
                BadInput(format!(
                    "campaign {}, arm {}: {e}",
                    req.file.display(),
                    a.id
                ))
            })?;
        }
    }
    Ok(())
}

/// `--resume`: the record in `dir`, if the file still expands to the arms, repeats
/// and seed it recorded; the arms run again (`--rerun`) take the file's overrides,
/// and the arms that run now are admitted.
fn resumed_record(
    req: &CampaignRequest,
    file: &file::CampaignFile,
    arms: &[Arm],
    dir: &Path,
) -> anyhow::Result<CampaignRecord> {
    let mut r = CampaignRecord::read(dir).map_err(|e| {
        BadInput(format!(
            "--resume {}: {e:#}; give the directory of the campaign to resume",
            dir.display()
        ))
    })?;
    // An arm recorded as not run (a variable it needs was not set) recorded its
    // overrides unexpanded: it is the same arm when the file still declares them.
    // An arm run again (`--rerun`) may have other overrides now (a method fixed):
    // all its cells run again with them, and the record takes them.
    let same = r.arms.len() == arms.len()
        && r.arms.iter().zip(arms).all(|(e, a)| {
            let sets = e.sets == a.sets
                || (e.not_run.is_some() && e.sets == a.declared)
                || req.rerun.contains(&a.id);
            e.id == a.id && sets && e.repeats.unwrap_or(r.repeats) == a.repeats
        })
        && r.repeats == file.repeats
        && r.seed == file.seed;
    if !same {
        return Err(BadInput(format!(
            "--resume {}: the campaign file now expands to other arms, repeats or seed than the campaign recorded there; resume with the file as it was, or start a new --out",
            dir.display()
        ))
        .into());
    }
    for (e, a) in r.arms.iter_mut().zip(arms) {
        if req.rerun.contains(&a.id) {
            e.sets = a.sets.clone();
        }
    }
    admit_arms_that_run_now(req, arms, &mut r);
    Ok(r)
}

/// A new campaign with `--only` is a sitting of those arms: every other arm is
/// recorded "not run", with the reason, and a later `--resume` runs it once it can.
fn leave_out_unselected(req: &CampaignRequest, arms: &mut [Arm]) {
    for a in arms.iter_mut() {
        if a.not_run.is_none() && !selected(req, a) {
            a.not_run = Some(format!(
                "not in this sitting: --only {} leaves it out (a later --resume runs it)",
                req.only.join(" --only ")
            ));
        }
    }
}

/// The record of a campaign about to start: every arm, the order, every cell pending
/// (or not run, its arm's reason given).
fn new_record(
    req: &CampaignRequest,
    file: &file::CampaignFile,
    arms: &[Arm],
    order: &[order::Slot],
) -> CampaignRecord {
    CampaignRecord {
        schema_version: CAMPAIGN_SCHEMA_VERSION,
        kind: "campaign".into(),
        campaign: file.campaign.clone(),
        description: file.description.clone(),
        file: req.file.clone(),
        crossbench: BuildInfo::current().into(),
        host: CampaignRecord::new_host(),
        repeats: file.repeats,
        seed: file.seed,
        status: "running".into(),
        started_utc: utc(SystemTime::now()),
        ended_utc: None,
        arms: arms
            .iter()
            .map(|a| ArmEntry {
                id: a.id.clone(),
                slug: a.slug.clone(),
                group: a.group.clone(),
                system: a.system(),
                scenario: a.scenario.clone(),
                sets: a.sets.clone(),
                point: a.point.clone(),
                not_run: a.not_run.clone(),
                repeats: Some(a.repeats),
            })
            .collect(),
        order: order
            .iter()
            .map(|s| cell_id(&arms[s.arm], s.repeat))
            .collect(),
        cells: order
            .iter()
            .map(|s| {
                let a = &arms[s.arm];
                CellEntry {
                    id: cell_id(a, s.repeat),
                    arm: a.id.clone(),
                    repeat: s.repeat,
                    dir: PathBuf::from(&a.slug).join(format!("r{}", s.repeat)),
                    status: if a.not_run.is_some() {
                        CellStatus::NotRun
                    } else {
                        CellStatus::Pending
                    },
                    outcome: None,
                    exit: None,
                    error: a.not_run.clone(),
                    started_utc: None,
                    ended_utc: None,
                    seconds: None,
                }
            })
            .collect(),
        host_probes: Vec::new(),
        sittings: Vec::new(),
    }
}

/// One sitting of the campaign: the run lock taken, the sitting recorded, the cells
/// this sitting runs run, and the campaign closed.
fn sit(
    req: &CampaignRequest,
    arms: &[Arm],
    dir: PathBuf,
    mut rec: CampaignRecord,
) -> anyhow::Result<CampaignDone> {
    rec.status = "running".into();
    rec.ended_utc = None;
    let mut runner = Runner::start(RunnerSettings::exclusive(req.timing, req.quiet, &req.argv))?;
    // This run is a sitting of its own: a resume on another machine says so.
    rec.sittings.push(record::SittingEntry::now());
    rec.write(&dir)?;
    // Which cells to run is decided before any signal is listened for: on a resume it
    // verifies every recorded cell's logs again, a blocking scan.
    let todo = cells_to_run(req, arms, &dir, &rec);
    // Ctrl-C: no further cell starts, and the running one goes on to its end, so the
    // campaign stops with whole cells only. A second Ctrl-C (or a SIGTERM, at once)
    // stops the running cell's traffic early: it is recorded as interrupted and run
    // again by --resume. One more signal exits at once (runner::signals).
    runner.listen(Signals::AfterCell);
    let ran = run_cells(&runner, req, arms, &dir, &mut rec, todo)?;
    runner.shut_down();
    close(dir, rec, ran)
}

/// The campaign's end: its status and end time recorded, the closing table printed,
/// and its exit (the signal's, FAIL, an error's, or PASS).
fn close(dir: PathBuf, mut rec: CampaignRecord, ran: usize) -> anyhow::Result<CampaignDone> {
    let interrupted = rec
        .cells
        .iter()
        .any(|c| matches!(c.status, CellStatus::Interrupted | CellStatus::Pending));
    // A cell that ended in an error has no record to count: the campaign is then
    // `incomplete` (exit 1 unless a cell FAILed), not `complete`.
    let errored = rec.cells.iter().any(|c| c.status == CellStatus::Failed);
    rec.status = if interrupted {
        "interrupted"
    } else if errored {
        "incomplete"
    } else {
        "complete"
    }
    .into();
    rec.ended_utc = Some(utc(SystemTime::now()));
    if let Some(st) = rec.sittings.last_mut() {
        st.ended_utc = rec.ended_utc.clone();
        st.cells_run = ran;
    }
    rec.write(&dir)?;
    let text = progress::closing(&rec, &dir);
    print!("{text}");
    let any_fail = rec.cells.iter().any(|c| c.outcome == Some(Outcome::Fail));
    let exit = if interrupted {
        signals::exit()
    } else if any_fail {
        Exit::Fail
    } else if errored {
        Exit::Internal
    } else {
        Exit::Pass
    };
    Ok(CampaignDone {
        exit,
        dir,
        record: Some(rec),
        text,
        ran,
    })
}

/// `--rerun` names arms of this campaign, each one that runs here, and comes with
/// `--resume`: anything else is bad input, before anything runs.
fn check_rerun(req: &CampaignRequest, arms: &[Arm]) -> Result<(), BadInput> {
    if req.rerun.is_empty() {
        return Ok(());
    }
    if !req.resume {
        return Err(BadInput(
            "--rerun runs arms of a campaign already made again: give it with --resume and the campaign's --out".into(),
        ));
    }
    for id in &req.rerun {
        match arms.iter().find(|a| &a.id == id) {
            None => {
                let known: Vec<&str> = arms.iter().map(|a| a.id.as_str()).collect();
                return Err(BadInput(format!(
                    "--rerun {id}: campaign {} has no such arm; its arms are {}",
                    req.file.display(),
                    known.join(", ")
                )));
            }
            Some(a) => {
                if let Some(why) = &a.not_run {
                    return Err(BadInput(format!(
                        "--rerun {id}: this arm does not run here ({why})"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A `--dry-run`'s end: its listing printed, nothing run or written.
fn dry_run_done(text: String, dir: PathBuf) -> CampaignDone {
    print!("{text}");
    CampaignDone {
        exit: Exit::Pass,
        dir,
        record: None,
        text,
        ran: 0,
    }
}

/// Whether `--only` (none: every arm) selects `arm`.
fn selected(req: &CampaignRequest, arm: &Arm) -> bool {
    req.only.is_empty() || req.only.iter().any(|p| selects(p, arm))
}

/// One `--only` pattern: the arm's id (`*` matching any characters), or its system.
fn selects(pattern: &str, arm: &Arm) -> bool {
    glob(pattern, &arm.id) || (arm.loaded.is_some() && pattern == arm.system())
}

/// `pattern` matches all of `text`, each `*` standing for any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if text.len() < first.len() + last.len() || !text.starts_with(first) || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

/// Each `--only` pattern selects at least one arm.
fn check_only(req: &CampaignRequest, arms: &[Arm]) -> Result<(), BadInput> {
    for p in &req.only {
        if !arms.iter().any(|a| selects(p, a)) {
            let known: Vec<&str> = arms.iter().map(|a| a.id.as_str()).collect();
            return Err(BadInput(format!(
                "--only {p}: no arm of campaign {} has that id or runs that system (`*` matches any characters); its arms are {}",
                req.file.display(),
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// On `--resume`: an arm recorded as not run that runs now (the variable it needed is
/// set this time) takes its place in the record, and its cells become pending, unless
/// `--only` leaves it out.
fn admit_arms_that_run_now(req: &CampaignRequest, arms: &[Arm], rec: &mut CampaignRecord) {
    for (e, a) in rec.arms.iter_mut().zip(arms) {
        if e.not_run.is_none() || a.not_run.is_some() || !selected(req, a) {
            continue;
        }
        e.not_run = None;
        e.system = a.system();
        e.sets = a.sets.clone();
        for c in rec.cells.iter_mut().filter(|c| c.arm == a.id) {
            if c.status == CellStatus::NotRun {
                c.status = CellStatus::Pending;
                c.error = None;
            }
        }
    }
}

/// A cell's record is complete (result.json with an outcome, invocation.txt with
/// it too) and its logs still give the verdict it recorded.
pub fn complete_and_verified(dir: &Path) -> bool {
    if crate::record::incomplete::is_incomplete(dir) {
        return false;
    }
    let Ok(r) = cell_record::CellResult::read_dir(dir) else {
        return false;
    };
    let inv = std::fs::read_to_string(dir.join("invocation.txt")).unwrap_or_default();
    if !inv.contains(&format!("outcome: {}", r.outcome)) {
        return false;
    }
    if r.outcome == Outcome::Refused {
        return true;
    }
    let opts = checker::VerifyOptions {
        allow_duplicates: r.accept == "at-least-once",
        ..Default::default()
    };
    checker::verify_dir(dir, &opts).is_ok_and(|v| v.pass == r.verdict.pass)
}

/// The cells a run (or a `--resume`) of `rec` runs, in the recorded order.
fn cells_to_run(
    req: &CampaignRequest,
    arms: &[Arm],
    dir: &Path,
    rec: &CampaignRecord,
) -> Vec<usize> {
    (0..rec.cells.len())
        .filter(|&i| {
            let c = &rec.cells[i];
            let Some(arm) = arms.iter().find(|a| a.id == c.arm) else {
                return false;
            };
            // An arm that ran before but cannot run now (a variable it needs is unset
            // this time): its cells stay as recorded.
            if arm.not_run.is_some() || !selected(req, arm) {
                return false;
            }
            match c.status {
                CellStatus::NotRun => false,
                _ if req.rerun.contains(&c.arm) => true,
                CellStatus::Done => !complete_and_verified(&dir.join(&c.dir)),
                _ => true,
            }
        })
        .collect()
}

/// Run the cells `todo` (indices into `rec.cells`, from [`cells_to_run`]), one after
/// the other, until a signal says no further cell starts.
fn run_cells(
    runner: &Runner,
    req: &CampaignRequest,
    arms: &[Arm],
    dir: &Path,
    rec: &mut CampaignRecord,
    todo: Vec<usize>,
) -> anyhow::Result<usize> {
    if !todo.is_empty() {
        // Before the first cell: does this host stall a busy machine? Warned of,
        // recorded, never refused (record::host_stalls).
        if let Some(p) = probe_host(req.host_probe, req.timing) {
            rec.host_probes.push(p);
            rec.write(dir)?;
        }
    }
    let mut bar = progress::Bar::new(todo.len(), req.quiet);
    let mut ran = 0;
    for i in todo {
        if runner.stopped() {
            break;
        }
        let arm = arms
            .iter()
            .find(|a| a.id == rec.cells[i].arm)
            .context("a recorded cell names an arm the campaign lacks")?;
        let loaded = arm
            .loaded
            .as_ref()
            .context("an arm that runs has a scenario")?;
        let cell_dir = dir.join(&rec.cells[i].dir);
        if cell_dir.exists() {
            std::fs::remove_dir_all(&cell_dir)
                .with_context(|| format!("clearing {} to run it again", cell_dir.display()))?;
        }
        std::fs::create_dir_all(&cell_dir)
            .with_context(|| format!("creating {}", cell_dir.display()))?;
        let started = SystemTime::now();
        begin_cell(&mut rec.cells[i], started);
        rec.write(dir)?;
        if let Some(live) = crate::console::live::hub() {
            live.set_context(&rec.campaign, &arm.id);
        }
        bar.start(&rec.cells[i].id);
        let r = runner.run(&CellJob::new(loaded, arm.scenario.clone(), cell_dir));
        ran += 1;
        end_cell(&mut rec.cells[i], started, r, runner.cut_short());
        bar.finish_cell(&rec.cells[i]);
        rec.write(dir)?;
    }
    bar.done();
    Ok(ran)
}

/// A cell about to run is marked interrupted while it runs: a kill leaves it to
/// `--resume`.
fn begin_cell(c: &mut CellEntry, started: SystemTime) {
    c.status = CellStatus::Interrupted;
    c.started_utc = Some(utc(started));
    c.ended_utc = None;
    c.outcome = None;
    c.exit = None;
    c.error = None;
}

/// What a cell that ran left in its entry: done with its outcome and exit, cut
/// short by a signal (`cut_short`), or failed with the error's exit.
fn end_cell(
    c: &mut CellEntry,
    started: SystemTime,
    r: anyhow::Result<crate::cell::CellReport>,
    cut_short: bool,
) {
    c.ended_utc = Some(utc(SystemTime::now()));
    c.seconds = Some(started.elapsed().unwrap_or_default().as_secs_f64());
    match r {
        Ok(report) if !cut_short => {
            c.status = CellStatus::Done;
            c.outcome = Some(report.outcome);
            c.exit = Some(Exit::of_cell(&report).code());
        }
        Ok(report) => {
            c.status = CellStatus::Interrupted;
            c.outcome = Some(report.outcome);
            c.error = Some(
                "cut short by a signal (a second Ctrl-C, or SIGTERM): run it again with --resume"
                    .into(),
            );
        }
        Err(e) => {
            c.status = CellStatus::Failed;
            c.exit = Some(Exit::of_error(&e).code());
            c.error = Some(crate::record::redact::redact(&format!("{e:#}")));
        }
    }
}
