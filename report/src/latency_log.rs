//! `e2e.hlog`: HdrHistogram interval logs (V2 compressed), one tagged histogram per
//! second, values in µs. The report merges the intervals of the rated window into
//! one histogram per tag and draws its CDF.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use crate::error::ReportError;

/// One interval of an interval log.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Its tag; empty when it has none.
    pub tag: String,
    /// Its absolute start (the log's base time plus the interval's offset).
    pub start: SystemTime,
    pub length: Duration,
    pub hist: Histogram<u64>,
}

/// Every interval of `path`, in the log's order, with absolute start times.
pub fn intervals(path: &Path) -> Result<Vec<Interval>, ReportError> {
    let bytes = std::fs::read(path).map_err(|e| ReportError::io(path, e))?;
    let bad = |message: String| ReportError::BadRecord {
        path: path.to_path_buf(),
        message,
    };
    let mut base = Duration::ZERO;
    let mut de = Deserializer::new();
    let mut out = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| bad(format!("unreadable interval log ({e:?})")))?;
        match entry {
            LogEntry::BaseTime(b) => base = b,
            LogEntry::StartTime(s) => {
                if base.is_zero() {
                    base = s;
                }
            }
            LogEntry::Interval(h) => {
                // A corrupt start time may pass Duration's range: an error, not a panic.
                let at = base.checked_add(h.start_timestamp()).ok_or_else(|| {
                    bad(format!(
                        "an interval starts {:?} after the base time {base:?}: out of range",
                        h.start_timestamp()
                    ))
                })?;
                let start = UNIX_EPOCH.checked_add(at).ok_or_else(|| {
                    bad(format!(
                        "an interval starts at {at:?} after 1970: out of range"
                    ))
                })?;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(h.encoded_histogram())
                    .map_err(|e| bad(format!("bad base64 in an interval: {e}")))?;
                // hdrhistogram negates a decoded i64::MIN (nine 0xff bytes): a panic where
                // overflow is checked (debug builds), an error elsewhere. Either is an error.
                let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    de.deserialize(&mut std::io::Cursor::new(raw))
                }))
                .map_err(|_| bad("bad histogram in an interval: undecodable counts".into()))?;
                let hist: Histogram<u64> =
                    decoded.map_err(|e| bad(format!("bad histogram in an interval: {e:?}")))?;
                out.push(Interval {
                    tag: h.tag().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    start,
                    length: h.duration(),
                    hist,
                });
            }
        }
    }
    Ok(out)
}

/// Merge the intervals of `path` tagged `tag` that start inside
/// `[from_unix_ms, to_unix_ms)`; `None` bounds take everything.
pub fn merged(
    path: &Path,
    tag: &str,
    from_unix_ms: Option<i64>,
    to_unix_ms: Option<i64>,
) -> Result<Histogram<u64>, ReportError> {
    let bad = |message: String| ReportError::BadRecord {
        path: path.to_path_buf(),
        message,
    };
    let mut out = Histogram::<u64>::new(3).map_err(|e| bad(e.to_string()))?;
    for i in intervals(path)? {
        if i.tag != tag {
            continue;
        }
        let at = i.start.duration_since(UNIX_EPOCH).unwrap_or_default();
        let at_ms = i64::try_from(at.as_millis()).unwrap_or(i64::MAX);
        if from_unix_ms.is_some_and(|f| at_ms < f) || to_unix_ms.is_some_and(|t| at_ms >= t) {
            continue;
        }
        out.add(&i.hist)
            .map_err(|e| bad(format!("merging intervals: {e:?}")))?;
    }
    Ok(out)
}

/// Points of the CDF on a log "nines" axis: (percentile, value in ms) for
/// percentiles 0 … 99.999 spaced evenly in −log10(1 − q).
pub fn cdf_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut pts = Vec::new();
    let steps = 100;
    let max_nines = 5.0;
    for i in 0..=steps {
        let nines = max_nines * i as f64 / steps as f64;
        let q = 1.0 - 10f64.powf(-nines);
        pts.push((q * 100.0, h.value_at_quantile(q) as f64 / 1000.0));
    }
    pts
}
