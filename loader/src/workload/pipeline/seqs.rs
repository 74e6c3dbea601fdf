//! Highest seq per property, one table per flow: what the system acknowledged to the
//! producers (the ground truth of `produced.meta`), and what each stage processed
//! (the drain's exact "caught up" test; counts alone are fooled by duplicates).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::fleet::member::FrontierSource;

/// Highest seq per property (−1 = none).
#[derive(Debug)]
pub struct SeqTable {
    max: Vec<AtomicI64>,
}

impl SeqTable {
    pub fn new(props: u64) -> Self {
        SeqTable {
            max: (0..props).map(|_| AtomicI64::new(-1)).collect(),
        }
    }
    pub fn ack(&self, prop: u64, seq: i64) {
        if let Some(m) = self.max.get(prop as usize) {
            m.fetch_max(seq, Ordering::Relaxed);
        }
    }
    pub fn get(&self, prop: u64) -> i64 {
        self.max
            .get(prop as usize)
            .map_or(-1, |m| m.load(Ordering::Relaxed))
    }
    pub fn len(&self) -> usize {
        self.max.len()
    }
    pub fn is_empty(&self) -> bool {
        self.max.is_empty()
    }
}

/// The pipeline's frontier for the rendezvous of a shared cell of several loaders:
/// what was acknowledged per flow, what each stream processed, per key.
#[derive(Debug)]
pub struct PipelineFrontier {
    pub keys: u64,
    /// Per flow (A, B).
    pub produced: [Arc<SeqTable>; 2],
    /// Per stream: its flow's index and its stage's highest processed seqs.
    pub seen: Vec<(usize, Arc<SeqTable>)>,
}

impl FrontierSource for PipelineFrontier {
    fn keys(&self) -> u64 {
        self.keys
    }
    fn stream_flow(&self) -> Vec<usize> {
        self.seen.iter().map(|(f, _)| *f).collect()
    }
    fn flows(&self) -> usize {
        self.produced.len()
    }
    fn produced(&self, flow: usize, key: u64) -> i64 {
        self.produced[flow].get(key)
    }
    fn seen(&self, stream: usize, key: u64) -> i64 {
        self.seen[stream].1.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_highest_and_ignores_unknown_properties() {
        let t = SeqTable::new(2);
        assert_eq!(t.get(0), -1);
        t.ack(0, 5);
        t.ack(0, 3);
        t.ack(9, 1);
        assert_eq!((t.get(0), t.get(1), t.get(9)), (5, -1, -1));
    }
}
