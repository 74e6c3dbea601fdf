//! What a fault did to the service, from a 100 ms timeline of acknowledged publishes
//! and deliveries and from `report.csv`'s per-second latencies:
//!
//! - `unavailability_ms`: the longest stretch of the rated window without an
//!   acknowledged publish, and without a delivery (whole 100 ms bins);
//! - `time_to_recover_ms`: from a fault's end until deliveries per second are back to
//!   at least 90 % of the median before the first fault, and the second's e2e p99 at
//!   most twice the median p99 before it, both held for 5 seconds;
//! - the rows of `report.csv` and the intervals of the `.hlog` files tagged
//!   `steady`, `fault` or `recovery`.
//!
//! Everything here is a pure function of the recorded series, so it is tested on
//! made-up series (no clock, no broker).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::measure::clock::Clock;

/// Bin width of the timeline.
pub const BIN_MS: i64 = 100;
/// Deliveries per second must be back to this share of the pre-fault median…
pub const RECOVERED_RATE: f64 = 0.9;
/// …and the second's p99 within this multiple of the pre-fault median p99…
pub const RECOVERED_P99: f64 = 2.0;
/// …for this many consecutive seconds.
pub const RECOVERED_HOLD_S: usize = 5;

/// Counters the timeline reads (cumulative).
#[derive(Clone)]
pub struct Tally {
    pub published: Arc<dyn Fn() -> u64 + Send + Sync>,
    pub delivered: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Failed publish attempts (every class).
    pub errors: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tally")
    }
}

/// One reading: cumulative counts at `unix_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub unix_ms: i64,
    pub published: u64,
    pub delivered: u64,
}

/// Read `tally` every 100 ms until `stop` fires.
pub fn record(
    tally: Tally,
    clock: Clock,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<Vec<Reading>> {
    tokio::spawn(async move {
        let mut out = Vec::with_capacity(4096);
        let mut tick = tokio::time::interval(Duration::from_millis(BIN_MS as u64));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stopping = tokio::select! {
                _ = stop.cancelled() => true,
                _ = tick.tick() => false,
            };
            out.push(Reading {
                unix_ms: clock.now_us() / 1000,
                published: (tally.published)(),
                delivered: (tally.delivered)(),
            });
            if stopping {
                return out;
            }
        }
    })
}

/// A fault's time span, in unix ms (`end`: `None` when it never ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub start_unix_ms: i64,
    pub end_unix_ms: Option<i64>,
}

/// The longest stretches without service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unavailability {
    /// Longest run of bins with no acknowledged publish, in the rated window.
    pub publish_ms: i64,
    /// Longest run of bins with no delivery, in the rated window.
    pub delivery_ms: i64,
    /// Where the delivery stretch started (ms from the start of the rated window).
    pub delivery_from_ms: Option<i64>,
}

/// Count of `x` over `[from, to)` from cumulative readings (the last reading at or
/// before each edge).
fn delta(r: &[Reading], from: i64, to: i64, x: fn(&Reading) -> u64) -> u64 {
    let at = |t: i64| {
        let i = r.partition_point(|q| q.unix_ms <= t);
        if i == 0 {
            0
        } else {
            x(&r[i - 1])
        }
    };
    at(to).saturating_sub(at(from))
}

/// Longest stretch of empty bins for `x` in `[from, to)`, and where it starts.
fn longest_gap(r: &[Reading], from: i64, to: i64, x: fn(&Reading) -> u64) -> (i64, Option<i64>) {
    let mut best = (0i64, None);
    let mut run_start: Option<i64> = None;
    let mut t = from;
    while t + BIN_MS <= to {
        let empty = delta(r, t, t + BIN_MS, x) == 0;
        match (empty, run_start) {
            (true, None) => run_start = Some(t),
            (false, Some(s)) => {
                if t - s > best.0 {
                    best = (t - s, Some(s));
                }
                run_start = None;
            }
            _ => {}
        }
        t += BIN_MS;
    }
    if let Some(s) = run_start {
        if t - s > best.0 {
            best = (t - s, Some(s));
        }
    }
    best
}

/// The longest stretches without an acknowledged publish and without a delivery in
/// the rated window `[rated_start, rated_end)` (unix ms).
pub fn unavailability(r: &[Reading], rated_start: i64, rated_end: i64) -> Unavailability {
    let (publish_ms, _) = longest_gap(r, rated_start, rated_end, |q| q.published);
    let (delivery_ms, from) = longest_gap(r, rated_start, rated_end, |q| q.delivered);
    Unavailability {
        publish_ms,
        delivery_ms,
        delivery_from_ms: from.map(|s| s - rated_start),
    }
}

/// One second of `report.csv`: when it ended, and its worst e2e p99 (`None`: no
/// latency in that second).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondRow {
    pub unix_ms: i64,
    pub p99_ms: Option<f64>,
}

/// The per-second rows of `report.csv` (`unix_ms` and the max of its `e2e*_p99_ms`
/// columns; a 0 p99 is a second without latency).
pub fn read_rows(report_csv: &str) -> Vec<SecondRow> {
    let mut lines = report_csv.lines().filter(|l| !l.starts_with('#'));
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split(',').collect();
    let unix = cols.iter().position(|c| *c == "unix_ms");
    let p99: Vec<usize> = cols
        .iter()
        .enumerate()
        .filter(|(_, c)| c.starts_with("e2e") && c.ends_with("_p99_ms"))
        .map(|(i, _)| i)
        .collect();
    let Some(unix) = unix else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let unix_ms = f.get(unix)?.parse().ok()?;
            let worst = p99
                .iter()
                .filter_map(|&i| f.get(i)?.parse::<f64>().ok())
                .fold(0.0f64, f64::max);
            Some(SecondRow {
                unix_ms,
                p99_ms: (worst > 0.0).then_some(worst),
            })
        })
        .collect()
}

/// How a fault's recovery was judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovery {
    /// From the fault's end to the first second of the 5 that held (`None`: not
    /// recovered, or not judged).
    pub time_to_recover_ms: Option<i64>,
    /// Deliveries per second before the first fault (median of whole seconds).
    pub baseline_deliveries_per_sec: Option<f64>,
    pub baseline_p99_ms: Option<f64>,
    /// Why there is no figure, when there is none.
    pub note: Option<String>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Judge the recovery after a fault that ended at `fault_end` (unix ms), with the
/// baseline taken over whole seconds of `[base_from, first_fault)` and recovery
/// looked for until `until` (the end of paced traffic).
pub fn recovery(
    r: &[Reading],
    rows: &[SecondRow],
    base_from: i64,
    first_fault: i64,
    fault_end: i64,
    until: i64,
) -> Recovery {
    let per_sec = |s: i64| delta(r, s, s + 1000, |q| q.delivered) as f64;
    let p99_of = |s: i64| {
        // The row whose second ends within (s, s + 1000]: report.csv rows are stamped
        // at the end of their second.
        rows.iter()
            .filter(|row| row.unix_ms > s && row.unix_ms <= s + 1000)
            .find_map(|row| row.p99_ms)
    };
    let mut base_rates = Vec::new();
    let mut base_p99 = Vec::new();
    let mut s = base_from;
    while s + 1000 <= first_fault {
        base_rates.push(per_sec(s));
        if let Some(p) = p99_of(s) {
            base_p99.push(p);
        }
        s += 1000;
    }
    let (Some(rate), Some(p99)) = (median(base_rates.clone()), median(base_p99)) else {
        return Recovery {
            time_to_recover_ms: None,
            baseline_deliveries_per_sec: median(base_rates),
            baseline_p99_ms: None,
            note: Some("not judged: no whole second of steady state before the fault".into()),
        };
    };
    let mut held = 0usize;
    let mut first: Option<i64> = None;
    let mut s = fault_end;
    while s + 1000 <= until {
        let ok = per_sec(s) >= RECOVERED_RATE * rate
            && p99_of(s).is_some_and(|p| p <= RECOVERED_P99 * p99);
        if ok {
            first.get_or_insert(s);
            held += 1;
            if held >= RECOVERED_HOLD_S {
                return Recovery {
                    time_to_recover_ms: first.map(|f| f - fault_end),
                    baseline_deliveries_per_sec: Some(rate),
                    baseline_p99_ms: Some(p99),
                    note: None,
                };
            }
        } else {
            held = 0;
            first = None;
        }
        s += 1000;
    }
    Recovery {
        time_to_recover_ms: None,
        baseline_deliveries_per_sec: Some(rate),
        baseline_p99_ms: Some(p99),
        note: Some(if until - fault_end < 1000 * RECOVERED_HOLD_S as i64 {
            "not judged: fewer than 5 s of load after the fault".into()
        } else {
            "not recovered before the load stopped".into()
        }),
    }
}

/// The fault phase at `unix_ms`: `fault` inside a span, `recovery` from a span's end
/// until it recovered (or for the rest of the cell), `steady` otherwise.
pub fn phase_at(unix_ms: i64, spans: &[Span], recovered_at: &[Option<i64>]) -> &'static str {
    let mut phase = "steady";
    for (sp, rec) in spans.iter().zip(recovered_at) {
        match sp.end_unix_ms {
            _ if unix_ms < sp.start_unix_ms => {}
            None => return "fault",
            Some(e) if unix_ms <= e => return "fault",
            Some(_) => {
                if rec.is_none_or(|r| unix_ms < r) {
                    phase = "recovery";
                }
            }
        }
    }
    phase
}

/// Add a `fault_phase` column to every row of `report.csv` (the report's row is
/// stamped at the end of its second).
pub fn tag_report_csv(text: &str, spans: &[Span], recovered_at: &[Option<i64>]) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut unix_col: Option<usize> = None;
    for line in text.lines() {
        if line.starts_with('#') {
            out.push_str(line);
        } else if unix_col.is_none() {
            unix_col = line.split(',').position(|c| c == "unix_ms");
            out.push_str(line);
            out.push_str(",fault_phase");
        } else {
            let t = unix_col
                .and_then(|i| line.split(',').nth(i))
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            out.push_str(line);
            out.push(',');
            // The second that ends at t began at t - 1000: tag it by its middle.
            out.push_str(phase_at(t - 500, spans, recovered_at));
        }
        out.push('\n');
    }
    out
}

/// Insert `#[fault_phase: <phase>]` comment lines into an `.hlog` wherever the phase
/// of the next interval changes (HdrHistogram log readers skip comment lines).
pub fn tag_hlog(text: &str, spans: &[Span], recovered_at: &[Option<i64>]) -> String {
    let mut base_ms: Option<i64> = None;
    let mut last: Option<&str> = None;
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("#[BaseTime: ") {
            base_ms = rest
                .split_whitespace()
                .next()
                .and_then(|s| s.parse::<f64>().ok())
                .map(|s| (s * 1000.0).round() as i64);
        }
        if !line.starts_with('#') {
            let fields: Vec<&str> = line.split(',').collect();
            let start = if fields.first().is_some_and(|f| f.starts_with("Tag=")) {
                fields.get(1)
            } else {
                fields.first()
            };
            if let (Some(b), Some(s)) = (base_ms, start.and_then(|s| s.parse::<f64>().ok())) {
                let t = b + (s * 1000.0).round() as i64 + 500;
                let ph = phase_at(t, spans, recovered_at);
                if last != Some(ph) {
                    out.push_str(&format!("#[fault_phase: {ph}]\n"));
                    last = Some(ph);
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Tag `report.csv` and every `.hlog` of `dir` in place.
pub fn tag_record(dir: &Path, spans: &[Span], recovered_at: &[Option<i64>]) -> std::io::Result<()> {
    let csv = dir.join("report.csv");
    if let Ok(text) = std::fs::read_to_string(&csv) {
        std::fs::write(&csv, tag_report_csv(&text, spans, recovered_at))?;
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "hlog") {
            let text = std::fs::read_to_string(&p)?;
            std::fs::write(&p, tag_hlog(&text, spans, recovered_at))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service at `rate`/s from t=0 with an outage in `[down_from, down_to)` ms.
    fn series(rate: u64, secs: i64, down_from: i64, down_to: i64) -> Vec<Reading> {
        let mut v = Vec::new();
        let (mut p, mut d) = (0, 0);
        let mut t = 0;
        while t <= secs * 1000 {
            v.push(Reading {
                unix_ms: t,
                published: p,
                delivered: d,
            });
            if !(down_from..down_to).contains(&t) {
                p += rate / 10;
                d += rate / 10;
            }
            t += BIN_MS;
        }
        v
    }

    fn rows(secs: i64, p99: f64, slow_from: i64, slow_to: i64) -> Vec<SecondRow> {
        (1..=secs)
            .map(|s| SecondRow {
                unix_ms: s * 1000,
                p99_ms: Some(if (slow_from..slow_to).contains(&(s * 1000)) {
                    p99 * 10.0
                } else {
                    p99
                }),
            })
            .collect()
    }

    #[test]
    fn unavailability_is_the_longest_empty_stretch() {
        let r = series(1000, 30, 10_000, 15_000);
        let u = unavailability(&r, 0, 30_000);
        assert_eq!(u.publish_ms, 5000);
        assert_eq!(u.delivery_ms, 5000);
        assert_eq!(u.delivery_from_ms, Some(10_000));
        let healthy = series(1000, 30, -1, -1);
        assert_eq!(
            unavailability(&healthy, 0, 30_000),
            Unavailability::default()
        );
        // An outage running to the end of the window counts up to the end.
        let r = series(1000, 30, 25_000, 99_000);
        assert_eq!(unavailability(&r, 0, 30_000).delivery_ms, 5000);
    }

    #[test]
    fn recovery_needs_rate_and_latency_held_for_five_seconds() {
        // Down 10-15 s; latency 10x until 18 s; recovered from 18 s.
        let r = series(1000, 40, 10_000, 15_000);
        let rw = rows(40, 20.0, 15_000, 19_000);
        let rec = recovery(&r, &rw, 0, 10_000, 15_000, 40_000);
        assert_eq!(rec.time_to_recover_ms, Some(3000), "{rec:?}");
        assert_eq!(rec.baseline_deliveries_per_sec, Some(1000.0));
        assert_eq!(rec.baseline_p99_ms, Some(20.0));
        // Too little load after the fault: not judged, and said so.
        let rec = recovery(&r, &rw, 0, 10_000, 15_000, 18_000);
        assert_eq!(rec.time_to_recover_ms, None);
        assert!(rec.note.unwrap().contains("fewer than 5 s"));
        // Never back: said so.
        let down = series(1000, 40, 10_000, 99_000);
        let rec = recovery(&down, &rw, 0, 10_000, 15_000, 40_000);
        assert!(rec.note.unwrap().contains("not recovered"));
        // No steady state before the fault.
        let rec = recovery(&r, &rw, 0, 500, 15_000, 40_000);
        assert!(rec.note.unwrap().contains("no whole second"));
    }

    #[test]
    fn rows_and_intervals_are_tagged() {
        let spans = [Span {
            start_unix_ms: 10_000,
            end_unix_ms: Some(15_000),
        }];
        let rec = [Some(18_000)];
        assert_eq!(phase_at(9_000, &spans, &rec), "steady");
        assert_eq!(phase_at(12_000, &spans, &rec), "fault");
        assert_eq!(phase_at(16_000, &spans, &rec), "recovery");
        assert_eq!(phase_at(19_000, &spans, &rec), "steady");
        assert_eq!(phase_at(19_000, &spans, &[None]), "recovery");
        let never = [Span {
            start_unix_ms: 10_000,
            end_unix_ms: None,
        }];
        assert_eq!(phase_at(99_000, &never, &[None]), "fault");

        let csv = "# crossbench report.csv v1\nt_s,unix_ms,phase,e2e_a_p99_ms\n1,10000,rated,5.0\n2,13000,rated,0\n3,17000,rated,7\n";
        let tagged = tag_report_csv(csv, &spans, &rec);
        assert_eq!(
            tagged,
            "# crossbench report.csv v1\nt_s,unix_ms,phase,e2e_a_p99_ms,fault_phase\n1,10000,rated,5.0,steady\n2,13000,rated,0,fault\n3,17000,rated,7,recovery\n"
        );
        let rows = read_rows(csv);
        assert_eq!(rows[0].p99_ms, Some(5.0));
        assert_eq!(rows[1].p99_ms, None);

        let hlog = "#[BaseTime: 0.000 (seconds since epoch)]\nTag=A,9.000,1.0,0,X\nTag=B,9.000,1.0,0,X\nTag=A,11.000,1.0,0,X\nTag=A,20.000,1.0,0,X\n";
        let t = tag_hlog(hlog, &spans, &rec);
        assert_eq!(
            t,
            "#[BaseTime: 0.000 (seconds since epoch)]\n#[fault_phase: steady]\nTag=A,9.000,1.0,0,X\nTag=B,9.000,1.0,0,X\n#[fault_phase: fault]\nTag=A,11.000,1.0,0,X\n#[fault_phase: steady]\nTag=A,20.000,1.0,0,X\n"
        );
    }
}
