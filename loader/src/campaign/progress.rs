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
use crate::cell::Outcome;

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
        if let Some(live) = crate::console::live::hub() {
            live.campaign_progress(self.n - 1, self.total);
        }
        if let Some(b) = &self.bar {
            b.set_message(id.to_string());
        }
    }

    pub fn finish_cell(&mut self, c: &CellEntry) {
        if let Some(live) = crate::console::live::hub() {
            live.campaign_progress(self.n, self.total);
        }
        let what = match c.status {
            CellStatus::Done => c.outcome.map(|o| o.to_string()).unwrap_or_default(),
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
    let view = report::campaign::CampaignView::load(dir);
    match &view {
        Ok(v) => o.push_str(&report::campaign::table(v).to_markdown()),
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
    let not_passed = not_passed(rec, dir, view.as_ref().ok());
    if !not_passed.is_empty() {
        let _ = writeln!(o, "not PASS ({}):", not_passed.len());
        for line in not_passed.iter().take(NOT_PASSED_SHOWN) {
            let _ = writeln!(o, "  {line}");
        }
        if not_passed.len() > NOT_PASSED_SHOWN {
            let _ = writeln!(
                o,
                "  and {} more (each cell's result.json says why)",
                not_passed.len() - NOT_PASSED_SHOWN
            );
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

/// How many cells that did not PASS the closing lines name, one line each.
const NOT_PASSED_SHOWN: usize = 20;

/// One line for each cell that ended without a PASS (`<id>  <OUTCOME>: why`), in run
/// order, so a VOID's cause (a stalled host, an overloaded loader) or a FAIL's first
/// failing stream is seen where the campaign ends, not only in the cell's record. The
/// records are the ones `view` (the table's) already read.
fn not_passed(
    rec: &CampaignRecord,
    dir: &Path,
    view: Option<&report::campaign::CampaignView>,
) -> Vec<String> {
    let record = |cell_dir: &Path| {
        view?
            .arms
            .iter()
            .flat_map(|a| &a.cells)
            .find(|r| r.dir == cell_dir)
    };
    rec.cells
        .iter()
        .filter(|c| c.status == CellStatus::Done && c.outcome != Some(Outcome::Pass))
        .map(|c| {
            let why = record(&dir.join(&c.dir))
                .and_then(|r| r.result.why_not_pass())
                .unwrap_or_else(|| "(its result.json says no more)".into());
            let outcome = c.outcome.map_or_else(|| "?".to_string(), |o| o.to_string());
            format!("{}  {}: {why}", c.id, outcome)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// `why_not_pass` of the record `result.json` would give.
    fn why_not_pass(r: &serde_json::Value) -> Option<String> {
        serde_json::from_value::<report::cell::CellResult>(r.clone())
            .unwrap()
            .why_not_pass()
    }

    #[test]
    fn a_pass_has_no_reason() {
        assert_eq!(why_not_pass(&json!({"outcome": "PASS"})), None);
    }

    #[test]
    fn a_void_gives_its_first_reason_and_counts_the_rest() {
        let r = json!({"outcome": "VOID", "void": {"void": true, "reasons": [
            "schedule lag p99 5.72 ms > 5.00 ms allowed (void.schedule_lag_p99_max); the hypervisor stole 20.4 % of the host's CPU time meanwhile",
            "loader CPU 0.97 > 0.90"
        ]}});
        assert_eq!(
            why_not_pass(&r).unwrap(),
            "schedule lag p99 5.72 ms > 5.00 ms allowed (void.schedule_lag_p99_max); the hypervisor stole 20.4 % of the host's CPU time meanwhile (and 1 more)"
        );
    }

    #[test]
    fn a_fail_gives_its_first_failing_stream_not_its_notes() {
        let r = json!({"outcome": "FAIL", "verdict": {"pass": false, "reasons": [
            "note: lost_acked=12: acknowledged and never delivered",
            "cm-avail_cm-db: 2 gaps",
            "cm-ota-sync_ota-1: 2 gaps",
            "note: cm-avail_cm-db: first gaps: key 4 seq 0"
        ]}});
        assert_eq!(
            why_not_pass(&r).unwrap(),
            "cm-avail_cm-db: 2 gaps (and 1 more)"
        );
    }

    #[test]
    fn a_refusal_gives_what_was_asked_and_the_answer() {
        let r = json!({"outcome": "REFUSED", "refused": {
            "what": "topic cb_ingress_a with 20000 partitions",
            "answer": "POLICY_VIOLATION"
        }});
        assert_eq!(
            why_not_pass(&r).unwrap(),
            "topic cb_ingress_a with 20000 partitions refused: POLICY_VIOLATION"
        );
    }
}
