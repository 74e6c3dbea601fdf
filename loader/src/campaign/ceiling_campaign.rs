//! A ceiling campaign (a campaign file with a `ceiling:` section): one ceiling
//! search ([`super::ceiling`]) per arm, each in `<dir>/<arm slug>/`, recorded in
//! `ceiling-campaign.json` ([`CeilingCampaignRecord`]), resumable arm by arm.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::arms::Arm;
use super::ceiling::{execute, CeilingRequest};
use super::file::{CampaignFile, CeilingSpec};
use super::{CampaignDone, CampaignRequest};
use crate::record::invocation::utc;
use crate::workload::runner::signals::{self, Interrupted};
use crate::workload::runner::{prepare_out, BadInput, Exit};

/// One arm of a ceiling campaign, as `ceiling-campaign.json` records it: its range
/// and its search's answer (or why it has none).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CeilingCampaignArm {
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

/// `ceiling-campaign.json`: one ceiling search per arm, each arm's answer. Not
/// `campaign.json` ([`super::record::CampaignRecord`]), which records a matrix of
/// cells, each cell's status and outcome: this file records searches, and each
/// search's cells are in its own `ceiling.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CeilingCampaignRecord {
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
    pub arms: Vec<CeilingCampaignArm>,
    /// What the host probe saw before each sitting's first search
    /// (`crate::record::host_stalls`; absent when skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_probes: Vec<crate::record::host_stalls::StallProbe>,
}

impl CeilingCampaignRecord {
    fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        let tmp = dir.join(".ceiling-campaign.json.tmp");
        std::fs::write(&tmp, crate::record::redact::redact(&text))?;
        std::fs::rename(&tmp, dir.join("ceiling-campaign.json"))?;
        Ok(())
    }
}

/// The range an arm is searched over: its own, or the campaign's.
fn range(spec: &CeilingSpec, a: &Arm) -> [u64; 2] {
    a.between.unwrap_or(spec.between)
}

/// A ceiling campaign: one search per arm, each in `<dir>/<arm slug>/`.
pub fn run_campaign(
    req: &CampaignRequest,
    file: &CampaignFile,
    spec: &CeilingSpec,
    arms: &[Arm],
    dir: &Path,
) -> anyhow::Result<CampaignDone> {
    let p99_max = match &spec.p99_max {
        None => None,
        Some(t) => Some(adapters::duration_text::parse_duration(t).map_err(|e| {
            BadInput(format!(
                "campaign {}, field `ceiling.p99_max`: {e} (write e.g. 5s)",
                req.file.display()
            ))
        })?),
    };
    if req.dry_run {
        return Ok(dry_run(file, spec, arms, dir));
    }
    let mut rec = if req.resume {
        resumed_record(req, spec, arms, dir)?
    } else {
        prepare_out(dir)?;
        new_record(req, file, spec, arms)
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
    let searched = search_arms(req, spec, p99_max, arms, dir, &mut rec)?;
    close(dir, rec, searched)
}

/// `--dry-run`: the arms and their ranges, nothing run or written.
fn dry_run(file: &CampaignFile, spec: &CeilingSpec, arms: &[Arm], dir: &Path) -> CampaignDone {
    let mut text = format!(
        "ceiling campaign {}: {} arms, {} repeats at each side of every boundary\n",
        file.campaign,
        arms.len(),
        spec.repeats
    );
    for a in arms {
        let [lo, hi] = range(spec, a);
        text.push_str(&match &a.not_run {
            Some(w) => format!("  {}  ({w})\n", a.id),
            None => format!("  {}  {}  between {lo} and {hi}\n", a.id, a.system()),
        });
    }
    print!("{text}");
    CampaignDone {
        exit: Exit::Pass,
        dir: dir.to_path_buf(),
        record: None,
        text,
        ran: 0,
    }
}

/// `--resume`: the record in `dir`, if the file still has the arms, repeats and
/// bounds it recorded; the arms run again (`--rerun`) lose their answer.
fn resumed_record(
    req: &CampaignRequest,
    spec: &CeilingSpec,
    arms: &[Arm],
    dir: &Path,
) -> anyhow::Result<CeilingCampaignRecord> {
    let p = dir.join("ceiling-campaign.json");
    let text = std::fs::read_to_string(&p)
        .map_err(|e| BadInput(format!("--resume {}: {e}", p.display())))?;
    let mut r = serde_json::from_str::<CeilingCampaignRecord>(&text)
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
            e.between = range(spec, a);
            e.held = None;
            e.not_held = None;
            e.bound = None;
            e.text = None;
            e.error = None;
            e.started_utc = None;
            e.ended_utc = None;
        }
    }
    Ok(r)
}

/// The record of a ceiling campaign about to start: every arm without an answer.
fn new_record(
    req: &CampaignRequest,
    file: &CampaignFile,
    spec: &CeilingSpec,
    arms: &[Arm],
) -> CeilingCampaignRecord {
    CeilingCampaignRecord {
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
            .map(|a| CeilingCampaignArm {
                id: a.id.clone(),
                slug: a.slug.clone(),
                system: a.system(),
                between: range(spec, a),
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
}

/// How far the arms' searches went.
#[derive(Debug, Clone, Copy)]
struct Searched {
    /// Searches run by this invocation.
    ran: usize,
    /// A signal stopped the campaign.
    interrupted: bool,
}

/// Search every arm that runs and has no answer yet, one after the other; a signal
/// stops the campaign after the arm it cut short.
fn search_arms(
    req: &CampaignRequest,
    spec: &CeilingSpec,
    p99_max: Option<Duration>,
    arms: &[Arm],
    dir: &Path,
    rec: &mut CeilingCampaignRecord,
) -> anyhow::Result<Searched> {
    let mut done = Searched {
        ran: 0,
        interrupted: false,
    };
    for (i, a) in arms.iter().enumerate() {
        if a.not_run.is_some() || rec.arms[i].text.is_some() {
            continue;
        }
        let search_dir = dir.join(&a.slug);
        if search_dir.exists() {
            std::fs::remove_dir_all(&search_dir)?;
        }
        let [lo, hi] = range(spec, a);
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
        done.ran += 1;
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
                if err.downcast_ref::<Interrupted>().is_some() || signals::received() {
                    done.interrupted = true;
                }
            }
        }
        rec.write(dir)?;
        if done.interrupted {
            break;
        }
    }
    Ok(done)
}

/// The campaign's end: its status recorded, the searches' table and the arms
/// without an answer printed, and its exit.
fn close(
    dir: &Path,
    mut rec: CeilingCampaignRecord,
    searched: Searched,
) -> anyhow::Result<CampaignDone> {
    // `complete` only when every arm that ran has its answer: an arm whose search
    // ended in an error makes the campaign `incomplete` (exit 1), and a signal makes it
    // `interrupted` (exit 130 or 143), whatever the arms before it found.
    let errors: Vec<&CeilingCampaignArm> = rec.arms.iter().filter(|a| a.error.is_some()).collect();
    let (status, exit) = if searched.interrupted {
        ("interrupted", signals::exit())
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
    Ok(CampaignDone {
        exit,
        dir: dir.to_path_buf(),
        record: None,
        text,
        ran: searched.ran,
    })
}
