//! One stream's logs from several loaders, made one: a k-way merge by each line's
//! commit time (`<prop>,<seq>,<loader>,<t>`), stable within each loader's log, so
//! every loader's own order of a key's lines is kept exactly, and a key that moved
//! between loaders (a rebalance, a single active consumer that changed) has its
//! lines interleaved by the loaders' clocks: exact on one host, within the clocks'
//! offset across hosts. The lines are copied unchanged, loader and time included, so
//! the checker can count the hand-offs and tell a violation at a hand-off apart.
//!
//! A line the merge cannot read keeps its place in its loader's order and is copied
//! as it is: the checker reports it as malformed.

use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::cell::merge::MergeError;

/// What merging one stream saw.
#[derive(Debug, Default)]
pub struct StreamMerged {
    pub lines: u64,
    /// Lines per loader (by index in the inputs).
    pub per_loader: Vec<u64>,
    /// For each property, the loaders (bit `j`) whose logs delivered it (up to 64
    /// loaders).
    pub delivered_by: HashMap<u64, u64>,
}

struct Head {
    line: Vec<u8>,
    t: i64,
}

struct Input {
    reader: BufReader<File>,
    path: PathBuf,
    loader: u32,
    head: Option<Head>,
    last_t: i64,
    lineno: u64,
}

impl Input {
    /// Read the next line into `head` (None at the end).
    fn advance(&mut self, plain_ok: bool) -> Result<(), MergeError> {
        let mut buf = Vec::new();
        let n = self
            .reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| MergeError::io(&self.path, e))?;
        if n == 0 {
            self.head = None;
            return Ok(());
        }
        self.lineno += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        let t = match fields(&buf) {
            Some((_, _, Some((loader, t)))) => {
                if loader != self.loader {
                    return Err(MergeError::Bad {
                        path: self.path.clone(),
                        message: format!(
                            "line {}: a line of loader {loader} in loader {}'s log (were the directories given in the right order?)",
                            self.lineno, self.loader
                        ),
                    });
                }
                t
            }
            Some((_, _, None)) if !plain_ok => {
                return Err(MergeError::Bad {
                    path: self.path.clone(),
                    message: format!(
                        "line {}: a line without its loader and time: this log was not written by a loader of several (--loader-count > 1)",
                        self.lineno
                    ),
                })
            }
            // A plain line (one loader) or an unreadable one: it keeps its place.
            _ => self.last_t,
        };
        self.last_t = t;
        self.head = Some(Head { line: buf, t });
        Ok(())
    }
}

/// A log line: property, seq, and the loader and commit time of a loader's line.
type Fields = (u64, i64, Option<(u32, i64)>);

/// `<prop>,<seq>[,<loader>,<t>]`, or `None`.
fn fields(line: &[u8]) -> Option<Fields> {
    let text = std::str::from_utf8(line).ok()?;
    let mut it = text.split(',');
    let p = it.next()?.parse::<u64>().ok()?;
    let s = it.next()?.parse::<i64>().ok()?;
    match (it.next(), it.next(), it.next()) {
        (None, _, _) => Some((p, s, None)),
        (Some(l), Some(t), None) => Some((p, s, Some((l.parse().ok()?, t.parse().ok()?)))),
        _ => None,
    }
}

/// Merge `inputs` (loader index, log path; absent files are skipped) into `out`.
pub fn merge_stream(inputs: &[(u32, PathBuf)], out: &Path) -> Result<StreamMerged, MergeError> {
    let plain_ok = inputs.len() <= 1;
    let mut ins: Vec<Input> = Vec::new();
    for (loader, path) in inputs {
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(MergeError::io(path, e)),
        };
        let mut i = Input {
            reader: BufReader::with_capacity(1 << 20, f),
            path: path.clone(),
            loader: *loader,
            head: None,
            last_t: i64::MIN,
            lineno: 0,
        };
        i.advance(plain_ok)?;
        ins.push(i);
    }
    let file = File::create(out).map_err(|e| MergeError::io(out, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut stats = StreamMerged {
        per_loader: vec![0; inputs.len()],
        ..Default::default()
    };
    // Min-heap on (t, input): the earliest head first, ties to the lower loader.
    let mut heap: BinaryHeap<std::cmp::Reverse<(i64, usize)>> = ins
        .iter()
        .enumerate()
        .filter_map(|(k, i)| i.head.as_ref().map(|h| std::cmp::Reverse((h.t, k))))
        .collect();
    while let Some(std::cmp::Reverse((_, k))) = heap.pop() {
        let head = ins[k].head.take().expect("a head in the heap");
        w.write_all(&head.line)
            .and_then(|_| w.write_all(b"\n"))
            .map_err(|e| MergeError::io(out, e))?;
        stats.lines += 1;
        let slot = inputs
            .iter()
            .position(|(l, _)| *l == ins[k].loader)
            .unwrap_or(0);
        stats.per_loader[slot] += 1;
        if let Some((p, _, _)) = fields(&head.line) {
            if ins[k].loader < 64 {
                *stats.delivered_by.entry(p).or_default() |= 1u64 << ins[k].loader;
            }
        }
        ins[k].advance(plain_ok)?;
        if let Some(h) = &ins[k].head {
            heap.push(std::cmp::Reverse((h.t, k)));
        }
    }
    w.flush().map_err(|e| MergeError::io(out, e))?;
    Ok(stats)
}

/// The loaders of a bit set, in order.
pub fn loaders_of(bits: u64) -> Vec<u32> {
    (0..64).filter(|j| bits & (1u64 << j) != 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_interleave_by_time_and_keep_each_loaders_order() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.log");
        let b = d.path().join("b.log");
        // Loader 0's lines are not in time order across keys (two handlers appended
        // them); its order is kept all the same.
        std::fs::write(&a, "0,0,0,10\n2,0,0,30\n0,1,0,20\nbad line\n0,2,0,50\n").unwrap();
        std::fs::write(&b, "1,0,1,15\n1,1,1,40\n").unwrap();
        let out = d.path().join("m.log");
        let s = merge_stream(&[(0, a), (1, b)], &out).unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "0,0,0,10\n1,0,1,15\n2,0,0,30\n0,1,0,20\nbad line\n1,1,1,40\n0,2,0,50\n"
        );
        assert_eq!((s.lines, s.per_loader.clone()), (7, vec![5, 2]));
        assert_eq!(loaders_of(s.delivered_by[&1]), vec![1]);
        assert_eq!(loaders_of(s.delivered_by[&0]), vec![0]);
    }

    #[test]
    fn a_foreign_or_plain_line_is_an_error_among_several() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.log");
        let b = d.path().join("b.log");
        std::fs::write(&a, "0,0,1,10\n").unwrap();
        std::fs::write(&b, "1,0,1,15\n").unwrap();
        let e = merge_stream(&[(0, a.clone()), (1, b.clone())], &d.path().join("m")).unwrap_err();
        assert!(
            e.to_string()
                .contains("a line of loader 1 in loader 0's log"),
            "{e}"
        );
        std::fs::write(&a, "0,0\n").unwrap();
        let e = merge_stream(&[(0, a.clone()), (1, b)], &d.path().join("m")).unwrap_err();
        assert!(e.to_string().contains("without its loader"), "{e}");
        // One loader: plain lines are its lines, copied.
        let s = merge_stream(&[(0, a)], &d.path().join("one")).unwrap();
        assert_eq!(s.lines, 1);
    }
}
