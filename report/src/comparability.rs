//! Which cells may stand side by side. Cells of different durability tiers are
//! never put in one section, and VOID cells (the loader, not the system, was the
//! limit: SPEC §6.3) are listed apart. Each split is stated in the table's notes,
//! so the table itself says why its rows are not one list.

use crate::cell::CellRecord;
use crate::table::{Section, Table};

/// Group `cells` into sections and add the notes to `table`. `row` renders one cell.
pub fn sectioned<'a>(
    table: &mut Table,
    cells: &[&'a CellRecord],
    row: impl Fn(&'a CellRecord) -> Vec<String>,
) {
    let mut tiers: Vec<String> = Vec::new();
    for c in cells.iter().filter(|c| !c.is_void()) {
        let t = tier(c);
        if !tiers.contains(&t) {
            tiers.push(t);
        }
    }
    let voids: Vec<&&CellRecord> = cells.iter().filter(|c| c.is_void()).collect();
    let split = tiers.len() > 1 || !voids.is_empty();
    if tiers.len() > 1 {
        table.notes.push(format!(
            "NOT COMPARABLE ACROSS SECTIONS: these cells ran at {} durability tiers ({}); each tier is a section of its own, compare figures only within one.",
            tiers.len(),
            tiers.join(", ")
        ));
    }
    if !voids.is_empty() {
        table.notes.push(format!(
            "VOID: {} cell(s) are listed apart under \"VOID\": the loader could not hold the schedule, so their figures describe the loader, not the system (SPEC §6.3).",
            voids.len()
        ));
    }
    for t in &tiers {
        let rows = cells
            .iter()
            .filter(|c| !c.is_void() && &tier(c) == t)
            .map(|c| row(c))
            .collect();
        table.sections.push(Section {
            heading: split.then(|| format!("durability tier: {t}")),
            rows,
        });
    }
    if !voids.is_empty() {
        let reasons: Vec<String> = voids
            .iter()
            .map(|c| format!("{}: {}", c.name(), c.result.void.reasons.join("; ")))
            .collect();
        table.sections.push(Section {
            heading: Some(format!(
                "VOID — not results of the system ({})",
                reasons.join(" | ")
            )),
            rows: voids.iter().map(|c| row(c)).collect(),
        });
    }
}

/// The cells a pipeline table can hold. Refused cells (no figures: the system's
/// answer is the result) and stream-workload cells (other figures) are left out, and
/// the table says so in a note naming each one.
pub fn pipeline_cells<'a>(table: &mut Table, cells: &'a [CellRecord]) -> Vec<&'a CellRecord> {
    for c in cells.iter().filter(|c| c.is_refused()) {
        let r = c.result.refused.clone().unwrap_or_default();
        table.notes.push(format!(
            "REFUSED: {} ({}) has no figures: the system refused {}: {}",
            c.name(),
            c.system_label(),
            r.what,
            r.answer
        ));
    }
    let streams: Vec<String> = cells
        .iter()
        .filter(|c| c.is_stream() && !c.is_refused())
        .map(|c| c.name())
        .collect();
    if !streams.is_empty() {
        table.notes.push(format!(
            "left out: {} stream-workload cell(s) ({}); this table reads channel-manager pipeline cells.",
            streams.len(),
            streams.join(", ")
        ));
    }
    cells
        .iter()
        .filter(|c| !c.is_refused() && !c.is_stream())
        .collect()
}

/// The durability tier as recorded (`default`, `fsync`, `memory`), `unknown` when absent.
pub fn tier(c: &CellRecord) -> String {
    if c.result.durability.is_empty() {
        "unknown".to_string()
    } else {
        c.result.durability.clone()
    }
}
