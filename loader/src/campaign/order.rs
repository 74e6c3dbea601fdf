//! The order a campaign's cells run in: repeats in blocks, every block running each
//! arm once, and the arms' order within a block alternating (ABBA): block 2k in a
//! seeded shuffle, block 2k+1 in its reverse. Drift of a noisy machine over time
//! then lands on every arm alike instead of on whichever arm runs last.

use report::stats::Rng;

/// One cell to run: arm `arm` (an index into the arms), repeat `repeat` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub arm: usize,
    pub repeat: u32,
}

/// The interleaved order of `arms` arms × `repeats` repeats, from `seed`.
pub fn interleave(arms: usize, repeats: u32, seed: u64) -> Vec<Slot> {
    interleave_each(&vec![repeats; arms], seed)
}

/// The interleaved order when arm `i` runs `repeats[i]` times: block `r` runs every
/// arm that has an `r`-th repeat, in the block's order of all the arms (so arms with
/// more repeats go on, interleaved among themselves, after the others are done).
pub fn interleave_each(repeats: &[u32], seed: u64) -> Vec<Slot> {
    let mut rng = Rng::new(seed);
    let blocks = repeats.iter().copied().max().unwrap_or(0);
    let mut out = Vec::with_capacity(repeats.iter().map(|&r| r as usize).sum());
    let mut perm: Vec<usize> = (0..repeats.len()).collect();
    for r in 0..blocks {
        if r % 2 == 0 {
            rng.shuffle(&mut perm);
        } else {
            perm.reverse();
        }
        out.extend(
            perm.iter()
                .filter(|&&arm| repeats[arm] > r)
                .map(|&arm| Slot { arm, repeat: r + 1 }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_once_in_abba_blocks() {
        let o = interleave(4, 3, 7);
        assert_eq!(o.len(), 12);
        for r in 1..=3 {
            let mut arms: Vec<usize> = o.iter().filter(|s| s.repeat == r).map(|s| s.arm).collect();
            arms.sort_unstable();
            assert_eq!(arms, vec![0, 1, 2, 3], "repeat {r}");
        }
        // Block 2 runs block 1's order backwards.
        let b1: Vec<usize> = o[0..4].iter().map(|s| s.arm).collect();
        let b2: Vec<usize> = o[4..8].iter().map(|s| s.arm).rev().collect();
        assert_eq!(b1, b2);
        // Two arms: ABBA.
        let two = interleave(2, 2, 1);
        assert_eq!(two[0].arm, two[3].arm);
        assert_eq!(two[1].arm, two[2].arm);
        assert_ne!(two[0].arm, two[1].arm);
        // Seeded: the same seed gives the same order, another seed may not.
        assert_eq!(interleave(5, 4, 9), interleave(5, 4, 9));
    }

    #[test]
    fn arms_with_more_repeats_go_on_alone() {
        let o = interleave_each(&[2, 4, 2], 3);
        assert_eq!(o.len(), 8);
        for (arm, n) in [(0, 2), (1, 4), (2, 2)] {
            let mine: Vec<u32> = o
                .iter()
                .filter(|s| s.arm == arm)
                .map(|s| s.repeat)
                .collect();
            assert_eq!(mine, (1..=n).collect::<Vec<_>>(), "arm {arm}");
        }
        // The first blocks are the same as if every arm had two repeats.
        assert_eq!(o[..6], interleave(3, 2, 3)[..]);
        assert!(o[6..].iter().all(|s| s.arm == 1));
    }
}
