//! Latency histograms: HdrHistogram in microseconds, whole-run and per-second.
//!
//! Each [`Metric`] keeps a whole-run histogram and an interval histogram that the
//! reporter takes once a second and writes to an HdrHistogram interval log
//! (`.hlog`), so standard HdrHistogram tools can read every second of the run.
//! Percentiles are reported exactly, and next to them quantised to the reference
//! harness's 2^(1/8) bucket edges so a published figure compares like for like.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::Serialize;

use crate::measure::deflate::ReusedDeflate;

/// Highest value tracked: one hour in µs. Larger values are clamped and counted.
pub const MAX_US: u64 = 3_600_000_000;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("static bounds are valid")
}

/// A latency metric: whole-run plus the current interval.
#[derive(Debug)]
pub struct Metric {
    pub name: String,
    inner: Mutex<Pair>,
}

#[derive(Debug)]
struct Pair {
    total: Histogram<u64>,
    interval: Histogram<u64>,
    clamped: u64,
    /// Values below zero (a stamp from a clock ahead of this one), recorded as 1 µs.
    negative: u64,
}

impl Metric {
    pub fn new(name: impl Into<String>) -> Self {
        Metric {
            name: name.into(),
            inner: Mutex::new(Pair {
                total: new_hist(),
                interval: new_hist(),
                clamped: 0,
                negative: 0,
            }),
        }
    }

    /// Record one value in µs (a negative one is counted in `negative` and recorded
    /// as 1 µs; one above an hour is counted in `clamped` and recorded as an hour).
    /// Values go into the interval histogram only; it is folded into the whole-run
    /// histogram when the interval is taken (one record per value, not two).
    pub fn record(&self, us: i64) {
        let v = us.clamp(1, MAX_US as i64) as u64;
        let mut p = self.inner.lock();
        if us > MAX_US as i64 {
            p.clamped += 1;
        } else if us < 0 {
            p.negative += 1;
        }
        p.interval.saturating_record(v);
    }

    /// Record many values under one lock.
    pub fn record_many(&self, values: &[i64]) {
        if values.is_empty() {
            return;
        }
        let mut p = self.inner.lock();
        for &us in values {
            let v = us.clamp(1, MAX_US as i64) as u64;
            if us > MAX_US as i64 {
                p.clamped += 1;
            } else if us < 0 {
                p.negative += 1;
            }
            p.interval.saturating_record(v);
        }
    }

    /// Record the same value `n` times.
    pub fn record_n(&self, us: i64, n: u64) {
        let v = us.clamp(1, MAX_US as i64) as u64;
        let mut p = self.inner.lock();
        let _ = p.interval.record_n(v, n);
    }

    /// Take the interval histogram into `out` and start the next interval; the
    /// interval taken is folded into the whole-run histogram. `out` (made by
    /// [`new_hist`]) is cleared and becomes the next interval's histogram, so a
    /// reporter that keeps one `out` per metric allocates nothing per second (a
    /// histogram of these bounds is about 260 KB of counts).
    pub fn take_interval_into(&self, out: &mut Histogram<u64>) {
        out.reset();
        let mut p = self.inner.lock();
        let p = &mut *p;
        std::mem::swap(&mut p.interval, out);
        let _ = p.total.add(&*out);
    }

    /// The whole-run histogram, including the interval not yet taken.
    pub fn total(&self) -> Histogram<u64> {
        let p = self.inner.lock();
        let mut t = p.total.clone();
        let _ = t.add(&p.interval);
        t
    }

    pub fn summary(&self) -> Summary {
        let (clamped, negative) = {
            let p = self.inner.lock();
            (p.clamped, p.negative)
        };
        let mut s = Summary::of(&self.total(), clamped);
        s.negative = negative;
        s
    }
}

/// Percentiles of a histogram in milliseconds.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Values above one hour, clamped.
    pub clamped: u64,
    /// Values below zero, recorded as 1 µs: an end-to-end latency whose stamp came
    /// from a clock ahead of the reader's (several loaders on hosts whose clocks
    /// disagree). Counted, never hidden.
    pub negative: u64,
    /// The same percentiles quantised to the reference harness's bucket edges
    /// (2^((⌊8·log2 µs⌋+1)/8) µs), for like-for-like comparison with published cells.
    pub reference_quantised: RefQuantised,
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct RefQuantised {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

impl Summary {
    pub fn of(h: &Histogram<u64>, clamped: u64) -> Summary {
        if h.is_empty() {
            return Summary {
                clamped,
                ..Default::default()
            };
        }
        let q = |x: f64| h.value_at_quantile(x) as f64 / 1000.0;
        let rq = |x: f64| reference_bucket_ms(h.value_at_quantile(x));
        Summary {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: q(0.50),
            p90_ms: q(0.90),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: h.max() as f64 / 1000.0,
            clamped,
            negative: 0,
            reference_quantised: RefQuantised {
                p50_ms: rq(0.50),
                p95_ms: rq(0.95),
                p99_ms: rq(0.99),
            },
        }
    }
}

/// The reference harness's bucket value for `us`: index ⌊8·log2(us)⌋ clamped to
/// [0, 255], reported as the bucket's upper edge 2^((i+1)/8) µs, in ms.
pub fn reference_bucket_ms(us: u64) -> f64 {
    let i = if us < 1 {
        0
    } else {
        ((us as f64).log2() * 8.0).floor().clamp(0.0, 255.0) as i32
    };
    2f64.powf(f64::from(i + 1) / 8.0) / 1000.0
}

/// The `p` quantile of a histogram of µs, in ms (0 when empty).
pub fn quantile_ms(h: &Histogram<u64>, p: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(p) as f64 / 1000.0
    }
}

/// Writes tagged per-second histograms to an HdrHistogram interval log.
pub struct HlogWriter {
    out: BufWriter<File>,
    serializer: ReusedDeflate,
    start: SystemTime,
}

impl std::fmt::Debug for HlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HlogWriter").finish_non_exhaustive()
    }
}

impl HlogWriter {
    pub fn create(path: &Path, start: SystemTime, comment: &str) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(path)?);
        let mut serializer = ReusedDeflate::default();
        {
            let mut b = IntervalLogWriterBuilder::new();
            b.add_comment(comment)
                .add_comment("values in microseconds")
                .with_start_time(start)
                .with_base_time(start);
            let _w = b
                .begin_log_with(&mut out, &mut serializer)
                .map_err(std::io::Error::other)?;
        }
        Ok(HlogWriter {
            out,
            serializer,
            start,
        })
    }

    /// Append one interval for `tag`, starting `at` and lasting `len`.
    pub fn write(
        &mut self,
        tag: &str,
        at: SystemTime,
        len: Duration,
        h: &Histogram<u64>,
    ) -> std::io::Result<()> {
        let since = at.duration_since(self.start).unwrap_or_default();
        // The builder only writes headers; reopening per write keeps the API simple.
        // A builder with no headers writes nothing; it only lends a writer.
        let b = IntervalLogWriterBuilder::new();
        let mut w = b
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(std::io::Error::other)?;
        let tag = Tag::new(tag);
        w.write_histogram(h, since, len, tag)
            .map_err(std::io::Error::other)?;
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_buckets_match_published_values() {
        // Published values are bucket edges: 340.0 ms and 1143.5 ms are two of them.
        let v = reference_bucket_ms(339_000);
        assert!((v - 339.96).abs() < 0.05, "{v}");
        let v = reference_bucket_ms(1_100_000);
        assert!((v - 1143.48).abs() < 0.05, "{v}");
    }

    #[test]
    fn percentile_of_skewed_sample() {
        let m = Metric::new("x");
        for _ in 0..99 {
            m.record(1000);
        }
        m.record(1_000_000);
        let s = m.summary();
        assert!((s.p50_ms - 1.0).abs() < 0.01);
        assert!(s.max_ms > 999.0);
        assert_eq!(s.count, 100);
        let mut out = new_hist();
        out.record(7).unwrap();
        m.take_interval_into(&mut out);
        assert_eq!(out.len(), 100, "the interval, without what `out` held");
        m.record(2000);
        m.take_interval_into(&mut out);
        assert_eq!(out.len(), 1, "the next interval starts empty");
        assert_eq!(
            m.summary().count,
            101,
            "both intervals are in the whole run"
        );
        m.take_interval_into(&mut out);
        assert_eq!(out.len(), 0);
        assert_eq!(m.summary().count, 101);
    }
}
