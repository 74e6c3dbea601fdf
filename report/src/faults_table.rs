//! The faults table: for each cell with faults, what was injected and what it did to
//! the service, as the record says (docs/record.md, `faults`): acknowledged messages
//! lost, duplicates, the longest stretches without a publish and without a delivery,
//! the time to recover after each fault, the share of the demand served, the leader
//! changes a cluster's placement saw, and a fault that did not take effect. Cells are
//! listed by name, then directory, so an arm's repeats sit together.

use crate::cell::CellRecord;
use crate::format::count;
use crate::table::{Section, Table};

pub const COLUMNS: &[&str] = &[
    "cell",
    "run",
    "system",
    "faults",
    "outcome",
    "served",
    "lost (acked)",
    "duplicates",
    "no publish s",
    "no delivery s",
    "recovered after s",
    "leader changes",
    "reconnects",
];

/// A fault as the schedule gives it, its non-empty params by name:
/// `partition isolate=leader at 5s for 8s`.
fn describe(f: &cell_record::result::FaultSpec) -> String {
    let mut s = f.kind.clone();
    if let Some(p) = f.params.as_object() {
        for (k, v) in p {
            let empty = v.is_null()
                || v.as_str().is_some_and(str::is_empty)
                || v.as_array().is_some_and(Vec::is_empty)
                || v.as_u64() == Some(0)
                || (k != "toxic" && v.as_str() == Some("0s"));
            if !empty {
                let v = match v.as_str() {
                    Some(t) => t.to_string(),
                    None => v.to_string().replace('"', ""),
                };
                s.push_str(&format!(" {k}={v}"));
            }
        }
    }
    s.push_str(&format!(" at {}", f.at));
    if !f.duration.is_empty() && f.duration != "0s" {
        s.push_str(&format!(" for {}", f.duration));
    }
    s
}

fn seconds(ms: i64) -> String {
    format!("{:.1}", ms as f64 / 1000.0)
}

/// The table, over the cells that have a `faults` block (none: no rows).
pub fn build(cells: &[CellRecord]) -> Table {
    let mut t = Table::new("Faults", COLUMNS);
    let mut with: Vec<&CellRecord> = cells.iter().filter(|c| c.result.faults.is_some()).collect();
    with.sort_by(|a, b| a.name().cmp(&b.name()).then_with(|| a.dir.cmp(&b.dir)));
    let mut rows = Vec::new();
    let mut ineffective = Vec::new();
    for c in with {
        let r = &c.result;
        let Some(f) = &r.faults else { continue };
        let run = c
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let faults: Vec<String> = f.schedule.iter().map(describe).collect();
        let recovered: Vec<String> = f
            .figures
            .recovery
            .iter()
            .map(|x| match x.time_to_recover_ms {
                Some(ms) => seconds(ms),
                None => "not".into(),
            })
            .collect();
        for e in f.events.iter().filter(|e| e.ineffective.is_some()) {
            ineffective.push(format!(
                "{} {run}: fault[{}] {} did not take effect: {}",
                c.name(),
                e.fault,
                e.action,
                e.ineffective.as_deref().unwrap_or_default()
            ));
        }
        rows.push(vec![
            c.name(),
            run,
            c.system_label(),
            faults.join("; "),
            r.outcome.to_string(),
            r.load.as_ref().map_or("-".into(), |l| {
                format!("{:.1} %", 100.0 * l.served_in_window)
            }),
            count(Some(r.verdict.totals.lost_acked)),
            count(Some(r.verdict.totals.duplicates)),
            seconds(f.figures.unavailability_ms.publish_ms),
            seconds(f.figures.unavailability_ms.delivery_ms),
            recovered.join(", "),
            f.cluster
                .as_ref()
                .map_or("-".into(), |cl| cl.leader_changes.len().to_string()),
            count(Some(f.figures.reconnects)),
        ]);
    }
    t.notes.push(
        "lost (acked): acknowledged publishes never delivered, counted once per stream that misses one; no publish / no delivery: the longest stretch of the rated window without one; recovered after: from each fault's end until the service is back to its pre-fault rate and latency for 5 s (\"not\": not before the load stopped, or not judged); leader changes: as the cluster's placement answered, second by second".into(),
    );
    t.notes.extend(ineffective);
    t.sections.push(Section {
        heading: None,
        rows,
    });
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_reads_as_the_schedule_wrote_it() {
        let f: cell_record::result::FaultSpec = serde_json::from_value(serde_json::json!({
            "kind": "partition", "at": "5s", "duration": "8s",
            "params": {"toxic": null, "latency": "0s", "jitter": "0s", "bandwidth": 0, "isolate": "leader"}
        }))
        .unwrap();
        assert_eq!(describe(&f), "partition isolate=leader at 5s for 8s");
        let k: cell_record::result::FaultSpec = serde_json::from_value(serde_json::json!({
            "kind": "proxy", "at": "2s", "duration": "1s",
            "params": {"toxic": "latency", "latency": "50ms", "jitter": "0s", "bandwidth": 0}
        }))
        .unwrap();
        assert_eq!(
            describe(&k),
            "proxy latency=50ms toxic=latency at 2s for 1s"
        );
    }
}
