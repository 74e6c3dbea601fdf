//! The cell's frontier across loaders: what was acknowledged to the producers and
//! what each stream processed, per key, merged over every loader. The drain of a
//! `shared` cell ends on it: a loader's consumers process whichever keys the system
//! hands them, so no loader alone can tell that every stream has caught up.
//!
//! A loader sends its tables as deltas (only the entries that changed since its last
//! report was taken); the rendezvous keeps the maximum of every entry over all
//! loaders, as the single-loader drain keeps the maximum over its stages.

use serde::{Deserialize, Serialize};

/// One loader's contribution: per flow, the highest acknowledged seq of each key; per
/// stream, the highest processed seq of each key (−1: none). `entries` are `[key,
/// seq]` pairs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FrontierDelta {
    /// Keys of the cell (the tables' length).
    pub keys: u64,
    /// The flow each stream reads, by index into `produced`.
    pub stream_flow: Vec<usize>,
    /// Per flow.
    pub produced: Vec<Vec<(u64, i64)>>,
    /// Per stream.
    pub seen: Vec<Vec<(u64, i64)>>,
}

/// The merged tables (the rendezvous holds one).
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    keys: u64,
    stream_flow: Vec<usize>,
    produced: Vec<Vec<i64>>,
    seen: Vec<Vec<i64>>,
}

/// A conflicting shape from two loaders (different key counts or streams).
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("frontier shape differs between loaders: {0}")]
pub struct ShapeError(pub String);

impl Frontier {
    /// Fold one loader's delta in (entry-wise maximum).
    pub fn merge(&mut self, d: &FrontierDelta) -> Result<(), ShapeError> {
        if self.stream_flow.is_empty() && self.produced.is_empty() {
            if d.stream_flow.iter().any(|&f| f >= d.produced.len()) {
                return Err(ShapeError("a stream reads a flow that is not there".into()));
            }
            self.keys = d.keys;
            self.stream_flow = d.stream_flow.clone();
            self.produced = vec![vec![-1; d.keys as usize]; d.produced.len()];
            self.seen = vec![vec![-1; d.keys as usize]; d.stream_flow.len()];
        }
        if d.keys != self.keys
            || d.stream_flow != self.stream_flow
            || d.produced.len() != self.produced.len()
            || d.seen.len() != self.seen.len()
        {
            return Err(ShapeError(format!(
                "{} keys, {} flows, {} streams against {} keys, {} flows, {} streams",
                d.keys,
                d.produced.len(),
                d.seen.len(),
                self.keys,
                self.produced.len(),
                self.seen.len()
            )));
        }
        let fold = |table: &mut Vec<i64>, entries: &[(u64, i64)]| -> Result<(), ShapeError> {
            for &(k, v) in entries {
                let slot = table
                    .get_mut(k as usize)
                    .ok_or_else(|| ShapeError(format!("key {k} beyond {} keys", d.keys)))?;
                *slot = (*slot).max(v);
            }
            Ok(())
        };
        for (t, e) in self.produced.iter_mut().zip(&d.produced) {
            fold(t, e)?;
        }
        for (t, e) in self.seen.iter_mut().zip(&d.seen) {
            fold(t, e)?;
        }
        Ok(())
    }

    /// Every stream has processed the highest acknowledged seq of every key of its
    /// flow (false before any report).
    pub fn caught_up(&self) -> bool {
        if self.stream_flow.is_empty() {
            return false;
        }
        self.seen
            .iter()
            .zip(&self.stream_flow)
            .all(|(seen, &f)| seen.iter().zip(&self.produced[f]).all(|(&s, &p)| s >= p))
    }

    /// Keys of some stream still behind their flow's acknowledged seq (for the
    /// console while a drain waits).
    pub fn behind(&self) -> u64 {
        self.seen
            .iter()
            .zip(&self.stream_flow)
            .map(|(seen, &f)| {
                seen.iter()
                    .zip(&self.produced[f])
                    .filter(|(&s, &p)| s < p)
                    .count() as u64
            })
            .sum()
    }
}

/// Builds a loader's deltas from its live tables: remembers what it last sent.
#[derive(Debug, Default)]
pub struct DeltaTracker {
    produced: Vec<Vec<i64>>,
    seen: Vec<Vec<i64>>,
}

impl DeltaTracker {
    /// The entries of `produced` (per flow) and `seen` (per stream) that differ from
    /// the last call's, each read with `get(table, key)`.
    pub fn delta(
        &mut self,
        keys: u64,
        stream_flow: &[usize],
        flows: usize,
        get_produced: impl Fn(usize, u64) -> i64,
        get_seen: impl Fn(usize, u64) -> i64,
    ) -> FrontierDelta {
        if self.produced.len() != flows || self.seen.len() != stream_flow.len() {
            self.produced = vec![vec![-1; keys as usize]; flows];
            self.seen = vec![vec![-1; keys as usize]; stream_flow.len()];
        }
        let diff = |last: &mut Vec<i64>, get: &dyn Fn(u64) -> i64| {
            let mut out = Vec::new();
            for k in 0..keys {
                let v = get(k);
                if v != last[k as usize] {
                    last[k as usize] = v;
                    out.push((k, v));
                }
            }
            out
        };
        let produced = (0..flows)
            .map(|f| diff(&mut self.produced[f], &|k| get_produced(f, k)))
            .collect();
        let seen = (0..stream_flow.len())
            .map(|s| diff(&mut self.seen[s], &|k| get_seen(s, k)))
            .collect();
        FrontierDelta {
            keys,
            stream_flow: stream_flow.to_vec(),
            produced,
            seen,
        }
    }

    /// Forget what was sent (the report did not arrive: send everything again).
    pub fn forget(&mut self) {
        self.produced.clear();
        self.seen.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(produced: Vec<Vec<(u64, i64)>>, seen: Vec<Vec<(u64, i64)>>) -> FrontierDelta {
        FrontierDelta {
            keys: 4,
            stream_flow: vec![0, 0, 1],
            produced,
            seen,
        }
    }

    #[test]
    fn caught_up_needs_every_stream_at_every_key_of_its_flow() {
        let mut f = Frontier::default();
        assert!(!f.caught_up(), "nothing reported yet");
        // Loader 0 owns keys 0 and 2, loader 1 keys 1 and 3; the keys' deliveries
        // land on either loader.
        f.merge(&delta(
            vec![vec![(0, 5), (2, 3)], vec![(0, 1)]],
            vec![vec![(0, 5), (1, 2)], vec![(0, 5), (2, 3)], vec![(0, 1)]],
        ))
        .unwrap();
        f.merge(&delta(
            vec![vec![(1, 2), (3, 0)], vec![]],
            vec![vec![(2, 3), (3, 0)], vec![(1, 2)], vec![]],
        ))
        .unwrap();
        // Stream 1 has not seen key 3 (seq 0).
        assert!(!f.caught_up());
        assert_eq!(f.behind(), 1);
        f.merge(&delta(
            vec![vec![], vec![]],
            vec![vec![], vec![(3, 0)], vec![]],
        ))
        .unwrap();
        assert!(f.caught_up());
        // A later acknowledgement moves the frontier again.
        f.merge(&delta(
            vec![vec![(3, 1)], vec![]],
            vec![vec![], vec![], vec![]],
        ))
        .unwrap();
        assert!(!f.caught_up());
        assert_eq!(f.behind(), 2);
    }

    #[test]
    fn shapes_must_agree() {
        let mut f = Frontier::default();
        f.merge(&delta(vec![vec![], vec![]], vec![vec![], vec![], vec![]]))
            .unwrap();
        let mut other = delta(vec![vec![], vec![]], vec![vec![], vec![], vec![]]);
        other.keys = 5;
        assert!(f.merge(&other).is_err());
        let beyond = delta(vec![vec![(9, 1)], vec![]], vec![vec![], vec![], vec![]]);
        assert!(f.merge(&beyond).is_err());
    }

    #[test]
    fn deltas_carry_only_what_changed() {
        let mut t = DeltaTracker::default();
        let table = std::cell::RefCell::new(vec![-1i64, 3, -1]);
        let d = t.delta(3, &[0], 1, |_, k| table.borrow()[k as usize], |_, _| -1);
        assert_eq!(d.produced, vec![vec![(1, 3)]]);
        assert_eq!(d.seen, vec![Vec::<(u64, i64)>::new()]);
        let d = t.delta(3, &[0], 1, |_, k| table.borrow()[k as usize], |_, _| -1);
        assert!(d.produced[0].is_empty());
        table.borrow_mut()[2] = 7;
        let d = t.delta(3, &[0], 1, |_, k| table.borrow()[k as usize], |_, _| -1);
        assert_eq!(d.produced, vec![vec![(2, 7)]]);
        t.forget();
        let d = t.delta(3, &[0], 1, |_, k| table.borrow()[k as usize], |_, _| -1);
        assert_eq!(d.produced, vec![vec![(1, 3), (2, 7)]]);
    }
}
