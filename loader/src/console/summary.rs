//! The summary printed after a cell: a banner with the cell and its shape, the
//! workload's figures, then warnings, the checker's table, VOID reasons and the
//! outcome with the record's place.

use std::fmt::Write as _;
use std::path::Path;

use crate::measure::histograms::Summary;
use crate::record::result::{CellHead, CellTail};

/// One latency's percentiles on a line.
pub fn latency_line(s: &Summary) -> String {
    format!(
        "p50 {:>8.1}  p95 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}  max {:>8.1} ms  (n={})",
        s.p50_ms, s.p95_ms, s.p99_ms, s.p999_ms, s.max_ms, s.count
    )
}

/// The first line of a summary: the cell, its system and `shape` (the workload's
/// own figures), and the rated window as it ran.
pub fn banner(o: &mut String, head: &CellHead, shape: &str) {
    let _ = writeln!(
        o,
        "\n=== SUMMARY  cell={}  system={}{}  {shape}  rated={:.1}s ===",
        head.cell,
        head.system,
        if head.variant.is_empty() {
            String::new()
        } else {
            format!(" ({})", head.variant)
        },
        head.time.rated_sec
    );
}

/// The last lines of a summary: warnings, the checker's table, VOID reasons and the
/// outcome with the record's place.
pub fn closing(o: &mut String, head: &CellHead, tail: &CellTail, verdict_table: &str, dir: &Path) {
    for w in &tail.warnings {
        let _ = writeln!(o, "warning:   {w}");
    }
    o.push('\n');
    o.push_str(verdict_table);
    if !verdict_table.ends_with('\n') {
        o.push('\n');
    }
    for reason in &tail.void.reasons {
        let _ = writeln!(o, "VOID: {reason}");
    }
    for reason in &tail.load.reasons {
        let _ = writeln!(o, "NOT-HELD: {reason}");
    }
    let _ = writeln!(
        o,
        "OUTCOME: {}   load: {}{}   record: {}",
        head.outcome,
        tail.load.verdict,
        if tail.load.exploratory && !tail.load.held {
            " (exploratory)"
        } else {
            ""
        },
        dir.display()
    );
}

/// The whole summary: banner, the workload's `middle` lines, closing.
pub fn render(
    head: &CellHead,
    tail: &CellTail,
    shape: &str,
    middle: &str,
    verdict_table: &str,
    dir: &Path,
) -> String {
    let mut o = String::new();
    banner(&mut o, head, shape);
    o.push_str(middle);
    closing(&mut o, head, tail, verdict_table, dir);
    o
}
