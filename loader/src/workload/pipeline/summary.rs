//! The lines of a pipeline cell's summary: demand, flows, service, latency, the
//! loader, the cost and the drain.

use std::fmt::Write as _;

use crate::console::summary::latency_line;
use crate::record::result::CellResult;
use crate::workload::pipeline::figures::PipelineBody;

/// The summary's lines between its banner and its closing.
pub fn middle(r: &CellResult<PipelineBody>) -> String {
    let mut o = String::new();
    let b = &r.body;
    let _ = writeln!(
        o,
        "demand:    {} deliveries/s, {} ordered lanes (Little's law)",
        b.invariants.deliveries_per_sec, b.invariants.ordered_lanes
    );
    for (name, f) in &b.flows {
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
    let t = &b.throughput;
    let _ = writeln!(
        o,
        "served:    {:.0} deliveries/s of rated events ({:.1}% of demand); offered {:.0} ev/s",
        t.deliveries_per_sec,
        100.0 * t.served_fraction,
        t.offered_per_sec
    );
    let _ = writeln!(o, "e2e A:     {}", latency_line(&b.latency_ms.e2e_a));
    let _ = writeln!(o, "e2e B:     {}", latency_line(&b.latency_ms.e2e_b));
    let _ = writeln!(
        o,
        "ideal:     A 45 ms, B 40 ms of simulated work at the median"
    );
    let _ = writeln!(o, "sched lag: {}", latency_line(&b.latency_ms.schedule_lag));
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
    let p = &b.provisioned;
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
    o
}
