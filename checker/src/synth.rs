//! Clean synthetic cells for measuring the checker: the reference's 12 stream logs, every
//! property's seqs delivered once and in order, and a `produced.meta` that says so.
//!
//! Used by the checker's own bench (`benches/verify.rs`) and by `crossbench selftest
//! verify`, which times the CLI on the same data. Not a test fixture: a cell written here
//! always passes, and the callers assert that it did.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::reference_streams;

/// Which `produced.meta` header the cell carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthMeta {
    /// `# crossbench produced.meta v1`, drain caught-up, one `# stream` line per log.
    CrossbenchV1,
    /// The reference Go harness's header (`# ackErr=0 base=1 system=…`): no stream lines,
    /// so the checker reads the reference's 12 logs by name.
    Reference,
}

/// Write a clean cell of `total_lines` lines over the reference's 12 logs into `dir`
/// (created if absent): line `i` of a log is property `i % props`, seq `1 + i / props`.
/// Logs are written by two threads. Returns the lines written (`total_lines` rounded down
/// to a multiple of 12).
pub fn write_clean_cell(
    dir: &Path,
    total_lines: u64,
    props: u64,
    meta: SynthMeta,
) -> std::io::Result<u64> {
    let props = props.max(1);
    std::fs::create_dir_all(dir)?;
    let streams = reference_streams("");
    let per = total_lines / streams.len() as u64;
    let base = 1u64;
    let mut text = String::new();
    match meta {
        SynthMeta::CrossbenchV1 => {
            text.push_str("# crossbench produced.meta v1\n");
            text.push_str(&format!(
                "# ackErr=0 base={base} system=synth properties={props} rate=0 drain=caught-up delivery=exactly-once\n"
            ));
            for s in &streams {
                text.push_str(&format!(
                    "# stream name={} flow={} ackErr=0\n",
                    s.name, s.flow
                ));
            }
        }
        SynthMeta::Reference => {
            text.push_str(&format!(
                "# ackErr=0 base={base} system=synth properties={props}\n"
            ));
        }
    }
    for flow in ["A", "B"] {
        for p in 0..props.min(per) {
            let count = per / props + u64::from(p < per % props);
            text.push_str(&format!("{flow} {p} {}\n", base + count - 1));
        }
    }
    std::fs::write(dir.join("produced.meta"), text)?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                sc.spawn(|| -> std::io::Result<()> {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(s) = streams.get(i) else {
                            return Ok(());
                        };
                        write_log(&dir.join(format!("{}.log", s.name)), per, props, base)?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("log writer panicked"))
    })?;
    Ok(per * streams.len() as u64)
}

/// One stream log: line `i` is property `i % props`, seq `base + i / props`.
fn write_log(path: &Path, n: u64, props: u64, base: u64) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut line = Vec::with_capacity(1 << 16);
    for i in 0..n {
        push_u64(&mut line, i % props);
        line.push(b',');
        push_u64(&mut line, base + i / props);
        line.push(b'\n');
        if line.len() > (1 << 16) - 64 {
            w.write_all(&line)?;
            line.clear();
        }
    }
    w.write_all(&line)?;
    w.flush()
}

fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_cell_passes_in_both_meta_formats() {
        for meta in [SynthMeta::CrossbenchV1, SynthMeta::Reference] {
            let dir = tempfile::tempdir().expect("tempdir");
            let total = write_clean_cell(dir.path(), 12_345, 7, meta).expect("write");
            assert_eq!(total, 12_345 / 12 * 12);
            let v =
                crate::verify_dir(dir.path(), &crate::VerifyOptions::default()).expect("verify");
            assert!(v.pass, "{meta:?}: {:?}", v.reasons);
            assert_eq!(v.totals.delivered, total, "{meta:?}");
            assert_eq!(v.totals.gaps, 0);
        }
    }
}
