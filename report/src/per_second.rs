//! `report.csv` (v1): one row per second of the run (docs/record.md).

use std::path::Path;

use crate::error::ReportError;

pub const HEADER_LINE: &str = "# crossbench report.csv v1";

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
    if lines.next() != Some(HEADER_LINE) {
        return Err(bad(format!("first line is not `{HEADER_LINE}`")));
    }
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| bad("no header line".into()))?
        .split(',')
        .map(str::trim)
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let delivered_cols: Vec<usize> = header
        .iter()
        .enumerate()
        .filter(|(_, h)| h.starts_with("delivered_"))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for (n, line) in lines.enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |name: &str| -> f64 {
            col(name)
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
