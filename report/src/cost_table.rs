//! The cost-to-serve table (the reference SPEC §6.1): what each cell cost the
//! system to serve its workload, and what it got for it.

use crate::cell::CellRecord;
use crate::comparability;
use crate::format::{count, ms, num, pct};
use crate::table::Table;

pub const COLUMNS: &[&str] = &[
    "cell",
    "system",
    "tier",
    "outcome",
    "R ev/s",
    "P",
    "ordered lanes",
    "queues",
    "consumers",
    "served",
    "cores",
    "peak RSS MB",
    "disk B/event",
    "publishes/event",
    "e2e p50 ms",
    "e2e p99 ms",
    "dups",
    "gaps",
    "violations",
    "built in app",
];

pub fn build(cells: &[CellRecord]) -> Table {
    let mut t = Table::new("Cost to serve", COLUMNS);
    t.notes.push(
        "built in app: the semantics the application had to build (full wording in each cell's result.json, provisioned.semantics_built_in_app).".into(),
    );
    t.notes.push(
        "cores and peak RSS are the system under test's over the rated window (for the in-process control broker `mem`, the crossbench process); e2e is the worse of flows A and B.".into(),
    );
    let refs = comparability::pipeline_cells(&mut t, cells);
    comparability::sectioned(&mut t, &refs, row);
    t
}

fn row(c: &CellRecord) -> Vec<String> {
    let r = &c.result;
    let v = &r.verdict.totals;
    let built = &r.provisioned.semantics_built_in_app;
    vec![
        c.name(),
        c.system_label(),
        comparability::tier(c),
        r.outcome.to_string(),
        count(Some(r.workload.rate_events_per_sec)),
        count(Some(r.workload.properties)),
        count(Some(c.ordered_lanes())),
        count(Some(r.provisioned.physical_queues)),
        count(Some(r.provisioned.consumer_members)),
        pct(Some(c.served_in_window())),
        num(c.system_cores(), 2),
        num(c.system_peak_rss().map(|b| b / 1_048_576.0), 0),
        num(c.disk_bytes_per_event(), 0),
        num(c.publishes_per_event(), 2),
        ms(c.e2e(50)),
        ms(c.e2e(99)),
        count(Some(v.duplicates)),
        count(Some(v.gaps)),
        count(Some(v.order_violations)),
        if built.is_empty() {
            "none".into()
        } else {
            // The name of each semantic, without its explanation after `:`.
            built
                .iter()
                .map(|b| b.split(':').next().unwrap_or(b).trim())
                .collect::<Vec<_>>()
                .join("; ")
        },
    ]
}
