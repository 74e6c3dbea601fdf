//! `report.csv`: one row per second of the run (docs/record.md), of a pipeline cell
//! (v1) or of a stream cell (v1 or v2, `workload=stream`: accepted, popped, unacked
//! and e2e of every delivery stand for published, delivered, lag and flow A's e2e).

use std::path::Path;

use crate::error::ReportError;

pub const HEADER_LINE: &str = "# crossbench report.csv v1";
/// The first line of a stream cell's report.csv, before its version.
pub const STREAM_PREFIX: &str = "# crossbench report.csv v";
pub const STREAM_SUFFIX: &str = " workload=stream";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    pub t_s: f64,
    pub unix_ms: i64,
    pub phase: String,
    pub offered: f64,
    pub published: f64,
    /// Deliveries to all streams in this second.
    pub delivered: f64,
    pub lag_msgs: f64,
    pub e2e_a_p50_ms: f64,
    pub e2e_a_p99_ms: f64,
    pub e2e_b_p50_ms: f64,
    pub e2e_b_p99_ms: f64,
}

pub fn read(path: &Path) -> Result<Vec<Second>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    parse(path, &text)
}

pub fn parse(path: &Path, text: &str) -> Result<Vec<Second>, ReportError> {
    let bad = |message: String| ReportError::BadRecord {
        path: path.to_path_buf(),
        message,
    };
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let stream = first
        .strip_prefix(STREAM_PREFIX)
        .and_then(|v| v.strip_suffix(STREAM_SUFFIX))
        .is_some_and(|v| v == "1" || v == "2");
    if first != HEADER_LINE && !stream {
        return Err(bad(format!(
            "first line is not `{HEADER_LINE}` (pipeline) nor `{STREAM_PREFIX}1|2{STREAM_SUFFIX}` (stream)"
        )));
    }
    // A stream cell's columns for the pipeline's.
    let name = |pipeline: &'static str| -> &'static str {
        match (stream, pipeline) {
            (true, "published") => "accepted",
            (true, "lag_msgs") => "unacked",
            (true, "e2e_a_p50_ms") => "e2e_p50_ms",
            (true, "e2e_a_p99_ms") => "e2e_p99_ms",
            (_, n) => n,
        }
    };
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| bad("no header line".into()))?
        .split(',')
        .map(str::trim)
        .collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let delivered_cols: Vec<usize> = header
        .iter()
        .enumerate()
        .filter(|(_, h)| {
            if stream {
                **h == "popped"
            } else {
                h.starts_with("delivered_")
            }
        })
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for (n, line) in lines.enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |n: &'static str| -> f64 {
            col(name(n))
                .and_then(|i| f.get(i))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        if f.len() != header.len() {
            return Err(bad(format!(
                "line {}: {} fields, header has {}",
                n + 3,
                f.len(),
                header.len()
            )));
        }
        out.push(Second {
            t_s: num("t_s"),
            unix_ms: num("unix_ms") as i64,
            phase: col("phase")
                .and_then(|i| f.get(i))
                .map_or_else(String::new, |s| s.to_string()),
            offered: num("offered"),
            published: num("published"),
            delivered: delivered_cols
                .iter()
                .filter_map(|&i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
                .sum(),
            lag_msgs: num("lag_msgs"),
            e2e_a_p50_ms: num("e2e_a_p50_ms"),
            e2e_a_p99_ms: num("e2e_a_p99_ms"),
            e2e_b_p50_ms: num("e2e_b_p50_ms"),
            e2e_b_p99_ms: num("e2e_b_p99_ms"),
        });
    }
    Ok(out)
}
