//! The human summary printed after a run.

use std::fmt::Write as _;
use std::path::Path;

use crate::histograms::Summary;
use crate::record::result::{CellHead, CellResult, CellTail};

fn lat(s: &Summary) -> String {
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
    let _ = writeln!(o, "OUTCOME: {}   record: {}", head.outcome, dir.display());
}

pub fn render(r: &CellResult, verdict_table: &str, dir: &Path) -> String {
    let mut o = String::new();
    banner(
        &mut o,
        &r.head,
        &format!(
            "R={}  P={}",
            r.workload.rate_events_per_sec, r.workload.properties
        ),
    );
    let _ = writeln!(
        o,
        "demand:    {} deliveries/s, {} ordered lanes (Little's law)",
        r.invariants.deliveries_per_sec, r.invariants.ordered_lanes
    );
    for (name, f) in &r.flows {
        let _ = writeln!(
            o,
            "flow {name}:    offered {}  published {}  shed {} (backpressure {}, pacer {})  failed {}  retries {}  identity {}",
            f.offered,
            f.published,
            f.shed,
            f.shed_backpressure,
            f.shed_pacer,
            f.failed,
            f.publish_retries,
            if f.identity_holds() { "holds" } else { "BROKEN" }
        );
    }
    let t = &r.throughput;
    let _ = writeln!(
        o,
        "served:    {:.0} deliveries/s of rated events ({:.1}% of demand); offered {:.0} ev/s",
        t.deliveries_per_sec,
        100.0 * t.served_fraction,
        t.offered_per_sec
    );
    let _ = writeln!(o, "e2e A:     {}", lat(&r.latency_ms.e2e_a));
    let _ = writeln!(o, "e2e B:     {}", lat(&r.latency_ms.e2e_b));
    let _ = writeln!(
        o,
        "ideal:     A 45 ms, B 40 ms of simulated work at the median"
    );
    let _ = writeln!(o, "sched lag: {}", lat(&r.latency_ms.schedule_lag));
    let l = &r.tail.loader;
    let _ = writeln!(
        o,
        "loader:    {:.2} cores of {:.0} ({:.0}%), {:.2} us CPU per delivery, peak RSS {:.0} MiB",
        l.cpu_cores_mean,
        l.cores_available,
        100.0 * l.cpu_fraction_of_available,
        l.cpu_us_per_delivery,
        l.peak_rss_bytes as f64 / 1048576.0
    );
    let p = &r.provisioned;
    let _ = writeln!(
        o,
        "cost:      lanes {}  queues {}  consumers {}  connections {}  publishes/event {:.1}  durability {:?}  delivery {:?}",
        p.ordered_lanes,
        p.physical_queues,
        p.consumer_members,
        p.connections,
        p.publishes_per_ingress_event,
        r.head.durability,
        r.head.delivery
    );
    let _ = writeln!(
        o,
        "drain:     {} after {:.1}s (grace {:.0}s)",
        r.tail.drain.outcome, r.tail.drain.seconds, r.tail.drain.grace_sec
    );
    closing(&mut o, &r.head, &r.tail, verdict_table, dir);
    o
}
