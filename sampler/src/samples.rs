//! samples.csv v1: the in-memory rows, the writer and the reader.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;

use crate::spec::TargetKind;
use crate::SamplerError;

/// First line of every samples.csv.
pub const VERSION_LINE: &str = "# crossbench samples v1";
/// Second line of every samples.csv.
pub const HEADER: &str = "unix_ms,elapsed_s,target,kind,metric,value";

/// One measurement: one metric of one target at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Wall clock of the tick, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the sampler started (monotonic clock), millisecond resolution.
    pub elapsed_s: f64,
    /// The target's label.
    pub target: Arc<str>,
    pub kind: TargetKind,
    pub metric: Arc<str>,
    /// `None` when the target (or this counter) could not be read, and for
    /// rates on the baseline tick.
    pub value: Option<f64>,
}

/// A set of rows, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleSet {
    pub rows: Vec<Sample>,
}

impl SampleSet {
    /// Values of one metric of one target, in order: (unix_ms, value).
    pub fn series(&self, target: &str, metric: &str) -> Vec<(u64, Option<f64>)> {
        self.rows
            .iter()
            .filter(|r| &*r.target == target && &*r.metric == metric)
            .map(|r| (r.unix_ms, r.value))
            .collect()
    }

    /// Distinct target labels in order of first appearance.
    pub fn targets(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.rows {
            if !v.iter().any(|t| t.as_str() == &*r.target) {
                v.push(r.target.to_string());
            }
        }
        v
    }

    /// Writes the whole set as samples.csv v1.
    pub fn write_csv(&self, w: &mut impl Write) -> std::io::Result<()> {
        writeln!(w, "{VERSION_LINE}")?;
        writeln!(w, "{HEADER}")?;
        for r in &self.rows {
            write_row(w, r)?;
        }
        Ok(())
    }
}

/// Makes a label or metric safe for an unquoted CSV field.
pub(crate) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ',' | '\n' | '\r' | '"' => '_',
            c => c,
        })
        .collect()
}

pub(crate) fn write_row(w: &mut impl Write, r: &Sample) -> std::io::Result<()> {
    write!(
        w,
        "{},{:.3},{},{},{},",
        r.unix_ms,
        r.elapsed_s,
        r.target,
        r.kind.as_str(),
        r.metric
    )?;
    match r.value {
        Some(v) if v.is_finite() => {
            // Six decimals are plenty for cores and fractions; integers stay integers.
            let v = (v * 1e6).round() / 1e6;
            writeln!(w, "{v}")
        }
        _ => writeln!(w),
    }
}

/// Reads a samples.csv v1 file.
pub fn read_samples(path: &Path) -> Result<SampleSet, SamplerError> {
    let f = std::fs::File::open(path).map_err(|e| SamplerError::io(path, e))?;
    parse_samples(std::io::BufReader::new(f), &path.display().to_string())
}

/// Parses samples.csv v1 text from any reader; `origin` names it in errors.
pub fn parse_samples(r: impl BufRead, origin: &str) -> Result<SampleSet, SamplerError> {
    let bad = |line: usize, why: String| SamplerError::Format {
        origin: origin.to_string(),
        line,
        why,
    };
    let mut rows = Vec::new();
    let mut interned: std::collections::HashMap<String, Arc<str>> = Default::default();
    let mut intern = |s: &str| -> Arc<str> {
        if let Some(a) = interned.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        interned.insert(s.to_string(), a.clone());
        a
    };
    let mut saw_header = false;
    for (i, line) in r.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| bad(n, e.to_string()))?;
        if n == 1 {
            if line.trim_end() != VERSION_LINE {
                return Err(bad(n, format!("expected '{VERSION_LINE}'")));
            }
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if !saw_header {
            if line.trim_end() != HEADER {
                return Err(bad(n, format!("expected header '{HEADER}'")));
            }
            saw_header = true;
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 6 {
            return Err(bad(n, format!("expected 6 fields, got {}", f.len())));
        }
        let unix_ms = f[0].parse().map_err(|_| bad(n, "bad unix_ms".into()))?;
        let elapsed_s = f[1].parse().map_err(|_| bad(n, "bad elapsed_s".into()))?;
        let kind = f[3]
            .parse()
            .map_err(|_| bad(n, format!("unknown kind '{}'", f[3])))?;
        let value = if f[5].trim().is_empty() {
            None
        } else {
            Some(
                f[5].trim()
                    .parse::<f64>()
                    .map_err(|_| bad(n, "bad value".into()))?,
            )
        };
        rows.push(Sample {
            unix_ms,
            elapsed_s,
            target: intern(f[2]),
            kind,
            metric: intern(f[4]),
            value,
        });
    }
    if !saw_header {
        return Err(bad(0, "no header".into()));
    }
    Ok(SampleSet { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let set = SampleSet {
            rows: vec![
                Sample {
                    unix_ms: 1_700_000_000_000,
                    elapsed_s: 0.0,
                    target: "broker".into(),
                    kind: TargetKind::Cgroup,
                    metric: "cpu_cores".into(),
                    value: None,
                },
                Sample {
                    unix_ms: 1_700_000_001_000,
                    elapsed_s: 1.001,
                    target: "broker".into(),
                    kind: TargetKind::Cgroup,
                    metric: "cpu_cores".into(),
                    value: Some(1.234_567_89),
                },
                Sample {
                    unix_ms: 1_700_000_001_000,
                    elapsed_s: 1.001,
                    target: "host".into(),
                    kind: TargetKind::Host,
                    metric: "memory_used_bytes".into(),
                    value: Some(123_456_789_012.0),
                },
            ],
        };
        let mut buf = Vec::new();
        set.write_csv(&mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text
            .starts_with("# crossbench samples v1\nunix_ms,elapsed_s,target,kind,metric,value\n"));
        assert!(text.contains("1700000000000,0.000,broker,cgroup,cpu_cores,\n"));
        assert!(text.contains(",host,host,memory_used_bytes,123456789012\n"));
        let back = parse_samples(&buf[..], "mem").unwrap();
        assert_eq!(back.rows.len(), 3);
        assert_eq!(back.rows[1].value, Some(1.234568));
        assert_eq!(back.rows[2].value, Some(123_456_789_012.0));
        assert_eq!(back.targets(), vec!["broker", "host"]);
        assert!(parse_samples(&b"unix_ms\n"[..], "x").is_err());
        assert!(parse_samples(
            &b"# crossbench samples v1\nunix_ms,elapsed_s,target,kind,metric,value\n1,2,3\n"[..],
            "x"
        )
        .is_err());
    }
}
