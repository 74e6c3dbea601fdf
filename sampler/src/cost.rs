//! The end-of-run cost summary over the rated window.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::Serialize;

use crate::samples::{Sample, SampleSet};
use crate::spec::TargetKind;
use crate::SamplerError;

/// The rated (measured) window of a run, wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RatedWindow {
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
}

/// Facts about the workload that the sampler cannot see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WorkloadFacts {
    /// Events published by the loader during the rated window.
    pub ingress_events: u64,
    pub deliveries: u64,
    /// Publishes the system performed physically (fan-out copies included).
    pub physical_publishes: u64,
    pub ordered_lanes: u64,
    pub connections: u64,
    pub consumers: u64,
    pub queues: u64,
    pub partitions: u64,
    /// Cores the loader may use (its cgroup quota or the cores it is pinned to).
    pub loader_cores_available: f64,
}

/// PostgreSQL internals over the rated window (summed over `postgres` targets).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PostgresCost {
    pub commits_per_s_mean: Option<f64>,
    pub wal_bytes_per_s_mean: Option<f64>,
    pub wal_bytes_per_ingress_event: Option<f64>,
    pub dead_tuples_mean: Option<f64>,
    pub dead_tuples_peak: Option<f64>,
    pub autovacuum_runs: Option<f64>,
    pub db_size_bytes_last: Option<f64>,
    pub db_size_growth_bytes: Option<f64>,
}

/// Resource cost of one run. Every field is documented in `sampler/FORMAT.md`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostSummary {
    pub window_start_unix_ms: u64,
    pub window_end_unix_ms: u64,
    pub window_s: f64,
    pub sample_interval_s: f64,
    pub ticks_in_window: usize,
    pub system_targets: Vec<String>,
    pub missing_system_targets: Vec<String>,

    pub system_cores_mean: Option<f64>,
    pub system_cores_peak: Option<f64>,
    pub system_memory_peak_bytes: Option<f64>,
    pub system_anon_peak_bytes: Option<f64>,
    pub system_disk_write_bytes_per_s_mean: Option<f64>,
    pub system_disk_write_bytes: Option<f64>,
    pub system_throttled_s_per_s_mean: Option<f64>,

    pub ingress_events: u64,
    pub ingress_events_per_s: Option<f64>,
    pub deliveries: u64,
    pub disk_write_bytes_per_ingress_event: Option<f64>,
    pub physical_publishes_per_ingress_event: Option<f64>,
    pub memory_bytes_per_1000_ordered_lanes: Option<f64>,
    pub mcpu_per_1000_events_per_s: Option<f64>,

    pub ordered_lanes: u64,
    pub connections: u64,
    pub consumers: u64,
    pub queues: u64,
    pub partitions: u64,

    pub loader_cores_mean: Option<f64>,
    pub loader_cores_peak: Option<f64>,
    pub loader_rss_peak_bytes: Option<f64>,
    pub loader_cores_available: f64,
    pub loader_cpu_fraction_mean: Option<f64>,
    pub loader_cpu_fraction_peak: Option<f64>,
    pub sampler_cores_mean: Option<f64>,

    pub host_cores_mean: Option<f64>,
    /// Share of the host's CPU time stolen by the hypervisor in the rated window
    /// (mean over its ticks, and the worst tick).
    pub host_steal_frac_mean: Option<f64>,
    pub host_steal_frac_peak: Option<f64>,
    pub postgres: Option<PostgresCost>,

    pub reference_cores_active_mean: Option<f64>,
    pub reference_cores_active_ticks: usize,
    pub reference_disk_write_mib_per_s_all_rows: Option<f64>,
}

/// [`cost_summary`] over a samples.csv file.
pub fn cost_summary_from_path(
    samples: &Path,
    window: RatedWindow,
    workload: WorkloadFacts,
    system_targets: &[String],
) -> Result<CostSummary, SamplerError> {
    let set = crate::read_samples(samples)?;
    Ok(cost_summary(&set, window, workload, system_targets))
}

/// Inferred sampling interval in ms: the median spacing of distinct ticks.
fn interval_ms(set: &SampleSet) -> u64 {
    let mut ticks: Vec<u64> = set.rows.iter().map(|r| r.unix_ms).collect();
    ticks.sort_unstable();
    ticks.dedup();
    let mut d: Vec<u64> = ticks
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0)
        .collect();
    if d.is_empty() {
        return 1000;
    }
    d.sort_unstable();
    // Round away scheduling jitter (1001 ms -> 1000 ms).
    let m = d[d.len() / 2];
    if m >= 20 {
        (m + 5) / 10 * 10
    } else {
        m.max(1)
    }
}

/// Per tick (bucketed to the interval so that rows of several samplers line
/// up), the sum over matching rows of the non-empty values. Ticks where no
/// matching row had a value are absent.
fn per_tick<'a>(
    rows: impl Iterator<Item = &'a Sample>,
    w: u64,
    keep: impl Fn(&Sample) -> bool,
    metrics: &[&str],
) -> BTreeMap<u64, f64> {
    let mut m = BTreeMap::new();
    for r in rows {
        if let Some(v) = r.value {
            if metrics.contains(&&*r.metric) && keep(r) {
                *m.entry((r.unix_ms + w / 2) / w).or_insert(0.0) += v;
            }
        }
    }
    m
}

fn mean(m: &BTreeMap<u64, f64>) -> Option<f64> {
    (!m.is_empty()).then(|| m.values().sum::<f64>() / m.len() as f64)
}

fn peak(m: &BTreeMap<u64, f64>) -> Option<f64> {
    m.values().copied().reduce(f64::max)
}

fn ratio(num: Option<f64>, den: f64) -> Option<f64> {
    num.filter(|_| den > 0.0).map(|n| n / den)
}

/// Summarises the cost of a run over the rated window: rows whose tick lies in
/// `(start_unix_ms, end_unix_ms]` (a tick's rates cover the interval before
/// it). `system_targets` are the labels of the system under test; their
/// values are summed per tick. The `reference_*` fields reproduce the Go
/// reference's hand-made tables and use every row, not just the window.
pub fn cost_summary(
    samples: &SampleSet,
    window: RatedWindow,
    workload: WorkloadFacts,
    system_targets: &[String],
) -> CostSummary {
    let w = interval_ms(samples);
    let sys: HashSet<&str> = system_targets.iter().map(String::as_str).collect();
    // A target is present when it gave at least one value: a process pattern that
    // matched nothing writes rows with empty values (and `processes` 0), and is absent.
    let present: HashSet<&str> = samples
        .rows
        .iter()
        .filter(|r| {
            r.value
                .is_some_and(|v| v != 0.0 || &*r.metric != "processes")
        })
        .map(|r| &*r.target)
        .collect();
    let in_win: Vec<&Sample> = samples
        .rows
        .iter()
        .filter(|r| r.unix_ms > window.start_unix_ms && r.unix_ms <= window.end_unix_ms)
        .collect();
    let win = || in_win.iter().copied();
    let is_sys = |r: &Sample| sys.contains(&*r.target);
    let is_loader = |r: &Sample| r.kind == TargetKind::Loader;

    let sys_cores = per_tick(win(), w, is_sys, &["cpu_cores"]);
    let sys_mem = per_tick(win(), w, is_sys, &["rss_bytes", "memory_current_bytes"]);
    let sys_anon = per_tick(win(), w, is_sys, &["anon_bytes"]);
    let sys_write = per_tick(win(), w, is_sys, &["write_bytes_per_s"]);
    let sys_thr = per_tick(win(), w, is_sys, &["cpu_throttled_s_per_s"]);
    let loader_cores = per_tick(win(), w, is_loader, &["cpu_cores"]);
    let loader_rss = per_tick(win(), w, is_loader, &["rss_bytes"]);
    let sampler_cores = per_tick(win(), w, is_loader, &["sampler_cpu_cores"]);
    let host_cores = per_tick(win(), w, |r| r.kind == TargetKind::Host, &["cpu_cores"]);
    let host_steal = per_tick(
        win(),
        w,
        |r| r.kind == TargetKind::Host,
        &["cpu_steal_frac"],
    );

    let window_s = window.end_unix_ms.saturating_sub(window.start_unix_ms) as f64 / 1000.0;
    let ingress = workload.ingress_events as f64;
    let ingress_per_s = ratio(Some(ingress), window_s);
    let cores_mean = mean(&sys_cores);
    let write_mean = mean(&sys_write);
    let disk_bytes = write_mean.map(|m| m * window_s);
    let mem_peak = peak(&sys_mem);
    let loader_mean = mean(&loader_cores);
    let loader_peak = peak(&loader_cores);

    let postgres = samples
        .rows
        .iter()
        .any(|r| r.kind == TargetKind::Postgres)
        .then(|| {
            let is_pg = |r: &Sample| r.kind == TargetKind::Postgres;
            let wal = mean(&per_tick(win(), w, is_pg, &["wal_bytes_per_s"]));
            let dead = per_tick(win(), w, is_pg, &["dead_tuples"]);
            let size = per_tick(win(), w, is_pg, &["db_size_bytes"]);
            let av = per_tick(win(), w, is_pg, &["autovacuum_runs"]);
            PostgresCost {
                commits_per_s_mean: mean(&per_tick(win(), w, is_pg, &["commits_per_s"])),
                wal_bytes_per_s_mean: wal,
                wal_bytes_per_ingress_event: ratio(wal.map(|m| m * window_s), ingress),
                dead_tuples_mean: mean(&dead),
                dead_tuples_peak: peak(&dead),
                autovacuum_runs: (!av.is_empty()).then(|| av.values().sum()),
                db_size_bytes_last: size.values().next_back().copied(),
                db_size_growth_bytes: size
                    .values()
                    .next()
                    .zip(size.values().next_back())
                    .map(|(a, b)| b - a),
            }
        });

    // The reference's way: cores averaged over "active" rows only (summed
    // system cores > 0.3), disk averaged over all rows, both over the whole
    // file.
    let all_cores = per_tick(samples.rows.iter(), w, is_sys, &["cpu_cores"]);
    let active: BTreeMap<u64, f64> = all_cores.into_iter().filter(|(_, v)| *v > 0.3).collect();
    let host_sys = samples
        .rows
        .iter()
        .any(|r| r.kind == TargetKind::Host && sys.contains(&*r.target));
    let ref_disk = per_tick(
        samples.rows.iter(),
        w,
        |r| r.kind == TargetKind::Host && (!host_sys || sys.contains(&*r.target)),
        &["disk_write_bytes_per_s"],
    );

    CostSummary {
        window_start_unix_ms: window.start_unix_ms,
        window_end_unix_ms: window.end_unix_ms,
        window_s,
        sample_interval_s: w as f64 / 1000.0,
        ticks_in_window: sys_cores.len(),
        system_targets: system_targets.to_vec(),
        missing_system_targets: system_targets
            .iter()
            .filter(|t| !present.contains(t.as_str()))
            .cloned()
            .collect(),
        system_cores_mean: cores_mean,
        system_cores_peak: peak(&sys_cores),
        system_memory_peak_bytes: mem_peak,
        system_anon_peak_bytes: peak(&sys_anon),
        system_disk_write_bytes_per_s_mean: write_mean,
        system_disk_write_bytes: disk_bytes,
        system_throttled_s_per_s_mean: mean(&sys_thr),
        ingress_events: workload.ingress_events,
        ingress_events_per_s: ingress_per_s,
        deliveries: workload.deliveries,
        disk_write_bytes_per_ingress_event: ratio(disk_bytes, ingress),
        physical_publishes_per_ingress_event: ratio(
            Some(workload.physical_publishes as f64),
            ingress,
        ),
        memory_bytes_per_1000_ordered_lanes: ratio(
            mem_peak,
            workload.ordered_lanes as f64 / 1000.0,
        ),
        mcpu_per_1000_events_per_s: ingress_per_s
            .and_then(|r| ratio(cores_mean.map(|c| c * 1000.0), r / 1000.0)),
        ordered_lanes: workload.ordered_lanes,
        connections: workload.connections,
        consumers: workload.consumers,
        queues: workload.queues,
        partitions: workload.partitions,
        loader_cores_mean: loader_mean,
        loader_cores_peak: loader_peak,
        loader_rss_peak_bytes: peak(&loader_rss),
        loader_cores_available: workload.loader_cores_available,
        loader_cpu_fraction_mean: ratio(loader_mean, workload.loader_cores_available),
        loader_cpu_fraction_peak: ratio(loader_peak, workload.loader_cores_available),
        sampler_cores_mean: mean(&sampler_cores),
        host_cores_mean: mean(&host_cores),
        host_steal_frac_mean: mean(&host_steal),
        host_steal_frac_peak: peak(&host_steal),
        postgres,
        reference_cores_active_mean: mean(&active),
        reference_cores_active_ticks: active.len(),
        reference_disk_write_mib_per_s_all_rows: mean(&ref_disk).map(|b| b / (1024.0 * 1024.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn row(t: u64, target: &str, kind: TargetKind, metric: &str, v: Option<f64>) -> Sample {
        Sample {
            unix_ms: t,
            elapsed_s: 0.0,
            target: Arc::from(target),
            kind,
            metric: Arc::from(metric),
            value: v,
        }
    }

    /// 10 ticks at 1 s. Broker (cgroup) + pg (process) are the system.
    fn fixture() -> SampleSet {
        let mut rows = Vec::new();
        for i in 0..10u64 {
            let t = 1_000_000 + i * 1000 + (i % 3); // a little jitter
            let base = i == 0;
            let rate = |v: f64| if base { None } else { Some(v) };
            // broker: 2 cores during ticks 3..=7, 0.1 otherwise; vanishes at tick 9.
            let broker_cores = if (3..=7).contains(&i) { 2.0 } else { 0.1 };
            let gone = i == 9;
            let b = |v: Option<f64>| if gone { None } else { v };
            rows.push(row(
                t,
                "broker",
                TargetKind::Cgroup,
                "cpu_cores",
                b(rate(broker_cores)),
            ));
            rows.push(row(
                t,
                "broker",
                TargetKind::Cgroup,
                "memory_current_bytes",
                b(Some(1e9 + i as f64 * 1e6)),
            ));
            rows.push(row(
                t,
                "broker",
                TargetKind::Cgroup,
                "anon_bytes",
                b(Some(4e8)),
            ));
            rows.push(row(
                t,
                "broker",
                TargetKind::Cgroup,
                "write_bytes_per_s",
                b(rate(1e6)),
            ));
            rows.push(row(t, "pg", TargetKind::Process, "cpu_cores", rate(0.5)));
            rows.push(row(t, "pg", TargetKind::Process, "rss_bytes", Some(2e8)));
            rows.push(row(t, "pg", TargetKind::Process, "anon_bytes", Some(1e8)));
            rows.push(row(
                t,
                "pg",
                TargetKind::Process,
                "write_bytes_per_s",
                rate(1e6),
            ));
            rows.push(row(
                t,
                "loader",
                TargetKind::Loader,
                "cpu_cores",
                rate(0.25 * (1 + i % 2) as f64),
            ));
            rows.push(row(t, "loader", TargetKind::Loader, "rss_bytes", Some(5e7)));
            rows.push(row(
                t,
                "loader",
                TargetKind::Loader,
                "sampler_cpu_cores",
                rate(0.001),
            ));
            rows.push(row(t, "host", TargetKind::Host, "cpu_cores", rate(3.0)));
            rows.push(row(
                t,
                "host",
                TargetKind::Host,
                "disk_write_bytes_per_s",
                rate(if i < 5 { 2.0 * 1048576.0 } else { 0.0 }),
            ));
            rows.push(row(
                t,
                "pgint",
                TargetKind::Postgres,
                "commits_per_s",
                rate(100.0),
            ));
            rows.push(row(
                t,
                "pgint",
                TargetKind::Postgres,
                "wal_bytes_per_s",
                rate(1000.0),
            ));
            rows.push(row(
                t,
                "pgint",
                TargetKind::Postgres,
                "dead_tuples",
                Some(i as f64),
            ));
            rows.push(row(
                t,
                "pgint",
                TargetKind::Postgres,
                "db_size_bytes",
                Some(1e7 + i as f64 * 1e3),
            ));
            rows.push(row(
                t,
                "pgint",
                TargetKind::Postgres,
                "autovacuum_runs",
                rate(if i == 4 { 1.0 } else { 0.0 }),
            ));
        }
        SampleSet { rows }
    }

    #[test]
    fn summary_over_window() {
        let set = fixture();
        // Window (1 001 000, 1 009 000]: ticks 1..=8 (tick 9 is after the end).
        let win = RatedWindow {
            start_unix_ms: 1_000_500,
            end_unix_ms: 1_008_500,
        };
        let wl = WorkloadFacts {
            ingress_events: 8_000,
            deliveries: 16_000,
            physical_publishes: 24_000,
            ordered_lanes: 2_000,
            connections: 4,
            consumers: 3,
            queues: 2,
            partitions: 1,
            loader_cores_available: 1.0,
        };
        let sys = vec!["broker".to_string(), "pg".to_string(), "absent".to_string()];
        let s = cost_summary(&set, win, wl, &sys);
        assert_eq!(s.sample_interval_s, 1.0);
        assert_eq!(s.ticks_in_window, 8);
        assert_eq!(s.missing_system_targets, vec!["absent"]);
        // ticks 1..=8: broker 0.1,0.1,2,2,2,2,2,0.1 (+0.5 pg each)
        let expect_mean = (0.1 * 3.0 + 2.0 * 5.0) / 8.0 + 0.5;
        assert!((s.system_cores_mean.unwrap() - expect_mean).abs() < 1e-9);
        assert_eq!(s.system_cores_peak, Some(2.5));
        assert_eq!(s.system_memory_peak_bytes, Some(1e9 + 8e6 + 2e8));
        assert_eq!(s.system_anon_peak_bytes, Some(5e8));
        assert_eq!(s.system_disk_write_bytes_per_s_mean, Some(2e6));
        // 2e6 B/s over 8 s = 16e6 B over 8000 events.
        assert!((s.disk_write_bytes_per_ingress_event.unwrap() - 2000.0).abs() < 1e-6);
        assert_eq!(s.physical_publishes_per_ingress_event, Some(3.0));
        assert_eq!(
            s.memory_bytes_per_1000_ordered_lanes,
            Some((1e9 + 8e6 + 2e8) / 2.0)
        );
        // 1000 ev/s => mCPU per 1000 ev/s = mean cores * 1000.
        assert!((s.mcpu_per_1000_events_per_s.unwrap() - expect_mean * 1000.0).abs() < 1e-6);
        assert_eq!(s.loader_cores_peak, Some(0.5));
        assert!((s.loader_cores_mean.unwrap() - 0.375).abs() < 1e-9);
        assert_eq!(s.loader_cpu_fraction_peak, Some(0.5));
        assert_eq!(s.loader_rss_peak_bytes, Some(5e7));
        assert_eq!(s.connections, 4);
        let pg = s.postgres.clone().unwrap();
        assert_eq!(pg.commits_per_s_mean, Some(100.0));
        assert_eq!(pg.dead_tuples_peak, Some(8.0));
        assert_eq!(pg.autovacuum_runs, Some(1.0));
        assert_eq!(pg.db_size_growth_bytes, Some(7e3));
        // Reference: all rows; active = summed > 0.3: every tick 1..=8 (pg 0.5
        // alone suffices) plus tick 9 (pg only, broker gone) => 9 ticks.
        assert_eq!(s.reference_cores_active_ticks, 9);
        let ref_mean = (0.1 * 3.0 + 2.0 * 5.0 + 0.5 * 9.0) / 9.0;
        assert!((s.reference_cores_active_mean.unwrap() - ref_mean).abs() < 1e-9);
        // Disk: 2 MiB/s on ticks 1..=4, 0 on 5..=9 => 8/9 MiB/s over all rows.
        assert!((s.reference_disk_write_mib_per_s_all_rows.unwrap() - 8.0 / 9.0).abs() < 1e-9);
        // Serializes.
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"reference_cores_active_mean\""));
    }

    #[test]
    fn empty_and_zero_workload_give_none_not_nan() {
        let s = cost_summary(
            &SampleSet::default(),
            RatedWindow {
                start_unix_ms: 0,
                end_unix_ms: 0,
            },
            WorkloadFacts::default(),
            &[],
        );
        assert_eq!(s.system_cores_mean, None);
        assert_eq!(s.disk_write_bytes_per_ingress_event, None);
        assert_eq!(s.mcpu_per_1000_events_per_s, None);
        assert_eq!(s.loader_cpu_fraction_mean, None);
        assert!(s.postgres.is_none());
        serde_json::to_string(&s).unwrap();
    }
}
