//! `crossbench campaign` and `crossbench ceiling`: their arguments; the work is in
//! `crate::campaign`.

use std::path::PathBuf;

use clap::Args;

use crate::campaign::ceiling::{self, CeilingRequest};
use crate::campaign::{self as c, CampaignRequest};
use crate::cli::exit::Exit;
use crate::pacing::pacer::Timing;

#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// Campaign YAML (see docs/campaigns.md).
    pub file: PathBuf,
    /// The campaign's directory (default: runs/<campaign>-<UTC time>). Must not exist
    /// or be empty, unless --resume.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only the cells whose record in --out is missing or incomplete.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// With --resume: run this arm again (by its id, repeatable), whatever its record
    /// says, with the overrides the campaign file gives it now; the other arms'
    /// records are left as they are.
    #[arg(long, value_name = "ARM", requires = "resume")]
    pub rerun: Vec<String>,
    /// Only these arms (an arm's id, `*` matching any characters, or a system's name;
    /// repeatable). A new campaign is then a sitting of those arms: the others are
    /// recorded "not run" (not in this sitting), and a later --resume runs them. With
    /// --resume: their missing cells run, arms recorded "not run" that run now
    /// included; every other arm's record is left as it is, not verified again (an
    /// archived campaign, whose logs are gone, can be completed this way).
    #[arg(long, value_name = "ARM")]
    pub only: Vec<String>,
    /// List the cells in order, with an estimated duration; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No line per cell (the progress bar on a terminal stays).
    #[arg(long, short)]
    pub quiet: bool,
    /// Seconds of the host probe before the first cell: every core kept busy while a
    /// thread times 1 ms sleeps, to warn of a host that stalls the machine (cells
    /// would be VOID); recorded in campaign.json. 0 skips it. A quiet probe is no proof:
    /// a host that stalls every few seconds can pass a short one.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    pub host_probe: u64,
    #[command(flatten)]
    pub live: crate::cli::live::LiveArgs,
}

pub fn campaign(a: CampaignArgs) -> anyhow::Result<Exit> {
    let _endpoint = a.live.start()?;
    let req = CampaignRequest {
        file: a.file,
        out: a.out,
        resume: a.resume,
        rerun: a.rerun,
        only: a.only,
        dry_run: a.dry_run,
        quiet: a.quiet,
        timing: Timing::Real,
        host_probe: std::time::Duration::from_secs(a.host_probe),
        argv: std::env::args().collect(),
    };
    Ok(c::execute(&req)?.exit)
}

#[derive(Debug, Args)]
pub struct CeilingArgs {
    /// Scenario YAML; its `rate` is what the search sets.
    pub scenario: PathBuf,
    /// The range to search: a rate expected to hold, one expected not to.
    #[arg(long, num_args = 2, value_names = ["LOW", "HIGH"], required = true)]
    pub between: Vec<u64>,
    /// Repeats at each side of the boundary.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// Served fraction of the demanded deliveries a cell must reach to hold.
    #[arg(long, default_value_t = 0.99)]
    pub served: f64,
    /// End-to-end p99 a cell must stay under to hold (e.g. 5s, 500ms).
    #[arg(long, value_name = "DURATION")]
    pub p99_max: Option<String>,
    /// Stop bisecting when HIGH ÷ LOW is at most this.
    #[arg(long, default_value_t = 1.1)]
    pub resolution: f64,
    /// Override a scenario field by its dotted path.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// The search's directory (default: runs/<name>-ceiling-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No line per cell.
    #[arg(long, short)]
    pub quiet: bool,
    /// Seconds of the host probe before the first cell (as `campaign --host-probe`;
    /// recorded in ceiling.json). 0 skips it.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    pub host_probe: u64,
    #[command(flatten)]
    pub live: crate::cli::live::LiveArgs,
}

pub fn ceiling(a: CeilingArgs) -> anyhow::Result<Exit> {
    let _endpoint = a.live.start()?;
    let p99_max = match &a.p99_max {
        None => None,
        Some(t) => Some(adapters::duration_text::parse_duration(t).map_err(|e| {
            crate::cli::BadInput(format!("--p99-max {t}: {e} (write e.g. 5s or 500ms)"))
        })?),
    };
    let req = CeilingRequest {
        sets: a.sets,
        repeats: a.repeats,
        served: a.served,
        p99_max,
        resolution: a.resolution,
        out: a.out,
        quiet: a.quiet,
        host_probe: std::time::Duration::from_secs(a.host_probe),
        ..CeilingRequest::new(a.scenario, a.between[0], a.between[1])
    };
    Ok(ceiling::execute(&req)?.0)
}

#[derive(Debug, Args)]
pub struct FindingsArgs {
    /// A campaign's directory (its campaign.json names the campaign file whose
    /// `findings` are checked), or several: the sittings of one campaign file, each
    /// judged on its own and then combined.
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// The campaign file, when it is no longer where campaign.json says.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Write the page here (e.g. docs/findings.md) instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// What the page must say about sitting N (1 = the first directory), e.g. a
    /// condition that differed: `--note "2=Queen's database never vacuumed"`.
    #[arg(long = "note", value_name = "N=TEXT")]
    pub notes: Vec<String>,
}

pub fn findings(a: FindingsArgs) -> anyhow::Result<Exit> {
    use anyhow::Context;
    let mut sittings = Vec::new();
    let mut file: Option<PathBuf> = a.file.clone();
    for (i, dir) in a.dirs.iter().enumerate() {
        let rec = crate::campaign::record::CampaignRecord::read(dir)
            .map_err(|e| crate::cli::BadInput(format!("{}: {e:#}", dir.display())))?;
        match &file {
            None => file = Some(rec.file.clone()),
            // Sittings of one campaign file: the same campaign name.
            Some(_) if a.file.is_none() && i > 0 => {
                let first = crate::campaign::record::CampaignRecord::read(&a.dirs[0])
                    .map_err(|e| crate::cli::BadInput(format!("{}: {e:#}", a.dirs[0].display())))?;
                if rec.campaign != first.campaign {
                    return Err(crate::cli::BadInput(format!(
                        "{} is a sitting of campaign `{}`, {} of `{}`: sittings must be of one campaign file",
                        dir.display(),
                        rec.campaign,
                        a.dirs[0].display(),
                        first.campaign
                    ))
                    .into());
                }
            }
            Some(_) => {}
        }
        let view = report::campaign::CampaignView::load(dir)
            .with_context(|| format!("reading the campaign in {}", dir.display()))?;
        sittings.push(report::findings::sittings::Sitting::new(
            format!("sitting {}", i + 1),
            view,
        ));
    }
    let count = sittings.len();
    for n in &a.notes {
        let bad = || {
            crate::cli::BadInput(format!(
                "--note {n:?}: expected N=TEXT with N a sitting's number, 1 to {count}"
            ))
        };
        let (k, text) = n.split_once('=').ok_or_else(bad)?;
        let k: usize = k.trim().parse().map_err(|_| bad())?;
        let st = k
            .checked_sub(1)
            .and_then(|i| sittings.get_mut(i))
            .ok_or_else(bad)?;
        st.note = text.trim().to_string();
    }
    let file = file.expect("at least one directory");
    let cf = crate::campaign::file::CampaignFile::load(&file)?;
    if cf.findings.is_empty() {
        return Err(crate::cli::BadInput(format!(
            "{} has no `findings:` section to check",
            file.display()
        ))
        .into());
    }
    let mut command = "crossbench findings".to_string();
    for d in &a.dirs {
        command.push_str(&format!(" {}", d.display()));
    }
    for n in &a.notes {
        command.push_str(&format!(" --note {n:?}"));
    }
    if let Some(o) = &a.out {
        command.push_str(&format!(" --out {}", o.display()));
    }
    // The forest plots beside the page: <page>-forest.svg and .png, and with several
    // sittings <page>-forest-sitting-N.svg and .png.
    let mut forests = report::findings::ForestFiles::default();
    if let Some(p) = &a.out {
        let stem = p
            .file_stem()
            .map_or("findings".to_string(), |s| s.to_string_lossy().into_owned());
        let draw = |rows: &[report::plot::forest::Row], title: &str, name: &str| {
            let base = p.with_file_name(name);
            report::plot::forest::plot(rows, title, report::findings::forest::WORDS, &base)
                .with_context(|| format!("drawing {}", base.display()))
                .map(|_| format!("{name}.svg"))
        };
        let rows = report::findings::forest::rows(&sittings, &cf.findings)
            .map_err(crate::cli::BadInput)?;
        forests.combined = Some(draw(
            &rows,
            "The findings: each ratio with its interval, per sitting",
            &format!("{stem}-forest"),
        )?);
        if sittings.len() > 1 {
            for (i, st) in sittings.iter().enumerate() {
                let rows = report::findings::forest::rows(std::slice::from_ref(st), &cf.findings)
                    .map_err(crate::cli::BadInput)?;
                if rows.is_empty() {
                    continue;
                }
                let file = draw(
                    &rows,
                    &format!("The findings judged in {}", st.label),
                    &format!("{stem}-forest-sitting-{}", i + 1),
                )?;
                forests.per_sitting.push((st.label.clone(), file));
            }
        }
    }
    let text = report::findings::render(&sittings, &cf.findings, &command, &forests)
        .map_err(crate::cli::BadInput)?;
    match &a.out {
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
            println!("wrote {}", p.display());
        }
        None => print!("{text}"),
    }
    Ok(Exit::Pass)
}

#[derive(Debug, Args)]
pub struct GateArgs {
    /// Scenario YAML both arms run; with --baseline/--candidate, only its `gate:`
    /// section is read (the metrics and their τ).
    #[arg(required_unless_present_all = ["baseline", "candidate"])]
    pub scenario: Option<PathBuf>,
    /// The baseline arm's overrides (repeatable): --baseline-set rabbitmq.queue_type=classic.
    #[arg(long = "baseline-set", value_name = "KEY=VALUE")]
    pub baseline_sets: Vec<String>,
    /// The candidate arm's overrides: the same fields, other values.
    #[arg(long = "candidate-set", value_name = "KEY=VALUE")]
    pub candidate_sets: Vec<String>,
    /// Overrides for both arms.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// ABBA pairs (at least 5, and enough for the test to reach --alpha: 5 one-sided
    /// at 0.05, 6 two-sided; fewer is refused, exit 2).
    #[arg(long, default_value_t = report::gate::DEFAULT_PAIRS)]
    pub pairs: usize,
    /// Significance level of each stage of the paired sign-flip test (the
    /// confirmation stage must reach it too).
    #[arg(long, default_value_t = report::gate::ALPHA)]
    pub alpha: f64,
    /// Test for any change, not only one in the metric's bad direction (needs one
    /// more pair than the one-sided test for the same α).
    #[arg(long)]
    pub two_sided: bool,
    /// An A/A run of the baseline against itself: writes this host's calibration file.
    #[arg(long, conflicts_with_all = ["candidate_sets", "baseline", "candidate"])]
    pub calibrate: bool,
    /// The calibration file (default: ~/.cache/crossbench/gate-calibration-<host>.json).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Compare two records already made: the baseline's directory (a campaign or cells).
    #[arg(long, value_name = "DIR", requires = "candidate")]
    pub baseline: Option<PathBuf>,
    /// ... and the candidate's.
    #[arg(long, value_name = "DIR", requires = "baseline")]
    pub candidate: Option<PathBuf>,
    /// The gate's directory (default: runs/<name>-gate-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the Markdown summary here (default: appended to $GITHUB_STEP_SUMMARY when set).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Also write the JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write GitLab's metrics.txt here.
    #[arg(long, value_name = "FILE")]
    pub metrics_txt: Option<PathBuf>,
    /// Seed of the sign flips drawn above 16 pairs (recorded in gate.json).
    #[arg(long, default_value_t = 0x6A7E)]
    pub seed: u64,
    /// No line per leg.
    #[arg(long, short)]
    pub quiet: bool,
    /// Seconds of the host probe before the first leg (as `campaign --host-probe`;
    /// recorded in gate.json, its warning in summary.md). 0 skips it.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    pub host_probe: u64,
    #[command(flatten)]
    pub live: crate::cli::live::LiveArgs,
}

pub fn gate(a: GateArgs) -> anyhow::Result<Exit> {
    let _endpoint = a.live.start()?;
    use crate::campaign::gate::{execute, GateRequest};
    let req = GateRequest {
        scenario: a.scenario,
        sets: a.sets,
        baseline_sets: a.baseline_sets,
        candidate_sets: a.candidate_sets,
        baseline_dir: a.baseline,
        candidate_dir: a.candidate,
        pairs: a.pairs,
        test: report::gate::TestPlan {
            alpha: a.alpha,
            two_sided: a.two_sided,
        },
        calibrate: a.calibrate,
        calibration: a.calibration,
        out: a.out,
        markdown: a.markdown,
        junit: a.junit,
        metrics_txt: a.metrics_txt,
        seed: a.seed,
        quiet: a.quiet,
        timing: Timing::Real,
        host_probe: std::time::Duration::from_secs(a.host_probe),
        argv: std::env::args().collect(),
    };
    Ok(execute(&req)?.0)
}
