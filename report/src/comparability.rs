//! Which cells may stand side by side: their **footing**. Cells of different
//! durability tiers, run on different machines (CPU model and cores), under different
//! resource budgets, or on different products of one system (Queen 1.0.0 against
//! Queen 0.15.1, PostgreSQL 15 against 16) are never put in one section; VOID cells
//! (the loader, not the system, was the limit: SPEC §6.3) are listed apart. Each split
//! is stated in the table's notes as NOT COMPARABLE, with what differs, so the table
//! itself says why its rows are not one list.

use std::collections::{BTreeMap, BTreeSet};

use crate::cell::CellRecord;
use crate::table::{Section, Table};

/// What must be equal for two cells' figures to be compared.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Footing {
    pub tier: String,
    /// `CPU model, N cores`.
    pub machine: String,
    /// The budget asked (`no budget`).
    pub budget: String,
    /// The product and version of the system, as it reported them; compared only
    /// between cells of one system (two systems are two products by design).
    pub system: String,
    pub product: String,
}

impl Footing {
    pub fn of(c: &CellRecord) -> Footing {
        let r = &c.result;
        Footing {
            tier: tier(c),
            machine: machine(c),
            budget: budget(c),
            system: r.system.clone(),
            product: product(c),
        }
    }
}

/// `CPU model, N cores` of the machine the cell ran on.
pub fn machine(c: &CellRecord) -> String {
    let h = &c.result.host;
    let model = if h.cpu_model.is_empty() {
        "unknown CPU"
    } else {
        h.cpu_model.as_str()
    };
    format!("{model}, {} cores", h.cores)
}

/// The budget the cell ran under (`no budget`).
pub fn budget(c: &CellRecord) -> String {
    cell_record::resources::Resources::label_of(c.result.resources.as_ref()).to_string()
}

/// The product the cell measured, as the server reported it (`not recorded` for a
/// record before provenance).
pub fn product(c: &CellRecord) -> String {
    c.result
        .provenance
        .as_ref()
        .map_or_else(|| "not recorded".to_string(), |p| p.label())
}

/// The NOT COMPARABLE line for the legs of a gate, whose arms may differ in product
/// or tier on purpose (that is what a gate judges), but must share the machine and
/// the budget: `None` when they do.
pub fn not_comparable_legs(cells: &[&CellRecord]) -> Option<String> {
    let parts: Vec<String> = [
        spread("machines", cells.iter().map(|c| machine(c))),
        spread("budgets", cells.iter().map(|c| budget(c))),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "NOT COMPARABLE: the legs ran on different {}; a ratio across them is not the change's",
            parts.join(" and ")
        )
    })
}

/// `what (a; b)` when `values` hold more than one distinct value, sorted.
fn spread(what: &str, values: impl Iterator<Item = String>) -> Option<String> {
    let set: BTreeSet<String> = values.collect();
    (set.len() > 1).then(|| {
        format!(
            "{what} ({})",
            set.into_iter().collect::<Vec<_>>().join("; ")
        )
    })
}

/// The NOT COMPARABLE line for a set of cells, or `None` when they share one footing
/// (products compared within each system only).
pub fn not_comparable(cells: &[&CellRecord]) -> Option<String> {
    let feet: Vec<Footing> = cells.iter().map(|c| Footing::of(c)).collect();
    let mut parts: Vec<String> = [
        spread("budgets", feet.iter().map(|f| f.budget.clone())),
        spread("durability tiers", feet.iter().map(|f| f.tier.clone())),
        spread("machines", feet.iter().map(|f| f.machine.clone())),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut by_system: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for f in &feet {
        by_system.entry(&f.system).or_default().insert(&f.product);
    }
    for (sys, p) in by_system.iter().filter(|(_, p)| p.len() > 1) {
        parts.push(format!(
            "products of {sys} ({})",
            p.iter().copied().collect::<Vec<_>>().join("; ")
        ));
    }
    (!parts.is_empty())
        .then(|| format!("NOT COMPARABLE: these cells differ in {}", parts.join(", ")))
}

/// Group `cells` into sections by footing and add the notes to `table`. `row`
/// renders one cell. A section's heading names what sets it apart; a table of one
/// footing has one section without a heading.
pub fn sectioned<'a>(
    table: &mut Table,
    cells: &[&'a CellRecord],
    row: impl Fn(&'a CellRecord) -> Vec<String>,
) {
    let measured: Vec<&CellRecord> = cells.iter().copied().filter(|c| !c.is_void()).collect();
    // Products split a section only for a system measured on more than one.
    let mut products: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in &measured {
        products
            .entry(c.result.system.clone())
            .or_default()
            .insert(product(c));
    }
    let key = |c: &CellRecord| -> Footing {
        let mut f = Footing::of(c);
        if products.get(&f.system).is_none_or(|p| p.len() < 2) {
            f.product = String::new();
        }
        f.system = String::new();
        f
    };
    let mut keys: Vec<Footing> = Vec::new();
    for c in &measured {
        let k = key(c);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let voids: Vec<&&CellRecord> = cells.iter().filter(|c| c.is_void()).collect();
    let split = keys.len() > 1 || !voids.is_empty();
    if keys.len() > 1 {
        let differs =
            |f: fn(&Footing) -> &String| keys.iter().map(f).collect::<BTreeSet<_>>().len() > 1;
        let tiers: Vec<String> = keys
            .iter()
            .map(|k| k.tier.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut what = Vec::new();
        if differs(|k| &k.tier) {
            what.push(format!(
                "ran at {} durability tiers ({})",
                tiers.len(),
                tiers.join(", ")
            ));
        }
        if differs(|k| &k.machine) {
            what.push("ran on different machines".to_string());
        }
        if differs(|k| &k.budget) {
            what.push("ran under different resource budgets".to_string());
        }
        if differs(|k| &k.product) {
            what.push("measured different products of one system".to_string());
        }
        table.notes.push(format!(
            "NOT COMPARABLE ACROSS SECTIONS: these cells {}; each footing is a section of its own, compare figures only within one.",
            what.join(", ")
        ));
    }
    if !voids.is_empty() {
        table.notes.push(format!(
            "VOID: {} cell(s) are listed apart under \"VOID\": the loader could not hold the schedule, so their figures describe the loader, not the system (SPEC §6.3).",
            voids.len()
        ));
    }
    let heading = |k: &Footing| -> String {
        let mut h = vec![format!("durability tier: {}", k.tier)];
        let all =
            |f: fn(&Footing) -> &String| keys.iter().map(f).collect::<BTreeSet<_>>().len() > 1;
        if all(|k| &k.machine) {
            h.push(format!("machine: {}", k.machine));
        }
        if all(|k| &k.budget) {
            h.push(format!("budget: {}", k.budget));
        }
        if !k.product.is_empty() && all(|k| &k.product) {
            h.push(format!("product: {}", k.product));
        }
        h.join(" · ")
    };
    for k in &keys {
        let rows = measured
            .iter()
            .filter(|c| &key(c) == k)
            .map(|c| row(c))
            .collect();
        table.sections.push(Section {
            heading: split.then(|| heading(k)),
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
    // Each name once, with its count when several cells share it (a campaign's
    // repeats), in the order first seen.
    let mut streams: Vec<(String, usize)> = Vec::new();
    for c in cells.iter().filter(|c| c.is_stream() && !c.is_refused()) {
        let name = c.name();
        match streams.iter_mut().find(|(n, _)| *n == name) {
            Some((_, k)) => *k += 1,
            None => streams.push((name, 1)),
        }
    }
    if !streams.is_empty() {
        let total: usize = streams.iter().map(|(_, k)| k).sum();
        let names: Vec<String> = streams
            .iter()
            .map(|(n, k)| {
                if *k > 1 {
                    format!("{n} ×{k}")
                } else {
                    n.clone()
                }
            })
            .collect();
        table.notes.push(format!(
            "left out: {total} stream-workload cell(s) ({}); this table reads channel-manager pipeline cells.",
            names.join(", ")
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
