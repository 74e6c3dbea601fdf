//! The `faults` block of a cell's record, once the cell is over: the figures of
//! [`super::timeline`] over the recorded series, the tags of `report.csv` and the
//! `.hlog` files, the warnings a person must see, and `invocation.txt`'s lines.

use std::path::Path;
use std::sync::Arc;

use adapters::StreamCounters;

use crate::cell::faults::proxy::ProxyFigures;
use crate::cell::faults::timeline::{self, Reading, Span};
use crate::cell::faults::{loss_allowed, spans_ms, FaultEvent, FaultFigures, FaultRecord};
use crate::cell::workload::Load;
use crate::scenario::Scenario;

/// What the lifecycle hands over.
#[derive(Debug)]
pub struct Inputs<'a> {
    pub scenario: &'a Scenario,
    pub dir: &'a Path,
    pub events: Vec<FaultEvent>,
    pub spans: Vec<Span>,
    pub proxy: Option<ProxyFigures>,
    pub cluster: Option<crate::cell::faults::placement::ClusterRecord>,
    pub readings: &'a [Reading],
    pub traffic_start_unix_ms: i64,
    pub rated_start_unix_ms: i64,
    pub rated_end_unix_ms: i64,
    pub load: &'a Load,
    pub stream_counters: &'a [Arc<StreamCounters>],
}

/// The record's block, its warnings and `invocation.txt`'s lines.
pub fn build(i: &Inputs<'_>) -> (FaultRecord, Vec<String>, Vec<String>) {
    let s = i.scenario;
    let rows = std::fs::read_to_string(i.dir.join("report.csv"))
        .map(|t| timeline::read_rows(&t))
        .unwrap_or_default();
    let unavailability =
        timeline::unavailability(i.readings, i.rated_start_unix_ms, i.rated_end_unix_ms);
    let first_fault = i
        .spans
        .iter()
        .map(|sp| sp.start_unix_ms)
        .min()
        .unwrap_or(i64::MAX);
    // The steady state before the first fault: the rated window's part of it, or the
    // warm-up too when the fault comes in the window's first 3 s.
    let base_from = if first_fault - i.rated_start_unix_ms >= 3000 {
        i.rated_start_unix_ms
    } else {
        i.traffic_start_unix_ms
    };
    let recovery: Vec<timeline::Recovery> = i
        .spans
        .iter()
        .map(|sp| match sp.end_unix_ms {
            Some(end) if sp.start_unix_ms != i64::MAX => timeline::recovery(
                i.readings,
                &rows,
                base_from,
                first_fault,
                end,
                i.rated_end_unix_ms,
            ),
            _ => timeline::Recovery {
                time_to_recover_ms: None,
                baseline_deliveries_per_sec: None,
                baseline_p99_ms: None,
                note: Some(if sp.start_unix_ms == i64::MAX {
                    "the fault never started".into()
                } else {
                    "the fault never ended in the cell".into()
                }),
            },
        })
        .collect();
    let recovered_at: Vec<Option<i64>> = i
        .spans
        .iter()
        .zip(&recovery)
        .map(|(sp, r)| Some(sp.end_unix_ms? + r.time_to_recover_ms?))
        .collect();
    let mut warnings = Vec::new();
    if !s.faults.is_empty() {
        if let Err(e) = timeline::tag_record(i.dir, &i.spans, &recovered_at) {
            warnings.push(format!(
                "could not tag report.csv and the .hlog files with the fault phases: {e}"
            ));
        }
    }
    let sum = |f: fn(&StreamCounters) -> u64| i.stream_counters.iter().map(|c| f(c)).sum();
    let figures = FaultFigures {
        unavailability_ms: unavailability,
        recovery,
        max_e2e_lag_ms: i.load.e2e_max_ms,
        publish_errors_by_class: i
            .load
            .publish_errors
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(c, n)| (c.name().to_string(), *n))
            .collect(),
        receive_errors: sum(|c| c.receive_errors.get()),
        ack_errors: sum(|c| c.ack_errors.get()),
        reconnects: sum(|c| c.reconnects.get()),
        failed: i.load.failed,
        failed_indeterminate: i.load.failed_indeterminate,
    };
    let mut lines = Vec::new();
    for (n, f) in s.faults.iter().enumerate() {
        lines.push(format!(
            "schedule[{n}]: {} at {} for {}{}{}",
            f.kind.name(),
            f.at,
            f.duration,
            f.target
                .as_deref()
                .map(|t| format!(" target {t}"))
                .unwrap_or_default(),
            f.restart
                .as_deref()
                .map(|r| format!(" restart `{r}`"))
                .unwrap_or_default(),
        ));
    }
    for e in &i.events {
        let mut l = format!("{:>8} ms  fault[{}] {}", e.at_ms, e.fault, e.action);
        if !e.pids.is_empty() {
            l.push_str(&format!(" pids={:?}", e.pids));
        }
        if let Some(c) = &e.command {
            l.push_str(&format!(
                " command=`{}` exit={} ({} ms{})",
                c.command,
                c.exit_code.map_or("none".into(), |x| x.to_string()),
                c.millis,
                if c.timed_out { ", timed out" } else { "" }
            ));
        }
        if let Some(d) = &e.detail {
            l.push_str(&format!(" {d}"));
        }
        if let Some(c) = &e.connectivity {
            l.push_str(&format!(
                " check: {}/{} across the cut connected, {}/{} within refused",
                c.across_connected.len(),
                c.across_tried,
                c.within_refused.len(),
                c.within_tried
            ));
        }
        if let Some(why) = &e.ineffective {
            l.push_str(&format!(" INEFFECTIVE: {why}"));
        }
        if let Some(err) = &e.error {
            l.push_str(&format!(" error: {err}"));
            warnings.push(format!("fault[{}] {}: {err}", e.fault, e.action));
        }
        lines.push(l);
    }
    if let Some(p) = &i.proxy {
        lines.push(format!(
            "proxy: {} -> {} ({} connections, {} reset)",
            p.listen, p.upstream, p.connections, p.resets
        ));
    }
    let record = FaultRecord {
        schedule: s.faults.clone(),
        events: i.events.clone(),
        spans: spans_ms(&i.spans, i.rated_start_unix_ms),
        proxy: i.proxy.clone(),
        cluster: i.cluster.clone(),
        figures,
        loss_allowed: loss_allowed(s),
    };
    (record, warnings, lines)
}
