//! A rate ladder: one stream cell per rate of `stream.ladder`, each in its own
//! directory, and `ladder.csv` with one row per cell.

use std::path::{Path, PathBuf};

use crate::scenario::Loaded;

/// One cell of a stream scenario: its resolved scenario and its directory.
#[derive(Debug, Clone)]
pub struct CellPlan {
    pub loaded: Loaded,
    pub out: PathBuf,
    pub rate: u64,
}

/// The cells of a stream scenario: one at `rate` in `out` itself, or one per ladder
/// rate, named `<name>-r<rate>`, in `out/<name>-r<rate>`.
pub fn cells(loaded: &Loaded, out: &Path) -> Vec<CellPlan> {
    let s = &loaded.scenario;
    let ladder = s
        .stream
        .as_ref()
        .map(|st| st.ladder.clone())
        .unwrap_or_default();
    if ladder.is_empty() {
        return vec![CellPlan {
            loaded: loaded.clone(),
            out: out.to_path_buf(),
            rate: s.rate,
        }];
    }
    ladder
        .iter()
        .map(|&rate| {
            let mut one = loaded.clone();
            one.scenario.name = cell_name(&s.name, rate);
            one.scenario.rate = rate;
            if let Some(st) = one.scenario.stream.as_mut() {
                st.ladder.clear();
            }
            CellPlan {
                out: out.join(&one.scenario.name),
                loaded: one,
                rate,
            }
        })
        .collect()
}

/// `<name>-r<rate>`.
pub fn cell_name(name: &str, rate: u64) -> String {
    format!("{name}-r{rate}")
}

/// `ladder.csv`: one row per cell of a ladder, read back from each result.json through
/// the record's typed reader; `served_pct` is served as docs/record.md defines it (at
/// most 100).
pub fn ladder_table(dirs: &[PathBuf]) -> anyhow::Result<String> {
    use anyhow::Context;
    use std::fmt::Write as _;
    let mut o = String::from(
        "cell,outcome,rate,offered_per_sec,published_per_sec,popped_per_sec,served_pct,behind,e2e_p50_ms,e2e_p99_ms,e2e_p999_ms,push_p99_ms,shed,partitions_created\n",
    );
    for d in dirs {
        // The record's one reader (crossbench-record), as every reader of a record.
        let c = report::CellRecord::load(d).with_context(|| format!("reading {}", d.display()))?;
        let r = &c.result;
        let (t, l) = (&r.throughput, &r.latency_ms);
        let _ = writeln!(
            o,
            "{},{},{},{:.0},{:.0},{:.0},{:.1},{},{:.1},{:.1},{:.1},{:.1},{},{}",
            r.cell,
            r.outcome,
            r.workload.rate_msgs_per_sec,
            t.offered_per_sec,
            t.published_per_sec,
            t.popped_per_sec,
            100.0 * c.served_in_window(),
            t.behind,
            l.e2e.p50_ms,
            l.e2e.p99_ms,
            l.e2e.p999_ms,
            l.push.p99_ms,
            r.flows.values().map(|f| f.shed).sum::<u64>(),
            r.partitions.as_ref().map_or(0, |p| p.created),
        );
    }
    Ok(o)
}
