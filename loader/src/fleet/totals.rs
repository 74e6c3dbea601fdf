//! `totals.hlog`: a loader's whole-run histograms, one interval per histogram of its
//! `result.json`, tagged with the dotted path of that histogram's summary
//! (`latency_ms.e2e_a`, `streams.3.entry_age_ms`). `crossbench merge` adds the
//! loaders' histograms of each tag (never their percentiles) and writes the summary
//! of the sum at that path of the merged `result.json`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use crate::fleet::hlog::{read_intervals, HlogError};
use crate::measure::histograms::HlogWriter;

/// Write `hists` to `path`, one interval each, tagged with its path.
pub fn write(path: &Path, hists: &[(String, Histogram<u64>)], loader: u64) -> std::io::Result<()> {
    let now = SystemTime::now();
    let mut w = HlogWriter::create(
        path,
        now,
        &format!("crossbench totals of loader {loader}: whole-run histograms, tagged by their path in result.json"),
    )?;
    for (tag, h) in hists {
        w.write(tag, now, Duration::from_secs(1), h)?;
    }
    w.flush()
}

/// The histograms of a `totals.hlog`, by tag.
pub fn read(path: &Path) -> Result<BTreeMap<String, Histogram<u64>>, HlogError> {
    let mut out: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for i in read_intervals(path)? {
        match out.get_mut(&i.tag) {
            Some(h) => h.add(&i.hist).map_err(|e| HlogError::Bad {
                path: path.to_path_buf(),
                message: format!("tag {} twice, and the two do not add: {e:?}", i.tag),
            })?,
            None => {
                out.insert(i.tag, i.hist);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::histograms::new_hist;

    #[test]
    fn tags_and_counts_survive_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("totals.hlog");
        let mut a = new_hist();
        for v in [1000u64, 2000, 3000] {
            a.record(v).unwrap();
        }
        let b = new_hist();
        write(
            &p,
            &[
                ("latency_ms.e2e_a".into(), a.clone()),
                ("streams.0.push_ms".into(), b),
            ],
            1,
        )
        .unwrap();
        let got = read(&p).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got["latency_ms.e2e_a"].len(), 3);
        assert_eq!(got["latency_ms.e2e_a"].max(), a.max());
        assert_eq!(got["streams.0.push_ms"].len(), 0);
    }
}
