//! Reading HdrHistogram interval logs (`.hlog`), and adding several loaders' logs of
//! one kind into one: each interval placed at its absolute start time, the intervals
//! of every loader that start in the same second of the merged log added together
//! (histograms add; percentiles never average). Every histogram of every loader must
//! have the same parameters (lowest and highest trackable value, significant
//! figures), or the sum would not mean what it says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use crate::measure::histograms::HlogWriter;

/// An interval log that cannot be read or added.
#[derive(Debug, thiserror::Error)]
pub enum HlogError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
    #[error(transparent)]
    Read(#[from] report::ReportError),
}

impl HlogError {
    pub fn io(path: &Path, source: std::io::Error) -> HlogError {
        HlogError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One interval of a log (read by the report's reader, which the HTML report uses too).
pub use report::latency_log::Interval;

/// The histogram parameters that must agree for two histograms to add.
pub fn params(h: &Histogram<u64>) -> (u64, u64, u8) {
    (h.low(), h.high(), h.sigfig())
}

/// Every interval of `path`, with absolute start times.
pub fn read_intervals(path: &Path) -> Result<Vec<Interval>, HlogError> {
    Ok(report::latency_log::intervals(path)?)
}

/// Add the loaders' logs of one kind (`logs[j]` is loader `j`'s) into `out`: the
/// intervals of each tag (as `tag(j, tag)` names it) that start in the same second
/// (counted from the earliest interval of all) become one. Errors when two
/// histograms' parameters differ.
pub fn merge_logs(
    logs: &[PathBuf],
    out: &Path,
    comment: &str,
    tag: &dyn Fn(usize, &str) -> String,
) -> Result<u64, HlogError> {
    let mut all: Vec<(usize, Interval)> = Vec::new();
    for (j, p) in logs.iter().enumerate() {
        for mut i in read_intervals(p)? {
            i.tag = tag(j, &i.tag);
            all.push((j, i));
        }
    }
    let first = all
        .iter()
        .map(|(_, i)| i.start)
        .min()
        .unwrap_or(SystemTime::now());
    let mut reference: Option<(u64, u64, u8)> = None;
    // (second, tag) → sum.
    let mut slots: BTreeMap<(u64, String), Histogram<u64>> = BTreeMap::new();
    for (j, i) in all {
        let p = params(&i.hist);
        match reference {
            None => reference = Some(p),
            Some(r) if r != p => {
                return Err(HlogError::Bad {
                    path: logs[j].clone(),
                    message: format!(
                        "histogram parameters (lowest, highest, significant figures) {p:?} differ from another loader's {r:?}: histograms of different shapes cannot be added"
                    ),
                })
            }
            Some(_) => {}
        }
        let second = i.start.duration_since(first).unwrap_or_default().as_secs();
        match slots.get_mut(&(second, i.tag.clone())) {
            Some(h) => h.add(&i.hist).map_err(|e| HlogError::Bad {
                path: logs[j].clone(),
                message: format!("adding an interval: {e:?}"),
            })?,
            None => {
                slots.insert((second, i.tag), i.hist);
            }
        }
    }
    let mut w = HlogWriter::create(out, first, comment).map_err(|e| HlogError::io(out, e))?;
    for ((second, tag), h) in &slots {
        w.write(
            tag,
            first + Duration::from_secs(*second),
            Duration::from_secs(1),
            h,
        )
        .map_err(|e| HlogError::io(out, e))?;
    }
    w.flush().map_err(|e| HlogError::io(out, e))?;
    Ok(slots.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::histograms::new_hist;
    use std::time::UNIX_EPOCH;

    fn log(path: &Path, start: SystemTime, entries: &[(&str, u64, &[u64])]) {
        let mut w = HlogWriter::create(path, start, "t").unwrap();
        for (tag, sec, values) in entries {
            let mut h = new_hist();
            for v in *values {
                h.record(*v).unwrap();
            }
            w.write(
                tag,
                start + Duration::from_secs(*sec),
                Duration::from_secs(1),
                &h,
            )
            .unwrap();
        }
        w.flush().unwrap();
    }

    #[test]
    fn intervals_of_one_second_add_across_loaders() {
        let d = tempfile::tempdir().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (a, b, m) = (d.path().join("a"), d.path().join("b"), d.path().join("m"));
        log(&a, t0, &[("A", 0, &[1000, 2000]), ("A", 1, &[3000])]);
        // Loader 1's ticks run 300 ms behind loader 0's.
        log(
            &b,
            t0 + Duration::from_millis(300),
            &[("A", 0, &[5000]), ("B", 1, &[7000])],
        );
        assert_eq!(
            merge_logs(&[a, b], &m, "merged", &|_, t| t.to_string()).unwrap(),
            3
        );
        let got = read_intervals(&m).unwrap();
        let by: Vec<(String, u64, u64)> = got
            .iter()
            .map(|i| {
                (
                    i.tag.clone(),
                    i.start.duration_since(t0).unwrap().as_secs(),
                    i.hist.len(),
                )
            })
            .collect();
        assert_eq!(
            by,
            vec![("A".into(), 0, 3), ("A".into(), 1, 1), ("B".into(), 1, 1)]
        );
    }

    #[test]
    fn different_parameters_refuse_to_add() {
        let d = tempfile::tempdir().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        log(&a, t0, &[("A", 0, &[1000])]);
        let mut w = HlogWriter::create(&b, t0, "t").unwrap();
        let mut h = Histogram::<u64>::new_with_bounds(1, 1000, 2).unwrap();
        h.record(5).unwrap();
        w.write("A", t0, Duration::from_secs(1), &h).unwrap();
        w.flush().unwrap();
        let e = merge_logs(&[a, b], &d.path().join("m"), "m", &|_, t| t.to_string()).unwrap_err();
        assert!(e.to_string().contains("histogram parameters"), "{e}");
    }
}
