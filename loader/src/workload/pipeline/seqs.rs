//! Highest seq per property, one table per flow: what the system acknowledged to the
//! producers (the ground truth of `produced.meta`), and what each stage processed
//! (the drain's exact "caught up" test; counts alone are fooled by duplicates).

use std::sync::atomic::{AtomicI64, Ordering};

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
