//! Per-partition state of the stream workload, flat and small: 4 bytes per
//! partition for the highest acknowledged seq, 4 per partition and group for the
//! highest seq consumed, one bit per partition for "created". No maps, no strings:
//! a million-partition space costs a few megabytes.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Highest seq per partition (0 = none; seqs start at 1).
#[derive(Debug)]
pub struct SeqMax {
    max: Vec<AtomicU32>,
}

impl SeqMax {
    pub fn new(partitions: u64) -> SeqMax {
        SeqMax {
            max: (0..partitions).map(|_| AtomicU32::new(0)).collect(),
        }
    }
    pub fn raise(&self, p: u64, seq: u32) {
        if let Some(m) = self.max.get(p as usize) {
            m.fetch_max(seq, Ordering::Relaxed);
        }
    }
    pub fn get(&self, p: u64) -> u32 {
        self.max
            .get(p as usize)
            .map_or(0, |m| m.load(Ordering::Relaxed))
    }
    pub fn len(&self) -> u64 {
        self.max.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.max.is_empty()
    }
}

/// One bit per partition: has a push to it been acknowledged?
#[derive(Debug)]
pub struct Created {
    partitions: u64,
    bits: Vec<AtomicU64>,
    count: AtomicU64,
}

impl Created {
    pub fn new(partitions: u64) -> Created {
        Created {
            partitions,
            bits: (0..partitions.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            count: AtomicU64::new(0),
        }
    }
    /// Mark `p` created; true the first time.
    pub fn mark(&self, p: u64) -> bool {
        if p >= self.partitions {
            return false;
        }
        let Some(word) = self.bits.get((p / 64) as usize) else {
            return false;
        };
        let bit = 1u64 << (p % 64);
        if word.load(Ordering::Relaxed) & bit != 0 {
            return false;
        }
        let first = word.fetch_or(bit, Ordering::Relaxed) & bit == 0;
        if first {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        first
    }
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// What the run knows per partition.
#[derive(Debug)]
pub struct Ledger {
    /// Highest seq whose push the system acknowledged.
    pub acked: SeqMax,
    /// Partitions with at least one acknowledged push.
    pub created: Created,
    /// Highest seq each group consumed (the drain's exact catch-up test).
    pub seen: Vec<SeqMax>,
}

impl Ledger {
    pub fn new(partitions: u64, groups: usize) -> Ledger {
        Ledger {
            acked: SeqMax::new(partitions),
            created: Created::new(partitions),
            seen: (0..groups).map(|_| SeqMax::new(partitions)).collect(),
        }
    }

    /// Every group has consumed up to every partition's acknowledged max.
    pub fn caught_up(&self) -> bool {
        let n = self.acked.len();
        self.seen
            .iter()
            .all(|s| (0..n).all(|p| s.get(p) >= self.acked.get(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_counts_each_partition_once() {
        let c = Created::new(130);
        assert!(c.mark(0));
        assert!(!c.mark(0));
        assert!(c.mark(129));
        assert!(!c.mark(130), "outside the space");
        assert_eq!(c.count(), 2);
    }

    #[test]
    fn caught_up_needs_every_group() {
        let l = Ledger::new(3, 2);
        l.acked.raise(1, 5);
        l.seen[0].raise(1, 5);
        assert!(!l.caught_up());
        l.seen[1].raise(1, 7);
        assert!(l.caught_up());
    }
}
