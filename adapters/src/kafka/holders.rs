//! Which member of one consumer group holds each partition, as the members' own
//! rebalance callbacks say. Every member of a stream runs in this loader, so the
//! adapter sees the whole group: a partition assigned to one member while another
//! still holds it (has not finished revoking it: its set in progress and its commit)
//! is held twice at once. The next holder then starts from an offset the first has
//! not yet committed, and records the first already handled are handled again: a
//! duplicate the checker will count. Kafka's group protocol forbids this (a JoinGroup
//! is answered only once every member has rejoined, after its revocation); a
//! coordinator that answers each JoinGroup at once (tansu 0.6's) allows it. The
//! overlaps are counted (`kafka_assignment_overlaps`) so a FAIL with duplicates can
//! be put down to the broker's coordinator and not to the adapter.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Partition → the member holding it, for one group.
#[derive(Debug, Default)]
pub(super) struct Holders {
    held: Mutex<HashMap<i32, usize>>,
}

impl Holders {
    /// `member` is assigned `partition`: false when another member still holds it
    /// (the partition is then `member`'s, as the coordinator says).
    pub fn assign(&self, partition: i32, member: usize) -> bool {
        match self.held.lock().insert(partition, member) {
            Some(other) => other == member,
            None => true,
        }
    }

    /// `member` has revoked `partition` (its set finished, its offset committed).
    pub fn release(&self, partition: i32, member: usize) {
        let mut held = self.held.lock();
        if held.get(&partition) == Some(&member) {
            held.remove(&partition);
        }
    }

    /// `member`'s consumer instance has ended: it holds nothing.
    pub fn release_all(&self, member: usize) {
        self.held.lock().retain(|_, m| *m != member);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_assigned_before_its_holder_released_it_is_an_overlap() {
        let h = Holders::default();
        assert!(h.assign(3, 0), "first holder");
        assert!(h.assign(3, 0), "the same member again is no overlap");
        assert!(!h.assign(3, 1), "member 1 while member 0 still holds it");
        // Member 0's late revocation does not take it from member 1.
        h.release(3, 0);
        assert!(h.assign(3, 1));
        assert!(!h.assign(3, 0), "member 1 still holds it");
    }

    #[test]
    fn a_released_partition_passes_on_without_an_overlap() {
        let h = Holders::default();
        assert!(h.assign(1, 0) && h.assign(2, 0) && h.assign(5, 1));
        h.release(1, 0);
        assert!(h.assign(1, 1), "released by a revocation");
        h.release_all(0);
        assert!(h.assign(2, 2), "released when member 0's instance ended");
        assert!(!h.assign(5, 2), "member 1 still holds 5");
    }
}
