//! What a campaign shows while it runs and when it ends: a progress bar with an ETA
//! when stderr is a terminal, one line per cell otherwise; the dry run's list; the
//! closing table of every arm's medians and intervals.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::campaign::arms::Arm;
use crate::campaign::file::CampaignFile;
use crate::campaign::order::Slot;
use crate::campaign::record::{CampaignRecord, CellEntry, CellStatus};

/// The campaign's console while it runs.
#[derive(Debug)]
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    lines: bool,
    total: usize,
    n: usize,
    started: Instant,
}

impl Bar {
    /// A bar over `total` cells on a terminal; otherwise one line per cell (none
    /// when `quiet`).
    pub fn new(total: usize, quiet: bool) -> Bar {
        let tty = std::io::stderr().is_terminal();
        let bar = (tty && total > 0).then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} cells  {elapsed_precise} elapsed, ETA {eta}  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Bar {
            lines: !tty && !quiet,
            bar,
            total,
            n: 0,
            started: Instant::now(),
        }
    }

    pub fn start(&mut self, id: &str) {
        self.n += 1;
        if let Some(b) = &self.bar {
            b.set_message(id.to_string());
        }
    }

    pub fn finish_cell(&mut self, c: &CellEntry) {
        let what = match c.status {
            CellStatus::Done => c.outcome.clone().unwrap_or_default(),
            CellStatus::Failed => format!("error: {}", c.error.as_deref().unwrap_or("")),
            CellStatus::Interrupted => "interrupted".into(),
            _ => format!("{:?}", c.status),
        };
        if let Some(b) = &self.bar {
            b.inc(1);
            b.println(format!("{}: {what}", c.id));
        } else if self.lines {
            eprintln!(
                "[{}/{}] {}: {what} ({:.1} s, {} elapsed) → {}",
                self.n,
                self.total,
                c.id,
                c.seconds.unwrap_or(0.0),
                humantime::format_duration(Duration::from_secs(self.started.elapsed().as_secs())),
                c.dir.display()
            );
        }
    }

    pub fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The dry run: every cell in order, and the estimated duration.
pub fn dry_run(
    file: &CampaignFile,
    arms: &[Arm],
    order: &[Slot],
    estimate: impl Fn(&Arm) -> Duration,
) -> String {
    let mut o = String::new();
    let runs = arms.iter().filter(|a| a.not_run.is_none()).count();
    let _ = writeln!(
        o,
        "campaign {}: {} arms ({} not run here) × {} repeats{}, order seed {}",
        file.campaign,
        arms.len(),
        arms.len() - runs,
        file.repeats,
        if arms.iter().any(|a| a.repeats != file.repeats) {
            " (groups that set their own: as they say)"
        } else {
            ""
        },
        file.seed
    );
    let mut total = Duration::ZERO;
    for (i, s) in order.iter().enumerate() {
        let a = &arms[s.arm];
        match &a.not_run {
            Some(why) => {
                let _ = writeln!(o, "{:>4}  {}#{}  ({why})", i + 1, a.id, s.repeat);
            }
            None => {
                let e = estimate(a);
                total += e;
                let _ = writeln!(
                    o,
                    "{:>4}  {}#{}  {}  ~{} s",
                    i + 1,
                    a.id,
                    s.repeat,
                    a.system(),
                    e.as_secs()
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "estimated duration: {} ({} cells to run)",
        humantime::format_duration(Duration::from_secs(total.as_secs())),
        order
            .iter()
            .filter(|s| arms[s.arm].not_run.is_none())
            .count()
    );
    o
}

/// `--resume --dry-run`: the cells the resume would run, in their recorded order, and
/// an estimated duration.
pub fn resume_dry_run<'a>(
    file: &CampaignFile,
    dir: &Path,
    cells: impl Iterator<Item = (&'a CellEntry, &'a Arm)>,
    estimate: impl Fn(&Arm) -> Duration,
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "campaign {}: resuming {}", file.campaign, dir.display());
    let (mut total, mut n) = (Duration::ZERO, 0usize);
    for (c, a) in cells {
        let e = estimate(a);
        total += e;
        n += 1;
        let was = match c.status {
            CellStatus::Pending => "never started".to_string(),
            CellStatus::Done => "record does not verify, or --rerun".to_string(),
            other => format!("{other:?}").to_lowercase(),
        };
        let _ = writeln!(
            o,
            "{n:>4}  {}  {}  ~{} s  ({was})",
            c.id,
            a.system(),
            e.as_secs()
        );
    }
    let _ = writeln!(
        o,
        "estimated duration: {} ({n} cells to run)",
        humantime::format_duration(Duration::from_secs(total.as_secs()))
    );
    o
}

/// The closing lines: where the record is, and the arms' table.
pub fn closing(rec: &CampaignRecord, dir: &Path) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n=== CAMPAIGN {}  {} ===", rec.campaign, rec.status);
    match report::campaign::CampaignView::load(dir) {
        Ok(v) => o.push_str(&report::campaign::table(&v).to_markdown()),
        Err(e) => {
            let _ = writeln!(o, "(no table: {e})");
        }
    }
    // The host probe's warning again, beside the VOID counts it explains.
    for p in &rec.host_probes {
        if let Some(w) = p.warning() {
            let _ = writeln!(o, "host probe at {}: {w}", p.utc);
        }
    }
    if rec.status == "interrupted" {
        let left = rec
            .cells
            .iter()
            .filter(|c| matches!(c.status, CellStatus::Pending | CellStatus::Interrupted))
            .count();
        let _ = writeln!(
            o,
            "stopped by a signal with {left} of {} cells still to run: `crossbench campaign {} --out {} --resume` runs them",
            rec.cells.len(),
            rec.file.display(),
            dir.display()
        );
    }
    let _ = writeln!(o, "record: {}", dir.join("campaign.json").display());
    o
}
