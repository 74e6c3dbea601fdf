//! A measured cell beside the published cell it claims to reproduce: figure by
//! figure with ratios, and every difference in shape or hardware spelled out. A
//! run on fewer cores than the published rig is a scaled reproduction: the notes
//! say which quantities were scaled and by how much.

use std::fmt::Write;

use crate::cell::CellRecord;
use crate::format::{count, ms, num, ratio};
use crate::published::PublishedCell;
use crate::table::{Section, Table};

#[derive(Debug, Clone)]
pub struct Comparison {
    pub published_id: String,
    pub cell: String,
    pub table: Table,
    /// Differences in shape and hardware; scaling.
    pub differences: Vec<String>,
    /// Why the two do not stand on one footing (another product, another machine);
    /// printed first, as NOT COMPARABLE.
    pub not_comparable: Vec<String>,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

fn fig_row(
    name: &str,
    p: Option<f64>,
    m: Option<f64>,
    fmt: fn(Option<f64>) -> String,
) -> Vec<String> {
    vec![name.to_string(), fmt(p), fmt(m), ratio(m, p)]
}

fn n0(v: Option<f64>) -> String {
    num(v, 0)
}
fn n1(v: Option<f64>) -> String {
    num(v, 1)
}
fn n2(v: Option<f64>) -> String {
    num(v, 2)
}

pub fn compare(p: &PublishedCell, c: &CellRecord) -> Comparison {
    let r = &c.result;
    let f = &p.figures;
    let six_r = 6.0 * r.workload.rate_events_per_sec as f64;
    let ref_served =
        (six_r > 0.0).then(|| r.throughput.reference_deliveries_per_sec / six_r * 100.0);
    let mut t = Table::new(
        format!("{} (published) vs {} (measured)", p.id, c.name()),
        &["figure", "published", "measured", "measured ÷ published"],
    );
    let stream = c.is_stream();
    if stream {
        t.notes.push("stream workload (SPEC §9): latency over every delivery of the rated window; messages/s: accepted pushes per second; served %: messages consumed per group per second ÷ offered.".into());
    } else {
        t.notes.push("latency: flow A, as the reference's tables; deliveries/s and the reference's served %: all deliveries ÷ rated seconds, the reference's way (warm-up and drain included, hence above 100 % when the warm-up is long against the rated window); served % is crossbench's one definition (docs/record.md): the rated demand delivered within the rated window, at most 100 %.".into());
    }
    if let Some(note) = adapters::System::from_name(&r.system).and_then(|s| s.entry().memory_note) {
        t.notes.push(note.into());
    }
    let shed = Some(c.shed() as f64);
    let e2e = c.headline_e2e();
    let mut rows = vec![
        fig_row("e2e p50 ms", f.p50_ms, Some(e2e.p50_ms), ms),
        fig_row("e2e p95 ms", f.p95_ms, Some(e2e.p95_ms), ms),
        fig_row("e2e p99 ms", f.p99_ms, Some(e2e.p99_ms), ms),
    ];
    if stream {
        rows.extend([
            fig_row("e2e p99.9 ms", f.p999_ms, Some(e2e.p999_ms), ms),
            fig_row(
                "messages/s",
                f.messages_per_sec,
                Some(r.throughput.published_per_sec),
                n0,
            ),
            fig_row(
                "consumed messages/s per group",
                None,
                Some(r.throughput.popped_per_sec),
                n0,
            ),
            fig_row(
                "served %",
                f.served_pct,
                Some(c.served_in_window() * 100.0),
                n0,
            ),
        ]);
    } else {
        rows.extend([
            fig_row(
                "deliveries/s",
                f.deliveries_per_sec,
                Some(r.throughput.reference_deliveries_per_sec),
                n0,
            ),
            fig_row(
                "reference's served % (all deliveries ÷ rated seconds; can pass 100 %)",
                f.served_pct,
                ref_served,
                n0,
            ),
            fig_row(
                "served % (rated demand delivered in the rated window)",
                None,
                Some(c.served_in_window() * 100.0),
                n0,
            ),
            fig_row(
                "rated events delivered, drain included %",
                None,
                Some(r.throughput.served_fraction * 100.0),
                n0,
            ),
        ]);
    }
    rows.extend([
        fig_row("system cores", f.cores, c.system_cores(), n2),
        fig_row(
            "RAM GB (peak)",
            f.ram_gb,
            c.system_peak_rss().map(|b| b / GIB),
            n2,
        ),
        fig_row(
            "disk MB/s (write)",
            f.disk_mb_per_s,
            r.cost
                .as_ref()
                .and_then(|x| x.system_disk_write_bytes_per_s_mean)
                .map(|b| b / MIB),
            n1,
        ),
        fig_row(
            "queues",
            f.queues.map(|v| v as f64),
            Some(r.provisioned.physical_queues as f64),
            n0,
        ),
        fig_row(
            "consumers",
            f.consumers.map(|v| v as f64),
            Some(r.provisioned.consumer_members as f64),
            n0,
        ),
        fig_row("shed", f.shed.map(|v| v as f64), shed, n0),
    ]);
    rows.push(vec![
        "verdict".into(),
        match &f.verdict_note {
            Some(n) => format!("{} ({n})", f.verdict),
            None => f.verdict.clone(),
        },
        r.outcome.to_string(),
        // The published vocabulary (report::published::VERDICTS) spells a clean
        // cell as an outcome does.
        if f.verdict == r.outcome.name() {
            "same".into()
        } else {
            "differs".into()
        },
    ]);
    t.sections.push(Section {
        heading: None,
        rows,
    });
    let footing = not_comparable(p, c);
    if !footing.is_empty() {
        t.notes
            .insert(0, format!("NOT COMPARABLE: {}", footing.join("; ")));
    }
    Comparison {
        published_id: p.id.clone(),
        cell: c.name(),
        table: t,
        differences: differences(p, c),
        not_comparable: footing,
    }
}

/// Why the published cell and the measured one do not stand on one footing: another
/// product (or one not shown to be the same), another machine. Empty when they do.
pub fn not_comparable(p: &PublishedCell, c: &CellRecord) -> Vec<String> {
    let mut why = Vec::new();
    let measured = c.result.provenance.as_ref();
    match (&p.product, measured) {
        (None, _) => why.push(
            "product: the published page names no product version, so the two are not shown to be one product".to_string(),
        ),
        (Some(pp), None) => why.push(format!(
            "product: published {}, the measured record names none (written before provenance)",
            pp.label()
        )),
        (Some(pp), Some(m)) => {
            let same = m.version.as_deref() == Some(pp.version.as_str()) && m.caveat.is_none();
            if !same {
                let caveat = m
                    .caveat
                    .as_ref()
                    .map_or(String::new(), |_| ": the measured server's version is known not to name its build".into());
                why.push(format!(
                    "product: published {}, measured {}{caveat}",
                    pp.label(),
                    m.label()
                ));
            }
        }
    }
    let h = &p.hardware;
    let machine = crate::comparability::machine(c);
    let same_cores = h.cores.is_some_and(|n| u64::from(n) == c.result.host.cores);
    let same_model = !c.result.host.cpu_model.is_empty()
        && h.description.contains(c.result.host.cpu_model.as_str());
    if !(same_cores && same_model) {
        why.push(format!(
            "machine: published {}, measured {machine}",
            h.description
        ));
    }
    why
}

/// Every difference in system, shape and hardware, with the scale factor.
pub fn differences(p: &PublishedCell, c: &CellRecord) -> Vec<String> {
    let r = &c.result;
    let s = &p.shape;
    let mut d = Vec::new();
    if p.system != r.system {
        d.push(format!(
            "system: published {}, measured {}",
            p.system, r.system
        ));
    }
    if !p.variant.is_empty() && !r.variant.contains(p.variant.as_str()) {
        d.push(format!(
            "variant: published `{}`, measured `{}`",
            p.variant, r.variant
        ));
    }
    if s.durability != r.durability {
        d.push(format!(
            "durability tier: published {}, measured {}: figures of different tiers are not like for like",
            s.durability, r.durability
        ));
    }
    let scale = |name: &str, pv: Option<f64>, mv: f64, d: &mut Vec<String>| {
        if let Some(pv) = pv {
            if (pv - mv).abs() > 1e-9 {
                let f = if pv > 0.0 {
                    format!(" (× {:.3})", mv / pv)
                } else {
                    String::new()
                };
                d.push(format!(
                    "{name}: published {}, measured {}{f}",
                    num(Some(pv), 0),
                    num(Some(mv), 0)
                ));
            }
        }
    };
    if c.is_stream() {
        scale(
            "offered messages/s",
            s.rate_per_sec,
            c.offered_rate() as f64,
            &mut d,
        );
        scale(
            "partitions (the space)",
            s.lanes.map(|v| v as f64),
            r.workload.space as f64,
            &mut d,
        );
    } else {
        scale(
            "R (ingress events/s)",
            s.rate_per_sec,
            c.offered_rate() as f64,
            &mut d,
        );
        scale(
            "P (properties)",
            s.properties.map(|v| v as f64),
            r.workload.properties as f64,
            &mut d,
        );
        scale(
            "lanes per topic",
            s.lanes.map(|v| v as f64),
            r.workload.lanes as f64,
            &mut d,
        );
    }
    scale(
        "ordered lanes provisioned",
        s.ordered_lanes.map(|v| v as f64),
        c.ordered_lanes() as f64,
        &mut d,
    );
    scale(
        "rated seconds",
        s.duration_s,
        r.time.rated_sec.round(),
        &mut d,
    );
    let host = r.host.cores as f64;
    if let Some(pc) = p.hardware.cores {
        let machines = p.hardware.machines.unwrap_or(1);
        if pc as f64 != host || machines > 1 {
            d.push(format!(
                "hardware: published {} ({} vCPU{}), measured {} ({} cores, {} GB): a scaled reproduction, {:.3}× the cores of one published machine",
                p.hardware.description,
                pc,
                if machines > 1 { format!(" × {machines} machines") } else { String::new() },
                r.host.cpu_model,
                r.host.cores,
                (r.host.memory_bytes as f64 / GIB).round(),
                host / pc as f64
            ));
        }
    }
    if let (Some(pr), true) = (s.rate_per_sec, c.offered_rate() > 0) {
        if let Some(pc) = p.hardware.cores {
            let rate_scale = c.offered_rate() as f64 / pr;
            // Every machine of a published cluster ran the system.
            let published_cores = pc as f64 * f64::from(p.hardware.machines.unwrap_or(1));
            let core_scale = host / published_cores;
            if (rate_scale - 1.0).abs() > 1e-9 {
                d.push(format!(
                    "rate scaled by {rate_scale:.3} against cores scaled by {core_scale:.3}: per-core load is {:.2}× the published cell's",
                    rate_scale / core_scale
                ));
            }
        }
    }
    for line in &p.reproduce.scaled {
        d.push(format!("scaled on purpose: {line}"));
    }
    d
}

impl Comparison {
    pub fn to_markdown(&self) -> String {
        let mut s = self.table.to_markdown();
        if self.differences.is_empty() {
            s.push_str("Shape and hardware: identical to the published cell.\n");
        } else {
            s.push_str("Differences in shape and hardware:\n\n");
            for d in &self.differences {
                let _ = writeln!(s, "- {d}");
            }
        }
        s
    }
}

/// `count` re-exported for callers formatting shapes.
pub fn shape_line(p: &PublishedCell) -> String {
    let s = &p.shape;
    let mut parts = vec![format!("{} workload", s.workload)];
    if let Some(r) = s.rate_per_sec {
        parts.push(format!("R = {}", num(Some(r), 0)));
    }
    if let Some(v) = s.properties {
        parts.push(format!("P = {}", count(Some(v))));
    }
    if let Some(v) = s.lanes {
        parts.push(format!("lanes = {}", count(Some(v))));
    }
    if let Some(v) = s.ordered_lanes {
        parts.push(format!("ordered lanes = {}", count(Some(v))));
    }
    if let Some(v) = s.duration_s {
        parts.push(format!("{v:.0} s rated"));
    }
    parts.push(format!("durability {}", s.durability));
    parts.join(", ")
}

/// One figure of a comparison: its name, the published value, how to read it from a
/// cell, and how to print it.
struct Figure {
    name: &'static str,
    published: Option<f64>,
    read: fn(&CellRecord) -> Option<f64>,
    fmt: fn(Option<f64>) -> String,
}

fn figures(p: &PublishedCell, stream: bool) -> Vec<Figure> {
    let f = &p.figures;
    let mut v = vec![
        Figure {
            name: "e2e p50 ms",
            published: f.p50_ms,
            read: |c| Some(c.headline_e2e().p50_ms),
            fmt: ms,
        },
        Figure {
            name: "e2e p95 ms",
            published: f.p95_ms,
            read: |c| Some(c.headline_e2e().p95_ms),
            fmt: ms,
        },
        Figure {
            name: "e2e p99 ms",
            published: f.p99_ms,
            read: |c| Some(c.headline_e2e().p99_ms),
            fmt: ms,
        },
    ];
    if stream {
        v.extend([
            Figure {
                name: "messages/s",
                published: f.messages_per_sec,
                read: |c| Some(c.result.throughput.published_per_sec),
                fmt: n0,
            },
            Figure {
                name: "served %",
                published: f.served_pct,
                read: |c| Some(c.served_in_window() * 100.0),
                fmt: n0,
            },
        ]);
    } else {
        v.extend([
            Figure {
                name: "deliveries/s",
                published: f.deliveries_per_sec,
                read: |c| Some(c.result.throughput.reference_deliveries_per_sec),
                fmt: n0,
            },
            Figure {
                name: "reference's served % (all deliveries ÷ rated seconds; can pass 100)",
                published: f.served_pct,
                read: |c| {
                    let six_r = 6.0 * c.result.workload.rate_events_per_sec as f64;
                    (six_r > 0.0)
                        .then(|| c.result.throughput.reference_deliveries_per_sec / six_r * 100.0)
                },
                fmt: n0,
            },
            Figure {
                name: "served % (rated demand delivered in the rated window)",
                published: None,
                read: |c| Some(c.served_in_window() * 100.0),
                fmt: n0,
            },
        ]);
    }
    v.extend([
        Figure {
            name: "system cores",
            published: f.cores,
            read: |c| c.system_cores(),
            fmt: n2,
        },
        Figure {
            name: "RAM GB (peak)",
            published: f.ram_gb,
            read: |c| c.system_peak_rss().map(|b| b / GIB),
            fmt: n2,
        },
        Figure {
            name: "disk MB/s (write)",
            published: f.disk_mb_per_s,
            read: |c| {
                c.result
                    .cost
                    .as_ref()
                    .and_then(|x| x.system_disk_write_bytes_per_s_mean)
                    .map(|b| b / MIB)
            },
            fmt: n1,
        },
    ]);
    v
}

/// A campaign arm beside the published cell it reproduces: each figure as the
/// median over the arm's PASS repeats with its 95 % interval, and whether the
/// published figure lies inside that interval.
pub fn compare_arm(p: &PublishedCell, arm: &crate::campaign::ArmView) -> Comparison {
    let first = arm.cells.first();
    let stream = first.is_some_and(|c| c.is_stream());
    let mut t = Table::new(
        format!(
            "{} (published) vs arm {} (measured: {})",
            p.id,
            arm.id,
            arm.outcomes.label()
        ),
        &[
            "figure",
            "published",
            "measured median [interval; 95 % unless marked]",
            "published inside?",
            "median ÷ published",
        ],
    );
    t.notes.push("medians over the arm's PASS repeats with their percentile-bootstrap intervals; \"inside\" says whether the published figure lies in the interval measured here (on a scaled machine, an outside figure is expected for rates and costs: the differences below say by how much the shape was scaled)".into());
    let mut rows = Vec::new();
    for fig in figures(p, stream) {
        let i = arm.median(fig.read);
        let inside = match (fig.published, i) {
            (Some(_), Some(i)) if i.n < 2 => "— (one repeat)".to_string(),
            (Some(pv), Some(i)) if i.contains(pv) => "inside".to_string(),
            (Some(pv), Some(i)) if pv < i.low => "below".to_string(),
            (Some(_), Some(_)) => "above".to_string(),
            _ => "—".to_string(),
        };
        rows.push(vec![
            fig.name.to_string(),
            (fig.fmt)(fig.published),
            crate::campaign::with_ci(i, fig.fmt),
            inside,
            ratio(i.map(|x| x.estimate), fig.published),
        ]);
    }
    rows.push(vec![
        "verdict".into(),
        p.figures.verdict.clone(),
        arm.outcomes.label(),
        "—".into(),
        "—".into(),
    ]);
    t.sections.push(Section {
        heading: None,
        rows,
    });
    // Every repeat's footing against the published cell's, once per reason.
    let mut footing: Vec<String> = Vec::new();
    for c in &arm.cells {
        for w in not_comparable(p, c) {
            if !footing.contains(&w) {
                footing.push(w);
            }
        }
    }
    if !footing.is_empty() {
        t.notes
            .insert(0, format!("NOT COMPARABLE: {}", footing.join("; ")));
    }
    Comparison {
        published_id: p.id.clone(),
        cell: arm.id.clone(),
        table: t,
        differences: first.map(|c| differences(p, c)).unwrap_or_default(),
        not_comparable: footing,
    }
}
